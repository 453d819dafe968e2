//! The gateway on PostgreSQL (through a TCP proxy the test can cut or stall) keeps serving through
//! a database outage: keys it has seen keep working, unknown keys get 503 `database_unavailable`,
//! usage records wait in the local spool and all reach the database once it is back, even when
//! the gateway is killed meanwhile; stopped while its database is silent, it does not wait on it.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::disallowed_methods
)]

mod common;

use std::path::Path;
use std::time::Duration;

use imagegate_e2e::{Gateway, Sim, TcpProxy, TestDatabase, admin, admin_with_stdin, csrf_of, set_cookie};
use serde_json::json;
use sqlx::Connection;

/// A fresh PostgreSQL database, dropped at the end, and a proxy in front of its server.
struct OutageDb {
    database: TestDatabase,
    /// Straight to the server: for the admin CLI and for counting rows.
    direct_url: String,
    /// Through the proxy: for the gateway.
    proxied_url: String,
    proxy: TcpProxy,
}

impl OutageDb {
    async fn new() -> Self {
        let database = TestDatabase::create("imagegate_e2e_outage")
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        let name = database.name();
        let (scheme_user, rest) = database.admin_url().split_once('@').unwrap();
        let (host_port, _) = rest.split_once('/').unwrap();
        let target = tokio::net::lookup_host(host_port).await.unwrap().next().unwrap();
        let proxy = TcpProxy::start(target).await.unwrap();
        Self {
            direct_url: format!("{scheme_user}@{host_port}/{name}"),
            proxied_url: format!("{scheme_user}@{}/{name}", proxy.addr()),
            database,
            proxy,
        }
    }

    /// (rows, distinct request ids) in `usage_records`.
    async fn usage_rows(&self) -> (i64, i64) {
        let mut conn = sqlx::PgConnection::connect(&self.direct_url).await.unwrap();
        sqlx::query_as("SELECT COUNT(*), COUNT(DISTINCT request_id) FROM usage_records")
            .fetch_one(&mut conn)
            .await
            .unwrap()
    }

    /// Waits up to 30 s until `usage_records` holds `rows` rows.
    async fn wait_for_rows(&self, rows: i64) -> (i64, i64) {
        for _ in 0..300 {
            let counts = self.usage_rows().await;
            if counts.0 >= rows {
                return counts;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        panic!(
            "fewer than {rows} usage rows after 30 s: {:?}",
            self.usage_rows().await
        );
    }

    async fn drop_database(&self) {
        self.database.drop_database().await.unwrap();
    }
}

/// A user with two keys and a simulator account, made through the admin CLI on the direct URL.
fn provision(dir: &Path, db: &OutageDb, sim: &Sim) -> (String, String) {
    let url = db.direct_url.as_str();
    admin(dir, &["--database-url", url, "users", "add", "alice"]);
    let base = sim.base_url();
    admin_with_stdin(
        dir,
        &[
            "--database-url",
            url,
            "accounts",
            "add",
            "--name",
            "acct-a",
            "--kind",
            "openai",
            "--base-url",
            &base,
            "--tier",
            "pro",
        ],
        &common::credential("acct-a"),
    );
    let key = |name: &str| {
        admin(
            dir,
            &[
                "--database-url",
                url,
                "keys",
                "create",
                "--user",
                "alice",
                "--name",
                name,
            ],
        )
        .trim()
        .to_owned()
    };
    (key("used"), key("unused"))
}

async fn generate(client: &reqwest::Client, gateway: &Gateway, key: &str) -> reqwest::Response {
    client
        .post(gateway.v1("/images/generations"))
        .bearer_auth(key)
        .json(
            &json!({"model": "gpt-image-2", "prompt": "a lighthouse", "size": "1024x1024", "quality": "low"}),
        )
        .send()
        .await
        .unwrap()
}

/// Records in the gateway's spool files (each complete line is one record).
fn spooled_lines(data_dir: &Path) -> usize {
    let Ok(entries) = std::fs::read_dir(data_dir.join("usage-spool")) else {
        return 0;
    };
    entries
        .filter_map(Result::ok)
        .filter(|e| e.path().extension().is_some_and(|x| x == "jsonl"))
        .map(|e| {
            std::fs::read_to_string(e.path())
                .unwrap_or_default()
                .matches('\n')
                .count()
        })
        .sum()
}

/// Waits up to 30 s until the gateway's spool holds `records` records.
async fn wait_for_spooled(data_dir: &Path, records: usize) {
    for _ in 0..300 {
        if spooled_lines(data_dir) >= records {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(spooled_lines(data_dir), records, "the records are on disk");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_gateway_serves_through_a_database_outage_and_loses_no_usage() {
    let db = OutageDb::new().await;
    let dir = tempfile::tempdir().unwrap();
    let sim = Sim::spawn(&[]);
    let (used, unused) = provision(dir.path(), &db, &sim);
    let mut gateway = Gateway::spawn(dir.path(), &["--database-url", &db.proxied_url]);
    let client = reqwest::Client::new();

    for _ in 0..3 {
        assert_eq!(generate(&client, &gateway, &used).await.status(), 200);
    }
    assert_eq!(db.wait_for_rows(3).await, (3, 3));

    db.proxy.cut();
    for _ in 0..4 {
        let response = generate(&client, &gateway, &used).await;
        assert_eq!(
            response.status(),
            200,
            "a known key keeps working during the outage"
        );
    }
    let refused = generate(&client, &gateway, &unused).await;
    assert_eq!(refused.status(), 503);
    assert_eq!(refused.headers()["retry-after"], "5");
    let body: serde_json::Value = refused.json().await.unwrap();
    assert_eq!(body["error"]["code"], "database_unavailable");
    assert_eq!(body["error"]["type"], "server_error");
    assert_eq!(db.usage_rows().await, (3, 3), "the database is out of reach");
    wait_for_spooled(dir.path(), 4).await;
    let ready = client
        .get(format!("{}/readyz", gateway.url))
        .send()
        .await
        .unwrap();
    assert_eq!(
        ready.status(),
        200,
        "a database outage must not drain the replica"
    );
    let ready: serde_json::Value = ready.json().await.unwrap();
    assert_eq!(ready["status"], "degraded");
    assert_eq!(ready["database"], "unavailable");

    db.proxy.restore();
    assert_eq!(
        db.wait_for_rows(7).await,
        (7, 7),
        "every request of the outage is recorded once"
    );
    let metrics = client
        .get(format!("{}/metrics", gateway.url))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        metrics.contains("imagegate_usage_records_spooled_total 4"),
        "{metrics}"
    );
    assert!(
        metrics.contains("imagegate_usage_records_replayed_total 4"),
        "{metrics}"
    );
    // New keys work again once the failure hold (5 s) after the last failed lookup is over.
    let mut status = 0;
    for _ in 0..30 {
        status = generate(&client, &gateway, &unused).await.status().as_u16();
        if status == 200 {
            break;
        }
        assert_eq!(status, 503);
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    assert_eq!(
        status, 200,
        "the unused key works within 15 s of the database's return"
    );
    assert!(gateway.stop());
    assert_eq!(db.usage_rows().await, (8, 8));
    db.drop_database().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gateway_stopped_while_its_database_is_silent_does_not_wait_on_it() {
    let db = OutageDb::new().await;
    let dir = tempfile::tempdir().unwrap();
    let sim = Sim::spawn(&[]);
    let (used, _) = provision(dir.path(), &db, &sim);
    let mut gateway = Gateway::spawn(dir.path(), &["--database-url", &db.proxied_url]);
    let client = reqwest::Client::new();
    assert_eq!(generate(&client, &gateway, &used).await.status(), 200);
    assert_eq!(db.wait_for_rows(1).await, (1, 1));

    // The database stops answering (a network black hole, not a refusal). Within one account
    // refresh interval (5 s) the gateway is waiting on it, for up to the pool's 10 s acquire
    // timeout.
    db.proxy.stall();
    tokio::time::sleep(Duration::from_millis(5_500)).await;
    let stopping = std::time::Instant::now();
    assert!(gateway.stop(), "the gateway exits cleanly");
    // With nothing in flight and nothing to write, the stop does not wait out that refresh,
    // which would end 4.5 s after the stop at the soonest; this bound leaves room for a loaded
    // machine.
    let took = stopping.elapsed();
    assert!(
        took < Duration::from_millis(3_500),
        "exited {took:?} after SIGTERM"
    );
    db.proxy.restore();
    db.drop_database().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn usage_spooled_by_a_killed_gateway_is_written_by_the_next_one() {
    let db = OutageDb::new().await;
    let dir = tempfile::tempdir().unwrap();
    let sim = Sim::spawn(&[]);
    let (used, _) = provision(dir.path(), &db, &sim);
    let mut gateway = Gateway::spawn(dir.path(), &["--database-url", &db.proxied_url]);
    let client = reqwest::Client::new();
    assert_eq!(generate(&client, &gateway, &used).await.status(), 200);
    db.wait_for_rows(1).await;

    db.proxy.cut();
    for _ in 0..5 {
        assert_eq!(generate(&client, &gateway, &used).await.status(), 200);
    }
    wait_for_spooled(dir.path(), 5).await;
    gateway.kill();

    db.proxy.restore();
    let next = Gateway::spawn(dir.path(), &["--database-url", &db.proxied_url]);
    assert_eq!(
        db.wait_for_rows(6).await,
        (6, 6),
        "the dead gateway's records are written once"
    );
    drop(next);
    db.drop_database().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn console_sign_ins_the_database_could_not_check_are_not_counted() {
    // The console allows 5 failed sign-ins per user name in 5 minutes. Attempts made while the
    // database is out of reach answer 503 "try again": trying again as asked must not lock the
    // user out once it is back.
    let db = OutageDb::new().await;
    let dir = tempfile::tempdir().unwrap();
    let url = db.direct_url.as_str();
    admin_with_stdin(
        dir.path(),
        &["--database-url", url, "users", "add", "frank", "--password-stdin"],
        "frank-console-password\n",
    );
    let gateway = Gateway::spawn(dir.path(), &["--database-url", &db.proxied_url]);
    let http = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    let login = http.get(format!("{}/login", gateway.url)).send().await.unwrap();
    let cookie = format!("imagegate_login={}", set_cookie(&login, "imagegate_login"));
    let page = login.text().await.unwrap();
    let csrf = csrf_of(&page);
    let sign_in = || {
        http.post(format!("{}/login", gateway.url))
            .header("cookie", &cookie)
            .form(&[
                ("csrf", csrf.as_str()),
                ("username", "frank"),
                ("password", "frank-console-password"),
                ("next", "/keys"),
            ])
            .send()
    };

    db.proxy.cut();
    for attempt in 0..6 {
        let answer = sign_in().await.unwrap();
        assert_eq!(answer.status(), 503, "attempt {attempt}");
        assert_eq!(answer.headers()["retry-after"], "5");
    }
    db.proxy.restore();
    let mut status = 0;
    for _ in 0..50 {
        status = sign_in().await.unwrap().status().as_u16();
        if status != 503 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert_eq!(status, 303, "signed in, not refused as too many failures");
    drop(gateway);
    db.drop_database().await;
}

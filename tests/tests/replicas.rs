//! End to end: two `imagegate serve` processes on one PostgreSQL database and one Redis behave as
//! one gateway (issue #7): account slots, cooldowns and leases are shared, a replica killed with
//! `kill -9` gives its slots back within the lease TTL, usage of both lands in the one database,
//! key changes reach every replica within 2 s, and a replica whose Redis is gone keeps serving
//! with local limits while `/readyz` says so.
//!
//! The replicas are started from `docs/examples/replica.toml` with the database URL, Redis URL and
//! key prefix replaced. Each test creates its own PostgreSQL database and Redis key prefix.
//! PostgreSQL and Redis are found at `IMAGEGATE_TEST_POSTGRES_URL` (default
//! `postgres://postgres@127.0.0.1:5432/test`) and `IMAGEGATE_TEST_REDIS_URL` (default
//! `redis://127.0.0.1:6379`).

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::disallowed_methods
)]

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use futures::future::join_all;
use imagegate_e2e::{
    Gateway, Sim, TcpProxy, TestDatabase, admin, admin_with_stdin, csrf_of, set_cookie, unique_name,
};
use serde_json::{Value, json};
use tempfile::TempDir;

const REDIS_URL_ENV: &str = "IMAGEGATE_TEST_REDIS_URL";
const DEFAULT_REDIS_URL: &str = "redis://127.0.0.1:6379";

/// `docs/examples/replica.toml` with the values of `overrides` (`key`, TOML value) replaced.
/// Every overridden key must be in the example, so the test follows the documented file.
fn example_config(overrides: &[(&str, String)]) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/examples/replica.toml");
    let text = std::fs::read_to_string(&path).unwrap();
    let mut lines: Vec<String> = text.lines().map(str::to_owned).collect();
    for (key, value) in overrides {
        let line = lines
            .iter_mut()
            .find(|l| l.split('=').next().is_some_and(|k| k.trim() == *key))
            .unwrap_or_else(|| panic!("{} has no `{key} =` line", path.display()));
        *line = format!("{key} = {value}");
    }
    lines.join("\n") + "\n"
}

/// A simulator, one PostgreSQL database, a Redis prefix and the admin side of a deployment.
struct Cluster {
    sim: Sim,
    /// Dropped at the end of each test (best effort).
    database: TestDatabase,
    /// Data directories (master key, control file) of the admin CLI and each replica.
    dirs: Vec<TempDir>,
    config: PathBuf,
    _config_dir: TempDir,
    key: String,
    client: reqwest::Client,
}

impl Cluster {
    /// A deployment whose replicas use `redis_url` (`None`: the test Redis) and lease TTL, with
    /// one account `acct-a` (pro, one request at a time of each size class).
    async fn new(sim_args: &[&str], lease_ttl_secs: Option<u64>) -> Self {
        Self::with_redis(sim_args, lease_ttl_secs, &test_redis_url()).await
    }

    async fn with_redis(sim_args: &[&str], lease_ttl_secs: Option<u64>, redis: &str) -> Self {
        let database = TestDatabase::create("imagegate_replicas")
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        let mut overrides = vec![
            ("database_url", format!("{:?}", database.url())),
            ("redis_url", format!("{redis:?}")),
            ("redis_prefix", format!("{:?}", unique_name("e2e"))),
        ];
        if let Some(ttl) = lease_ttl_secs {
            overrides.push(("lease_ttl_secs", ttl.to_string()));
        }
        let config_dir = tempfile::tempdir().unwrap();
        let config = config_dir.path().join("replica.toml");
        std::fs::write(&config, example_config(&overrides)).unwrap();
        let admin_dir = tempfile::tempdir().unwrap();
        let sim = Sim::spawn(sim_args);
        let mut cluster = Self {
            sim,
            database,
            dirs: vec![admin_dir],
            config,
            _config_dir: config_dir,
            key: String::new(),
            client: reqwest::Client::new(),
        };
        cluster.admin(&["users", "add", "alice"]);
        let base = cluster.sim.base_url();
        admin_with_stdin(
            cluster.dirs[0].path(),
            &[
                "--config",
                cluster.config_str(),
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
                "--concurrency-large",
                "1",
                "--concurrency-standard",
                "1",
            ],
            "sk-upstream-acct-a",
        );
        cluster.key = cluster
            .admin(&["keys", "create", "--user", "alice", "--name", "e2e"])
            .trim()
            .to_owned();
        cluster
    }

    /// Sets `key` (a line of `docs/examples/replica.toml`) to `value` in the shared
    /// configuration, for replicas started after.
    fn set_config(&self, key: &str, value: &str) {
        let text = std::fs::read_to_string(&self.config).unwrap();
        let mut found = false;
        let lines: Vec<String> = text
            .lines()
            .map(|line| {
                if line.split('=').next().is_some_and(|k| k.trim() == key) {
                    found = true;
                    format!("{key} = {value}")
                } else {
                    line.to_owned()
                }
            })
            .collect();
        assert!(found, "no `{key} =` line");
        std::fs::write(&self.config, lines.join("\n") + "\n").unwrap();
    }

    fn config_str(&self) -> &str {
        self.config.to_str().unwrap()
    }

    /// Runs the admin CLI against the shared database.
    fn admin(&self, args: &[&str]) -> String {
        let mut all = vec!["--config", self.config_str()];
        all.extend_from_slice(args);
        admin(self.dirs[0].path(), &all)
    }

    /// Starts one more replica from the shared configuration, plus `extra` flags. Its data
    /// directory gets the deployment's master key (every replica must use the same one).
    fn replica(&mut self, extra: &[&str]) -> Gateway {
        let dir = tempfile::tempdir().unwrap();
        std::fs::copy(
            self.dirs[0].path().join("master.key"),
            dir.path().join("master.key"),
        )
        .unwrap();
        let mut args = vec!["--config", self.config_str()];
        args.extend_from_slice(extra);
        let gateway = Gateway::spawn(dir.path(), &args);
        self.dirs.push(dir);
        gateway
    }

    fn generate(&self, gateway: &Gateway) -> reqwest::RequestBuilder {
        self.client
            .post(gateway.v1("/images/generations"))
            .bearer_auth(&self.key)
            .json(
                &json!({"model": "gpt-image-2", "prompt": "replicas", "size": "1024x1024", "quality": "low"}),
            )
    }

    async fn sim_stats(&self) -> Value {
        self.client
            .get(format!("{}/sim/stats", self.sim.url))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap()
    }

    async fn sim_fault(&self, rule: Value) {
        let status = self
            .client
            .post(format!("{}/sim/faults", self.sim.url))
            .json(&rule)
            .send()
            .await
            .unwrap()
            .status();
        assert!(status.is_success(), "scripting a fault failed: {status}");
    }

    async fn readyz(&self, gateway: &Gateway) -> (u16, Value) {
        let response = self
            .client
            .get(format!("{}/readyz", gateway.url))
            .send()
            .await
            .unwrap();
        (response.status().as_u16(), response.json().await.unwrap())
    }

    /// Usage records in the shared database, waiting until there are at least `count`.
    async fn usage_at_least(&self, count: usize) -> Vec<Value> {
        for _ in 0..100 {
            let out = self.admin(&["usage", "list", "--json", "--limit", "1000"]);
            let records: Vec<Value> = serde_json::from_str(&out).unwrap();
            if records.len() >= count {
                return records;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        panic!("fewer than {count} usage records after 10 s");
    }
}

fn test_redis_url() -> String {
    std::env::var(REDIS_URL_ENV).unwrap_or_else(|_| DEFAULT_REDIS_URL.to_owned())
}

fn request_id(response: &reqwest::Response) -> String {
    response.headers()["x-request-id"].to_str().unwrap().to_owned()
}

#[tokio::test]
async fn concurrency_one_holds_across_replicas_and_both_write_usage_to_one_database() {
    let mut c = Cluster::new(&["--latency-ms", "150"], None).await;
    let a = c.replica(&[]);
    let b = c.replica(&[]);
    for gateway in [&a, &b] {
        let (status, body) = c.readyz(gateway).await;
        assert_eq!(status, 200);
        assert_eq!(body, json!({"status": "ready", "database": "ok", "redis": "ok"}));
    }

    let requests = (0..20).map(|i| c.generate(if i % 2 == 0 { &a } else { &b }).send());
    let responses: Vec<reqwest::Response> =
        join_all(requests).await.into_iter().map(Result::unwrap).collect();
    let mut ids = Vec::new();
    for response in &responses {
        assert_eq!(response.status(), 200, "{:?}", response.headers());
        ids.push(request_id(response));
    }
    let stats = c.sim_stats().await;
    assert_eq!(stats["requests"], 20, "{stats}");
    assert_eq!(
        stats["max_in_flight"], 1,
        "the upstream saw two requests at once on an account limited to one: {stats}"
    );

    let records = c.usage_at_least(20).await;
    let recorded: Vec<&str> = records.iter().filter_map(|r| r["request_id"].as_str()).collect();
    for (i, id) in ids.iter().enumerate() {
        let replica = if i % 2 == 0 { "A" } else { "B" };
        assert!(
            recorded.contains(&id.as_str()),
            "usage of request {id} served by replica {replica} is missing from the database"
        );
    }
    drop((a, b));
    let _ = c.database.drop_database().await;
}

#[tokio::test]
async fn a_429_seen_by_one_replica_cools_the_account_for_the_other() {
    let mut c = Cluster::new(&[], None).await;
    let a = c.replica(&[]);
    let b = c.replica(&[]);
    c.sim_fault(json!({"fault": "usage_limit", "times": 1, "resets_in_seconds": 600}))
        .await;
    let first = c.generate(&a).send().await.unwrap();
    assert_eq!(first.status(), 429, "replica A passes the upstream's limit on");
    assert_eq!(c.sim_stats().await["requests"], 1);

    let second = c.generate(&b).send().await.unwrap();
    assert_eq!(
        second.status(),
        429,
        "replica B must know the account is cooling down"
    );
    let retry_after: u64 = second.headers()["retry-after"].to_str().unwrap().parse().unwrap();
    assert!(
        retry_after > 500,
        "B's retry-after comes from the reset A saw (600 s): {retry_after}"
    );
    assert_eq!(
        c.sim_stats().await["requests"],
        1,
        "replica B must not have called the cooling account"
    );
    drop((a, b));
    let _ = c.database.drop_database().await;
}

#[tokio::test]
async fn an_account_reactivated_while_every_replica_was_down_serves_when_they_come_back() {
    let mut c = Cluster::new(&[], None).await;
    let replica = c.replica(&[]);
    c.sim_fault(json!({"key": "sk-upstream-acct-a", "fault": "invalid_api_key", "times": 1}))
        .await;
    let refused = c.generate(&replica).send().await.unwrap();
    assert_ne!(refused.status(), 200, "the upstream refused the credential");
    let listed: Value = serde_json::from_str(&c.admin(&["accounts", "list", "--json"])).unwrap();
    assert_eq!(listed["accounts"][0]["status"], "error", "{listed}");
    // Every replica stops; the operator fixes the account and switches it back on; they return.
    drop(replica);
    tokio::time::sleep(Duration::from_millis(20)).await;
    c.admin(&["accounts", "update", "acct-a", "--active", "true"]);
    let back = c.replica(&[]);
    let served = c.generate(&back).send().await.unwrap();
    assert_eq!(
        served.status(),
        200,
        "the failure kept in Redis from before the operator's change still held the account: {}",
        served.text().await.unwrap()
    );
}

#[tokio::test]
async fn a_killed_replica_frees_its_slot_within_the_lease_ttl() {
    const TTL: Duration = Duration::from_secs(3);
    let mut c = Cluster::new(&[], Some(TTL.as_secs())).await;
    let mut a = c.replica(&[]);
    let b = c.replica(&[]);
    // A's request stalls upstream far longer than the TTL: only renewals keep its lease.
    c.sim_fault(json!({"fault": "stall", "times": 1, "stall_ms": 60_000}))
        .await;
    let held = tokio::spawn(c.generate(&a).send());
    for _ in 0..100 {
        if c.sim_stats().await["in_flight"] == 1 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(
        c.sim_stats().await["in_flight"],
        1,
        "A's request never reached the upstream"
    );

    let waiting = tokio::spawn(c.generate(&b).send());
    // Well past the TTL: A's lease must still hold (renewed), so B's request keeps waiting.
    tokio::time::sleep(TTL * 2).await;
    let stats = c.sim_stats().await;
    assert_eq!(
        stats["requests"], 1,
        "B reached the account while A's renewed lease held it: {stats}"
    );
    assert!(!waiting.is_finished(), "B must wait for the slot");

    let killed = Instant::now();
    a.kill();
    let response = waiting.await.unwrap().unwrap();
    let freed_after = killed.elapsed();
    assert_eq!(response.status(), 200);
    // The slot frees at the lease's expiry (at most one TTL after A's last renewal); B notices
    // at its next poll (1 s).
    assert!(
        freed_after <= TTL + Duration::from_secs(2),
        "B got the slot {freed_after:?} after the kill; the lease TTL is {TTL:?}"
    );
    assert!(held.await.unwrap().is_err(), "A's client saw its replica die");
    drop(b);
    let _ = c.database.drop_database().await;
}

#[tokio::test]
async fn a_disabled_key_stops_on_every_replica_within_two_seconds() {
    let mut c = Cluster::new(&[], None).await;
    let a = c.replica(&[]);
    let b = c.replica(&[]);
    for gateway in [&a, &b] {
        assert_eq!(c.generate(gateway).send().await.unwrap().status(), 200);
    }
    let keys: Value = serde_json::from_str(&c.admin(&["keys", "list", "--json"])).unwrap();
    let public_id = keys[0]["public_id"].as_str().unwrap().to_owned();
    c.admin(&["keys", "disable", &public_id]);
    let disabled = Instant::now();
    for (name, gateway) in [("A", &a), ("B", &b)] {
        loop {
            let status = c.generate(gateway).send().await.unwrap().status();
            if status == 401 {
                break;
            }
            assert_eq!(status, 200);
            assert!(
                disabled.elapsed() < Duration::from_secs(2),
                "the disabled key still works on replica {name} after 2 s"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
    drop((a, b));
    let _ = c.database.drop_database().await;
}

#[tokio::test]
async fn without_redis_a_replica_is_degraded_but_serves_with_local_limits() {
    let mut c = Cluster::new(&["--latency-ms", "100"], None).await;
    // A port nothing listens on: Redis is unreachable from the start.
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let dead_redis = format!("redis://{}", closed.local_addr().unwrap());
    drop(closed);
    let gateway = c.replica(&["--redis-url", &dead_redis]);
    let (status, body) = c.readyz(&gateway).await;
    assert_eq!(
        status, 200,
        "a Redis outage must not take the replica out of rotation"
    );
    assert_eq!(
        body,
        json!({"status": "degraded", "database": "ok", "redis": "unavailable"})
    );
    let responses = join_all((0..4).map(|_| c.generate(&gateway).send())).await;
    for response in responses {
        assert_eq!(response.unwrap().status(), 200);
    }
    let stats = c.sim_stats().await;
    assert_eq!(stats["requests"], 4, "{stats}");
    assert_eq!(
        stats["max_in_flight"], 1,
        "the account's limit still holds on this replica: {stats}"
    );
    drop(gateway);
    let _ = c.database.drop_database().await;
}

#[tokio::test]
async fn a_replica_losing_redis_serves_degraded_and_recovers_when_it_returns() {
    let redis_addr: std::net::SocketAddr = test_redis_url()
        .trim_start_matches("redis://")
        .trim_end_matches('/')
        .parse()
        .unwrap();
    let proxy = TcpProxy::start(redis_addr).await.unwrap();
    let redis_url = format!("redis://{}", proxy.addr());
    let mut c = Cluster::with_redis(&["--latency-ms", "100"], None, &redis_url).await;
    let gateway = c.replica(&[]);
    assert_eq!(c.readyz(&gateway).await.1["status"], "ready");
    assert_eq!(c.generate(&gateway).send().await.unwrap().status(), 200);

    proxy.cut();
    let (status, body) = c.readyz(&gateway).await;
    assert_eq!(status, 200);
    assert_eq!(
        body,
        json!({"status": "degraded", "database": "ok", "redis": "unavailable"})
    );
    let responses = join_all((0..3).map(|_| c.generate(&gateway).send())).await;
    for response in responses {
        assert_eq!(response.unwrap().status(), 200, "requests keep being served");
    }
    assert_eq!(
        c.sim_stats().await["max_in_flight"],
        1,
        "the local stand-in keeps the account's limit"
    );

    proxy.restore();
    let mut body = Value::Null;
    for _ in 0..50 {
        body = c.readyz(&gateway).await.1;
        if body["status"] == "ready" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert_eq!(
        body,
        json!({"status": "ready", "database": "ok", "redis": "ok"}),
        "Redis came back"
    );
    assert_eq!(c.generate(&gateway).send().await.unwrap().status(), 200);
    drop(gateway);
    let _ = c.database.drop_database().await;
}

impl Cluster {
    /// Adds a user who can sign in to the console with `password`.
    fn add_login(&self, name: &str, password: &str) {
        admin_with_stdin(
            self.dirs[0].path(),
            &[
                "--config",
                self.config_str(),
                "users",
                "add",
                name,
                "--password-stdin",
            ],
            &format!("{password}\n"),
        );
    }
}

/// A browser at the console's sign-in form: its login cookie and CSRF token (a double-submit
/// pair any replica accepts), and a client that does not follow redirects.
struct SignInForm {
    http: reqwest::Client,
    cookie: String,
    csrf: String,
}

impl SignInForm {
    /// Sends the form to `gateway` through a proxy that saw the client at `client`.
    async fn sign_in_via_proxy(
        &self,
        gateway: &Gateway,
        client: &str,
        username: &str,
    ) -> reqwest::StatusCode {
        self.http
            .post(format!("{}/login", gateway.url))
            .header("cookie", &self.cookie)
            .header("x-forwarded-for", client)
            .form(&[
                ("csrf", self.csrf.as_str()),
                ("username", username),
                ("password", "guess"),
                ("next", "/keys"),
            ])
            .send()
            .await
            .unwrap()
            .status()
    }

    async fn open(gateway: &Gateway) -> Self {
        let http = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .unwrap();
        let login = http.get(format!("{}/login", gateway.url)).send().await.unwrap();
        let cookie = format!("imagegate_login={}", set_cookie(&login, "imagegate_login"));
        let csrf = csrf_of(&login.text().await.unwrap());
        Self { http, cookie, csrf }
    }

    /// Sends the form to `gateway`.
    async fn sign_in(&self, gateway: &Gateway, username: &str, password: &str) -> reqwest::Response {
        self.http
            .post(format!("{}/login", gateway.url))
            .header("cookie", &self.cookie)
            .form(&[
                ("csrf", self.csrf.as_str()),
                ("username", username),
                ("password", password),
                ("next", "/keys"),
            ])
            .send()
            .await
            .unwrap()
    }
}

#[tokio::test]
async fn a_console_session_started_on_one_replica_works_on_the_other() {
    // Behind a load balancer, a browser's requests land on any replica.
    let mut cluster = Cluster::new(&[], None).await;
    cluster.add_login("carol", "carol-console-password");
    let (a, b) = (cluster.replica(&[]), cluster.replica(&[]));
    let form = SignInForm::open(&a).await;
    let http = &form.http;
    let signed_in = form.sign_in(&a, "carol", "carol-console-password").await;
    assert_eq!(signed_in.status(), 303);
    let session = format!(
        "imagegate_session={}",
        set_cookie(&signed_in, "imagegate_session")
    );

    // Replica B knows the session replica A started.
    let keys = http
        .get(format!("{}/keys", b.url))
        .header("cookie", &session)
        .send()
        .await
        .unwrap();
    assert_eq!(keys.status(), 200);
    let page = keys.text().await.unwrap();
    assert!(page.contains("Signed in as carol."), "{page}");

    // A key created through B is shown once, on the page A serves next.
    let created = http
        .post(format!("{}/keys", b.url))
        .header("cookie", &session)
        .form(&[
            ("csrf", csrf_of(&page).as_str()),
            ("name", "from-b"),
            ("group", "1"),
        ])
        .send()
        .await
        .unwrap();
    assert_eq!(created.status(), 303);
    let shown = http
        .get(format!("{}/keys", a.url))
        .header("cookie", &session)
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(shown.contains("id=\"new-key\""), "the one-time key display");
    assert!(shown.contains("sk-ig-"));

    // Signing out on A ends the session on B too.
    let signed_out = http
        .post(format!("{}/logout", a.url))
        .header("cookie", &session)
        .form(&[("csrf", csrf_of(&shown).as_str())])
        .send()
        .await
        .unwrap();
    assert_eq!(signed_out.status(), 303);
    let after = http
        .get(format!("{}/keys", b.url))
        .header("cookie", &session)
        .send()
        .await
        .unwrap();
    assert_eq!(after.status(), 303);
    let location = after.headers()["location"].to_str().unwrap();
    assert!(location.starts_with("/login"), "{location}");
}

#[tokio::test]
async fn failed_console_sign_ins_count_on_every_replica() {
    // The console allows 5 failed sign-ins per user name in 5 minutes. Spread over two replicas
    // behind a load balancer, they must not become 5 on each.
    let mut cluster = Cluster::new(&[], None).await;
    cluster.add_login("dave", "dave-console-password");
    let (a, b) = (cluster.replica(&[]), cluster.replica(&[]));
    let form = SignInForm::open(&a).await;
    for gateway in [&a, &b, &a, &b, &a] {
        assert_eq!(form.sign_in(gateway, "dave", "guess").await.status(), 401);
    }
    // Two of the five were on B, three on A: both replicas refuse now, even the right password.
    for gateway in [&b, &a] {
        let refused = form.sign_in(gateway, "dave", "dave-console-password").await;
        assert_eq!(refused.status(), 429);
        let page = refused.text().await.unwrap();
        assert!(
            page.contains("Too many failed sign-ins. Try again in 5 minutes."),
            "{page}"
        );
    }
}

#[tokio::test]
async fn the_per_address_sign_in_limit_stays_per_replica() {
    // Behind a load balancer every client has the balancer's address: one allowance of 20 for the
    // whole deployment would let one client lock everyone out of the console. Here all sign-ins
    // come from 127.0.0.1, for 22 different names, spread over two replicas.
    let mut cluster = Cluster::new(&[], None).await;
    let (a, b) = (cluster.replica(&[]), cluster.replica(&[]));
    let form = SignInForm::open(&a).await;
    for i in 0..22 {
        let gateway = if i % 2 == 0 { &a } else { &b };
        let status = form
            .sign_in(gateway, &format!("nobody-{i}"), "guess")
            .await
            .status();
        assert_eq!(
            status, 401,
            "attempt {i}: eleven per replica, within each one's 20"
        );
    }
}

#[tokio::test]
async fn the_console_asks_to_come_back_while_redis_is_out_of_reach() {
    // Console sessions and sign-in failures live in Redis. Without it no page can be served, and
    // the visitor is told so (503 with Retry-After), not shown an internal error; the session
    // works again once Redis is back.
    let redis_addr: std::net::SocketAddr = test_redis_url()
        .trim_start_matches("redis://")
        .trim_end_matches('/')
        .parse()
        .unwrap();
    let proxy = TcpProxy::start(redis_addr).await.unwrap();
    let redis_url = format!("redis://{}", proxy.addr());
    let mut cluster = Cluster::with_redis(&[], None, &redis_url).await;
    cluster.add_login("erin", "erin-console-password");
    let gateway = cluster.replica(&[]);
    let form = SignInForm::open(&gateway).await;
    let signed_in = form.sign_in(&gateway, "erin", "erin-console-password").await;
    assert_eq!(signed_in.status(), 303);
    let session = format!(
        "imagegate_session={}",
        set_cookie(&signed_in, "imagegate_session")
    );
    let keys = || {
        form.http
            .get(format!("{}/keys", gateway.url))
            .header("cookie", &session)
            .send()
    };
    assert_eq!(keys().await.unwrap().status(), 200);

    proxy.cut();
    let page = keys().await.unwrap();
    assert_eq!(page.status(), 503);
    assert_eq!(page.headers()["retry-after"], "5");
    let text = page.text().await.unwrap();
    assert!(text.contains("Temporarily unavailable"), "{text}");
    let sign_in = form.sign_in(&gateway, "erin", "erin-console-password").await;
    assert_eq!(sign_in.status(), 503, "a sign-in cannot be counted either");

    proxy.restore();
    let mut status = 0;
    for _ in 0..50 {
        status = keys().await.unwrap().status().as_u16();
        if status == 200 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert_eq!(status, 200, "the same session works once Redis is back");
    drop(gateway);
    let _ = cluster.database.drop_database().await;
}

#[tokio::test]
async fn behind_a_trusted_balancer_each_client_has_its_own_sign_in_allowance() {
    // Here the test itself is the balancer in front of the replica (127.0.0.1, named in
    // `[console] trusted_proxies`), passing on each client's address in X-Forwarded-For.
    let mut cluster = Cluster::new(&[], None).await;
    cluster.set_config("trusted_proxies", r#"["127.0.0.1"]"#);
    let gateway = cluster.replica(&[]);
    let form = SignInForm::open(&gateway).await;
    for i in 0..20 {
        let status = form
            .sign_in_via_proxy(&gateway, "198.51.100.7", &format!("nobody-{i}"))
            .await;
        assert_eq!(status, 401, "attempt {i}: within the address's 20");
    }
    let status = form
        .sign_in_via_proxy(&gateway, "198.51.100.7", "nobody-20")
        .await;
    assert_eq!(status, 429, "that client's 21st failure in 5 minutes");
    let status = form
        .sign_in_via_proxy(&gateway, "198.51.100.8", "nobody-21")
        .await;
    assert_eq!(status, 401, "another client behind the balancer may still try");
}

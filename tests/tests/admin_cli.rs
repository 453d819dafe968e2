//! End to end: the administration commands on a real database, and per-key limits they set.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::disallowed_methods
)]

mod common;

use common::{credential, setup_custom};
use imagegate_e2e::{admin, admin_output, admin_with_stdin};
use serde_json::{Value, json};

fn generation() -> Value {
    json!({"model": "gpt-image-2", "prompt": "limits", "size": "1024x1024", "quality": "low"})
}

#[test]
fn logs_written_to_a_file_or_pipe_carry_no_colour_codes() {
    let dir = tempfile::tempdir().unwrap();
    let out = admin_output(dir.path(), &["users", "list"], "", &[("IMAGEGATE_LOG", "info")]);
    assert!(out.status.success());
    let log = String::from_utf8_lossy(&out.stderr);
    assert!(log.contains("created a new master key file"), "{log}");
    assert!(!log.contains('\u{1b}'), "escape codes in a piped log: {log:?}");
}

#[test]
fn a_data_directory_the_gateway_creates_is_private() {
    use std::os::unix::fs::PermissionsExt;
    let parent = tempfile::tempdir().unwrap();
    let dir = parent.path().join("state").join("imagegate");
    admin(&dir, &["users", "list"]);
    for created in [&dir, &dir.parent().unwrap().to_path_buf()] {
        let mode = std::fs::metadata(created).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o700, "{} is {mode:o}", created.display());
    }
    assert!(dir.join("imagegate.db").exists());
}

#[test]
fn a_key_the_cli_cannot_find_is_named_without_its_secret() {
    let dir = tempfile::tempdir().unwrap();
    admin(dir.path(), &["users", "add", "bob"]);
    let key = admin(dir.path(), &["keys", "create", "--user", "bob"])
        .trim()
        .to_owned();
    let (public_id, secret) = key
        .strip_prefix("sk-ig-")
        .and_then(|rest| rest.split_once('-'))
        .unwrap();
    // A full key of the right shape with another public id (a mistyped or deleted key), and a
    // key cut short: neither is found, and the error shows no part of the secret.
    let other_id = "z".repeat(public_id.len());
    let mistyped = format!("sk-ig-{other_id}-{secret}");
    let cut_short = &key[..key.len() - 20];
    let pasted_with_more = format!("Bearer {key}");
    for (given, named) in [
        (
            pasted_with_more.as_str(),
            "no key matching the given text".to_owned(),
        ),
        (
            mistyped.as_str(),
            format!("no key with the public id \"{other_id}\""),
        ),
        (cut_short, "no key matching the given text".to_owned()),
    ] {
        let out = admin_output(dir.path(), &["keys", "disable", given], "", &[]);
        assert!(!out.status.success());
        let said = String::from_utf8_lossy(&out.stderr);
        assert!(said.contains(&named), "{said}");
        assert!(!said.contains(&secret[..12]), "the secret was echoed: {said}");
    }
    // A full key that exists is found by its public id, as before.
    admin(dir.path(), &["keys", "disable", &key]);
    // So is the key as `keys list` prints it (its public id, the secret elided).
    let listed = admin(dir.path(), &["keys", "list"]);
    let shown = listed.lines().next().unwrap().split('\t').nth(1).unwrap();
    assert_eq!(shown, format!("sk-ig-{public_id}-…"));
    admin(dir.path(), &["keys", "enable", shown]);
    admin(
        dir.path(),
        &["keys", "disable", &format!("sk-ig-{public_id}-...")],
    );
}

#[tokio::test]
async fn groups_accounts_and_keys_are_managed_from_the_cli() {
    let s = setup_custom(&[], &[("acct-a", &["--tier", "pro"])], &[]);
    let dir = s.dir.path();
    let added = admin(dir, &["users", "add", "bob"]);
    let mut lines = added.lines();
    assert!(lines.next().unwrap().parse::<i64>().is_ok(), "{added}");
    assert!(lines.next().unwrap().starts_with("password: "), "{added}");
    let users: Value = serde_json::from_str(&admin(dir, &["users", "list", "--json"])).unwrap();
    assert_eq!(users.as_array().unwrap().len(), 2);
    assert!(
        !users.to_string().contains("argon2"),
        "password hashes must not be listed"
    );

    admin(dir, &["groups", "add", "team-b"]);
    let base = s.sim.base_url();
    admin_with_stdin(
        dir,
        &[
            "accounts",
            "add",
            "--name",
            "acct-b",
            "--kind",
            "openai",
            "--base-url",
            &base,
            "--groups",
            "team-b",
        ],
        &credential("acct-b"),
    );
    let key = admin(dir, &["keys", "create", "--user", "bob", "--group", "team-b"])
        .trim()
        .to_owned();
    assert!(key.starts_with("sk-ig-"));
    // Only team-b's account serves bob's key (accounts are re-read within 5 s).
    tokio::time::sleep(std::time::Duration::from_millis(5500)).await;
    let client = reqwest::Client::new();
    let response = client
        .post(s.gateway.v1("/images/generations"))
        .bearer_auth(&key)
        .json(&generation())
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let stats = s.sim_stats().await;
    assert_eq!(stats["by_token"][credential("acct-b")]["requests"], 1, "{stats}");
    assert_eq!(
        stats["by_token"][credential("acct-a")]["requests"]
            .as_u64()
            .unwrap_or(0),
        0,
        "{stats}"
    );

    // Disabled, the account stops serving; re-enabled it serves again; removed it is gone.
    admin(
        dir,
        &[
            "accounts",
            "update",
            "acct-b",
            "--active",
            "false",
            "--priority",
            "5",
        ],
    );
    let listed: Value = serde_json::from_str(&admin(dir, &["accounts", "list", "--json"])).unwrap();
    let b = listed["accounts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["name"] == "acct-b")
        .unwrap()
        .clone();
    assert_eq!(b["status"], "disabled");
    assert_eq!(b["priority"], 5);
    tokio::time::sleep(std::time::Duration::from_millis(5500)).await;
    let refused = client
        .post(s.gateway.v1("/images/generations"))
        .bearer_auth(&key)
        .json(&generation())
        .send()
        .await
        .unwrap();
    assert_eq!(refused.status(), 503, "no active account serves team-b");
    admin(dir, &["accounts", "remove", "acct-b"]);
    let listed: Value = serde_json::from_str(&admin(dir, &["accounts", "list", "--json"])).unwrap();
    assert_eq!(listed["accounts"].as_array().unwrap().len(), 1);

    let keys: Value =
        serde_json::from_str(&admin(dir, &["keys", "list", "--user", "bob", "--json"])).unwrap();
    assert_eq!(keys.as_array().unwrap().len(), 1);
    assert!(
        !keys.to_string().contains(key.rsplit('-').next().unwrap()),
        "the secret must never be listed"
    );
}

#[tokio::test]
async fn a_restricted_group_refuses_the_keys_of_users_outside_it() {
    let s = setup_custom(&[], &[("acct-a", &["--tier", "pro"])], &[]);
    let dir = s.dir.path();
    admin(dir, &["users", "add", "carol"]);
    let answer_for = |key: String| {
        let request = s
            .client
            .post(s.gateway.v1("/images/generations"))
            .bearer_auth(key)
            .json(&generation());
        async move {
            let response = request.send().await.unwrap();
            let status = response.status().as_u16();
            (status, response.json::<Value>().await.unwrap())
        }
    };
    let status_for = |key: String| {
        let answer = answer_for(key);
        async move { answer.await.0 }
    };
    assert_eq!(
        status_for(s.key.clone()).await,
        200,
        "alice's key, the group open"
    );

    let unknown = admin_output(
        dir,
        &["groups", "restrict", "default", "--members", "nobody"],
        "",
        &[],
    );
    assert!(!unknown.status.success());
    assert!(String::from_utf8_lossy(&unknown.stderr).contains("no user named \"nobody\""));
    admin(dir, &["groups", "restrict", "default", "--members", "carol"]);
    let listed = admin(dir, &["groups", "list"]);
    assert!(listed.contains("default\tmembers: carol"), "{listed}");

    // Alice is no member: she gets no new key, and the one she has is refused (the gateway
    // re-reads a key within 1 s).
    let refused = admin_output(
        dir,
        &["keys", "create", "--user", "alice", "--group", "default"],
        "",
        &[],
    );
    assert!(!refused.status.success());
    let said = String::from_utf8_lossy(&refused.stderr);
    assert!(said.contains("open to its members only"), "{said}");
    let carols = admin(dir, &["keys", "create", "--user", "carol"])
        .trim()
        .to_owned();
    tokio::time::sleep(std::time::Duration::from_millis(1500)).await;
    let (status, refused) = answer_for(s.key.clone()).await;
    assert_eq!(status, 401, "alice's key, the group restricted");
    assert_eq!(refused["error"]["code"], "INVALID_API_KEY");
    let message = refused["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("open to its members only") && message.contains("Ask an administrator"),
        "the holder is told why: {message}"
    );
    assert_eq!(status_for(carols.clone()).await, 200, "carol's key, a member");

    admin(dir, &["groups", "open", "default"]);
    tokio::time::sleep(std::time::Duration::from_millis(1500)).await;
    assert_eq!(
        status_for(s.key.clone()).await,
        200,
        "alice's key, the group open again"
    );
    let listed = admin(dir, &["groups", "list"]);
    assert!(listed.contains("default\tevery user"), "{listed}");
}

#[tokio::test]
async fn per_key_limits_refuse_with_retry_after() {
    let s = setup_custom(&["--latency-ms", "800"], &[("acct-a", &["--tier", "pro"])], &[]);
    let dir = s.dir.path();
    let key = admin(
        dir,
        &["keys", "create", "--user", "alice", "--max-concurrency", "1"],
    )
    .trim()
    .to_owned();
    let client = reqwest::Client::new();
    let send = || {
        client
            .post(s.gateway.v1("/images/generations"))
            .bearer_auth(&key)
            .json(&generation())
            .send()
    };
    let (first, second) = tokio::join!(send(), send());
    let mut statuses = [first.unwrap(), second.unwrap()];
    statuses.sort_by_key(|r| r.status());
    assert_eq!(statuses[0].status(), 200);
    assert_eq!(statuses[1].status(), 429);
    assert!(statuses[1].headers().contains_key("retry-after"));

    let limited = admin(dir, &["keys", "create", "--user", "alice", "--rpm", "2"])
        .trim()
        .to_owned();
    let mut codes = Vec::new();
    for _ in 0..3 {
        let response = client
            .post(s.gateway.v1("/images/generations"))
            .bearer_auth(&limited)
            .json(&generation())
            .send()
            .await
            .unwrap();
        codes.push(response.status().as_u16());
    }
    assert_eq!(codes, [200, 200, 429]);
}

#[tokio::test]
async fn the_master_key_is_rotated_with_the_previous_one_moved_aside() {
    let mut s = setup_custom(&[], &[("acct-a", &["--tier", "pro"])], &[]);
    assert!(s.gateway.stop());
    let dir = s.dir.path().to_owned();
    let old = dir.join("master.key.old");
    std::fs::rename(dir.join("master.key"), &old).unwrap();

    // Without the key being replaced there is nothing to open the credentials with.
    let refused = admin_output(&dir, &["accounts", "rekey"], "", &[]);
    assert!(!refused.status.success());
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(stderr.contains("--previous-key-file"), "{stderr}");

    let out = admin(
        &dir,
        &["accounts", "rekey", "--previous-key-file", old.to_str().unwrap()],
    );
    assert!(out.contains("resealed 1 credential(s)"), "{out}");
    let new_key = std::fs::read_to_string(dir.join("master.key")).unwrap();
    assert_ne!(
        new_key,
        std::fs::read_to_string(&old).unwrap(),
        "a new key was made"
    );
    std::fs::remove_file(&old).unwrap();

    // A gateway with only the new key sends the account's credential upstream.
    s.gateway = imagegate_e2e::Gateway::spawn(&dir, &[]);
    let response = s
        .post_json("/images/generations", generation())
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let stats = s.sim_stats().await;
    assert_eq!(stats["by_token"][credential("acct-a")]["requests"], 1, "{stats}");
}

#[tokio::test]
async fn a_process_without_the_deployments_master_key_refuses_to_make_its_own() {
    let mut s = setup_custom(&[], &[("acct-a", &["--tier", "pro"])], &[]);
    assert!(s.gateway.stop());
    // Another machine's data directory on the same database (a workstation running an admin
    // command, or a new replica), without the key the credentials are sealed with.
    let elsewhere = tempfile::tempdir().unwrap();
    std::fs::write(
        elsewhere.path().join("config.toml"),
        format!(
            "database_url = {:?}\n",
            format!(
                "sqlite://{}?mode=rwc",
                s.dir.path().join("imagegate.db").display()
            )
        ),
    )
    .unwrap();
    let config = elsewhere.path().join("config.toml");
    let refused = admin_output(
        elsewhere.path(),
        &["--config", config.to_str().unwrap(), "accounts", "list"],
        "",
        &[],
    );
    assert!(!refused.status.success());
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(stderr.contains("no master key"), "{stderr}");
    assert!(
        !elsewhere.path().join("master.key").exists(),
        "the key it made up is not left behind"
    );
    // With the deployment's key it works.
    let key = std::fs::read_to_string(s.dir.path().join("master.key")).unwrap();
    let listed = admin_output(
        elsewhere.path(),
        &["--config", config.to_str().unwrap(), "accounts", "list"],
        "",
        &[("IMAGEGATE_MASTER_KEY", key.trim())],
    );
    assert!(listed.status.success(), "{listed:?}");
    // Nor does the previous key of a rotation stand in for the missing new one: only `accounts
    // rekey` may make up the key it moves the credentials to.
    let rotating = tempfile::tempdir().unwrap();
    let config = rotating.path().join("config.toml");
    std::fs::copy(elsewhere.path().join("config.toml"), &config).unwrap();
    let refused = admin_output(
        rotating.path(),
        &["--config", config.to_str().unwrap(), "accounts", "list"],
        "",
        &[("IMAGEGATE_PREVIOUS_MASTER_KEY", key.trim())],
    );
    assert!(!refused.status.success(), "{refused:?}");
    assert!(
        String::from_utf8_lossy(&refused.stderr).contains("no master key"),
        "{refused:?}"
    );
    assert!(!rotating.path().join("master.key").exists());
    s.gateway = imagegate_e2e::Gateway::spawn(s.dir.path(), &[]);
}

#[test]
fn a_master_key_made_for_a_database_out_of_reach_is_not_left_behind() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("config.toml");
    // Nothing listens there: the process cannot tell whether the database holds credentials.
    std::fs::write(
        &config,
        "database_url = \"postgres://postgres@127.0.0.1:9/test\"\n",
    )
    .unwrap();
    let out = admin_output(
        dir.path(),
        &["--config", config.to_str().unwrap(), "users", "list"],
        "",
        &[],
    );
    assert!(!out.status.success());
    assert!(
        !dir.path().join("master.key").exists(),
        "the next start would take the key made up here for the deployment's"
    );
}

#[tokio::test]
async fn a_credential_the_master_key_cannot_open_costs_only_its_own_account() {
    let mut s = setup_custom(&[], &[("acct-a", &["--tier", "pro"])], &[]);
    assert!(s.gateway.stop());
    let dir = s.dir.path().to_owned();
    // acct-b's credential is sealed under another key (a replica behind in a rotation, say).
    let base = s.sim.base_url();
    let other_key = "11".repeat(32);
    let added = admin_output(
        &dir,
        &[
            "accounts",
            "add",
            "--name",
            "acct-b",
            "--kind",
            "openai",
            "--tier",
            "pro",
            "--base-url",
            &base,
        ],
        &credential("acct-b"),
        &[("IMAGEGATE_MASTER_KEY", &other_key)],
    );
    assert!(added.status.success(), "{added:?}");

    // The gateway still starts, and serves every request with the account it can use.
    s.gateway = imagegate_e2e::Gateway::spawn(&dir, &[]);
    for _ in 0..2 {
        let response = s
            .post_json("/images/generations", generation())
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 200);
    }
    let stats = s.sim_stats().await;
    assert_eq!(stats["by_token"][credential("acct-a")]["requests"], 2, "{stats}");
}

/// Runs `sql` on the gateway's SQLite database in `dir`.
async fn on_the_database(dir: &std::path::Path, sql: &str) {
    use sqlx::Connection as _;
    let url = format!("sqlite://{}", dir.join("imagegate.db").display());
    let mut conn = sqlx::SqliteConnection::connect(&url).await.unwrap();
    sqlx::query(sql).execute(&mut conn).await.unwrap();
}

/// The spool's files of set-aside records, once the writer has made one (up to 30 s).
async fn set_aside_files(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    for _ in 0..300 {
        let found: Vec<_> = std::fs::read_dir(dir.join("usage-spool"))
            .map(|entries| {
                entries
                    .map(|entry| entry.unwrap().path())
                    .filter(|path| path.extension().is_some_and(|e| e == "rejected"))
                    .filter(|path| std::fs::metadata(path).is_ok_and(|m| m.len() > 0))
                    .collect()
            })
            .unwrap_or_default();
        if !found.is_empty() {
            return found;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    panic!("no set-aside usage records after 30 s");
}

#[tokio::test]
async fn usage_records_the_database_refused_are_replayed_from_the_cli() {
    let s = setup_custom(&[], &[("acct-a", &["--tier", "pro"])], &[]);
    let dir = s.dir.path();
    // For a while the database refuses usage records (a constraint an operator added, say).
    on_the_database(
        dir,
        "CREATE TRIGGER refuse_usage BEFORE INSERT ON usage_records \
         BEGIN SELECT RAISE(ABORT, 'usage refused for the test'); END",
    )
    .await;
    let response = s
        .post_json("/images/generations", generation())
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let request_id = response.headers()["x-request-id"].to_str().unwrap().to_owned();
    let files = set_aside_files(dir).await;
    assert_eq!(files.len(), 1, "{files:?}");
    let file = files[0].to_str().unwrap();
    assert!(std::fs::read_to_string(file).unwrap().contains(&request_id));

    // Replayed while the cause is still there: refused again, said so, exit status 1.
    let refused = admin_output(dir, &["usage", "replay", file], "", &[]);
    assert!(!refused.status.success());
    let out = String::from_utf8_lossy(&refused.stdout);
    assert!(out.contains("0 record(s) inserted, 0 already stored"), "{out}");
    assert!(
        out.contains(&format!("line 1: record {request_id} refused by the database")),
        "{out}"
    );
    assert!(out.contains("usage refused for the test"), "{out}");

    // The cause fixed, the record gets in, once, with the fields the gateway gave it.
    on_the_database(dir, "DROP TRIGGER refuse_usage").await;
    let out = admin(dir, &["usage", "replay", file]);
    assert!(out.contains("1 record(s) inserted, 0 already stored"), "{out}");
    assert!(out.contains("it can be removed"), "{out}");
    let again = admin(dir, &["usage", "replay", file]);
    assert!(
        again.contains("0 record(s) inserted, 1 already stored"),
        "{again}"
    );
    let listed: Value = serde_json::from_str(&admin(dir, &["usage", "list", "--json"])).unwrap();
    let records = listed.as_array().unwrap();
    assert_eq!(records.len(), 1, "{listed}");
    assert_eq!(records[0]["request_id"], request_id.as_str());
    assert_eq!(records[0]["size_requested"], "1024x1024");

    // A file that cannot be read and a line that is not a record (a write cut short) are
    // reported, each file on its own.
    let cut = dir.join("cut.jsonl");
    std::fs::write(&cut, "{\"request_id\":\"cut sh\n").unwrap();
    let missing = dir.join("missing.jsonl");
    let args = [
        "usage",
        "replay",
        missing.to_str().unwrap(),
        cut.to_str().unwrap(),
    ];
    let partly = admin_output(dir, &args, "", &[]);
    assert!(!partly.status.success());
    let out = String::from_utf8_lossy(&partly.stdout);
    assert!(out.contains(&format!("reading {}", missing.display())), "{out}");
    assert!(out.contains("line 1: not a usage record"), "{out}");
}

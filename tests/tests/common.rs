//! Shared set-up: a simulator, a gateway on a fresh SQLite database, a user, an account and a key.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, dead_code)]

use imagegate_e2e::{Gateway, Sim, admin, admin_with_stdin};
use tempfile::TempDir;

#[derive(Debug)]
pub struct Setup {
    pub dir: TempDir,
    pub sim: Sim,
    pub gateway: Gateway,
    pub key: String,
    pub client: reqwest::Client,
}

/// The credential the gateway sends to the simulator for account `name`.
pub fn credential(name: &str) -> String {
    format!("sk-upstream-{name}")
}

/// Adds an OpenAI-compatible account pointing at the simulator, unless `extra` names its own
/// `--base-url` (in which `{sim}` stands for the simulator's address).
pub fn add_account(dir: &std::path::Path, sim: &Sim, name: &str, extra: &[&str]) {
    let base = sim.base_url();
    let extra: Vec<String> = extra.iter().map(|arg| arg.replace("{sim}", &sim.url)).collect();
    let mut args = vec!["accounts", "add", "--name", name, "--kind", "openai"];
    if !extra.iter().any(|arg| arg == "--base-url") {
        args.extend(["--base-url", &base]);
    }
    args.extend(extra.iter().map(String::as_str));
    admin_with_stdin(dir, &args, &credential(name));
}

/// One simulator, one account (`acct-a`), user alice with one key, and a running gateway.
pub fn setup() -> Setup {
    setup_with(&["acct-a"], &[])
}

/// [`setup`], with the gateway reading `config` (TOML) at start, e.g. for shorter timeouts.
pub fn setup_with_config(config: &str) -> Setup {
    let file = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(file.path(), config).unwrap();
    setup_with(&["acct-a"], &["--config", file.path().to_str().unwrap()])
}

pub fn setup_with(accounts: &[&str], gateway_args: &[&str]) -> Setup {
    let accounts: Vec<(&str, &[&str])> = accounts
        .iter()
        .map(|name| (*name, &["--tier", "pro"][..]))
        .collect();
    setup_custom(&[], &accounts, gateway_args)
}

/// A simulator started with `sim_args`, accounts with their own `accounts add` flags, and a
/// gateway started with `gateway_args`.
pub fn setup_custom(sim_args: &[&str], accounts: &[(&str, &[&str])], gateway_args: &[&str]) -> Setup {
    let dir = tempfile::tempdir().unwrap();
    let sim = Sim::spawn(sim_args);
    admin(dir.path(), &["users", "add", "alice"]);
    for (name, flags) in accounts {
        add_account(dir.path(), &sim, name, flags);
    }
    let key = admin(
        dir.path(),
        &["keys", "create", "--user", "alice", "--name", "e2e"],
    )
    .trim()
    .to_owned();
    let gateway = Gateway::spawn(dir.path(), gateway_args);
    Setup {
        dir,
        sim,
        gateway,
        key,
        client: reqwest::Client::new(),
    }
}

impl Setup {
    pub fn post_json(&self, path: &str, body: serde_json::Value) -> reqwest::RequestBuilder {
        self.client
            .post(self.gateway.v1(path))
            .bearer_auth(&self.key)
            .json(&body)
    }

    /// The accounts with their live state, as `accounts list --json` prints them.
    pub fn accounts(&self) -> serde_json::Value {
        serde_json::from_str(&admin(self.dir.path(), &["accounts", "list", "--json"])).unwrap()
    }

    /// Usage records, newest first, as the admin CLI prints them.
    pub fn usage(&self) -> Vec<serde_json::Value> {
        let out = admin(self.dir.path(), &["usage", "list", "--json", "--limit", "100"]);
        serde_json::from_str(&out).unwrap()
    }

    /// Waits until at least `count` usage records exist (the writer batches).
    pub async fn usage_at_least(&self, count: usize) -> Vec<serde_json::Value> {
        for _ in 0..100 {
            let records = self.usage();
            if records.len() >= count {
                return records;
            }
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        }
        panic!("fewer than {count} usage records after 10 s: {:?}", self.usage());
    }

    /// The gateway's `/metrics` text.
    pub async fn metrics(&self) -> String {
        self.client
            .get(format!("{}/metrics", self.gateway.url))
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap()
    }

    /// The simulator's request counters.
    pub async fn sim_stats(&self) -> serde_json::Value {
        self.client
            .get(format!("{}/sim/stats", self.sim.url))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap()
    }

    /// Scripts a fault in the simulator.
    pub async fn sim_fault(&self, rule: serde_json::Value) {
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
}

/// Reads the first bytes of a streamed answer (there must be some), then hangs up.
pub async fn leave_after_first_bytes(response: reqwest::Response) {
    use futures::StreamExt as _;
    let mut body = response.bytes_stream();
    let first = body.next().await.unwrap().unwrap();
    assert!(!first.is_empty());
}

/// The body's bytes as far as they came, and whether the connection broke before its end.
pub async fn read_until_cut(response: reqwest::Response) -> (Vec<u8>, bool) {
    use futures::StreamExt as _;
    let mut body = response.bytes_stream();
    let mut received = Vec::new();
    while let Some(chunk) = body.next().await {
        match chunk {
            Ok(chunk) => received.extend_from_slice(&chunk),
            Err(_) => return (received, true),
        }
    }
    (received, false)
}

/// The workspace's root folder.
pub fn workspace_root() -> std::path::PathBuf {
    std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

/// Runs an SDK conformance script (`command`) against `s` and checks its last line is `expected`.
///
/// The script gets `IMAGEGATE_BASE_URL` (ends with `/v1`), `IMAGEGATE_KEY`, `IMAGEGATE_SIM_URL` and
/// `IMAGEGATE_FIXTURES`, a folder with `a.png` (512x512), `b.png` (640x640, larger than the 256 KiB
/// the gateway keeps in memory, so its edits go through a spilled file) and `mask.png` (512x512).
pub fn run_sdk_checks(mut command: std::process::Command, s: &Setup, expected: &str) {
    use imagegate_e2e::{png_noise, png_rgb, solid_mask};
    let fixtures = tempfile::tempdir().unwrap();
    std::fs::write(fixtures.path().join("a.png"), png_rgb(512, 512)).unwrap();
    let large = png_noise(640, 7);
    assert!(large.len() > 256 * 1024);
    std::fs::write(fixtures.path().join("b.png"), large).unwrap();
    std::fs::write(fixtures.path().join("mask.png"), solid_mask(512, 512)).unwrap();
    let output = command
        .env("IMAGEGATE_BASE_URL", s.gateway.v1(""))
        .env("IMAGEGATE_KEY", &s.key)
        .env("IMAGEGATE_SIM_URL", &s.sim.url)
        .env("IMAGEGATE_FIXTURES", fixtures.path())
        .output()
        .unwrap_or_else(|err| panic!("cannot run {command:?}: {err}"));
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "SDK checks failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert_eq!(stdout.lines().last(), Some(expected), "{stdout}");
}

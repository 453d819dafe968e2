//! `imagegate demo`: a newcomer's first command gives a working key and images without credentials.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::disallowed_methods
)]

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::Duration;

use imagegate_e2e::imagegate_command;

#[tokio::test]
async fn demo_prints_a_key_that_generates_images() {
    let dir = tempfile::tempdir().unwrap();
    let mut child = imagegate_command()
        .arg("--data-dir")
        .arg(dir.path())
        .args(["demo", "--listen", "127.0.0.1:0"])
        .env("IMAGEGATE_LOG", "warn")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let (mut key, mut base, mut sent) = (None, None, false);
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            let line = line.trim().to_owned();
            if let Some(rest) = line.strip_prefix("API key") {
                key = Some(rest.trim().to_owned());
            } else if let Some(rest) = line.strip_prefix("Base URL") {
                base = Some(rest.trim().to_owned());
            }
            // Keep reading to the end: closing the pipe early is not what a terminal does.
            if !sent && let (Some(k), Some(b)) = (&key, &base) {
                let _ = tx.send((k.clone(), b.clone()));
                sent = true;
            }
        }
    });
    let (key, base) = rx
        .recv_timeout(Duration::from_secs(60))
        .expect("demo banner with key and base URL");
    assert!(key.starts_with("sk-ig-"), "{key}");
    let body: serde_json::Value = reqwest::Client::new()
        .post(format!("{base}/images/generations"))
        .bearer_auth(&key)
        .json(&serde_json::json!({"model": "gpt-image-2", "prompt": "a lighthouse", "size": "1024x1024"}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert!(
        body["data"][0]["b64_json"].as_str().unwrap().len() > 1000,
        "{body}"
    );
    let _ = Command::new("kill")
        .arg("-TERM")
        .arg(child.id().to_string())
        .status();
    let status = child.wait().unwrap();
    assert!(status.success(), "demo did not exit cleanly: {status}");

    // The demo's key and simulator are in a group of their own: in a data directory with real
    // accounts, the demo key reaches none of them, and no other key reaches the simulator.
    let listed = |args: &[&str]| -> serde_json::Value {
        serde_json::from_str(&imagegate_e2e::admin(dir.path(), args)).unwrap()
    };
    let groups = listed(&["groups", "list", "--json"]);
    let demo_group = groups
        .as_array()
        .unwrap()
        .iter()
        .find(|g| g["name"] == "demo")
        .unwrap_or_else(|| panic!("no demo group: {groups}"))["id"]
        .clone();
    let accounts = listed(&["accounts", "list", "--json"]);
    let demo = &accounts["accounts"][0];
    assert_eq!(demo["name"], "demo-simulator", "{accounts}");
    assert_eq!(demo["groups"], serde_json::json!([demo_group]), "{accounts}");
    let keys = listed(&["keys", "list", "--user", "demo", "--json"]);
    assert_eq!(keys[0]["group_id"], demo_group, "{keys}");
    // What the run made usable is taken back once it stops: the key it printed, the account of
    // its simulator (gone with it); the next run makes them anew.
    assert_eq!(keys[0]["status"], "disabled", "{keys}");
    assert_eq!(demo["status"], "disabled", "{accounts}");
}

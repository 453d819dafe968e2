//! The web console in a real browser: headless Chromium through chromedriver (fantoccini), against
//! the real `imagegate` binary and the simulator.
//!
//! Needs the Debian packages `chromium` and `chromium-driver`. Screenshots of `/keys`, `/usage` and
//! `/admin/accounts` go to `docs/img/` when `IMAGEGATE_UPDATE_SCREENSHOTS=1` is set, otherwise to
//! cargo's temporary directory for integration tests (so test runs do not touch committed files).

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::disallowed_methods
)]

#[path = "../src/browser.rs"]
mod browser;
mod common;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use browser::Chrome;
use imagegate_e2e::{Gateway, Sim, admin_with_stdin};
use serde_json::json;

const ROOT_PASSWORD: &str = "root-browser-password";
const BOB_PASSWORD: &str = "bob-browser-password";

/// Creates a user who can sign in, with the password given on standard input.
fn add_login(dir: &Path, name: &str, is_admin: bool, password: &str) {
    let mut args = vec!["users", "add", name, "--password-stdin"];
    if is_admin {
        args.push("--admin");
    }
    admin_with_stdin(dir, &args, &format!("{password}\n"));
}

fn screenshot_path(name: &str) -> PathBuf {
    if std::env::var("IMAGEGATE_UPDATE_SCREENSHOTS").is_ok_and(|v| v == "1") {
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../docs/img")
            .join(name)
    } else {
        Path::new(env!("CARGO_TARGET_TMPDIR"))
            .join("console-screenshots")
            .join(name)
    }
}

/// A screenshot of the whole page (the window grows to the page's height, up to a limit).
async fn screenshot(chrome: &Chrome, name: &str) {
    let script = "return [document.documentElement.scrollHeight, window.outerHeight - window.innerHeight];";
    let sizes = chrome.client.execute(script, vec![]).await.unwrap();
    let number = |i: usize| sizes[i].as_u64().and_then(|n| u32::try_from(n).ok()).unwrap_or(0);
    let height = number(0).clamp(600, 2000) + number(1);
    chrome.client.set_window_size(1280, height).await.unwrap();
    chrome.screenshot(&screenshot_path(name)).await;
    chrome.client.set_window_size(1280, 900).await.unwrap();
}

async fn generate(base: &str, key: &str, size: &str) -> u64 {
    let response = reqwest::Client::new()
        .post(format!("{base}/v1/images/generations"))
        .bearer_auth(key)
        .json(&json!({"model": "gpt-image-2", "prompt": "a lighthouse at dusk", "size": size, "quality": "low"}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200, "generation through the gateway");
    let body: serde_json::Value = response.json().await.unwrap();
    assert!(
        body["data"][0]["b64_json"]
            .as_str()
            .is_some_and(|b| b.len() > 100)
    );
    body["usage"]["total_tokens"].as_u64().unwrap()
}

/// `12345` -> `12,345`, as the console prints totals.
fn grouped(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

#[tokio::test]
async fn console_in_a_browser() {
    let dir = tempfile::tempdir().unwrap();
    let sim = Sim::spawn(&[]);
    common::add_account(dir.path(), &sim, "acct-a", &["--tier", "pro"]);
    common::add_account(dir.path(), &sim, "acct-b", &["--tier", "plus"]);
    add_login(dir.path(), "root", true, ROOT_PASSWORD);
    add_login(dir.path(), "bob", false, BOB_PASSWORD);
    let gateway = Gateway::spawn(dir.path(), &[]);
    let base = gateway.url.clone();
    let chrome = Chrome::start(1280, 900).await;

    // Sign in and create a key; it is shown once, with snippets for this gateway.
    chrome.login(&base, "root", ROOT_PASSWORD).await;
    assert!(chrome.source().await.contains("Signed in as root."));
    chrome.fill("#key-name", "browser-test").await;
    chrome.click("form[action='/keys'] button[type=submit]").await;
    let key = chrome.text("#new-key").await;
    assert!(key.starts_with("sk-ig-"), "{key}");
    let curl = chrome.text("#snippet-curl").await;
    assert!(
        curl.contains(&format!("{base}/v1/images/generations")) && curl.contains(&key),
        "{curl}"
    );
    screenshot(&chrome, "console-keys.png").await;

    // Use the key over HTTP: two images through the simulator.
    let tokens = generate(&base, &key, "1024x1024").await + generate(&base, &key, "1536x1024").await;

    // Both requests show on /usage (the usage writer batches, so poll).
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        chrome.client.goto(&format!("{base}/usage")).await.unwrap();
        let page = chrome.source().await;
        if page.contains("1536x1024") && page.contains("<dt>Requests</dt><dd>2</dd>") {
            assert!(page.contains("browser-test") && page.contains(">generations<"));
            assert!(
                page.contains(&format!("<dt>Total tokens</dt><dd>{}</dd>", grouped(tokens))),
                "token total"
            );
            assert!(page.contains("<svg class=\"chart images\""), "daily chart");
            break;
        }
        assert!(Instant::now() < deadline, "the requests never showed on /usage");
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    screenshot(&chrome, "console-usage.png").await;

    chrome
        .client
        .goto(&format!("{base}/admin/accounts"))
        .await
        .unwrap();
    let page = chrome.source().await;
    assert!(page.contains("acct-a") && page.contains("acct-b") && page.contains("credential stored"));
    assert!(!page.contains("sk-upstream-acct-"), "credentials are write-only");
    // The test button runs one small generation through the account.
    chrome.click("button[aria-label='Test account acct-a']").await;
    let flash = chrome.wait_for_text(".flash", "Test of “acct-a” passed").await;
    assert!(flash.contains("1024x1024"), "{flash}");
    screenshot(&chrome, "console-admin-accounts.png").await;

    // A new group open to its members only (none yet): bob is not offered it below.
    chrome.client.goto(&format!("{base}/admin/groups")).await.unwrap();
    chrome.fill("#group-name", "vip").await;
    chrome
        .click("form[action='/admin/groups'] button[type=submit]")
        .await;
    chrome.wait_for_text(".flash", "Group “vip” added.").await;
    chrome.click("details[data-group='vip'] summary").await;
    chrome
        .click("details[data-group='vip'] input[value=members]")
        .await;
    chrome
        .click("details[data-group='vip'] button[type=submit]")
        .await;
    chrome
        .wait_for_text(
            ".flash",
            "Group “vip” is now open to its 0 member(s) and the admins",
        )
        .await;
    assert!(chrome.source().await.contains("members (none yet), and admins"));
    chrome.client.goto(&format!("{base}/keys")).await.unwrap();
    assert!(
        chrome.source().await.contains(">vip</option>"),
        "admins may use every group"
    );

    // Sign out; a second user sees none of root's keys and no admin page.
    chrome.click(".signout button[type=submit]").await;
    chrome.wait_for_path("/login").await;
    chrome.login(&base, "bob", BOB_PASSWORD).await;
    let page = chrome.source().await;
    assert!(page.contains("You have no keys yet."));
    assert!(page.contains(">default</option>") && !page.contains(">vip</option>"));
    assert!(!page.contains("browser-test") && !page.contains(&key[..18]));
    chrome
        .client
        .goto(&format!("{base}/admin/accounts"))
        .await
        .unwrap();
    assert!(chrome.source().await.contains("Admins only"));
    let bob_cookie = format!("imagegate_session={}", chrome.cookie("imagegate_session").await);
    let http = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    let status = http
        .get(format!("{base}/admin/accounts"))
        .header("cookie", &bob_cookie)
        .send()
        .await
        .unwrap()
        .status();
    assert_eq!(status, 403);

    // A form posted without its CSRF token is refused, in the browser and over plain HTTP.
    chrome.client.goto(&format!("{base}/keys")).await.unwrap();
    chrome
        .client
        .execute(
            "document.querySelector(\"form[action='/keys'] input[name=csrf]\").remove();",
            vec![],
        )
        .await
        .unwrap();
    chrome.fill("#key-name", "forged").await;
    chrome.click("form[action='/keys'] button[type=submit]").await;
    chrome.wait_for_text("h1", "Form expired").await;
    let forged = http
        .post(format!("{base}/keys"))
        .header("cookie", &bob_cookie)
        .header("content-type", "application/x-www-form-urlencoded")
        .body("name=forged&group=1")
        .send()
        .await
        .unwrap();
    assert_eq!(forged.status(), 403);
    chrome.client.goto(&format!("{base}/keys")).await.unwrap();
    assert!(!chrome.source().await.contains("forged"));

    // A double-click on "Create key" sends the form once: the page refuses the second submission
    // (otherwise two keys are made and only the second is ever shown).
    let submissions = chrome
        .client
        .execute(
            r#"var seen = [];
            window.addEventListener("submit", function (e) { seen.push(e.defaultPrevented); });
            var form = document.querySelector("form[action='/keys']");
            document.getElementById("key-name").value = "twice";
            form.requestSubmit();
            form.requestSubmit();
            return seen;"#,
            vec![],
        )
        .await
        .unwrap();
    assert_eq!(submissions, json!([false, true]), "(defaultPrevented of each)");
    assert!(chrome.text("#new-key").await.starts_with("sk-ig-"));
    chrome.client.goto(&format!("{base}/keys")).await.unwrap();
    let page = chrome.source().await;
    assert_eq!(page.matches("primary\">twice</td>").count(), 1, "one key made");

    chrome.stop().await;
    drop(gateway);
}

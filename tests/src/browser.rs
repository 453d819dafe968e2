//! Headless Chromium driven through chromedriver with fantoccini, for the console's browser tests.
//!
//! Needs the Debian packages `chromium` and `chromium-driver` (or `CHROME_BIN` and `CHROMEDRIVER`
//! pointing at the binaries). Each [`Chrome`] starts its own chromedriver on a free loopback port
//! with a fresh profile directory.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, dead_code)]

use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use fantoccini::{Client, ClientBuilder, Locator};
use hyper_util::client::legacy::connect::HttpConnector;
use serde_json::json;

/// The first of `candidates` that exists, or the name to look up in `PATH`.
fn find_binary(env: &str, candidates: &[&str], fallback: &str) -> PathBuf {
    if let Ok(path) = std::env::var(env) {
        return PathBuf::from(path);
    }
    candidates
        .iter()
        .map(PathBuf::from)
        .find(|p| p.exists())
        .unwrap_or_else(|| PathBuf::from(fallback))
}

impl Drop for Chrome {
    fn drop(&mut self) {
        // The whole process group: chromedriver and any Chromium it launched.
        let group = format!("-{}", self.driver.id());
        let _ = Command::new("kill").args(["-KILL", "--", &group]).status();
        let _ = self.driver.wait();
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A chromedriver process and a browser session on it.
pub struct Chrome {
    driver: Child,
    pub client: Client,
    _profile: tempfile::TempDir,
}

impl Chrome {
    /// Starts chromedriver and a headless Chromium with a `width` x `height` window.
    pub async fn start(width: u32, height: u32) -> Self {
        let driver_bin = find_binary("CHROMEDRIVER", &["/usr/bin/chromedriver"], "chromedriver");
        let chrome_bin = find_binary(
            "CHROME_BIN",
            &["/usr/bin/chromium", "/usr/bin/chromium-browser"],
            "chromium",
        );
        let port = free_port();
        // Its own process group, so dropping a `Chrome` also ends the browsers it started.
        let driver = Command::new(&driver_bin)
            .arg(format!("--port={port}"))
            .process_group(0)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| {
                panic!(
                    "cannot start {} ({e}); install the Debian packages chromium and chromium-driver",
                    driver_bin.display()
                )
            });
        let url = format!("http://127.0.0.1:{port}");
        wait_until_ready(&url).await;
        let profile = tempfile::tempdir().unwrap();
        let args = vec![
            "--headless".to_owned(),
            "--no-sandbox".to_owned(),
            "--disable-gpu".to_owned(),
            "--disable-dev-shm-usage".to_owned(),
            "--disable-background-networking".to_owned(),
            "--disable-component-update".to_owned(),
            "--disable-sync".to_owned(),
            "--no-first-run".to_owned(),
            "--hide-scrollbars".to_owned(),
            format!("--window-size={width},{height}"),
            format!("--user-data-dir={}", profile.path().display()),
        ];
        let mut caps = serde_json::Map::new();
        caps.insert(
            "goog:chromeOptions".to_owned(),
            json!({ "binary": chrome_bin.display().to_string(), "args": args }),
        );
        let client = ClientBuilder::new(HttpConnector::new())
            .capabilities(caps)
            .connect(&url)
            .await
            .unwrap_or_else(|e| panic!("no browser session through chromedriver: {e}"));
        client.set_window_size(width, height).await.unwrap();
        Self {
            driver,
            client,
            _profile: profile,
        }
    }

    /// Ends the browser session, then chromedriver (on drop).
    pub async fn stop(self) {
        let _ = self.client.clone().close().await;
    }

    /// Types `text` into the field matching `css` (after clearing it).
    pub async fn fill(&self, css: &str, text: &str) {
        let field = self
            .client
            .find(Locator::Css(css))
            .await
            .unwrap_or_else(|e| panic!("no {css}: {e}"));
        field.clear().await.unwrap();
        field.send_keys(text).await.unwrap();
    }

    /// Clicks the element matching `css`.
    pub async fn click(&self, css: &str) {
        self.client
            .find(Locator::Css(css))
            .await
            .unwrap_or_else(|e| panic!("no {css}: {e}"))
            .click()
            .await
            .unwrap();
    }

    /// The text of the element matching `css`, waiting for it to appear.
    pub async fn text(&self, css: &str) -> String {
        let element = self
            .client
            .wait()
            .at_most(Duration::from_secs(20))
            .for_element(Locator::Css(css))
            .await
            .unwrap_or_else(|e| panic!("no {css}: {e}"));
        element.text().await.unwrap()
    }

    /// Waits until the element matching `css` contains `needle` (tolerating the page changing
    /// underneath, e.g. while a form submission navigates); returns its text.
    pub async fn wait_for_text(&self, css: &str, needle: &str) -> String {
        let deadline = Instant::now() + Duration::from_secs(20);
        let mut last = String::new();
        while Instant::now() < deadline {
            if let Ok(element) = self.client.find(Locator::Css(css)).await {
                last = element.text().await.unwrap_or_default();
                if last.contains(needle) {
                    return last;
                }
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!("{css} never contained {needle:?}; last text {last:?}");
    }

    /// The page's HTML.
    pub async fn source(&self) -> String {
        self.client.source().await.unwrap()
    }

    /// The current path (and query).
    pub async fn path(&self) -> String {
        let url = self.client.current_url().await.unwrap();
        match url.query() {
            Some(query) => format!("{}?{query}", url.path()),
            None => url.path().to_owned(),
        }
    }

    /// Signs in through the login form at `base`.
    pub async fn login(&self, base: &str, user: &str, password: &str) {
        self.client.goto(&format!("{base}/login")).await.unwrap();
        self.fill("#username", user).await;
        self.fill("#password", password).await;
        self.click("form[action='/login'] button[type=submit]").await;
        self.wait_for_path("/keys").await;
    }

    /// Waits until the browser is on a page whose path (and query) starts with `prefix`.
    pub async fn wait_for_path(&self, prefix: &str) {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let path = self.path().await;
            if path.starts_with(prefix) {
                return;
            }
            assert!(Instant::now() < deadline, "still on {path}, expected {prefix}");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// The value of a cookie the browser holds (HttpOnly ones included).
    pub async fn cookie(&self, name: &str) -> String {
        self.client
            .get_named_cookie(name)
            .await
            .unwrap()
            .value()
            .to_owned()
    }

    /// Saves a PNG screenshot of the viewport.
    pub async fn screenshot(&self, path: &Path) {
        let png = self.client.screenshot().await.unwrap();
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).unwrap();
        }
        std::fs::write(path, png).unwrap();
    }
}

async fn wait_until_ready(url: &str) {
    let deadline = Instant::now() + Duration::from_secs(30);
    let client = reqwest::Client::new();
    while Instant::now() < deadline {
        let ready = client
            .get(format!("{url}/status"))
            .send()
            .await
            .is_ok_and(|r| r.status().is_success());
        if ready {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("chromedriver at {url} did not become ready within 30 s");
}

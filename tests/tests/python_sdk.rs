//! The official `openai` Python SDK against the real gateway (tests/python/sdk_conformance.py).
//!
//! The SDK lives in `.venv` at the workspace root, created by `scripts/setup-test-env.sh` (run by
//! `cargo xtask test`). Without it this test fails and says how to create it.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::path::PathBuf;
use std::process::Command;

use imagegate_e2e::{png_noise, png_rgb, solid_mask};

fn workspace_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

#[test]
fn the_official_python_sdk_works_unmodified() {
    let root = workspace_root();
    let python = root.join(".venv/bin/python");
    assert!(
        python.exists(),
        "{} is missing: run `cargo xtask test` (or scripts/setup-test-env.sh)",
        python.display()
    );
    let s = common::setup();
    let fixtures = tempfile::tempdir().unwrap();
    std::fs::write(fixtures.path().join("a.png"), png_rgb(512, 512)).unwrap();
    // Larger than the 256 KiB the gateway keeps in memory: the edit goes through a spilled file.
    let large = png_noise(640, 7);
    assert!(large.len() > 256 * 1024);
    std::fs::write(fixtures.path().join("b.png"), large).unwrap();
    std::fs::write(fixtures.path().join("mask.png"), solid_mask(512, 512)).unwrap();
    let output = Command::new(python)
        .arg(root.join("tests/python/sdk_conformance.py"))
        .env("IMAGEGATE_BASE_URL", s.gateway.v1(""))
        .env("IMAGEGATE_KEY", &s.key)
        .env("IMAGEGATE_FIXTURES", fixtures.path())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "SDK checks failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(stdout.contains("sdk conformance: 7 ok, 0 failing"), "{stdout}");
}

//! The official `openai` Node SDK against the real gateway (tests/node/sdk_conformance.mjs).
//!
//! The SDK is pinned in `tests/node/package.json` and installed into `tests/node/node_modules` by
//! `scripts/setup-test-env.sh` (run by `cargo xtask test`). Without it this test fails and says how to
//! install it.

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
fn the_official_node_sdk_works_unmodified() {
    let root = workspace_root();
    let node_dir = root.join("tests/node");
    let sdk = node_dir.join("node_modules/openai/package.json");
    assert!(
        sdk.exists(),
        "{} is missing: run `cargo xtask test` (or scripts/setup-test-env.sh)",
        sdk.display()
    );
    let s = common::setup();
    let fixtures = tempfile::tempdir().unwrap();
    std::fs::write(fixtures.path().join("a.png"), png_rgb(512, 512)).unwrap();
    // Larger than the 256 KiB the gateway keeps in memory: the edits go through a spilled file.
    let large = png_noise(640, 7);
    assert!(large.len() > 256 * 1024);
    std::fs::write(fixtures.path().join("b.png"), large).unwrap();
    std::fs::write(fixtures.path().join("mask.png"), solid_mask(512, 512)).unwrap();
    let output = Command::new("node")
        .arg(node_dir.join("sdk_conformance.mjs"))
        .current_dir(&node_dir)
        .env("IMAGEGATE_BASE_URL", s.gateway.v1(""))
        .env("IMAGEGATE_KEY", &s.key)
        .env("IMAGEGATE_FIXTURES", fixtures.path())
        .env("IMAGEGATE_SIM_URL", &s.sim.url)
        .output()
        .unwrap_or_else(|err| panic!("cannot run node (is Node.js 20 or newer installed?): {err}"));
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "SDK checks failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert_eq!(
        stdout.lines().last(),
        Some("sdk conformance: 8 ok, 0 failing"),
        "{stdout}"
    );
}

//! The official `openai` Node SDK against the real gateway (tests/node/sdk_conformance.mjs).
//!
//! The SDK is pinned in `tests/node/package.json` and installed into `tests/node/node_modules` by
//! `scripts/setup-test-env.sh` (run by `cargo xtask test`). Without it this test fails and says how to
//! install it.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::disallowed_methods
)]

mod common;

use std::process::Command;

#[test]
fn the_official_node_sdk_works_unmodified() {
    let node_dir = common::workspace_root().join("tests/node");
    let sdk = node_dir.join("node_modules/openai/package.json");
    assert!(
        sdk.exists(),
        "{} is missing: run `cargo xtask test` (or scripts/setup-test-env.sh)",
        sdk.display()
    );
    let s = common::setup();
    // Node.js 20 or newer runs the script.
    let mut command = Command::new("node");
    command
        .arg(node_dir.join("sdk_conformance.mjs"))
        .current_dir(&node_dir);
    common::run_sdk_checks(command, &s, "sdk conformance: 11 ok, 0 failing");
}

//! The official `openai` Python SDK against the real gateway (tests/python/sdk_conformance.py).
//!
//! The SDK lives in `.venv` at the workspace root, created by `scripts/setup-test-env.sh` (run by
//! `cargo xtask test`). Without it this test fails and says how to create it.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::disallowed_methods
)]

mod common;

use std::process::Command;

#[test]
fn the_official_python_sdk_works_unmodified() {
    let root = common::workspace_root();
    let python = root.join(".venv/bin/python");
    assert!(
        python.exists(),
        "{} is missing: run `cargo xtask test` (or scripts/setup-test-env.sh)",
        python.display()
    );
    let s = common::setup();
    let mut command = Command::new(python);
    command.arg(root.join("tests/python/sdk_conformance.py"));
    common::run_sdk_checks(command, &s, "sdk conformance: 10 ok, 0 failing");
}

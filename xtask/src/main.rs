//! Project tasks, run as `cargo xtask <task>`:
//!
//! - `schemas [--check]`: write the JSON Schemas of the public wire types and of the registry manifest
//!   into `schemas/`; with `--check`, only run the tests that fail when a published schema is stale,
//!   missing or extra.
//! - `bench [--quick] [--no-litellm] [--only ID]`: build the harness in `crates/bench` in release
//!   and run it: it measures the gateway against its floor (straight to the simulator) and the
//!   LiteLLM proxy, runs the criterion microbenchmarks, and writes `docs/benchmarks.md` (generated
//!   section) and `docs/benchmarks.json`.
//! - `test`: prepare the test environment (`scripts/setup-test-env.sh`: services, Python SDK venv,
//!   browser) and run the whole test suite (nextest, then doctests).
//!
//! It depends on nothing but the standard library, so `cargo xtask` builds in seconds on a fresh
//! checkout; the tasks run cargo for everything else.

mod bench;
mod schemas;
mod test;

use std::process::ExitCode;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let result = match args.first().map(String::as_str) {
        Some("schemas") => schemas::run(args.iter().any(|a| a == "--check")),
        Some("test") => test::run(&args[1..]),
        Some("bench") => bench::run(&args[1..]),
        _ => Err(usage()),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("xtask: {message}");
            ExitCode::FAILURE
        }
    }
}

fn usage() -> String {
    "usage: cargo xtask schemas [--check] | cargo xtask test [--no-setup] [NEXTEST ARGS...] | cargo xtask bench [--quick] [--no-litellm] [--only ID]"
        .to_owned()
}

/// The workspace root: xtask lives one folder below it.
fn workspace_root() -> std::path::PathBuf {
    let manifest_dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    manifest_dir.parent().unwrap_or(manifest_dir).to_path_buf()
}

/// Runs `command`, failing unless it exits successfully.
fn status(command: &mut std::process::Command) -> Result<(), String> {
    let shown = format!("{command:?}");
    let status = command.status().map_err(|e| format!("{shown}: {e}"))?;
    if status.success() {
        Ok(())
    } else {
        Err(format!("{shown} failed: {status}"))
    }
}

//! Project tasks, run as `cargo xtask <task>`:
//!
//! - `schemas [--check]`: write the JSON Schemas of the public wire types and of the registry manifest
//!   into `schemas/`; with `--check`, only run the tests that fail when a published schema is stale,
//!   missing or extra.
//! - `bench [--quick] [--no-litellm] [--only ID] [--gateway PATH]`: build the harness in `crates/bench` in release
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
    "usage: cargo xtask schemas [--check] | cargo xtask test [--no-setup] [NEXTEST ARGS...] | cargo xtask bench [--quick] [--no-litellm] [--only ID] [--gateway PATH]"
        .to_owned()
}

/// The workspace root: xtask lives one folder below it.
fn workspace_root() -> std::path::PathBuf {
    let manifest_dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    manifest_dir.parent().unwrap_or(manifest_dir).to_path_buf()
}

/// What `cargo run` sets for the program it runs (`cargo xtask` is one), besides the
/// `CARGO_PKG_*` family: Cargo's list of the variables it sets for a crate. Handed down to a child
/// cargo they would differ from a shell's environment, and a build script that watches one
/// (`ring`'s watches `CARGO_MANIFEST_DIR` and `CARGO_PKG_NAME`) would run again, rebuilding
/// everything above it: once inside the task, and once more in the next plain `cargo build`.
const RUN_VARIABLES: [&str; 9] = [
    "CARGO_MANIFEST_DIR",
    "CARGO_MANIFEST_PATH",
    "CARGO_MANIFEST_LINKS",
    "CARGO_CRATE_NAME",
    "CARGO_BIN_NAME",
    "CARGO_PRIMARY_PACKAGE",
    "CARGO_TARGET_TMPDIR",
    "CARGO_RUSTC_CURRENT_DIR",
    "OUT_DIR",
];

/// Whether `key` is one of the variables `cargo run` set for this process.
fn is_run_variable(key: &str) -> bool {
    key.starts_with("CARGO_PKG_") || RUN_VARIABLES.contains(&key)
}

/// A command for `program` without the variables `cargo run` set for this process, so the cargo
/// it runs (directly, or through the bench harness) sees the environment a shell gives it.
fn command(program: impl AsRef<std::ffi::OsStr>) -> std::process::Command {
    let mut command = std::process::Command::new(program);
    for (key, _) in std::env::vars_os() {
        if key.to_str().is_some_and(is_run_variable) {
            command.env_remove(key);
        }
    }
    command
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_variables_cargo_run_sets_are_not_handed_down() {
        for key in [
            "CARGO_MANIFEST_DIR",
            "CARGO_PKG_NAME",
            "CARGO_PKG_VERSION_MAJOR",
            "OUT_DIR",
        ] {
            assert!(is_run_variable(key), "{key}");
        }
        for key in [
            "CARGO_HOME",
            "CARGO_TARGET_DIR",
            "CARGO_BUILD_JOBS",
            "CARGO",
            "PATH",
            "RUSTFLAGS",
        ] {
            assert!(!is_run_variable(key), "{key}");
        }
        // The test runner, like `cargo run`, sets CARGO_MANIFEST_DIR for this process.
        assert!(std::env::var_os("CARGO_MANIFEST_DIR").is_some());
        let cargo = command("cargo");
        let removed: Vec<_> = cargo
            .get_envs()
            .filter(|(_, value)| value.is_none())
            .map(|(key, _)| key.to_string_lossy().into_owned())
            .collect();
        assert!(
            removed.iter().any(|key| key == "CARGO_MANIFEST_DIR"),
            "{removed:?}"
        );
        assert!(removed.iter().any(|key| key == "CARGO_PKG_NAME"), "{removed:?}");
        assert!(removed.iter().all(|key| is_run_variable(key)), "{removed:?}");
    }
}

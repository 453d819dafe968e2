//! `cargo xtask test [--no-setup] [NEXTEST ARGS...]`: the README's test command.

use std::process::Command;

/// Optional features whose code the tests must cover too: the Redis pool state (it talks to the
/// local Redis the setup script starts) and OTLP export (the binary the end-to-end tests spawn is
/// built with it, and the export test runs).
pub const FEATURES: &str = "imagegate-dispatch/redis,imagegate/otel,imagegate-e2e/otel";

pub fn run(args: &[String]) -> Result<(), String> {
    let root = crate::workspace_root();
    let setup = !args.iter().any(|a| a == "--no-setup");
    let passthrough: Vec<&String> = args.iter().filter(|a| *a != "--no-setup").collect();
    if setup {
        status(
            Command::new("bash")
                .arg(root.join("scripts/setup-test-env.sh"))
                .current_dir(&root),
        )?;
    }
    // The end-to-end tests spawn the real binaries, which `nextest` does not build on its own
    // (with the same features, so its build reuses them).
    status(
        Command::new("cargo")
            .args(["build", "--workspace", "--bins", "--features", FEATURES])
            .current_dir(&root),
    )?;
    let mut nextest = Command::new("cargo");
    nextest
        .args([
            "nextest",
            "run",
            "--workspace",
            "--all-targets",
            "--no-fail-fast",
            "--features",
            FEATURES,
        ])
        .args(passthrough)
        .current_dir(&root);
    status(&mut nextest)?;
    status(
        Command::new("cargo")
            .args(["test", "--workspace", "--doc"])
            .current_dir(&root),
    )
}

fn status(command: &mut Command) -> Result<(), String> {
    let shown = format!("{command:?}");
    let status = command.status().map_err(|e| format!("{shown}: {e}"))?;
    if status.success() {
        Ok(())
    } else {
        Err(format!("{shown} failed: {status}"))
    }
}

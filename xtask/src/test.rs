//! `cargo xtask test [--no-setup] [NEXTEST ARGS...]`: the README's test command.

/// Optional features whose code the tests must cover too: the Redis pool state (it talks to the
/// local Redis the setup script starts) and OTLP export (the binary the end-to-end tests spawn is
/// built with it, and the export test runs).
pub const FEATURES: &str = "imagegate-dispatch/redis,imagegate/otel,imagegate-e2e/otel";

pub fn run(args: &[String]) -> Result<(), String> {
    let root = crate::workspace_root();
    let setup = !args.iter().any(|a| a == "--no-setup");
    let passthrough: Vec<&String> = args.iter().filter(|a| *a != "--no-setup").collect();
    if setup {
        crate::status(
            crate::command("bash")
                .arg(root.join("scripts/setup-test-env.sh"))
                .current_dir(&root),
        )?;
    }
    // One build of every target with the features the tests use: the end-to-end tests spawn the
    // real binaries, which `nextest` does not build on its own, and building them in the same
    // invocation as the tests resolves the dependencies' features once, so nextest and the
    // doctests below reuse every artifact instead of compiling a second variant of each.
    crate::status(
        crate::command("cargo")
            .args(["build", "--workspace", "--all-targets", "--features", FEATURES])
            .current_dir(&root),
    )?;
    let mut nextest = crate::command("cargo");
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
    crate::status(&mut nextest)?;
    crate::status(
        crate::command("cargo")
            .args(["test", "--workspace", "--doc", "--features", FEATURES])
            .current_dir(&root),
    )
}

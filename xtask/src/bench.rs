//! `cargo xtask bench [--quick] [--no-litellm] [--only ID] [--gateway PATH]`: builds the harness
//! (`crates/bench`, the load generator) in release and hands it the arguments. A debug build
//! would spend the CPU it shares with the simulators on itself and the floor would measure it.

use std::time::Instant;

/// Tells the harness how many seconds went before it (this build), counted in the run's duration.
const EARLIER_SECONDS: &str = "IMAGEGATE_BENCH_EARLIER_S";

pub fn run(args: &[String]) -> Result<(), String> {
    let started = Instant::now();
    let root = crate::workspace_root();
    crate::status(
        crate::command("cargo")
            .args(["build", "--release", "-p", "imagegate-bench"])
            .current_dir(&root),
    )?;
    crate::status(
        crate::command(root.join("target/release/imagegate-bench"))
            .args(args)
            .env(EARLIER_SECONDS, started.elapsed().as_secs_f64().to_string())
            .current_dir(&root),
    )
}

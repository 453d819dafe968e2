//! Write a valid manifest with N skills (default 10,000) to stdout, for benchmarks:
//! `cargo run --release -p imagegate-manifest --example large_manifest -- 10000 > big.json`.

use std::io::Write;

fn main() -> std::process::ExitCode {
    let count = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(10_000);
    let text = imagegate_manifest::synthetic::manifest(count);
    match std::io::stdout().lock().write_all(text.as_bytes()) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(_) => std::process::ExitCode::from(2),
    }
}

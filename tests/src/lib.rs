//! Helpers for the black-box end-to-end tests in `tests/tests/`: they spawn the real `imagegate` and
//! `imagegate-sim` binaries on loopback ports, drive the admin CLI, and make test images.
//!
//! The binaries are the ones cargo built beside the test executable (`target/<profile>/`), which
//! `cargo nextest run --workspace` (the README's test command) builds before running tests.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod console;
mod images;
mod process;

pub use console::{csrf_of, set_cookie};
pub use imagegate_testkit::{TcpProxy, TestDatabase, unique_name};
pub use images::{jpeg_rgb, png_noise, png_rgb, png_rgba, solid_mask};
pub use process::{Gateway, Sim, admin, admin_output, admin_with_stdin, bin_path, imagegate_command};

/// The `sequence_number` of every event of a Responses stream, which must count from 0 by 1.
pub fn assert_sequence_counts_from_zero(events: &[(String, serde_json::Value)]) {
    let sequence: Vec<u64> = events
        .iter()
        .map(|(_, d)| d["sequence_number"].as_u64().unwrap())
        .collect();
    assert_eq!(sequence, (0..events.len() as u64).collect::<Vec<_>>());
}

/// Parses an SSE body into `(event name, data JSON)` pairs, ignoring comments.
pub fn parse_sse(body: &str) -> Vec<(String, serde_json::Value)> {
    let mut events = Vec::new();
    for block in body.replace("\r\n", "\n").split("\n\n") {
        let mut name = String::new();
        let mut data = Vec::new();
        for line in block.lines() {
            if let Some(rest) = line.strip_prefix("event:") {
                name = rest.trim().to_owned();
            } else if let Some(rest) = line.strip_prefix("data:") {
                data.push(rest.strip_prefix(' ').unwrap_or(rest).to_owned());
            }
        }
        if !data.is_empty() {
            let json = serde_json::from_str(&data.join("\n")).unwrap_or(serde_json::Value::Null);
            events.push((name, json));
        }
    }
    events
}

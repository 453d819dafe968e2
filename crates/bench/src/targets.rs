//! The targets of issue #8, checked against a report's measurements (ratios against the floor
//! and LiteLLM of the same run).

use serde::Serialize;

use super::loadgen::LoadResult;
use super::report::{Report, Run, floor_of, percent};
use super::scenarios::{Group, Target};
use super::{micro, procs};

/// One target and how the run did.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct TargetRow {
    /// What is asked.
    pub target: String,
    /// What was measured.
    pub measured: String,
    /// Met, missed, or `None` when not measured.
    pub met: Option<bool>,
    /// For a miss, by how much.
    pub miss_by: String,
    /// Why: for a miss, a pointer to the hand-written notes below the generated section, after the
    /// cause the run measured where it has one.
    pub why: String,
}

const MIB: f64 = 1024.0 * 1024.0;

fn row(target: String, measured: String, met: Option<bool>, miss_by: String) -> TargetRow {
    let why = match met {
        Some(false) => "see \"Why the misses\" below".to_owned(),
        _ => String::new(),
    };
    TargetRow {
        target,
        measured,
        met,
        miss_by: if met == Some(false) {
            miss_by
        } else {
            String::new()
        },
        why,
    }
}

/// Where a relay's added latency comes from, measured: how much more of the load generator's CPU
/// (which the floor saturates) each answer took, and how idle the relay's own CPU was. Only when
/// the relay and the load generator had CPUs of their own.
fn cpu_cause(pinned: bool, relayed: &LoadResult, floor: &LoadResult) -> Option<String> {
    if !pinned {
        return None;
    }
    let (own, base) = (relayed.cpu(procs::CLIENT_CPU)?, floor.cpu(procs::CLIENT_CPU)?);
    let server = relayed.cpu(procs::SERVER_CPU)?;
    let added = percent(own.busy_ms(), base.busy_ms());
    Some(format!(
        "CPU {} (load generator and simulator) was busy {:.2} ms per answer against the floor's {:.2} ms ({added:+.1}%, {:.0}% idle) and was woken from the other CPU {:.1} times per answer (IPIs) against the floor's {:.1}, while the gateway's CPU {} was {:.0}% idle",
        procs::CLIENT_CPU,
        own.busy_ms(),
        base.busy_ms(),
        own.idle_percent(),
        own.ipis,
        base.ipis,
        procs::SERVER_CPU,
        server.idle_percent()
    ))
}

fn unmeasured(target: String) -> TargetRow {
    row(target, "–".to_owned(), None, String::new())
}

fn result<'a>(runs: &'a [Run], scenario: &str, target: Target) -> Option<&'a LoadResult> {
    run(runs, scenario, target).and_then(|r| r.result.as_ref())
}

fn run<'a>(runs: &'a [Run], scenario: &str, target: Target) -> Option<&'a Run> {
    runs.iter().find(|r| r.scenario == scenario && r.target == target)
}

/// Every target row of `report`.
pub fn evaluate(report: &Report) -> Vec<TargetRow> {
    let runs = &report.runs;
    let mut rows = Vec::new();
    let gw_floor = |id: &str| Some((result(runs, id, Target::Imagegate)?, floor_of(runs, id)?));

    let name = "c16 small responses: added p50 ≤ 0.3 ms".to_owned();
    rows.push(match gw_floor("small-c16") {
        Some((gw, floor)) => {
            let added = gw.latency.p50_ms - floor.latency.p50_ms;
            row(
                name,
                format!("{added:.3} ms"),
                Some(added <= 0.3),
                format!("{:.3} ms", added - 0.3),
            )
        }
        None => unmeasured(name),
    });
    let name = "c16 small responses: added p99 ≤ 1 ms".to_owned();
    rows.push(match gw_floor("small-c16") {
        Some((gw, floor)) => {
            let added = gw.latency.p99_ms - floor.latency.p99_ms;
            row(
                name,
                format!("{added:.3} ms"),
                Some(added <= 1.0),
                format!("{:.3} ms", added - 1.0),
            )
        }
        None => unmeasured(name),
    });
    let name = "c64 small responses: throughput ≥ 50% of the floor's".to_owned();
    rows.push(match gw_floor("small-c64") {
        Some((gw, floor)) if floor.rps > 0.0 => {
            let share = gw.rps / floor.rps * 100.0;
            row(
                name,
                format!("{:.0} of {:.0} req/s ({share:.0}%)", gw.rps, floor.rps),
                Some(share >= 50.0),
                format!("{:.0} points", 50.0 - share),
            )
        }
        _ => unmeasured(name),
    });
    for run in runs
        .iter()
        .filter(|r| r.group == Group::Image && r.target == Target::Imagegate)
    {
        let name = format!("{} c{}: added p50 ≤ 5% of the floor's", run.size, run.concurrency);
        rows.push(match gw_floor(&run.scenario) {
            Some((gw, floor)) => {
                let added = percent(gw.latency.p50_ms, floor.latency.p50_ms);
                let mut row = row(
                    name,
                    format!(
                        "{:+.1}% ({:.1} vs {:.1} ms)",
                        added, gw.latency.p50_ms, floor.latency.p50_ms
                    ),
                    Some(added <= 5.0),
                    format!("{:.1} points", added - 5.0),
                );
                if let (Some(false), Some(cause)) = (row.met, cpu_cause(report.machine.pinned, gw, floor)) {
                    row.why = format!("{cause}; see \"Why the misses\" below");
                }
                row
            }
            None => unmeasured(name),
        });
    }
    rows.push(rss_row(
        runs,
        "image-3840x2160-c64",
        "gateway peak RSS ≤ 100 MiB with 64 concurrent 3840x2160 responses",
        100.0,
    ));
    rows.push(rss_row(
        runs,
        "edit-1024x1024-c8",
        "gateway peak RSS ≤ 150 MiB with 8 concurrent 40 MiB edits",
        150.0,
    ));
    for variant in ["idle", "loaded", "one_band"] {
        let id = format!("pick_lease_release/{variant}/10000");
        let name = format!("dispatcher pick+lease+release ≤ 1 µs median, 10,000 accounts ({variant})");
        rows.push(match report.micro.iter().find(|m| m.id == id) {
            Some(m) => row(
                name,
                micro::format_ns(m.median_ns),
                Some(m.median_ns <= 1_000.0),
                micro::format_ns(m.median_ns - 1_000.0),
            ),
            None => unmeasured(name),
        });
    }
    rows.extend(litellm_rows(runs));
    rows
}

fn rss_row(runs: &[Run], scenario: &str, name: &str, limit_mib: f64) -> TargetRow {
    match run(runs, scenario, Target::Imagegate).and_then(|r| r.peak_rss_bytes) {
        Some(bytes) => {
            let mib = bytes as f64 / MIB;
            row(
                name.to_owned(),
                format!("{mib:.1} MiB"),
                Some(mib <= limit_mib),
                format!("{:.1} MiB", mib - limit_mib),
            )
        }
        None => unmeasured(name.to_owned()),
    }
}

/// Against LiteLLM: lower added p50 (time to first event for streams) in every scenario, lower
/// peak memory where memory is measured.
fn litellm_rows(runs: &[Run]) -> Vec<TargetRow> {
    let mut rows = Vec::new();
    let key = |r: &LoadResult, stream: bool| {
        if stream {
            r.first_event.map_or(f64::NAN, |f| f.p50_ms)
        } else {
            r.latency.p50_ms
        }
    };
    for gw_run in runs.iter().filter(|r| r.target == Target::Imagegate) {
        let id = &gw_run.scenario;
        let stream = gw_run.group == Group::Stream;
        let name = format!(
            "{id}: added {} below LiteLLM's",
            if stream { "first-event p50" } else { "p50" }
        );
        let Some(lite_run) = run(runs, id, Target::Litellm) else {
            rows.push(unmeasured(name));
            continue;
        };
        let (Some(gw), Some(floor)) = (gw_run.result.as_ref(), floor_of(runs, id)) else {
            rows.push(unmeasured(name));
            continue;
        };
        let gw_added = key(gw, stream) - key(floor, stream);
        match &lite_run.result {
            Some(lite) => {
                let lite_added = key(lite, stream) - key(floor, stream);
                rows.push(row(
                    name,
                    format!("{gw_added:.2} vs {lite_added:.2} ms"),
                    Some(gw_added < lite_added),
                    format!("{:.2} ms", gw_added - lite_added),
                ));
            }
            None => {
                let why = lite_run.unsupported.clone().unwrap_or_default();
                rows.push(row(
                    name,
                    format!("{gw_added:.2} ms; LiteLLM {why}"),
                    Some(true),
                    String::new(),
                ));
            }
        }
        if gw_run.peak_rss_bytes.is_some() && matches!(gw_run.group, Group::Image | Group::Edit) {
            let name = format!("{id}: peak RSS below LiteLLM's");
            match (
                gw_run.peak_rss_bytes,
                lite_run.result.as_ref().and(lite_run.peak_rss_bytes),
            ) {
                (Some(gw), Some(lite)) => rows.push(row(
                    name,
                    format!("{:.1} vs {:.1} MiB", gw as f64 / MIB, lite as f64 / MIB),
                    Some(gw < lite),
                    format!("{:.1} MiB", (gw as f64 - lite as f64) / MIB),
                )),
                _ => rows.push(unmeasured(name)),
            }
        }
    }
    rows
}

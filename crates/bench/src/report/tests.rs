use std::time::Duration;

use super::*;
use crate::loadgen::Percentiles;
use crate::scenarios;
use crate::targets::evaluate;

fn result(rps: f64, p50: f64, p99: f64) -> LoadResult {
    LoadResult {
        requests: 100,
        rps,
        seconds: 5.0,
        latency: Percentiles {
            p50_ms: p50,
            p99_ms: p99,
            max_ms: p99,
            mean_ms: p50 * 1.1,
        },
        latency_raw: Percentiles {
            p50_ms: p50,
            p99_ms: p99,
            max_ms: p99,
            mean_ms: p50 * 1.2,
        },
        ..LoadResult::default()
    }
}

fn scenario(id: &str) -> Scenario {
    scenarios::all().into_iter().find(|s| s.id == id).unwrap()
}

fn sample_report() -> Report {
    let small = scenario("small-c16");
    let small64 = scenario("small-c64");
    let big = scenario("image-3840x2160-c64");
    let stream = scenario("stream-1024x1024-c1");
    let mut gw_big = Run::measured(&big, Target::Imagegate, result(10.0, 105.0, 300.0));
    gw_big.peak_rss_bytes = Some(300 * 1024 * 1024);
    let mut lite_big = Run::measured(&big, Target::Litellm, result(2.0, 900.0, 3000.0));
    lite_big.peak_rss_bytes = Some(1000 * 1024 * 1024);
    let mut floor_stream = Run::measured(&stream, Target::Floor, result(10.0, 50.0, 60.0));
    floor_stream.result.as_mut().unwrap().first_event = Some(Percentiles {
        p50_ms: 2.0,
        p99_ms: 3.0,
        max_ms: 3.0,
        mean_ms: 2.2,
    });
    let mut gw_stream = Run::measured(&stream, Target::Imagegate, result(10.0, 51.0, 62.0));
    gw_stream.result.as_mut().unwrap().first_event = Some(Percentiles {
        p50_ms: 2.5,
        p99_ms: 3.5,
        max_ms: 4.0,
        mean_ms: 2.7,
    });
    gw_stream.peak_rss_bytes = Some(40 * 1024 * 1024);
    gw_stream.response_bytes = Some(2_500_000);
    Report {
        quick: false,
        duration_s: 321.0,
        machine: Machine {
            cpus: 2,
            cpu: "Test CPU".into(),
            ..Machine::default()
        },
        commands: vec!["cargo xtask bench".into()],
        litellm_version: Some("1.105.7".into()),
        nginx_version: None,
        runs: vec![
            Run::measured(&small, Target::Floor, result(40_000.0, 0.30, 0.70)),
            Run::measured(&small, Target::FloorAcross, result(30_000.0, 0.40, 0.90)),
            Run::measured(&small, Target::Imagegate, result(20_000.0, 0.50, 1.20)),
            Run::measured(&small, Target::Litellm, result(90.0, 160.0, 260.0)),
            Run::measured(&small64, Target::Floor, result(40_000.0, 1.0, 2.0)),
            Run::measured(&small64, Target::Imagegate, result(10_000.0, 4.0, 8.0)),
            Run::measured(&big, Target::Floor, result(12.0, 100.0, 200.0)),
            gw_big,
            lite_big,
            floor_stream,
            gw_stream,
            Run::unsupported(
                &stream,
                Target::Litellm,
                "HTTP 400, streaming is not supported".into(),
            ),
        ],
        micro: vec![Micro {
            id: "pick_lease_release/idle/10000".into(),
            median_ns: 420.0,
        }],
        targets: Vec::new(),
    }
}

fn target<'a>(rows: &'a [TargetRow], starts: &str) -> &'a TargetRow {
    rows.iter().find(|r| r.target.starts_with(starts)).unwrap()
}

#[test]
fn targets_are_ratios_against_the_floor_and_litellm() {
    let rows = evaluate(&sample_report());
    let p50 = target(&rows, "c16 small responses: added p50");
    assert_eq!((p50.met, p50.measured.as_str()), (Some(true), "0.200 ms"));
    let p99 = target(&rows, "c16 small responses: added p99");
    assert_eq!(p99.met, Some(true));
    let throughput = target(&rows, "c64 small responses: throughput");
    assert_eq!(throughput.met, Some(false));
    assert_eq!(throughput.miss_by, "25 points");
    assert!(!throughput.why.is_empty());
    let big = target(&rows, "3840x2160 c64: added p50");
    assert_eq!(big.met, Some(true), "{big:?}");
    let rss = target(&rows, "gateway peak RSS ≤ 100 MiB");
    assert_eq!((rss.met, rss.miss_by.as_str()), (Some(false), "200.0 MiB"));
    assert_eq!(target(&rows, "gateway peak RSS ≤ 150 MiB").met, None);
    let pick = target(
        &rows,
        "dispatcher pick+lease+release ≤ 1 µs median, 10,000 accounts (idle)",
    );
    assert_eq!((pick.met, pick.measured.as_str()), (Some(true), "420.0 ns"));
    let vs = target(&rows, "small-c16: added p50 below LiteLLM's");
    assert_eq!(vs.met, Some(true));
    let mem = target(&rows, "image-3840x2160-c64: peak RSS below LiteLLM's");
    assert_eq!(mem.met, Some(true));
    let stream = target(&rows, "stream-1024x1024-c1: added first-event p50");
    assert_eq!(stream.met, Some(true));
    assert!(stream.measured.contains("not supported (HTTP 400"), "{stream:?}");
}

#[test]
fn rendering_shows_every_section_and_the_unsupported_cells() {
    let mut report = sample_report();
    report.targets = evaluate(&report);
    let md = render(&report);
    for heading in [
        "### Targets",
        "### (a)",
        "### (b)",
        "### (c)",
        "### (d)",
        "### (e)",
    ] {
        assert!(md.contains(heading), "{heading} missing");
    }
    assert!(
        md.contains("| 16 | imagegate | 20000 | 0.50 | 1.20 | 0.20 | 0.50 | 0 |"),
        "{md}"
    );
    assert!(
        md.contains("| 16 | floor, sim on the gateway's CPU | 30000 | 0.40 | 0.90 | 0.10 | 0.20 | 0 |"),
        "the cross-CPU floor is compared with the floor: {md}"
    );
    assert!(
        md.contains(
            "| 1024x1024 | 1 | LiteLLM | – | not supported (HTTP 400, streaming is not supported) | – | – | – | – | – |"
        ),
        "{md}"
    );
    assert!(
        md.contains("| 1024x1024 | 1 | imagegate | 2.50 | 2.50 | 3.50 | 0.50 | 51.0 | 40.0 | 0 |"),
        "stream rows give the size, the stream's length and the peak RSS: {md}"
    );
    assert!(
        md.contains("| 5.00 ms (+5.0%) | 100 ms (+50.0%) | 6.00 ms (+5.0%) | 300.0 |"),
        "image rows compare the raw mean too: {md}"
    );
    assert!(md.contains("| `pick_lease_release/idle/10000` | 420.0 ns |"));
    assert!(md.contains("**missed**"));
    assert!(md.contains("321 s in all"));
}

#[test]
fn splice_keeps_the_hand_written_parts() {
    let doc = format!("# B\n\nintro\n\n{BEGIN}\nold\n{END}\n\n## Memory: before/after\nkept\n");
    let out = splice(&doc, "new table\n");
    assert_eq!(
        out,
        format!("# B\n\nintro\n\n{BEGIN}\nnew table\n{END}\n\n## Memory: before/after\nkept\n")
    );
    let appended = splice("# B\n\nintro\n", "first");
    assert_eq!(appended, format!("# B\n\nintro\n\n{BEGIN}\nfirst\n{END}\n"));
    assert_eq!(splice(&appended, "first"), appended);
}

#[test]
fn probes_without_images_or_streams_are_unsupported() {
    let answer = |status: u16, head: &str, b64: bool, first: bool| Answer {
        status,
        bytes: head.len() as u64,
        body_reads: 1,
        first_event: first.then(|| Duration::from_millis(1)),
        saw_b64_json: b64,
        head: head.into(),
    };
    assert_eq!(
        unsupported_reason(&answer(400, "{\"error\":\"no\"}\n", false, false), false).as_deref(),
        Some("HTTP 400, {\"error\":\"no\"}")
    );
    assert!(
        unsupported_reason(&answer(200, "{}", false, false), false)
            .unwrap()
            .contains("without an image")
    );
    assert!(
        unsupported_reason(&answer(200, "{\"data\"", true, false), true)
            .unwrap()
            .contains("without an event stream")
    );
    assert_eq!(
        unsupported_reason(&answer(200, "data: x", false, true), true),
        None
    );
    assert_eq!(
        unsupported_reason(&answer(200, "{\"b64_json\"", true, false), false),
        None
    );
}

#[test]
fn a_missed_image_target_says_which_cpu_paid_for_it() {
    let image = scenario("image-1024x1024-c16");
    let cpus = |relay_busy: f64, client_busy: f64| {
        vec![
            CpuUse {
                cpu: 0,
                user_ms: relay_busy,
                idle_ms: 1.0,
                ..CpuUse::default()
            },
            CpuUse {
                cpu: 1,
                user_ms: client_busy * 0.75,
                system_ms: client_busy * 0.25,
                ipis: if relay_busy > 0.0 { 2.5 } else { 0.0 },
                ..CpuUse::default()
            },
        ]
    };
    let mut floor = result(800.0, 20.0, 26.0);
    floor.cpu_per_answer = cpus(0.0, 1.20);
    let mut relayed = result(650.0, 24.0, 31.0);
    relayed.cpu_per_answer = cpus(0.25, 1.50);
    let mut across = result(900.0, 18.0, 24.0);
    across.cpu_per_answer = cpus(1.1, 0.3);
    let mut report = sample_report();
    report.machine.pinned = true;
    report.runs = vec![
        Run::measured(&image, Target::Floor, floor),
        Run::measured(&image, Target::FloorAcross, across),
        Run::measured(&image, Target::Imagegate, relayed),
    ];
    report.targets = evaluate(&report);
    let row = target(&report.targets, "1024x1024 c16: added p50");
    assert_eq!(row.met, Some(false), "{row:?}");
    assert!(
        row.why.starts_with(
            "CPU 1 (load generator and simulator) was busy 1.50 ms per answer against the floor's 1.20 ms (+25.0%, 0% idle) and was woken from the other CPU 2.5 times per answer (IPIs) against the floor's 0.0, while the gateway's CPU 0 was 80% idle"
        ),
        "{row:?}"
    );
    let md = render(&report);
    assert!(
        md.contains("| 1024x1024 | 16 | imagegate | 0.25 (0.25 / 0.00 / 0.00) | 80% | 1.50 (1.12 / 0.38 / 0.00) | 0% | 0.0 / 2.5 | +0.30 ms (+25.0%) |"),
        "{md}"
    );
    assert!(
        md.contains("| 1024x1024 | 16 | floor (sim) | 0.00 (0.00 / 0.00 / 0.00) | 100% | 1.20 (0.90 / 0.30 / 0.00) | 0% | 0.0 / 0.0 | – |"),
        "{md}"
    );
    assert!(
        md.contains("| 1024x1024 | 16 | floor, sim on the gateway's CPU | 1.10 (1.10 / 0.00 / 0.00) | 48% | 0.30 (0.22 / 0.07 / 0.00) | 0% | 0.0 / 2.5 | – |"),
        "the cross-CPU floor is no relay: {md}"
    );

    // Without pinning the CPUs have no roles: no table, and no cause named.
    report.machine.pinned = false;
    report.targets = evaluate(&report);
    let row = target(&report.targets, "1024x1024 c16: added p50");
    assert_eq!(row.why, "see \"Why the misses\" below");
    assert!(!render(&report).contains("CPU time per answer"));
}

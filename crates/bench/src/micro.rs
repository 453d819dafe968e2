//! Criterion microbenchmarks: the dispatcher (pick + lease + release), size validation and SSE
//! encoding, run with short measurement times; medians are read from
//! `target/criterion/**/new/estimates.json`.

use std::path::Path;
use std::process::Command;

use serde::Serialize;

/// `(package, bench target)` of every microbenchmark the report shows.
pub const BENCHES: [(&str, &str); 3] = [
    ("imagegate-dispatch", "pick"),
    ("imagegate-domain", "size"),
    ("imagegate-codec", "sse"),
];

/// Criterion options: the quick mode trades precision for time.
pub fn criterion_args(quick: bool) -> Vec<&'static str> {
    if quick {
        vec![
            "--warm-up-time",
            "0.2",
            "--measurement-time",
            "0.5",
            "--sample-size",
            "10",
        ]
    } else {
        vec![
            "--warm-up-time",
            "0.5",
            "--measurement-time",
            "2",
            "--sample-size",
            "30",
        ]
    }
}

/// The shell form of the bench command, for the report.
pub fn commands(quick: bool) -> Vec<String> {
    vec![format!(
        "cargo bench {} -- --noplot {}",
        selection().join(" "),
        criterion_args(quick).join(" ")
    )]
}

/// `-p <package> --bench <bench>` for every bench, in one cargo invocation. Building and running
/// select the same set, so cargo unifies the same features both times: a run uses exactly what the
/// build compiled (run one package at a time, a first run compiled every bench a second time).
fn selection() -> Vec<&'static str> {
    BENCHES
        .iter()
        .flat_map(|(package, bench)| ["-p", package, "--bench", bench])
        .collect()
}

fn build_command() -> Command {
    let mut command = Command::new("cargo");
    command.args(["bench", "--no-run"]).args(selection());
    command
}

fn run_command(quick: bool) -> Command {
    let mut command = Command::new("cargo");
    command
        .args(["bench", "-q"])
        .args(selection())
        .args(["--", "--noplot"])
        .args(criterion_args(quick));
    command
}

/// Builds the bench binaries (`cargo bench --no-run`), before the CPUs are pinned.
pub fn build(root: &Path) -> Result<(), String> {
    super::status(build_command().current_dir(root))
}

/// Runs every bench.
pub fn run(root: &Path, quick: bool) -> Result<(), String> {
    super::status(run_command(quick).current_dir(root))
}

/// One benchmark's median.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Micro {
    /// Criterion id, e.g. `pick_lease_release/idle/10000`.
    pub id: String,
    /// Median time per iteration, nanoseconds.
    pub median_ns: f64,
}

/// Every `new/estimates.json` under `criterion_dir` whose id starts with one of `groups`, sorted.
pub fn collect(criterion_dir: &Path, groups: &[&str]) -> Vec<Micro> {
    let mut found = Vec::new();
    walk(criterion_dir, criterion_dir, &mut found);
    found.retain(|m: &Micro| groups.iter().any(|g| m.id.starts_with(&format!("{g}/"))));
    found.sort_by_key(|m| natural_key(&m.id));
    found
}

fn walk(base: &Path, dir: &Path, found: &mut Vec<Micro>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if !path.is_dir() {
            continue;
        }
        let estimates = path.join("new/estimates.json");
        if path
            .file_name()
            .is_some_and(|n| n != "report" && n != "new" && n != "base")
        {
            if let Some(median) = std::fs::read_to_string(&estimates)
                .ok()
                .and_then(|text| median_ns(&text))
            {
                let id = path
                    .strip_prefix(base)
                    .map(|p| p.to_string_lossy().into_owned())
                    .unwrap_or_default();
                found.push(Micro {
                    id,
                    median_ns: median,
                });
            }
            walk(base, &path, found);
        }
    }
}

/// `median.point_estimate` of a criterion `estimates.json`, in nanoseconds.
pub fn median_ns(estimates_json: &str) -> Option<f64> {
    let value: serde_json::Value = serde_json::from_str(estimates_json).ok()?;
    value.get("median")?.get("point_estimate")?.as_f64()
}

/// Sort key that orders `idle/10` before `idle/1000` before `idle/10000`.
fn natural_key(id: &str) -> Vec<(String, u64)> {
    id.split('/')
        .map(|part| match part.parse::<u64>() {
            Ok(n) => (String::new(), n),
            Err(_) => (part.to_owned(), 0),
        })
        .collect()
}

/// A duration in nanoseconds as text with a fitting unit.
pub fn format_ns(ns: f64) -> String {
    if ns < 1_000.0 {
        format!("{ns:.1} ns")
    } else if ns < 1_000_000.0 {
        format!("{:.2} µs", ns / 1_000.0)
    } else {
        format!("{:.2} ms", ns / 1_000_000.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(command: &Command) -> Vec<String> {
        command
            .get_args()
            .map(|arg| arg.to_string_lossy().into_owned())
            .collect()
    }

    #[test]
    fn the_run_selects_exactly_what_the_build_compiled() {
        let built = args(&build_command());
        let ran = args(&run_command(false));
        let selected = |all: &[String]| -> Vec<String> {
            all.iter()
                .skip_while(|arg| !arg.starts_with("-p"))
                .take_while(|arg| *arg != "--")
                .cloned()
                .collect()
        };
        assert_eq!(selected(&built), selected(&ran));
        assert_eq!(selected(&built).len(), BENCHES.len() * 4);
        assert!(
            ran.ends_with(&["30".to_owned()]),
            "criterion's options follow: {ran:?}"
        );
        assert_eq!(commands(false).len(), 1, "one command, as run");
    }

    const ESTIMATES: &str = r#"{"mean":{"confidence_interval":{"confidence_level":0.95,"lower_bound":410.0,"upper_bound":430.0},"point_estimate":420.5,"standard_error":3.0},"median":{"confidence_interval":{"confidence_level":0.95,"lower_bound":400.0,"upper_bound":415.0},"point_estimate":407.25,"standard_error":2.0},"median_abs_dev":null,"slope":null,"std_dev":null}"#;

    #[test]
    fn median_is_read_from_estimates() {
        assert_eq!(median_ns(ESTIMATES), Some(407.25));
        assert_eq!(median_ns("{}"), None);
        assert_eq!(median_ns("not json"), None);
    }

    #[test]
    fn estimates_are_collected_by_id_in_natural_order() {
        let dir = std::env::temp_dir().join(format!("imagegate-bench-micro-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        for id in [
            "pick_lease_release/idle/10000",
            "pick_lease_release/idle/10",
            "other/x",
        ] {
            let new = dir.join(id).join("new");
            std::fs::create_dir_all(&new).unwrap();
            std::fs::write(new.join("estimates.json"), ESTIMATES).unwrap();
            // Criterion's previous run and HTML report folders are not estimates of their own.
            std::fs::create_dir_all(dir.join(id).join("base")).unwrap();
        }
        std::fs::create_dir_all(dir.join("report")).unwrap();
        let found = collect(&dir, &["pick_lease_release"]);
        let ids: Vec<&str> = found.iter().map(|m| m.id.as_str()).collect();
        assert_eq!(
            ids,
            ["pick_lease_release/idle/10", "pick_lease_release/idle/10000"]
        );
        assert_eq!(found[0].median_ns, 407.25);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn durations_get_units() {
        assert_eq!(format_ns(12.34), "12.3 ns");
        assert_eq!(format_ns(1_500.0), "1.50 µs");
        assert_eq!(format_ns(2_500_000.0), "2.50 ms");
    }
}

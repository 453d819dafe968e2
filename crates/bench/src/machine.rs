//! A description of the machine and the code the figures were measured on.

use std::path::Path;
use std::process::Command;

use serde::Serialize;

/// The machine, its load and the code.
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct Machine {
    /// `model name` of the first CPU.
    pub cpu: String,
    /// Online CPUs.
    pub cpus: usize,
    /// `MemTotal`, GiB.
    pub memory_gib: f64,
    /// `uname -sr`.
    pub kernel: String,
    /// `rustc -V`.
    pub rustc: String,
    /// `git rev-parse --short HEAD` (with `-dirty` when the tree has changes besides the report the
    /// run rewrites).
    pub commit: String,
    /// 1-minute load average when the run started.
    pub load_average: f64,
    /// Whether the gateway and the load generator ran on separate CPUs.
    pub pinned: bool,
    /// The default TCP congestion control (`net.ipv4.tcp_congestion_control`). With `bbr` and no
    /// `fq` qdisc, TCP paces its own sends with a timer, on loopback too.
    pub tcp_congestion: String,
    /// UTC start of the run, RFC 3339.
    pub started_utc: String,
}

impl Machine {
    /// Reads everything from `/proc` and a few commands; unknown parts stay empty.
    pub fn probe(root: &Path, pinned: bool) -> Self {
        let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
        let meminfo = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
        let loadavg = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
        let dirty = has_changes_besides_the_report(&output(root, "git", &["status", "--porcelain"]));
        let mut commit = output(root, "git", &["rev-parse", "--short", "HEAD"]);
        if dirty {
            commit.push_str("-dirty");
        }
        Self {
            cpu: cpu_model(&cpuinfo),
            // Counted from /proc/cpuinfo: `available_parallelism` follows this process's affinity,
            // which is one CPU once the harness has pinned itself.
            cpus: cpu_count(&cpuinfo)
                .unwrap_or_else(|| std::thread::available_parallelism().map_or(0, |n| n.get())),
            memory_gib: mem_total_kib(&meminfo) as f64 / (1024.0 * 1024.0),
            kernel: output(root, "uname", &["-sr"]),
            rustc: output(root, "rustc", &["-V"]),
            commit,
            load_average: loadavg
                .split_whitespace()
                .next()
                .and_then(|v| v.parse().ok())
                .unwrap_or(0.0),
            pinned,
            tcp_congestion: std::fs::read_to_string("/proc/sys/net/ipv4/tcp_congestion_control")
                .unwrap_or_default()
                .trim()
                .to_owned(),
            started_utc: output(root, "date", &["-u", "+%Y-%m-%dT%H:%M:%SZ"]),
        }
    }
}

fn output(root: &Path, program: &str, args: &[&str]) -> String {
    Command::new(program)
        .args(args)
        .current_dir(root)
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
        .unwrap_or_default()
}

/// Whether `git status --porcelain` lists a change to anything but the report a run rewrites
/// (`docs/benchmarks.md` and `.json`): the last run's report does not make the code "dirty".
pub fn has_changes_besides_the_report(porcelain: &str) -> bool {
    const REPORT: [&str; 2] = ["docs/benchmarks.md", "docs/benchmarks.json"];
    porcelain
        .lines()
        .filter_map(|line| line.get(3..))
        .any(|path| !REPORT.contains(&path))
}

/// `model name` of the first processor in a `/proc/cpuinfo` text.
pub fn cpu_model(cpuinfo: &str) -> String {
    cpuinfo
        .lines()
        .find(|l| l.starts_with("model name"))
        .and_then(|l| l.split_once(':'))
        .map(|(_, v)| v.trim().to_owned())
        .unwrap_or_default()
}

/// `MemTotal` of a `/proc/meminfo` text, KiB.
pub fn mem_total_kib(meminfo: &str) -> u64 {
    meminfo
        .lines()
        .find(|l| l.starts_with("MemTotal:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_last_report_leaves_the_tree_clean() {
        assert!(!has_changes_besides_the_report(""));
        assert!(!has_changes_besides_the_report(
            " M docs/benchmarks.json\n M docs/benchmarks.md\n"
        ));
        assert!(has_changes_besides_the_report(
            " M docs/benchmarks.md\n M crates/server/src/relay/stream.rs\n"
        ));
        assert!(has_changes_besides_the_report("?? notes.txt\n"));
        assert!(has_changes_besides_the_report(" M docs/architecture.md\n"));
    }

    #[test]
    fn cpu_and_memory_are_read() {
        let cpuinfo = "processor\t: 0\nmodel name\t: Intel(R) Xeon(R) Processor\nflags\t: x\n";
        assert_eq!(cpu_model(cpuinfo), "Intel(R) Xeon(R) Processor");
        assert_eq!(
            mem_total_kib("MemTotal:       25165824 kB\nMemFree: 1 kB\n"),
            25_165_824
        );
        assert_eq!(cpu_model(""), "");
    }
}

/// The machine's CPUs: the `processor` entries of `/proc/cpuinfo`.
fn cpu_count(cpuinfo: &str) -> Option<usize> {
    let count = cpuinfo
        .lines()
        .filter(|line| line.split(':').next().is_some_and(|k| k.trim() == "processor"))
        .count();
    (count > 0).then_some(count)
}

#[cfg(test)]
mod cpu_count_tests {
    use super::cpu_count;

    #[test]
    fn counts_processor_entries_not_the_affinity() {
        let info = "processor\t: 0\nmodel name\t: X\n\nprocessor\t: 1\nmodel name\t: X\n";
        assert_eq!(cpu_count(info), Some(2));
        assert_eq!(cpu_count(""), None);
    }
}

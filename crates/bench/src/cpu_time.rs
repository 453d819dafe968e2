//! CPU time by CPU over the measured windows, from `/proc/stat`. With the CPUs shared out by
//! pinning (the relay on one, the load generator and the simulator on the other), this shows on
//! which CPU a relay's cost lands, and whether the CPU that limits the floor is the one that
//! limits the relay. With them come the interprocessor interrupts each CPU received
//! (`/proc/interrupts`: rescheduling and function-call IPIs), which count the wakeups another CPU
//! sent it: a request or an answer crossing CPUs.

use serde::Serialize;

/// `/proc/stat` counts in `USER_HZ` ticks, which Linux fixes at 100 per second for user space.
const TICK_MS: f64 = 10.0;

/// One CPU's counters, ticks.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Ticks {
    /// CPU number (`cpuN`): `/proc/stat` lists online CPUs only, so a position is not a number.
    cpu: usize,
    /// `user` + `nice` (guest time is already in `user`).
    user: u64,
    system: u64,
    /// `irq` + `softirq`.
    irq: u64,
    /// `idle` + `iowait`.
    idle: u64,
    /// Time the hypervisor ran something else while this CPU wanted to run.
    steal: u64,
    /// Rescheduling and function-call interrupts received (a count, not ticks).
    ipis: u64,
}

impl Ticks {
    fn minus(self, earlier: Self) -> Self {
        Self {
            cpu: self.cpu,
            user: self.user.saturating_sub(earlier.user),
            system: self.system.saturating_sub(earlier.system),
            irq: self.irq.saturating_sub(earlier.irq),
            idle: self.idle.saturating_sub(earlier.idle),
            steal: self.steal.saturating_sub(earlier.steal),
            ipis: self.ipis.saturating_sub(earlier.ipis),
        }
    }

    fn plus(self, other: Self) -> Self {
        Self {
            cpu: self.cpu,
            user: self.user + other.user,
            system: self.system + other.system,
            irq: self.irq + other.irq,
            idle: self.idle + other.idle,
            steal: self.steal + other.steal,
            ipis: self.ipis + other.ipis,
        }
    }
}

/// Every CPU's counters at one moment, in CPU order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Snapshot(Vec<Ticks>);

impl Snapshot {
    /// The counters now; empty where `/proc/stat` cannot be read, and without IPIs where
    /// `/proc/interrupts` cannot.
    pub fn read() -> Self {
        let read = |path: &str| std::fs::read_to_string(path).unwrap_or_default();
        Self::parse(&read("/proc/stat"), &read("/proc/interrupts"))
    }

    /// The per-CPU lines (`cpuN user nice system idle iowait irq softirq steal ...`) of a
    /// `/proc/stat` text, the `cpu` total line and anything unreadable skipped, with each CPU's
    /// IPIs from the `RES` and `CAL` rows of a `/proc/interrupts` text.
    pub fn parse(stat: &str, interrupts: &str) -> Self {
        let ipis = ipis_by_column(interrupts);
        let mut cpus: Vec<Ticks> = stat.lines().filter_map(cpu_line).collect();
        for ticks in &mut cpus {
            ticks.ipis = ipis.get(&ticks.cpu).copied().unwrap_or(0);
        }
        cpus.sort_by_key(|ticks| ticks.cpu);
        Self(cpus)
    }

    /// What each CPU spent between `earlier` and this snapshot (CPUs in both only).
    pub fn since(&self, earlier: &Snapshot) -> Spent {
        Spent(
            self.0
                .iter()
                .filter_map(|now| {
                    let then = earlier.0.iter().find(|then| then.cpu == now.cpu)?;
                    Some(now.minus(*then))
                })
                .collect(),
        )
    }
}

fn cpu_line(line: &str) -> Option<Ticks> {
    let mut fields = line.split_whitespace();
    let cpu = fields.next()?.strip_prefix("cpu")?.parse().ok()?;
    let values: Vec<u64> = fields.map(str::parse).collect::<Result<_, _>>().ok()?;
    let field = |at: usize| values.get(at).copied().unwrap_or(0);
    (values.len() >= 4).then(|| Ticks {
        cpu,
        user: field(0) + field(1),
        system: field(2),
        idle: field(3) + field(4),
        irq: field(5) + field(6),
        steal: field(7),
        ipis: 0,
    })
}

/// The rescheduling (`RES`) and function-call (`CAL`) IPIs of each CPU in a `/proc/interrupts`
/// text, by CPU number. Its header names the columns (`CPU0 CPU1 ...`, online CPUs only); a row
/// is its name and one count per column.
fn ipis_by_column(interrupts: &str) -> std::collections::BTreeMap<usize, u64> {
    let mut lines = interrupts.lines();
    let columns: Vec<usize> = lines
        .next()
        .map(|header| {
            header
                .split_whitespace()
                .filter_map(|name| name.strip_prefix("CPU")?.parse().ok())
                .collect()
        })
        .unwrap_or_default();
    let mut ipis = std::collections::BTreeMap::new();
    for line in lines {
        let mut fields = line.split_whitespace();
        if !matches!(fields.next(), Some("RES:" | "CAL:")) {
            continue;
        }
        for (cpu, count) in columns.iter().zip(fields.map_while(|f| f.parse::<u64>().ok())) {
            *ipis.entry(*cpu).or_insert(0) += count;
        }
    }
    ipis
}

/// Ticks each CPU spent over one or more windows; empty when the counters could not be read.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Spent(Vec<Ticks>);

impl Spent {
    /// Whether there are no counters.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Adds another window's ticks, CPU by CPU.
    pub fn add(&mut self, other: &Spent) {
        for more in &other.0 {
            match self.0.iter_mut().find(|own| own.cpu == more.cpu) {
                Some(own) => *own = own.plus(*more),
                None => self.0.push(*more),
            }
        }
        self.0.sort_by_key(|ticks| ticks.cpu);
    }

    /// Each CPU's time per answer, ms; empty without answers or counters.
    pub fn per_answer(&self, answers: u64) -> Vec<CpuUse> {
        if answers == 0 {
            return Vec::new();
        }
        let ms = |ticks: u64| ticks as f64 * TICK_MS / answers as f64;
        self.0
            .iter()
            .map(|ticks| CpuUse {
                cpu: ticks.cpu,
                user_ms: ms(ticks.user),
                system_ms: ms(ticks.system),
                irq_ms: ms(ticks.irq),
                idle_ms: ms(ticks.idle),
                steal_ms: ms(ticks.steal),
                ipis: ticks.ipis as f64 / answers as f64,
            })
            .collect()
    }
}

/// What one CPU spent per answer over the measured windows, ms (`/proc/stat` ticks are 10 ms, so
/// a few seconds of windows give two or three significant digits).
#[derive(Debug, Clone, Copy, Default, Serialize, PartialEq)]
pub struct CpuUse {
    /// CPU number.
    pub cpu: usize,
    /// User space.
    pub user_ms: f64,
    /// Kernel, outside interrupts.
    pub system_ms: f64,
    /// Hard and soft interrupts (on loopback, a segment's receiving side runs in the softirq of
    /// the CPU that sent it).
    pub irq_ms: f64,
    /// Idle.
    pub idle_ms: f64,
    /// Taken by the hypervisor.
    pub steal_ms: f64,
    /// Rescheduling and function-call IPIs received (wakeups sent from another CPU), per answer.
    pub ipis: f64,
}

impl CpuUse {
    /// User, kernel and interrupt time together.
    pub fn busy_ms(&self) -> f64 {
        self.user_ms + self.system_ms + self.irq_ms
    }

    /// Idle share of the whole window, percent.
    pub fn idle_percent(&self) -> f64 {
        self.share(self.idle_ms)
    }

    /// Stolen share of the whole window, percent.
    pub fn steal_percent(&self) -> f64 {
        self.share(self.steal_ms)
    }

    fn share(&self, part: f64) -> f64 {
        let all = self.busy_ms() + self.idle_ms + self.steal_ms;
        if all > 0.0 { part / all * 100.0 } else { 0.0 }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const BEFORE: &str = "cpu  300 0 60 900 0 0 10 0 0 0\n\
        cpu1 200 5 40 100 1 2 3 0 0 0\n\
        cpu0 100 0 20 800 0 0 5 0 0 0\n\
        intr 123 4 5\n\
        ctxt 9999\n";
    const AFTER: &str = "cpu  500 0 100 1100 0 0 20 0 0 0\n\
        cpu0 120 0 30 970 0 0 8 0 0 0\n\
        cpu1 375 10 70 101 1 4 9 0 0 0\n\
        intr 456 4 5\n";

    #[test]
    fn per_cpu_lines_are_read_in_cpu_order_and_the_total_is_skipped() {
        let snapshot = Snapshot::parse(BEFORE, "");
        assert_eq!(snapshot.0.len(), 2);
        assert_eq!(
            snapshot.0[1],
            Ticks {
                cpu: 1,
                user: 205,
                system: 40,
                irq: 5,
                idle: 101,
                steal: 0,
                ipis: 0,
            }
        );
    }

    #[test]
    fn a_window_is_divided_among_its_answers() {
        let spent = Snapshot::parse(AFTER, "").since(&Snapshot::parse(BEFORE, ""));
        let per_answer = spent.per_answer(100);
        assert_eq!(per_answer.len(), 2);
        let client = per_answer[1];
        // 180 user, 30 system, 8 irq, 1 idle ticks of 10 ms over 100 answers.
        assert_eq!(
            (client.user_ms, client.system_ms, client.irq_ms, client.idle_ms),
            (18.0, 3.0, 0.8, 0.1)
        );
        assert!((client.busy_ms() - 21.8).abs() < 1e-9);
        let server = per_answer[0];
        assert_eq!(server.cpu, 0);
        // 20 + 10 + 3 busy against 170 idle ticks.
        assert!((server.idle_percent() - 170.0 / 203.0 * 100.0).abs() < 1e-9);
    }

    #[test]
    fn windows_add_up() {
        let one = Snapshot::parse(AFTER, "").since(&Snapshot::parse(BEFORE, ""));
        let mut pooled = Spent::default();
        pooled.add(&one);
        pooled.add(&one);
        assert_eq!(pooled.per_answer(200), one.per_answer(100));
    }

    #[test]
    fn nothing_to_divide_gives_nothing() {
        assert!(
            Snapshot::parse("", "")
                .since(&Snapshot::parse("", ""))
                .per_answer(5)
                .is_empty()
        );
        let spent = Snapshot::parse(AFTER, "").since(&Snapshot::parse(BEFORE, ""));
        assert!(spent.per_answer(0).is_empty());
        assert!(Snapshot::parse("cpu0 1 2\ncpuX 1 2 3 4\n", "").0.is_empty());
    }

    #[test]
    fn stolen_time_counts_in_the_window_but_not_as_busy_or_idle() {
        let before = Snapshot::parse("cpu0 0 0 0 0 0 0 0 0\n", "");
        let after = Snapshot::parse("cpu0 50 0 10 30 0 0 0 10\n", "");
        let use_ = after.since(&before).per_answer(10)[0];
        assert_eq!((use_.busy_ms(), use_.steal_ms), (60.0, 10.0));
        assert!((use_.idle_percent() - 30.0).abs() < 1e-9);
        assert!((use_.steal_percent() - 10.0).abs() < 1e-9);
    }

    #[test]
    fn cpus_keep_their_numbers_across_gaps_and_changes() {
        // CPU 1 offline: CPU 2 stays CPU 2, and a CPU missing from one snapshot is left out.
        let before = Snapshot::parse("cpu0 1 0 0 1\ncpu2 1 0 0 1\ncpu3 1 0 0 1\n", "");
        let after = Snapshot::parse("cpu2 11 0 0 1\ncpu0 3 0 0 1\n", "");
        let spent = after.since(&before);
        let cpus: Vec<(usize, f64)> = spent.per_answer(1).iter().map(|c| (c.cpu, c.user_ms)).collect();
        assert_eq!(cpus, vec![(0, 20.0), (2, 100.0)]);
        let mut pooled = Spent::default();
        pooled.add(&Snapshot::parse("cpu2 5 0 0 0\n", "").since(&Snapshot::parse("cpu2 0 0 0 0\n", "")));
        pooled.add(&spent);
        let cpus: Vec<(usize, f64)> = pooled.per_answer(1).iter().map(|c| (c.cpu, c.user_ms)).collect();
        assert_eq!(cpus, vec![(0, 20.0), (2, 150.0)]);
    }

    const INTERRUPTS_BEFORE: &str = "            CPU0       CPU1       \n\
        \x20 0:         41          0   IO-APIC   2-edge      timer\n\
        NMI:          0          0   Non-maskable interrupts\n\
        RES:        100        200   Rescheduling interrupts\n\
        CAL:         10         20   Function call interrupts\n\
        TLB:          5          5   TLB shootdowns\n";
    const INTERRUPTS_AFTER: &str = "            CPU0       CPU1       \n\
        RES:        130        400   Rescheduling interrupts\n\
        CAL:         10        120   Function call interrupts\n\
        TLB:          9          9   TLB shootdowns\n";

    #[test]
    fn rescheduling_and_function_call_ipis_are_counted_per_cpu_and_answer() {
        let spent =
            Snapshot::parse(AFTER, INTERRUPTS_AFTER).since(&Snapshot::parse(BEFORE, INTERRUPTS_BEFORE));
        let ipis: Vec<(usize, f64)> = spent.per_answer(10).iter().map(|c| (c.cpu, c.ipis)).collect();
        // CPU 0: 30 RES; CPU 1: 200 RES + 100 CAL; timer and TLB rows do not count.
        assert_eq!(ipis, vec![(0, 3.0), (1, 30.0)]);
    }

    #[test]
    fn ipis_follow_the_header_columns_and_are_absent_without_the_file() {
        // CPU 1 offline: the second column is CPU 2.
        let snapshot = Snapshot::parse(
            "cpu0 1 0 0 1\ncpu2 1 0 0 1\n",
            "    CPU0   CPU2\nRES:  7  9  Rescheduling interrupts\n",
        );
        let ipis: Vec<(usize, u64)> = snapshot.0.iter().map(|t| (t.cpu, t.ipis)).collect();
        assert_eq!(ipis, vec![(0, 7), (2, 9)]);
        let without = Snapshot::parse("cpu0 1 0 0 1\n", "");
        assert_eq!(without.0[0].ipis, 0);
    }
}

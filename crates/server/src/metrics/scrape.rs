//! Metrics read at scrape time: the pool's load and cooldowns, the usage writer's queue and counters.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

use imagegate_dispatch::{AccountSnapshot, AccountStatus, LimitScope, PoolSnapshot, SizeClass};
use imagegate_store::WriterStats;

use super::Metrics;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ClassLabels {
    account: String,
    size_class: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct CooldownLabels {
    account: String,
    scope: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct AccountLabels {
    account: String,
}

/// The value of a class gauge for an account and size class.
type ClassGetter = fn(&AccountSnapshot, SizeClass) -> u32;

/// The value of a usage gauge from the writer's counters.
type UsageGetter = fn(&WriterStats) -> u64;

/// Per-account gauges with one series per account and size class: metric name, help text, and
/// the value for an account and class. Registered (so rendered) in this order.
const CLASS_GAUGES: [(&str, &str, ClassGetter); 2] = [
    (
        "account_in_flight",
        "Requests in flight on an upstream account, per size class",
        |account, class| account.in_flight.get(class),
    ),
    (
        "account_limit",
        "Concurrency limit of an upstream account, per size class",
        |account, class| account.limits.for_class(class),
    ),
];

/// The size classes of [`CLASS_GAUGES`] and their label values.
const CLASSES: [(SizeClass, &str); 2] = [(SizeClass::Large, "large"), (SizeClass::Standard, "standard")];

/// The usage writer's queue: metric name, help text, and the value from the writer's stats.
const USAGE_QUEUE: (&str, &str, UsageGetter) = (
    "usage_queue_depth",
    "Usage records accepted but not yet written to the database",
    |writer| writer.pending as u64,
);

/// Counters of the usage writer (they only grow over a process's life; exposed with `_total`):
/// metric name, help text, and the value from the writer's stats. Registered (so rendered) in
/// this order, after the queue.
const USAGE_COUNTERS: [(&str, &str, UsageGetter); 6] = [
    (
        "usage_records_written",
        "Usage records written by this process",
        |writer| writer.written,
    ),
    (
        "usage_records_rejected",
        "Usage records the writer refused (queue full or stopped)",
        |writer| writer.rejected,
    ),
    (
        "usage_records_spooled",
        "Usage records put in the local spool while the database was unreachable",
        |writer| writer.spooled,
    ),
    (
        "usage_records_replayed",
        "Spooled usage records later written to the database",
        |writer| writer.replayed,
    ),
    (
        "usage_spool_write_failures",
        "Failed appends to the usage spool (disk full?); those records stayed in memory",
        |writer| writer.failed_spool_writes,
    ),
    (
        "usage_records_set_aside",
        "Usage records the database refused one by one, set aside in the spool's *.rejected file",
        |writer| writer.set_aside,
    ),
];

/// The gauges a scrape refreshes.
///
/// The cooldown and usable gauges stay outside the tables: their label sets (scope, none) and,
/// for the cooldown, value type (seconds as `f64`) differ from the class gauges'.
#[derive(Debug)]
pub(super) struct ScrapeGauges {
    /// One family per entry of [`CLASS_GAUGES`], with its getter.
    account_class: Vec<(Family<ClassLabels, Gauge>, ClassGetter)>,
    account_cooldown: Family<CooldownLabels, Gauge<f64, std::sync::atomic::AtomicU64>>,
    account_usable: Family<AccountLabels, Gauge>,
    /// The writer's queue ([`USAGE_QUEUE`]).
    usage_queue: (Gauge, UsageGetter),
    /// One counter per entry of [`USAGE_COUNTERS`], with its getter.
    usage_counters: Vec<(Counter, UsageGetter)>,
    /// Held from a scrape's update of these gauges to the end of its encoding: another scrape
    /// clearing the account families in between would leave this one's output without them.
    scraping: parking_lot::Mutex<()>,
}

impl ScrapeGauges {
    pub(super) fn register(registry: &mut Registry) -> Self {
        let account_class = CLASS_GAUGES
            .iter()
            .map(|&(name, help, get)| (registered(registry, name, help), get))
            .collect();
        let account_cooldown = registered(
            registry,
            "account_cooldown_seconds",
            "Seconds left in an account's cooldown (scope all: every request; images: image requests)",
        );
        let account_usable = registered(
            registry,
            "account_usable",
            "1 when an account is active with status ok, else 0",
        );
        let (name, help, get) = USAGE_QUEUE;
        let usage_queue = (registered(registry, name, help), get);
        let usage_counters = USAGE_COUNTERS
            .iter()
            .map(|&(name, help, get)| (registered(registry, name, help), get))
            .collect();
        Self {
            account_class,
            account_cooldown,
            account_usable,
            usage_queue,
            usage_counters,
            scraping: parking_lot::Mutex::new(()),
        }
    }

    fn update(&self, pool: Option<&PoolSnapshot>, writer: &WriterStats) {
        let (queue, get) = &self.usage_queue;
        queue.set(saturating_i64(get(writer)));
        // Each counter follows the writer's own total (scrapes run one at a time).
        for (counter, get) in &self.usage_counters {
            let total = get(writer);
            counter.inc_by(total.saturating_sub(counter.get()));
        }
        // Accounts come and go: start from empty families so removed ones disappear.
        for (family, _) in &self.account_class {
            family.clear();
        }
        self.account_cooldown.clear();
        self.account_usable.clear();
        let Some(pool) = pool else { return };
        for account in &pool.accounts {
            let id = account.id.as_str().to_owned();
            for (class, class_label) in CLASSES {
                let labels = ClassLabels {
                    account: id.clone(),
                    size_class: class_label,
                };
                for (family, get) in &self.account_class {
                    family.get_or_create(&labels).set(i64::from(get(account, class)));
                }
            }
            for scope in [LimitScope::All, LimitScope::ImagesOnly] {
                let left = account
                    .cooldowns
                    .iter()
                    .filter(|c| c.scope == scope)
                    .map(|c| c.until.since(pool.at).as_secs_f64())
                    .fold(0.0, f64::max);
                let labels = CooldownLabels {
                    account: id.clone(),
                    scope: scope_label(scope),
                };
                self.account_cooldown.get_or_create(&labels).set(left);
            }
            let usable = account.active && account.status == AccountStatus::Ok;
            self.account_usable
                .get_or_create(&AccountLabels { account: id })
                .set(i64::from(usable));
        }
    }
}

/// A new metric of type `M`, registered under `name`; the returned handle shares its value.
fn registered<M>(registry: &mut Registry, name: &str, help: &str) -> M
where
    M: prometheus_client::registry::Metric + Default + Clone,
{
    let metric = M::default();
    registry.register(name, help, metric.clone());
    metric
}

fn scope_label(scope: LimitScope) -> &'static str {
    match scope {
        LimitScope::All => "all",
        LimitScope::ImagesOnly => "images",
    }
}

fn saturating_i64(value: u64) -> i64 {
    i64::try_from(value).unwrap_or(i64::MAX)
}

/// Refreshes the scrape-time gauges and encodes every metric as OpenMetrics text.
///
/// `pool` is `None` when the pool state could not be read (its gauges are then left out rather
/// than reported stale).
pub fn render(metrics: &Metrics, pool: Option<&PoolSnapshot>, writer: &WriterStats) -> String {
    let _scraping = metrics.scrape.scraping.lock();
    metrics.scrape.update(pool, writer);
    metrics.update_upload_disk();
    let mut out = String::with_capacity(8 * 1024);
    if let Err(err) = prometheus_client::encoding::text::encode(&mut out, &metrics.registry) {
        // Writing into a String cannot fail; keep whatever was written if it ever does.
        tracing::error!(error = %err, "metrics encoding failed");
    }
    out
}

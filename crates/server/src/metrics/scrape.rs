//! Gauges read at scrape time: the pool's load and cooldowns, the usage writer's queue.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

use imagegate_dispatch::{AccountStatus, LimitScope, PoolSnapshot};
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

/// The gauges a scrape refreshes.
#[derive(Debug)]
pub(super) struct ScrapeGauges {
    account_in_flight: Family<ClassLabels, Gauge>,
    account_limit: Family<ClassLabels, Gauge>,
    account_cooldown: Family<CooldownLabels, Gauge<f64, std::sync::atomic::AtomicU64>>,
    account_usable: Family<AccountLabels, Gauge>,
    usage_queue: Gauge,
    usage_written: Gauge,
    usage_rejected: Gauge,
    usage_spooled: Gauge,
    usage_replayed: Gauge,
    usage_spool_write_failures: Gauge,
}

impl ScrapeGauges {
    pub(super) fn register(registry: &mut Registry) -> Self {
        let gauges = Self {
            account_in_flight: Family::default(),
            account_limit: Family::default(),
            account_cooldown: Family::default(),
            account_usable: Family::default(),
            usage_queue: Gauge::default(),
            usage_written: Gauge::default(),
            usage_rejected: Gauge::default(),
            usage_spooled: Gauge::default(),
            usage_replayed: Gauge::default(),
            usage_spool_write_failures: Gauge::default(),
        };
        registry.register(
            "account_in_flight",
            "Requests in flight on an upstream account, per size class",
            gauges.account_in_flight.clone(),
        );
        registry.register(
            "account_limit",
            "Concurrency limit of an upstream account, per size class",
            gauges.account_limit.clone(),
        );
        registry.register(
            "account_cooldown_seconds",
            "Seconds left in an account's cooldown (scope all: every request; images: image requests)",
            gauges.account_cooldown.clone(),
        );
        registry.register(
            "account_usable",
            "1 when an account is active with status ok, else 0",
            gauges.account_usable.clone(),
        );
        registry.register(
            "usage_queue_depth",
            "Usage records accepted but not yet written to the database",
            gauges.usage_queue.clone(),
        );
        registry.register(
            "usage_records_written",
            "Usage records written by this process",
            gauges.usage_written.clone(),
        );
        registry.register(
            "usage_records_rejected",
            "Usage records the writer refused (queue full or stopped)",
            gauges.usage_rejected.clone(),
        );
        registry.register(
            "usage_records_spooled",
            "Usage records put in the local spool while the database was unreachable",
            gauges.usage_spooled.clone(),
        );
        registry.register(
            "usage_records_replayed",
            "Spooled usage records later written to the database",
            gauges.usage_replayed.clone(),
        );
        registry.register(
            "usage_spool_write_failures",
            "Failed appends to the usage spool (disk full?); those records stayed in memory",
            gauges.usage_spool_write_failures.clone(),
        );
        gauges
    }

    fn update(&self, pool: Option<&PoolSnapshot>, writer: &WriterStats) {
        self.usage_queue.set(saturating_i64(writer.pending as u64));
        self.usage_written.set(saturating_i64(writer.written));
        self.usage_rejected.set(saturating_i64(writer.rejected));
        self.usage_spooled.set(saturating_i64(writer.spooled));
        self.usage_replayed.set(saturating_i64(writer.replayed));
        self.usage_spool_write_failures
            .set(saturating_i64(writer.failed_spool_writes));
        // Accounts come and go: start from empty families so removed ones disappear.
        self.account_in_flight.clear();
        self.account_limit.clear();
        self.account_cooldown.clear();
        self.account_usable.clear();
        let Some(pool) = pool else { return };
        for account in &pool.accounts {
            let id = account.id.as_str().to_owned();
            for (class, in_flight, limit) in [
                ("large", account.in_flight.large, account.limits.large),
                ("standard", account.in_flight.standard, account.limits.standard),
            ] {
                let labels = ClassLabels {
                    account: id.clone(),
                    size_class: class,
                };
                self.account_in_flight
                    .get_or_create(&labels)
                    .set(i64::from(in_flight));
                self.account_limit.get_or_create(&labels).set(i64::from(limit));
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
    metrics.scrape.update(pool, writer);
    let mut out = String::with_capacity(8 * 1024);
    if let Err(err) = prometheus_client::encoding::text::encode(&mut out, &metrics.registry) {
        // Writing into a String cannot fail; keep whatever was written if it ever does.
        tracing::error!(error = %err, "metrics encoding failed");
    }
    out
}

//! Prometheus metrics of the gateway, served at `GET /metrics` (OpenMetrics text).
//!
//! Per request (observed once, when its usage record is finished, so every request counts exactly
//! once whatever path it ends on):
//!
//! | metric | labels | what |
//! |---|---|---|
//! | `imagegate_requests_total` | endpoint, status, model, size_class | requests answered |
//! | `imagegate_request_duration_seconds` | endpoint, size_class | arrival to last byte |
//! | `imagegate_upstream_duration_seconds` | endpoint, size_class | time spent waiting on upstream calls (every attempt, up to the upstream's last byte) |
//! | `imagegate_gateway_overhead_seconds` | endpoint | the request's duration minus its upstream time |
//! | `imagegate_pool_wait_seconds` | endpoint, size_class | time waiting for a free account slot (part of the overhead) |
//! | `imagegate_requests_in_flight` | – | requests being served |
//!
//! Read at scrape time: `imagegate_account_in_flight{account,size_class}`,
//! `imagegate_account_limit{account,size_class}`, `imagegate_account_cooldown_seconds{account,scope}`
//! (seconds left), `imagegate_account_usable{account}`, the usage writer's
//! `imagegate_usage_queue_depth` (a gauge) and its counters: records written, rejected, spooled,
//! replayed and set aside (`imagegate_usage_records_*_total`) and
//! `imagegate_usage_spool_write_failures_total`, and what edit uploads keep on disk against its bound
//! (`imagegate_upload_disk_bytes`, `imagegate_upload_disk_budget_bytes`).
//!
//! Label values are bounded: `model` is an accepted model id or `other`, never what a client typed.

mod scrape;

use std::collections::HashSet;
use std::sync::Arc;
use std::sync::atomic::AtomicI64;
use std::time::Duration;

use imagegate_codec::multipart::DiskBudget;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

pub use scrape::render;

/// Labels of the request counter.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RequestLabels {
    endpoint: &'static str,
    status: u16,
    model: String,
    size_class: &'static str,
}

/// Labels of the latency histograms.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct LatencyLabels {
    endpoint: &'static str,
    size_class: &'static str,
}

/// Labels of the overhead histogram.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct EndpointLabels {
    endpoint: &'static str,
}

type HistogramFamily<L> = Family<L, Histogram, fn() -> Histogram>;

/// What one finished request reports.
#[derive(Debug, Clone)]
pub struct RequestObservation<'a> {
    pub endpoint: &'a str,
    pub status: u16,
    pub model: &'a str,
    pub size_class: Option<imagegate_domain::SizeClass>,
    pub total: Duration,
    pub upstream: Duration,
    /// Time spent waiting for a free account slot (`None`: the request never asked for one).
    pub pool_wait: Option<Duration>,
    /// The keepalive of a non-streaming answer committed it to `200` before it was made.
    pub kept_alive: bool,
}

/// The gateway's metrics: per-request families updated as requests end, and the registry that
/// scrapes encode.
#[derive(Debug)]
pub struct Metrics {
    registry: Registry,
    requests: Family<RequestLabels, Counter>,
    duration: HistogramFamily<LatencyLabels>,
    upstream: HistogramFamily<LatencyLabels>,
    overhead: HistogramFamily<EndpointLabels>,
    pool_wait: HistogramFamily<LatencyLabels>,
    kept_alive: Family<EndpointLabels, Counter>,
    in_flight: Gauge<i64, AtomicI64>,
    known_models: HashSet<String>,
    scrape: scrape::ScrapeGauges,
    /// What edit uploads keep on disk, and its gauge, set at scrape time.
    upload_disk: Option<(Arc<DiskBudget>, Gauge)>,
}

/// Seconds, from 1 ms to about 10 minutes (image requests take up to 300 s).
fn duration_histogram() -> Histogram {
    Histogram::new(exponential_buckets(0.001, 2.0, 20))
}

/// Seconds, from 100 µs to about 52 s (the dispatcher's longest wait is `max_wait`).
fn pool_wait_histogram() -> Histogram {
    Histogram::new(exponential_buckets(0.000_1, 2.0, 20))
}

/// Seconds, from 20 µs to about 1.3 s: what the gateway adds is small.
fn overhead_histogram() -> Histogram {
    Histogram::new(exponential_buckets(0.000_02, 2.0, 17))
}

impl Metrics {
    /// Metrics whose `model` label keeps the ids in `known_models` (others count as `other`).
    pub fn new(known_models: impl IntoIterator<Item = String>) -> Self {
        let mut registry = Registry::with_prefix("imagegate");
        let requests = Family::<RequestLabels, Counter>::default();
        registry.register("requests", "Requests answered", requests.clone());
        let duration = HistogramFamily::<LatencyLabels>::new_with_constructor(duration_histogram);
        registry.register(
            "request_duration_seconds",
            "Time from a request's arrival to its last byte",
            duration.clone(),
        );
        let upstream = HistogramFamily::<LatencyLabels>::new_with_constructor(duration_histogram);
        registry.register(
            "upstream_duration_seconds",
            "Time a request spent waiting on upstream calls, every attempt included",
            upstream.clone(),
        );
        let overhead = HistogramFamily::<EndpointLabels>::new_with_constructor(overhead_histogram);
        registry.register(
            "gateway_overhead_seconds",
            "Request duration minus upstream time: what the gateway itself added",
            overhead.clone(),
        );
        let pool_wait = HistogramFamily::<LatencyLabels>::new_with_constructor(pool_wait_histogram);
        registry.register(
            "pool_wait_seconds",
            "Time a request waited for a free upstream account slot, every attempt included (part of the gateway overhead)",
            pool_wait.clone(),
        );
        let kept_alive = Family::<EndpointLabels, Counter>::default();
        registry.register(
            "json_keepalive_answers",
            "Non-streaming answers the opt-in keepalive committed to 200 before they were made (their requests count under their own status)",
            kept_alive.clone(),
        );
        let in_flight = Gauge::<i64, AtomicI64>::default();
        registry.register("requests_in_flight", "Requests being served", in_flight.clone());
        let scrape = scrape::ScrapeGauges::register(&mut registry);
        Self {
            registry,
            requests,
            duration,
            upstream,
            overhead,
            pool_wait,
            kept_alive,
            in_flight,
            known_models: known_models.into_iter().collect(),
            scrape,
            upload_disk: None,
        }
    }

    /// These metrics, reporting what uploads keep of `budget` at each scrape (and the bound, when
    /// there is one).
    #[must_use]
    pub fn with_upload_disk(mut self, budget: Arc<DiskBudget>) -> Self {
        let in_use = Gauge::default();
        self.registry.register(
            "upload_disk_bytes",
            "Bytes of edit uploads kept on disk now (files over 256 KiB, in TMPDIR)",
            in_use.clone(),
        );
        if budget.limit() != u64::MAX {
            let limit = Gauge::<i64, AtomicI64>::default();
            limit.set(i64::try_from(budget.limit()).unwrap_or(i64::MAX));
            self.registry.register(
                "upload_disk_budget_bytes",
                "The most bytes edit uploads may keep on disk at once ([uploads] disk_budget_mb)",
                limit,
            );
        }
        self.upload_disk = Some((budget, in_use));
        self
    }

    /// Sets the scrape-time gauges kept here.
    fn update_upload_disk(&self) {
        if let Some((budget, in_use)) = &self.upload_disk {
            in_use.set(i64::try_from(budget.in_use()).unwrap_or(i64::MAX));
        }
    }

    /// Counts a request as started; the returned guard counts it as ended when dropped.
    pub fn request_started(&self) -> InFlight {
        self.in_flight.inc();
        InFlight(self.in_flight.clone())
    }

    /// Records a finished request.
    pub fn observe(&self, request: &RequestObservation<'_>) {
        let endpoint = endpoint_label(request.endpoint);
        let size_class = class_label(request.size_class);
        let model = if self.known_models.contains(request.model) {
            request.model.to_owned()
        } else if request.model.is_empty() {
            "none".to_owned()
        } else {
            "other".to_owned()
        };
        self.requests
            .get_or_create(&RequestLabels {
                endpoint,
                status: request.status,
                model,
                size_class,
            })
            .inc();
        let latency = LatencyLabels { endpoint, size_class };
        self.duration
            .get_or_create(&latency)
            .observe(request.total.as_secs_f64());
        if !request.upstream.is_zero() {
            self.upstream
                .get_or_create(&latency)
                .observe(request.upstream.as_secs_f64());
        }
        let overhead = request.total.saturating_sub(request.upstream);
        self.overhead
            .get_or_create(&EndpointLabels { endpoint })
            .observe(overhead.as_secs_f64());
        if let Some(waited) = request.pool_wait {
            self.pool_wait
                .get_or_create(&latency)
                .observe(waited.as_secs_f64());
        }
        if request.kept_alive {
            self.kept_alive.get_or_create(&EndpointLabels { endpoint }).inc();
        }
    }
}

/// A request being served; dropping it lowers the in-flight gauge.
#[derive(Debug)]
pub struct InFlight(Gauge<i64, AtomicI64>);

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.dec();
    }
}

/// The endpoint as a bounded label value.
fn endpoint_label(endpoint: &str) -> &'static str {
    match endpoint {
        "/v1/images/generations" => "/v1/images/generations",
        "/v1/images/edits" => "/v1/images/edits",
        "/v1/responses" => "/v1/responses",
        _ => "other",
    }
}

fn class_label(class: Option<imagegate_domain::SizeClass>) -> &'static str {
    match class {
        Some(imagegate_domain::SizeClass::Large) => "large",
        Some(imagegate_domain::SizeClass::Standard) => "standard",
        None => "none",
    }
}

#[cfg(test)]
mod tests;

//! Shared state of a running simulator: configuration, renderer, fault script, OAuth refresh tokens and
//! counters.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::config::SimConfig;
use crate::faults::FaultBook;
use crate::oauth::TokenBook;
use crate::simulator::Simulator;
use crate::stats::{Stats, StatsSnapshot};

/// Cheaply clonable handle on one simulator instance (what [`crate::router`] serves).
#[derive(Clone, Debug)]
pub struct SimState {
    inner: Arc<Shared>,
}

#[derive(Debug)]
struct Shared {
    config: SimConfig,
    simulator: Simulator,
    faults: FaultBook,
    oauth: TokenBook,
    stats: Arc<Stats>,
    request_ids: AtomicU64,
}

impl SimState {
    /// A fresh simulator with empty counters and no scripted faults.
    pub fn new(config: SimConfig) -> Self {
        let simulator = Simulator::new(&config);
        let faults = FaultBook::new(config.seed);
        let oauth = TokenBook::new(config.refresh_tokens.iter().cloned());
        Self {
            inner: Arc::new(Shared {
                config,
                simulator,
                faults,
                oauth,
                stats: Arc::new(Stats::default()),
                request_ids: AtomicU64::new(1),
            }),
        }
    }

    /// The defaults this instance runs with.
    pub fn config(&self) -> &SimConfig {
        &self.inner.config
    }

    /// The renderer.
    pub fn simulator(&self) -> &Simulator {
        &self.inner.simulator
    }

    /// The fault script (the same one `POST /sim/faults` edits).
    pub fn faults(&self) -> &FaultBook {
        &self.inner.faults
    }

    /// The refresh tokens of the OAuth token endpoint.
    pub fn oauth(&self) -> &TokenBook {
        &self.inner.oauth
    }

    /// The request counters.
    pub fn stats(&self) -> &Arc<Stats> {
        &self.inner.stats
    }

    /// A copy of the request counters (what `GET /sim/stats` returns).
    pub fn stats_snapshot(&self) -> StatsSnapshot {
        self.inner.stats.snapshot()
    }

    /// A fresh `x-request-id` value.
    pub fn next_request_id(&self) -> String {
        let n = self.inner.request_ids.fetch_add(1, Ordering::Relaxed);
        format!("req_sim{n:012}")
    }
}

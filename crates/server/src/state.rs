//! Everything a request handler needs, built once at start.

use std::sync::Arc;

use imagegate_dispatch::{Dispatcher, KeyGate};
use imagegate_domain::ModelCatalog;
use imagegate_store::{KeyCache, Store, UsageSink};
use imagegate_upstream::Upstream;

use crate::accounts::AccountDirectory;
use crate::config::Config;

/// Shared state of the gateway.
pub struct AppState {
    pub config: Config,
    pub catalog: ModelCatalog,
    pub store: Arc<dyn Store>,
    pub keys: KeyCache,
    pub dispatcher: Arc<Dispatcher>,
    pub key_gate: KeyGate,
    /// Where the pool state lives (memory or Redis), for `/readyz`.
    pub pool_backend: crate::pool_backend::PoolBackend,
    pub upstream: Arc<dyn Upstream>,
    pub accounts: AccountDirectory,
    pub usage: UsageSink,
    pub metrics: Arc<crate::metrics::Metrics>,
    /// Token of the `/internal/*` endpoints (see `crate::control`).
    pub internal_token: String,
    /// Requests still running, abandoned when the shutdown grace period ends.
    pub in_flight: crate::in_flight::InFlight,
    /// The console's sign-in sessions (in Redis when replicas share one).
    pub console_sessions: Arc<dyn imagegate_console::SessionStore>,
    /// Failed console sign-ins counted with the other replicas (in Redis), if they share one.
    pub console_logins: Option<Arc<dyn imagegate_console::SharedLoginCounter>>,
    /// The bound on what edit uploads keep on disk at once (see `crate::upload_disk`).
    pub upload_disk: Arc<imagegate_codec::multipart::DiskBudget>,
}

impl std::fmt::Debug for AppState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AppState")
            .field("listen", &self.config.listen)
            .finish_non_exhaustive()
    }
}

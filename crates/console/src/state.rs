//! [`ConsoleState`] and [`ConsoleConfig`]: what every page handler shares.

use std::sync::Arc;
use std::time::Duration;

use imagegate_store::Store;

use crate::backend::ConsoleBackend;
use crate::ratelimit::{LoginCounting, LoginLimit, LoginLimiter, SharedLoginCounter};
use crate::session::{MemorySessionStore, SessionStore};

/// Settings of the console.
#[derive(Debug, Clone)]
pub struct ConsoleConfig {
    /// The gateway's public base URL (`https://images.example.com`), used in the curl and Python
    /// snippets. `None`: derived from each request's `Host` header.
    pub base_url_hint: Option<String>,
    /// Always mark the session cookie `Secure`. It is also marked so when the request arrived over
    /// TLS as far as the console can tell (`X-Forwarded-Proto: https`, an `https` base URL hint).
    pub secure_cookies: bool,
    /// How long a session lasts after sign-in.
    pub session_ttl: Duration,
    /// How many failed sign-ins are allowed, per user name and per client address.
    pub login_limit: LoginLimit,
    /// Proxies (load balancers) whose `X-Forwarded-For` names the client's address. Empty: the
    /// client's address is the connection's peer and the header is ignored.
    pub trusted_proxies: Vec<ipnet::IpNet>,
}

impl Default for ConsoleConfig {
    fn default() -> Self {
        Self {
            base_url_hint: None,
            secure_cookies: false,
            session_ttl: Duration::from_secs(12 * 3600),
            login_limit: LoginLimit::default(),
            trusted_proxies: Vec::new(),
        }
    }
}

/// Everything the console's handlers need; cheap to clone.
#[derive(Clone)]
pub struct ConsoleState {
    pub(crate) store: Arc<dyn Store>,
    pub(crate) backend: Arc<dyn ConsoleBackend>,
    pub(crate) config: Arc<ConsoleConfig>,
    pub(crate) sessions: Arc<dyn SessionStore>,
    pub(crate) login_counting: LoginCounting,
}

impl std::fmt::Debug for ConsoleState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ConsoleState")
            .field("config", &self.config)
            .field("sessions", &self.sessions)
            .finish_non_exhaustive()
    }
}

impl ConsoleState {
    /// A console over `store`, with live pool state from `backend` and sessions kept in memory
    /// (they do not survive a restart and are not shared between replicas; see
    /// [`ConsoleState::with_sessions`]).
    pub fn new(store: Arc<dyn Store>, backend: Arc<dyn ConsoleBackend>, config: ConsoleConfig) -> Self {
        Self::with_sessions(store, backend, config, Arc::new(MemorySessionStore::new()))
    }

    /// Like [`ConsoleState::new`] with another place to keep sessions.
    pub fn with_sessions(
        store: Arc<dyn Store>,
        backend: Arc<dyn ConsoleBackend>,
        config: ConsoleConfig,
        sessions: Arc<dyn SessionStore>,
    ) -> Self {
        let login_counting = LoginCounting::Local(Arc::new(LoginLimiter::new(config.login_limit)));
        Self {
            store,
            backend,
            config: Arc::new(config),
            sessions,
            login_counting,
        }
    }

    /// The same console counting failed sign-ins per user name in `counter`, shared by replicas
    /// (else each replica allows the limit's attempts on its own). Addresses are still counted per
    /// replica (behind a load balancer, every client may have the balancer's address).
    #[must_use]
    pub fn with_shared_login_counter(mut self, counter: Arc<dyn SharedLoginCounter>) -> Self {
        self.login_counting = LoginCounting::Shared {
            users: counter,
            addresses: Arc::new(LoginLimiter::new(self.config.login_limit)),
        };
        self
    }

    /// The session store (e.g. to end a user's sessions after an out-of-band password change).
    pub fn sessions(&self) -> &Arc<dyn SessionStore> {
        &self.sessions
    }
}

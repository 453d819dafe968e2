//! Pool state and per-key limits shared by several gateway replicas through Redis.
//!
//! # Layout
//! Every key starts with [`RedisConfig::prefix`] (default `imagegate:`):
//!
//! | key | type | content |
//! |---|---|---|
//! | `acct:{id}:lease:{large,standard}` | sorted set | live leases of one account and size class, scored by expiry, each a random token the acquiring replica chose |
//! | `acct:{id}:health` | hash | `h` the [`crate::AccountHealth`] as JSON, `v` its version, and what selection reads: `ok` (status usable), `ca`/`ci` (end of the cooldown for every request / image requests) |
//! | `accounts` | set | accounts that ever held a lease or recorded an outcome (what snapshots list) |
//! | `key:{key}:inflight`, `key:{key}:starts` | sorted sets | per-key permits (scored by expiry) and recent request starts, each a random token the admitting replica chose |
//! | `freed` | pub/sub channel | the id of a replica that just released leases: waiting requests on the others try again at once |
//!
//! # Atomicity and round trips
//! Selection and slot acquisition are one Lua script (`EVALSHA`; on `NOSCRIPT` the script is
//! loaded and run again): it purges the expired leases of the candidates it looks at, applies
//! the rules of [`crate::select::select`] to the ranked candidates passed as arguments and adds
//! the lease, so replicas never overbook an account, in one round trip. Releases queued on this
//! replica ride along with its next acquisition or snapshot (so they are visible to it at once);
//! a background task sends the rest; each batch of releases applied is announced on the `freed`
//! channel, on which every replica listens, so a request waiting on one replica sees a slot freed
//! on another at once (the dispatcher's poll covers messages lost while reconnecting). Outcomes run [`crate::AccountHealth::apply`] in Rust and
//! store the result with a compare-and-set on the version (retried on conflict), so both
//! backends apply exactly the same rules.
//!
//! # Time
//! Scripts never read the Redis clock: lease expiries, cooldown ends and request windows are the
//! [`crate::UnixMillis`] each replica passes from its [`crate::Clock`]. That keeps tests with a
//! manual clock exact, but it means **replicas need synchronised clocks (NTP)**: a replica whose
//! clock runs ahead purges other replicas' leases early (briefly overbooking an account) and
//! sees cooldowns end early; one running behind keeps dead replicas' slots and cooldowns longer.
//! A skew of a few hundred milliseconds is harmless next to lease TTLs of minutes.
//!
//! # Failures
//! Every Redis failure is a [`crate::StateError::Backend`] (or [`crate::KeyLimitError::Backend`])
//! naming the operation; nothing panics. Commands time out after
//! [`RedisConfig::response_timeout`]. A lost release (Redis unreachable when it is sent) is
//! retried by the background task and, failing that, recovered when the lease's TTL runs out; a
//! replica that crashes holding leases loses them the same way. Releases carried by a call that
//! fails or is cancelled go back to the queue. Acquisitions and key admissions run to their end
//! in a task of their own: one whose caller went away while Redis answered gives its slot or
//! permit back instead of holding it until the TTL. One whose reply is lost (a timeout after the
//! script ran) gives back what it may have taken too: the caller chose the lease or permit token,
//! so it removes that token from every set the script could have added it to. While Redis is down the server is
//! expected to keep serving from local state: [`crate::FallbackPoolState`] does that.
//!
//! Redis Cluster is not supported as such: scripts derive account keys from the prefix. With a
//! hash tag in the prefix (e.g. `{imagegate}:`) every key lands in one slot.
//!
//! # Example
//!
//! ```no_run
//! use std::sync::Arc;
//! use std::time::Duration;
//! use imagegate_dispatch::{
//!     CooldownPolicy, DispatchConfig, Dispatcher, FallbackPoolState, KeyGate, RedisConfig,
//!     RedisKeyLimiter, RedisPoolState, SystemClock,
//! };
//!
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! let config = RedisConfig::new("redis://127.0.0.1:6379");
//! let shared = Arc::new(RedisPoolState::new(&config, CooldownPolicy::default())?);
//! shared.ping().await?; // optional: connections are made on first use
//! let state = Arc::new(FallbackPoolState::new(shared, CooldownPolicy::default(), Duration::from_secs(5)));
//! let pool = Dispatcher::new(state.clone(), Arc::new(SystemClock), DispatchConfig::default());
//! let keys = KeyGate::new(Arc::new(RedisKeyLimiter::new(&config)?), Arc::new(SystemClock));
//! # let _ = (pool, keys);
//! if state.degraded() {
//!     eprintln!("Redis unreachable, serving from local state: {:?}", state.last_error());
//! }
//! # Ok(())
//! # }
//! ```

mod acquire;
mod detached;
mod freed;
mod health;
mod key_limiter;
mod pool;
mod release;
mod reply;

use std::fmt;
use std::time::Duration;

use redis::aio::{ConnectionManager, ConnectionManagerConfig};

use crate::account::{AccountId, SizeClass};

pub use key_limiter::RedisKeyLimiter;
pub use pool::RedisPoolState;

/// Where the shared state lives and how long to wait for it.
#[derive(Clone, PartialEq, Eq)]
pub struct RedisConfig {
    /// Server address, e.g. `redis://127.0.0.1:6379` (`rediss://` is not enabled).
    pub url: String,
    /// Prefix of every key (default `imagegate:`); replicas sharing a pool use the same one.
    pub prefix: String,
    /// Longest wait to establish a connection (default 1 s).
    pub connect_timeout: Duration,
    /// Longest wait for a reply (default 1 s); then the call fails with a backend error.
    pub response_timeout: Duration,
    /// How often the connection that hears other replicas' releases is pinged (default 30 s); one
    /// that does not answer within `connect_timeout` is replaced. Shorter than the idle timeout of
    /// any firewall or proxy between the replicas and Redis.
    pub listener_ping_every: Duration,
}

impl RedisConfig {
    /// The defaults for the server at `url`.
    #[must_use]
    pub fn new(url: impl Into<String>) -> Self {
        Self {
            url: url.into(),
            prefix: "imagegate:".to_owned(),
            connect_timeout: Duration::from_secs(1),
            response_timeout: Duration::from_secs(1),
            listener_ping_every: Duration::from_secs(30),
        }
    }

    /// The same configuration with another key prefix.
    #[must_use]
    pub fn with_prefix(mut self, prefix: impl Into<String>) -> Self {
        self.prefix = prefix.into();
        self
    }

    /// The URL with any password replaced by `***`, for logs and errors.
    #[must_use]
    pub fn redacted_url(&self) -> String {
        let scheme_end = self.url.find("://");
        let at = self.url.rfind('@');
        let parts = scheme_end
            .zip(at)
            .filter(|(scheme_end, at)| at > scheme_end)
            .and_then(|(scheme_end, at)| Some((self.url.get(..scheme_end)?, self.url.get(at..)?)));
        match parts {
            Some((scheme, host)) => format!("{scheme}://***{host}"),
            None => self.url.clone(),
        }
    }

    /// A client for the server (connects nothing yet).
    pub(crate) fn client(&self) -> Result<redis::Client, String> {
        redis::Client::open(self.url.as_str())
            .map_err(|e| format!("invalid Redis URL {}: {e}", self.redacted_url()))
    }

    /// A connection manager that connects on first use and reconnects after failures.
    pub fn connect(&self) -> Result<ConnectionManager, String> {
        if tokio::runtime::Handle::try_current().is_err() {
            return Err("the Redis backend must be created inside a Tokio runtime".to_owned());
        }
        let client = self.client()?;
        let config = ConnectionManagerConfig::new()
            .set_connection_timeout(Some(self.connect_timeout))
            .set_response_timeout(Some(self.response_timeout))
            .set_number_of_retries(1)
            .set_min_delay(Duration::from_millis(50))
            .set_max_delay(Duration::from_millis(500));
        ConnectionManager::new_lazy_with_config(client, config)
            .map_err(|e| format!("cannot set up Redis connection to {}: {e}", self.redacted_url()))
    }
}

impl fmt::Debug for RedisConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RedisConfig")
            .field("url", &self.redacted_url())
            .field("prefix", &self.prefix)
            .field("connect_timeout", &self.connect_timeout)
            .field("response_timeout", &self.response_timeout)
            .field("listener_ping_every", &self.listener_ping_every)
            .finish()
    }
}

/// Key names (the Lua scripts build the account keys the same way from the prefix).
#[derive(Debug, Clone)]
pub(crate) struct Keys {
    prefix: String,
}

impl Keys {
    pub(crate) fn new(prefix: &str) -> Self {
        Self {
            prefix: prefix.to_owned(),
        }
    }

    pub(crate) fn prefix(&self) -> &str {
        &self.prefix
    }

    pub(crate) fn health(&self, account: &AccountId) -> String {
        format!("{}acct:{account}:health", self.prefix)
    }

    pub(crate) fn leases(&self, account: &AccountId, class: SizeClass) -> String {
        format!("{}acct:{account}:lease:{}", self.prefix, class_name(class))
    }

    pub(crate) fn accounts(&self) -> String {
        format!("{}accounts", self.prefix)
    }

    /// The pub/sub channel on which lease releases are announced.
    pub(crate) fn freed(&self) -> String {
        format!("{}freed", self.prefix)
    }

    pub(crate) fn key_permits(&self, key: &str) -> String {
        format!("{}key:{key}:inflight", self.prefix)
    }

    pub(crate) fn key_starts(&self, key: &str) -> String {
        format!("{}key:{key}:starts", self.prefix)
    }
}

/// A lease id or key permit token: random, below 2^53 so that it stays exact wherever a script
/// reads it as a number; among the leases of one account or the permits of one key in flight, two
/// alike are as good as impossible.
pub(crate) fn new_token() -> u64 {
    fastrand::u64(1..1 << 53)
}

/// The size class as it appears in key names.
pub(crate) fn class_name(class: SizeClass) -> &'static str {
    match class {
        SizeClass::Large => "large",
        SizeClass::Standard => "standard",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passwords_are_redacted() {
        let config = RedisConfig::new("redis://user:secret@db.internal:6379/2");
        assert_eq!(config.redacted_url(), "redis://***@db.internal:6379/2");
        assert!(!format!("{config:?}").contains("secret"));
        assert_eq!(
            RedisConfig::new("redis://127.0.0.1:6379").redacted_url(),
            "redis://127.0.0.1:6379"
        );
    }

    #[test]
    fn key_names_carry_the_prefix() {
        let keys = Keys::new("p:");
        let id = AccountId::new("a1");
        assert_eq!(keys.health(&id), "p:acct:a1:health");
        assert_eq!(keys.leases(&id, SizeClass::Large), "p:acct:a1:lease:large");
        assert_eq!(keys.leases(&id, SizeClass::Standard), "p:acct:a1:lease:standard");
        assert_eq!(keys.key_permits("k"), "p:key:k:inflight");
    }

    #[test]
    fn creating_a_backend_outside_a_runtime_is_an_error() {
        let err = RedisConfig::new("redis://127.0.0.1:6379").connect().unwrap_err();
        assert!(err.contains("Tokio runtime"), "{err}");
    }
}

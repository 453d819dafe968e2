//! Where the account pool's runtime state and the per-key counters live: in this process, or in
//! Redis shared by every replica (`--redis-url`), with a local stand-in while Redis is down.
//!
//! # Degraded behaviour (Redis unreachable)
//!
//! The gateway keeps serving. Each replica then admits requests from its own memory:
//! - account concurrency limits and per-key limits hold **per replica** (with N replicas an
//!   account limited to 1 large request can run up to N at once);
//! - cooldowns and counters learnt by other replicas are not seen (a 429 cools the account only on
//!   the replica that saw it);
//! - `/readyz` answers 200 with `"status": "degraded", "redis": "unavailable"`.
//!
//! Every few seconds one call tries Redis again and the first success ends the degradation. Leases
//! taken locally are unknown to Redis, so right after recovery an account can briefly run more
//! requests than its limit, until they finish.

use std::sync::Arc;
use std::time::Duration;

use imagegate_dispatch::{CooldownPolicy, KeyLimiter, MemoryKeyLimiter, MemoryPoolState, PoolState};

use crate::config::Config;

/// How long a request at a key's concurrency limit is told to wait.
const KEY_RETRY_AFTER: Duration = Duration::from_secs(1);

/// How often a degraded replica tries Redis again.
#[cfg_attr(
    not(feature = "redis"),
    expect(dead_code, reason = "used with the redis feature")
)]
const REDIS_RECHECK: Duration = Duration::from_secs(2);

/// Why the pool state could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum BackendError {
    #[error("redis: {0}")]
    Redis(String),
    #[error("--redis-url is set but this build has no Redis support (cargo feature `redis`)")]
    #[cfg_attr(
        feature = "redis",
        expect(dead_code, reason = "only builds without Redis refuse it")
    )]
    NotBuilt,
}

/// What `/readyz` reports about Redis.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RedisStatus {
    /// No `--redis-url`: the state lives in this process.
    NotConfigured,
    /// Redis answers.
    Ok,
    /// Redis does not answer: limits hold per replica.
    Unavailable,
}

impl RedisStatus {
    /// The value in the `/readyz` body.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::NotConfigured => "not_configured",
            Self::Ok => "ok",
            Self::Unavailable => "unavailable",
        }
    }
}

/// The pool state and key limiter of this process.
#[derive(Debug)]
pub struct PoolBackend {
    /// The account pool's load, leases and health.
    pub state: Arc<dyn PoolState>,
    /// Per-key concurrency and requests-per-minute counters.
    pub key_limiter: Arc<dyn KeyLimiter>,
    #[cfg(feature = "redis")]
    redis: Option<redis_side::Shared>,
}

impl PoolBackend {
    /// Everything in this process.
    pub fn local() -> Self {
        Self {
            state: Arc::new(MemoryPoolState::new(CooldownPolicy::default())),
            key_limiter: Arc::new(MemoryKeyLimiter::new(KEY_RETRY_AFTER)),
            #[cfg(feature = "redis")]
            redis: None,
        }
    }

    /// Redis when `config.redis_url` is set (connecting lazily: Redis may be down at start),
    /// otherwise [`PoolBackend::local`]. Must be called inside a Tokio runtime.
    pub fn build(config: &Config) -> Result<Self, BackendError> {
        match &config.redis_url {
            None => Ok(Self::local()),
            #[cfg(feature = "redis")]
            Some(url) => redis_side::build(config, url),
            #[cfg(not(feature = "redis"))]
            Some(_) => Err(BackendError::NotBuilt),
        }
    }

    /// Whether Redis is configured and answers now (one `PING`, bounded by the response timeout).
    pub async fn redis_status(&self) -> RedisStatus {
        #[cfg(feature = "redis")]
        if let Some(shared) = &self.redis {
            return shared.status().await;
        }
        RedisStatus::NotConfigured
    }
}

#[cfg(feature = "redis")]
pub(crate) use redis_side::redis_config;

#[cfg(feature = "redis")]
mod redis_side {
    use std::sync::Arc;
    use std::time::Duration;

    use imagegate_dispatch::{
        CooldownPolicy, FallbackKeyLimiter, FallbackPoolState, RedisConfig, RedisKeyLimiter, RedisPoolState,
    };

    use super::{BackendError, KEY_RETRY_AFTER, PoolBackend, REDIS_RECHECK, RedisStatus};
    use crate::config::Config;

    /// The Redis side, kept to answer `/readyz`.
    #[derive(Debug)]
    pub(super) struct Shared {
        pool: Arc<RedisPoolState>,
        state: Arc<FallbackPoolState>,
        keys: Arc<FallbackKeyLimiter>,
    }

    impl Shared {
        pub(super) async fn status(&self) -> RedisStatus {
            match self.pool.ping().await {
                Ok(()) => RedisStatus::Ok,
                Err(err) => {
                    tracing::warn!(error = %err, degraded_pool = self.state.degraded(),
                        degraded_keys = self.keys.degraded(), "redis unavailable");
                    RedisStatus::Unavailable
                }
            }
        }
    }

    /// The Redis at `url` with `config`'s key prefix, as every shared part of a replica uses it.
    pub(crate) fn redis_config(config: &Config, url: &str) -> RedisConfig {
        RedisConfig::new(url).with_prefix(key_prefix(&config.redis_prefix))
    }

    pub(super) fn build(config: &Config, url: &str) -> Result<PoolBackend, BackendError> {
        let redis = redis_config(config, url);
        let policy = CooldownPolicy::default();
        let pool = Arc::new(
            RedisPoolState::new(&redis, policy.clone()).map_err(|e| BackendError::Redis(e.to_string()))?,
        );
        // Key permits are not renewed: a permit whose replica died counts until this TTL, which
        // must exceed the longest request: its upstream deadline, plus as much again for a client
        // slow to take the answer (the upstream crate's read clock).
        let longest = config.timeouts.large_secs.max(config.timeouts.standard_secs);
        let permit_ttl = Duration::from_secs(longest.saturating_mul(2).saturating_add(60));
        let key_limiter = RedisKeyLimiter::new(&redis)
            .map_err(|e| BackendError::Redis(e.to_string()))?
            .with_concurrency_retry_after(KEY_RETRY_AFTER)
            .with_permit_ttl(permit_ttl);
        let state = Arc::new(FallbackPoolState::new(pool.clone(), policy, REDIS_RECHECK));
        let keys = Arc::new(FallbackKeyLimiter::new(
            Arc::new(key_limiter),
            KEY_RETRY_AFTER,
            REDIS_RECHECK,
        ));
        tracing::info!(redis = %redis.redacted_url(), prefix = %redis.prefix, "pool state shared in redis");
        Ok(PoolBackend {
            state: state.clone(),
            key_limiter: keys.clone(),
            redis: Some(Shared { pool, state, keys }),
        })
    }

    /// `imagegate` → `imagegate:` (a prefix already ending in `:` is kept).
    pub(crate) fn key_prefix(prefix: &str) -> String {
        if prefix.is_empty() || prefix.ends_with(':') {
            prefix.to_owned()
        } else {
            format!("{prefix}:")
        }
    }

    #[cfg(test)]
    mod tests {
        use super::key_prefix;

        #[test]
        fn the_prefix_gets_one_separator() {
            assert_eq!(key_prefix("imagegate"), "imagegate:");
            assert_eq!(key_prefix("{tenant}:"), "{tenant}:");
            assert_eq!(key_prefix(""), "");
        }
    }
}

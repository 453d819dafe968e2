//! [`RedisKeyLimiter`]: per-key limits shared by every replica.

use std::fmt;
use std::sync::{Arc, LazyLock};
use std::time::Duration;

use async_trait::async_trait;
use redis::aio::ConnectionManager;
use redis::{Script, Value};

use super::detached::run_to_the_end;
use super::release::{Release, ReleaseQueue};
use super::reply::{number, tagged};
use super::{Keys, RedisConfig, new_token};
use crate::clock::UnixMillis;
use crate::error::KeyLimitError;
use crate::key_limits::{KeyAdmission, KeyLimiter, KeyLimits, RATE_WINDOW};

static KEY_ADMIT: LazyLock<Script> = LazyLock::new(|| Script::new(include_str!("lua/key_admit.lua")));

/// Per-key concurrency and requests-per-minute limits in Redis, atomic in one script.
///
/// A concurrency permit is a member of a sorted set scored by its expiry: it is removed when the
/// [`crate::KeyPermit`] is dropped, or when [`RedisKeyLimiter::with_permit_ttl`] (default 15 min)
/// runs out if its replica died. A request holding its permit longer than that stops counting, so
/// the TTL must exceed the longest request. The requests-per-minute window is a sliding window of
/// request starts. Keys without limits cost no round trip.
pub struct RedisKeyLimiter {
    connection: ConnectionManager,
    keys: Keys,
    releases: Arc<ReleaseQueue>,
    concurrency_retry_after: Duration,
    permit_ttl: Duration,
}

impl RedisKeyLimiter {
    /// A limiter in the Redis of `config`, suggesting a 1 s retry when a key is at its concurrency
    /// limit. Connects on first use.
    ///
    /// # Errors
    /// [`KeyLimitError::Backend`] for an invalid URL or when called outside a Tokio runtime.
    pub fn new(config: &RedisConfig) -> Result<Self, KeyLimitError> {
        let connection = config.connect().map_err(KeyLimitError::Backend)?;
        Ok(Self {
            releases: ReleaseQueue::start(connection.clone(), None),
            connection,
            keys: Keys::new(&config.prefix),
            concurrency_retry_after: Duration::from_secs(1),
            permit_ttl: Duration::from_secs(15 * 60),
        })
    }

    /// The same limiter suggesting `retry_after` when a key is at its concurrency limit.
    #[must_use]
    pub fn with_concurrency_retry_after(mut self, retry_after: Duration) -> Self {
        self.concurrency_retry_after = retry_after;
        self
    }

    /// The same limiter letting a permit whose holder died count for `ttl` at most.
    #[must_use]
    pub fn with_permit_ttl(mut self, ttl: Duration) -> Self {
        self.permit_ttl = ttl;
        self
    }
}

impl fmt::Debug for RedisKeyLimiter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RedisKeyLimiter")
            .field("prefix", &self.keys.prefix())
            .field("concurrency_retry_after", &self.concurrency_retry_after)
            .field("permit_ttl", &self.permit_ttl)
            .finish_non_exhaustive()
    }
}

impl Drop for RedisKeyLimiter {
    fn drop(&mut self) {
        self.releases.close();
    }
}

fn bad_reply() -> KeyLimitError {
    KeyLimitError::Backend("redis: unexpected reply to a key admission".to_owned())
}

/// A limit as a script argument: -1 for none.
fn limit_arg(limit: Option<u32>) -> i64 {
    limit.map_or(-1, i64::from)
}

#[async_trait]
impl KeyLimiter for RedisKeyLimiter {
    async fn try_admit(
        &self,
        key: &str,
        limits: KeyLimits,
        now: UnixMillis,
    ) -> Result<KeyAdmission, KeyLimitError> {
        if limits.max_concurrency.is_none() && limits.requests_per_minute.is_none() {
            return Ok(KeyAdmission { token: None });
        }
        let call = Admission {
            connection: self.connection.clone(),
            releases: Arc::clone(&self.releases),
            permits: self.keys.key_permits(key),
            starts: self.keys.key_starts(key),
            token: new_token(),
            limits,
            now,
            permit_ttl: self.permit_ttl,
            concurrency_retry_after: self.concurrency_retry_after,
        };
        let (set, token) = (call.permits.clone(), call.token);
        let releases = Arc::clone(&self.releases);
        let give_back = {
            let (releases, set) = (Arc::clone(&releases), set.clone());
            move |unclaimed: KeyAdmission| {
                if let Some(member) = unclaimed.token {
                    releases.push(Release { set, member });
                }
            }
        };
        let lost = move || {
            // The task ended without a result (it panicked): its script may have taken a permit.
            if limits.max_concurrency.is_some() {
                releases.push(Release { set, member: token });
            }
            KeyLimitError::Backend("redis: the key admission task failed".to_owned())
        };
        run_to_the_end(call.run(), give_back, lost).await
    }

    fn release_detached(&self, key: &str, token: u64) {
        self.releases.push(Release {
            set: self.keys.key_permits(key),
            member: token,
        });
    }
}

/// One key admission, with everything it needs owned (it runs in a task of its own).
struct Admission {
    connection: ConnectionManager,
    releases: Arc<ReleaseQueue>,
    permits: String,
    starts: String,
    token: u64,
    limits: KeyLimits,
    now: UnixMillis,
    permit_ttl: Duration,
    concurrency_retry_after: Duration,
}

impl Admission {
    /// Admits, in the task that runs to the end even if its caller leaves: a script that may
    /// have run with its reply lost (a timeout, a dropped connection, a garbled reply) may have
    /// taken a permit and counted a start, which are given back here (the request did not go);
    /// removing what was never added does nothing.
    async fn run(mut self) -> Result<KeyAdmission, KeyLimitError> {
        let admitted = self.admit().await;
        if let Err(KeyLimitError::Backend(_)) = &admitted {
            let taken = [
                (self.limits.max_concurrency, &self.permits),
                (self.limits.requests_per_minute, &self.starts),
            ];
            for (_, set) in taken.into_iter().filter(|(limit, _)| limit.is_some()) {
                self.releases.push(Release {
                    set: set.clone(),
                    member: self.token,
                });
            }
        }
        admitted
    }

    async fn admit(&mut self) -> Result<KeyAdmission, KeyLimitError> {
        let Self { limits, now, .. } = *self;
        let mut releases = self.releases.take_for_call();
        let mut invocation = KEY_ADMIT.prepare_invoke();
        invocation
            .key(&self.permits)
            .key(&self.starts)
            .arg(now.0)
            .arg(limit_arg(limits.max_concurrency))
            .arg(limit_arg(limits.requests_per_minute))
            .arg(now.plus(self.permit_ttl).0)
            .arg(u64::try_from(RATE_WINDOW.as_millis()).unwrap_or(u64::MAX))
            .arg(self.token);
        releases.push_args(&mut invocation);
        let reply: Value = invocation
            .invoke_async(&mut self.connection)
            .await
            .map_err(|e| KeyLimitError::Backend(format!("redis: key admission failed: {e}")))?;
        releases.sent();
        let (tag, rest) = tagged(reply).ok_or_else(bad_reply)?;
        match (tag.as_str(), rest.as_slice(), limits) {
            ("ok", [_], _) => Ok(KeyAdmission {
                token: limits.max_concurrency.map(|_| self.token),
            }),
            (
                "concurrency",
                [],
                KeyLimits {
                    max_concurrency: Some(limit),
                    ..
                },
            ) => Err(KeyLimitError::TooManyConcurrent {
                limit,
                retry_after: self.concurrency_retry_after,
            }),
            (
                "rate",
                [oldest],
                KeyLimits {
                    requests_per_minute: Some(limit),
                    ..
                },
            ) => {
                let oldest = UnixMillis(number(oldest).ok_or_else(bad_reply)?);
                let retry_after = oldest.plus(RATE_WINDOW).since(now).max(Duration::from_millis(1));
                Err(KeyLimitError::TooManyRequests { limit, retry_after })
            }
            _ => Err(bad_reply()),
        }
    }
}

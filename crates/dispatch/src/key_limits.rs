//! Per-key limits (optional concurrency and requests per minute) so one agent cannot starve the
//! others sharing a group.

use std::collections::{HashMap, HashSet, VecDeque};
use std::fmt;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};

use crate::clock::{Clock, UnixMillis};
use crate::error::KeyLimitError;

/// Length of the requests-per-minute window.
pub const RATE_WINDOW: Duration = Duration::from_secs(60);

/// Limits configured on one API key; `None` means unlimited.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct KeyLimits {
    /// Requests in flight at once.
    pub max_concurrency: Option<u32>,
    /// Requests started in any sliding 60-second window.
    pub requests_per_minute: Option<u32>,
}

/// A backend's admission of one request; `token` identifies its concurrency slot, if it took one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KeyAdmission {
    /// The concurrency slot to release, when the key has a concurrency limit.
    pub token: Option<u64>,
}

/// Where per-key counters live (in memory now; Redis for several replicas later).
#[async_trait]
pub trait KeyLimiter: Send + Sync + fmt::Debug {
    /// Admits one request of `key` under `limits` at `now`, or refuses with a retry-after.
    /// A refused request counts against nothing.
    async fn try_admit(
        &self,
        key: &str,
        limits: KeyLimits,
        now: UnixMillis,
    ) -> Result<KeyAdmission, KeyLimitError>;

    /// Frees a concurrency slot without waiting (called from `Drop`). Unknown tokens are ignored.
    fn release_detached(&self, key: &str, token: u64);
}

/// Admits requests through a [`KeyLimiter`] and hands out permits released on drop.
#[derive(Debug, Clone)]
pub struct KeyGate {
    limiter: Arc<dyn KeyLimiter>,
    clock: Arc<dyn Clock>,
}

impl KeyGate {
    /// A gate over `limiter` reading time from `clock`.
    #[must_use]
    pub fn new(limiter: Arc<dyn KeyLimiter>, clock: Arc<dyn Clock>) -> Self {
        Self { limiter, clock }
    }

    /// Admits one request of `key`.
    ///
    /// # Errors
    /// [`KeyLimitError::TooManyConcurrent`] or [`KeyLimitError::TooManyRequests`] with a
    /// retry-after; [`KeyLimitError::Backend`] when the backend fails.
    pub async fn admit(&self, key: &str, limits: KeyLimits) -> Result<KeyPermit, KeyLimitError> {
        let admission = self.limiter.try_admit(key, limits, self.clock.now()).await?;
        Ok(KeyPermit {
            limiter: Arc::clone(&self.limiter),
            key: Arc::from(key),
            token: admission.token,
        })
    }
}

/// One admitted request of a key; dropping it frees the key's concurrency slot.
#[derive(Debug)]
pub struct KeyPermit {
    limiter: Arc<dyn KeyLimiter>,
    key: Arc<str>,
    token: Option<u64>,
}

impl Drop for KeyPermit {
    fn drop(&mut self) {
        if let Some(token) = self.token.take() {
            self.limiter.release_detached(&self.key, token);
        }
    }
}

/// Per-key counters in this process.
#[derive(Debug)]
pub struct MemoryKeyLimiter {
    concurrency_retry_after: Duration,
    inner: Mutex<Counters>,
}

#[derive(Debug, Default)]
struct Counters {
    keys: HashMap<String, KeyUsage>,
    next_token: u64,
    admissions: u64,
}

/// Every this many admissions, keys whose window emptied and that hold nothing are forgotten.
const SWEEP_EVERY: u64 = 1024;

#[derive(Debug, Default)]
struct KeyUsage {
    in_flight: HashSet<u64>,
    recent_starts: VecDeque<UnixMillis>,
}

impl Counters {
    /// Moves the next token on once `used` took the current one.
    fn advance_past(&mut self, used: Option<u64>) {
        if used.is_some() {
            self.next_token = self.next_token.wrapping_add(1);
        }
    }

    /// Every [`SWEEP_EVERY`] admissions, forgets the keys whose window emptied and that hold
    /// nothing.
    fn sweep_now_and_then(&mut self, now: UnixMillis) {
        self.admissions = self.admissions.wrapping_add(1);
        if self.admissions.is_multiple_of(SWEEP_EVERY) {
            self.keys.retain(|_, usage| {
                !usage.in_flight.is_empty()
                    || usage
                        .recent_starts
                        .back()
                        .is_some_and(|&last| last.plus(RATE_WINDOW) > now)
            });
        }
    }
}

impl KeyUsage {
    /// Counts one admitted request: its start, under a rate limit, and its slot as `token`, under a
    /// concurrency limit (then returned).
    fn count(&mut self, limits: KeyLimits, now: UnixMillis, token: u64) -> Option<u64> {
        if limits.requests_per_minute.is_some() {
            self.recent_starts.push_back(now);
        }
        limits.max_concurrency.map(|_| {
            self.in_flight.insert(token);
            token
        })
    }

    /// Drops the starts that left the window by `now`.
    fn forget_starts_before(&mut self, now: UnixMillis) {
        while self
            .recent_starts
            .front()
            .is_some_and(|&start| start.plus(RATE_WINDOW) <= now)
        {
            self.recent_starts.pop_front();
        }
    }
}

impl MemoryKeyLimiter {
    /// A limiter suggesting `concurrency_retry_after` when a key is at its concurrency limit.
    #[must_use]
    pub fn new(concurrency_retry_after: Duration) -> Self {
        Self {
            concurrency_retry_after,
            inner: Mutex::new(Counters::default()),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Counters> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Counts one request of `key` admitted elsewhere (a shared limiter), whatever the limits
    /// say: its start in the window, and its concurrency slot, whose token is returned for
    /// [`KeyLimiter::release_detached`].
    pub(crate) fn count_admitted(&self, key: &str, limits: KeyLimits, now: UnixMillis) -> Option<u64> {
        let mut counters = self.lock();
        counters.sweep_now_and_then(now);
        let token = counters.next_token;
        let usage = counters.keys.entry(key.to_owned()).or_default();
        usage.forget_starts_before(now);
        let token = usage.count(limits, now, token);
        counters.advance_past(token);
        token
    }
}

impl Default for MemoryKeyLimiter {
    fn default() -> Self {
        Self::new(Duration::from_secs(1))
    }
}

#[async_trait]
impl KeyLimiter for MemoryKeyLimiter {
    async fn try_admit(
        &self,
        key: &str,
        limits: KeyLimits,
        now: UnixMillis,
    ) -> Result<KeyAdmission, KeyLimitError> {
        let mut counters = self.lock();
        counters.sweep_now_and_then(now);
        let token = counters.next_token;
        let usage = counters.keys.entry(key.to_owned()).or_default();
        usage.forget_starts_before(now);
        if let Some(limit) = limits.max_concurrency
            && usage.in_flight.len() >= limit as usize
        {
            return Err(KeyLimitError::TooManyConcurrent {
                limit,
                retry_after: self.concurrency_retry_after,
            });
        }
        if let Some(limit) = limits.requests_per_minute
            && usage.recent_starts.len() >= limit as usize
        {
            let frees_at = usage
                .recent_starts
                .front()
                .map_or(now, |&start| start.plus(RATE_WINDOW));
            let retry_after = frees_at.since(now).max(Duration::from_millis(1));
            return Err(KeyLimitError::TooManyRequests { limit, retry_after });
        }
        let token = usage.count(limits, now, token);
        if usage.in_flight.is_empty() && usage.recent_starts.is_empty() {
            counters.keys.remove(key);
        }
        counters.advance_past(token);
        Ok(KeyAdmission { token })
    }

    fn release_detached(&self, key: &str, token: u64) {
        let mut counters = self.lock();
        if let Some(usage) = counters.keys.get_mut(key) {
            usage.in_flight.remove(&token);
            if usage.in_flight.is_empty() && usage.recent_starts.is_empty() {
                counters.keys.remove(key);
            }
        }
    }
}

#[cfg(test)]
#[path = "key_limits_tests.rs"]
mod tests;

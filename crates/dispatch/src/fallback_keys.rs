//! [`FallbackKeyLimiter`]: shared per-key limits (Redis) with a local stand-in while they fail.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use async_trait::async_trait;

use crate::clock::UnixMillis;
use crate::degradation::Degradation;
use crate::error::KeyLimitError;
use crate::key_limits::{KeyAdmission, KeyLimiter, KeyLimits, MemoryKeyLimiter};

/// Bit set in the tokens of permits taken locally (shared tokens are positive 63-bit counters).
const LOCAL_TOKEN: u64 = 1 << 63;

/// Per-key limiter that uses a primary (shared) limiter and admits locally while it fails.
///
/// The same rules as [`crate::FallbackPoolState`]: while the primary answers every admission goes
/// to it; a backend error turns the limiter degraded and that admission and the next ones are
/// decided by a local [`MemoryKeyLimiter`] (limits then hold per replica: a key limited to 2
/// concurrent requests can run 2 on each replica); one admission every `recheck` tries the primary
/// again. Refusals of the primary (key at its limit) are answers, not failures. Each admission of
/// the primary is also counted locally (a shadow, released with it), so while degraded the local
/// limiter knows what this replica already runs: a request admitted before the outage still
/// counts against its key.
#[derive(Debug)]
pub struct FallbackKeyLimiter {
    primary: Arc<dyn KeyLimiter>,
    local: MemoryKeyLimiter,
    degradation: Degradation<String>,
    /// Token of each concurrency permit the primary gave → its shadow's token in `local`.
    shadows: Mutex<HashMap<u64, u64>>,
}

impl FallbackKeyLimiter {
    /// Uses `primary`, falling back to a local limiter suggesting `concurrency_retry_after`;
    /// while degraded, retries the primary every `recheck`.
    #[must_use]
    pub fn new(primary: Arc<dyn KeyLimiter>, concurrency_retry_after: Duration, recheck: Duration) -> Self {
        Self {
            primary,
            local: MemoryKeyLimiter::new(concurrency_retry_after),
            degradation: Degradation::new(recheck),
            shadows: Mutex::default(),
        }
    }

    fn shadows(&self) -> MutexGuard<'_, HashMap<u64, u64>> {
        // Inserts and removals of single entries cannot leave the map inconsistent.
        self.shadows.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Counts the primary's `admission` of `key` in the local limiter too.
    fn shadow(&self, key: &str, limits: KeyLimits, now: UnixMillis, admission: &KeyAdmission) {
        if limits.max_concurrency.is_none() && limits.requests_per_minute.is_none() {
            return;
        }
        let shadow = self.local.count_admitted(key, limits, now);
        if let (Some(token), Some(shadow)) = (admission.token, shadow) {
            self.shadows().insert(token, shadow);
        }
    }

    /// Whether the primary failed and admissions are decided locally.
    #[must_use]
    pub fn degraded(&self) -> bool {
        self.degradation.degraded()
    }

    /// The error that degraded the limiter, while it is degraded.
    #[must_use]
    pub fn last_error(&self) -> Option<String> {
        self.degradation.last_error()
    }
}

#[async_trait]
impl KeyLimiter for FallbackKeyLimiter {
    async fn try_admit(
        &self,
        key: &str,
        limits: KeyLimits,
        now: UnixMillis,
    ) -> Result<KeyAdmission, KeyLimitError> {
        if self.degradation.use_primary(now) {
            match self.primary.try_admit(key, limits, now).await {
                Err(KeyLimitError::Backend(error)) => self.degradation.degrade(Some(now), error),
                answer => {
                    let _ = self.degradation.healthy();
                    if let Ok(admission) = &answer {
                        self.shadow(key, limits, now, admission);
                    }
                    return answer;
                }
            }
        }
        let admission = self.local.try_admit(key, limits, now).await?;
        Ok(KeyAdmission {
            token: admission.token.map(|token| token | LOCAL_TOKEN),
        })
    }

    fn release_detached(&self, key: &str, token: u64) {
        if token & LOCAL_TOKEN == 0 {
            let shadow = self.shadows().remove(&token);
            if let Some(shadow) = shadow {
                self.local.release_detached(key, shadow);
            }
            self.primary.release_detached(key, token);
        } else {
            self.local.release_detached(key, token & !LOCAL_TOKEN);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicBool, Ordering};

    use super::*;

    /// A memory limiter that can be switched off.
    #[derive(Debug, Default)]
    struct Switchable {
        inner: MemoryKeyLimiter,
        down: AtomicBool,
    }

    #[async_trait]
    impl KeyLimiter for Switchable {
        async fn try_admit(
            &self,
            key: &str,
            limits: KeyLimits,
            now: UnixMillis,
        ) -> Result<KeyAdmission, KeyLimitError> {
            if self.down.load(Ordering::SeqCst) {
                return Err(KeyLimitError::Backend("switched off".into()));
            }
            self.inner.try_admit(key, limits, now).await
        }
        fn release_detached(&self, key: &str, token: u64) {
            self.inner.release_detached(key, token);
        }
    }

    const ONE: KeyLimits = KeyLimits {
        max_concurrency: Some(1),
        requests_per_minute: None,
    };

    #[tokio::test]
    async fn an_outage_admits_locally_under_the_same_limits_and_recovers() {
        let primary = Arc::new(Switchable::default());
        let limiter =
            FallbackKeyLimiter::new(primary.clone(), Duration::from_secs(1), Duration::from_secs(5));
        let t0 = UnixMillis(1_000_000);
        let shared = limiter.try_admit("k", ONE, t0).await.unwrap();
        assert!(matches!(
            limiter.try_admit("k", ONE, t0).await,
            Err(KeyLimitError::TooManyConcurrent { .. })
        ));
        assert!(!limiter.degraded(), "a refusal is not a failure");

        primary.down.store(true, Ordering::SeqCst);
        assert!(
            matches!(
                limiter.try_admit("k", ONE, t0).await,
                Err(KeyLimitError::TooManyConcurrent { .. })
            ),
            "the request the primary admitted before the outage still runs, and counts"
        );
        assert!(limiter.degraded());
        assert_eq!(limiter.last_error().as_deref(), Some("switched off"));
        limiter.release_detached("k", shared.token.unwrap());
        let local = limiter.try_admit("k", ONE, t0).await.unwrap();
        assert!(
            matches!(
                limiter.try_admit("k", ONE, t0).await,
                Err(KeyLimitError::TooManyConcurrent { .. })
            ),
            "the local limiter applies the key's limit too"
        );
        limiter.release_detached("k", local.token.unwrap());
        assert!(
            limiter.try_admit("k", ONE, t0).await.is_ok(),
            "the local permit was freed"
        );

        primary.down.store(false, Ordering::SeqCst);
        let later = t0.plus(Duration::from_secs(5));
        let back = limiter.try_admit("k", ONE, later).await.unwrap();
        assert!(!limiter.degraded(), "back on the primary");
        assert!(
            matches!(
                limiter.try_admit("k", ONE, later).await,
                Err(KeyLimitError::TooManyConcurrent { .. })
            ),
            "the primary holds its new permit"
        );
        limiter.release_detached("k", back.token.unwrap());
        assert!(limiter.try_admit("k", ONE, later).await.is_ok());
    }

    #[tokio::test]
    async fn permits_of_the_primary_are_given_back_locally_too() {
        let primary = Arc::new(Switchable::default());
        let limiter =
            FallbackKeyLimiter::new(primary.clone(), Duration::from_secs(1), Duration::from_secs(5));
        let t0 = UnixMillis(1_000_000);
        for _ in 0..3 {
            let permit = limiter.try_admit("k", ONE, t0).await.unwrap();
            limiter.release_detached("k", permit.token.unwrap());
        }
        primary.down.store(true, Ordering::SeqCst);
        assert!(
            limiter.try_admit("k", ONE, t0).await.is_ok(),
            "the primary's released permits left nothing behind locally"
        );
    }

    #[tokio::test]
    async fn requests_the_primary_admitted_count_in_the_local_window() {
        let primary = Arc::new(Switchable::default());
        let limiter =
            FallbackKeyLimiter::new(primary.clone(), Duration::from_secs(1), Duration::from_secs(5));
        let two_a_minute = KeyLimits {
            max_concurrency: None,
            requests_per_minute: Some(2),
        };
        let t0 = UnixMillis(1_000_000);
        for _ in 0..2 {
            limiter.try_admit("k", two_a_minute, t0).await.unwrap();
        }
        primary.down.store(true, Ordering::SeqCst);
        assert!(matches!(
            limiter.try_admit("k", two_a_minute, t0).await,
            Err(KeyLimitError::TooManyRequests { limit: 2, .. })
        ));
        let next_window = t0.plus(crate::key_limits::RATE_WINDOW);
        assert!(limiter.try_admit("k", two_a_minute, next_window).await.is_ok());
    }
}

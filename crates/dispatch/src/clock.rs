//! Wall-clock time as unix milliseconds, and an injectable clock.
//!
//! Every time-dependent decision of the pool (cooldowns, lease expiry, request windows) takes `now`
//! as a [`UnixMillis`] argument, so tests drive time by hand and never sleep. Unix milliseconds
//! rather than `Instant` because the same values are shared with other replicas through Redis.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

/// A point in time: milliseconds since the unix epoch.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default, Serialize, Deserialize)]
#[serde(transparent)]
pub struct UnixMillis(pub u64);

impl UnixMillis {
    /// This point moved `duration` later (saturating).
    #[must_use]
    pub fn plus(self, duration: Duration) -> Self {
        let millis = u64::try_from(duration.as_millis()).unwrap_or(u64::MAX);
        Self(self.0.saturating_add(millis))
    }

    /// How long from `earlier` until this point; zero when `earlier` is not before it.
    #[must_use]
    pub fn since(self, earlier: Self) -> Duration {
        Duration::from_millis(self.0.saturating_sub(earlier.0))
    }

    /// Converts a `SystemTime`; times before the epoch become the epoch.
    #[must_use]
    pub fn from_system_time(time: SystemTime) -> Self {
        let since_epoch = time.duration_since(UNIX_EPOCH).unwrap_or_default();
        Self(u64::try_from(since_epoch.as_millis()).unwrap_or(u64::MAX))
    }

    /// Converts unix seconds (as in an upstream `resets_at`).
    #[must_use]
    pub fn from_unix_seconds(seconds: u64) -> Self {
        Self(seconds.saturating_mul(1000))
    }
}

/// A source of the current time.
pub trait Clock: Send + Sync + std::fmt::Debug {
    /// The current time.
    fn now(&self) -> UnixMillis;
}

/// The system wall clock.
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> UnixMillis {
        UnixMillis::from_system_time(SystemTime::now())
    }
}

/// A clock that only moves when told to: for tests and simulations.
#[derive(Debug, Default)]
pub struct ManualClock {
    millis: AtomicU64,
}

impl ManualClock {
    /// A clock standing at `start`.
    #[must_use]
    pub fn new(start: UnixMillis) -> Self {
        Self {
            millis: AtomicU64::new(start.0),
        }
    }

    /// Moves the clock forward by `by`.
    pub fn advance(&self, by: Duration) {
        let millis = u64::try_from(by.as_millis()).unwrap_or(u64::MAX);
        let _ = self.millis.fetch_update(Ordering::SeqCst, Ordering::SeqCst, |m| {
            Some(m.saturating_add(millis))
        });
    }

    /// Sets the clock to `to` (may go backwards, to test clock skew).
    pub fn set(&self, to: UnixMillis) {
        self.millis.store(to.0, Ordering::SeqCst);
    }
}

impl Clock for ManualClock {
    fn now(&self) -> UnixMillis {
        UnixMillis(self.millis.load(Ordering::SeqCst))
    }
}

/// `by` after now on tokio's clock, or some thirty years after now if `by` is larger than the
/// clock can hold (a caller's way of saying "for ever" must not panic).
pub(crate) fn instant_after(by: std::time::Duration) -> tokio::time::Instant {
    const FAR: std::time::Duration = std::time::Duration::from_secs(30 * 365 * 86_400);
    let now = tokio::time::Instant::now();
    now.checked_add(by.min(FAR)).unwrap_or(now)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arithmetic_saturates() {
        let t = UnixMillis(1_000);
        assert_eq!(t.plus(Duration::from_secs(2)), UnixMillis(3_000));
        assert_eq!(
            UnixMillis(u64::MAX).plus(Duration::from_secs(1)),
            UnixMillis(u64::MAX)
        );
        assert_eq!(UnixMillis(3_000).since(t), Duration::from_secs(2));
        assert_eq!(t.since(UnixMillis(3_000)), Duration::ZERO);
        assert_eq!(UnixMillis::from_unix_seconds(7), UnixMillis(7_000));
    }

    #[test]
    fn manual_clock_moves_only_when_told() {
        let clock = ManualClock::new(UnixMillis(10));
        assert_eq!(clock.now(), UnixMillis(10));
        clock.advance(Duration::from_millis(5));
        assert_eq!(clock.now(), UnixMillis(15));
        clock.set(UnixMillis(3));
        assert_eq!(clock.now(), UnixMillis(3));
    }

    #[tokio::test]
    async fn an_instant_for_ever_after_does_not_overflow() {
        let now = tokio::time::Instant::now();
        assert!(instant_after(std::time::Duration::MAX) > now);
        assert!(instant_after(std::time::Duration::from_secs(5)) >= now + std::time::Duration::from_secs(5));
    }
}

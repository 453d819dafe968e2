//! [`Degradation`]: the healthy/degraded state machine shared by the fallback backends.
//!
//! [`crate::FallbackPoolState`] and [`crate::FallbackKeyLimiter`] both call a primary (shared)
//! backend while it answers, turn *degraded* on its first backend error, and then try it again
//! once every `recheck` only. This type holds that state; the callers decide what counts as a
//! success or a failure.

use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use crate::clock::UnixMillis;

/// Whether a primary backend is usable, and when to probe it again while it is not.
///
/// `E` is the error kept while degraded (the fallbacks' `last_error`).
#[derive(Debug)]
pub(crate) struct Degradation<E> {
    recheck: Duration,
    mode: Mutex<Mode<E>>,
}

#[derive(Debug)]
struct Mode<E> {
    degraded: bool,
    last_probe: UnixMillis,
    last_error: Option<E>,
}

impl<E: Clone> Degradation<E> {
    /// Healthy; once degraded, the primary is probed again every `recheck`.
    pub(crate) fn new(recheck: Duration) -> Self {
        Self {
            recheck,
            mode: Mutex::new(Mode {
                degraded: false,
                last_probe: UnixMillis::default(),
                last_error: None,
            }),
        }
    }

    fn mode(&self) -> MutexGuard<'_, Mode<E>> {
        // Each update writes whole fields: a poisoned lock still holds a consistent value.
        self.mode.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Whether to call the primary now: always when healthy, once per `recheck` when degraded
    /// (a `now` before the last probe, a clock gone backwards, counts as due). A `true` while
    /// degraded records `now` as the last probe.
    pub(crate) fn use_primary(&self, now: UnixMillis) -> bool {
        let mut mode = self.mode();
        if !mode.degraded {
            return true;
        }
        let due = now < mode.last_probe || now.since(mode.last_probe) >= self.recheck;
        if due {
            mode.last_probe = now;
        }
        due
    }

    /// The primary answered: no longer degraded, the error is forgotten. Whether it was degraded
    /// until now.
    pub(crate) fn healthy(&self) -> bool {
        let mut mode = self.mode();
        let was = mode.degraded;
        mode.degraded = false;
        mode.last_error = None;
        was
    }

    /// The primary failed with `error`: degraded from now on. With `now`, that call counts as the
    /// last probe (the next one is due `recheck` later); without (a call made regardless of
    /// [`Self::use_primary`]), the probe schedule is left as it was.
    pub(crate) fn degrade(&self, now: Option<UnixMillis>, error: E) {
        let mut mode = self.mode();
        if let Some(now) = now {
            mode.last_probe = now;
        }
        mode.degraded = true;
        mode.last_error = Some(error);
    }

    /// Whether the primary failed and has not answered since.
    pub(crate) fn degraded(&self) -> bool {
        self.mode().degraded
    }

    /// The error that degraded the state, while it is degraded.
    pub(crate) fn last_error(&self) -> Option<E> {
        let mode = self.mode();
        mode.degraded.then(|| mode.last_error.clone()).flatten()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const RECHECK: Duration = Duration::from_secs(5);
    const T0: UnixMillis = UnixMillis(1_000_000);

    #[test]
    fn healthy_always_uses_the_primary() {
        let state = Degradation::<String>::new(RECHECK);
        assert!(!state.degraded());
        assert_eq!(state.last_error(), None);
        assert!(state.use_primary(T0));
        assert!(state.use_primary(T0));
        assert!(state.use_primary(UnixMillis(0)));
    }

    #[test]
    fn degraded_probes_once_per_recheck() {
        let state = Degradation::new(RECHECK);
        state.degrade(Some(T0), "down".to_owned());
        assert!(state.degraded());
        assert_eq!(state.last_error().as_deref(), Some("down"));

        assert!(!state.use_primary(T0), "the failing call was the probe");
        let almost = T0.plus(RECHECK - Duration::from_millis(1));
        assert!(!state.use_primary(almost));
        let due = T0.plus(RECHECK);
        assert!(state.use_primary(due), "due after exactly `recheck`");
        assert!(!state.use_primary(due), "one probe per interval");
        assert!(!state.use_primary(due.plus(RECHECK - Duration::from_millis(1))));
        assert!(state.use_primary(due.plus(RECHECK)));
    }

    #[test]
    fn a_clock_gone_backwards_makes_a_probe_due() {
        let state = Degradation::new(RECHECK);
        state.degrade(Some(T0), "down".to_owned());
        let earlier = UnixMillis(T0.0 - 1);
        assert!(state.use_primary(earlier), "now < last probe counts as due");
        assert!(!state.use_primary(earlier), "and becomes the last probe");
        assert!(
            !state.use_primary(T0),
            "the probe schedule restarted at `earlier`: T0 is less than `recheck` after it"
        );
        assert!(state.use_primary(earlier.plus(RECHECK)));
    }

    #[test]
    fn degrade_without_now_keeps_the_probe_schedule() {
        let state = Degradation::new(RECHECK);
        state.degrade(Some(T0), "first".to_owned());
        let later = T0.plus(Duration::from_secs(3));
        state.degrade(None, "second".to_owned());
        assert_eq!(state.last_error().as_deref(), Some("second"));
        assert!(!state.use_primary(later));
        assert!(
            state.use_primary(T0.plus(RECHECK)),
            "still due `recheck` after T0"
        );
    }

    #[test]
    fn degrade_without_now_while_healthy_makes_a_probe_due_at_once() {
        let state = Degradation::new(RECHECK);
        state.degrade(None, "down".to_owned());
        assert!(state.degraded());
        assert!(state.use_primary(T0), "never probed: the last probe is the epoch");
        assert!(!state.use_primary(T0));
    }

    #[test]
    fn healthy_ends_the_degradation_and_forgets_the_error() {
        let state = Degradation::new(RECHECK);
        state.degrade(Some(T0), "down".to_owned());
        assert!(state.healthy(), "it was degraded");
        assert!(!state.healthy(), "and is no longer");
        assert!(!state.degraded());
        assert_eq!(state.last_error(), None);
        assert!(
            state.use_primary(T0),
            "healthy again: every call uses the primary"
        );
        assert!(state.use_primary(T0));
    }
}

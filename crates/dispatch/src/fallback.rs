//! [`FallbackPoolState`]: a shared backend (Redis) with a local stand-in while it is down.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use async_trait::async_trait;

use crate::account::AccountId;
use crate::clock::UnixMillis;
use crate::degradation::Degradation;
use crate::error::StateError;
use crate::memory::MemoryPoolState;
use crate::outcome::{CooldownPolicy, Outcome};
use crate::state::{Acquire, AcquireRequest, LeaseGrant, LeaseId, PoolState, StateSnapshot};

/// Bit set in the ids of leases taken from the local state (the primary's ids must not use it;
/// Redis lease ids are positive 64-bit signed counters, so they never do).
const LOCAL_LEASE: u64 = 1 << 63;

/// Outcomes recorded while degraded that are kept for the primary's return.
pub const MISSED_KEPT: usize = 1024;

/// An outcome the primary has not seen: the account, the outcome and when it happened.
/// An outcome the primary may not have: the account, the outcome, when, and its id (the same at
/// each telling, so a primary that took it already, with its reply lost, does not take it twice).
type Missed = (AccountId, Outcome, UnixMillis, u64);

/// Pool state that uses a primary (shared) backend and falls back to a local in-memory state when
/// the primary fails.
///
/// - While the primary answers, every call goes to it; outcomes and operator clears are also
///   applied locally, so the local state starts from this replica's recent observations.
/// - When a call fails with a backend error, the state turns *degraded* ([`Self::degraded`]) and
///   that call and the next ones are served locally: per-account limits then hold per replica
///   only, and cooldowns learnt by other replicas are not seen.
/// - While degraded, one call every `recheck` (measured with the `now` the calls pass in) tries
///   the primary again; the first success ends the degradation.
/// - Operator clears always try the primary too.
/// - Leases remember where they were taken, so renewals and releases go to the right backend.
/// - Each lease the primary grants is also counted in the local state (a shadow, renewed and
///   released with it), so while degraded the local state knows what this replica already runs:
///   a request that started before the outage still takes its account's room.
/// - Leases taken locally are unknown to the primary: right after recovery an account can briefly
///   run more requests than its limit, until they finish.
/// - Outcomes recorded while degraded (the newest [`MISSED_KEPT`]) are recorded in the primary,
///   with the times they happened at, once it answers again: a cooldown learnt during the outage
///   is not forgotten by the replicas when it ends.
#[derive(Debug)]
pub struct FallbackPoolState {
    primary: Arc<dyn PoolState>,
    local: MemoryPoolState,
    degradation: Degradation<StateError>,
    /// Outer id of each lease taken locally → its id in the local state.
    local_leases: Mutex<HashMap<LeaseId, LeaseId>>,
    next_local: AtomicU64,
    /// Id of each lease the primary granted → its shadow in the local state.
    shadows: Mutex<HashMap<LeaseId, LeaseId>>,
    /// Outcomes recorded while degraded, oldest first.
    missed: Mutex<VecDeque<Missed>>,
}

impl FallbackPoolState {
    /// Uses `primary`, falling back to a local state applying `policy`; while degraded, retries
    /// the primary every `recheck` (a few seconds is sensible).
    #[must_use]
    pub fn new(primary: Arc<dyn PoolState>, policy: CooldownPolicy, recheck: Duration) -> Self {
        Self {
            primary,
            local: MemoryPoolState::new(policy),
            degradation: Degradation::new(recheck),
            local_leases: Mutex::new(HashMap::new()),
            next_local: AtomicU64::new(0),
            shadows: Mutex::new(HashMap::new()),
            missed: Mutex::new(VecDeque::new()),
        }
    }

    /// Whether the primary failed and calls are served locally.
    #[must_use]
    pub fn degraded(&self) -> bool {
        self.degradation.degraded()
    }

    /// The error that degraded the state, while it is degraded.
    #[must_use]
    pub fn last_error(&self) -> Option<StateError> {
        self.degradation.last_error()
    }

    fn local_leases(&self) -> MutexGuard<'_, HashMap<LeaseId, LeaseId>> {
        self.local_leases.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn shadows(&self) -> MutexGuard<'_, HashMap<LeaseId, LeaseId>> {
        self.shadows.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn missed(&self) -> MutexGuard<'_, VecDeque<Missed>> {
        self.missed.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The primary answered: healthy again, and, if it was degraded until now, told what it
    /// missed.
    async fn primary_answered(&self) {
        let was_degraded = self.degradation.healthy();
        if was_degraded || !self.missed().is_empty() {
            let _all_told = self.tell_missed().await;
        }
    }

    /// Whether the primary knows every outcome (it was not degraded, or took the ones it missed
    /// just now): told them before anything else, it answers as if it had never been away.
    async fn caught_up(&self) -> bool {
        // Healthy with outcomes still queued: a call that was telling them was dropped.
        let nothing_missed = !self.degradation.degraded() && self.missed().is_empty();
        nothing_missed || self.tell_missed().await
    }

    /// Records in the primary the outcomes it missed while degraded; those it cannot take (it
    /// failed again) wait for its next return, and those not yet sent when the call telling them
    /// is dropped wait for the next call. Whether it took them all.
    async fn tell_missed(&self) -> bool {
        let mut untold = Untold {
            state: self,
            items: self.missed().drain(..).collect(),
        };
        // Each taken out before it is sent: a call once sent runs to its end in the primary
        // (Redis records outcomes in a task of its own) even if this one is dropped.
        while let Some(item) = untold.items.pop_front() {
            let (account, outcome, at, id) = &item;
            if let Err(error) = self.primary.record_outcome_once(account, outcome, *at, *id).await {
                untold.items.push_front(item);
                drop(untold);
                self.degradation.degrade(None, error);
                return false;
            }
        }
        true
    }

    /// Counts a lease the primary granted in the local state too.
    fn shadow(&self, answer: &Acquire) {
        if let Acquire::Granted(grant) = answer
            && let Some(shadow) = self.local.hold(&grant.account, grant.class, grant.expires_at)
        {
            self.shadows().insert(grant.id, shadow);
        }
    }

    async fn acquire_locally(&self, request: &AcquireRequest) -> Result<Acquire, StateError> {
        match self.local.try_acquire(request).await? {
            Acquire::Granted(mut grant) => {
                let outer = LeaseId(LOCAL_LEASE | self.next_local.fetch_add(1, Ordering::Relaxed));
                self.local_leases().insert(outer, grant.id);
                grant.id = outer;
                Ok(Acquire::Granted(grant))
            }
            other => Ok(other),
        }
    }
}

/// Missed outcomes taken out to be told to the primary: those still here when it is dropped (the
/// primary failed, or the call was cancelled before sending them) go back to the front of the
/// queue.
struct Untold<'a> {
    state: &'a FallbackPoolState,
    items: VecDeque<Missed>,
}

impl Drop for Untold<'_> {
    fn drop(&mut self) {
        if self.items.is_empty() {
            return;
        }
        let mut queue = self.state.missed();
        while let Some(item) = self.items.pop_back() {
            queue.push_front(item);
        }
        keep_newest(&mut queue);
    }
}

/// A lease the primary granted, released again unless it reaches the caller: the call that took
/// it may be dropped while it still tells the primary what it missed.
struct Unclaimed<'a> {
    state: &'a FallbackPoolState,
    lease: Option<LeaseId>,
}

impl Unclaimed<'_> {
    fn claim(mut self) {
        self.lease = None;
    }
}

impl Drop for Unclaimed<'_> {
    fn drop(&mut self) {
        if let Some(lease) = self.lease.take() {
            self.state.release_detached(lease);
        }
    }
}

/// Drops the oldest missed outcomes beyond [`MISSED_KEPT`] (the newest are at the back).
fn keep_newest(missed: &mut VecDeque<Missed>) {
    while missed.len() > MISSED_KEPT {
        missed.pop_front();
    }
}

fn is_local(lease: LeaseId) -> bool {
    lease.0 & LOCAL_LEASE != 0
}

#[async_trait]
impl PoolState for FallbackPoolState {
    async fn try_acquire(&self, request: &AcquireRequest) -> Result<Acquire, StateError> {
        if self.degradation.use_primary(request.now) && self.caught_up().await {
            match self.primary.try_acquire(request).await {
                Ok(answer) => {
                    self.shadow(&answer);
                    let unclaimed = Unclaimed {
                        state: self,
                        lease: match &answer {
                            Acquire::Granted(grant) => Some(grant.id),
                            _ => None,
                        },
                    };
                    self.primary_answered().await;
                    unclaimed.claim();
                    return Ok(answer);
                }
                Err(error) => self.degradation.degrade(Some(request.now), error),
            }
        }
        self.acquire_locally(request).await
    }

    fn slots_freed_elsewhere(&self) -> Option<tokio::sync::watch::Receiver<()>> {
        self.primary.slots_freed_elsewhere()
    }

    fn release_detached(&self, lease: LeaseId) {
        if is_local(lease) {
            let inner = self.local_leases().remove(&lease);
            if let Some(inner) = inner {
                self.local.release_detached(inner);
            }
        } else {
            let shadow = self.shadows().remove(&lease);
            if let Some(shadow) = shadow {
                self.local.release_detached(shadow);
            }
            self.primary.release_detached(lease);
        }
    }

    async fn renew(
        &self,
        lease: LeaseId,
        ttl: Duration,
        now: UnixMillis,
    ) -> Result<Option<UnixMillis>, StateError> {
        if is_local(lease) {
            let inner = self.local_leases().get(&lease).copied();
            return match inner {
                Some(inner) => self.local.renew(inner, ttl, now).await,
                None => Ok(None),
            };
        }
        // The shadow lives as long as the request, whether or not the primary can be reached.
        let shadow = self.shadows().get(&lease).copied();
        if let Some(shadow) = shadow {
            self.local.renew(shadow, ttl, now).await?;
        }
        match self.primary.renew(lease, ttl, now).await {
            Ok(renewed) => {
                self.primary_answered().await;
                Ok(renewed)
            }
            Err(error) => {
                self.degradation.degrade(Some(now), error.clone());
                Err(error)
            }
        }
    }

    async fn reinstate(
        &self,
        grant: &LeaseGrant,
        ttl: Duration,
        now: UnixMillis,
    ) -> Result<Option<UnixMillis>, StateError> {
        // A local lease never leaves the local state while it is renewed; the shadow of a
        // primary's lease is renewed with it, whether or not the primary answers.
        if is_local(grant.id) {
            return Ok(None);
        }
        match self.primary.reinstate(grant, ttl, now).await {
            Ok(reinstated) => {
                self.primary_answered().await;
                Ok(reinstated)
            }
            Err(error) => {
                self.degradation.degrade(Some(now), error.clone());
                Err(error)
            }
        }
    }

    async fn record_outcome(
        &self,
        account: &AccountId,
        outcome: &Outcome,
        now: UnixMillis,
    ) -> Result<(), StateError> {
        self.local.record_outcome(account, outcome, now).await?;
        let id = fastrand::u64(..);
        // Missed ones first, so the primary sees the outcomes in the order they happened.
        if self.degradation.use_primary(now) && self.caught_up().await {
            match self.primary.record_outcome_once(account, outcome, now, id).await {
                Ok(()) => self.primary_answered().await,
                Err(error) => self.degradation.degrade(Some(now), error),
            }
        }
        if self.degradation.degraded() {
            let mut missed = self.missed();
            missed.push_back((account.clone(), outcome.clone(), now, id));
            keep_newest(&mut missed);
        }
        Ok(())
    }

    async fn clear_health(&self, account: &AccountId) -> Result<(), StateError> {
        // An operator action: always try to reach the shared state. What the primary missed
        // about the account is what the operator just cleared: it must not come back.
        self.missed().retain(|(missed, _, _, _)| missed != account);
        self.local.clear_health(account).await?;
        match self.primary.clear_health(account).await {
            Ok(()) => self.primary_answered().await,
            Err(error) => self.degradation.degrade(None, error),
        }
        Ok(())
    }

    async fn snapshot(&self, now: UnixMillis) -> Result<StateSnapshot, StateError> {
        if self.degradation.use_primary(now) && self.caught_up().await {
            match self.primary.snapshot(now).await {
                Ok(snapshot) => {
                    self.primary_answered().await;
                    return Ok(snapshot);
                }
                Err(error) => self.degradation.degrade(Some(now), error),
            }
        }
        self.local.snapshot(now).await
    }
}

#[cfg(test)]
#[path = "fallback_tests.rs"]
mod tests;

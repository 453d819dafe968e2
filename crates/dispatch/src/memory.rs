//! In-memory pool state for a single gateway process.

use std::collections::{BTreeSet, HashMap};
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use async_trait::async_trait;

use crate::account::{AccountId, SizeClass};
use crate::clock::UnixMillis;
use crate::error::StateError;
use crate::outcome::{AccountHealth, CooldownPolicy, Outcome};
use crate::select::{AccountRuntime, Selection, SelectionQuery, select};
use crate::state::{Acquire, AcquireRequest, LeaseGrant, LeaseId, PoolState, StateSnapshot};

/// Pool state held in this process behind one mutex (critical sections are short and never await).
#[derive(Debug)]
pub struct MemoryPoolState {
    policy: CooldownPolicy,
    inner: Mutex<Inner>,
}

#[derive(Debug)]
struct Inner {
    accounts: HashMap<AccountId, AccountRuntime>,
    leases: HashMap<LeaseId, LeaseRecord>,
    expiries: BTreeSet<(UnixMillis, LeaseId)>,
    next_lease: u64,
    rng: fastrand::Rng,
}

#[derive(Debug)]
struct LeaseRecord {
    account: AccountId,
    class: SizeClass,
    expires_at: UnixMillis,
}

impl MemoryPoolState {
    /// An empty state applying `policy` to outcomes.
    #[must_use]
    pub fn new(policy: CooldownPolicy) -> Self {
        Self::with_rng(policy, fastrand::Rng::new())
    }

    /// Like [`MemoryPoolState::new`] with reproducible tie-breaks.
    #[must_use]
    pub fn with_seed(policy: CooldownPolicy, seed: u64) -> Self {
        Self::with_rng(policy, fastrand::Rng::with_seed(seed))
    }

    fn with_rng(policy: CooldownPolicy, rng: fastrand::Rng) -> Self {
        let inner = Inner {
            accounts: HashMap::new(),
            leases: HashMap::new(),
            expiries: BTreeSet::new(),
            next_lease: 1,
            rng,
        };
        Self { policy, inner: Mutex::new(inner) }
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        // A panic while holding the lock cannot leave the maps half-updated in a harmful way
        // (every update is a few field writes), so a poisoned lock is still usable.
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl Default for MemoryPoolState {
    fn default() -> Self {
        Self::new(CooldownPolicy::default())
    }
}

impl Inner {
    fn purge_expired(&mut self, now: UnixMillis) {
        while let Some(&(expires_at, id)) = self.expiries.first() {
            if expires_at > now {
                break;
            }
            self.release(id);
        }
    }

    fn release(&mut self, id: LeaseId) {
        let Some(record) = self.leases.remove(&id) else { return };
        self.expiries.remove(&(record.expires_at, id));
        if let Some(runtime) = self.accounts.get_mut(&record.account) {
            let count = runtime.in_flight.get_mut(record.class);
            *count = count.saturating_sub(1);
        }
    }

    fn acquire(&mut self, request: &AcquireRequest) -> Acquire {
        self.purge_expired(request.now);
        let query = SelectionQuery {
            class: request.class,
            image: request.image,
            now: request.now,
            exclude: &request.exclude,
        };
        let accounts = &self.accounts;
        let selection = select(&request.candidates, &query, |id| accounts.get(id), self.rng.u64(..));
        let index = match selection {
            Selection::Selected(index) => index,
            Selection::Busy => return Acquire::Busy,
            Selection::CoolingDown { earliest_reset } => return Acquire::CoolingDown { earliest_reset },
            Selection::Unavailable => return Acquire::Unavailable,
        };
        let Some(candidate) = request.candidates.entries().get(index) else {
            return Acquire::Unavailable;
        };
        let count = self.accounts.entry(candidate.id.clone()).or_default().in_flight.get_mut(request.class);
        *count = count.saturating_add(1);
        let id = LeaseId(self.next_lease);
        self.next_lease = self.next_lease.wrapping_add(1);
        let expires_at = request.now.plus(request.lease_ttl);
        let record = LeaseRecord { account: candidate.id.clone(), class: request.class, expires_at };
        self.leases.insert(id, record);
        self.expiries.insert((expires_at, id));
        Acquire::Granted(LeaseGrant { id, account: candidate.id.clone(), class: request.class, expires_at })
    }

    fn renew(&mut self, id: LeaseId, ttl: Duration, now: UnixMillis) -> Option<UnixMillis> {
        self.purge_expired(now);
        let record = self.leases.get_mut(&id)?;
        self.expiries.remove(&(record.expires_at, id));
        record.expires_at = now.plus(ttl);
        self.expiries.insert((record.expires_at, id));
        Some(record.expires_at)
    }
}

#[async_trait]
impl PoolState for MemoryPoolState {
    async fn try_acquire(&self, request: &AcquireRequest) -> Result<Acquire, StateError> {
        Ok(self.lock().acquire(request))
    }

    fn release_detached(&self, lease: LeaseId) {
        self.lock().release(lease);
    }

    async fn renew(&self, lease: LeaseId, ttl: Duration, now: UnixMillis) -> Result<Option<UnixMillis>, StateError> {
        Ok(self.lock().renew(lease, ttl, now))
    }

    async fn record_outcome(&self, account: &AccountId, outcome: &Outcome, now: UnixMillis) -> Result<(), StateError> {
        let mut inner = self.lock();
        inner.accounts.entry(account.clone()).or_default().health.apply(outcome, &self.policy, now);
        Ok(())
    }

    async fn clear_health(&self, account: &AccountId) -> Result<(), StateError> {
        if let Some(runtime) = self.lock().accounts.get_mut(account) {
            let old = std::mem::take(&mut runtime.health);
            runtime.health = AccountHealth {
                successes: old.successes,
                failures: old.failures,
                last_error: old.last_error,
                ..AccountHealth::default()
            };
        }
        Ok(())
    }

    async fn snapshot(&self, now: UnixMillis) -> Result<StateSnapshot, StateError> {
        let mut inner = self.lock();
        inner.purge_expired(now);
        Ok(inner.accounts.clone())
    }
}

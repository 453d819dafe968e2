//! In-memory pool state for a single gateway process.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, Weak};
use std::time::Duration;

use async_trait::async_trait;

use crate::account::{AccountId, SizeClass};
use crate::clock::UnixMillis;
use crate::error::StateError;
use crate::expiry_queue::ExpiryQueue;
use crate::lease_table::LeaseTable;
use crate::outcome::{AccountHealth, CooldownPolicy, Outcome};
use crate::room::RoomIndex;
use crate::select::{AccountLoad, AccountRuntime, RankedCandidates, Selection, SelectionQuery, select};
use crate::state::{Acquire, AcquireRequest, LeaseGrant, LeaseId, PoolState, StateSnapshot};

/// Pool state held in this process behind one mutex (critical sections are short and never await).
///
/// Accounts live in a dense table; for each ranked candidate list it has seen, the state caches
/// the table slots of its candidates, so selection reads load and health by index without hashing
/// account ids, and a room index of the candidates below their limits, so a pick passes over
/// full accounts without looking at them.
#[derive(Debug)]
pub struct MemoryPoolState {
    policy: CooldownPolicy,
    inner: Mutex<Inner>,
}

#[derive(Debug)]
struct Inner {
    slot_by_id: HashMap<AccountId, usize>,
    /// Identity and health per slot (read on outcomes and snapshots).
    accounts: Vec<(AccountId, AccountHealth)>,
    /// What selection reads per slot, kept dense.
    loads: Vec<AccountLoad>,
    /// Per slot: the cached lists it is in, as (cache key, position in the list).
    memberships: Vec<Vec<(usize, usize)>>,
    slot_cache: HashMap<usize, SlotCache>,
    leases: LeaseTable<LeaseRecord>,
    expiries: ExpiryQueue,
    rng: fastrand::Rng,
}

/// Table slots of one candidate list, in its order. The weak reference keeps the list's address
/// from being reused while the entry exists (an `Arc`'s allocation is freed only when its last
/// weak reference is), so the address identifies the list.
#[derive(Debug)]
struct SlotCache {
    list: Weak<RankedCandidates>,
    slots: Vec<usize>,
    room: RoomIndex,
}

#[derive(Debug)]
struct LeaseRecord {
    slot: usize,
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
            slot_by_id: HashMap::new(),
            accounts: Vec::new(),
            loads: Vec::new(),
            memberships: Vec::new(),
            slot_cache: HashMap::new(),
            leases: LeaseTable::default(),
            expiries: ExpiryQueue::default(),
            rng,
        };
        Self {
            policy,
            inner: Mutex::new(inner),
        }
    }

    /// Counts a request in flight on `account` that another state granted (the shared state of
    /// [`FallbackPoolState`](crate::FallbackPoolState)): it takes room like a lease of this
    /// state's own until it is released, and is renewed and expires like one. `None` when the
    /// lease table is full.
    pub(crate) fn hold(
        &self,
        account: &AccountId,
        class: SizeClass,
        expires_at: UnixMillis,
    ) -> Option<LeaseId> {
        self.lock().hold(account, class, expires_at)
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        // Every update under the lock is a few field writes that leave the maps consistent, so a
        // lock poisoned by a panicking holder is still safe to use.
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl Default for MemoryPoolState {
    fn default() -> Self {
        Self::new(CooldownPolicy::default())
    }
}

impl Inner {
    fn slot_of(&mut self, id: &AccountId) -> usize {
        if let Some(&slot) = self.slot_by_id.get(id) {
            return slot;
        }
        let slot = self.accounts.len();
        self.accounts.push((id.clone(), AccountHealth::default()));
        self.loads.push(AccountLoad::default());
        self.memberships.push(Vec::new());
        self.slot_by_id.insert(id.clone(), slot);
        slot
    }

    /// Changes the health of `id` and refreshes what selection reads from it.
    fn update_health(&mut self, id: &AccountId, change: impl FnOnce(&mut AccountHealth)) {
        let slot = self.slot_of(id);
        if let (Some((_, health)), Some(load)) = (self.accounts.get_mut(slot), self.loads.get_mut(slot)) {
            change(health);
            *load = load.with_health(health);
        }
    }

    /// The cache key of `list`, filling the cache on first sight.
    fn cache_slots(&mut self, list: &Arc<RankedCandidates>) -> usize {
        let key = Arc::as_ptr(list).addr();
        // An entry's weak reference keeps its list's allocation, and so its address, from being
        // reused (a freed list's memory stays until its weak references are gone): an entry at
        // this address is this very list's.
        if !self.slot_cache.contains_key(&key) {
            let slots: Vec<usize> = list.entries().iter().map(|c| self.slot_of(&c.id)).collect();
            let loads = &self.loads;
            let room = RoomIndex::new(list, |position| {
                slots
                    .get(position)
                    .and_then(|&slot| loads.get(slot))
                    .map(|load| load.in_flight)
                    .unwrap_or_default()
            });
            // The entries of lists freed since (a new configuration replaced them) go now, and
            // with them their memberships below.
            self.slot_cache.retain(|_, cached| cached.list.strong_count() > 0);
            let live = &self.slot_cache;
            for lists in &mut self.memberships {
                lists.retain(|(cached, _)| live.contains_key(cached));
            }
            for (position, &slot) in slots.iter().enumerate() {
                if let Some(lists) = self.memberships.get_mut(slot) {
                    lists.push((key, position));
                }
            }
            self.slot_cache.insert(
                key,
                SlotCache {
                    list: Arc::downgrade(list),
                    slots,
                    room,
                },
            );
        }
        key
    }

    /// Changes the count of `class` requests in flight on `slot` by `change` (+1 or -1), in the
    /// dense table and in the room index of every cached list holding the account.
    fn add_in_flight(&mut self, slot: usize, class: SizeClass, change: i8) {
        let Some(load) = self.loads.get_mut(slot) else {
            return;
        };
        let count = load.in_flight.get_mut(class);
        *count = if change < 0 {
            count.saturating_sub(1)
        } else {
            count.saturating_add(1)
        };
        let used = *count;
        for &(key, position) in self.memberships.get(slot).into_iter().flatten() {
            if let Some(cached) = self.slot_cache.get_mut(&key) {
                cached.room.set(position, class, used);
            }
        }
    }

    fn purge_expired(&mut self, now: UnixMillis) {
        while let Some((expires_at, id)) = self.expiries.pop_due(now) {
            // An entry left by a release or a renewal is not the lease's expiry any more.
            if self
                .leases
                .get(id)
                .is_some_and(|record| record.expires_at == expires_at)
            {
                self.release(id);
            }
        }
    }

    fn release(&mut self, id: LeaseId) {
        let Some(record) = self.leases.remove(id) else {
            return;
        };
        self.add_in_flight(record.slot, record.class, -1);
        self.sweep_expiries();
    }

    /// Drops the expiry entries of released and renewed leases once they outnumber the live ones.
    fn sweep_expiries(&mut self) {
        let leases = &self.leases;
        self.expiries.sweep_if_stale(leases.len(), |expires_at, id| {
            leases
                .get(id)
                .is_some_and(|record| record.expires_at == expires_at)
        });
    }

    fn acquire(&mut self, request: &AcquireRequest) -> Acquire {
        self.purge_expired(request.now);
        let query = SelectionQuery {
            class: request.class,
            image: request.image,
            now: request.now,
            exclude: &request.exclude,
        };
        let random = self.rng.u64(..);
        let key = self.cache_slots(&request.candidates);
        let Some(cached) = self.slot_cache.get(&key) else {
            return Acquire::Unavailable;
        };
        let loads = &self.loads;
        let lookup = |index: usize| {
            let slot = cached.slots.get(index)?;
            loads.get(*slot).copied()
        };
        let picked = cached.room.pick(&request.candidates, &query, lookup, random);
        let selection = match picked {
            Some(index) => Selection::Selected(index),
            // Nothing eligible: the full walk tells busy from cooling down from unavailable.
            None => select(&request.candidates, &query, |index, _| lookup(index), random),
        };
        let index = match selection {
            Selection::Selected(index) => index,
            Selection::Busy => return Acquire::Busy,
            Selection::CoolingDown { earliest_reset } => return Acquire::CoolingDown { earliest_reset },
            Selection::Unavailable => return Acquire::Unavailable,
        };
        let (Some(candidate), Some(&slot)) =
            (request.candidates.entries().get(index), cached.slots.get(index))
        else {
            return Acquire::Unavailable;
        };
        let expires_at = request.now.plus(request.lease_ttl);
        let Some(id) = self.leases.insert(LeaseRecord {
            slot,
            class: request.class,
            expires_at,
        }) else {
            return Acquire::Busy;
        };
        self.expiries.push(expires_at, id);
        self.add_in_flight(slot, request.class, 1);
        Acquire::Granted(LeaseGrant {
            id,
            account: candidate.id.clone(),
            class: request.class,
            expires_at,
        })
    }

    /// Counts a request in flight on `account` without asking whether it has room: one that
    /// already runs there, on a slot another state granted.
    fn hold(&mut self, account: &AccountId, class: SizeClass, expires_at: UnixMillis) -> Option<LeaseId> {
        let slot = self.slot_of(account);
        let id = self.leases.insert(LeaseRecord {
            slot,
            class,
            expires_at,
        })?;
        self.expiries.push(expires_at, id);
        self.add_in_flight(slot, class, 1);
        Some(id)
    }

    fn renew(&mut self, id: LeaseId, ttl: Duration, now: UnixMillis) -> Option<UnixMillis> {
        self.purge_expired(now);
        let record = self.leases.get_mut(id)?;
        record.expires_at = now.plus(ttl);
        let new = record.expires_at;
        self.expiries.push(new, id);
        self.sweep_expiries();
        Some(new)
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

    async fn renew(
        &self,
        lease: LeaseId,
        ttl: Duration,
        now: UnixMillis,
    ) -> Result<Option<UnixMillis>, StateError> {
        Ok(self.lock().renew(lease, ttl, now))
    }

    async fn record_outcome(
        &self,
        account: &AccountId,
        outcome: &Outcome,
        now: UnixMillis,
    ) -> Result<(), StateError> {
        self.lock()
            .update_health(account, |health| health.apply(outcome, &self.policy, now));
        Ok(())
    }

    async fn clear_health(&self, account: &AccountId) -> Result<(), StateError> {
        self.lock()
            .update_health(account, |health| *health = std::mem::take(health).cleared());
        Ok(())
    }

    async fn snapshot(&self, now: UnixMillis) -> Result<StateSnapshot, StateError> {
        let mut inner = self.lock();
        inner.purge_expired(now);
        let runtimes = inner.accounts.iter().zip(&inner.loads);
        let snapshot = runtimes
            .map(|((id, health), load)| {
                (
                    id.clone(),
                    AccountRuntime {
                        in_flight: load.in_flight,
                        health: health.clone(),
                    },
                )
            })
            .collect();
        Ok(snapshot)
    }
}

#[cfg(test)]
#[path = "memory_tests.rs"]
mod tests;

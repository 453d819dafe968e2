#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::disallowed_methods
)]

use std::collections::HashSet;
use std::sync::atomic::AtomicI64;

use async_trait::async_trait;
use tokio::sync::Notify;

use super::*;
use crate::account::{AccountSpec, GroupId, Tier};
use crate::clock::ManualClock;
use crate::dispatcher::{DispatchConfig, DispatchRequest, Dispatcher};
use crate::outcome::Outcome;
use crate::state::{Acquire, AcquireRequest, StateSnapshot};

/// A state that loses every lease at its first renewal, as a restarted Redis would, and takes a
/// lease back only when told to: `taken` counts the slots it holds, and it releases only the
/// leases it knows, as the Redis state does.
#[derive(Debug, Default)]
struct Forgetful {
    known: Mutex<HashSet<LeaseId>>,
    taken: AtomicI64,
    reinstating: Notify,
    reinstate_now: Notify,
    reinstated: Notify,
}

#[async_trait]
impl PoolState for Forgetful {
    async fn try_acquire(&self, request: &AcquireRequest) -> Result<Acquire, StateError> {
        let account = AccountId::new("a");
        let id = LeaseId(1);
        self.known.lock().unwrap().insert(id);
        self.taken.fetch_add(1, Ordering::SeqCst);
        Ok(Acquire::Granted(LeaseGrant {
            id,
            account,
            class: request.class,
            expires_at: request.now.plus(request.lease_ttl),
        }))
    }

    fn release_detached(&self, lease: LeaseId) {
        if self.known.lock().unwrap().remove(&lease) {
            self.taken.fetch_sub(1, Ordering::SeqCst);
        }
    }

    async fn renew(
        &self,
        lease: LeaseId,
        _ttl: Duration,
        _now: UnixMillis,
    ) -> Result<Option<UnixMillis>, StateError> {
        if self.known.lock().unwrap().remove(&lease) {
            self.taken.fetch_sub(1, Ordering::SeqCst);
        }
        Ok(None)
    }

    async fn reinstate(
        &self,
        grant: &LeaseGrant,
        ttl: Duration,
        now: UnixMillis,
    ) -> Result<Option<UnixMillis>, StateError> {
        self.reinstating.notify_one();
        self.reinstate_now.notified().await;
        self.known.lock().unwrap().insert(grant.id);
        self.taken.fetch_add(1, Ordering::SeqCst);
        self.reinstated.notify_one();
        Ok(Some(now.plus(ttl)))
    }

    async fn record_outcome(&self, _: &AccountId, _: &Outcome, _: UnixMillis) -> Result<(), StateError> {
        Ok(())
    }

    async fn clear_health(&self, _: &AccountId) -> Result<(), StateError> {
        Ok(())
    }

    async fn snapshot(&self, _: UnixMillis) -> Result<StateSnapshot, StateError> {
        Ok(StateSnapshot::default())
    }
}

#[tokio::test]
async fn a_lease_dropped_while_its_slot_is_taken_back_leaves_the_slot_free() {
    let state = Arc::new(Forgetful::default());
    let config = DispatchConfig {
        renew_interval: Some(Duration::from_millis(10)),
        max_wait: Duration::ZERO,
        ..DispatchConfig::default()
    };
    let pool = Dispatcher::new(
        state.clone(),
        Arc::new(ManualClock::new(UnixMillis(1_000_000))),
        config,
    );
    pool.replace_accounts([AccountSpec::new("a", Tier::Pro, &["g"])]);
    let lease = pool
        .acquire(&DispatchRequest::image(&GroupId::new("g"), SizeClass::Large))
        .await
        .unwrap();
    // The state lost the lease; the renewal is taking it back when the request ends.
    state.reinstating.notified().await;
    assert_eq!(state.taken.load(Ordering::SeqCst), 0);
    drop(lease);
    state.reinstate_now.notify_one();
    // (A renewal stopped before taking the slot back never says so: nothing was taken.)
    let _ = tokio::time::timeout(Duration::from_secs(2), state.reinstated.notified()).await;
    for _ in 0..200 {
        if state.taken.load(Ordering::SeqCst) == 0 && state.known.lock().unwrap().is_empty() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    panic!(
        "the slot taken back for a request that had ended stays taken: {} slot(s)",
        state.taken.load(Ordering::SeqCst)
    );
}

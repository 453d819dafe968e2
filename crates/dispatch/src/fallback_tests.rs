#![allow(clippy::disallowed_methods)]

use std::sync::atomic::{AtomicBool, AtomicUsize};

use super::*;
use crate::account::{AccountSpec, GroupId, SizeClass, Tier};
use crate::outcome::LimitScope;
use crate::select::RankedCandidates;

const START: UnixMillis = UnixMillis(1_000_000);
const RECHECK: Duration = Duration::from_secs(5);

/// A memory state that can be switched off, counting the calls it receives; its acquisitions can
/// be held at a gate, and its outcome records held: applied, as Redis runs a script sent to it to
/// its end, but never answered.
#[derive(Debug, Default)]
struct Switchable {
    inner: MemoryPoolState,
    down: AtomicBool,
    calls: AtomicUsize,
    hold_acquires: AtomicBool,
    acquires_opened: tokio::sync::Notify,
    hold_records: AtomicBool,
    /// The ids of the outcomes told with one, in order.
    told_ids: std::sync::Mutex<Vec<u64>>,
    /// Outcomes are applied, then answered with an error (the reply lost).
    lose_replies: AtomicBool,
}

impl Switchable {
    async fn acquire_gate(&self) {
        loop {
            let opened = self.acquires_opened.notified();
            if !self.hold_acquires.load(Ordering::SeqCst) {
                return;
            }
            opened.await;
        }
    }

    fn open_acquires(&self) {
        self.hold_acquires.store(false, Ordering::SeqCst);
        self.acquires_opened.notify_waiters();
    }

    fn check(&self) -> Result<(), StateError> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        if self.down.load(Ordering::SeqCst) {
            Err(StateError::Backend("switched off".into()))
        } else {
            Ok(())
        }
    }
}

#[async_trait]
impl PoolState for Switchable {
    async fn try_acquire(&self, request: &AcquireRequest) -> Result<Acquire, StateError> {
        self.check()?;
        self.acquire_gate().await;
        self.inner.try_acquire(request).await
    }
    fn release_detached(&self, lease: LeaseId) {
        self.inner.release_detached(lease);
    }
    async fn renew(
        &self,
        lease: LeaseId,
        ttl: Duration,
        now: UnixMillis,
    ) -> Result<Option<UnixMillis>, StateError> {
        self.check()?;
        self.inner.renew(lease, ttl, now).await
    }
    async fn record_outcome(
        &self,
        account: &AccountId,
        outcome: &Outcome,
        now: UnixMillis,
    ) -> Result<(), StateError> {
        self.check()?;
        self.inner.record_outcome(account, outcome, now).await?;
        if self.hold_records.load(Ordering::SeqCst) {
            std::future::pending::<()>().await;
        }
        Ok(())
    }
    async fn record_outcome_once(
        &self,
        account: &AccountId,
        outcome: &Outcome,
        now: UnixMillis,
        id: u64,
    ) -> Result<(), StateError> {
        self.check()?;
        self.told_ids.lock().unwrap().push(id);
        self.inner.record_outcome(account, outcome, now).await?;
        if self.hold_records.load(Ordering::SeqCst) {
            std::future::pending::<()>().await;
        }
        if self.lose_replies.load(Ordering::SeqCst) {
            return Err(StateError::Backend("the reply was lost".into()));
        }
        Ok(())
    }
    async fn clear_health(&self, account: &AccountId) -> Result<(), StateError> {
        self.check()?;
        self.inner.clear_health(account).await
    }
    async fn snapshot(&self, now: UnixMillis) -> Result<StateSnapshot, StateError> {
        self.check()?;
        self.inner.snapshot(now).await
    }
}

fn setup() -> (Arc<Switchable>, FallbackPoolState) {
    let primary = Arc::new(Switchable::default());
    let state = FallbackPoolState::new(primary.clone(), CooldownPolicy::default(), RECHECK);
    (primary, state)
}

fn request(now: UnixMillis) -> AcquireRequest {
    let specs = [AccountSpec::new("a", Tier::Pro, &["g"])];
    AcquireRequest {
        candidates: Arc::new(RankedCandidates::for_group(&specs, &GroupId::new("g"))),
        class: SizeClass::Large,
        image: true,
        exclude: Vec::new(),
        lease_ttl: Duration::from_secs(60),
        now,
    }
}

fn granted(answer: Acquire) -> LeaseId {
    match answer {
        Acquire::Granted(grant) => grant.id,
        other => panic!("expected a grant, got {other:?}"),
    }
}

/// What the primary (the shared state) knows of account `a`'s health.
async fn primary_health(primary: &Switchable, now: UnixMillis) -> crate::outcome::AccountHealth {
    let shared = primary.inner.snapshot(now).await.unwrap();
    shared[&AccountId::new("a")].health.clone()
}

async fn large_in_flight(state: &dyn PoolState, now: UnixMillis) -> u32 {
    let snapshot = state.snapshot(now).await.unwrap();
    snapshot
        .get(&AccountId::new("a"))
        .map_or(0, |r| r.in_flight.large)
}

#[tokio::test]
async fn a_healthy_primary_serves_everything() {
    let (primary, state) = setup();
    let lease = granted(state.try_acquire(&request(START)).await.unwrap());
    assert!(!is_local(lease));
    assert!(!state.degraded());
    assert_eq!(large_in_flight(&primary.inner, START).await, 1);
    assert_eq!(state.try_acquire(&request(START)).await.unwrap(), Acquire::Busy);
    state.release_detached(lease);
    assert_eq!(large_in_flight(&primary.inner, START).await, 0);
}

#[tokio::test]
async fn a_failing_primary_degrades_to_local_state_and_recovers() {
    let (primary, state) = setup();
    primary.down.store(true, Ordering::SeqCst);

    let local = granted(state.try_acquire(&request(START)).await.unwrap());
    assert!(is_local(local), "served by the local state");
    assert!(state.degraded());
    assert_eq!(
        state.last_error(),
        Some(StateError::Backend("switched off".into()))
    );
    // The local state enforces the limit on its own.
    assert_eq!(state.try_acquire(&request(START)).await.unwrap(), Acquire::Busy);

    // No new attempt on the primary before the recheck interval.
    let calls = primary.calls.load(Ordering::SeqCst);
    let almost = START.plus(RECHECK - Duration::from_millis(1));
    assert_eq!(state.try_acquire(&request(almost)).await.unwrap(), Acquire::Busy);
    assert_eq!(primary.calls.load(Ordering::SeqCst), calls);

    // Past it, the primary is tried again; still down, still degraded.
    let later = START.plus(RECHECK);
    assert_eq!(state.try_acquire(&request(later)).await.unwrap(), Acquire::Busy);
    assert_eq!(primary.calls.load(Ordering::SeqCst), calls + 1);
    assert!(state.degraded());

    // Releases go back where the leases came from.
    state.release_detached(local);
    assert_eq!(large_in_flight(&state.local, later).await, 0);

    primary.down.store(false, Ordering::SeqCst);
    let recovered = START.plus(RECHECK * 2);
    let shared = granted(state.try_acquire(&request(recovered)).await.unwrap());
    assert!(!is_local(shared), "served by the primary again");
    assert!(!state.degraded());
    assert_eq!(state.last_error(), None);
    assert_eq!(large_in_flight(&primary.inner, recovered).await, 1);
    state.release_detached(shared);
    assert_eq!(large_in_flight(&primary.inner, recovered).await, 0);
}

#[tokio::test]
async fn a_request_running_on_a_shared_lease_still_takes_room_once_degraded() {
    // The account takes one 4K request at a time. This replica runs one on a lease from the
    // primary when the primary goes down: the local state must not grant the account again.
    let (primary, state) = setup();
    let shared = granted(state.try_acquire(&request(START)).await.unwrap());
    primary.down.store(true, Ordering::SeqCst);
    assert_eq!(state.try_acquire(&request(START)).await.unwrap(), Acquire::Busy);
    assert!(state.degraded());

    // Renewed while the primary is down, the shadow outlives its first expiry.
    let ttl = Duration::from_secs(60);
    let renewed_at = START.plus(Duration::from_secs(50));
    assert!(
        state.renew(shared, ttl, renewed_at).await.is_err(),
        "the primary is down"
    );
    let past_first_expiry = START.plus(Duration::from_secs(90));
    assert_eq!(
        state.try_acquire(&request(past_first_expiry)).await.unwrap(),
        Acquire::Busy
    );

    // Once the request ends, the room is free again.
    state.release_detached(shared);
    assert!(is_local(granted(
        state.try_acquire(&request(past_first_expiry)).await.unwrap()
    )));
}

#[tokio::test]
async fn local_leases_renew_locally_and_shared_renew_failures_degrade() {
    let (primary, state) = setup();
    let shared = granted(state.try_acquire(&request(START)).await.unwrap());
    primary.down.store(true, Ordering::SeqCst);
    let ttl = Duration::from_secs(60);
    assert!(state.renew(shared, ttl, START).await.is_err());
    assert!(state.degraded());
    let specs = [AccountSpec::new("b", Tier::Pro, &["g"])];
    let other = AcquireRequest {
        candidates: Arc::new(RankedCandidates::for_group(&specs, &GroupId::new("g"))),
        ..request(START)
    };
    let local = granted(state.try_acquire(&other).await.unwrap());
    let later = START.plus(Duration::from_secs(30));
    assert_eq!(state.renew(local, ttl, later).await, Ok(Some(later.plus(ttl))));
    state.release_detached(local);
    assert_eq!(state.renew(local, ttl, later).await, Ok(None));
}

#[tokio::test]
async fn outcomes_are_kept_locally_so_the_fallback_knows_recent_cooldowns() {
    let (primary, state) = setup();
    let reset = START.plus(Duration::from_secs(90));
    let limited = Outcome::RateLimited {
        reset_at: Some(reset),
        scope: LimitScope::All,
    };
    state.record_outcome(&"a".into(), &limited, START).await.unwrap();
    assert!(primary_health(&primary, START).await.cooldown_all.is_some());

    primary.down.store(true, Ordering::SeqCst);
    assert_eq!(
        state.try_acquire(&request(START)).await.unwrap(),
        Acquire::CoolingDown {
            earliest_reset: reset
        }
    );
    assert!(state.degraded());
    // Recorded while down: not an error, applied locally.
    state
        .record_outcome(&"a".into(), &Outcome::Success, START)
        .await
        .unwrap();
    state.clear_health(&"a".into()).await.unwrap();
    assert!(granted(state.try_acquire(&request(START)).await.unwrap()).0 & LOCAL_LEASE != 0);
    let local = state.snapshot(START).await.unwrap();
    assert_eq!(local[&AccountId::new("a")].health.successes, 1);
}

#[tokio::test]
async fn outcomes_recorded_while_degraded_reach_the_primary_when_it_returns() {
    let (primary, state) = setup();
    primary.down.store(true, Ordering::SeqCst);
    assert!(is_local(granted(
        state.try_acquire(&request(START)).await.unwrap()
    )));
    assert!(state.degraded());
    // A usage limit with a five-hour reset learnt during the outage.
    let reset = START.plus(Duration::from_secs(5 * 3600));
    let limited = Outcome::RateLimited {
        reset_at: Some(reset),
        scope: LimitScope::All,
    };
    state.record_outcome(&"a".into(), &limited, START).await.unwrap();
    assert!(
        primary
            .inner
            .snapshot(START)
            .await
            .unwrap()
            .get(&AccountId::new("a"))
            .is_none_or(|account| account.health.cooldown_all.is_none()),
        "the primary was down"
    );

    primary.down.store(false, Ordering::SeqCst);
    let back = START.plus(RECHECK * 2);
    assert_eq!(
        state.try_acquire(&request(back)).await.unwrap(),
        Acquire::CoolingDown {
            earliest_reset: reset
        },
        "once back, the primary knows the cooldown (every replica does)"
    );
    assert!(!state.degraded());
    assert_eq!(
        primary_health(&primary, back)
            .await
            .cooldown_all
            .as_ref()
            .map(|c| c.until),
        Some(reset)
    );
}

#[tokio::test]
async fn missed_outcomes_that_the_primary_cannot_take_wait_for_its_next_return() {
    let (primary, state) = setup();
    primary.down.store(true, Ordering::SeqCst);
    let limited = Outcome::RateLimited {
        reset_at: Some(START.plus(Duration::from_secs(3600))),
        scope: LimitScope::All,
    };
    // Degraded by this very call (the primary is tried first, and fails).
    state.record_outcome(&"a".into(), &limited, START).await.unwrap();
    assert!(state.degraded());
    // Still down at the next probe: kept.
    let probe = START.plus(RECHECK);
    state
        .record_outcome(&"a".into(), &Outcome::Success, probe)
        .await
        .unwrap();
    assert!(state.degraded());
    assert_eq!(state.missed().len(), 2);
    primary.down.store(false, Ordering::SeqCst);
    state.snapshot(START.plus(RECHECK * 2)).await.unwrap();
    assert!(state.missed().is_empty());
    let shared = primary_health(&primary, probe).await;
    assert_eq!(shared.successes, 1);
    assert!(shared.cooldown_all.is_some());
}

#[tokio::test]
async fn an_operator_clear_during_the_outage_is_not_undone_when_redis_returns() {
    let (primary, state) = setup();
    primary.down.store(true, Ordering::SeqCst);
    let failed = Outcome::AuthFailed {
        reason: "401 invalid api key".into(),
    };
    state.record_outcome(&"a".into(), &failed, START).await.unwrap();
    assert!(state.degraded());
    // The operator fixes the credential and switches the account back on; Redis is still down.
    state.clear_health(&"a".into()).await.unwrap();
    primary.down.store(false, Ordering::SeqCst);
    let back = START.plus(RECHECK * 2);
    assert!(
        !is_local(granted(state.try_acquire(&request(back)).await.unwrap())),
        "served by the primary, with the account usable"
    );
}

#[tokio::test]
async fn missed_outcomes_survive_a_call_dropped_while_telling_them() {
    let (primary, state) = setup();
    primary.down.store(true, Ordering::SeqCst);
    let limited = Outcome::RateLimited {
        reset_at: Some(START.plus(Duration::from_secs(3600))),
        scope: LimitScope::All,
    };
    state.record_outcome(&"a".into(), &limited, START).await.unwrap();
    state
        .record_outcome(&"a".into(), &Outcome::Success, START)
        .await
        .unwrap();
    assert_eq!(state.missed().len(), 2);
    // Back, but slow to answer: the call telling them is dropped (its client left) while the
    // first is sent.
    primary.down.store(false, Ordering::SeqCst);
    primary.hold_records.store(true, Ordering::SeqCst);
    let dropped = tokio::time::timeout(Duration::from_millis(10), state.snapshot(START.plus(RECHECK))).await;
    assert!(dropped.is_err());
    assert_eq!(
        state.missed().len(),
        1,
        "the outcome not yet sent waits; the one sent is not sent twice"
    );
    primary.hold_records.store(false, Ordering::SeqCst);
    state.snapshot(START.plus(RECHECK * 2)).await.unwrap();
    assert!(state.missed().is_empty());
    let shared = primary_health(&primary, START).await;
    assert_eq!(shared.successes, 1);
    assert!(shared.cooldown_all.is_some());
}

#[tokio::test]
async fn a_grant_whose_call_is_dropped_while_telling_missed_outcomes_is_given_back() {
    let (primary, state) = setup();
    let state = Arc::new(state);
    primary.down.store(true, Ordering::SeqCst);
    let local = granted(state.try_acquire(&request(START)).await.unwrap());
    state.release_detached(local);
    assert!(state.degraded());

    // The primary is back: a probe's acquisition is under way when two outcomes are recorded
    // (locally: the probe was that call), so the grant is followed by telling them; the primary
    // is slow to answer, and the call is dropped while the first is sent.
    primary.down.store(false, Ordering::SeqCst);
    primary.hold_acquires.store(true, Ordering::SeqCst);
    let probe = START.plus(RECHECK);
    let calls = primary.calls.load(Ordering::SeqCst);
    let acquiring = tokio::spawn({
        let state = Arc::clone(&state);
        async move { state.try_acquire(&request(probe)).await }
    });
    while primary.calls.load(Ordering::SeqCst) == calls {
        tokio::task::yield_now().await;
    }
    for _ in 0..2 {
        state
            .record_outcome(&"a".into(), &Outcome::Success, probe)
            .await
            .unwrap();
    }
    assert_eq!(state.missed().len(), 2);
    primary.hold_records.store(true, Ordering::SeqCst);
    primary.open_acquires();
    while large_in_flight(&primary.inner, probe).await == 0 {
        tokio::task::yield_now().await;
    }
    acquiring.abort();
    assert!(acquiring.await.unwrap_err().is_cancelled());

    assert_eq!(
        large_in_flight(&primary.inner, probe).await,
        0,
        "the grant that never reached a request was given back"
    );
    assert_eq!(large_in_flight(&state.local, probe).await, 0, "with its shadow");
    assert!(!state.degraded(), "the primary answered");
    assert_eq!(state.missed().len(), 1, "the outcome not yet sent waits");

    // The next call, the state healthy, tells it.
    primary.hold_records.store(false, Ordering::SeqCst);
    let later = probe.plus(Duration::from_secs(1));
    state.snapshot(later).await.unwrap();
    assert!(state.missed().is_empty());
    assert_eq!(primary_health(&primary, later).await.successes, 2, "each once");
}

#[tokio::test]
async fn an_outcome_whose_reply_was_lost_is_told_again_with_the_same_id() {
    let (primary, state) = setup();
    primary.lose_replies.store(true, Ordering::SeqCst);
    let failed = Outcome::Transient { detail: "502".into() };
    state.record_outcome(&"a".into(), &failed, START).await.unwrap();
    assert!(state.degraded());
    primary.lose_replies.store(false, Ordering::SeqCst);
    let later = START.plus(RECHECK);
    state.snapshot(later).await.unwrap();
    assert!(!state.degraded());
    let told = primary.told_ids.lock().unwrap().clone();
    assert_eq!(told.len(), 2, "told, then told again: {told:?}");
    assert_eq!(
        told[0], told[1],
        "with the same id, which a shared state applies once"
    );
}

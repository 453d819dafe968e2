#![allow(clippy::disallowed_methods, reason = "tests: every task ends with its test")]

use std::time::Duration;

use super::*;
use crate::account::Tier;
use crate::clock::{ManualClock, UnixMillis};
use crate::memory::MemoryPoolState;
use crate::outcome::{CooldownPolicy, LimitScope};

const START: UnixMillis = UnixMillis(1_700_000_000_000);

fn setup(config: DispatchConfig, specs: Vec<AccountSpec>) -> (Arc<Dispatcher>, Arc<ManualClock>) {
    let clock = Arc::new(ManualClock::new(START));
    let state = Arc::new(MemoryPoolState::with_seed(CooldownPolicy::default(), 7));
    let dispatcher = Dispatcher::new(state, clock.clone(), config);
    dispatcher.replace_accounts(specs);
    (Arc::new(dispatcher), clock)
}

fn no_wait() -> DispatchConfig {
    DispatchConfig {
        max_wait: Duration::ZERO,
        ..DispatchConfig::default()
    }
}

fn group() -> GroupId {
    GroupId::new("g")
}

fn large() -> DispatchRequest {
    DispatchRequest::image(&group(), SizeClass::Large)
}

#[tokio::test]
async fn dropping_a_lease_frees_its_slot() {
    let (pool, _clock) = setup(no_wait(), vec![AccountSpec::new("a", Tier::Pro, &["g"])]);
    let lease = pool.acquire(&large()).await.unwrap();
    assert_eq!(lease.account().as_str(), "a");
    assert!(matches!(
        pool.acquire(&large()).await,
        Err(PoolError::AllBusy { .. })
    ));
    assert_eq!(pool.snapshot().await.unwrap().accounts[0].in_flight.large, 1);
    drop(lease);
    assert_eq!(pool.snapshot().await.unwrap().accounts[0].in_flight.large, 0);
    assert!(pool.acquire(&large()).await.is_ok());
}

#[tokio::test]
async fn expired_lease_frees_the_slot_and_cannot_be_renewed_or_double_released() {
    let (pool, clock) = setup(no_wait(), vec![AccountSpec::new("a", Tier::Pro, &["g"])]);
    let mut stale = pool.acquire(&large()).await.unwrap();
    assert_eq!(stale.expires_at(), START.plus(Duration::from_secs(300)));
    clock.advance(Duration::from_secs(200));
    let renewed = stale.renew().await.unwrap();
    assert_eq!(renewed, START.plus(Duration::from_secs(500)));
    clock.advance(Duration::from_secs(299));
    assert!(
        matches!(pool.acquire(&large()).await, Err(PoolError::AllBusy { .. })),
        "renewed lease still holds"
    );
    clock.advance(Duration::from_secs(1));
    let fresh = pool.acquire(&large()).await.unwrap();
    assert_eq!(stale.renew().await, Err(PoolError::LeaseExpired));
    drop(stale);
    let snapshot = pool.snapshot().await.unwrap();
    assert_eq!(
        snapshot.accounts[0].in_flight.large, 1,
        "dropping the expired lease must not free the new one"
    );
    drop(fresh);
}

#[tokio::test(start_paused = true)]
async fn waiting_acquire_wakes_on_release() {
    let config = DispatchConfig {
        poll_interval: Duration::from_secs(3600),
        ..DispatchConfig::default()
    };
    let (pool, _clock) = setup(config, vec![AccountSpec::new("a", Tier::Pro, &["g"])]);
    let held = pool.acquire(&large()).await.unwrap();
    let waiter = tokio::spawn({
        let pool = Arc::clone(&pool);
        async move { pool.acquire(&large()).await.map(|lease| lease.account().clone()) }
    });
    while pool.waiting() == 0 {
        tokio::task::yield_now().await;
    }
    // Virtual time (paused clock): woken by the release, not by reaching the 30 s deadline.
    let started = tokio::time::Instant::now();
    drop(held);
    let account = waiter.await.unwrap().unwrap();
    assert_eq!(account.as_str(), "a");
    assert!(
        started.elapsed() < Duration::from_secs(30),
        "woke at the deadline, not on release"
    );
    assert_eq!(pool.waiting(), 0);
}

#[tokio::test(start_paused = true)]
async fn waiting_acquire_gives_up_with_all_busy() {
    let (pool, _clock) = setup(
        DispatchConfig::default(),
        vec![AccountSpec::new("a", Tier::Pro, &["g"])],
    );
    let _held = pool.acquire(&large()).await.unwrap();
    let err = pool.acquire(&large()).await.unwrap_err();
    assert_eq!(
        err,
        PoolError::AllBusy {
            retry_after: Duration::from_secs(2)
        }
    );
    assert_eq!(pool.waiting(), 0);
}

#[tokio::test(start_paused = true)]
async fn wait_queue_is_bounded() {
    let config = DispatchConfig {
        max_waiters: 1,
        ..DispatchConfig::default()
    };
    let (pool, _clock) = setup(config, vec![AccountSpec::new("a", Tier::Pro, &["g"])]);
    let _held = pool.acquire(&large()).await.unwrap();
    let first = tokio::spawn({
        let pool = Arc::clone(&pool);
        async move { pool.acquire(&large()).await.map(|_| ()) }
    });
    while pool.waiting() == 0 {
        tokio::task::yield_now().await;
    }
    let err = pool.acquire(&large()).await.unwrap_err();
    assert!(matches!(err, PoolError::WaitQueueFull { .. }), "{err:?}");
    assert!(matches!(first.await.unwrap(), Err(PoolError::AllBusy { .. })));
}

#[tokio::test]
async fn all_cooling_down_fails_at_once_with_the_earliest_reset() {
    let (pool, clock) = setup(
        DispatchConfig::default(),
        vec![
            AccountSpec::new("a", Tier::Pro, &["g"]),
            AccountSpec::new("b", Tier::Plus, &["g"]),
        ],
    );
    let reset_a = clock.now().plus(Duration::from_millis(90_500));
    let reset_b = clock.now().plus(Duration::from_secs(3600));
    let limited = |reset_at| Outcome::RateLimited {
        reset_at: Some(reset_at),
        scope: LimitScope::All,
    };
    pool.record_outcome(&"a".into(), &limited(reset_a)).await.unwrap();
    pool.record_outcome(&"b".into(), &limited(reset_b)).await.unwrap();
    let err = pool.acquire(&large()).await.unwrap_err();
    assert_eq!(
        err,
        PoolError::AllCoolingDown {
            earliest_reset: reset_a,
            retry_after: Duration::from_secs(91)
        }
    );
    clock.set(reset_a);
    assert_eq!(pool.acquire(&large()).await.unwrap().account().as_str(), "a");
}

#[tokio::test]
async fn no_usable_account_is_no_accounts() {
    let (pool, _clock) = setup(
        no_wait(),
        vec![
            AccountSpec::new("off", Tier::Pro, &["g"]).with_active(false),
            AccountSpec::new("h", Tier::Pro, &["h"]),
        ],
    );
    let expected = PoolError::NoAccounts { group: group() };
    assert_eq!(pool.acquire(&large()).await.unwrap_err(), expected);
    let unknown = DispatchRequest::image(&GroupId::new("nope"), SizeClass::Standard);
    assert!(matches!(
        pool.acquire(&unknown).await,
        Err(PoolError::NoAccounts { .. })
    ));
    pool.record_outcome(
        &"h".into(),
        &Outcome::AuthFailed {
            reason: "revoked".into(),
        },
    )
    .await
    .unwrap();
    let h = DispatchRequest::image(&GroupId::new("h"), SizeClass::Standard);
    assert!(matches!(
        pool.acquire(&h).await,
        Err(PoolError::NoAccounts { .. })
    ));
    pool.clear_health(&"h".into()).await.unwrap();
    assert!(pool.acquire(&h).await.is_ok());
}

#[tokio::test]
async fn failover_excludes_accounts_already_tried() {
    let (pool, _clock) = setup(
        no_wait(),
        vec![
            AccountSpec::new("a", Tier::Pro, &["g"]),
            AccountSpec::new("b", Tier::Free, &["g"]),
        ],
    );
    let first = pool.acquire(&large()).await.unwrap();
    let tried = first.account().clone();
    drop(first);
    let retry = DispatchRequest {
        exclude: vec![tried.clone()],
        ..large()
    };
    let second = pool.acquire(&retry).await.unwrap();
    assert_eq!((tried.as_str(), second.account().as_str()), ("a", "b"));
}

#[tokio::test]
async fn html_403_keeps_serving_and_transient_breaker_moves_traffic() {
    let (pool, _clock) = setup(
        no_wait(),
        vec![
            AccountSpec::new("a", Tier::Pro, &["g"]),
            AccountSpec::new("b", Tier::Free, &["g"]),
        ],
    );
    let a = AccountId::new("a");
    for _ in 0..5 {
        pool.record_outcome(
            &a,
            &Outcome::Forbidden {
                json_body: false,
                detail: "<html>".into(),
            },
        )
        .await
        .unwrap();
    }
    assert_eq!(pool.acquire(&large()).await.unwrap().account().as_str(), "a");
    for _ in 0..3 {
        pool.record_outcome(&a, &Outcome::Transient { detail: "503".into() })
            .await
            .unwrap();
    }
    assert_eq!(pool.acquire(&large()).await.unwrap().account().as_str(), "b");
    pool.record_outcome(&a, &Outcome::Success).await.unwrap();
    assert_eq!(pool.acquire(&large()).await.unwrap().account().as_str(), "a");
}

#[tokio::test]
async fn replacing_accounts_keeps_held_leases() {
    let (pool, _clock) = setup(no_wait(), vec![AccountSpec::new("a", Tier::Pro, &["g"])]);
    let held = pool.acquire(&large()).await.unwrap();
    pool.replace_accounts([
        AccountSpec::new("a", Tier::Pro, &["g"]),
        AccountSpec::new("n", Tier::Free, &["g"]),
    ]);
    assert_eq!(pool.acquire(&large()).await.unwrap().account().as_str(), "n");
    assert_eq!(held.account().as_str(), "a");
    pool.replace_accounts([AccountSpec::new("a", Tier::Pro, &["g"]).with_limits(2, 4)]);
    assert_eq!(
        pool.acquire(&large()).await.unwrap().account().as_str(),
        "a",
        "raised limit applies at once"
    );
}

#[tokio::test]
async fn snapshot_shows_load_cooldowns_and_health() {
    let (pool, clock) = setup(
        no_wait(),
        vec![
            AccountSpec::new("pro-1", Tier::Pro, &["g"]).with_priority(2),
            AccountSpec::new("team-1", Tier::Team, &["g", "h"]).with_limits(2, 8),
            AccountSpec::new("free-1", Tier::Free, &["h"]).with_active(false),
        ],
    );
    let _large = pool.acquire(&large()).await.unwrap();
    let _standard = pool
        .acquire(&DispatchRequest::image(&group(), SizeClass::Standard))
        .await
        .unwrap();
    let reset = clock.now().plus(Duration::from_secs(120));
    let team = AccountId::new("team-1");
    pool.record_outcome(&team, &Outcome::Success).await.unwrap();
    pool.record_outcome(
        &team,
        &Outcome::RateLimited {
            reset_at: Some(reset),
            scope: LimitScope::ImagesOnly,
        },
    )
    .await
    .unwrap();
    pool.record_outcome(
        &"free-1".into(),
        &Outcome::AuthFailed {
            reason: "refresh token revoked".into(),
        },
    )
    .await
    .unwrap();
    insta::assert_json_snapshot!(pool.snapshot().await.unwrap());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn contending_waiters_all_get_served_without_overbooking() {
    use std::sync::atomic::{AtomicUsize, Ordering};
    // Without polling, a missed wake-up would leave a task waiting for an hour: the outer timeout
    // turns that into a failure instead of a hang.
    let config = DispatchConfig {
        max_wait: Duration::from_secs(3600),
        poll_interval: Duration::from_secs(3600),
        ..DispatchConfig::default()
    };
    let (pool, _clock) = setup(
        config,
        vec![
            AccountSpec::new("a", Tier::Pro, &["g"]),
            AccountSpec::new("b", Tier::Team, &["g"]),
        ],
    );
    let holding = Arc::new(AtomicUsize::new(0));
    let peak = Arc::new(AtomicUsize::new(0));
    let tasks: Vec<_> = (0..64)
        .map(|_| {
            let (pool, holding, peak) = (Arc::clone(&pool), Arc::clone(&holding), Arc::clone(&peak));
            tokio::spawn(async move {
                let lease = pool.acquire(&large()).await?;
                let now_holding = holding.fetch_add(1, Ordering::SeqCst) + 1;
                peak.fetch_max(now_holding, Ordering::SeqCst);
                tokio::task::yield_now().await;
                holding.fetch_sub(1, Ordering::SeqCst);
                drop(lease);
                Ok::<(), PoolError>(())
            })
        })
        .collect();
    let all = tokio::time::timeout(Duration::from_secs(60), futures::future::join_all(tasks)).await;
    for result in all.expect("a waiter was never woken") {
        result.unwrap().unwrap();
    }
    assert!(
        peak.load(Ordering::SeqCst) <= 2,
        "two accounts with one large slot each"
    );
    assert_eq!(pool.waiting(), 0);
    let snapshot = pool.snapshot().await.unwrap();
    assert!(snapshot.accounts.iter().all(|a| a.in_flight.large == 0));
}

/// Moves the manual clock and Tokio's paused clock forward together, one second at a time, letting
/// background tasks run at each step.
async fn advance_both(clock: &ManualClock, seconds: u64) {
    for _ in 0..seconds {
        clock.advance(Duration::from_secs(1));
        tokio::time::advance(Duration::from_secs(1)).await;
        for _ in 0..10 {
            tokio::task::yield_now().await;
        }
    }
}

#[tokio::test(start_paused = true)]
async fn a_renewed_lease_outlives_its_ttl_and_an_unrenewed_one_does_not() {
    let ttl = Duration::from_secs(3);
    let specs = || vec![AccountSpec::new("a", Tier::Pro, &["g"])];
    let renewing = DispatchConfig {
        lease_ttl: ttl,
        renew_interval: Some(Duration::from_secs(1)),
        ..no_wait()
    };
    let (pool, clock) = setup(renewing, specs());
    let lease = pool.acquire(&large()).await.unwrap();
    advance_both(&clock, 10).await;
    assert!(
        matches!(pool.acquire(&large()).await, Err(PoolError::AllBusy { .. })),
        "the renewed lease must still hold its slot after three TTLs"
    );
    assert!(lease.expires_at() > clock.now(), "the expiry moved forward");
    drop(lease);
    assert!(
        pool.acquire(&large()).await.is_ok(),
        "dropping stops renewing and frees the slot"
    );

    let plain = DispatchConfig {
        lease_ttl: ttl,
        ..no_wait()
    };
    let (pool, clock) = setup(plain, specs());
    let _held = pool.acquire(&large()).await.unwrap();
    advance_both(&clock, 4).await;
    assert!(
        pool.acquire(&large()).await.is_ok(),
        "without renewals the slot frees itself after the TTL"
    );
}

#[tokio::test]
async fn an_account_in_two_groups_is_full_for_both_and_frees_for_both() {
    let specs = vec![
        AccountSpec::new("shared", Tier::Pro, &["a", "b"]).with_limits(1, 1),
        AccountSpec::new("b-only", Tier::Plus, &["b"]).with_limits(1, 1),
    ];
    let (pool, _clock) = setup(no_wait(), specs);
    let in_a = DispatchRequest::image(&GroupId::new("a"), SizeClass::Large);
    let in_b = DispatchRequest::image(&GroupId::new("b"), SizeClass::Large);
    // Group b's list is seen first, so its room index exists before the lease taken through a.
    let first = pool.acquire(&in_b).await.unwrap();
    assert_eq!(first.account().as_str(), "shared");
    drop(first);
    let through_a = pool.acquire(&in_a).await.unwrap();
    assert_eq!(through_a.account().as_str(), "shared");
    let through_b = pool.acquire(&in_b).await.unwrap();
    assert_eq!(through_b.account().as_str(), "b-only", "shared is full for b too");
    drop(through_b);
    drop(through_a);
    let again = pool.acquire(&in_b).await.unwrap();
    assert_eq!(again.account().as_str(), "shared", "released for b too");
}

#[tokio::test]
async fn a_reloaded_pool_counts_the_leases_still_held() {
    let spec = || AccountSpec::new("a", Tier::Pro, &["g"]).with_limits(1, 1);
    let (pool, _clock) = setup(no_wait(), vec![spec()]);
    let held = pool.acquire(&large()).await.unwrap();
    pool.replace_accounts(vec![spec(), AccountSpec::new("b", Tier::Free, &["g"])]);
    let next = pool.acquire(&large()).await.unwrap();
    assert_eq!(next.account().as_str(), "b", "a is still full in the new list");
    drop(held);
    drop(next);
    assert_eq!(pool.acquire(&large()).await.unwrap().account().as_str(), "a");
}

/// Spawns `acquire(request)` and returns once the request waits in its line.
async fn spawn_waiter(
    pool: &Arc<Dispatcher>,
    request: DispatchRequest,
    served: &Arc<std::sync::Mutex<Vec<&'static str>>>,
    name: &'static str,
) -> tokio::task::JoinHandle<Result<(), PoolError>> {
    let before = pool.waiting();
    let task = tokio::spawn({
        let (pool, served) = (Arc::clone(pool), Arc::clone(served));
        async move {
            let lease = pool.acquire(&request).await?;
            served.lock().unwrap().push(name);
            // Hold the slot across a yield, so the next waiter must wait for this release.
            tokio::task::yield_now().await;
            drop(lease);
            Ok(())
        }
    });
    while pool.waiting() == before {
        tokio::task::yield_now().await;
    }
    task
}

fn patient() -> DispatchConfig {
    DispatchConfig {
        max_wait: Duration::from_secs(7200),
        poll_interval: Duration::from_secs(3600),
        ..DispatchConfig::default()
    }
}

#[tokio::test(start_paused = true)]
async fn waiters_are_served_in_arrival_order_and_a_newcomer_does_not_overtake_them() {
    let (pool, _clock) = setup(patient(), vec![AccountSpec::new("a", Tier::Pro, &["g"])]);
    let served = Arc::new(std::sync::Mutex::new(Vec::new()));
    let held = pool.acquire(&large()).await.unwrap();
    let mut tasks = Vec::new();
    for name in ["first", "second", "third"] {
        tasks.push(spawn_waiter(&pool, large(), &served, name).await);
    }
    let started = tokio::time::Instant::now();
    // The slot is free while the woken waiters have not run yet: a request arriving now must
    // queue behind them instead of taking it.
    drop(held);
    let lease = pool.acquire(&large()).await.unwrap();
    served.lock().unwrap().push("newcomer");
    drop(lease);
    for task in tasks {
        task.await.unwrap().unwrap();
    }
    assert_eq!(*served.lock().unwrap(), ["first", "second", "third", "newcomer"]);
    assert!(
        started.elapsed() < Duration::from_secs(3600),
        "a waiter was served by polling, not by its turn"
    );
    assert_eq!(pool.waiting(), 0);
}

#[tokio::test(start_paused = true)]
async fn try_acquire_does_not_take_a_slot_ahead_of_a_waiter() {
    let (pool, _clock) = setup(patient(), vec![AccountSpec::new("a", Tier::Pro, &["g"])]);
    let served = Arc::new(std::sync::Mutex::new(Vec::new()));
    let held = pool.acquire(&large()).await.unwrap();
    let waiting = spawn_waiter(&pool, large(), &served, "waiter").await;
    // The slot is free, but the woken waiter has not run yet: it was first.
    drop(held);
    assert!(matches!(
        pool.try_acquire(&large()).await,
        Err(PoolError::AllBusy { .. })
    ));
    waiting.await.unwrap().unwrap();
    assert_eq!(*served.lock().unwrap(), ["waiter"]);
    // With nobody waiting, the free slot is taken at once.
    assert!(pool.try_acquire(&large()).await.is_ok());
}

#[tokio::test(start_paused = true)]
async fn a_full_line_does_not_hold_up_requests_for_other_slots() {
    let (pool, _clock) = setup(patient(), vec![AccountSpec::new("a", Tier::Pro, &["g"])]);
    let served = Arc::new(std::sync::Mutex::new(Vec::new()));
    let held = pool.acquire(&large()).await.unwrap();
    let waiting = spawn_waiter(&pool, large(), &served, "large").await;
    // A standard-size request uses the account's standard slots: it is served at once.
    let standard = DispatchRequest::image(&group(), SizeClass::Standard);
    let started = tokio::time::Instant::now();
    let lease = pool.acquire(&standard).await.unwrap();
    assert_eq!(started.elapsed(), Duration::ZERO);
    assert_eq!(pool.waiting(), 1);
    drop(lease);
    drop(held);
    waiting.await.unwrap().unwrap();
    assert_eq!(*served.lock().unwrap(), ["large"]);
}

#[tokio::test(start_paused = true)]
async fn a_waiter_that_gives_up_hands_its_turn_to_the_next() {
    let (pool, _clock) = setup(patient(), vec![AccountSpec::new("a", Tier::Pro, &["g"])]);
    let served = Arc::new(std::sync::Mutex::new(Vec::new()));
    let held = pool.acquire(&large()).await.unwrap();
    let first = spawn_waiter(&pool, large(), &served, "first").await;
    let second = spawn_waiter(&pool, large(), &served, "second").await;
    // The release wakes the head of the line; the head is gone by the time it would run, so its
    // turn must pass to the second waiter instead of being lost until the next poll.
    let started = tokio::time::Instant::now();
    drop(held);
    first.abort();
    assert!(first.await.unwrap_err().is_cancelled());
    second.await.unwrap().unwrap();
    assert_eq!(*served.lock().unwrap(), ["second"]);
    assert!(started.elapsed() < Duration::from_secs(3600), "served by polling");
    assert_eq!(pool.waiting(), 0);
}

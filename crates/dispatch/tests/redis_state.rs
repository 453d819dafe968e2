//! `RedisPoolState` against a real Redis: the behaviour of the in-memory state (limits, order,
//! cooldowns, leases), plus script reloading, key layout and large groups. Several replicas:
//! `redis_replicas.rs`.
#![cfg(feature = "redis")]
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::disallowed_methods
)]

mod redis_support;

use std::sync::Arc;
use std::time::Duration;

use imagegate_dispatch::{
    AccountSpec, AccountStatus, Clock, CooldownKind, CooldownPolicy, DispatchRequest, GroupId, LimitScope,
    ManualClock, Outcome, PoolError, RedisConfig, RedisPoolState, SizeClass, Tier,
};
use redis_support::{START, SlowRedis, TestPrefix, dispatcher, no_wait, sync_connection};

fn group() -> GroupId {
    GroupId::new("g")
}

fn image(class: SizeClass) -> DispatchRequest {
    DispatchRequest::image(&group(), class)
}

fn text(class: SizeClass) -> DispatchRequest {
    DispatchRequest {
        image: false,
        ..image(class)
    }
}

fn clock() -> Arc<ManualClock> {
    Arc::new(ManualClock::new(START))
}

#[tokio::test]
async fn limits_per_class_are_never_exceeded() {
    let prefix = TestPrefix::new();
    let clock = clock();
    let specs = [AccountSpec::new("a", Tier::Pro, &["g"]).with_limits(1, 2)];
    let pool = dispatcher(prefix.state(), &clock, no_wait(), &specs);
    let large = pool.acquire(&image(SizeClass::Large)).await.unwrap();
    assert!(matches!(
        pool.acquire(&image(SizeClass::Large)).await,
        Err(PoolError::AllBusy { .. })
    ));
    let mut standard = Vec::new();
    for _ in 0..2 {
        standard.push(pool.acquire(&image(SizeClass::Standard)).await.unwrap());
    }
    assert!(matches!(
        pool.acquire(&image(SizeClass::Standard)).await,
        Err(PoolError::AllBusy { .. })
    ));
    let snapshot = pool.snapshot().await.unwrap();
    assert_eq!(
        (
            snapshot.accounts[0].in_flight.large,
            snapshot.accounts[0].in_flight.standard
        ),
        (1, 2)
    );
    drop((large, standard));
}

#[tokio::test]
async fn tiers_then_priorities_then_load_decide() {
    let prefix = TestPrefix::new();
    let clock = clock();
    let specs = [
        AccountSpec::new("free", Tier::Free, &["g"]),
        AccountSpec::new("plus", Tier::Plus, &["g"]),
        AccountSpec::new("pro-low", Tier::Pro, &["g"]),
        AccountSpec::new("pro-high", Tier::Pro, &["g"]).with_priority(5),
        AccountSpec::new("team", Tier::Team, &["g"]),
    ];
    let pool = dispatcher(prefix.state(), &clock, no_wait(), &specs);
    let mut order = Vec::new();
    let mut held = Vec::new();
    for _ in 0..5 {
        let lease = pool.acquire(&image(SizeClass::Large)).await.unwrap();
        order.push(lease.account().to_string());
        held.push(lease);
    }
    assert_eq!(order, ["pro-high", "pro-low", "team", "plus", "free"]);
    drop(held);

    // Within a band the least loaded account wins: four standard requests spread two by two.
    let pair = [
        AccountSpec::new("x", Tier::Pro, &["g"]),
        AccountSpec::new("y", Tier::Pro, &["g"]),
    ];
    pool.replace_accounts(pair);
    let mut held = Vec::new();
    for _ in 0..4 {
        held.push(pool.acquire(&image(SizeClass::Standard)).await.unwrap());
    }
    let on_x = held.iter().filter(|l| l.account().as_str() == "x").count();
    assert_eq!(on_x, 2, "load is balanced within the band");
}

#[tokio::test]
async fn cooling_accounts_are_skipped_and_the_earliest_reset_reported() {
    let prefix = TestPrefix::new();
    let clock = clock();
    let specs = [
        AccountSpec::new("pro", Tier::Pro, &["g"]),
        AccountSpec::new("plus", Tier::Plus, &["g"]),
    ];
    let pool = dispatcher(prefix.state(), &clock, no_wait(), &specs);
    let pro_reset = START.plus(Duration::from_secs(90));
    let limited = |reset_at| Outcome::RateLimited {
        reset_at: Some(reset_at),
        scope: LimitScope::All,
    };
    pool.record_outcome(&"pro".into(), &limited(pro_reset))
        .await
        .unwrap();
    let lease = pool.acquire(&image(SizeClass::Large)).await.unwrap();
    assert_eq!(lease.account().as_str(), "plus");
    drop(lease);
    pool.record_outcome(&"plus".into(), &limited(START.plus(Duration::from_secs(200))))
        .await
        .unwrap();
    let err = pool.acquire(&image(SizeClass::Large)).await.unwrap_err();
    assert_eq!(
        err,
        PoolError::AllCoolingDown {
            earliest_reset: pro_reset,
            retry_after: Duration::from_secs(90)
        }
    );
    clock.advance(Duration::from_secs(90));
    let lease = pool.acquire(&image(SizeClass::Large)).await.unwrap();
    assert_eq!(lease.account().as_str(), "pro", "usable again at its reset");
}

#[tokio::test]
async fn a_cooldown_recorded_by_a_caller_that_stopped_waiting_still_lands() {
    use futures::FutureExt;

    let prefix = TestPrefix::new();
    let clock = clock();
    let specs = [AccountSpec::new("a", Tier::Pro, &["g"])];
    let pool = dispatcher(prefix.state(), &clock, no_wait(), &specs);
    // The connection is up, so the next call's first poll goes to Redis and waits for it.
    drop(pool.acquire(&image(SizeClass::Standard)).await.unwrap());
    let limited = Outcome::RateLimited {
        reset_at: Some(START.plus(Duration::from_secs(90))),
        scope: LimitScope::All,
    };
    // A client that hung up while its 429 was being recorded.
    let abandoned = pool.record_outcome(&"a".into(), &limited).now_or_never();
    assert!(abandoned.is_none(), "the first poll waits for Redis");
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    while !matches!(
        pool.acquire(&image(SizeClass::Standard)).await,
        Err(PoolError::AllCoolingDown { .. })
    ) {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the cooldown never landed"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn image_only_limits_block_only_image_requests() {
    let prefix = TestPrefix::new();
    let clock = clock();
    let specs = [
        AccountSpec::new("pro", Tier::Pro, &["g"]),
        AccountSpec::new("plus", Tier::Plus, &["g"]),
    ];
    let pool = dispatcher(prefix.state(), &clock, no_wait(), &specs);
    let outcome = Outcome::RateLimited {
        reset_at: Some(START.plus(Duration::from_secs(60))),
        scope: LimitScope::ImagesOnly,
    };
    pool.record_outcome(&"pro".into(), &outcome).await.unwrap();
    let for_image = pool.acquire(&image(SizeClass::Standard)).await.unwrap();
    assert_eq!(for_image.account().as_str(), "plus");
    let for_text = pool.acquire(&text(SizeClass::Standard)).await.unwrap();
    assert_eq!(for_text.account().as_str(), "pro");
    let snapshot = pool.snapshot().await.unwrap();
    let pro = snapshot.accounts.iter().find(|a| a.id.as_str() == "pro").unwrap();
    assert_eq!(pro.cooldowns.len(), 1);
    assert_eq!(pro.cooldowns[0].scope, LimitScope::ImagesOnly);
    assert_eq!(pro.cooldowns[0].kind, CooldownKind::RateLimited);
}

#[tokio::test]
async fn excluded_and_broken_accounts_are_not_used() {
    let prefix = TestPrefix::new();
    let clock = clock();
    let specs = [
        AccountSpec::new("pro", Tier::Pro, &["g"]),
        AccountSpec::new("plus", Tier::Plus, &["g"]),
    ];
    let pool = dispatcher(prefix.state(), &clock, no_wait(), &specs);
    let retry = DispatchRequest {
        exclude: vec!["pro".into()],
        ..image(SizeClass::Large)
    };
    assert_eq!(pool.acquire(&retry).await.unwrap().account().as_str(), "plus");
    let failed = Outcome::AuthFailed {
        reason: "revoked".into(),
    };
    pool.record_outcome(&"plus".into(), &failed).await.unwrap();
    assert!(matches!(
        pool.acquire(&retry).await,
        Err(PoolError::NoAccounts { .. })
    ));
    let snapshot = pool.snapshot().await.unwrap();
    let plus = snapshot
        .accounts
        .iter()
        .find(|a| a.id.as_str() == "plus")
        .unwrap();
    assert_eq!(
        plus.status,
        AccountStatus::Error {
            reason: "revoked".into()
        }
    );
    assert_eq!(plus.failures, 1);
    pool.clear_health(&"plus".into()).await.unwrap();
    assert_eq!(pool.acquire(&retry).await.unwrap().account().as_str(), "plus");
    let snapshot = pool.snapshot().await.unwrap();
    let plus = snapshot
        .accounts
        .iter()
        .find(|a| a.id.as_str() == "plus")
        .unwrap();
    assert_eq!((plus.status.clone(), plus.failures), (AccountStatus::Ok, 1));
}

#[tokio::test]
async fn dropping_a_lease_frees_its_slot() {
    let prefix = TestPrefix::new();
    let clock = clock();
    let specs = [AccountSpec::new("a", Tier::Pro, &["g"])];
    let pool = dispatcher(prefix.state(), &clock, no_wait(), &specs);
    for _ in 0..3 {
        let lease = pool.acquire(&image(SizeClass::Large)).await.unwrap();
        assert_eq!(pool.snapshot().await.unwrap().accounts[0].in_flight.large, 1);
        drop(lease);
        assert_eq!(pool.snapshot().await.unwrap().accounts[0].in_flight.large, 0);
    }
}

#[tokio::test]
async fn expired_leases_free_their_slot_and_renewal_extends() {
    let prefix = TestPrefix::new();
    let clock = clock();
    let specs = [AccountSpec::new("a", Tier::Pro, &["g"])];
    let pool = dispatcher(prefix.state(), &clock, no_wait(), &specs);
    let ttl = pool.config().lease_ttl;
    let mut stale = pool.acquire(&image(SizeClass::Large)).await.unwrap();
    assert_eq!(stale.expires_at(), START.plus(ttl));
    clock.advance(ttl - Duration::from_secs(100));
    let renewed = stale.renew().await.unwrap();
    assert_eq!(renewed, clock.now().plus(ttl));
    clock.advance(ttl - Duration::from_millis(1));
    assert!(
        matches!(
            pool.acquire(&image(SizeClass::Large)).await,
            Err(PoolError::AllBusy { .. })
        ),
        "the renewed lease still holds"
    );
    clock.advance(Duration::from_millis(1));
    let fresh = pool.acquire(&image(SizeClass::Large)).await.unwrap();
    assert_eq!(stale.renew().await, Err(PoolError::LeaseExpired));
    drop(stale);
    assert_eq!(
        pool.snapshot().await.unwrap().accounts[0].in_flight.large,
        1,
        "dropping the expired lease must not free the new one"
    );
    drop(fresh);
}

#[tokio::test]
async fn scripts_are_reloaded_after_a_flush() {
    let prefix = TestPrefix::new();
    let clock = clock();
    let specs = [AccountSpec::new("a", Tier::Pro, &["g"])];
    let pool = dispatcher(prefix.state(), &clock, no_wait(), &specs);
    drop(pool.acquire(&image(SizeClass::Large)).await.unwrap());
    let _: () = redis::cmd("SCRIPT")
        .arg("FLUSH")
        .query(&mut sync_connection())
        .unwrap();
    let lease = pool.acquire(&image(SizeClass::Large)).await.unwrap();
    assert_eq!(lease.account().as_str(), "a");
}

#[tokio::test]
async fn keys_stay_under_the_prefix() {
    let prefix = TestPrefix::new();
    let clock = clock();
    let specs = [AccountSpec::new("a", Tier::Pro, &["g"])];
    let pool = dispatcher(prefix.state(), &clock, no_wait(), &specs);
    let lease = pool.acquire(&image(SizeClass::Large)).await.unwrap();
    pool.record_outcome(&"a".into(), &Outcome::Success).await.unwrap();
    let mut keys = prefix.keys();
    keys.sort();
    let expected: Vec<String> = ["accounts", "acct:a:health", "acct:a:lease:large"]
        .iter()
        .map(|k| format!("{}{k}", prefix.prefix))
        .collect();
    assert_eq!(keys, expected);
    drop(lease);
}

#[tokio::test]
async fn large_groups_are_walked_band_by_band_across_script_calls() {
    let prefix = TestPrefix::new();
    let clock = clock();
    // 70 pro accounts (one band, one script call) ahead of 10 plus accounts (the next call).
    let mut specs: Vec<AccountSpec> = (0..70)
        .map(|i| AccountSpec::new(&format!("pro-{i:02}"), Tier::Pro, &["g"]))
        .collect();
    specs.extend((0..10).map(|i| AccountSpec::new(&format!("plus-{i}"), Tier::Plus, &["g"])));
    let pool = dispatcher(prefix.state(), &clock, no_wait(), &specs);
    let pro_reset = START.plus(Duration::from_secs(60));
    for spec in specs.iter().filter(|s| s.tier == Tier::Pro) {
        let outcome = Outcome::RateLimited {
            reset_at: Some(pro_reset),
            scope: LimitScope::All,
        };
        pool.record_outcome(&spec.id, &outcome).await.unwrap();
    }
    let mut held = Vec::new();
    for _ in 0..10 {
        let lease = pool.acquire(&image(SizeClass::Large)).await.unwrap();
        assert!(
            lease.account().as_str().starts_with("plus-"),
            "{}",
            lease.account()
        );
        held.push(lease);
    }
    // First call: everything cooling; second: everything busy. Busy wins, as in `select`.
    assert!(matches!(
        pool.acquire(&image(SizeClass::Large)).await,
        Err(PoolError::AllBusy { .. })
    ));
    drop(held);
    for i in 0..10 {
        let outcome = Outcome::RateLimited {
            reset_at: Some(START.plus(Duration::from_secs(30 + i))),
            scope: LimitScope::All,
        };
        pool.record_outcome(&format!("plus-{i}").as_str().into(), &outcome)
            .await
            .unwrap();
    }
    // The earliest reset over both calls.
    assert_eq!(
        pool.acquire(&image(SizeClass::Large)).await.unwrap_err(),
        PoolError::AllCoolingDown {
            earliest_reset: START.plus(Duration::from_secs(30)),
            retry_after: Duration::from_secs(30)
        }
    );
    clock.advance(Duration::from_secs(60));
    let lease = pool.acquire(&image(SizeClass::Large)).await.unwrap();
    assert!(
        lease.account().as_str().starts_with("pro-"),
        "{}",
        lease.account()
    );
}

#[tokio::test]
async fn a_cancelled_acquisition_does_not_lose_the_releases_it_carried() {
    use futures::FutureExt;

    let prefix = TestPrefix::new();
    let clock = clock();
    let specs = [AccountSpec::new("a", Tier::Pro, &["g"])];
    let pool = dispatcher(prefix.state(), &clock, no_wait(), &specs);
    let lease = pool.acquire(&image(SizeClass::Large)).await.unwrap();
    // Queued; on this single-threaded runtime the background task has not run yet.
    drop(lease);
    // The acquisition takes the queued release along, then is abandoned while Redis answers
    // (a client that went away).
    let abandoned = pool.acquire(&image(SizeClass::Standard)).now_or_never();
    assert!(abandoned.is_none(), "the first poll waits for Redis");
    let snapshot = pool.snapshot().await.unwrap();
    assert_eq!(
        snapshot.accounts[0].in_flight.large, 0,
        "the release went back to the queue and reached Redis"
    );
}

/// Leases in Redis of account `a`'s large class, expired or not.
fn large_leases_of_a(prefix: &TestPrefix) -> u64 {
    let set = format!("{}acct:a:lease:large", prefix.prefix);
    redis::cmd("ZCARD")
        .arg(&set)
        .query(&mut sync_connection())
        .unwrap()
}

/// Waits until `done` holds, for at most 5 s.
async fn eventually(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    while !done() {
        assert!(tokio::time::Instant::now() < deadline, "{what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// A replica whose Redis answers come through a relay that can hold them back, with commands
/// timing out after 300 ms.
fn replica_behind(slow: &SlowRedis, prefix: &TestPrefix) -> Arc<RedisPoolState> {
    let config = RedisConfig {
        response_timeout: Duration::from_millis(300),
        ..RedisConfig::new(format!("redis://{}", slow.addr)).with_prefix(prefix.prefix.clone())
    };
    Arc::new(RedisPoolState::new(&config, CooldownPolicy::default()).unwrap())
}

#[tokio::test]
async fn an_acquisition_abandoned_while_redis_answers_gives_its_slot_back() {
    use futures::FutureExt;

    let prefix = TestPrefix::new();
    let slow = SlowRedis::start().await;
    let clock = clock();
    let specs = [AccountSpec::new("a", Tier::Pro, &["g"]).with_limits(1, 1)];
    let pool = dispatcher(replica_behind(&slow, &prefix), &clock, no_wait(), &specs);
    // The connection is up and the script loaded, so the next acquisition's first poll sends it.
    drop(pool.acquire(&image(SizeClass::Large)).await.unwrap());
    eventually("the first lease is released", || large_leases_of_a(&prefix) == 0).await;
    // A client that went away while Redis was answering (slowly, but within the timeout).
    slow.hold_answers(150);
    let abandoned = pool.acquire(&image(SizeClass::Large)).now_or_never();
    assert!(abandoned.is_none(), "the first poll waits for Redis");
    eventually(
        "the abandoned acquisition's script runs and takes the slot",
        || large_leases_of_a(&prefix) == 1,
    )
    .await;
    // Nobody holds that lease: it is given back once the answer arrives.
    eventually("the slot is given back", || large_leases_of_a(&prefix) == 0).await;
    slow.hold_answers(0);
    let _lease = pool.acquire(&image(SizeClass::Large)).await.unwrap();
}

#[tokio::test]
async fn a_lease_whose_answer_timed_out_is_given_back() {
    let prefix = TestPrefix::new();
    let slow = SlowRedis::start().await;
    let clock = clock();
    // Three accounts in one band, so the script may have taken a slot on any of them.
    let specs: Vec<AccountSpec> = ["a", "b", "c"]
        .iter()
        .map(|id| AccountSpec::new(id, Tier::Pro, &["g"]).with_limits(1, 1))
        .collect();
    let pool = dispatcher(replica_behind(&slow, &prefix), &clock, no_wait(), &specs);
    drop(pool.acquire(&image(SizeClass::Large)).await.unwrap());
    // The script runs in Redis, but its answer comes after the caller stopped waiting.
    slow.hold_answers(900);
    let err = pool.acquire(&image(SizeClass::Large)).await.unwrap_err();
    assert!(matches!(err, PoolError::State(_)), "{err}");
    let in_flight = |prefix: &TestPrefix| -> u64 {
        let mut redis = sync_connection();
        ["a", "b", "c"]
            .iter()
            .map(|id| {
                let set = format!("{}acct:{id}:lease:large", prefix.prefix);
                redis::cmd("ZCARD").arg(&set).query::<u64>(&mut redis).unwrap()
            })
            .sum()
    };
    assert_eq!(in_flight(&prefix), 1, "the script ran and took a slot");
    slow.hold_answers(0);
    // The slot nobody received is given back (it would stay taken until the lease TTL).
    eventually("the slot is given back", || in_flight(&prefix) == 0).await;
    // Once the late answers are through, all three accounts grant again.
    tokio::time::sleep(Duration::from_millis(1000)).await;
    let mut held = Vec::new();
    for _ in 0..3 {
        held.push(pool.acquire(&image(SizeClass::Large)).await.unwrap());
    }
    let mut accounts: Vec<&str> = held.iter().map(|l| l.account().as_str()).collect();
    accounts.sort_unstable();
    assert_eq!(accounts, ["a", "b", "c"]);
}

#[tokio::test]
async fn a_half_open_breaker_takes_one_request_and_a_stale_breaker_end_is_ignored() {
    let prefix = TestPrefix::new();
    let clock = clock();
    let specs = [AccountSpec::new("a", Tier::Pro, &["g"]).with_limits(1, 2)];
    let pool = dispatcher(prefix.state(), &clock, no_wait(), &specs);
    let transient = Outcome::Transient { detail: "502".into() };
    for _ in 0..3 {
        pool.record_outcome(&"a".into(), &transient).await.unwrap();
    }
    clock.advance(Duration::from_secs(31));
    // Half-open: the probe goes, the next request waits for it.
    let probe = pool.acquire(&image(SizeClass::Standard)).await.unwrap();
    assert!(matches!(
        pool.acquire(&image(SizeClass::Standard)).await,
        Err(PoolError::AllBusy { .. })
    ));
    // A replica of an older version records the success that closes the breaker: it clears the
    // cooldown and leaves the breaker's end it does not know about.
    let _: () = redis::cmd("HSET")
        .arg(format!("{}acct:a:health", prefix.prefix))
        .arg("ca")
        .arg("")
        .query(&mut sync_connection())
        .unwrap();
    let second = pool.acquire(&image(SizeClass::Standard)).await.unwrap();
    drop((probe, second));
}

#[tokio::test]
async fn an_outcome_told_again_with_its_id_is_applied_once() {
    use imagegate_dispatch::PoolState;
    let prefix = TestPrefix::new();
    let state = prefix.state();
    let transient = Outcome::Transient { detail: "502".into() };
    // Told, its reply lost, told again by the fallback state with the same id: counted once.
    state
        .record_outcome_once(&"a".into(), &transient, START, 42)
        .await
        .unwrap();
    state
        .record_outcome_once(&"a".into(), &transient, START, 42)
        .await
        .unwrap();
    let health = |state: &Arc<RedisPoolState>| {
        let _ = state;
        let stored: String = redis::cmd("HGET")
            .arg(format!("{}acct:a:health", prefix.prefix))
            .arg("h")
            .query(&mut sync_connection())
            .unwrap();
        let health: serde_json::Value = serde_json::from_str(&stored).unwrap();
        (health["transient_streak"].as_u64(), health["failures"].as_u64())
    };
    assert_eq!(health(&state), (Some(1), Some(1)));
    // Another outcome, with an id of its own, counts.
    state
        .record_outcome_once(&"a".into(), &transient, START, 43)
        .await
        .unwrap();
    assert_eq!(health(&state), (Some(2), Some(2)));
    // Ids are kept for the last outcomes only, and an outcome without one always counts.
    state
        .record_outcome(&"a".into(), &Outcome::Success, START)
        .await
        .unwrap();
    assert_eq!(health(&state).0, Some(0));
}

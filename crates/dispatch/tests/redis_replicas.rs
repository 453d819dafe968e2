//! `RedisPoolState` shared by several replicas (one connection each) on a real Redis: slots are
//! never granted twice, outcomes and cooldowns are shared, a crashed replica's leases expire, and
//! an unreachable Redis is a backend error that `FallbackPoolState` absorbs.
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
    AccountId, AccountSpec, CooldownPolicy, DispatchRequest, FallbackPoolState, GroupId, LimitScope,
    ManualClock, Outcome, PoolError, PoolState, RedisConfig, RedisPoolState, SizeClass, StateError, Tier,
};
use redis_support::{START, SlowRedis, TestPrefix, dispatcher, no_wait};

fn image(class: SizeClass) -> DispatchRequest {
    DispatchRequest::image(&GroupId::new("g"), class)
}

fn clock() -> Arc<ManualClock> {
    Arc::new(ManualClock::new(START))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_replicas_never_grant_one_slot_twice() {
    use std::sync::atomic::{AtomicUsize, Ordering};

    let prefix = TestPrefix::new();
    let clock = clock();
    let specs = [AccountSpec::new("solo", Tier::Pro, &["g"])];
    let config = imagegate_dispatch::DispatchConfig {
        max_wait: Duration::from_secs(20),
        poll_interval: Duration::from_millis(2),
        ..imagegate_dispatch::DispatchConfig::default()
    };
    let replicas = [
        dispatcher(prefix.state(), &clock, config.clone(), &specs),
        dispatcher(prefix.state(), &clock, config, &specs),
    ];
    let holders = Arc::new(AtomicUsize::new(0));
    let most = Arc::new(AtomicUsize::new(0));
    let grants = Arc::new(AtomicUsize::new(0));
    let mut tasks = Vec::new();
    for task in 0..20 {
        let pool = Arc::clone(&replicas[task % 2]);
        let (holders, most, grants) = (holders.clone(), most.clone(), grants.clone());
        tasks.push(tokio::spawn(async move {
            let lease = pool.acquire(&image(SizeClass::Large)).await.unwrap();
            let now_holding = holders.fetch_add(1, Ordering::SeqCst) + 1;
            most.fetch_max(now_holding, Ordering::SeqCst);
            grants.fetch_add(1, Ordering::SeqCst);
            tokio::time::sleep(Duration::from_millis(3)).await;
            holders.fetch_sub(1, Ordering::SeqCst);
            drop(lease);
        }));
    }
    for task in tasks {
        task.await.unwrap();
    }
    assert_eq!(grants.load(Ordering::SeqCst), 20);
    assert_eq!(
        most.load(Ordering::SeqCst),
        1,
        "two requests held the only slot at once"
    );
}

#[tokio::test]
async fn a_rate_limit_seen_by_one_replica_cools_the_account_for_the_other() {
    let prefix = TestPrefix::new();
    let clock = clock();
    let specs = [
        AccountSpec::new("pro", Tier::Pro, &["g"]),
        AccountSpec::new("plus", Tier::Plus, &["g"]),
    ];
    let first = dispatcher(prefix.state(), &clock, no_wait(), &specs);
    let second = dispatcher(prefix.state(), &clock, no_wait(), &specs);
    assert_eq!(
        second
            .acquire(&image(SizeClass::Standard))
            .await
            .unwrap()
            .account()
            .as_str(),
        "pro"
    );
    let outcome = Outcome::RateLimited {
        reset_at: None,
        scope: LimitScope::All,
    };
    first.record_outcome(&"pro".into(), &outcome).await.unwrap();
    let lease = second.acquire(&image(SizeClass::Standard)).await.unwrap();
    assert_eq!(lease.account().as_str(), "plus");
    let snapshot = second.snapshot().await.unwrap();
    let pro = snapshot.accounts.iter().find(|a| a.id.as_str() == "pro").unwrap();
    let backoff = CooldownPolicy::default().rate_limit_base;
    assert_eq!(pro.cooldowns[0].until, START.plus(backoff));
    assert_eq!(pro.failures, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_outcomes_from_two_replicas_all_count() {
    let prefix = TestPrefix::new();
    let states = [prefix.state(), prefix.state()];
    let account = AccountId::new("busy");
    let mut tasks = Vec::new();
    for task in 0..40 {
        let state = Arc::clone(&states[task % 2]);
        let account = account.clone();
        tasks.push(tokio::spawn(async move {
            let outcome = if task % 4 == 0 {
                Outcome::Transient {
                    detail: "timeout".into(),
                }
            } else {
                Outcome::Success
            };
            state.record_outcome(&account, &outcome, START).await.unwrap();
        }));
    }
    for task in tasks {
        task.await.unwrap();
    }
    let snapshot = states[0].snapshot(START).await.unwrap();
    let health = &snapshot[&account].health;
    assert_eq!((health.successes, health.failures), (30, 10));
}

#[tokio::test]
async fn a_crashed_replicas_lease_frees_after_its_ttl() {
    let prefix = TestPrefix::new();
    let clock = clock();
    let specs = [AccountSpec::new("solo", Tier::Pro, &["g"])];
    let survivor = dispatcher(prefix.state(), &clock, no_wait(), &specs);
    let ttl = survivor.config().lease_ttl;
    {
        let crashed = dispatcher(prefix.state(), &clock, no_wait(), &specs);
        let lease = crashed.acquire(&image(SizeClass::Large)).await.unwrap();
        // The replica dies: its lease is never released.
        std::mem::forget(lease);
    }
    assert!(matches!(
        survivor.acquire(&image(SizeClass::Large)).await,
        Err(PoolError::AllBusy { .. })
    ));
    clock.advance(ttl - Duration::from_millis(1));
    assert!(matches!(
        survivor.acquire(&image(SizeClass::Large)).await,
        Err(PoolError::AllBusy { .. })
    ));
    clock.advance(Duration::from_millis(1));
    let lease = survivor.acquire(&image(SizeClass::Large)).await.unwrap();
    assert_eq!(lease.account().as_str(), "solo");
}

/// Waits up to 5 s for `pool`'s account to count `large` large requests in flight.
async fn in_flight_large(pool: &imagegate_dispatch::Dispatcher, large: u32) {
    for _ in 0..100 {
        if pool.snapshot().await.unwrap().accounts[0].in_flight.large == large {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("the account never counted {large} large request(s) in flight");
}

#[tokio::test]
async fn a_lease_redis_lost_while_its_request_runs_is_taken_again_by_its_renewal() {
    let prefix = TestPrefix::new();
    lost_lease_is_taken_again(&prefix, prefix.state()).await;
}

#[tokio::test]
async fn a_lease_redis_lost_is_taken_again_through_the_fallback_state_too() {
    let prefix = TestPrefix::new();
    let fallback = FallbackPoolState::new(prefix.state(), CooldownPolicy::default(), Duration::from_secs(5));
    lost_lease_is_taken_again(&prefix, Arc::new(fallback)).await;
}

/// A request holding the only large slot of an account through `holder_state` (whose leases
/// renew every 50 ms) while Redis loses every key under `prefix`.
async fn lost_lease_is_taken_again(prefix: &TestPrefix, holder_state: Arc<dyn PoolState>) {
    let clock = clock();
    let specs = [AccountSpec::new("solo", Tier::Pro, &["g"])];
    let renewing = imagegate_dispatch::DispatchConfig {
        renew_interval: Some(Duration::from_millis(50)),
        ..no_wait()
    };
    let holder = imagegate_dispatch::Dispatcher::new(holder_state, clock.clone(), renewing);
    holder.replace_accounts(specs.to_vec());
    let other = dispatcher(prefix.state(), &clock, no_wait(), &specs);
    let running = holder.acquire(&image(SizeClass::Large)).await.unwrap();
    // Redis restarts empty (or the lease expired while it could not be reached).
    let mut redis = redis_support::sync_connection();
    for key in prefix.keys() {
        let _: () = redis::cmd("DEL").arg(&key).query(&mut redis).unwrap();
    }
    // The request still runs on the account: its renewal takes the slot again, so the other
    // replica does not send a second large request to it.
    in_flight_large(&other, 1).await;
    assert!(
        matches!(
            other.acquire(&image(SizeClass::Large)).await,
            Err(PoolError::AllBusy { .. })
        ),
        "the account's only large slot is the running request's"
    );
    drop(running);
    in_flight_large(&other, 0).await;
    let next = other.acquire(&image(SizeClass::Large)).await.unwrap();
    assert_eq!(next.account().as_str(), "solo");
}

#[tokio::test]
async fn an_unreachable_redis_is_a_backend_error_and_the_fallback_takes_over() {
    let config = RedisConfig {
        connect_timeout: Duration::from_millis(300),
        response_timeout: Duration::from_millis(300),
        // Nothing listens on port 1.
        ..RedisConfig::new("redis://127.0.0.1:1")
    };
    let state = Arc::new(RedisPoolState::new(&config, CooldownPolicy::default()).unwrap());
    let err = state.ping().await.unwrap_err();
    let StateError::Backend(message) = &err;
    assert!(message.contains("redis: ping failed"), "{message}");
    assert!(state.snapshot(START).await.is_err());
    assert!(
        state
            .record_outcome(&"a".into(), &Outcome::Success, START)
            .await
            .is_err()
    );

    let fallback = Arc::new(FallbackPoolState::new(
        state,
        CooldownPolicy::default(),
        Duration::from_secs(5),
    ));
    let clock = clock();
    let pool = imagegate_dispatch::Dispatcher::new(fallback.clone(), clock.clone(), no_wait());
    pool.replace_accounts([AccountSpec::new("a", Tier::Pro, &["g"])]);
    let lease = pool.acquire(&image(SizeClass::Large)).await.unwrap();
    assert!(fallback.degraded());
    assert!(matches!(
        pool.acquire(&image(SizeClass::Large)).await,
        Err(PoolError::AllBusy { .. })
    ));
    drop(lease);
    assert!(pool.acquire(&image(SizeClass::Large)).await.is_ok());
}

#[test]
fn invalid_urls_are_rejected() {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let _guard = runtime.enter();
    let err = RedisPoolState::new(&RedisConfig::new("not a url"), CooldownPolicy::default()).unwrap_err();
    assert!(err.to_string().contains("invalid Redis URL"), "{err}");
}

/// Waits for a slot so long between polls that only an announced release can explain a prompt
/// grant.
fn patient() -> imagegate_dispatch::DispatchConfig {
    imagegate_dispatch::DispatchConfig {
        max_wait: Duration::from_secs(60),
        poll_interval: Duration::from_secs(60),
        ..imagegate_dispatch::DispatchConfig::default()
    }
}

/// Starts `pool`'s acquisition of a large slot and returns once it waits in line.
async fn waiting_for_a_slot(
    pool: &Arc<imagegate_dispatch::Dispatcher>,
) -> tokio::task::JoinHandle<Result<imagegate_dispatch::Lease, PoolError>> {
    let waiter = tokio::spawn({
        let pool = Arc::clone(pool);
        async move { pool.acquire(&image(SizeClass::Large)).await }
    });
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    while pool.waiting() == 0 {
        assert!(tokio::time::Instant::now() < deadline, "the request never waited");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    waiter
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slot_freed_on_one_replica_goes_at_once_to_a_request_waiting_on_another() {
    let prefix = TestPrefix::new();
    let clock = clock();
    let specs = [AccountSpec::new("solo", Tier::Pro, &["g"]).with_limits(1, 1)];
    let holder = dispatcher(prefix.state(), &clock, no_wait(), &specs);
    // The waiting replica as the server runs it: Redis behind the local fallback.
    let fallback = Arc::new(FallbackPoolState::new(
        prefix.state(),
        CooldownPolicy::default(),
        Duration::from_secs(5),
    ));
    let waiting = Arc::new(imagegate_dispatch::Dispatcher::new(
        fallback,
        clock.clone(),
        patient(),
    ));
    waiting.replace_accounts(specs.clone());
    let lease = holder.acquire(&image(SizeClass::Large)).await.unwrap();
    let waiter = waiting_for_a_slot(&waiting).await;
    drop(lease);
    // Well before the next poll (60 s away).
    let granted = tokio::time::timeout(Duration::from_secs(5), waiter)
        .await
        .expect("the release on the other replica woke the waiting request")
        .unwrap()
        .unwrap();
    assert_eq!(granted.account().as_str(), "solo");
}

#[tokio::test]
async fn a_release_carried_by_a_script_call_is_announced_too() {
    let prefix = TestPrefix::new();
    let clock = clock();
    let specs = [AccountSpec::new("solo", Tier::Pro, &["g"]).with_limits(1, 1)];
    let holder = dispatcher(prefix.state(), &clock, no_wait(), &specs);
    let waiting = dispatcher(prefix.state(), &clock, patient(), &specs);
    let lease = holder.acquire(&image(SizeClass::Large)).await.unwrap();
    let waiter = waiting_for_a_slot(&waiting).await;
    // On this single-threaded runtime the background sender has not run when the snapshot takes
    // the queued release along: the snapshot script applies it and announces it.
    drop(lease);
    holder.snapshot().await.unwrap();
    let granted = tokio::time::timeout(Duration::from_secs(5), waiter)
        .await
        .expect("the release carried by the snapshot woke the waiting request")
        .unwrap()
        .unwrap();
    assert_eq!(granted.account().as_str(), "solo");
}

#[tokio::test]
async fn a_listener_whose_connection_went_silent_listens_again() {
    let prefix = TestPrefix::new();
    let relay = SlowRedis::start().await;
    let config = RedisConfig {
        listener_ping_every: Duration::from_millis(200),
        ..RedisConfig::new(format!("redis://{}", relay.addr)).with_prefix(prefix.prefix.clone())
    };
    let state = RedisPoolState::new(&config, CooldownPolicy::default()).unwrap();
    let mut freed = state.slots_freed_elsewhere().unwrap();
    let changed = |freed: &mut tokio::sync::watch::Receiver<()>| {
        let mut freed = freed.clone();
        async move { tokio::time::timeout(Duration::from_secs(10), freed.changed()).await }
    };
    // Subscribed: the listener bumps once on every subscription.
    changed(&mut freed).await.unwrap().unwrap();
    freed.borrow_and_update();

    let before = relay.connections();
    relay.silence_open_connections();
    // A firewall forgot the connection: nothing published reaches it, and only the ping finds
    // out. The new subscription bumps again, on a new connection.
    changed(&mut freed)
        .await
        .expect("the listener subscribed again")
        .unwrap();
    freed.borrow_and_update();
    assert!(relay.connections() > before, "on a new connection");
    // And hears releases announced from now on (a bump that is not another subscription).
    let subscribed = relay.connections();
    let channel = format!("{}freed", prefix.prefix);
    let mut publisher = redis_support::sync_connection();
    let heard = async {
        loop {
            let _: i64 = redis::cmd("PUBLISH")
                .arg(&channel)
                .arg(0u64)
                .query(&mut publisher)
                .unwrap();
            if tokio::time::timeout(Duration::from_millis(100), freed.changed())
                .await
                .is_ok()
            {
                return;
            }
        }
    };
    tokio::time::timeout(Duration::from_secs(10), heard)
        .await
        .expect("a release announced after the silence is heard");
    assert_eq!(relay.connections(), subscribed, "heard, not subscribed again");
}

/// A Redis user with every key and command but no pub/sub channel (Redis 7's default for new
/// users), deleted when dropped.
struct UserWithoutChannels {
    name: String,
}

impl UserWithoutChannels {
    fn create() -> Self {
        let name = format!("imagegate-test-{:016x}", fastrand::u64(..));
        let _: () = redis::cmd("ACL")
            .arg(
                &[
                    "SETUSER",
                    name.as_str(),
                    "on",
                    "nopass",
                    "~*",
                    "resetchannels",
                    "+@all",
                ][..],
            )
            .query(&mut redis_support::sync_connection())
            .unwrap();
        Self { name }
    }

    fn config(&self, prefix: &TestPrefix) -> RedisConfig {
        let url = redis_support::redis_url().replacen("redis://", &format!("redis://{}:any@", self.name), 1);
        RedisConfig::new(url).with_prefix(prefix.prefix.clone())
    }
}

impl Drop for UserWithoutChannels {
    fn drop(&mut self) {
        let _: redis::RedisResult<()> = redis::cmd("ACL")
            .arg(&["DELUSER", self.name.as_str()][..])
            .query(&mut redis_support::sync_connection());
    }
}

#[tokio::test]
async fn a_user_denied_the_channel_still_releases_its_leases() {
    let prefix = TestPrefix::new();
    let user = UserWithoutChannels::create();
    let clock = clock();
    let specs = [AccountSpec::new("solo", Tier::Pro, &["g"]).with_limits(1, 1)];
    let state = Arc::new(RedisPoolState::new(&user.config(&prefix), CooldownPolicy::default()).unwrap());
    let limited = dispatcher(state, &clock, no_wait(), &specs);
    let other = dispatcher(prefix.state(), &clock, no_wait(), &specs);
    // Carried by a script (the snapshot takes the queued release along on this runtime).
    drop(limited.acquire(&image(SizeClass::Large)).await.unwrap());
    limited.snapshot().await.unwrap();
    drop(other.acquire(&image(SizeClass::Large)).await.unwrap());
    // Sent by the background sender.
    let lease = limited.acquire(&image(SizeClass::Large)).await.unwrap();
    drop(lease);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    loop {
        match other.acquire(&image(SizeClass::Large)).await {
            Ok(_) => break,
            Err(PoolError::AllBusy { .. }) if tokio::time::Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            Err(err) => panic!("the release never reached Redis: {err}"),
        }
    }
}

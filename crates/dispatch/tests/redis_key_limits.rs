//! `RedisKeyLimiter` against a real Redis: the behaviour of the in-memory limiter, shared by
//! replicas, and permits of a crashed replica expiring.
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
    KeyGate, KeyLimitError, KeyLimits, KeyPermit, ManualClock, RATE_WINDOW, RedisConfig, RedisKeyLimiter,
    UnixMillis,
};
use redis_support::TestPrefix;

fn limiter(prefix: &TestPrefix) -> Arc<RedisKeyLimiter> {
    Arc::new(RedisKeyLimiter::new(&prefix.config()).unwrap())
}

fn gate(prefix: &TestPrefix) -> (KeyGate, Arc<ManualClock>) {
    let clock = Arc::new(ManualClock::new(UnixMillis(1_000_000)));
    (KeyGate::new(limiter(prefix), clock.clone()), clock)
}

/// A gate whose Redis answers through `slow`, giving up on an answer after 300 ms.
fn gate_behind(slow: &redis_support::SlowRedis, prefix: &TestPrefix) -> KeyGate {
    let config = RedisConfig {
        response_timeout: Duration::from_millis(300),
        ..RedisConfig::new(format!("redis://{}", slow.addr)).with_prefix(prefix.prefix.clone())
    };
    KeyGate::new(
        Arc::new(RedisKeyLimiter::new(&config).unwrap()),
        Arc::new(ManualClock::new(UnixMillis(1_000_000))),
    )
}

/// Waits up to 5 s for the permit set `permits` to be empty (a leaked permit would count for 15
/// minutes).
async fn permits_given_back(redis: &mut redis::Connection, permits: &str) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    loop {
        let taken: u64 = redis::cmd("ZCARD").arg(permits).query(redis).unwrap();
        if taken == 0 {
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the permit is still taken (it would count for 15 minutes)"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn concurrency(limit: u32) -> KeyLimits {
    KeyLimits {
        max_concurrency: Some(limit),
        requests_per_minute: None,
    }
}

fn per_minute(limit: u32) -> KeyLimits {
    KeyLimits {
        max_concurrency: None,
        requests_per_minute: Some(limit),
    }
}

#[tokio::test]
async fn concurrency_limit_refuses_then_frees_on_drop() {
    let prefix = TestPrefix::new();
    let (gate, _clock) = gate(&prefix);
    let limits = concurrency(2);
    let first = gate.admit("k", limits).await.unwrap();
    let second = gate.admit("k", limits).await.unwrap();
    let refused = gate.admit("k", limits).await.unwrap_err();
    assert_eq!(
        refused,
        KeyLimitError::TooManyConcurrent {
            limit: 2,
            retry_after: Duration::from_secs(1)
        }
    );
    let other = gate.admit("other", limits).await.unwrap();
    drop(first);
    let third = gate.admit("k", limits).await.unwrap();
    assert!(gate.admit("k", limits).await.is_err());
    drop((second, third, other));
    let _again = gate.admit("k", limits).await.unwrap();
}

#[tokio::test]
async fn requests_per_minute_slide_and_report_retry_after() {
    let prefix = TestPrefix::new();
    let (gate, clock) = gate(&prefix);
    let limits = per_minute(3);
    for _ in 0..2 {
        gate.admit("k", limits).await.unwrap();
    }
    clock.advance(Duration::from_secs(20));
    gate.admit("k", limits).await.unwrap();
    let refused = gate.admit("k", limits).await.unwrap_err();
    assert_eq!(
        refused,
        KeyLimitError::TooManyRequests {
            limit: 3,
            retry_after: Duration::from_secs(40)
        }
    );
    clock.advance(Duration::from_secs(40));
    gate.admit("k", limits).await.unwrap();
    gate.admit("k", limits).await.unwrap();
    let refused = gate.admit("k", limits).await.unwrap_err();
    assert_eq!(refused.retry_after(), Some(Duration::from_secs(20)));
}

#[tokio::test]
async fn refused_requests_do_not_count() {
    let prefix = TestPrefix::new();
    let (gate, clock) = gate(&prefix);
    let limits = KeyLimits {
        max_concurrency: Some(1),
        requests_per_minute: Some(2),
    };
    let held = gate.admit("k", limits).await.unwrap();
    for _ in 0..5 {
        assert!(matches!(
            gate.admit("k", limits).await,
            Err(KeyLimitError::TooManyConcurrent { .. })
        ));
    }
    drop(held);
    gate.admit("k", limits).await.unwrap();
    assert!(matches!(
        gate.admit("k", limits).await,
        Err(KeyLimitError::TooManyRequests { .. })
    ));
    clock.advance(RATE_WINDOW);
    gate.admit("k", limits).await.unwrap();
}

#[tokio::test]
async fn unlimited_keys_leave_no_state() {
    let prefix = TestPrefix::new();
    let (gate, _clock) = gate(&prefix);
    for _ in 0..10 {
        let _permit = gate.admit("k", KeyLimits::default()).await.unwrap();
    }
    assert!(prefix.keys().is_empty(), "{:?}", prefix.keys());
    let _limited = gate.admit("k", per_minute(5)).await.unwrap();
    let mut keys = prefix.keys();
    keys.sort();
    assert_eq!(keys, [format!("{}key:k:starts", prefix.prefix)]);
    let ttl: i64 = redis::cmd("PTTL")
        .arg(format!("{}key:k:starts", prefix.prefix))
        .query(&mut redis_support::sync_connection())
        .unwrap();
    assert!(ttl > 0 && ttl <= 120_000, "idle windows expire: {ttl}");
}

/// Admits on `gate`, retrying while another replica's release is still on its way to Redis.
async fn admit_once_released(gate: &KeyGate, limits: KeyLimits) -> Result<KeyPermit, KeyLimitError> {
    for _ in 0..400 {
        match gate.admit("k", limits).await {
            Err(KeyLimitError::TooManyConcurrent { .. }) => {
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            other => return other,
        }
    }
    gate.admit("k", limits).await
}

#[tokio::test]
async fn replicas_share_the_limits_of_a_key() {
    let prefix = TestPrefix::new();
    let clock = Arc::new(ManualClock::new(UnixMillis(1_000_000)));
    let first = KeyGate::new(limiter(&prefix), clock.clone());
    let second = KeyGate::new(limiter(&prefix), clock.clone());
    let limits = KeyLimits {
        max_concurrency: Some(1),
        requests_per_minute: Some(3),
    };
    let held = first.admit("k", limits).await.unwrap();
    assert!(matches!(
        second.admit("k", limits).await,
        Err(KeyLimitError::TooManyConcurrent { limit: 1, .. })
    ));
    drop(held);
    // The release travels through the first replica's background task.
    let admitted = admit_once_released(&second, limits).await.unwrap();
    drop(admitted);
    let third = admit_once_released(&first, limits).await.unwrap();
    drop(third);
    // Three starts in the window, two of them on the other replica.
    assert_eq!(
        admit_once_released(&second, limits).await.unwrap_err(),
        KeyLimitError::TooManyRequests {
            limit: 3,
            retry_after: RATE_WINDOW
        }
    );
}

#[tokio::test]
async fn a_crashed_replicas_permit_expires_after_its_ttl() {
    let prefix = TestPrefix::new();
    let clock = Arc::new(ManualClock::new(UnixMillis(1_000_000)));
    let ttl = Duration::from_secs(600);
    let short = |prefix: &TestPrefix| {
        Arc::new(
            RedisKeyLimiter::new(&prefix.config())
                .unwrap()
                .with_permit_ttl(ttl),
        )
    };
    let survivor = KeyGate::new(short(&prefix), clock.clone());
    {
        let crashed = KeyGate::new(short(&prefix), clock.clone());
        std::mem::forget(crashed.admit("k", concurrency(1)).await.unwrap());
    }
    assert!(survivor.admit("k", concurrency(1)).await.is_err());
    clock.advance(ttl - Duration::from_millis(1));
    assert!(survivor.admit("k", concurrency(1)).await.is_err());
    clock.advance(Duration::from_millis(1));
    let _permit = survivor.admit("k", concurrency(1)).await.unwrap();
}

#[tokio::test]
async fn a_shorter_permit_on_another_replica_keeps_the_longer_permit_alive() {
    let prefix = TestPrefix::new();
    let clock = Arc::new(ManualClock::new(UnixMillis(1_000_000)));
    let with_ttl = |ttl: Duration| {
        Arc::new(
            RedisKeyLimiter::new(&prefix.config())
                .unwrap()
                .with_permit_ttl(ttl),
        )
    };
    // A replica with long permits (large images) and one with short ones (a configuration
    // being rolled out) share the key.
    let long = KeyGate::new(with_ttl(Duration::from_secs(900)), clock.clone());
    let short = KeyGate::new(with_ttl(Duration::from_secs(10)), clock.clone());
    let _held = long.admit("k", concurrency(2)).await.unwrap();
    let _brief = short.admit("k", concurrency(2)).await.unwrap();
    let ttl_ms: i64 = redis::cmd("PTTL")
        .arg(format!("{}key:k:inflight", prefix.prefix))
        .query(&mut redis_support::sync_connection())
        .unwrap();
    assert!(
        ttl_ms >= 900_000,
        "the set must outlive the 900 s permit in it, else Redis drops it and the key over-admits: {ttl_ms} ms"
    );
}

#[tokio::test]
async fn an_unreachable_redis_is_a_backend_error() {
    let config = RedisConfig {
        connect_timeout: Duration::from_millis(300),
        response_timeout: Duration::from_millis(300),
        ..RedisConfig::new("redis://127.0.0.1:1")
    };
    let gate = KeyGate::new(
        Arc::new(RedisKeyLimiter::new(&config).unwrap()),
        Arc::new(ManualClock::default()),
    );
    let err = gate.admit("k", concurrency(1)).await.unwrap_err();
    assert!(
        matches!(&err, KeyLimitError::Backend(m) if m.contains("key admission failed")),
        "{err}"
    );
    assert!(
        gate.admit("k", KeyLimits::default()).await.is_ok(),
        "no limits, no Redis needed"
    );
}

#[tokio::test]
async fn an_admission_abandoned_while_redis_answers_gives_its_permit_back() {
    use futures::FutureExt;

    let prefix = TestPrefix::new();
    let (gate, _clock) = gate(&prefix);
    // The per-minute window counts the admissions made, to know when the abandoned one ran.
    let limits = KeyLimits {
        max_concurrency: Some(1),
        requests_per_minute: Some(100),
    };
    // The connection is up and the script loaded, so the next admission's first poll sends it.
    drop(gate.admit("k", limits).await.unwrap());
    // A client that went away while Redis was answering.
    let abandoned = gate.admit("k", limits).now_or_never();
    assert!(abandoned.is_none(), "the first poll waits for Redis");
    let starts = format!("{}key:k:starts", prefix.prefix);
    let mut redis = redis_support::sync_connection();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    loop {
        let admitted: u64 = redis::cmd("ZCARD").arg(&starts).query(&mut redis).unwrap();
        // The abandoned admission took a second permit; once it is given back the key admits again
        // (a leaked permit would count for 15 minutes).
        if admitted >= 2 && gate.admit("k", limits).await.is_ok() {
            break;
        }
        assert!(tokio::time::Instant::now() < deadline, "admitted {admitted}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn a_permit_whose_answer_timed_out_is_given_back() {
    let prefix = TestPrefix::new();
    let slow = redis_support::SlowRedis::start().await;
    let gate = gate_behind(&slow, &prefix);
    let limits = concurrency(1);
    drop(gate.admit("k", limits).await.unwrap());
    // The script runs in Redis, but its answer comes after the caller stopped waiting.
    slow.hold_answers(900);
    let err = gate.admit("k", limits).await.unwrap_err();
    assert!(matches!(err, KeyLimitError::Backend(_)), "{err}");
    let permits = format!("{}key:k:inflight", prefix.prefix);
    let mut redis = redis_support::sync_connection();
    let taken: u64 = redis::cmd("ZCARD").arg(&permits).query(&mut redis).unwrap();
    assert_eq!(taken, 1, "the script ran and took the permit");
    slow.hold_answers(0);
    // The permit nobody received is given back (it would count for 15 minutes).
    permits_given_back(&mut redis, &permits).await;
    // Once the late answers are through, the key admits again.
    tokio::time::sleep(Duration::from_millis(1000)).await;
    let _permit = gate.admit("k", limits).await.unwrap();
}

#[tokio::test]
async fn a_start_whose_answer_timed_out_is_not_counted_against_the_minute() {
    let prefix = TestPrefix::new();
    let slow = redis_support::SlowRedis::start().await;
    let gate = gate_behind(&slow, &prefix);
    let limits = per_minute(2);
    drop(gate.admit("k", limits).await.unwrap());
    // The script runs in Redis and counts a start, but its answer comes after the caller stopped
    // waiting: that request never went.
    slow.hold_answers(900);
    let err = gate.admit("k", limits).await.unwrap_err();
    assert!(matches!(err, KeyLimitError::Backend(_)), "{err}");
    let starts = format!("{}key:k:starts", prefix.prefix);
    let mut redis = redis_support::sync_connection();
    let counted: u64 = redis::cmd("ZCARD").arg(&starts).query(&mut redis).unwrap();
    assert_eq!(counted, 2, "the script ran and counted the start");
    slow.hold_answers(0);
    tokio::time::sleep(Duration::from_millis(1000)).await;
    // The start nobody received is given back with the next call: the key has its second
    // request of the minute.
    let _second = gate.admit("k", limits).await.unwrap();
}

#[tokio::test]
async fn a_permit_whose_answer_timed_out_after_its_caller_left_is_given_back() {
    let prefix = TestPrefix::new();
    let slow = redis_support::SlowRedis::start().await;
    let gate = gate_behind(&slow, &prefix);
    let limits = concurrency(1);
    drop(gate.admit("k", limits).await.unwrap());
    slow.hold_answers(900);
    // The client leaves while the script's answer is held; the answer then times out with
    // nobody waiting for it.
    let left = tokio::time::timeout(Duration::from_millis(100), gate.admit("k", limits)).await;
    assert!(left.is_err(), "the caller stopped waiting first");
    let permits = format!("{}key:k:inflight", prefix.prefix);
    let mut redis = redis_support::sync_connection();
    tokio::time::sleep(Duration::from_millis(200)).await;
    let taken: u64 = redis::cmd("ZCARD").arg(&permits).query(&mut redis).unwrap();
    assert_eq!(taken, 1, "the script ran and took the permit");
    slow.hold_answers(0);
    permits_given_back(&mut redis, &permits).await;
}

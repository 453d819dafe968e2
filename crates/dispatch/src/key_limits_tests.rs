use super::*;
use crate::clock::ManualClock;

fn gate() -> (KeyGate, Arc<ManualClock>) {
    let clock = Arc::new(ManualClock::new(UnixMillis(1_000_000)));
    (
        KeyGate::new(Arc::new(MemoryKeyLimiter::default()), clock.clone()),
        clock,
    )
}

#[tokio::test]
async fn concurrency_limit_refuses_then_frees_on_drop() {
    let (gate, _clock) = gate();
    let limits = KeyLimits {
        max_concurrency: Some(2),
        requests_per_minute: None,
    };
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
    // Other keys are not affected.
    let other = gate.admit("other", limits).await.unwrap();
    drop(first);
    let third = gate.admit("k", limits).await.unwrap();
    assert!(gate.admit("k", limits).await.is_err());
    drop((second, third, other));
    let _again = gate.admit("k", limits).await.unwrap();
}

#[tokio::test]
async fn requests_per_minute_slide_and_report_retry_after() {
    let (gate, clock) = gate();
    let limits = KeyLimits {
        max_concurrency: None,
        requests_per_minute: Some(3),
    };
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
    // The two first requests left the window; the third is still in it.
    gate.admit("k", limits).await.unwrap();
    gate.admit("k", limits).await.unwrap();
    let refused = gate.admit("k", limits).await.unwrap_err();
    assert_eq!(refused.retry_after(), Some(Duration::from_secs(20)));
}

#[tokio::test]
async fn refused_requests_do_not_count() {
    let (gate, clock) = gate();
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
    let limiter = Arc::new(MemoryKeyLimiter::default());
    let gate = KeyGate::new(limiter.clone(), Arc::new(ManualClock::default()));
    for _ in 0..100 {
        let _permit = gate.admit("k", KeyLimits::default()).await.unwrap();
    }
    assert!(limiter.lock().keys.is_empty());
}

#[test]
fn releasing_an_unknown_token_is_harmless() {
    let limiter = MemoryKeyLimiter::default();
    limiter.release_detached("nobody", 42);
    assert!(limiter.lock().keys.is_empty());
}

#[tokio::test]
async fn idle_keys_are_swept() {
    let limiter = Arc::new(MemoryKeyLimiter::default());
    let clock = Arc::new(ManualClock::new(UnixMillis(1_000_000)));
    let gate = KeyGate::new(limiter.clone(), clock.clone());
    let limits = KeyLimits {
        max_concurrency: None,
        requests_per_minute: Some(10),
    };
    gate.admit("gone", limits).await.unwrap();
    clock.advance(RATE_WINDOW);
    let held = gate
        .admit(
            "busy",
            KeyLimits {
                max_concurrency: Some(1),
                requests_per_minute: None,
            },
        )
        .await
        .unwrap();
    for _ in 0..SWEEP_EVERY {
        gate.admit("other", KeyLimits::default()).await.unwrap();
    }
    let keys = limiter.lock().keys.keys().cloned().collect::<Vec<_>>();
    assert_eq!(keys, vec!["busy".to_owned()]);
    drop(held);
}

#[test]
fn requests_counted_for_a_shared_limiter_leave_the_window_and_the_map() {
    let limiter = MemoryKeyLimiter::default();
    let limits = KeyLimits {
        max_concurrency: None,
        requests_per_minute: Some(10),
    };
    // A busy key, counted only (a shared limiter admits it), never asked locally: its starts
    // must not pile up.
    let mut now = UnixMillis(1_000_000);
    for _ in 0..600 {
        assert_eq!(limiter.count_admitted("busy", limits, now), None);
        now = now.plus(Duration::from_secs(1));
    }
    let kept = limiter
        .lock()
        .keys
        .get("busy")
        .map(|usage| usage.recent_starts.len());
    assert_eq!(kept, Some(60), "only the last minute's starts are kept");
    // Keys that went quiet are forgotten by the periodic sweep.
    limiter.count_admitted("quiet", limits, now);
    now = now.plus(RATE_WINDOW);
    for _ in 0..SWEEP_EVERY {
        limiter.count_admitted("busy", limits, now);
    }
    assert!(!limiter.lock().keys.contains_key("quiet"));
}

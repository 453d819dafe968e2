use super::*;

const T0: UnixMillis = UnixMillis(1_000_000);

fn secs(s: u64) -> Duration {
    Duration::from_secs(s)
}

fn rate_limited(reset_at: Option<UnixMillis>, scope: LimitScope) -> Outcome {
    Outcome::RateLimited { reset_at, scope }
}

fn transient() -> Outcome {
    Outcome::Transient { detail: "502".into() }
}

#[test]
fn burst_429_with_reset_cools_only_until_that_reset() {
    let policy = CooldownPolicy::default();
    let mut health = AccountHealth::default();
    let reset = T0.plus(secs(42));
    health.apply(&rate_limited(Some(reset), LimitScope::All), &policy, T0);
    assert_eq!(health.blocked_until(false, T0), Some(reset));
    assert_eq!(health.blocked_until(true, T0.plus(secs(41))), Some(reset));
    assert_eq!(
        health.blocked_until(true, reset),
        None,
        "usable again at the reset"
    );
    assert_eq!(health.failures, 1);
}

#[test]
fn reset_in_the_past_still_cools_for_the_minimum() {
    let policy = CooldownPolicy::default();
    let mut health = AccountHealth::default();
    health.apply(&rate_limited(Some(UnixMillis(5)), LimitScope::All), &policy, T0);
    assert_eq!(
        health.blocked_until(false, T0),
        Some(T0.plus(policy.min_reset_cooldown))
    );
}

#[test]
fn repeated_429_without_reset_doubles_to_the_cap_and_success_resets_it() {
    let policy = CooldownPolicy::default();
    let mut health = AccountHealth::default();
    let mut now = T0;
    let mut seen = Vec::new();
    for _ in 0..7 {
        health.apply(&rate_limited(None, LimitScope::All), &policy, now);
        let until = health.blocked_until(false, now).unwrap();
        seen.push(until.since(now).as_secs());
        now = until;
    }
    assert_eq!(seen, vec![30, 60, 120, 240, 480, 600, 600]);
    health.apply(&Outcome::Success, &policy, now);
    assert_eq!(health.rate_limit_streak, 0);
    health.apply(&rate_limited(None, LimitScope::All), &policy, now);
    assert_eq!(health.blocked_until(false, now), Some(now.plus(secs(30))));
}

#[test]
fn shorter_cooldown_does_not_shorten_a_longer_one() {
    let policy = CooldownPolicy::default();
    let mut health = AccountHealth::default();
    let reset = T0.plus(secs(3600));
    health.apply(&rate_limited(Some(reset), LimitScope::All), &policy, T0);
    health.apply(&rate_limited(None, LimitScope::All), &policy, T0);
    assert_eq!(health.blocked_until(false, T0), Some(reset));
}

#[test]
fn images_only_scope_does_not_block_non_image_requests() {
    let policy = CooldownPolicy::default();
    let mut health = AccountHealth::default();
    let reset = T0.plus(secs(300));
    health.apply(&rate_limited(Some(reset), LimitScope::ImagesOnly), &policy, T0);
    assert_eq!(health.blocked_until(true, T0), Some(reset));
    assert_eq!(health.blocked_until(false, T0), None);
}

#[test]
fn html_403_is_no_penalty() {
    let policy = CooldownPolicy::default();
    let mut health = AccountHealth::default();
    for _ in 0..10 {
        health.apply(
            &Outcome::Forbidden {
                json_body: false,
                detail: "cf".into(),
            },
            &policy,
            T0,
        );
    }
    assert_eq!(health.blocked_until(true, T0), None);
    assert!(health.is_usable());
    assert_eq!(health.forbidden_streak, 0);
    assert_eq!(health.failures, 10, "still counted for visibility");
    assert!(health.last_error.unwrap().message.contains("HTML 403"));
}

#[test]
fn json_403_cools_briefly_and_repeats_disable() {
    let policy = CooldownPolicy::default();
    let mut health = AccountHealth::default();
    let forbidden = Outcome::Forbidden {
        json_body: true,
        detail: "account deactivated".into(),
    };
    health.apply(&forbidden, &policy, T0);
    assert_eq!(
        health.blocked_until(false, T0),
        Some(T0.plus(policy.forbidden_cooldown))
    );
    assert!(health.is_usable());
    health.apply(&forbidden, &policy, T0);
    assert!(health.is_usable());
    health.apply(&forbidden, &policy, T0);
    match &health.status {
        AccountStatus::Disabled { reason } => assert!(reason.contains("account deactivated")),
        other => panic!("expected disabled, got {other:?}"),
    }
}

#[test]
fn success_between_json_403s_restarts_the_count() {
    let policy = CooldownPolicy::default();
    let mut health = AccountHealth::default();
    let forbidden = Outcome::Forbidden {
        json_body: true,
        detail: "x".into(),
    };
    health.apply(&forbidden, &policy, T0);
    health.apply(&forbidden, &policy, T0);
    health.apply(&Outcome::Success, &policy, T0);
    health.apply(&forbidden, &policy, T0);
    assert!(health.is_usable());
    assert_eq!(health.forbidden_streak, 1);
}

#[test]
fn auth_failure_sets_error_status_with_reason() {
    let policy = CooldownPolicy::default();
    let mut health = AccountHealth::default();
    health.apply(
        &Outcome::AuthFailed {
            reason: "refresh token revoked".into(),
        },
        &policy,
        T0,
    );
    assert_eq!(
        health.status,
        AccountStatus::Error {
            reason: "refresh token revoked".into()
        }
    );
    health.apply(&Outcome::Success, &policy, T0);
    assert!(!health.is_usable(), "only an operator clears an auth error");
}

#[test]
fn transient_streak_opens_the_breaker_and_success_closes_it() {
    let policy = CooldownPolicy::default();
    let mut health = AccountHealth::default();
    health.apply(&transient(), &policy, T0);
    health.apply(&transient(), &policy, T0);
    assert_eq!(
        health.blocked_until(false, T0),
        None,
        "two failures keep the breaker closed"
    );
    health.apply(&transient(), &policy, T0);
    assert_eq!(
        health.blocked_until(false, T0),
        Some(T0.plus(policy.breaker_cooldown))
    );
    assert_eq!(
        health.cooldown_all.as_ref().unwrap().kind,
        CooldownKind::CircuitOpen
    );
    health.apply(&Outcome::Success, &policy, T0);
    assert_eq!(health.blocked_until(false, T0), None);
    assert_eq!(health.transient_streak, 0);
}

#[test]
fn half_open_breaker_reopens_on_the_next_failure() {
    let policy = CooldownPolicy::default();
    let mut health = AccountHealth::default();
    for _ in 0..3 {
        health.apply(&transient(), &policy, T0);
    }
    let later = T0.plus(policy.breaker_cooldown);
    assert_eq!(health.blocked_until(false, later), None);
    health.apply(&transient(), &policy, later);
    assert_eq!(
        health.blocked_until(false, later),
        Some(later.plus(policy.breaker_cooldown))
    );
}

#[test]
fn success_keeps_a_rate_limit_cooldown() {
    let policy = CooldownPolicy::default();
    let mut health = AccountHealth::default();
    let reset = T0.plus(secs(90));
    health.apply(&rate_limited(Some(reset), LimitScope::All), &policy, T0);
    health.apply(&Outcome::Success, &policy, T0);
    assert_eq!(health.blocked_until(false, T0), Some(reset));
}

#[test]
fn success_keeps_a_rate_limit_a_longer_cooldown_of_another_kind_replaced() {
    // A 429 (reset in 20 s), then a JSON 403 (60 s) and a breaker opening while it holds: the
    // longer cooldown replaces it, and a success ending that cooldown leaves the rate limit.
    let policy = CooldownPolicy::default();
    let reset = T0.plus(secs(20));
    let forbidden = Outcome::Forbidden {
        json_body: true,
        detail: "403".into(),
    };
    for failures in [vec![forbidden], vec![transient(); 3]] {
        let mut health = AccountHealth::default();
        health.apply(&rate_limited(Some(reset), LimitScope::All), &policy, T0);
        for failure in &failures {
            health.apply(failure, &policy, T0);
        }
        assert!(health.blocked_until(false, T0.plus(secs(1))) > Some(reset));
        health.apply(&Outcome::Success, &policy, T0.plus(secs(1)));
        assert_eq!(
            health.blocked_until(false, T0.plus(secs(1))),
            Some(reset),
            "{failures:?}"
        );
        assert_eq!(health.blocked_until(false, reset), None, "usable at the reset");
        // Stored as JSON (the Redis state) and read back, it says the same.
        let stored: AccountHealth = serde_json::from_str(&serde_json::to_string(&health).unwrap()).unwrap();
        assert_eq!(stored.blocked_until(false, T0.plus(secs(1))), Some(reset));
    }
    // A success after the rate limit's own end clears everything, as before.
    let mut health = AccountHealth::default();
    health.apply(&rate_limited(Some(reset), LimitScope::All), &policy, T0);
    health.apply(&transient(), &policy, T0);
    health.apply(&transient(), &policy, T0);
    health.apply(&transient(), &policy, T0);
    health.apply(&Outcome::Success, &policy, reset.plus(secs(1)));
    assert_eq!(health.blocked_until(false, reset.plus(secs(1))), None);
}

#[test]
fn invalid_request_changes_nothing() {
    let policy = CooldownPolicy::default();
    let mut health = AccountHealth::default();
    health.apply(&transient(), &policy, T0);
    let before = health.clone();
    health.apply(&Outcome::Invalid, &policy, T0);
    assert_eq!(health, before);
}

#[test]
fn backoff_saturates_for_huge_streaks() {
    let policy = CooldownPolicy::default();
    assert_eq!(rate_limit_backoff(&policy, 0), secs(30));
    assert_eq!(rate_limit_backoff(&policy, 1), secs(30));
    assert_eq!(rate_limit_backoff(&policy, u32::MAX), secs(600));
}

use std::collections::{HashMap, HashSet};
use std::time::Duration;

use super::*;
use crate::account::Tier;
use crate::outcome::{AccountStatus, Cooldown, CooldownKind};

const NOW: UnixMillis = UnixMillis(10_000);

fn ranked(specs: &[AccountSpec]) -> RankedCandidates {
    RankedCandidates::for_group(specs, &GroupId::new("g"))
}

fn query(class: SizeClass, image: bool) -> SelectionQuery<'static> {
    SelectionQuery {
        class,
        image,
        now: NOW,
        exclude: &[],
    }
}

fn picked(ranked: &RankedCandidates, selection: Selection) -> &str {
    match selection {
        Selection::Selected(i) => ranked.entries()[i].id.as_str(),
        other => panic!("expected a selection, got {other:?}"),
    }
}

fn busy(large: u32, standard: u32) -> AccountRuntime {
    AccountRuntime {
        in_flight: ClassCounts { large, standard },
        ..AccountRuntime::default()
    }
}

fn cooling(until: UnixMillis, images_only: bool) -> AccountRuntime {
    let cooldown = Cooldown {
        until,
        kind: CooldownKind::RateLimited,
        reason: "429".into(),
        rate_limited_until: None,
    };
    let mut runtime = AccountRuntime::default();
    if images_only {
        runtime.health.cooldown_images = Some(cooldown);
    } else {
        runtime.health.cooldown_all = Some(cooldown);
    }
    runtime
}

#[test]
fn bands_group_equal_tier_and_priority_best_first() {
    let r = ranked(&[
        AccountSpec::new("free", Tier::Free, &["g"]),
        AccountSpec::new("pro-b", Tier::Pro, &["g"]),
        AccountSpec::new("team", Tier::Team, &["g"]).with_priority(5),
        AccountSpec::new("pro-a", Tier::Pro, &["g"]),
        AccountSpec::new("pro-hi", Tier::Pro, &["g"]).with_priority(1),
        AccountSpec::new("other", Tier::Pro, &["h"]),
        AccountSpec::new("off", Tier::Pro, &["g"]).with_active(false),
    ]);
    let ids: Vec<&str> = r.entries().iter().map(|c| c.id.as_str()).collect();
    assert_eq!(ids, vec!["pro-hi", "pro-a", "pro-b", "team", "free"]);
    assert_eq!(
        r.bands().collect::<Vec<_>>(),
        vec![(0, 1), (1, 3), (3, 4), (4, 5)]
    );
}

#[test]
fn higher_tier_wins_over_priority_and_load() {
    let r = ranked(&[
        AccountSpec::new("plus", Tier::Plus, &["g"]).with_priority(100),
        AccountSpec::new("pro", Tier::Pro, &["g"]),
    ]);
    let state = HashMap::from([(AccountId::new("pro"), busy(0, 3))]);
    let s = select(
        &r,
        &query(SizeClass::Standard, true),
        |_, c| state.get(&c.id).map(AccountLoad::of),
        7,
    );
    assert_eq!(picked(&r, s), "pro");
}

#[test]
fn least_loaded_within_a_band() {
    let r = ranked(&[
        AccountSpec::new("a", Tier::Team, &["g"]),
        AccountSpec::new("b", Tier::Team, &["g"]),
        AccountSpec::new("c", Tier::Team, &["g"]),
    ]);
    let state = HashMap::from([
        (AccountId::new("a"), busy(0, 3)),
        (AccountId::new("b"), busy(0, 1)),
        (AccountId::new("c"), busy(0, 2)),
    ]);
    for seed in 0..50 {
        let s = select(
            &r,
            &query(SizeClass::Standard, true),
            |_, c| state.get(&c.id).map(AccountLoad::of),
            seed,
        );
        assert_eq!(picked(&r, s), "b");
    }
}

#[test]
fn ties_are_broken_at_random() {
    let specs: Vec<_> = ["a", "b", "c", "d"]
        .iter()
        .map(|id| AccountSpec::new(id, Tier::Pro, &["g"]))
        .collect();
    let r = ranked(&specs);
    let idle: HashMap<AccountId, AccountRuntime> = HashMap::new();
    let loaded: HashMap<AccountId, AccountRuntime> =
        r.entries().iter().map(|c| (c.id.clone(), busy(0, 1))).collect();
    for state in [idle, loaded] {
        let seen: HashSet<&str> = (0..200)
            .map(|seed| {
                picked(
                    &r,
                    select(
                        &r,
                        &query(SizeClass::Standard, true),
                        |_, c| state.get(&c.id).map(AccountLoad::of),
                        seed,
                    ),
                )
            })
            .collect();
        assert_eq!(
            seen.len(),
            4,
            "every tied account gets picked sometimes: {seen:?}"
        );
    }
}

#[test]
fn full_account_is_skipped_and_all_full_is_busy() {
    let r = ranked(&[
        AccountSpec::new("a", Tier::Pro, &["g"]),
        AccountSpec::new("b", Tier::Free, &["g"]),
    ]);
    let mut state = HashMap::from([(AccountId::new("a"), busy(1, 0))]);
    let s = select(
        &r,
        &query(SizeClass::Large, true),
        |_, c| state.get(&c.id).map(AccountLoad::of),
        1,
    );
    assert_eq!(picked(&r, s), "b");
    let s = select(
        &r,
        &query(SizeClass::Standard, true),
        |_, c| state.get(&c.id).map(AccountLoad::of),
        1,
    );
    assert_eq!(picked(&r, s), "a", "large and standard limits are separate");
    state.insert(AccountId::new("b"), busy(1, 0));
    assert_eq!(
        select(
            &r,
            &query(SizeClass::Large, true),
            |_, c| state.get(&c.id).map(AccountLoad::of),
            1
        ),
        Selection::Busy
    );
}

#[test]
fn cooling_accounts_are_skipped_and_report_the_earliest_reset() {
    let r = ranked(&[
        AccountSpec::new("a", Tier::Pro, &["g"]),
        AccountSpec::new("b", Tier::Pro, &["g"]),
    ]);
    let a_until = NOW.plus(Duration::from_secs(50));
    let b_until = NOW.plus(Duration::from_secs(20));
    let state = HashMap::from([
        (AccountId::new("a"), cooling(a_until, false)),
        (AccountId::new("b"), cooling(b_until, false)),
    ]);
    let s = select(
        &r,
        &query(SizeClass::Standard, false),
        |_, c| state.get(&c.id).map(AccountLoad::of),
        3,
    );
    assert_eq!(
        s,
        Selection::CoolingDown {
            earliest_reset: b_until
        }
    );
}

#[test]
fn busy_wins_over_cooling() {
    let r = ranked(&[
        AccountSpec::new("a", Tier::Pro, &["g"]),
        AccountSpec::new("b", Tier::Pro, &["g"]),
    ]);
    let state = HashMap::from([
        (
            AccountId::new("a"),
            cooling(NOW.plus(Duration::from_secs(9)), false),
        ),
        (AccountId::new("b"), busy(1, 0)),
    ]);
    assert_eq!(
        select(
            &r,
            &query(SizeClass::Large, true),
            |_, c| state.get(&c.id).map(AccountLoad::of),
            3
        ),
        Selection::Busy
    );
}

#[test]
fn images_only_cooldown_spares_other_requests() {
    let r = ranked(&[AccountSpec::new("a", Tier::Pro, &["g"])]);
    let until = NOW.plus(Duration::from_secs(60));
    let state = HashMap::from([(AccountId::new("a"), cooling(until, true))]);
    let image = select(
        &r,
        &query(SizeClass::Standard, true),
        |_, c| state.get(&c.id).map(AccountLoad::of),
        0,
    );
    assert_eq!(
        image,
        Selection::CoolingDown {
            earliest_reset: until
        }
    );
    let text = select(
        &r,
        &query(SizeClass::Standard, false),
        |_, c| state.get(&c.id).map(AccountLoad::of),
        0,
    );
    assert_eq!(picked(&r, text), "a");
}

#[test]
fn errored_excluded_and_zero_limit_accounts_are_unavailable() {
    let r = ranked(&[
        AccountSpec::new("err", Tier::Pro, &["g"]),
        AccountSpec::new("tried", Tier::Pro, &["g"]),
        AccountSpec::new("no-large", Tier::Pro, &["g"]).with_limits(0, 4),
    ]);
    let mut errored = AccountRuntime::default();
    errored.health.status = AccountStatus::Error {
        reason: "revoked".into(),
    };
    let state = HashMap::from([(AccountId::new("err"), errored)]);
    let exclude = [AccountId::new("tried")];
    let q = SelectionQuery {
        class: SizeClass::Large,
        image: true,
        now: NOW,
        exclude: &exclude,
    };
    assert_eq!(
        select(&r, &q, |_, c| state.get(&c.id).map(AccountLoad::of), 0),
        Selection::Unavailable
    );
    let q = SelectionQuery {
        class: SizeClass::Standard,
        ..q
    };
    assert_eq!(
        picked(
            &r,
            select(&r, &q, |_, c| state.get(&c.id).map(AccountLoad::of), 0)
        ),
        "no-large"
    );
    assert_eq!(
        select(
            &RankedCandidates::default(),
            &q,
            |_, c| state.get(&c.id).map(AccountLoad::of),
            0
        ),
        Selection::Unavailable
    );
}

#[test]
fn expired_cooldown_no_longer_blocks() {
    let r = ranked(&[AccountSpec::new("a", Tier::Pro, &["g"])]);
    let state = HashMap::from([(AccountId::new("a"), cooling(NOW, false))]);
    assert_eq!(
        picked(
            &r,
            select(
                &r,
                &query(SizeClass::Standard, true),
                |_, c| state.get(&c.id).map(AccountLoad::of),
                0
            )
        ),
        "a"
    );
}

#[test]
fn a_half_open_breaker_lets_one_request_through_at_a_time() {
    let r = ranked(&[AccountSpec::new("a", Tier::Pro, &["g"])]);
    let select_a = |runtime: &AccountRuntime| {
        select(
            &r,
            &query(SizeClass::Standard, true),
            |_, _| Some(AccountLoad::of(runtime)),
            0,
        )
    };
    let mut runtime = AccountRuntime::default();
    runtime.health.cooldown_all = Some(Cooldown {
        until: NOW,
        kind: CooldownKind::CircuitOpen,
        reason: "breaker".into(),
        rate_limited_until: None,
    });
    // Its cooldown is over: one request, the probe, goes.
    assert_eq!(picked(&r, select_a(&runtime)), "a");
    // While the probe runs, the others wait for it (whatever the account's limit).
    runtime.in_flight.standard = 1;
    assert_eq!(select_a(&runtime), Selection::Busy);
    runtime.in_flight = ClassCounts {
        large: 1,
        standard: 0,
    };
    assert_eq!(select_a(&runtime), Selection::Busy);
    // A success closes the breaker: the account is used up to its limit again.
    runtime.health.apply(
        &crate::outcome::Outcome::Success,
        &crate::outcome::CooldownPolicy::default(),
        NOW,
    );
    assert_eq!(picked(&r, select_a(&runtime)), "a");
    // A rate limit is no breaker: once it is over, every request goes.
    let mut limited = cooling(NOW, false);
    limited.in_flight.standard = 1;
    assert_eq!(picked(&r, select_a(&limited)), "a");
}

/// A band of `size` standard-limit-4 accounts of one tier.
fn one_band(size: usize) -> RankedCandidates {
    let specs: Vec<_> = (0..size)
        .map(|i| AccountSpec::new(&format!("a{i:05}"), Tier::Pro, &["g"]))
        .collect();
    ranked(&specs)
}

#[test]
fn a_busy_large_band_compares_a_bounded_window_and_takes_its_least_loaded() {
    let r = one_band(2_000);
    // Loads 1..=3 spread over the band, none idle, none full (standard limit 4).
    let load_of = |index: usize| u32::try_from(index * 7 % 3 + 1).unwrap();
    for seed in 0..50 {
        let seen = std::cell::RefCell::new(Vec::new());
        let s = select(
            &r,
            &query(SizeClass::Standard, true),
            |index, _| {
                seen.borrow_mut().push(index);
                Some(AccountLoad::of(&busy(0, load_of(index))))
            },
            seed,
        );
        let Selection::Selected(chosen) = s else {
            panic!("expected a selection, got {s:?}");
        };
        let seen = seen.into_inner();
        assert_eq!(seen.len(), COMPARE_WINDOW, "seed {seed}: compared {}", seen.len());
        assert!(seen.contains(&chosen));
        let least = seen.iter().map(|&i| load_of(i)).min().unwrap();
        assert_eq!(
            load_of(chosen),
            least,
            "seed {seed}: the least loaded of the window"
        );
    }
}

#[test]
fn a_band_within_the_window_is_compared_in_full() {
    let r = one_band(COMPARE_WINDOW);
    let lightest = 17;
    for seed in 0..50 {
        let s = select(
            &r,
            &query(SizeClass::Standard, true),
            |index, _| Some(AccountLoad::of(&busy(0, if index == lightest { 1 } else { 2 }))),
            seed,
        );
        assert_eq!(s, Selection::Selected(lightest));
    }
}

#[test]
fn full_accounts_do_not_use_up_the_window() {
    let r = one_band(1_000);
    let free = 613;
    for seed in 0..20 {
        let s = select(
            &r,
            &query(SizeClass::Standard, true),
            |index, _| Some(AccountLoad::of(&busy(0, if index == free { 3 } else { 4 }))),
            seed,
        );
        assert_eq!(s, Selection::Selected(free), "seed {seed}");
    }
}

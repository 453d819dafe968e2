use std::collections::HashMap;

use proptest::prelude::*;

use super::*;
use crate::account::{AccountId, AccountSpec, GroupId, Tier};
use crate::clock::UnixMillis;
use crate::outcome::{Cooldown, CooldownKind};
use crate::select::{AccountRuntime, COMPARE_WINDOW, Selection, select};

const NOW: UnixMillis = UnixMillis(10_000);
const TIERS: [Tier; 3] = [Tier::Plus, Tier::Team, Tier::Pro];

/// One account of a generated pool.
#[derive(Debug, Clone)]
struct Account {
    tier: usize,
    priority: i32,
    limits: ClassLimits,
    in_flight: ClassCounts,
    cooling: bool,
    errored: bool,
}

fn account() -> impl Strategy<Value = Account> {
    (
        0..3_usize,
        0..2_i32,
        0..3_u32,
        0..5_u32,
        0..3_u32,
        0..6_u32,
        0..10_u8,
    )
        .prop_map(
            |(tier, priority, large, standard, used_large, used_standard, health)| Account {
                tier,
                priority,
                limits: ClassLimits { large, standard },
                in_flight: ClassCounts {
                    large: used_large,
                    standard: used_standard,
                },
                cooling: health == 0,
                errored: health == 1,
            },
        )
}

fn ranked(accounts: &[Account]) -> RankedCandidates {
    let specs: Vec<_> = accounts
        .iter()
        .enumerate()
        .map(|(i, a)| {
            let tier = TIERS.get(a.tier).copied().unwrap_or(Tier::Plus);
            AccountSpec::new(&format!("a{i:03}"), tier, &["g"])
                .with_priority(a.priority)
                .with_limits(a.limits.large, a.limits.standard)
        })
        .collect();
    RankedCandidates::for_group(&specs, &GroupId::new("g"))
}

/// The load of each account of `list`, by id.
fn loads(accounts: &[Account]) -> HashMap<AccountId, AccountLoad> {
    accounts
        .iter()
        .enumerate()
        .map(|(i, a)| {
            let mut runtime = AccountRuntime {
                in_flight: a.in_flight,
                ..AccountRuntime::default()
            };
            if a.cooling {
                runtime.health.cooldown_all = Some(Cooldown {
                    until: UnixMillis(NOW.0 + 5_000),
                    kind: CooldownKind::RateLimited,
                    reason: "429".into(),
                    rate_limited_until: None,
                });
            }
            if a.errored {
                runtime.health.status = crate::outcome::AccountStatus::Error { reason: "401".into() };
            }
            (AccountId::new(&format!("a{i:03}")), AccountLoad::of(&runtime))
        })
        .collect()
}

fn band_of(list: &RankedCandidates, index: usize) -> usize {
    list.bands()
        .position(|(start, end)| (start..end).contains(&index))
        .unwrap()
}

proptest! {
    #[test]
    fn the_index_holds_exactly_the_accounts_below_their_limit(
        accounts in prop::collection::vec(account(), 1..40),
        changes in prop::collection::vec((0..40_usize, any::<bool>(), 0..6_u32), 0..80),
    ) {
        let list = ranked(&accounts);
        let mut used: Vec<ClassCounts> = vec![ClassCounts::default(); list.len()];
        let mut index = RoomIndex::new(&list, |p| used[p]);
        for (position, large, count) in changes {
            let position = position % list.len();
            let class = if large { SizeClass::Large } else { SizeClass::Standard };
            *used[position].get_mut(class) = count;
            index.set(position, class, count);
        }
        for (band, (start, end)) in list.bands().enumerate() {
            for class in CLASSES {
                let expected: Vec<u32> = (start..end)
                    .filter(|&p| used[p].get(class) < list.entries()[p].limits.for_class(class))
                    .map(|p| u32::try_from(p).unwrap())
                    .collect();
                prop_assert_eq!(index.room(band, class), expected);
            }
        }
    }

    #[test]
    fn a_pick_agrees_with_select(
        accounts in prop::collection::vec(account(), 1..80),
        large in any::<bool>(),
        excluded in prop::collection::vec(0..80_usize, 0..4),
        seed in any::<u64>(),
    ) {
        let list = ranked(&accounts);
        let by_id = loads(&accounts);
        let load_at = |p: usize| by_id.get(&list.entries()[p].id).copied();
        let index = RoomIndex::new(&list, |p| load_at(p).map(|l| l.in_flight).unwrap_or_default());
        let exclude: Vec<AccountId> = excluded
            .iter()
            .map(|i| AccountId::new(&format!("a{:03}", i % accounts.len())))
            .collect();
        let query = SelectionQuery {
            class: if large { SizeClass::Large } else { SizeClass::Standard },
            image: true,
            now: NOW,
            exclude: &exclude,
        };
        let reference = select(&list, &query, |p, _| load_at(p), seed);
        let picked = index.pick(&list, &query, load_at, seed);
        match (reference, picked) {
            (Selection::Selected(expected), Some(got)) => {
                prop_assert_eq!(band_of(&list, got), band_of(&list, expected), "same band");
                let (mine, theirs) = (load_at(got).unwrap_or_default(), load_at(expected).unwrap_or_default());
                let limit = |p: usize| list.entries()[p].limits.for_class(query.class);
                prop_assert!(mine.in_flight.get(query.class) < limit(got), "the pick has room");
                prop_assert!(mine.blocked_until(true, NOW).is_none() && mine.usable);
                prop_assert!(!exclude.contains(&list.entries()[got].id));
                let (start, end) = list.bands().nth(band_of(&list, got)).unwrap();
                let eligible = (start..end)
                    .filter(|&p| {
                        let l = load_at(p).unwrap_or_default();
                        l.usable && l.blocked_until(true, NOW).is_none()
                            && l.in_flight.get(query.class) < limit(p)
                            && !exclude.contains(&list.entries()[p].id)
                    })
                    .count();
                if eligible <= COMPARE_WINDOW {
                    // Both compared the whole band: equally loaded picks.
                    let share = |l: AccountLoad, p: usize| u64::from(l.in_flight.get(query.class)) * 1_000_000 / u64::from(limit(p));
                    prop_assert_eq!(share(mine, got), share(theirs, expected));
                }
            }
            (Selection::Selected(_), None) => prop_assert!(false, "select found an account the index missed"),
            (_, Some(got)) => prop_assert!(false, "the index picked {got} where select found none"),
            (_, None) => {}
        }
    }
}

#[test]
fn full_bands_are_skipped_without_looking_at_their_accounts() {
    let full = Account {
        tier: 2,
        priority: 0,
        limits: ClassLimits::default(),
        in_flight: ClassCounts {
            large: 1,
            standard: 4,
        },
        cooling: false,
        errored: false,
    };
    let mut accounts = vec![full; 3_000];
    for account in accounts.iter_mut().skip(2_000) {
        account.tier = 1;
        account.in_flight = ClassCounts::default();
    }
    let list = ranked(&accounts);
    let by_id = loads(&accounts);
    let index = RoomIndex::new(&list, |p| by_id[&list.entries()[p].id].in_flight);
    let looked = std::cell::Cell::new(0);
    let query = SelectionQuery {
        class: SizeClass::Standard,
        image: true,
        now: NOW,
        exclude: &[],
    };
    let picked = index
        .pick(
            &list,
            &query,
            |p| {
                looked.set(looked.get() + 1);
                by_id.get(&list.entries()[p].id).copied()
            },
            7,
        )
        .unwrap();
    assert!(picked >= 2_000, "a Team account: the Pro band is full");
    assert_eq!(looked.get(), 1, "the first account with room is idle");
}

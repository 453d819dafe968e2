//! Test steps and the proptest strategies that generate them.

use std::time::Duration;

use imagegate_dispatch::{AccountSpec, LimitScope, Outcome, Tier, UnixMillis};
use proptest::prelude::*;

/// One step of a test sequence.
#[derive(Debug, Clone)]
pub enum Op {
    Acquire { group: u8, large: bool, image: bool },
    Drop { pick: usize },
    Renew { pick: usize },
    Record { account: usize, outcome: OutcomeKind },
    Clear { account: usize },
    Toggle { account: usize },
    Advance { millis: u64 },
    Snapshot,
}

/// An outcome whose reset is relative to the time it is recorded.
#[derive(Debug, Clone)]
pub enum OutcomeKind {
    Success,
    RateLimited {
        reset_in: Option<u64>,
        images_only: bool,
    },
    AuthFailed,
    Forbidden {
        json: bool,
    },
    Transient,
    Invalid,
}

impl OutcomeKind {
    pub fn to_outcome(&self, now: UnixMillis) -> Outcome {
        match self {
            Self::Success => Outcome::Success,
            Self::RateLimited {
                reset_in,
                images_only,
            } => Outcome::RateLimited {
                reset_at: reset_in.map(|ms| now.plus(Duration::from_millis(ms))),
                scope: if *images_only {
                    LimitScope::ImagesOnly
                } else {
                    LimitScope::All
                },
            },
            Self::AuthFailed => Outcome::AuthFailed {
                reason: "revoked".into(),
            },
            Self::Forbidden { json } => Outcome::Forbidden {
                json_body: *json,
                detail: "403".into(),
            },
            Self::Transient => Outcome::Transient {
                detail: "timeout".into(),
            },
            Self::Invalid => Outcome::Invalid,
        }
    }
}

/// Random account sets: up to 8 accounts in groups g0..g2 (g3 is always empty).
pub fn specs() -> impl Strategy<Value = Vec<AccountSpec>> {
    let tiers = prop::sample::select(vec![Tier::Free, Tier::Plus, Tier::Team, Tier::Pro]);
    let account = (
        tiers,
        0i32..3,
        0u8..8,
        0u32..3,
        0u32..5,
        prop::bool::weighted(0.85),
    );
    prop::collection::vec(account, 1..9).prop_map(|accounts| {
        accounts
            .into_iter()
            .enumerate()
            .map(|(i, (tier, priority, mask, large, standard, active))| {
                let groups: Vec<String> = (0..3)
                    .filter(|bit| mask & (1 << bit) != 0)
                    .map(|g| format!("g{g}"))
                    .collect();
                let groups: Vec<&str> = groups.iter().map(String::as_str).collect();
                AccountSpec::new(&format!("a{i}"), tier, &groups)
                    .with_priority(priority)
                    .with_limits(large, standard)
                    .with_active(active)
            })
            .collect()
    })
}

fn outcome() -> impl Strategy<Value = OutcomeKind> {
    prop_oneof![
        3 => Just(OutcomeKind::Success),
        3 => (prop::option::of(0u64..200_000), any::<bool>())
            .prop_map(|(reset_in, images_only)| OutcomeKind::RateLimited { reset_in, images_only }),
        1 => Just(OutcomeKind::AuthFailed),
        2 => any::<bool>().prop_map(|json| OutcomeKind::Forbidden { json }),
        3 => Just(OutcomeKind::Transient),
        1 => Just(OutcomeKind::Invalid),
    ]
}

pub fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => (0u8..4, any::<bool>(), prop::bool::weighted(0.8))
            .prop_map(|(group, large, image)| Op::Acquire { group, large, image }),
        3 => any::<usize>().prop_map(|pick| Op::Drop { pick }),
        1 => any::<usize>().prop_map(|pick| Op::Renew { pick }),
        3 => (any::<usize>(), outcome()).prop_map(|(account, outcome)| Op::Record { account, outcome }),
        1 => any::<usize>().prop_map(|account| Op::Clear { account }),
        1 => any::<usize>().prop_map(|account| Op::Toggle { account }),
        2 => prop_oneof![0u64..2_000, 0u64..90_000].prop_map(|millis| Op::Advance { millis }),
        1 => Just(Op::Snapshot),
    ]
}

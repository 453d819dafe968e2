//! State-machine test of the pool against an independent model.
//!
//! Random account sets in several groups, then random sequences of acquire, lease drop, renew,
//! outcome, operator actions, spec changes, time advance (which expires leases) and snapshots. After
//! every step the dispatcher must agree with the model: a grant goes to an eligible account of the
//! best (tier, priority) band with the least load, no grant happens only when nothing is eligible
//! (and the error says why), and load and cooldowns in the snapshot match.
//!
//! The same sequences run against the in-memory state and, with the `redis` feature, against
//! `RedisPoolState` on a real Redis (fewer cases: every step is a round trip).
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::disallowed_methods
)]

mod model;
#[cfg(feature = "redis")]
mod redis_support;

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use futures::executor::block_on;
use imagegate_dispatch::{
    AccountSpec, Clock, CooldownPolicy, DispatchConfig, DispatchRequest, Dispatcher, GroupId, Lease,
    ManualClock, MemoryPoolState, PoolError, PoolState, SizeClass, UnixMillis,
};
use model::{Model, Op, Verdict};
use proptest::prelude::*;

const TTL: Duration = Duration::from_secs(60);

struct Harness {
    pool: Dispatcher,
    clock: Arc<ManualClock>,
    specs: Vec<AccountSpec>,
    held: Vec<(Lease, usize)>,
    model: Model,
    /// The runtime a networked state needs; none for the in-memory state.
    runtime: Option<tokio::runtime::Runtime>,
}

/// Runs `future` to completion on `runtime`, or on the calling thread without one.
fn run<F: Future>(runtime: &Option<tokio::runtime::Runtime>, future: F) -> F::Output {
    match runtime {
        Some(runtime) => runtime.block_on(future),
        None => block_on(future),
    }
}

impl Harness {
    fn in_memory(specs: Vec<AccountSpec>, seed: u64) -> Self {
        let state = Arc::new(MemoryPoolState::with_seed(CooldownPolicy::default(), seed));
        Self::new(specs, state, None)
    }

    fn new(
        specs: Vec<AccountSpec>,
        state: Arc<dyn PoolState>,
        runtime: Option<tokio::runtime::Runtime>,
    ) -> Self {
        let clock = Arc::new(ManualClock::new(UnixMillis(1_000_000_000)));
        let config = DispatchConfig {
            max_wait: Duration::ZERO,
            lease_ttl: TTL,
            ..DispatchConfig::default()
        };
        let pool = Dispatcher::new(state, clock.clone(), config);
        pool.replace_accounts(specs.clone());
        let model = Model::new(specs.clone(), CooldownPolicy::default(), TTL);
        Self {
            pool,
            clock,
            specs,
            held: Vec::new(),
            model,
            runtime,
        }
    }

    fn step(&mut self, op: &Op) {
        let now = self.clock.now();
        match op {
            Op::Acquire { group, large, image } => {
                let class = if *large {
                    SizeClass::Large
                } else {
                    SizeClass::Standard
                };
                let group = GroupId::new(&format!("g{group}"));
                let request = DispatchRequest {
                    group: group.clone(),
                    class,
                    image: *image,
                    exclude: Vec::new(),
                };
                let result = run(&self.runtime, self.pool.try_acquire(&request));
                let verdict = self.model.acquire(&group, class, *image, now);
                match (result, verdict) {
                    (Ok(lease), Verdict::Grant(allowed)) => {
                        let index = self.model.index_of(lease.account());
                        assert!(
                            allowed.contains(&index),
                            "picked {} not among best {allowed:?}",
                            lease.account()
                        );
                        let model_lease = self.model.grant(index, class, now);
                        assert_eq!(lease.expires_at(), now.plus(TTL));
                        self.held.push((lease, model_lease));
                    }
                    (Err(PoolError::AllBusy { .. }), Verdict::Busy) => {}
                    (Err(PoolError::NoAccounts { .. }), Verdict::Unavailable) => {}
                    (Err(PoolError::AllCoolingDown { earliest_reset, .. }), Verdict::Cooling(expected)) => {
                        assert_eq!(earliest_reset, expected);
                    }
                    (result, verdict) => {
                        panic!(
                            "pool said {:?}, model said {verdict:?}",
                            result.map(|l| l.account().clone())
                        )
                    }
                }
            }
            Op::Drop { pick } => {
                if !self.held.is_empty() {
                    let (lease, model_lease) = self.held.swap_remove(pick % self.held.len());
                    drop(lease);
                    self.model.release(model_lease);
                }
            }
            Op::Renew { pick } => {
                if !self.held.is_empty() {
                    let len = self.held.len();
                    let (lease, model_lease) = &mut self.held[pick % len];
                    let expected = self.model.renew(*model_lease, now);
                    match (run(&self.runtime, lease.renew()), expected) {
                        (Ok(until), Some(expected)) => assert_eq!(until, expected),
                        (Err(PoolError::LeaseExpired), None) => {}
                        (got, expected) => panic!("renew: pool {got:?}, model {expected:?}"),
                    }
                }
            }
            Op::Record { account, outcome } => {
                let index = account % self.specs.len();
                let outcome = outcome.to_outcome(now);
                run(
                    &self.runtime,
                    self.pool.record_outcome(&self.specs[index].id, &outcome),
                )
                .unwrap();
                self.model.record(index, &outcome, now);
            }
            Op::Clear { account } => {
                let index = account % self.specs.len();
                run(&self.runtime, self.pool.clear_health(&self.specs[index].id)).unwrap();
                self.model.clear(index);
            }
            Op::Toggle { account } => {
                let index = account % self.specs.len();
                let spec = &mut self.specs[index];
                spec.active = !spec.active;
                self.pool.replace_accounts(self.specs.clone());
                self.model.set_active(index, self.specs[index].active);
            }
            Op::Advance { millis } => self.clock.advance(Duration::from_millis(*millis)),
            Op::Snapshot => self.check_snapshot(now),
        }
    }

    fn check_snapshot(&mut self, now: UnixMillis) {
        let snapshot = run(&self.runtime, self.pool.snapshot()).unwrap();
        self.model.purge(now);
        assert_eq!(snapshot.accounts.len(), self.specs.len());
        for account in &snapshot.accounts {
            let index = self.model.index_of(&account.id);
            let expected = self.model.view(index, now);
            assert!(account.in_flight.large <= account.limits.large, "{account:?}");
            assert!(
                account.in_flight.standard <= account.limits.standard,
                "{account:?}"
            );
            assert_eq!(
                (account.in_flight.large, account.in_flight.standard),
                expected.in_flight,
                "{}",
                account.id
            );
            assert_eq!(
                account.status == Default::default(),
                expected.usable,
                "{}",
                account.id
            );
            let mut cooldowns: Vec<_> = account.cooldowns.iter().map(|c| (c.scope, c.until)).collect();
            cooldowns.sort_by_key(|(scope, _)| *scope as u8);
            assert_eq!(cooldowns, expected.cooldowns, "{}", account.id);
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn pool_agrees_with_model(
        specs in model::specs(),
        ops in prop::collection::vec(model::op(), 1..80),
        seed in any::<u64>(),
    ) {
        let mut harness = Harness::in_memory(specs, seed);
        for op in &ops {
            harness.step(op);
        }
        harness.step(&Op::Snapshot);
    }
}

#[cfg(feature = "redis")]
proptest! {
    #![proptest_config(ProptestConfig { cases: 32, ..ProptestConfig::default() })]

    #[test]
    fn redis_pool_agrees_with_model(
        specs in model::specs(),
        ops in prop::collection::vec(model::op(), 1..80),
    ) {
        // Declared first, dropped last: the keys go once the harness is done.
        let prefix = redis_support::TestPrefix::new();
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        let state = {
            let _inside = runtime.enter();
            prefix.state()
        };
        let mut harness = Harness::new(specs, state, Some(runtime));
        for op in &ops {
            harness.step(op);
        }
        harness.step(&Op::Snapshot);
    }
}

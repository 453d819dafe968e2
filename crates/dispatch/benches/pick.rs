//! Pick + lease + release on pools of 10, 1,000 and 10,000 accounts (in-memory state).
//!
//! `idle`: every account free (the usual case: a pick stops at the first idle account of the best
//! band). `loaded`: every account already runs one standard request, so a pick compares the whole
//! best band to find the least loaded account.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::hint::black_box;
use std::sync::Arc;

use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use futures::executor::block_on;
use imagegate_dispatch::{
    AccountSpec, CooldownPolicy, DispatchConfig, DispatchRequest, Dispatcher, GroupId, Lease,
    MemoryPoolState, SizeClass, SystemClock, Tier,
};

const TIERS: [Tier; 4] = [Tier::Free, Tier::Plus, Tier::Team, Tier::Pro];

fn pool(accounts: usize) -> Dispatcher {
    let state = Arc::new(MemoryPoolState::with_seed(CooldownPolicy::default(), 1));
    let pool = Dispatcher::new(state, Arc::new(SystemClock), DispatchConfig::default());
    pool.replace_accounts((0..accounts).map(|i| {
        let tier = TIERS.get(i % 4).copied().unwrap_or(Tier::Free);
        let priority = i32::try_from((i / 4) % 4).unwrap_or(0);
        AccountSpec::new(&format!("acct-{i:05}"), tier, &["bench"]).with_priority(priority)
    }));
    pool
}

fn bench(c: &mut Criterion) {
    let request = DispatchRequest::image(&GroupId::new("bench"), SizeClass::Standard);
    let mut group = c.benchmark_group("pick_lease_release");
    for accounts in [10, 1_000, 10_000] {
        let idle = pool(accounts);
        group.bench_with_input(BenchmarkId::new("idle", accounts), &accounts, |b, _| {
            b.iter(|| drop(black_box(block_on(idle.try_acquire(&request)).unwrap())));
        });
        let loaded = pool(accounts);
        let _held: Vec<Lease> = (0..accounts)
            .map(|_| block_on(loaded.try_acquire(&request)).unwrap())
            .collect();
        group.bench_with_input(BenchmarkId::new("loaded", accounts), &accounts, |b, _| {
            b.iter(|| drop(black_box(block_on(loaded.try_acquire(&request)).unwrap())));
        });
    }
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);

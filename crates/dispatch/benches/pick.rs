//! Pick + lease + release on pools of 10, 1,000 and 10,000 accounts (in-memory state).
//!
//! `idle`: every account free (the usual case: a pick stops at the first idle account of the best
//! band). `loaded`: as many leases held as there are accounts. Picks fill the best band first
//! (least loaded within a band, bands in order), so with the default standard limit of 4 the held
//! leases fill the best quarter of the bands (four bands of 625 at 10,000 accounts) and every pick
//! has to get past 2,500 full accounts: the room index skips them without looking at them.
//! `one_band`: every account in one band, as many leases held as there are accounts, so nearly
//! every account is busy but none is full and a pick compares up to 32 of them.
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
    pool_of(accounts, |i| {
        let tier = TIERS.get(i % 4).copied().unwrap_or(Tier::Free);
        (tier, i32::try_from((i / 4) % 4).unwrap_or(0))
    })
}

fn one_band_pool(accounts: usize) -> Dispatcher {
    pool_of(accounts, |_| (Tier::Pro, 0))
}

fn pool_of(accounts: usize, rank: impl Fn(usize) -> (Tier, i32)) -> Dispatcher {
    let state = Arc::new(MemoryPoolState::with_seed(CooldownPolicy::default(), 1));
    let pool = Dispatcher::new(state, Arc::new(SystemClock), DispatchConfig::default());
    pool.replace_accounts((0..accounts).map(|i| {
        let (tier, priority) = rank(i);
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
        let one_band = one_band_pool(accounts);
        let _held_in_one_band: Vec<Lease> = (0..accounts)
            .map(|_| block_on(one_band.try_acquire(&request)).unwrap())
            .collect();
        group.bench_with_input(BenchmarkId::new("one_band", accounts), &accounts, |b, _| {
            b.iter(|| drop(black_box(block_on(one_band.try_acquire(&request)).unwrap())));
        });
    }
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);

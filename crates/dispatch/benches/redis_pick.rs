//! Acquire + release, outcome recording and key admission on a real Redis (loopback).
//!
//! `ping` is the bare round trip for reference. `acquire_release`: one `try_acquire` and the
//! lease's drop per iteration; the release rides along with the next acquisition, so each
//! iteration is one script call. `idle`: every account free; `loaded`: every account already
//! runs one standard request (of 4), so the script compares the whole best band (about 62
//! accounts of 1,000). Needs Redis at
//! `IMAGEGATE_TEST_REDIS_URL` (default `redis://127.0.0.1:6379`); keys use a random prefix that is
//! deleted afterwards.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::hint::black_box;
use std::sync::Arc;

use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use imagegate_dispatch::{
    AccountSpec, CooldownPolicy, DispatchConfig, DispatchRequest, Dispatcher, GroupId, KeyGate, KeyLimits,
    Lease, Outcome, RedisConfig, RedisKeyLimiter, RedisPoolState, SizeClass, SystemClock, Tier,
};
use tokio::runtime::Runtime;

const TIERS: [Tier; 4] = [Tier::Free, Tier::Plus, Tier::Team, Tier::Pro];

fn url() -> String {
    std::env::var("IMAGEGATE_TEST_REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1:6379".to_owned())
}

/// `accounts` accounts in 16 bands (4 tiers x 4 priorities), standard limit `standard`.
fn specs(accounts: usize, standard: u32) -> Vec<AccountSpec> {
    (0..accounts)
        .map(|i| {
            let tier = TIERS.get(i % 4).copied().unwrap_or(Tier::Free);
            let priority = i32::try_from((i / 4) % 4).unwrap_or(0);
            AccountSpec::new(&format!("acct-{i:05}"), tier, &["bench"])
                .with_priority(priority)
                .with_limits(1, standard)
        })
        .collect()
}

fn pool(runtime: &Runtime, config: &RedisConfig, accounts: usize) -> Dispatcher {
    let state = {
        let _inside = runtime.enter();
        Arc::new(RedisPoolState::new(config, CooldownPolicy::default()).unwrap())
    };
    let pool = Dispatcher::new(state, Arc::new(SystemClock), DispatchConfig::default());
    pool.replace_accounts(specs(accounts, 4));
    pool
}

fn bench(c: &mut Criterion) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let prefix = format!("imagegate-bench:{:016x}:", fastrand::u64(..));
    let config = RedisConfig::new(url()).with_prefix(prefix.clone());
    let request = DispatchRequest::image(&GroupId::new("bench"), SizeClass::Standard);

    let mut group = c.benchmark_group("redis");
    let raw = redis::Client::open(url().as_str()).unwrap();
    let mut multiplexed = runtime.block_on(raw.get_multiplexed_async_connection()).unwrap();
    group.bench_function("ping", |b| {
        b.iter(|| {
            let pong: String = runtime
                .block_on(redis::cmd("PING").query_async(&mut multiplexed))
                .unwrap();
            black_box(pong)
        });
    });

    for accounts in [10, 1_000] {
        let idle = pool(
            &runtime,
            &config.clone().with_prefix(format!("{prefix}idle{accounts}:")),
            accounts,
        );
        group.bench_with_input(
            BenchmarkId::new("acquire_release/idle", accounts),
            &accounts,
            |b, _| b.iter(|| drop(black_box(runtime.block_on(idle.try_acquire(&request)).unwrap()))),
        );
        let loaded = pool(
            &runtime,
            &config.clone().with_prefix(format!("{prefix}loaded{accounts}:")),
            accounts,
        );
        // One standard request on every account: fill with a limit of 1, then restore 4.
        loaded.replace_accounts(specs(accounts, 1));
        let _held: Vec<Lease> = (0..accounts)
            .map(|_| runtime.block_on(loaded.try_acquire(&request)).unwrap())
            .collect();
        loaded.replace_accounts(specs(accounts, 4));
        group.bench_with_input(
            BenchmarkId::new("acquire_release/loaded", accounts),
            &accounts,
            |b, _| b.iter(|| drop(black_box(runtime.block_on(loaded.try_acquire(&request)).unwrap()))),
        );
    }

    let outcomes = pool(&runtime, &config, 10);
    let account = "acct-00001".into();
    group.bench_function("record_outcome", |b| {
        b.iter(|| {
            runtime
                .block_on(outcomes.record_outcome(&account, &Outcome::Success))
                .unwrap()
        });
    });

    let limiter = {
        let _inside = runtime.enter();
        Arc::new(RedisKeyLimiter::new(&config).unwrap())
    };
    let gate = KeyGate::new(limiter, Arc::new(SystemClock));
    let limits = KeyLimits {
        max_concurrency: Some(8),
        requests_per_minute: None,
    };
    group.bench_function("key_admit_release", |b| {
        b.iter(|| {
            drop(black_box(
                runtime.block_on(gate.admit("bench-key", limits)).unwrap(),
            ))
        });
    });
    group.finish();

    // Remove the benchmark's keys.
    let mut connection = raw.get_connection().unwrap();
    let keys: Vec<String> = redis::cmd("KEYS")
        .arg(format!("{prefix}*"))
        .query(&mut connection)
        .unwrap();
    for chunk in keys.chunks(500) {
        let _: i64 = redis::cmd("DEL").arg(chunk).query(&mut connection).unwrap();
    }
}

criterion_group!(benches, bench);
criterion_main!(benches);

//! Checker speed on a 10,000-skill manifest: parse only, and the whole offline check.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use imagegate_manifest::{CheckOptions, check_bytes, parse, synthetic};

fn bench(c: &mut Criterion) {
    let text = synthetic::manifest(10_000);
    let options = CheckOptions::default();
    let mut group = c.benchmark_group("manifest-10k");
    group.throughput(Throughput::Bytes(text.len() as u64));
    group.sample_size(20);
    group.bench_function("parse", |b| {
        b.iter(|| parse::parse(std::hint::black_box(text.as_bytes())).unwrap())
    });
    group.bench_function("check", |b| {
        b.iter(|| {
            let report = check_bytes("bench.json", std::hint::black_box(text.as_bytes()), &options);
            assert!(report.findings.is_empty());
        })
    });
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);

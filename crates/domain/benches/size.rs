//! Size validation: parsing and checking a requested `size` (a valid standard size, the largest
//! valid size, and a size refused by the pixel-count rule).
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::hint::black_box;

use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use imagegate_domain::ImageSize;

fn bench(c: &mut Criterion) {
    let mut group = c.benchmark_group("size_validation");
    for input in ["1024x1024", "3840x2160", "512x512"] {
        group.bench_with_input(BenchmarkId::new("parse", input), input, |b, input| {
            b.iter(|| black_box(black_box(input).parse::<ImageSize>().is_ok()));
        });
    }
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);

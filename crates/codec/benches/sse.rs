//! SSE encoding of image stream events (a small completed event, a partial-image event carrying about
//! 1 MB of base64), and decoding such an event as it arrives from an upstream in 64 KiB chunks.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::hint::black_box;

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use imagegate_codec::sse::{SseDecoder, encode_event};
use serde_json::json;

fn event(b64_len: usize) -> serde_json::Value {
    json!({
        "type": "image_generation.partial_image",
        "b64_json": "A".repeat(b64_len),
        "created_at": 1_760_000_000,
        "size": "1024x1024",
        "quality": "low",
        "background": "opaque",
        "output_format": "png",
        "partial_image_index": 0,
    })
}

fn bench(c: &mut Criterion) {
    let mut group = c.benchmark_group("sse_encode");
    for (name, len) in [("1KiB", 1024), ("1MiB", 1024 * 1024)] {
        let data = event(len);
        group.throughput(Throughput::Bytes(len as u64));
        group.bench_with_input(BenchmarkId::new("event", name), &data, |b, data| {
            b.iter(|| black_box(encode_event("image_generation.partial_image", black_box(data))));
        });
    }
    group.finish();

    let mut group = c.benchmark_group("sse_decode");
    for (name, len) in [("1KiB", 1024), ("1MiB", 1024 * 1024)] {
        let frame = encode_event("image_generation.partial_image", &event(len));
        group.throughput(Throughput::Bytes(frame.len() as u64));
        group.bench_with_input(
            BenchmarkId::new("event_in_64KiB_chunks", name),
            &frame,
            |b, frame| {
                b.iter(|| {
                    let mut decoder = SseDecoder::new();
                    for chunk in frame.chunks(64 * 1024) {
                        decoder.push(black_box(chunk)).unwrap();
                    }
                    black_box(decoder.pop().unwrap())
                });
            },
        );
    }
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);

//! `/sim/stats`: request counts and concurrency per bearer token and per path.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::disallowed_methods
)]

mod common;

use axum::http::StatusCode;
use common::*;
use serde_json::json;

#[tokio::test]
async fn counts_requests_per_token_and_path_and_concurrency() {
    let (_, app) = app();
    let slow = |token: &str| {
        let request = post_json(
            "/v1/images/generations",
            Some(token),
            &generation("stats", json!({})),
        );
        with_header(request, "x-sim-latency-ms", "1500")
    };
    let answers = futures::future::join_all([
        send(&app, slow("sk-a")),
        send(&app, slow("sk-a")),
        send(&app, slow("sk-a")),
        send(&app, slow("sk-b")),
    ])
    .await;
    assert!(answers.iter().all(|a| a.status == StatusCode::OK));
    send(&app, get("/v1/models", Some("sk-b"))).await;

    let stats = send(&app, get("/sim/stats", None)).await.json();
    assert_eq!(stats["requests"], 5);
    assert_eq!(stats["in_flight"], 0);
    assert_eq!(stats["max_in_flight"], 4);
    assert_eq!(stats["by_path"]["/v1/images/generations"], 4);
    assert_eq!(stats["by_path"]["/v1/models"], 1);
    assert!(
        stats["by_path"].get("/sim/stats").is_none(),
        "admin calls are not counted"
    );
    let a = &stats["by_token"]["sk-a"];
    assert_eq!(
        (
            a["requests"].as_u64(),
            a["max_in_flight"].as_u64(),
            a["in_flight"].as_u64()
        ),
        (Some(3), Some(3), Some(0))
    );
    let b = &stats["by_token"]["sk-b"];
    assert_eq!(
        (b["requests"].as_u64(), b["max_in_flight"].as_u64()),
        (Some(2), Some(1))
    );
    assert_eq!(b["by_path"]["/v1/models"], 1);
    // Same prompt, size, quality and format: the image was rendered once.
    assert_eq!(stats["cache"]["misses"], 1);
    assert_eq!(stats["cache"]["hits"], 3);

    let reset = send(&app, post_json("/sim/stats/reset", None, &json!({})))
        .await
        .json();
    assert_eq!(reset["requests"], 0);
    assert_eq!(reset["by_token"], json!({}));
    assert_eq!(
        send(&app, get("/sim/stats", None)).await.json()["max_in_flight"],
        0
    );
}

#[tokio::test]
async fn a_stream_stays_in_flight_until_its_body_ends() {
    use futures::StreamExt as _;
    use tower::ServiceExt as _;
    let (state, app) = app();
    let body = generation("stats stream", json!({"stream": true, "partial_images": 1}));
    let request = with_header(
        post_json("/v1/images/generations", Some("sk-s"), &body),
        "x-sim-latency-ms",
        "2000",
    );
    let response = app.clone().oneshot(request).await.unwrap();
    let mut frames = response.into_body().into_data_stream();
    let first = frames.next().await.unwrap().unwrap();
    assert!(first.starts_with(b"event: image_generation.partial_image"));
    assert_eq!(state.stats_snapshot().by_token["sk-s"].in_flight, 1);
    drop(frames); // the client goes away mid-stream
    let stats = state.stats_snapshot();
    assert_eq!((stats.in_flight, stats.by_token["sk-s"].in_flight), (0, 0));
    assert_eq!(stats.requests_for("sk-s"), 1);
}

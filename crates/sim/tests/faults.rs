//! Every fault kind, injected by header, by the admin script and at random.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::disallowed_methods
)]

mod common;

use std::time::{Duration, Instant};

use axum::http::StatusCode;
use common::*;
use imagegate_sim::{FaultKind, SimConfig};
use serde_json::{Value, json};

async fn with_fault(fault: &str, body: &Value, path: &str) -> Answer {
    let (_, app) = app();
    send(
        &app,
        with_header(post_json(path, Some(TOKEN), body), "x-sim-fault", fault),
    )
    .await
}

fn body() -> Value {
    generation("faulty", json!({}))
}

#[tokio::test]
async fn usage_limit_has_the_reset_in_body_and_codex_headers() {
    let (_, app) = app();
    let request = with_header(
        post_json("/v1/images/generations", Some(TOKEN), &body()),
        "x-sim-fault",
        "429",
    );
    let answer = send(&app, with_header(request, "x-sim-resets-in-seconds", "30")).await;
    assert_eq!(answer.status, StatusCode::TOO_MANY_REQUESTS);
    let error = &answer.json()["error"];
    assert_eq!(error["type"], "usage_limit_reached");
    assert_eq!(error["resets_in_seconds"], 30);
    let now = imagegate_sim::simulator::unix_now();
    let resets_at = error["resets_at"].as_u64().unwrap();
    assert!((now + 29..=now + 31).contains(&resets_at));
    assert_eq!(answer.header("x-codex-primary-reset-after-seconds"), Some("30"));
    assert_eq!(answer.header("x-codex-primary-used-percent"), Some("100"));
}

#[tokio::test]
async fn rate_limit_and_server_errors() {
    let answer = with_fault("rate_limit", &body(), "/v1/images/generations").await;
    assert_eq!(answer.status, StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(answer.json()["error"]["code"], "rate_limit_exceeded");
    assert_eq!(answer.header("retry-after"), Some("20"));
    for (fault, status) in [
        ("500", StatusCode::INTERNAL_SERVER_ERROR),
        ("502", StatusCode::BAD_GATEWAY),
        ("503", StatusCode::SERVICE_UNAVAILABLE),
    ] {
        let answer = with_fault(fault, &body(), "/v1/responses").await;
        assert_eq!(answer.status, status);
        assert_eq!(answer.json()["error"]["type"], "server_error");
    }
    let answer = with_fault("401", &body(), "/v1/images/edits").await;
    assert_eq!(answer.status, StatusCode::UNAUTHORIZED);
    assert_eq!(answer.json()["error"]["code"], "invalid_api_key");
    assert!(!answer.text().contains(TOKEN), "the key is masked");
}

#[tokio::test]
async fn refusal_is_a_moderation_block() {
    let answer = with_fault("refusal", &body(), "/v1/images/generations").await;
    assert_eq!(answer.status, StatusCode::BAD_REQUEST);
    let error = &answer.json()["error"];
    assert_eq!(error["type"], "image_generation_user_error");
    assert_eq!(error["code"], "moderation_blocked");
    assert!(error["param"].is_null());
    assert!(
        error["message"]
            .as_str()
            .unwrap()
            .contains(answer.header("x-request-id").unwrap())
    );
}

#[tokio::test]
async fn html_pages_come_as_text_html() {
    for (fault, status, marker) in [
        ("html_403", StatusCode::FORBIDDEN, "Cloudflare"),
        ("html_502", StatusCode::BAD_GATEWAY, "Bad gateway"),
    ] {
        let answer = with_fault(fault, &body(), "/v1/images/generations").await;
        assert_eq!(answer.status, status);
        assert!(answer.header("content-type").unwrap().starts_with("text/html"));
        assert!(answer.text().starts_with("<!DOCTYPE html>") && answer.text().contains(marker));
        assert!(serde_json::from_slice::<Value>(&answer.body).is_err());
    }
}

#[tokio::test]
async fn no_image_answers_200_without_an_image() {
    let json = with_fault("no_image", &body(), "/v1/images/generations")
        .await
        .json();
    assert_eq!(json["data"], json!([]));
    assert!(json["usage"].is_object());
    let stream = generation("faulty", json!({"stream": true, "partial_images": 1}));
    let events = with_fault("no_image", &stream, "/v1/images/generations")
        .await
        .events();
    assert_eq!(events.len(), 1, "a partial image but no completed event");
    assert_eq!(events[0].0, "image_generation.partial_image");
    let responses = json!({"model": "gpt-5", "input": "x", "tools": [{"type": "image_generation"}]});
    let answer = with_fault("no_image", &responses, "/v1/responses").await;
    assert_eq!(answer.status, StatusCode::OK);
    let output = answer.json()["output"].clone();
    assert_eq!(output.as_array().unwrap().len(), 1);
    assert_eq!(output[0]["type"], "message");
}

#[tokio::test]
async fn stall_holds_the_request_then_answers() {
    let (_, app) = app();
    let request = || {
        let request = post_json("/v1/images/generations", Some(TOKEN), &body());
        with_header(request, "x-sim-fault", "stall")
    };
    // With the default stall (10 minutes) nothing arrives in time.
    let held = tokio::time::timeout(Duration::from_millis(300), send(&app, request())).await;
    assert!(held.is_err(), "a stalled request answered");
    let started = Instant::now();
    let answer = send(&app, with_header(request(), "x-sim-stall-ms", "400")).await;
    assert!(started.elapsed() >= Duration::from_millis(400));
    assert_eq!(answer.status, StatusCode::OK);
}

#[tokio::test]
async fn stall_mid_stream_sends_the_first_event_then_waits() {
    use futures::StreamExt as _;
    use tower::ServiceExt as _;
    let (_, app) = app();
    let body = generation("faulty", json!({"stream": true, "partial_images": 2}));
    let request = with_header(
        post_json("/v1/images/generations", Some(TOKEN), &body),
        "x-sim-fault",
        "stall_mid_stream",
    );
    let response = app.clone().oneshot(request).await.unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    let mut frames = response.into_body().into_data_stream();
    let first = tokio::time::timeout(Duration::from_secs(30), frames.next())
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert!(first.starts_with(b"event: image_generation.partial_image\n"));
    let second = tokio::time::timeout(Duration::from_millis(300), frames.next()).await;
    assert!(second.is_err(), "the stream did not stall after its first event");

    // A non-streamed answer stalls a few bytes into the first image's base64.
    let request = with_header(
        post_json(
            "/v1/images/generations",
            Some(TOKEN),
            &generation("faulty", json!({})),
        ),
        "x-sim-fault",
        "stall_body",
    );
    let response = app.clone().oneshot(request).await.unwrap();
    let mut chunks = response.into_body().into_data_stream();
    let head = tokio::time::timeout(Duration::from_secs(30), chunks.next())
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    let head = std::str::from_utf8(&head).unwrap();
    let (before, image_start) = head
        .split_once("\"b64_json\":\"")
        .expect("the head reaches into the first image");
    assert!(before.starts_with('{'), "{before}");
    assert!(
        !image_start.is_empty() && !image_start.contains('"'),
        "{image_start}"
    );
    assert!(
        tokio::time::timeout(Duration::from_millis(300), chunks.next())
            .await
            .is_err()
    );
}

#[tokio::test]
async fn scripted_faults_count_down_per_key() {
    let (state, app) = app();
    let script = json!({"key": "sk-a", "fault": "429", "times": 2, "resets_in_seconds": 30});
    let added = send(&app, post_json("/sim/faults", None, &script)).await;
    assert_eq!(added.status, StatusCode::OK);
    assert_eq!(added.json()["rules"][0]["times"], 2);
    let generate = |token: &str| post_json("/v1/images/generations", Some(token), &body());
    assert_eq!(send(&app, generate("sk-b")).await.status, StatusCode::OK);
    for _ in 0..2 {
        let answer = send(&app, generate("sk-a")).await;
        assert_eq!(answer.status, StatusCode::TOO_MANY_REQUESTS);
        assert_eq!(answer.json()["error"]["resets_in_seconds"], 30);
    }
    assert_eq!(send(&app, generate("sk-a")).await.status, StatusCode::OK);
    assert_eq!(
        send(&app, get("/sim/faults", None)).await.json()["rules"],
        json!([])
    );

    // A rule for every key applies until deleted; /v1/models is not an image path.
    let script = json!([{"key": null, "fault": "503"}]);
    assert_eq!(
        send(&app, post_json("/sim/faults", None, &script)).await.status,
        StatusCode::OK
    );
    assert_eq!(
        send(&app, get("/v1/models", Some("sk-c"))).await.status,
        StatusCode::OK
    );
    assert_eq!(
        send(&app, generate("sk-c")).await.status,
        StatusCode::SERVICE_UNAVAILABLE
    );
    assert_eq!(
        send(&app, generate("sk-d")).await.status,
        StatusCode::SERVICE_UNAVAILABLE
    );
    let cleared = send(
        &app,
        axum::http::Request::delete("/sim/faults")
            .body(axum::body::Body::empty())
            .unwrap(),
    )
    .await;
    assert_eq!(cleared.status, StatusCode::OK);
    assert_eq!(send(&app, generate("sk-c")).await.status, StatusCode::OK);
    let faults = state.stats_snapshot().faults;
    assert_eq!((faults["usage_limit"], faults["503"]), (2, 2));
}

#[tokio::test]
async fn bad_fault_names_are_refused() {
    let answer = with_fault("teapot", &body(), "/v1/images/generations").await;
    assert_eq!(answer.status, StatusCode::BAD_REQUEST);
    assert_eq!(answer.json()["error"]["param"], "x-sim-fault");
    let (_, app) = app();
    let answer = send(&app, post_json("/sim/faults", None, &json!({"fault": "teapot"}))).await;
    assert_eq!(answer.status, StatusCode::BAD_REQUEST);
    assert!(
        answer.json()["error"]["message"]
            .as_str()
            .unwrap()
            .contains("unknown fault")
    );
}

#[tokio::test]
async fn random_faults_follow_the_configured_rate() {
    let config = SimConfig {
        fault_rate: 1.0,
        random_faults: vec![FaultKind::BadGateway502],
        ..SimConfig::default()
    };
    let (_, app) = app_with(config);
    for _ in 0..3 {
        let answer = send(
            &app,
            post_json(
                "/v1/responses",
                Some(TOKEN),
                &json!({"model": "gpt-5", "input": "x"}),
            ),
        )
        .await;
        assert_eq!(answer.status, StatusCode::BAD_GATEWAY);
    }
    assert_eq!(
        send(&app, get("/v1/models", Some(TOKEN))).await.status,
        StatusCode::OK
    );
}

#[tokio::test]
async fn rate_limit_in_stream_fails_a_started_responses_stream() {
    let request = json!({"model": "gpt-5", "input": "draw", "stream": true,
        "tools": [{"type": "image_generation"}]});
    let answer = with_fault("rate_limit_in_stream", &request, "/v1/responses").await;
    assert_eq!(answer.status, StatusCode::OK);
    let events = answer.events();
    let names: Vec<&str> = events.iter().map(|(name, _)| name.as_str()).collect();
    // The prelude (up to the image call's `generating`), then the failure: no image data.
    assert_eq!(
        names,
        [
            "response.created",
            "response.in_progress",
            "response.output_item.added",
            "response.image_generation_call.in_progress",
            "response.image_generation_call.generating",
            "response.failed"
        ]
    );
    let failed = &events[5].1;
    assert_eq!(failed["sequence_number"], 5);
    assert_eq!(failed["response"]["status"], "failed");
    assert_eq!(failed["response"]["error"]["code"], "rate_limit_exceeded");
    let message = failed["response"]["error"]["message"].as_str().unwrap();
    assert!(message.contains("Please try again in"), "{message}");

    // Other requests are answered normally.
    let answer = with_fault("rate_limit_in_stream", &body(), "/v1/images/generations").await;
    assert_eq!(answer.status, StatusCode::OK);
}

//! End to end: the opt-in keepalive of non-streaming answers (`x-imagegate-keepalive`, or
//! `[timeouts] json_keepalive_secs`), against the real binaries.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::disallowed_methods
)]

mod common;

use common::{leave_after_first_bytes, setup, setup_custom, setup_with_config};
use futures::StreamExt as _;
use serde_json::{Value, json};

const HEADER: &str = "x-imagegate-keepalive";

fn small_generation() -> Value {
    json!({"model": "gpt-image-2", "prompt": "x", "size": "1024x1024", "quality": "low"})
}

/// A small generation, with `keepalive` as the request's keepalive header when given.
async fn generate(s: &common::Setup, keepalive: Option<&str>) -> reqwest::Response {
    let request = s.post_json("/images/generations", small_generation());
    let request = match keepalive {
        Some(value) => request.header(HEADER, value),
        None => request,
    };
    request.send().await.unwrap()
}

/// The body's pieces as they came.
async fn pieces(response: reqwest::Response) -> Vec<bytes::Bytes> {
    response
        .bytes_stream()
        .map(|piece| piece.unwrap())
        .collect()
        .await
}

/// The leading newlines of `body`, and the JSON document after them.
fn split(body: &[u8]) -> (usize, Value) {
    let newlines = body.iter().take_while(|b| **b == b'\n').count();
    let document = serde_json::from_slice(&body[newlines..]).unwrap_or_else(|err| {
        panic!(
            "{err}: {:?}",
            String::from_utf8_lossy(&body[..body.len().min(300)])
        )
    });
    (newlines, document)
}

#[tokio::test]
async fn a_slow_answer_sends_newlines_while_it_waits_and_then_its_json() {
    let s = setup();
    s.sim_fault(json!({"fault": "stall", "stall_ms": 2500})).await;
    let response = generate(&s, Some("1")).await;
    assert_eq!(response.status(), 200);
    assert_eq!(response.headers()[HEADER], "1");
    assert_eq!(response.headers()["content-type"], "application/json");
    assert!(response.headers().get("content-length").is_none());
    let pieces = pieces(response).await;
    // The first newline went out alone, with the headers, long before the image.
    assert_eq!(&pieces[0][..], b"\n");
    let body = pieces.concat();
    let (newlines, document) = split(&body);
    assert!(newlines >= 2, "{newlines} newlines in 2.5 s at one a second");
    assert!(document["data"][0]["b64_json"].is_string());
    let records = s.usage_at_least(1).await;
    assert_eq!(records[0]["status"], 200, "{:?}", records[0]);
    assert_eq!(records[0]["images"], 1, "{:?}", records[0]);
    assert!(kept_alive(&records[0]), "{:?}", records[0]);
}

/// Whether a usage record notes that the keepalive answered its client 200.
fn kept_alive(record: &Value) -> bool {
    record["fallback_note"]
        .as_str()
        .is_some_and(|note| note.contains("keepalive"))
}

#[tokio::test]
async fn an_answer_ready_within_the_interval_is_sent_as_it_is() {
    let s = setup();
    let response = generate(&s, Some("30")).await;
    assert_eq!(response.status(), 200);
    assert!(response.headers().get(HEADER).is_none());
    assert!(response.headers().get("content-length").is_some());
    let body = response.bytes().await.unwrap();
    assert_eq!(body.first(), Some(&b'{'));
    let records = s.usage_at_least(1).await;
    assert!(!kept_alive(&records[0]), "{:?}", records[0]);
}

#[tokio::test]
async fn a_failure_after_the_first_newline_is_an_error_document_under_200() {
    let s = setup();
    s.sim_fault(json!({"fault": "502", "delay_ms": 2500})).await;
    let response = generate(&s, Some("1")).await;
    assert_eq!(response.status(), 200);
    let body = response.bytes().await.unwrap();
    let (newlines, document) = split(&body);
    assert!(newlines >= 2, "{newlines}");
    let error = &document["error"];
    assert_eq!(error["code"], "upstream_request_failed", "{document}");
    assert_eq!(error["type"], "upstream_error", "{document}");
    assert!(document.get("data").is_none(), "{document}");
    // The record keeps the real status.
    let records = s.usage_at_least(1).await;
    assert_eq!(records[0]["status"], 502, "{:?}", records[0]);
    assert_eq!(records[0]["error_code"], "upstream_request_failed");
    // ... and says what the client got instead, as does /metrics.
    assert!(kept_alive(&records[0]), "{:?}", records[0]);
    let metrics = s.metrics().await;
    let counted = "imagegate_json_keepalive_answers_total{endpoint=\"/v1/images/generations\"} 1";
    assert!(metrics.contains(counted), "{metrics}");
}

#[tokio::test]
async fn the_gateway_setting_applies_to_every_request_and_the_header_can_turn_it_off() {
    let s = setup_with_config("[timeouts]\njson_keepalive_secs = 1\n");
    s.sim_fault(json!({"fault": "stall", "stall_ms": 2000, "times": 2}))
        .await;
    let kept = generate(&s, None).await;
    assert_eq!(kept.headers()[HEADER], "1");
    let body = kept.bytes().await.unwrap();
    assert!(split(&body).0 >= 1);
    let plain = generate(&s, Some("0")).await;
    assert_eq!(plain.status(), 200);
    assert!(plain.headers().get(HEADER).is_none());
    let body = plain.bytes().await.unwrap();
    assert_eq!(body.first(), Some(&b'{'));
    // A stream keeps its own keepalive (SSE comments): the setting does not touch it.
    let stream = s
        .post_json(
            "/images/generations",
            json!({"model": "gpt-image-2", "prompt": "x", "size": "1024x1024", "stream": true}),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(stream.headers()["content-type"], "text/event-stream");
    assert!(stream.headers().get(HEADER).is_none());
}

#[tokio::test]
async fn a_header_that_is_no_number_of_seconds_is_refused_before_the_upstream_is_called() {
    let s = setup();
    let response = generate(&s, Some("soon")).await;
    assert_eq!(response.status(), 400);
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["error"]["type"], "invalid_request_error", "{body}");
    assert_eq!(body["error"]["param"], HEADER, "{body}");
    assert_eq!(s.sim_stats().await["requests"], 0);
}

#[tokio::test]
async fn a_client_that_leaves_during_the_newlines_is_recorded_with_its_account() {
    let s = setup();
    s.sim_fault(json!({"fault": "stall", "stall_ms": 3000})).await;
    let response = generate(&s, Some("1")).await;
    assert_eq!(response.status(), 200);
    leave_after_first_bytes(response).await;
    let records = s.usage_at_least(1).await;
    assert_eq!(records[0]["status"], 499, "{:?}", records[0]);
    assert!(records[0]["account_id"].is_i64(), "{:?}", records[0]);
}

#[tokio::test]
async fn responses_and_edits_get_the_keepalive_too() {
    let s = setup_custom(&["--latency-ms", "2500"], &[("acct-a", &["--tier", "pro"])], &[]);
    let tool = json!([{"type": "image_generation", "size": "1024x1024", "quality": "low"}]);
    let response = s
        .post_json(
            "/responses",
            json!({"model": "gpt-5", "input": "draw a fox", "tools": tool}),
        )
        .header(HEADER, "1")
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(response.headers()[HEADER], "1");
    let (newlines, document) = split(&response.bytes().await.unwrap());
    assert!(newlines >= 2, "{newlines}");
    assert_eq!(document["object"], "response", "{}", document["error"]);

    let form = reqwest::multipart::Form::new()
        .text("model", "gpt-image-2")
        .text("prompt", "add a hat")
        .text("size", "1024x1024")
        .text("quality", "low")
        .part(
            "image",
            reqwest::multipart::Part::bytes(imagegate_e2e::png_rgb(64, 64))
                .file_name("a.png")
                .mime_str("image/png")
                .unwrap(),
        );
    let response = s
        .client
        .post(s.gateway.v1("/images/edits"))
        .bearer_auth(&s.key)
        .header(HEADER, "1")
        .multipart(form)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(response.headers()[HEADER], "1");
    let (newlines, document) = split(&response.bytes().await.unwrap());
    assert!(newlines >= 2, "{newlines}");
    assert!(
        document["data"][0]["b64_json"].is_string(),
        "{}",
        document["error"]
    );
}

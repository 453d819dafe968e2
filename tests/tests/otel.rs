//! End to end: with the `otel` feature and an OTLP endpoint in the environment, the real gateway
//! exports its request spans, and they carry the request id the client got.
//!
//! Runs only with this crate's `otel` feature (`cargo xtask test` enables it together with
//! `imagegate/otel`, so the spawned binary can export).

#![cfg(feature = "otel")]
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::disallowed_methods
)]

mod common;

use std::time::Duration;

use common::add_account;
use imagegate_e2e::{Gateway, Sim, admin};
use serde_json::json;
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

#[tokio::test]
async fn request_spans_reach_the_otlp_collector_with_their_request_id() {
    let collector = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v1/traces"))
        .respond_with(ResponseTemplate::new(200))
        .mount(&collector)
        .await;
    let dir = tempfile::tempdir().unwrap();
    let sim = Sim::spawn(&[]);
    admin(dir.path(), &["users", "add", "alice"]);
    add_account(dir.path(), &sim, "acct-a", &["--tier", "pro"]);
    let key = admin(
        dir.path(),
        &["keys", "create", "--user", "alice", "--name", "otel"],
    )
    .trim()
    .to_owned();
    let endpoint = format!("{}/v1/traces", collector.uri());
    let mut gateway = Gateway::spawn_with_env(
        dir.path(),
        &[],
        &[
            ("IMAGEGATE_LOG", "info"),
            ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", &endpoint),
            ("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf"),
        ],
    );

    let response = reqwest::Client::new()
        .post(gateway.v1("/images/generations"))
        .bearer_auth(&key)
        .json(
            &json!({"model": "gpt-image-2", "prompt": "a lighthouse", "size": "1024x1024", "quality": "low"}),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let request_id = response.headers()["x-request-id"].to_str().unwrap().to_owned();
    response.bytes().await.unwrap();
    // A clean stop flushes the batch exporter.
    assert!(gateway.stop(), "the gateway exits cleanly");

    let mut exported = Vec::new();
    for _ in 0..50 {
        exported = collector.received_requests().await.unwrap_or_default();
        if !exported.is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(!exported.is_empty(), "no OTLP export reached the collector");
    let carries_id = exported.iter().any(|request| {
        request.url.path() == "/v1/traces"
            && request
                .body
                .windows(request_id.len())
                .any(|window| window == request_id.as_bytes())
    });
    assert!(
        carries_id,
        "no exported span carries request id {request_id} ({} exports)",
        exported.len()
    );
}

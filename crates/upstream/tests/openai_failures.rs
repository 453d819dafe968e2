//! How the OpenAI transport classifies what goes wrong, end to end against a mock upstream.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::disallowed_methods
)]

mod common;

use std::time::Duration;

use common::*;
use imagegate_upstream::{
    AccountKind, Failure, FailureKind, HttpUpstream, Upstream, UpstreamCall, UpstreamConfig,
};
use serde_json::json;
use wiremock::matchers::path;
use wiremock::{Mock, MockServer, ResponseTemplate};

async fn failure_for(template: ResponseTemplate) -> Failure {
    let server = MockServer::start().await;
    Mock::given(path("/v1/images/generations"))
        .respond_with(template)
        .mount(&server)
        .await;
    generate(&server, &generation(prompt_only("a cat")))
        .await
        .unwrap_err()
}

fn error_json(status: u16, message: &str, error_type: &str, code: Option<&str>) -> ResponseTemplate {
    let body = json!({"error": {"message": message, "type": error_type, "param": null, "code": code}});
    ResponseTemplate::new(status).set_body_json(body)
}

/// Asserts a rate limit whose reset is `expected_in_ms` after the call (within the call's duration).
async fn assert_resets_in(template: ResponseTemplate, expected_in_ms: u64) {
    let before = now_ms();
    let failure = failure_for(template).await;
    let after = now_ms();
    let FailureKind::RateLimited {
        reset_at_unix_ms: Some(reset),
        ..
    } = failure.kind
    else {
        panic!("expected a rate limit with a reset, got {failure:?}");
    };
    assert!(
        (before + expected_in_ms..=after + expected_in_ms).contains(&reset),
        "reset {reset} not within [{}, {}]",
        before + expected_in_ms,
        after + expected_in_ms
    );
    assert_eq!(failure.status, Some(429));
    assert_eq!(failure.client_error().code(), Some("usage_limit_reached"));
}

#[tokio::test]
async fn rate_limit_reset_forms() {
    let limited = |body: serde_json::Value| ResponseTemplate::new(429).set_body_json(body);
    let in_1h = now_ms() / 1000 + 3600;
    let failure = failure_for(limited(
        json!({"error": {"type": "usage_limit_reached", "message": "limit", "resets_at": in_1h}}),
    ))
    .await;
    assert_eq!(failure.reset_at_unix_ms(), Some(in_1h * 1000));

    assert_resets_in(
        limited(json!({"error": {"type": "usage_limit_reached", "resets_in_seconds": 120}})),
        120_000,
    )
    .await;
    let plain = error_json(429, "Rate limit reached", "requests", Some("rate_limit_exceeded"));
    assert_resets_in(plain.clone().insert_header("retry-after-ms", "2500"), 2_500).await;
    assert_resets_in(plain.clone().insert_header("retry-after", "7"), 7_000).await;
    assert_resets_in(
        plain
            .clone()
            .insert_header("x-codex-primary-used-percent", "100")
            .insert_header("x-codex-primary-reset-after-seconds", "300")
            .insert_header("x-codex-secondary-used-percent", "12")
            .insert_header("x-codex-secondary-reset-after-seconds", "600000"),
        300_000,
    )
    .await;

    // An HTTP date a whole number of seconds ahead (HTTP dates have one-second resolution).
    let at_s = now_ms() / 1000 + 90;
    let date = httpdate_for(at_s);
    let failure = failure_for(plain.insert_header("retry-after", date.as_str())).await;
    assert_eq!(failure.reset_at_unix_ms(), Some(at_s * 1000));
}

fn httpdate_for(unix_s: u64) -> String {
    let time = std::time::UNIX_EPOCH + Duration::from_secs(unix_s);
    httpdate::fmt_http_date(time)
}

#[tokio::test]
async fn insufficient_quota_and_image_limits() {
    let failure = failure_for(error_json(
        429,
        "You exceeded your current quota.",
        "insufficient_quota",
        Some("insufficient_quota"),
    ))
    .await;
    assert_eq!(
        failure.kind,
        FailureKind::RateLimited {
            reset_at_unix_ms: None,
            images_only: false
        }
    );
    let failure = failure_for(error_json(
        429,
        "Rate limit reached for gpt-image-2 on images per min (IPM): Limit 5, Used 5, Requested 1.",
        "images",
        Some("rate_limit_exceeded"),
    ))
    .await;
    assert!(
        matches!(
            failure.kind,
            FailureKind::RateLimited {
                images_only: true,
                ..
            }
        ),
        "{failure:?}"
    );
}

#[tokio::test]
async fn unauthorized_and_forbidden() {
    let failure = failure_for(error_json(
        401,
        "Incorrect API key provided: sk-tes***6789.",
        "invalid_request_error",
        Some("invalid_api_key"),
    ))
    .await;
    assert_eq!(
        (failure.kind, failure.status),
        (FailureKind::Unauthorized, Some(401))
    );
    assert!(!failure.client_error().message.contains("sk-"));

    let failure = failure_for(error_json(
        403,
        "You are not allowed to use this model.",
        "invalid_request_error",
        None,
    ))
    .await;
    assert_eq!(failure.kind, FailureKind::Forbidden { json_body: true });
    let page = "<!DOCTYPE html><html><head><title>Just a moment...</title></head><body>cf</body></html>";
    let failure = failure_for(ResponseTemplate::new(403).set_body_raw(page, "text/html")).await;
    assert_eq!(failure.kind, FailureKind::Forbidden { json_body: false });
}

#[tokio::test]
async fn moderation_is_passed_through_with_the_upstream_message() {
    let message =
        "Your request was rejected by the safety system. If you believe this is an error, contact us.";
    let failure = failure_for(error_json(
        400,
        message,
        "image_generation_user_error",
        Some("moderation_blocked"),
    ))
    .await;
    assert_eq!(failure.kind, FailureKind::Refused);
    let shown = failure.client_error();
    assert_eq!(shown.status(), 502);
    assert_eq!(
        shown.message,
        format!("Upstream request failed: the content was refused. {message}")
    );
    assert_eq!(shown.should_retry(), Some(false));
    assert_eq!(shown.code(), Some("moderation_blocked"));
    assert_eq!(shown.error_type(), "image_generation_user_error");
}

#[tokio::test]
async fn other_4xx_are_invalid_passthrough() {
    let body = json!({"error": {"message": "Invalid value: 'x'.", "type": "invalid_request_error", "param": "quality", "code": "invalid_value"}});
    let failure = failure_for(ResponseTemplate::new(400).set_body_json(body)).await;
    assert_eq!(failure.kind, FailureKind::Invalid);
    let shown = failure.client_error();
    assert_eq!(
        (shown.status(), shown.message.as_str(), shown.param.as_deref()),
        (400, "Invalid value: 'x'.", Some("quality"))
    );
}

#[tokio::test]
async fn model_not_found_is_model_unsupported() {
    let failure = failure_for(error_json(
        404,
        "The model `gpt-image-2-2026-04-21` does not exist or you do not have access to it.",
        "invalid_request_error",
        Some("model_not_found"),
    ))
    .await;
    assert_eq!(failure.kind, FailureKind::ModelUnsupported);
}

#[tokio::test]
async fn server_errors_and_html_pages_are_transient() {
    for status in [500, 502, 503, 504] {
        let failure = failure_for(error_json(
            status,
            "The server had an error.",
            "server_error",
            None,
        ))
        .await;
        assert_eq!(
            (failure.kind, failure.status),
            (FailureKind::Transient, Some(status))
        );
        let shown = failure.client_error();
        assert_eq!(shown.status(), 502);
        assert!(
            shown
                .message
                .starts_with("Upstream request failed: the upstream answered HTTP"),
            "{}",
            shown.message
        );
    }
    let page = "<html><head><title>502 Bad Gateway</title></head><body><center>nginx</center></body></html>";
    let failure = failure_for(ResponseTemplate::new(502).set_body_raw(page, "text/html")).await;
    assert_eq!(failure.kind, FailureKind::Transient);
    assert_eq!(
        failure.message,
        "the upstream answered HTTP 502 with an HTML page"
    );
}

#[tokio::test]
async fn success_without_an_image_is_no_image() {
    let body = json!({"created": 1766000000, "data": [], "usage": {"input_tokens": 1}});
    let failure = failure_for(ResponseTemplate::new(200).set_body_json(body)).await;
    assert_eq!(failure.kind, FailureKind::NoImage);
    assert_eq!(failure.client_error().status(), 502);
    let failure = failure_for(ResponseTemplate::new(200).set_body_raw("<html>ok</html>", "text/html")).await;
    assert_eq!(failure.kind, FailureKind::Protocol);
}

#[tokio::test]
async fn connection_refused_is_transient() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let server = MockServer::start().await;
    let mut target = target(&server, AccountKind::OpenAi);
    target.base_url = format!("http://127.0.0.1:{port}/v1");
    let params = generation(prompt_only("a cat"));
    let failure = upstream()
        .call(&target, UpstreamCall::Generate { params: &params }, DEADLINE)
        .await
        .unwrap_err();
    assert_eq!(failure.kind, FailureKind::Transient);
    assert!(
        failure.message.starts_with("could not connect to the upstream"),
        "{}",
        failure.message
    );
    assert!(!failure.message.contains(KEY));
}

#[tokio::test]
async fn a_slow_answer_past_the_deadline_is_a_timeout() {
    let server = MockServer::start().await;
    Mock::given(path("/v1/images/generations"))
        .respond_with(
            ResponseTemplate::new(200)
                .set_body_raw(image_answer(), "application/json")
                .set_delay(Duration::from_secs(5)),
        )
        .mount(&server)
        .await;
    let params = generation(prompt_only("a cat"));
    let started = std::time::Instant::now();
    let failure = upstream()
        .call(
            &target(&server, AccountKind::OpenAi),
            UpstreamCall::Generate { params: &params },
            Duration::from_millis(300),
        )
        .await
        .unwrap_err();
    assert_eq!(failure.kind, FailureKind::Timeout);
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "gave up at the deadline, not after the answer"
    );
    assert_eq!(failure.client_error().status(), 504);
}

#[tokio::test]
async fn a_body_over_the_limit_is_refused() {
    let server = MockServer::start().await;
    Mock::given(path("/v1/images/generations"))
        .respond_with(ResponseTemplate::new(200).set_body_raw(image_answer(), "application/json"))
        .mount(&server)
        .await;
    let small = HttpUpstream::new(UpstreamConfig {
        max_body_bytes: 64,
        ..UpstreamConfig::default()
    })
    .unwrap();
    let params = generation(prompt_only("a cat"));
    let failure = small
        .call(
            &target(&server, AccountKind::OpenAi),
            UpstreamCall::Generate { params: &params },
            DEADLINE,
        )
        .await
        .unwrap_err();
    assert_eq!(failure.kind, FailureKind::Protocol);
    assert_eq!(failure.message, "the upstream answer is larger than 64 bytes");
}

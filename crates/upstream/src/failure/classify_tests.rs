use super::*;
use reqwest::header::HeaderValue;
use serde_json::json;

const NOW: u64 = 1_766_000_000_000;

fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
    let mut map = HeaderMap::new();
    for (name, value) in pairs {
        map.insert(*name, HeaderValue::from_str(value).unwrap());
    }
    map
}

fn json_headers() -> HeaderMap {
    headers(&[("content-type", "application/json")])
}

fn classify_json(status: u16, body: Value) -> Failure {
    classify_response(status, &json_headers(), body.to_string().as_bytes(), NOW)
}

fn error_body(message: &str, error_type: &str, param: Option<&str>, code: Option<&str>) -> Value {
    json!({"error": {"message": message, "type": error_type, "param": param, "code": code}})
}

#[test]
fn usage_limit_reached_with_resets_at() {
    let body = json!({"error": {"type": "usage_limit_reached", "message": "The usage limit has been reached",
        "plan_type": "plus", "resets_at": 1_766_018_000}});
    let failure = classify_json(429, body);
    assert_eq!(
        failure.kind,
        FailureKind::RateLimited {
            reset_at_unix_ms: Some(1_766_018_000_000),
            images_only: false
        }
    );
    assert_eq!(failure.status, Some(429));
    assert_eq!(failure.passthrough, None);
}

#[test]
fn rate_limit_exceeded_on_images_is_images_only_with_retry_after() {
    let body = error_body(
        "Rate limit reached for gpt-image-2 in organization org-x on images per min (IPM): Limit 5, Used 5, Requested 1.",
        "images",
        None,
        Some("rate_limit_exceeded"),
    );
    let failure = classify_response(
        429,
        &headers(&[("retry-after", "20")]),
        body.to_string().as_bytes(),
        NOW,
    );
    assert_eq!(
        failure.kind,
        FailureKind::RateLimited {
            reset_at_unix_ms: Some(NOW + 20_000),
            images_only: true
        }
    );
}

#[test]
fn token_rate_limit_on_the_image_model_is_not_images_only() {
    let body = error_body(
        "Rate limit reached for gpt-image-2 in organization org-x on tokens per min (TPM). Please try again in 3s.",
        "tokens",
        None,
        Some("rate_limit_exceeded"),
    );
    let failure = classify_json(429, body);
    assert_eq!(
        failure.kind,
        FailureKind::RateLimited {
            reset_at_unix_ms: Some(NOW + 3_000),
            images_only: false
        }
    );
}

#[test]
fn insufficient_quota_is_rate_limited_without_reset() {
    let body = error_body(
        "You exceeded your current quota.",
        "insufficient_quota",
        None,
        Some("insufficient_quota"),
    );
    let failure = classify_json(429, body);
    assert_eq!(
        failure.kind,
        FailureKind::RateLimited {
            reset_at_unix_ms: None,
            images_only: false
        }
    );
    assert!(
        failure.message.contains("insufficient_quota"),
        "{}",
        failure.message
    );
}

#[test]
fn a_billing_hard_limit_is_the_account_s_limit_not_the_client_s_error() {
    // OpenAI answers 400 `invalid_request_error` when an account's spend limit is reached: another
    // account can take the request, and the client must not see the pool account's billing.
    let body = error_body(
        "Billing hard limit has been reached",
        "invalid_request_error",
        None,
        Some("billing_hard_limit_reached"),
    );
    let failure = classify_json(400, body);
    assert_eq!(
        failure.kind,
        FailureKind::RateLimited {
            reset_at_unix_ms: None,
            images_only: false
        }
    );
    assert_eq!(failure.passthrough, None);
}

#[test]
fn rate_limit_with_codex_headers_and_html_body() {
    let h = headers(&[
        ("content-type", "text/html"),
        ("x-codex-primary-used-percent", "100"),
        ("x-codex-primary-reset-after-seconds", "1800"),
        ("x-codex-secondary-used-percent", "20"),
        ("x-codex-secondary-reset-after-seconds", "500000"),
    ]);
    let failure = classify_response(429, &h, b"<html>slow down</html>", NOW);
    assert_eq!(
        failure.kind,
        FailureKind::RateLimited {
            reset_at_unix_ms: Some(NOW + 1_800_000),
            images_only: false
        }
    );
}

#[test]
fn retry_after_ms_on_429() {
    let h = headers(&[("retry-after-ms", "750")]);
    let failure = classify_response(429, &h, b"", NOW);
    assert_eq!(failure.reset_at_unix_ms(), Some(NOW + 750));
}

#[test]
fn unauthorized() {
    let body = error_body(
        "Incorrect API key provided: sk-abc***wxyz.",
        "invalid_request_error",
        None,
        Some("invalid_api_key"),
    );
    let failure = classify_json(401, body);
    assert_eq!(failure.kind, FailureKind::Unauthorized);
    assert_eq!(failure.status, Some(401));
    assert!(
        !failure.message.contains("sk-"),
        "the upstream text is not copied: {}",
        failure.message
    );
    assert_eq!(failure.client_error().status(), 502);
}

#[test]
fn forbidden_json_versus_html() {
    let body = error_body(
        "Project does not have access.",
        "invalid_request_error",
        None,
        None,
    );
    assert_eq!(
        classify_json(403, body).kind,
        FailureKind::Forbidden { json_body: true }
    );
    let html = b"<!DOCTYPE html><html><head><title>Attention Required! | Cloudflare</title></head></html>";
    let failure = classify_response(
        403,
        &headers(&[("content-type", "text/html; charset=UTF-8")]),
        html,
        NOW,
    );
    assert_eq!(failure.kind, FailureKind::Forbidden { json_body: false });
    let failure = classify_response(403, &HeaderMap::new(), b"forbidden", NOW);
    assert_eq!(failure.kind, FailureKind::Forbidden { json_body: false });
}

#[test]
fn moderation_block_is_refused_with_the_upstream_message() {
    let message = "Your request was rejected by the safety system. safety_violations=[sexual].";
    let body = error_body(
        message,
        "image_generation_user_error",
        None,
        Some("moderation_blocked"),
    );
    let failure = classify_json(400, body);
    assert_eq!(failure.kind, FailureKind::Refused);
    let shown = failure.client_error();
    assert_eq!(shown.status(), 502);
    assert_eq!(
        shown.message,
        format!("Upstream request failed: the content was refused. {message}")
    );
    assert_eq!(shown.should_retry(), Some(false));
    assert_eq!(shown.error_type(), "image_generation_user_error");
    assert_eq!(shown.code(), Some("moderation_blocked"));
    assert_eq!(shown.param, None);
}

#[test]
fn image_generation_user_error_about_a_parameter_is_the_client_s_to_correct() {
    // The interface answers incompatible parameters (its example: a transparent background)
    // with 400 `invalid_request_error`, not as refused content.
    let message = "Transparent background is not supported for this model.";
    let body = error_body(
        message,
        "image_generation_user_error",
        Some("background"),
        Some("invalid_value"),
    );
    let failure = classify_json(400, body);
    assert_eq!(failure.kind, FailureKind::Invalid);
    let shown = failure.client_error();
    assert_eq!((shown.status(), shown.message.as_str()), (400, message));
    assert_eq!(shown.error_type(), "invalid_request_error");
    assert_eq!(shown.param.as_deref(), Some("background"));
    assert_eq!(shown.code(), Some("invalid_value"));
    // Named by its code alone, too.
    let body = error_body(
        "The model 'gpt-image-2' does not support the 'input_fidelity' parameter.",
        "image_generation_user_error",
        None,
        Some("invalid_input_fidelity_model"),
    );
    assert_eq!(classify_json(400, body).kind, FailureKind::Invalid);
}

#[test]
fn image_generation_user_error_naming_no_parameter_is_refused() {
    let body = error_body(
        "Your request was rejected.",
        "image_generation_user_error",
        None,
        None,
    );
    let failure = classify_json(400, body);
    assert_eq!(failure.kind, FailureKind::Refused);
    assert_eq!(failure.client_error().status(), 502);
    // A moderation code is a refusal whatever else the error names.
    let body = error_body(
        "rejected",
        "image_generation_user_error",
        Some("prompt"),
        Some("moderation_blocked"),
    );
    assert_eq!(classify_json(400, body).kind, FailureKind::Refused);
}

#[test]
fn other_400_is_invalid_passthrough() {
    let message = "Invalid size '1792x936'. Width and height must both be divisible by 16.";
    let body = error_body(
        message,
        "invalid_request_error",
        Some("size"),
        Some("invalid_value"),
    );
    let failure = classify_json(400, body);
    assert_eq!(failure.kind, FailureKind::Invalid);
    let shown = failure.client_error();
    assert_eq!((shown.status(), shown.message.as_str()), (400, message));
    assert_eq!(shown.param.as_deref(), Some("size"));
    assert_eq!(shown.code(), Some("invalid_value"));
}

#[test]
fn input_fidelity_refusal_is_invalid_not_model_unsupported() {
    let body = error_body(
        "The model 'gpt-image-2' does not support the 'input_fidelity' parameter.",
        "invalid_request_error",
        Some("input_fidelity"),
        Some("invalid_input_fidelity_model"),
    );
    assert_eq!(classify_json(400, body).kind, FailureKind::Invalid);
}

#[test]
fn statuses_of_invalid_passthrough() {
    let body = error_body("Not here.", "invalid_request_error", None, None);
    assert_eq!(classify_json(404, body.clone()).client_error().status(), 404);
    assert_eq!(classify_json(413, body.clone()).client_error().status(), 413);
    assert_eq!(classify_json(422, body).client_error().status(), 400);
}

#[test]
fn a_404_for_an_unknown_path_is_the_accounts_not_the_clients() {
    let body = error_body(
        "Invalid URL (POST /v2/images/generations)",
        "invalid_request_error",
        None,
        None,
    );
    let failure = classify_json(404, body);
    assert_eq!(failure.kind, FailureKind::Transient);
    assert_eq!(failure.passthrough, None);
    assert!(failure.message.contains("base URL"), "{}", failure.message);
    assert!(
        failure.message.contains("POST /v2/images/generations"),
        "{}",
        failure.message
    );
    // A 404 about what the request names stays the client's, as the upstream said it.
    let body = error_body(
        "Previous response with id 'resp_1' not found.",
        "invalid_request_error",
        Some("previous_response_id"),
        None,
    );
    let failure = classify_json(404, body);
    assert_eq!(failure.kind, FailureKind::Invalid);
    assert_eq!(failure.client_error().status(), 404);
    assert_eq!(
        failure.client_error().param.as_deref(),
        Some("previous_response_id")
    );
}

#[test]
fn model_unsupported_forms() {
    let cases = [
        (
            400,
            error_body(
                "The model `gpt-image-2` does not exist or you do not have access to it.",
                "invalid_request_error",
                None,
                Some("model_not_found"),
            ),
        ),
        (
            404,
            error_body(
                "The model `gpt-image-2` does not exist or you do not have access to it.",
                "invalid_request_error",
                None,
                Some("model_not_found"),
            ),
        ),
        (
            400,
            error_body(
                "The 'gpt-5' model is not supported when using Codex with a ChatGPT account.",
                "invalid_request_error",
                None,
                None,
            ),
        ),
        (
            400,
            json!({"detail": "The 'gpt-5.9' model is not supported when using Codex with a ChatGPT account."}),
        ),
        (
            400,
            error_body(
                "Unsupported model.",
                "invalid_request_error",
                Some("model"),
                Some("unsupported_model"),
            ),
        ),
    ];
    for (status, body) in cases {
        let failure = classify_json(status, body.clone());
        assert_eq!(failure.kind, FailureKind::ModelUnsupported, "{status} {body}");
        assert_eq!(failure.passthrough, None);
        assert!(
            failure
                .message
                .starts_with("the upstream does not serve the model: ")
        );
    }
}

#[test]
fn server_errors_are_transient() {
    for status in [500, 502, 503, 504, 520, 524, 408, 409] {
        let body = error_body(
            "The server had an error while processing your request.",
            "server_error",
            None,
            None,
        );
        let failure = classify_json(status, body);
        assert_eq!(failure.kind, FailureKind::Transient, "{status}");
        assert_eq!(failure.status, Some(status));
        assert!(failure.message.contains(&status.to_string()));
    }
}

#[test]
fn html_error_pages_are_transient_whatever_the_status() {
    let page = b"\n  <html><body><h1>502 Bad Gateway</h1></body></html>";
    for status in [400, 404, 413, 502] {
        let failure = classify_response(status, &HeaderMap::new(), page, NOW);
        assert_eq!(failure.kind, FailureKind::Transient, "{status}");
        assert!(failure.message.contains("HTML page"));
    }
    let failure = classify_response(400, &headers(&[("content-type", "text/html")]), b"oops", NOW);
    assert_eq!(failure.kind, FailureKind::Transient);
}

#[test]
fn a_4xx_without_api_error_is_transient() {
    let failure = classify_response(
        404,
        &headers(&[("content-type", "text/plain")]),
        b"404 page not found",
        NOW,
    );
    assert_eq!(failure.kind, FailureKind::Transient);
    assert_eq!(failure.passthrough, None);
}

#[test]
fn unexpected_statuses_are_protocol_failures() {
    assert_eq!(
        classify_response(302, &HeaderMap::new(), b"", NOW).kind,
        FailureKind::Protocol
    );
    assert_eq!(
        classify_response(200, &HeaderMap::new(), b"{}", NOW).kind,
        FailureKind::Protocol
    );
}

#[test]
fn stream_error_objects() {
    let h = HeaderMap::new();
    let object = |value: Value| value.as_object().unwrap().clone();
    let refused = classify_error_object(
        None,
        &object(
            json!({"message": "rejected", "type": "image_generation_user_error", "code": "moderation_blocked"}),
        ),
        &h,
        NOW,
    );
    assert_eq!(refused.kind, FailureKind::Refused);
    assert_eq!(refused.status, None);
    let limited = classify_error_object(
        None,
        &object(json!({"type": "error", "code": "rate_limit_exceeded", "message": "slow"})),
        &h,
        NOW,
    );
    assert!(matches!(limited.kind, FailureKind::RateLimited { .. }));
    let server = classify_error_object(
        None,
        &object(json!({"type": "server_error", "message": "boom"})),
        &h,
        NOW,
    );
    assert_eq!(server.kind, FailureKind::Transient);
    assert!(server.message.ends_with("boom"));
    let invalid = classify_error_object(
        None,
        &object(json!({"type": "invalid_request_error", "message": "bad"})),
        &h,
        NOW,
    );
    assert_eq!(invalid.kind, FailureKind::Invalid);
    // A parameter error in a stream is the request's, not a transient failure to retry elsewhere.
    let parameter = classify_error_object(
        None,
        &object(
            json!({"type": "image_generation_user_error", "code": "invalid_value",
            "param": "background", "message": "no transparency"}),
        ),
        &h,
        NOW,
    );
    assert_eq!(parameter.kind, FailureKind::Invalid);
}

#[test]
fn long_upstream_messages_are_clipped_in_causes() {
    let long = "x".repeat(1000);
    let failure = classify_json(500, error_body(&long, "server_error", None, None));
    assert!(failure.message.chars().count() < 400, "{}", failure.message.len());
}

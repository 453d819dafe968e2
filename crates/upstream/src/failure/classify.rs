//! Classification of upstream error answers and transport errors into [`Failure`]s. Pure: the
//! answer's status, headers and body bytes in, a [`Failure`] out.

use std::error::Error as _;

use imagegate_codec::ApiError;
use imagegate_domain::ErrorKind;
use reqwest::header::{CONTENT_TYPE, HeaderMap};
use serde_json::{Map, Value};

use super::reset::reset_at_unix_ms;
use super::{Failure, FailureKind};

/// Longest upstream message kept in a [`Failure::message`] (in characters).
const MAX_CAUSE_CHARS: usize = 300;
/// Longest upstream message passed through to the client (in characters).
const MAX_PASSTHROUGH_CHARS: usize = 4000;

/// Classifies an HTTP answer that is not a success.
///
/// - 429: [`FailureKind::RateLimited`] with the reset from [`super::reset`];
/// - 401: [`FailureKind::Unauthorized`]; 403: [`FailureKind::Forbidden`] (`json_body` false for
///   anything but a JSON object, e.g. a proxy's HTML page);
/// - an HTML page with any other status, 408, 409 and every 5xx: [`FailureKind::Transient`];
/// - other 4xx with an API error: [`FailureKind::ModelUnsupported`] when it says the model is not
///   served, [`FailureKind::Refused`] for a moderation code or an `image_generation_user_error`
///   naming no parameter, else [`FailureKind::Invalid`] (both with the upstream error as
///   passthrough);
/// - other 4xx without an API error, and a 404 whose API error is OpenAI's `Invalid URL (...)`:
///   [`FailureKind::Transient`] (a proxy or a wrong base URL, not the client's fault: the gateway
///   picks the path);
/// - anything else (1xx, 2xx, 3xx): [`FailureKind::Protocol`].
pub fn classify_response(status: u16, headers: &HeaderMap, body: &[u8], now_unix_ms: u64) -> Failure {
    let json: Option<Map<String, Value>> = match serde_json::from_slice::<Value>(body) {
        Ok(Value::Object(object)) => Some(object),
        _ => None,
    };
    let error = json.as_ref().and_then(error_object);
    match status {
        429 => rate_limited(Some(status), error.as_ref(), headers, now_unix_ms),
        401 if json.is_none() => Failure::new(
            FailureKind::Transient,
            "HTTP 401 with a page that is not an API error (a proxy in front of the upstream?)",
        )
        .with_status(status),
        401 => Failure::new(
            FailureKind::Unauthorized,
            "the upstream refused the credential (HTTP 401)",
        )
        .with_status(status),
        403 => {
            let json_body = json.is_some();
            let what = if json_body {
                "an API error"
            } else {
                "a page that is not an API error"
            };
            Failure::new(
                FailureKind::Forbidden { json_body },
                format!("the upstream answered HTTP 403 with {what}"),
            )
            .with_status(status)
        }
        _ if is_html(headers, body) => {
            Failure::transient(format!("the upstream answered HTTP {status} with an HTML page"))
                .with_status(status)
        }
        408 | 409 | 500..=599 => {
            let cause = error
                .as_ref()
                .and_then(|e| text(e, "message"))
                .map(|m| format!(": {}", clip(m, MAX_CAUSE_CHARS)));
            Failure::transient(format!(
                "the upstream answered HTTP {status}{}",
                cause.unwrap_or_default()
            ))
            .with_status(status)
        }
        400..=499 => match &error {
            Some(error) if status == 404 && is_unknown_path(error) => Failure::transient(format!(
                "the upstream does not know the path it was called on (is the account's base URL right?): {}",
                clip(text(error, "message").unwrap_or_default(), MAX_CAUSE_CHARS)
            ))
            .with_status(status),
            Some(error) => classify_error_object(Some(status), error, headers, now_unix_ms),
            None => Failure::transient(format!(
                "the upstream answered HTTP {status} without an API error"
            ))
            .with_status(status),
        },
        _ => Failure::protocol(format!("the upstream answered HTTP {status}")).with_status(status),
    }
}

/// Classifies one API error object (`{"message","type","param","code"}`), from an HTTP 4xx body
/// or from an error event inside a stream (`status` `None`).
///
/// In a stream: rate-limit codes give [`FailureKind::RateLimited`], content-policy codes
/// [`FailureKind::Refused`], model errors [`FailureKind::ModelUnsupported`], `server_error` and
/// unknown types [`FailureKind::Transient`], `invalid_request_error` and an
/// `image_generation_user_error` about a parameter [`FailureKind::Invalid`].
pub fn classify_error_object(
    status: Option<u16>,
    error: &Map<String, Value>,
    headers: &HeaderMap,
    now_unix_ms: u64,
) -> Failure {
    let code = text(error, "code").unwrap_or_default();
    let error_type = text(error, "type").unwrap_or_default();
    let param = text(error, "param");
    let message = text(error, "message").unwrap_or_default();
    let with_status = |failure: Failure| match status {
        Some(status) => failure.with_status(status),
        None => failure,
    };
    if status == Some(429) || is_rate_limit(code, error_type) {
        return rate_limited(status, Some(error), headers, now_unix_ms);
    }
    if is_model_unsupported(code, param, message) {
        return with_status(Failure::new(
            FailureKind::ModelUnsupported,
            format!(
                "the upstream does not serve the model: {}",
                clip(message, MAX_CAUSE_CHARS)
            ),
        ));
    }
    let refused = is_refusal(code, error_type, param);
    if status.is_none() && !refused && !is_parameter_error(code, error_type, param) {
        let cause = if message.is_empty() {
            "an error event"
        } else {
            message
        };
        return Failure::transient(format!(
            "the upstream stream failed: {}",
            clip(cause, MAX_CAUSE_CHARS)
        ));
    }
    let kind = if refused {
        ErrorKind::ContentPolicy
    } else {
        match (status, code) {
            (Some(404), "model_not_found") => ErrorKind::ModelNotFound,
            (Some(404), _) => ErrorKind::NotFound,
            (Some(413), _) => ErrorKind::PayloadTooLarge,
            _ => ErrorKind::InvalidRequest,
        }
    };
    let shown = if message.is_empty() {
        "The upstream refused the request."
    } else {
        message
    };
    let shown = clip(shown, MAX_PASSTHROUGH_CHARS);
    // The interface answers a refused content as a failed upstream request (502), with the
    // upstream's own words and code and no advice to retry.
    let shown = if refused {
        format!("Upstream request failed: the content was refused. {shown}")
    } else {
        shown
    };
    let mut passthrough = ApiError::new(kind, shown);
    passthrough.param = param.map(str::to_owned);
    passthrough.code_override = (!code.is_empty()).then(|| code.to_owned());
    let (failure_kind, what) = if refused {
        (FailureKind::Refused, "refused by the upstream content policy")
    } else {
        (FailureKind::Invalid, "refused by the upstream as invalid")
    };
    let detail = if code.is_empty() {
        String::new()
    } else {
        format!(" ({code})")
    };
    with_status(Failure::new(failure_kind, format!("{what}{detail}")).with_passthrough(passthrough))
}

/// Classifies an error of the HTTP client (no answer was received).
pub fn classify_transport(err: &reqwest::Error) -> Failure {
    let mut cause = String::new();
    let mut source = err.source();
    while let Some(inner) = source {
        cause.push_str(": ");
        cause.push_str(&inner.to_string());
        source = inner.source();
    }
    let cause = clip(&cause, MAX_CAUSE_CHARS);
    if err.is_builder() {
        return Failure::protocol(format!("the upstream request could not be built{cause}"));
    }
    if err.is_timeout() {
        return Failure::transient(format!("connecting to the upstream timed out{cause}"));
    }
    if err.is_connect() {
        return Failure::transient(format!("could not connect to the upstream{cause}"));
    }
    Failure::transient(format!("the connection to the upstream failed{cause}"))
}

fn rate_limited(
    status: Option<u16>,
    error: Option<&Map<String, Value>>,
    headers: &HeaderMap,
    now: u64,
) -> Failure {
    let code = error.and_then(|e| text(e, "code")).unwrap_or_default();
    let error_type = error.and_then(|e| text(e, "type")).unwrap_or_default();
    let message = error.and_then(|e| text(e, "message")).unwrap_or_default();
    let kind = FailureKind::RateLimited {
        reset_at_unix_ms: reset_at_unix_ms(headers, error, now),
        images_only: is_images_only(code, error_type, message),
    };
    let label = [code, error_type]
        .into_iter()
        .find(|s| !s.is_empty())
        .unwrap_or("rate limit");
    let failure = Failure::new(kind, format!("the upstream account is rate-limited ({label})"));
    match status {
        Some(status) => failure.with_status(status),
        None => failure,
    }
}

/// The error object inside a body: `{"error":{...}}`, a Responses stream error
/// (`{"type":"error","code","message"}`), or `{"detail":"..."}` (ChatGPT backend).
fn error_object(body: &Map<String, Value>) -> Option<Map<String, Value>> {
    match body.get("error") {
        Some(Value::Object(error)) => return Some(error.clone()),
        Some(Value::String(message)) => return Some(message_only(message)),
        _ => {}
    }
    if body.get("type").and_then(Value::as_str) == Some("error") && body.contains_key("message") {
        return Some(body.clone());
    }
    match body.get("detail") {
        Some(Value::String(detail)) => Some(message_only(detail)),
        _ => None,
    }
}

fn message_only(message: &str) -> Map<String, Value> {
    let mut error = Map::new();
    error.insert("message".to_owned(), Value::String(message.to_owned()));
    error
}

/// An account's usage, rate or spend limit (OpenAI answers a spend limit with HTTP 400
/// `billing_hard_limit_reached`): the account's, not the request's, so another account may serve it.
fn is_rate_limit(code: &str, error_type: &str) -> bool {
    const CODES: [&str; 4] = [
        "usage_limit_reached",
        "rate_limit_exceeded",
        "insufficient_quota",
        "billing_hard_limit_reached",
    ];
    CODES.contains(&code) || CODES.contains(&error_type)
}

/// A refusal of the content: a moderation code, or an `image_generation_user_error` that names no
/// parameter (one that does is about the parameters, see [`is_parameter_error`]).
fn is_refusal(code: &str, error_type: &str, param: Option<&str>) -> bool {
    matches!(
        code,
        "moderation_blocked" | "content_policy_violation" | "image_content_policy_violation"
    ) || (error_type == "image_generation_user_error" && !is_parameter_error(code, error_type, param))
}

/// An error about the request's parameters, for the client to correct: `invalid_request_error`,
/// or an `image_generation_user_error` naming a parameter or with an `invalid_*` code (OpenAI
/// answers a transparent background on a model without it so: `invalid_value`, `background`).
fn is_parameter_error(code: &str, error_type: &str, param: Option<&str>) -> bool {
    error_type == "invalid_request_error"
        || (error_type == "image_generation_user_error"
            && (param.is_some_and(|param| !param.is_empty()) || code.starts_with("invalid")))
}

/// OpenAI's answer to a path it does not serve (`Invalid URL (POST /v1/images/generation)`), which
/// relays in front of it copy: the account's base URL is wrong, whatever the request. A 404 about
/// something the request names (a `previous_response_id`, a file) names a `param` or says other
/// words, and stays the client's.
fn is_unknown_path(error: &Map<String, Value>) -> bool {
    let param = text(error, "param").unwrap_or_default();
    param.is_empty() && text(error, "message").is_some_and(|m| m.starts_with("Invalid URL ("))
}

fn is_model_unsupported(code: &str, param: Option<&str>, message: &str) -> bool {
    if matches!(
        code,
        "model_not_found" | "model_not_supported" | "unsupported_model"
    ) {
        return true;
    }
    if param.is_some_and(|param| param != "model") {
        return false;
    }
    let message = message.to_ascii_lowercase();
    message.contains("model")
        && [
            "not supported",
            "does not exist",
            "unsupported model",
            "model not found",
        ]
        .iter()
        .any(|phrase| message.contains(phrase))
}

fn is_images_only(code: &str, error_type: &str, message: &str) -> bool {
    let message = message.to_ascii_lowercase();
    code.contains("image")
        || error_type.contains("image")
        || message.contains("images per")
        || message.contains("image generation")
}

fn is_html(headers: &HeaderMap, body: &[u8]) -> bool {
    let content_type_html = headers
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.to_ascii_lowercase().contains("text/html"));
    let start = body
        .iter()
        .position(|b| !b.is_ascii_whitespace())
        .and_then(|i| body.get(i..))
        .unwrap_or_default();
    let prefix = start
        .get(..start.len().min(14))
        .unwrap_or_default()
        .to_ascii_lowercase();
    content_type_html || prefix.starts_with(b"<!doctype html") || prefix.starts_with(b"<html")
}

fn text<'a>(object: &'a Map<String, Value>, key: &str) -> Option<&'a str> {
    object.get(key).and_then(Value::as_str)
}

fn clip(text: &str, max_chars: usize) -> String {
    match text.char_indices().nth(max_chars) {
        Some((cut, _)) => format!("{}…", text.get(..cut).unwrap_or_default()),
        None => text.to_owned(),
    }
}

#[cfg(test)]
#[path = "classify_tests.rs"]
mod tests;

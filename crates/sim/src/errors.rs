//! HTTP answers for errors and injected faults, each in the shape the real service (or the proxy in front of
//! it) uses.

use axum::body::Body;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use imagegate_codec::{ApiError, ErrorEnvelope, ErrorObject};

use crate::faults::{Fault, FaultKind};
use crate::simulator::unix_now;

/// The OpenAI error envelope `{"error":{"message","type","param","code"}}` (the codec's type).
pub fn error_body(message: &str, error_type: &str, param: Option<&str>, code: Option<&str>) -> Value {
    let envelope = ErrorEnvelope {
        error: ErrorObject {
            message: message.to_owned(),
            error_type: error_type.to_owned(),
            param: param.map(str::to_owned),
            code: code.map(str::to_owned),
        },
    };
    serde_json::to_value(&envelope).unwrap_or(Value::Null)
}

/// An error answered as JSON with a status and extra headers.
#[derive(Clone, Debug, PartialEq)]
pub struct ApiFailure {
    /// HTTP status.
    pub status: StatusCode,
    /// Extra headers (name, value).
    pub headers: Vec<(&'static str, String)>,
    /// JSON body.
    pub body: Value,
}

impl ApiFailure {
    /// A failure with the standard envelope.
    pub fn new(
        status: StatusCode,
        message: &str,
        error_type: &str,
        param: Option<&str>,
        code: Option<&str>,
    ) -> Self {
        Self {
            status,
            headers: Vec::new(),
            body: error_body(message, error_type, param, code),
        }
    }

    /// 400 `invalid_request_error`.
    pub fn invalid_request(message: &str, param: Option<&str>, code: Option<&str>) -> Self {
        Self::new(
            StatusCode::BAD_REQUEST,
            message,
            "invalid_request_error",
            param,
            code,
        )
    }

    /// 500 for a simulator-side failure (rendering).
    pub fn internal(message: &str) -> Self {
        Self::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            message,
            "server_error",
            None,
            None,
        )
    }

    /// 401 for a request without a bearer token.
    pub fn missing_key() -> Self {
        Self::new(
            StatusCode::UNAUTHORIZED,
            "You didn't provide an API key. You need to provide your API key in an Authorization header using \
             Bearer auth (i.e. Authorization: Bearer YOUR_KEY).",
            "invalid_request_error",
            None,
            None,
        )
    }

    fn with_header(mut self, name: &'static str, value: impl ToString) -> Self {
        self.headers.push((name, value.to_string()));
        self
    }
}

impl From<ApiError> for ApiFailure {
    fn from(error: ApiError) -> Self {
        let status = StatusCode::from_u16(error.status()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        let mut failure = Self {
            status,
            headers: Vec::new(),
            body: error.to_body(),
        };
        if let Some(retry) = error.should_retry() {
            failure = failure.with_header("x-should-retry", retry);
        }
        failure
    }
}

impl IntoResponse for ApiFailure {
    fn into_response(self) -> Response {
        let mut response = (self.status, axum::Json(self.body)).into_response();
        for (name, value) in self.headers {
            if let Ok(value) = HeaderValue::from_str(&value) {
                response.headers_mut().insert(name, value);
            }
        }
        response
    }
}

/// The immediate answer of a fault, or `None` for faults that shape a normal answer instead (stalls and
/// `no_image`).
pub fn fault_response(fault: &Fault, token: Option<&str>, request_id: &str) -> Option<Response> {
    let failure = match fault.kind {
        FaultKind::UsageLimit => usage_limit(fault.resets_in_seconds),
        FaultKind::RateLimit => ApiFailure::new(
            StatusCode::TOO_MANY_REQUESTS,
            &format!(
                "Rate limit reached for gpt-image-2 in organization org-simulated on images per min (IPM): \
                 Limit 5, Used 5, Requested 1. Please try again in {}s. Visit \
                 https://platform.openai.com/account/rate-limits to learn more.",
                fault.retry_after_seconds
            ),
            "requests",
            None,
            Some("rate_limit_exceeded"),
        )
        .with_header("retry-after", fault.retry_after_seconds)
        .with_header("x-ratelimit-remaining-requests", 0)
        .with_header(
            "x-ratelimit-reset-requests",
            format!("{}s", fault.retry_after_seconds),
        ),
        FaultKind::Server500 => server_error(StatusCode::INTERNAL_SERVER_ERROR),
        FaultKind::BadGateway502 => server_error(StatusCode::BAD_GATEWAY),
        FaultKind::Unavailable503 => server_error(StatusCode::SERVICE_UNAVAILABLE)
            .with_header("retry-after", fault.retry_after_seconds),
        FaultKind::InvalidApiKey => ApiFailure::new(
            StatusCode::UNAUTHORIZED,
            &format!(
                "Incorrect API key provided: {}. You can find your API key at \
                 https://platform.openai.com/account/api-keys.",
                mask_key(token.unwrap_or(""))
            ),
            "invalid_request_error",
            None,
            Some("invalid_api_key"),
        ),
        FaultKind::Refusal => ApiFailure::new(
            StatusCode::BAD_REQUEST,
            &format!(
                "Your request was rejected by the safety system. If you believe this is an error, contact us at \
                 help.openai.com and include the request ID {request_id}."
            ),
            "image_generation_user_error",
            None,
            Some("moderation_blocked"),
        ),
        FaultKind::ModelUnsupported => model_unsupported(None),
        FaultKind::Html403 => return Some(html_page(StatusCode::FORBIDDEN, request_id)),
        FaultKind::Html502 => return Some(html_page(StatusCode::BAD_GATEWAY, request_id)),
        FaultKind::Stall
        | FaultKind::StallMidStream
        | FaultKind::NoImage
        | FaultKind::RateLimitInStream
        | FaultKind::ServerErrorInStream
        | FaultKind::TruncatedBody
        | FaultKind::NoUsage
        | FaultKind::OneImage
        | FaultKind::RefusedAfterImage => {
            return None;
        }
    };
    Some(failure.into_response())
}

/// 429 `usage_limit_reached` as a ChatGPT-subscription backend sends it, with the `x-codex-primary-*`
/// headers gateways read.
pub fn usage_limit(resets_in_seconds: u64) -> ApiFailure {
    let body = json!({"error": {
        "type": "usage_limit_reached",
        "message": "The usage limit has been reached",
        "plan_type": "plus",
        "resets_at": unix_now() + resets_in_seconds,
        "resets_in_seconds": resets_in_seconds,
    }});
    ApiFailure {
        status: StatusCode::TOO_MANY_REQUESTS,
        headers: Vec::new(),
        body,
    }
    .with_header("x-codex-primary-used-percent", 100)
    .with_header("x-codex-primary-window-minutes", 300)
    .with_header("x-codex-primary-reset-after-seconds", resets_in_seconds)
}

/// 400 for a main model the subscription backend does not serve, in its `{"detail": ...}` shape.
pub fn model_unsupported(model: Option<&str>) -> ApiFailure {
    let detail = match model {
        Some(model) => {
            format!("The '{model}' model is not supported when using Codex with a ChatGPT account.")
        }
        None => "The requested model is not supported when using Codex with a ChatGPT account.".to_owned(),
    };
    ApiFailure {
        status: StatusCode::BAD_REQUEST,
        headers: Vec::new(),
        body: json!({ "detail": detail }),
    }
}

fn server_error(status: StatusCode) -> ApiFailure {
    ApiFailure::new(
        status,
        "The server had an error while processing your request. Sorry about that!",
        "server_error",
        None,
        None,
    )
}

/// `sk-abc***wxyz` style masking (short keys are fully masked).
pub fn mask_key(key: &str) -> String {
    let chars: Vec<char> = key.chars().collect();
    if chars.len() <= 8 {
        return "*".repeat(chars.len().max(3));
    }
    let head: String = chars.iter().take(3).collect();
    let tail: String = chars.iter().skip(chars.len() - 4).collect();
    format!("{head}***{tail}")
}

/// A Cloudflare-like HTML error page.
pub fn html_page(status: StatusCode, request_id: &str) -> Response {
    let (title, headline, detail) = if status == StatusCode::FORBIDDEN {
        (
            "Attention Required! | Cloudflare",
            "Sorry, you have been blocked",
            "You are unable to access api.openai.com. This website is using a security service to protect \
             itself from online attacks.",
        )
    } else {
        (
            "api.openai.com | 502: Bad gateway",
            "Bad gateway",
            "The web server reported a bad gateway error.",
        )
    };
    let ray: String = request_id
        .chars()
        .filter(char::is_ascii_alphanumeric)
        .take(16)
        .collect();
    let page = format!(
        "<!DOCTYPE html>\n<html lang=\"en-US\">\n<head><title>{title}</title>\
         <meta charset=\"UTF-8\" /></head>\n<body>\n<div id=\"cf-wrapper\">\n<h1>{headline}</h1>\n\
         <p>{detail}</p>\n<p>Error code {code}</p>\n<p>Cloudflare Ray ID: <strong>{ray}</strong></p>\n\
         </div>\n</body>\n</html>\n",
        code = status.as_u16()
    );
    let mut response = (status, Body::from(page)).into_response();
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/html; charset=UTF-8"),
    );
    headers.insert(header::SERVER, HeaderValue::from_static("cloudflare"));
    if let Ok(value) = HeaderValue::from_str(&ray) {
        headers.insert("cf-ray", value);
    }
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn masks_keys_like_openai() {
        assert_eq!(mask_key("sk-abcdefghijwxyz"), "sk-***wxyz");
        assert_eq!(mask_key("short"), "*****");
        assert_eq!(mask_key(""), "***");
    }

    #[test]
    fn model_unsupported_names_the_model_like_the_subscription_backend() {
        let failure = model_unsupported(Some("gpt-5.5"));
        assert_eq!(failure.status, StatusCode::BAD_REQUEST);
        assert_eq!(
            failure.body,
            json!({"detail": "The 'gpt-5.5' model is not supported when using Codex with a ChatGPT account."})
        );
    }

    #[test]
    fn usage_limit_carries_reset_in_body_and_headers() {
        let failure = usage_limit(30);
        assert_eq!(failure.status, StatusCode::TOO_MANY_REQUESTS);
        assert_eq!(failure.body["error"]["type"], "usage_limit_reached");
        assert_eq!(failure.body["error"]["resets_in_seconds"], 30);
        let resets_at = failure.body["error"]["resets_at"].as_u64().unwrap();
        assert!(resets_at >= unix_now() + 29 && resets_at <= unix_now() + 31);
        assert!(
            failure
                .headers
                .contains(&("x-codex-primary-reset-after-seconds", "30".to_owned()))
        );
    }
}

//! The OpenAI error envelope and the one table from [`ErrorKind`] to HTTP status, `type` and
//! `code`.

use bytes::Bytes;
use imagegate_domain::{ErrorKind, RequestError};
use serde::{Deserialize, Serialize};

/// How one [`ErrorKind`] goes on the wire.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ErrorSpec {
    /// HTTP status.
    pub status: u16,
    /// The `error.type` string.
    pub error_type: &'static str,
    /// The default `error.code` (a [`RequestError`] may give a more precise one).
    pub code: Option<&'static str>,
    /// The `x-should-retry` advice: `None` leaves the SDKs' own rule (retry 408/409/429/5xx).
    pub should_retry: Option<bool>,
}

const fn row(
    status: u16,
    error_type: &'static str,
    code: Option<&'static str>,
    retry: Option<bool>,
) -> ErrorSpec {
    ErrorSpec {
        status,
        error_type,
        code,
        should_retry: retry,
    }
}

/// The table: every error class with its status, type, default code and retry advice.
pub const fn error_spec(kind: ErrorKind) -> ErrorSpec {
    const INVALID: &str = "invalid_request_error";
    const NO: Option<bool> = Some(false);
    const YES: Option<bool> = Some(true);
    match kind {
        ErrorKind::InvalidRequest => row(400, INVALID, Some("invalid_value"), NO),
        ErrorKind::UnknownParameter => row(400, INVALID, Some("unknown_parameter"), NO),
        ErrorKind::ModelNotFound => row(404, INVALID, Some("model_not_found"), NO),
        ErrorKind::InvalidApiKey => row(401, INVALID, Some("INVALID_API_KEY"), NO),
        ErrorKind::PermissionDenied => row(403, "permission_error", None, NO),
        ErrorKind::NotFound => row(404, INVALID, None, NO),
        ErrorKind::MethodNotAllowed => row(405, INVALID, Some("method_not_allowed"), NO),
        ErrorKind::PayloadTooLarge => row(413, INVALID, Some("file_too_large"), NO),
        ErrorKind::KeyRateLimited => row(429, "rate_limit_error", Some("rate_limit_exceeded"), YES),
        ErrorKind::UsageLimitReached => row(429, "usage_limit_reached", Some("usage_limit_reached"), NO),
        ErrorKind::ContentPolicy => row(502, "image_generation_user_error", Some("moderation_blocked"), NO),
        ErrorKind::UpstreamFailed => row(502, "upstream_error", Some("upstream_request_failed"), YES),
        ErrorKind::UpstreamTimeout => row(504, "upstream_error", Some("upstream_timeout"), YES),
        ErrorKind::ClientTooSlow => row(408, INVALID, Some("client_too_slow"), NO),
        ErrorKind::RequestTimeout => row(408, INVALID, Some("request_timeout"), None),
        ErrorKind::ClientClosed => row(499, INVALID, Some("client_closed"), NO),
        ErrorKind::Overloaded => row(503, "server_error", Some("overloaded"), YES),
        ErrorKind::Internal => row(500, "server_error", None, None),
    }
}

/// An error answer: build it anywhere, turn it into status + body once at the HTTP edge.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct ApiError {
    /// The error class (decides status, type and the default code).
    pub kind: ErrorKind,
    /// Human-readable text; never contains secrets or image data.
    pub message: String,
    /// The parameter at fault.
    pub param: Option<String>,
    /// A more precise code than the class default.
    pub code_override: Option<String>,
}

/// The body `{"error":{...}}` with its keys in the order OpenAI sends them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ErrorEnvelope {
    /// The error.
    pub error: ErrorObject,
}

/// The inner error object; all four keys are always present.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ErrorObject {
    /// Human-readable text.
    pub message: String,
    /// Error type, e.g. `invalid_request_error`.
    #[serde(rename = "type")]
    pub error_type: String,
    /// The parameter at fault, or null.
    pub param: Option<String>,
    /// Machine-readable code, or null.
    pub code: Option<String>,
}

impl ApiError {
    /// An error of `kind` with `message`.
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> Self {
        Self {
            kind,
            message: message.into(),
            param: None,
            code_override: None,
        }
    }

    /// Sets the parameter at fault.
    #[must_use]
    pub fn with_param(mut self, param: impl Into<String>) -> Self {
        self.param = Some(param.into());
        self
    }

    /// Sets a code more precise than the class default.
    #[must_use]
    pub fn with_code(mut self, code: impl Into<String>) -> Self {
        self.code_override = Some(code.into());
        self
    }

    /// 401 for a key that is missing, malformed, unknown or presented with a wrong secret: a message
    /// that says nothing more. A genuine key that may not be used gets a message saying why.
    pub fn invalid_api_key() -> Self {
        Self::new(
            ErrorKind::InvalidApiKey,
            "Invalid API key. Send a key issued by this service as 'Authorization: Bearer <key>'; \
             create one on the /keys page.",
        )
    }

    /// 404 for an unknown path.
    pub fn route_not_found(method: &str, path: &str) -> Self {
        Self::new(ErrorKind::NotFound, format!("Invalid URL ({method} {path})."))
    }

    /// 405 for a known path asked with another method.
    pub fn method_not_allowed(method: &str, path: &str) -> Self {
        Self::new(
            ErrorKind::MethodNotAllowed,
            format!("Invalid method for URL ({method} {path})."),
        )
    }

    /// 404 for an unknown model id.
    pub fn model_not_found(model: &str) -> Self {
        Self::new(
            ErrorKind::ModelNotFound,
            format!("The model '{model}' does not exist on this gateway."),
        )
        .with_param("model")
    }

    /// 502 `Upstream request failed`, with an optional detail that must not contain secrets.
    pub fn upstream_failed(detail: Option<&str>) -> Self {
        let message = match detail {
            Some(detail) => format!("Upstream request failed: {detail}"),
            None => "Upstream request failed.".to_owned(),
        };
        Self::new(ErrorKind::UpstreamFailed, message)
    }

    /// 500 with a generic message (log the cause, do not send it).
    pub fn internal() -> Self {
        Self::new(
            ErrorKind::Internal,
            "The server had an error while processing your request.",
        )
    }

    /// The row of the table for this error's kind.
    pub fn spec(&self) -> ErrorSpec {
        error_spec(self.kind)
    }

    /// HTTP status.
    pub fn status(&self) -> u16 {
        self.spec().status
    }

    /// The `error.type` string.
    pub fn error_type(&self) -> &str {
        self.spec().error_type
    }

    /// The `error.code` string, or `None` for JSON null.
    pub fn code(&self) -> Option<&str> {
        self.code_override.as_deref().or(self.spec().code)
    }

    /// Advice for the `x-should-retry` header; `None` means send no header.
    pub fn should_retry(&self) -> Option<bool> {
        self.spec().should_retry
    }

    /// The typed body.
    pub fn envelope(&self) -> ErrorEnvelope {
        ErrorEnvelope {
            error: ErrorObject {
                message: self.message.clone(),
                error_type: self.error_type().to_owned(),
                param: self.param.clone(),
                code: self.code().map(str::to_owned),
            },
        }
    }

    /// The body as a JSON value: `{"error":{"message","type","param","code"}}`.
    pub fn to_body(&self) -> serde_json::Value {
        serde_json::json!({
            "error": {
                "message": self.message,
                "type": self.error_type(),
                "param": self.param,
                "code": self.code(),
            }
        })
    }

    /// The body as bytes, keys in OpenAI's order (`message`, `type`, `param`, `code`).
    pub fn to_json_bytes(&self) -> Bytes {
        match serde_json::to_vec(&self.envelope()) {
            Ok(bytes) => Bytes::from(bytes),
            Err(_) => Bytes::from(self.to_body().to_string()),
        }
    }
}

/// The precise `code` for each request refusal.
pub fn request_error_code(err: &RequestError) -> &'static str {
    match err {
        RequestError::Missing { .. } => "missing_required_parameter",
        RequestError::InvalidType { .. } => "invalid_type",
        RequestError::OutOfRange { value, min, .. } if value < min => "integer_below_min_value",
        RequestError::OutOfRange { .. } => "integer_above_max_value",
        RequestError::Empty { .. } => "empty_string",
        RequestError::TooLong { .. } => "string_above_max_length",
        RequestError::Unsupported { param, .. } if param == "input_fidelity" => {
            "invalid_input_fidelity_model"
        }
        RequestError::Unsupported { param, .. } if param == "background" => "invalid_value",
        RequestError::Unsupported { .. } => "unsupported_parameter",
        RequestError::ModelNotAccepted { .. } => "model_not_found",
        RequestError::UnknownParameter { .. } => "unknown_parameter",
        RequestError::FileTooLarge { .. } => "file_too_large",
        RequestError::UnsupportedFileType { .. } => "unsupported_file_mimetype",
        RequestError::InvalidValue { .. }
        | RequestError::InvalidSize(_)
        | RequestError::ImageModelAsMainModel { .. }
        | RequestError::PartialImagesWithoutStream
        | RequestError::TooManyImages { .. }
        | RequestError::InvalidMask(_) => "invalid_value",
    }
}

/// Turns a lowercase clause into a sentence: final period, and a capital first letter when the
/// first word is an ordinary word (identifiers such as `input_fidelity` keep their case).
pub(crate) fn sentence(text: &str) -> String {
    if text.is_empty() {
        return String::new();
    }
    let first_word = text.split([' ', ':', ',', ';']).next().unwrap_or_default();
    let ordinary = !first_word.is_empty() && first_word.chars().all(|c| c.is_ascii_alphabetic());
    let mut chars = text.chars();
    let mut out = match chars.next() {
        Some(first) if ordinary => first.to_uppercase().chain(chars).collect::<String>(),
        _ => text.to_owned(),
    };
    if !out.ends_with(['.', '!', '?']) {
        out.push('.');
    }
    out
}

impl From<RequestError> for ApiError {
    fn from(err: RequestError) -> Self {
        Self {
            kind: err.kind(),
            message: sentence(&err.to_string()),
            param: err.param().map(str::to_owned),
            code_override: Some(request_error_code(&err).to_owned()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sentences_capitalize_ordinary_words_only() {
        assert_eq!(
            sentence("missing required parameter 'prompt'"),
            "Missing required parameter 'prompt'."
        );
        assert_eq!(sentence("size 1792x936: bad"), "Size 1792x936: bad.");
        assert_eq!(
            sentence("input_fidelity must be omitted"),
            "input_fidelity must be omitted."
        );
        assert_eq!(sentence("'n' is 11."), "'n' is 11.");
        assert_eq!(sentence(""), "");
    }

    #[test]
    fn code_override_wins_over_the_table() {
        let err = ApiError::new(ErrorKind::InvalidRequest, "x").with_code("invalid_json");
        assert_eq!(err.code(), Some("invalid_json"));
        assert_eq!(ApiError::new(ErrorKind::Internal, "x").code(), None);
        let below = RequestError::OutOfRange {
            param: "n".into(),
            value: 0,
            min: 1,
            max: 10,
        };
        assert_eq!(request_error_code(&below), "integer_below_min_value");
    }
}

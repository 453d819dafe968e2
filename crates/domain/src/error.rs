//! Typed refusals of a request ([`RequestError`]) and the classes of error the gateway
//! answers with ([`ErrorKind`]).

use crate::edit::MaskError;
use crate::size::SizeError;

/// Every class of error the gateway answers with. The codec maps each class to an HTTP
/// status, an error `type` and a `code`.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum ErrorKind {
    /// The request breaks a parameter rule (400).
    InvalidRequest,
    /// The request carries a parameter the gateway does not know (400).
    UnknownParameter,
    /// The requested model is not served by this gateway (404).
    ModelNotFound,
    /// The API key is not a key of the service, or is disabled, suspended, deleted or in a group
    /// closed to its owner (401).
    InvalidApiKey,
    /// The key may not use this endpoint or model (403).
    PermissionDenied,
    /// The path or resource does not exist (404).
    NotFound,
    /// The path exists, but not for this method (405).
    MethodNotAllowed,
    /// The body or an uploaded file is too large (413).
    PayloadTooLarge,
    /// A rate limit was hit: the key's own, or a passing one of the upstream accounts (429, to
    /// be retried after `retry-after`).
    KeyRateLimited,
    /// Every upstream account has used up its usage window (429).
    UsageLimitReached,
    /// The upstream refused the prompt or image under its content policy (answered as a failed
    /// upstream request, 502).
    ContentPolicy,
    /// The upstream failed or returned no image (502).
    UpstreamFailed,
    /// The upstream did not answer in time (504).
    UpstreamTimeout,
    /// The client took a relayed answer so slowly that it outlived its own deadline (408; seen
    /// only after the answer started, so only in a stream's error event and the usage record).
    ClientTooSlow,
    /// The client stopped sending its request body: nothing of it came for the idle timeout
    /// (408, before any upstream call; the SDKs retry it).
    RequestTimeout,
    /// The client closed the connection before its request body ended (499, seen only in the
    /// usage record: nobody is left to answer).
    ClientClosed,
    /// The gateway has no capacity left right now (503).
    Overloaded,
    /// A bug or unexpected state inside the gateway (500).
    Internal,
}

impl ErrorKind {
    /// Snake-case name of the class, e.g. `invalid_request`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::InvalidRequest => "invalid_request",
            Self::UnknownParameter => "unknown_parameter",
            Self::ModelNotFound => "model_not_found",
            Self::InvalidApiKey => "invalid_api_key",
            Self::PermissionDenied => "permission_denied",
            Self::NotFound => "not_found",
            Self::MethodNotAllowed => "method_not_allowed",
            Self::PayloadTooLarge => "payload_too_large",
            Self::KeyRateLimited => "key_rate_limited",
            Self::UsageLimitReached => "usage_limit_reached",
            Self::ContentPolicy => "content_policy",
            Self::UpstreamFailed => "upstream_failed",
            Self::UpstreamTimeout => "upstream_timeout",
            Self::ClientTooSlow => "client_too_slow",
            Self::RequestTimeout => "request_timeout",
            Self::ClientClosed => "client_closed",
            Self::Overloaded => "overloaded",
            Self::Internal => "internal",
        }
    }
}

impl std::fmt::Display for ErrorKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Why a request was refused before it reached an upstream. Each variant names the
/// parameter ([`RequestError::param`]) and its message says what to change.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum RequestError {
    /// A required parameter is absent.
    #[error("missing required parameter '{param}'")]
    Missing {
        /// The parameter's name.
        param: String,
    },
    /// A parameter has the wrong JSON or form type.
    #[error("invalid type for '{param}': expected {expected}")]
    InvalidType {
        /// The parameter's name.
        param: String,
        /// What was expected, e.g. `an integer`.
        expected: String,
    },
    /// A parameter's value is not one of the allowed values.
    #[error("invalid value '{value}' for '{param}': allowed values are {allowed}")]
    InvalidValue {
        /// The parameter's name.
        param: String,
        /// The value given (shortened if very long).
        value: String,
        /// The allowed values, comma-separated.
        allowed: String,
    },
    /// A number is outside its allowed range.
    #[error("'{param}' is {value}, but it must be between {min} and {max}")]
    OutOfRange {
        /// The parameter's name.
        param: String,
        /// The value given.
        value: i64,
        /// Smallest allowed value.
        min: i64,
        /// Largest allowed value.
        max: i64,
    },
    /// A string parameter is present but empty (or only whitespace).
    #[error("'{param}' must not be empty")]
    Empty {
        /// The parameter's name.
        param: String,
    },
    /// A string parameter is longer than allowed.
    #[error("'{param}' is {length} characters long; the limit is {max} characters")]
    TooLong {
        /// The parameter's name.
        param: String,
        /// Length given, in characters.
        length: usize,
        /// Largest allowed length, in characters.
        max: usize,
    },
    /// `size` breaks one of the size rules.
    #[error("{0}")]
    InvalidSize(SizeError),
    /// A value that is well formed but that this model or gateway does not support.
    #[error("{reason}")]
    Unsupported {
        /// The parameter's name.
        param: String,
        /// A full sentence naming the parameter, why it is refused and what to do instead.
        reason: String,
    },
    /// The model is not one this gateway serves.
    #[error("model '{model}' is not available on this gateway")]
    ModelNotAccepted {
        /// The model id given (shortened if very long).
        model: String,
    },
    /// An image model was given as the main model of a Responses request.
    #[error(
        "'{model}' is an image model and cannot be the main model of a Responses request: \
         set 'model' to a text/agent model and put {model} in the image_generation tool \
         (tools: [{{\"type\": \"image_generation\", \"model\": \"{model}\"}}])"
    )]
    ImageModelAsMainModel {
        /// The image model id given as the main model.
        model: String,
    },
    /// `partial_images` above 0 without `stream: true`.
    #[error("'partial_images' needs 'stream' set to true; set stream to true or omit partial_images")]
    PartialImagesWithoutStream,
    /// A parameter the gateway does not know.
    #[error("unknown parameter '{param}'")]
    UnknownParameter {
        /// The parameter's name.
        param: String,
    },
    /// More input images than an edit allows.
    #[error("{count} input images were sent; an edit accepts at most {max}", max = crate::edit::MAX_EDIT_IMAGES)]
    TooManyImages {
        /// Number of images sent.
        count: usize,
    },
    /// An uploaded file reached the size limit.
    #[error("file '{param}' is too large: it must be smaller than {limit} bytes")]
    FileTooLarge {
        /// The form field of the file.
        param: String,
        /// The limit in bytes (a file must be strictly smaller).
        limit: u64,
    },
    /// An uploaded file is not a PNG, JPEG or WebP image.
    #[error("file '{param}' is not a PNG, JPEG or WebP image")]
    UnsupportedFileType {
        /// The form field of the file.
        param: String,
    },
    /// The mask does not fit the first input image.
    #[error("{0}")]
    InvalidMask(MaskError),
}

impl RequestError {
    /// Name of the parameter at fault, if the error concerns one.
    pub fn param(&self) -> Option<&str> {
        match self {
            Self::Missing { param }
            | Self::InvalidType { param, .. }
            | Self::InvalidValue { param, .. }
            | Self::OutOfRange { param, .. }
            | Self::Empty { param }
            | Self::TooLong { param, .. }
            | Self::Unsupported { param, .. }
            | Self::UnknownParameter { param }
            | Self::FileTooLarge { param, .. }
            | Self::UnsupportedFileType { param } => Some(param),
            Self::InvalidSize(_) => Some("size"),
            Self::ModelNotAccepted { .. } | Self::ImageModelAsMainModel { .. } => Some("model"),
            Self::PartialImagesWithoutStream => Some("partial_images"),
            Self::TooManyImages { .. } => Some("image"),
            Self::InvalidMask(_) => Some("mask"),
        }
    }

    /// The class of error the gateway answers with.
    pub fn kind(&self) -> ErrorKind {
        match self {
            Self::UnknownParameter { .. } => ErrorKind::UnknownParameter,
            Self::ModelNotAccepted { .. } => ErrorKind::ModelNotFound,
            Self::FileTooLarge { .. } => ErrorKind::PayloadTooLarge,
            Self::Missing { .. }
            | Self::InvalidType { .. }
            | Self::InvalidValue { .. }
            | Self::OutOfRange { .. }
            | Self::Empty { .. }
            | Self::TooLong { .. }
            | Self::InvalidSize(_)
            | Self::Unsupported { .. }
            | Self::ImageModelAsMainModel { .. }
            | Self::PartialImagesWithoutStream
            | Self::TooManyImages { .. }
            | Self::UnsupportedFileType { .. }
            | Self::InvalidMask(_) => ErrorKind::InvalidRequest,
        }
    }
}

impl From<SizeError> for RequestError {
    fn from(err: SizeError) -> Self {
        Self::InvalidSize(err)
    }
}

impl From<MaskError> for RequestError {
    fn from(err: MaskError) -> Self {
        Self::InvalidMask(err)
    }
}

/// Longest echo of a caller's value kept in an error message, in characters.
pub(crate) const MAX_ECHO_CHARS: usize = 64;

/// Shortens a caller-supplied value before it is echoed in an error message.
pub(crate) fn echo(value: &str) -> String {
    match value.char_indices().nth(MAX_ECHO_CHARS) {
        Some((cut, _)) => format!("{}…", value.get(..cut).unwrap_or_default()),
        None => value.to_owned(),
    }
}

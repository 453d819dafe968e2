//! Every way an upstream call can fail, classified once ([`Failure`], [`FailureKind`]), and what the
//! client is shown for it ([`Failure::client_error`]).
//!
//! [`classify_response`] turns an HTTP error answer into a [`Failure`]; [`reset`] finds when a
//! rate-limited account can be used again.

mod classify;
pub mod reset;

pub use classify::{classify_error_object, classify_response, classify_transport};

use imagegate_codec::ApiError;
use imagegate_codec::sse::SseEvent;
use imagegate_domain::{ErrorKind, Usage};

/// The class of a failure: what it says about the account and about the request.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum FailureKind {
    /// HTTP 429 (usage limit, rate limit, quota): the account is unusable until `reset_at_unix_ms`
    /// (unknown when `None`). `images_only` when the limit concerns image generation only.
    RateLimited {
        /// When the limit resets, unix milliseconds.
        reset_at_unix_ms: Option<u64>,
        /// The limit concerns images only (other use of the account is not limited).
        images_only: bool,
    },
    /// HTTP 401: the credential was refused.
    Unauthorized,
    /// HTTP 403. `json_body` is false when the answer was not an API error (e.g. an HTML page from
    /// a proxy in front of the upstream), which says nothing about the account.
    Forbidden {
        /// The body was a JSON object.
        json_body: bool,
    },
    /// Connection failure, connect timeout, HTTP 408/409/5xx, an HTML error page, a stream cut
    /// short: worth trying on another account.
    Transient,
    /// The call's deadline passed.
    Timeout,
    /// A relayed answer outlived its client's own budget: the client took what it was handed so
    /// slowly that it held the stream for longer than the call's deadline. Not the account's
    /// fault (see `openai::read_clock`).
    ClientTooSlow,
    /// The content policy refused the request (e.g. `moderation_blocked`). Shown to the client as
    /// 502 `Upstream request failed` with the upstream's message and code, not to be retried; not
    /// the account's fault.
    Refused,
    /// The upstream refused the request as invalid (other 4xx with an API error). Shown to the
    /// client as the upstream sent it; not the account's fault.
    Invalid,
    /// The upstream does not serve the model (e.g. `model_not_found`, "model is not supported").
    ModelUnsupported,
    /// HTTP 200 without an image.
    NoImage,
    /// An answer that does not follow the protocol (unparseable, too large, wrong content type).
    Protocol,
}

impl FailureKind {
    /// A short lowercase name, for logs and metrics labels.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::RateLimited { .. } => "rate_limited",
            Self::Unauthorized => "unauthorized",
            Self::Forbidden { .. } => "forbidden",
            Self::Transient => "transient",
            Self::Timeout => "timeout",
            Self::ClientTooSlow => "client_too_slow",
            Self::Refused => "refused",
            Self::Invalid => "invalid",
            Self::ModelUnsupported => "model_unsupported",
            Self::NoImage => "no_image",
            Self::Protocol => "protocol",
        }
    }
}

/// One classified upstream failure.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct Failure {
    /// The class.
    pub kind: FailureKind,
    /// The upstream HTTP status, when an answer was received.
    pub status: Option<u16>,
    /// What happened, in words that never contain a credential or image data (for logs and for the
    /// `Upstream request failed: <cause>` message).
    pub message: String,
    /// The upstream's own error, to show the client as it is ([`FailureKind::Refused`] and
    /// [`FailureKind::Invalid`]).
    pub passthrough: Option<ApiError>,
    /// The stream's own final event that carried the failure (a `response.failed` whose limit is
    /// the account's): relayed as it is to a client that already has the headers, so its SDK sees
    /// the ending it expects.
    pub final_event: Option<Box<SseEvent>>,
    /// What the account already made before it failed (a subscription account makes `n` images
    /// one call at a time): the images are lost with the failure, not the tokens they cost.
    pub spent: Option<Box<Spent>>,
}

/// Images an upstream finished before the call failed, and the tokens it billed for them and for
/// the failed call itself.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Spent {
    /// How many images were finished.
    pub images: u32,
    /// Their tokens, summed.
    pub usage: Usage,
}

/// What a call in progress has already made, readable by its caller at any time: a caller that
/// gives the call up (its client left) still learns what the account spent. A subscription
/// account making `n` images one call at a time reports into it. Once the call has returned, its
/// answer (or failure, see [`Failure::spent`]) says it all, and the caller stops reading the cell
/// when it has taken the answer's usage.
#[derive(Debug, Default)]
pub struct SpentSoFar(std::sync::Mutex<Option<Spent>>);

impl SpentSoFar {
    /// What the call has made so far, if anything; taking it empties the cell.
    pub fn take(&self) -> Option<Spent> {
        self.0.lock().ok().and_then(|mut slot| slot.take())
    }

    pub(crate) fn set(&self, spent: Spent) {
        if let Ok(mut slot) = self.0.lock() {
            *slot = Some(spent);
        }
    }
}

impl Failure {
    /// A failure of `kind` with `message`, no status and no passthrough.
    pub fn new(kind: FailureKind, message: impl Into<String>) -> Self {
        Self {
            kind,
            status: None,
            message: message.into(),
            passthrough: None,
            final_event: None,
            spent: None,
        }
    }

    /// Sets the upstream status.
    #[must_use]
    pub fn with_status(mut self, status: u16) -> Self {
        self.status = Some(status);
        self
    }

    /// Sets the error shown to the client as it is.
    #[must_use]
    pub fn with_passthrough(mut self, error: ApiError) -> Self {
        self.passthrough = Some(error);
        self
    }

    /// Sets the final event relayed as it is once the client has the headers.
    #[must_use]
    pub fn with_final_event(mut self, event: SseEvent) -> Self {
        self.final_event = Some(Box::new(event));
        self
    }

    /// Adds to what the failure says the account spent: images it made before the failure, or
    /// tokens the failed call reports for no image. Nothing is noted for no image and no token.
    #[must_use]
    pub fn with_spent(mut self, images: u32, usage: Usage) -> Self {
        let before = self.spent.take().map(|spent| *spent).unwrap_or_default();
        let spent = Spent {
            images: before.images.saturating_add(images),
            usage: before.usage.saturating_add(usage),
        };
        if spent.images > 0 || spent.usage != Usage::default() {
            self.spent = Some(Box::new(spent));
        }
        self
    }

    /// [`FailureKind::Transient`].
    pub fn transient(message: impl Into<String>) -> Self {
        Self::new(FailureKind::Transient, message)
    }

    /// [`FailureKind::Protocol`].
    pub fn protocol(message: impl Into<String>) -> Self {
        Self::new(FailureKind::Protocol, message)
    }

    /// [`FailureKind::Timeout`] after `deadline`.
    pub fn timeout(deadline: std::time::Duration) -> Self {
        Self::new(
            FailureKind::Timeout,
            format!("the upstream did not finish within {} s", deadline.as_secs_f64()),
        )
    }

    /// [`FailureKind::ClientTooSlow`] with a budget of `deadline`.
    pub fn client_too_slow(deadline: std::time::Duration) -> Self {
        Self::new(
            FailureKind::ClientTooSlow,
            format!(
                "the client read it too slowly and held the stream for longer than {} s",
                deadline.as_secs_f64()
            ),
        )
    }

    /// [`FailureKind::NoImage`].
    pub fn no_image() -> Self {
        Self::new(FailureKind::NoImage, "the upstream answer holds no image")
    }

    /// When the account can be used again, for [`FailureKind::RateLimited`].
    pub fn reset_at_unix_ms(&self) -> Option<u64> {
        match self.kind {
            FailureKind::RateLimited { reset_at_unix_ms, .. } => reset_at_unix_ms,
            _ => None,
        }
    }

    /// What the client sees when this failure is final (no other account is tried):
    ///
    /// - [`FailureKind::Refused`] and [`FailureKind::Invalid`]: the upstream's error as it is;
    /// - [`FailureKind::RateLimited`]: 429 `usage_limit_reached`;
    /// - [`FailureKind::Timeout`]: 504 `Upstream request failed: <cause>`;
    /// - [`FailureKind::ClientTooSlow`]: 408 `client_too_slow` (seen only by a client still reading,
    ///   and kept in its usage record and metrics as a client-side failure);
    /// - everything else: 502 `Upstream request failed: <cause>`.
    pub fn client_error(&self) -> ApiError {
        if let Some(passthrough) = &self.passthrough {
            return passthrough.clone();
        }
        match self.kind {
            FailureKind::RateLimited { .. } => ApiError::new(
                ErrorKind::UsageLimitReached,
                "The upstream usage limit has been reached. Try again later.",
            ),
            FailureKind::Timeout => ApiError::new(
                ErrorKind::UpstreamTimeout,
                format!("Upstream request failed: {}", self.message),
            ),
            FailureKind::ClientTooSlow => ApiError::new(
                ErrorKind::ClientTooSlow,
                format!("The answer was cut because {}", self.message),
            ),
            _ => ApiError::upstream_failed(Some(&self.message)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn passthrough_is_shown_as_it_is() {
        let upstream = ApiError::new(
            ErrorKind::ContentPolicy,
            "Your request was rejected by the safety system.",
        )
        .with_code("moderation_blocked");
        let failure = Failure::new(FailureKind::Refused, "refused")
            .with_status(400)
            .with_passthrough(upstream.clone());
        assert_eq!(failure.client_error(), upstream);
    }

    #[test]
    fn rate_limit_becomes_usage_limit_reached() {
        let failure = Failure::new(
            FailureKind::RateLimited {
                reset_at_unix_ms: Some(5),
                images_only: false,
            },
            "limited",
        );
        let err = failure.client_error();
        assert_eq!(err.status(), 429);
        assert_eq!(err.code(), Some("usage_limit_reached"));
        assert_eq!(failure.reset_at_unix_ms(), Some(5));
    }

    #[test]
    fn timeout_is_504_and_others_502() {
        let err = Failure::timeout(Duration::from_secs(120)).client_error();
        assert_eq!(err.status(), 504);
        assert_eq!(
            err.message,
            "Upstream request failed: the upstream did not finish within 120 s"
        );
        let err = Failure::no_image().client_error();
        assert_eq!(err.status(), 502);
        assert_eq!(
            err.message,
            "Upstream request failed: the upstream answer holds no image"
        );
        let err = Failure::new(
            FailureKind::Unauthorized,
            "the upstream refused the credential (HTTP 401)",
        )
        .client_error();
        assert_eq!(err.status(), 502);
        assert!(err.message.starts_with("Upstream request failed: "));
    }

    #[test]
    fn a_client_too_slow_is_named_as_such() {
        let err = Failure::client_too_slow(Duration::from_secs(300)).client_error();
        assert_eq!(err.status(), 408);
        assert_eq!(err.code(), Some("client_too_slow"));
        assert_eq!(
            err.message,
            "The answer was cut because the client read it too slowly and held the stream for longer than 300 s"
        );
    }
}

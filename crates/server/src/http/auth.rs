//! Bearer-key authentication for `/v1`: every key that may not be used gets 401
//! `INVALID_API_KEY`. Missing, malformed, unknown and wrong-secret keys all get the same message;
//! a genuine key presented with its secret is told why it is refused (disabled, suspended, deleted,
//! or its group closed to its owner), which only its holder can learn.
//!
//! While the database is unreachable, keys seen recently keep working from the key cache; any
//! other key gets 503 `database_unavailable` with `retry-after: 5` (see "Degraded modes" in
//! docs/architecture.md).

use std::sync::Arc;
use std::time::Duration;

use axum::extract::FromRequestParts;
use axum::http::header::AUTHORIZATION;
use axum::http::request::Parts;
use imagegate_codec::ApiError;
use imagegate_domain::ErrorKind;
use imagegate_store::{AuthContext, KeyCheck, KeyRefusal};

use crate::http::error::HttpError;
use crate::http::request_id::Arrived;
use crate::metrics::RequestObservation;
use crate::state::AppState;

/// The authenticated caller of a `/v1` request.
#[derive(Debug, Clone)]
pub struct Caller(pub AuthContext);

impl FromRequestParts<Arc<AppState>> for Caller {
    type Rejection = HttpError;

    async fn from_request_parts(parts: &mut Parts, state: &Arc<AppState>) -> Result<Self, Self::Rejection> {
        authenticate(parts, state).await.inspect_err(|refused| {
            // No usage record is started for a caller not known: the metrics count it here.
            let arrived = parts.extensions.get::<Arrived>().map(|a| a.0);
            // The path as the client sent it (`/v1` is nested, and stripped from `parts.uri`).
            let original = parts.extensions.get::<axum::extract::OriginalUri>();
            state.metrics.observe(&RequestObservation {
                endpoint: original.map_or(parts.uri.path(), |uri| uri.0.path()),
                status: refused.api.status(),
                model: "",
                size_class: None,
                total: arrived.map(|at| at.elapsed()).unwrap_or_default(),
                upstream: Duration::ZERO,
                pool_wait: None,
                kept_alive: false,
            });
        })
    }
}

/// The caller presenting the bearer key of `parts`, or the error that refuses it.
async fn authenticate(parts: &Parts, state: &AppState) -> Result<Caller, HttpError> {
    let presented = parts
        .headers
        .get(AUTHORIZATION)
        .and_then(|value| value.to_str().ok())
        .and_then(bearer_token)
        .ok_or_else(|| HttpError::new(ApiError::invalid_api_key()))?;
    match state.keys.check(presented).await {
        Ok(KeyCheck::Valid(context)) => Ok(Caller(context)),
        Ok(KeyCheck::Unknown) => Err(HttpError::new(ApiError::invalid_api_key())),
        Ok(KeyCheck::Refused(refusal)) => Err(HttpError::new(ApiError::new(
            ErrorKind::InvalidApiKey,
            refusal_message(refusal),
        ))),
        Err(err) if err.is_unavailable() => {
            tracing::warn!(error = %err, "key lookup failed: database unavailable");
            Err(database_unavailable())
        }
        Err(err) => {
            tracing::error!(error = %err, "key lookup failed");
            Err(HttpError::new(ApiError::internal()))
        }
    }
}

/// What the holder of a genuine key that may not be used is told, and what to do about it.
fn refusal_message(refusal: KeyRefusal) -> &'static str {
    match refusal {
        KeyRefusal::Disabled => {
            "This API key is disabled. Enable it again on the /keys page, or use another key."
        }
        KeyRefusal::Suspended => {
            "This API key was suspended by an administrator. Ask an administrator to reinstate it, or use another key."
        }
        KeyRefusal::Deleted => "This API key was deleted. Create a new one on the /keys page.",
        KeyRefusal::GroupClosed => {
            "This API key's group is open to its members only, and the key's owner is not one. Ask an \
             administrator for access, or create a key in another group on the /keys page."
        }
    }
}

/// How long clients are told to wait when a key cannot be checked.
const DATABASE_RETRY_AFTER: Duration = Duration::from_secs(5);

/// 503 `database_unavailable`: the key is not in the cache and the database cannot be asked.
fn database_unavailable() -> HttpError {
    HttpError::new(
        ApiError::new(
            ErrorKind::Overloaded,
            "The key could not be checked because the gateway's database is unavailable. Retry shortly.",
        )
        .with_code("database_unavailable"),
    )
    .with_retry_after(Some(DATABASE_RETRY_AFTER))
}

/// The token of an `Authorization: Bearer <token>` header (scheme case-insensitive).
fn bearer_token(header: &str) -> Option<&str> {
    let (scheme, token) = header.trim().split_once(' ')?;
    let token = token.trim();
    (scheme.eq_ignore_ascii_case("bearer") && !token.is_empty()).then_some(token)
}

#[cfg(test)]
mod tests {
    use std::collections::HashSet;

    use imagegate_codec::ApiError;
    use imagegate_store::KeyRefusal;

    use super::{bearer_token, refusal_message};

    #[test]
    fn each_refusal_says_why_and_what_to_do() {
        let cases = [
            (KeyRefusal::Disabled, "disabled", "Enable it again"),
            (KeyRefusal::Suspended, "suspended", "Ask an administrator"),
            (KeyRefusal::Deleted, "deleted", "Create a new one"),
            (KeyRefusal::GroupClosed, "members only", "Ask an administrator"),
        ];
        let generic = ApiError::invalid_api_key();
        let mut seen = HashSet::new();
        for (refusal, why, what) in cases {
            let message = refusal_message(refusal);
            assert!(
                message.contains(why) && message.contains(what),
                "{refusal:?}: {message}"
            );
            assert!(seen.insert(message), "{refusal:?} shares its message");
            assert!(
                !format!("{generic:?}").contains(message),
                "{refusal:?} reads like an unknown key"
            );
        }
    }

    #[test]
    fn bearer_tokens_are_extracted() {
        assert_eq!(bearer_token("Bearer sk-ig-a-b"), Some("sk-ig-a-b"));
        assert_eq!(bearer_token("bearer   sk-ig-a-b "), Some("sk-ig-a-b"));
        assert_eq!(bearer_token("Basic abc"), None);
        assert_eq!(bearer_token("Bearer "), None);
        assert_eq!(bearer_token("sk-ig-a-b"), None);
    }
}

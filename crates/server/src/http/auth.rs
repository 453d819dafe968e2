//! Bearer-key authentication for `/v1`: every failure is the same 401 `INVALID_API_KEY`.

use std::sync::Arc;

use axum::extract::FromRequestParts;
use axum::http::header::AUTHORIZATION;
use axum::http::request::Parts;
use imagegate_codec::ApiError;
use imagegate_store::AuthContext;

use crate::http::error::HttpError;
use crate::state::AppState;

/// The authenticated caller of a `/v1` request.
#[derive(Debug, Clone)]
pub struct Caller(pub AuthContext);

impl FromRequestParts<Arc<AppState>> for Caller {
    type Rejection = HttpError;

    async fn from_request_parts(parts: &mut Parts, state: &Arc<AppState>) -> Result<Self, Self::Rejection> {
        let presented = parts
            .headers
            .get(AUTHORIZATION)
            .and_then(|value| value.to_str().ok())
            .and_then(bearer_token)
            .ok_or_else(|| HttpError::new(ApiError::invalid_api_key()))?;
        match state.keys.authenticate(presented).await {
            Ok(Some(context)) => Ok(Caller(context)),
            Ok(None) => Err(HttpError::new(ApiError::invalid_api_key())),
            Err(err) => {
                tracing::error!(error = %err, "key lookup failed");
                Err(HttpError::new(ApiError::internal()))
            }
        }
    }
}

/// The token of an `Authorization: Bearer <token>` header (scheme case-insensitive).
fn bearer_token(header: &str) -> Option<&str> {
    let (scheme, token) = header.trim().split_once(' ')?;
    let token = token.trim();
    (scheme.eq_ignore_ascii_case("bearer") && !token.is_empty()).then_some(token)
}

#[cfg(test)]
mod tests {
    use super::bearer_token;

    #[test]
    fn bearer_tokens_are_extracted() {
        assert_eq!(bearer_token("Bearer sk-ig-a-b"), Some("sk-ig-a-b"));
        assert_eq!(bearer_token("bearer   sk-ig-a-b "), Some("sk-ig-a-b"));
        assert_eq!(bearer_token("Basic abc"), None);
        assert_eq!(bearer_token("Bearer "), None);
        assert_eq!(bearer_token("sk-ig-a-b"), None);
    }
}

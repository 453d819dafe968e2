//! Cross-site request forgery protection: every POST form carries a token that must match the
//! session's (or, on the login form, the login cookie's), compared in constant time.
//!
//! The check is one middleware over every console route, so no handler can forget it.

use axum::body::{Body, to_bytes};
use axum::extract::{Request, State};
use axum::http::Method;
use axum::middleware::Next;
use axum::response::{IntoResponse, Redirect, Response};
use serde::Deserialize;
use subtle::ConstantTimeEq;

use crate::cookies::{self, LOGIN_COOKIE};
use crate::error::ConsoleError;
use crate::session::{SessionToken, random_hex};
use crate::state::ConsoleState;

/// Largest form body accepted (the console's forms are small).
const MAX_FORM_BYTES: usize = 64 * 1024;

/// A fresh 256-bit token as hex.
pub(crate) fn new_token() -> String {
    random_hex(32)
}

/// Whether a presented token equals the expected one, in constant time; an empty expected token
/// never matches.
pub(crate) fn tokens_match(expected: &str, presented: &str) -> bool {
    !expected.is_empty() && bool::from(expected.as_bytes().ct_eq(presented.as_bytes()))
}

#[derive(Deserialize)]
struct TokenField {
    csrf: Option<String>,
}

/// Middleware: lets safe methods through; for anything else reads the form body, checks its
/// `csrf` field, and passes the request on with the body restored.
pub(crate) async fn require_token(
    State(state): State<ConsoleState>,
    request: Request,
    next: Next,
) -> Response {
    if matches!(*request.method(), Method::GET | Method::HEAD | Method::OPTIONS) {
        return next.run(request).await;
    }
    let (parts, body) = request.into_parts();
    let Ok(bytes) = to_bytes(body, MAX_FORM_BYTES).await else {
        return ConsoleError::BadRequest("The form is too large.".to_owned()).into_response();
    };
    let presented = serde_html_form::from_bytes::<TokenField>(&bytes)
        .ok()
        .and_then(|f| f.csrf)
        .unwrap_or_default();
    let expected = if parts.uri.path() == "/login" {
        cookies::read(&parts.headers, LOGIN_COOKIE).unwrap_or_default()
    } else {
        let token =
            cookies::read(&parts.headers, cookies::SESSION_COOKIE).and_then(|v| SessionToken::parse(&v));
        let session = match token {
            Some(token) => match state.sessions.get(&token.key()).await {
                Ok(session) => session,
                Err(err) => return ConsoleError::from(err).into_response(),
            },
            None => None,
        };
        match session {
            Some(session) => session.csrf_token,
            // Signed out (or the session expired): sign in again.
            None => return Redirect::to("/login").into_response(),
        }
    };
    if !tokens_match(&expected, &presented) {
        tracing::info!(
            path = parts.uri.path(),
            "console form refused: missing or wrong CSRF token"
        );
        return ConsoleError::CsrfRejected.into_response();
    }
    next.run(Request::from_parts(parts, Body::from(bytes))).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_compare_exactly() {
        let token = new_token();
        assert_eq!(token.len(), 64);
        assert!(tokens_match(&token, &token.clone()));
        assert!(!tokens_match(&token, &new_token()));
        assert!(!tokens_match(&token, ""));
        assert!(!tokens_match(&token, &token[..63]));
        assert!(!tokens_match("", ""));
    }
}

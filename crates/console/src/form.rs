//! `application/x-www-form-urlencoded` bodies and query strings, with repeated keys (`groups=1&groups=2`)
//! read into `Vec`s.

use axum::body::to_bytes;
use axum::extract::{FromRequest, FromRequestParts, Request};
use axum::http::request::Parts;
use serde::de::DeserializeOwned;

use crate::error::ConsoleError;

/// Largest form body read.
const MAX_FORM_BYTES: usize = 64 * 1024;

/// A form body.
#[derive(Debug)]
pub(crate) struct HtmlForm<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned> FromRequest<S> for HtmlForm<T> {
    type Rejection = ConsoleError;

    async fn from_request(request: Request, _state: &S) -> Result<Self, Self::Rejection> {
        let bytes = to_bytes(request.into_body(), MAX_FORM_BYTES)
            .await
            .map_err(|_| ConsoleError::BadRequest("The form is too large.".to_owned()))?;
        serde_html_form::from_bytes(&bytes)
            .map(Self)
            .map_err(|e| ConsoleError::BadRequest(format!("The form could not be read: {e}")))
    }
}

/// A query string (missing: every field at its default).
#[derive(Debug)]
pub(crate) struct HtmlQuery<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned> FromRequestParts<S> for HtmlQuery<T> {
    type Rejection = ConsoleError;

    async fn from_request_parts(parts: &mut Parts, _state: &S) -> Result<Self, Self::Rejection> {
        let query = parts.uri.query().unwrap_or_default();
        serde_html_form::from_str(query)
            .map(Self)
            .map_err(|e| ConsoleError::BadRequest(format!("The query could not be read: {e}")))
    }
}

/// `None` for an empty or blank field, else the trimmed text.
pub(crate) fn non_blank(value: &str) -> Option<String> {
    let trimmed = value.trim();
    (!trimmed.is_empty()).then(|| trimmed.to_owned())
}

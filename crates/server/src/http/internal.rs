//! `/internal/*`: the running gateway's live state for local admin commands (token-protected).

use std::sync::Arc;

use axum::Json;
use axum::extract::State;
use axum::http::HeaderMap;
use axum::http::header::AUTHORIZATION;
use axum::response::{IntoResponse, Response};
use imagegate_codec::ApiError;
use imagegate_domain::ErrorKind;

use crate::control::token_matches;
use crate::http::error::HttpError;
use crate::state::AppState;

/// `GET /internal/pool`: the dispatcher's snapshot.
pub async fn pool(State(app): State<Arc<AppState>>, headers: HeaderMap) -> Response {
    let presented = headers
        .get(AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .unwrap_or_default();
    if !token_matches(presented, &app.internal_token) {
        return HttpError::new(ApiError::new(
            ErrorKind::PermissionDenied,
            "This endpoint needs the local control token.",
        ))
        .into_response();
    }
    match app.dispatcher.snapshot().await {
        Ok(snapshot) => Json(snapshot).into_response(),
        Err(err) => {
            tracing::error!(error = %err, "pool snapshot failed");
            HttpError::new(ApiError::internal()).into_response()
        }
    }
}

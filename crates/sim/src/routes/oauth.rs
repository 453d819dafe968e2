//! `POST /oauth/token`: the `refresh_token` grant of a ChatGPT-subscription sign-in service.
//!
//! The JSON body `{"client_id", "grant_type": "refresh_token", "refresh_token", "scope"}` is answered
//! with `{"access_token", "refresh_token", "id_token", "expires_in", "token_type", "scope"}`. Refusals
//! follow the service: an unknown refresh token is 400 `{"error": "invalid_grant"}`, a used one 401
//! with the error code `refresh_token_reused`. Scripted faults apply when their rule names the path
//! `/oauth/token` (a rule's `key` is then matched against the refresh token).

use axum::Json;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use serde_json::{Value, json};

use crate::errors::{ApiFailure, fault_response};
use crate::oauth::Exchange;
use crate::simulator::unix_now;
use crate::state::SimState;

/// The path of the token endpoint.
pub const TOKEN_PATH: &str = "/oauth/token";

#[derive(Deserialize)]
struct Grant {
    client_id: Option<String>,
    grant_type: Option<String>,
    refresh_token: Option<String>,
}

/// Handler of `POST /oauth/token`.
pub async fn token(State(state): State<SimState>, body: Bytes) -> Response {
    let object = match serde_json::from_slice::<Value>(&body) {
        Ok(object @ Value::Object(_)) => Some(object),
        _ => None,
    };
    let Some(grant) = object.and_then(|object| serde_json::from_value::<Grant>(object).ok()) else {
        state.stats().record_grant(false, None);
        return oauth_error(
            StatusCode::BAD_REQUEST,
            "invalid_request",
            "The body must be a JSON object.",
        );
    };
    let client_id = grant.client_id.as_deref().filter(|id| !id.is_empty());
    let refused = |status, error, description| {
        state.stats().record_grant(false, client_id);
        oauth_error(status, error, description)
    };
    if grant.grant_type.as_deref() != Some("refresh_token") {
        return refused(
            StatusCode::BAD_REQUEST,
            "unsupported_grant_type",
            "Only the refresh_token grant is supported.",
        );
    }
    if client_id.is_none() {
        return refused(
            StatusCode::UNAUTHORIZED,
            "invalid_client",
            "The client_id is missing.",
        );
    }
    let Some(refresh_token) = grant.refresh_token.as_deref().filter(|t| !t.is_empty()) else {
        return refused(
            StatusCode::BAD_REQUEST,
            "invalid_request",
            "The refresh_token is missing.",
        );
    };
    let config = state.config();
    if let Some(fault) = state.faults().choose(Some(refresh_token), TOKEN_PATH, config) {
        state.stats().record_fault(fault.kind.as_str());
        if let Some(response) = fault_response(&fault, None, &state.next_request_id()) {
            state.stats().record_grant(false, client_id);
            return response;
        }
    }
    match state.oauth().exchange(refresh_token) {
        Exchange::Issued(tokens) => {
            state.stats().record_grant(true, client_id);
            let expires_in = config.access_token_ttl.as_secs();
            Json(json!({
                "access_token": tokens.access_token,
                "refresh_token": tokens.refresh_token,
                "id_token": tokens.id_token(unix_now() + expires_in),
                "expires_in": expires_in,
                "token_type": "Bearer",
                "scope": "openid profile email offline_access",
            }))
            .into_response()
        }
        Exchange::Unknown => refused(
            StatusCode::BAD_REQUEST,
            "invalid_grant",
            "The refresh token is invalid or has been revoked.",
        ),
        Exchange::Reused => {
            state.stats().record_grant(false, client_id);
            ApiFailure::new(
                StatusCode::UNAUTHORIZED,
                "Your refresh token has already been used to generate a new access token. Please try \
                 signing in again.",
                "invalid_request_error",
                None,
                Some("refresh_token_reused"),
            )
            .into_response()
        }
    }
}

fn oauth_error(status: StatusCode, error: &str, description: &str) -> Response {
    (
        status,
        Json(json!({"error": error, "error_description": description})),
    )
        .into_response()
}

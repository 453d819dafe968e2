//! The HTTP surface: routes, layers and handlers.

pub mod auth;
pub mod error;
mod images;
pub mod in_span;
mod internal;
mod json_keepalive;
mod linger;
mod misc;
pub mod request_id;
mod responses;
mod serve_call;
pub mod taken_body;

use std::sync::Arc;

use axum::Router;
use axum::extract::DefaultBodyLimit;
use axum::routing::{get, post};

use crate::state::AppState;

/// Largest JSON body accepted by the generations endpoint.
pub(crate) const GENERATION_BODY_LIMIT: usize = 1024 * 1024;
/// Largest JSON body accepted by the Responses endpoint (it may carry images as data URLs).
pub(crate) const RESPONSES_BODY_LIMIT: usize = 64 * 1024 * 1024;

/// The whole application.
pub fn router(state: Arc<AppState>) -> Router {
    let console = imagegate_console::ConsoleState::with_sessions(
        state.store.clone(),
        Arc::new(crate::console::GatewayConsole { app: state.clone() }),
        state.config.console.clone(),
        state.console_sessions.clone(),
    );
    let console = match &state.console_logins {
        Some(counter) => console.with_shared_login_counter(counter.clone()),
        None => console,
    };
    let v1 = Router::new()
        .route(
            "/images/generations",
            post(images::generations).layer(DefaultBodyLimit::max(GENERATION_BODY_LIMIT)),
        )
        .route("/images/edits", post(images::edits))
        .route(
            "/responses",
            post(responses::create).layer(DefaultBodyLimit::max(RESPONSES_BODY_LIMIT)),
        )
        .route("/models", get(misc::models))
        .route("/models/{id}", get(misc::model))
        .method_not_allowed_fallback(misc::method_not_allowed)
        .layer(axum::middleware::from_fn_with_state(
            state.in_flight.clone(),
            crate::in_flight::layer,
        ))
        .layer(axum::middleware::from_fn(linger::layer));
    Router::new()
        .nest("/v1", v1)
        .route("/healthz", get(misc::healthz))
        .route("/readyz", get(misc::readyz))
        .route("/metrics", get(misc::metrics))
        .route("/internal/pool", get(internal::pool))
        .method_not_allowed_fallback(misc::method_not_allowed)
        .with_state(state)
        // The console answers a method its pages do not take itself (an HTML page, with its
        // security headers).
        .merge(imagegate_console::router(console))
        .fallback(misc::not_found)
        .layer(axum::middleware::from_fn(request_id::layer))
}

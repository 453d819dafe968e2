//! `/v1/models`, `/healthz`, `/readyz` and the 404 for unknown routes.

use std::sync::Arc;

use axum::Json;
use axum::extract::State;
use axum::http::{Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use imagegate_codec::ApiError;
use serde_json::json;

use crate::http::auth::Caller;
use crate::http::error::HttpError;
use crate::pool_backend::RedisStatus;
use crate::state::AppState;

/// Fixed creation time reported for the models (2026-04-21, the snapshot's date).
const MODEL_CREATED: i64 = 1_776_729_600;

pub async fn models(State(app): State<Arc<AppState>>, _caller: Caller) -> Response {
    let ids = app
        .catalog
        .ids()
        .map(str::to_owned)
        .chain(app.config.models.agent_models.iter().cloned());
    let data: Vec<_> = ids
        .map(|id| json!({"id": id, "object": "model", "created": MODEL_CREATED, "owned_by": "system"}))
        .collect();
    Json(json!({"object": "list", "data": data})).into_response()
}

pub async fn healthz() -> Response {
    Json(json!({"status": "ok"})).into_response()
}

/// `GET /readyz`: whether this replica can serve.
///
/// - database down: 503 `not ready` (keys cannot be checked, usage cannot be recorded);
/// - Redis configured but down: **200** `degraded` — the replica still serves, with account and
///   key limits held per replica (see `crate::pool_backend`). A load balancer must keep routing
///   to it: Redis is shared, so a Redis blip would otherwise drain every replica at once;
/// - otherwise 200 `ready`.
///
/// Body: `{"status": "ready"|"degraded"|"not ready", "database": "ok"|"unavailable",
/// "redis": "ok"|"unavailable"|"not_configured"}`.
pub async fn readyz(State(app): State<Arc<AppState>>) -> Response {
    let (database, redis) = tokio::join!(app.store.ping(), app.pool_backend.redis_status());
    let database_ok = match database {
        Ok(()) => true,
        Err(err) => {
            tracing::warn!(error = %err, "database not ready");
            false
        }
    };
    let (code, status) = match (database_ok, redis) {
        (false, _) => (StatusCode::SERVICE_UNAVAILABLE, "not ready"),
        (true, RedisStatus::Unavailable) => (StatusCode::OK, "degraded"),
        (true, _) => (StatusCode::OK, "ready"),
    };
    let body = json!({
        "status": status,
        "database": if database_ok { "ok" } else { "unavailable" },
        "redis": redis.as_str(),
    });
    (code, Json(body)).into_response()
}

/// `GET /metrics`: Prometheus / OpenMetrics text.
pub async fn metrics(State(app): State<Arc<AppState>>) -> Response {
    let pool = match app.dispatcher.snapshot().await {
        Ok(pool) => Some(pool),
        Err(err) => {
            tracing::warn!(error = %err, "metrics: pool state unavailable");
            None
        }
    };
    let text = crate::metrics::render(&app.metrics, pool.as_ref(), &app.usage.stats());
    (
        [(
            axum::http::header::CONTENT_TYPE,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        )],
        text,
    )
        .into_response()
}

pub async fn not_found(method: Method, uri: Uri) -> Response {
    HttpError::new(ApiError::route_not_found(method.as_str(), uri.path())).into_response()
}

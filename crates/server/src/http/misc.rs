//! `/v1/models`, `/healthz`, `/readyz`, and the 404 and 405 for unknown routes and methods.

use std::sync::Arc;

use axum::Json;
use axum::extract::rejection::PathRejection;
use axum::extract::{OriginalUri, Path, State};
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
    let data: Vec<_> = model_ids(&app).map(model_object).collect();
    Json(json!({"object": "list", "data": data})).into_response()
}

/// `GET /v1/models/{id}`: one model of the list, or 404 `model_not_found`.
pub async fn model(
    State(app): State<Arc<AppState>>,
    _caller: Caller,
    id: Result<Path<String>, PathRejection>,
) -> Response {
    let Ok(Path(id)) = id else {
        return HttpError::new(ApiError::model_not_found("(not UTF-8)")).into_response();
    };
    match model_ids(&app).find(|known| *known == id) {
        Some(known) => Json(model_object(known)).into_response(),
        None => HttpError::new(ApiError::model_not_found(&id)).into_response(),
    }
}

/// The image models the gateway accepts, then the text/agent models it lists.
fn model_ids(app: &AppState) -> impl Iterator<Item = &str> {
    app.catalog
        .ids()
        .chain(app.config.models.agent_models.iter().map(String::as_str))
}

fn model_object(id: &str) -> serde_json::Value {
    json!({"id": id, "object": "model", "created": MODEL_CREATED, "owned_by": "system"})
}

pub async fn healthz() -> Response {
    Json(json!({"status": "ok"})).into_response()
}

/// `GET /readyz`: whether this replica can serve, and how.
///
/// The gateway keeps serving when a shared dependency is down, so `/readyz` stays **200** and says
/// `degraded`: both the database and Redis are shared, so failing the check would make a load
/// balancer drain every replica at the same moment, although each can still serve.
///
/// - database down: `degraded` — keys this replica has seen keep working (stale-if-error), unknown
///   keys get 503 `database_unavailable`, usage records go to the local spool and are written once
///   the database is back (see `imagegate_store::UsageSpool`);
/// - Redis configured but down: `degraded` — account and key limits are held per replica (see
///   `crate::pool_backend`);
/// - otherwise `ready`.
///
/// Body: `{"status": "ready"|"degraded", "database": "ok"|"unavailable",
/// "redis": "ok"|"unavailable"|"not_configured"}`. The database ping gives up after
/// [`READY_PING_TIMEOUT`] so a hung connection cannot hang the health check.
pub async fn readyz(State(app): State<Arc<AppState>>) -> Response {
    let ping = tokio::time::timeout(READY_PING_TIMEOUT, app.store.ping());
    let (database, redis) = tokio::join!(ping, app.pool_backend.redis_status());
    let database_ok = match database {
        Ok(Ok(())) => true,
        Ok(Err(err)) => {
            tracing::warn!(error = %err, "readyz: database unavailable");
            false
        }
        Err(_) => {
            tracing::warn!("readyz: database ping timed out");
            false
        }
    };
    let degraded = !database_ok || matches!(redis, RedisStatus::Unavailable);
    let body = json!({
        "status": if degraded { "degraded" } else { "ready" },
        "database": if database_ok { "ok" } else { "unavailable" },
        "redis": redis.as_str(),
    });
    (StatusCode::OK, Json(body)).into_response()
}

/// How long `/readyz` waits for the database to answer a ping.
const READY_PING_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(2);

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

/// A known path asked with a method it does not take.
pub async fn method_not_allowed(method: Method, OriginalUri(uri): OriginalUri) -> Response {
    HttpError::new(ApiError::method_not_allowed(method.as_str(), uri.path())).into_response()
}

pub async fn not_found(method: Method, uri: Uri) -> Response {
    HttpError::new(ApiError::route_not_found(method.as_str(), uri.path())).into_response()
}

//! The admin API for tests that run the simulator as a separate process (no auth; not counted in stats):
//!
//! - `POST /sim/faults`: append one rule or an array of rules ([`FaultRule`]); answers the active rules.
//! - `GET /sim/faults`: the active rules (with their remaining `times`).
//! - `DELETE /sim/faults`: remove every rule.
//! - `GET /sim/stats`: request counters ([`StatsSnapshot`]) plus the image cache counters.
//! - `POST /sim/stats/reset`: zero the counters.

use axum::body::Bytes;
use axum::extract::State;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde::{Deserialize, Serialize};

use crate::errors::ApiFailure;
use crate::faults::FaultRule;
use crate::render::CacheCounters;
use crate::state::SimState;
use crate::stats::StatsSnapshot;

/// Body of `POST /sim/faults`: one rule or several.
#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum RulesBody {
    Many(Vec<FaultRule>),
    One(FaultRule),
}

/// Answer of the fault endpoints.
#[derive(Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct RulesAnswer {
    /// The rules still active, in the order they are tried.
    pub rules: Vec<FaultRule>,
}

/// Answer of `GET /sim/stats`.
#[derive(Debug, Serialize)]
pub struct StatsAnswer {
    /// Request counters.
    #[serde(flatten)]
    pub stats: StatsSnapshot,
    /// Image cache counters.
    pub cache: CacheCounters,
}

/// The `/sim/...` routes.
pub fn routes() -> Router<SimState> {
    Router::new()
        .route(
            "/sim/faults",
            post(add_faults).get(list_faults).delete(clear_faults),
        )
        .route("/sim/stats", get(stats))
        .route("/sim/stats/reset", post(reset_stats))
}

async fn add_faults(State(state): State<SimState>, body: Bytes) -> Response {
    let rules = match serde_json::from_slice::<RulesBody>(&body) {
        Ok(RulesBody::Many(rules)) => rules,
        Ok(RulesBody::One(rule)) => vec![rule],
        Err(_) => {
            // Parse again as one rule to report the precise problem (unknown fault name, unknown key).
            let detail = serde_json::from_slice::<FaultRule>(&body)
                .err()
                .map_or_else(String::new, |e| e.to_string());
            let message = format!("Invalid fault script: {detail}");
            return ApiFailure::invalid_request(&message, None, None).into_response();
        }
    };
    state.faults().add(rules);
    Json(RulesAnswer {
        rules: state.faults().rules(),
    })
    .into_response()
}

async fn list_faults(State(state): State<SimState>) -> Json<RulesAnswer> {
    Json(RulesAnswer {
        rules: state.faults().rules(),
    })
}

async fn clear_faults(State(state): State<SimState>) -> Json<RulesAnswer> {
    state.faults().clear();
    Json(RulesAnswer { rules: Vec::new() })
}

async fn stats(State(state): State<SimState>) -> Json<StatsAnswer> {
    Json(StatsAnswer {
        stats: state.stats_snapshot(),
        cache: state.simulator().cache_counters(),
    })
}

async fn reset_stats(State(state): State<SimState>) -> Json<StatsAnswer> {
    state.stats().reset();
    Json(StatsAnswer {
        stats: state.stats_snapshot(),
        cache: state.simulator().cache_counters(),
    })
}

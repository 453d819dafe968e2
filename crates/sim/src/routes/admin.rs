//! The admin API for tests that run the simulator as a separate process (no auth; not counted in stats):
//!
//! - `POST /sim/faults`: append one rule or an array of rules ([`FaultRule`]); answers the active rules.
//! - `GET /sim/faults`: the active rules (with their remaining `times`).
//! - `DELETE /sim/faults`: remove every rule.
//! - `GET /sim/stats`: request counters ([`StatsSnapshot`]) plus the image cache counters.
//! - `POST /sim/stats/reset`: zero the counters.
//! - `POST /sim/oauth/refresh_tokens`: make `{"refresh_token", "account_id"?}` (or an array of them)
//!   usable once at `POST /oauth/token`.

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
        .route("/sim/oauth/refresh_tokens", post(register_refresh_tokens))
}

/// One refresh token to register.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RefreshTokenBody {
    refresh_token: String,
    #[serde(default)]
    account_id: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum RefreshTokensBody {
    Many(Vec<RefreshTokenBody>),
    One(RefreshTokenBody),
}

/// Answer of `POST /sim/oauth/refresh_tokens`.
#[derive(Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct RegisteredAnswer {
    /// How many refresh tokens were registered.
    pub registered: usize,
}

async fn register_refresh_tokens(State(state): State<SimState>, body: Bytes) -> Response {
    let tokens = match serde_json::from_slice::<RefreshTokensBody>(&body) {
        Ok(RefreshTokensBody::Many(tokens)) => tokens,
        Ok(RefreshTokensBody::One(token)) => vec![token],
        Err(_) => {
            let message =
                "Expected {\"refresh_token\": \"...\", \"account_id\": \"...\"} or an array of them";
            return ApiFailure::invalid_request(message, None, None).into_response();
        }
    };
    let mut registered = 0;
    for token in tokens.into_iter().filter(|t| !t.refresh_token.is_empty()) {
        state.oauth().register(token.refresh_token, token.account_id);
        registered += 1;
    }
    Json(RegisteredAnswer { registered }).into_response()
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

//! `GET /v1/models` and `GET /v1/models/{id}`: the accepted image models plus the simulated main models.

use axum::Json;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use imagegate_codec::wire::{ModelEntry, ModelList};

use crate::errors::ApiFailure;
use crate::state::SimState;

/// Main (text) models the simulated Responses API reports.
pub const MAIN_MODELS: [&str; 2] = ["gpt-5", "gpt-5-mini"];
const CREATED: i64 = 1_776_729_600;

fn entries(state: &SimState) -> Vec<ModelEntry> {
    let catalog = &state.config().catalog;
    let mut ids: Vec<String> = catalog.ids().map(str::to_owned).collect();
    ids.extend(catalog.aliases().keys().cloned());
    ids.extend(MAIN_MODELS.iter().map(|id| (*id).to_owned()));
    ids.dedup();
    ids.into_iter()
        .map(|id| ModelEntry::new(id, CREATED, "system"))
        .collect()
}

/// Handler of `GET /v1/models`.
pub async fn list(State(state): State<SimState>) -> Json<ModelList> {
    Json(ModelList::new(entries(&state)))
}

/// Handler of `GET /v1/models/{id}`.
pub async fn retrieve(State(state): State<SimState>, Path(id): Path<String>) -> Response {
    match entries(&state).into_iter().find(|entry| entry.id == id) {
        Some(entry) => Json(entry).into_response(),
        None => ApiFailure::new(
            StatusCode::NOT_FOUND,
            &format!("The model `{id}` does not exist or you do not have access to it."),
            "invalid_request_error",
            None,
            Some("model_not_found"),
        )
        .into_response(),
    }
}

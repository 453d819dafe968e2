//! `POST /v1/images/generations` (JSON or SSE), and the answer shared with edits.

use axum::Extension;
use axum::body::Bytes;
use axum::extract::State;
use axum::response::{IntoResponse, Response};

use super::RequestContext;
use super::stream::{cut_document, cut_frames, json_body, paced, sse_response};
use crate::errors::ApiFailure;
use crate::params::{ImageDraft, parse_generation};
use crate::simulator::ImageJob;
use crate::state::SimState;
use crate::wire::{image_stream_events, images_response};

/// Handler of `POST /v1/images/generations`.
pub async fn generations(
    State(state): State<SimState>,
    Extension(context): Extension<RequestContext>,
    body: Bytes,
) -> Response {
    match parse_generation(&body, &state.config().catalog) {
        Ok(ImageDraft { job, stream }) => answer_images(&state, &context, &job, stream).await,
        Err(failure) => failure.into_response(),
    }
}

/// Renders `job` and answers with the Images API JSON, or with the `image_generation.*` / `image_edit.*`
/// event stream when `stream` is set.
pub async fn answer_images(
    state: &SimState,
    context: &RequestContext,
    job: &ImageJob,
    stream: bool,
) -> Response {
    let fewer;
    let job = if context.one_image() {
        fewer = ImageJob { n: 1, ..job.clone() };
        &fewer
    } else {
        job
    };
    let outcome = match state.simulator().generate(job).await {
        Ok(outcome) => outcome,
        Err(error) => return ApiFailure::internal(&error.to_string()).into_response(),
    };
    let deadline = context.start + context.latency;
    if stream {
        let mut frames = image_stream_events(&outcome, !context.no_image())
            .iter()
            .map(|e| e.to_sse())
            .collect();
        if context.truncated() {
            frames = cut_frames(frames);
        }
        return sse_response(paced(frames, context.start, deadline, context.mid_stream_stall()));
    }
    tokio::time::sleep_until(deadline).await;
    let with_images = !context.no_image();
    // A 4K answer is about 13 MB of JSON, milliseconds of encoding: off the async workers, so the
    // simulator keeps serving the other connections meanwhile.
    let encoded = tokio::task::spawn_blocking(move || {
        serde_json::to_vec(&images_response(&outcome, with_images)).map_err(|error| error.to_string())
    })
    .await
    .unwrap_or_else(|error| Err(error.to_string()));
    match encoded {
        Ok(json) if context.truncated() => json_body(cut_document(json), None),
        Ok(json) => json_body(json, context.mid_stream_stall()),
        Err(error) => ApiFailure::internal(&error).into_response(),
    }
}

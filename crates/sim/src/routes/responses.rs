//! `POST /v1/responses` with an `image_generation` tool, as JSON or as an event stream.

use axum::Extension;
use axum::body::Bytes;
use axum::extract::State;
use axum::response::{IntoResponse, Response};
use futures::StreamExt as _;
use futures::stream;
use imagegate_codec::ApiError;
use imagegate_codec::json::decode_responses;
use imagegate_codec::wire::ResponseEventSequencer;
use imagegate_domain::validate_main_model;
use tokio::time::Instant;

use super::RequestContext;
use super::stream::{json_body, paced, sse_response};
use crate::errors::ApiFailure;
use crate::responses::{PlanIds, ResponsesPlan, events};
use crate::state::SimState;

/// Handler of `POST /v1/responses`.
pub async fn create(
    State(state): State<SimState>,
    Extension(context): Extension<RequestContext>,
    body: Bytes,
) -> Response {
    let plan = match plan(&state, &context, &body) {
        Ok(plan) => plan,
        Err(failure) => return failure.into_response(),
    };
    if plan.stream {
        stream_answer(state, context, plan)
    } else {
        json_answer(&state, &context, &plan).await
    }
}

fn plan(state: &SimState, context: &RequestContext, body: &[u8]) -> Result<ResponsesPlan, ApiFailure> {
    let catalog = &state.config().catalog;
    let request = decode_responses(body)?;
    let model = validate_main_model(request.model.as_deref(), catalog).map_err(ApiError::from)?;
    let tools = request.validate_image_tools(catalog)?;
    let simulator = state.simulator();
    let ids = PlanIds {
        response: simulator.next_id("resp"),
        image_call: simulator.next_id("ig"),
        message: simulator.next_id("msg"),
    };
    Ok(ResponsesPlan::new(
        &request,
        model,
        &tools,
        ids,
        !context.no_image(),
    ))
}

async fn json_answer(state: &SimState, context: &RequestContext, plan: &ResponsesPlan) -> Response {
    let outcome = match &plan.job {
        Some(job) => match state.simulator().generate(job).await {
            Ok(outcome) => Some(outcome),
            Err(error) => return ApiFailure::internal(&error.to_string()).into_response(),
        },
        None => None,
    };
    if outcome.is_some() {
        tokio::time::sleep_until(context.start + context.latency).await;
    }
    match serde_json::to_vec(&plan.completed(outcome.as_ref())) {
        Ok(json) => json_body(json, context.mid_stream_stall()),
        Err(error) => ApiFailure::internal(&error.to_string()).into_response(),
    }
}

fn stream_answer(state: SimState, context: RequestContext, plan: ResponsesPlan) -> Response {
    let mut sequencer = ResponseEventSequencer::new();
    let prelude: Vec<Bytes> = events::prelude(&plan, &mut sequencer)
        .iter()
        .map(|e| e.to_sse())
        .collect();
    let deadline = context.start + context.latency;
    let stall = context.mid_stream_stall();
    let rest = async move {
        if let Some(pause) = stall {
            tokio::time::sleep(pause).await;
        }
        let (frames, image_frames) = match &plan.job {
            Some(job) => match state.simulator().generate(job).await {
                Ok(outcome) => {
                    let image_frames = outcome.partials.first().map_or(0, Vec::len) + 1;
                    (
                        events::finish(&plan, Some(&outcome), &mut sequencer),
                        image_frames,
                    )
                }
                Err(error) => {
                    let failed = events::failed(&plan, "server_error", &error.to_string(), &mut sequencer);
                    (vec![failed], 0)
                }
            },
            None => (events::finish(&plan, None, &mut sequencer), 0),
        };
        let mut frames: Vec<Bytes> = frames.iter().map(|e| e.to_sse()).collect();
        let tail = frames.split_off(image_frames.min(frames.len()));
        paced(frames, Instant::now(), deadline, None).chain(stream::iter(tail.into_iter().map(Ok)))
    };
    let body = stream::iter(prelude.into_iter().map(Ok))
        .chain(stream::once(rest).flatten())
        .boxed();
    sse_response(body)
}

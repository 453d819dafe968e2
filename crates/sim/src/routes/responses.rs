//! `POST /v1/responses` with an `image_generation` tool, as JSON or as an event stream.
//!
//! A call made as a ChatGPT subscription makes it (`originator: codex_cli_rs`) is held to the
//! rules of the ChatGPT backend: streamed, not stored, `input` a list, some `instructions`;
//! otherwise it gets the backend's 400 `{"detail": ...}`.

use axum::Extension;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use futures::StreamExt as _;
use futures::stream;
use imagegate_codec::ApiError;
use imagegate_codec::json::{ResponsesBody, decode_responses};
use imagegate_codec::wire::ResponseEventSequencer;
use imagegate_domain::validate_main_model;
use tokio::time::Instant;

use super::RequestContext;
use super::stream::{json_body, paced, sse_response};
use crate::errors::{ApiFailure, fault_response, model_unsupported};
use crate::faults::FaultKind;
use crate::responses::{PlanIds, ResponsesPlan, events};
use crate::state::SimState;

/// The path of the Responses endpoint.
const RESPONSES_PATH: &str = "/v1/responses";

/// Handler of `POST /v1/responses`.
pub async fn create(
    State(state): State<SimState>,
    Extension(mut context): Extension<RequestContext>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let subscription = headers
        .get("originator")
        .is_some_and(|value| value.as_bytes() == b"codex_cli_rs");
    if subscription && let Some(rule) = backend_rule_broken(&body) {
        let detail = serde_json::json!({ "detail": rule });
        return (StatusCode::BAD_REQUEST, axum::Json(detail)).into_response();
    }
    if let Some(inputs) = input_images(&body) {
        state.stats().record_edit_inputs(inputs);
    }
    let request = match decode_responses(&body) {
        Ok(request) => request,
        Err(error) => return ApiFailure::from(error).into_response(),
    };
    if let Some(model) = request.model.as_deref() {
        state.stats().record_main_model(&context.token, model);
        if let Some(response) = model_fault(&state, &mut context, model).await {
            return response;
        }
    }
    let plan = match plan(&state, &context, &request, subscription) {
        Ok(plan) => plan,
        Err(failure) => return failure.into_response(),
    };
    if plan.stream {
        stream_answer(state, context, plan)
    } else {
        json_answer(&state, &context, &plan).await
    }
}

/// Applies a scripted fault whose rule names the main `model`: the immediate answer, or (stalls,
/// `no_image`) the fault set on the context.
async fn model_fault(state: &SimState, context: &mut RequestContext, model: &str) -> Option<Response> {
    let token = Some(context.token.as_str());
    let fault = state
        .faults()
        .choose_for_model(token, RESPONSES_PATH, model, state.config())?;
    state.stats().record_fault(fault.kind.as_str());
    tracing::debug!(fault = fault.kind.as_str(), model, "injecting a model fault");
    if fault.kind == FaultKind::ModelUnsupported {
        return Some(model_unsupported(Some(model)).into_response());
    }
    if let Some(response) = fault_response(&fault, token, &context.request_id) {
        return Some(response);
    }
    if fault.kind == FaultKind::Stall {
        tokio::time::sleep(fault.stall).await;
    }
    context.fault = Some(fault);
    None
}

fn plan(
    state: &SimState,
    context: &RequestContext,
    request: &ResponsesBody,
    subscription: bool,
) -> Result<ResponsesPlan, ApiFailure> {
    let catalog = &state.config().catalog;
    let model = validate_main_model(request.model.as_deref(), catalog).map_err(ApiError::from)?;
    let tools = request.validate_image_tools(catalog)?;
    let simulator = state.simulator();
    let ids = PlanIds {
        response: simulator.next_id("resp"),
        image_call: simulator.next_id("ig"),
        message: simulator.next_id("msg"),
    };
    let mut plan = ResponsesPlan::new(request, model, &tools, ids, !context.no_image());
    plan.image_usage = !context.no_usage();
    plan.unstored = subscription;
    Ok(plan)
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
    let rate_limits = plan.unstored.then(codex_rate_limits);
    let prelude: Vec<Bytes> = rate_limits
        .into_iter()
        .chain(events::prelude(&plan, &mut sequencer).iter().map(|e| e.to_sse()))
        .collect();
    let deadline = context.start + context.latency;
    let stall = context.mid_stream_stall();
    let refused = context.refused_after_image();
    if let Some(retry_after) = context.in_stream_rate_limit() {
        let message = format!("Rate limit reached for image generation. Please try again in {retry_after}s.");
        let failed = events::failed(&plan, "rate_limit_exceeded", &message, None, &mut sequencer);
        let frames = prelude.into_iter().chain(std::iter::once(failed.to_sse()));
        return sse_response(stream::iter(frames.map(Ok)).boxed());
    }
    if context.in_stream_server_error() {
        let message = "The server had an error processing your request.";
        let failed = events::failed(&plan, "server_error", message, None, &mut sequencer);
        let frames = prelude.into_iter().chain(std::iter::once(failed.to_sse()));
        return sse_response(stream::iter(frames.map(Ok)).boxed());
    }
    let rest = async move {
        if let Some(pause) = stall {
            tokio::time::sleep(pause).await;
        }
        let (frames, image_frames) = match &plan.job {
            Some(job) => match state.simulator().generate(job).await {
                Ok(outcome) if refused => {
                    let image_frames = outcome.partials.first().map_or(0, Vec::len);
                    (
                        events::refused_after_image(&plan, &outcome, &mut sequencer),
                        image_frames,
                    )
                }
                Ok(outcome) => {
                    let image_frames = outcome.partials.first().map_or(0, Vec::len) + 1;
                    (
                        events::finish(&plan, Some(&outcome), &mut sequencer),
                        image_frames,
                    )
                }
                Err(error) => {
                    let message = error.to_string();
                    let failed = events::failed(&plan, "server_error", &message, None, &mut sequencer);
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

/// The input images of a Responses call (its messages' `input_image` data URLs, then the image
/// tool's `input_image_mask`) as files received, for the stats' `last_edit_inputs`; none when the
/// call has none.
fn input_images(body: &[u8]) -> Option<Vec<crate::stats::EditInput>> {
    use base64::Engine as _;
    use sha2::Digest as _;
    let body: serde_json::Value = serde_json::from_slice(body).ok()?;
    let mut urls: Vec<(String, &str)> = Vec::new();
    let messages = body.get("input").and_then(serde_json::Value::as_array);
    for message in messages.into_iter().flatten() {
        let parts = message.get("content").and_then(serde_json::Value::as_array);
        for part in parts.into_iter().flatten() {
            if part.get("type").and_then(serde_json::Value::as_str) == Some("input_image")
                && let Some(url) = part.get("image_url").and_then(serde_json::Value::as_str)
            {
                urls.push((format!("input_image[{}]", urls.len()), url));
            }
        }
    }
    let tools = body.get("tools").and_then(serde_json::Value::as_array);
    for tool in tools.into_iter().flatten() {
        if let Some(url) = tool["input_image_mask"]["image_url"].as_str() {
            urls.push(("input_image_mask".to_owned(), url));
        }
    }
    if urls.is_empty() {
        return None;
    }
    let inputs = urls.into_iter().map(|(field, url)| {
        let b64 = url.split_once("base64,").map_or(url, |(_, data)| data);
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(b64)
            .unwrap_or_default();
        crate::stats::EditInput {
            field,
            bytes: bytes.len() as u64,
            sha256: hex::encode(sha2::Sha256::digest(&bytes)),
        }
    });
    Some(inputs.collect())
}

/// The event the ChatGPT backend starts a subscription's stream with: the account's usage windows.
/// Not an event of the Responses API (no sequence number).
fn codex_rate_limits() -> Bytes {
    let data = serde_json::json!({
        "type": "codex.rate_limits",
        "plan_type": "plus",
        "rate_limits": {
            "allowed": true,
            "limit_reached": false,
            "primary": {"used_percent": 12, "window_minutes": 300, "reset_after_seconds": 9000},
            "secondary": {"used_percent": 3, "window_minutes": 10080, "reset_after_seconds": 500_000}
        }
    });
    Bytes::from(format!("event: codex.rate_limits\ndata: {data}\n\n"))
}

/// The first rule of the ChatGPT backend `body` breaks, in the backend's words.
fn backend_rule_broken(body: &[u8]) -> Option<&'static str> {
    let Ok(serde_json::Value::Object(body)) = serde_json::from_slice::<serde_json::Value>(body) else {
        return None;
    };
    if body.get("stream") != Some(&serde_json::Value::Bool(true)) {
        return Some("Stream must be set to true");
    }
    if body.get("store") != Some(&serde_json::Value::Bool(false)) {
        return Some("Store must be set to false");
    }
    let instructions = body.get("instructions").and_then(serde_json::Value::as_str);
    if instructions.is_none_or(|text| text.trim().is_empty()) {
        return Some("Instructions are required");
    }
    if !body.get("input").is_some_and(serde_json::Value::is_array) {
        return Some("Input must be a list");
    }
    None
}

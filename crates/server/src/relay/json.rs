//! Answering with a non-streaming reply: the upstream's JSON body, held once and sent on as is
//! (an Images answer that names no model gets a `"model"` key first),
//! with usage from the upstream crate's scan of it (or, where it did not scan, from a scan here; no
//! parsed copy of the images either way).

use axum::body::Body;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use imagegate_codec::usage_scan::{ModelKey, ResponseSummary, model_key};

use crate::relay::held::Held;
use crate::relay::stream::{OutputItem, ResponsesUsage, ToolUsage, record_response_tokens};
use crate::usage::UsageRecorder;

/// An images response body; `summary` is what a scan of it found, if one was made.
pub fn images_body(
    body: Bytes,
    summary: Option<ResponseSummary>,
    mut usage: UsageRecorder,
    held: Held,
    model: Option<&str>,
) -> Response {
    let summary = summary.unwrap_or_else(|| imagegate_codec::usage_scan::scan(&body));
    // The interface names the model used; the upstream's document may not.
    let key = match summary.names_model {
        true => None,
        false => model.and_then(|model| model_key(&body, model)),
    };
    let images = u32::try_from(summary.images).unwrap_or(u32::MAX);
    usage.produced(
        summary.size.as_deref(),
        summary.quality.as_deref(),
        summary.output_format.as_deref(),
        images,
    );
    if let Some(tokens) = &summary.usage {
        usage.usage(tokens);
    }
    match key {
        Some(key) => send_with_key(body, key, usage, held),
        None => send(body, usage, held),
    }
}

/// Like [`send`], with the model's key put in: the body goes out in three pieces (no copy of it).
fn send_with_key(body: Bytes, key: ModelKey, usage: UsageRecorder, held: Held) -> Response {
    let length = body.len() + key.bytes.len();
    let pieces = [body.slice(..key.at), Bytes::from(key.bytes), body.slice(key.at..)];
    let stream = futures::stream::iter(pieces.map(Ok::<_, std::convert::Infallible>));
    let mut response = send(Bytes::new(), usage, held);
    *response.body_mut() = Body::from_stream(stream);
    response
        .headers_mut()
        .insert(header::CONTENT_LENGTH, HeaderValue::from(length));
    response
}

/// A Responses API body: the main model's usage and the image calls' sizes.
pub fn responses_body(body: Bytes, mut usage: UsageRecorder, held: Held) -> Response {
    if let Ok(head) = serde_json::from_slice::<ResponseHead>(&body) {
        record_response_tokens(&mut usage, head.usage, head.tool_usage);
        for item in head.output.iter().filter(|i| i.kind == "image_generation_call") {
            usage.produced(
                item.size.as_deref(),
                item.quality.as_deref(),
                item.output_format.as_deref(),
                1,
            );
        }
    }
    send(body, usage, held)
}

fn send(body: Bytes, mut usage: UsageRecorder, held: Held) -> Response {
    usage.first_byte();
    usage.finish(200, None);
    drop(held);
    let mut response = (StatusCode::OK, body).into_response();
    response
        .headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
    response
}

#[derive(serde::Deserialize)]
struct ResponseHead {
    usage: Option<ResponsesUsage>,
    tool_usage: Option<ToolUsage>,
    #[serde(default)]
    output: Vec<OutputItem>,
}

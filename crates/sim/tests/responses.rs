//! `POST /v1/responses` with the `image_generation` tool, through the router.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::disallowed_methods
)]

mod common;

use axum::http::StatusCode;
use common::*;
use serde_json::{Value, json};

fn request(stream: bool, partial_images: u8) -> Value {
    json!({
        "model": "gpt-5",
        "stream": stream,
        "store": false,
        "input": [{"role": "user", "content": [{"type": "input_text", "text": "A lighthouse at dusk, watercolor"}]}],
        "tools": [{"type": "image_generation", "model": "gpt-image-2", "size": "1024x640", "quality": "low",
                   "output_format": "png", "partial_images": partial_images}],
        "tool_choice": {"type": "image_generation"}
    })
}

/// Replaces base64 payloads and timestamps so the snapshot is stable and small.
fn redact(value: &mut Value) {
    match value {
        Value::Object(map) => {
            for (key, field) in map.iter_mut() {
                match key.as_str() {
                    "b64_json" | "partial_image_b64" | "result" if field.is_string() => {
                        *field = Value::from("<b64>");
                    }
                    "created_at" | "created" => *field = Value::from(0),
                    _ => redact(field),
                }
            }
        }
        Value::Array(items) => items.iter_mut().for_each(redact),
        _ => {}
    }
}

#[tokio::test]
async fn streamed_response_matches_the_snapshot() {
    let (_, app) = app();
    let answer = send(&app, post_json("/v1/responses", Some(TOKEN), &request(true, 1))).await;
    assert_eq!(answer.status, StatusCode::OK, "{}", answer.text());
    let events = answer.events();
    // Every base64 field holds a real PNG of the requested size.
    let partial = events
        .iter()
        .find(|(name, _)| name == "response.image_generation_call.partial_image")
        .unwrap();
    assert_eq!(
        decode_image(&partial.1["partial_image_b64"]),
        (image::ImageFormat::Png, 1024, 640)
    );
    let done = &events.last().unwrap().1;
    assert_eq!(
        decode_image(&done["response"]["output"][0]["result"]),
        (image::ImageFormat::Png, 1024, 640)
    );
    let mut frames: Value = events
        .into_iter()
        .map(|(name, data)| json!({"event": name, "data": data}))
        .collect();
    redact(&mut frames);
    insta::assert_json_snapshot!("responses_stream", frames);
}

#[tokio::test]
async fn non_streamed_response_carries_the_image_and_both_usages() {
    let (_, app) = app();
    let answer = send(&app, post_json("/v1/responses", Some(TOKEN), &request(false, 2))).await;
    assert_eq!(answer.status, StatusCode::OK, "{}", answer.text());
    let json = answer.json();
    assert_eq!(json["object"], "response");
    assert_eq!(json["status"], "completed");
    assert_eq!(json["model"], "gpt-5");
    assert_eq!(json["store"], false);
    let output = json["output"].as_array().unwrap();
    assert_eq!(output.len(), 2);
    assert_eq!(output[0]["type"], "image_generation_call");
    assert_eq!(output[0]["status"], "completed");
    assert_eq!(output[0]["action"], "generate");
    assert_eq!(output[0]["revised_prompt"], "A lighthouse at dusk, watercolor");
    assert_eq!(
        decode_image(&output[0]["result"]),
        (image::ImageFormat::Png, 1024, 640)
    );
    assert_eq!(output[1]["type"], "message");
    assert_eq!(output[1]["content"][0]["type"], "output_text");
    // Main-model usage and image usage are reported apart; no partial images without streaming.
    let usage = &json["usage"];
    assert_eq!(usage["input_tokens_details"]["cache_write_tokens"], 0);
    assert_eq!(usage["output_tokens_details"]["reasoning_tokens"], 0);
    let image_usage = &json["tool_usage"]["image_gen"];
    assert_eq!(image_usage["output_tokens"], 170);
    assert_eq!(image_usage["input_tokens_details"]["text_tokens"], 8);
    assert_eq!(json["tools"][0]["n"], 1);
}

#[tokio::test]
async fn responses_requests_are_validated() {
    let (_, app) = app();
    let mut image_model = request(false, 0);
    image_model["model"] = json!("gpt-image-2");
    let answer = send(&app, post_json("/v1/responses", Some(TOKEN), &image_model)).await;
    assert_eq!(answer.status, StatusCode::BAD_REQUEST);
    assert_eq!(answer.json()["error"]["param"], "model");
    let mut bad_size = request(false, 0);
    bad_size["tools"][0]["size"] = json!("1000x1000");
    let answer = send(&app, post_json("/v1/responses", Some(TOKEN), &bad_size)).await;
    assert_eq!(answer.status, StatusCode::BAD_REQUEST);
    assert_eq!(answer.json()["error"]["param"], "tools[0].size");
}

#[tokio::test]
async fn without_the_tool_the_response_is_a_message() {
    let (_, app) = app();
    let body = json!({"model": "gpt-5", "input": "hello", "stream": true});
    let events = send(&app, post_json("/v1/responses", Some(TOKEN), &body))
        .await
        .events();
    let names: Vec<&str> = events.iter().map(|(name, _)| name.as_str()).collect();
    assert_eq!(names.first(), Some(&"response.created"));
    assert_eq!(names.last(), Some(&"response.completed"));
    assert!(!names.iter().any(|name| name.contains("image_generation_call")));
    let output = &events.last().unwrap().1["response"]["output"];
    assert_eq!(output.as_array().unwrap().len(), 1);
    assert_eq!(output[0]["type"], "message");
}

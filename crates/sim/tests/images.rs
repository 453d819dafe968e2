//! `POST /v1/images/generations`, `GET /v1/models` and auth, through the router.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::disallowed_methods
)]

mod common;

use axum::http::StatusCode;
use common::*;
use serde_json::json;

#[tokio::test]
async fn generation_returns_n_real_images_with_usage() {
    let (_, app) = app();
    let body = generation("a lighthouse at dusk", json!({"n": 2, "output_format": "webp"}));
    let answer = send(&app, post_json("/v1/images/generations", Some(TOKEN), &body)).await;
    assert_eq!(answer.status, StatusCode::OK);
    assert!(
        answer
            .header("content-type")
            .unwrap()
            .starts_with("application/json")
    );
    assert!(answer.header("x-request-id").unwrap().starts_with("req_"));
    let json = answer.json();
    assert_eq!(json["size"], "1024x640");
    assert_eq!(json["quality"], "low");
    assert_eq!(json["output_format"], "webp");
    assert_eq!(json["background"], "opaque");
    assert!(json["created"].as_u64().unwrap() > 1_700_000_000);
    let data = json["data"].as_array().unwrap();
    assert_eq!(data.len(), 2);
    for image in data {
        assert_eq!(
            decode_image(&image["b64_json"]),
            (image::ImageFormat::WebP, 1024, 640)
        );
    }
    assert_ne!(data[0]["b64_json"], data[1]["b64_json"]);
    let usage = &json["usage"];
    assert_eq!(usage["input_tokens_details"]["text_tokens"], 5); // 20 characters
    assert_eq!(usage["input_tokens_details"]["image_tokens"], 0);
    // 272 tokens per 1024x1024 at low quality, scaled to 1024x640 (170), times two images.
    assert_eq!(usage["output_tokens"], 340);
    assert_eq!(usage["output_tokens_details"]["image_tokens"], 340);
    assert_eq!(usage["total_tokens"], 345);
}

#[tokio::test]
async fn auto_size_and_default_quality_resolve() {
    let (_, app) = app();
    let body = json!({"model": "gpt-image-2-2026-04-21", "prompt": "auto things", "size": "auto"});
    let json = send(&app, post_json("/v1/images/generations", Some(TOKEN), &body))
        .await
        .json();
    assert_eq!(json["size"], "1024x1024");
    assert_eq!(json["quality"], "medium");
    assert_eq!(json["output_format"], "png");
    assert_eq!(
        decode_image(&json["data"][0]["b64_json"]),
        (image::ImageFormat::Png, 1024, 1024)
    );
    assert_eq!(json["usage"]["output_tokens"], 1056);
}

#[tokio::test]
async fn stream_sends_partials_then_completed_per_image() {
    let (_, app) = app();
    let body = generation(
        "streamed kite",
        json!({"stream": true, "partial_images": 2, "n": 2, "output_format": "jpeg"}),
    );
    let answer = send(&app, post_json("/v1/images/generations", Some(TOKEN), &body)).await;
    assert_eq!(answer.status, StatusCode::OK);
    assert!(
        answer
            .header("content-type")
            .unwrap()
            .starts_with("text/event-stream")
    );
    assert!(!answer.text().contains("[DONE]"));
    let events = answer.events();
    let names: Vec<&str> = events.iter().map(|(name, _)| name.as_str()).collect();
    let partial = "image_generation.partial_image";
    let completed = "image_generation.completed";
    assert_eq!(names, [partial, partial, completed, partial, partial, completed]);
    for (name, data) in &events {
        for key in [
            "b64_json",
            "created_at",
            "size",
            "quality",
            "background",
            "output_format",
        ] {
            assert!(!data[key].is_null(), "{name} lacks {key}");
        }
        assert_eq!(
            decode_image(&data["b64_json"]),
            (image::ImageFormat::Jpeg, 1024, 640)
        );
    }
    assert_eq!(events[0].1["partial_image_index"], 0);
    assert_eq!(events[1].1["partial_image_index"], 1);
    assert!(events[2].1.get("partial_image_index").is_none());
    // Usage is cumulative: the last completed event carries the whole request.
    let per_image = 170 + 2 * 100;
    assert_eq!(events[2].1["usage"]["output_tokens"], per_image);
    assert_eq!(events[5].1["usage"]["output_tokens"], 2 * per_image);
    assert_eq!(events[5].1["usage"]["input_tokens"], 4);
    // Partials are coarser than the final image: fewer bytes.
    let len = |i: usize| events[i].1["b64_json"].as_str().unwrap().len();
    assert!(
        len(0) < len(1) && len(1) < len(2),
        "{} {} {}",
        len(0),
        len(1),
        len(2)
    );
}

#[tokio::test]
async fn invalid_requests_get_the_openai_error_shape() {
    let (_, app) = app();
    let cases = [
        (
            json!({"model": "gpt-image-2", "prompt": "x", "size": "1792x936"}),
            "size",
        ),
        (
            json!({"model": "gpt-image-2", "prompt": "x", "bogus": true}),
            "bogus",
        ),
        (
            json!({"model": "gpt-image-2", "prompt": "x", "partial_images": 2}),
            "partial_images",
        ),
        (
            json!({"model": "gpt-image-2", "prompt": "x", "background": "transparent"}),
            "background",
        ),
    ];
    for (body, param) in cases {
        let answer = send(&app, post_json("/v1/images/generations", Some(TOKEN), &body)).await;
        assert_eq!(answer.status, StatusCode::BAD_REQUEST, "{body}");
        let error = &answer.json()["error"];
        assert_eq!(error["param"], param, "{body}");
        assert!(error["message"].as_str().unwrap().len() > 10);
        assert!(error.get("type").is_some() && error.get("code").is_some());
    }
    let unknown_model = json!({"model": "dall-e-3", "prompt": "x"});
    let answer = send(
        &app,
        post_json("/v1/images/generations", Some(TOKEN), &unknown_model),
    )
    .await;
    assert_eq!(answer.status, StatusCode::NOT_FOUND);
    assert_eq!(answer.json()["error"]["code"], "model_not_found");
}

#[tokio::test]
async fn requests_without_a_bearer_token_get_401() {
    let (state, app) = app();
    let body = generation("no key", json!({}));
    for request in [
        post_json("/v1/images/generations", None, &body),
        with_header(
            post_json("/v1/images/generations", None, &body),
            "authorization",
            "Bearer   ",
        ),
        with_header(
            post_json("/v1/images/generations", None, &body),
            "authorization",
            "Basic abc",
        ),
        get("/v1/models", None),
    ] {
        let answer = send(&app, request).await;
        assert_eq!(answer.status, StatusCode::UNAUTHORIZED);
        let error = &answer.json()["error"];
        assert_eq!(error["type"], "invalid_request_error");
        assert!(error["message"].as_str().unwrap().contains("API key"));
        assert!(error.get("param").is_some() && error["code"].is_null());
    }
    let stats = state.stats_snapshot();
    assert_eq!(stats.requests, 4);
    assert!(stats.by_token.is_empty());
}

#[tokio::test]
async fn models_are_listed_and_retrievable() {
    let (_, app) = app();
    let list = send(&app, get("/v1/models", Some(TOKEN))).await.json();
    assert_eq!(list["object"], "list");
    let ids: Vec<&str> = list["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["id"].as_str().unwrap())
        .collect();
    assert!(
        ids.contains(&"gpt-image-2") && ids.contains(&"gpt-image-2-2026-04-21") && ids.contains(&"gpt-5")
    );
    for model in list["data"].as_array().unwrap() {
        assert_eq!(model["object"], "model");
        assert!(model["created"].is_i64() && model["owned_by"].is_string());
    }
    let one = send(&app, get("/v1/models/gpt-image-2", Some(TOKEN))).await;
    assert_eq!(
        (one.status, one.json()["id"].as_str()),
        (StatusCode::OK, Some("gpt-image-2"))
    );
    let missing = send(&app, get("/v1/models/nope", Some(TOKEN))).await;
    assert_eq!(missing.status, StatusCode::NOT_FOUND);
    assert_eq!(missing.json()["error"]["code"], "model_not_found");
    let route = send(&app, get("/v1/nothing-here", Some(TOKEN))).await;
    assert_eq!(route.status, StatusCode::NOT_FOUND);
    assert_eq!(route.json()["error"]["type"], "invalid_request_error");
}

#[tokio::test]
async fn latency_header_delays_the_answer() {
    let (_, app) = app();
    let body = generation("slow one", json!({}));
    let started = std::time::Instant::now();
    let request = with_header(
        post_json("/v1/images/generations", Some(TOKEN), &body),
        "x-sim-latency-ms",
        "300",
    );
    assert_eq!(send(&app, request).await.status, StatusCode::OK);
    assert!(started.elapsed() >= std::time::Duration::from_millis(300));
}

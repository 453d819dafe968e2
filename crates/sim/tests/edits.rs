//! `POST /v1/images/edits` through the router.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::disallowed_methods
)]

mod common;

use axum::http::StatusCode;
use common::*;

#[tokio::test]
async fn edit_with_auto_size_returns_the_first_image_size() {
    let (_, app) = app();
    let (content_type, body) = multipart(
        &[
            ("model", "gpt-image-2"),
            ("prompt", "add a red hat"),
            ("n", "2"),
            ("size", "auto"),
        ],
        &[
            ("image[]", "a.png", png(96, 64, false)),
            ("image[]", "b.png", png(64, 64, false)),
        ],
    );
    let answer = send(
        &app,
        post_multipart("/v1/images/edits", TOKEN, &content_type, body),
    )
    .await;
    assert_eq!(answer.status, StatusCode::OK, "{}", answer.text());
    let json = answer.json();
    assert_eq!(json["size"], "96x64");
    let data = json["data"].as_array().unwrap();
    assert_eq!(data.len(), 2);
    assert_eq!(
        decode_image(&data[0]["b64_json"]),
        (image::ImageFormat::Png, 96, 64)
    );
    // Both input images are charged: 85 + 170 tiles each (one 512 px tile each).
    assert_eq!(json["usage"]["input_tokens_details"]["image_tokens"], 2 * 255);
    assert_eq!(json["usage"]["input_tokens_details"]["text_tokens"], 4);
}

#[tokio::test]
async fn edit_accepts_indexed_parts_a_mask_and_an_exact_size() {
    let (_, app) = app();
    let (content_type, body) = multipart(
        &[
            ("model", "gpt-image-2"),
            ("prompt", "fill the sky"),
            ("size", "1024x640"),
            ("quality", "low"),
            ("output_format", "webp"),
        ],
        &[
            ("mask", "mask.png", png(80, 80, true)),
            ("image[1]", "b.png", png(32, 32, false)),
            ("image[0]", "a.png", png(80, 80, true)),
        ],
    );
    let answer = send(
        &app,
        post_multipart("/v1/images/edits", TOKEN, &content_type, body),
    )
    .await;
    assert_eq!(answer.status, StatusCode::OK, "{}", answer.text());
    let json = answer.json();
    assert_eq!(
        decode_image(&json["data"][0]["b64_json"]),
        (image::ImageFormat::WebP, 1024, 640)
    );
    assert_eq!(json["data"].as_array().unwrap().len(), 1);
}

#[tokio::test]
async fn streamed_edit_uses_image_edit_events() {
    let (_, app) = app();
    let (content_type, body) = multipart(
        &[
            ("model", "gpt-image-2"),
            ("prompt", "sketch"),
            ("stream", "true"),
            ("partial_images", "1"),
        ],
        &[("image", "a.png", png(48, 48, false))],
    );
    let answer = send(
        &app,
        post_multipart("/v1/images/edits", TOKEN, &content_type, body),
    )
    .await;
    assert_eq!(answer.status, StatusCode::OK, "{}", answer.text());
    let events = answer.events();
    let names: Vec<&str> = events.iter().map(|(name, _)| name.as_str()).collect();
    assert_eq!(names, ["image_edit.partial_image", "image_edit.completed"]);
    assert_eq!(events[0].1["partial_image_index"], 0);
    assert_eq!(events[1].1["size"], "48x48");
    assert!(
        events[1].1["usage"]["input_tokens_details"]["image_tokens"]
            .as_u64()
            .unwrap()
            > 0
    );
    assert_eq!(
        decode_image(&events[1].1["b64_json"]),
        (image::ImageFormat::Png, 48, 48)
    );
}

#[tokio::test]
async fn bad_edit_forms_are_refused() {
    let (_, app) = app();
    let not_an_image = multipart(
        &[("model", "gpt-image-2"), ("prompt", "x")],
        &[("image", "a.png", b"hello world, not a png".to_vec())],
    );
    let no_image = multipart(&[("model", "gpt-image-2"), ("prompt", "x")], &[]);
    let fidelity = multipart(
        &[
            ("model", "gpt-image-2"),
            ("prompt", "x"),
            ("input_fidelity", "high"),
        ],
        &[("image", "a.png", png(16, 16, false))],
    );
    let mask_without_alpha = multipart(
        &[("model", "gpt-image-2"), ("prompt", "x")],
        &[
            ("image", "a.png", png(16, 16, false)),
            ("mask", "m.png", png(16, 16, false)),
        ],
    );
    for ((content_type, body), param) in [
        (not_an_image, "image"),
        (no_image, "image"),
        (fidelity, "input_fidelity"),
        (mask_without_alpha, "mask"),
    ] {
        let answer = send(
            &app,
            post_multipart("/v1/images/edits", TOKEN, &content_type, body),
        )
        .await;
        assert_eq!(
            answer.status,
            StatusCode::BAD_REQUEST,
            "{param}: {}",
            answer.text()
        );
        assert_eq!(answer.json()["error"]["param"], param, "{}", answer.text());
    }
    let json_body = post_json(
        "/v1/images/edits",
        Some(TOKEN),
        &serde_json::json!({"prompt": "x"}),
    );
    let answer = send(&app, json_body).await;
    assert_eq!(answer.status, StatusCode::BAD_REQUEST);
    assert!(
        answer.json()["error"]["message"]
            .as_str()
            .unwrap()
            .contains("multipart")
    );
}

//! End to end: the real `imagegate` and `imagegate-sim` binaries over HTTP, usage read back through
//! the admin CLI.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::disallowed_methods
)]

mod common;

use base64::Engine;
use common::setup;
use imagegate_e2e::{jpeg_rgb, parse_sse, png_rgb, solid_mask};
use serde_json::{Value, json};

fn decode_png(b64: &str) -> image::DynamicImage {
    let bytes = base64::engine::general_purpose::STANDARD.decode(b64).unwrap();
    assert_eq!(&bytes[..8], b"\x89PNG\r\n\x1a\n");
    image::load_from_memory(&bytes).unwrap()
}

#[tokio::test]
async fn generation_returns_the_image_and_records_usage() {
    let s = setup();
    let response = s
        .post_json(
            "/images/generations",
            json!({"model": "gpt-image-2", "prompt": "a lighthouse", "size": "1536x1024", "quality": "low", "user": null}),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    assert!(
        response.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("application/json")
    );
    let request_id = response.headers()["x-request-id"].to_str().unwrap().to_owned();
    let declared: usize = response.headers()["content-length"]
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    let bytes = response.bytes().await.unwrap();
    assert_eq!(
        bytes.len(),
        declared,
        "the declared length counts the added model key"
    );
    let body: Value = serde_json::from_slice(&bytes).unwrap();
    let image = decode_png(body["data"][0]["b64_json"].as_str().unwrap());
    assert_eq!((image.width(), image.height()), (1536, 1024));
    // The interface names the model used; the upstream's answer (like OpenAI's) does not.
    assert_eq!(body["model"], "gpt-image-2");
    assert_eq!(body["size"], "1536x1024");
    assert_eq!(body["quality"], "low");
    assert_eq!(body["output_format"], "png");
    assert!(body["created"].as_i64().unwrap() > 1_700_000_000);
    let usage = &body["usage"];
    let total = usage["total_tokens"].as_u64().unwrap();
    assert!(total > 0);
    assert!(usage["input_tokens_details"]["text_tokens"].is_u64());
    assert!(usage["output_tokens_details"]["image_tokens"].as_u64().unwrap() > 0);

    let records = s.usage_at_least(1).await;
    let record = records
        .iter()
        .find(|r| r["request_id"] == request_id.as_str())
        .expect("usage record");
    assert_eq!(record["endpoint"], "/v1/images/generations");
    assert_eq!(record["model"], "gpt-image-2");
    assert_eq!(record["size_requested"], "1536x1024");
    assert_eq!(record["size_produced"], "1536x1024");
    assert_eq!(record["quality_produced"], "low");
    assert_eq!(record["output_format"], "png");
    assert_eq!(record["status"], 200);
    assert_eq!(record["tokens"]["total"].as_u64().unwrap(), total);
    assert!(record["account_id"].is_i64());
    assert!(record["key_id"].is_i64() && record["user_id"].is_i64() && record["group_id"].is_i64());
}

#[tokio::test]
async fn streaming_generation_sends_partials_then_the_completed_image() {
    let s = setup();
    let response = s
        .post_json(
            "/images/generations",
            json!({"model": "gpt-image-2", "prompt": "a kite", "size": "1024x1024", "stream": true, "partial_images": 2}),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    assert!(
        response.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/event-stream")
    );
    let events = parse_sse(&response.text().await.unwrap());
    let names: Vec<&str> = events.iter().map(|(name, _)| name.as_str()).collect();
    assert_eq!(
        names,
        [
            "image_generation.partial_image",
            "image_generation.partial_image",
            "image_generation.completed"
        ]
    );
    for (index, (name, data)) in events.iter().enumerate() {
        assert_eq!(data["type"], name.as_str());
        if index < 2 {
            assert_eq!(data["partial_image_index"], index);
        }
    }
    let completed = &events[2].1;
    let image = decode_png(completed["b64_json"].as_str().unwrap());
    assert_eq!((image.width(), image.height()), (1024, 1024));
    let total = completed["usage"]["total_tokens"].as_u64().unwrap();
    assert!(total > 0);
    let records = s.usage_at_least(1).await;
    assert_eq!(records[0]["stream"], true);
    assert_eq!(records[0]["status"], 200);
    // The completed image (about 1.6 MB) came through in pieces; its usage was scanned on the way.
    assert_eq!(
        records[0]["tokens"]["total"].as_u64().unwrap(),
        total,
        "{:?}",
        records[0]
    );
    assert_eq!(records[0]["images"], 1, "{:?}", records[0]);
    assert_eq!(records[0]["size_produced"], "1024x1024", "{:?}", records[0]);
}

#[tokio::test]
async fn a_stream_of_two_images_is_billed_what_its_last_completed_event_says() {
    let s = setup();
    let request = |stream: bool| {
        json!({"model": "gpt-image-2", "prompt": "two kites", "size": "1024x1024", "quality": "low",
            "n": 2, "stream": stream})
    };
    let response = s
        .post_json("/images/generations", request(true))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let events = parse_sse(&response.text().await.unwrap());
    let completed: Vec<&Value> = events
        .iter()
        .filter(|(name, _)| name == "image_generation.completed")
        .map(|(_, data)| data)
        .collect();
    assert_eq!(completed.len(), 2, "one completed event per image");
    let tokens = |event: &Value, field: &str| event["usage"][field].as_u64().unwrap();
    // The usage on each completed event is the request's so far: the input once, the output
    // growing image by image.
    assert_eq!(
        tokens(completed[0], "input_tokens"),
        tokens(completed[1], "input_tokens")
    );
    assert!(tokens(completed[0], "output_tokens") < tokens(completed[1], "output_tokens"));

    // The same request unstreamed costs the same: one usage for the whole request.
    let whole: Value = s
        .post_json("/images/generations", request(false))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(whole["data"].as_array().unwrap().len(), 2);
    assert_eq!(whole["usage"], completed[1]["usage"]);

    let records = s.usage_at_least(2).await;
    for record in &records {
        assert_eq!(record["images"], 2, "{record}");
        assert_eq!(
            (
                &record["tokens"]["input"],
                &record["tokens"]["output"],
                &record["tokens"]["total"]
            ),
            (
                &completed[1]["usage"]["input_tokens"],
                &completed[1]["usage"]["output_tokens"],
                &completed[1]["usage"]["total_tokens"]
            ),
            "billed once, not the two events added up: {record}"
        );
    }
}

fn edit_form(stream: bool) -> reqwest::multipart::Form {
    let part = |bytes: Vec<u8>, name: &str| {
        reqwest::multipart::Part::bytes(bytes)
            .file_name(name.to_owned())
            .mime_str("image/png")
            .unwrap()
    };
    let mut form = reqwest::multipart::Form::new()
        .text("model", "gpt-image-2")
        .text("prompt", "add a hat")
        .text("size", "1024x1024")
        .part("image[]", part(png_rgb(512, 512), "a.png"))
        .part("image[]", part(png_rgb(512, 512), "b.png"))
        .part("mask", part(solid_mask(512, 512), "mask.png"));
    if stream {
        form = form.text("stream", "true").text("partial_images", "1");
    }
    form
}

#[tokio::test]
async fn edits_with_two_images_and_a_mask_work_plain_and_streamed() {
    let s = setup();
    let response = s
        .client
        .post(s.gateway.v1("/images/edits"))
        .bearer_auth(&s.key)
        .multipart(edit_form(false))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["model"], "gpt-image-2");
    let image = decode_png(body["data"][0]["b64_json"].as_str().unwrap());
    assert_eq!((image.width(), image.height()), (1024, 1024));
    assert!(
        body["usage"]["input_tokens_details"]["image_tokens"]
            .as_u64()
            .unwrap()
            > 0
    );

    let response = s
        .client
        .post(s.gateway.v1("/images/edits"))
        .bearer_auth(&s.key)
        .multipart(edit_form(true))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let events = parse_sse(&response.text().await.unwrap());
    let names: Vec<&str> = events.iter().map(|(name, _)| name.as_str()).collect();
    assert_eq!(names, ["image_edit.partial_image", "image_edit.completed"]);
    let records = s.usage_at_least(2).await;
    assert!(
        records
            .iter()
            .all(|r| r["endpoint"] == "/v1/images/edits" && r["status"] == 200)
    );
}

#[tokio::test]
async fn a_mask_of_another_size_is_refused_before_the_upstream() {
    let s = setup();
    let part = |bytes: Vec<u8>| {
        reqwest::multipart::Part::bytes(bytes)
            .file_name("x.png")
            .mime_str("image/png")
            .unwrap()
    };
    let form = reqwest::multipart::Form::new()
        .text("model", "gpt-image-2")
        .text("prompt", "x")
        .part("image", part(png_rgb(512, 512)))
        .part("mask", part(solid_mask(256, 256)));
    let response = s
        .client
        .post(s.gateway.v1("/images/edits"))
        .bearer_auth(&s.key)
        .multipart(form)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 400);
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["error"]["param"], "mask");
    assert_eq!(body["error"]["type"], "invalid_request_error");
    assert_eq!(s.sim_stats().await["requests"], 0);
}

#[tokio::test]
async fn a_jpeg_image_is_edited_with_a_png_mask() {
    // JPEG cannot carry the mask's alpha channel, so its mask comes as a PNG.
    let s = setup();
    let part = |bytes: Vec<u8>, name: &str, mime: &str| {
        reqwest::multipart::Part::bytes(bytes)
            .file_name(name.to_owned())
            .mime_str(mime)
            .unwrap()
    };
    let form = reqwest::multipart::Form::new()
        .text("model", "gpt-image-2")
        .text("prompt", "add a hat")
        .part("image", part(jpeg_rgb(512, 512), "photo.jpg", "image/jpeg"))
        .part("mask", part(solid_mask(512, 512), "mask.png", "image/png"));
    let response = s
        .client
        .post(s.gateway.v1("/images/edits"))
        .bearer_auth(&s.key)
        .multipart(form)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200, "{}", response.text().await.unwrap());
    assert_eq!(s.sim_stats().await["requests"], 1);
}

#[tokio::test]
async fn responses_with_the_image_tool_work_plain_and_streamed() {
    let s = setup();
    let tool =
        json!([{"type": "image_generation", "size": "1024x1024", "quality": "low", "partial_images": 1}]);
    let response = s
        .post_json(
            "/responses",
            json!({"model": "gpt-5", "input": "draw a fox", "tools": tool}),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let plain_id = response.headers()["x-request-id"].to_str().unwrap().to_owned();
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["object"], "response");
    let call = body["output"]
        .as_array()
        .unwrap()
        .iter()
        .find(|o| o["type"] == "image_generation_call")
        .unwrap();
    decode_png(call["result"].as_str().unwrap());
    let image_tokens = &body["tool_usage"]["image_gen"];
    let image_output = image_tokens["output_tokens_details"]["image_tokens"]
        .as_u64()
        .unwrap();
    assert!(image_output > 0, "{image_tokens}");
    let total =
        body["usage"]["total_tokens"].as_u64().unwrap() + image_tokens["total_tokens"].as_u64().unwrap();

    let response = s
        .post_json(
            "/responses",
            json!({"model": "gpt-5", "input": "draw a fox", "tools": tool, "stream": true}),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let streamed_id = response.headers()["x-request-id"].to_str().unwrap().to_owned();
    let events = parse_sse(&response.text().await.unwrap());
    assert_eq!(events.first().unwrap().0, "response.created");
    assert_eq!(events.last().unwrap().0, "response.completed");
    assert!(
        events
            .iter()
            .any(|(name, _)| name == "response.image_generation_call.partial_image")
    );
    imagegate_e2e::assert_sequence_counts_from_zero(&events);

    // A streamed call without the tool is recorded as streamed too.
    let response = s
        .post_json(
            "/responses",
            json!({"model": "gpt-5", "input": "say hello", "stream": true}),
        )
        .send()
        .await
        .unwrap();
    let textual_id = response.headers()["x-request-id"].to_str().unwrap().to_owned();
    let events = parse_sse(&response.text().await.unwrap());
    assert_eq!(events.last().unwrap().0, "response.completed");

    // Both records bill the image tool's tokens (`tool_usage.image_gen`) on top of the main model's.
    let records = s.usage_at_least(3).await;
    let record = |id: &str| {
        records
            .iter()
            .find(|r| r["request_id"] == id)
            .unwrap_or_else(|| panic!("no record {id}"))
            .clone()
    };
    let plain = record(&plain_id);
    let streams = [&plain_id, &streamed_id, &textual_id].map(|id| record(id)["stream"].clone());
    assert_eq!(streams, [json!(false), json!(true), json!(true)]);
    assert_eq!(plain["tokens"]["output_image"].as_u64(), Some(image_output));
    assert_eq!(plain["tokens"]["total"].as_u64(), Some(total));
    let streamed = record(&streamed_id);
    assert!(
        streamed["tokens"]["output_image"].as_u64().unwrap() > 0,
        "{streamed}"
    );
    assert!(
        streamed["tokens"]["total"].as_u64().unwrap() > streamed["tokens"]["output_image"].as_u64().unwrap(),
        "{streamed}"
    );
}

#[tokio::test]
async fn an_image_model_as_the_main_model_is_refused_with_advice() {
    let s = setup();
    let response = s
        .post_json(
            "/responses",
            json!({"model": "gpt-image-2", "input": "draw", "tools": [{"type": "image_generation"}]}),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 400);
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["error"]["param"], "model");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("image_generation"),
        "{body}"
    );
}

#[tokio::test]
async fn models_list_gpt_image_2() {
    let s = setup();
    let body: Value = s
        .client
        .get(s.gateway.v1("/models"))
        .bearer_auth(&s.key)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(body["object"], "list");
    let ids: Vec<&str> = body["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["id"].as_str().unwrap())
        .collect();
    assert!(
        ids.contains(&"gpt-image-2") && ids.contains(&"gpt-image-2-2026-04-21"),
        "{ids:?}"
    );
}

#[tokio::test]
async fn one_model_is_retrieved_by_its_id() {
    // `client.models.retrieve("gpt-image-2")` in the SDKs.
    let s = setup();
    let get = |id: &str| {
        s.client
            .get(s.gateway.v1(&format!("/models/{id}")))
            .bearer_auth(&s.key)
            .send()
    };
    let found = get("gpt-image-2-2026-04-21").await.unwrap();
    assert_eq!(found.status(), 200);
    let body: Value = found.json().await.unwrap();
    assert_eq!(body["id"], "gpt-image-2-2026-04-21");
    assert_eq!(body["object"], "model");
    let missing = get("dall-e-9").await.unwrap();
    assert_eq!(missing.status(), 404);
    let body: Value = missing.json().await.unwrap();
    assert_eq!(body["error"]["code"], "model_not_found");
    let anonymous = s
        .client
        .get(s.gateway.v1("/models/gpt-image-2"))
        .send()
        .await
        .unwrap();
    assert_eq!(anonymous.status(), 401, "like the list, it needs a key");
}

#[tokio::test]
async fn a_known_path_asked_with_another_method_gets_the_error_envelope() {
    let s = setup();
    for (method, path) in [
        (reqwest::Method::GET, "/v1/images/generations"),
        (reqwest::Method::PUT, "/v1/images/edits"),
        (reqwest::Method::DELETE, "/v1/responses"),
        (reqwest::Method::POST, "/healthz"),
    ] {
        let response = s
            .client
            .request(method.clone(), format!("{}{path}", s.gateway.url))
            .bearer_auth(&s.key)
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 405, "{method} {path}");
        assert!(response.headers().contains_key("x-request-id"));
        let body: Value = response.json().await.unwrap();
        assert_eq!(body["error"]["code"], "method_not_allowed", "{method} {path}");
        assert_eq!(body["error"]["type"], "invalid_request_error");
        assert_eq!(
            body["error"]["message"],
            format!("Invalid method for URL ({method} {path}).")
        );
    }
    // The console's pages answer with a page of their own, with the console's security headers.
    for (method, path) in [
        (reqwest::Method::PUT, "/keys"),
        (reqwest::Method::DELETE, "/login"),
    ] {
        let response = s
            .client
            .request(method.clone(), format!("{}{path}", s.gateway.url))
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 405, "{method} {path}");
        let headers = response.headers();
        assert!(headers.contains_key("x-request-id"));
        assert!(headers.contains_key("content-security-policy"), "{headers:?}");
        assert!(headers["content-type"].to_str().unwrap().starts_with("text/html"));
        assert!(response.text().await.unwrap().contains("Method not allowed"));
    }
}

/// Missing, malformed, unknown and wrong-secret keys: the one message that says nothing more.
const NOT_A_KEY: &str = "Invalid API key";

async fn assert_invalid_key(s: &common::Setup, key: Option<&str>, message_start: &str) {
    let mut request = s
        .client
        .post(s.gateway.v1("/images/generations"))
        .json(&json!({"model": "gpt-image-2", "prompt": "x"}));
    if let Some(key) = key {
        request = request.bearer_auth(key);
    }
    let response = request.send().await.unwrap();
    assert_eq!(response.status(), 401, "key {key:?}");
    assert!(response.headers().contains_key("x-request-id"));
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["error"]["code"], "INVALID_API_KEY");
    assert_eq!(body["error"]["type"], "invalid_request_error");
    assert!(body["error"]["param"].is_null());
    let message = body["error"]["message"].as_str().unwrap();
    assert!(message.starts_with(message_start), "key {key:?}: {message}");
}

#[tokio::test]
async fn missing_malformed_unknown_disabled_and_deleted_keys_get_401() {
    let s = setup();
    assert_invalid_key(&s, None, NOT_A_KEY).await;
    assert_invalid_key(&s, Some("not-a-key"), NOT_A_KEY).await;
    assert_invalid_key(
        &s,
        Some("sk-ig-aaaaaaaaaaaa-0123456789abcdef0123456789abcdef"),
        NOT_A_KEY,
    )
    .await;
    let second = imagegate_e2e::admin(
        s.dir.path(),
        &["keys", "create", "--user", "alice", "--name", "two"],
    );
    let second = second.trim();
    let ok = s
        .client
        .get(s.gateway.v1("/models"))
        .bearer_auth(second)
        .send()
        .await
        .unwrap();
    assert_eq!(ok.status(), 200);
    imagegate_e2e::admin(s.dir.path(), &["keys", "disable", second]);
    tokio::time::sleep(std::time::Duration::from_millis(2100)).await;
    // The administrator's `keys disable` suspends the key.
    assert_invalid_key(&s, Some(second), "This API key was suspended by an administrator").await;
    // The same public id with another secret learns nothing about the key.
    let (public, _secret) = second.rsplit_once('-').unwrap();
    let guessed = format!("{public}-{}", "0".repeat(32));
    assert_invalid_key(&s, Some(&guessed), NOT_A_KEY).await;
    imagegate_e2e::admin(s.dir.path(), &["keys", "enable", second]);
    tokio::time::sleep(std::time::Duration::from_millis(2100)).await;
    let again = s
        .client
        .get(s.gateway.v1("/models"))
        .bearer_auth(second)
        .send()
        .await
        .unwrap();
    assert_eq!(again.status(), 200, "enabled again by the administrator");
    imagegate_e2e::admin(s.dir.path(), &["keys", "delete", &s.key]);
    tokio::time::sleep(std::time::Duration::from_millis(2100)).await;
    assert_invalid_key(&s, Some(&s.key), "This API key was deleted").await;
}

#[tokio::test]
async fn invalid_requests_are_refused_before_any_upstream_call() {
    let s = setup();
    let cases = [
        (
            json!({"model": "gpt-image-2", "prompt": "x", "size": "1792x936"}),
            "size",
            "936",
        ),
        (
            json!({"model": "gpt-image-2", "prompt": "x", "background": "transparent"}),
            "background",
            "transparent",
        ),
        (json!({"model": "gpt-image-2", "prompt": "x", "n": 11}), "n", "10"),
        (
            json!({"model": "gpt-image-2", "prompt": "x", "partial_images": 2}),
            "partial_images",
            "stream",
        ),
        (
            json!({"model": "gpt-image-2", "prompt": "x", "colour": "red"}),
            "colour",
            "colour",
        ),
        (json!({"model": "gpt-image-2"}), "prompt", "prompt"),
    ];
    for (body, param, mention) in cases {
        let response = s
            .post_json("/images/generations", body.clone())
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 400, "{body}");
        let error: Value = response.json().await.unwrap();
        assert_eq!(error["error"]["param"], param, "{error}");
        assert!(
            error["error"]["message"].as_str().unwrap().contains(mention),
            "{error}"
        );
    }
    assert_eq!(s.sim_stats().await["requests"], 0);
    let records = s.usage_at_least(6).await;
    assert!(records.iter().all(|r| r["status"] == 400));
}

#[tokio::test]
async fn a_refused_request_records_its_model_clipped() {
    let s = setup();
    // 1 MiB of model name on /responses (which takes large bodies), multi-byte text on Images.
    let huge = "m".repeat(1 << 20);
    let wide = "é".repeat(200);
    for (path, body) in [
        ("/responses", json!({"model": huge, "input": "x"})),
        ("/images/generations", json!({"model": wide, "prompt": "x"})),
    ] {
        let response = s.post_json(path, body).send().await.unwrap();
        assert!(response.status().is_client_error(), "{path}");
    }
    // An edit refused for its size, before its file is read, records the model it asked for too.
    let form = reqwest::multipart::Form::new()
        .text("model", "gpt-image-2")
        .text("size", "4096x4096")
        .text("prompt", "x")
        .part(
            "image",
            reqwest::multipart::Part::bytes(imagegate_e2e::png_rgb(64, 64))
                .file_name("a.png")
                .mime_str("image/png")
                .unwrap(),
        );
    let response = s
        .client
        .post(s.gateway.v1("/images/edits"))
        .bearer_auth(&s.key)
        .multipart(form)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 400);
    let records = s.usage_at_least(3).await;
    let models: Vec<&str> = records.iter().map(|r| r["model"].as_str().unwrap()).collect();
    assert!(models.contains(&"m".repeat(256).as_str()), "{models:?}");
    assert!(models.contains(&"é".repeat(128).as_str()), "{models:?}");
    assert!(models.contains(&"gpt-image-2"), "{models:?}");
}

#[tokio::test]
async fn health_readiness_request_ids_and_unknown_routes() {
    let s = setup();
    let health = s
        .client
        .get(format!("{}/healthz", s.gateway.url))
        .send()
        .await
        .unwrap();
    assert_eq!(health.status(), 200);
    let ready = s
        .client
        .get(format!("{}/readyz", s.gateway.url))
        .send()
        .await
        .unwrap();
    assert_eq!(ready.status(), 200);
    let ids: Vec<String> = [&health, &ready]
        .iter()
        .map(|r| r.headers()["x-request-id"].to_str().unwrap().to_owned())
        .collect();
    assert_ne!(ids[0], ids[1]);
    let missing = s
        .client
        .get(s.gateway.v1("/nope"))
        .bearer_auth(&s.key)
        .send()
        .await
        .unwrap();
    assert_eq!(missing.status(), 404);
    let body: Value = missing.json().await.unwrap();
    assert!(body["error"]["message"].is_string());
}

#[tokio::test]
async fn a_client_still_sending_an_oversized_body_gets_the_413_and_keeps_its_connection() {
    use std::io::{BufRead as _, BufReader, Read as _, Write as _};

    let s = setup();
    let key = s.key.clone();
    let address = s.gateway.url.trim_start_matches("http://").to_owned();
    let (status, next) = tokio::task::spawn_blocking(move || {
        let body = vec![b' '; 2 * 1024 * 1024];
        let mut stream = std::net::TcpStream::connect(&address).unwrap();
        stream
            .set_read_timeout(Some(std::time::Duration::from_secs(20)))
            .unwrap();
        write!(
            stream,
            "POST /v1/images/generations HTTP/1.1\r\nhost: {address}\r\nauthorization: Bearer {key}\r\n\
             content-type: application/json\r\ncontent-length: {}\r\n\r\n",
            body.len()
        )
        .unwrap();
        // The gateway answers once it read more than its limit (1 MiB); the client goes on
        // sending what it declared, and the gateway reads it instead of resetting the connection.
        stream.write_all(&body).unwrap();
        let mut reader = BufReader::new(stream.try_clone().unwrap());
        let mut status = String::new();
        reader.read_line(&mut status).unwrap();
        let mut length = 0usize;
        loop {
            let mut line = String::new();
            reader.read_line(&mut line).unwrap();
            if let Some(value) = line.to_ascii_lowercase().strip_prefix("content-length:") {
                length = value.trim().parse().unwrap();
            }
            if line == "\r\n" || line.is_empty() {
                break;
            }
        }
        let mut answer = vec![0u8; length];
        reader.read_exact(&mut answer).unwrap();
        // The same connection serves the next request.
        write!(stream, "GET /healthz HTTP/1.1\r\nhost: {address}\r\n\r\n").unwrap();
        let mut next = String::new();
        let _ = reader.read_line(&mut next);
        (status, next)
    })
    .await
    .unwrap();
    assert!(status.starts_with("HTTP/1.1 413"), "{status}");
    assert!(next.starts_with("HTTP/1.1 200"), "{next:?}");
}

#[tokio::test]
async fn oversized_bodies_and_client_request_ids_are_handled_by_the_gateway() {
    let s = setup();
    let huge = json!({"model": "gpt-image-2", "prompt": "x".repeat(2 * 1024 * 1024)});
    let response = s.post_json("/images/generations", huge).send().await.unwrap();
    assert_eq!(response.status(), 413);
    let body: Value = response.json().await.unwrap();
    assert_eq!(
        body["error"]["message"], "The request body is larger than the 1 MiB this endpoint takes.",
        "{body}"
    );
    assert_eq!(body["error"]["code"], "request_too_large", "{body}");

    let response = s
        .post_json(
            "/images/generations",
            json!({"model": "gpt-image-2", "prompt": "x", "size": "1024x1024"}),
        )
        .header("x-request-id", "chosen-by-client")
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let id = response.headers()["x-request-id"].to_str().unwrap().to_owned();
    assert_ne!(
        id, "chosen-by-client",
        "the usage key must not be chosen by the client"
    );
    let records = s.usage_at_least(2).await;
    assert!(
        records
            .iter()
            .any(|r| r["request_id"] == id.as_str() && r["status"] == 200)
    );
    assert!(records.iter().any(|r| r["status"] == 413));
}

#[cfg(target_os = "linux")]
#[test]
fn the_gateway_raises_its_open_files_limit_from_the_soft_one_it_was_given_to_the_hard_one() {
    use rustix::process::{Resource, Rlimit, getrlimit, setrlimit};
    let hard = getrlimit(Resource::Nofile).maximum;
    // Started with a low soft limit (this test's process, which the gateway inherits it from), as
    // many systems start a service with 1024.
    let soft = hard.map_or(256, |hard| hard.min(256));
    setrlimit(
        Resource::Nofile,
        Rlimit {
            current: Some(soft),
            maximum: hard,
        },
    )
    .unwrap();
    let s = setup();
    let pid = s.gateway.pid().unwrap();
    let limits = std::fs::read_to_string(format!("/proc/{pid}/limits")).unwrap();
    let line = limits.lines().find(|l| l.starts_with("Max open files")).unwrap();
    // "Max open files  <soft>  <hard>  files"
    let fields: Vec<&str> = line.split_whitespace().collect();
    // An unlimited hard limit raises the soft one to Linux's default most (`fs.nr_open`).
    let (expected_soft, expected_hard) = match hard {
        Some(hard) => (hard.to_string(), hard.to_string()),
        None => ((1u64 << 20).to_string(), "unlimited".to_owned()),
    };
    assert_eq!(
        (fields[3], fields[4]),
        (expected_soft.as_str(), expected_hard.as_str()),
        "the soft limit {soft} is raised to the hard one: {line}"
    );
}

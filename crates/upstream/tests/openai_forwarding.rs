//! What the OpenAI transport sends: auth, model rewriting, every field, multipart edits, Responses
//! bodies; and that answers come back byte for byte.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::disallowed_methods
)]

mod common;

use bytes::Bytes;
use common::*;
use imagegate_domain::{ImageFileFormat, ImageParamsDraft};
use imagegate_upstream::{AccountKind, Upstream, UpstreamCall};
use serde_json::{Value, json};
use wiremock::matchers::{header, method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

#[tokio::test]
async fn generation_sends_the_key_the_upstream_model_and_every_field() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v1/images/generations"))
        .and(header("authorization", format!("Bearer {KEY}").as_str()))
        .respond_with(ResponseTemplate::new(200).set_body_raw(image_answer(), "application/json"))
        .expect(1)
        .mount(&server)
        .await;
    let params = generation(ImageParamsDraft {
        n: Some(3),
        size: Some("1536x864".into()),
        quality: Some("high".into()),
        output_format: Some("webp".into()),
        output_compression: Some(80),
        background: Some("opaque".into()),
        moderation: Some("low".into()),
        user: Some("end-user-7".into()),
        ..prompt_only("a lighthouse at dusk, \"watercolor\"")
    });
    generate(&server, &params).await.unwrap();
    let request = only_request(&server).await;
    assert_eq!(request.headers.get("content-type").unwrap(), "application/json");
    assert_eq!(request.headers.get("accept").unwrap(), "application/json");
    let body: Value = serde_json::from_slice(&request.body).unwrap();
    assert_eq!(
        body,
        json!({"model": "gpt-image-2-2026-04-21", "prompt": "a lighthouse at dusk, \"watercolor\"", "n": 3,
            "size": "1536x864", "quality": "high", "output_format": "webp", "output_compression": 80,
            "background": "opaque", "moderation": "low", "stream": false, "user": "end-user-7"})
    );
}

#[tokio::test]
async fn the_answer_is_returned_byte_for_byte_with_the_request_id() {
    let server = MockServer::start().await;
    let answer =
        "{ \"created\" : 1766000000,\n  \"data\": [ {\"b64_json\": \"QUJD\"}, {\"b64_json\":\"REVG\"} ] }\n";
    Mock::given(path("/v1/images/generations"))
        .respond_with(
            ResponseTemplate::new(200)
                .set_body_raw(answer, "application/json")
                .insert_header("x-request-id", "req_123"),
        )
        .mount(&server)
        .await;
    let reply = generate(&server, &generation(prompt_only("a cat")))
        .await
        .unwrap();
    match reply {
        imagegate_upstream::Reply::Json { body, request_id, .. } => {
            assert_eq!(body, Bytes::from(answer));
            assert_eq!(request_id.as_deref(), Some("req_123"));
        }
        other => panic!("expected JSON, got {other:?}"),
    }
}

#[tokio::test]
async fn sim_accounts_use_the_openai_wire() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v1/images/generations"))
        .and(header("authorization", format!("Bearer {KEY}").as_str()))
        .respond_with(ResponseTemplate::new(200).set_body_raw(image_answer(), "application/json"))
        .expect(1)
        .mount(&server)
        .await;
    let params = generation(prompt_only("a cat"));
    let reply = upstream()
        .call(
            &target(&server, AccountKind::Sim),
            UpstreamCall::Generate { params: &params },
            DEADLINE,
        )
        .await
        .unwrap();
    assert_eq!(json_body(reply).await, Bytes::from(image_answer()));
}

/// One part of a received multipart body.
#[derive(Debug, PartialEq)]
struct ReceivedPart {
    name: String,
    filename: Option<String>,
    content_type: Option<String>,
    bytes: Bytes,
}

async fn parse_multipart(request: &wiremock::Request) -> Vec<ReceivedPart> {
    let content_type = request.headers.get("content-type").unwrap().to_str().unwrap();
    let boundary = multer::parse_boundary(content_type).unwrap();
    let body = Bytes::from(request.body.clone());
    let stream = futures::stream::once(async move { Ok::<Bytes, std::io::Error>(body) });
    let mut multipart = multer::Multipart::new(stream, boundary);
    let mut parts = Vec::new();
    while let Some(field) = multipart.next_field().await.unwrap() {
        let name = field.name().unwrap().to_owned();
        let filename = field.file_name().map(str::to_owned);
        let content_type = field.content_type().map(ToString::to_string);
        parts.push(ReceivedPart {
            name,
            filename,
            content_type,
            bytes: field.bytes().await.unwrap(),
        });
    }
    parts
}

fn text(name: &str, value: &str) -> ReceivedPart {
    ReceivedPart {
        name: name.into(),
        filename: None,
        content_type: None,
        bytes: Bytes::from(value.to_owned()),
    }
}

#[tokio::test]
async fn edits_forward_two_images_the_mask_and_every_field_as_multipart() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v1/images/edits"))
        .and(header("authorization", format!("Bearer {KEY}").as_str()))
        .respond_with(ResponseTemplate::new(200).set_body_raw(image_answer(), "application/json"))
        .expect(1)
        .mount(&server)
        .await;
    let params = edit(ImageParamsDraft {
        n: Some(2),
        size: Some("1024x1024".into()),
        quality: Some("medium".into()),
        output_format: Some("jpeg".into()),
        output_compression: Some(55),
        stream: Some(false),
        user: Some("u-1".into()),
        ..prompt_only("put a hat on the cat")
    });
    let first = upload(
        "image[]",
        Some("cat.png"),
        ImageFileFormat::Png,
        b"\x89PNG first image bytes \x00\xff",
    );
    let second = upload(
        "image[]",
        None,
        ImageFileFormat::Webp,
        b"RIFF....WEBP second image",
    );
    let mask = upload(
        "mask",
        Some("dir/mask.png"),
        ImageFileFormat::Png,
        b"\x89PNG mask bytes",
    );
    let images = [first.clone(), second.clone()];
    let call = UpstreamCall::Edit {
        params: &params,
        images: &images,
        mask: Some(&mask),
    };
    let reply = upstream()
        .call(&target(&server, AccountKind::OpenAi), call, DEADLINE)
        .await
        .unwrap();
    assert_eq!(json_body(reply).await, Bytes::from(image_answer()));

    let request = only_request(&server).await;
    let parts = parse_multipart(&request).await;
    let file = |name: &str, filename: &str, mime: &str, bytes: &Bytes| ReceivedPart {
        name: name.into(),
        filename: Some(filename.into()),
        content_type: Some(mime.into()),
        bytes: bytes.clone(),
    };
    assert_eq!(
        parts,
        vec![
            text("model", "gpt-image-2-2026-04-21"),
            text("prompt", "put a hat on the cat"),
            text("n", "2"),
            text("size", "1024x1024"),
            text("quality", "medium"),
            text("output_format", "jpeg"),
            text("output_compression", "55"),
            text("background", "auto"),
            text("stream", "false"),
            text("user", "u-1"),
            file(
                "image[]",
                "cat.png",
                "image/png",
                &first.data.to_bytes().await.unwrap()
            ),
            file(
                "image[]",
                "image-2.webp",
                "image/webp",
                &second.data.to_bytes().await.unwrap()
            ),
            file(
                "mask",
                "mask.png",
                "image/png",
                &mask.data.to_bytes().await.unwrap()
            ),
        ]
    );
}

#[tokio::test]
async fn streamed_edits_send_partial_images_and_non_default_moderation() {
    let server = MockServer::start().await;
    let sse =
        "event: image_edit.completed\ndata: {\"type\":\"image_edit.completed\",\"b64_json\":\"QUJD\"}\n\n";
    Mock::given(path("/v1/images/edits"))
        .respond_with(ResponseTemplate::new(200).set_body_raw(sse, "text/event-stream"))
        .mount(&server)
        .await;
    let params = edit(ImageParamsDraft {
        stream: Some(true),
        partial_images: Some(2),
        moderation: Some("low".into()),
        ..prompt_only("edit")
    });
    let images = [upload(
        "image",
        Some("a.jpg"),
        ImageFileFormat::Jpeg,
        b"\xff\xd8\xff jpeg",
    )];
    let call = UpstreamCall::Edit {
        params: &params,
        images: &images,
        mask: None,
    };
    let reply = upstream()
        .call(&target(&server, AccountKind::OpenAi), call, DEADLINE)
        .await
        .unwrap();
    let events = events(reply).await;
    assert_eq!(events.len(), 1);
    let request = only_request(&server).await;
    assert_eq!(request.headers.get("accept").unwrap(), "text/event-stream");
    let parts = parse_multipart(&request).await;
    let value = |name: &str| parts.iter().find(|p| p.name == name).map(|p| p.bytes.clone());
    assert_eq!(value("stream"), Some(Bytes::from("true")));
    assert_eq!(value("partial_images"), Some(Bytes::from("2")));
    assert_eq!(value("moderation"), Some(Bytes::from("low")));
    let image = parts.iter().find(|p| p.name == "image[]").unwrap();
    assert_eq!(image.content_type.as_deref(), Some("image/jpeg"));
    assert_eq!(image.filename.as_deref(), Some("a.jpg"));
}

#[tokio::test]
async fn responses_bodies_are_forwarded_as_they_are() {
    let server = MockServer::start().await;
    let answer = r#"{"id":"resp_1","object":"response","status":"completed","output":[{"type":"image_generation_call","result":"QUJD"}]}"#;
    Mock::given(method("POST"))
        .and(path("/v1/responses"))
        .and(header("authorization", format!("Bearer {KEY}").as_str()))
        .respond_with(ResponseTemplate::new(200).set_body_raw(answer, "application/json"))
        .mount(&server)
        .await;
    let body = json!({"model": "gpt-5", "input": "draw a cat", "store": false, "unknown_extra": {"kept": [1, 2]},
        "tools": [{"type": "image_generation", "model": "gpt-image-2", "size": "1024x1024"}],
        "tool_choice": {"type": "image_generation"}});
    let body = body.as_object().unwrap().clone();
    let call = UpstreamCall::Respond {
        body: &body,
        stream: false,
    };
    let reply = upstream()
        .call(&target(&server, AccountKind::OpenAi), call, DEADLINE)
        .await
        .unwrap();
    assert_eq!(json_body(reply).await, Bytes::from(answer));
    let request = only_request(&server).await;
    let sent: Value = serde_json::from_slice(&request.body).unwrap();
    assert_eq!(sent, Value::Object(body));
}

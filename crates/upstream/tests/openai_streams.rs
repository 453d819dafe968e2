//! Streamed answers are relayed event by event, in order, with their exact data.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::disallowed_methods
)]

mod common;

use common::*;
use imagegate_codec::sse::SseEvent;
use imagegate_domain::ImageParamsDraft;
use imagegate_upstream::{AccountKind, FailureKind, Upstream, UpstreamCall};
use serde_json::{Value, json};
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

fn named(event: &str, data: &str) -> SseEvent {
    SseEvent {
        event: Some(event.to_owned()),
        data: data.to_owned(),
        id: None,
    }
}

#[tokio::test]
async fn image_stream_events_arrive_in_order_with_exact_data() {
    let server = MockServer::start().await;
    let partial0 = r#"{"type":"image_generation.partial_image","b64_json":"UEFSVDA=","created_at":1766000001,"size":"1024x1024","quality":"high","background":"opaque","output_format":"png","partial_image_index":0}"#;
    let partial1 = r#"{"type":"image_generation.partial_image","b64_json":"UEFSVDE=","created_at":1766000004,"size":"1024x1024","quality":"high","background":"opaque","output_format":"png","partial_image_index":1}"#;
    let done = r#"{"type":"image_generation.completed","b64_json":"RklOQUw=","created_at":1766000009,"size":"1024x1024","quality":"high","background":"opaque","output_format":"png","usage":{"total_tokens":4180,"input_tokens":20,"output_tokens":4160,"input_tokens_details":{"text_tokens":20,"image_tokens":0}}}"#;
    let sse = format!(
        ": keepalive\n\nevent: image_generation.partial_image\ndata: {partial0}\n\nevent: image_generation.partial_image\r\ndata: {partial1}\r\n\r\nevent: image_generation.completed\ndata: {done}\n\n"
    );
    Mock::given(method("POST"))
        .and(path("/v1/images/generations"))
        .respond_with(ResponseTemplate::new(200).set_body_raw(sse, "text/event-stream"))
        .mount(&server)
        .await;
    let params = generation(ImageParamsDraft {
        stream: Some(true),
        partial_images: Some(2),
        ..prompt_only("a cat")
    });
    let reply = generate(&server, &params).await.unwrap();
    let events: Vec<SseEvent> = events(reply).await.into_iter().map(Result::unwrap).collect();
    assert_eq!(
        events,
        vec![
            named("image_generation.partial_image", partial0),
            named("image_generation.partial_image", partial1),
            named("image_generation.completed", done),
        ]
    );
    let request = only_request(&server).await;
    assert_eq!(request.headers.get("accept").unwrap(), "text/event-stream");
    let sent: Value = serde_json::from_slice(&request.body).unwrap();
    assert_eq!(
        (&sent["stream"], &sent["partial_images"]),
        (&json!(true), &json!(2))
    );
}

#[tokio::test]
async fn a_stream_cut_before_its_final_event_ends_with_a_failure() {
    let server = MockServer::start().await;
    let sse = "event: image_generation.partial_image\ndata: {\"type\":\"image_generation.partial_image\",\"b64_json\":\"QQ==\"}\n\n";
    Mock::given(path("/v1/images/generations"))
        .respond_with(ResponseTemplate::new(200).set_body_raw(sse, "text/event-stream"))
        .mount(&server)
        .await;
    let params = generation(ImageParamsDraft {
        stream: Some(true),
        ..prompt_only("a cat")
    });
    let items = events(generate(&server, &params).await.unwrap()).await;
    assert_eq!(items.len(), 2);
    assert!(items[0].is_ok());
    assert_eq!(items[1].as_ref().unwrap_err().kind, FailureKind::Transient);
}

#[tokio::test]
async fn an_error_event_becomes_the_last_item() {
    let server = MockServer::start().await;
    let sse = "event: error\ndata: {\"error\":{\"message\":\"Your request was rejected by the safety system.\",\"type\":\"image_generation_user_error\",\"param\":null,\"code\":\"moderation_blocked\"}}\n\n";
    Mock::given(path("/v1/images/generations"))
        .respond_with(ResponseTemplate::new(200).set_body_raw(sse, "text/event-stream"))
        .mount(&server)
        .await;
    let params = generation(ImageParamsDraft {
        stream: Some(true),
        ..prompt_only("a cat")
    });
    let items = events(generate(&server, &params).await.unwrap()).await;
    assert_eq!(items.len(), 1);
    let failure = items[0].as_ref().unwrap_err();
    assert_eq!(failure.kind, FailureKind::Refused);
    assert_eq!(failure.client_error().code(), Some("moderation_blocked"));
}

#[tokio::test]
async fn errors_before_the_stream_are_classified_like_json_calls() {
    let server = MockServer::start().await;
    Mock::given(path("/v1/images/generations"))
        .respond_with(ResponseTemplate::new(503).set_body_json(
            json!({"error": {"message": "overloaded", "type": "server_error", "param": null, "code": null}}),
        ))
        .mount(&server)
        .await;
    let params = generation(ImageParamsDraft {
        stream: Some(true),
        ..prompt_only("a cat")
    });
    let failure = generate(&server, &params).await.unwrap_err();
    assert_eq!(
        (failure.kind, failure.status),
        (FailureKind::Transient, Some(503))
    );
}

#[tokio::test]
async fn a_json_answer_to_a_stream_request_is_a_protocol_failure() {
    let server = MockServer::start().await;
    Mock::given(path("/v1/images/generations"))
        .respond_with(ResponseTemplate::new(200).set_body_raw(image_answer(), "application/json"))
        .mount(&server)
        .await;
    let params = generation(ImageParamsDraft {
        stream: Some(true),
        ..prompt_only("a cat")
    });
    let failure = generate(&server, &params).await.unwrap_err();
    assert_eq!(failure.kind, FailureKind::Protocol);
}

#[tokio::test]
async fn a_json_error_answering_a_stream_request_is_classified_like_an_error_event() {
    let server = MockServer::start().await;
    let limited = json!({"error": {"message": "Rate limit reached. Please try again in 20s.",
        "type": "requests", "param": null, "code": "rate_limit_exceeded"}});
    Mock::given(path("/v1/images/generations"))
        .respond_with(ResponseTemplate::new(200).set_body_json(limited))
        .mount(&server)
        .await;
    let params = generation(ImageParamsDraft {
        stream: Some(true),
        ..prompt_only("a cat")
    });
    let failure = generate(&server, &params).await.unwrap_err();
    assert!(
        matches!(
            failure.kind,
            FailureKind::RateLimited {
                reset_at_unix_ms: Some(_),
                ..
            }
        ),
        "{failure:?}"
    );
}

#[tokio::test]
async fn responses_streams_are_relayed_untouched() {
    let server = MockServer::start().await;
    let frames = [
        (
            "response.created",
            r#"{"type":"response.created","sequence_number":0,"response":{"id":"resp_1","status":"in_progress","output":[]}}"#,
        ),
        (
            "response.image_generation_call.partial_image",
            r#"{"type":"response.image_generation_call.partial_image","sequence_number":1,"output_index":0,"item_id":"ig_1","partial_image_index":0,"partial_image_b64":"QUJD"}"#,
        ),
        (
            "response.completed",
            r#"{"type":"response.completed","sequence_number":2,"response":{"id":"resp_1","status":"completed"}}"#,
        ),
    ];
    let sse: String = frames
        .iter()
        .map(|(name, data)| format!("event: {name}\ndata: {data}\n\n"))
        .collect();
    Mock::given(method("POST"))
        .and(path("/v1/responses"))
        .respond_with(ResponseTemplate::new(200).set_body_raw(sse, "text/event-stream"))
        .mount(&server)
        .await;
    let body = json!({"model": "gpt-5", "input": "a cat", "stream": true, "tools": [{"type": "image_generation", "partial_images": 1}]});
    let body = body.as_object().unwrap().clone();
    let reply = upstream()
        .call(
            &target(&server, AccountKind::OpenAi),
            UpstreamCall::Respond {
                body: &body,
                stream: true,
            },
            DEADLINE,
        )
        .await
        .unwrap();
    let events: Vec<SseEvent> = events(reply).await.into_iter().map(Result::unwrap).collect();
    let expected: Vec<SseEvent> = frames.iter().map(|(name, data)| named(name, data)).collect();
    assert_eq!(events, expected);
}

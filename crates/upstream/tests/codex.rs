//! ChatGPT-subscription accounts: Images requests through forced-tool Responses calls.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::disallowed_methods
)]

mod common;

use base64::Engine as _;
use common::*;
use futures::StreamExt as _;
use imagegate_codec::sse::SseEvent;
use imagegate_domain::{ImageFileFormat, ImageParams, ImageParamsDraft};
use imagegate_upstream::{AccountKind, Failure, FailureKind, Reply, Upstream, UpstreamCall};
use serde_json::{Value, json};
use wiremock::matchers::{body_partial_json, header, method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

/// The SSE body of one successful image call.
fn image_call_sse(result: &str, partials: &[&str]) -> String {
    let mut frames = vec![
        json!({"type": "response.created", "sequence_number": 0, "response": {"id": "resp_1", "status": "in_progress", "output": []}}),
        json!({"type": "response.output_item.added", "sequence_number": 1, "output_index": 0, "item": {"id": "ig_1", "type": "image_generation_call", "status": "in_progress"}}),
    ];
    for (index, partial) in partials.iter().enumerate() {
        frames.push(
            json!({"type": "response.image_generation_call.partial_image", "sequence_number": 2 + index,
            "output_index": 0, "item_id": "ig_1", "partial_image_index": index, "partial_image_b64": partial,
            "size": "1024x1536", "quality": "medium", "background": "opaque", "output_format": "png"}),
        );
    }
    frames.push(json!({"type": "response.output_item.done", "sequence_number": 10, "output_index": 0, "item": {
        "id": "ig_1", "type": "image_generation_call", "status": "completed", "result": result,
        "revised_prompt": "A cat", "size": "1024x1536", "quality": "medium", "background": "opaque", "output_format": "png"}}));
    frames.push(json!({"type": "response.completed", "sequence_number": 11, "response": {"id": "resp_1", "status": "completed",
        "output": [{"type": "image_generation_call", "result": result}],
        "usage": {"input_tokens": 500, "output_tokens": 20, "total_tokens": 520},
        "tool_usage": {"image_gen": {"input_tokens": 30, "input_tokens_details": {"text_tokens": 30, "image_tokens": 0},
            "output_tokens": 1000, "output_tokens_details": {"image_tokens": 1000, "text_tokens": 0}, "total_tokens": 1030}}}}));
    frames
        .iter()
        .map(|frame| format!("event: {}\ndata: {frame}\n\n", frame["type"].as_str().unwrap()))
        .collect()
}

fn sse(body: String) -> ResponseTemplate {
    ResponseTemplate::new(200).set_body_raw(body, "text/event-stream")
}

async fn codex_call(server: &MockServer, models: &[&str], call: UpstreamCall<'_>) -> Result<Reply, Failure> {
    let mut target = target(server, AccountKind::Codex);
    target.main_models = models.iter().map(|m| (*m).to_owned()).collect();
    upstream().call(&target, call, DEADLINE).await
}

fn params(draft: ImageParamsDraft) -> ImageParams {
    generation(draft)
}

#[tokio::test]
async fn a_failure_after_some_of_n_images_keeps_what_they_cost() {
    let server = MockServer::start().await;
    // Two images are made, then the account reaches its usage limit.
    Mock::given(method("POST"))
        .and(path("/v1/responses"))
        .respond_with(sse(image_call_sse("SU1BR0U=", &[])))
        .up_to_n_times(2)
        .with_priority(1)
        .mount(&server)
        .await;
    Mock::given(method("POST"))
        .and(path("/v1/responses"))
        .respond_with(ResponseTemplate::new(429).set_body_json(
            json!({"error": {"type": "usage_limit_reached", "message": "The usage limit has been reached", "resets_in_seconds": 600}}),
        ))
        .with_priority(2)
        .mount(&server)
        .await;
    let params = params(ImageParamsDraft {
        n: Some(3),
        ..prompt_only("a cat")
    });
    let failure = codex_call(&server, &["gpt-5"], UpstreamCall::Generate { params: &params })
        .await
        .unwrap_err();
    assert!(
        matches!(failure.kind, FailureKind::RateLimited { .. }),
        "{failure:?}"
    );
    let spent = failure.spent.expect("the two finished images are noted");
    assert_eq!(spent.images, 2);
    assert_eq!(
        (
            spent.usage.input_tokens,
            spent.usage.output_tokens,
            spent.usage.total_tokens
        ),
        (60, 2000, 2060)
    );
}

/// The SSE body of a call whose finished image is refused: `response.failed` billing its tokens.
fn refused_after_image_sse() -> String {
    let failed = json!({"type": "response.failed", "sequence_number": 4, "response": {"status": "failed",
        "error": {"code": "image_content_policy_violation", "message": "The generated image was rejected."},
        "usage": {"input_tokens": 500, "output_tokens": 20, "total_tokens": 520},
        "tool_usage": {"image_gen": {"input_tokens": 30, "output_tokens": 1000, "total_tokens": 1030}}}});
    format!("event: response.failed\ndata: {failed}\n\n")
}

/// An upstream whose first call makes its image and whose next ones have theirs refused once
/// made, and billed.
async fn image_then_refused_image() -> MockServer {
    let server = MockServer::start().await;
    Mock::given(path("/v1/responses"))
        .respond_with(sse(image_call_sse("SU1BR0U=", &[])))
        .up_to_n_times(1)
        .with_priority(1)
        .mount(&server)
        .await;
    Mock::given(path("/v1/responses"))
        .respond_with(sse(refused_after_image_sse()))
        .with_priority(2)
        .mount(&server)
        .await;
    server
}

#[tokio::test]
async fn a_call_refused_after_its_image_adds_what_it_billed_to_the_images_made_before() {
    let server = image_then_refused_image().await;
    let params = params(ImageParamsDraft {
        n: Some(2),
        ..prompt_only("two cats")
    });
    let failure = codex_call(&server, &["gpt-5"], UpstreamCall::Generate { params: &params })
        .await
        .unwrap_err();
    assert_eq!(failure.kind, FailureKind::Refused, "{failure:?}");
    let spent = failure.spent.expect("what the account spent is noted");
    assert_eq!(spent.images, 1);
    assert_eq!(
        (
            spent.usage.input_tokens,
            spent.usage.output_tokens,
            spent.usage.total_tokens
        ),
        (60, 2000, 2060),
        "the image made and the refused call's image tokens"
    );
}

#[tokio::test]
async fn a_streamed_call_refused_after_its_image_fails_with_only_its_own_billed_tokens() {
    let server = image_then_refused_image().await;
    let params = params(ImageParamsDraft {
        n: Some(2),
        stream: Some(true),
        ..prompt_only("two cats")
    });
    let reply = codex_call(&server, &["gpt-5"], UpstreamCall::Generate { params: &params })
        .await
        .unwrap();
    let items = events(reply).await;
    let completed = items
        .iter()
        .filter_map(|item| item.as_ref().ok())
        .filter(|event| event.data.contains("image_generation.completed"))
        .count();
    assert_eq!(completed, 1, "the first image went out");
    let failure = items
        .into_iter()
        .find_map(Result::err)
        .expect("the second call fails the stream");
    assert_eq!(failure.kind, FailureKind::Refused);
    // The first image's usage went out on its completed event: the failure carries only the
    // refused call's own tokens, or the record would count the first image twice.
    let spent = failure.spent.expect("the refused call's tokens are noted");
    assert_eq!(
        (spent.images, spent.usage.output_tokens, spent.usage.total_tokens),
        (0, 1000, 1030)
    );
}

#[tokio::test]
async fn the_images_document_goes_out_in_pieces_with_its_length_and_summary() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v1/responses"))
        .respond_with(sse(image_call_sse("SU1BR0U=", &[])))
        .expect(2)
        .mount(&server)
        .await;
    let params = params(ImageParamsDraft {
        n: Some(2),
        size: Some("1024x1536".into()),
        ..prompt_only("a cat")
    });
    let reply = codex_call(&server, &["gpt-5"], UpstreamCall::Generate { params: &params })
        .await
        .unwrap();
    let Reply::JsonStream(mut stream) = reply else {
        panic!("the images go out from their own buffers, not copied into a whole document")
    };
    assert!(
        stream.head.ends_with(b"\"data\":[{\"b64_json\":\""),
        "{:?}",
        stream.head
    );
    let mut body = stream.head.to_vec();
    while let Some(piece) = stream.rest.next().await {
        body.extend_from_slice(&piece.unwrap());
    }
    assert_eq!(stream.content_length, Some(body.len() as u64));
    let document: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(document["data"].as_array().map(Vec::len), Some(2));
    let summary = stream
        .summary
        .take()
        .expect("the summary, once the body has ended");
    assert_eq!(summary.images, 2);
    assert_eq!(summary.size.as_deref(), Some("1024x1536"));
    assert_eq!(
        summary.usage.map(|usage| usage.output_tokens),
        document["usage"]["output_tokens"].as_u64()
    );
}

#[tokio::test]
async fn n_images_are_n_sequential_calls_summed_into_one_images_response() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v1/responses"))
        .and(header("authorization", format!("Bearer {KEY}").as_str()))
        .respond_with(sse(image_call_sse("SU1BR0U=", &[])))
        .expect(2)
        .mount(&server)
        .await;
    let params = params(ImageParamsDraft {
        n: Some(2),
        size: Some("1024x1536".into()),
        quality: Some("medium".into()),
        ..prompt_only("a cat")
    });
    let reply = codex_call(&server, &["gpt-5"], UpstreamCall::Generate { params: &params })
        .await
        .unwrap();
    let body: Value = serde_json::from_slice(&json_body(reply).await).unwrap();
    assert_eq!(
        body["data"],
        json!([
            {"b64_json": "SU1BR0U=", "revised_prompt": "A cat"},
            {"b64_json": "SU1BR0U=", "revised_prompt": "A cat"}
        ])
    );
    assert_eq!(
        (
            &body["size"],
            &body["quality"],
            &body["background"],
            &body["output_format"]
        ),
        (
            &json!("1024x1536"),
            &json!("medium"),
            &json!("opaque"),
            &json!("png")
        )
    );
    assert_eq!(
        body["usage"],
        json!({"input_tokens": 60, "input_tokens_details": {"text_tokens": 60, "image_tokens": 0},
        "output_tokens": 2000, "output_tokens_details": {"text_tokens": 0, "image_tokens": 2000}, "total_tokens": 2060})
    );

    let requests = server.received_requests().await.unwrap();
    assert_eq!(requests.len(), 2);
    let sent: Value = serde_json::from_slice(&requests[0].body).unwrap();
    assert_eq!(sent["model"], "gpt-5");
    assert_eq!((&sent["stream"], &sent["store"]), (&json!(true), &json!(false)));
    assert_eq!(sent["tool_choice"], json!({"type": "image_generation"}));
    assert_eq!(
        sent["tools"],
        json!([{"type": "image_generation", "model": "gpt-image-2-2026-04-21", "size": "1024x1536",
        "quality": "medium", "background": "auto", "output_format": "png", "moderation": "auto", "action": "generate"}])
    );
    assert_eq!(
        sent["input"][0]["content"],
        json!([{"type": "input_text", "text": "a cat"}])
    );
}

#[tokio::test]
async fn a_stream_of_n_images_carries_the_usage_so_far_on_each_completed_event() {
    let server = MockServer::start().await;
    Mock::given(path("/v1/responses"))
        .respond_with(sse(image_call_sse("SU1BR0U=", &[])))
        .expect(2)
        .mount(&server)
        .await;
    let params = params(ImageParamsDraft {
        n: Some(2),
        stream: Some(true),
        ..prompt_only("two cats")
    });
    let reply = codex_call(&server, &["gpt-5"], UpstreamCall::Generate { params: &params })
        .await
        .unwrap();
    let usages: Vec<Value> = events(reply)
        .await
        .into_iter()
        .map(|event| serde_json::from_str::<Value>(&event.unwrap().data).unwrap())
        .filter(|data| data["type"] == "image_generation.completed")
        .map(|data| data["usage"].clone())
        .collect();
    // Each call costs 30 in and 1000 out; the second event carries both calls, as the one usage
    // of the same request unstreamed does.
    assert_eq!(
        usages,
        [
            json!({"input_tokens": 30, "input_tokens_details": {"text_tokens": 30, "image_tokens": 0},
            "output_tokens": 1000, "output_tokens_details": {"text_tokens": 0, "image_tokens": 1000}, "total_tokens": 1030}),
            json!({"input_tokens": 60, "input_tokens_details": {"text_tokens": 60, "image_tokens": 0},
            "output_tokens": 2000, "output_tokens_details": {"text_tokens": 0, "image_tokens": 2000}, "total_tokens": 2060})
        ]
    );
}

#[tokio::test]
async fn an_unsupported_main_model_falls_back_to_the_next() {
    let server = MockServer::start().await;
    Mock::given(path("/v1/responses"))
        .and(body_partial_json(json!({"model": "gpt-retired"})))
        .respond_with(ResponseTemplate::new(400).set_body_json(json!({"detail": "The 'gpt-retired' model is not supported when using Codex with a ChatGPT account."})))
        .expect(1)
        .mount(&server)
        .await;
    Mock::given(path("/v1/responses"))
        .and(body_partial_json(json!({"model": "gpt-5"})))
        .respond_with(sse(image_call_sse("T0s=", &[])))
        .expect(2)
        .mount(&server)
        .await;
    let params = params(ImageParamsDraft {
        n: Some(2),
        ..prompt_only("a cat")
    });
    let reply = codex_call(
        &server,
        &["gpt-retired", "gpt-5"],
        UpstreamCall::Generate { params: &params },
    )
    .await
    .unwrap();
    let body: Value = serde_json::from_slice(&json_body(reply).await).unwrap();
    assert_eq!(body["data"].as_array().unwrap().len(), 2);
    let models: Vec<Value> = server
        .received_requests()
        .await
        .unwrap()
        .iter()
        .map(|r| serde_json::from_slice::<Value>(&r.body).unwrap()["model"].clone())
        .collect();
    assert_eq!(
        models,
        vec![json!("gpt-retired"), json!("gpt-5"), json!("gpt-5")],
        "the working model is kept for the second image"
    );
}

#[tokio::test]
async fn when_every_main_model_is_unsupported_the_failure_says_so() {
    let server = MockServer::start().await;
    Mock::given(path("/v1/responses"))
        .respond_with(ResponseTemplate::new(400).set_body_json(json!({"error": {"message": "Model not found gpt-x", "type": "invalid_request_error", "param": "model", "code": "model_not_found"}})))
        .mount(&server)
        .await;
    let params = params(prompt_only("a cat"));
    let failure = codex_call(
        &server,
        &["gpt-x", "gpt-y"],
        UpstreamCall::Generate { params: &params },
    )
    .await
    .unwrap_err();
    assert_eq!(failure.kind, FailureKind::ModelUnsupported);
    assert_eq!(server.received_requests().await.unwrap().len(), 2);
}

#[tokio::test]
async fn streamed_edits_relay_partials_and_the_completed_image_as_edit_events() {
    let server = MockServer::start().await;
    Mock::given(path("/v1/responses"))
        .respond_with(sse(image_call_sse("RklOQUw=", &["UDA=", "UDE="])))
        .mount(&server)
        .await;
    let params = edit(ImageParamsDraft {
        stream: Some(true),
        partial_images: Some(2),
        ..prompt_only("add a hat")
    });
    let images = [upload(
        "image",
        Some("cat.png"),
        ImageFileFormat::Png,
        b"\x89PNG cat",
    )];
    let mask = upload("mask", None, ImageFileFormat::Png, b"\x89PNG mask");
    let call = UpstreamCall::Edit {
        params: &params,
        images: &images,
        mask: Some(&mask),
    };
    let reply = codex_call(&server, &["gpt-5"], call).await.unwrap();
    let events: Vec<SseEvent> = events(reply).await.into_iter().map(Result::unwrap).collect();
    let names: Vec<&str> = events.iter().map(|e| e.event.as_deref().unwrap()).collect();
    assert_eq!(
        names,
        [
            "image_edit.partial_image",
            "image_edit.partial_image",
            "image_edit.completed"
        ]
    );
    let data: Vec<Value> = events
        .iter()
        .map(|e| serde_json::from_str(&e.data).unwrap())
        .collect();
    assert_eq!(
        (&data[0]["b64_json"], &data[0]["partial_image_index"]),
        (&json!("UDA="), &json!(0))
    );
    assert_eq!(
        (&data[1]["b64_json"], &data[1]["partial_image_index"]),
        (&json!("UDE="), &json!(1))
    );
    assert_eq!(data[2]["type"], "image_edit.completed");
    assert_eq!(data[2]["b64_json"], "RklOQUw=");
    assert_eq!(data[2]["size"], "1024x1536");
    assert_eq!(data[2]["usage"]["output_tokens"], 1000);
    assert!(data[2]["created_at"].as_i64().unwrap() > 1_700_000_000);

    let request = only_request(&server).await;
    let sent: Value = serde_json::from_slice(&request.body).unwrap();
    let b64 = |bytes: &[u8]| base64::engine::general_purpose::STANDARD.encode(bytes);
    assert_eq!(
        sent["input"][0]["content"][1],
        json!({"type": "input_image", "image_url": format!("data:image/png;base64,{}", b64(b"\x89PNG cat"))})
    );
    assert_eq!(
        sent["tools"][0]["input_image_mask"],
        json!({"image_url": format!("data:image/png;base64,{}", b64(b"\x89PNG mask"))})
    );
    assert_eq!(
        (&sent["tools"][0]["action"], &sent["tools"][0]["partial_images"]),
        (&json!("edit"), &json!(2))
    );
}

#[tokio::test]
async fn a_failed_response_is_classified() {
    let server = MockServer::start().await;
    let failed = json!({"type": "response.failed", "sequence_number": 3, "response": {"status": "failed",
        "error": {"code": "moderation_blocked", "message": "Your request was rejected by the safety system."}}});
    Mock::given(path("/v1/responses"))
        .respond_with(sse(format!("event: response.failed\ndata: {failed}\n\n")))
        .mount(&server)
        .await;
    let params = params(prompt_only("something"));
    let failure = codex_call(&server, &["gpt-5"], UpstreamCall::Generate { params: &params })
        .await
        .unwrap_err();
    assert_eq!(failure.kind, FailureKind::Refused);
    assert_eq!(failure.client_error().code(), Some("moderation_blocked"));
}

#[tokio::test]
async fn a_completed_response_without_an_image_is_no_image() {
    let server = MockServer::start().await;
    let done = json!({"type": "response.completed", "response": {"status": "completed", "output": [{"type": "message", "content": []}]}});
    Mock::given(path("/v1/responses"))
        .respond_with(sse(format!("event: response.completed\ndata: {done}\n\n")))
        .mount(&server)
        .await;
    let params = params(prompt_only("something"));
    let failure = codex_call(&server, &["gpt-5"], UpstreamCall::Generate { params: &params })
        .await
        .unwrap_err();
    assert_eq!(failure.kind, FailureKind::NoImage);
}

#[tokio::test]
async fn a_codex_account_without_main_model_is_refused_before_calling() {
    let server = MockServer::start().await;
    let params = params(prompt_only("a cat"));
    let failure = codex_call(&server, &[], UpstreamCall::Generate { params: &params })
        .await
        .unwrap_err();
    assert_eq!(failure.kind, FailureKind::Protocol);
    assert!(server.received_requests().await.unwrap().is_empty());
}

#[tokio::test]
async fn a_client_taking_its_time_between_images_does_not_time_the_next_call_out() {
    let server = MockServer::start().await;
    // Each call takes 0.8 s of the upstream's own time.
    Mock::given(path("/v1/responses"))
        .respond_with(sse(image_call_sse("SU1BR0U=", &[])).set_delay(std::time::Duration::from_millis(800)))
        .mount(&server)
        .await;
    let params = params(ImageParamsDraft {
        n: Some(2),
        stream: Some(true),
        ..prompt_only("two cats")
    });
    let mut target = target(&server, AccountKind::Codex);
    target.main_models = vec!["gpt-5".to_owned()];
    let deadline = std::time::Duration::from_secs(2);
    let reply = upstream()
        .call(&target, UpstreamCall::Generate { params: &params }, deadline)
        .await
        .unwrap();
    let Reply::Events(events) = reply else {
        panic!("not a stream")
    };
    let mut events = imagegate_upstream::joined_events(events);
    let first = events.next().await.unwrap().unwrap();
    assert_eq!(first.event.as_deref(), Some("image_generation.completed"));
    // The client holds the stream for 1 s: 1.8 s have passed when the second call starts, and it
    // needs 0.8 s more; only 1.6 s of that is the upstream's.
    tokio::time::sleep(std::time::Duration::from_secs(1)).await;
    let second = events.next().await.unwrap();
    let second = second.unwrap_or_else(|failure| panic!("the second image failed: {failure:?}"));
    assert_eq!(second.event.as_deref(), Some("image_generation.completed"));
    assert!(events.next().await.is_none());
}

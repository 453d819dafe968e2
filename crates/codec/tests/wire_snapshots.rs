//! The exact bytes of every success body and stream frame: any change is a reviewed snapshot diff.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::disallowed_methods
)]

use imagegate_codec::sse::SseDecoder;
use imagegate_codec::wire::images::{CompletedImageEvent, ImageData, ImageEndpoint, PartialImageEvent};
use imagegate_codec::wire::models::{ModelEntry, ModelList};
use imagegate_codec::wire::responses::{
    ImageCallStatus, ImageGenerationCall, InputTokensDetails, MessageItem, OutputContent, OutputItem,
    OutputTokensDetails, PartialImagePayload, ResponseError, ResponseEvent, ResponseEventSequencer,
    ResponseObject, ResponseStatus, ResponseStreamEvent, ResponsesUsage, image_tool_echo,
};
use imagegate_codec::wire::{ImageStreamEvent, ImagesResponse};
use imagegate_domain::{ImageToolDraft, ModelCatalog, TokenDetails, Usage, validate_image_tool};
use serde_json::{Value, json};

fn usage() -> Usage {
    Usage {
        input_tokens: 14,
        input_tokens_details: TokenDetails {
            text_tokens: 14,
            image_tokens: 0,
        },
        output_tokens: 1056,
        output_tokens_details: TokenDetails {
            text_tokens: 0,
            image_tokens: 1056,
        },
        total_tokens: 1070,
    }
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8(bytes.to_vec()).unwrap()
}

/// Decodes frames back and checks every event name equals the JSON `type`.
fn decode_frames(frames: &[u8]) -> Vec<Value> {
    let mut decoder = SseDecoder::new();
    decoder.push(frames).unwrap();
    let mut payloads = Vec::new();
    while let Some(event) = decoder.pop() {
        let payload: Value = serde_json::from_str(&event.data).unwrap();
        assert_eq!(event.event.as_deref(), payload["type"].as_str());
        payloads.push(payload);
    }
    assert!(decoder.is_idle());
    payloads
}

#[test]
fn images_response() {
    let response = ImagesResponse {
        created: 1_766_000_000,
        background: Some("opaque".into()),
        data: vec![
            ImageData {
                b64_json: "UklGRg==".into(),
                revised_prompt: Some("a lighthouse at dusk".into()),
            },
            ImageData {
                b64_json: "UklGRh==".into(),
                revised_prompt: None,
            },
        ],
        model: Some("gpt-image-2".into()),
        output_format: Some("webp".into()),
        quality: Some("medium".into()),
        size: Some("1536x864".into()),
        usage: Some(usage()),
    };
    let bytes = serde_json::to_vec(&response).unwrap();
    let back: ImagesResponse = serde_json::from_slice(&bytes).unwrap();
    assert_eq!(back, response);
    insta::assert_snapshot!("images_response", text(&bytes));
    let minimal = ImagesResponse {
        created: 1,
        background: None,
        data: vec![],
        model: None,
        output_format: None,
        quality: None,
        size: None,
        usage: None,
    };
    assert_eq!(
        serde_json::to_string(&minimal).unwrap(),
        r#"{"created":1,"data":[]}"#
    );
}

#[test]
fn image_stream_events() {
    let partial = |index| PartialImageEvent {
        b64_json: "iVBORw==".into(),
        created_at: 1_766_000_001,
        size: "1024x1024".into(),
        quality: "high".into(),
        background: "opaque".into(),
        output_format: "png".into(),
        partial_image_index: index,
    };
    let completed = CompletedImageEvent {
        b64_json: "iVBORw0KGgo=".into(),
        created_at: 1_766_000_009,
        size: "1024x1024".into(),
        quality: "high".into(),
        background: "opaque".into(),
        output_format: "png".into(),
        usage: usage(),
    };
    for endpoint in [ImageEndpoint::Generation, ImageEndpoint::Edit] {
        let events = [
            ImageStreamEvent::partial(endpoint, partial(0)),
            ImageStreamEvent::completed(endpoint, completed.clone()),
        ];
        let frames: Vec<u8> = events.iter().flat_map(|event| event.to_sse().to_vec()).collect();
        let payloads = decode_frames(&frames);
        assert_eq!(payloads.len(), 2);
        for (payload, event) in payloads.iter().zip(&events) {
            let back: ImageStreamEvent = serde_json::from_value(payload.clone()).unwrap();
            assert_eq!(&back, event);
        }
        for key in [
            "b64_json",
            "created_at",
            "size",
            "quality",
            "background",
            "output_format",
        ] {
            assert!(payloads.iter().all(|p| p.get(key).is_some()), "{key}");
        }
        assert_eq!(payloads[0]["partial_image_index"], json!(0));
        assert_eq!(
            payloads[1]["usage"]["input_tokens_details"]["text_tokens"],
            json!(14)
        );
        let name = match endpoint {
            ImageEndpoint::Generation => "image_generation_stream",
            ImageEndpoint::Edit => "image_edit_stream",
        };
        insta::assert_snapshot!(name, text(&frames));
    }
}

fn image_call(status: ImageCallStatus, result: Option<&str>) -> ImageGenerationCall {
    ImageGenerationCall {
        id: "ig_01ab".into(),
        status,
        action: Some("generate".into()),
        background: Some("opaque".into()),
        output_format: Some("png".into()),
        quality: Some("high".into()),
        size: Some("1024x1024".into()),
        revised_prompt: Some("A lighthouse at dusk in soft watercolor".into()),
        result: result.map(str::to_owned),
    }
}

fn message(text: &str) -> MessageItem {
    MessageItem {
        id: "msg_01ab".into(),
        status: "completed".into(),
        role: "assistant".into(),
        content: vec![OutputContent::OutputText {
            annotations: vec![],
            logprobs: vec![],
            text: text.into(),
        }],
    }
}

fn envelope() -> ResponseObject {
    let tool = validate_image_tool(
        ImageToolDraft {
            model: Some("gpt-image-2".into()),
            quality: Some("high".into()),
            ..Default::default()
        },
        &ModelCatalog::default(),
    )
    .unwrap();
    let mut response = ResponseObject::new("resp_01ab", 1_766_000_000, "gpt-5");
    response.tool_choice = json!({"type": "image_generation"});
    response.tools = vec![image_tool_echo(&tool)];
    response
}

#[test]
fn responses_envelope() {
    let mut response = envelope();
    response.status = ResponseStatus::Completed;
    response.output = vec![
        OutputItem::ImageGenerationCall(image_call(ImageCallStatus::Completed, Some("iVBORw0KGgo="))),
        OutputItem::Message(message("Here is your lighthouse.")),
    ];
    response.usage = Some(ResponsesUsage {
        input_tokens: 120,
        input_tokens_details: InputTokensDetails {
            cached_tokens: 0,
            cache_write_tokens: 0,
        },
        output_tokens: 40,
        output_tokens_details: OutputTokensDetails { reasoning_tokens: 0 },
        total_tokens: 160,
    });
    let bytes = serde_json::to_vec(&response).unwrap();
    let value: Value = serde_json::from_slice(&bytes).unwrap();
    let always_sent = [
        "id",
        "object",
        "created_at",
        "status",
        "background",
        "error",
        "incomplete_details",
        "instructions",
        "max_output_tokens",
        "model",
        "output",
        "parallel_tool_calls",
        "previous_response_id",
        "reasoning",
        "service_tier",
        "store",
        "temperature",
        "text",
        "tool_choice",
        "tools",
        "top_p",
        "truncation",
        "usage",
        "user",
        "metadata",
    ];
    for key in always_sent {
        assert!(value.get(key).is_some(), "{key}");
    }
    assert_eq!(serde_json::from_value::<ResponseObject>(value).unwrap(), response);
    insta::assert_snapshot!("responses_envelope", text(&bytes));
}

#[test]
fn responses_stream() {
    let mut seq = ResponseEventSequencer::new();
    let mut frames = Vec::new();
    let created = envelope();
    let mut done = envelope();
    done.status = ResponseStatus::Completed;
    done.output = vec![
        OutputItem::ImageGenerationCall(image_call(ImageCallStatus::Completed, Some("iVBORw0KGgo="))),
        OutputItem::Message(message("Done.")),
    ];
    let (ig, msg) = ("ig_01ab".to_owned(), "msg_01ab".to_owned());
    let empty_text = OutputContent::OutputText {
        annotations: vec![],
        logprobs: vec![],
        text: String::new(),
    };
    let done_text = OutputContent::OutputText {
        annotations: vec![],
        logprobs: vec![],
        text: "Done.".into(),
    };
    let events = vec![
        ResponseEvent::Created {
            response: Box::new(created.clone()),
        },
        ResponseEvent::InProgress {
            response: Box::new(created),
        },
        ResponseEvent::OutputItemAdded {
            output_index: 0,
            item: OutputItem::ImageGenerationCall(ImageGenerationCall::in_progress("ig_01ab")),
        },
        ResponseEvent::ImageGenerationCallInProgress {
            output_index: 0,
            item_id: ig.clone(),
        },
        ResponseEvent::ImageGenerationCallGenerating {
            output_index: 0,
            item_id: ig.clone(),
        },
        ResponseEvent::ImageGenerationCallPartialImage(PartialImagePayload {
            output_index: 0,
            item_id: ig.clone(),
            partial_image_index: 0,
            partial_image_b64: "iVBOR==".into(),
            size: Some("1024x1024".into()),
            quality: Some("high".into()),
            background: Some("opaque".into()),
            output_format: Some("png".into()),
        }),
        ResponseEvent::ImageGenerationCallCompleted {
            output_index: 0,
            item_id: ig,
        },
        ResponseEvent::OutputItemDone {
            output_index: 0,
            item: OutputItem::ImageGenerationCall(image_call(
                ImageCallStatus::Completed,
                Some("iVBORw0KGgo="),
            )),
        },
        ResponseEvent::OutputItemAdded {
            output_index: 1,
            item: OutputItem::Message(MessageItem {
                status: "in_progress".into(),
                content: vec![],
                ..message("")
            }),
        },
        ResponseEvent::ContentPartAdded {
            item_id: msg.clone(),
            output_index: 1,
            content_index: 0,
            part: empty_text,
        },
        ResponseEvent::OutputTextDelta {
            item_id: msg.clone(),
            output_index: 1,
            content_index: 0,
            delta: "Done.".into(),
            logprobs: vec![],
        },
        ResponseEvent::OutputTextDone {
            item_id: msg.clone(),
            output_index: 1,
            content_index: 0,
            text: "Done.".into(),
            logprobs: vec![],
        },
        ResponseEvent::ContentPartDone {
            item_id: msg,
            output_index: 1,
            content_index: 0,
            part: done_text,
        },
        ResponseEvent::OutputItemDone {
            output_index: 1,
            item: OutputItem::Message(message("Done.")),
        },
        ResponseEvent::Completed {
            response: Box::new(done),
        },
    ];
    for event in &events {
        frames.extend_from_slice(&seq.frame(event.clone()));
    }
    assert_eq!(seq.next_number(), events.len() as u64);
    let payloads = decode_frames(&frames);
    for (n, (payload, event)) in payloads.iter().zip(&events).enumerate() {
        let back = ResponseStreamEvent::from_data(&payload.to_string())
            .unwrap()
            .unwrap();
        assert_eq!(back.sequence_number, n as u64);
        assert_eq!(&back.event, event);
        assert!(ResponseEvent::TYPES.contains(&event.event_type()));
    }
    assert_eq!(payloads.first().unwrap()["type"], json!("response.created"));
    assert_eq!(payloads.last().unwrap()["type"], json!("response.completed"));
    for (n, payload) in payloads.iter().enumerate() {
        assert_eq!(
            payload["sequence_number"],
            json!(n),
            "sequence of {}",
            payload["type"]
        );
    }
    let partial = payloads
        .iter()
        .find(|p| p["type"] == "response.image_generation_call.partial_image")
        .unwrap();
    assert_eq!(partial["partial_image_b64"], json!("iVBOR=="));
    assert!(partial.get("b64_json").is_none());
    insta::assert_snapshot!("responses_stream", text(&frames));
}

#[test]
fn responses_failed_event() {
    let mut failed = envelope();
    failed.status = ResponseStatus::Failed;
    failed.error = Some(ResponseError {
        code: "image_content_policy_violation".into(),
        message: "The image request was refused by the safety system.".into(),
    });
    let frame = ResponseEventSequencer::new().frame(ResponseEvent::Failed {
        response: Box::new(failed),
    });
    let payloads = decode_frames(&frame);
    assert_eq!(payloads[0]["response"]["status"], json!("failed"));
    insta::assert_snapshot!("responses_failed", text(&frame));
}

#[test]
fn models_list() {
    let list: ModelList = [
        ModelEntry::new("gpt-image-2", 1_776_729_600, "system"),
        ModelEntry::new("gpt-image-2-2026-04-21", 1_776_729_600, "system"),
    ]
    .into_iter()
    .collect();
    let bytes = serde_json::to_vec(&list).unwrap();
    assert_eq!(serde_json::from_slice::<ModelList>(&bytes).unwrap(), list);
    insta::assert_snapshot!("models_list", text(&bytes));
}

#[test]
fn upstream_events_of_other_types_and_unknown_items_pass_through() {
    let unknown = r#"{"type":"response.reasoning_summary_text.delta","delta":"x","sequence_number":3}"#;
    assert_eq!(ResponseStreamEvent::from_data(unknown).unwrap(), None);
    let item = r#"{"type":"response.output_item.added","output_index":0,"sequence_number":2,
                  "item":{"type":"web_search_call","id":"ws_1","status":"in_progress"}}"#;
    let event = ResponseStreamEvent::from_data(item).unwrap().unwrap();
    let ResponseEvent::OutputItemAdded {
        item: OutputItem::Other(value),
        ..
    } = &event.event
    else {
        panic!("unexpected {event:?}");
    };
    assert_eq!(value["type"], json!("web_search_call"));
    // Re-encoding keeps the item as it came.
    let again: Value = serde_json::to_value(&event).unwrap();
    assert_eq!(
        again["item"],
        json!({"type":"web_search_call","id":"ws_1","status":"in_progress"})
    );
    assert!(ResponseStreamEvent::from_data("not json").is_err());

    let image = r#"{"type":"image_edit.partial_image","b64_json":"AA==","created_at":1,"size":"1024x1024",
                   "quality":"low","background":"opaque","output_format":"png","partial_image_index":2}"#;
    let ImageStreamEvent::EditPartialImage(partial) = ImageStreamEvent::from_data(image).unwrap() else {
        panic!("wrong variant");
    };
    assert_eq!(partial.partial_image_index, 2);
}

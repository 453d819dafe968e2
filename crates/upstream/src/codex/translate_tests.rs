use super::*;
use crate::failure::FailureKind;
use imagegate_domain::TokenDetails;
use serde_json::json;

/// Steps with no final image in hand yet.
fn step(event: &SseEvent) -> Step {
    super::step(event, false)
}

fn ev(data: Value) -> SseEvent {
    let kind = data["type"].as_str().map(str::to_owned);
    SseEvent {
        event: kind,
        data: data.to_string(),
        id: None,
    }
}

#[test]
fn partial_images_keep_their_index_and_properties() {
    let step = step(&ev(
        json!({"type": "response.image_generation_call.partial_image", "sequence_number": 5,
        "output_index": 0, "item_id": "ig_1", "partial_image_index": 1, "partial_image_b64": "UEFSVA==",
        "size": "1536x1024", "quality": "high", "background": "opaque", "output_format": "png"}),
    ));
    assert_eq!(
        step,
        Step::Partial(PartialImage {
            b64: "UEFSVA==".into(),
            index: 1,
            resolved: Resolved {
                size: Some("1536x1024".into()),
                quality: Some("high".into()),
                background: Some("opaque".into()),
                output_format: Some("png".into()),
            },
        })
    );
}

#[test]
fn the_done_image_item_is_the_final_image() {
    let step = step(&ev(
        json!({"type": "response.output_item.done", "output_index": 0, "item": {
        "id": "ig_1", "type": "image_generation_call", "status": "completed", "result": "RklOQUw=",
        "revised_prompt": "A fox", "size": "1024x1024", "output_format": "webp"}}),
    ));
    let Step::Image(image) = step else {
        panic!("expected an image, got {step:?}")
    };
    assert_eq!(image.b64, "RklOQUw=");
    assert_eq!(image.revised_prompt.as_deref(), Some("A fox"));
    assert_eq!(image.resolved.size.as_deref(), Some("1024x1024"));
    assert_eq!(image.resolved.quality, None);
}

/// A PNG file of `width` x `height` (RGBA) whose pixel data is `idat_len` zero bytes: only its
/// header is read.
fn png_b64(width: u32, height: u32, idat_len: usize) -> String {
    png_b64_of(width, height, 6, 0, idat_len)
}

/// A PNG file of colour type `colour` with an ancillary chunk of `before_idat` bytes between its
/// header and its pixel data.
fn png_b64_of(width: u32, height: u32, colour: u8, before_idat: usize, idat_len: usize) -> String {
    let mut file = b"\x89PNG\r\n\x1a\n".to_vec();
    file.extend_from_slice(&13u32.to_be_bytes());
    file.extend_from_slice(b"IHDR");
    file.extend_from_slice(&width.to_be_bytes());
    file.extend_from_slice(&height.to_be_bytes());
    file.extend_from_slice(&[8, colour, 0, 0, 0]);
    file.extend_from_slice(&[0; 4]);
    if before_idat > 0 {
        file.extend_from_slice(&u32::try_from(before_idat).expect("small").to_be_bytes());
        file.extend_from_slice(b"iCCP");
        file.resize(file.len() + before_idat + 4, 0);
    }
    file.extend_from_slice(&u32::try_from(idat_len).expect("small").to_be_bytes());
    file.extend_from_slice(b"IDAT");
    file.resize(file.len() + idat_len + 4, 0);
    STANDARD.encode(file)
}

#[test]
fn an_image_smaller_than_the_upstream_says_is_reported_at_its_own_size() {
    // A 4K request answered with a 1.5 MP image that the item calls 3840x2160.
    let b64 = png_b64(1632, 928, 200_000);
    assert!(b64.len() > HEADER_B64_CHARS, "the header is read from a prefix");
    let done = json!({"type": "response.output_item.done", "item": {"type": "image_generation_call",
        "result": b64, "size": "3840x2160", "quality": "high"}});
    let Step::Image(image) = step(&ev(done)) else {
        panic!("expected an image")
    };
    assert_eq!(image.resolved.size.as_deref(), Some("1632x928"));
    assert_eq!(image.resolved.quality.as_deref(), Some("high"));
    let partial = json!({"type": "response.image_generation_call.partial_image",
        "partial_image_index": 0, "partial_image_b64": png_b64(256, 144, 10), "size": "3840x2160"});
    let Step::Partial(partial) = step(&ev(partial)) else {
        panic!("expected a partial image")
    };
    assert_eq!(partial.resolved.size.as_deref(), Some("256x144"));
    assert_eq!(partial.index, 0);
}

#[test]
fn an_opaque_png_is_measured_from_its_header_alone() {
    // RGB (no alpha channel) with a 100 KB profile before its pixel data, past the decoded prefix.
    let b64 = png_b64_of(2048, 1152, 2, 100_000, 1_000);
    assert_eq!(header_size(&b64).as_deref(), Some("2048x1152"));
}

#[test]
fn an_unreadable_header_leaves_the_upstreams_size() {
    assert_eq!(header_size("RklOQUw="), None, "not an image");
    assert_eq!(header_size("not base64!"), None);
    // A JPEG whose frame header lies past the decoded prefix (a 60,000-byte APP1 segment).
    let mut jpeg = vec![0xFF, 0xD8, 0xFF, 0xE1, 0xEA, 0x62];
    jpeg.resize(jpeg.len() + 60_000, 0);
    jpeg.extend_from_slice(&[0xFF, 0xC0, 0x00, 0x11, 8, 0x04, 0x00, 0x04, 0x00, 3]);
    jpeg.resize(jpeg.len() + 200, 0);
    let b64 = STANDARD.encode(&jpeg);
    assert_eq!(header_size(&b64), None);
    let done = json!({"type": "response.output_item.done", "item": {"type": "image_generation_call",
        "result": b64, "size": "1024x1024"}});
    let Step::Image(image) = step(&ev(done)) else {
        panic!("expected an image")
    };
    assert_eq!(image.resolved.size.as_deref(), Some("1024x1024"));
    // The same file with a short segment is read.
    let mut short = vec![0xFF, 0xD8, 0xFF, 0xE1, 0x00, 0x12];
    short.resize(short.len() + 16, 0);
    short.extend_from_slice(&[0xFF, 0xC0, 0x00, 0x11, 8, 0x04, 0x00, 0x03, 0x00, 3]);
    short.resize(short.len() + 200, 0);
    assert_eq!(header_size(&STANDARD.encode(&short)).as_deref(), Some("768x1024"));
}

#[test]
fn other_items_and_events_are_ignored() {
    let message = json!({"type": "response.output_item.done", "item": {"type": "message", "content": []}});
    assert_eq!(step(&ev(message)), Step::Ignore);
    let empty = json!({"type": "response.output_item.done", "item": {"type": "image_generation_call", "result": null}});
    assert_eq!(step(&ev(empty)), Step::Ignore);
    assert_eq!(
        step(&ev(json!({"type": "response.created", "response": {"id": "r"}}))),
        Step::Ignore
    );
    assert_eq!(
        step(&SseEvent {
            event: None,
            data: "not json".into(),
            id: None
        }),
        Step::Ignore
    );
}

#[test]
fn completion_reports_the_image_tool_usage() {
    let step = step(&ev(
        json!({"type": "response.completed", "response": {"id": "r", "status": "completed",
        "usage": {"input_tokens": 900, "output_tokens": 50, "total_tokens": 950},
        "tool_usage": {"image_gen": {"input_tokens": 20, "input_tokens_details": {"text_tokens": 20, "image_tokens": 0},
            "output_tokens": 4160, "output_tokens_details": {"image_tokens": 4160, "text_tokens": 0}}},
        "output": []}}),
    ));
    let expected = Usage {
        input_tokens: 20,
        input_tokens_details: TokenDetails {
            text_tokens: 20,
            image_tokens: 0,
        },
        output_tokens: 4160,
        output_tokens_details: TokenDetails {
            text_tokens: 0,
            image_tokens: 4160,
        },
        total_tokens: 4180,
    };
    assert_eq!(
        step,
        Step::Completed {
            usage: expected,
            image: None
        }
    );
}

#[test]
fn completion_carries_the_image_when_no_item_event_did() {
    let step = step(&ev(json!({"type": "response.completed", "response": {"output": [
        {"type": "reasoning", "summary": []},
        {"type": "image_generation_call", "result": "SU1H", "quality": "low"}]}})));
    let Step::Completed {
        usage,
        image: Some(image),
    } = step
    else {
        panic!("expected an image, got {step:?}")
    };
    assert_eq!(usage, Usage::default());
    assert_eq!(image.b64, "SU1H");
    assert_eq!(image.resolved.quality.as_deref(), Some("low"));
}

#[test]
fn completion_leaves_the_repeated_image_alone_when_one_is_in_hand() {
    let completed = ev(json!({"type": "response.completed", "response": {
        "tool_usage": {"image_gen": {"input_tokens": 3, "output_tokens": 272, "total_tokens": 275}},
        "output": [{"type": "image_generation_call", "result": "SU1H"}]}}));
    let Step::Completed { usage, image } = super::step(&completed, true) else {
        panic!("expected the completion")
    };
    assert_eq!(image, None, "the image in hand is the one relayed");
    assert_eq!(usage.output_tokens, 272, "the usage is read all the same");
}

#[test]
fn an_odd_tool_usage_costs_neither_the_image_nor_the_readable_counts() {
    // `null` details: the counts beside them are kept.
    let step_with_nulls = step(&ev(json!({"type": "response.completed", "response": {
        "tool_usage": {"image_gen": {"input_tokens": 20, "input_tokens_details": null,
            "output_tokens": 4160, "output_tokens_details": null}},
        "output": [{"type": "image_generation_call", "result": "SU1H"}]}})));
    let Step::Completed {
        usage,
        image: Some(image),
    } = step_with_nulls
    else {
        panic!("expected an image, got {step_with_nulls:?}")
    };
    assert_eq!(
        (usage.input_tokens, usage.output_tokens, usage.total_tokens),
        (20, 4160, 4180)
    );
    assert_eq!(image.b64, "SU1H");
    // A shape not read at all (a string for a count): the image still comes through.
    let step_unreadable = step(&ev(json!({"type": "response.completed", "response": {
        "tool_usage": {"image_gen": {"input_tokens": "twenty"}},
        "output": [{"type": "image_generation_call", "result": "SU1H"}]}})));
    let Step::Completed {
        usage,
        image: Some(image),
    } = step_unreadable
    else {
        panic!("expected an image, got {step_unreadable:?}")
    };
    assert_eq!(usage, Usage::default());
    assert_eq!(image.b64, "SU1H");
}

#[test]
fn failed_responses_are_classified() {
    let refused = step(&ev(
        json!({"type": "response.failed", "response": {"status": "failed",
        "error": {"code": "moderation_blocked", "message": "Your request was rejected by the safety system."}}}),
    ));
    let Step::Failed(failure) = refused else {
        panic!("expected a failure")
    };
    assert_eq!(failure.kind, FailureKind::Refused);
    assert_eq!(
        failure.client_error().message,
        "Upstream request failed: the content was refused. Your request was rejected by the safety system."
    );

    let limited = step(&ev(json!({"type": "response.failed", "response": {
        "error": {"code": "rate_limit_exceeded", "message": "Please try again in 20s."}}})));
    let Step::Failed(failure) = limited else {
        panic!("expected a failure")
    };
    assert!(matches!(
        failure.kind,
        FailureKind::RateLimited {
            reset_at_unix_ms: Some(_),
            ..
        }
    ));

    let bare = step(&ev(
        json!({"type": "response.failed", "response": {"error": null}}),
    ));
    assert!(matches!(
        bare,
        Step::Failed(Failure {
            kind: FailureKind::Transient,
            ..
        })
    ));

    let incomplete = step(&ev(json!({"type": "response.incomplete", "response": {
        "incomplete_details": {"reason": "max_output_tokens"}}})));
    let Step::Failed(failure) = incomplete else {
        panic!("expected a failure")
    };
    assert_eq!(
        failure.message,
        "the upstream response is incomplete (max_output_tokens)"
    );
}

#[test]
fn image_data_is_borrowed_from_the_event_until_it_is_kept() {
    #[derive(Deserialize)]
    struct Probe<'a> {
        #[serde(borrow, default, deserialize_with = "borrowed")]
        text: Option<Cow<'a, str>>,
    }
    let probe: Probe<'_> = serde_json::from_str(r#"{"text": "iVBORw0KGgo+/A=="}"#).expect("parses");
    assert!(matches!(probe.text, Some(Cow::Borrowed("iVBORw0KGgo+/A=="))));
    let escaped: Probe<'_> = serde_json::from_str(r#"{"text": "a \"fox\""}"#).expect("parses");
    assert!(matches!(escaped.text.as_deref(), Some("a \"fox\"")));
    let null: Probe<'_> = serde_json::from_str(r#"{"text": null}"#).expect("parses");
    assert!(null.text.is_none());
    let missing: Probe<'_> = serde_json::from_str("{}").expect("parses");
    assert!(missing.text.is_none());
    let data = r#"{"type": "response.output_item.done", "item": {"type": "image_generation_call", "result": "RklOQUw="}}"#;
    let event: Event<'_> = serde_json::from_str(data).expect("parses");
    let result = event.item.and_then(|item| item.result);
    assert!(matches!(result, Some(Cow::Borrowed("RklOQUw="))), "{result:?}");
}

#[test]
fn a_response_that_failed_or_stopped_short_keeps_the_image_tokens_it_billed() {
    let billed = json!({"image_gen": {"input_tokens": 40, "output_tokens": 1056,
        "output_tokens_details": {"image_tokens": 1056}}});
    let refused = step(&ev(json!({"type": "response.failed", "response": {
        "error": {"code": "image_content_policy_violation", "message": "Rejected."},
        "tool_usage": billed}})));
    let Step::Failed(failure) = refused else {
        panic!("expected a failure")
    };
    assert_eq!(failure.kind, FailureKind::Refused);
    let spent = failure.spent.expect("the billed tokens are kept");
    assert_eq!(spent.images, 0, "no image came of the call");
    assert_eq!(
        (
            spent.usage.input_tokens,
            spent.usage.output_tokens,
            spent.usage.total_tokens
        ),
        (40, 1056, 1096),
        "the total is filled in when the upstream leaves it out"
    );
    assert_eq!(spent.usage.output_tokens_details.image_tokens, 1056);

    let incomplete = step(&ev(json!({"type": "response.incomplete", "response": {
        "incomplete_details": {"reason": "max_output_tokens"}, "tool_usage": billed}})));
    let Step::Failed(failure) = incomplete else {
        panic!("expected a failure")
    };
    assert_eq!(failure.spent.map(|s| s.usage.output_tokens), Some(1056));

    // Nothing billed, nothing noted.
    let unbilled = step(&ev(json!({"type": "response.failed", "response": {
        "error": {"code": "server_error", "message": "Boom."},
        "tool_usage": {"image_gen": {"input_tokens": 0, "output_tokens": 0}}}})));
    let Step::Failed(failure) = unbilled else {
        panic!("expected a failure")
    };
    assert_eq!(failure.spent, None);
}

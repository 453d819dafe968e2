#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::disallowed_methods
)]

use imagegate_codec::json::{MAX_JSON_ELEMENTS, decode_generation, decode_responses};
use imagegate_domain::{ErrorKind, ImageParamsDraft, ImageToolDraft, ModelCatalog};
use serde_json::json;

#[test]
fn a_full_generation_request_decodes_every_field() {
    let body = json!({
        "model": "gpt-image-2", "prompt": "a lighthouse", "n": 2, "size": "1536x864",
        "quality": "medium", "output_format": "webp", "output_compression": 80, "background": "opaque",
        "moderation": "low", "stream": true, "partial_images": 2, "user": "u-1",
        "input_fidelity": "high", "response_format": "b64_json"
    });
    let draft = decode_generation(body.to_string().as_bytes()).unwrap();
    assert_eq!(
        draft,
        ImageParamsDraft {
            model: Some("gpt-image-2".into()),
            prompt: Some("a lighthouse".into()),
            n: Some(2),
            size: Some("1536x864".into()),
            quality: Some("medium".into()),
            output_format: Some("webp".into()),
            output_compression: Some(80),
            background: Some("opaque".into()),
            moderation: Some("low".into()),
            stream: Some(true),
            partial_images: Some(2),
            user: Some("u-1".into()),
            input_fidelity: Some("high".into()),
            response_format: Some("b64_json".into()),
        }
    );
}

#[test]
fn explicit_null_means_absent() {
    let body = br#"{"model":"gpt-image-2","prompt":"p","n":null,"size":null,"stream":null,"style":null,
                    "partial_images":null,"user":null,"output_compression":null}"#;
    let draft = decode_generation(body).unwrap();
    assert_eq!(
        draft,
        ImageParamsDraft {
            model: Some("gpt-image-2".into()),
            prompt: Some("p".into()),
            ..Default::default()
        }
    );
}

#[test]
fn unknown_keys_are_refused_by_name() {
    let err = decode_generation(br#"{"prompt":"p","foo":1}"#).unwrap_err();
    assert_eq!(err.kind, ErrorKind::UnknownParameter);
    assert_eq!(err.status(), 400);
    assert_eq!(err.param.as_deref(), Some("foo"));
    assert_eq!(err.code(), Some("unknown_parameter"));
    assert!(err.message.contains("'foo'"), "{}", err.message);
}

#[test]
fn type_errors_name_the_field_and_both_types() {
    let cases = [
        (
            r#"{"n":"2"}"#,
            "n",
            "expected an integer, but got a string instead",
        ),
        (
            r#"{"n":1.5}"#,
            "n",
            "expected an integer, but got a decimal number instead",
        ),
        (
            r#"{"stream":"true"}"#,
            "stream",
            "expected a boolean, but got a string instead",
        ),
        (
            r#"{"prompt":42}"#,
            "prompt",
            "expected a string, but got an integer instead",
        ),
        (
            r#"{"size":[1024,1024]}"#,
            "size",
            "expected a string, but got an array instead",
        ),
        (
            r#"{"model":{"id":"x"}}"#,
            "model",
            "expected a string, but got an object instead",
        ),
    ];
    for (body, param, fragment) in cases {
        let err = decode_generation(body.as_bytes()).unwrap_err();
        assert_eq!(err.param.as_deref(), Some(param), "{body}");
        assert_eq!(err.code(), Some("invalid_type"), "{body}");
        assert_eq!(err.status(), 400);
        assert!(
            err.message.starts_with(&format!("Invalid type for '{param}': ")),
            "{}",
            err.message
        );
        assert!(err.message.contains(fragment), "{}", err.message);
    }
}

#[test]
fn integral_floats_are_integers_and_huge_integers_saturate() {
    let draft = decode_generation(br#"{"n":2.0,"partial_images":18446744073709551615}"#).unwrap();
    assert_eq!(draft.n, Some(2));
    assert_eq!(draft.partial_images, Some(i64::MAX));
}

#[test]
fn invalid_json_and_non_objects_are_clear_400s() {
    let err = decode_generation(b"{\"prompt\": ").unwrap_err();
    assert_eq!(err.status(), 400);
    assert_eq!(err.code(), Some("invalid_json"));
    assert!(
        err.message.contains("could not parse the JSON body"),
        "{}",
        err.message
    );
    assert!(err.message.contains("line 1"), "{}", err.message);
    let err = decode_generation(b"[1,2]").unwrap_err();
    assert_eq!(err.code(), Some("invalid_type"));
    assert!(
        err.message.contains("a JSON object, but got an array"),
        "{}",
        err.message
    );
    assert_eq!(decode_generation(b"").unwrap_err().code(), Some("invalid_json"));
}

#[test]
fn a_body_of_countless_tiny_values_is_refused_before_it_is_decoded() {
    let body = |items: usize| format!(r#"{{"model":"gpt-5","input":[{}0]}}"#, "0,".repeat(items));
    // The object, the array and each comma (the object's one, the array's `items`) count one.
    let at_the_limit = body(MAX_JSON_ELEMENTS - 3);
    assert!(decode_responses(at_the_limit.as_bytes()).is_ok());
    let err = decode_responses(body(MAX_JSON_ELEMENTS - 2).as_bytes()).unwrap_err();
    assert_eq!(err.status(), 400);
    assert_eq!(err.code(), Some("too_many_elements"));
    assert!(
        err.message.contains(&MAX_JSON_ELEMENTS.to_string()),
        "{}",
        err.message
    );
}

#[test]
fn commas_and_brackets_inside_strings_are_not_elements() {
    // Escaped quotes and backslashes do not end the string early.
    let text = r#"\\\",[{"#.repeat(MAX_JSON_ELEMENTS);
    let body = format!(r#"{{"model":"gpt-5","input":"{text}","stream":false}}"#);
    let decoded = decode_responses(body.as_bytes()).unwrap();
    assert_eq!(decoded.model.as_deref(), Some("gpt-5"));
    assert!(!decoded.stream);
}

#[test]
fn style_is_refused_as_unsupported() {
    let err = decode_generation(br#"{"prompt":"p","style":"vivid"}"#).unwrap_err();
    assert_eq!(err.param.as_deref(), Some("style"));
    assert_eq!(err.code(), Some("unsupported_parameter"));
}

#[test]
fn responses_body_keeps_unknown_keys_and_reads_image_tools() {
    let body = json!({
        "model": "gpt-5", "input": "draw", "stream": true, "store": false, "custom_thing": {"a": 1},
        "tools": [
            {"type": "web_search"},
            {"type": "image_generation", "model": "gpt-image-2", "size": "1024x1536", "quality": null,
             "partial_images": 2, "output_compression": 70, "action": "generate", "future_key": true}
        ],
        "tool_choice": {"type": "image_generation"}
    });
    let decoded = decode_responses(body.to_string().as_bytes()).unwrap();
    assert_eq!(decoded.model.as_deref(), Some("gpt-5"));
    assert!(decoded.stream);
    assert_eq!(decoded.body.get("custom_thing"), Some(&json!({"a": 1})));
    assert_eq!(decoded.image_tools.len(), 1);
    assert_eq!(decoded.image_tools[0].index, 1);
    assert_eq!(
        decoded.image_tools[0].draft,
        ImageToolDraft {
            model: Some("gpt-image-2".into()),
            size: Some("1024x1536".into()),
            partial_images: Some(2),
            output_compression: Some(70),
            action: Some("generate".into()),
            ..Default::default()
        }
    );
    let forwarded: serde_json::Value = serde_json::from_slice(&decoded.to_bytes()).unwrap();
    assert_eq!(forwarded, body);
}

#[test]
fn responses_tool_type_errors_carry_the_tool_position() {
    let err = decode_responses(br#"{"model":"gpt-5","tools":[{"type":"image_generation","size":1024}]}"#)
        .unwrap_err();
    assert_eq!(err.param.as_deref(), Some("tools[0].size"));
    assert_eq!(err.code(), Some("invalid_type"));
    let err = decode_responses(br#"{"model":"gpt-5","tools":{"type":"image_generation"}}"#).unwrap_err();
    assert_eq!(err.param.as_deref(), Some("tools"));
    let err = decode_responses(br#"{"model":"gpt-5","stream":"yes"}"#).unwrap_err();
    assert_eq!(err.param.as_deref(), Some("stream"));
}

#[test]
fn an_image_tool_type_in_other_case_is_refused_not_passed_on_unchecked() {
    let err = decode_responses(
        br#"{"model":"gpt-5","tools":[{"type":"web_search"},{"type":"IMAGE_GENERATION","background":"transparent"}]}"#,
    )
    .unwrap_err();
    assert_eq!(err.status(), 400);
    assert_eq!(err.param.as_deref(), Some("tools[1].type"));
    assert_eq!(err.code(), Some("invalid_value"));
    assert!(err.message.contains("'IMAGE_GENERATION'"), "{}", err.message);
}

#[test]
fn responses_without_stream_or_tools_is_fine() {
    let decoded = decode_responses(br#"{"model":null,"stream":null,"tools":null}"#).unwrap();
    assert_eq!(decoded.model, None);
    assert!(!decoded.stream);
    assert!(decoded.image_tools.is_empty());
}

#[test]
fn image_tools_are_validated_with_positional_params_and_models_can_be_rewritten() {
    let mut decoded =
        decode_responses(br#"{"model":"gpt-5","tools":[{"type":"image_generation","size":"1000x1000"}]}"#)
            .unwrap();
    let err = decoded
        .validate_image_tools(&ModelCatalog::default())
        .unwrap_err();
    assert_eq!(err.param.as_deref(), Some("tools[0].size"));
    assert_eq!(err.status(), 400);
    assert!(decoded.set_tool_model(0, "gpt-image-2-2026-04-21"));
    assert!(!decoded.set_tool_model(5, "x"));
    assert_eq!(decoded.body["tools"][0]["model"], json!("gpt-image-2-2026-04-21"));

    let ok = decode_responses(br#"{"model":"gpt-5","tools":[{"type":"image_generation","quality":"low"}]}"#)
        .unwrap();
    let tools = ok.validate_image_tools(&ModelCatalog::default()).unwrap();
    assert_eq!(tools.len(), 1);
    assert_eq!(tools[0].quality.as_str(), "low");
}

#[test]
fn an_image_tool_with_input_fidelity_is_refused_before_the_upstream() {
    let decoded = decode_responses(
        br#"{"model":"gpt-5","tools":[{"type":"web_search"},{"type":"image_generation","input_fidelity":"high"}]}"#,
    )
    .unwrap();
    let err = decoded
        .validate_image_tools(&ModelCatalog::default())
        .unwrap_err();
    assert_eq!(err.status(), 400);
    assert_eq!(err.param.as_deref(), Some("tools[1].input_fidelity"));
    assert_eq!(err.code(), Some("invalid_input_fidelity_model"));
    let null =
        decode_responses(br#"{"model":"gpt-5","tools":[{"type":"image_generation","input_fidelity":null}]}"#)
            .unwrap();
    assert!(
        null.validate_image_tools(&ModelCatalog::default()).is_ok(),
        "null is absent"
    );
}

#[test]
fn background_responses_are_refused_before_anything_is_spent() {
    let err = decode_responses(br#"{"model":"gpt-5","input":"a fox","background":true}"#).unwrap_err();
    assert_eq!(err.status(), 400);
    assert_eq!(err.param.as_deref(), Some("background"));
    assert_eq!(err.code(), Some("unsupported_value"));
    assert!(decode_responses(br#"{"model":"gpt-5","input":"a fox","background":false}"#).is_ok());
    assert!(decode_responses(br#"{"model":"gpt-5","input":"a fox","background":null}"#).is_ok());
    let wrong_type = decode_responses(br#"{"model":"gpt-5","background":"yes"}"#).unwrap_err();
    assert_eq!(wrong_type.param.as_deref(), Some("background"));
}

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::BTreeMap;

use imagegate_codec::json_schemas;
use serde_json::Value;

fn schemas() -> BTreeMap<&'static str, Value> {
    let list = json_schemas();
    let count = list.len();
    let map: BTreeMap<_, _> = list.into_iter().collect();
    assert_eq!(map.len(), count, "two schemas share a stem");
    map
}

fn required(schema: &Value) -> Vec<&str> {
    schema["required"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect()
}

#[test]
fn stems_are_kebab_case_and_schemas_are_draft_2020_12() {
    for (stem, schema) in schemas() {
        assert!(stem.chars().all(|c| c.is_ascii_lowercase() || c == '-'), "{stem}");
        assert_eq!(
            schema["$schema"], "https://json-schema.org/draft/2020-12/schema",
            "{stem}"
        );
    }
}

#[test]
fn key_schemas_require_what_the_sdks_require() {
    let all = schemas();
    assert_eq!(required(&all["images-response"]), ["created"]);
    assert_eq!(required(&all["error"]), ["error"]);
    // `model` too: the interface requires it, and the gateway refuses a body without it.
    assert_eq!(required(&all["images-generation-request"]), ["model", "prompt"]);
    assert_eq!(
        required(&all["images-edit-request"]),
        ["image[]", "prompt", "model"]
    );
    assert_eq!(
        all["images-generation-request"]["additionalProperties"],
        Value::Bool(false)
    );
    assert_eq!(required(&all["model"]), ["id", "object", "created", "owned_by"]);
    let completed = required(&all["image-completed-event"]);
    for key in [
        "b64_json",
        "created_at",
        "size",
        "quality",
        "background",
        "output_format",
        "usage",
    ] {
        assert!(completed.contains(&key), "{key}");
    }
    let stream = all["response-stream-event"].to_string();
    for name in [
        "response.created",
        "response.image_generation_call.partial_image",
        "partial_image_b64",
    ] {
        assert!(stream.contains(name), "{name}");
    }
    let edit = all["images-edit-request"].to_string();
    assert!(edit.contains("\"binary\""), "file parts are binary");
}

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::disallowed_methods
)]

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

/// The schema files the project publishes in `schemas/` are the ones this crate generates (plus the
/// registry manifest's, which `imagegate-manifest`'s tests keep identical to its canonical copy).
/// `cargo xtask schemas` runs this test with `IMAGEGATE_UPDATE_SCHEMAS=1`, which writes the files
/// instead of comparing them.
#[test]
fn the_published_schema_files_are_the_generated_ones() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../schemas");
    let update = std::env::var_os("IMAGEGATE_UPDATE_SCHEMAS").is_some_and(|v| v == "1");
    assert!(
        !(update && std::env::var_os("CI").is_some()),
        "IMAGEGATE_UPDATE_SCHEMAS=1 in CI would rewrite the files instead of checking them"
    );
    let expected: BTreeMap<String, String> = schemas()
        .into_iter()
        .map(|(stem, schema)| {
            let mut text = serde_json::to_string_pretty(&schema).unwrap();
            text.push('\n');
            (format!("{stem}.schema.json"), text)
        })
        .collect();
    let mut problems = Vec::new();
    for entry in std::fs::read_dir(&dir).unwrap() {
        let name = entry.unwrap().file_name().to_string_lossy().into_owned();
        if name.ends_with(".schema.json")
            && name != "registry-manifest.schema.json"
            && !expected.contains_key(&name)
        {
            problems.push(format!("{name}: no longer generated"));
            if update {
                std::fs::remove_file(dir.join(&name)).unwrap();
            }
        }
    }
    for (name, text) in &expected {
        let current = std::fs::read_to_string(dir.join(name)).ok();
        if current.as_deref() != Some(text.as_str()) {
            let what = if current.is_some() { "stale" } else { "missing" };
            problems.push(format!("{name}: {what}"));
            if update {
                std::fs::write(dir.join(name), text).unwrap();
            }
        }
    }
    for problem in &problems {
        println!("updated {problem}");
    }
    assert!(
        update || problems.is_empty(),
        "schemas/ is out of date; run `cargo xtask schemas`:\n  {}",
        problems.join("\n  ")
    );
}

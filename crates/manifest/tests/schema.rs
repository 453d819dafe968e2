//! The JSON Schema: canonical bytes, agreement with the typed model, and what it accepts.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::disallowed_methods
)]

mod support;

use imagegate_manifest::json_schema;
use imagegate_manifest::model::{Manifest, keys};
use serde_json::{Value, json};
use support::Checkout;

const CRATE_COPY: &str = include_str!("../schema/registry-manifest.schema.json");

#[test]
fn the_schema_file_is_canonical_pretty_json_and_the_published_copy_is_identical() {
    let mut pretty = serde_json::to_string_pretty(&json_schema()).unwrap();
    pretty.push('\n');
    assert_eq!(
        pretty, CRATE_COPY,
        "crates/manifest/schema/registry-manifest.schema.json is not in canonical form (serde_json pretty, one trailing newline)"
    );
    let published =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../schemas/registry-manifest.schema.json");
    assert_eq!(
        std::fs::read_to_string(published).unwrap(),
        CRATE_COPY,
        "schemas/registry-manifest.schema.json differs from the crate's copy; run `cargo xtask schemas`"
    );
    assert_eq!(
        json_schema()["$schema"],
        "https://json-schema.org/draft/2020-12/schema"
    );
}

fn names(value: &Value) -> Vec<String> {
    let mut names: Vec<String> = match value {
        Value::Object(map) => map.keys().cloned().collect(),
        Value::Array(items) => items.iter().map(|v| v.as_str().unwrap().to_owned()).collect(),
        _ => panic!("{value}"),
    };
    names.sort();
    names
}

fn sorted(keys: &[&str]) -> Vec<String> {
    let mut keys: Vec<String> = keys.iter().map(|k| (*k).to_owned()).collect();
    keys.sort();
    keys
}

#[test]
fn the_schema_and_the_model_define_the_same_keys() {
    let schema = json_schema();
    assert_eq!(names(&schema["properties"]), sorted(keys::TOP));
    assert_eq!(names(&schema["required"]), sorted(keys::TOP));
    assert_eq!(
        names(&schema["$defs"]["repository"]["properties"]),
        sorted(keys::REPOSITORY)
    );
    assert_eq!(
        names(&schema["$defs"]["skill"]["properties"]),
        sorted(keys::SKILL)
    );
    assert_eq!(names(&schema["$defs"]["api"]["properties"]), sorted(keys::API));
    let required_skill = names(&schema["$defs"]["skill"]["required"]);
    assert_eq!(
        required_skill,
        sorted(&[
            "name",
            "version",
            "title",
            "description",
            "path",
            "package",
            "sha256"
        ])
    );
}

fn validator() -> jsonschema::Validator {
    jsonschema::draft202012::new(&json_schema()).unwrap()
}

#[test]
fn valid_manifests_pass_the_schema_and_round_trip_through_the_model() {
    let checkout = Checkout::new();
    assert!(validator().is_valid(&checkout.manifest));
    let model: Manifest = serde_json::from_value(checkout.manifest.clone()).unwrap();
    assert_eq!(model.skills.len(), 2);
    assert_eq!(serde_json::to_value(&model).unwrap(), checkout.manifest);
    let big: Value = serde_json::from_str(&imagegate_manifest::synthetic::manifest(50)).unwrap();
    assert!(validator().is_valid(&big));
}

#[test]
fn the_schema_alone_rejects_the_common_mistakes() {
    let checkout = Checkout::new();
    type Breaker = Box<dyn Fn(&mut Value)>;
    let breakers: Vec<(&str, Breaker)> = vec![
        (
            "sha prefix",
            Box::new(|m| m["skills"][0]["sha256"] = json!(format!("sha256:{}", "a".repeat(64)))),
        ),
        (
            "short version",
            Box::new(|m| m["skills"][0]["version"] = json!("1.0")),
        ),
        (
            "absolute path",
            Box::new(|m| m["skills"][0]["path"] = json!("/skills/pdf-tools")),
        ),
        (
            "parent segment",
            Box::new(|m| m["apis"][0]["path"] = json!("apis/../x.md")),
        ),
        (
            "not a zip",
            Box::new(|m| m["skills"][0]["package"] = json!("packages/x.tgz")),
        ),
        (
            "fraction size",
            Box::new(|m| m["skills"][0]["size_bytes"] = json!(1.5)),
        ),
        (
            "negative size",
            Box::new(|m| m["skills"][0]["size_bytes"] = json!(-1)),
        ),
        ("schema version", Box::new(|m| m["schema_version"] = json!("2"))),
        (
            "http raw base",
            Box::new(|m| m["repository"]["raw_base_url"] = json!("http://example.com/x")),
        ),
        ("blank title", Box::new(|m| m["skills"][0]["title"] = json!(" "))),
        (
            "missing apis",
            Box::new(|m| drop(m.as_object_mut().unwrap().remove("apis"))),
        ),
    ];
    for (what, breaker) in breakers {
        let mut manifest = checkout.manifest.clone();
        breaker(&mut manifest);
        assert!(!validator().is_valid(&manifest), "{what} passed the schema");
    }
}

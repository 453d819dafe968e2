//! JSON Schema validation with the `jsonschema` crate, turned into findings.

use std::sync::OnceLock;

use jsonschema::ValidationError;
use jsonschema::error::{TypeKind, ValidationErrorKind};

use super::Rule;
use crate::finding::Sink;
use crate::parse::{Node, Span};

/// The canonical JSON Schema (draft 2020-12) of the registry manifest, as stored in the crate.
pub const SCHEMA_TEXT: &str = include_str!("../../schema/registry-manifest.schema.json");

static VALIDATOR: OnceLock<Result<jsonschema::Validator, String>> = OnceLock::new();

fn validator() -> Result<&'static jsonschema::Validator, &'static str> {
    VALIDATOR
        .get_or_init(|| {
            let schema: serde_json::Value = serde_json::from_str(SCHEMA_TEXT).map_err(|e| e.to_string())?;
            jsonschema::draft202012::new(&schema).map_err(|e| e.to_string())
        })
        .as_ref()
        .map_err(String::as_str)
}

/// Report every schema violation of `root`, except those `folded` says a semantic finding already
/// explains (by rule and JSON Pointer).
///
/// A valid document costs one `is_valid`. An invalid one is validated in parts ([`super::schema_parts`]):
/// `jsonschema` collects all errors of a call before returning the first, so validating a large broken
/// document whole would build a list of millions of errors (`{"skills": [{}, {}, ...]}` gives seven per
/// three bytes) before the sink could keep or count any of them.
pub(crate) fn check(root: &Node, sink: &mut Sink, folded: &dyn Fn(Rule, &str) -> bool) {
    let value = root.to_value();
    match validator() {
        Ok(whole) if whole.is_valid(&value) => return, // much faster than collecting errors; the common case
        Ok(_) => {}
        Err(why) => return broken_schema(why, sink),
    }
    match super::schema_parts::parts() {
        Ok(parts) => parts.validate(&value, &mut |at, error| add_error(root, at, error, sink, folded)),
        Err(why) => broken_schema(why, sink),
    }
}

/// The finding when the embedded schema does not compile: only reachable if it is broken, which a unit
/// test guards against.
fn broken_schema(why: &str, sink: &mut Sink) {
    sink.add(
        Rule::SchemaConstraint,
        "",
        Span::new(0, 0),
        format!("the embedded schema does not compile: {why}"),
    );
}

/// Report one schema error found in the value at `at` (a JSON Pointer in the document).
fn add_error(
    root: &Node,
    at: &str,
    error: &ValidationError<'_>,
    sink: &mut Sink,
    folded: &dyn Fn(Rule, &str) -> bool,
) {
    let ptr = format!("{at}{}", error.instance_path().as_str());
    let rule = match error.kind() {
        ValidationErrorKind::Required { .. } => Rule::SchemaRequired,
        ValidationErrorKind::Type { .. } => Rule::SchemaType,
        _ => Rule::SchemaConstraint,
    };
    if folded(rule, &ptr) {
        return;
    }
    let node = root.pointer(&ptr).unwrap_or(root);
    let first_char = Span::new(node.span.start, node.span.start + 1);
    match error.kind() {
        ValidationErrorKind::Required { property } => {
            let key = property
                .as_str()
                .map_or_else(|| property.to_string(), str::to_owned);
            sink.add(
                Rule::SchemaRequired,
                &ptr,
                first_char,
                format!("missing required key `{key}`"),
            )
            .expected(format!("the key `{key}`"))
            .found("missing");
        }
        ValidationErrorKind::Type { kind } => {
            let expected = match kind {
                TypeKind::Single(t) => t.to_string(),
                TypeKind::Multiple(set) => set.iter().map(|t| t.to_string()).collect::<Vec<_>>().join(" or "),
            };
            sink.add(
                Rule::SchemaType,
                &ptr,
                node.span,
                format!("the value is {} {}", article(node.type_name()), node.type_name()),
            )
            .expected(expected)
            .found(node.type_name());
        }
        _ => {
            let span = if node.as_object().is_some() || node.as_array().is_some() {
                first_char
            } else {
                node.span
            };
            let schema_path = super::schema_parts::schema_path(error);
            sink.add(Rule::SchemaConstraint, &ptr, span, error.masked().to_string())
                .expected(constraint(schema_path))
                .found(short_json(&node.to_value()));
        }
    }
}

/// The constraint at `schema_path` as `keyword: value (schema path)`, e.g.
/// `uniqueItems: true (/$defs/skill/properties/tags/uniqueItems)`.
fn constraint(schema_path: &str) -> String {
    static SCHEMA: OnceLock<Option<serde_json::Value>> = OnceLock::new();
    let keyword = schema_path.rsplit('/').next().unwrap_or_default();
    let value = SCHEMA
        .get_or_init(|| serde_json::from_str(SCHEMA_TEXT).ok())
        .as_ref()
        .and_then(|schema| schema.pointer(schema_path));
    match value {
        Some(value) => format!("{keyword}: {} ({schema_path})", short_json(value)),
        None => format!("the schema constraint {schema_path}"),
    }
}

/// Compact JSON of `value`, shortened past 80 characters.
fn short_json(value: &serde_json::Value) -> String {
    const MAX: usize = 80;
    let text = value.to_string();
    if text.chars().count() <= MAX {
        return text;
    }
    let short: String = text.chars().take(MAX).collect();
    format!("{short}...")
}

fn article(word: &str) -> &'static str {
    if word.starts_with(['a', 'e', 'i', 'o', 'u']) {
        "an"
    } else {
        "a"
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use serde_json::{Value, json};

    use super::super::langtag::{MALFORMED, WELL_FORMED, is_language_tag};

    #[test]
    fn embedded_schema_compiles() {
        assert!(super::validator().is_ok());
    }

    /// Whether the schema's definition at `pointer` (a string with a pattern) accepts `text`.
    fn accepts(pointer: &str, text: &str) -> bool {
        let schema: Value = serde_json::from_str(super::SCHEMA_TEXT).unwrap();
        let pattern = schema.pointer(pointer).unwrap().clone();
        let validator = jsonschema::draft202012::new(&json!({"type": "string", "pattern": pattern})).unwrap();
        validator.is_valid(&json!(text))
    }

    #[test]
    fn the_language_pattern_agrees_with_the_language_rule() {
        let pointer = "/$defs/api/properties/language/pattern";
        for tag in WELL_FORMED.iter().chain(MALFORMED) {
            assert_eq!(accepts(pointer, tag), is_language_tag(tag), "{tag}");
        }
    }

    #[test]
    fn url_patterns_accept_schemes_in_any_case() {
        let raw = "/$defs/repository/properties/raw_base_url/pattern";
        let git = "/$defs/repository/properties/git_url/pattern";
        let source = "/$defs/api/properties/source_urls/items/pattern";
        for (pointer, url) in [
            (raw, "HTTPS://raw.githubusercontent.com/o/r/main"),
            (raw, "https://[::1]/o/r/main"),
            (git, "HTTPS://github.com/o/r.git"),
            (git, "SSH://git@host/o/r.git"),
            (git, "Git+SSH://git@host/o/r.git"),
            (source, "HTTPS://docs.example.com/x"),
            (source, "Http://docs.example.com/x"),
        ] {
            assert!(accepts(pointer, url), "{pointer}: {url}");
        }
        assert!(!accepts(raw, "http://raw.githubusercontent.com/o/r/main"));
        assert!(!accepts(source, "ftp://docs.example.com/x"));
    }
}

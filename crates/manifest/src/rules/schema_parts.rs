//! The JSON Schema cut into parts, so an invalid document is validated a value at a time.
//!
//! `jsonschema` collects every error of one `iter_errors` call in a list before it returns the first. Whole,
//! a document of `{"skills": [{}, {}, ...]}` would give seven errors per three bytes in one list: gigabytes
//! for a manifest of the largest size read. In parts, each call sees one object without its members, one
//! array without its items, or one value whose schema cannot be cut further, and returns a few errors, which
//! the sink keeps or counts before the next call.
//!
//! A schema is cut where that gives the same errors as validating it whole: an object schema of `properties`
//! (checked as the object without them, then each member with its property's schema) and an array schema
//! of `items` (the array without them, then each item), holding nothing else but `type`, `required`,
//! `uniqueItems`, counts and annotations. Anything else (`allOf`, `pattern`, ...) is validated whole.

use std::collections::HashMap;
use std::sync::OnceLock;

use jsonschema::{ValidationError, Validator};
use serde_json::{Map, Value};

use super::schema::SCHEMA_TEXT;
use crate::parse::escape_token;

/// Where each part keeps its copy of the schema's top level. Errors found there report their schema path
/// under this key, which [`schema_path`] removes.
const TOP: &str = "x-top-level";

/// Keywords an object or array schema may hold and still be cut into parts: each applies to the value
/// alone (or says nothing), not to its members or items.
const CUTTABLE: &[&str] = &[
    "type",
    "required",
    "properties",
    "items",
    "uniqueItems",
    "minItems",
    "maxItems",
    "minProperties",
    "maxProperties",
    "description",
    "title",
    "$schema",
    "$defs",
];

/// Keywords that say nothing about a value: a schema of `$ref` and these is the schema it refers to.
const ANNOTATIONS: &[&str] = &["description", "title", "$comment"];

/// The parts of the schema, by the JSON Pointer of each subschema in it.
#[derive(Debug)]
pub(crate) struct Parts {
    by_pointer: HashMap<String, Part>,
    /// Where the whole document's schema is.
    top: String,
}

/// One subschema, validated whole or cut.
#[derive(Debug)]
struct Part {
    /// The subschema.
    whole: Validator,
    /// How to validate an object or array in parts, when the subschema can be cut.
    cut: Option<Cut>,
}

/// A subschema cut into the value's own keywords and those of its members or items.
#[derive(Debug)]
struct Cut {
    /// The subschema without `properties` and `items`.
    shallow: Validator,
    /// Each property and where its schema is.
    properties: Vec<(String, String)>,
    /// Where the schema of every item is.
    items: Option<String>,
}

/// The parts of the embedded schema, compiled once (only when a document is invalid).
pub(crate) fn parts() -> Result<&'static Parts, &'static str> {
    static PARTS: OnceLock<Result<Parts, String>> = OnceLock::new();
    PARTS
        .get_or_init(|| {
            let schema: Value = serde_json::from_str(SCHEMA_TEXT).map_err(|e| e.to_string())?;
            Parts::new(&schema)
        })
        .as_ref()
        .map_err(String::as_str)
}

/// The schema path of `error` as it is in the schema (not under [`TOP`]).
pub(crate) fn schema_path<'e>(error: &'e ValidationError<'_>) -> &'e str {
    let path = error.schema_path().as_str();
    match path.strip_prefix("/").and_then(|p| p.strip_prefix(TOP)) {
        Some(rest) if rest.is_empty() || rest.starts_with('/') => rest,
        _ => path,
    }
}

impl Parts {
    /// Cut `schema` into its parts, compiling each.
    fn new(schema: &Value) -> Result<Parts, String> {
        let mut parts = Parts {
            by_pointer: HashMap::new(),
            top: resolve(schema, ""),
        };
        parts.add(schema, "")?;
        Ok(parts)
    }

    /// Add the part at `pointer` and those it is cut into; returns where it is (after `$ref`s).
    fn add(&mut self, schema: &Value, pointer: &str) -> Result<String, String> {
        let at = resolve(schema, pointer);
        if self.by_pointer.contains_key(&at) {
            return Ok(at);
        }
        let whole = compile(schema, &at, false)?;
        let node = schema.pointer(&at).and_then(Value::as_object);
        let cut = match node.filter(|n| can_cut(n)) {
            None => None,
            Some(node) => {
                let mut properties = Vec::new();
                for key in node
                    .get("properties")
                    .and_then(Value::as_object)
                    .into_iter()
                    .flatten()
                    .map(|(k, _)| k)
                {
                    let child = self.add(schema, &format!("{at}/properties/{}", escape_token(key)))?;
                    properties.push((key.clone(), child));
                }
                let items = match node.get("items") {
                    Some(_) => Some(self.add(schema, &format!("{at}/items"))?),
                    None => None,
                };
                Some(Cut {
                    shallow: compile(schema, &at, true)?,
                    properties,
                    items,
                })
            }
        };
        self.by_pointer.insert(at.clone(), Part { whole, cut });
        Ok(at)
    }

    /// Validate `value` against the whole schema, calling `report` with each error and the JSON Pointer of
    /// the value its instance path is relative to.
    pub(crate) fn validate(&self, value: &Value, report: &mut dyn FnMut(&str, &ValidationError<'_>)) {
        self.validate_at(value, &self.top, "", report);
    }

    fn validate_at(
        &self,
        value: &Value,
        schema_at: &str,
        at: &str,
        report: &mut dyn FnMut(&str, &ValidationError<'_>),
    ) {
        let Some(part) = self.by_pointer.get(schema_at) else {
            return;
        };
        if part.whole.is_valid(value) {
            return;
        }
        let Some(cut) = &part.cut else {
            return errors(&part.whole, value, at, report);
        };
        match value {
            Value::Object(members) if !cut.properties.is_empty() => {
                errors(&cut.shallow, value, at, report);
                for (key, child) in &cut.properties {
                    if let Some(member) = members.get(key) {
                        self.validate_at(member, child, &format!("{at}/{}", escape_token(key)), report);
                    }
                }
            }
            Value::Array(items) if cut.items.is_some() => {
                errors(&cut.shallow, value, at, report);
                let child = cut.items.as_deref().unwrap_or_default();
                for (i, item) in items.iter().enumerate() {
                    self.validate_at(item, child, &format!("{at}/{i}"), report);
                }
            }
            _ => errors(&part.whole, value, at, report),
        }
    }
}

/// Report each error of `validator` on `value` (at `at`).
fn errors(
    validator: &Validator,
    value: &Value,
    at: &str,
    report: &mut dyn FnMut(&str, &ValidationError<'_>),
) {
    for error in validator.iter_errors(value) {
        report(at, &error);
    }
}

/// Whether the object or array schema `node` can be cut into its own keywords and its members' or items'.
fn can_cut(node: &Map<String, Value>) -> bool {
    (node.contains_key("properties") || node.contains_key("items"))
        && node.keys().all(|k| CUTTABLE.contains(&k.as_str()))
        && node.get("properties").is_none_or(Value::is_object)
        && node.get("items").is_none_or(Value::is_object)
}

/// `pointer`, or the subschema it refers to when it is a `$ref` (to this document) and annotations only.
fn resolve(schema: &Value, pointer: &str) -> String {
    let mut at = pointer.to_owned();
    // A few steps: the schema's references do not chain, and a cycle must not loop.
    for _ in 0..8 {
        let Some(node) = schema.pointer(&at).and_then(Value::as_object) else {
            break;
        };
        let target = node
            .get("$ref")
            .and_then(Value::as_str)
            .and_then(|r| r.strip_prefix('#'));
        let only_ref = node
            .keys()
            .all(|k| k == "$ref" || ANNOTATIONS.contains(&k.as_str()));
        match target {
            Some(target) if only_ref && schema.pointer(target).is_some() => at = target.to_owned(),
            _ => break,
        }
    }
    at
}

/// A validator of the subschema at `pointer` (`shallow`: without its `properties` and `items`). The part is
/// the schema itself with a `$ref` to the subschema: its `$defs` at the top, where references find them,
/// and the rest under [`TOP`], so the top level's keywords do not apply to the part.
fn compile(schema: &Value, pointer: &str, shallow: bool) -> Result<Validator, String> {
    let mut copy = schema.clone();
    if shallow && let Some(node) = copy.pointer_mut(pointer).and_then(Value::as_object_mut) {
        node.remove("properties");
        node.remove("items");
    }
    let mut top = match copy {
        Value::Object(top) => top,
        _ => return Err("the schema is not an object".to_owned()),
    };
    let defs = top.remove("$defs").unwrap_or_else(|| Value::Object(Map::new()));
    top.remove("$schema");
    let target = if pointer.starts_with("/$defs/") {
        format!("#{pointer}")
    } else {
        format!("#/{TOP}{pointer}")
    };
    let part = serde_json::json!({"$defs": defs, TOP: top, "$ref": target});
    jsonschema::draft202012::new(&part).map_err(|e| format!("{pointer}: {e}"))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use std::collections::{BTreeMap, BTreeSet};

    use proptest::prelude::*;
    use serde_json::json;

    use super::*;
    use crate::model::keys;

    /// Every error of `value` as (instance pointer, schema path, message), validated whole.
    fn whole(value: &Value) -> BTreeSet<(String, String, String)> {
        let schema: Value = serde_json::from_str(SCHEMA_TEXT).unwrap();
        let validator = jsonschema::draft202012::new(&schema).unwrap();
        validator
            .iter_errors(value)
            .map(|e| {
                let path = e.schema_path().as_str().to_owned();
                (
                    e.instance_path().as_str().to_owned(),
                    path,
                    e.masked().to_string(),
                )
            })
            .collect()
    }

    /// Every error of `value` validated in parts, and the most errors one `jsonschema` call returned.
    fn in_parts(value: &Value) -> (BTreeSet<(String, String, String)>, usize) {
        let mut found = BTreeSet::new();
        // Errors of one call share the pointer of the value validated; no two calls share one.
        let mut per_call: BTreeMap<String, usize> = BTreeMap::new();
        parts().unwrap().validate(value, &mut |at, e| {
            let ptr = format!("{at}{}", e.instance_path().as_str());
            found.insert((ptr, schema_path(e).to_owned(), e.masked().to_string()));
            *per_call.entry(at.to_owned()).or_default() += 1;
        });
        (found, per_call.into_values().max().unwrap_or(0))
    }

    #[test]
    fn many_broken_entries_never_make_one_long_list_of_errors() {
        let skills: Vec<Value> = (0..20_000).map(|_| json!({})).collect();
        let value = json!({"skills": skills, "apis": [{"tags": [1, 1, 1, 1, 1, 1, 1, 1, 1, 1]}]});
        let (found, longest) = in_parts(&value);
        assert_eq!(found, whole(&value));
        assert_eq!(found.len(), 3 + 20_000 * 7 + 5 + 1 + 10);
        assert!(longest <= 7, "one call returned {longest} errors");
    }

    #[test]
    fn a_wrong_type_anywhere_is_reported_as_whole() {
        for value in [
            json!([]),
            json!({"skills": {}, "apis": "x", "repository": []}),
            json!({"skills": [[], 1, {"path": {}, "package": ["a"], "tags": {"a": 1}}]}),
            json!({"repository": {"name": 1, "git_url": "ftp://x"}}),
        ] {
            assert_eq!(in_parts(&value).0, whole(&value), "{value}");
        }
    }

    fn json_value() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            any::<i64>().prop_map(Value::from),
            (-1.0e3..1.0e3f64).prop_map(Value::from),
            prop::sample::select(vec![
                "",
                " ",
                "1",
                "1.0.0",
                "skills/x",
                "../x",
                "x.zip",
                "en",
                "https://h/x"
            ])
            .prop_map(|s| Value::String(s.to_owned())),
        ];
        leaf.prop_recursive(4, 48, 6, |inner| {
            // Every key the format defines, once, and one it does not.
            let mut known: Vec<&'static str> = [keys::TOP, keys::REPOSITORY, keys::SKILL, keys::API].concat();
            known.sort_unstable();
            known.dedup();
            known.push("x");
            let keys = prop::sample::select(known);
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..5).prop_map(Value::Array),
                prop::collection::vec((keys, inner), 0..8)
                    .prop_map(|m| Value::Object(m.into_iter().map(|(k, v)| (k.to_owned(), v)).collect())),
            ]
        })
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

        #[test]
        fn validating_in_parts_finds_what_validating_whole_finds(value in json_value()) {
            prop_assert_eq!(in_parts(&value).0, whole(&value));
        }

        #[test]
        fn manifests_with_broken_entries_validate_alike(
            skills in prop::collection::vec(json_value(), 0..4),
            apis in prop::collection::vec(json_value(), 0..4),
        ) {
            let value = json!({"schema_version": "1", "skills": skills, "apis": apis});
            prop_assert_eq!(in_parts(&value).0, whole(&value));
        }
    }
}

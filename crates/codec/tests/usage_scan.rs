#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::disallowed_methods
)]

mod support;

use imagegate_codec::usage_scan::{ImagesResponseScanner, MAX_CAPTURE_BYTES, ResponseSummary, scan};
use imagegate_domain::{TokenDetails, Usage};
use proptest::prelude::*;
use serde_json::{Map, Value, json};

/// What serde_json reads from the same document.
fn reference(document: &Value) -> ResponseSummary {
    let empty = Map::new();
    let object = document.as_object().unwrap_or(&empty);
    let get = |key: &str| object.get(key).cloned();
    let string = |key: &str| get(key).and_then(|v| serde_json::from_value::<String>(v).ok());
    let int = |key: &str| get(key).and_then(|v| serde_json::from_value::<i64>(v).ok());
    ResponseSummary {
        created: int("created"),
        created_at: int("created_at"),
        model: string("model"),
        names_model: object.contains_key("model"),
        size: string("size"),
        quality: string("quality"),
        output_format: string("output_format"),
        background: string("background"),
        usage: get("usage").and_then(|v| serde_json::from_value::<Usage>(v).ok()),
        images: object.get("data").and_then(Value::as_array).map_or(0, Vec::len),
    }
}

fn scan_in_pieces(bytes: &[u8], cuts: &[usize]) -> ImagesResponseScanner {
    let mut scanner = ImagesResponseScanner::new();
    for piece in support::split_at_points(bytes, cuts) {
        scanner.push(&piece);
    }
    scanner
}

#[test]
fn reads_a_typical_response_split_everywhere() {
    let document = json!({
        "created": 1766000000,
        "background": "opaque",
        "data": [{"b64_json": "iVBORw0KGgo\"quoted\\\"size\":\"9x9\"", "revised_prompt": "a \"size\": 1x1"}],
        "model": "gpt-image-2",
        "output_format": "webp",
        "quality": "medium",
        "size": "1536x864",
        "usage": {"input_tokens": 14, "input_tokens_details": {"text_tokens": 14, "image_tokens": 0},
                  "output_tokens": 1056, "output_tokens_details": {"image_tokens": 1056, "text_tokens": 0},
                  "total_tokens": 1070}
    });
    let bytes = serde_json::to_vec(&document).unwrap();
    for cut in 0..=bytes.len() {
        let scanner = scan_in_pieces(&bytes, &[cut]);
        assert!(scanner.is_complete(), "cut {cut}");
        let summary = scanner.into_summary();
        assert_eq!(summary.size.as_deref(), Some("1536x864"), "cut {cut}");
        assert_eq!(summary.images, 1);
        assert_eq!(
            summary.usage,
            Some(Usage {
                input_tokens: 14,
                input_tokens_details: TokenDetails {
                    text_tokens: 14,
                    image_tokens: 0
                },
                output_tokens: 1056,
                output_tokens_details: TokenDetails {
                    text_tokens: 0,
                    image_tokens: 1056
                },
                total_tokens: 1070,
            })
        );
        assert_eq!(summary.created, Some(1_766_000_000));
        assert_eq!(summary.background.as_deref(), Some("opaque"));
    }
}

#[test]
fn reads_a_stream_event_payload() {
    let summary = scan(
        br#"{"type":"image_generation.completed","b64_json":"AAAA","created_at":5,"size":"1024x1024",
            "quality":"high","background":"opaque","output_format":"png",
            "usage":{"total_tokens":3,"input_tokens":1,"output_tokens":2,"input_tokens_details":{"text_tokens":1,"image_tokens":0}}}"#,
    );
    assert_eq!(summary.created_at, Some(5));
    assert_eq!(summary.quality.as_deref(), Some("high"));
    assert_eq!(summary.usage.map(|u| u.total_tokens), Some(3));
    assert_eq!(
        summary.usage.map(|u| u.output_tokens_details),
        Some(TokenDetails::default())
    );
}

#[test]
fn nested_keys_with_interesting_names_are_ignored() {
    let summary = scan(br#"{"data":[{"size":"1x1","usage":{"total_tokens":9}}],"meta":{"quality":"low"}}"#);
    assert_eq!(summary.size, None);
    assert_eq!(summary.quality, None);
    assert_eq!(summary.usage, None);
    assert_eq!(summary.images, 1);
}

#[test]
fn escaped_keys_are_decoded() {
    let summary = scan(br#"{"\u0073ize":"2048x2048","qual\u0069ty":"low"}"#);
    assert_eq!(summary.size.as_deref(), Some("2048x2048"));
    assert_eq!(summary.quality.as_deref(), Some("low"));
}

#[test]
fn oversized_values_are_skipped_not_copied() {
    let big = "x".repeat(MAX_CAPTURE_BYTES + 10);
    let document = format!(r#"{{"usage":{{"pad":"{big}","total_tokens":1}},"size":"1024x1024"}}"#);
    let summary = scan(document.as_bytes());
    assert_eq!(summary.usage, None);
    assert_eq!(summary.size.as_deref(), Some("1024x1024"));
}

#[test]
fn malformed_and_incomplete_input_is_reported() {
    let mut scanner = ImagesResponseScanner::new();
    scanner.push(br#"{"size":"1024x1024","data":[{"b64_json":"AAA"#);
    assert!(!scanner.is_complete());
    assert!(!scanner.is_malformed());
    assert_eq!(scanner.summary().size.as_deref(), Some("1024x1024"));
    scanner.push(b"\"}]}}");
    assert!(scanner.is_malformed());
    assert!(!scanner.is_complete());
    let mut deep = ImagesResponseScanner::new();
    deep.push(&[b'['; 200]);
    assert!(deep.is_malformed());
}

fn scalar() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        (-1.0e9f64..1.0e9).prop_map(Value::from),
        "[ -~]{0,10}".prop_map(Value::from),
        "\\PC{0,6}".prop_map(Value::from),
    ]
}

fn any_value() -> impl Strategy<Value = Value> {
    scalar().prop_recursive(3, 16, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::from),
            prop::collection::btree_map(
                prop::sample::select(vec!["size", "usage", "quality", "b64_json", "x", "data"]),
                inner,
                0..4
            )
            .prop_map(|map| Value::Object(map.into_iter().map(|(k, v)| (k.to_owned(), v)).collect())),
        ]
    })
}

fn usage_value() -> impl Strategy<Value = Value> {
    let details = (0u64..5000, 0u64..5000).prop_map(|(t, i)| json!({"text_tokens": t, "image_tokens": i}));
    prop_oneof![
        4 => (0u64..100_000, details.clone(), 0u64..100_000, details, 0u64..200_000).prop_map(
            |(input, input_details, output, output_details, total)| json!({
                "input_tokens": input, "input_tokens_details": input_details,
                "output_tokens": output, "output_tokens_details": output_details, "total_tokens": total,
            })
        ),
        1 => any_value(),
    ]
}

fn document() -> impl Strategy<Value = Value> {
    let text = prop_oneof![4 => "[a-z0-9x]{1,12}".prop_map(Value::from), 1 => scalar()];
    let image = ("[A-Za-z0-9+/=\"\\\\]{0,200}", prop::option::of("\\PC{0,20}")).prop_map(|(b64, revised)| {
        let mut item = json!({"b64_json": b64});
        if let Some(revised) = revised {
            item["revised_prompt"] = Value::from(revised);
        }
        item
    });
    (
        prop::option::of(prop_oneof![any::<i64>().prop_map(Value::from), scalar()]),
        prop::option::of(prop_oneof![any::<i64>().prop_map(Value::from), scalar()]),
        prop::option::of(text.clone()),
        prop::option::of(text.clone()),
        prop::option::of(text.clone()),
        prop::option::of(text.clone()),
        prop::option::of(text),
        prop::option::of(usage_value()),
        prop::option::of(
            prop_oneof![4 => prop::collection::vec(image, 0..4).prop_map(Value::from), 1 => any_value()],
        ),
        prop::collection::btree_map("[a-z_]{1,10}", any_value(), 0..3),
    )
        .prop_map(
            |(created, created_at, model, size, quality, format, background, usage, data, extra)| {
                let mut object: Map<String, Value> = extra.into_iter().collect();
                let fields = [
                    ("created", created),
                    ("created_at", created_at),
                    ("model", model),
                    ("size", size),
                    ("quality", quality),
                    ("output_format", format),
                    ("background", background),
                    ("usage", usage),
                    ("data", data),
                ];
                for (key, value) in fields {
                    match value {
                        Some(value) => {
                            object.insert(key.to_owned(), value);
                        }
                        None => {
                            object.remove(key);
                        }
                    }
                }
                Value::Object(object)
            },
        )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn scanner_agrees_with_serde_json_under_any_chunking(
        document in document(),
        pretty in any::<bool>(),
        cuts in prop::collection::vec(0.0f64..1.0, 0..32),
    ) {
        let bytes = if pretty { serde_json::to_vec_pretty(&document) } else { serde_json::to_vec(&document) }.unwrap();
        let cuts: Vec<usize> = cuts.iter().map(|at| (at * bytes.len() as f64) as usize).collect();
        let scanner = scan_in_pieces(&bytes, &cuts);
        prop_assert!(scanner.is_complete());
        prop_assert_eq!(scanner.into_summary(), reference(&document));
    }
}

#[test]
fn a_model_key_counts_whatever_its_value() {
    for (document, model) in [
        (br#"{"model":null,"data":[]}"#.as_slice(), None),
        (br#"{"model":7,"data":[]}"#.as_slice(), None),
        (
            br#"{"data":[],"model":"gpt-image-2"}"#.as_slice(),
            Some("gpt-image-2"),
        ),
    ] {
        let summary = scan(document);
        assert!(summary.names_model, "{}", String::from_utf8_lossy(document));
        assert_eq!(summary.model.as_deref(), model);
    }
    assert!(!scan(br#"{"data":[{"model":"nested"}]}"#).names_model);
}

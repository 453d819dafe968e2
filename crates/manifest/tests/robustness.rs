//! No input makes the checker panic, and every finding it reports has a sane location.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::disallowed_methods
)]

use imagegate_manifest::{CheckOptions, FileReport, check_bytes};
use proptest::prelude::*;
use serde_json::Value;

fn assert_sane(report: &FileReport) {
    for f in &report.findings {
        assert!(f.start.line >= 1 && f.start.column >= 1, "{f:?}");
        assert!(f.start <= f.end, "{f:?}");
        assert!(f.span.start <= report.source.len() + 1, "{f:?}");
        assert!(f.start.line <= report.lines.line_count(), "{f:?}");
    }
    let keys: Vec<_> = report.findings.iter().map(|f| f.sort_key()).collect();
    assert!(keys.windows(2).all(|w| w[0] <= w[1]), "findings are not sorted");
}

fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        any::<f64>().prop_map(Value::from),
        ".{0,12}".prop_map(Value::String),
        prop::sample::select(vec![
            "1",
            "skills/x",
            "../x",
            "sha256:AB",
            "2026-01-01T00:00:00Z",
            "https://h/x",
            "zh_CN"
        ])
        .prop_map(|s| Value::String(s.to_owned())),
    ];
    leaf.prop_recursive(5, 64, 8, |inner| {
        let keys = prop::sample::select(vec![
            "schema_version",
            "generated_at",
            "repository",
            "skills",
            "apis",
            "name",
            "git_url",
            "raw_base_url",
            "branch",
            "version",
            "title",
            "description",
            "path",
            "package",
            "sha256",
            "size_bytes",
            "api_docs",
            "tags",
            "agents",
            "updated_at",
            "id",
            "product",
            "language",
            "source_urls",
            "plugins",
            "x",
        ]);
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
            prop::collection::vec((keys, inner), 0..8).prop_map(|members| Value::Object(
                members.into_iter().map(|(k, v)| (k.to_owned(), v)).collect()
            )),
        ]
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn arbitrary_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..512)) {
        let report = check_bytes("fuzz.json", &bytes, &CheckOptions::default());
        assert_sane(&report);
    }

    #[test]
    fn arbitrary_json_never_panics(value in json_value()) {
        let text = serde_json::to_string_pretty(&value).unwrap();
        let report = check_bytes("fuzz.json", text.as_bytes(), &CheckOptions::default());
        prop_assert!(!report.parse_failed(), "valid JSON reported as unparseable: {:?}", report.findings);
        assert_sane(&report);
    }

    #[test]
    fn mutated_manifests_never_panic(
        (at, cut) in (0usize..4000, 0usize..8),
        insert in prop::sample::select(vec!["", ",", "}", "\"", "\\u", "\u{301}", "[", "1e999", "\u{feff}"]),
    ) {
        let mut text = imagegate_manifest::synthetic::manifest(3).into_bytes();
        let at = at.min(text.len());
        let end = (at + cut).min(text.len());
        text.splice(at..end, insert.bytes());
        let report = check_bytes("fuzz.json", &text, &CheckOptions::default());
        assert_sane(&report);
    }
}

#[test]
fn deep_nesting_is_a_finding_not_a_stack_overflow() {
    let text = "[".repeat(100_000);
    let report = check_bytes("deep.json", text.as_bytes(), &CheckOptions::default());
    assert_eq!(report.findings.len(), 1);
    assert_eq!(report.findings[0].rule.id(), "R-JSON-DEPTH");
}

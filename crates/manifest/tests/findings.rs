//! Specific behaviour of the rules: folding, ordering, hints, locations.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::disallowed_methods
)]

mod support;

use std::fs;

use imagegate_manifest::{Rule, Severity};
use serde_json::json;
use support::{Checkout, rule_ids, skill_md, write_file};

#[test]
fn a_bad_sha256_is_reported_once_not_by_schema_and_rule_and_root() {
    let mut checkout = Checkout::new();
    let upper = checkout.skill(0)["sha256"].as_str().unwrap().to_uppercase();
    checkout
        .skill(0)
        .insert("sha256".into(), json!(format!("sha256:{upper}")));
    let report = checkout.check();
    assert_eq!(rule_ids(&report), ["R-SKILL-SHA256"]);
    let finding = &report.findings[0];
    assert_eq!(finding.pointer, "/skills/0/sha256");
    assert!(finding.hint.contains("bare hex digest"), "{}", finding.hint);
    assert!(finding.hint.contains(&upper.to_lowercase()));
}

#[test]
fn folding_keeps_one_finding_per_problem() {
    let mut checkout = Checkout::new();
    checkout.skill(0).insert("name".into(), json!("PDF_Tools"));
    checkout.skill(0).insert("version".into(), json!("1.0"));
    checkout.skill(0).insert("tags".into(), json!(["pdf", "pdf"]));
    checkout.api(1).insert("language".into(), json!("zh_CN"));
    let report = checkout.check_offline();
    let ids = rule_ids(&report);
    // Keys are serialized sorted, so `apis` comes before `skills`.
    assert_eq!(
        ids,
        ["R-API-LANGUAGE", "R-SKILL-NAME", "R-LIST-DUP", "R-SKILL-VERSION"],
        "{:#?}",
        report.findings
    );
    assert_eq!(
        report.findings[0].hint,
        "BCP 47 separates subtags with `-`: write \"zh-CN\"."
    );
    assert_eq!(report.findings[1].hint, "Use `pdf-tools`.");
    assert_eq!(
        report.findings[3].hint,
        "SemVer needs three numbers: write \"1.0.0\"."
    );
}

#[test]
fn findings_are_sorted_by_location() {
    let mut checkout = Checkout::new();
    checkout.api(1).insert("language".into(), json!("zh_CN"));
    checkout.skill(1).insert("version".into(), json!("x"));
    checkout.manifest["schema_version"] = json!("9");
    let report = checkout.check_offline();
    let lines: Vec<usize> = report.findings.iter().map(|f| f.start.line).collect();
    let mut sorted = lines.clone();
    sorted.sort_unstable();
    assert_eq!(lines, sorted);
    assert_eq!(report.findings.len(), 3);
}

#[test]
fn size_bytes_must_be_written_as_an_integer() {
    for (raw, hint) in [
        ("12.0", Some("Write 12.")),
        ("-1", None),
        ("1e3", Some("Write 1000.")),
        ("9007199254740992", None),
    ] {
        let mut checkout = Checkout::new();
        checkout.skill(0).insert("size_bytes".into(), json!("@SIZE@"));
        checkout.replacements.push(("\"@SIZE@\"".into(), raw.into()));
        let report = checkout.check_offline();
        assert_eq!(rule_ids(&report), ["R-SKILL-SIZE"], "{raw}");
        assert_eq!(report.findings[0].found.as_deref(), Some(raw));
        if let Some(hint) = hint {
            assert_eq!(report.findings[0].hint, hint);
        }
    }
}

#[test]
fn a_fractional_size_is_one_finding_not_a_rule_and_a_schema_type() {
    let mut checkout = Checkout::new();
    checkout.skill(0).insert("size_bytes".into(), json!(1.5));
    for report in [checkout.check_offline(), checkout.check()] {
        let at_size: Vec<&str> = report
            .findings
            .iter()
            .filter(|f| f.pointer == "/skills/0/size_bytes")
            .map(|f| f.rule.id())
            .collect();
        assert_eq!(at_size, ["R-SKILL-SIZE"], "{:#?}", report.findings);
    }
}

#[test]
fn duplicate_keys_point_at_the_second_key_and_name_the_first() {
    let text = "{\n  \"a\": 1,\n  \"a\": 2\n}";
    let report = imagegate_manifest::check_bytes("x.json", text.as_bytes(), &Default::default());
    let dup = report
        .findings
        .iter()
        .find(|f| f.rule == Rule::JsonDupKey)
        .unwrap();
    assert_eq!(
        (dup.start.line, dup.start.column, dup.pointer.as_str()),
        (3, 3, "/a")
    );
    assert_eq!(
        dup.found.as_deref(),
        Some("second occurrence; the first is at 2:3")
    );
}

#[test]
fn unknown_keys_are_warnings_with_a_suggestion() {
    let mut checkout = Checkout::new();
    checkout.skill(0).insert("size-bytes".into(), json!(1));
    let report = checkout.check_offline();
    let unknown = report
        .findings
        .iter()
        .find(|f| f.rule == Rule::UnknownKey)
        .unwrap();
    assert_eq!(unknown.severity, Severity::Warning);
    assert_eq!(unknown.pointer, "/skills/0/size-bytes");
    assert!(
        unknown.hint.starts_with("Did you mean `size_bytes`?"),
        "{}",
        unknown.hint
    );
}

#[test]
fn a_symlinked_skill_folder_leading_outside_is_refused() {
    let checkout = Checkout::new();
    let outside = tempfile::tempdir().unwrap();
    write_file(
        &outside.path().join("SKILL.md"),
        &skill_md("web-search", "Search the web and cite sources.", ""),
    );
    fs::remove_dir_all(checkout.path("skills/web-search")).unwrap();
    #[cfg(unix)]
    std::os::unix::fs::symlink(outside.path(), checkout.path("skills/web-search")).unwrap();
    let report = checkout.check();
    let missing = report
        .findings
        .iter()
        .find(|f| f.rule == Rule::RootPathMissing)
        .unwrap();
    assert!(
        missing.message.contains("outside the checkout"),
        "{}",
        missing.message
    );
}

#[test]
fn an_empty_path_is_an_error() {
    let mut checkout = Checkout::new();
    checkout.skill(0).insert("path".into(), json!(""));
    checkout.api(0).insert("path".into(), json!(""));
    for report in [checkout.check_offline(), checkout.check()] {
        let found: Vec<(&str, &str)> = report
            .findings
            .iter()
            .map(|f| (f.rule.id(), f.pointer.as_str()))
            .collect();
        assert!(
            found.contains(&("R-FIELD-BLANK", "/skills/0/path"))
                && found.contains(&("R-FIELD-BLANK", "/apis/0/path")),
            "{found:?}"
        );
        assert!(report.fails(Severity::Error));
        assert!(
            !found.iter().any(|(rule, _)| *rule == "R-PATH-DOT-SEGMENT"),
            "{found:?}"
        );
    }
}

#[test]
fn a_whitespace_only_path_is_blank() {
    let mut checkout = Checkout::new();
    checkout.skill(0).insert("package".into(), json!("   "));
    checkout.api(0).insert("path".into(), json!(" \t "));
    for report in [checkout.check_offline(), checkout.check()] {
        let found: Vec<(&str, &str)> = report
            .findings
            .iter()
            .map(|f| (f.rule.id(), f.pointer.as_str()))
            .collect();
        assert!(
            found.contains(&("R-FIELD-BLANK", "/skills/0/package"))
                && found.contains(&("R-FIELD-BLANK", "/apis/0/path")),
            "{found:?}"
        );
        assert!(report.fails(Severity::Error));
    }
}

#[test]
fn a_path_with_a_control_character_is_an_error() {
    for path in [
        "apis/en/images\u{0}api.md",
        "apis/en/images-api.md\n",
        "apis/\u{1b}[31men/a.md",
    ] {
        let mut checkout = Checkout::new();
        checkout.api(0).insert("path".into(), json!(path));
        let report = checkout.check_offline();
        let control: Vec<_> = report
            .findings
            .iter()
            .filter(|f| f.rule == Rule::PathControl)
            .collect();
        assert_eq!(control.len(), 1, "{path:?}: {:?}", rule_ids(&report));
        assert_eq!(control[0].pointer, "/apis/0/path");
        assert_eq!(control[0].severity, Severity::Error);
        assert!(report.fails(Severity::Error));
    }
}

#[test]
fn a_duplicate_key_does_not_hide_a_wrong_type() {
    let mut checkout = Checkout::new();
    checkout.manifest["skills"] = json!("@SKILLS@");
    checkout
        .replacements
        .push(("\"@SKILLS@\"".into(), r#"{"a": 1, "a": 2}"#.into()));
    let report = checkout.check_offline();
    let found: Vec<(&str, &str)> = report
        .findings
        .iter()
        .map(|f| (f.rule.id(), f.pointer.as_str()))
        .collect();
    assert!(found.contains(&("R-JSON-DUP-KEY", "/skills/a")), "{found:?}");
    assert!(found.contains(&("R-SCHEMA-TYPE", "/skills")), "{found:?}");

    let report = imagegate_manifest::check_bytes("x.json", br#"[{"a": 1, "a": 2}]"#, &Default::default());
    assert_eq!(rule_ids(&report), ["R-SCHEMA-TYPE", "R-JSON-DUP-KEY"]);
    assert_eq!(report.findings[0].pointer, "");
}

#[test]
fn every_repeat_of_a_key_in_a_large_object_names_the_first_occurrence() {
    let keys: Vec<String> = (0..40).map(|i| format!("\"k{i}\": {i}")).collect();
    let text = format!("{{\n{},\n{},\n\"k5\": 0\n}}", keys.join(",\n"), keys.join(",\n"));
    let report = imagegate_manifest::check_bytes("x.json", text.as_bytes(), &Default::default());
    let dups: Vec<_> = report
        .findings
        .iter()
        .filter(|f| f.rule == Rule::JsonDupKey)
        .collect();
    assert_eq!(dups.len(), 41);
    for (i, dup) in dups.iter().take(40).enumerate() {
        assert_eq!(dup.pointer, format!("/k{i}"));
        assert_eq!(dup.start.line, 42 + i);
        assert_eq!(
            dup.found.as_deref(),
            Some(format!("second occurrence; the first is at {}:1", 2 + i).as_str())
        );
    }
    assert_eq!((dups[40].pointer.as_str(), dups[40].start.line), ("/k5", 82));
    assert_eq!(
        dups[40].found.as_deref(),
        Some("second occurrence; the first is at 7:1")
    );
}

#[test]
fn a_symlink_hidden_behind_a_regular_entry_of_the_same_name_is_refused() {
    let checkout = Checkout::new();
    let skill_md = fs::read_to_string(checkout.path("skills/web-search/SKILL.md")).unwrap();
    support::write_zip_renamed(
        &checkout.path("packages/web-search.zip"),
        &[
            ("web-search/SKILL.md", None),
            ("web-search/SKILL.mX", Some(&skill_md)),
        ],
        "web-search/SKILL.mX",
        "web-search/SKILL.md",
    );
    let report = checkout.check();
    let dup = report
        .findings
        .iter()
        .find(|f| f.rule == Rule::PkgDupEntry)
        .unwrap_or_else(|| panic!("{:?}", rule_ids(&report)));
    assert_eq!(dup.severity, Severity::Error);
    assert_eq!(dup.pointer, "/skills/1/package");
}

#[test]
fn extended_language_tags_uppercase_schemes_and_ipv6_hosts_are_accepted() {
    for language in [
        "zh-yue",
        "zh-cmn-Hans-CN",
        "x-klingon",
        "i-klingon",
        "de-DE-u-co-phonebk",
    ] {
        let mut checkout = Checkout::new();
        checkout.api(1).insert("language".into(), json!(language));
        assert_eq!(
            rule_ids(&checkout.check_offline()),
            Vec::<&str>::new(),
            "{language}"
        );
    }
    let mut checkout = Checkout::new();
    checkout.manifest["repository"]["git_url"] = json!("HTTPS://github.com/acme/agent-skills.git");
    checkout.manifest["repository"]["raw_base_url"] =
        json!("HTTPS://raw.githubusercontent.com/acme/agent-skills/main");
    checkout
        .api(0)
        .insert("source_urls".into(), json!(["HTTPS://docs.example.com/images"]));
    assert_eq!(rule_ids(&checkout.check_offline()), Vec::<&str>::new());
    checkout.manifest["repository"]["raw_base_url"] = json!("https://[::1]/acme/agent-skills/main");
    checkout
        .api(0)
        .insert("source_urls".into(), json!(["https://[2001:db8::1]:8443/images"]));
    assert_eq!(rule_ids(&checkout.check_offline()), Vec::<&str>::new());
}

#[test]
fn malformed_language_tags_are_one_finding() {
    for language in ["en-a-b", "zh_CN", "en-US-x", "abc-def-ghi-jkl-mno"] {
        let mut checkout = Checkout::new();
        checkout.api(1).insert("language".into(), json!(language));
        assert_eq!(
            rule_ids(&checkout.check_offline()),
            ["R-API-LANGUAGE"],
            "{language}"
        );
    }
}

#[test]
fn a_path_gets_a_finding_for_every_rule_it_breaks() {
    let mut checkout = Checkout::new();
    checkout.api(0).insert("path".into(), json!("/a/../b\\c.md"));
    for report in [checkout.check_offline(), checkout.check()] {
        let found: Vec<(&str, &str)> = report
            .findings
            .iter()
            .map(|f| (f.rule.id(), f.pointer.as_str()))
            .collect();
        assert_eq!(
            found,
            [
                ("R-PATH-ABSOLUTE", "/apis/0/path"),
                ("R-PATH-BACKSLASH", "/apis/0/path"),
                ("R-PATH-PARENT", "/apis/0/path"),
            ],
            "{:#?}",
            report.findings
        );
        // The cleaned path `a/../b/c.md` still leaves the folder, so it is not suggested.
        assert_eq!(report.findings[1].hint, Rule::PathBackslash.hint());
    }
}

#[test]
fn strict_raises_only_unknown_keys_to_errors() {
    let mut checkout = Checkout::new();
    checkout.manifest["extra"] = json!(1);
    checkout.skill(0).insert("agents".into(), json!(["claude"]));
    let bytes = checkout.bytes();
    let severities = |strict: bool| {
        let options = imagegate_manifest::CheckOptions {
            strict,
            ..checkout.options(false)
        };
        let report = imagegate_manifest::check_bytes("registry.json", &bytes, &options);
        report
            .findings
            .iter()
            .map(|f| (f.rule.id(), f.severity))
            .collect::<Vec<_>>()
    };
    assert_eq!(
        severities(false),
        [
            ("R-UNKNOWN-KEY", Severity::Warning),
            ("R-SKILL-AGENT-UNKNOWN", Severity::Warning)
        ]
    );
    assert_eq!(
        severities(true),
        [
            ("R-UNKNOWN-KEY", Severity::Error),
            ("R-SKILL-AGENT-UNKNOWN", Severity::Warning)
        ]
    );
    let raised: Vec<&str> = Rule::ALL
        .iter()
        .filter(|r| r.severity_in(true) != r.severity())
        .map(|r| r.id())
        .collect();
    assert_eq!(raised, ["R-UNKNOWN-KEY"]);
}

#[test]
fn an_api_referenced_only_by_a_misspelling_or_its_path_is_still_unused() {
    let mut checkout = Checkout::new();
    checkout
        .skill(0)
        .insert("api_docs".into(), json!(["images-apii"]));
    checkout
        .skill(1)
        .insert("api_docs".into(), json!(["apis/zh-CN/search-api.md"]));
    let report = checkout.check_offline();
    let found: Vec<(&str, &str, &str)> = report
        .findings
        .iter()
        .map(|f| (f.rule.id(), f.pointer.as_str(), f.hint.as_str()))
        .collect();
    assert_eq!(
        found,
        [
            ("R-XREF-API-UNUSED", "/apis/0/id", Rule::XrefApiUnused.hint()),
            ("R-XREF-API-UNUSED", "/apis/1/id", Rule::XrefApiUnused.hint()),
            (
                "R-XREF-API-DOC",
                "/skills/0/api_docs/0",
                "Did you mean \"images-api\"?"
            ),
            (
                "R-XREF-API-DOC",
                "/skills/1/api_docs/0",
                "api_docs holds API ids, not paths: write \"search-api\"."
            ),
        ],
        "{:#?}",
        report.findings
    );
}

#[test]
fn a_schema_constraint_finding_shows_the_offending_value_and_the_constraint() {
    let mut checkout = Checkout::new();
    checkout.skill(0).insert("tags".into(), json!([1, 1]));
    let report = checkout.check_offline();
    let constraint = report
        .findings
        .iter()
        .find(|f| f.rule == Rule::SchemaConstraint)
        .unwrap();
    assert_eq!(constraint.pointer, "/skills/0/tags");
    assert_eq!(constraint.found.as_deref(), Some("[1,1]"));
    assert_eq!(
        constraint.expected.as_deref(),
        Some("uniqueItems: true (/$defs/skill/properties/tags/uniqueItems)")
    );
}

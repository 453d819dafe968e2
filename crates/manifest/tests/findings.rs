//! Specific behaviour of the rules: folding, ordering, hints, locations.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

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

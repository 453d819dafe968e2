//! `R-PATH-CASE` on paths that only differ in letter case after cleaning, and on very long paths.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::disallowed_methods
)]

use imagegate_manifest::{CheckOptions, check_bytes};
use serde_json::json;

/// The `R-PATH-CASE` messages of a manifest whose API documents are at `paths`.
fn case_findings(paths: &[&str]) -> Vec<String> {
    let apis: Vec<_> = paths
        .iter()
        .enumerate()
        .map(|(i, path)| json!({"id": format!("api-{i}"), "language": "en", "path": path}))
        .collect();
    let manifest = json!({
        "schema_version": "1",
        "generated_at": "2026-05-01T12:00:00Z",
        "repository": {"name": "skills", "git_url": "https://github.com/acme/skills.git",
            "raw_base_url": "https://raw.githubusercontent.com/acme/skills/main", "branch": "main"},
        "skills": [],
        "apis": apis,
    });
    let bytes = serde_json::to_vec(&manifest).unwrap();
    check_bytes("registry.json", &bytes, &CheckOptions::default())
        .findings
        .iter()
        .filter(|f| f.rule.id() == "R-PATH-CASE")
        .map(|f| f.message.clone())
        .collect()
}

#[test]
fn folders_and_files_differing_only_in_case_collide() {
    let found = case_findings(&["apis/en/search.md", "APIs/en/other.md"]);
    assert_eq!(found.len(), 1, "{found:?}");
    assert!(
        found[0].starts_with("`APIs` differs only in letter case from `apis`"),
        "{found:?}"
    );
    assert!(case_findings(&["apis/en/a.md", "apis/en/A.md"]).len() == 1);
    assert!(case_findings(&["apis/en/a.md", "apis/de/a.md"]).is_empty());
}

#[test]
fn titlecase_letters_and_uncleaned_paths_collide_too() {
    // U+01C5 (titlecase Dž) and U+01C6 (its lowercase) name the same file on macOS and Windows.
    assert_eq!(case_findings(&["apis/\u{1c5}.md", "apis/\u{1c6}.md"]).len(), 1);
    // `apis//PDF.md` (a warning, the empty segment) is `apis/PDF.md` on disk.
    let found = case_findings(&["apis/pdf.md", "apis//PDF.md"]);
    assert_eq!(found.len(), 1, "{found:?}");
    assert!(
        found[0].starts_with("`apis/PDF.md` differs only in letter case from `apis/pdf.md`"),
        "{found:?}"
    );
}

#[test]
fn a_very_long_path_is_compared_in_linear_time_and_memory() {
    // 100,000 segments: comparing every prefix whole would hold about 10 GB of lowercase copies.
    let long = format!("A{}", "/a".repeat(100_000));
    let other = format!("a{}", "/a".repeat(100_000));
    let found = case_findings(&[&long, &other]);
    assert_eq!(found.len(), 1);
    assert!(found[0].starts_with("`a` differs only in letter case from `A`"));
    let deep_difference = format!("{}/B", "a/".repeat(50_000));
    let deep_other = format!("{}/b", "a/".repeat(50_000));
    assert_eq!(case_findings(&[&deep_difference, &deep_other]).len(), 1);
}

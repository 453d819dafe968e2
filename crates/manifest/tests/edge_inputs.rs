//! Inputs at the edges of the format: a `SHA256:` prefix in capitals, and old Mac line endings.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::disallowed_methods
)]

use imagegate_manifest::{CheckOptions, check_bytes};

const MANIFEST: &str = r#"{
  "schema_version": "1",
  "generated_at": "2026-05-01T12:00:00Z",
  "repository": {"name": "skills", "git_url": "https://github.com/acme/skills.git",
                 "raw_base_url": "https://raw.githubusercontent.com/acme/skills/main", "branch": "main"},
  "skills": [{"name": "pdf-tools", "version": "1.0.0", "title": "PDF tools",
              "description": "Fill and merge PDF files.", "path": "skills/pdf-tools",
              "package": "packages/pdf-tools.zip", "sha256": "SHA",
              "size_bytes": 12}],
  "apis": []
}"#;

fn with_sha(sha: &str) -> String {
    MANIFEST.replace("\"SHA\"", &format!("\"{sha}\""))
}

#[test]
fn a_sha256_prefix_in_any_case_is_explained() {
    let hex = "ab".repeat(32);
    for prefix in ["sha256:", "SHA256:", "Sha256:"] {
        let manifest = with_sha(&format!("{prefix}{hex}"));
        let report = check_bytes("registry.json", manifest.as_bytes(), &CheckOptions::default());
        let finding = report
            .findings
            .iter()
            .find(|f| f.rule.id() == "R-SKILL-SHA256")
            .unwrap();
        assert_eq!(finding.message, "sha256 has a `sha256:` prefix", "{prefix}");
        assert!(finding.hint.contains(&hex), "{prefix}: {:?}", finding.hint);
    }
}

#[test]
fn findings_in_a_file_with_old_mac_line_endings_have_the_lines_editors_show() {
    let manifest = with_sha("nothex").replace('\n', "\r");
    let report = check_bytes("registry.json", manifest.as_bytes(), &CheckOptions::default());
    let finding = report
        .findings
        .iter()
        .find(|f| f.rule.id() == "R-SKILL-SHA256")
        .unwrap();
    assert_eq!(finding.start.line, 8, "{finding:?}");
}

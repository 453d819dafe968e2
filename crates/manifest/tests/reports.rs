//! Snapshots of every output format for one manifest with a mix of findings.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::disallowed_methods
)]

use imagegate_manifest::report::{Format, render};
use imagegate_manifest::{CheckOptions, FileReport, check_bytes};

const MANIFEST: &str = r#"{
  "schema_version": "1",
  "generated_at": "2026-02-01T10:00:00Z",
  "repository": {
    "name": "agent-skills",
    "git_url": "https://github.com/acme/agent-skills.git",
    "raw_base_url": "https://raw.githubusercontent.com/acme/agent-skills/main",
    "branch": "main"
  },
  "skills": [
    {
      "name": "pdf-tools",
      "version": "1.0",
      "title": "PDF tools",
      "description": "Fill, merge and split PDF files.",
      "path": "skills/pdf-tools",
      "package": "packages/pdf-tools.zip",
      "sha256": "sha256:9F86D081884C7D659A2FEAA0C55AD015A3BF4F1B2B0B822CD15D6C15B0F00A08",
      "size_bytes": 1024,
      "api_docs": ["images"],
      "agents": ["claude-code", "clod"]
    },
    {
      "name": "pdf-tools",
      "version": "2.0.0",
      "title": "PDF tools, again",
      "description": "The same name twice.",
      "path": "Skills/pdf-tools",
      "package": "packages/pdf-tools-2.zip",
      "sha256": "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
      "size_bytes": 2048
    }
  ],
  "apis": [
    {"id": "images-api", "title": "Images", "product": "Gateway", "language": "en_US", "path": "apis/en/images-api.md"}
  ]
}
"#;

fn report() -> FileReport {
    check_bytes("registry.json", MANIFEST.as_bytes(), &CheckOptions::default())
}

#[test]
fn text_report() {
    insta::assert_snapshot!(render(Format::Text, &[report()]));
}

#[test]
fn json_report() {
    let text = render(Format::Json, &[report()]);
    let value: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!(value["format_version"], 1);
    insta::assert_snapshot!(text);
}

#[test]
fn sarif_report() {
    let text = render(Format::Sarif, &[report()]);
    let value: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!(value["version"], "2.1.0");
    let results = value["runs"][0]["results"].as_array().unwrap();
    let rules = value["runs"][0]["tool"]["driver"]["rules"].as_array().unwrap();
    for result in results {
        let index = result["ruleIndex"].as_u64().unwrap() as usize;
        assert_eq!(rules[index]["id"], result["ruleId"]);
    }
    insta::assert_snapshot!(text);
}

#[test]
fn github_annotations() {
    insta::assert_snapshot!(render(Format::Github, &[report()]));
}

#[test]
fn syntax_error_snippet_points_at_the_character() {
    let report = check_bytes(
        "broken.json",
        b"{\n  \"a\": [1, 2,]\n}\n",
        &CheckOptions::default(),
    );
    insta::assert_snapshot!(render(Format::Text, &[report]));
}

#[test]
fn long_lines_are_shown_around_the_finding() {
    let minified: String =
        serde_json::to_string(&serde_json::from_str::<serde_json::Value>(MANIFEST).unwrap()).unwrap();
    let report = check_bytes("min.json", minified.as_bytes(), &CheckOptions::default());
    let text = render(Format::Text, &[report]);
    let snippet_lines: Vec<&str> = text.lines().filter(|l| l.starts_with("1 | ")).collect();
    // Seven problems plus the info that no skill references images-api ("images" is a misspelling).
    assert_eq!(snippet_lines.len(), 8, "{text}");
    for line in &snippet_lines {
        assert!(
            line.chars().count() <= 4 + 3 + 100 + 3,
            "snippet line too long: {line}"
        );
    }
    // The info is at `/apis/0/id`, near the start of the line, so only its snippet starts there.
    let from_start: Vec<&&str> = snippet_lines
        .iter()
        .filter(|l| !l.starts_with("1 | ..."))
        .collect();
    assert_eq!(from_start.len(), 1, "{text}");
    assert!(
        from_start[0].starts_with("1 | {\"apis\":[{\"id\":\"images-api\""),
        "{text}"
    );
    assert!(text.contains("\"language\":\"en_US\""), "{text}");
}

#[test]
fn a_clean_file_says_so() {
    let text = imagegate_manifest::synthetic::manifest(3);
    let report = check_bytes("ok.json", text.as_bytes(), &CheckOptions::default());
    assert_eq!(
        render(Format::Text, std::slice::from_ref(&report)),
        "ok.json: no findings\n"
    );
    assert_eq!(render(Format::Github, &[report]), "");
}

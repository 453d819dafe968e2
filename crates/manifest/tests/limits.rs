//! Manifests with very many findings: the report keeps a bounded number and says how many it left out, and
//! "did you mean" searches stay cheap.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::disallowed_methods
)]

use std::process::Command;

use imagegate_manifest::{CheckOptions, FileReport, MAX_FINDINGS, Omitted, Rule, Severity, check_bytes};
use serde_json::{Value, json};

/// `{"skills": [{}, {}, ...]}` with `count` empty skills: seven missing keys and a missing `size_bytes`
/// each, and four missing top-level keys.
fn empty_skills(count: usize) -> String {
    format!("{{\"skills\":[{}]}}", vec!["{}"; count].join(","))
}

#[test]
fn twenty_thousand_empty_skills_give_the_cap_of_findings_and_count_the_rest() {
    let report = check_bytes(
        "registry.json",
        empty_skills(20_000).as_bytes(),
        &CheckOptions::default(),
    );
    assert_eq!(report.findings.len(), MAX_FINDINGS);
    // 4 + 7 * 20,000 errors and 20,000 warnings: the errors are kept first, earliest in the file first.
    assert_eq!(
        report.omitted,
        Omitted {
            errors: 4 + 7 * 20_000 - MAX_FINDINGS,
            warnings: 20_000,
            infos: 0,
        }
    );
    assert!(report.findings.iter().all(|f| f.rule == Rule::SchemaRequired));
    let last = report.findings.last().unwrap();
    assert_eq!(last.pointer, format!("/skills/{}", (MAX_FINDINGS - 4 - 1) / 7));
    assert!(report.fails(Severity::Error));
}

#[test]
fn findings_left_out_count_for_the_exit_code() {
    let mut report = check_bytes("registry.json", b"{}", &CheckOptions::default());
    report.findings.clear();
    assert!(!report.fails(Severity::Warning));
    report.omitted.warnings = 1;
    assert!(report.fails(Severity::Warning));
    assert!(!report.fails(Severity::Error));
    report.omitted = Omitted {
        errors: 1,
        ..Omitted::default()
    };
    assert!(report.fails(Severity::Error));
    report.omitted = Omitted {
        infos: 5,
        ..Omitted::default()
    };
    assert!(!report.fails(Severity::Warning));
}

/// Run `registry-check --format FORMAT` on `text`; the exit code and standard output.
fn run(format: &str, text: &str) -> (i32, String) {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("registry.json"), text).unwrap();
    let output = Command::new(env!("CARGO_BIN_EXE_registry-check"))
        .args(["--format", format, "registry.json"])
        .current_dir(dir.path())
        .output()
        .unwrap();
    (
        output.status.code().unwrap(),
        String::from_utf8(output.stdout).unwrap(),
    )
}

#[test]
fn every_output_format_says_how_many_findings_were_left_out() {
    let text = empty_skills(20_000);
    let errors = 4 + 7 * 20_000 - MAX_FINDINGS;
    let total = errors + 20_000;
    let sentence = format!("{total} more findings left out ({errors} errors, 20000 warnings, 0 infos)");

    let (code, out) = run("text", &text);
    assert_eq!(code, 1);
    assert!(
        out.contains(&format!("\nregistry.json: {sentence}")),
        "{}",
        &out[out.len().saturating_sub(600)..]
    );

    let (code, out) = run("json", &text);
    assert_eq!(code, 1);
    let json: Value = serde_json::from_str(&out).unwrap();
    let counts = json!({"errors": errors, "warnings": 20_000, "infos": 0});
    assert_eq!(json["summary"]["omitted"], counts);
    assert_eq!(json["summary"]["errors"], MAX_FINDINGS);
    assert_eq!(
        json["omitted"],
        json!([{"file": "registry.json", "errors": errors, "warnings": 20_000, "infos": 0}])
    );
    assert_eq!(json["findings"].as_array().unwrap().len(), MAX_FINDINGS);

    let (code, out) = run("sarif", &text);
    assert_eq!(code, 1);
    let sarif: Value = serde_json::from_str(&out).unwrap();
    let sarif_run = &sarif["runs"][0];
    assert_eq!(sarif_run["properties"]["omitted"], counts);
    let notification = &sarif_run["invocations"][0]["toolExecutionNotifications"][0];
    assert_eq!(notification["level"], "warning");
    assert!(
        notification["message"]["text"]
            .as_str()
            .unwrap()
            .contains(&sentence),
        "{notification}"
    );
    assert_eq!(sarif_run["results"].as_array().unwrap().len(), MAX_FINDINGS);

    let (code, out) = run("github", &text);
    assert_eq!(code, 1);
    assert!(
        out.lines().any(|l| l.starts_with(&format!(
            "::warning file=registry.json,title=registry-check::{sentence}"
        ))),
        "{}",
        &out[out.len().saturating_sub(600)..]
    );
}

#[test]
fn a_complete_report_says_nothing_was_left_out() {
    let (code, out) = run("text", &empty_skills(2));
    assert_eq!(code, 1);
    assert!(!out.contains("left out"), "{out}");
    let (_, out) = run("sarif", &empty_skills(2));
    let sarif: Value = serde_json::from_str(&out).unwrap();
    assert!(sarif["runs"][0].get("invocations").is_none());
    assert!(sarif["runs"][0].get("properties").is_none());
    let (_, out) = run("github", &empty_skills(2));
    assert!(!out.contains("left out"), "{out}");
}

/// A manifest with `count` API entries and one skill whose `api_docs` lists `count` ids that are not there,
/// each one edit away from one that is.
fn unresolved_api_docs(count: usize) -> FileReport {
    let apis: Vec<Value> = (0..count)
        .map(|i| {
            json!({"id": format!("api-{i:05}"), "title": "API", "product": "P", "language": "en",
                   "path": format!("apis/en/api-{i:05}.md")})
        })
        .collect();
    let api_docs: Vec<String> = (0..count).map(|i| format!("apx-{i:05}")).collect();
    let manifest = json!({
        "schema_version": "1",
        "generated_at": "2026-05-01T12:00:00Z",
        "repository": {"name": "skills", "git_url": "https://github.com/acme/skills.git",
            "raw_base_url": "https://raw.githubusercontent.com/acme/skills/main", "branch": "main"},
        "skills": [{"name": "pdf-tools", "version": "1.0.0", "title": "PDF tools",
            "description": "Fill PDF files.", "path": "skills/pdf-tools", "package": "packages/pdf-tools.zip",
            "sha256": "ab".repeat(32), "size_bytes": 12, "api_docs": api_docs}],
        "apis": apis,
    });
    check_bytes(
        "registry.json",
        &serde_json::to_vec(&manifest).unwrap(),
        &CheckOptions::default(),
    )
}

#[test]
fn twenty_thousand_unresolved_api_docs_are_all_reported_and_the_first_hundred_get_a_suggestion() {
    let report = unresolved_api_docs(20_000);
    let unresolved: Vec<_> = report
        .findings
        .iter()
        .filter(|f| f.rule == Rule::XrefApiDoc)
        .collect();
    // Every other listed finding would be an info (R-XREF-API-UNUSED), kept after the errors.
    assert_eq!(unresolved.len(), MAX_FINDINGS);
    assert_eq!(
        report.omitted,
        Omitted {
            errors: 20_000 - MAX_FINDINGS,
            warnings: 0,
            infos: 20_000,
        }
    );
    let suggested: Vec<&str> = unresolved
        .iter()
        .filter(|f| f.hint.starts_with("Did you mean"))
        .map(|f| f.pointer.as_str())
        .collect();
    let first: Vec<String> = (0..100).map(|i| format!("/skills/0/api_docs/{i}")).collect();
    assert_eq!(suggested, first);
    assert_eq!(unresolved[0].hint, "Did you mean \"api-00000\"?");
}

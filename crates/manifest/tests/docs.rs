//! docs/manifest.md lists every rule with its current severity and summary.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::disallowed_methods
)]

use imagegate_manifest::Rule;
use imagegate_manifest::model::Repository;

#[test]
fn the_rule_table_in_the_docs_matches_the_catalog() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/manifest.md");
    let docs = std::fs::read_to_string(path).unwrap();
    let rows: Vec<&str> = docs.lines().filter(|l| l.starts_with("| `R-")).collect();
    assert_eq!(rows.len(), Rule::ALL.len(), "one row per rule");
    for rule in Rule::ALL {
        let summary = rule.summary().replace('|', "\\|");
        let hint = rule.hint().replace('|', "\\|");
        let row = format!(
            "| `{}` | {} | {summary} | {hint} |",
            rule.id(),
            rule.severity().as_str()
        );
        assert!(
            rows.contains(&row.as_str()),
            "docs/manifest.md lacks or differs for:\n{row}"
        );
    }
}

#[test]
fn the_docs_describe_how_download_urls_trim_the_base() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/manifest.md");
    let docs = std::fs::read_to_string(path).unwrap();
    let repo = Repository {
        name: "skills".into(),
        git_url: "https://github.com/acme/skills.git".into(),
        raw_base_url: "https://raw.githubusercontent.com/acme/skills/main//".into(),
        branch: "main".into(),
    };
    // The code trims every trailing `/`, and the docs must say so (not "one").
    assert_eq!(
        repo.download_url("packages/pdf.zip"),
        "https://raw.githubusercontent.com/acme/skills/main/packages/pdf.zip"
    );
    assert!(
        docs.contains("Download URLs: trim every trailing `/` from `raw_base_url`"),
        "docs/manifest.md must describe the trimming as the code does it"
    );
}

//! docs/manifest.md lists every rule with its current severity and summary.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::disallowed_methods
)]

use imagegate_manifest::Rule;

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

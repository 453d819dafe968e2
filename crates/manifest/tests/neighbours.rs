//! The real neighbour-format files beside the checkout (`../shared/data/manifests`), when present:
//! the checker answers with findings, never a crash. Skipped when the folder is absent.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::disallowed_methods
)]

use std::path::PathBuf;

use imagegate_manifest::{CheckOptions, Rule, check_file};

fn folder() -> Option<PathBuf> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/data/manifests");
    dir.is_dir().then_some(dir)
}

#[test]
fn neighbour_formats_are_recognized_and_reported_with_locations() {
    let Some(dir) = folder() else {
        println!("skipped: no shared/data/manifests beside the checkout");
        return;
    };
    let mut checked = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        let report = check_file(&path, &CheckOptions::default()).unwrap();
        assert!(
            !report.parse_failed(),
            "{}: {:?}",
            path.display(),
            report.findings.first()
        );
        let rules: Vec<Rule> = report.findings.iter().map(|f| f.rule).collect();
        assert!(rules.contains(&Rule::FormatForeign), "{}", path.display());
        assert!(rules.contains(&Rule::SchemaRequired), "{}", path.display());
        assert!(
            report.findings.iter().all(|f| f.start.line >= 1),
            "{}",
            path.display()
        );
        let incomplete: Vec<&str> = report
            .findings
            .iter()
            .filter(|f| f.expected.is_none() || f.found.is_none())
            .map(|f| f.rule.id())
            .collect();
        assert!(incomplete.is_empty(), "{}: {incomplete:?}", path.display());
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        if name.starts_with("copyleftdev") {
            // sk1llz has real duplicate names.
            assert!(rules.contains(&Rule::SkillDupName));
        }
        checked += 1;
    }
    assert!(checked >= 5, "expected the five neighbour files, found {checked}");
}

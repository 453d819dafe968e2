//! Every rule fires on a fixture made to break it; the valid fixture yields nothing.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::disallowed_methods
)]

mod support;

use std::collections::BTreeSet;
use std::fs;

use imagegate_manifest::Rule;
use serde_json::json;
use support::{Checkout, rule_ids, skill_md, write_file};

type Breaker = fn(&mut Checkout);

/// `(rule id, how to break the valid checkout)`.
fn cases() -> Vec<(&'static str, Breaker)> {
    vec![
        ("R-JSON-SYNTAX", |c| {
            c.raw = Some(br#"{"schema_version": }"#.to_vec())
        }),
        ("R-JSON-BOM", |c| {
            c.raw = Some([b"\xEF\xBB\xBF".as_slice(), c.text().as_bytes()].concat())
        }),
        ("R-JSON-UTF8", |c| {
            let mut bytes = c.text().into_bytes();
            let at = c.text().find("Fill").unwrap();
            bytes[at] = 0xFF;
            c.raw = Some(bytes);
        }),
        ("R-JSON-COMMENT", |c| {
            c.raw = Some(c.text().replacen('{', "{ // catalog\n", 1).into_bytes())
        }),
        ("R-JSON-TRAILING-COMMA", |c| {
            let mut text = c.text();
            text.insert(text.rfind(']').unwrap() + 1, ',');
            c.raw = Some(text.into_bytes());
        }),
        ("R-JSON-DEPTH", |c| c.raw = Some(b"[".repeat(200))),
        ("R-JSON-DUP-KEY", |c| {
            c.raw = Some(
                c.text()
                    .replacen(
                        "\"schema_version\"",
                        "\"schema_version\": \"1\",\n  \"schema_version\"",
                        1,
                    )
                    .into_bytes(),
            )
        }),
        ("R-SCHEMA-REQUIRED", |c| drop(c.skill(0).remove("sha256"))),
        ("R-SCHEMA-TYPE", |c| {
            drop(c.skill(0).insert("tags".into(), json!("pdf")))
        }),
        ("R-SCHEMA-CONSTRAINT", |c| {
            drop(c.skill(0).insert("tags".into(), json!([1, 1])))
        }),
        ("R-FORMAT-FOREIGN", |c| {
            c.raw = Some(br#"{"name": "m", "plugins": []}"#.to_vec())
        }),
        ("R-TOP-SCHEMA-VERSION", |c| {
            c.manifest["schema_version"] = json!("2")
        }),
        ("R-UNKNOWN-KEY", |c| {
            drop(c.skill(0).insert("sha_256".into(), json!("x")))
        }),
        ("R-TOP-GENERATED-AT", |c| {
            c.manifest["generated_at"] = json!("2026-02-01 10:00:00")
        }),
        ("R-TOP-GENERATED-FUTURE", |c| {
            c.manifest["generated_at"] = json!("2999-01-01T00:00:00Z")
        }),
        ("R-REPO-GIT-URL", |c| {
            c.manifest["repository"]["git_url"] = json!("ftp://example.com/agent-skills.git")
        }),
        ("R-REPO-GIT-URL-HTTP", |c| {
            c.manifest["repository"]["git_url"] = json!("http://github.com/acme/agent-skills.git")
        }),
        ("R-REPO-RAW-BASE-URL", |c| {
            c.manifest["repository"]["raw_base_url"] =
                json!("https://raw.githubusercontent.com/acme/agent-skills/main?token=1")
        }),
        ("R-REPO-BRANCH", |c| {
            c.manifest["repository"]["branch"] = json!("release..1")
        }),
        ("R-REPO-BRANCH-URL", |c| {
            c.manifest["repository"]["branch"] = json!("develop")
        }),
        ("R-REPO-NAME", |c| {
            c.manifest["repository"]["name"] = json!("other-name")
        }),
        ("R-FIELD-BLANK", |c| {
            drop(c.skill(0).insert("title".into(), json!("   ")))
        }),
        ("R-SKILL-NAME", |c| {
            drop(c.skill(0).insert("name".into(), json!("PDF_Tools")))
        }),
        ("R-SKILL-DUP-NAME", |c| {
            drop(c.skill(1).insert("name".into(), json!("pdf-tools")))
        }),
        ("R-SKILL-FOLDER-NAME", |c| {
            drop(c.skill(0).insert("path".into(), json!("skills/pdf")))
        }),
        ("R-SKILL-VERSION", |c| {
            drop(c.skill(0).insert("version".into(), json!("v1.2")))
        }),
        ("R-SKILL-DESC-LONG", |c| {
            drop(c.skill(0).insert("description".into(), json!("x".repeat(1025))))
        }),
        ("R-SKILL-SHA256", |c| {
            let upper = c.skill(0)["sha256"].as_str().unwrap().to_uppercase();
            c.skill(0).insert("sha256".into(), json!(upper));
        }),
        ("R-SKILL-DUP-PACKAGE", |c| {
            drop(
                c.skill(1)
                    .insert("package".into(), json!("packages/pdf-tools.zip")),
            )
        }),
        ("R-SKILL-PACKAGE-EXT", |c| {
            drop(
                c.skill(0)
                    .insert("package".into(), json!("packages/pdf-tools.tar.gz")),
            )
        }),
        ("R-SKILL-DUP-PATH", |c| {
            drop(c.skill(1).insert("path".into(), json!("skills/pdf-tools")))
        }),
        ("R-SKILL-SIZE", |c| {
            c.skill(0).insert("size_bytes".into(), json!("@SIZE@"));
            c.replacements.push(("\"@SIZE@\"".into(), "1e3".into()));
        }),
        ("R-SKILL-SIZE-MISSING", |c| drop(c.skill(0).remove("size_bytes"))),
        ("R-SKILL-AGENT-UNKNOWN", |c| {
            drop(c.skill(0).insert("agents".into(), json!(["claude"])))
        }),
        ("R-SKILL-UPDATED-AT", |c| {
            drop(c.skill(0).insert("updated_at".into(), json!("yesterday")))
        }),
        ("R-SKILL-UPDATED-AFTER", |c| {
            drop(
                c.skill(0)
                    .insert("updated_at".into(), json!("2026-03-01T00:00:00+01:00")),
            )
        }),
        ("R-LIST-BLANK", |c| {
            drop(c.skill(0).insert("tags".into(), json!(["pdf", " "])))
        }),
        ("R-LIST-DUP", |c| {
            drop(c.skill(0).insert("tags".into(), json!(["pdf", "pdf"])))
        }),
        ("R-API-ID", |c| {
            drop(c.api(0).insert("id".into(), json!("Images_API")))
        }),
        ("R-API-DUP-ID", |c| {
            drop(c.api(1).insert("id".into(), json!("images-api")))
        }),
        ("R-API-LANGUAGE", |c| {
            drop(c.api(1).insert("language".into(), json!("zh_CN")))
        }),
        ("R-API-DUP-PATH", |c| {
            drop(c.api(1).insert("path".into(), json!("apis/en/images-api.md")))
        }),
        ("R-API-PATH-EXT", |c| {
            drop(c.api(0).insert("path".into(), json!("apis/en/images-api.txt")))
        }),
        ("R-API-SOURCE-URL", |c| {
            drop(
                c.api(0)
                    .insert("source_urls".into(), json!(["docs.example.com/images"])),
            )
        }),
        ("R-API-SOURCE-HTTP", |c| {
            drop(
                c.api(0)
                    .insert("source_urls".into(), json!(["http://docs.example.com/images"])),
            )
        }),
        ("R-API-SOURCE-DUP", |c| {
            drop(c.api(0).insert(
                "source_urls".into(),
                json!(["https://a.example/x", "https://a.example/x"]),
            ))
        }),
        ("R-XREF-API-DOC", |c| {
            drop(c.skill(0).insert("api_docs".into(), json!(["image-api"])))
        }),
        ("R-XREF-API-UNUSED", |c| drop(c.skill(1).remove("api_docs"))),
        ("R-PATH-ABSOLUTE", |c| {
            drop(c.api(0).insert("path".into(), json!("/apis/en/images-api.md")))
        }),
        ("R-PATH-BACKSLASH", |c| {
            drop(c.api(0).insert("path".into(), json!("apis\\en\\images-api.md")))
        }),
        ("R-PATH-PARENT", |c| {
            drop(
                c.api(0)
                    .insert("path".into(), json!("apis/../apis/en/images-api.md")),
            )
        }),
        ("R-PATH-DOT-SEGMENT", |c| {
            drop(c.api(0).insert("path".into(), json!("./apis/en/images-api.md")))
        }),
        ("R-PATH-NFC", |c| {
            drop(c.api(0).insert("path".into(), json!("apis/en/cafe\u{301}.md")))
        }),
        ("R-PATH-CONTROL", |c| {
            drop(c.api(0).insert("path".into(), json!("apis/en/images\u{0}api.md")))
        }),
        ("R-PATH-CASE", |c| {
            drop(c.api(1).insert("path".into(), json!("APIs/zh-CN/search-api.md")))
        }),
        ("R-ROOT-PATH-MISSING", |c| {
            fs::remove_dir_all(c.path("skills/web-search")).unwrap()
        }),
        ("R-ROOT-SKILLMD-MISSING", |c| {
            fs::remove_file(c.path("skills/web-search/SKILL.md")).unwrap()
        }),
        ("R-ROOT-FRONTMATTER", |c| {
            write_file(&c.path("skills/web-search/SKILL.md"), "# Web search\n")
        }),
        ("R-ROOT-NAME-MISMATCH", |c| {
            write_file(
                &c.path("skills/web-search/SKILL.md"),
                &skill_md("websearch", "Search the web and cite sources.", ""),
            );
        }),
        ("R-ROOT-DESC-MISMATCH", |c| {
            drop(c.skill(1).insert("description".into(), json!("Browse pages.")))
        }),
        ("R-ROOT-FRONTMATTER-KEY", |c| {
            let text = skill_md("web-search", "Search the web and cite sources.", "")
                .replace("license:", "version: 2\nlicense:");
            write_file(&c.path("skills/web-search/SKILL.md"), &text);
        }),
        ("R-ROOT-PACKAGE-MISSING", |c| {
            fs::remove_file(c.path("packages/web-search.zip")).unwrap()
        }),
        ("R-ROOT-SIZE-MISMATCH", |c| {
            let size = c.skill(0)["size_bytes"].as_u64().unwrap();
            c.skill(0).insert("size_bytes".into(), json!(size + 1));
        }),
        ("R-ROOT-SHA256-MISMATCH", |c| {
            drop(c.skill(0).insert("sha256".into(), json!("0".repeat(64))))
        }),
        ("R-ROOT-API-MISSING", |c| {
            fs::remove_file(c.path("apis/zh-CN/search-api.md")).unwrap()
        }),
        ("R-PKG-OPEN", |c| {
            write_file(&c.path("packages/web-search.zip"), "not a zip")
        }),
        ("R-PKG-UNSAFE-PATH", |c| {
            c.replace_package(
                "web-search",
                &[("../../evil.sh", Some("x")), ("web-search/SKILL.md", Some("x"))],
            );
        }),
        ("R-PKG-DUP-ENTRY", |c| {
            support::write_zip_renamed(
                &c.path("packages/web-search.zip"),
                &[
                    ("web-search/SKILL.md", Some("x")),
                    ("web-search/SKILL.mX", Some("y")),
                ],
                "web-search/SKILL.mX",
                "web-search/SKILL.md",
            )
        }),
        ("R-PKG-SYMLINK", |c| {
            c.replace_package(
                "web-search",
                &[("web-search/SKILL.md", Some("x")), ("web-search/link", None)],
            )
        }),
        ("R-PKG-LIMITS", |c| c.limits.max_unpacked_bytes = 10),
        ("R-PKG-NO-SKILLMD", |c| {
            c.replace_package("web-search", &[("web-search/README.md", Some("x"))])
        }),
        ("R-PKG-STALE", |c| {
            let text = skill_md(
                "web-search",
                "Search the web and cite sources.",
                "  tags: search\n  api_docs: search-api\n",
            );
            write_file(
                &c.path("skills/web-search/SKILL.md"),
                &format!("{text}\nA new step.\n"),
            );
        }),
        ("R-PKG-JUNK", |c| {
            c.replace_package(
                "web-search",
                &[
                    ("web-search/.DS_Store", Some("x")),
                    ("web-search/SKILL.md", Some("x")),
                ],
            )
        }),
        ("R-PKG-NOT-REPRODUCIBLE", |c| {
            c.replace_package(
                "web-search",
                &[("web-search/b.md", Some("x")), ("web-search/SKILL.md", Some("x"))],
            )
        }),
    ]
}

#[test]
fn the_valid_checkout_yields_no_findings() {
    let checkout = Checkout::new();
    let with_root = checkout.check();
    assert_eq!(
        rule_ids(&with_root),
        Vec::<&str>::new(),
        "{:#?}",
        with_root.findings
    );
    assert_eq!(rule_ids(&checkout.check_offline()), Vec::<&str>::new());
}

#[test]
fn every_rule_fires_on_its_broken_fixture() {
    let mut missed = Vec::new();
    for (rule, breaker) in cases() {
        let mut checkout = Checkout::new();
        breaker(&mut checkout);
        let report = checkout.check();
        if !rule_ids(&report).contains(&rule) {
            missed.push(format!("{rule}: got {:?}", rule_ids(&report)));
        }
        for finding in &report.findings {
            let start = finding.span.start.min(report.source.len());
            assert!(report.source.is_char_boundary(start), "{rule}: {finding:?}");
            // Recount line:column (characters) from the text; the fixtures use `\n` line endings only.
            let before = &report.source[..start];
            let line = before.matches('\n').count() + 1;
            let column = before.rsplit('\n').next().unwrap().chars().count() + 1;
            assert_eq!(
                (finding.start.line, finding.start.column),
                (line, column),
                "{rule}: {finding:?}"
            );
        }
    }
    assert!(
        missed.is_empty(),
        "rules that did not fire:\n{}",
        missed.join("\n")
    );
}

/// Spec §2: every finding carries the expected value and the value found.
#[test]
fn every_finding_says_what_was_expected_and_what_was_found() {
    let mut incomplete = Vec::new();
    for (rule, breaker) in cases() {
        let mut checkout = Checkout::new();
        breaker(&mut checkout);
        for report in [checkout.check(), checkout.check_offline()] {
            for f in &report.findings {
                if f.expected.as_deref().is_none_or(str::is_empty)
                    || f.found.as_deref().is_none_or(str::is_empty)
                {
                    incomplete.push(format!(
                        "{} (case {rule}): expected {:?}, found {:?}: {}",
                        f.rule.id(),
                        f.expected,
                        f.found,
                        f.message
                    ));
                }
            }
        }
    }
    incomplete.sort();
    incomplete.dedup();
    assert!(
        incomplete.is_empty(),
        "findings without expected or found:\n{}",
        incomplete.join("\n")
    );
}

#[test]
fn the_case_table_covers_the_whole_catalog() {
    let covered: BTreeSet<&str> = cases().iter().map(|(id, _)| *id).collect();
    let catalog: BTreeSet<&str> = Rule::ALL.iter().map(|r| r.id()).collect();
    assert_eq!(covered, catalog);
    assert_eq!(cases().len(), Rule::ALL.len(), "a rule is listed twice");
}

#[test]
fn parse_errors_are_the_only_finding_and_are_fatal() {
    for (rule, breaker) in cases()
        .into_iter()
        .filter(|(id, _)| id.starts_with("R-JSON-") && *id != "R-JSON-DUP-KEY")
    {
        let mut checkout = Checkout::new();
        breaker(&mut checkout);
        let report = checkout.check();
        assert_eq!(rule_ids(&report), [rule]);
        assert!(report.parse_failed());
    }
}

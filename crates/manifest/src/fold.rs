//! Schema findings folded into the semantic ones, so one problem gives one finding.

use crate::Severity;
use crate::finding::Sink;
use crate::parse::Node;
use crate::rules::{self, Rule};

/// Add the schema findings of `root` to `sink`, folded: a schema finding is left out when a semantic rule of
/// severity error already reported at its pointer or inside the value it points at, because that finding
/// says the same with a better hint (e.g. `uniqueItems` on `/skills/0/tags` and `R-LIST-DUP` on
/// `/skills/0/tags/1`).
///
/// A wrong type (`R-SCHEMA-TYPE`) is folded only into an error at its own pointer: the rules skip values of
/// the wrong type, except those that explain the type, such as `R-SKILL-SIZE` for `"size_bytes": 1.5`;
/// an error inside a value (a key of an object that should be an array) does not explain its type. Missing
/// keys (`R-SCHEMA-REQUIRED`) are never folded: no semantic rule reports them. Warnings and infos explain
/// nothing (folding into them would turn an error into a warning), nor does `R-JSON-DUP-KEY`, which is
/// about a key, not its value. The schema findings are folded before the sink sees them, so a folded
/// finding is neither listed nor counted as left out (past [`crate::MAX_FINDINGS`], a semantic error the
/// sink has already left out folds nothing, so the counts may include schema findings it would have folded).
pub(crate) fn add_schema_findings(root: &Node, sink: &mut Sink) {
    let mut reported: Vec<String> = sink
        .drafts
        .iter()
        .filter(|d| d.rule.severity() == Severity::Error && d.rule != Rule::JsonDupKey)
        .map(|d| d.pointer.clone())
        .collect();
    reported.sort_unstable();
    reported.dedup();
    let folded = |rule: Rule, pointer: &str| {
        let at = reported.partition_point(|p| p.as_str() < pointer);
        let mut rests = reported
            .get(at..)
            .unwrap_or_default()
            .iter()
            .map_while(|p| p.strip_prefix(pointer));
        match rule {
            Rule::SchemaRequired => false,
            Rule::SchemaType => rests.any(str::is_empty),
            _ => rests.any(|rest| rest.is_empty() || rest.starts_with('/')),
        }
    };
    rules::schema::check(root, sink, &folded);
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use crate::parse::{LineIndex, Span, parse};

    /// The rule ids left after folding the schema findings of `json` into one semantic finding.
    fn folded(json: &str, semantic: Rule, pointer: &str) -> Vec<&'static str> {
        let root = parse(json.as_bytes()).unwrap();
        let lines = LineIndex::new(json);
        let mut sink = Sink::new(json, &lines, false);
        sink.add(semantic, pointer, Span::new(0, 1), "semantic");
        add_schema_findings(&root, &mut sink);
        sink.drafts.iter().map(|d| d.rule.id()).collect()
    }

    const SCHEMA_VERSION_2: &str = r#"{"schema_version": "2", "generated_at": "2026-01-01T00:00:00Z",
        "repository": {"name": "r", "git_url": "https://h/o/r.git", "raw_base_url": "https://h/o/r/main",
                       "branch": "main"}, "skills": [], "apis": []}"#;

    #[test]
    fn an_error_at_the_pointer_or_inside_folds_a_constraint() {
        let ids = folded(SCHEMA_VERSION_2, Rule::TopSchemaVersion, "/schema_version");
        assert_eq!(ids, ["R-TOP-SCHEMA-VERSION"]);
        let tags = r#"{"skills": [{"tags": ["a", "a"]}]}"#;
        let ids = folded(tags, Rule::ListDup, "/skills/0/tags/1");
        assert!(!ids.contains(&"R-SCHEMA-CONSTRAINT"), "{ids:?}");
        let ids = folded(tags, Rule::ListDup, "/skills/0/tagsx");
        assert!(ids.contains(&"R-SCHEMA-CONSTRAINT"), "{ids:?}");
    }

    #[test]
    fn a_warning_or_a_duplicate_key_does_not_fold_a_constraint() {
        let ids = folded(SCHEMA_VERSION_2, Rule::PathDotSegment, "/schema_version");
        assert_eq!(ids, ["R-PATH-DOT-SEGMENT", "R-SCHEMA-CONSTRAINT"]);
        let ids = folded(SCHEMA_VERSION_2, Rule::JsonDupKey, "/schema_version");
        assert_eq!(ids, ["R-JSON-DUP-KEY", "R-SCHEMA-CONSTRAINT"]);
    }

    #[test]
    fn a_wrong_type_is_not_folded_into_an_error_inside_the_value() {
        let ids = folded(r#"{"skills": {"a": 1}}"#, Rule::FieldBlank, "/skills/a");
        assert!(ids.contains(&"R-SCHEMA-TYPE"), "{ids:?}");
        let ids = folded(r#"[{"a": 1}]"#, Rule::FieldBlank, "/0/a");
        assert_eq!(ids, ["R-FIELD-BLANK", "R-SCHEMA-TYPE"]);
    }

    #[test]
    fn a_wrong_type_is_folded_into_an_error_at_its_pointer() {
        let json = r#"{"skills": [{"size_bytes": 1.5}]}"#;
        let ids = folded(json, Rule::SkillSize, "/skills/0/size_bytes");
        assert!(!ids.contains(&"R-SCHEMA-TYPE"), "{ids:?}");
        let ids = folded(json, Rule::SkillSizeMissing, "/skills/0/size_bytes");
        assert!(ids.contains(&"R-SCHEMA-TYPE"), "a warning folds nothing: {ids:?}");
    }
}

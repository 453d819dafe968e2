//! SARIF 2.1.0 output (OASIS Static Analysis Results Interchange Format), the subset code-scanning
//! services read.

use serde::Serialize;

use super::{TOOL_NAME, TOOL_VERSION};
use crate::{FileReport, Rule, Severity};

#[derive(Serialize)]
struct Log<'a> {
    #[serde(rename = "$schema")]
    schema: &'static str,
    version: &'static str,
    runs: Vec<Run<'a>>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Run<'a> {
    tool: ToolEntry,
    column_kind: &'static str,
    results: Vec<SarifResult<'a>>,
}

#[derive(Serialize)]
struct ToolEntry {
    driver: Driver,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Driver {
    name: &'static str,
    version: &'static str,
    semantic_version: &'static str,
    rules: Vec<RuleDescriptor>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct RuleDescriptor {
    id: &'static str,
    short_description: Text,
    help: Text,
    default_configuration: Configuration,
}

#[derive(Serialize)]
struct Text {
    text: String,
}

#[derive(Serialize)]
struct Configuration {
    level: &'static str,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct SarifResult<'a> {
    rule_id: &'static str,
    rule_index: usize,
    level: &'static str,
    message: Text,
    locations: Vec<Location<'a>>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Location<'a> {
    physical_location: PhysicalLocation,
    logical_locations: Vec<LogicalLocation<'a>>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct PhysicalLocation {
    artifact_location: ArtifactLocation,
    region: Region,
}

#[derive(Serialize)]
struct ArtifactLocation {
    uri: String,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Region {
    start_line: usize,
    start_column: usize,
    end_line: usize,
    end_column: usize,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct LogicalLocation<'a> {
    fully_qualified_name: &'a str,
    kind: &'static str,
}

fn level(severity: Severity) -> &'static str {
    match severity {
        Severity::Error => "error",
        Severity::Warning => "warning",
        Severity::Info => "note",
    }
}

/// A relative URI reference for a file path: `/` separators, spaces and `%` escaped.
fn uri(path: &str) -> String {
    path.replace('\\', "/").replace('%', "%25").replace(' ', "%20")
}

pub(super) fn render(reports: &[FileReport]) -> String {
    let mut used: Vec<Rule> = reports
        .iter()
        .flat_map(|r| r.findings.iter().map(|f| f.rule))
        .collect();
    used.sort();
    used.dedup();
    let rules = used
        .iter()
        .map(|rule| RuleDescriptor {
            id: rule.id(),
            short_description: Text {
                text: rule.summary().to_owned(),
            },
            help: Text {
                text: rule.hint().to_owned(),
            },
            default_configuration: Configuration {
                level: level(rule.severity()),
            },
        })
        .collect();
    let results = reports
        .iter()
        .flat_map(|report| {
            let used = &used;
            report.findings.iter().map(move |f| {
                let mut text = f.message.clone();
                if let Some(expected) = &f.expected {
                    text.push_str(&format!("; expected: {expected}"));
                }
                if let Some(found) = &f.found {
                    text.push_str(&format!("; found: {found}"));
                }
                text.push_str(&format!(". {}", f.hint));
                SarifResult {
                    rule_id: f.rule.id(),
                    rule_index: used.binary_search(&f.rule).unwrap_or_default(),
                    level: level(f.severity),
                    message: Text { text },
                    locations: vec![Location {
                        physical_location: PhysicalLocation {
                            artifact_location: ArtifactLocation {
                                uri: uri(&report.file),
                            },
                            region: Region {
                                start_line: f.start.line,
                                start_column: f.start.column,
                                end_line: f.end.line,
                                end_column: f.end.column,
                            },
                        },
                        logical_locations: vec![LogicalLocation {
                            fully_qualified_name: &f.pointer,
                            kind: "member",
                        }],
                    }],
                }
            })
        })
        .collect();
    let log = Log {
        schema: "https://json.schemastore.org/sarif-2.1.0.json",
        version: "2.1.0",
        runs: vec![Run {
            tool: ToolEntry {
                driver: Driver {
                    name: TOOL_NAME,
                    version: TOOL_VERSION,
                    semantic_version: TOOL_VERSION,
                    rules,
                },
            },
            column_kind: "unicodeCodePoints",
            results,
        }],
    };
    let mut text = serde_json::to_string_pretty(&log).unwrap_or_default();
    text.push('\n');
    text
}

//! SARIF 2.1.0 output (OASIS Static Analysis Results Interchange Format), the subset code-scanning
//! services read.

use serde::Serialize;

use super::{TOOL_NAME, TOOL_VERSION, omitted_line};
use crate::{FileReport, Omitted, Rule, Severity};

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
    /// One notification per file whose findings were not all listed; absent when all were.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    invocations: Vec<Invocation>,
    /// `{"omitted": {"errors": .., "warnings": .., "infos": ..}}` when findings were left out.
    #[serde(skip_serializing_if = "Option::is_none")]
    properties: Option<RunProperties>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Invocation {
    execution_successful: bool,
    tool_execution_notifications: Vec<Notification>,
}

#[derive(Serialize)]
struct Notification {
    level: &'static str,
    message: Text,
    locations: Vec<FileLocation>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct FileLocation {
    physical_location: FilePhysicalLocation,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct FilePhysicalLocation {
    artifact_location: ArtifactLocation,
}

#[derive(Serialize)]
struct RunProperties {
    omitted: Omitted,
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
    let notifications: Vec<Notification> = reports
        .iter()
        .filter_map(|report| {
            Some(Notification {
                level: "warning",
                message: Text {
                    text: format!("{}: {}", report.file, omitted_line(report)?),
                },
                locations: vec![FileLocation {
                    physical_location: FilePhysicalLocation {
                        artifact_location: ArtifactLocation {
                            uri: uri(&report.file),
                        },
                    },
                }],
            })
        })
        .collect();
    let omitted = reports
        .iter()
        .fold(Omitted::default(), |sum, r| sum.plus(r.omitted));
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
            invocations: if notifications.is_empty() {
                Vec::new()
            } else {
                vec![Invocation {
                    execution_successful: true,
                    tool_execution_notifications: notifications,
                }]
            },
            properties: (!omitted.is_empty()).then_some(RunProperties { omitted }),
        }],
    };
    let mut text = serde_json::to_string_pretty(&log).unwrap_or_default();
    text.push('\n');
    text
}

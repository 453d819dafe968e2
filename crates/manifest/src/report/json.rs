//! The stable JSON report.

use serde::Serialize;

use super::{TOOL_NAME, TOOL_VERSION};
use crate::{FileReport, Omitted, Severity};

/// Version of the JSON report shape; bumped only on incompatible changes.
pub const JSON_FORMAT_VERSION: u32 = 1;

/// The whole JSON report.
#[derive(Debug, Serialize)]
pub struct JsonReport<'a> {
    /// [`JSON_FORMAT_VERSION`].
    pub format_version: u32,
    /// `{"name": "registry-check", "version": "..."}`.
    pub tool: Tool,
    /// Counts over all files.
    pub summary: JsonSummary,
    /// Every finding of every file, files in the order given, findings by location.
    pub findings: Vec<JsonFinding<'a>>,
    /// The files whose findings were not all listed (past [`crate::MAX_FINDINGS`] per file), with the
    /// counts of those left out; empty when every finding is listed.
    pub omitted: Vec<JsonOmitted<'a>>,
}

/// The findings of one file left out of the report.
#[derive(Debug, Serialize)]
pub struct JsonOmitted<'a> {
    /// The manifest file as given on the command line.
    pub file: &'a str,
    /// Counts of the findings left out, by severity.
    #[serde(flatten)]
    pub counts: Omitted,
}

/// The tool that wrote the report.
#[derive(Debug, Serialize)]
pub struct Tool {
    /// Always `registry-check`.
    pub name: &'static str,
    /// The crate version.
    pub version: &'static str,
}

/// Counts over all files.
#[derive(Debug, Serialize)]
pub struct JsonSummary {
    /// Files checked.
    pub files: usize,
    /// Findings with severity error.
    pub errors: usize,
    /// Findings with severity warning.
    pub warnings: usize,
    /// Findings with severity info.
    pub infos: usize,
    /// Findings left out of `findings`, by severity (not in the counts above).
    pub omitted: Omitted,
}

/// One finding.
#[derive(Debug, Serialize)]
pub struct JsonFinding<'a> {
    /// The manifest file as given on the command line.
    pub file: &'a str,
    /// Rule id, e.g. `R-SKILL-DUP-NAME`.
    pub rule: &'static str,
    /// `error`, `warning` or `info`.
    pub severity: Severity,
    /// JSON Pointer of the value; `""` is the document.
    pub pointer: &'a str,
    /// 1-based line of the start.
    pub line: usize,
    /// 1-based column (in characters) of the start.
    pub column: usize,
    /// 1-based line of the end.
    pub end_line: usize,
    /// 1-based column of the end (exclusive).
    pub end_column: usize,
    /// What is wrong.
    pub message: &'a str,
    /// What was expected, or null.
    pub expected: Option<&'a str>,
    /// What was found, or null.
    pub found: Option<&'a str>,
    /// How to fix it.
    pub hint: &'a str,
}

/// Build the report structure.
pub fn build(reports: &[FileReport]) -> JsonReport<'_> {
    let count = |s| reports.iter().map(|r| r.count(s)).sum();
    JsonReport {
        format_version: JSON_FORMAT_VERSION,
        tool: Tool {
            name: TOOL_NAME,
            version: TOOL_VERSION,
        },
        summary: JsonSummary {
            files: reports.len(),
            errors: count(Severity::Error),
            warnings: count(Severity::Warning),
            infos: count(Severity::Info),
            omitted: reports
                .iter()
                .fold(Omitted::default(), |sum, r| sum.plus(r.omitted)),
        },
        findings: reports
            .iter()
            .flat_map(|r| {
                r.findings.iter().map(|f| JsonFinding {
                    file: &r.file,
                    rule: f.rule.id(),
                    severity: f.severity,
                    pointer: &f.pointer,
                    line: f.start.line,
                    column: f.start.column,
                    end_line: f.end.line,
                    end_column: f.end.column,
                    message: &f.message,
                    expected: f.expected.as_deref(),
                    found: f.found.as_deref(),
                    hint: &f.hint,
                })
            })
            .collect(),
        omitted: reports
            .iter()
            .filter(|r| !r.omitted.is_empty())
            .map(|r| JsonOmitted {
                file: &r.file,
                counts: r.omitted,
            })
            .collect(),
    }
}

pub(super) fn render(reports: &[FileReport]) -> String {
    let mut text = serde_json::to_string_pretty(&build(reports)).unwrap_or_default();
    text.push('\n');
    text
}

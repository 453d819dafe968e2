//! Rendering reports: human text, JSON, SARIF 2.1.0 and GitHub workflow annotations.

mod github;
mod json;
mod sarif;
mod snippet;
mod text;

pub use json::{
    JSON_FORMAT_VERSION, JsonFinding, JsonOmitted, JsonReport, JsonSummary, Tool, build as json_report,
};

use crate::FileReport;

/// The output formats of `registry-check`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// rustc-style text with source snippets.
    Text,
    /// The stable JSON report (see docs/manifest.md).
    Json,
    /// SARIF 2.1.0, for code-scanning dashboards.
    Sarif,
    /// GitHub Actions workflow commands (`::error file=...::message`).
    Github,
}

/// Render the reports of all checked files in `format`. The text ends with a newline.
pub fn render(format: Format, reports: &[FileReport]) -> String {
    match format {
        Format::Text => text::render(reports),
        Format::Json => json::render(reports),
        Format::Sarif => sarif::render(reports),
        Format::Github => github::render(reports),
    }
}

/// The tool name in reports.
pub const TOOL_NAME: &str = "registry-check";

/// The tool version in reports.
pub const TOOL_VERSION: &str = env!("CARGO_PKG_VERSION");

/// The line that says how many findings of `report` were left out, without the file name, if any were:
/// `12 more findings were left out (10 errors, 2 warnings, 0 infos): ...`.
pub(crate) fn omitted_line(report: &FileReport) -> Option<String> {
    let omitted = report.omitted;
    if omitted.is_empty() {
        return None;
    }
    Some(format!(
        "{} left out ({}, {}, {}): the report lists at most {} findings per file, the most severe first",
        plural(omitted.total(), "more finding"),
        plural(omitted.errors, "error"),
        plural(omitted.warnings, "warning"),
        plural(omitted.infos, "info"),
        crate::MAX_FINDINGS,
    ))
}

/// `1 error` / `2 errors`.
pub(crate) fn plural(count: usize, word: &str) -> String {
    if count == 1 {
        format!("{count} {word}")
    } else {
        format!("{count} {word}s")
    }
}

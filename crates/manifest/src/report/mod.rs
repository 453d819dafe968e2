//! Rendering reports: human text, JSON, SARIF 2.1.0 and GitHub workflow annotations.

mod github;
mod json;
mod sarif;
mod snippet;
mod text;

pub use json::{JSON_FORMAT_VERSION, JsonFinding, JsonReport, JsonSummary, Tool, build as json_report};

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

/// `1 error` / `2 errors`.
pub(crate) fn plural(count: usize, word: &str) -> String {
    if count == 1 {
        format!("{count} {word}")
    } else {
        format!("{count} {word}s")
    }
}

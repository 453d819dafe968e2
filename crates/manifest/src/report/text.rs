//! rustc-style text output with source snippets.

use std::fmt::Write as _;

use super::{omitted_line, plural, snippet};
use crate::{FileReport, Finding, Severity};

pub(super) fn render(reports: &[FileReport]) -> String {
    let mut out = String::new();
    for report in reports {
        for finding in &report.findings {
            finding_block(&mut out, report, finding);
        }
        let _ = writeln!(out, "{}", summary(report));
        if let Some(line) = omitted_line(report) {
            let _ = writeln!(out, "{}: {line}", report.file);
        }
    }
    out
}

fn summary(report: &FileReport) -> String {
    if report.findings.is_empty() {
        return format!("{}: no findings", report.file);
    }
    format!(
        "{}: {}, {}, {}",
        report.file,
        plural(report.count(Severity::Error), "error"),
        plural(report.count(Severity::Warning), "warning"),
        plural(report.count(Severity::Info), "info"),
    )
}

fn finding_block(out: &mut String, report: &FileReport, f: &Finding) {
    let line_no = f.start.line.to_string();
    let pad = " ".repeat(line_no.len());
    let _ = writeln!(out, "{}[{}]: {}", f.severity.as_str(), f.rule.id(), f.message);
    let pointer = if f.pointer.is_empty() {
        "(document)"
    } else {
        f.pointer.as_str()
    };
    let _ = writeln!(
        out,
        "{pad}--> {}:{}:{} at {pointer}",
        report.file, f.start.line, f.start.column
    );
    let _ = writeln!(out, "{pad} |");
    let line = report.lines.line_text(&report.source, f.start.line);
    let line_start = report.lines.line_start(f.start.line).unwrap_or(0);
    let (shown, caret_at, caret_len) = snippet::window(line, f.span.start.saturating_sub(line_start), f);
    let _ = writeln!(out, "{line_no} | {shown}");
    let _ = writeln!(out, "{pad} | {}{}", " ".repeat(caret_at), "^".repeat(caret_len));
    if let Some(expected) = &f.expected {
        let _ = writeln!(out, "{pad} = expected: {expected}");
    }
    if let Some(found) = &f.found {
        let _ = writeln!(out, "{pad} = found: {found}");
    }
    let _ = writeln!(out, "{pad} = help: {}", f.hint);
    out.push('\n');
}

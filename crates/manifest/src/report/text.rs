//! rustc-style text output with source snippets.

use std::fmt::Write as _;

use super::plural;
use crate::{FileReport, Finding, Severity};

/// Longest stretch of a source line shown in a snippet, in characters.
const WINDOW: usize = 100;

pub(super) fn render(reports: &[FileReport]) -> String {
    let mut out = String::new();
    for report in reports {
        for finding in &report.findings {
            finding_block(&mut out, report, finding);
        }
        let _ = writeln!(out, "{}", summary(report));
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
    let (shown, caret_at, caret_len) = window(line, f);
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

/// The part of `line` to show, where the carets start in it, and how many.
fn window(line: &str, f: &Finding) -> (String, usize, usize) {
    let chars: Vec<char> = line.chars().map(|c| if c == '\t' { ' ' } else { c }).collect();
    let start = f.start.column.saturating_sub(1).min(chars.len());
    let end = if f.end.line == f.start.line {
        f.end.column.saturating_sub(1)
    } else {
        chars.len()
    };
    let end = end.clamp(start, chars.len());
    let (from, to) = if chars.len() <= WINDOW {
        (0, chars.len())
    } else {
        let from = start.saturating_sub(WINDOW / 3);
        (from, (from + WINDOW).min(chars.len()))
    };
    let mut shown = String::new();
    let mut offset = 0;
    if from > 0 {
        shown.push_str("...");
        offset = 3;
    }
    shown.extend(chars.get(from..to).unwrap_or_default());
    if to < chars.len() {
        shown.push_str("...");
    }
    let caret_at = offset + start.saturating_sub(from);
    let caret_len = end.min(to).saturating_sub(start).max(1);
    (shown, caret_at, caret_len)
}

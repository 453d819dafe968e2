//! Findings: what the checker reports, and where.

use crate::parse::{LineCol, LineIndex, Span};
use crate::rules::Rule;

/// How bad a finding is. Ordered: `Info < Warning < Error`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    /// Worth knowing; never fails a run.
    Info,
    /// Probably wrong; fails a run with `--fail-on warning`.
    Warning,
    /// Wrong; fails a run by default.
    Error,
}

impl Severity {
    /// `error`, `warning` or `info`.
    pub fn as_str(self) -> &'static str {
        match self {
            Severity::Info => "info",
            Severity::Warning => "warning",
            Severity::Error => "error",
        }
    }
}

/// One problem in one manifest.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finding {
    /// The rule that found it.
    pub rule: Rule,
    /// The rule's severity in this run ([`crate::Rule::severity_in`]: `--strict` raises some warnings).
    pub severity: Severity,
    /// JSON Pointer (RFC 6901) of the value concerned; `""` is the whole document.
    pub pointer: String,
    /// Byte span in the manifest.
    pub span: Span,
    /// Where the span starts.
    pub start: LineCol,
    /// Where the span ends (exclusive column).
    pub end: LineCol,
    /// What is wrong.
    pub message: String,
    /// What the rule expects, when it can be said briefly.
    pub expected: Option<String>,
    /// The value found, when it helps.
    pub found: Option<String>,
    /// How to fix it.
    pub hint: String,
}

impl Finding {
    /// Key that orders findings by location, then rule, then message.
    pub fn sort_key(&self) -> (usize, usize, &'static str, &str, &str) {
        (
            self.span.start,
            self.span.end,
            self.rule.id(),
            self.pointer.as_str(),
            self.message.as_str(),
        )
    }
}

/// A finding before its line and column are known.
#[derive(Debug, Clone)]
pub(crate) struct Draft {
    pub rule: Rule,
    pub pointer: String,
    pub span: Span,
    pub message: String,
    pub expected: Option<String>,
    pub found: Option<String>,
    pub hint: Option<String>,
}

impl Draft {
    /// Say what was expected.
    pub fn expected(&mut self, text: impl Into<String>) -> &mut Self {
        self.expected = Some(text.into());
        self
    }

    /// Say what was found.
    pub fn found(&mut self, text: impl Into<String>) -> &mut Self {
        self.found = Some(text.into());
        self
    }

    /// Replace the rule's general hint with a specific one.
    pub fn hint(&mut self, text: impl Into<String>) -> &mut Self {
        self.hint = Some(text.into());
        self
    }
}

/// Collects drafts while the rules run.
#[derive(Debug)]
pub(crate) struct Sink<'t> {
    text: &'t str,
    lines: &'t LineIndex,
    pub drafts: Vec<Draft>,
}

impl<'t> Sink<'t> {
    /// A sink for findings in `text`.
    pub fn new(text: &'t str, lines: &'t LineIndex) -> Self {
        Self {
            text,
            lines,
            drafts: Vec::new(),
        }
    }

    /// `line:column` of a byte offset, for messages that refer to another place.
    pub fn place(&self, offset: usize) -> String {
        let at = self.lines.locate(self.text, offset);
        format!("{}:{}", at.line, at.column)
    }

    /// Report `rule` at `pointer`/`span`.
    pub fn add(&mut self, rule: Rule, pointer: &str, span: Span, message: impl Into<String>) -> &mut Draft {
        self.drafts.push(Draft {
            rule,
            pointer: pointer.to_owned(),
            span,
            message: message.into(),
            expected: None,
            found: None,
            hint: None,
        });
        let last = self.drafts.len() - 1;
        &mut self.drafts[last]
    }

    /// Turn the drafts into sorted findings with line and column; `strict` gives each finding its
    /// severity under `--strict`.
    pub fn finish(self, strict: bool) -> Vec<Finding> {
        let (text, lines) = (self.text, self.lines);
        let mut findings: Vec<Finding> = self
            .drafts
            .into_iter()
            .map(|d| {
                let start = lines.locate(text, d.span.start);
                let end = lines.locate(text, d.span.end.max(d.span.start));
                Finding {
                    severity: d.rule.severity_in(strict),
                    hint: d.hint.unwrap_or_else(|| d.rule.hint().to_owned()),
                    rule: d.rule,
                    pointer: d.pointer,
                    span: d.span,
                    start,
                    end,
                    message: d.message,
                    expected: d.expected,
                    found: d.found,
                }
            })
            .collect();
        findings.sort_by(|a, b| a.sort_key().cmp(&b.sort_key()));
        findings.dedup_by(|a, b| a.sort_key() == b.sort_key());
        findings
    }
}

/// Quote a value for a message: JSON string syntax, shortened past 80 characters.
pub(crate) fn quote(text: &str) -> String {
    const MAX: usize = 80;
    if text.chars().count() <= MAX {
        return serde_json::Value::String(text.to_owned()).to_string();
    }
    let short: String = text.chars().take(MAX).collect();
    format!("{}...", serde_json::Value::String(short))
}

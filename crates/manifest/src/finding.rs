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
    /// The key [`Finding::sort_key`] will have.
    fn sort_key(&self) -> (usize, usize, &'static str, &str, &str) {
        (
            self.span.start,
            self.span.end,
            self.rule.id(),
            self.pointer.as_str(),
            self.message.as_str(),
        )
    }

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

/// The most findings one file's report lists. A file past it (e.g. `{"skills": [{}, {}, ...]}`, eight
/// findings per three bytes) would otherwise take gigabytes; the findings left out are counted in
/// [`Omitted`], and the most severe are the ones kept.
pub const MAX_FINDINGS: usize = 10_000;

/// How many findings of each severity a report left out past [`MAX_FINDINGS`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct Omitted {
    /// Findings with severity error left out.
    pub errors: usize,
    /// Findings with severity warning left out.
    pub warnings: usize,
    /// Findings with severity info left out.
    pub infos: usize,
}

impl Omitted {
    /// How many findings of `severity` were left out.
    pub fn count(&self, severity: Severity) -> usize {
        match severity {
            Severity::Error => self.errors,
            Severity::Warning => self.warnings,
            Severity::Info => self.infos,
        }
    }

    /// How many findings were left out in all.
    pub fn total(&self) -> usize {
        self.errors + self.warnings + self.infos
    }

    /// Whether nothing was left out.
    pub fn is_empty(&self) -> bool {
        self.total() == 0
    }

    /// The worst severity left out, if any.
    pub fn worst(&self) -> Option<Severity> {
        [Severity::Error, Severity::Warning, Severity::Info]
            .into_iter()
            .find(|s| self.count(*s) > 0)
    }

    /// Count one more finding of `severity`.
    fn add(&mut self, severity: Severity) {
        let count = match severity {
            Severity::Error => &mut self.errors,
            Severity::Warning => &mut self.warnings,
            Severity::Info => &mut self.infos,
        };
        *count += 1;
    }

    /// The sums of `self` and `other`.
    pub fn plus(self, other: Omitted) -> Omitted {
        Omitted {
            errors: self.errors + other.errors,
            warnings: self.warnings + other.warnings,
            infos: self.infos + other.infos,
        }
    }
}

/// Collects drafts while the rules run, at most [`MAX_FINDINGS`] of them once finished (and twice that
/// meanwhile): past that the most severe are kept, earlier ones in the file first, and the others are
/// only counted.
#[derive(Debug)]
pub(crate) struct Sink<'t> {
    text: &'t str,
    lines: &'t LineIndex,
    /// `--strict`: the severities that decide which drafts are kept and how the others are counted.
    strict: bool,
    /// How many findings are kept.
    cap: usize,
    pub drafts: Vec<Draft>,
    omitted: Omitted,
}

impl<'t> Sink<'t> {
    /// A sink for findings in `text`; `strict` gives each finding its severity under `--strict`.
    pub fn new(text: &'t str, lines: &'t LineIndex, strict: bool) -> Self {
        Self::with_cap(text, lines, strict, MAX_FINDINGS)
    }

    /// A sink that keeps at most `cap` findings.
    pub fn with_cap(text: &'t str, lines: &'t LineIndex, strict: bool, cap: usize) -> Self {
        Self {
            text,
            lines,
            strict,
            cap,
            drafts: Vec::new(),
            omitted: Omitted::default(),
        }
    }

    /// `line:column` of a byte offset, for messages that refer to another place.
    pub fn place(&self, offset: usize) -> String {
        let at = self.lines.locate(self.text, offset);
        format!("{}:{}", at.line, at.column)
    }

    /// Report `rule` at `pointer`/`span`.
    pub fn add(&mut self, rule: Rule, pointer: &str, span: Span, message: impl Into<String>) -> &mut Draft {
        if self.drafts.len() >= self.cap.saturating_mul(2).max(1) {
            self.shed();
        }
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

    /// Keep the `cap` most severe drafts, earlier ones in the file first among equals, and count the
    /// others as omitted. Drafts that repeat one kept (same place, rule and message) are dropped uncounted,
    /// as [`Sink::finish`] would drop them.
    fn shed(&mut self) {
        let strict = self.strict;
        let severity = |d: &Draft| d.rule.severity_in(strict);
        self.drafts.sort_by(|a, b| {
            severity(b)
                .cmp(&severity(a))
                .then_with(|| a.sort_key().cmp(&b.sort_key()))
        });
        self.drafts.dedup_by(|a, b| a.sort_key() == b.sort_key());
        if self.drafts.len() <= self.cap {
            return;
        }
        for dropped in self.drafts.drain(self.cap..) {
            self.omitted.add(dropped.rule.severity_in(strict));
        }
    }

    /// Turn the drafts into sorted findings with line and column, at most the sink's cap of them, and
    /// the counts of those left out.
    pub fn finish(mut self) -> (Vec<Finding>, Omitted) {
        self.shed();
        let (text, lines, strict) = (self.text, self.lines, self.strict);
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
        (findings, self.omitted)
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

#[cfg(test)]
mod tests {
    use super::*;

    /// The (rule, span start) of each finding a sink of `cap` keeps from `drafts`, and the counts it leaves out.
    fn kept(cap: usize, strict: bool, drafts: &[(Rule, usize)]) -> (Vec<(Rule, usize)>, Omitted) {
        let text = "x".repeat(100);
        let lines = LineIndex::new(&text);
        let mut sink = Sink::with_cap(&text, &lines, strict, cap);
        for (rule, at) in drafts {
            sink.add(*rule, "", Span::new(*at, at + 1), "m");
        }
        let (findings, omitted) = sink.finish();
        (findings.iter().map(|f| (f.rule, f.span.start)).collect(), omitted)
    }

    #[test]
    fn a_full_sink_keeps_the_most_severe_earliest_findings_and_counts_the_rest() {
        let drafts = [
            (Rule::XrefApiUnused, 1),
            (Rule::UnknownKey, 2),
            (Rule::SkillName, 9),
            (Rule::PathDotSegment, 3),
            (Rule::SkillName, 5),
            (Rule::SkillName, 7),
            (Rule::XrefApiUnused, 0),
        ];
        let (findings, omitted) = kept(2, false, &drafts);
        assert_eq!(findings, [(Rule::SkillName, 5), (Rule::SkillName, 7)]);
        let expected = Omitted {
            errors: 1,
            warnings: 2,
            infos: 2,
        };
        assert_eq!(omitted, expected);
        // Under --strict an unknown key is an error, kept and counted as one.
        let (findings, omitted) = kept(4, true, &drafts);
        assert_eq!(
            findings,
            [
                (Rule::UnknownKey, 2),
                (Rule::SkillName, 5),
                (Rule::SkillName, 7),
                (Rule::SkillName, 9)
            ]
        );
        let expected = Omitted {
            errors: 0,
            warnings: 1,
            infos: 2,
        };
        assert_eq!(omitted, expected);
        assert_eq!(expected.worst(), Some(Severity::Warning));
    }

    #[test]
    fn a_sink_sheds_while_the_rules_run_and_never_holds_more_than_twice_its_cap() {
        let text = "x".repeat(100);
        let lines = LineIndex::new(&text);
        let mut sink = Sink::with_cap(&text, &lines, false, 3);
        for at in 0..50 {
            sink.add(Rule::SkillName, "", Span::new(at, at + 1), "m");
            assert!(sink.drafts.len() <= 6);
        }
        let (findings, omitted) = sink.finish();
        let starts: Vec<usize> = findings.iter().map(|f| f.span.start).collect();
        assert_eq!(starts, [0, 1, 2]);
        assert_eq!(omitted.total(), 47);
    }

    #[test]
    fn repeats_are_dropped_not_counted() {
        let drafts = [(Rule::SkillName, 1), (Rule::SkillName, 1), (Rule::SkillName, 2)];
        let (findings, omitted) = kept(2, false, &drafts);
        assert_eq!(findings, [(Rule::SkillName, 1), (Rule::SkillName, 2)]);
        assert!(omitted.is_empty());
    }
}

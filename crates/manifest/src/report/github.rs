//! GitHub Actions workflow commands: `::error file=F,line=L,col=C,endLine=..,endColumn=..,title=RULE::message`.

use std::fmt::Write as _;

use super::{TOOL_NAME, omitted_line};
use crate::{FileReport, Severity};

pub(super) fn render(reports: &[FileReport]) -> String {
    let mut out = String::new();
    for report in reports {
        for f in &report.findings {
            let command = match f.severity {
                Severity::Error => "error",
                Severity::Warning => "warning",
                Severity::Info => "notice",
            };
            let mut message = f.message.clone();
            if let Some(expected) = &f.expected {
                let _ = write!(message, "\nexpected: {expected}");
            }
            if let Some(found) = &f.found {
                let _ = write!(message, "\nfound: {found}");
            }
            let _ = write!(message, "\nhelp: {}", f.hint);
            let _ = writeln!(
                out,
                "::{command} file={},line={},col={},endLine={},endColumn={},title={}::{}",
                property(&report.file),
                f.start.line,
                f.start.column,
                f.end.line,
                f.end.column,
                property(f.rule.id()),
                data(&message)
            );
        }
        if let Some(line) = omitted_line(report) {
            let _ = writeln!(
                out,
                "::warning file={},title={}::{}",
                property(&report.file),
                property(TOOL_NAME),
                data(&line)
            );
        }
    }
    out
}

/// Escape the message part of a workflow command.
fn data(text: &str) -> String {
    text.replace('%', "%25").replace('\r', "%0D").replace('\n', "%0A")
}

/// Escape a property value of a workflow command.
fn property(text: &str) -> String {
    data(text).replace(':', "%3A").replace(',', "%2C")
}

#[cfg(test)]
mod tests {
    #[test]
    fn escapes() {
        assert_eq!(super::data("50%\nnext"), "50%25%0Anext");
        assert_eq!(super::property("a:b,c"), "a%3Ab%2Cc");
    }
}

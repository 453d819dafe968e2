//! The stretch of a source line shown under a finding in text output.

use crate::Finding;

/// Longest stretch of a source line shown in a snippet, in characters.
const WINDOW: usize = 100;

/// The part of `line` to show, where the carets start in it, and how many. `at` is the byte offset of the
/// finding's start in `line`. A long line (a minified manifest) is shown as a window around the finding and
/// only that window is walked, so many findings on one long line cost time linear in their number.
pub(super) fn window(line: &str, at: usize, f: &Finding) -> (String, usize, usize) {
    if line.chars().nth(WINDOW).is_none() {
        return whole(line, f);
    }
    let mut at = at.min(line.len());
    while !line.is_char_boundary(at) {
        at -= 1;
    }
    let (mut from, mut back) = (at, 0);
    for (i, _) in line
        .get(..at)
        .unwrap_or_default()
        .char_indices()
        .rev()
        .take(WINDOW / 3)
    {
        (from, back) = (i, back + 1);
    }
    let rest = line.get(from..).unwrap_or_default();
    let mut shown = String::new();
    if from > 0 {
        shown.push_str("...");
    }
    let (mut count, mut to) = (0_usize, from);
    for c in rest.chars().take(WINDOW) {
        shown.push(if c == '\t' { ' ' } else { c });
        (count, to) = (count + 1, to + c.len_utf8());
    }
    if to < line.len() {
        shown.push_str("...");
    }
    let span = if f.end.line == f.start.line {
        f.end.column.saturating_sub(f.start.column)
    } else {
        usize::MAX
    };
    let caret_at = if from > 0 { 3 } else { 0 } + back;
    (shown, caret_at, span.min(count.saturating_sub(back)).max(1))
}

/// [`window`] for a line of at most [`WINDOW`] characters: all of it.
fn whole(line: &str, f: &Finding) -> (String, usize, usize) {
    let chars: Vec<char> = line.chars().map(|c| if c == '\t' { ' ' } else { c }).collect();
    let start = f.start.column.saturating_sub(1).min(chars.len());
    let end = if f.end.line == f.start.line {
        f.end.column.saturating_sub(1)
    } else {
        chars.len()
    };
    let end = end.clamp(start, chars.len());
    (
        chars.into_iter().collect(),
        start,
        end.saturating_sub(start).max(1),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::parse::{LineCol, Span};
    use crate::rules::Rule;

    /// The window as computed before long lines were walked around the finding only: all characters of
    /// the line first.
    fn reference(line: &str, f: &Finding) -> (String, usize, usize) {
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
        (
            shown,
            offset + start.saturating_sub(from),
            end.min(to).saturating_sub(start).max(1),
        )
    }

    fn finding(column: usize, end_line: usize, end_column: usize) -> Finding {
        Finding {
            rule: Rule::JsonDupKey,
            severity: Rule::JsonDupKey.severity(),
            pointer: String::new(),
            span: Span::default(),
            start: LineCol { line: 1, column },
            end: LineCol {
                line: end_line,
                column: end_column,
            },
            message: String::new(),
            expected: None,
            found: None,
            hint: String::new(),
        }
    }

    #[test]
    fn windows_match_the_whole_line_computation() {
        for line in [
            "a\u{e9}\t\u{4e2d}\u{1F600}\"x\": 1, ".repeat(40),
            "ab".repeat(50),
            "ab".repeat(50) + "c",
            "short \u{e9}".to_owned(),
        ] {
            let mut at = 0;
            for (column, c) in (1..).zip(line.chars().chain(std::iter::once(' '))) {
                for (end_line, width) in [(1, 0), (1, 1), (1, 5), (1, 300), (2, 1)] {
                    let f = finding(column, end_line, column + width);
                    assert_eq!(
                        window(&line, at, &f),
                        reference(&line, &f),
                        "{line:?} column {column}"
                    );
                }
                at += c.len_utf8();
            }
        }
    }
}

//! Path rules for `skills[].path`, `skills[].package` and `apis[].path`.

use std::collections::HashMap;

use unicode_normalization::{UnicodeNormalization, is_nfc};

use super::text::has_drive_letter;
use super::{Doc, Field, Rule};
use crate::finding::{Sink, quote};

/// The path fields of a manifest, in document order.
pub(crate) fn path_fields<'a, 'p>(doc: &'p Doc<'a>) -> Vec<Field<'a, 'p>> {
    let mut fields = Vec::new();
    for entry in &doc.skills {
        fields.extend(
            ["path", "package"]
                .into_iter()
                .filter_map(|key| entry.obj().str(key)),
        );
    }
    fields.extend(doc.apis.iter().filter_map(|entry| entry.obj().str("path")));
    fields
}

/// Why `path` is not a safe relative path, as the rule and a reason; the most serious problem only.
/// An empty path is `R-FIELD-BLANK` (an error: it names no file).
pub fn path_problem(path: &str) -> Option<(Rule, String)> {
    if path.is_empty() {
        return Some((Rule::FieldBlank, "the path is empty".to_owned()));
    }
    let drive = has_drive_letter(path);
    // `file:x.zip` and `data:...` as well as `https://...`: a scheme is letters, digits, `+`, `-`
    // and `.` before the first `:` of the first segment (`:` is no file name character on Windows).
    let first_segment = path.split('/').next().unwrap_or_default();
    let scheme = !drive
        && first_segment.split_once(':').is_some_and(|(s, _)| {
            s.starts_with(|c: char| c.is_ascii_alphabetic())
                && s.chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'))
        });
    if path.starts_with('/') || path.starts_with('\\') || drive || scheme {
        let what = if scheme {
            "it is a URL"
        } else if drive {
            "it starts with a drive letter"
        } else {
            "it starts at the file system root"
        };
        return Some((Rule::PathAbsolute, format!("the path is absolute: {what}")));
    }
    if path.contains('\\') {
        return Some((
            Rule::PathBackslash,
            "the path uses `\\` as a separator".to_owned(),
        ));
    }
    let segments: Vec<&str> = path.split('/').collect();
    if segments.contains(&"..") {
        return Some((
            Rule::PathParent,
            "the path has a `..` segment and may leave the repository".to_owned(),
        ));
    }
    if !is_nfc(path) {
        return Some((Rule::PathNfc, "the path is not in Unicode NFC form".to_owned()));
    }
    if segments.iter().any(|s| s.is_empty() || *s == ".") {
        return Some((
            Rule::PathDotSegment,
            "the path has an empty or `.` segment".to_owned(),
        ));
    }
    None
}

/// The cleaned form of a path for a hint: `/` separators, no empty or `.` segments, NFC.
fn cleaned(path: &str) -> String {
    let nfc: String = path.nfc().collect();
    nfc.replace('\\', "/")
        .split('/')
        .filter(|s| !s.is_empty() && *s != ".")
        .collect::<Vec<_>>()
        .join("/")
}

pub(crate) fn check(doc: &Doc<'_>, sink: &mut Sink) {
    let fields = path_fields(doc);
    let mut seen = SeenPaths::default();
    for field in &fields {
        if let Some((rule, message)) = path_problem(field.text) {
            let draft = sink.add(rule, &field.ptr(), field.span(), message);
            draft
                .expected("a relative path with `/` separators, e.g. skills/pdf-tools")
                .found(quote(field.text));
            if matches!(rule, Rule::PathBackslash | Rule::PathNfc | Rule::PathDotSegment) {
                draft.hint(format!("Write {}.", quote(&cleaned(field.text))));
            } else if rule == Rule::FieldBlank {
                draft.hint("Write the path relative to the repository root, e.g. skills/pdf-tools.");
            }
            if rule.severity() == crate::Severity::Error {
                continue;
            }
        }
        case_collision(field, &mut seen, sink);
    }
}

/// Every folder and file named by the paths seen so far, as a tree of segments keyed by their
/// lowercase form under their parent, each with its first spelling: a path is compared with all
/// earlier ones in time and memory linear in its length (comparing whole prefixes would take the
/// square of it, gigabytes for one long path).
#[derive(Default)]
struct SeenPaths<'a, 'p> {
    /// (parent node, lowercase segment) -> node.
    nodes: HashMap<(usize, String), SeenNode<'a, 'p>>,
}

/// A folder or file in [`SeenPaths`]: its id, its first spelling and the path field that named it first.
struct SeenNode<'a, 'p> {
    id: usize,
    spelling: String,
    first: Field<'a, 'p>,
}

/// `R-PATH-CASE`: compare the path and each of its parent folders with all earlier ones, ignoring
/// case (after the cleaning a hint would suggest: NFC, no empty or `.` segments).
fn case_collision<'a, 'p>(field: &Field<'a, 'p>, seen: &mut SeenPaths<'a, 'p>, sink: &mut Sink) {
    let path = cleaned(field.text);
    let segments: Vec<&str> = path.split('/').collect();
    let mut parent = 0;
    for (depth, segment) in segments.iter().enumerate() {
        let next_id = seen.nodes.len() + 1;
        let node = seen
            .nodes
            .entry((parent, segment.to_lowercase()))
            .or_insert_with(|| SeenNode {
                id: next_id,
                spelling: (*segment).to_owned(),
                first: *field,
            });
        if node.spelling != *segment {
            let here = segments.get(..=depth).unwrap_or_default().join("/");
            let first_path = cleaned(node.first.text);
            let exact = first_path
                .split('/')
                .take(depth + 1)
                .collect::<Vec<_>>()
                .join("/");
            let (first_ptr, place) = (node.first.ptr(), sink.place(node.first.span().start));
            sink.add(
                Rule::PathCase,
                &field.ptr(),
                field.span(),
                format!("`{here}` differs only in letter case from `{exact}` ({first_ptr}, {place})"),
            )
            .expected(format!("`{exact}`, or a name that differs in more than case"))
            .found(quote(field.text));
            return;
        }
        parent = node.id;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rule(path: &str) -> Option<Rule> {
        path_problem(path).map(|(r, _)| r)
    }

    #[test]
    fn path_problems() {
        assert_eq!(rule("skills/pdf"), None);
        assert_eq!(rule(""), Some(Rule::FieldBlank));
        assert_eq!(rule("packages/pdf.zip"), None);
        assert_eq!(rule("/skills/pdf"), Some(Rule::PathAbsolute));
        assert_eq!(rule("C:/skills"), Some(Rule::PathAbsolute));
        assert_eq!(rule("https://x/y"), Some(Rule::PathAbsolute));
        assert_eq!(rule("file:packages/pdf.zip"), Some(Rule::PathAbsolute));
        assert_eq!(rule("data:x.zip"), Some(Rule::PathAbsolute));
        assert_eq!(rule("packages/v1:pdf.zip"), None);
        assert_eq!(rule("skills\\pdf"), Some(Rule::PathBackslash));
        assert_eq!(rule("skills/../x"), Some(Rule::PathParent));
        assert_eq!(rule("skills/cafe\u{301}"), Some(Rule::PathNfc));
        assert_eq!(rule("skills//pdf"), Some(Rule::PathDotSegment));
        assert_eq!(rule("./skills/pdf"), Some(Rule::PathDotSegment));
        assert_eq!(rule("skills/pdf/"), Some(Rule::PathDotSegment));
        assert_eq!(cleaned("./skills//pdf/"), "skills/pdf");
    }
}

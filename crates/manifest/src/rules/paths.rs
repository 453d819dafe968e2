//! Path rules for `skills[].path`, `skills[].package` and `apis[].path`.

use std::borrow::Cow;
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

/// Every rule `path` breaks as a safe relative path, each with a reason, most serious first.
/// An empty or whitespace-only path is `R-FIELD-BLANK` only (an error: it names no file).
pub fn path_problems(path: &str) -> Vec<(Rule, String)> {
    if path.is_empty() {
        return vec![(Rule::FieldBlank, "the path is empty".to_owned())];
    }
    if path.trim().is_empty() {
        return vec![(Rule::FieldBlank, "the path is only whitespace".to_owned())];
    }
    let mut problems = Vec::new();
    let (absolute, rest) = absolute_prefix(path);
    if let Some(what) = absolute {
        problems.push((Rule::PathAbsolute, format!("the path is absolute: {what}")));
    }
    if path.contains('\\') {
        problems.push((
            Rule::PathBackslash,
            "the path uses `\\` as a separator".to_owned(),
        ));
    }
    // Segments after any absolute prefix, split at `\` too: Windows reads `a\..\b` as leaving `a`.
    let segments: Vec<&str> = rest.split(['/', '\\']).collect();
    if segments.contains(&"..") {
        problems.push((
            Rule::PathParent,
            "the path has a `..` segment and may leave the repository".to_owned(),
        ));
    }
    // General category Cc: NUL ends a C string early, newlines and escapes garble logs and terminals.
    if let Some(control) = path.chars().find(|c| c.is_control()) {
        problems.push((
            Rule::PathControl,
            format!(
                "the path contains the control character U+{:04X}",
                u32::from(control)
            ),
        ));
    }
    if !is_nfc(path) {
        problems.push((Rule::PathNfc, "the path is not in Unicode NFC form".to_owned()));
    }
    if !rest.is_empty() && segments.iter().any(|s| s.is_empty() || *s == ".") {
        problems.push((
            Rule::PathDotSegment,
            "the path has an empty or `.` segment".to_owned(),
        ));
    }
    problems
}

/// The most serious problem of `path` that is an error, if any: the path cannot name a file in the checkout.
pub(crate) fn path_error(path: &str) -> Option<(Rule, String)> {
    path_problems(path)
        .into_iter()
        .find(|(rule, _)| rule.severity() == crate::Severity::Error)
}

/// Why `path` is absolute, if it is, and the rest of the path after the absolute prefix (the scheme,
/// drive letter and leading separators).
fn absolute_prefix(path: &str) -> (Option<&'static str>, &str) {
    let separators: &[char] = &['/', '\\'];
    if has_drive_letter(path) {
        let rest = path.get(2..).unwrap_or_default();
        return (
            Some("it starts with a drive letter"),
            rest.trim_start_matches(separators),
        );
    }
    // `file:x.zip` and `data:...` as well as `https://...`: a scheme is letters, digits, `+`, `-`
    // and `.` before the first `:` of the first segment (`:` is no file name character on Windows).
    let first_segment = path.split('/').next().unwrap_or_default();
    if let Some((scheme, _)) = first_segment.split_once(':')
        && scheme.starts_with(|c: char| c.is_ascii_alphabetic())
        && scheme
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'))
    {
        let rest = path.get(scheme.len() + 1..).unwrap_or_default();
        return (Some("it is a URL"), rest.trim_start_matches(separators));
    }
    if path.starts_with(separators) {
        return (
            Some("it starts at the file system root"),
            path.trim_start_matches(separators),
        );
    }
    (None, path)
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

/// `path` as two paths naming the same file are compared: cleaned ([`cleaned`]) when it has no error of
/// the path rules, as written otherwise (an unusable path names no file to compare).
pub(crate) fn comparable(path: &str) -> Cow<'_, str> {
    if path_error(path).is_some() {
        return Cow::Borrowed(path);
    }
    let clean = cleaned(path);
    if clean == path {
        Cow::Borrowed(path)
    } else {
        Cow::Owned(clean)
    }
}

pub(crate) fn check(doc: &Doc<'_>, sink: &mut Sink) {
    let fields = path_fields(doc);
    let mut seen = SeenPaths::default();
    for field in &fields {
        let problems = path_problems(field.text);
        // Suggest the cleaned path only when it is itself a safe path.
        let clean = (!problems.is_empty())
            .then(|| cleaned(field.text))
            .filter(|clean| !clean.is_empty() && path_problems(clean).is_empty());
        let mut unusable = false;
        for (rule, message) in problems {
            let draft = sink.add(rule, &field.ptr(), field.span(), message);
            draft
                .expected("a relative path with `/` separators, e.g. skills/pdf-tools")
                .found(quote(field.text));
            if let Some(clean) = &clean
                && matches!(rule, Rule::PathBackslash | Rule::PathNfc | Rule::PathDotSegment)
            {
                draft.hint(format!("Write {}.", quote(clean)));
            } else if rule == Rule::FieldBlank {
                draft.hint("Write the path relative to the repository root, e.g. skills/pdf-tools.");
            }
            unusable |= rule.severity() == crate::Severity::Error;
        }
        if !unusable {
            case_collision(field, &mut seen, sink);
        }
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

    fn rules(path: &str) -> Vec<Rule> {
        path_problems(path).into_iter().map(|(r, _)| r).collect()
    }

    #[test]
    fn path_problems_one_rule() {
        let none: Vec<Rule> = Vec::new();
        assert_eq!(rules("skills/pdf"), none);
        assert_eq!(rules(""), [Rule::FieldBlank]);
        assert_eq!(rules("   "), [Rule::FieldBlank]);
        assert_eq!(rules("\t\n"), [Rule::FieldBlank]);
        assert_eq!(rules("apis/en/a\u{0}.md"), [Rule::PathControl]);
        assert_eq!(rules("skills/pdf\u{7f}"), [Rule::PathControl]);
        assert_eq!(rules(" skills/pdf "), none);
        assert_eq!(rules("packages/pdf.zip"), none);
        assert_eq!(rules("/skills/pdf"), [Rule::PathAbsolute]);
        assert_eq!(rules("C:/skills"), [Rule::PathAbsolute]);
        assert_eq!(rules("https://x/y"), [Rule::PathAbsolute]);
        assert_eq!(rules("file:packages/pdf.zip"), [Rule::PathAbsolute]);
        assert_eq!(rules("data:x.zip"), [Rule::PathAbsolute]);
        assert_eq!(rules("packages/v1:pdf.zip"), none);
        assert_eq!(rules("skills\\pdf"), [Rule::PathBackslash]);
        assert_eq!(rules("skills/../x"), [Rule::PathParent]);
        assert_eq!(rules("skills/cafe\u{301}"), [Rule::PathNfc]);
        assert_eq!(rules("skills//pdf"), [Rule::PathDotSegment]);
        assert_eq!(rules("./skills/pdf"), [Rule::PathDotSegment]);
        assert_eq!(rules("skills/pdf/"), [Rule::PathDotSegment]);
        assert_eq!(cleaned("./skills//pdf/"), "skills/pdf");
    }

    #[test]
    fn usable_paths_compare_cleaned_and_unusable_ones_as_written() {
        assert_eq!(comparable("./packages/a.zip"), "packages/a.zip");
        assert_eq!(comparable("apis/en//a.md"), "apis/en/a.md");
        assert_eq!(comparable("skills/a/"), "skills/a");
        assert!(matches!(comparable("skills/a"), Cow::Borrowed("skills/a")));
        assert_eq!(comparable("./a/../b/"), "./a/../b/");
        assert_eq!(comparable("   "), "   ");
    }

    #[test]
    fn path_problems_every_rule_a_path_breaks() {
        assert_eq!(
            rules("/a/../b\\c"),
            [Rule::PathAbsolute, Rule::PathBackslash, Rule::PathParent]
        );
        assert_eq!(rules("C:\\skills"), [Rule::PathAbsolute, Rule::PathBackslash]);
        assert_eq!(rules("skills\\..\\x"), [Rule::PathBackslash, Rule::PathParent]);
        assert_eq!(
            rules("./a/../cafe\u{301}/"),
            [Rule::PathParent, Rule::PathNfc, Rule::PathDotSegment]
        );
        assert_eq!(rules("https://x/../y"), [Rule::PathAbsolute, Rule::PathParent]);
        assert_eq!(path_error("./a/../b").map(|(r, _)| r), Some(Rule::PathParent));
        assert_eq!(path_error("./a/b"), None);
        assert_eq!(
            rules("/a/../b\u{0}/"),
            [
                Rule::PathAbsolute,
                Rule::PathParent,
                Rule::PathControl,
                Rule::PathDotSegment
            ]
        );
    }
}

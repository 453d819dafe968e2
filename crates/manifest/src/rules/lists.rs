//! Shared checks for text fields and string lists.

use std::collections::HashMap;

use chrono::{DateTime, FixedOffset};

use super::text::{rfc3339, slug_problem, suggest_slug};
use super::{Field, Obj, Rule};
use crate::finding::{Sink, quote};

/// `R-FIELD-BLANK` when a required text field is empty or whitespace.
pub(crate) fn blank(field: &Field<'_, '_>, sink: &mut Sink) -> bool {
    if !field.text.trim().is_empty() {
        return false;
    }
    sink.add(
        Rule::FieldBlank,
        &field.ptr(),
        field.span(),
        "the value is empty or only whitespace",
    )
    .expected("non-empty text")
    .found(quote(field.text));
    true
}

/// Report `rule` when `field` is not a slug (agentskills name rules); suggest one. Returns whether it is one.
pub(crate) fn slug(rule: Rule, field: &Field<'_, '_>, what: &str, sink: &mut Sink) -> bool {
    let Some(why) = slug_problem(field.text) else {
        return true;
    };
    let draft = sink
        .add(
            rule,
            &field.ptr(),
            field.span(),
            format!("{what} {} is not valid: {why}", quote(field.text)),
        )
        .expected("1-64 of a-z, 0-9 and single inner hyphens")
        .found(quote(field.text));
    let suggestion = suggest_slug(field.text);
    if !suggestion.is_empty() {
        draft.hint(format!("Use `{suggestion}`."));
    }
    false
}

/// Check `field` as an RFC 3339 timestamp with offset under `rule`; the time when it is one.
pub(crate) fn timestamp(rule: Rule, field: &Field<'_, '_>, sink: &mut Sink) -> Option<DateTime<FixedOffset>> {
    rfc3339(field.text)
        .map_err(|why| {
            sink.add(
                rule,
                &field.ptr(),
                field.span(),
                format!("{} is not RFC 3339: {why}", field.key),
            )
            .expected("RFC 3339 with offset, e.g. 2026-05-01T12:00:00Z")
            .found(quote(field.text));
        })
        .ok()
}

/// Check the string list `key` of `obj`: no blank items (`R-LIST-BLANK`), no repeats (`dup_rule`).
/// Returns the items that are not blank.
pub(crate) fn string_list<'a, 'p>(
    obj: Obj<'a, 'p>,
    key: &'static str,
    dup_rule: Rule,
    sink: &mut Sink,
) -> Vec<Field<'a, 'p>> {
    let items = obj.strings(key);
    let mut seen: HashMap<&str, Field<'a, 'p>> = HashMap::new();
    let mut kept = Vec::with_capacity(items.len());
    for item in items {
        if item.text.trim().is_empty() {
            sink.add(
                Rule::ListBlank,
                &item.ptr(),
                item.span(),
                format!("`{key}` has an empty item"),
            )
            .expected("non-empty text")
            .found(quote(item.text));
            continue;
        }
        if let Some(first) = seen.get(item.text) {
            let first_ptr = first.ptr();
            sink.add(
                dup_rule,
                &item.ptr(),
                item.span(),
                format!("`{key}` repeats {}", quote(item.text)),
            )
            .expected(format!("an item no other item of `{key}` repeats"))
            .found(format!("also at {first_ptr}"));
            continue;
        }
        seen.insert(item.text, item);
        kept.push(item);
    }
    kept
}

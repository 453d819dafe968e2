//! Shared checks for text fields and string lists.

use std::collections::HashMap;

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
            .found(format!("also at {first_ptr}"));
            continue;
        }
        seen.insert(item.text, item);
        kept.push(item);
    }
    kept
}

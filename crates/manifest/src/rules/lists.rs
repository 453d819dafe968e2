//! Shared checks for text fields and string lists.

use std::collections::HashMap;

use super::{Field, Obj, Rule};
use crate::finding::{Sink, quote};

/// `R-FIELD-BLANK` when a required text field is empty or whitespace.
pub(crate) fn blank(field: &Field<'_>, sink: &mut Sink) -> bool {
    if !field.text.trim().is_empty() {
        return false;
    }
    sink.add(Rule::FieldBlank, &field.ptr, field.span(), "the value is empty or only whitespace")
        .expected("non-empty text")
        .found(quote(field.text));
    true
}

/// Check the string list `key` of `obj`: no blank items (`R-LIST-BLANK`), no repeats (`dup_rule`).
/// Returns the items that are not blank.
pub(crate) fn string_list<'a>(obj: Obj<'a, '_>, key: &str, dup_rule: Rule, sink: &mut Sink) -> Vec<Field<'a>> {
    let items = obj.strings(key);
    let mut seen: HashMap<&str, usize> = HashMap::new();
    let mut kept = Vec::with_capacity(items.len());
    for item in items {
        if item.text.trim().is_empty() {
            sink.add(Rule::ListBlank, &item.ptr, item.span(), format!("`{key}` has an empty item"))
                .expected("non-empty text")
                .found(quote(item.text));
            continue;
        }
        if let Some(&first) = seen.get(item.text) {
            sink.add(dup_rule, &item.ptr, item.span(), format!("`{key}` repeats {}", quote(item.text)))
                .found(format!("also item {first} of this list"));
            continue;
        }
        let index = item.ptr.rsplit('/').next().and_then(|i| i.parse().ok()).unwrap_or(0);
        seen.insert(item.text, index);
        kept.push(item);
    }
    kept
}

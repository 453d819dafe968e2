//! Cross references: `skills[].api_docs` items name `apis[].id` values.

use std::collections::{HashMap, HashSet};

use super::{Doc, Field, Rule};
use crate::finding::{Sink, quote};

/// How many unresolved `api_docs` items of a document get a "did you mean" search. Each search compares the
/// item with every API id, so without a bound a manifest of thousands of both would take minutes; later
/// items keep their finding, without the hint.
pub(crate) const MAX_SUGGESTIONS: usize = 100;

pub(crate) fn check(doc: &Doc<'_>, sink: &mut Sink) {
    let api_fields: Vec<_> = doc
        .apis
        .iter()
        .map(|entry| (entry.obj().str("id"), entry.obj().str("path")))
        .collect();
    let ids: HashSet<&str> = api_fields
        .iter()
        .filter_map(|(id, _)| id.as_ref().map(|f| f.text))
        .collect();
    let id_by_path: HashMap<&str, &str> = api_fields
        .iter()
        .filter_map(|(id, path)| Some((path.as_ref()?.text, id.as_ref()?.text)))
        .collect();
    let known: Vec<&str> = ids.iter().copied().collect();
    // Only items that name an id use an API: a path or a misspelling gets a hint, not a reference.
    let mut used: HashSet<&str> = HashSet::new();
    let mut searches = 0;
    for entry in &doc.skills {
        let skill = entry.obj();
        for item in skill.strings("api_docs") {
            if item.text.trim().is_empty() {
                continue; // R-LIST-BLANK
            }
            if ids.contains(item.text) {
                used.insert(item.text);
                continue;
            }
            let draft = sink
                .add(
                    Rule::XrefApiDoc,
                    &item.ptr(),
                    item.span(),
                    format!("api_docs item {} names no API entry", quote(item.text)),
                )
                .expected("the id of an entry in apis[]")
                .found(quote(item.text));
            if let Some(id) = id_by_path.get(item.text) {
                draft.hint(format!("api_docs holds API ids, not paths: write {}.", quote(id)));
            } else if searches < MAX_SUGGESTIONS {
                searches += 1;
                if let Some(id) = suggestion(item.text, &known) {
                    draft.hint(format!("Did you mean {}?", quote(id)));
                }
            }
        }
    }
    unused(&api_fields, &used, sink);
}

/// The known id an unresolved `item` probably means: one within two edits, else the least id it begins.
fn suggestion<'k>(item: &str, known: &[&'k str]) -> Option<&'k str> {
    super::top::closest_id(item, known)
        .or_else(|| known.iter().copied().filter(|id| id.starts_with(item)).min())
}

/// `R-XREF-API-UNUSED` for each API id no skill lists.
fn unused(
    api_fields: &[(Option<Field<'_, '_>>, Option<Field<'_, '_>>)],
    used: &HashSet<&str>,
    sink: &mut Sink,
) {
    for (id, _) in api_fields {
        let Some(id) = id else { continue };
        if !used.contains(id.text) {
            sink.add(
                Rule::XrefApiUnused,
                &id.ptr(),
                id.span(),
                format!("no skill lists API {} in api_docs", quote(id.text)),
            )
            .expected(format!("a skill whose api_docs lists {}", quote(id.text)))
            .found("no skill lists it");
        }
    }
}

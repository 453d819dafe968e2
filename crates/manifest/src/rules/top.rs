//! Top-level rules: `schema_version`, `generated_at`, unknown keys and neighbouring formats.

use std::time::SystemTime;

use chrono::{DateTime, Utc};

use super::lists::timestamp;
use super::{Doc, Obj, Rule, child};
use crate::CheckOptions;
use crate::finding::{Sink, quote};
use crate::model::keys;
use crate::parse::{Node, Span};

pub(crate) fn check(doc: &Doc<'_>, options: &CheckOptions, sink: &mut Sink) {
    let top = doc.top();
    foreign_format(top, sink);
    schema_version(top, sink);
    generated_at(top, options.now, sink);
    unknown_keys(top.node, "", keys::TOP, "the top level", sink);
    if let Some(repo) = top.get("repository") {
        unknown_keys(repo, "/repository", keys::REPOSITORY, "`repository`", sink);
    }
    for entry in &doc.skills {
        unknown_keys(entry.node, &entry.ptr, keys::SKILL, "a skill", sink);
    }
    for entry in &doc.apis {
        unknown_keys(entry.node, &entry.ptr, keys::API, "an API entry", sink);
    }
}

/// The versions of the format this checker reads: "1" and "1.<minor>".
pub fn supported_schema_version(version: &str) -> bool {
    match version.split_once('.') {
        None => version == "1",
        Some((major, minor)) => {
            major == "1"
                && !minor.is_empty()
                && minor.bytes().all(|b| b.is_ascii_digit())
                && (minor == "0" || !minor.starts_with('0'))
        }
    }
}

fn schema_version(top: Obj<'_, '_>, sink: &mut Sink) {
    let Some(field) = top.str("schema_version") else {
        return;
    };
    if supported_schema_version(field.text) {
        return;
    }
    let hint = if field.text.starts_with("1.") {
        "Write \"1\" or \"1.<minor>\" (major.minor only, no patch, no leading zeros)."
    } else {
        "This checker reads version 1 of the format; upgrade registry-check or write \"1\"."
    };
    sink.add(
        Rule::TopSchemaVersion,
        &field.ptr(),
        field.span(),
        format!("schema_version {} is not supported", quote(field.text)),
    )
    .expected("\"1\" or \"1.<minor>\"")
    .found(quote(field.text))
    .hint(hint);
}

fn generated_at(top: Obj<'_, '_>, now: SystemTime, sink: &mut Sink) {
    let Some(field) = top.str("generated_at") else {
        return;
    };
    let Some(time) = timestamp(Rule::TopGeneratedAt, &field, sink) else {
        return;
    };
    let now: DateTime<Utc> = now.into();
    // One minute of slack for clocks that disagree a little.
    if time.with_timezone(&Utc) > now + chrono::Duration::minutes(1) {
        sink.add(
            Rule::TopGeneratedFuture,
            &field.ptr(),
            field.span(),
            "generated_at lies in the future",
        )
        .expected(format!(
            "a time before now ({})",
            now.format("%Y-%m-%dT%H:%M:%SZ")
        ))
        .found(quote(field.text));
    }
}

/// Warn about keys of `node` that are not in `known`, suggesting a known key spelled alike.
pub(crate) fn unknown_keys(node: &Node, ptr: &str, known: &[&str], place: &str, sink: &mut Sink) {
    let Some(members) = node.as_object() else { return };
    for member in members.iter().filter(|m| !known.contains(&m.key.as_str())) {
        let draft = sink.add(
            Rule::UnknownKey,
            &child(ptr, &member.key),
            member.key_span,
            format!("unknown key {} in {place}", quote(&member.key)),
        );
        draft.expected(format!("one of: {}", known.join(", ")));
        if let Some(close) = closest(&member.key, known) {
            draft.hint(format!(
                "Did you mean `{close}`? Unknown keys are ignored by installers."
            ));
        }
    }
}

/// The known word within two edits of `key` (case and `-`/`_` ignored), if any.
pub(crate) fn closest<'k>(key: &str, known: &[&'k str]) -> Option<&'k str> {
    let lower = key.to_lowercase().replace('-', "_");
    known
        .iter()
        .map(|k| (edit_distance(&lower, k), *k))
        .filter(|(d, k)| *d <= 2 && *d < k.len())
        .min()
        .map(|(_, k)| k)
}

fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut prev = row.first().copied().unwrap_or(0);
        if let Some(first) = row.first_mut() {
            *first = i + 1;
        }
        for (j, cb) in b.iter().enumerate() {
            let above = row.get(j + 1).copied().unwrap_or(0);
            let left = row.get(j).copied().unwrap_or(0);
            let value = (prev + usize::from(ca != *cb)).min(above + 1).min(left + 1);
            prev = above;
            if let Some(cell) = row.get_mut(j + 1) {
                *cell = value;
            }
        }
    }
    row.last().copied().unwrap_or(0)
}

/// Recognize the neighbouring formats people feed the checker by mistake.
fn foreign_format(top: Obj<'_, '_>, sink: &mut Sink) {
    if top.node.get("schema_version").is_some() {
        return;
    }
    let first_skill = top
        .node
        .get("skills")
        .and_then(Node::as_array)
        .and_then(|s| s.first());
    let looks_like = if top.node.get("plugins").is_some() {
        "a Claude Code or Codex plugin marketplace (marketplace.json)"
    } else if top
        .node
        .get("$schema")
        .and_then(Node::as_str)
        .is_some_and(|s| s.contains("agentskills"))
        || first_skill.is_some_and(|s| s.get("digest").is_some())
    {
        "an Agent Skills Discovery index (index.json, `digest: \"sha256:...\"`)"
    } else if top.node.get("repository").and_then(Node::as_str).is_some() {
        "a skills.json catalog of another layout (`repository` is a string)"
    } else {
        return;
    };
    let span = Span::new(top.node.span.start, top.node.span.start + 1);
    sink.add(
        Rule::FormatForeign,
        "",
        span,
        format!("this file looks like {looks_like}, not a registry manifest"),
    )
    .expected("a registry manifest with schema_version, generated_at, repository, skills, apis")
    .found(looks_like);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schema_versions() {
        for ok in ["1", "1.0", "1.1", "1.12"] {
            assert!(supported_schema_version(ok), "{ok}");
        }
        for bad in ["", "2", "1.", "1.01", "1.0.0", "v1", "01", "1.x"] {
            assert!(!supported_schema_version(bad), "{bad}");
        }
    }

    #[test]
    fn suggestions() {
        assert_eq!(closest("sha_256", keys::SKILL), Some("sha256"));
        assert_eq!(closest("Size-Bytes", keys::SKILL), Some("size_bytes"));
        assert_eq!(closest("completely-else", keys::SKILL), None);
        assert_eq!(edit_distance("kitten", "sitting"), 3);
    }
}

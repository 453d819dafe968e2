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
        draft
            .expected(format!("one of: {}", known.join(", ")))
            .found(quote(&member.key));
        if let Some(close) = closest(&member.key, known) {
            draft.hint(format!(
                "Did you mean `{close}`? Unknown keys are ignored by installers."
            ));
        }
    }
}

/// Edits a misspelling may be away from a known word to be suggested.
const MAX_EDITS: usize = 2;

/// The known key within two edits of `key` (case and `-`/`_` ignored: keys are snake_case), if any.
pub(crate) fn closest<'k>(key: &str, known: &[&'k str]) -> Option<&'k str> {
    nearest(&key.to_lowercase().replace('-', "_"), known)
}

/// The known id within two edits of `id` (case ignored; ids are kebab-case, so `-` counts), if any.
pub(crate) fn closest_id<'k>(id: &str, known: &[&'k str]) -> Option<&'k str> {
    nearest(&id.to_lowercase(), known)
}

/// The known word nearest `word`, within [`MAX_EDITS`]. A candidate whose length differs by more than that
/// is skipped before anything is allocated for it, so a search among thousands of ids costs little more
/// than counting their characters.
fn nearest<'k>(word: &str, known: &[&'k str]) -> Option<&'k str> {
    let word: Vec<char> = word.chars().collect();
    known
        .iter()
        .filter(|k| within_length(k, word.len()))
        .filter_map(|k| {
            let candidate: Vec<char> = k.chars().collect();
            let d = distance_within(&word, &candidate, MAX_EDITS)?;
            (d < candidate.len()).then_some((d, *k))
        })
        .min()
        .map(|(_, k)| k)
}

/// Whether `candidate` has `length` characters, give or take [`MAX_EDITS`], without counting more of them
/// than that: no edit distance within the limit is possible otherwise.
fn within_length(candidate: &str, length: usize) -> bool {
    // A character takes one to four bytes: the byte length bounds the count before it is made.
    if candidate.len() + MAX_EDITS < length || candidate.len() / 4 > length + MAX_EDITS {
        return false;
    }
    candidate
        .chars()
        .take(length + MAX_EDITS + 1)
        .count()
        .abs_diff(length)
        <= MAX_EDITS
}

/// The edit (Levenshtein) distance between `a` and `b` if it is at most `max`. Only the cells
/// within `max` of the diagonal are computed, so this takes time linear in the lengths however
/// long the words are.
fn distance_within(a: &[char], b: &[char], max: usize) -> Option<usize> {
    const FAR: usize = usize::MAX / 2;
    if a.len().abs_diff(b.len()) > max {
        return None;
    }
    // prev: row i - 1 of the table; cur: row i. Cells outside the band stay FAR.
    let mut prev: Vec<usize> = (0..=b.len()).map(|j| if j <= max { j } else { FAR }).collect();
    let mut cur = vec![FAR; b.len() + 1];
    for (i, ca) in a.iter().enumerate().map(|(i, c)| (i + 1, c)) {
        let lo = i.saturating_sub(max).max(1);
        let hi = (i + max).min(b.len());
        if let Some(left_edge) = cur.get_mut(lo - 1) {
            *left_edge = if lo == 1 { i } else { FAR };
        }
        let mut row_min = FAR;
        for j in lo..=hi {
            let diagonal = prev.get(j - 1).copied().unwrap_or(FAR);
            let above = prev.get(j).copied().unwrap_or(FAR);
            let left = cur.get(j - 1).copied().unwrap_or(FAR);
            let same = b.get(j - 1) == Some(ca);
            let value = (diagonal + usize::from(!same)).min(above + 1).min(left + 1);
            if let Some(cell) = cur.get_mut(j) {
                *cell = value;
            }
            row_min = row_min.min(value);
        }
        if row_min > max && lo <= hi {
            return None;
        }
        std::mem::swap(&mut prev, &mut cur);
    }
    prev.get(b.len()).copied().filter(|d| *d <= max)
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
    }

    #[test]
    fn ids_keep_their_dashes_and_long_words_take_linear_time() {
        assert_eq!(
            closest_id("image-gen-apo", &["image-gen-api"]),
            Some("image-gen-api")
        );
        assert_eq!(
            closest_id("Image-Gen-Api", &["image-gen-api"]),
            Some("image-gen-api")
        );
        assert_eq!(
            closest_id("imagegenapi", &["image-gen-api"]),
            Some("image-gen-api")
        );
        assert_eq!(closest_id("video-gen-api", &["image-gen-api"]), None);
        // Two words of 300,000 characters: a full table would hold 9 * 10^10 cells.
        let long_a = "a".repeat(300_000);
        let long_b = format!("{}b", "a".repeat(299_999));
        let known = [long_b.as_str()];
        assert_eq!(closest_id(&long_a, &known), Some(long_b.as_str()));
        assert_eq!(closest_id(&"b".repeat(300_000), &known), None);
    }

    #[test]
    fn the_banded_distance_agrees_with_the_full_one() {
        fn full(a: &[char], b: &[char]) -> usize {
            let mut row: Vec<usize> = (0..=b.len()).collect();
            for (i, ca) in a.iter().enumerate() {
                let mut prev = row[0];
                row[0] = i + 1;
                for (j, cb) in b.iter().enumerate() {
                    let value = (prev + usize::from(ca != cb)).min(row[j + 1] + 1).min(row[j] + 1);
                    prev = row[j + 1];
                    row[j + 1] = value;
                }
            }
            row[b.len()]
        }
        let words = [
            "", "a", "ab", "ba", "abc", "acb", "kitten", "sitting", "sitten", "flaw", "lawn", "aaaa", "aaab",
        ];
        for a in words {
            for b in words {
                let (a, b): (Vec<char>, Vec<char>) = (a.chars().collect(), b.chars().collect());
                let expected = full(&a, &b);
                for max in 0..4 {
                    assert_eq!(
                        distance_within(&a, &b, max),
                        (expected <= max).then_some(expected),
                        "{a:?} {b:?} within {max}"
                    );
                }
            }
        }
        let (kitten, sitting): (Vec<char>, Vec<char>) =
            ("kitten".chars().collect(), "sitting".chars().collect());
        assert_eq!(distance_within(&kitten, &sitting, 3), Some(3));
    }
}

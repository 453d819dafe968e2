//! `skills[]` rules.

use std::borrow::Cow;
use std::collections::HashMap;

use super::lists::{blank, slug, string_list, timestamp};
use super::paths::comparable;
use super::text::{is_sha256_hex, rfc3339};
use super::{Doc, Field, Obj, Rule, child};
use crate::finding::{Sink, quote};
use crate::model::KNOWN_AGENTS;
use crate::parse::NodeValue;

/// The largest integer JSON numbers carry exactly (2^53 - 1).
pub const MAX_SAFE_INTEGER: u64 = (1 << 53) - 1;

/// Longest skill description agentskills allows, in characters.
pub const MAX_DESCRIPTION: usize = 1024;

pub(crate) fn check(doc: &Doc<'_>, sink: &mut Sink) {
    let generated_at = doc.top().str("generated_at").and_then(|f| rfc3339(f.text).ok());
    let mut names = HashMap::new();
    let mut packages = HashMap::new();
    let mut paths = HashMap::new();
    for entry in &doc.skills {
        let skill = entry.obj();
        if let Some(name) = skill.str("name") {
            name_rules(&skill, &name, sink);
            unique(&name, &mut names, Rule::SkillDupName, "skill name", sink);
        }
        if let Some(version) = skill.str("version") {
            version_rule(&version, sink);
        }
        for key in ["title", "description"] {
            if let Some(field) = skill.str(key) {
                blank(&field, sink);
            }
        }
        if let Some(description) = skill.str("description") {
            let length = description.text.chars().count();
            if length > MAX_DESCRIPTION {
                sink.add(
                    Rule::SkillDescLong,
                    &description.ptr(),
                    description.span(),
                    "the description is too long",
                )
                .expected(format!("at most {MAX_DESCRIPTION} characters"))
                .found(format!("{length} characters"));
            }
        }
        if let Some(sha) = skill.str("sha256") {
            sha256_rule(&sha, sink);
        }
        if let Some(package) = skill.str("package") {
            if !package.text.ends_with(".zip") {
                sink.add(
                    Rule::SkillPackageExt,
                    &package.ptr(),
                    package.span(),
                    "the package is not a .zip file",
                )
                .expected("a path ending in .zip")
                .found(quote(package.text));
            }
            unique_path(&package, &mut packages, Rule::SkillDupPackage, "package", sink);
        }
        if let Some(path) = skill.str("path") {
            unique_path(&path, &mut paths, Rule::SkillDupPath, "skill path", sink);
        }
        size_rule(&skill, sink);
        string_list(skill, "tags", Rule::ListDup, sink);
        string_list(skill, "api_docs", Rule::ListDup, sink);
        for agent in string_list(skill, "agents", Rule::ListDup, sink) {
            if !KNOWN_AGENTS.contains(&agent.text) {
                sink.add(
                    Rule::SkillAgentUnknown,
                    &agent.ptr(),
                    agent.span(),
                    format!("unknown agent {}", quote(agent.text)),
                )
                .expected(format!("one of: {}", KNOWN_AGENTS.join(", ")))
                .found(quote(agent.text));
            }
        }
        if let Some(updated) = skill.str("updated_at") {
            let time = timestamp(Rule::SkillUpdatedAt, &updated, sink);
            if time
                .zip(generated_at)
                .is_some_and(|(time, generated)| time > generated)
            {
                sink.add(
                    Rule::SkillUpdatedAfter,
                    &updated.ptr(),
                    updated.span(),
                    "updated_at is later than generated_at",
                )
                .expected("a time at or before generated_at")
                .found(quote(updated.text));
            }
        }
    }
}

/// Earlier fields of one kind, by the text two of them must not share.
pub(crate) type Seen<'a, 'p> = HashMap<Cow<'a, str>, Field<'a, 'p>>;

/// Report `field` when an earlier field of the same kind had the same text.
pub(crate) fn unique<'a, 'p>(
    field: &Field<'a, 'p>,
    seen: &mut Seen<'a, 'p>,
    rule: Rule,
    what: &str,
    sink: &mut Sink,
) {
    unique_as(Cow::Borrowed(field.text), field, seen, rule, what, sink);
}

/// Report the path `field` when an earlier path of the same kind names the same file: compared in the
/// cleaned form (`./a//b/` is `a/b`) when the path is usable, as written when it has an error of the path
/// rules (which say what is wrong with it).
pub(crate) fn unique_path<'a, 'p>(
    field: &Field<'a, 'p>,
    seen: &mut Seen<'a, 'p>,
    rule: Rule,
    what: &str,
    sink: &mut Sink,
) {
    unique_as(comparable(field.text), field, seen, rule, what, sink);
}

/// Report `field` when an earlier field had the same `key`, naming both spellings when they differ.
fn unique_as<'a, 'p>(
    key: Cow<'a, str>,
    field: &Field<'a, 'p>,
    seen: &mut Seen<'a, 'p>,
    rule: Rule,
    what: &str,
    sink: &mut Sink,
) {
    let Some(first) = seen.get(&key) else {
        seen.insert(key, *field);
        return;
    };
    let (first_ptr, place) = (first.ptr(), sink.place(first.span().start));
    let message = if first.text == field.text {
        format!("{what} {} is used more than once", quote(field.text))
    } else {
        format!(
            "{what} {} is used more than once: it is the same path as {}",
            quote(field.text),
            quote(first.text)
        )
    };
    sink.add(rule, &field.ptr(), field.span(), message)
        .expected(format!("a {what} no other entry uses"))
        .found(format!("also at {first_ptr} ({place})"));
}

fn name_rules(skill: &Obj<'_, '_>, name: &Field<'_, '_>, sink: &mut Sink) {
    if !slug(Rule::SkillName, name, "skill name", sink) {
        return;
    }
    let Some(path) = skill.str("path") else { return };
    let folder = path
        .text
        .trim_end_matches('/')
        .rsplit('/')
        .next()
        .unwrap_or_default();
    if !folder.is_empty() && folder != name.text {
        sink.add(
            Rule::SkillFolderName,
            &path.ptr(),
            path.span(),
            format!(
                "the skill folder `{folder}` differs from the skill name {}",
                quote(name.text)
            ),
        )
        .expected(format!("a path ending in /{}", name.text))
        .found(quote(path.text));
    }
}

fn version_rule(version: &Field<'_, '_>, sink: &mut Sink) {
    let text = version.text;
    let Err(error) = semver::Version::parse(text) else {
        return;
    };
    let bare = text.strip_prefix(['v', 'V']).unwrap_or(text);
    let hint = if bare != text && semver::Version::parse(bare).is_ok() {
        format!("Drop the `v`: write {}.", quote(bare))
    } else if !bare.is_empty()
        && bare.split('.').count() < 3
        && bare.split('.').all(|p| p.parse::<u64>().is_ok())
    {
        let mut parts: Vec<&str> = bare.split('.').collect();
        parts.resize(3, "0");
        format!("SemVer needs three numbers: write {}.", quote(&parts.join(".")))
    } else {
        "Write MAJOR.MINOR.PATCH, e.g. 1.0.0 (SemVer 2.0).".to_owned()
    };
    sink.add(
        Rule::SkillVersion,
        &version.ptr(),
        version.span(),
        format!("version {} is not SemVer 2.0: {error}", quote(text)),
    )
    .expected("MAJOR.MINOR.PATCH[-PRERELEASE][+BUILD]")
    .found(quote(text))
    .hint(hint);
}

fn sha256_rule(sha: &Field<'_, '_>, sink: &mut Sink) {
    let text = sha.text;
    if is_sha256_hex(text) {
        return;
    }
    let prefix = text.get(..7).filter(|p| p.eq_ignore_ascii_case("sha256:"));
    let (message, hint) = if let Some(rest) = prefix.and_then(|p| text.get(p.len()..)) {
        (
            "sha256 has a `sha256:` prefix".to_owned(),
            format!(
                "Write the bare hex digest {}; unlike the Agent Skills Discovery index (`digest`), this format \
                 has no algorithm prefix.",
                quote(&rest.to_ascii_lowercase())
            ),
        )
    } else if is_sha256_hex(&text.to_ascii_lowercase()) {
        (
            "sha256 has uppercase hex digits".to_owned(),
            format!("Lowercase it: {}.", quote(&text.to_ascii_lowercase())),
        )
    } else {
        (
            format!(
                "sha256 is not 64 hex digits ({} characters)",
                text.chars().count()
            ),
            "Write the SHA-256 of the package file as 64 lowercase hex digits (e.g. `sha256sum FILE`)."
                .to_owned(),
        )
    };
    sink.add(Rule::SkillSha256, &sha.ptr(), sha.span(), message)
        .expected("64 lowercase hex digits")
        .found(quote(text))
        .hint(hint);
}

fn size_rule(skill: &Obj<'_, '_>, sink: &mut Sink) {
    let Some(node) = skill.get("size_bytes") else {
        let span = skill.node.span;
        sink.add(
            Rule::SkillSizeMissing,
            skill.ptr,
            crate::parse::Span::new(span.start, span.start + 1),
            "this skill has no size_bytes",
        )
        .expected("size_bytes: the package file's length in bytes")
        .found("missing");
        return;
    };
    let NodeValue::Number(raw) = &node.value else {
        return;
    };
    let digits = raw.bytes().all(|b| b.is_ascii_digit());
    let problem = if raw.starts_with('-') {
        Some("it is negative")
    } else if !digits {
        Some("it is not written as a plain integer (no fraction, no exponent)")
    } else if raw.parse::<u64>().map_or(true, |n| n > MAX_SAFE_INTEGER) {
        Some("it is larger than 2^53-1")
    } else {
        None
    };
    if let Some(why) = problem {
        let draft = sink
            .add(
                Rule::SkillSize,
                &child(skill.ptr, "size_bytes"),
                node.span,
                format!("size_bytes {raw} is not valid: {why}"),
            )
            .expected("an integer from 0 to 9007199254740991 written as digits")
            .found(raw.clone());
        if let Ok(value) = raw.parse::<f64>()
            && value >= 0.0
            && value.fract() == 0.0
            && value <= MAX_SAFE_INTEGER as f64
        {
            draft.hint(format!("Write {}.", value as u64));
        }
    }
}

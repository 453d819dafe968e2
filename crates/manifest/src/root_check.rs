//! `--root` checks: the files the manifest names exist in the checkout and match it.

use std::fs::File;
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

use crate::Severity;
use crate::finding::{Sink, quote};
use crate::frontmatter::{self, SKILL_KEYS, normalize_space};
use crate::package::{self, PackageLimits};
use crate::parse::NodeValue;
use crate::rules::paths::path_problem;
use crate::rules::text::is_sha256_hex;
use crate::rules::{Doc, Field, Obj, Rule, child};

/// Most bytes of SKILL.md read from the checkout.
const MAX_SKILL_MD: u64 = 1024 * 1024;

pub(crate) fn check(doc: &Doc<'_>, dir: &Path, limits: &PackageLimits, sink: &mut Sink) {
    let base = dir.canonicalize().unwrap_or_else(|_| dir.to_owned());
    for entry in &doc.skills {
        let skill = entry.obj();
        let name = skill.str("name");
        let skill_md = skill
            .str("path")
            .and_then(|path| skill_folder(&base, &skill, &path, name.as_ref(), sink));
        if let Some(package) = skill.str("package") {
            if let Some(file) = inside(&base, &package, sink, Rule::RootPackageMissing, "package") {
                package_file(
                    &file,
                    &skill,
                    &package,
                    name.as_ref(),
                    skill_md.as_deref(),
                    limits,
                    sink,
                );
            }
        }
    }
    for entry in &doc.apis {
        let api = entry.obj();
        if let Some(path) = api.str("path") {
            if let Some(file) = inside(&base, &path, sink, Rule::RootApiMissing, "API document") {
                if !file.is_file() {
                    sink.add(
                        Rule::RootApiMissing,
                        &path.ptr(),
                        path.span(),
                        format!("{} is not a file", quote(path.text)),
                    );
                }
            }
        }
    }
}

/// `base/field` when the path is usable and stays inside the checkout; reports a missing file as `missing`.
fn inside(base: &Path, field: &Field<'_, '_>, sink: &mut Sink, missing: Rule, what: &str) -> Option<PathBuf> {
    if path_problem(field.text).is_some_and(|(rule, _)| rule.severity() == Severity::Error) {
        return None; // already reported by the path rules
    }
    let joined = base.join(field.text.trim_end_matches('/'));
    match joined.canonicalize() {
        Err(_) => {
            sink.add(
                missing,
                &field.ptr(),
                field.span(),
                format!("the {what} {} does not exist in the checkout", quote(field.text)),
            )
            .found(joined.display().to_string());
            None
        }
        Ok(real) if !real.starts_with(base) => {
            sink.add(
                missing,
                &field.ptr(),
                field.span(),
                format!(
                    "the {what} {} leads outside the checkout through a symbolic link",
                    quote(field.text)
                ),
            )
            .found(real.display().to_string());
            None
        }
        Ok(real) => Some(real),
    }
}

/// Check the skill folder and its SKILL.md; return the SKILL.md bytes for the package comparison.
fn skill_folder(
    base: &Path,
    skill: &Obj<'_, '_>,
    path: &Field<'_, '_>,
    name: Option<&Field<'_, '_>>,
    sink: &mut Sink,
) -> Option<Vec<u8>> {
    let folder = inside(base, path, sink, Rule::RootPathMissing, "skill folder")?;
    if !folder.is_dir() {
        sink.add(
            Rule::RootPathMissing,
            &path.ptr(),
            path.span(),
            format!("{} is not a folder", quote(path.text)),
        );
        return None;
    }
    let file = folder.join("SKILL.md");
    let bytes = match read_bounded(&file, MAX_SKILL_MD) {
        Ok(bytes) => bytes,
        Err(why) => {
            sink.add(
                Rule::RootSkillMdMissing,
                &path.ptr(),
                path.span(),
                format!(
                    "{}/SKILL.md cannot be read: {why}",
                    path.text.trim_end_matches('/')
                ),
            )
            .expected("a SKILL.md file in the skill folder");
            return None;
        }
    };
    let front = std::str::from_utf8(&bytes)
        .map_err(|_| "SKILL.md is not UTF-8".to_owned())
        .and_then(|text| frontmatter::read(text).map_err(|e| e.to_string()));
    let front = match front {
        Ok(front) => front,
        Err(why) => {
            sink.add(
                Rule::RootFrontMatter,
                &path.ptr(),
                path.span(),
                format!("SKILL.md front matter: {why}"),
            );
            return Some(bytes);
        }
    };
    let (Some(fm_name), Some(fm_description)) = (front.str("name"), front.str("description")) else {
        sink.add(
            Rule::RootFrontMatter,
            &path.ptr(),
            path.span(),
            "SKILL.md front matter lacks a string `name` or `description`",
        );
        return Some(bytes);
    };
    let folder_name = path
        .text
        .trim_end_matches('/')
        .rsplit('/')
        .next()
        .unwrap_or_default();
    if let Some(name) = name {
        if fm_name != name.text {
            sink.add(
                Rule::RootNameMismatch,
                &name.ptr(),
                name.span(),
                format!("SKILL.md names the skill {}", quote(fm_name)),
            )
            .expected(quote(fm_name))
            .found(quote(name.text));
        } else if fm_name != folder_name {
            sink.add(
                Rule::RootNameMismatch,
                &path.ptr(),
                path.span(),
                format!(
                    "SKILL.md names the skill {}, but its folder is `{folder_name}`",
                    quote(fm_name)
                ),
            )
            .expected(format!("a folder named `{fm_name}`"))
            .found(quote(path.text));
        }
    }
    if let Some(description) = skill.str("description") {
        let (ours, theirs) = (normalize_space(description.text), normalize_space(fm_description));
        if !ours.is_empty() && !theirs.starts_with(&ours) {
            sink.add(
                Rule::RootDescMismatch,
                &description.ptr(),
                description.span(),
                "the description differs from SKILL.md",
            )
            .expected(quote(&theirs))
            .found(quote(description.text));
        }
    }
    let unknown = front.unknown_keys(SKILL_KEYS);
    if !unknown.is_empty() {
        sink.add(
            Rule::RootFrontMatterKey,
            &path.ptr(),
            path.span(),
            format!(
                "SKILL.md front matter has keys outside the agentskills set: {}",
                unknown.join(", ")
            ),
        )
        .expected(SKILL_KEYS.join(", "));
    }
    Some(bytes)
}

fn read_bounded(file: &Path, limit: u64) -> Result<Vec<u8>, String> {
    File::open(file)
        .map_err(|e| e.to_string())
        .and_then(|f| package::read_limited(f, limit))
}

/// Length and SHA-256 of a file, streamed.
pub(crate) fn hash_file(file: &Path) -> std::io::Result<(u64, String)> {
    let mut hasher = Sha256::new();
    let length = std::io::copy(&mut File::open(file)?, &mut hasher)?;
    Ok((length, hex::encode(hasher.finalize())))
}

fn package_file(
    file: &Path,
    skill: &Obj<'_, '_>,
    package: &Field<'_, '_>,
    name: Option<&Field<'_, '_>>,
    skill_md: Option<&[u8]>,
    limits: &PackageLimits,
    sink: &mut Sink,
) {
    let (length, digest) = match hash_file(file) {
        Ok(result) => result,
        Err(why) => {
            sink.add(
                Rule::RootPackageMissing,
                &package.ptr(),
                package.span(),
                format!("the package cannot be read: {why}"),
            );
            return;
        }
    };
    if let Some(node) = skill.get("size_bytes") {
        if let NodeValue::Number(raw) = &node.value {
            if raw.parse::<u64>().is_ok_and(|n| n != length) {
                sink.add(
                    Rule::RootSizeMismatch,
                    &child(skill.ptr, "size_bytes"),
                    node.span,
                    "size_bytes differs from the package's length",
                )
                .expected(length.to_string())
                .found(raw.clone());
            }
        }
    }
    if let Some(sha) = skill.str("sha256") {
        if is_sha256_hex(sha.text) && sha.text != digest {
            sink.add(
                Rule::RootSha256Mismatch,
                &sha.ptr(),
                sha.span(),
                "sha256 differs from the package's SHA-256",
            )
            .expected(digest)
            .found(sha.text.to_owned());
        }
    }
    let skill_name = name.map_or("", |n| n.text);
    for found in package::inspect(file, skill_name, skill_md, limits) {
        sink.add(found.rule, &package.ptr(), package.span(), found.message);
    }
}

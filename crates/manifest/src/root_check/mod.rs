//! `--root` checks: the files the manifest names exist in the checkout and match it.

mod files;
mod skill;

use std::path::{Path, PathBuf};

pub(crate) use files::hash_file;

use crate::finding::{Sink, quote};
use crate::package::{self, PackageLimits};
use crate::parse::NodeValue;
use crate::rules::paths::path_error;
use crate::rules::text::is_sha256_hex;
use crate::rules::{Doc, Field, Obj, Rule, child};
use files::Unusable;
use skill::skill_folder;

pub(crate) fn check(doc: &Doc<'_>, dir: &Path, limits: &PackageLimits, sink: &mut Sink) {
    let base = dir.canonicalize().unwrap_or_else(|_| dir.to_owned());
    for entry in &doc.skills {
        let skill = entry.obj();
        let name = skill.str("name");
        let skill_md = skill
            .str("path")
            .and_then(|path| skill_folder(&base, &skill, &path, name.as_ref(), sink));
        if let Some(package) = skill.str("package")
            && let Some(file) = inside(&base, &package, sink, Rule::RootPackageMissing, "package")
        {
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
    for entry in &doc.apis {
        let api = entry.obj();
        if let Some(path) = api.str("path")
            && let Some(file) = inside(&base, &path, sink, Rule::RootApiMissing, "API document")
            && !file.is_file()
        {
            sink.add(
                Rule::RootApiMissing,
                &path.ptr(),
                path.span(),
                format!("{} is not a file", quote(path.text)),
            )
            .expected("a regular file")
            .found(files::kind(&file));
        }
    }
}

/// `base/field` when the path is usable and stays inside the checkout; reports a missing file as `missing`.
fn inside(base: &Path, field: &Field<'_, '_>, sink: &mut Sink, missing: Rule, what: &str) -> Option<PathBuf> {
    if path_error(field.text).is_some() {
        return None; // already reported by the path rules
    }
    let joined = base.join(field.text.trim_end_matches('/'));
    match files::resolve(base, &joined) {
        Err(Unusable::Missing(_)) => {
            sink.add(
                missing,
                &field.ptr(),
                field.span(),
                format!("the {what} {} does not exist in the checkout", quote(field.text)),
            )
            .expected(format!("the {what} to exist in the checkout"))
            .found(format!("missing: {}", joined.display()));
            None
        }
        Err(Unusable::Outside(real)) => {
            sink.add(
                missing,
                &field.ptr(),
                field.span(),
                format!("the {what} {} {}", quote(field.text), files::OUTSIDE),
            )
            .expected(format!("the {what} inside the checkout"))
            .found(real.display().to_string());
            None
        }
        Ok(real) => Some(real),
    }
}

/// Check the package file: length, hash and contents.
fn package_file(
    file: &Path,
    skill: &Obj<'_, '_>,
    package: &Field<'_, '_>,
    name: Option<&Field<'_, '_>>,
    skill_md: Option<&[u8]>,
    limits: &PackageLimits,
    sink: &mut Sink,
) {
    if !file.is_file() {
        sink.add(
            Rule::RootPackageMissing,
            &package.ptr(),
            package.span(),
            format!("the package {} is not a regular file", quote(package.text)),
        )
        .expected("a regular file")
        .found(files::kind(file));
        return;
    }
    let (length, digest) = match files::hash_file(file) {
        Ok(result) => result,
        Err(why) => {
            sink.add(
                Rule::RootPackageMissing,
                &package.ptr(),
                package.span(),
                format!("the package cannot be read: {why}"),
            )
            .expected("a readable file")
            .found(why.to_string());
            return;
        }
    };
    if let Some(node) = skill.get("size_bytes")
        && let NodeValue::Number(raw) = &node.value
        && raw.parse::<u64>().is_ok_and(|n| n != length)
    {
        sink.add(
            Rule::RootSizeMismatch,
            &child(skill.ptr, "size_bytes"),
            node.span,
            "size_bytes differs from the package's length",
        )
        .expected(length.to_string())
        .found(raw.clone());
    }
    if let Some(sha) = skill.str("sha256")
        && is_sha256_hex(sha.text)
        && sha.text != digest
    {
        sink.add(
            Rule::RootSha256Mismatch,
            &sha.ptr(),
            sha.span(),
            "sha256 differs from the package's SHA-256",
        )
        .expected(digest)
        .found(sha.text.to_owned());
    }
    let skill_name = name.map_or("", |n| n.text);
    for problem in package::inspect(file, skill_name, skill_md, limits) {
        sink.add(problem.rule, &package.ptr(), package.span(), problem.message)
            .expected(problem.expected)
            .found(problem.found);
    }
}

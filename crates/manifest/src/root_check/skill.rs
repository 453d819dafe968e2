//! The skill folder and its SKILL.md.

use std::path::Path;

use super::files::{self, Unusable};
use super::inside;
use crate::finding::{Sink, quote};
use crate::frontmatter::{self, SKILL_KEYS, normalize_space};
use crate::rules::{Field, Obj, Rule};

/// `expected` of an unusable front matter.
const FRONT_MATTER: &str = "YAML front matter between `---` lines with string `name` and `description`";

/// Most bytes of SKILL.md read from the checkout.
const MAX_SKILL_MD: u64 = 1024 * 1024;

/// Check the skill folder and its SKILL.md; return the SKILL.md bytes for the package comparison.
pub(super) fn skill_folder(
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
        )
        .expected("a folder")
        .found(files::kind(&folder));
        return None;
    }
    let bytes = read_skill_md(base, &folder, path, sink)?;
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
            )
            .expected(FRONT_MATTER)
            .found(why);
            return Some(bytes);
        }
    };
    let (Some(fm_name), Some(fm_description)) = (front.str("name"), front.str("description")) else {
        let lacking: Vec<&str> = ["name", "description"]
            .into_iter()
            .filter(|key| front.str(key).is_none())
            .collect();
        sink.add(
            Rule::RootFrontMatter,
            &path.ptr(),
            path.span(),
            "SKILL.md front matter lacks a string `name` or `description`",
        )
        .expected(FRONT_MATTER)
        .found(format!("no string {}", lacking.join(" or ")));
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
        .expected(SKILL_KEYS.join(", "))
        .found(unknown.join(", "));
    }
    Some(bytes)
}

/// `folder/SKILL.md` when it is a regular file inside the checkout of at most [`MAX_SKILL_MD`] bytes;
/// otherwise `R-ROOT-SKILLMD-MISSING` says why. Resolved before it is opened, so a symbolic link cannot make
/// the checker read outside the checkout and a FIFO cannot block it.
fn read_skill_md(base: &Path, folder: &Path, path: &Field<'_, '_>, sink: &mut Sink) -> Option<Vec<u8>> {
    let shown = format!("{}/SKILL.md", path.text.trim_end_matches('/'));
    let (message, found) = match files::resolve(base, &folder.join("SKILL.md")) {
        Err(Unusable::Missing(why)) => (
            format!("{shown} cannot be read: {why}"),
            format!("missing: {why}"),
        ),
        Err(Unusable::Outside(real)) => (format!("{shown} {}", files::OUTSIDE), real.display().to_string()),
        Ok(file) => match file.metadata() {
            Ok(meta) if !meta.is_file() => (
                format!("{shown} is not a regular file"),
                files::kind(&file).to_owned(),
            ),
            Ok(meta) if meta.len() > MAX_SKILL_MD => (
                format!("{shown} is too large to be a SKILL.md: {} bytes", meta.len()),
                format!("{} bytes", meta.len()),
            ),
            Err(why) => (format!("{shown} cannot be read: {why}"), why.to_string()),
            Ok(_) => match files::read_bounded(&file, MAX_SKILL_MD) {
                Ok(bytes) => return Some(bytes),
                Err(why) => (format!("{shown} cannot be read: {why}"), why),
            },
        },
    };
    sink.add(Rule::RootSkillMdMissing, &path.ptr(), path.span(), message)
        .expected(format!(
            "a SKILL.md file of at most {MAX_SKILL_MD} bytes in the skill folder"
        ))
        .found(found);
    None
}

//! Package (zip) inspection: safety, limits, SKILL.md presence and freshness. Nothing is extracted to disk
//! and nothing inside a package is run.

use std::collections::HashSet;
use std::fs::File;
use std::io::Read;
use std::path::Path;

use crate::rules::Rule;
use crate::rules::text::has_drive_letter;

/// Limits for inspecting packages (zip bomb guards).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PackageLimits {
    /// Most entries a package may have.
    pub max_entries: usize,
    /// Most bytes all entries may unpack to (as the archive declares them, and as they really
    /// inflate).
    pub max_unpacked_bytes: u64,
    /// Most bytes of SKILL.md read from a package for comparison.
    pub max_skill_md_bytes: u64,
}

impl Default for PackageLimits {
    fn default() -> Self {
        Self {
            max_entries: 10_000,
            max_unpacked_bytes: 256 * 1024 * 1024,
            max_skill_md_bytes: 1024 * 1024,
        }
    }
}

/// One problem found in a package.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct PackageProblem {
    pub rule: Rule,
    pub message: String,
    /// What a good package has instead, briefly.
    pub expected: String,
    /// What this package has, briefly.
    pub found: String,
}

/// What the entries really unpack to, counted by unpacking them (into nothing) up to `limit`
/// bytes in all: an archive may declare small sizes and inflate to far more, and an installer
/// writes what it inflates to. A problem when that passes the limit, or an entry does not unpack.
fn unpacked_beyond_declared<R: Read + std::io::Seek>(
    archive: &mut zip::ZipArchive<R>,
    limit: u64,
) -> Option<PackageProblem> {
    let mut unpacked: u64 = 0;
    for index in 0..archive.len() {
        let mut entry = match archive.by_index(index) {
            Ok(entry) => entry,
            Err(why) => {
                return Some(problem(
                    Rule::PkgOpen,
                    format!("entry {index} cannot be unpacked: {why}"),
                    UNPACKS,
                    why.to_string(),
                ));
            }
        };
        if !entry.is_file() {
            continue;
        }
        let allowance = limit.saturating_sub(unpacked).saturating_add(1);
        match std::io::copy(&mut (&mut entry).take(allowance), &mut std::io::sink()) {
            Ok(bytes) => unpacked = unpacked.saturating_add(bytes),
            Err(why) => {
                return Some(problem(
                    Rule::PkgOpen,
                    format!("entry {index} cannot be unpacked: {why}"),
                    UNPACKS,
                    why.to_string(),
                ));
            }
        }
        if unpacked > limit {
            return Some(problem(
                Rule::PkgLimits,
                format!(
                    "the package unpacks to more than {limit} bytes, the limit, though its entries declare \
                     less (a zip bomb?)"
                ),
                format!("at most {limit} unpacked bytes"),
                format!("more than {limit} bytes when unpacked"),
            ));
        }
    }
    None
}

/// `expected` of an entry that does not unpack.
const UNPACKS: &str = "entries that unpack";

/// `expected` of a repeated entry name.
const UNIQUE_NAMES: &str = "every entry name once";

fn problem(
    rule: Rule,
    message: impl Into<String>,
    expected: impl Into<String>,
    found: impl Into<String>,
) -> PackageProblem {
    PackageProblem {
        rule,
        message: message.into(),
        expected: expected.into(),
        found: found.into(),
    }
}

/// Why a zip entry name is unsafe to extract, if it is.
pub(crate) fn unsafe_entry_name(name: &str) -> Option<&'static str> {
    if name.starts_with('/') || name.starts_with('\\') {
        return Some("it is absolute");
    }
    if has_drive_letter(name) {
        return Some("it has a drive letter");
    }
    if name.split(['/', '\\']).any(|segment| segment == "..") {
        return Some("it has a `..` segment");
    }
    if name.contains('\0') {
        return Some("it contains a NUL byte");
    }
    None
}

/// Whether a zip entry name is a file people forget to exclude.
pub(crate) fn is_junk(name: &str) -> bool {
    name.split('/').any(|s| {
        matches!(
            s,
            "__MACOSX" | ".DS_Store" | "__pycache__" | "node_modules" | "Thumbs.db"
        )
    }) || name.ends_with(".pyc")
}

/// Inspect the package at `path` of skill `skill_name`; compare its SKILL.md with `checkout_skill_md`.
pub(crate) fn inspect(
    path: &Path,
    skill_name: &str,
    checkout_skill_md: Option<&[u8]>,
    limits: &PackageLimits,
) -> Vec<PackageProblem> {
    let mut problems = Vec::new();
    let archive = File::open(path)
        .map_err(|e| e.to_string())
        .and_then(|f| zip::ZipArchive::new(std::io::BufReader::new(f)).map_err(|e| e.to_string()));
    let mut archive = match archive {
        Ok(a) => a,
        Err(why) => {
            return vec![problem(
                Rule::PkgOpen,
                format!("the package does not open as a zip archive: {why}"),
                "a zip archive",
                why,
            )];
        }
    };
    if archive.len() > limits.max_entries {
        problems.push(problem(
            Rule::PkgLimits,
            format!(
                "the package has {} entries; the limit is {}",
                archive.len(),
                limits.max_entries
            ),
            format!("at most {} entries", limits.max_entries),
            format!("{} entries", archive.len()),
        ));
        return problems;
    }
    if archive.metadata().has_duplicate_names() {
        // The zip crate keys entries by name: all but the last entry of a name are invisible below.
        problems.push(problem(
            Rule::PkgDupEntry,
            "the package has entries with the same name; only the last of them can be inspected, and an \
             unpacker may install any of them",
            UNIQUE_NAMES,
            "entries that share a name",
        ));
    }
    let mut seen = HashSet::with_capacity(archive.len());
    let mut total: u64 = 0;
    let mut names = Vec::with_capacity(archive.len());
    let mut times = Vec::with_capacity(archive.len());
    let mut junk = Vec::new();
    let mut skill_md_index = None;
    let nested = format!("{skill_name}/SKILL.md");
    for index in 0..archive.len() {
        let entry = match archive.by_index_raw(index) {
            Ok(e) => e,
            Err(why) => {
                problems.push(problem(
                    Rule::PkgOpen,
                    format!("entry {index} cannot be read: {why}"),
                    "readable zip entries",
                    why.to_string(),
                ));
                return problems;
            }
        };
        let name = match entry.name() {
            Ok(name) => name.into_owned(),
            Err(why) => {
                problems.push(problem(
                    Rule::PkgUnsafePath,
                    format!("entry {index} has an undecodable name: {why}"),
                    "an entry name in UTF-8 or CP437",
                    why.to_string(),
                ));
                continue;
            }
        };
        if !seen.insert(name.clone()) {
            // Different bytes that decode to the same name (e.g. CP437 and UTF-8).
            problems.push(problem(
                Rule::PkgDupEntry,
                format!("the package has more than one entry named `{name}`"),
                UNIQUE_NAMES,
                format!("`{name}` more than once"),
            ));
        }
        total = total.saturating_add(entry.size());
        if let Some(why) = unsafe_entry_name(&name) {
            problems.push(problem(
                Rule::PkgUnsafePath,
                format!("entry `{name}` is unsafe to unpack: {why}"),
                "a relative entry name without `..` segments",
                format!("`{name}`"),
            ));
        }
        if entry.is_symlink() {
            problems.push(problem(
                Rule::PkgSymlink,
                format!("entry `{name}` is a symbolic link"),
                "a regular file or folder",
                format!("`{name}`, a symbolic link"),
            ));
        }
        if is_junk(&name) {
            junk.push(name.clone());
        }
        if entry.is_file() && (name == "SKILL.md" || name == nested) && skill_md_index.is_none() {
            skill_md_index = Some(index);
        }
        times.push(entry.last_modified());
        names.push(name);
    }
    if total > limits.max_unpacked_bytes {
        problems.push(problem(
            Rule::PkgLimits,
            format!(
                "the package unpacks to {total} bytes; the limit is {}",
                limits.max_unpacked_bytes
            ),
            format!("at most {} unpacked bytes", limits.max_unpacked_bytes),
            format!("{total} bytes"),
        ));
    } else if let Some(found) = unpacked_beyond_declared(&mut archive, limits.max_unpacked_bytes) {
        problems.push(found);
    }
    if !junk.is_empty() {
        let shown: Vec<&str> = junk.iter().take(3).map(String::as_str).collect();
        let more = if junk.len() > 3 {
            format!(" and {} more", junk.len() - 3)
        } else {
            String::new()
        };
        let listed = format!("{}{more}", shown.join(", "));
        problems.push(problem(
            Rule::PkgJunk,
            format!("the package contains junk files: {listed}"),
            "no __MACOSX/, .DS_Store, Thumbs.db, __pycache__, *.pyc or node_modules/ entries",
            listed,
        ));
    }
    let sorted = names.windows(2).all(|w| w.first() <= w.get(1));
    let same_time = times.windows(2).all(|w| w.first() == w.get(1));
    if !sorted || !same_time {
        let why = if sorted {
            "entry timestamps differ"
        } else {
            "entries are not in sorted order"
        };
        problems.push(problem(
            Rule::PkgNotReproducible,
            format!("the package was not built reproducibly: {why}"),
            "entries in sorted order with one timestamp",
            why,
        ));
    }
    let Some(index) = skill_md_index else {
        problems.push(problem(
            Rule::PkgNoSkillMd,
            format!("the package has neither SKILL.md nor {nested}; SKILL.md must be at the root or in `{skill_name}/`"),
            format!("an entry SKILL.md or {nested}"),
            format!("{} entries, none of them SKILL.md or {nested}", names.len()),
        ));
        return problems;
    };
    if let Some(expected) = checkout_skill_md {
        match read_entry(&mut archive, index, limits.max_skill_md_bytes) {
            Ok(inside) if inside != expected => {
                let name = names.get(index).map_or("SKILL.md", String::as_str);
                problems.push(problem(
                    Rule::PkgStale,
                    format!("{name} in the package differs from the checkout's SKILL.md"),
                    format!("the checkout's SKILL.md ({} bytes)", expected.len()),
                    format!("a different {name} ({} bytes)", inside.len()),
                ));
            }
            Ok(_) => {}
            Err(why) => problems.push(problem(
                Rule::PkgOpen,
                format!("SKILL.md in the package cannot be read: {why}"),
                "a readable SKILL.md",
                why,
            )),
        }
    }
    problems
}

fn read_entry<R: Read + std::io::Seek>(
    archive: &mut zip::ZipArchive<R>,
    index: usize,
    limit: u64,
) -> Result<Vec<u8>, String> {
    read_limited(archive.by_index(index).map_err(|e| e.to_string())?, limit)
}

/// Read all of `reader`, refusing more than `limit` bytes.
pub(crate) fn read_limited(reader: impl Read, limit: u64) -> Result<Vec<u8>, String> {
    let mut bytes = Vec::new();
    reader
        .take(limit.saturating_add(1))
        .read_to_end(&mut bytes)
        .map_err(|e| e.to_string())?;
    if bytes.len() as u64 > limit {
        return Err(format!("it is larger than {limit} bytes"));
    }
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entry_names() {
        assert_eq!(unsafe_entry_name("pdf/SKILL.md"), None);
        assert_eq!(unsafe_entry_name("/etc/passwd"), Some("it is absolute"));
        assert_eq!(unsafe_entry_name("a/../../x"), Some("it has a `..` segment"));
        assert_eq!(unsafe_entry_name("..\\x"), Some("it has a `..` segment"));
        assert_eq!(unsafe_entry_name("C:/x"), Some("it has a drive letter"));
        assert!(is_junk("pdf/__MACOSX/._a"));
        assert!(is_junk("pdf/x.pyc"));
        assert!(!is_junk("pdf/SKILL.md"));
    }

    /// A zip with one deflated entry of `size` zero bytes whose headers declare `declared` bytes.
    fn lying_zip(size: usize, declared: u32) -> Vec<u8> {
        use std::io::Write as _;
        let mut zip = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
        let options =
            zip::write::SimpleFileOptions::default().compression_method(zip::CompressionMethod::Deflated);
        zip.start_file("pdf/SKILL.md", options).unwrap();
        zip.write_all(&vec![0_u8; size]).unwrap();
        let mut bytes = zip.finish().unwrap().into_inner();
        let real = u32::try_from(size).unwrap().to_le_bytes();
        // The uncompressed size: 22 bytes into the local header, 24 into the central one.
        for (signature, offset) in [([0x50, 0x4b, 0x03, 0x04], 22), ([0x50, 0x4b, 0x01, 0x02], 24)] {
            let at = bytes.windows(4).position(|w| w == signature).unwrap() + offset;
            assert_eq!(&bytes[at..at + 4], &real);
            bytes[at..at + 4].copy_from_slice(&declared.to_le_bytes());
        }
        bytes
    }

    #[test]
    fn entries_are_counted_as_they_inflate_not_as_they_declare() {
        let honest = lying_zip(10_000, 10_000);
        let mut archive = zip::ZipArchive::new(std::io::Cursor::new(honest)).unwrap();
        assert!(unpacked_beyond_declared(&mut archive, 10_000).is_none());

        let bomb = lying_zip(1_000_000, 10);
        let mut archive = zip::ZipArchive::new(std::io::Cursor::new(bomb)).unwrap();
        assert_eq!(
            archive.by_index_raw(0).unwrap().size(),
            10,
            "it declares 10 bytes"
        );
        // It inflates past what it declares: the zip reader stops there, and says so.
        let found = unpacked_beyond_declared(&mut archive, 100_000_000).unwrap();
        assert_eq!(found.rule, Rule::PkgOpen, "{}", found.message);
        assert!(
            found.message.contains("larger than its declared"),
            "{}",
            found.message
        );
    }
}

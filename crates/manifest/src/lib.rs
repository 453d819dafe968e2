//! The registry-manifest format and its checker, `registry-check`.
//!
//! A registry manifest is a JSON catalog of installable agent skills (`skills[]`) and API documents
//! (`apis[]`) published from a git repository. This crate holds:
//!
//! - the typed model ([`model::Manifest`]) and the JSON Schema ([`json_schema`], draft 2020-12);
//! - a strict, span-keeping JSON parser ([`parse`]) that reports line:column and duplicate keys;
//! - the checker: schema plus semantic rules with stable ids ([`Rule`]), every [`Finding`] with a JSON
//!   Pointer and line:column; with a checkout root, file, size, hash and package-safety checks;
//! - reports as text, JSON, SARIF 2.1.0 and GitHub annotations ([`report`]);
//! - the publishing helper that builds a manifest and reproducible packages ([`generate`]).
//!
//! ```
//! use imagegate_manifest::{CheckOptions, Severity, check_bytes};
//!
//! let manifest = br#"{
//!   "schema_version": "1",
//!   "generated_at": "2026-05-01T12:00:00Z",
//!   "repository": {"name": "skills", "git_url": "https://github.com/acme/skills.git",
//!                  "raw_base_url": "https://raw.githubusercontent.com/acme/skills/main", "branch": "main"},
//!   "skills": [{"name": "pdf-tools", "version": "1.0", "title": "PDF tools",
//!               "description": "Fill and merge PDF files.", "path": "skills/pdf-tools",
//!               "package": "packages/pdf-tools.zip", "sha256": "SHA256:00", "size_bytes": 12}],
//!   "apis": []
//! }"#;
//! let report = check_bytes("registry.json", manifest, &CheckOptions::default());
//! let rules: Vec<&str> = report.findings.iter().map(|f| f.rule.id()).collect();
//! assert_eq!(rules, ["R-SKILL-VERSION", "R-SKILL-SHA256"]);
//! let version = &report.findings[0];
//! assert_eq!((version.pointer.as_str(), version.start.line, version.start.column), ("/skills/0/version", 6, 47));
//! assert_eq!(version.severity, Severity::Error);
//! ```

pub mod finding;
mod fold;
mod frontmatter;
pub mod generate;
pub mod model;
mod package;
pub mod parse;
pub mod report;
mod root_check;
pub mod rules;
pub mod synthetic;

use std::path::{Path, PathBuf};
use std::time::SystemTime;

pub use finding::{Finding, MAX_FINDINGS, Omitted, Severity};
pub use package::PackageLimits;
pub use rules::Rule;

use finding::Sink;
use parse::{LineIndex, Span, SyntaxErrorKind};

/// How to check.
#[derive(Debug, Clone)]
pub struct CheckOptions {
    /// The repository checkout the manifest describes; `None` checks the manifest alone (no I/O).
    pub root: Option<PathBuf>,
    /// The current time, for "in the future" checks.
    pub now: SystemTime,
    /// Limits for unpacking packages.
    pub limits: PackageLimits,
    /// `--strict`: report the findings the format makes errors under `--strict` (unknown keys) as errors.
    pub strict: bool,
}

impl Default for CheckOptions {
    fn default() -> Self {
        Self {
            root: None,
            now: SystemTime::now(),
            limits: PackageLimits::default(),
            strict: false,
        }
    }
}

/// The result of checking one manifest.
#[derive(Debug, Clone)]
pub struct FileReport {
    /// The file name as given (used in reports).
    pub file: String,
    /// The manifest text (invalid UTF-8 replaced), for source snippets.
    pub source: String,
    /// Line starts of `source`.
    pub lines: LineIndex,
    /// Findings sorted by location: at most [`MAX_FINDINGS`], the most severe first when there were more.
    pub findings: Vec<Finding>,
    /// The findings left out past [`MAX_FINDINGS`], counted by severity.
    pub omitted: Omitted,
}

impl FileReport {
    /// Whether the file could not be parsed (a fatal JSON finding).
    pub fn parse_failed(&self) -> bool {
        self.findings.iter().any(|f| f.rule.is_fatal())
    }

    /// How many of the listed findings have `severity` (those left out are in [`FileReport::omitted`]).
    pub fn count(&self, severity: Severity) -> usize {
        self.findings.iter().filter(|f| f.severity == severity).count()
    }

    /// Whether any finding, listed or left out, is at or above `threshold`.
    pub fn fails(&self, threshold: Severity) -> bool {
        self.findings.iter().any(|f| f.severity >= threshold)
            || self.omitted.worst().is_some_and(|worst| worst >= threshold)
    }
}

/// Errors reading a manifest file.
#[derive(Debug, thiserror::Error)]
pub enum CheckError {
    /// The file could not be read.
    #[error("cannot read {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The file is larger than any manifest ([`MAX_MANIFEST_BYTES`]): `/dev/zero` or a wrong path.
    #[error("{path} is larger than {limit} bytes, too large for a manifest")]
    TooLarge {
        /// The file.
        path: PathBuf,
        /// The most bytes a manifest may have.
        limit: u64,
    },
}

/// The most bytes read of a manifest file: catalogs of thousands of entries take a few MiB, and a
/// file that never ends (`/dev/zero`, a pipe) must not take the machine's memory.
pub const MAX_MANIFEST_BYTES: u64 = 64 * 1024 * 1024;

/// The JSON Schema (draft 2020-12) of the registry manifest.
pub fn json_schema() -> serde_json::Value {
    serde_json::from_str(rules::schema::SCHEMA_TEXT).unwrap_or(serde_json::Value::Null)
}

/// Check a manifest file.
///
/// # Errors
///
/// [`CheckError::Read`] when the file cannot be read, [`CheckError::TooLarge`] past
/// [`MAX_MANIFEST_BYTES`]. Everything else is a finding. The path [`STDIN`] (`-`) reads standard
/// input, reported as `<stdin>`.
pub fn check_file(path: &Path, options: &CheckOptions) -> Result<FileReport, CheckError> {
    if path == Path::new(STDIN) {
        let bytes = read_capped(std::io::stdin().lock(), path, MAX_MANIFEST_BYTES)?;
        return Ok(check_bytes(STDIN_NAME, &bytes, options));
    }
    let bytes = read_file_capped(path, MAX_MANIFEST_BYTES)?;
    Ok(check_bytes(&path.display().to_string(), &bytes, options))
}

/// The file name that stands for standard input.
pub const STDIN: &str = "-";
/// The name standard input has in reports.
pub const STDIN_NAME: &str = "<stdin>";

/// The bytes of the file at `path`, refused past `limit` without reading further.
fn read_file_capped(path: &Path, limit: u64) -> Result<Vec<u8>, CheckError> {
    let file = std::fs::File::open(path).map_err(|source| CheckError::Read {
        path: path.to_owned(),
        source,
    })?;
    read_capped(file, path, limit)
}

/// The bytes of `reader` (named `path` in errors), refused past `limit` without reading further.
fn read_capped(reader: impl std::io::Read, path: &Path, limit: u64) -> Result<Vec<u8>, CheckError> {
    use std::io::Read as _;
    let read_error = |source| CheckError::Read {
        path: path.to_owned(),
        source,
    };
    let mut bytes = Vec::new();
    reader
        .take(limit.saturating_add(1))
        .read_to_end(&mut bytes)
        .map_err(read_error)?;
    if bytes.len() as u64 > limit {
        return Err(CheckError::TooLarge {
            path: path.to_owned(),
            limit,
        });
    }
    Ok(bytes)
}

/// Check manifest bytes. `file` names the manifest in reports. Never panics, whatever the bytes.
pub fn check_bytes(file: &str, bytes: &[u8], options: &CheckOptions) -> FileReport {
    let source = String::from_utf8_lossy(bytes).into_owned();
    let lines = LineIndex::new(&source);
    let (findings, omitted) = {
        let mut sink = Sink::new(&source, &lines, options.strict);
        match parse::parse(bytes) {
            Err(error) => {
                let rule = match error.kind {
                    SyntaxErrorKind::Bom => Rule::JsonBom,
                    SyntaxErrorKind::Utf8 => Rule::JsonUtf8,
                    SyntaxErrorKind::Comment => Rule::JsonComment,
                    SyntaxErrorKind::TrailingComma => Rule::JsonTrailingComma,
                    SyntaxErrorKind::Depth => Rule::JsonDepth,
                    SyntaxErrorKind::Grammar => Rule::JsonSyntax,
                };
                let width = source
                    .get(error.offset..)
                    .and_then(|s| s.chars().next())
                    .map_or(0, char::len_utf8);
                sink.add(
                    rule,
                    "",
                    Span::new(error.offset, error.offset + width),
                    error.message,
                )
                .expected(error.expected)
                .found(error.found);
            }
            Ok(root) => {
                let doc = rules::Doc::new(&root);
                rules::check_document(&doc, options, &mut sink);
                if let Some(dir) = &options.root {
                    root_check::check(&doc, dir, &options.limits, &mut sink);
                }
                fold::add_schema_findings(&root, &mut sink);
            }
        }
        sink.finish()
    };
    FileReport {
        file: file.to_owned(),
        source,
        lines,
        findings,
        omitted,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_that_never_ends_is_refused_after_the_limit() {
        let endless = Path::new("/dev/zero");
        let refused = read_file_capped(endless, 1000);
        assert!(
            matches!(&refused, Err(CheckError::TooLarge { limit: 1000, .. })),
            "{refused:?}"
        );
    }

    #[test]
    fn a_file_of_exactly_the_limit_is_read_whole() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("m.json");
        std::fs::write(&path, [b' '; 1000]).unwrap();
        assert_eq!(read_file_capped(&path, 1000).unwrap().len(), 1000);
        assert!(matches!(
            read_file_capped(&path, 999),
            Err(CheckError::TooLarge { limit: 999, .. })
        ));
        assert!(matches!(
            read_file_capped(&dir.path().join("missing.json"), 1000),
            Err(CheckError::Read { .. })
        ));
    }
}

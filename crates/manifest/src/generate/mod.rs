//! The publishing helper behind `registry-check generate`: build the manifest and the packages from a
//! checkout, write them, or tell whether the committed ones are stale.
//!
//! Layout read (folders configurable, see [`GenerateConfig`]):
//! - `skills/<name>/SKILL.md`: front matter `name`, `description`, and under `metadata:` `version`
//!   (required), `title` (else the first `# ` heading, else the name), `tags`, `agents`, `api_docs`
//!   (YAML lists or comma-separated strings) and `updated_at`.
//! - `apis/<language>/<id>.md`: front matter `title`, `product`, optional `tags` and `source_urls`.
//!
//! Written: `packages/<name>.zip` per skill ([`pack_skill`]) and the manifest (pretty JSON, fixed key order,
//! trailing newline).

mod config;
mod pack;

pub use config::{CONFIG_FILE, ConfigFile, GenerateConfig, RepositoryOverrides};
pub use pack::pack_skill;

use std::path::{Path, PathBuf};

use chrono::{DateTime, SecondsFormat, Utc};
use sha2::{Digest, Sha256};

use crate::finding::quote;
use crate::frontmatter::{self, FrontMatter};
use crate::model::{Api, Manifest, Skill};
use crate::rules::paths::path_error;
use crate::rules::text::slug_problem;

/// Why generating failed.
#[derive(Debug, thiserror::Error)]
pub enum GenerateError {
    /// A file or folder could not be read or written.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file or folder.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The configuration is incomplete or invalid.
    #[error("configuration: {0}")]
    Config(String),
    /// A skill or API document cannot be used.
    #[error("{}: {message}", path.display())]
    Skill {
        /// The file concerned.
        path: PathBuf,
        /// What is wrong.
        message: String,
    },
    /// Writing a zip failed.
    #[error("zip: {0}")]
    Zip(String),
}

/// A freshly built manifest with its package bytes.
#[derive(Debug, Clone)]
pub struct Generated {
    /// The manifest.
    pub manifest: Manifest,
    /// `(path relative to the root, zip bytes)` per skill, in manifest order.
    pub packages: Vec<(String, Vec<u8>)>,
}

/// Build the manifest and packages of the checkout at `root`.
///
/// # Errors
///
/// Unreadable files, SKILL.md without usable front matter, API documents without title or product.
pub fn build(root: &Path, config: &GenerateConfig, generated_at: &str) -> Result<Generated, GenerateError> {
    let mut skills = Vec::new();
    let mut packages = Vec::new();
    for folder in sorted_children(&root.join(&config.skills_dir), true)? {
        let skill_md = folder.join("SKILL.md");
        if !skill_md.is_file() {
            continue;
        }
        let front = read_front(&skill_md)?;
        let field = |key: &str| {
            front
                .str(key)
                .map(str::to_owned)
                .ok_or_else(|| GenerateError::Skill {
                    path: skill_md.clone(),
                    message: format!("the front matter has no string `{key}`"),
                })
        };
        let name = field("name")?;
        let description = field("description")?.trim().to_owned();
        let version = front
            .metadata_str("version")
            .ok_or_else(|| GenerateError::Skill {
                path: skill_md.clone(),
                message: "the front matter has no `metadata: {version: ...}` (SemVer, e.g. 1.0.0)".to_owned(),
            })?;
        let folder_name = folder
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or_default()
            .to_owned();
        let package = package_path(config, &name).map_err(|message| GenerateError::Skill {
            path: skill_md.clone(),
            message,
        })?;
        let bytes = pack_skill(&folder, &name)?;
        skills.push(Skill {
            title: front
                .metadata_str("title")
                .or_else(|| front.first_heading())
                .unwrap_or_else(|| name.clone()),
            version,
            description,
            path: format!("{}/{folder_name}", config.skills_dir.trim_end_matches('/')),
            package: package.clone(),
            sha256: hex::encode(Sha256::digest(&bytes)),
            size_bytes: Some(bytes.len() as u64),
            api_docs: front.metadata_list("api_docs"),
            tags: front.metadata_list("tags"),
            agents: front.metadata_list("agents"),
            updated_at: front.metadata_str("updated_at"),
            name,
        });
        packages.push((package, bytes));
    }
    let mut apis = Vec::new();
    for language_dir in sorted_children(&root.join(&config.apis_dir), true)? {
        let language = language_dir
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or_default()
            .to_owned();
        for file in sorted_children(&language_dir, false)? {
            let (Some(id), Some("md")) = (
                file.file_stem().and_then(|s| s.to_str()),
                file.extension().and_then(|e| e.to_str()),
            ) else {
                continue;
            };
            let front = read_front(&file)?;
            let field = |key: &str| {
                front
                    .map
                    .get(key)
                    .and_then(frontmatter::scalar)
                    .ok_or_else(|| GenerateError::Skill {
                        path: file.clone(),
                        message: format!("the front matter has no `{key}`"),
                    })
            };
            apis.push(Api {
                id: id.to_owned(),
                title: field("title")?,
                product: field("product")?,
                language: language.clone(),
                path: format!("{}/{language}/{id}.md", config.apis_dir.trim_end_matches('/')),
                tags: front.map.get("tags").map(frontmatter::list).unwrap_or_default(),
                source_urls: front
                    .map
                    .get("source_urls")
                    .map(frontmatter::list)
                    .unwrap_or_default(),
            });
        }
    }
    let manifest = Manifest {
        schema_version: config.schema_version.clone(),
        generated_at: generated_at.to_owned(),
        repository: config.repository.clone(),
        skills,
        apis,
    };
    Ok(Generated { manifest, packages })
}

/// `<packages_dir>/<name>.zip`, or why the front-matter `name` cannot name a package file safely (the
/// name must be a slug, so it cannot leave the packages folder; the whole path must be a safe relative path).
fn package_path(config: &GenerateConfig, name: &str) -> Result<String, String> {
    if let Some(why) = slug_problem(name) {
        return Err(format!(
            "the front matter's name {} cannot name a package: {why} (R-SKILL-NAME); nothing was written",
            quote(name)
        ));
    }
    let package = format!("{}/{name}.zip", config.packages_dir.trim_end_matches('/'));
    safe_relative(&package)?;
    Ok(package)
}

/// `Err` with the reason when `path` is not a safe path relative to the root (an error of the path rules).
fn safe_relative(path: &str) -> Result<(), String> {
    match path_error(path) {
        Some((rule, why)) => Err(format!(
            "{} is not a safe path relative to the root: {why} ({}); nothing was written",
            quote(path),
            rule.id()
        )),
        None => Ok(()),
    }
}

fn read_front(path: &Path) -> Result<FrontMatter, GenerateError> {
    let text = std::fs::read_to_string(path).map_err(|source| GenerateError::Io {
        path: path.to_owned(),
        source,
    })?;
    frontmatter::read(&text).map_err(|e| GenerateError::Skill {
        path: path.to_owned(),
        message: e.to_string(),
    })
}

/// The sub-folders (`dirs`) or files of `dir`, sorted by name; nothing when `dir` does not exist.
fn sorted_children(dir: &Path, dirs: bool) -> Result<Vec<PathBuf>, GenerateError> {
    let io = |source| GenerateError::Io {
        path: dir.to_owned(),
        source,
    };
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(io(e)),
    };
    let mut children = Vec::new();
    for entry in entries {
        let path = entry.map_err(io)?.path();
        if (dirs && path.is_dir()) || (!dirs && path.is_file()) {
            children.push(path);
        }
    }
    children.sort();
    Ok(children)
}

/// The `generated_at` to write: `SOURCE_DATE_EPOCH` if set, else the committed manifest's value when
/// nothing else changed (so regenerating an unchanged checkout changes no byte), else now.
pub fn choose_generated_at(
    fresh_without_time: &Manifest,
    committed: Option<&str>,
    now: DateTime<Utc>,
) -> String {
    if let Some(epoch) = std::env::var("SOURCE_DATE_EPOCH")
        .ok()
        .and_then(|s| s.trim().parse::<i64>().ok())
        && let Some(time) = DateTime::<Utc>::from_timestamp(epoch, 0)
    {
        return time.to_rfc3339_opts(SecondsFormat::Secs, true);
    }
    if let Some(previous) = committed.and_then(committed_generated_at) {
        let mut candidate = fresh_without_time.clone();
        candidate.generated_at = previous.clone();
        if committed == Some(candidate.to_json_pretty().as_str()) {
            return previous;
        }
    }
    now.to_rfc3339_opts(SecondsFormat::Secs, true)
}

fn committed_generated_at(text: &str) -> Option<String> {
    let value: serde_json::Value = serde_json::from_str(text).ok()?;
    value.get("generated_at")?.as_str().map(str::to_owned)
}

/// Whether `committed` differs from `fresh` in anything but `generated_at` (bytes compared, so key order
/// and formatting count too).
pub fn is_stale(committed: &str, fresh: &Manifest) -> bool {
    let Some(previous) = committed_generated_at(committed) else {
        return true;
    };
    let mut candidate = fresh.clone();
    candidate.generated_at = previous;
    candidate.to_json_pretty() != committed
}

/// Write the packages and the manifest under `root`. Nothing is written unless every path is a safe path
/// relative to the root.
///
/// # Errors
///
/// A path that could leave the root ([`GenerateError::Config`]), or a file or folder cannot be written.
pub fn write(root: &Path, config: &GenerateConfig, generated: &Generated) -> Result<(), GenerateError> {
    for relative in generated
        .packages
        .iter()
        .map(|(relative, _)| relative)
        .chain(std::iter::once(&config.output))
    {
        safe_relative(relative).map_err(GenerateError::Config)?;
    }
    for (relative, bytes) in &generated.packages {
        let path = root.join(relative);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).map_err(|source| GenerateError::Io {
                path: parent.to_owned(),
                source,
            })?;
        }
        std::fs::write(&path, bytes).map_err(|source| GenerateError::Io { path, source })?;
    }
    let path = root.join(&config.output);
    std::fs::write(&path, generated.manifest.to_json_pretty())
        .map_err(|source| GenerateError::Io { path, source })
}

/// The packages whose file under `root` differs from the fresh build (missing files included).
pub fn stale_packages(root: &Path, generated: &Generated) -> Vec<String> {
    generated
        .packages
        .iter()
        .filter(|(relative, bytes)| {
            let fresh = hex::encode(Sha256::digest(bytes));
            let path = root.join(relative);
            // Not a regular file (a folder, a FIFO that would block the read): stale.
            !path.is_file()
                || crate::root_check::hash_file(&path).map_or(true, |(_, on_disk)| on_disk != fresh)
        })
        .map(|(relative, _)| relative.clone())
        .collect()
}

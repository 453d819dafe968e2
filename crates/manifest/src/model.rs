//! The typed model of the registry manifest.
//!
//! Field order is the key order the generator writes. Deserializing does not check the rules: run the
//! checker ([`crate::check_bytes`]) first, then read the typed model from a manifest without errors.

use serde::{Deserialize, Serialize};

/// A registry manifest: a catalog of installable skills and API documents from one git repository.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Manifest {
    /// Format version: `"1"` or `"1.<minor>"`.
    pub schema_version: String,
    /// When the manifest was generated (RFC 3339 with offset).
    pub generated_at: String,
    /// Where the skills are published.
    pub repository: Repository,
    /// The installable skills.
    pub skills: Vec<Skill>,
    /// The API documents.
    pub apis: Vec<Api>,
}

/// The repository the manifest describes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Repository {
    /// Repository name, as in the clone URL.
    pub name: String,
    /// Clone URL (`https://...`, `ssh://...` or `git@host:owner/repo.git`).
    pub git_url: String,
    /// Absolute https URL files are served from.
    pub raw_base_url: String,
    /// The branch the manifest describes.
    pub branch: String,
}

/// One installable skill.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Skill {
    /// Skill name (agentskills rules), equal to its folder name.
    pub name: String,
    /// SemVer 2.0 version.
    pub version: String,
    /// Human-readable title.
    pub title: String,
    /// What the skill does and when to use it.
    pub description: String,
    /// The skill folder, relative to the repository root.
    pub path: String,
    /// The `.zip` package, relative to the repository root.
    pub package: String,
    /// SHA-256 of the package file, 64 lowercase hex digits.
    pub sha256: String,
    /// Length of the package file in bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub size_bytes: Option<u64>,
    /// Ids of the `apis[]` entries this skill uses.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub api_docs: Vec<String>,
    /// Free-form tags.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tags: Vec<String>,
    /// Agents the skill is meant for.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub agents: Vec<String>,
    /// When the skill last changed (RFC 3339 with offset).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub updated_at: Option<String>,
}

/// One API document.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Api {
    /// Unique slug that skills refer to.
    pub id: String,
    /// Human-readable title.
    pub title: String,
    /// The product the API belongs to.
    pub product: String,
    /// BCP 47 language tag.
    pub language: String,
    /// The Markdown document, relative to the repository root.
    pub path: String,
    /// Free-form tags.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tags: Vec<String>,
    /// Where the document's content comes from.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub source_urls: Vec<String>,
}

/// Agent names `skills[].agents` may use without a warning.
pub const KNOWN_AGENTS: &[&str] = &[
    "amp",
    "claude-code",
    "cline",
    "codex",
    "cursor",
    "gemini-cli",
    "github-copilot",
    "goose",
    "opencode",
    "windsurf",
];

/// The keys each object of the format defines.
pub mod keys {
    /// Top-level keys.
    pub const TOP: &[&str] = &["schema_version", "generated_at", "repository", "skills", "apis"];
    /// Keys of `repository`.
    pub const REPOSITORY: &[&str] = &["name", "git_url", "raw_base_url", "branch"];
    /// Keys of `skills[]`.
    pub const SKILL: &[&str] = &[
        "name",
        "version",
        "title",
        "description",
        "path",
        "package",
        "sha256",
        "size_bytes",
        "api_docs",
        "tags",
        "agents",
        "updated_at",
    ];
    /// Keys of `apis[]`.
    pub const API: &[&str] = &[
        "id",
        "title",
        "product",
        "language",
        "path",
        "tags",
        "source_urls",
    ];
}

impl Manifest {
    /// The manifest as pretty JSON with keys in the fixed order and a trailing newline.
    pub fn to_json_pretty(&self) -> String {
        let mut text = serde_json::to_string_pretty(self).unwrap_or_default();
        text.push('\n');
        text
    }
}

impl Repository {
    /// The download URL of a file: `raw_base_url` without trailing `/`, then `/`, then each segment of
    /// `relative_path` percent-encoded. (`Url::join` would drop the base's last segment.)
    ///
    /// ```
    /// # use imagegate_manifest::model::Repository;
    /// let repo = Repository {
    ///     name: "skills".into(),
    ///     git_url: "https://github.com/acme/skills.git".into(),
    ///     raw_base_url: "https://raw.githubusercontent.com/acme/skills/main/".into(),
    ///     branch: "main".into(),
    /// };
    /// assert_eq!(
    ///     repo.download_url("packages/my skill.zip"),
    ///     "https://raw.githubusercontent.com/acme/skills/main/packages/my%20skill.zip"
    /// );
    /// ```
    pub fn download_url(&self, relative_path: &str) -> String {
        let mut url = self.raw_base_url.trim_end_matches('/').to_owned();
        for segment in relative_path.split('/') {
            url.push('/');
            url.push_str(&percent_encode(segment));
        }
        url
    }
}

fn percent_encode(segment: &str) -> String {
    let mut out = String::with_capacity(segment.len());
    for byte in segment.bytes() {
        if byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'.' | b'_' | b'~') {
            out.push(byte as char);
        } else {
            out.push_str(&format!("%{byte:02X}"));
        }
    }
    out
}

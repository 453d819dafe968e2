//! The generator's settings: `registry.yaml` in the repository root, overridden by command-line flags.

use std::path::Path;

use serde::Deserialize;

use super::GenerateError;
use crate::model::Repository;

/// Default name of the config file in the repository root.
pub const CONFIG_FILE: &str = "registry.yaml";

/// Everything the generator needs besides the files.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GenerateConfig {
    /// The `repository` object of the manifest.
    pub repository: Repository,
    /// The `schema_version` to write.
    pub schema_version: String,
    /// The manifest file, relative to the root.
    pub output: String,
    /// Folder of the skill folders, relative to the root.
    pub skills_dir: String,
    /// Folder of the API documents (`<language>/<id>.md`), relative to the root.
    pub apis_dir: String,
    /// Folder the packages are written to, relative to the root.
    pub packages_dir: String,
}

/// The config file, every field optional.
#[derive(Debug, Clone, Default, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct ConfigFile {
    /// Repository fields.
    #[serde(default)]
    pub repository: RepositoryOverrides,
    /// `schema_version`, default "1".
    pub schema_version: Option<String>,
    /// Manifest file, default `registry.json`.
    pub output: Option<String>,
    /// Skills folder, default `skills`.
    pub skills_dir: Option<String>,
    /// API documents folder, default `apis`.
    pub apis_dir: Option<String>,
    /// Packages folder, default `packages`.
    pub packages_dir: Option<String>,
}

/// Repository fields from the config file or flags.
#[derive(Debug, Clone, Default, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct RepositoryOverrides {
    /// `repository.name`.
    pub name: Option<String>,
    /// `repository.git_url`.
    pub git_url: Option<String>,
    /// `repository.raw_base_url`.
    pub raw_base_url: Option<String>,
    /// `repository.branch`.
    pub branch: Option<String>,
}

impl ConfigFile {
    /// Read a config file; a missing file at the default place is an empty config.
    ///
    /// # Errors
    ///
    /// The file cannot be read or is not valid YAML of the expected shape.
    pub fn load(path: &Path, required: bool) -> Result<Self, GenerateError> {
        let text = match std::fs::read_to_string(path) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound && !required => return Ok(Self::default()),
            Err(source) => {
                return Err(GenerateError::Io {
                    path: path.to_owned(),
                    source,
                });
            }
        };
        serde_yaml_ng::from_str(&text).map_err(|e| GenerateError::Config(format!("{}: {e}", path.display())))
    }

    /// Apply `flags` over this file and fill in defaults.
    ///
    /// # Errors
    ///
    /// [`GenerateError::Config`] naming the repository fields that neither the file nor the flags give.
    pub fn resolve(
        self,
        flags: &RepositoryOverrides,
        output: Option<String>,
    ) -> Result<GenerateConfig, GenerateError> {
        let pick = |flag: &Option<String>, file: &Option<String>| flag.clone().or_else(|| file.clone());
        let file = &self.repository;
        let fields = [
            ("name", pick(&flags.name, &file.name)),
            ("git_url", pick(&flags.git_url, &file.git_url)),
            ("raw_base_url", pick(&flags.raw_base_url, &file.raw_base_url)),
            ("branch", pick(&flags.branch, &file.branch)),
        ];
        let missing: Vec<&str> = fields
            .iter()
            .filter(|(_, v)| v.is_none())
            .map(|(k, _)| *k)
            .collect();
        if !missing.is_empty() {
            return Err(GenerateError::Config(format!(
                "repository {} not given: set them under `repository:` in {CONFIG_FILE} or with --name, --git-url, \
                 --raw-base-url, --branch",
                missing.join(", ")
            )));
        }
        let [(_, name), (_, git_url), (_, raw_base_url), (_, branch)] = fields;
        Ok(GenerateConfig {
            repository: Repository {
                name: name.unwrap_or_default(),
                git_url: git_url.unwrap_or_default(),
                raw_base_url: raw_base_url.unwrap_or_default(),
                branch: branch.unwrap_or_default(),
            },
            schema_version: self.schema_version.unwrap_or_else(|| "1".to_owned()),
            output: output
                .or(self.output)
                .unwrap_or_else(|| "registry.json".to_owned()),
            skills_dir: self.skills_dir.unwrap_or_else(|| "skills".to_owned()),
            apis_dir: self.apis_dir.unwrap_or_else(|| "apis".to_owned()),
            packages_dir: self.packages_dir.unwrap_or_else(|| "packages".to_owned()),
        })
    }
}

//! Fixture builders: a valid registry checkout in a temporary folder, and ways to break it.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};

use imagegate_manifest::generate::{self, GenerateConfig};
use imagegate_manifest::model::Repository;
use imagegate_manifest::{CheckOptions, FileReport, PackageLimits, check_bytes};
use serde_json::{Map, Value};
use zip::write::SimpleFileOptions;

/// The fixed `generated_at` of fixtures.
pub const GENERATED_AT: &str = "2026-02-01T10:00:00Z";

/// A registry checkout in a temporary folder plus its manifest, which tests may change before checking.
pub struct Checkout {
    pub dir: tempfile::TempDir,
    /// The manifest as a JSON value (serialized pretty when checked).
    pub manifest: Value,
    /// Raw bytes to check instead of the serialized manifest.
    pub raw: Option<Vec<u8>>,
    /// Text replacements applied to the serialized manifest (for numbers `serde_json` cannot write).
    pub replacements: Vec<(String, String)>,
    /// Package limits for the check.
    pub limits: PackageLimits,
}

pub fn repository() -> Repository {
    Repository {
        name: "agent-skills".into(),
        git_url: "https://github.com/acme/agent-skills.git".into(),
        raw_base_url: "https://raw.githubusercontent.com/acme/agent-skills/main".into(),
        branch: "main".into(),
    }
}

pub fn config() -> GenerateConfig {
    GenerateConfig {
        repository: repository(),
        schema_version: "1".into(),
        output: "registry.json".into(),
        skills_dir: "skills".into(),
        apis_dir: "apis".into(),
        packages_dir: "packages".into(),
    }
}

pub fn write_file(path: &Path, text: &str) {
    fs::create_dir_all(path.parent().unwrap()).unwrap();
    fs::write(path, text).unwrap();
}

/// SKILL.md text with the given front matter name.
pub fn skill_md(name: &str, description: &str, extra_metadata: &str) -> String {
    format!(
        "---\nname: {name}\ndescription: {description}\nlicense: Apache-2.0\nmetadata:\n  version: 1.2.0\n{extra_metadata}---\n\n# {name} title\n\nSteps for the agent.\n"
    )
}

/// Write the source files of the valid checkout under `root` (no packages, no manifest).
pub fn write_sources(root: &Path) {
    write_file(
        &root.join("skills/pdf-tools/SKILL.md"),
        &skill_md(
            "pdf-tools",
            "Fill, merge and split PDF files.",
            "  title: PDF tools\n  tags: [pdf, documents]\n  agents: [claude-code, codex]\n  api_docs: [images-api]\n  updated_at: 2026-01-20T08:00:00Z\n",
        ),
    );
    write_file(
        &root.join("skills/pdf-tools/scripts/merge.py"),
        "print('merge')\n",
    );
    write_file(
        &root.join("skills/web-search/SKILL.md"),
        &skill_md(
            "web-search",
            "Search the web and cite sources.",
            "  tags: search\n  api_docs: search-api\n",
        ),
    );
    write_file(
        &root.join("apis/en/images-api.md"),
        "---\ntitle: Images API\nproduct: Image Gateway\ntags: [images]\nsource_urls:\n  - https://docs.example.com/images\n---\n# Images API\n",
    );
    write_file(
        &root.join("apis/zh-CN/search-api.md"),
        "---\ntitle: Search API\nproduct: Search\n---\n# Search API\n",
    );
}

impl Checkout {
    /// A valid checkout: sources, packages and manifest built by the generator, generated_at fixed.
    pub fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        write_sources(dir.path());
        let generated = generate::build(dir.path(), &config(), GENERATED_AT).unwrap();
        generate::write(dir.path(), &config(), &generated).unwrap();
        let manifest = serde_json::to_value(&generated.manifest).unwrap();
        Self {
            dir,
            manifest,
            raw: None,
            replacements: Vec::new(),
            limits: PackageLimits::default(),
        }
    }

    pub fn root(&self) -> &Path {
        self.dir.path()
    }

    pub fn path(&self, relative: &str) -> PathBuf {
        self.root().join(relative)
    }

    pub fn skill(&mut self, index: usize) -> &mut Map<String, Value> {
        self.manifest["skills"][index].as_object_mut().unwrap()
    }

    pub fn api(&mut self, index: usize) -> &mut Map<String, Value> {
        self.manifest["apis"][index].as_object_mut().unwrap()
    }

    /// The serialized manifest text (pretty JSON plus replacements), ignoring `raw`.
    pub fn text(&self) -> String {
        let mut text = serde_json::to_string_pretty(&self.manifest).unwrap();
        text.push('\n');
        for (from, to) in &self.replacements {
            assert!(
                text.contains(from.as_str()),
                "replacement target {from} not in manifest"
            );
            text = text.replace(from.as_str(), to);
        }
        text
    }

    /// The bytes that are checked.
    pub fn bytes(&self) -> Vec<u8> {
        self.raw.clone().unwrap_or_else(|| self.text().into_bytes())
    }

    pub fn options(&self, with_root: bool) -> CheckOptions {
        CheckOptions {
            root: with_root.then(|| self.root().to_owned()),
            limits: self.limits,
            ..CheckOptions::default()
        }
    }

    /// Check with `--root`.
    pub fn check(&self) -> FileReport {
        check_bytes("registry.json", &self.bytes(), &self.options(true))
    }

    /// Check the manifest alone.
    pub fn check_offline(&self) -> FileReport {
        check_bytes("registry.json", &self.bytes(), &self.options(false))
    }

    /// Write the checked bytes to `<root>/registry.json` and return its path.
    pub fn write_manifest(&self) -> PathBuf {
        let path = self.path("registry.json");
        fs::write(&path, self.bytes()).unwrap();
        path
    }

    /// Replace a package with a zip of the given entries (`(name, content)`; content `None` = symlink).
    pub fn replace_package(&self, skill: &str, entries: &[(&str, Option<&str>)]) {
        write_zip(&self.path(&format!("packages/{skill}.zip")), entries);
    }
}

/// Write a zip with `entries` (`None` content makes a symbolic link to `target`).
pub fn write_zip(path: &Path, entries: &[(&str, Option<&str>)]) {
    let file = fs::File::create(path).unwrap();
    let mut zip = zip::ZipWriter::new(file);
    let options = SimpleFileOptions::default();
    for (name, content) in entries {
        match content {
            Some(text) => {
                zip.start_file(*name, options).unwrap();
                zip.write_all(text.as_bytes()).unwrap();
            }
            None => zip.add_symlink(*name, "/etc/passwd", options).unwrap(),
        }
    }
    zip.finish().unwrap();
}

/// Write a zip with `entries`, then rename every entry named `from` to `to` (same length) in the bytes,
/// which makes duplicate names that `zip::ZipWriter` refuses to write.
pub fn write_zip_renamed(path: &Path, entries: &[(&str, Option<&str>)], from: &str, to: &str) {
    assert_eq!(from.len(), to.len());
    write_zip(path, entries);
    let mut bytes = fs::read(path).unwrap();
    let (from, to) = (from.as_bytes(), to.as_bytes());
    let mut at = 0;
    while let Some(found) = bytes[at..].windows(from.len()).position(|w| w == from) {
        bytes[at + found..at + found + to.len()].copy_from_slice(to);
        at += found + to.len();
    }
    fs::write(path, bytes).unwrap();
}

/// The rule ids of a report, in order.
pub fn rule_ids(report: &FileReport) -> Vec<&'static str> {
    report.findings.iter().map(|f| f.rule.id()).collect()
}

//! The publishing helper: deterministic packages and the manifest built from a checkout.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::disallowed_methods
)]

mod support;

use std::io::Read;

use imagegate_manifest::generate::{self, pack_skill};
use sha2::{Digest, Sha256};
use support::{Checkout, GENERATED_AT, config, write_file, write_sources};

#[test]
fn packing_is_deterministic_and_independent_of_file_times() {
    let checkout = Checkout::new();
    let folder = checkout.path("skills/pdf-tools");
    let first = pack_skill(&folder, "pdf-tools").unwrap();
    let file = std::fs::File::options()
        .write(true)
        .open(folder.join("SKILL.md"))
        .unwrap();
    file.set_modified(std::time::SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(1_000_000))
        .unwrap();
    let second = pack_skill(&folder, "pdf-tools").unwrap();
    assert_eq!(Sha256::digest(&first), Sha256::digest(&second));
    // The committed package is the same bytes.
    assert_eq!(
        std::fs::read(checkout.path("packages/pdf-tools.zip")).unwrap(),
        first
    );
}

#[test]
fn packages_hold_sorted_files_under_the_skill_name_without_junk() {
    let checkout = Checkout::new();
    let folder = checkout.path("skills/pdf-tools");
    write_file(&folder.join(".DS_Store"), "junk");
    write_file(&folder.join("__pycache__/x.pyc"), "junk");
    let bytes = pack_skill(&folder, "pdf-tools").unwrap();
    let mut archive = zip::ZipArchive::new(std::io::Cursor::new(bytes)).unwrap();
    let mut ordered = Vec::new();
    for i in 0..archive.len() {
        let entry = archive.by_index(i).unwrap();
        ordered.push(entry.name().unwrap().into_owned());
        assert_eq!(entry.last_modified().unwrap(), zip::DateTime::default());
        assert_eq!(entry.unix_mode().unwrap() & 0o777, 0o644);
    }
    assert_eq!(ordered, ["pdf-tools/SKILL.md", "pdf-tools/scripts/merge.py"]);
    assert_eq!(archive.len(), 2);
    let mut text = String::new();
    archive
        .by_name("pdf-tools/SKILL.md")
        .unwrap()
        .read_to_string(&mut text)
        .unwrap();
    assert!(text.starts_with("---\nname: pdf-tools\n"));
}

#[cfg(unix)]
#[test]
fn symlinks_are_refused() {
    let checkout = Checkout::new();
    let folder = checkout.path("skills/pdf-tools");
    std::os::unix::fs::symlink("/etc/hostname", folder.join("link")).unwrap();
    let error = pack_skill(&folder, "pdf-tools").unwrap_err().to_string();
    assert!(error.contains("symbolic links cannot be packed"), "{error}");
}

#[test]
fn the_manifest_takes_its_fields_from_front_matter() {
    let dir = tempfile::tempdir().unwrap();
    write_sources(dir.path());
    let generated = generate::build(dir.path(), &config(), GENERATED_AT).unwrap();
    let m = &generated.manifest;
    let names: Vec<&str> = m.skills.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, ["pdf-tools", "web-search"]);
    let pdf = &m.skills[0];
    assert_eq!((pdf.version.as_str(), pdf.title.as_str()), ("1.2.0", "PDF tools"));
    assert_eq!(pdf.agents, ["claude-code", "codex"]);
    assert_eq!(pdf.api_docs, ["images-api"]);
    assert_eq!(pdf.updated_at.as_deref(), Some("2026-01-20T08:00:00Z"));
    assert_eq!(pdf.sha256, hex::encode(Sha256::digest(&generated.packages[0].1)));
    assert_eq!(pdf.size_bytes, Some(generated.packages[0].1.len() as u64));
    let web = &m.skills[1];
    assert_eq!(
        (web.title.as_str(), web.tags.clone()),
        ("web-search title", vec!["search".to_owned()])
    );
    let apis: Vec<(&str, &str, &str)> = m
        .apis
        .iter()
        .map(|a| (a.id.as_str(), a.language.as_str(), a.path.as_str()))
        .collect();
    assert_eq!(
        apis,
        [
            ("images-api", "en", "apis/en/images-api.md"),
            ("search-api", "zh-CN", "apis/zh-CN/search-api.md")
        ]
    );
    assert_eq!(m.apis[0].source_urls, ["https://docs.example.com/images"]);
    let text = m.to_json_pretty();
    assert!(
        text.starts_with("{\n  \"schema_version\": \"1\",\n  \"generated_at\": "),
        "{text}"
    );
    assert!(text.ends_with("]\n}\n"));
}

#[test]
fn a_skill_without_version_is_an_error_that_names_the_file() {
    let dir = tempfile::tempdir().unwrap();
    write_file(
        &dir.path().join("skills/x/SKILL.md"),
        "---\nname: x\ndescription: y\n---\n",
    );
    let error = generate::build(dir.path(), &config(), GENERATED_AT)
        .unwrap_err()
        .to_string();
    assert!(
        error.contains("skills/x/SKILL.md") && error.contains("metadata"),
        "{error}"
    );
}

#[test]
fn staleness_ignores_generated_at_only() {
    let dir = tempfile::tempdir().unwrap();
    write_sources(dir.path());
    let generated = generate::build(dir.path(), &config(), GENERATED_AT).unwrap();
    let committed = generated.manifest.to_json_pretty();
    let mut later = generated.manifest.clone();
    later.generated_at = "2030-01-01T00:00:00Z".into();
    assert!(!generate::is_stale(&committed, &later));
    later.skills[0].version = "1.2.1".into();
    assert!(generate::is_stale(&committed, &later));
    assert!(generate::is_stale("not json", &generated.manifest));
    assert!(generate::is_stale(
        &committed.replace("\n", "\r\n"),
        &generated.manifest
    ));
}

#[test]
fn generated_at_is_kept_when_nothing_changed() {
    let dir = tempfile::tempdir().unwrap();
    write_sources(dir.path());
    let generated = generate::build(dir.path(), &config(), GENERATED_AT).unwrap();
    let committed = generated.manifest.to_json_pretty();
    let now = chrono::DateTime::parse_from_rfc3339("2026-06-01T00:00:00Z")
        .unwrap()
        .to_utc();
    let mut fresh = generated.manifest.clone();
    fresh.generated_at = String::new();
    assert_eq!(
        generate::choose_generated_at(&fresh, Some(&committed), now),
        GENERATED_AT
    );
    fresh.skills[0].title = "Changed".into();
    assert_eq!(
        generate::choose_generated_at(&fresh, Some(&committed), now),
        "2026-06-01T00:00:00Z"
    );
}

#[test]
fn a_front_matter_name_that_leaves_the_root_is_refused_before_anything_is_written() {
    let outer = tempfile::tempdir().unwrap();
    let root = outer.path().join("checkout");
    write_file(
        &root.join("skills/evil/SKILL.md"),
        "---\nname: ../../escaped\ndescription: y\nmetadata:\n  version: 1.0.0\n---\n",
    );
    let result = generate::build(&root, &config(), GENERATED_AT);
    if let Ok(generated) = &result {
        let _ = generate::write(&root, &config(), generated);
    }
    assert!(
        !outer.path().join("escaped.zip").exists(),
        "a package was written outside the root"
    );
    assert!(!root.join("registry.json").exists());
    let error = result.unwrap_err().to_string();
    assert!(
        error.contains("skills/evil/SKILL.md") && error.contains("R-SKILL-NAME"),
        "{error}"
    );
}

#[test]
fn write_refuses_paths_that_leave_the_root() {
    let outer = tempfile::tempdir().unwrap();
    let root = outer.path().join("checkout");
    std::fs::create_dir_all(&root).unwrap();
    let mut generated = generate::build(&root, &config(), GENERATED_AT).unwrap();
    generated
        .packages
        .push(("packages/../../escaped.zip".into(), b"zip".to_vec()));
    let error = generate::write(&root, &config(), &generated)
        .unwrap_err()
        .to_string();
    assert!(error.contains("R-PATH-PARENT"), "{error}");
    assert!(!outer.path().join("escaped.zip").exists());
    assert!(!root.join("registry.json").exists(), "nothing is written");
}

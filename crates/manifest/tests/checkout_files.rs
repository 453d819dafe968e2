//! `--root` opens only regular files inside the checkout: symbolic links leading outside, FIFOs and oversized
//! SKILL.md files are findings, and the checker neither reads outside the checkout nor blocks.
#![cfg(target_os = "linux")]
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::disallowed_methods
)]

mod support;

use std::fs;
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;

use imagegate_manifest::{FileReport, Rule};
use support::{Checkout, skill_md, write_file};

/// `O_NONBLOCK` on Linux.
const O_NONBLOCK: i32 = 0o4000;

/// The finding of `rule` at `pointer`.
fn finding<'r>(report: &'r FileReport, rule: Rule, pointer: &str) -> &'r imagegate_manifest::Finding {
    report
        .findings
        .iter()
        .find(|f| f.rule == rule && f.pointer == pointer)
        .unwrap_or_else(|| panic!("no {} at {pointer}: {:#?}", rule.id(), report.findings))
}

/// Replace `path` by a FIFO that hands `content` to every reader that opens it, until the returned flag
/// is set. The writer never blocks, so a checker that does not open the FIFO leaves nothing hanging, and a
/// checker that does open it reads `content` instead of blocking forever.
fn fifo_serving(path: &Path, content: Vec<u8>) -> (Arc<AtomicBool>, JoinHandle<()>) {
    fs::remove_file(path).unwrap();
    let status = std::process::Command::new("mkfifo").arg(path).status().unwrap();
    assert!(status.success());
    let stop = Arc::new(AtomicBool::new(false));
    let (flag, path): (_, PathBuf) = (Arc::clone(&stop), path.to_owned());
    let writer = std::thread::spawn(move || {
        while !flag.load(Ordering::Relaxed) {
            // Fails with ENXIO while no reader has the FIFO open.
            match fs::OpenOptions::new()
                .write(true)
                .custom_flags(O_NONBLOCK)
                .open(&path)
            {
                Ok(mut fifo) => {
                    let _ = fifo.write_all(&content);
                }
                Err(_) => std::thread::sleep(std::time::Duration::from_millis(1)),
            }
        }
    });
    (stop, writer)
}

#[test]
fn a_skill_md_linked_to_a_file_outside_the_checkout_is_not_read() {
    let checkout = Checkout::new();
    let outside = tempfile::tempdir().unwrap();
    let target = outside.path().join("SKILL.md");
    let skill = checkout.path("skills/web-search/SKILL.md");
    fs::copy(&skill, &target).unwrap();
    fs::remove_file(&skill).unwrap();
    std::os::unix::fs::symlink(&target, &skill).unwrap();
    let report = checkout.check();
    let missing = finding(&report, Rule::RootSkillMdMissing, "/skills/1/path");
    assert!(
        missing.message.contains("outside the checkout"),
        "{}",
        missing.message
    );
}

#[test]
fn a_skill_md_that_is_a_fifo_is_reported_without_blocking() {
    let checkout = Checkout::new();
    let skill = checkout.path("skills/web-search/SKILL.md");
    let content = fs::read(&skill).unwrap();
    let (stop, writer) = fifo_serving(&skill, content);
    let report = checkout.check();
    stop.store(true, Ordering::Relaxed);
    writer.join().unwrap();
    let missing = finding(&report, Rule::RootSkillMdMissing, "/skills/1/path");
    assert!(
        missing.message.contains("is not a regular file"),
        "{}",
        missing.message
    );
}

#[test]
fn a_package_that_is_a_fifo_is_reported_without_blocking() {
    let checkout = Checkout::new();
    let package = checkout.path("packages/web-search.zip");
    let content = fs::read(&package).unwrap();
    let (stop, writer) = fifo_serving(&package, content);
    let report = checkout.check();
    stop.store(true, Ordering::Relaxed);
    writer.join().unwrap();
    let missing = finding(&report, Rule::RootPackageMissing, "/skills/1/package");
    assert!(
        missing.message.contains("is not a regular file"),
        "{}",
        missing.message
    );
}

#[test]
fn an_oversized_skill_md_is_reported_as_too_large() {
    let checkout = Checkout::new();
    let text = skill_md("web-search", "Search the web and cite sources.", "") + &"x".repeat(1024 * 1024);
    write_file(&checkout.path("skills/web-search/SKILL.md"), &text);
    let report = checkout.check();
    let large = finding(&report, Rule::RootSkillMdMissing, "/skills/1/path");
    assert!(large.message.contains("too large"), "{}", large.message);
    assert_eq!(
        large.found.as_deref(),
        Some(format!("{} bytes", text.len()).as_str())
    );
}

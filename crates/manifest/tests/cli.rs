//! End-to-end tests of the `registry-check` binary: exit codes, formats, --root, generate.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::disallowed_methods
)]

mod support;

use std::path::Path;
use std::process::{Command, Output};

use serde_json::json;
use support::{Checkout, write_file};

fn run(args: &[&str], cwd: &Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_registry-check"))
        .args(args)
        .current_dir(cwd)
        .output()
        .unwrap()
}

fn code(output: &Output) -> i32 {
    output.status.code().unwrap()
}

fn stdout(output: &Output) -> String {
    String::from_utf8(output.stdout.clone()).unwrap()
}

#[test]
fn a_valid_manifest_exits_0_with_and_without_root() {
    let checkout = Checkout::new();
    checkout.write_manifest();
    let offline = run(&["registry.json"], checkout.root());
    assert_eq!(code(&offline), 0, "{}", stdout(&offline));
    assert_eq!(stdout(&offline), "registry.json: no findings\n");
    let with_root = run(&["--root", ".", "registry.json"], checkout.root());
    assert_eq!(code(&with_root), 0, "{}", stdout(&with_root));
}

#[test]
fn errors_exit_1_and_name_the_rule() {
    let mut checkout = Checkout::new();
    checkout.skill(0).insert("version".into(), json!("1.0"));
    checkout.write_manifest();
    let output = run(&["registry.json"], checkout.root());
    assert_eq!(code(&output), 1);
    assert!(
        stdout(&output).contains("error[R-SKILL-VERSION]"),
        "{}",
        stdout(&output)
    );
}

#[test]
fn paths_that_differ_only_in_spelling_are_duplicates_and_exit_1() {
    type Edit = fn(&mut Checkout);
    let pairs: [(&str, &str, Edit); 3] = [
        ("R-SKILL-DUP-PACKAGE", "\"./packages/pdf-tools.zip\"", |c| {
            drop(
                c.skill(1)
                    .insert("package".into(), json!("./packages/pdf-tools.zip")),
            )
        }),
        ("R-API-DUP-PATH", "\"apis/en//images-api.md\"", |c| {
            drop(c.api(1).insert("path".into(), json!("apis/en//images-api.md")))
        }),
        ("R-SKILL-DUP-PATH", "\"skills/pdf-tools/\"", |c| {
            drop(c.skill(1).insert("path".into(), json!("skills/pdf-tools/")))
        }),
    ];
    for (rule, spelling, edit) in pairs {
        let mut checkout = Checkout::new();
        edit(&mut checkout);
        checkout.write_manifest();
        let output = run(&["--format", "json", "registry.json"], checkout.root());
        assert_eq!(code(&output), 1, "{rule}: {}", stdout(&output));
        let report: serde_json::Value = serde_json::from_str(&stdout(&output)).unwrap();
        let finding = report["findings"]
            .as_array()
            .unwrap()
            .iter()
            .find(|f| f["rule"] == rule)
            .unwrap_or_else(|| panic!("{rule} missing: {report:#}"));
        let message = finding["message"].as_str().unwrap();
        assert!(
            message.contains(spelling) && message.contains("same path as"),
            "{rule}: {message}"
        );
    }
}

#[test]
fn root_mode_finds_a_hash_mismatch_that_offline_mode_cannot() {
    let mut checkout = Checkout::new();
    checkout.skill(1).insert("sha256".into(), json!("a".repeat(64)));
    checkout.write_manifest();
    assert_eq!(code(&run(&["registry.json"], checkout.root())), 0);
    let output = run(
        &["--root", ".", "--format", "json", "registry.json"],
        checkout.root(),
    );
    assert_eq!(code(&output), 1);
    let report: serde_json::Value = serde_json::from_str(&stdout(&output)).unwrap();
    assert_eq!(report["findings"][0]["rule"], "R-ROOT-SHA256-MISMATCH");
    assert_eq!(report["findings"][0]["pointer"], "/skills/1/sha256");
}

#[test]
fn warnings_fail_only_with_fail_on_warning_or_strict() {
    let mut checkout = Checkout::new();
    checkout.skill(0).insert("agents".into(), json!(["claude"]));
    checkout.write_manifest();
    assert_eq!(code(&run(&["registry.json"], checkout.root())), 0);
    assert_eq!(
        code(&run(&["--fail-on", "warning", "registry.json"], checkout.root())),
        1
    );
    assert_eq!(
        code(&run(&["--fail-on", "error", "registry.json"], checkout.root())),
        0
    );
    assert_eq!(code(&run(&["--strict", "registry.json"], checkout.root())), 1);
}

#[test]
fn strict_reports_unknown_keys_as_errors_in_every_format() {
    let mut checkout = Checkout::new();
    checkout.skill(0).insert("sha_256".into(), json!("x"));
    checkout.skill(0).insert("agents".into(), json!(["claude"]));
    checkout.write_manifest();
    let severities = |args: &[&str]| {
        let output = run(args, checkout.root());
        let report: serde_json::Value = serde_json::from_str(&stdout(&output)).unwrap();
        let found: Vec<(String, String)> = report["findings"]
            .as_array()
            .unwrap()
            .iter()
            .map(|f| (f["rule"].to_string(), f["severity"].to_string()))
            .collect();
        (code(&output), found, report["summary"].clone())
    };
    let (lenient_code, lenient, _) = severities(&["--format", "json", "registry.json"]);
    assert_eq!(lenient_code, 0);
    assert!(
        lenient.contains(&(r#""R-UNKNOWN-KEY""#.into(), r#""warning""#.into())),
        "{lenient:?}"
    );
    let (strict_code, strict, summary) = severities(&["--strict", "--format", "json", "registry.json"]);
    assert_eq!(strict_code, 1);
    assert!(
        strict.contains(&(r#""R-UNKNOWN-KEY""#.into(), r#""error""#.into())),
        "{strict:?}"
    );
    assert!(
        strict.contains(&(r#""R-SKILL-AGENT-UNKNOWN""#.into(), r#""warning""#.into())),
        "only the rules the format names are raised: {strict:?}"
    );
    assert_eq!(summary["errors"], 1);
    assert_eq!(summary["warnings"], 1);
    let text = stdout(&run(&["--strict", "registry.json"], checkout.root()));
    assert!(text.contains("error[R-UNKNOWN-KEY]"), "{text}");
    let sarif = run(
        &["--strict", "--format", "sarif", "registry.json"],
        checkout.root(),
    );
    let sarif: serde_json::Value = serde_json::from_str(&stdout(&sarif)).unwrap();
    let unknown = sarif["runs"][0]["results"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["ruleId"] == "R-UNKNOWN-KEY")
        .unwrap();
    assert_eq!(unknown["level"], "error");
    let github = stdout(&run(
        &["--strict", "--format", "github", "registry.json"],
        checkout.root(),
    ));
    assert!(
        github
            .lines()
            .any(|l| l.starts_with("::error ") && l.contains("title=R-UNKNOWN-KEY")),
        "{github}"
    );
}

#[test]
fn a_dash_reads_the_manifest_from_standard_input() {
    use std::io::Write as _;
    let dir = tempfile::tempdir().unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_registry-check"))
        .args(["--format", "github", "-"])
        .current_dir(dir.path())
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(b"{\"a\": 1,}").unwrap();
    let output = child.wait_with_output().unwrap();
    assert_eq!(code(&output), 2, "{}", String::from_utf8_lossy(&output.stderr));
    let said = stdout(&output);
    assert!(said.starts_with("::error file=<stdin>,line=1,col=8"), "{said}");
    assert!(said.contains("R-JSON-TRAILING-COMMA"), "{said}");
}

#[test]
fn unparseable_or_unreadable_input_exits_2() {
    let dir = tempfile::tempdir().unwrap();
    write_file(&dir.path().join("bad.json"), "{\"a\": 1,}");
    let output = run(&["--format", "github", "bad.json"], dir.path());
    assert_eq!(code(&output), 2);
    assert_eq!(
        stdout(&output).trim_end(),
        "::error file=bad.json,line=1,col=8,endLine=1,endColumn=9,title=R-JSON-TRAILING-COMMA::trailing comma before `}`; remove the comma%0Aexpected: another value after `,`, or `}` without the comma%0Afound: `,` directly before `}`%0Ahelp: Remove the trailing comma."
    );
    let missing = run(&["missing.json"], dir.path());
    assert_eq!(code(&missing), 2);
    assert!(String::from_utf8_lossy(&missing.stderr).contains("cannot read missing.json"));
    // A file that never ends is refused after 64 MiB instead of filling the memory.
    let endless = run(&["/dev/zero"], dir.path());
    assert_eq!(code(&endless), 2);
    assert!(String::from_utf8_lossy(&endless.stderr).contains("too large for a manifest"));
}

#[test]
fn usage_errors_exit_2_and_help_exits_0() {
    let dir = tempfile::tempdir().unwrap();
    assert_eq!(code(&run(&[], dir.path())), 2);
    assert_eq!(code(&run(&["--format", "xml", "x.json"], dir.path())), 2);
    assert_eq!(code(&run(&["--fail-on", "info", "x.json"], dir.path())), 2);
    assert_eq!(code(&run(&["--root", "no-such-dir", "x.json"], dir.path())), 2);
    assert_eq!(code(&run(&["generate"], dir.path())), 2);
    let help = run(&["--help"], dir.path());
    assert_eq!(code(&help), 0);
    assert!(stdout(&help).contains("--fail-on"));
}

#[test]
fn sarif_output_is_sarif_2_1_0() {
    let mut checkout = Checkout::new();
    checkout.manifest["schema_version"] = json!("2");
    checkout.write_manifest();
    let output = run(&["--format", "sarif", "registry.json"], checkout.root());
    assert_eq!(code(&output), 1);
    let sarif: serde_json::Value = serde_json::from_str(&stdout(&output)).unwrap();
    assert_eq!(sarif["version"], "2.1.0");
    assert_eq!(sarif["runs"][0]["results"][0]["ruleId"], "R-TOP-SCHEMA-VERSION");
}

#[test]
fn several_files_are_reported_in_order() {
    let mut checkout = Checkout::new();
    checkout.skill(0).insert("version".into(), json!("1.0"));
    checkout.write_manifest();
    write_file(
        &checkout.path("second.json"),
        &checkout
            .text()
            .replace("\"schema_version\": \"1\"", "\"schema_version\": \"3\""),
    );
    let order = |files: [&str; 2]| {
        let output = run(&["--format", "json", files[0], files[1]], checkout.root());
        assert_eq!(code(&output), 1);
        let report: serde_json::Value = serde_json::from_str(&stdout(&output)).unwrap();
        assert_eq!(
            report["summary"],
            json!({"files": 2, "errors": 3, "warnings": 0, "infos": 0,
                   "omitted": {"errors": 0, "warnings": 0, "infos": 0}})
        );
        report["findings"]
            .as_array()
            .unwrap()
            .iter()
            .map(|f| format!("{} {}", f["file"].as_str().unwrap(), f["rule"].as_str().unwrap()))
            .collect::<Vec<_>>()
    };
    // Files in the order given; within a file, findings by location.
    assert_eq!(
        order(["registry.json", "second.json"]),
        [
            "registry.json R-SKILL-VERSION",
            "second.json R-TOP-SCHEMA-VERSION",
            "second.json R-SKILL-VERSION",
        ]
    );
    assert_eq!(
        order(["second.json", "registry.json"]),
        [
            "second.json R-TOP-SCHEMA-VERSION",
            "second.json R-SKILL-VERSION",
            "registry.json R-SKILL-VERSION",
        ]
    );
}

fn write_config(root: &Path) {
    write_file(
        &root.join("registry.yaml"),
        "repository:\n  name: agent-skills\n  git_url: https://github.com/acme/agent-skills.git\n  raw_base_url: https://raw.githubusercontent.com/acme/agent-skills/main\n  branch: main\n",
    );
}

#[test]
fn generate_writes_a_manifest_that_checks_clean_and_check_detects_staleness() {
    let dir = tempfile::tempdir().unwrap();
    support::write_sources(dir.path());
    write_config(dir.path());
    let root = dir.path().to_str().unwrap();
    let output = run(&["generate", "--root", root], dir.path());
    assert_eq!(
        code(&output),
        0,
        "{}{}",
        stdout(&output),
        String::from_utf8_lossy(&output.stderr)
    );
    let first = std::fs::read(dir.path().join("registry.json")).unwrap();
    assert!(first.ends_with(b"}\n"));
    assert_eq!(code(&run(&["--root", root, "registry.json"], dir.path())), 0);
    assert_eq!(
        code(&run(&["generate", "--root", root, "--check"], dir.path())),
        0
    );

    // Regenerating an unchanged checkout changes no byte (generated_at is kept).
    assert_eq!(code(&run(&["generate", "--root", root], dir.path())), 0);
    assert_eq!(std::fs::read(dir.path().join("registry.json")).unwrap(), first);

    // Only generated_at differs: still fresh.
    let text = String::from_utf8(first.clone()).unwrap();
    let value: serde_json::Value = serde_json::from_str(&text).unwrap();
    let old_time = value["generated_at"].as_str().unwrap().to_owned();
    write_file(
        &dir.path().join("registry.json"),
        &text.replace(&old_time, "2020-01-01T00:00:00Z"),
    );
    assert_eq!(
        code(&run(&["generate", "--root", root, "--check"], dir.path())),
        0
    );

    // A changed skill makes the manifest and its package stale.
    let skill = dir.path().join("skills/web-search/SKILL.md");
    let changed = std::fs::read_to_string(&skill).unwrap() + "\nOne more step.\n";
    write_file(&skill, &changed);
    let stale = run(&["generate", "--root", root, "--check"], dir.path());
    assert_eq!(code(&stale), 1);
    let stderr = String::from_utf8_lossy(&stale.stderr);
    assert!(
        stderr.contains("registry.json differs") && stderr.contains("packages/web-search.zip differs"),
        "{stderr}"
    );
}

#[test]
fn generate_without_repository_info_exits_2_and_flags_fill_it() {
    let dir = tempfile::tempdir().unwrap();
    support::write_sources(dir.path());
    let root = dir.path().to_str().unwrap();
    let output = run(&["generate", "--root", root], dir.path());
    assert_eq!(code(&output), 2);
    assert!(String::from_utf8_lossy(&output.stderr).contains("name, git_url, raw_base_url, branch"));
    let output = run(
        &[
            "generate",
            "--root",
            root,
            "--output",
            "catalog.json",
            "--name",
            "agent-skills",
            "--git-url",
            "git@github.com:acme/agent-skills.git",
            "--raw-base-url",
            "https://raw.githubusercontent.com/acme/agent-skills/main",
            "--branch",
            "main",
        ],
        dir.path(),
    );
    assert_eq!(code(&output), 0, "{}", stdout(&output));
    let manifest: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.path().join("catalog.json")).unwrap()).unwrap();
    assert_eq!(
        manifest["repository"]["git_url"],
        "git@github.com:acme/agent-skills.git"
    );
}

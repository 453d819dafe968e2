//! `registry-check`: check registry manifests, or generate one from a checkout.
//!
//! Exit codes: 0 clean (or fresh), 1 findings at or above `--fail-on` (or a stale manifest with
//! `generate --check`), 2 usage error or a file that cannot be read or parsed.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{Args, Parser, Subcommand, ValueEnum};
use imagegate_manifest::generate::{self, ConfigFile, GenerateConfig, RepositoryOverrides};
use imagegate_manifest::report::{self, Format};
use imagegate_manifest::{CheckOptions, FileReport, Severity, check_file};

/// Check registry manifests (schema, semantic rules and, with --root, files, sizes, hashes and packages).
#[derive(Debug, Parser)]
#[command(
    name = "registry-check",
    version,
    args_conflicts_with_subcommands = true,
    subcommand_negates_reqs = true
)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
    /// Repository checkout the manifests describe: also check files, sizes, hashes and packages.
    #[arg(long, value_name = "DIR")]
    root: Option<PathBuf>,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Text)]
    format: Format,
    /// Lowest severity that makes the run fail (exit 1).
    #[arg(long, value_enum, default_value_t = FailOn::Error, value_name = "SEVERITY")]
    fail_on: FailOn,
    /// Report unknown keys as errors, and fail on warnings (implies --fail-on warning).
    #[arg(long)]
    strict: bool,
    /// Manifest files to check (`-` reads standard input).
    #[arg(required = true, value_name = "FILE")]
    files: Vec<PathBuf>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum FailOn {
    Error,
    Warning,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Build the manifest and packages from skills/*/SKILL.md and apis/<language>/<id>.md.
    Generate(GenerateArgs),
}

#[derive(Debug, Args)]
struct GenerateArgs {
    /// The repository checkout.
    #[arg(long, value_name = "DIR")]
    root: PathBuf,
    /// Manifest file relative to the root (default from the config file, else registry.json).
    #[arg(long, value_name = "FILE")]
    output: Option<String>,
    /// Write nothing; exit 1 when the committed manifest or a package is stale (generated_at ignored).
    #[arg(long)]
    check: bool,
    /// Config file (default: <root>/registry.yaml if present).
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
    /// repository.name
    #[arg(long)]
    name: Option<String>,
    /// repository.git_url
    #[arg(long)]
    git_url: Option<String>,
    /// repository.raw_base_url
    #[arg(long)]
    raw_base_url: Option<String>,
    /// repository.branch
    #[arg(long)]
    branch: Option<String>,
}

const EXIT_FINDINGS: u8 = 1;
const EXIT_UNUSABLE: u8 = 2;

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(error) => {
            let _ = error.print();
            return match error.kind() {
                clap::error::ErrorKind::DisplayHelp | clap::error::ErrorKind::DisplayVersion => {
                    ExitCode::SUCCESS
                }
                _ => ExitCode::from(EXIT_UNUSABLE),
            };
        }
    };
    match &cli.command {
        Some(Command::Generate(args)) => run_generate(args),
        None => run_check(&cli),
    }
}

fn stderr_line(text: &str) {
    let _ = writeln!(std::io::stderr().lock(), "registry-check: {text}");
}

fn stdout_text(text: &str) {
    let _ = std::io::stdout().lock().write_all(text.as_bytes());
}

fn run_check(cli: &Cli) -> ExitCode {
    let options = CheckOptions {
        root: cli.root.clone(),
        strict: cli.strict,
        ..CheckOptions::default()
    };
    if let Some(root) = &cli.root
        && !root.is_dir()
    {
        stderr_line(&format!("--root {} is not a folder", root.display()));
        return ExitCode::from(EXIT_UNUSABLE);
    }
    let mut reports: Vec<FileReport> = Vec::new();
    let mut unreadable = false;
    for file in &cli.files {
        match check_file(file, &options) {
            Ok(report) => reports.push(report),
            Err(error) => {
                stderr_line(&error.to_string());
                unreadable = true;
            }
        }
    }
    stdout_text(&report::render(cli.format, &reports));
    let threshold = if cli.strict || cli.fail_on == FailOn::Warning {
        Severity::Warning
    } else {
        Severity::Error
    };
    if unreadable || reports.iter().any(FileReport::parse_failed) {
        ExitCode::from(EXIT_UNUSABLE)
    } else if reports.iter().any(|r| r.fails(threshold)) {
        ExitCode::from(EXIT_FINDINGS)
    } else {
        ExitCode::SUCCESS
    }
}

fn load_config(args: &GenerateArgs) -> Result<GenerateConfig, generate::GenerateError> {
    let (path, required) = match &args.config {
        Some(path) => (path.clone(), true),
        None => (args.root.join(generate::CONFIG_FILE), false),
    };
    let flags = RepositoryOverrides {
        name: args.name.clone(),
        git_url: args.git_url.clone(),
        raw_base_url: args.raw_base_url.clone(),
        branch: args.branch.clone(),
    };
    ConfigFile::load(&path, required)?.resolve(&flags, args.output.clone())
}

fn run_generate(args: &GenerateArgs) -> ExitCode {
    let result = load_config(args).and_then(|config| {
        let generated = generate::build(&args.root, &config, "")?;
        Ok((config, generated))
    });
    let (config, mut generated) = match result {
        Ok(ok) => ok,
        Err(error) => {
            stderr_line(&error.to_string());
            return ExitCode::from(EXIT_UNUSABLE);
        }
    };
    let manifest_path = args.root.join(&config.output);
    let committed = std::fs::read_to_string(&manifest_path).ok();
    if args.check {
        return check_fresh(&args.root, &config, &generated, committed.as_deref());
    }
    generated.manifest.generated_at = generate::choose_generated_at(
        &generated.manifest,
        committed.as_deref(),
        std::time::SystemTime::now().into(),
    );
    if let Err(error) = generate::write(&args.root, &config, &generated) {
        stderr_line(&error.to_string());
        return ExitCode::from(EXIT_UNUSABLE);
    }
    stdout_text(&format!(
        "wrote {} ({} skills, {} API documents) and {} packages\n",
        config.output,
        generated.manifest.skills.len(),
        generated.manifest.apis.len(),
        generated.packages.len()
    ));
    verify_written(&manifest_path, &args.root)
}

fn check_fresh(
    root: &Path,
    config: &GenerateConfig,
    generated: &generate::Generated,
    committed: Option<&str>,
) -> ExitCode {
    let mut stale = Vec::new();
    match committed {
        None => stale.push(format!("{} is missing", config.output)),
        Some(text) if generate::is_stale(text, &generated.manifest) => {
            stale.push(format!(
                "{} differs from a fresh build (generated_at ignored)",
                config.output
            ));
        }
        Some(_) => {}
    }
    stale.extend(
        generate::stale_packages(root, generated)
            .into_iter()
            .map(|p| format!("{p} differs from a fresh build")),
    );
    if stale.is_empty() {
        stdout_text(&format!("{} and its packages are up to date\n", config.output));
        return ExitCode::SUCCESS;
    }
    for line in &stale {
        stderr_line(&format!("stale: {line}"));
    }
    stderr_line("run `registry-check generate --root <DIR>` and commit the result");
    ExitCode::from(EXIT_FINDINGS)
}

/// Check what was just written, with the checkout, and report any finding.
fn verify_written(manifest: &Path, root: &Path) -> ExitCode {
    let options = CheckOptions {
        root: Some(root.to_owned()),
        ..CheckOptions::default()
    };
    match check_file(manifest, &options) {
        Ok(report) if report.findings.is_empty() => ExitCode::SUCCESS,
        Ok(report) => {
            stdout_text(&report::render(Format::Text, std::slice::from_ref(&report)));
            if report.fails(Severity::Error) {
                ExitCode::from(EXIT_FINDINGS)
            } else {
                ExitCode::SUCCESS
            }
        }
        Err(error) => {
            stderr_line(&error.to_string());
            ExitCode::from(EXIT_UNUSABLE)
        }
    }
}

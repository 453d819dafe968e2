//! Large, valid manifests for benchmarks and load tests.

use sha2::{Digest, Sha256};

use crate::model::{Api, Manifest, Repository, Skill};

/// A valid manifest with `skills` skills and one API entry per ten skills (at least one), as pretty JSON.
/// The same arguments always give the same bytes.
///
/// ```
/// let text = imagegate_manifest::synthetic::manifest(25);
/// let report = imagegate_manifest::check_bytes("big.json", text.as_bytes(), &Default::default());
/// assert!(report.findings.is_empty());
/// ```
pub fn manifest(skills: usize) -> String {
    let api_count = (skills / 10).max(1);
    let apis = (0..api_count)
        .map(|i| Api {
            id: format!("api-{i:05}"),
            title: format!("Service {i} HTTP API"),
            product: format!("Service {i}"),
            language: if i % 2 == 0 {
                "en".to_owned()
            } else {
                "zh-CN".to_owned()
            },
            path: format!("apis/{}/api-{i:05}.md", if i % 2 == 0 { "en" } else { "zh-CN" }),
            tags: vec!["http".to_owned(), format!("service-{i}")],
            source_urls: vec![format!("https://docs.example.com/service-{i}/reference")],
        })
        .collect();
    let skills = (0..skills)
        .map(|i| {
            let name = format!("skill-{i:05}");
            Skill {
                version: format!("1.{}.{}", i % 7, i % 3),
                title: format!("Skill number {i}"),
                description: format!(
                    "Does task {i} for the agent: reads the inputs, calls service {} and writes a short report. \
                     Use when the user asks for task {i}.",
                    i % api_count
                ),
                path: format!("skills/{name}"),
                package: format!("packages/{name}.zip"),
                sha256: hex::encode(Sha256::digest(name.as_bytes())),
                size_bytes: Some(1000 + (i as u64 * 37) % 50_000),
                api_docs: vec![format!("api-{:05}", i % api_count)],
                tags: vec!["generated".to_owned(), format!("group-{}", i % 20)],
                agents: vec!["claude-code".to_owned(), "codex".to_owned()],
                updated_at: Some("2026-01-15T08:30:00Z".to_owned()),
                name,
            }
        })
        .collect();
    Manifest {
        schema_version: "1".to_owned(),
        generated_at: "2026-02-01T00:00:00Z".to_owned(),
        repository: Repository {
            name: "skills".to_owned(),
            git_url: "https://github.com/example/skills.git".to_owned(),
            raw_base_url: "https://raw.githubusercontent.com/example/skills/main".to_owned(),
            branch: "main".to_owned(),
        },
        skills,
        apis,
    }
    .to_json_pretty()
}

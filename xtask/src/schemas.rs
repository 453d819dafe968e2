//! `cargo xtask schemas [--check]`.

use std::collections::BTreeMap;
use std::fs;

/// Every schema the project publishes, keyed by file stem.
fn expected() -> Result<BTreeMap<String, String>, String> {
    let mut files = BTreeMap::new();
    let mut all = imagegate_codec::json_schemas();
    all.push(("registry-manifest", imagegate_manifest::json_schema()));
    for (stem, schema) in all {
        let mut text = serde_json::to_string_pretty(&schema).map_err(|e| format!("{stem}: {e}"))?;
        text.push('\n');
        if files.insert(format!("{stem}.schema.json"), text).is_some() {
            return Err(format!("two schemas share the name {stem}"));
        }
    }
    Ok(files)
}

pub fn run(check: bool) -> Result<(), String> {
    let dir = crate::workspace_root().join("schemas");
    let expected = expected()?;
    let present: Vec<String> = fs::read_dir(&dir)
        .map_err(|e| format!("{}: {e}", dir.display()))?
        .filter_map(|entry| entry.ok())
        .map(|entry| entry.file_name().to_string_lossy().into_owned())
        .filter(|name| name.ends_with(".schema.json"))
        .collect();
    let mut problems = Vec::new();
    for name in &present {
        if !expected.contains_key(name) {
            problems.push(format!("{name}: no longer generated"));
            if !check {
                fs::remove_file(dir.join(name)).map_err(|e| format!("{name}: {e}"))?;
            }
        }
    }
    for (name, text) in &expected {
        let path = dir.join(name);
        let current = fs::read_to_string(&path).ok();
        if current.as_deref() == Some(text.as_str()) {
            continue;
        }
        problems.push(format!(
            "{name}: {}",
            if current.is_some() { "stale" } else { "missing" }
        ));
        if !check {
            fs::write(&path, text).map_err(|e| format!("{}: {e}", path.display()))?;
        }
    }
    if check && !problems.is_empty() {
        return Err(format!(
            "schemas/ is out of date; run `cargo xtask schemas`:\n  {}",
            problems.join("\n  ")
        ));
    }
    for problem in &problems {
        println!("updated {problem}");
    }
    println!("{} schemas in schemas/ are current", expected.len());
    Ok(())
}

//! The YAML front matter of SKILL.md and API documents (`---` lines around a YAML mapping).

use serde_yaml_ng::{Mapping, Value};

/// Front-matter keys of SKILL.md that agentskills defines.
pub const SKILL_KEYS: &[&str] = &[
    "name",
    "description",
    "license",
    "allowed-tools",
    "metadata",
    "compatibility",
];

/// A parsed front matter.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct FrontMatter {
    pub map: Mapping,
    /// The Markdown after the closing `---`.
    pub body: String,
}

/// Why front matter could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum FrontMatterError {
    #[error("the file does not start with a `---` line")]
    NoOpening,
    #[error("the front matter has no closing `---` line")]
    NoClosing,
    #[error("the front matter is not valid YAML: {0}")]
    Yaml(String),
    #[error("the front matter is not a YAML mapping of keys to values")]
    NotMapping,
}

/// Split and parse the front matter of `text`.
pub(crate) fn read(text: &str) -> Result<FrontMatter, FrontMatterError> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let mut lines = text.split_inclusive('\n');
    let first = lines.next().ok_or(FrontMatterError::NoOpening)?;
    if first.trim_end() != "---" {
        return Err(FrontMatterError::NoOpening);
    }
    let mut yaml = String::new();
    let mut body_start = None;
    let mut offset = first.len();
    for line in lines {
        let end = offset + line.len();
        if matches!(line.trim_end(), "---" | "...") {
            body_start = Some(end);
            break;
        }
        yaml.push_str(line);
        offset = end;
    }
    let body_start = body_start.ok_or(FrontMatterError::NoClosing)?;
    let value: Value = serde_yaml_ng::from_str(&yaml).map_err(|e| FrontMatterError::Yaml(e.to_string()))?;
    let Value::Mapping(map) = value else {
        return Err(FrontMatterError::NotMapping);
    };
    Ok(FrontMatter {
        map,
        body: text.get(body_start..).unwrap_or_default().to_owned(),
    })
}

impl FrontMatter {
    /// A top-level string value.
    pub fn str(&self, key: &str) -> Option<&str> {
        self.map.get(key).and_then(Value::as_str)
    }

    /// A string value under `metadata:`.
    pub fn metadata_str(&self, key: &str) -> Option<String> {
        scalar(self.map.get("metadata")?.get(key)?)
    }

    /// A list under `metadata:`, written as a YAML list or a comma-separated string.
    pub fn metadata_list(&self, key: &str) -> Vec<String> {
        self.map
            .get("metadata")
            .and_then(|m| m.get(key))
            .map(list)
            .unwrap_or_default()
    }

    /// Top-level keys that are not in `known`.
    pub fn unknown_keys(&self, known: &[&str]) -> Vec<String> {
        self.map
            .keys()
            .map(|k| k.as_str().map_or_else(|| format!("{k:?}"), str::to_owned))
            .filter(|k| !known.contains(&k.as_str()))
            .collect()
    }

    /// The text of the first `# ` heading of the body.
    pub fn first_heading(&self) -> Option<String> {
        self.body
            .lines()
            .find_map(|line| line.strip_prefix("# "))
            .map(|h| h.trim().to_owned())
            .filter(|h| !h.is_empty())
    }
}

/// A scalar as text (strings, numbers and booleans).
pub(crate) fn scalar(value: &Value) -> Option<String> {
    match value {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        Value::Bool(b) => Some(b.to_string()),
        _ => None,
    }
}

/// A YAML list of scalars, or a comma-separated string, as trimmed non-empty strings.
pub(crate) fn list(value: &Value) -> Vec<String> {
    match value {
        Value::Sequence(items) => items
            .iter()
            .filter_map(scalar)
            .map(|s| s.trim().to_owned())
            .collect(),
        Value::String(s) => s
            .split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(str::to_owned)
            .collect(),
        _ => Vec::new(),
    }
}

/// Collapse runs of whitespace, for comparing descriptions that YAML folded differently.
pub(crate) fn normalize_space(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_front_matter_and_body() {
        let fm = read("---\nname: pdf\ndescription: >\n  Fill PDF\n  forms.\nmetadata:\n  version: 1.2.0\n  tags: [a, b]\n  agents: codex, claude-code\nextra: 1\n---\n# PDF tools\nbody\n").unwrap();
        assert_eq!(fm.str("name"), Some("pdf"));
        assert_eq!(fm.str("description"), Some("Fill PDF forms.\n"));
        assert_eq!(fm.metadata_str("version").as_deref(), Some("1.2.0"));
        assert_eq!(fm.metadata_list("tags"), ["a", "b"]);
        assert_eq!(fm.metadata_list("agents"), ["codex", "claude-code"]);
        assert_eq!(fm.unknown_keys(SKILL_KEYS), ["extra"]);
        assert_eq!(fm.first_heading().as_deref(), Some("PDF tools"));
    }

    #[test]
    fn reports_missing_or_broken_front_matter() {
        assert_eq!(read("# no front matter"), Err(FrontMatterError::NoOpening));
        assert_eq!(read("---\nname: x\n"), Err(FrontMatterError::NoClosing));
        assert_eq!(read("---\n- a\n---\n"), Err(FrontMatterError::NotMapping));
        assert!(matches!(
            read("---\nname: [\n---\n"),
            Err(FrontMatterError::Yaml(_))
        ));
        assert_eq!(read("---\r\nname: x\r\n---\r\n").unwrap().str("name"), Some("x"));
    }
}

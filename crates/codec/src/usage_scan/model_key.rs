//! Naming the model in an Images response that does not: the upstream's document passes byte for
//! byte, so the key goes in front of its first key.

/// Where a `"model"` key goes in a document, and its bytes: `start[..at]`, then `bytes`, then
/// `start[at..]` is the same object with the model as its first key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModelKey {
    /// Just after the object's opening brace.
    pub at: usize,
    /// `"model":"<model>",` (without the comma in an empty object).
    pub bytes: Vec<u8>,
}

/// The [`ModelKey`] for the JSON object `start` opens (the beginning of a document is enough),
/// naming `model`; `None` when `start` does not open an object. Whether the document already
/// names a model is for the caller to know (see [`ResponseSummary::names_model`](super::ResponseSummary)).
pub fn model_key(start: &[u8], model: &str) -> Option<ModelKey> {
    let open = start.iter().position(|b| !b.is_ascii_whitespace())?;
    if start[open] != b'{' {
        return None;
    }
    let at = open + 1;
    let empty = start[at..]
        .iter()
        .find(|b| !b.is_ascii_whitespace())
        .is_some_and(|b| *b == b'}');
    let name = serde_json::to_string(model).ok()?;
    let mut bytes = Vec::with_capacity(name.len() + 9);
    bytes.extend_from_slice(b"\"model\":");
    bytes.extend_from_slice(name.as_bytes());
    if !empty {
        bytes.push(b',');
    }
    Some(ModelKey { at, bytes })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    fn named(start: &str) -> Option<String> {
        let key = model_key(start.as_bytes(), "gpt-image-2")?;
        Some(format!(
            "{}{}{}",
            &start[..key.at],
            String::from_utf8(key.bytes).unwrap(),
            &start[key.at..]
        ))
    }

    #[test]
    fn the_model_becomes_the_first_key() {
        assert_eq!(
            named(r#" {"created":1,"data":[{"b64_json":"iVBO"#).as_deref(),
            Some(r#" {"model":"gpt-image-2","created":1,"data":[{"b64_json":"iVBO"#)
        );
        assert_eq!(named("{ }").as_deref(), Some(r#"{"model":"gpt-image-2" }"#));
    }

    #[test]
    fn what_does_not_open_an_object_gets_no_key() {
        assert_eq!(named(r#"["model"]"#), None);
        assert_eq!(named("  "), None);
    }

    #[test]
    fn the_whole_document_still_parses_with_the_model() {
        let document = r#"{"created":1,"data":[{"b64_json":"aGk="}],"usage":{"total_tokens":3}}"#;
        let value: serde_json::Value = serde_json::from_str(&named(document).unwrap()).unwrap();
        assert_eq!(value["model"], "gpt-image-2");
        assert_eq!(value["usage"]["total_tokens"], 3);
    }
}

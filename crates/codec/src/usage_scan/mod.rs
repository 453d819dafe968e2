//! Incremental extraction of the billing-relevant fields of an Images response as it passes
//! through, without keeping a copy of the base64 payload.
//!
//! [`ImagesResponseScanner`] is a small streaming JSON tokenizer. It follows the structure of the
//! document byte by byte, skips the contents of every string it does not need (such as
//! `data[].b64_json`, found with a fast byte search), and copies only the raw bytes of the few
//! top-level values it reports: `created`, `created_at`, `model`, `size`, `quality`,
//! `output_format`, `background` and `usage` (each capped at [`MAX_CAPTURE_BYTES`]). Those values
//! are decoded with `serde_json` when they end. It also counts the elements of the top-level
//! `data` array. The same scanner reads the JSON of an image stream event (`*.completed`).

use imagegate_domain::Usage;

mod model_key;
mod scanner;

pub use model_key::{ModelKey, model_key};
pub use scanner::ImagesResponseScanner;

/// Largest raw value (e.g. the `usage` object) that is captured; larger values are skipped.
pub const MAX_CAPTURE_BYTES: usize = 16 * 1024;
/// Deepest nesting followed; deeper documents are reported as malformed.
pub const MAX_DEPTH: usize = 128;
/// Longest top-level key that is examined (longer keys are never interesting).
pub(crate) const MAX_KEY_BYTES: usize = 64;

/// What was found so far. A field stays `None` when it is absent or has an unexpected type.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ResponseSummary {
    /// `created` (Images response), unix seconds.
    pub created: Option<i64>,
    /// `created_at` (image stream events), unix seconds.
    pub created_at: Option<i64>,
    /// `model`.
    pub model: Option<String>,
    /// Whether the document has a top-level `model` key, whatever its value (`model` is `None`
    /// for a `null` or a number, and for a string longer than it keeps).
    pub names_model: bool,
    /// `size`, e.g. `1024x1024`.
    pub size: Option<String>,
    /// `quality`.
    pub quality: Option<String>,
    /// `output_format`.
    pub output_format: Option<String>,
    /// `background`.
    pub background: Option<String>,
    /// `usage`.
    pub usage: Option<Usage>,
    /// Number of elements of the top-level `data` array (0 when absent).
    pub images: usize,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Field {
    Created,
    CreatedAt,
    Model,
    Size,
    Quality,
    OutputFormat,
    Background,
    Usage,
    Data,
    Other,
}

impl Field {
    pub(crate) fn from_key(key: &[u8]) -> Self {
        match key {
            b"created" => Self::Created,
            b"created_at" => Self::CreatedAt,
            b"model" => Self::Model,
            b"size" => Self::Size,
            b"quality" => Self::Quality,
            b"output_format" => Self::OutputFormat,
            b"background" => Self::Background,
            b"usage" => Self::Usage,
            b"data" => Self::Data,
            _ => Self::Other,
        }
    }
}

impl ResponseSummary {
    /// Stores the raw JSON of a finished top-level value.
    pub(crate) fn record(&mut self, field: Field, raw: &[u8]) {
        match field {
            Field::Created => self.created = serde_json::from_slice(raw).ok(),
            Field::CreatedAt => self.created_at = serde_json::from_slice(raw).ok(),
            Field::Model => self.model = serde_json::from_slice(raw).ok(),
            Field::Size => self.size = serde_json::from_slice(raw).ok(),
            Field::Quality => self.quality = serde_json::from_slice(raw).ok(),
            Field::OutputFormat => self.output_format = serde_json::from_slice(raw).ok(),
            Field::Background => self.background = serde_json::from_slice(raw).ok(),
            Field::Usage => self.usage = serde_json::from_slice(raw).ok(),
            Field::Data | Field::Other => {}
        }
    }
}

/// For `#[serde(deserialize_with)]`: a usage object, or `None` where its shape is not one we read
/// (a string in place of a count, say). An odd usage must cost no more than itself: not the images
/// and the other usage read from the same document.
pub fn usage_if_readable<'de, D>(deserializer: D) -> Result<Option<Usage>, D::Error>
where
    D: serde::Deserializer<'de>,
{
    let value = <Option<serde_json::Value> as serde::Deserialize>::deserialize(deserializer)?;
    Ok(value.and_then(|value| serde_json::from_value(value).ok()))
}

/// Scans a complete document at once (convenience for bodies already in memory).
pub fn scan(document: &[u8]) -> ResponseSummary {
    let mut scanner = ImagesResponseScanner::new();
    scanner.push(document);
    scanner.into_summary()
}

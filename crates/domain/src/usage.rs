//! Token usage reported for an image request.

use serde::Deserialize as _;

/// Tokens split by modality.
#[derive(
    Clone,
    Copy,
    Debug,
    Default,
    PartialEq,
    Eq,
    Hash,
    serde::Serialize,
    serde::Deserialize,
    schemars::JsonSchema,
)]
#[serde(default)]
pub struct TokenDetails {
    /// Text tokens.
    #[serde(deserialize_with = "null_as_default")]
    pub text_tokens: u64,
    /// Image tokens.
    #[serde(deserialize_with = "null_as_default")]
    pub image_tokens: u64,
}

/// Token usage of one image request, as in the `usage` object of an image response.
/// Missing fields and `null`s deserialize as 0 (older upstreams omit `output_tokens_details`, some
/// send `null` in its place).
#[derive(
    Clone,
    Copy,
    Debug,
    Default,
    PartialEq,
    Eq,
    Hash,
    serde::Serialize,
    serde::Deserialize,
    schemars::JsonSchema,
)]
#[serde(default)]
pub struct Usage {
    /// Input tokens (prompt text plus input images).
    #[serde(deserialize_with = "null_as_default")]
    pub input_tokens: u64,
    /// Input tokens by modality.
    #[serde(deserialize_with = "null_as_default")]
    pub input_tokens_details: TokenDetails,
    /// Output tokens (generated images, including partial images).
    #[serde(deserialize_with = "null_as_default")]
    pub output_tokens: u64,
    /// Output tokens by modality.
    #[serde(deserialize_with = "null_as_default")]
    pub output_tokens_details: TokenDetails,
    /// Input plus output tokens.
    #[serde(deserialize_with = "null_as_default")]
    pub total_tokens: u64,
}

/// A `null` read as the type's default, so one `null` in a usage object costs no more than its own
/// field.
fn null_as_default<'de, D, T>(deserializer: D) -> Result<T, D::Error>
where
    D: serde::Deserializer<'de>,
    T: serde::Deserialize<'de> + Default,
{
    Ok(Option::<T>::deserialize(deserializer)?.unwrap_or_default())
}

impl TokenDetails {
    /// Field-wise saturating sum.
    pub fn saturating_add(self, other: Self) -> Self {
        Self {
            text_tokens: self.text_tokens.saturating_add(other.text_tokens),
            image_tokens: self.image_tokens.saturating_add(other.image_tokens),
        }
    }
}

impl Usage {
    /// Field-wise saturating sum, e.g. to total the usage of several upstream calls.
    pub fn saturating_add(self, other: Self) -> Self {
        Self {
            input_tokens: self.input_tokens.saturating_add(other.input_tokens),
            input_tokens_details: self
                .input_tokens_details
                .saturating_add(other.input_tokens_details),
            output_tokens: self.output_tokens.saturating_add(other.output_tokens),
            output_tokens_details: self
                .output_tokens_details
                .saturating_add(other.output_tokens_details),
            total_tokens: self.total_tokens.saturating_add(other.total_tokens),
        }
    }
}

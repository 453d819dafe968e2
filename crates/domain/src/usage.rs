//! Token usage reported for an image request.

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
    pub text_tokens: u64,
    /// Image tokens.
    pub image_tokens: u64,
}

/// Token usage of one image request, as in the `usage` object of an image response.
/// Missing fields deserialize as 0 (older upstreams omit `output_tokens_details`).
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
    pub input_tokens: u64,
    /// Input tokens by modality.
    pub input_tokens_details: TokenDetails,
    /// Output tokens (generated images, including partial images).
    pub output_tokens: u64,
    /// Output tokens by modality.
    pub output_tokens_details: TokenDetails,
    /// Input plus output tokens.
    pub total_tokens: u64,
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

//! Request bodies as documented in the published JSON Schemas.
//!
//! Decoding does not go through these types (see [`crate::json`] and [`crate::multipart`], which
//! give field-precise errors); they describe the accepted shapes for clients and tooling.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Body of `POST /v1/images/generations`. `null` is the same as leaving a key out; unknown keys
/// are refused.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ImageGenerationRequest {
    /// `gpt-image-2` or `gpt-image-2-2026-04-21`. Required: a body without it is answered 400
    /// `missing_required_parameter`.
    // An `Option` so that a missing model gets that answer rather than a decoding error.
    #[schemars(with = "String")]
    pub model: Option<String>,
    /// What to draw, up to 32000 characters.
    pub prompt: String,
    /// Number of images, 1-10 (default 1).
    pub n: Option<i64>,
    /// `auto` or `WIDTHxHEIGHT`: edges multiples of 16, longest edge at most 3840, ratio at most
    /// 3:1, 655360-8294400 pixels.
    pub size: Option<String>,
    /// `low`, `medium`, `high` or `auto`.
    pub quality: Option<String>,
    /// `png`, `jpeg` or `webp`.
    pub output_format: Option<String>,
    /// 0-100, for `jpeg` and `webp`.
    pub output_compression: Option<i64>,
    /// `auto` or `opaque` (`transparent` is not supported by gpt-image-2).
    pub background: Option<String>,
    /// `auto` or `low`.
    pub moderation: Option<String>,
    /// Stream the answer as server-sent events.
    pub stream: Option<bool>,
    /// 0-3 partial images; needs `stream: true`.
    pub partial_images: Option<i64>,
    /// End-user id.
    pub user: Option<String>,
    /// Only `b64_json` (GPT image models always return base64).
    pub response_format: Option<String>,
}

/// Fields of the `multipart/form-data` body of `POST /v1/images/edits` (all text fields are
/// strings on the wire; numbers and booleans are parsed from them).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ImageEditRequest {
    /// Input images (PNG, JPEG or WebP, each under 50 MB, at most 16), sent as `image`,
    /// repeated `image[]` or `image[N]` parts.
    #[serde(rename = "image[]")]
    #[schemars(with = "Vec<BinaryFile>")]
    pub image: Vec<String>,
    /// Optional mask for the first image: same format (PNG for a JPEG image, which has no alpha
    /// channel) and dimensions, with an alpha channel; transparent pixels mark the area to edit.
    #[schemars(with = "Option<BinaryFile>")]
    pub mask: Option<String>,
    /// The edit instruction.
    pub prompt: String,
    /// `gpt-image-2` or `gpt-image-2-2026-04-21`. Required: a body without it is answered 400
    /// `missing_required_parameter`.
    #[schemars(with = "String")]
    pub model: Option<String>,
    /// Number of images, 1-10.
    pub n: Option<String>,
    /// `auto` or `WIDTHxHEIGHT` (same rules as generation).
    pub size: Option<String>,
    /// `low`, `medium`, `high` or `auto`.
    pub quality: Option<String>,
    /// `png`, `jpeg` or `webp`.
    pub output_format: Option<String>,
    /// 0-100, for `jpeg` and `webp`.
    pub output_compression: Option<String>,
    /// `auto` or `opaque`.
    pub background: Option<String>,
    /// `auto` or `low`.
    pub moderation: Option<String>,
    /// `true` or `false`.
    pub stream: Option<String>,
    /// 0-3; needs `stream` true.
    pub partial_images: Option<String>,
    /// End-user id.
    pub user: Option<String>,
}

/// A file part.
#[derive(Debug, Clone, JsonSchema)]
#[schemars(extend("format" = "binary"))]
pub struct BinaryFile(pub String);

/// Body of `POST /v1/responses` as far as the gateway reads it; every other key is forwarded.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ResponsesRequest {
    /// The main text/agent model (not an image model).
    pub model: String,
    /// The task: a string or a list of input items.
    pub input: Option<Value>,
    /// Tools; put `{"type":"image_generation","model":"gpt-image-2",...}` here.
    pub tools: Option<Vec<ResponsesTool>>,
    /// E.g. `{"type":"image_generation"}` to force the image tool.
    pub tool_choice: Option<Value>,
    /// Stream the answer as server-sent events.
    pub stream: Option<bool>,
    /// Any other Responses parameter, forwarded unchanged.
    #[serde(flatten)]
    pub other: serde_json::Map<String, Value>,
}

/// One entry of `tools`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(untagged)]
pub enum ResponsesTool {
    /// The image generation tool.
    ImageGeneration(ImageGenerationTool),
    /// Any other tool, forwarded unchanged.
    Other(serde_json::Map<String, Value>),
}

/// The `image_generation` tool.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ImageGenerationTool {
    /// Always `image_generation`.
    #[serde(rename = "type")]
    #[schemars(with = "ImageGenerationToolType")]
    pub tool_type: String,
    /// `gpt-image-2` or `gpt-image-2-2026-04-21`.
    pub model: Option<String>,
    /// `low`, `medium`, `high` or `auto`.
    pub quality: Option<String>,
    /// `auto` or `WIDTHxHEIGHT`.
    pub size: Option<String>,
    /// `png`, `jpeg` or `webp`.
    pub output_format: Option<String>,
    /// 0-100.
    pub output_compression: Option<i64>,
    /// `auto` or `opaque`.
    pub background: Option<String>,
    /// `auto` or `low`.
    pub moderation: Option<String>,
    /// 0-3.
    pub partial_images: Option<i64>,
    /// `generate`, `edit` or `auto`.
    pub action: Option<String>,
}

/// The constant `"image_generation"`.
#[derive(Debug, Clone, Copy, JsonSchema)]
pub enum ImageGenerationToolType {
    /// `"image_generation"`.
    #[serde(rename = "image_generation")]
    ImageGeneration,
}

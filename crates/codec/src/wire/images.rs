//! The Images API on the wire: the JSON response and the four stream events.

use bytes::Bytes;
use imagegate_domain::Usage;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::sse::encode_event;

/// Body of a non-streamed `POST /v1/images/generations` or `/v1/images/edits` answer.
///
/// Optional keys are left out when `None`; `created` and `data` are always sent.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ImagesResponse {
    /// Creation time, unix seconds.
    pub created: i64,
    /// Resolved background (`opaque` or `transparent`, never `auto`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub background: Option<String>,
    /// One element per image.
    #[serde(default)]
    pub data: Vec<ImageData>,
    /// The model that made the images.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// Format of the images (`png`, `jpeg`, `webp`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_format: Option<String>,
    /// Resolved quality (`low`, `medium`, `high`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub quality: Option<String>,
    /// Resolved size, `WIDTHxHEIGHT`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub size: Option<String>,
    /// Token usage (both `input_tokens_details` and `output_tokens_details` are sent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<Usage>,
}

/// One image of an [`ImagesResponse`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ImageData {
    /// The image, base64 without a `data:` prefix.
    pub b64_json: String,
    /// The prompt as revised by the model, when there is one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub revised_prompt: Option<String>,
}

/// A partial image of a streamed generation or edit.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct PartialImageEvent {
    /// The partial image, base64.
    pub b64_json: String,
    /// Unix seconds.
    pub created_at: i64,
    /// `WIDTHxHEIGHT`.
    pub size: String,
    /// `low`, `medium`, `high` or `auto`.
    pub quality: String,
    /// `transparent`, `opaque` or `auto`.
    pub background: String,
    /// `png`, `jpeg` or `webp`.
    pub output_format: String,
    /// 0-based index of this partial image.
    pub partial_image_index: u32,
}

/// The final image of a streamed generation or edit.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct CompletedImageEvent {
    /// The final image, base64.
    pub b64_json: String,
    /// Unix seconds.
    pub created_at: i64,
    /// `WIDTHxHEIGHT`.
    pub size: String,
    /// `low`, `medium`, `high` or `auto`.
    pub quality: String,
    /// `transparent`, `opaque` or `auto`.
    pub background: String,
    /// `png`, `jpeg` or `webp`.
    pub output_format: String,
    /// Token usage of the request.
    pub usage: Usage,
}

/// Which endpoint a stream belongs to (decides the event names).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ImageEndpoint {
    /// `POST /v1/images/generations`: `image_generation.*` events.
    Generation,
    /// `POST /v1/images/edits`: `image_edit.*` events.
    Edit,
}

/// An event of an Images stream; `type` is the event name.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "type")]
pub enum ImageStreamEvent {
    /// `image_generation.partial_image`.
    #[serde(rename = "image_generation.partial_image")]
    GenerationPartialImage(PartialImageEvent),
    /// `image_generation.completed`.
    #[serde(rename = "image_generation.completed")]
    GenerationCompleted(CompletedImageEvent),
    /// `image_edit.partial_image`.
    #[serde(rename = "image_edit.partial_image")]
    EditPartialImage(PartialImageEvent),
    /// `image_edit.completed`.
    #[serde(rename = "image_edit.completed")]
    EditCompleted(CompletedImageEvent),
}

impl ImageStreamEvent {
    /// The partial-image event of `endpoint`.
    pub fn partial(endpoint: ImageEndpoint, event: PartialImageEvent) -> Self {
        match endpoint {
            ImageEndpoint::Generation => Self::GenerationPartialImage(event),
            ImageEndpoint::Edit => Self::EditPartialImage(event),
        }
    }

    /// The completed event of `endpoint`.
    pub fn completed(endpoint: ImageEndpoint, event: CompletedImageEvent) -> Self {
        match endpoint {
            ImageEndpoint::Generation => Self::GenerationCompleted(event),
            ImageEndpoint::Edit => Self::EditCompleted(event),
        }
    }

    /// The event name, equal to the JSON `type`.
    pub fn event_type(&self) -> &'static str {
        match self {
            Self::GenerationPartialImage(_) => "image_generation.partial_image",
            Self::GenerationCompleted(_) => "image_generation.completed",
            Self::EditPartialImage(_) => "image_edit.partial_image",
            Self::EditCompleted(_) => "image_edit.completed",
        }
    }

    /// The SSE frame: `event: <type>`, one `data:` line, a blank line.
    pub fn to_sse(&self) -> Bytes {
        encode_event(self.event_type(), self)
    }

    /// Parses the `data` of an upstream Images stream event.
    pub fn from_data(data: &str) -> Result<Self, serde_json::Error> {
        serde_json::from_str(data)
    }
}

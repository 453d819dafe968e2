//! Events of a streamed Responses call, each with its `sequence_number`.

use bytes::Bytes;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::envelope::{OutputContent, OutputItem, ResponseObject};
use crate::error::ApiError;
use crate::sse::encode_event;

/// A `response.image_generation_call.partial_image` payload (`partial_image_b64`, not
/// `b64_json`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct PartialImagePayload {
    /// Position of the image call in `output`.
    pub output_index: u32,
    /// `ig_...` id of the image call.
    pub item_id: String,
    /// 0-based index of this partial image.
    pub partial_image_index: u32,
    /// The partial image, base64.
    pub partial_image_b64: String,
    /// Resolved size.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub size: Option<String>,
    /// Resolved quality.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub quality: Option<String>,
    /// Resolved background.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub background: Option<String>,
    /// Output format.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_format: Option<String>,
}

/// The payload of a Responses stream event; `type` is the event name.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "type")]
pub enum ResponseEvent {
    /// First event: the envelope, `in_progress`, no output.
    #[serde(rename = "response.created")]
    Created {
        /// The envelope.
        response: Box<ResponseObject>,
    },
    /// The response is running.
    #[serde(rename = "response.in_progress")]
    InProgress {
        /// The envelope.
        response: Box<ResponseObject>,
    },
    /// An output item starts; `output_index` values are 0, 1, 2... in order.
    #[serde(rename = "response.output_item.added")]
    OutputItemAdded {
        /// Position in `output`.
        output_index: u32,
        /// The item as far as known.
        item: OutputItem,
    },
    /// An output item is complete.
    #[serde(rename = "response.output_item.done")]
    OutputItemDone {
        /// Position in `output`.
        output_index: u32,
        /// The complete item.
        item: OutputItem,
    },
    /// A content part of a message starts.
    #[serde(rename = "response.content_part.added")]
    ContentPartAdded {
        /// Message item id.
        item_id: String,
        /// Position in `output`.
        output_index: u32,
        /// Position in `content`.
        content_index: u32,
        /// The part as far as known.
        part: OutputContent,
    },
    /// A content part of a message is complete.
    #[serde(rename = "response.content_part.done")]
    ContentPartDone {
        /// Message item id.
        item_id: String,
        /// Position in `output`.
        output_index: u32,
        /// Position in `content`.
        content_index: u32,
        /// The complete part.
        part: OutputContent,
    },
    /// More text of a message.
    #[serde(rename = "response.output_text.delta")]
    OutputTextDelta {
        /// Message item id.
        item_id: String,
        /// Position in `output`.
        output_index: u32,
        /// Position in `content`.
        content_index: u32,
        /// The new text.
        delta: String,
        /// Log probabilities; usually empty.
        logprobs: Vec<Value>,
    },
    /// The whole text of a message part.
    #[serde(rename = "response.output_text.done")]
    OutputTextDone {
        /// Message item id.
        item_id: String,
        /// Position in `output`.
        output_index: u32,
        /// Position in `content`.
        content_index: u32,
        /// The text.
        text: String,
        /// Log probabilities; usually empty.
        logprobs: Vec<Value>,
    },
    /// The image call started.
    #[serde(rename = "response.image_generation_call.in_progress")]
    ImageGenerationCallInProgress {
        /// Position in `output`.
        output_index: u32,
        /// `ig_...` id.
        item_id: String,
    },
    /// The image model is drawing.
    #[serde(rename = "response.image_generation_call.generating")]
    ImageGenerationCallGenerating {
        /// Position in `output`.
        output_index: u32,
        /// `ig_...` id.
        item_id: String,
    },
    /// A partial image.
    #[serde(rename = "response.image_generation_call.partial_image")]
    ImageGenerationCallPartialImage(PartialImagePayload),
    /// The image call finished (the image is in the following `output_item.done`).
    #[serde(rename = "response.image_generation_call.completed")]
    ImageGenerationCallCompleted {
        /// Position in `output`.
        output_index: u32,
        /// `ig_...` id.
        item_id: String,
    },
    /// Last event of a successful response: the final envelope.
    #[serde(rename = "response.completed")]
    Completed {
        /// The envelope.
        response: Box<ResponseObject>,
    },
    /// Last event of a failed response (`status: failed`, `error` set).
    #[serde(rename = "response.failed")]
    Failed {
        /// The envelope.
        response: Box<ResponseObject>,
    },
    /// Last event of a response that stopped early.
    #[serde(rename = "response.incomplete")]
    Incomplete {
        /// The envelope.
        response: Box<ResponseObject>,
    },
    /// An error outside the response object.
    #[serde(rename = "error")]
    Error {
        /// Machine-readable code, or null.
        code: Option<String>,
        /// Human-readable text.
        message: String,
        /// The parameter at fault, or null.
        param: Option<String>,
    },
}

impl ResponseEvent {
    /// The event name, equal to the JSON `type`.
    pub fn event_type(&self) -> &'static str {
        match self {
            Self::Created { .. } => "response.created",
            Self::InProgress { .. } => "response.in_progress",
            Self::OutputItemAdded { .. } => "response.output_item.added",
            Self::OutputItemDone { .. } => "response.output_item.done",
            Self::ContentPartAdded { .. } => "response.content_part.added",
            Self::ContentPartDone { .. } => "response.content_part.done",
            Self::OutputTextDelta { .. } => "response.output_text.delta",
            Self::OutputTextDone { .. } => "response.output_text.done",
            Self::ImageGenerationCallInProgress { .. } => "response.image_generation_call.in_progress",
            Self::ImageGenerationCallGenerating { .. } => "response.image_generation_call.generating",
            Self::ImageGenerationCallPartialImage(_) => "response.image_generation_call.partial_image",
            Self::ImageGenerationCallCompleted { .. } => "response.image_generation_call.completed",
            Self::Completed { .. } => "response.completed",
            Self::Failed { .. } => "response.failed",
            Self::Incomplete { .. } => "response.incomplete",
            Self::Error { .. } => "error",
        }
    }

    /// Every `type` this enum models, i.e. every value [`Self::event_type`] returns.
    pub const TYPES: &'static [&'static str] = &[
        "response.created",
        "response.in_progress",
        "response.output_item.added",
        "response.output_item.done",
        "response.content_part.added",
        "response.content_part.done",
        "response.output_text.delta",
        "response.output_text.done",
        "response.image_generation_call.in_progress",
        "response.image_generation_call.generating",
        "response.image_generation_call.partial_image",
        "response.image_generation_call.completed",
        "response.completed",
        "response.failed",
        "response.incomplete",
        "error",
    ];

    /// The `error` event for an [`ApiError`].
    pub fn error(err: &ApiError) -> Self {
        Self::Error {
            code: err.code().map(str::to_owned),
            message: err.message.clone(),
            param: err.param.clone(),
        }
    }
}

/// An event with its `sequence_number` (sent after the payload's keys).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ResponseStreamEvent {
    /// The payload, including `type`.
    #[serde(flatten)]
    pub event: ResponseEvent,
    /// Position in the stream: 0, 1, 2...
    pub sequence_number: u64,
}

impl ResponseStreamEvent {
    /// Parses the `data` of an upstream event. `Ok(None)` for a `type` this crate does not model
    /// (the Responses API has many more events; pass those through or skip them). The JSON is
    /// parsed once and its strings are moved, not copied, into the result.
    pub fn from_data(data: &str) -> Result<Option<Self>, serde_json::Error> {
        let value: Value = serde_json::from_str(data)?;
        let kind = value.get("type").and_then(Value::as_str);
        if !kind.is_some_and(|kind| ResponseEvent::TYPES.contains(&kind)) {
            return Ok(None);
        }
        serde_json::from_value(value).map(Some)
    }

    /// The SSE frame: `event: <type>`, one `data:` line, a blank line.
    pub fn to_sse(&self) -> Bytes {
        encode_event(self.event.event_type(), self)
    }
}

/// Numbers the events of one stream from 0 and frames them.
#[derive(Debug, Default)]
pub struct ResponseEventSequencer {
    next: u64,
}

impl ResponseEventSequencer {
    /// A sequencer that starts at 0.
    pub fn new() -> Self {
        Self::default()
    }

    /// The number the next event will get.
    pub fn next_number(&self) -> u64 {
        self.next
    }

    /// Gives `event` the next number.
    pub fn number(&mut self, event: ResponseEvent) -> ResponseStreamEvent {
        let sequence_number = self.next;
        self.next += 1;
        ResponseStreamEvent {
            event,
            sequence_number,
        }
    }

    /// Numbers `event` and returns its SSE frame.
    pub fn frame(&mut self, event: ResponseEvent) -> Bytes {
        self.number(event).to_sse()
    }
}

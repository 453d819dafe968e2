//! The Responses API on the wire: the envelope, its output items and the stream events.

mod envelope;
mod events;

pub use envelope::{
    ImageCallStatus, ImageGenerationCall, InputTokensDetails, MessageItem, OutputContent, OutputItem,
    OutputTokensDetails, ReasoningConfig, ReasoningItem, ResponseError, ResponseObject, ResponseObjectTag,
    ResponseStatus, ResponsesUsage, ToolUsage, image_tool_echo,
};
pub use events::{PartialImagePayload, ResponseEvent, ResponseEventSequencer, ResponseStreamEvent};

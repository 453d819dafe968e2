//! Serde types (with JSON Schemas) for everything the gateway puts on the wire.

pub mod images;
mod images_json;
pub mod models;
pub mod requests;
pub mod responses;

pub use images::{
    CompletedImageEvent, ImageData, ImageEndpoint, ImageStreamEvent, ImagesResponse, PartialImageEvent,
};
pub use models::{ModelEntry, ModelList};
pub use responses::{
    ImageCallStatus, ImageGenerationCall, OutputItem, ResponseEvent, ResponseEventSequencer, ResponseObject,
    ResponseStatus, ResponseStreamEvent, ResponsesUsage,
};

//! JSON Schemas of what the gateway accepts and sends, for `cargo xtask schemas`.

use schemars::{JsonSchema, generate::SchemaSettings};
use serde_json::Value;

use crate::error::ErrorEnvelope;
use crate::wire::images::{CompletedImageEvent, ImageStreamEvent, ImagesResponse, PartialImageEvent};
use crate::wire::models::{ModelEntry, ModelList};
use crate::wire::requests::{ImageEditRequest, ImageGenerationRequest, ResponsesRequest};
use crate::wire::responses::{ResponseObject, ResponseStreamEvent};

fn schema_of<T: JsonSchema>() -> Value {
    let generator = SchemaSettings::draft2020_12().into_generator();
    generator.into_root_schema_for::<T>().to_value()
}

/// `(file stem, schema)` for every published schema, e.g. `("images-response", {...})`.
pub fn json_schemas() -> Vec<(&'static str, Value)> {
    vec![
        ("images-generation-request", schema_of::<ImageGenerationRequest>()),
        ("images-edit-request", schema_of::<ImageEditRequest>()),
        ("images-response", schema_of::<ImagesResponse>()),
        ("image-stream-event", schema_of::<ImageStreamEvent>()),
        ("image-partial-image-event", schema_of::<PartialImageEvent>()),
        ("image-completed-event", schema_of::<CompletedImageEvent>()),
        ("error", schema_of::<ErrorEnvelope>()),
        ("responses-request", schema_of::<ResponsesRequest>()),
        ("response", schema_of::<ResponseObject>()),
        ("response-stream-event", schema_of::<ResponseStreamEvent>()),
        ("models-list", schema_of::<ModelList>()),
        ("model", schema_of::<ModelEntry>()),
    ]
}

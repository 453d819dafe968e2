//! `POST /images/generations`: the JSON body built from the validated parameters, and the field
//! list shared with the edit form.
//!
//! What is forwarded: the validated request, field by field, with the model rewritten to its
//! upstream id. Defaults the gateway filled in are sent explicitly (`n`, `size`, `quality`,
//! `output_format`, `background`, `moderation`, `stream`), so the upstream renders exactly what the
//! gateway validated and records, whatever the upstream's own defaults are (the Images API's edit
//! default size, for one, is not `auto`). Left out when absent: `output_compression` (absent, or
//! dropped for `png`), `user`, and `partial_images` unless streaming. Never sent: `response_format`
//! (GPT image models always answer base64) and `input_fidelity` (refused by validation). Edits also
//! leave out `moderation` when it is `auto` (see [`super::edits`]).

use bytes::Bytes;
use imagegate_domain::{ImageParams, Moderation};
use serde_json::{Map, Value};

use crate::failure::Failure;

/// One request field value.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum FieldValue {
    Text(String),
    Int(u64),
    Bool(bool),
}

impl FieldValue {
    /// The multipart text form (`true`/`false` for booleans, as the SDKs send them).
    pub(crate) fn to_form_text(&self) -> String {
        match self {
            Self::Text(text) => text.clone(),
            Self::Int(value) => value.to_string(),
            Self::Bool(value) => value.to_string(),
        }
    }

    fn to_json(&self) -> Value {
        match self {
            Self::Text(text) => Value::String(text.clone()),
            Self::Int(value) => Value::from(*value),
            Self::Bool(value) => Value::Bool(*value),
        }
    }
}

/// Whether the fields are for the JSON generation body or the multipart edit form.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Form {
    Generation,
    Edit,
}

/// The fields to send, in a fixed order.
pub(crate) fn fields(params: &ImageParams, form: Form) -> Vec<(&'static str, FieldValue)> {
    use FieldValue::{Bool, Int, Text};
    let mut fields = vec![
        ("model", Text(params.model.upstream().to_owned())),
        ("prompt", Text(params.prompt.clone())),
        ("n", Int(u64::from(params.n))),
        ("size", Text(params.size.to_string())),
        ("quality", Text(params.quality.as_str().to_owned())),
        ("output_format", Text(params.output_format.as_str().to_owned())),
    ];
    if let Some(compression) = params.output_compression {
        fields.push(("output_compression", Int(u64::from(compression))));
    }
    fields.push(("background", Text(params.background.as_str().to_owned())));
    if form == Form::Generation || params.moderation != Moderation::Auto {
        fields.push(("moderation", Text(params.moderation.as_str().to_owned())));
    }
    fields.push(("stream", Bool(params.stream)));
    if params.stream {
        fields.push(("partial_images", Int(u64::from(params.partial_images))));
    }
    if let Some(user) = &params.user {
        fields.push(("user", Text(user.clone())));
    }
    fields
}

/// The JSON body of a generation.
pub(crate) fn generation_body(params: &ImageParams) -> Result<Bytes, Failure> {
    let body: Map<String, Value> = fields(params, Form::Generation)
        .into_iter()
        .map(|(name, value)| (name.to_owned(), value.to_json()))
        .collect();
    serde_json::to_vec(&body)
        .map(Bytes::from)
        .map_err(|err| Failure::protocol(format!("encoding the request failed: {err}")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use imagegate_domain::{ImageParamsDraft, ModelCatalog, validate_generation};
    use std::collections::BTreeMap;

    fn params(draft: ImageParamsDraft) -> ImageParams {
        let catalog = ModelCatalog::new(
            ["gpt-image-2".to_owned()],
            BTreeMap::from([("image-latest".to_owned(), "gpt-image-2-2026-04-21".to_owned())]),
        );
        validate_generation(draft, &catalog).unwrap()
    }

    #[test]
    fn defaults_are_sent_and_absent_options_left_out() {
        let p = params(ImageParamsDraft {
            model: Some("image-latest".into()),
            prompt: Some("a cat".into()),
            ..Default::default()
        });
        let body: Value = serde_json::from_slice(&generation_body(&p).unwrap()).unwrap();
        assert_eq!(
            body,
            serde_json::json!({"model": "gpt-image-2-2026-04-21", "prompt": "a cat", "n": 1, "size": "auto",
                "quality": "auto", "output_format": "png", "background": "auto", "moderation": "auto",
                "stream": false})
        );
    }

    #[test]
    fn edit_fields_leave_out_auto_moderation_only() {
        let mut p = params(ImageParamsDraft {
            model: Some("gpt-image-2".into()),
            prompt: Some("a cat".into()),
            stream: Some(true),
            partial_images: Some(0),
            ..Default::default()
        });
        let names = |p: &ImageParams| {
            fields(p, Form::Edit)
                .into_iter()
                .map(|(n, _)| n)
                .collect::<Vec<_>>()
        };
        assert!(!names(&p).contains(&"moderation"));
        assert!(
            names(&p).contains(&"partial_images"),
            "sent when streaming, even 0"
        );
        p.moderation = Moderation::Low;
        assert!(names(&p).contains(&"moderation"));
    }
}

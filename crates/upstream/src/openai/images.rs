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

use std::borrow::Cow;

use bytes::Bytes;
use imagegate_domain::{ImageParams, Moderation};
use serde::ser::{Serialize, SerializeMap, Serializer};

use crate::failure::Failure;

/// One request field value, borrowed from the parameters where it can be.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum FieldValue<'a> {
    Text(Cow<'a, str>),
    Int(u64),
    Bool(bool),
}

impl FieldValue<'_> {
    /// The multipart text form (`true`/`false` for booleans, as the SDKs send them).
    pub(crate) fn into_form_text(self) -> String {
        match self {
            Self::Text(text) => text.into_owned(),
            Self::Int(value) => value.to_string(),
            Self::Bool(value) => value.to_string(),
        }
    }
}

impl Serialize for FieldValue<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            Self::Text(text) => serializer.serialize_str(text),
            Self::Int(value) => serializer.serialize_u64(*value),
            Self::Bool(value) => serializer.serialize_bool(*value),
        }
    }
}

/// Whether the fields are for the JSON generation body or the multipart edit form.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Form {
    Generation,
    Edit,
}

/// The most fields a request can have: the twelve names below, each at most once.
const MOST_FIELDS: usize = 12;

/// The fields to send, in a fixed order.
pub(crate) fn fields(params: &ImageParams, form: Form) -> Vec<(&'static str, FieldValue<'_>)> {
    use FieldValue::{Bool, Int, Text};
    let mut fields = Vec::with_capacity(MOST_FIELDS);
    fields.extend([
        ("model", Text(Cow::Borrowed(params.model.upstream()))),
        ("prompt", Text(Cow::Borrowed(params.prompt.as_str()))),
        ("n", Int(u64::from(params.n))),
        ("size", Text(Cow::Owned(params.size.to_string()))),
        ("quality", Text(Cow::Borrowed(params.quality.as_str()))),
        (
            "output_format",
            Text(Cow::Borrowed(params.output_format.as_str())),
        ),
    ]);
    if let Some(compression) = params.output_compression {
        fields.push(("output_compression", Int(u64::from(compression))));
    }
    fields.push(("background", Text(Cow::Borrowed(params.background.as_str()))));
    if form == Form::Generation || params.moderation != Moderation::Auto {
        fields.push(("moderation", Text(Cow::Borrowed(params.moderation.as_str()))));
    }
    fields.push(("stream", Bool(params.stream)));
    if params.stream {
        fields.push(("partial_images", Int(u64::from(params.partial_images))));
    }
    if let Some(user) = &params.user {
        fields.push(("user", Text(Cow::Borrowed(user.as_str()))));
    }
    fields
}

/// The fields as one JSON object, written straight out (no intermediate `serde_json::Map`).
struct JsonObject<'a>(&'a [(&'static str, FieldValue<'a>)]);

impl Serialize for JsonObject<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(self.0.len()))?;
        for (name, value) in self.0 {
            map.serialize_entry(name, value)?;
        }
        map.end()
    }
}

/// Room for the fields other than the prompt, so the body is written without growing.
const BODY_OVERHEAD: usize = 256;

/// The JSON body of a generation.
pub(crate) fn generation_body(params: &ImageParams) -> Result<Bytes, Failure> {
    let fields = fields(params, Form::Generation);
    let mut body = Vec::with_capacity(BODY_OVERHEAD + params.prompt.len());
    serde_json::to_writer(&mut body, &JsonObject(&fields))
        .map_err(|err| Failure::protocol(format!("encoding the request failed: {err}")))?;
    Ok(Bytes::from(body))
}

#[cfg(test)]
mod tests {
    use super::*;
    use imagegate_domain::{ImageParamsDraft, ModelCatalog, validate_generation};
    use serde_json::Value;
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

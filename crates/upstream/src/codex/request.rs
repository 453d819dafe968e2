//! The Responses request that stands for one image of an Images request on a ChatGPT-subscription
//! account: `stream: true`, `store: false`, one `image_generation` tool carrying every image
//! parameter, `tool_choice: {"type":"image_generation"}`, the prompt as `input_text` and the input
//! images as `input_image` data URLs (the mask as the tool's `input_image_mask`).
//!
//! The body is serialized once without its `model`; [`CodexRequest::body_for`] puts a main model in
//! front of it for each attempt. Image bytes are base64-encoded straight into the body.

use std::fmt;

use base64::display::Base64Display;
use base64::engine::general_purpose::STANDARD;
use bytes::{BufMut, Bytes, BytesMut};
use imagegate_domain::ImageParams;
use serde::{Serialize, Serializer};

use crate::call::UploadedImage;
use crate::failure::Failure;
use imagegate_codec::multipart::UploadData;

/// The instructions sent with every image request (the ChatGPT backend requires some).
pub(crate) const INSTRUCTIONS: &str =
    "Create the image the user asks for with the image_generation tool. Do not answer with text.";

/// A serialized request, waiting for its main model.
#[derive(Clone, Debug)]
pub(crate) struct CodexRequest {
    /// The JSON object without `model`, starting with `{`.
    rest: Bytes,
}

impl CodexRequest {
    /// Serializes the request for `params` (an edit when `images` is not empty).
    pub(crate) fn new(
        params: &ImageParams,
        images: &[UploadedImage],
        mask: Option<&UploadedImage>,
    ) -> Result<Self, Failure> {
        let mut content = vec![ContentPart::InputText { text: &params.prompt }];
        content.extend(images.iter().map(|image| ContentPart::InputImage {
            image_url: DataUrl(image),
        }));
        let body = Body {
            instructions: INSTRUCTIONS,
            input: [Message {
                kind: "message",
                role: "user",
                content,
            }],
            tools: [ImageTool {
                kind: "image_generation",
                model: params.model.upstream(),
                size: params.size.to_string(),
                quality: params.quality.as_str(),
                background: params.background.as_str(),
                output_format: params.output_format.as_str(),
                output_compression: params.output_compression,
                moderation: params.moderation.as_str(),
                partial_images: params.stream.then_some(params.partial_images),
                action: if images.is_empty() { "generate" } else { "edit" },
                input_image_mask: mask.map(|mask| MaskRef {
                    image_url: DataUrl(mask),
                }),
            }],
            tool_choice: ToolChoice {
                kind: "image_generation",
            },
            parallel_tool_calls: false,
            stream: true,
            store: false,
        };
        let rest = serde_json::to_vec(&body)
            .map_err(|err| Failure::protocol(format!("encoding the request failed: {err}")))?;
        Ok(Self {
            rest: Bytes::from(rest),
        })
    }

    /// The body with `model` set to `main_model`.
    pub(crate) fn body_for(&self, main_model: &str) -> Result<Bytes, Failure> {
        let model = serde_json::to_string(main_model)
            .map_err(|err| Failure::protocol(format!("encoding the request failed: {err}")))?;
        let tail = self.rest.slice(1.min(self.rest.len())..);
        let mut body = BytesMut::with_capacity(model.len() + tail.len() + 10);
        body.put_slice(b"{\"model\":");
        body.put_slice(model.as_bytes());
        body.put_u8(b',');
        body.put_slice(&tail);
        Ok(body.freeze())
    }
}

#[derive(Serialize)]
struct Body<'a> {
    instructions: &'static str,
    input: [Message<'a>; 1],
    tools: [ImageTool<'a>; 1],
    tool_choice: ToolChoice,
    parallel_tool_calls: bool,
    stream: bool,
    store: bool,
}

#[derive(Serialize)]
struct Message<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    role: &'static str,
    content: Vec<ContentPart<'a>>,
}

#[derive(Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum ContentPart<'a> {
    InputText { text: &'a str },
    InputImage { image_url: DataUrl<'a> },
}

#[derive(Serialize)]
struct ImageTool<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    model: &'a str,
    size: String,
    quality: &'static str,
    background: &'static str,
    output_format: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    output_compression: Option<u8>,
    moderation: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    partial_images: Option<u8>,
    action: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    input_image_mask: Option<MaskRef<'a>>,
}

#[derive(Serialize)]
struct MaskRef<'a> {
    image_url: DataUrl<'a>,
}

#[derive(Serialize)]
struct ToolChoice {
    #[serde(rename = "type")]
    kind: &'static str,
}

/// `data:<mime>;base64,<bytes>`, written into the JSON without an intermediate string.
struct DataUrl<'a>(&'a UploadedImage);

impl fmt::Display for DataUrl<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let image = self.0;
        // `codex::call` loads spilled files into memory first; a file still on disk fails the
        // serialization rather than sending an empty image.
        let UploadData::Memory(bytes) = &image.data else {
            return Err(fmt::Error);
        };
        write!(
            f,
            "data:{};base64,{}",
            image.info.format.mime(),
            Base64Display::new(bytes, &STANDARD)
        )
    }
}

impl Serialize for DataUrl<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

/// Base64 of `bytes` (for tests and callers that need the same encoding).
#[cfg(test)]
pub(crate) fn base64(bytes: &[u8]) -> String {
    use base64::Engine as _;
    STANDARD.encode(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use imagegate_domain::{
        Dimensions, ImageFileFormat, ImageInfo, ImageParamsDraft, ModelCatalog, validate_edit,
        validate_generation,
    };
    use serde_json::{Value, json};

    fn upload(format: ImageFileFormat, bytes: &'static [u8]) -> UploadedImage {
        UploadedImage {
            field: "image[]".into(),
            filename: None,
            info: ImageInfo {
                format,
                dimensions: Dimensions {
                    width: 1024,
                    height: 1024,
                },
                has_alpha: true,
                byte_len: bytes.len() as u64,
            },
            data: UploadData::Memory(Bytes::from_static(bytes)),
        }
    }

    #[test]
    fn generation_request_carries_every_parameter_in_the_tool() {
        let draft = ImageParamsDraft {
            model: Some("gpt-image-2".into()),
            prompt: Some("a red fox".into()),
            size: Some("1536x1024".into()),
            quality: Some("high".into()),
            output_format: Some("webp".into()),
            output_compression: Some(70),
            background: Some("opaque".into()),
            moderation: Some("low".into()),
            stream: Some(true),
            partial_images: Some(2),
            ..Default::default()
        };
        let params = validate_generation(draft, &ModelCatalog::default()).unwrap();
        let request = CodexRequest::new(&params, &[], None).unwrap();
        let body: Value = serde_json::from_slice(&request.body_for("gpt-5.4").unwrap()).unwrap();
        assert_eq!(
            body,
            json!({"model": "gpt-5.4", "instructions": INSTRUCTIONS,
                "input": [{"type": "message", "role": "user", "content": [{"type": "input_text", "text": "a red fox"}]}],
                "tools": [{"type": "image_generation", "model": "gpt-image-2", "size": "1536x1024", "quality": "high",
                    "background": "opaque", "output_format": "webp", "output_compression": 70, "moderation": "low",
                    "partial_images": 2, "action": "generate"}],
                "tool_choice": {"type": "image_generation"}, "parallel_tool_calls": false, "stream": true, "store": false})
        );
        let again: Value = serde_json::from_slice(&request.body_for("gpt-5").unwrap()).unwrap();
        assert_eq!(again["model"], "gpt-5");
    }

    #[test]
    fn edit_request_sends_images_as_data_urls_and_the_mask_in_the_tool() {
        let draft = ImageParamsDraft {
            model: Some("gpt-image-2".into()),
            prompt: Some("add a hat".into()),
            ..Default::default()
        };
        let params = validate_edit(draft, &ModelCatalog::default()).unwrap();
        let images = [
            upload(ImageFileFormat::Png, b"\x89PNG one"),
            upload(ImageFileFormat::Jpeg, b"\xff\xd8 two"),
        ];
        let mask = upload(ImageFileFormat::Png, b"\x89PNG mask");
        let request = CodexRequest::new(&params, &images, Some(&mask)).unwrap();
        let body: Value = serde_json::from_slice(&request.body_for("gpt-5").unwrap()).unwrap();
        let content = &body["input"][0]["content"];
        assert_eq!(content[1]["type"], "input_image");
        assert_eq!(
            content[1]["image_url"],
            format!("data:image/png;base64,{}", base64(b"\x89PNG one"))
        );
        assert_eq!(
            content[2]["image_url"],
            format!("data:image/jpeg;base64,{}", base64(b"\xff\xd8 two"))
        );
        let tool = &body["tools"][0];
        assert_eq!(tool["action"], "edit");
        assert_eq!(
            tool["input_image_mask"]["image_url"],
            format!("data:image/png;base64,{}", base64(b"\x89PNG mask"))
        );
        assert!(
            tool.get("partial_images").is_none(),
            "partial images only when streaming"
        );
    }
}

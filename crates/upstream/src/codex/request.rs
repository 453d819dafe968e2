//! The Responses request that stands for one image of an Images request on a ChatGPT-subscription
//! account: `stream: true`, `store: false`, one `image_generation` tool carrying every image
//! parameter, `tool_choice: {"type":"image_generation"}`, the prompt as `input_text` and the input
//! images as `input_image` data URLs (the mask as the tool's `input_image_mask`).
//!
//! The body is serialized once without its `model` and without the images' bytes;
//! [`CodexRequest::body_for`] puts a main model in front of it for each attempt and streams it, the
//! images base64-encoded from their uploads (in memory, or read from disk) as it goes: an edit's
//! memory does not grow with its images, however large and however many tries it takes.

use std::collections::hash_map::RandomState;
use std::hash::BuildHasher;
use std::io;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use bytes::{Bytes, BytesMut};
use futures::StreamExt;
use futures::stream::BoxStream;
use imagegate_domain::ImageParams;
use serde::{Serialize, Serializer};

use crate::call::UploadedImage;
use crate::failure::Failure;
use crate::openai::RequestBody;
use imagegate_codec::multipart::UploadData;

/// The instructions sent with every image request (the ChatGPT backend requires some).
pub(crate) const INSTRUCTIONS: &str =
    "Create the image the user asks for with the image_generation tool. Do not answer with text.";

/// A serialized request, waiting for its main model.
#[derive(Clone)]
pub(crate) struct CodexRequest {
    /// The JSON object without `model`, starting with `{`: pieces of JSON text, and between them
    /// the uploads whose base64 goes there.
    pieces: Vec<Piece>,
}

#[derive(Clone)]
enum Piece {
    Json(Bytes),
    Base64(UploadData),
}

impl CodexRequest {
    /// Serializes the request for `params` (an edit when `images` is not empty).
    pub(crate) fn new(
        params: &ImageParams,
        images: &[UploadedImage],
        mask: Option<&UploadedImage>,
    ) -> Result<Self, Failure> {
        let marker = Marker::not_in(&params.prompt);
        let uploads: Vec<&UploadedImage> = images.iter().chain(mask).collect();
        let url = |index: usize| DataUrl {
            mime: uploads.get(index).map_or("", |image| image.info.format.mime()),
            marker: &marker,
            index,
        };
        let mut content = vec![ContentPart::InputText { text: &params.prompt }];
        content.extend((0..images.len()).map(|index| ContentPart::InputImage {
            image_url: url(index),
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
                input_image_mask: mask.map(|_| MaskRef {
                    image_url: url(images.len()),
                }),
            }],
            tool_choice: ToolChoice {
                kind: "image_generation",
            },
            parallel_tool_calls: false,
            stream: true,
            store: false,
        };
        let json = serde_json::to_vec(&body)
            .map_err(|err| Failure::protocol(format!("encoding the request failed: {err}")))?;
        let json = Bytes::from(json);
        let mut pieces = Vec::with_capacity(2 * uploads.len() + 1);
        let mut at = 0;
        for (index, upload) in uploads.iter().enumerate() {
            let needle = marker.of(index);
            let found = find(&json[at..], needle.as_bytes())
                .ok_or_else(|| Failure::protocol("encoding the request failed: an image is missing"))?;
            pieces.push(Piece::Json(json.slice(at..at + found)));
            pieces.push(Piece::Base64(upload.data.clone()));
            at += found + needle.len();
        }
        pieces.push(Piece::Json(json.slice(at..)));
        Ok(Self { pieces })
    }

    /// The body with `model` set to `main_model`, streamed, with its length.
    pub(crate) fn body_for(&self, main_model: &str) -> Result<RequestBody, Failure> {
        let (stream, length) = self.stream_for(main_model)?;
        Ok(RequestBody::JsonStream {
            body: reqwest::Body::wrap_stream(stream),
            length,
        })
    }

    /// The bytes of [`Self::body_for`] as a stream, and how many there are. Each call opens the
    /// spilled uploads anew.
    pub(crate) fn stream_for(
        &self,
        main_model: &str,
    ) -> Result<(BoxStream<'static, io::Result<Bytes>>, u64), Failure> {
        let model = serde_json::to_string(main_model)
            .map_err(|err| Failure::protocol(format!("encoding the request failed: {err}")))?;
        let mut parts: Vec<BoxStream<'static, io::Result<Bytes>>> = Vec::with_capacity(self.pieces.len() + 1);
        parts.push(once(Bytes::from(format!("{{\"model\":{model},"))));
        let mut length = 0u64;
        for (index, piece) in self.pieces.iter().enumerate() {
            match piece {
                Piece::Json(json) => {
                    // The object's `{` is already there, in front of `model`.
                    let json = if index == 0 {
                        json.slice(1.min(json.len())..)
                    } else {
                        json.clone()
                    };
                    length += json.len() as u64;
                    parts.push(once(json));
                }
                Piece::Base64(data) => {
                    length += data.len().div_ceil(3) * 4;
                    let bytes = data.stream().map_err(|err| {
                        Failure::protocol(format!("reading an uploaded file failed: {err}"))
                    })?;
                    parts.push(base64_stream(bytes.boxed()));
                }
            }
        }
        length += (model.len() + 10) as u64;
        Ok((futures::stream::iter(parts).flatten().boxed(), length))
    }
}

fn once(bytes: Bytes) -> BoxStream<'static, io::Result<Bytes>> {
    futures::stream::once(std::future::ready(Ok(bytes))).boxed()
}

/// The base64 of the bytes of `input`, chunk by chunk: whole 3-byte groups as they come, the last
/// one or two bytes padded at the end.
fn base64_stream(input: BoxStream<'static, io::Result<Bytes>>) -> BoxStream<'static, io::Result<Bytes>> {
    let state = (Some(input), BytesMut::new());
    futures::stream::unfold(state, |(input, mut carry)| async move {
        let mut input = input?;
        loop {
            match input.next().await {
                Some(Ok(chunk)) => {
                    carry.extend_from_slice(&chunk);
                    let whole = carry.len() - carry.len() % 3;
                    if whole == 0 {
                        continue;
                    }
                    let groups = carry.split_to(whole);
                    let encoded = Bytes::from(STANDARD.encode(&groups));
                    return Some((Ok(encoded), (Some(input), carry)));
                }
                Some(Err(err)) => return Some((Err(err), (None, BytesMut::new()))),
                None if carry.is_empty() => return None,
                None => {
                    let encoded = Bytes::from(STANDARD.encode(&carry));
                    return Some((Ok(encoded), (None, BytesMut::new())));
                }
            }
        }
    })
    .boxed()
}

/// Where `needle` first occurs in `haystack`.
fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|window| window == needle)
}

/// What stands for an upload's base64 in the serialized body: a random token the prompt (the one
/// text a client chooses) does not hold, numbered per upload.
struct Marker(String);

impl Marker {
    fn not_in(prompt: &str) -> Self {
        loop {
            let token = RandomState::new().hash_one(prompt.len());
            let marker = format!("imagegate-upload-{token:016x}-");
            if !prompt.contains(&marker) {
                return Self(marker);
            }
        }
    }

    fn of(&self, index: usize) -> String {
        format!("{}{index}.", self.0)
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

/// `data:<mime>;base64,` and the marker the upload's base64 replaces.
struct DataUrl<'a> {
    mime: &'static str,
    marker: &'a Marker,
    index: usize,
}

impl Serialize for DataUrl<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let url = format!("data:{};base64,{}", self.mime, self.marker.of(self.index));
        serializer.serialize_str(&url)
    }
}

/// Base64 of `bytes` (for tests and callers that need the same encoding).
#[cfg(test)]
pub(crate) fn base64(bytes: &[u8]) -> String {
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

    /// The body for `model`, checked to be as long as announced.
    async fn body(request: &CodexRequest, model: &str) -> Value {
        let (stream, length) = request.stream_for(model).unwrap();
        let chunks: Vec<Bytes> = stream.map(Result::unwrap).collect().await;
        let bytes = chunks.concat();
        assert_eq!(bytes.len() as u64, length);
        serde_json::from_slice(&bytes).unwrap()
    }

    #[tokio::test]
    async fn generation_request_carries_every_parameter_in_the_tool() {
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
        let body = body(&request, "gpt-5.4").await;
        assert_eq!(
            body,
            json!({"model": "gpt-5.4", "instructions": INSTRUCTIONS,
                "input": [{"type": "message", "role": "user", "content": [{"type": "input_text", "text": "a red fox"}]}],
                "tools": [{"type": "image_generation", "model": "gpt-image-2", "size": "1536x1024", "quality": "high",
                    "background": "opaque", "output_format": "webp", "output_compression": 70, "moderation": "low",
                    "partial_images": 2, "action": "generate"}],
                "tool_choice": {"type": "image_generation"}, "parallel_tool_calls": false, "stream": true, "store": false})
        );
        let again = super::tests::body(&request, "gpt-5").await;
        assert_eq!(again["model"], "gpt-5");
    }

    #[tokio::test]
    async fn edit_request_sends_images_as_data_urls_and_the_mask_in_the_tool() {
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
        let body = body(&request, "gpt-5").await;
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

    #[tokio::test]
    async fn base64_is_the_same_however_the_bytes_are_cut() {
        let all: Vec<u8> = (0..=255u8).cycle().take(1000).collect();
        for cuts in [
            vec![1, 1, 1, 2, 5, 0, 7],
            vec![999],
            vec![3, 3],
            vec![2, 2, 2, 2, 1],
        ] {
            let mut chunks = Vec::new();
            let mut at = 0;
            for cut in cuts {
                let end = (at + cut).min(all.len());
                chunks.push(Ok(Bytes::copy_from_slice(&all[at..end])));
                at = end;
            }
            chunks.push(Ok(Bytes::copy_from_slice(&all[at..])));
            let encoded: Vec<Bytes> = base64_stream(futures::stream::iter(chunks).boxed())
                .map(Result::unwrap)
                .collect()
                .await;
            assert_eq!(encoded.concat(), STANDARD.encode(&all).into_bytes());
        }
    }

    #[tokio::test]
    async fn a_prompt_that_looks_like_an_upload_marker_stays_text() {
        let prompt = "imagegate-upload-0000000000000000-0. and data:image/png;base64,imagegate-upload-";
        let draft = ImageParamsDraft {
            model: Some("gpt-image-2".into()),
            prompt: Some(prompt.into()),
            ..Default::default()
        };
        let params = validate_edit(draft, &ModelCatalog::default()).unwrap();
        let images = [upload(ImageFileFormat::Png, b"\x89PNG one")];
        let request = CodexRequest::new(&params, &images, None).unwrap();
        let body = body(&request, "gpt-5").await;
        let content = &body["input"][0]["content"];
        assert_eq!(content[0]["text"], prompt);
        assert_eq!(
            content[1]["image_url"],
            format!("data:image/png;base64,{}", base64(b"\x89PNG one"))
        );
    }
}

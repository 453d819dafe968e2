//! Reading the Responses stream of one image call: partial images, the final image (the
//! `image_generation_call` item's `result`), the image token usage (`tool_usage.image_gen`) and
//! failures. Event data is parsed with borrowed strings, so the base64 is copied once, into the
//! value returned.

use std::borrow::Cow;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use imagegate_codec::image_header;
use imagegate_codec::sse::SseEvent;
use imagegate_domain::Usage;
use reqwest::header::HeaderMap;
use serde::Deserialize;
use serde_json::{Map, Value};

use crate::failure::{Failure, classify_error_object};
use crate::openai::now_unix_ms;

/// What one upstream event means for the image being made.
#[derive(Debug, PartialEq)]
pub(crate) enum Step {
    /// A partial image.
    Partial(PartialImage),
    /// The final image (the usage follows with [`Step::Completed`]).
    Image(FinalImage),
    /// The response completed; `image` is set when the final image was only in the response.
    Completed { usage: Usage, image: Option<FinalImage> },
    /// The response failed.
    Failed(Failure),
    /// Nothing to relay.
    Ignore,
}

/// Image properties as the upstream reports them (each may be missing), but for `size`: the
/// dimensions in the image's own header where they can be read, so an image smaller than the
/// upstream says is reported (and recorded) at the size it has.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Resolved {
    pub(crate) size: Option<String>,
    pub(crate) quality: Option<String>,
    pub(crate) background: Option<String>,
    pub(crate) output_format: Option<String>,
}

/// A partial image.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct PartialImage {
    pub(crate) b64: String,
    pub(crate) index: u32,
    pub(crate) resolved: Resolved,
}

/// The final image of one call.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct FinalImage {
    pub(crate) b64: String,
    pub(crate) revised_prompt: Option<String>,
    pub(crate) resolved: Resolved,
}

#[derive(Deserialize)]
struct Event<'a> {
    #[serde(rename = "type", borrow)]
    kind: Cow<'a, str>,
    #[serde(borrow, default, deserialize_with = "borrowed")]
    partial_image_b64: Option<Cow<'a, str>>,
    #[serde(default)]
    partial_image_index: Option<u32>,
    #[serde(borrow, default)]
    size: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    quality: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    background: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    output_format: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    item: Option<Item<'a>>,
    #[serde(borrow, default)]
    response: Option<Response<'a>>,
}

#[derive(Deserialize)]
struct Item<'a> {
    #[serde(rename = "type", borrow)]
    kind: Cow<'a, str>,
    #[serde(borrow, default, deserialize_with = "borrowed")]
    result: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    revised_prompt: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    size: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    quality: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    background: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    output_format: Option<Cow<'a, str>>,
}

#[derive(Deserialize)]
struct Response<'a> {
    #[serde(default)]
    error: Option<Map<String, Value>>,
    #[serde(default)]
    incomplete_details: Option<Value>,
    #[serde(default)]
    tool_usage: Option<ToolUsage>,
    #[serde(borrow, default)]
    output: Vec<Item<'a>>,
}

#[derive(Deserialize)]
struct ToolUsage {
    /// `None` where its shape is not one we read: an odd usage must not cost the image.
    #[serde(default, deserialize_with = "imagegate_codec::usage_scan::usage_if_readable")]
    image_gen: Option<Usage>,
}

/// An optional string borrowed from the event's data unless it has escapes (base64 has none). A
/// plain `Option<Cow<str>>` field never borrows (serde borrows a `Cow` only where it is the whole
/// field), and an image copied out of the data only to be dropped (the one `response.completed`
/// repeats) would cost its size twice for a moment.
fn borrowed<'de, D>(deserializer: D) -> Result<Option<Cow<'de, str>>, D::Error>
where
    D: serde::Deserializer<'de>,
{
    #[derive(Deserialize)]
    struct Text<'a>(#[serde(borrow)] Cow<'a, str>);
    Ok(Option::<Text<'de>>::deserialize(deserializer)?.map(|text| text.0))
}

fn owned(value: Option<Cow<'_, str>>) -> Option<String> {
    value.map(Cow::into_owned)
}

/// Base64 characters decoded to read an image's header: 48 KiB of the file, past the metadata
/// segments (EXIF, ICC profile) that may come before a JPEG's frame header.
const HEADER_B64_CHARS: usize = 4 * 16_384;

/// The pixel size (`WxH`) in the header of the base64 image `b64`, if it is a PNG, JPEG or WebP
/// file whose header lies within its first [`HEADER_B64_CHARS`] characters.
pub(crate) fn header_size(b64: &str) -> Option<String> {
    let prefix = b64.get(..b64.len().min(HEADER_B64_CHARS) / 4 * 4)?;
    let bytes = STANDARD.decode(prefix).ok()?;
    image_header::dimensions(&bytes).map(|dimensions| dimensions.to_string())
}

/// The size to report for image `b64`: its own, else what the upstream said.
fn produced_size(b64: &str, reported: Option<Cow<'_, str>>) -> Option<String> {
    header_size(b64).or_else(|| owned(reported))
}

impl<'a> Item<'a> {
    fn into_final(self) -> Option<FinalImage> {
        if self.kind != "image_generation_call" {
            return None;
        }
        let b64 = self.result.filter(|result| !result.is_empty())?.into_owned();
        let size = produced_size(&b64, self.size);
        Some(FinalImage {
            b64,
            revised_prompt: owned(self.revised_prompt),
            resolved: Resolved {
                size,
                quality: owned(self.quality),
                background: owned(self.background),
                output_format: owned(self.output_format),
            },
        })
    }
}

/// Reads one event of the upstream stream (error events were already turned into failures by the
/// relay). With `image_in_hand` (an `output_item.done` gave the final image), the copy of it that
/// `response.completed` repeats is left in the event's data instead of being copied out.
pub(crate) fn step(event: &SseEvent, image_in_hand: bool) -> Step {
    let Ok(event) = serde_json::from_str::<Event<'_>>(&event.data) else {
        return Step::Ignore;
    };
    match event.kind.as_ref() {
        "response.image_generation_call.partial_image" => match event.partial_image_b64 {
            Some(b64) => Step::Partial(PartialImage {
                resolved: Resolved {
                    size: produced_size(&b64, event.size),
                    quality: owned(event.quality),
                    background: owned(event.background),
                    output_format: owned(event.output_format),
                },
                index: event.partial_image_index.unwrap_or(0),
                b64: b64.into_owned(),
            }),
            None => Step::Ignore,
        },
        "response.output_item.done" => match event.item.and_then(Item::into_final) {
            Some(image) => Step::Image(image),
            None => Step::Ignore,
        },
        "response.completed" => {
            let (usage, image) = match event.response {
                Some(response) => {
                    let image = match image_in_hand {
                        true => None,
                        false => response.output.into_iter().find_map(Item::into_final),
                    };
                    (image_tokens(response.tool_usage), image)
                }
                None => (Usage::default(), None),
            };
            Step::Completed { usage, image }
        }
        "response.failed" => {
            let (error, billed) = match event.response {
                Some(response) => (response.error, image_tokens(response.tool_usage)),
                None => (None, Usage::default()),
            };
            let failure = match error {
                Some(error) => classify_error_object(None, &error, &HeaderMap::new(), now_unix_ms()),
                None => Failure::transient("the upstream response failed without an error"),
            };
            Step::Failed(failure.with_spent(0, billed))
        }
        "response.incomplete" => {
            let (details, billed) = match event.response {
                Some(response) => (response.incomplete_details, image_tokens(response.tool_usage)),
                None => (None, Usage::default()),
            };
            let reason = details
                .and_then(|d| d.get("reason").and_then(Value::as_str).map(str::to_owned))
                .unwrap_or_else(|| "unknown".to_owned());
            let failure = Failure::transient(format!("the upstream response is incomplete ({reason})"));
            Step::Failed(failure.with_spent(0, billed))
        }
        _ => Step::Ignore,
    }
}

/// The image tool's tokens of a response that ended (none where it reports none): what the image
/// cost, or, for a response that failed or stopped short, what the account was billed for no image.
fn image_tokens(tool_usage: Option<ToolUsage>) -> Usage {
    with_total(tool_usage.and_then(|t| t.image_gen).unwrap_or_default())
}

/// `total_tokens` filled in when the upstream left it out.
fn with_total(usage: Usage) -> Usage {
    if usage.total_tokens == 0 {
        Usage {
            total_tokens: usage.input_tokens.saturating_add(usage.output_tokens),
            ..usage
        }
    } else {
        usage
    }
}

#[cfg(test)]
#[path = "translate_tests.rs"]
mod tests;

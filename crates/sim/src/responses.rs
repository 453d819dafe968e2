//! The simulated Responses API: reading the input, planning the image call, and building the envelope and
//! the stream events in the order the real API sends them.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use imagegate_codec::json::ResponsesBody;
use imagegate_codec::wire::responses::{MessageItem, OutputContent, ToolUsage};
use imagegate_codec::wire::{
    ImageCallStatus, ImageGenerationCall, OutputItem, ResponseObject, ResponseStatus, ResponsesUsage,
};
use imagegate_domain::{Dimensions, ImageAction, ImageTool};
use serde_json::{Map, Value};

use crate::simulator::{ImageJob, ImageOutcome, JobKind, unix_now};
use crate::usage::responses_usage;

mod echo;
pub mod events;

/// Text of the assistant message after an image.
pub const IMAGE_MESSAGE: &str = "Here is the simulated image.";
/// Text of the assistant message when no image is made.
pub const NO_IMAGE_MESSAGE: &str = "I could not create an image for this request.";

/// What the user sent: text (for the prompt and the token count) and the sizes of input images.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ResponsesInput {
    /// User text parts joined by newlines.
    pub text: String,
    /// `instructions`, if any.
    pub instructions: String,
    /// Sizes of `input_image` parts and earlier `image_generation_call` results, in order.
    pub images: Vec<Dimensions>,
}

impl ResponsesInput {
    /// Reads `input` (a string or a list of items) and `instructions` of a request body.
    pub fn read(body: &Map<String, Value>) -> Self {
        let mut input = Self {
            instructions: body
                .get("instructions")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_owned(),
            ..Self::default()
        };
        let mut texts: Vec<&str> = Vec::new();
        match body.get("input") {
            Some(Value::String(text)) => texts.push(text),
            Some(Value::Array(items)) => {
                for item in items {
                    input.read_item(item, &mut texts);
                }
            }
            _ => {}
        }
        input.text = texts.join("\n");
        input
    }

    fn read_item<'a>(&mut self, item: &'a Value, texts: &mut Vec<&'a str>) {
        if item.get("type").and_then(Value::as_str) == Some("image_generation_call") {
            if let Some(result) = item.get("result").and_then(Value::as_str) {
                self.images.extend(image_dimensions(result));
            }
            return;
        }
        if item
            .get("role")
            .and_then(Value::as_str)
            .is_some_and(|role| role != "user")
        {
            return;
        }
        match item.get("content") {
            Some(Value::String(text)) => texts.push(text),
            Some(Value::Array(parts)) => {
                for part in parts {
                    match part.get("type").and_then(Value::as_str) {
                        Some("input_text") => texts.extend(part.get("text").and_then(Value::as_str)),
                        Some("input_image") => {
                            let url = part.get("image_url").and_then(Value::as_str).unwrap_or("");
                            let b64 = url.split_once("base64,").map_or(url, |(_, data)| data);
                            self.images.extend(image_dimensions(b64));
                        }
                        _ => {}
                    }
                }
            }
            _ => {}
        }
    }
}

/// Dimensions of a base64 image (PNG, JPEG or WebP header), if it decodes.
fn image_dimensions(b64: &str) -> Option<Dimensions> {
    let bytes = BASE64.decode(b64.trim()).ok()?;
    imagegate_codec::image_header::sniff(&bytes)
        .ok()
        .map(|info| info.dimensions)
}

/// One simulated Responses call: ids, the echoed request settings and the planned image job.
#[derive(Clone, Debug, PartialEq)]
pub struct ResponsesPlan {
    /// The `in_progress` envelope every event is built from.
    pub envelope: ResponseObject,
    /// `ig_...` id of the image call.
    pub image_call_id: String,
    /// `msg_...` id of the closing message.
    pub message_id: String,
    /// What the user sent.
    pub input: ResponsesInput,
    /// The image job, when the tool is called.
    pub job: Option<ImageJob>,
    /// `generate` or `edit`.
    pub action: &'static str,
    /// Whether the call is streamed.
    pub stream: bool,
    /// Whether the completed envelope reports the image's usage (`tool_usage`); see the
    /// `no_usage` fault.
    pub image_usage: bool,
    /// Whether the call is a ChatGPT subscription's (not stored): as the ChatGPT backend does, its
    /// stream starts with a `codex.rate_limits` event and its `response.completed` lists no output
    /// (the items came in the stream's `response.output_item.done` events).
    pub unstored: bool,
}

/// Ids the plan needs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PlanIds {
    /// `resp_...`.
    pub response: String,
    /// `ig_...`.
    pub image_call: String,
    /// `msg_...`.
    pub message: String,
}

impl ResponsesPlan {
    /// Plans the call for a decoded request whose main model and image tools passed validation. The tool
    /// is called unless there is none, `tool_choice` is `"none"`, or `with_image` is false.
    pub fn new(
        request: &ResponsesBody,
        main_model: String,
        tools: &[ImageTool],
        ids: PlanIds,
        with_image: bool,
    ) -> Self {
        let body = &request.body;
        let input = ResponsesInput::read(body);
        let created = i64::try_from(unix_now()).unwrap_or(i64::MAX);
        let mut envelope = ResponseObject::new(ids.response, created, main_model);
        echo::echo_settings(&mut envelope, request, tools);
        let tool_allowed = body.get("tool_choice").and_then(Value::as_str) != Some("none");
        let tool = tools.first().filter(|_| tool_allowed && with_image);
        let edit = tool.is_some_and(|t| match t.action {
            ImageAction::Edit => true,
            ImageAction::Generate => false,
            ImageAction::Auto => !input.images.is_empty(),
        });
        let job = tool.map(|tool| ImageJob {
            kind: if edit { JobKind::Edit } else { JobKind::Generate },
            prompt: revised_prompt(&input.text),
            n: 1,
            size: tool.size,
            quality: tool.quality,
            output_format: tool.output_format,
            output_compression: tool.output_compression,
            background: tool.background,
            partial_images: if request.stream { tool.partial_images } else { 0 },
            input_images: if edit { input.images.clone() } else { Vec::new() },
        });
        Self {
            envelope,
            image_call_id: ids.image_call,
            message_id: ids.message,
            input,
            job,
            action: if edit { "edit" } else { "generate" },
            stream: request.stream,
            image_usage: true,
            unstored: false,
        }
    }

    /// The message the assistant closes with.
    pub fn message_text(&self) -> &'static str {
        if self.job.is_some() {
            IMAGE_MESSAGE
        } else {
            NO_IMAGE_MESSAGE
        }
    }

    /// The finished image call item.
    pub fn image_call(&self, outcome: &ImageOutcome) -> ImageGenerationCall {
        ImageGenerationCall {
            id: self.image_call_id.clone(),
            status: ImageCallStatus::Completed,
            action: Some(self.action.to_owned()),
            background: Some(outcome.background.as_str().to_owned()),
            output_format: Some(outcome.output_format.as_str().to_owned()),
            quality: Some(outcome.quality.as_str().to_owned()),
            size: Some(outcome.size.to_string()),
            revised_prompt: self.job.as_ref().map(|job| job.prompt.clone()),
            result: outcome.images.first().map(|image| image.b64.to_string()),
        }
    }

    /// The message item, `in_progress` (no content yet) or `completed`.
    pub fn message(&self, completed: bool) -> MessageItem {
        MessageItem {
            id: self.message_id.clone(),
            status: if completed { "completed" } else { "in_progress" }.to_owned(),
            role: "assistant".to_owned(),
            content: if completed {
                vec![self.text_part(self.message_text())]
            } else {
                Vec::new()
            },
        }
    }

    /// An `output_text` content part.
    pub fn text_part(&self, text: &str) -> OutputContent {
        OutputContent::OutputText {
            annotations: Vec::new(),
            logprobs: Vec::new(),
            text: text.to_owned(),
        }
    }

    /// The completed envelope: output items, main-model usage, and the image usage in
    /// `tool_usage.image_gen`.
    pub fn completed(&self, outcome: Option<&ImageOutcome>) -> ResponseObject {
        let mut envelope = self.envelope.clone();
        envelope.status = ResponseStatus::Completed;
        if let Some(outcome) = outcome {
            envelope
                .output
                .push(OutputItem::ImageGenerationCall(self.image_call(outcome)));
            if self.image_usage {
                envelope.tool_usage = Some(ToolUsage {
                    image_gen: Some(outcome.usage),
                });
            }
        }
        envelope.output.push(OutputItem::Message(self.message(true)));
        envelope.usage = Some(self.main_usage());
        envelope
    }

    /// The response `response.completed` carries: [`Self::completed`], without its output when
    /// the call is [`Self::unstored`].
    pub fn final_response(&self, outcome: Option<&ImageOutcome>) -> ResponseObject {
        let mut envelope = self.completed(outcome);
        if self.unstored {
            envelope.output.clear();
        }
        envelope
    }

    /// Usage of the main model.
    pub fn main_usage(&self) -> ResponsesUsage {
        let input = format!("{}\n{}", self.input.instructions, self.input.text);
        let revised = self.job.as_ref().map_or("", |job| job.prompt.as_str());
        responses_usage(&input, &self.input.images, revised, self.message_text())
    }
}

/// The prompt the "main model" hands to the image tool: the user's text, trimmed and bounded.
pub fn revised_prompt(text: &str) -> String {
    let trimmed = text.trim();
    if trimmed.is_empty() {
        return "An image.".to_owned();
    }
    trimmed.chars().take(4000).collect()
}

#[cfg(test)]
mod tests;

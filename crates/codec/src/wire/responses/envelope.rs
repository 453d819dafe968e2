//! The Responses envelope (`object: "response"`) and its output items.

use imagegate_domain::{ImageTool, Usage};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// The constant `object` of a response: `"response"`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum ResponseObjectTag {
    /// `"response"`.
    #[default]
    #[serde(rename = "response")]
    Response,
}

/// Lifecycle of a response.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ResponseStatus {
    /// Finished.
    Completed,
    /// Failed; `error` says why.
    Failed,
    /// Running.
    InProgress,
    /// Cancelled.
    Cancelled,
    /// Waiting to run.
    Queued,
    /// Stopped early; `incomplete_details` says why.
    Incomplete,
}

/// `error` of a failed response.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ResponseError {
    /// Machine-readable code, e.g. `image_content_policy_violation`.
    pub code: String,
    /// Human-readable text.
    pub message: String,
}

/// `reasoning` settings echo.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ReasoningConfig {
    /// Effort, or null.
    pub effort: Option<String>,
    /// Summary mode, or null.
    pub summary: Option<String>,
}

/// Token usage of the main model (image tokens are not included).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ResponsesUsage {
    /// Input tokens.
    pub input_tokens: u64,
    /// Input token details.
    pub input_tokens_details: InputTokensDetails,
    /// Output tokens.
    pub output_tokens: u64,
    /// Output token details.
    pub output_tokens_details: OutputTokensDetails,
    /// Input plus output tokens.
    pub total_tokens: u64,
}

/// `usage.input_tokens_details` (both keys are required by the Python SDK 3.x).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct InputTokensDetails {
    /// Cached input tokens.
    pub cached_tokens: u64,
    /// Tokens written to the cache.
    #[serde(default)]
    pub cache_write_tokens: u64,
}

/// `usage.output_tokens_details`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct OutputTokensDetails {
    /// Reasoning tokens.
    pub reasoning_tokens: u64,
}

/// `tool_usage`: usage of tools, where upstreams report the image model's tokens.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ToolUsage {
    /// Tokens of the image generation tool.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image_gen: Option<Usage>,
}

/// The Responses envelope with every key the real API always sends.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ResponseObject {
    /// `resp_...`.
    pub id: String,
    /// Always `response`.
    pub object: ResponseObjectTag,
    /// Unix seconds.
    pub created_at: i64,
    /// Lifecycle status.
    pub status: ResponseStatus,
    /// Whether the response ran in background mode.
    pub background: bool,
    /// Why it failed, or null.
    pub error: Option<ResponseError>,
    /// Why it is incomplete, or null.
    pub incomplete_details: Option<Value>,
    /// Instructions echo, or null.
    pub instructions: Option<Value>,
    /// Output token cap echo, or null.
    pub max_output_tokens: Option<u64>,
    /// The main model.
    pub model: String,
    /// Output items in order.
    pub output: Vec<OutputItem>,
    /// Parallel tool calls setting echo.
    pub parallel_tool_calls: bool,
    /// Previous response id echo, or null.
    pub previous_response_id: Option<String>,
    /// Reasoning settings echo.
    pub reasoning: ReasoningConfig,
    /// Service tier, or null.
    pub service_tier: Option<String>,
    /// Whether the response is stored.
    pub store: bool,
    /// Temperature echo, or null.
    pub temperature: Option<f64>,
    /// Text settings echo, e.g. `{"format":{"type":"text"}}`.
    pub text: Value,
    /// Tool choice echo (a string or an object).
    pub tool_choice: Value,
    /// Tools echo with defaults filled in.
    pub tools: Vec<Value>,
    /// `top_p` echo, or null.
    pub top_p: Option<f64>,
    /// Truncation mode, e.g. `disabled`.
    pub truncation: Option<String>,
    /// Main-model usage; null until completed.
    pub usage: Option<ResponsesUsage>,
    /// Usage of tools (image tokens), when reported.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_usage: Option<ToolUsage>,
    /// End-user id echo, or null.
    pub user: Option<String>,
    /// Metadata echo.
    pub metadata: Map<String, Value>,
}

impl ResponseObject {
    /// An `in_progress` response with the API's defaults and no output.
    pub fn new(id: impl Into<String>, created_at: i64, model: impl Into<String>) -> Self {
        Self {
            id: id.into(),
            object: ResponseObjectTag::Response,
            created_at,
            status: ResponseStatus::InProgress,
            background: false,
            error: None,
            incomplete_details: None,
            instructions: None,
            max_output_tokens: None,
            model: model.into(),
            output: Vec::new(),
            parallel_tool_calls: true,
            previous_response_id: None,
            reasoning: ReasoningConfig::default(),
            service_tier: Some("auto".to_owned()),
            store: true,
            temperature: Some(1.0),
            text: serde_json::json!({"format": {"type": "text"}}),
            tool_choice: Value::String("auto".to_owned()),
            tools: Vec::new(),
            top_p: Some(1.0),
            truncation: Some("disabled".to_owned()),
            usage: None,
            tool_usage: None,
            user: None,
            metadata: Map::new(),
        }
    }
}

/// Status of an `image_generation_call` item.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ImageCallStatus {
    /// Announced (at `response.output_item.added`).
    InProgress,
    /// The image model is drawing.
    Generating,
    /// Done; `result` holds the image.
    Completed,
    /// Failed.
    Failed,
}

/// The `image_generation_call` output item. `result` is always sent (null until done); the other
/// optional keys are left out when `None`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ImageGenerationCall {
    /// `ig_...`.
    pub id: String,
    /// Item status.
    pub status: ImageCallStatus,
    /// `generate` or `edit`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub action: Option<String>,
    /// Resolved background.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub background: Option<String>,
    /// Output format.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_format: Option<String>,
    /// Resolved quality.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub quality: Option<String>,
    /// Resolved size, `WIDTHxHEIGHT`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub size: Option<String>,
    /// The prompt the main model wrote for the image model.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub revised_prompt: Option<String>,
    /// The final image, base64, or null.
    #[serde(default)]
    pub result: Option<String>,
}

impl ImageGenerationCall {
    /// The item as announced at `response.output_item.added`: only id, type, status, result.
    pub fn in_progress(id: impl Into<String>) -> Self {
        Self {
            id: id.into(),
            status: ImageCallStatus::InProgress,
            action: None,
            background: None,
            output_format: None,
            quality: None,
            size: None,
            revised_prompt: None,
            result: None,
        }
    }
}

/// Content part of a message item.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum OutputContent {
    /// Text written by the model.
    OutputText {
        /// Annotations (citations); usually empty.
        annotations: Vec<Value>,
        /// Log probabilities; usually empty.
        logprobs: Vec<Value>,
        /// The text.
        text: String,
    },
    /// A refusal.
    Refusal {
        /// The refusal text.
        refusal: String,
    },
}

/// An assistant message item.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct MessageItem {
    /// `msg_...`.
    pub id: String,
    /// `in_progress`, `completed` or `incomplete`.
    pub status: String,
    /// Always `assistant`.
    pub role: String,
    /// Content parts.
    pub content: Vec<OutputContent>,
}

/// A reasoning item (gpt-5 family main models).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ReasoningItem {
    /// `rs_...`.
    pub id: String,
    /// Summary parts.
    pub summary: Vec<Value>,
}

/// An item of `output`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum OutputItem {
    /// `image_generation_call`.
    ImageGenerationCall(ImageGenerationCall),
    /// `message`.
    Message(MessageItem),
    /// `reasoning`.
    Reasoning(ReasoningItem),
    /// Any other item (e.g. a web search call), kept as it came.
    #[serde(untagged)]
    Other(Value),
}

/// The `tools[]` echo of a validated image tool, with the defaults the API fills in.
pub fn image_tool_echo(tool: &ImageTool) -> Value {
    let mut echo = Map::new();
    echo.insert("type".to_owned(), Value::from("image_generation"));
    echo.insert("background".to_owned(), Value::from(tool.background.as_str()));
    if let Some(model) = &tool.model {
        echo.insert("model".to_owned(), Value::from(model.requested()));
    }
    echo.insert("moderation".to_owned(), Value::from(tool.moderation.as_str()));
    echo.insert("n".to_owned(), Value::from(1));
    echo.insert(
        "output_compression".to_owned(),
        Value::from(tool.output_compression.unwrap_or(100)),
    );
    echo.insert(
        "output_format".to_owned(),
        Value::from(tool.output_format.as_str()),
    );
    echo.insert("partial_images".to_owned(), Value::from(tool.partial_images));
    echo.insert("quality".to_owned(), Value::from(tool.quality.as_str()));
    echo.insert("size".to_owned(), Value::from(tool.size.to_string()));
    Value::Object(echo)
}

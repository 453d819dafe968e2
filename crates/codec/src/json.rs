//! JSON request bodies: `POST /v1/images/generations` and `POST /v1/responses`.
//!
//! Explicit `null` means "absent" (the Python SDK sends `None` as `null`). Type errors name the
//! field ("Invalid type for 'n': expected an integer, but got a string instead."). The images
//! endpoint refuses unknown top-level keys with 400 `unknown_parameter`; a Responses body is kept
//! whole for forwarding, unknown keys included.

use bytes::Bytes;
use imagegate_domain::{ErrorKind, ImageParamsDraft, ImageTool, ImageToolDraft, ModelCatalog, RequestError};
use serde_json::{Map, Value};

use crate::error::ApiError;

/// Top-level keys of a generation request.
pub const GENERATION_KEYS: &[&str] = &[
    "model",
    "prompt",
    "n",
    "size",
    "quality",
    "output_format",
    "output_compression",
    "background",
    "moderation",
    "stream",
    "partial_images",
    "user",
    "input_fidelity",
    "response_format",
    "style",
];

/// Most elements (array items and object members) a body may hold. Decoded into a tree, each
/// costs 30-100 bytes, so a 64 MiB Responses body of tiny values (`[0,0,0,...]`) would take
/// gigabytes before any limit of the key applied; a real request holds a few thousand, a long
/// conversation tens of thousands (an image, however large, is one string).
pub const MAX_JSON_ELEMENTS: usize = 1 << 18;

/// Parses a body that must be one JSON object of at most [`MAX_JSON_ELEMENTS`] elements.
pub fn parse_object(bytes: &[u8]) -> Result<Map<String, Value>, ApiError> {
    if has_more_elements_than(bytes, MAX_JSON_ELEMENTS) {
        return Err(ApiError::new(
            ErrorKind::InvalidRequest,
            format!(
                "The JSON body of your request holds more than {MAX_JSON_ELEMENTS} elements (array \
                 items and object members). Send fewer or larger values."
            ),
        )
        .with_code("too_many_elements"));
    }
    match serde_json::from_slice::<Value>(bytes) {
        Ok(Value::Object(map)) => Ok(map),
        Ok(other) => Err(ApiError::from(RequestError::InvalidType {
            param: "body".to_owned(),
            expected: format!("a JSON object, but got {} instead", type_name(&other)),
        })),
        Err(err) => Err(ApiError::new(
            ErrorKind::InvalidRequest,
            format!(
                "We could not parse the JSON body of your request ({err}). Send one JSON object with \
                 'Content-Type: application/json'."
            ),
        )
        .with_code("invalid_json")),
    }
}

/// Decodes a generation request into a draft for `imagegate_domain::validate_generation`.
pub fn decode_generation(bytes: &[u8]) -> Result<ImageParamsDraft, ApiError> {
    let body = parse_object(bytes)?;
    if let Some(unknown) = body.keys().find(|key| !GENERATION_KEYS.contains(&key.as_str())) {
        return Err(RequestError::UnknownParameter {
            param: unknown.clone(),
        }
        .into());
    }
    let fields = Fields {
        object: &body,
        prefix: "",
    };
    if fields.present("style") {
        return Err(RequestError::Unsupported {
            param: "style".to_owned(),
            reason: "it applies to dall-e-3 only; describe the style in the prompt".to_owned(),
        }
        .into());
    }
    Ok(ImageParamsDraft {
        model: fields.string("model")?,
        prompt: fields.string("prompt")?,
        n: fields.integer("n")?,
        size: fields.string("size")?,
        quality: fields.string("quality")?,
        output_format: fields.string("output_format")?,
        output_compression: fields.integer("output_compression")?,
        background: fields.string("background")?,
        moderation: fields.string("moderation")?,
        stream: fields.boolean("stream")?,
        partial_images: fields.integer("partial_images")?,
        user: fields.string("user")?,
        input_fidelity: fields.string("input_fidelity")?,
        response_format: fields.string("response_format")?,
    })
}

/// One `image_generation` entry of `tools`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImageToolEntry {
    /// Position in `tools`.
    pub index: usize,
    /// The decoded tool.
    pub draft: ImageToolDraft,
}

/// A Responses request: the whole object (for forwarding) plus what the gateway reads.
#[derive(Debug, Clone, PartialEq)]
pub struct ResponsesBody {
    /// The request as received (unknown keys included).
    pub body: Map<String, Value>,
    /// Top-level `model` (the main text/agent model).
    pub model: Option<String>,
    /// Top-level `stream` (absent or null: false).
    pub stream: bool,
    /// Every `image_generation` tool.
    pub image_tools: Vec<ImageToolEntry>,
}

/// Whether `bytes` holds more than `limit` elements, counted without decoding: every `[`, `{` and
/// `,` outside a string starts at most one (strings, base64 images included, are skipped whole).
/// Malformed text is left for the parser to refuse.
fn has_more_elements_than(bytes: &[u8], limit: usize) -> bool {
    let mut count = 0usize;
    let mut at = 0usize;
    while let Some(&byte) = bytes.get(at) {
        match byte {
            b'"' => match string_end(bytes, at.saturating_add(1)) {
                Some(end) => at = end,
                None => return false,
            },
            b',' | b'[' | b'{' => {
                count = count.saturating_add(1);
                if count > limit {
                    return true;
                }
            }
            _ => {}
        }
        at = at.saturating_add(1);
    }
    false
}

/// The position of the quote closing the string whose text starts at `from` (`None`: unclosed).
fn string_end(bytes: &[u8], mut from: usize) -> Option<usize> {
    loop {
        let found = from.checked_add(memchr::memchr2(b'"', b'\\', bytes.get(from..)?)?)?;
        if bytes.get(found) == Some(&b'"') {
            return Some(found);
        }
        from = found.checked_add(2)?;
    }
}

/// Decodes a Responses request.
pub fn decode_responses(bytes: &[u8]) -> Result<ResponsesBody, ApiError> {
    let body = parse_object(bytes)?;
    let fields = Fields {
        object: &body,
        prefix: "",
    };
    let model = fields.string("model")?;
    let stream = fields.boolean("stream")?.unwrap_or(false);
    // A background response answers at once ("queued", no usage) and goes on generating, to be
    // fetched later: the gateway would free the account's slot and record nothing while the
    // upstream bills, and it keeps no response to fetch. Refused.
    if fields.boolean("background")? == Some(true) {
        return Err(ApiError::new(
            ErrorKind::InvalidRequest,
            "Background responses are not supported here: each request is answered when it is done \
             (use `stream` to see it progress). Omit `background` or set it to false.",
        )
        .with_param("background")
        .with_code("unsupported_value"));
    }
    let mut image_tools = Vec::new();
    match body.get("tools") {
        None | Some(Value::Null) => {}
        Some(Value::Array(tools)) => {
            for (index, tool) in tools.iter().enumerate() {
                let Value::Object(tool) = tool else {
                    return Err(invalid_type(&format!("tools[{index}]"), "an object", tool));
                };
                match tool.get("type").and_then(Value::as_str) {
                    Some("image_generation") => {}
                    // Not the image tool, and it would not be checked as one: refused rather than
                    // passed on unchecked.
                    Some(other) if other.eq_ignore_ascii_case("image_generation") => {
                        return Err(ApiError::new(
                            ErrorKind::InvalidRequest,
                            format!(
                                "Invalid tool type '{}': the image tool's type is 'image_generation', in lower case.",
                                other.escape_default()
                            ),
                        )
                        .with_param(format!("tools[{index}].type")));
                    }
                    _ => continue,
                }
                let prefix = format!("tools[{index}].");
                let fields = Fields {
                    object: tool,
                    prefix: &prefix,
                };
                let draft = ImageToolDraft {
                    quality: fields.string("quality")?,
                    size: fields.string("size")?,
                    output_format: fields.string("output_format")?,
                    background: fields.string("background")?,
                    moderation: fields.string("moderation")?,
                    model: fields.string("model")?,
                    output_compression: fields.integer("output_compression")?,
                    partial_images: fields.integer("partial_images")?,
                    action: fields.string("action")?,
                    input_fidelity: fields.string("input_fidelity")?,
                };
                image_tools.push(ImageToolEntry { index, draft });
            }
        }
        Some(other) => return Err(invalid_type("tools", "an array", other)),
    }
    Ok(ResponsesBody {
        body,
        model,
        stream,
        image_tools,
    })
}

impl ResponsesBody {
    /// Validates every image tool; an error's `param` is prefixed with the tool's position, e.g.
    /// `tools[0].size`.
    pub fn validate_image_tools(&self, catalog: &ModelCatalog) -> Result<Vec<ImageTool>, ApiError> {
        self.image_tools
            .iter()
            .map(|entry| {
                imagegate_domain::validate_image_tool(entry.draft.clone(), catalog).map_err(|err| {
                    let mut api = ApiError::from(err);
                    api.param = api.param.map(|param| format!("tools[{}].{param}", entry.index));
                    api
                })
            })
            .collect()
    }

    /// Replaces `tools[index].model` (e.g. an alias by the upstream id); false if there is no
    /// object at that index.
    pub fn set_tool_model(&mut self, index: usize, model: &str) -> bool {
        let tool = self.body.get_mut("tools").and_then(|tools| tools.get_mut(index));
        match tool {
            Some(Value::Object(tool)) => {
                tool.insert("model".to_owned(), Value::from(model));
                true
            }
            _ => false,
        }
    }

    /// The body to forward upstream.
    pub fn to_bytes(&self) -> Bytes {
        Bytes::from(Value::Object(self.body.clone()).to_string())
    }
}

/// Reads typed optional fields of one object; `prefix` is put before names in errors.
struct Fields<'a> {
    object: &'a Map<String, Value>,
    prefix: &'a str,
}

impl Fields<'_> {
    fn get(&self, key: &str) -> Option<&Value> {
        self.object.get(key).filter(|value| !value.is_null())
    }

    fn present(&self, key: &str) -> bool {
        self.get(key).is_some()
    }

    fn param(&self, key: &str) -> String {
        format!("{}{key}", self.prefix)
    }

    fn string(&self, key: &str) -> Result<Option<String>, ApiError> {
        match self.get(key) {
            None => Ok(None),
            Some(Value::String(text)) => Ok(Some(text.clone())),
            Some(other) => Err(invalid_type(&self.param(key), "a string", other)),
        }
    }

    fn boolean(&self, key: &str) -> Result<Option<bool>, ApiError> {
        match self.get(key) {
            None => Ok(None),
            Some(Value::Bool(flag)) => Ok(Some(*flag)),
            Some(other) => Err(invalid_type(&self.param(key), "a boolean", other)),
        }
    }

    /// Integers; integral floats such as `2.0` are accepted, and integers beyond the i64 range
    /// saturate (so the range check reports them).
    fn integer(&self, key: &str) -> Result<Option<i64>, ApiError> {
        let Some(value) = self.get(key) else {
            return Ok(None);
        };
        let Value::Number(number) = value else {
            return Err(invalid_type(&self.param(key), "an integer", value));
        };
        if let Some(int) = number.as_i64() {
            return Ok(Some(int));
        }
        if number.is_u64() {
            return Ok(Some(i64::MAX));
        }
        match number.as_f64() {
            Some(float) if float.fract() == 0.0 && float.is_finite() => {
                Ok(Some(if float >= i64::MAX as f64 {
                    i64::MAX
                } else if float <= i64::MIN as f64 {
                    i64::MIN
                } else {
                    float as i64
                }))
            }
            _ => Err(invalid_type(&self.param(key), "an integer", value)),
        }
    }
}

fn invalid_type(param: &str, expected: &str, got: &Value) -> ApiError {
    RequestError::InvalidType {
        param: param.to_owned(),
        expected: format!("{expected}, but got {} instead", type_name(got)),
    }
    .into()
}

/// "a string", "an integer", ... as used in type error messages.
fn type_name(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(number) if number.is_f64() => "a decimal number",
        Value::Number(_) => "an integer",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

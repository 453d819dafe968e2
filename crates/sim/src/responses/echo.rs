//! Copies the request settings the API echoes (tools with defaults, tool choice, store, metadata...) into
//! the response envelope.

use imagegate_codec::json::ResponsesBody;
use imagegate_codec::wire::ResponseObject;
use imagegate_domain::ImageTool;
use serde_json::Value;

/// Fills the echo fields of `envelope` from `request`; image tools are echoed with their defaults.
pub fn echo_settings(envelope: &mut ResponseObject, request: &ResponsesBody, tools: &[ImageTool]) {
    let body = &request.body;
    let mut image_tools = tools.iter();
    if let Some(Value::Array(entries)) = body.get("tools") {
        envelope.tools = entries
            .iter()
            .map(|entry| match entry.get("type").and_then(Value::as_str) {
                Some("image_generation") => image_tools.next().map_or_else(
                    || entry.clone(),
                    imagegate_codec::wire::responses::image_tool_echo,
                ),
                _ => entry.clone(),
            })
            .collect();
    }
    let text = |key: &str| body.get(key).and_then(Value::as_str).map(str::to_owned);
    if let Some(choice) = body.get("tool_choice").filter(|v| !v.is_null()) {
        envelope.tool_choice = choice.clone();
    }
    envelope.instructions = body.get("instructions").filter(|v| !v.is_null()).cloned();
    envelope.previous_response_id = text("previous_response_id");
    envelope.user = text("user");
    envelope.max_output_tokens = body.get("max_output_tokens").and_then(Value::as_u64);
    if let Some(store) = body.get("store").and_then(Value::as_bool) {
        envelope.store = store;
    }
    if let Some(parallel) = body.get("parallel_tool_calls").and_then(Value::as_bool) {
        envelope.parallel_tool_calls = parallel;
    }
    if let Some(Value::Object(metadata)) = body.get("metadata") {
        envelope.metadata = metadata.clone();
    }
    if let Some(tier) = text("service_tier") {
        envelope.service_tier = Some(tier);
    }
    if let Some(temperature) = body.get("temperature").and_then(Value::as_f64) {
        envelope.temperature = Some(temperature);
    }
    if let Some(top_p) = body.get("top_p").and_then(Value::as_f64) {
        envelope.top_p = Some(top_p);
    }
}

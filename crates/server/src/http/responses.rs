//! `POST /v1/responses`: a text/agent main model with the `image_generation` tool.

use std::sync::Arc;

use axum::extract::{Extension, Request, State};
use axum::http::header::USER_AGENT;
use axum::response::Response;
use imagegate_domain::{ImageTool, SizeClass, validate_image_tool, validate_main_model};
use imagegate_upstream::UpstreamCall;
use serde_json::{Map, Value, json};

use crate::http::auth::Caller;
use crate::http::error::HttpError;
use crate::http::images::{fail, keepalive, read_body, start_usage};
use crate::http::json_keepalive;
use crate::http::request_id::RequestId;
use crate::http::serve_call::{ServeCall, admit, serve};
use crate::relay::stream::StreamKind;
use crate::state::AppState;
use crate::usage::UsageRecorder;

pub async fn create(
    State(app): State<Arc<AppState>>,
    Extension(request_id): Extension<RequestId>,
    Caller(caller): Caller,
    request: Request,
) -> Response {
    // Started before the body is read, as for the Images endpoints.
    let mut usage = start_usage(&app, &request_id, "/v1/responses", &caller);
    // The key's limits before the body, as for edits: the body may be 64 MiB of data URLs held in
    // memory, so a key at its limit is refused before it sends them, and a body still arriving
    // holds its slot.
    let permit = match admit(&app, &caller).await {
        Ok(permit) => permit,
        Err(err) => return fail(usage, err),
    };
    let (headers, body) = match read_body(request, crate::http::RESPONSES_BODY_LIMIT).await {
        Ok(read) => read,
        Err(err) => return fail(usage, err),
    };
    let user_agent = headers
        .get(USER_AGENT)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default();
    let prepared = match prepare(&app, &body, user_agent, &mut usage) {
        Ok(prepared) => prepared,
        Err(err) => return fail(usage, err),
    };
    let class = prepared
        .tools
        .iter()
        .map(|t| t.size.size_class())
        .max_by_key(|c| matches!(c, SizeClass::Large));
    let keepalive = match keepalive(&app, &headers, prepared.stream, &mut usage) {
        Ok(keepalive) => keepalive,
        Err(err) => return fail(usage, err),
    };
    json_keepalive::answer(keepalive, async move {
        let call = UpstreamCall::Respond {
            body: &prepared.body,
            stream: prepared.stream,
        };
        let serve_call = ServeCall {
            call,
            class: class.unwrap_or(SizeClass::Standard),
            kind: StreamKind::Responses,
        };
        serve(&app, &caller, serve_call, usage, permit).await
    })
    .await
}

struct Prepared {
    body: Map<String, Value>,
    stream: bool,
    tools: Vec<ImageTool>,
}

fn prepare(
    app: &AppState,
    raw: &[u8],
    user_agent: &str,
    usage: &mut UsageRecorder,
) -> Result<Prepared, HttpError> {
    let decoded = imagegate_codec::json::decode_responses(raw)?;
    if let Some(model) = &decoded.model {
        usage.model(model);
    }
    usage.stream(decoded.stream);
    validate_main_model(decoded.model.as_deref(), &app.catalog)?;
    let mut tools = decoded.validate_image_tools(&app.catalog)?;
    let mut body = decoded.body;
    if tools.is_empty() && is_agent_client(&app.config.agent_user_agents, user_agent) {
        push_tool(&mut body, json!({"type": "image_generation"}));
        tools.push(validate_image_tool(Default::default(), &app.catalog)?);
    }
    pin_tools(&mut body, &tools);
    // The tool that decides the request's size class (the first large one, else the first), as
    // the dispatch and the deadline do.
    let deciding = tools
        .iter()
        .find(|t| t.size.size_class() == SizeClass::Large)
        .or(tools.first());
    if let Some(tool) = deciding {
        usage.tool(
            &tool.size.to_string(),
            tool.quality.as_str(),
            tool.output_format.as_str(),
        );
    }
    Ok(Prepared {
        body,
        stream: decoded.stream,
        tools,
    })
}

/// Whether the caller is an official agent client that expects the image tool to be there.
fn is_agent_client(agents: &[String], user_agent: &str) -> bool {
    let user_agent = user_agent.to_ascii_lowercase();
    agents
        .iter()
        .any(|agent| !agent.is_empty() && user_agent.contains(&agent.to_ascii_lowercase()))
}

fn push_tool(body: &mut Map<String, Value>, tool: Value) {
    match body.get_mut("tools") {
        Some(Value::Array(tools)) => tools.push(tool),
        _ => {
            body.insert("tools".to_owned(), Value::Array(vec![tool]));
        }
    }
}

/// Every image tool goes upstream as it was validated: it names the upstream id of its model (a
/// tool without one gets `gpt-image-2`, the model this gateway serves), each value the client gave
/// is written the way the rules read it (`01024x1024` as `1024x1024`, `2.0` as `2`), a `null` is
/// left out as the absent value it stands for, and a compression given with `png` is dropped as
/// the Images API drops it. Keys the gateway does not read are passed on as they are.
fn pin_tools(body: &mut Map<String, Value>, tools: &[ImageTool]) {
    let Some(Value::Array(entries)) = body.get_mut("tools") else {
        return;
    };
    let image_tools = entries
        .iter_mut()
        .filter_map(Value::as_object_mut)
        .filter(|tool| tool.get("type").and_then(Value::as_str) == Some("image_generation"));
    for (entry, tool) in image_tools.zip(tools) {
        entry.retain(|_, value| !value.is_null());
        let model = tool
            .model
            .as_ref()
            .map_or(imagegate_domain::GPT_IMAGE_2, |m| m.upstream());
        entry.insert("model".to_owned(), Value::String(model.to_owned()));
        // Only the values the client gave are rewritten (and only those built).
        for (key, given) in entry.iter_mut() {
            *given = match key.as_str() {
                "quality" => json!(tool.quality.as_str()),
                "size" => json!(tool.size.to_string()),
                "output_format" => json!(tool.output_format.as_str()),
                "background" => json!(tool.background.as_str()),
                "moderation" => json!(tool.moderation.as_str()),
                "partial_images" => json!(tool.partial_images),
                "action" => json!(tool.action.as_str()),
                _ => continue,
            };
        }
        match tool.output_compression {
            Some(compression) if entry.contains_key("output_compression") => {
                entry.insert("output_compression".to_owned(), json!(compression));
            }
            _ => {
                entry.remove("output_compression");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn agent_clients_match_by_substring_case_insensitively() {
        let agents = vec!["codex_cli_rs".to_owned()];
        assert!(is_agent_client(&agents, "Codex_CLI_RS/0.40 (Linux)"));
        assert!(!is_agent_client(&agents, "OpenAI/Python 3.54.0"));
        assert!(!is_agent_client(&[String::new()], "anything"));
    }

    #[test]
    fn image_tools_go_upstream_as_validated() {
        let catalog = imagegate_domain::ModelCatalog::default();
        let raw = json!({"model": "gpt-5", "tools": [
            {"type": "web_search", "filters": null},
            {"type": "image_generation", "size": "01024x1024", "quality": null, "input_fidelity": null,
             "partial_images": 2.0, "output_format": "png", "output_compression": 80,
             "background": "opaque", "future_key": {"a": 1}},
            {"type": "image_generation", "model": "gpt-image-2-2026-04-21", "output_format": "webp",
             "output_compression": 70.0}
        ]});
        let decoded = imagegate_codec::json::decode_responses(raw.to_string().as_bytes()).unwrap();
        let tools = decoded.validate_image_tools(&catalog).unwrap();
        let mut body = decoded.body;
        pin_tools(&mut body, &tools);
        assert_eq!(
            body["tools"],
            json!([
                {"type": "web_search", "filters": null},
                {"type": "image_generation", "model": "gpt-image-2", "size": "1024x1024",
                 "partial_images": 2, "output_format": "png", "background": "opaque",
                 "future_key": {"a": 1}},
                {"type": "image_generation", "model": "gpt-image-2-2026-04-21", "output_format": "webp",
                 "output_compression": 70}
            ])
        );
    }

    #[test]
    fn tools_are_added_to_an_existing_list_or_created() {
        let mut body = Map::new();
        push_tool(&mut body, json!({"type": "image_generation"}));
        assert_eq!(body["tools"], json!([{"type": "image_generation"}]));
        push_tool(&mut body, json!({"type": "web_search"}));
        assert_eq!(body["tools"].as_array().map(Vec::len), Some(2));
    }
}

//! A client's own Responses call on a ChatGPT-subscription account. The ChatGPT backend takes only
//! streamed, unstored calls with `input` as a list and some `instructions`; the OpenAI API takes
//! all of these as optional. So the call is adapted before it goes, and a client that asked for
//! no stream gets the final response of the stream, as the OpenAI API would have answered it.

use bytes::Bytes;
use futures::StreamExt;
use imagegate_codec::sse::{SseEvent, SseItem};
use serde::Deserialize;
use serde_json::{Map, Value, json};

use super::request::INSTRUCTIONS;
use crate::failure::Failure;
use crate::reply::{Reply, joined_events};

/// `body` as the ChatGPT backend takes it: `stream: true`, `store: false`, a string `input` as
/// one user message, and the gateway's instructions where the client gave none.
pub(super) fn adapted(body: &Map<String, Value>) -> Map<String, Value> {
    let mut body = body.clone();
    body.insert("stream".to_owned(), Value::Bool(true));
    body.insert("store".to_owned(), Value::Bool(false));
    if let Some(Value::String(text)) = body.get("input") {
        let message = json!([{"role": "user", "content": [{"type": "input_text", "text": text}]}]);
        body.insert("input".to_owned(), message);
    }
    let has_instructions = body
        .get("instructions")
        .and_then(Value::as_str)
        .is_some_and(|text| !text.trim().is_empty());
    if !has_instructions {
        body.insert("instructions".to_owned(), Value::String(INSTRUCTIONS.to_owned()));
    }
    body
}

/// The events that end a response, whose `response` is the whole response.
const FINAL_EVENTS: [&str; 3] = ["response.completed", "response.incomplete", "response.failed"];

/// The stream a client that asked for one gets: without the backend's own `codex.*` events (no
/// Responses events: the SDKs refuse a stream whose first event is not `response.created`), and
/// with the output items the stream carried put back into a final event that lists none (the
/// backend lists none for an unstored call; the SDKs take the final event's output as the answer).
pub(super) fn streamed(reply: Reply) -> Result<Reply, Failure> {
    let Reply::Events(items) = reply else {
        return Err(Failure::protocol("a streamed call answered without a stream"));
    };
    let mut output = OutputItems::default();
    let items = items.filter_map(move |item| {
        let kept = match item {
            Ok(SseItem::Event(event)) => output.pass(event).map(|event| Ok(SseItem::Event(event))),
            other => Some(other),
        };
        std::future::ready(kept)
    });
    Ok(Reply::Events(items.boxed()))
}

/// The output items of a stream so far, by `output_index`.
#[derive(Default)]
struct OutputItems(Vec<(u64, Value)>);

impl OutputItems {
    /// `event` as the client gets it, or none when it is left out.
    fn pass(&mut self, event: SseEvent) -> Option<SseEvent> {
        let kind = kind_of(&event);
        if kind.starts_with("codex.") {
            return None;
        }
        if kind == "response.output_item.done" {
            self.record(&event.data);
        } else if FINAL_EVENTS.contains(&kind.as_str()) {
            return Some(self.listed_in(event));
        }
        Some(event)
    }

    /// Keeps the item of a `response.output_item.done` event's `data`.
    fn record(&mut self, data: &str) {
        if let Ok(done) = serde_json::from_str::<ItemDone>(data) {
            self.0.push((done.output_index, done.item));
        }
    }

    /// Puts the items kept into `response`'s output when it lists none; whether it did.
    fn fill(&mut self, response: &mut Map<String, Value>) -> bool {
        let listed = response
            .get("output")
            .and_then(Value::as_array)
            .is_some_and(|output| !output.is_empty());
        if listed || self.0.is_empty() {
            return false;
        }
        self.0.sort_by_key(|(index, _)| *index);
        let items = std::mem::take(&mut self.0).into_iter().map(|(_, item)| item);
        response.insert("output".to_owned(), Value::Array(items.collect()));
        true
    }

    /// The final `event` with the items in its response's output when it lists none.
    fn listed_in(&mut self, mut event: SseEvent) -> SseEvent {
        let Ok(mut data) = serde_json::from_str::<Map<String, Value>>(&event.data) else {
            return event;
        };
        let Some(Value::Object(response)) = data.get_mut("response") else {
            return event;
        };
        if self.fill(response)
            && let Ok(text) = serde_json::to_string(&data)
        {
            event.data = text;
        }
        event
    }
}

/// The type of an event: its `event:` name, else its data's `type`.
fn kind_of(event: &SseEvent) -> String {
    match &event.event {
        Some(name) => name.clone(),
        None => serde_json::from_str::<TypeProbe>(&event.data)
            .map(|probe| probe.kind)
            .unwrap_or_default(),
    }
}

/// The `type` of an event's data.
#[derive(Deserialize)]
struct TypeProbe {
    #[serde(rename = "type", default)]
    kind: String,
}

/// A `response.output_item.done` event.
#[derive(Deserialize)]
struct ItemDone {
    #[serde(default)]
    output_index: u64,
    item: Value,
}

/// The answer to a client that asked for no stream: the response its stream ended with, with the
/// output items the stream carried when its final event lists none.
pub(super) async fn final_response(reply: Reply) -> Result<Reply, Failure> {
    let Reply::Events(items) = reply else {
        return Err(Failure::protocol("a streamed call answered without a stream"));
    };
    let mut events = joined_events(items);
    let mut output = OutputItems::default();
    let mut last = None;
    while let Some(event) = events.next().await {
        let event = event?;
        let kind = kind_of(&event);
        if kind == "response.output_item.done" {
            output.record(&event.data);
        } else if FINAL_EVENTS.contains(&kind.as_str())
            && let Ok(mut data) = serde_json::from_str::<Map<String, Value>>(&event.data)
        {
            last = data.remove("response");
        }
    }
    let Some(Value::Object(mut response)) = last else {
        return Err(Failure::protocol("the stream ended without its final response"));
    };
    output.fill(&mut response);
    let body = serde_json::to_vec(&response)
        .map_err(|err| Failure::protocol(format!("encoding the response failed: {err}")))?;
    Ok(Reply::Json {
        body: Bytes::from(body),
        request_id: None,
        summary: None,
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn a_client_body_is_adapted_to_what_the_backend_takes() {
        let body = json!({"model": "gpt-5", "input": "draw a fox", "stream": false, "store": true,
            "tools": [{"type": "image_generation"}]});
        let adapted = adapted(body.as_object().unwrap());
        assert_eq!(adapted["stream"], true);
        assert_eq!(adapted["store"], false);
        assert_eq!(adapted["input"][0]["role"], "user");
        assert_eq!(adapted["input"][0]["content"][0]["text"], "draw a fox");
        assert_eq!(adapted["instructions"], INSTRUCTIONS);
        assert_eq!(adapted["tools"], body["tools"], "the rest stays");
        let own = json!({"model": "gpt-5", "instructions": "Be brief.",
            "input": [{"role": "user", "content": "hi"}]});
        let adapted = super::adapted(own.as_object().unwrap());
        assert_eq!(adapted["instructions"], "Be brief.");
        assert_eq!(adapted["input"], own["input"]);
    }
}

//! Relays an upstream event stream: body chunks are decoded with the codec's [`SseDecoder`] and
//! every event is yielded as soon as it is complete.
//!
//! Ends with `Err(Failure)` (and nothing after it) when:
//! - the upstream sends an error event (`event: error`, or data with a top-level `error` object,
//!   or `"type":"error"`): classified with [`classify_error_object`];
//! - a Responses stream fails with a usage or rate limit (`response.failed` whose error is
//!   [`crate::FailureKind::RateLimited`]); other `response.failed` events are relayed as final;
//! - the body fails mid-stream ([`crate::FailureKind::Transient`]) or an event is too large
//!   ([`crate::FailureKind::Protocol`]);
//! - the deadline passes ([`crate::FailureKind::Timeout`]); the time the client holds the stream
//!   does not count, up to a budget of its own ([`crate::FailureKind::ClientTooSlow`]; see
//!   [`super::read_clock`]);
//! - the body ends before a final event (`image_generation.completed`, `image_edit.completed`,
//!   `response.completed`, `response.failed`, `response.incomplete`): [`crate::FailureKind::Transient`].
//!
//! The stream ends without reading further once the expected number of final events has been
//! relayed (`n` for the Images API, one for the Responses API), so an upstream that keeps the
//! connection open after its last event costs nothing. After at least one final event, the end of
//! the body or the deadline end the stream quietly. A `data: [DONE]` sentinel ends the stream and is
//! not relayed.

use bytes::Bytes;
use futures::stream::{BoxStream, StreamExt};
use imagegate_codec::sse::{SseDecoder, SseEvent};
use reqwest::header::HeaderMap;
use serde::Deserialize;
use serde::de::IgnoredAny;
use serde_json::Value;
use tokio::time::timeout_at;

use super::read_clock::ReadClock;
use super::{Deadline, now_unix_ms};
use crate::call::Endpoint;
use crate::failure::{Failure, FailureKind, classify_error_object, classify_transport};
use crate::reply::EventStream;

/// Relays the body of `response` as events.
pub(crate) fn relay(
    response: reqwest::Response,
    endpoint: Endpoint,
    finals_expected: usize,
    deadline: Deadline,
) -> EventStream {
    let body = response
        .bytes_stream()
        .map(|chunk| chunk.map_err(|err| classify_transport(&err)))
        .boxed();
    relay_chunks(body, endpoint, finals_expected, deadline)
}

struct Relay {
    body: BoxStream<'static, Result<Bytes, Failure>>,
    decoder: SseDecoder,
    endpoint: Endpoint,
    clock: ReadClock,
    finals_expected: usize,
    finals_seen: usize,
    done: bool,
}

/// Relays a stream of body chunks as events (the transport-independent part of [`relay`]).
pub(crate) fn relay_chunks(
    body: BoxStream<'static, Result<Bytes, Failure>>,
    endpoint: Endpoint,
    finals_expected: usize,
    deadline: Deadline,
) -> EventStream {
    let state = Relay {
        body,
        decoder: SseDecoder::new(),
        endpoint,
        clock: ReadClock::new(deadline),
        finals_expected: finals_expected.max(1),
        finals_seen: 0,
        done: false,
    };
    futures::stream::unfold(state, |mut state| async move {
        state.clock.resumed();
        let item = state.next_item().await?;
        state.clock.handed_over();
        Some((item, state))
    })
    .boxed()
}

impl Relay {
    async fn next_item(&mut self) -> Option<Result<SseEvent, Failure>> {
        loop {
            if self.done {
                return None;
            }
            if let Some(event) = self.decoder.pop() {
                match self.inspect(&event) {
                    Seen::Relay => return Some(Ok(event)),
                    Seen::Final => {
                        self.finals_seen += 1;
                        self.done = self.finals_seen >= self.finals_expected;
                        return Some(Ok(event));
                    }
                    Seen::Done => {
                        self.done = true;
                        return None;
                    }
                    Seen::Error(failure) => return self.fail(failure),
                }
            }
            match timeout_at(self.clock.at(), self.body.next()).await {
                Err(_elapsed) if self.finals_seen > 0 => {
                    self.done = true;
                    return None;
                }
                Err(_elapsed) => return self.fail(self.clock.failure()),
                Ok(Some(Ok(chunk))) => {
                    if let Err(err) = self.decoder.push(&chunk) {
                        return self.fail(Failure::protocol(format!(
                            "the upstream stream is unusable: {err}"
                        )));
                    }
                }
                Ok(Some(Err(failure))) => return self.fail(failure),
                Ok(None) if self.finals_seen > 0 => {
                    self.done = true;
                    return None;
                }
                Ok(None) => {
                    return self.fail(Failure::transient(
                        "the upstream stream ended before its final event",
                    ));
                }
            }
        }
    }

    fn fail(&mut self, failure: Failure) -> Option<Result<SseEvent, Failure>> {
        self.done = true;
        Some(Err(failure))
    }

    fn inspect(&self, event: &SseEvent) -> Seen {
        if event.data.trim() == "[DONE]" {
            return Seen::Done;
        }
        let probe = match &event.event {
            Some(name) if name != "error" => Probe {
                kind: Some(name.clone()),
                error: None,
            },
            _ => serde_json::from_str::<Probe>(&event.data).unwrap_or_default(),
        };
        let is_error = event.event.as_deref() == Some("error")
            || probe.error.is_some()
            || probe.kind.as_deref() == Some("error");
        if is_error {
            return Seen::Error(stream_error(&event.data));
        }
        if self.endpoint == Endpoint::Responses && probe.kind.as_deref() == Some("response.failed") {
            if let Some(failure) = account_failure(&event.data) {
                return Seen::Error(failure.with_final_event(event.clone()));
            }
        }
        let is_final = match (self.endpoint, probe.kind.as_deref()) {
            (Endpoint::Generations, Some(kind)) => kind == "image_generation.completed",
            (Endpoint::Edits, Some(kind)) => kind == "image_edit.completed",
            (Endpoint::Responses, Some(kind)) => {
                matches!(
                    kind,
                    "response.completed" | "response.failed" | "response.incomplete"
                )
            }
            (_, None) => false,
        };
        if is_final { Seen::Final } else { Seen::Relay }
    }
}

enum Seen {
    Relay,
    Final,
    Done,
    Error(Failure),
}

/// The `type` of an event and whether it has a top-level `error`, read without copying the rest.
#[derive(Default, Deserialize)]
struct Probe {
    #[serde(rename = "type", default)]
    kind: Option<String>,
    #[serde(default)]
    error: Option<IgnoredAny>,
}

/// The failure in a `response.failed` event when it is the account's: a usage or rate limit, as
/// the ChatGPT-subscription backend reports limits met during a call. As a failure it is recorded
/// on the account, and before anything was relayed the request goes to another account; after, the
/// client gets the event itself ([`Failure::final_event`]). Any other
/// failed response (a refusal, a bad input, a failed generation) is the request's, and stays the
/// final event the client's SDK expects.
fn account_failure(data: &str) -> Option<Failure> {
    #[derive(Deserialize)]
    struct Failed {
        response: Option<FailedResponse>,
    }
    #[derive(Deserialize)]
    struct FailedResponse {
        error: Option<serde_json::Map<String, Value>>,
    }
    let error = serde_json::from_str::<Failed>(data).ok()?.response?.error?;
    let failure = classify_error_object(None, &error, &HeaderMap::new(), now_unix_ms());
    matches!(failure.kind, FailureKind::RateLimited { .. }).then_some(failure)
}

/// Classifies the data of an error event.
fn stream_error(data: &str) -> Failure {
    let object = match serde_json::from_str::<Value>(data) {
        Ok(Value::Object(object)) => object,
        _ => return Failure::transient("the upstream stream failed with an unreadable error event"),
    };
    let error = match object.get("error") {
        Some(Value::Object(error)) => error.clone(),
        _ => object,
    };
    classify_error_object(None, &error, &HeaderMap::new(), now_unix_ms())
}

#[cfg(test)]
#[path = "stream_tests.rs"]
mod tests;

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
//! the body, the deadline or a `data: [DONE]` sentinel end the stream quietly; a `[DONE]` before any
//! final event is a [`crate::FailureKind::Transient`] failure, like an early end of the body. The
//! sentinel is never relayed.
//!
//! An Images event with a type whose data passes [`STREAM_EVENTS_OVER`] bytes (an image) is relayed
//! in pieces as it arrives ([`SseItem::Opened`], [`SseItem::Data`], [`SseItem::Closed`]): the
//! gateway never holds an image whole, and the client's first bytes of it do not wait for its last.
//! Its type is known from its `event:` line before its data, so errors (`event: error`) still come
//! whole. A stream that ends or fails while such an event is open fails, even after a final event:
//! the client has part of an event.

use bytes::Bytes;
use futures::stream::{BoxStream, StreamExt};
use imagegate_codec::sse::{SseDecoder, SseEvent, SseItem};
use reqwest::header::HeaderMap;
use serde::Deserialize;
use serde::de::IgnoredAny;
use serde_json::Value;
use tokio::time::timeout_at;

use super::read_clock::ReadClock;
use super::{Deadline, now_unix_ms};
use crate::call::Endpoint;
use crate::failure::{Failure, FailureKind, classify_error_object, classify_transport};
use crate::reply::{EventStream, ItemStream};

/// Size past which an Images event's data is relayed in pieces.
pub const STREAM_EVENTS_OVER: usize = 64 * 1024;

/// Relays the body of `response` as items.
pub(crate) fn relay(
    response: reqwest::Response,
    endpoint: Endpoint,
    finals_expected: usize,
    deadline: Deadline,
) -> ItemStream {
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
    /// An event is open (relayed in pieces), and whether it is a final one.
    open: Option<bool>,
    done: bool,
}

/// Relays a stream of body chunks as items (the transport-independent part of [`relay`]).
pub(crate) fn relay_chunks(
    body: BoxStream<'static, Result<Bytes, Failure>>,
    endpoint: Endpoint,
    finals_expected: usize,
    deadline: Deadline,
) -> ItemStream {
    let decoder = match endpoint {
        Endpoint::Responses => SseDecoder::new(),
        Endpoint::Generations | Endpoint::Edits => SseDecoder::new().stream_events_over(STREAM_EVENTS_OVER),
    };
    let state = Relay {
        body,
        decoder,
        endpoint,
        clock: ReadClock::new(deadline),
        finals_expected: finals_expected.max(1),
        finals_seen: 0,
        open: None,
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

/// The whole events of a Responses stream (which is never relayed in pieces).
pub(crate) fn relay_events(
    response: reqwest::Response,
    finals_expected: usize,
    deadline: Deadline,
) -> EventStream {
    relay(response, Endpoint::Responses, finals_expected, deadline)
        .filter_map(|item| async move {
            match item {
                Ok(SseItem::Event(event)) => Some(Ok(event)),
                Ok(SseItem::Opened { .. } | SseItem::Data(_) | SseItem::Closed) => None,
                Err(failure) => Some(Err(failure)),
            }
        })
        .boxed()
}

impl Relay {
    async fn next_item(&mut self) -> Option<Result<SseItem, Failure>> {
        loop {
            if self.done {
                return None;
            }
            if let Some(item) = self.decoder.pop_item() {
                return match item {
                    SseItem::Event(event) => match self.inspect(&event) {
                        Seen::Relay => Some(Ok(SseItem::Event(event))),
                        Seen::Final => {
                            self.final_seen();
                            Some(Ok(SseItem::Event(event)))
                        }
                        // As for the end of the body: quiet only once a final event came.
                        Seen::Done if self.may_end() => {
                            self.done = true;
                            None
                        }
                        Seen::Done => self.fail(Failure::transient(
                            "the upstream stream sent [DONE] before its final event",
                        )),
                        Seen::Error(failure) => self.fail(failure),
                    },
                    SseItem::Opened { ref event, .. } => {
                        self.open = Some(self.is_final(Some(event)));
                        Some(Ok(item))
                    }
                    SseItem::Data(_) => Some(Ok(item)),
                    SseItem::Closed => {
                        if self.open.take() == Some(true) {
                            self.final_seen();
                        }
                        Some(Ok(item))
                    }
                };
            }
            let may_end = self.may_end();
            match timeout_at(self.clock.at(), self.body.next()).await {
                Err(_) | Ok(None) if may_end => {
                    self.done = true;
                    return None;
                }
                Err(_elapsed) => return self.fail(self.clock.failure()),
                Ok(Some(Ok(chunk))) => {
                    if let Err(err) = self.decoder.push(&chunk) {
                        return self.fail(unusable(&err));
                    }
                }
                Ok(Some(Err(failure))) => return self.fail(failure),
                Ok(None) => {
                    let message = if self.open.is_some() {
                        "the upstream stream ended in the middle of an event"
                    } else {
                        "the upstream stream ended before its final event"
                    };
                    return self.fail(Failure::transient(message));
                }
            }
        }
    }

    /// Whether the stream may end quietly here (by the end of its body, the deadline or a
    /// `[DONE]`): once a final event came, and not inside an open event, where only its end can
    /// come next.
    fn may_end(&self) -> bool {
        self.finals_seen > 0 && self.open.is_none()
    }

    fn fail(&mut self, failure: Failure) -> Option<Result<SseItem, Failure>> {
        self.done = true;
        Some(Err(failure))
    }

    fn final_seen(&mut self) {
        self.finals_seen += 1;
        self.done = self.finals_seen >= self.finals_expected;
    }

    /// Whether an event of type `kind` is a final one for this endpoint.
    fn is_final(&self, kind: Option<&str>) -> bool {
        match (self.endpoint, kind) {
            (Endpoint::Generations, Some(kind)) => kind == "image_generation.completed",
            (Endpoint::Edits, Some(kind)) => kind == "image_edit.completed",
            (Endpoint::Responses, Some(kind)) => {
                matches!(
                    kind,
                    "response.completed" | "response.failed" | "response.incomplete"
                )
            }
            (_, None) => false,
        }
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
        if self.endpoint == Endpoint::Responses
            && probe.kind.as_deref() == Some("response.failed")
            && let Some(failure) = account_failure(&event.data)
        {
            return Seen::Error(failure.with_final_event(event.clone()));
        }
        if self.is_final(probe.kind.as_deref()) {
            Seen::Final
        } else {
            Seen::Relay
        }
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

/// The failure in a `response.failed` event when it is the account's: a usage or rate limit (as
/// the ChatGPT-subscription backend reports limits met during a call) or a `server_error`. As a
/// failure it is recorded on the account, and before anything was relayed the request goes to
/// another account; after, the client gets the event itself ([`Failure::final_event`]). Any other
/// failed response (a refusal, a bad input, an error code this gateway does not know) is the
/// request's, and stays the final event the client's SDK expects.
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
    let server_error = || {
        ["code", "type"]
            .iter()
            .any(|field| error.get(*field).and_then(Value::as_str) == Some("server_error"))
    };
    match failure.kind {
        FailureKind::RateLimited { .. } => Some(failure),
        FailureKind::Transient if server_error() => Some(failure),
        _ => None,
    }
}

fn unusable(err: &imagegate_codec::sse::SseError) -> Failure {
    Failure::protocol(format!("the upstream stream is unusable: {err}"))
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

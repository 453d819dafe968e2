//! Relaying an upstream SSE stream to the client: one frame per event as it arrives, keepalive
//! comments while the upstream is quiet, an error frame if the upstream fails after the start.

use std::convert::Infallible;
use std::time::Duration;

use bytes::{BufMut, Bytes, BytesMut};
use futures::StreamExt;
use futures::stream::BoxStream;
use imagegate_codec::sse::{KEEPALIVE, SseEvent, encode_error};
use imagegate_upstream::Failure;
use serde::Deserialize;

use crate::relay::failure_error;
use crate::relay::held::Held;
use crate::usage::UsageRecorder;

/// Which API's events are relayed (they report usage and errors differently).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StreamKind {
    Images,
    Responses,
}

struct Relay {
    events: BoxStream<'static, Result<SseEvent, Failure>>,
    kind: StreamKind,
    keepalive: Duration,
    usage: Option<UsageRecorder>,
    held: Option<Held>,
    last_sequence: Option<u64>,
    done: bool,
}

/// The body stream of an SSE response.
pub fn relay_events(
    events: BoxStream<'static, Result<SseEvent, Failure>>,
    kind: StreamKind,
    keepalive: Duration,
    usage: UsageRecorder,
    held: Held,
) -> impl futures::Stream<Item = Result<Bytes, Infallible>> + Send + 'static {
    let relay = Relay {
        events,
        kind,
        keepalive,
        usage: Some(usage),
        held: Some(held),
        last_sequence: None,
        done: false,
    };
    futures::stream::unfold(relay, |mut relay| async move {
        if relay.done {
            return None;
        }
        let next = tokio::select! {
            next = relay.events.next() => next,
            () = tokio::time::sleep(relay.keepalive) => {
                return Some((Ok(Bytes::from_static(KEEPALIVE)), relay));
            }
        };
        match next {
            Some(Ok(event)) => {
                relay.observe(&event);
                Some((Ok(frame(&event)), relay))
            }
            Some(Err(failure)) => {
                relay.done = true;
                if let Some(usage) = relay.usage.as_mut() {
                    usage.upstream_closed();
                }
                if let Some(held) = &relay.held {
                    held.record(&crate::relay::outcome_of(&failure)).await;
                }
                let frame = relay.error_frame(&failure);
                relay.finish(Some(&failure));
                Some((Ok(frame), relay))
            }
            None => {
                if let Some(usage) = relay.usage.as_mut() {
                    usage.upstream_closed();
                }
                if let Some(held) = &relay.held {
                    held.record(&imagegate_dispatch::Outcome::Success).await;
                }
                relay.finish(None);
                None
            }
        }
    })
}

impl Relay {
    fn observe(&mut self, event: &SseEvent) {
        let Some(usage) = self.usage.as_mut() else { return };
        match self.kind {
            StreamKind::Images if names_a_completed_image(event) => {
                if let Ok(done) = serde_json::from_str::<ImageCompleted>(&event.data) {
                    if done.kind.ends_with(".completed") {
                        usage.produced(
                            done.size.as_deref(),
                            done.quality.as_deref(),
                            done.output_format.as_deref(),
                            1,
                        );
                        if let Some(tokens) = &done.usage {
                            usage.usage(tokens);
                        }
                    }
                }
            }
            StreamKind::Responses => {
                if let Ok(head) = serde_json::from_str::<ResponsesHead>(&event.data) {
                    self.last_sequence = head.sequence_number.or(self.last_sequence);
                    if head.kind == "response.completed" {
                        if let Some(tokens) = head.response.and_then(|r| r.usage) {
                            usage.usage(&tokens.into_usage());
                        }
                    } else if head.kind == "response.output_item.done" {
                        if let Some(item) = head.item.filter(|i| i.kind == "image_generation_call") {
                            usage.produced(
                                item.size.as_deref(),
                                item.quality.as_deref(),
                                item.output_format.as_deref(),
                                1,
                            );
                        }
                    }
                }
            }
            StreamKind::Images => {}
        }
    }

    /// The frame that ends a stream on `failure`: the upstream's own final event when it carried the
    /// failure, an error event otherwise.
    fn error_frame(&self, failure: &Failure) -> Bytes {
        if let Some(event) = &failure.final_event {
            return frame(event);
        }
        let error = failure_error(failure).api;
        match self.kind {
            StreamKind::Images => encode_error(&error),
            StreamKind::Responses => {
                let data = serde_json::json!({
                    "type": "error",
                    "code": error.code(),
                    "message": error.message,
                    "param": error.param,
                    "sequence_number": self.last_sequence.map_or(0, |n| n + 1),
                });
                frame(&SseEvent {
                    event: Some("error".to_owned()),
                    data: data.to_string(),
                    id: None,
                })
            }
        }
    }

    fn finish(&mut self, failure: Option<&Failure>) {
        self.held = None;
        if let Some(usage) = self.usage.take() {
            match failure {
                None => usage.finish(200, None),
                Some(failure) => {
                    let error = failure_error(failure).api;
                    usage.finish(error.status(), error.code());
                }
            }
        }
    }
}

/// Whether an Images event is a `*.completed` one: by its `event:` name, or when it has none, by a
/// look at its data (a partial image's megabytes are not searched when its name says what it is).
fn names_a_completed_image(event: &SseEvent) -> bool {
    match &event.event {
        Some(name) => name.ends_with(".completed"),
        None => event.data.contains(".completed\""),
    }
}

/// Re-encodes a decoded event: `event:` line, one `data:` line per data line, blank line.
pub fn frame(event: &SseEvent) -> Bytes {
    let mut out = BytesMut::with_capacity(event.data.len() + 64);
    if let Some(name) = &event.event {
        out.put_slice(b"event: ");
        out.put_slice(name.as_bytes());
        out.put_u8(b'\n');
    }
    for line in event.data.split('\n') {
        out.put_slice(b"data: ");
        out.put_slice(line.as_bytes());
        out.put_u8(b'\n');
    }
    out.put_u8(b'\n');
    out.freeze()
}

#[derive(Deserialize)]
struct ImageCompleted {
    #[serde(rename = "type")]
    kind: String,
    size: Option<String>,
    quality: Option<String>,
    output_format: Option<String>,
    usage: Option<imagegate_domain::Usage>,
}

#[derive(Deserialize)]
struct ResponsesHead {
    #[serde(rename = "type", default)]
    kind: String,
    sequence_number: Option<u64>,
    response: Option<ResponseTail>,
    item: Option<OutputItem>,
}

#[derive(Deserialize)]
struct ResponseTail {
    usage: Option<ResponsesUsage>,
}

/// What the gateway reads of a Responses output item: its type and, for image calls, what was made.
#[derive(Deserialize)]
pub struct OutputItem {
    #[serde(rename = "type", default)]
    pub kind: String,
    pub size: Option<String>,
    pub quality: Option<String>,
    pub output_format: Option<String>,
}

/// The main model's usage as the Responses API reports it.
#[derive(Deserialize)]
pub struct ResponsesUsage {
    #[serde(default)]
    pub input_tokens: u64,
    #[serde(default)]
    pub output_tokens: u64,
    #[serde(default)]
    pub total_tokens: u64,
}

impl ResponsesUsage {
    pub fn into_usage(self) -> imagegate_domain::Usage {
        use imagegate_domain::{TokenDetails, Usage};
        Usage {
            input_tokens: self.input_tokens,
            input_tokens_details: TokenDetails {
                text_tokens: self.input_tokens,
                image_tokens: 0,
            },
            output_tokens: self.output_tokens,
            output_tokens_details: TokenDetails {
                text_tokens: self.output_tokens,
                image_tokens: 0,
            },
            total_tokens: self.total_tokens,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn completed_images_are_known_by_name_or_else_by_data() {
        let event = |name: Option<&str>, data: &str| SseEvent {
            event: name.map(str::to_owned),
            data: data.to_owned(),
            id: None,
        };
        let completed = r#"{"type":"image_generation.completed"}"#;
        assert!(names_a_completed_image(&event(
            Some("image_edit.completed"),
            "{}"
        )));
        assert!(names_a_completed_image(&event(None, completed)));
        assert!(!names_a_completed_image(&event(
            Some("image_generation.partial_image"),
            completed
        )));
        assert!(!names_a_completed_image(&event(None, r#"{"type":"x"}"#)));
    }

    fn responses_relay() -> Relay {
        Relay {
            events: futures::stream::empty().boxed(),
            kind: StreamKind::Responses,
            keepalive: Duration::from_secs(15),
            usage: None,
            held: None,
            last_sequence: Some(4),
            done: false,
        }
    }

    #[test]
    fn a_failure_carried_by_the_upstreams_final_event_ends_the_stream_with_that_event() {
        let failed = SseEvent {
            event: Some("response.failed".into()),
            data: r#"{"type":"response.failed","sequence_number":5}"#.into(),
            id: None,
        };
        let limited = Failure::new(
            imagegate_upstream::FailureKind::RateLimited {
                reset_at_unix_ms: None,
                images_only: false,
            },
            "limited",
        );
        let relay = responses_relay();
        assert_eq!(
            relay.error_frame(&limited.clone().with_final_event(failed.clone())),
            frame(&failed)
        );
        let error = String::from_utf8(relay.error_frame(&limited).to_vec()).unwrap();
        assert!(error.starts_with("event: error\n"), "{error}");
        assert!(error.contains(r#""sequence_number":5"#), "{error}");
    }

    #[test]
    fn frames_split_multi_line_data() {
        let event = SseEvent {
            event: Some("x".into()),
            data: "a\nb".into(),
            id: None,
        };
        assert_eq!(&frame(&event)[..], b"event: x\ndata: a\ndata: b\n\n");
        let bare = SseEvent {
            event: None,
            data: "{}".into(),
            id: None,
        };
        assert_eq!(&frame(&bare)[..], b"data: {}\n\n");
    }
}

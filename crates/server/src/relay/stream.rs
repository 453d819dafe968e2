//! Relaying an upstream SSE stream to the client: one frame per event as it arrives, keepalive
//! comments while the upstream is quiet, an error frame if the upstream fails after the start.
//!
//! An image event the upstream crate relays in pieces is framed piece by piece as it arrives: its
//! `event:` line and the start of its `data:` line first, then its data, then its end. Its usage is
//! scanned on the way ([`ImagesResponseScanner`]), so no image is held whole. No keepalive comes
//! inside such an event, and an upstream that fails inside one cuts the client's connection: an
//! error frame would land in the middle of the event.
//!
//! When the shutdown's grace period ends with the stream still open, it ends the same way: between
//! events with an error frame (`overloaded`: retry the request), inside one by cutting the
//! connection. The usage record is submitted when the body is dropped, after its last frame.

use std::time::Duration;

use bytes::{BufMut, Bytes, BytesMut};
use futures::StreamExt;
use imagegate_codec::sse::{KEEPALIVE, SseEvent, SseItem, encode_error};
use imagegate_codec::usage_scan::ImagesResponseScanner;
use imagegate_upstream::{Failure, ItemStream};
use serde::Deserialize;

use crate::relay::failure_error;
use crate::relay::held::Held;
use crate::relay::json_stream::CutShort;
use crate::usage::UsageRecorder;

/// Which API's events are relayed (they report usage and errors differently).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StreamKind {
    Images,
    Responses,
}

struct Relay {
    events: ItemStream,
    kind: StreamKind,
    keepalive: Duration,
    usage: Option<UsageRecorder>,
    held: Option<Held>,
    last_sequence: Option<u64>,
    /// An event is being relayed in pieces; for a completed image, the scan of its data.
    open: Option<Option<ImagesResponseScanner>>,
    /// An Images stream's call is at work on an image (none completed since its last partial).
    image_under_way: bool,
    /// The upstream makes one call per image (a subscription account), so no call is under way
    /// between two images; otherwise one call makes all `n` and goes on to the end.
    call_per_image: bool,
    done: bool,
}

/// The body stream of an SSE response; `call_per_image` when the upstream makes one call per
/// image of an Images stream (a subscription account).
pub fn relay_events(
    events: ItemStream,
    kind: StreamKind,
    keepalive: Duration,
    usage: UsageRecorder,
    held: Held,
    call_per_image: bool,
) -> impl futures::Stream<Item = Result<Bytes, CutShort>> + Send + 'static {
    let mut usage = usage;
    if call_per_image {
        usage.completed_carry_running_totals();
    }
    let relay = Relay {
        events,
        kind,
        keepalive,
        usage: Some(usage),
        held: Some(held),
        last_sequence: None,
        open: None,
        image_under_way: true,
        call_per_image,
        done: false,
    };
    futures::stream::unfold(relay, |mut relay| async move {
        if relay.done {
            return None;
        }
        // Asking for the next item starts a subscription account's next call, if an image is
        // left to make: from here until its image completes, a client that leaves has that call
        // read to its end (the upstream makes and bills it all the same). A body dropped in the
        // moment between this and the call's request going out has that call made for its usage
        // too; a client's leaving is only seen on a write, so the moment is a narrow one.
        relay.image_under_way = true;
        // No keepalive inside an event relayed in pieces: a comment there would corrupt it.
        let next = tokio::select! {
            biased;
            () = until_abandoned(relay.usage.as_ref()) => return Some((relay.shut_down(), relay)),
            next = relay.events.next() => next,
            () = tokio::time::sleep(relay.keepalive), if relay.open.is_none() => {
                return Some((Ok(Bytes::from_static(KEEPALIVE)), relay));
            }
        };
        match next {
            Some(Ok(item)) => {
                let frame = relay.frame_item(item);
                Some((Ok(frame), relay))
            }
            Some(Err(failure)) => {
                let frame = relay.fail(&failure).await;
                Some((frame, relay))
            }
            None if relay.open.is_some() => {
                // The upstream crate fails such a stream itself; should one end here anyway, the
                // client has part of an event and is cut off all the same.
                let failure = ended_inside_an_event();
                let frame = relay.fail(&failure).await;
                Some((frame, relay))
            }
            None => {
                // Settled before the await below: a body dropped during it has nothing to drain.
                relay.done = true;
                if let Some(usage) = relay.usage.as_mut() {
                    usage.upstream_closed();
                }
                let held = relay.held.take();
                relay.finish(None);
                if let Some(held) = held {
                    held.record(&imagegate_dispatch::Outcome::Success).await;
                }
                None
            }
        }
    })
}

impl Relay {
    /// Ends the stream on `failure`, recorded on the account and in the usage record: with an error
    /// frame, or, inside an event relayed in pieces, by cutting the client's connection.
    async fn fail(&mut self, failure: &Failure) -> Result<Bytes, CutShort> {
        self.done = true;
        if let Some(usage) = self.usage.as_mut() {
            record_failure_tokens(usage, failure);
            usage.upstream_closed();
        }
        let ending = if self.open.is_some() {
            tracing::warn!(kind = ?failure.kind, "upstream failed in the middle of an event");
            Err(CutShort)
        } else {
            Ok(self.error_frame(failure))
        };
        // Settled before the await below: a body dropped during it must not record the client's
        // leaving instead of the failure.
        let held = self.held.take();
        self.finish(Some(failure));
        if let Some(held) = held {
            held.record_failure(failure).await;
        }
        ending
    }

    /// The frame of `item`, noting what it tells of the usage.
    fn frame_item(&mut self, item: SseItem) -> Bytes {
        self.note(&item);
        match item {
            SseItem::Event(event) => frame(&event),
            SseItem::Opened { event, .. } => {
                let mut out = BytesMut::with_capacity(event.len() + 16);
                out.put_slice(b"event: ");
                out.put_slice(event.as_bytes());
                out.put_slice(b"\ndata: ");
                out.freeze()
            }
            SseItem::Data(piece) => data_piece(piece),
            SseItem::Closed => Bytes::from_static(b"\n\n"),
        }
    }

    /// Notes what `item` tells of the usage; true when it ended a completed image of an Images
    /// stream.
    fn note(&mut self, item: &SseItem) -> bool {
        match item {
            SseItem::Event(event) => {
                self.observe(event);
                let completed = self.kind == StreamKind::Images && names_a_completed_image(event);
                self.image_under_way = !completed;
                completed
            }
            SseItem::Opened { event, .. } => {
                let completed = self.kind == StreamKind::Images && event.ends_with(".completed");
                self.open = Some(completed.then(ImagesResponseScanner::new));
                self.image_under_way = true;
                false
            }
            SseItem::Data(piece) => {
                if let Some(Some(scanner)) = self.open.as_mut() {
                    scanner.push(piece);
                }
                false
            }
            SseItem::Closed => {
                let Some(Some(scanner)) = self.open.take() else {
                    return false;
                };
                self.image_under_way = false;
                // As for a whole event, whose data must parse: a cut or malformed image records
                // nothing.
                if scanner.is_complete()
                    && let Some(usage) = self.usage.as_mut()
                {
                    let summary = scanner.into_summary();
                    record_image(
                        usage,
                        summary.size.as_deref(),
                        summary.quality.as_deref(),
                        summary.output_format.as_deref(),
                        summary.usage.as_ref(),
                    );
                }
                true
            }
        }
    }

    fn observe(&mut self, event: &SseEvent) {
        let Some(usage) = self.usage.as_mut() else { return };
        match self.kind {
            StreamKind::Images if names_a_completed_image(event) => {
                if let Ok(done) = serde_json::from_str::<ImageCompleted>(&event.data)
                    && done.kind.ends_with(".completed")
                {
                    record_image(
                        usage,
                        done.size.as_deref(),
                        done.quality.as_deref(),
                        done.output_format.as_deref(),
                        done.usage.as_ref(),
                    );
                }
            }
            StreamKind::Responses => {
                if let Ok(head) = serde_json::from_str::<ResponsesHead>(&event.data) {
                    self.last_sequence = head.sequence_number.or(self.last_sequence);
                    if ends_a_response(&head.kind) {
                        if let Some(tail) = head.response {
                            record_response_tokens(usage, tail.usage, tail.tool_usage);
                        }
                    } else if head.kind == "response.output_item.done"
                        && let Some(item) = head.item.filter(|i| i.kind == "image_generation_call")
                    {
                        usage.produced(
                            item.size.as_deref(),
                            item.quality.as_deref(),
                            item.output_format.as_deref(),
                            1,
                        );
                    }
                }
            }
            StreamKind::Images => {}
        }
    }

    /// Ends the stream because the shutdown abandoned it: an error frame between events, a cut
    /// connection inside one. The account's call is given up; the usage recorder, dropped with the
    /// body after this last frame, records the request as cut by the shutdown.
    fn shut_down(&mut self) -> Result<Bytes, CutShort> {
        self.done = true;
        self.held = None;
        if let Some(usage) = self.usage.as_mut() {
            usage.upstream_closed();
        }
        if self.open.is_some() {
            return Err(CutShort);
        }
        Ok(self.error_event(&crate::in_flight::shutting_down_error()))
    }

    /// The frame that ends a stream on `failure`: the upstream's own final event when it carried the
    /// failure and is an event of this stream's API, an error event otherwise. A subscription
    /// account makes Images through the Responses API: its `response.failed` means nothing to an
    /// Images client, whose SDK raises only on an `error` event and would read the stream as ended
    /// well, short of images.
    fn error_frame(&self, failure: &Failure) -> Bytes {
        if self.kind == StreamKind::Responses
            && let Some(event) = &failure.final_event
        {
            return frame(event);
        }
        self.error_event(&failure_error(failure).api)
    }

    /// The error event of this stream's API for `error`.
    fn error_event(&self, error: &imagegate_codec::ApiError) -> Bytes {
        match self.kind {
            StreamKind::Images => encode_error(error),
            StreamKind::Responses => {
                let data = serde_json::json!({
                    "type": "error",
                    "code": error.code(),
                    "message": error.message,
                    "param": error.param,
                    "sequence_number": self.last_sequence.map_or(0, |n| n.saturating_add(1)),
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

impl Drop for Relay {
    /// The client left before the end of the stream: the upstream goes on with the call under
    /// way, and bills it, so the rest of that call is read for its image and usage, as for a JSON
    /// answer. The account's slot and the key's permit stay taken until then, since the account is
    /// still at work for this key (else a client could start any number of generations by hanging
    /// up).
    fn drop(&mut self) {
        // Between two images of a subscription account's Images stream (the last image's event
        // written, the next item not yet asked for), no call is under way: nothing to read.
        let between_images = self.kind == StreamKind::Images && self.call_per_image && !self.image_under_way;
        if self.done || self.usage.is_none() || between_images {
            return;
        }
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        if let Some(usage) = self.usage.as_mut() {
            usage.client_left();
        }
        let rest = Relay {
            events: std::mem::replace(&mut self.events, futures::stream::empty().boxed())
                .fuse()
                .boxed(),
            kind: self.kind,
            keepalive: self.keepalive,
            usage: self.usage.take(),
            held: self.held.take(),
            last_sequence: self.last_sequence,
            open: self.open.take(),
            image_under_way: true,
            call_per_image: self.call_per_image,
            done: true,
        };
        // In the request's span: the body is dropped inside it (`http::in_span`).
        runtime.spawn(tracing::Instrument::in_current_span(read_abandoned(rest)));
    }
}

/// Reads the rest of a stream whose client left, noting its usage (the record keeps the client's
/// status) and how the account's call ended. A subscription account's Images stream is read up to
/// its next completed image: it makes `n` images one call at a time, and no call is started for a
/// client that left; any other stream is one call, read to its end (all `n` images are billed).
/// The upstream's own deadline bounds the wait, and a shutdown cuts it short.
async fn read_abandoned(mut rest: Relay) {
    let failure = loop {
        let Some(usage) = rest.usage.as_ref() else {
            return;
        };
        let next = tokio::select! {
            next = rest.events.next() => next,
            () = usage.until_abandoned() => return,
        };
        match next {
            Some(Ok(item)) => {
                if rest.note(&item) && rest.call_per_image {
                    break None;
                }
            }
            Some(Err(failure)) => {
                if let Some(usage) = rest.usage.as_mut() {
                    record_failure_tokens(usage, &failure);
                }
                break Some(failure);
            }
            None if rest.open.is_some() => break Some(ended_inside_an_event()),
            None => break None,
        }
    };
    if let Some(usage) = rest.usage.as_mut() {
        usage.upstream_closed();
    }
    if let Some(held) = &rest.held {
        match &failure {
            None => held.record(&imagegate_dispatch::Outcome::Success).await,
            Some(failure) => held.record_failure(failure).await,
        }
    }
}

/// Resolves when the shutdown abandons the request of `usage`; never without one.
async fn until_abandoned(usage: Option<&UsageRecorder>) {
    match usage {
        Some(usage) => usage.until_abandoned().await,
        None => std::future::pending().await,
    }
}

/// An upstream stream that ended while an event was being relayed in pieces.
fn ended_inside_an_event() -> Failure {
    Failure::transient("the upstream stream ended in the middle of an event")
}

/// Records one completed image of an Images stream, whole or relayed in pieces: one more image,
/// and its usage (see [`UsageRecorder::completed_image`]).
fn record_image(
    usage: &mut UsageRecorder,
    size: Option<&str>,
    quality: Option<&str>,
    output_format: Option<&str>,
    tokens: Option<&imagegate_domain::Usage>,
) {
    usage.produced(size, quality, output_format, 1);
    if let Some(tokens) = tokens {
        usage.completed_image(tokens);
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

/// A piece of an event's data as it goes on the wire: each line break in it starts a new `data:`
/// line (image data has none, and passes uncopied).
fn data_piece(piece: Bytes) -> Bytes {
    if !piece.contains(&b'\n') {
        return piece;
    }
    let mut out = BytesMut::with_capacity(piece.len() + 16);
    for (index, line) in piece.split(|byte| *byte == b'\n').enumerate() {
        if index > 0 {
            out.put_slice(b"\ndata: ");
        }
        out.put_slice(line);
    }
    out.freeze()
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
    tool_usage: Option<ToolUsage>,
}

/// Records what a failed call cost: what the failure says the account spent (images made before
/// it, or tokens a subscription account's call billed for none), and the tokens on the upstream's
/// own final event (a subscription account's `response.failed` for a limit met in its last call,
/// whose images made before are the spent ones: the two never count the same call).
pub fn record_failure_tokens(usage: &mut UsageRecorder, failure: &Failure) {
    if let Some(spent) = failure.spent.as_deref() {
        usage.spent(spent, "a failed call");
    }
    record_final_event_tokens(usage, failure);
}

/// Records the tokens of the upstream's own final event of a failed call (a `response.failed`
/// carrying the usage the upstream bills for the work done before the failure), if it has any.
fn record_final_event_tokens(usage: &mut UsageRecorder, failure: &Failure) {
    let Some(event) = failure.final_event.as_deref() else {
        return;
    };
    if let Ok(head) = serde_json::from_str::<ResponsesHead>(&event.data)
        && ends_a_response(&head.kind)
        && let Some(tail) = head.response
    {
        record_response_tokens(usage, tail.usage, tail.tool_usage);
    }
}

/// Whether a Responses event is the last one of its response, with the response's usage in it:
/// `response.incomplete` and `response.failed` can report tokens the upstream bills too.
fn ends_a_response(kind: &str) -> bool {
    matches!(
        kind,
        "response.completed" | "response.incomplete" | "response.failed"
    )
}

/// `tool_usage` of a Responses envelope: the image generation tool's own tokens.
#[derive(Deserialize)]
pub struct ToolUsage {
    /// `None` where its shape is not one we read: an odd `tool_usage` must not cost the main
    /// model's usage and the produced images read from the same envelope.
    #[serde(default, deserialize_with = "imagegate_codec::usage_scan::usage_if_readable")]
    image_gen: Option<imagegate_domain::Usage>,
}

/// Records a Responses envelope's tokens: the main model's `usage` (as text) plus the image tool's
/// `tool_usage.image_gen`, which carries the image tokens the main model's usage leaves out.
pub fn record_response_tokens(
    usage: &mut UsageRecorder,
    main: Option<ResponsesUsage>,
    tools: Option<ToolUsage>,
) {
    if let Some(tokens) = main {
        usage.usage(&tokens.into_usage());
    }
    if let Some(image) = tools.and_then(|t| t.image_gen) {
        usage.usage(&image);
    }
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
    fn an_unreadable_tool_usage_keeps_the_main_usage() {
        let tail: ResponseTail = serde_json::from_str(
            r#"{"usage":{"input_tokens":3,"output_tokens":4,"total_tokens":7},
                "tool_usage":{"image_gen":{"input_tokens":1,"output_tokens_details":null}}}"#,
        )
        .unwrap();
        assert_eq!(tail.usage.map(|u| u.total_tokens), Some(7));
        // A `null` in place of the details costs only the details.
        let image = tail.tool_usage.unwrap().image_gen.unwrap();
        assert_eq!(
            (image.input_tokens, image.output_tokens_details.image_tokens),
            (1, 0)
        );
        let tail: ResponseTail = serde_json::from_str(
            r#"{"usage":{"input_tokens":3,"output_tokens":4,"total_tokens":7},
                "tool_usage":{"image_gen":{"input_tokens":"one"}}}"#,
        )
        .unwrap();
        assert_eq!(tail.usage.map(|u| u.total_tokens), Some(7));
        assert!(tail.tool_usage.unwrap().image_gen.is_none());
        let tail: ResponseTail = serde_json::from_str(
            r#"{"tool_usage":{"image_gen":{"input_tokens":1,"output_tokens":2,"total_tokens":3,
                "output_tokens_details":{"image_tokens":2}}}}"#,
        )
        .unwrap();
        let image = tail.tool_usage.unwrap().image_gen.unwrap();
        assert_eq!(
            (image.total_tokens, image.output_tokens_details.image_tokens),
            (3, 2)
        );
    }

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

    #[test]
    fn a_stream_the_shutdown_abandons_ends_with_an_error_event_or_is_cut_inside_one() {
        let mut between = responses_relay();
        let frame = between.shut_down().expect("an error frame between events");
        let text = std::str::from_utf8(&frame).unwrap();
        assert!(text.starts_with("event: error\ndata: "), "{text}");
        assert!(
            text.contains("\"sequence_number\":5") && text.contains("shutting down"),
            "{text}"
        );
        assert!(between.done);

        let mut inside = responses_relay();
        inside.open = Some(None);
        assert!(
            inside.shut_down().is_err(),
            "no error frame in the middle of an event"
        );
        assert!(inside.done);

        let mut images = responses_relay();
        images.kind = StreamKind::Images;
        let frame = images.shut_down().unwrap();
        let text = std::str::from_utf8(&frame).unwrap();
        assert!(
            text.starts_with("event: error\n") && text.contains("\"code\":\"overloaded\""),
            "{text}"
        );
    }

    fn responses_relay() -> Relay {
        Relay {
            events: futures::stream::empty().boxed(),
            kind: StreamKind::Responses,
            keepalive: Duration::from_secs(15),
            usage: None,
            held: None,
            last_sequence: Some(4),
            open: None,
            image_under_way: true,
            call_per_image: false,
            done: false,
        }
    }

    #[test]
    fn an_event_relayed_in_pieces_is_framed_as_the_whole_event_would_be() {
        let mut relay = responses_relay();
        relay.kind = StreamKind::Images;
        let data = r#"{"type":"image_generation.completed","b64_json":"AAAA","usage":{"total_tokens":3}}"#;
        let (head, tail) = data.split_at(30);
        let pieces = [
            SseItem::Opened {
                event: "image_generation.completed".to_owned(),
                id: None,
            },
            SseItem::Data(Bytes::copy_from_slice(head.as_bytes())),
            SseItem::Data(Bytes::copy_from_slice(tail.as_bytes())),
            SseItem::Closed,
        ];
        let mut wire = Vec::new();
        for piece in pieces {
            wire.extend_from_slice(&relay.frame_item(piece));
            if wire.ends_with(b"\n\n") {
                assert!(relay.open.is_none(), "closed");
            } else {
                assert!(
                    matches!(relay.open, Some(Some(_))),
                    "a completed image is scanned"
                );
            }
        }
        let whole = SseEvent {
            event: Some("image_generation.completed".to_owned()),
            data: data.to_owned(),
            id: None,
        };
        assert_eq!(wire, frame(&whole).to_vec());
    }

    #[test]
    fn the_error_event_follows_the_last_sequence_number_without_overflowing() {
        let failure = Failure::transient("cut");
        let sequence = |relay: &Relay| {
            let frame = relay.error_frame(&failure);
            let text = std::str::from_utf8(&frame).expect("utf-8").to_owned();
            let data = text
                .lines()
                .find_map(|line| line.strip_prefix("data: "))
                .expect("a data line")
                .to_owned();
            serde_json::from_str::<serde_json::Value>(&data).expect("json")["sequence_number"].clone()
        };
        let mut relay = responses_relay();
        assert_eq!(sequence(&relay), 5);
        relay.last_sequence = Some(u64::MAX);
        assert_eq!(
            sequence(&relay),
            u64::MAX,
            "an upstream's largest number is kept, not wrapped"
        );
    }

    #[test]
    fn line_breaks_in_pieces_start_new_data_lines() {
        assert_eq!(
            &data_piece(Bytes::from_static(b"a\nb\n"))[..],
            b"a\ndata: b\ndata: "
        );
        let image = Bytes::from_static(b"AAAA");
        assert_eq!(
            data_piece(image.clone()).as_ptr(),
            image.as_ptr(),
            "passed uncopied"
        );
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

        // An Images stream served by a subscription account (through the Responses API) ends
        // with the Images API's own error event.
        let mut images = responses_relay();
        images.kind = StreamKind::Images;
        let ending = images.error_frame(&limited.with_final_event(failed));
        let ending = String::from_utf8(ending.to_vec()).unwrap();
        assert!(ending.starts_with("event: error\n"), "{ending}");
        assert!(ending.contains(r#""code":"usage_limit_reached""#), "{ending}");
        assert!(!ending.contains("response.failed"), "{ending}");
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

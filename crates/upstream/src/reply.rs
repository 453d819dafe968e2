//! What a successful upstream call returns.

use std::fmt;

use bytes::{Bytes, BytesMut};
use futures::StreamExt;
use futures::channel::oneshot;
use futures::stream::BoxStream;
use imagegate_codec::sse::{SseEvent, SseItem};
use imagegate_codec::usage_scan::ResponseSummary;

use crate::failure::Failure;

/// Whole events of a streaming call. An error after the start arrives as `Err(Failure)` and is the
/// last item.
pub type EventStream = BoxStream<'static, Result<SseEvent, Failure>>;

/// The relayed items of a streaming call: whole events, or a large Images event in pieces as it
/// arrives ([`SseItem::Opened`], [`SseItem::Data`], [`SseItem::Closed`]), so that no image is held
/// whole. An error after the start arrives as `Err(Failure)` and is the last item; one that comes
/// while an event is open cuts that event short.
pub type ItemStream = BoxStream<'static, Result<SseItem, Failure>>;

/// `events` as items.
pub fn whole_events(events: EventStream) -> ItemStream {
    events.map(|event| event.map(SseItem::Event)).boxed()
}

/// `items` with every event relayed in pieces joined back into a whole one (held whole: for
/// tests and tools, not for relaying images). An error inside an open event drops that event.
pub fn joined_events(items: ItemStream) -> EventStream {
    type Open = Option<(String, Option<String>, Vec<u8>)>;
    let start: (ItemStream, Open) = (items, None);
    futures::stream::unfold(start, |(mut items, mut open)| async move {
        loop {
            let item = match items.next().await? {
                Ok(item) => item,
                Err(failure) => return Some((Err(failure), (items, None))),
            };
            match (item, open.as_mut()) {
                (SseItem::Event(event), _) => return Some((Ok(event), (items, open))),
                (SseItem::Opened { event, id }, _) => open = Some((event, id, Vec::new())),
                (SseItem::Data(piece), Some((_, _, data))) => data.extend_from_slice(&piece),
                (SseItem::Closed, Some(_)) => {
                    let Some((event, id, data)) = open.take() else {
                        continue;
                    };
                    let event = SseEvent {
                        event: Some(event),
                        data: String::from_utf8_lossy(&data).into_owned(),
                        id,
                    };
                    return Some((Ok(event), (items, None)));
                }
                (SseItem::Data(_) | SseItem::Closed, None) => {}
            }
        }
    })
    .boxed()
}

/// The rest of a non-streaming body relayed as it arrives. A failure (the connection dropped, the
/// deadline passed, the document ended early or is malformed) is the last item; the stream ends
/// cleanly only after a complete JSON document.
pub type BodyStream = BoxStream<'static, Result<Bytes, Failure>>;

/// A non-streaming Images answer sent in pieces: an API-key account's, relayed as it arrives from
/// the upstream, or a subscription account's, which the gateway built with each image in a piece of
/// its own ([`Self::in_hand`]).
pub struct JsonStream {
    /// The body up to the start of the first image's base64: enough to know it is a JSON object
    /// with at least one `b64_json` image.
    pub head: Bytes,
    /// The rest of the body, byte for byte.
    pub rest: BodyStream,
    /// What the scan of the whole body found (or, for a body in hand, what it was built from),
    /// once `rest` has ended cleanly.
    pub summary: EndSummary,
    /// The upstream's `x-request-id` header.
    pub request_id: Option<String>,
    /// The body's length as the upstream declared it (`content-length`; for a body in hand, as
    /// built), which `head` and `rest` add up to when the stream ends cleanly: the relay can pass
    /// it on, so the client reads a length-delimited body instead of a chunked one.
    pub content_length: Option<u64>,
    /// Whether the whole body is in memory already (built by the gateway, as a subscription
    /// account's answer is): the upstream's part is over when the reply is returned, so the relay
    /// records the account's success and the upstream time then, not when the client has read the
    /// last byte.
    pub in_hand: bool,
}

/// The [`ResponseSummary`] of a [`JsonStream`]'s body, handed over when its `rest` ends: the
/// upstream crate scans every byte once on the way (to check the document), so the relay need not
/// scan it again for usage.
#[derive(Debug)]
pub struct EndSummary(oneshot::Receiver<ResponseSummary>);

impl EndSummary {
    /// A summary handed over through the returned sender.
    pub(crate) fn channel() -> (oneshot::Sender<ResponseSummary>, Self) {
        let (sender, receiver) = oneshot::channel();
        (sender, Self(receiver))
    }

    /// The summary, once the rest of the body ended cleanly (`None` before, or after a failure).
    pub fn take(&mut self) -> Option<ResponseSummary> {
        self.0.try_recv().ok().flatten()
    }
}

/// A successful upstream answer.
pub enum Reply {
    /// Non-streaming: the upstream's JSON body, held once and returned byte for byte. For the Images
    /// API it was checked to hold at least one `b64_json` image; for the Responses API to be a JSON
    /// object.
    Json {
        /// The body exactly as the upstream sent it.
        body: Bytes,
        /// The upstream's `x-request-id` header.
        request_id: Option<String>,
        /// For an Images answer the upstream crate scanned, what the scan found (the relay
        /// records usage from it without scanning again); `None` otherwise.
        summary: Option<ResponseSummary>,
    },
    /// Non-streaming Images answer whose first image began before the body ended: the head was
    /// checked, the rest follows as it arrives (memory does not grow with the image size). Or one
    /// the gateway built in pieces, its images held once ([`JsonStream::in_hand`]).
    JsonStream(JsonStream),
    /// Streaming: the upstream's server-sent events, decoded and relayed one by one as they arrive
    /// (a large Images event in pieces).
    Events(ItemStream),
}

impl fmt::Debug for Reply {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Json { body, request_id, .. } => f
                .debug_struct("Json")
                .field("body_bytes", &body.len())
                .field("request_id", request_id)
                .finish_non_exhaustive(),
            Self::JsonStream(stream) => stream.fmt(f),
            Self::Events(_) => f.write_str("Events(..)"),
        }
    }
}

impl fmt::Debug for JsonStream {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("JsonStream")
            .field("head_bytes", &self.head.len())
            .field("request_id", &self.request_id)
            .finish_non_exhaustive()
    }
}

impl Reply {
    /// Whether the whole body is in memory: a JSON body read whole, or one the gateway built
    /// ([`JsonStream::in_hand`]). The upstream's part of such an answer is over, and it succeeded.
    pub fn in_hand(&self) -> bool {
        match self {
            Self::Json { .. } => true,
            Self::JsonStream(stream) => stream.in_hand,
            Self::Events(_) => false,
        }
    }

    /// The whole JSON body of a non-streaming answer, waiting for the rest of a
    /// [`Reply::JsonStream`]; an event stream is a [`crate::FailureKind::Protocol`] failure.
    pub async fn into_json(self) -> Result<Bytes, Failure> {
        match self {
            Self::Json { body, .. } => Ok(body),
            Self::JsonStream(JsonStream { head, mut rest, .. }) => {
                let mut body = BytesMut::from(&head[..]);
                while let Some(chunk) = rest.next().await {
                    body.extend_from_slice(&chunk?);
                }
                Ok(body.freeze())
            }
            Self::Events(_) => Err(Failure::protocol(
                "the upstream answered a stream to a plain request",
            )),
        }
    }
}

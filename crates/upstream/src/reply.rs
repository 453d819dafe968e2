//! What a successful upstream call returns.

use std::fmt;

use bytes::Bytes;
use futures::stream::BoxStream;
use imagegate_codec::sse::SseEvent;

use crate::failure::Failure;

/// The relayed events of a streaming call. An error after the start arrives as `Err(Failure)` and
/// is the last item.
pub type EventStream = BoxStream<'static, Result<SseEvent, Failure>>;

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
    },
    /// Streaming: the upstream's server-sent events, decoded and relayed one by one as they arrive.
    Events(EventStream),
}

impl fmt::Debug for Reply {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Json { body, request_id } => f
                .debug_struct("Json")
                .field("body_bytes", &body.len())
                .field("request_id", request_id)
                .finish(),
            Self::Events(_) => f.write_str("Events(..)"),
        }
    }
}

//! Server-Sent Events frames as the official SDKs read them.

use bytes::Bytes;
use serde::Serialize;

use crate::error::ApiError;

/// A comment frame that keeps idle connections (and proxies in front of them) open; SSE readers
/// ignore it.
pub const KEEPALIVE: &[u8] = b": keepalive\n\n";

/// The body of the frame sent when an event cannot be serialized (never the case for this crate's
/// wire types, whose serialization cannot fail).
const SERIALIZE_FAILED: &str = r#"{"error":{"message":"The server could not encode an event.","type":"server_error","param":null,"code":null}}"#;

/// One frame: `event: <type>\n` + `data: <compact JSON on one line>\n` + `\n`.
///
/// Compact JSON never contains a raw line break, so the data is always a single `data:` line. CR
/// and LF are removed from `event_type`. If `data` fails to serialize (only possible for foreign
/// types such as maps with non-string keys) an `event: error` frame is returned instead.
pub fn encode_event(event_type: &str, data: &impl Serialize) -> Bytes {
    let mut frame = Vec::with_capacity(event_type.len() + 64);
    frame.extend_from_slice(b"event: ");
    frame.extend(event_type.bytes().filter(|b| *b != b'\r' && *b != b'\n'));
    frame.extend_from_slice(b"\ndata: ");
    if serde_json::to_writer(&mut frame, data).is_err() {
        frame.clear();
        frame.extend_from_slice(b"event: error\ndata: ");
        frame.extend_from_slice(SERIALIZE_FAILED.as_bytes());
    }
    frame.extend_from_slice(b"\n\n");
    Bytes::from(frame)
}

/// A comment frame `: <text>\n\n` (line breaks in `text` are replaced by spaces).
pub fn encode_comment(text: &str) -> Bytes {
    let mut frame = Vec::with_capacity(text.len() + 4);
    frame.extend_from_slice(b": ");
    frame.extend(
        text.bytes()
            .map(|b| if b == b'\r' || b == b'\n' { b' ' } else { b }),
    );
    frame.extend_from_slice(b"\n\n");
    Bytes::from(frame)
}

/// The error frame of the Images streams: `event: error` + `{"error":{message,type,param,code}}`.
///
/// Both SDKs raise an API error on it (Python on the top-level `error` key, Node on the event
/// name). Send it and close the stream when a failure happens after the first byte.
pub fn encode_error(err: &ApiError) -> Bytes {
    encode_event("error", &err.envelope())
}

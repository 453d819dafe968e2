//! Server-Sent Events: frames for the client ([`encode_event`], [`KEEPALIVE`], [`encode_error`])
//! and an incremental decoder for upstream streams ([`SseDecoder`], [`decode_stream`]).

mod decode;
mod encode;

pub use decode::{
    DEFAULT_MAX_EVENT_BYTES, MAX_ID_BYTES, SseDecoder, SseError, SseEvent, SseItem, SseStreamError,
    decode_stream,
};
pub use encode::{KEEPALIVE, encode_comment, encode_error, encode_event};

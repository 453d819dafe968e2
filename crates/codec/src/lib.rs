//! Wire codec of imagegate: everything between HTTP bytes and the domain types of
//! [`imagegate_domain`], shaped so that the official `openai` SDKs cannot tell the gateway from the
//! real Images and Responses APIs.
//!
//! - [`json`]: request bodies (`null` means absent, unknown keys refused on the Images endpoints,
//!   type errors naming the field); a Responses body is kept whole for forwarding.
//! - [`multipart`]: the edit form (`image`, `image[]`, `image[N]`, `mask` in any order), files
//!   sniffed from their bytes ([`image_header`]) and refused as soon as they reach the size limit.
//! - [`sse`]: frames for the client and a WHATWG decoder for upstream streams.
//! - [`BodyCut`]: a request body its client stopped sending or left, told apart from a malformed
//!   one.
//! - [`error`]: the `{"error":{...}}` envelope and the single table from
//!   [`ErrorKind`](imagegate_domain::ErrorKind) to status, `type`, `code` and `x-should-retry`.
//! - [`wire`]: serde types of every body and stream event the gateway sends.
//! - [`usage_scan`]: reads `usage`, `size`, ... from a response passing through in chunks without
//!   copying its base64 payload.
//! - [`json_schemas`]: JSON Schemas of the above for `cargo xtask schemas`.
//!
//! ```
//! use imagegate_codec::wire::{CompletedImageEvent, ImageEndpoint, ImageStreamEvent};
//! use imagegate_codec::{ApiError, json, sse, usage_scan};
//! use imagegate_domain::{ModelCatalog, Usage, validate_generation};
//!
//! // Decode and validate a request; `null` means "use the default".
//! let body = br#"{"model":"gpt-image-2","prompt":"a lighthouse","size":"1536x1024","n":null}"#;
//! let draft = json::decode_generation(body)?;
//! let params = validate_generation(draft, &ModelCatalog::default())?;
//! assert_eq!(params.n, 1);
//!
//! // A refusal becomes the OpenAI error envelope with the right status.
//! let err = json::decode_generation(br#"{"prompt":"x","n":"2"}"#).unwrap_err();
//! assert_eq!(err.status(), 400);
//! assert_eq!(err.param.as_deref(), Some("n"));
//! assert_eq!(err.to_body()["error"]["code"], "invalid_type");
//!
//! // Stream events are SSE frames whose event name equals the JSON `type`.
//! let event = ImageStreamEvent::completed(ImageEndpoint::Generation, CompletedImageEvent {
//!     b64_json: "iVBORw0KGgo=".into(),
//!     created_at: 1_766_000_000,
//!     size: params.size.to_string(),
//!     quality: "high".into(),
//!     background: "opaque".into(),
//!     output_format: "png".into(),
//!     usage: Usage { input_tokens: 20, output_tokens: 4160, total_tokens: 4180, ..Usage::default() },
//! });
//! let frame = event.to_sse();
//! assert!(frame.starts_with(b"event: image_generation.completed\ndata: {\"type\":"));
//!
//! // Reading it back: the SSE decoder, then the usage scanner over the event's JSON.
//! let mut decoder = sse::SseDecoder::new();
//! decoder.push(&frame)?;
//! let decoded = decoder.pop().expect("one event");
//! let summary = usage_scan::scan(decoded.data.as_bytes());
//! assert_eq!(summary.size.as_deref(), Some("1536x1024"));
//! assert_eq!(summary.usage.map(|usage| usage.total_tokens), Some(4180));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod body_cut;
pub mod error;
pub mod image_header;
pub mod json;
pub mod multipart;
mod schema;
pub mod sse;
pub mod usage_scan;
pub mod wire;

pub use body_cut::BodyCut;
pub use error::{ApiError, ErrorEnvelope, ErrorObject, ErrorSpec, error_spec};
pub use schema::json_schemas;

//! Wire codec of imagegate (being written).

pub mod error;
pub mod image_header;
pub mod sse;
pub mod usage_scan;
pub mod wire;

pub use error::{ApiError, ErrorEnvelope, ErrorObject, ErrorSpec, error_spec};

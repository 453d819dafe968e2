//! Wire codec of imagegate (being written).

pub mod error;
pub mod image_header;
pub mod json;
pub mod multipart;
mod schema;
pub mod sse;
pub mod usage_scan;
pub mod wire;

pub use error::{ApiError, ErrorEnvelope, ErrorObject, ErrorSpec, error_spec};
pub use schema::json_schemas;

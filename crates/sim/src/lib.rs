//! A simulated upstream for imagegate.
//!
//! This crate will speak the OpenAI Images API (generations, edits, streaming) and the Responses API
//! with the `image_generation` tool, returning real PNG, JPEG or WebP images of the requested size
//! that are visibly marked as simulated, partial images, realistic `usage`, configurable latency and
//! injected faults (429 with a reset, 5xx, stalls, refusals, HTML error pages).
//!
//! ```
//! assert_eq!(imagegate_sim::CRATE_ROLE, "simulated upstream");
//! ```

/// What this crate is for, until the simulator lands.
pub const CRATE_ROLE: &str = "simulated upstream";

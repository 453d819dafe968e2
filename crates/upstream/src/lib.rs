//! Upstream transports for imagegate.
//!
//! This crate will own the `Upstream` trait (generate, edit, respond, each yielding a stream of
//! upstream events) and one transport per account kind:
//!
//! - `openai`: Images API passthrough to any OpenAI-compatible base URL with an API key;
//! - `codex`: ChatGPT-subscription accounts, where an images request becomes a Responses call with a
//!   forced `image_generation` tool (OAuth access token and refresh);
//! - `sim`: the in-process simulator.
//!
//! It also classifies every failure into an outcome (rate limited until a time, auth failed,
//! forbidden, transient, refused, invalid). It never chooses accounts or retries across them: that is
//! `imagegate-dispatch` and the server.
//!
//! ```
//! assert_eq!(imagegate_upstream::CRATE_ROLE, "upstream transports");
//! ```

/// What this crate is for, until its transports land.
pub const CRATE_ROLE: &str = "upstream transports";

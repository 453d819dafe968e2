//! Upstream transports of imagegate: one call to one account, and the classification of every way
//! it can fail.
//!
//! - [`Upstream`] is the trait the server calls: an [`AccountTarget`] (kind, base URL,
//!   credential), an [`UpstreamCall`] (generate, edit or a Responses call, borrowed from the
//!   validated request) and a deadline in; a [`Reply`] (a JSON body held once, or a stream of
//!   relayed server-sent events) or a [`Failure`] out.
//! - [`HttpUpstream`] implements it over HTTP (reqwest with rustls and pooled connections). API-key
//!   accounts ([`AccountKind::OpenAi`]) and the simulator ([`AccountKind::Sim`]) use the OpenAI
//!   wire: `POST {base_url}/images/generations`, `/images/edits` (multipart) or `/responses` with
//!   `Authorization: Bearer <credential>`. ChatGPT-subscription accounts ([`AccountKind::Codex`])
//!   turn each image into a streamed `POST {base_url}/responses` call with a forced
//!   `image_generation` tool and a configurable main model (with fallbacks), and the answers
//!   back into Images API answers (`n` images = `n` sequential calls). Their credential is an
//!   OAuth access token with its refresh token: it is refreshed at
//!   [`CodexAuthConfig::token_url`] before it expires and once when refused, one refresh per
//!   account at a time, and the refreshed credential is kept in the process and handed to the
//!   [`CredentialStore`] given with [`HttpUpstream::with_credential_store`].
//! - [`classify_response`] maps an upstream error answer (status, headers, body) to a
//!   [`FailureKind`]: rate limits with their reset time, auth, proxies' HTML pages, content-policy
//!   refusals and invalid requests (shown to the client as the upstream sent them), transient
//!   errors. [`Failure::client_error`] is what the client sees when no other account is tried.
//!
//! This crate never chooses accounts or retries across them: that is `imagegate-dispatch` and the
//! server. It never logs request or answer bodies, image data or credentials.
//!
//! ```
//! use std::time::Duration;
//! use imagegate_domain::{validate_generation, ImageParamsDraft, ModelCatalog};
//! use imagegate_upstream::{
//!     classify_response, AccountKind, AccountTarget, FailureKind, HttpUpstream, Secret, Upstream,
//!     UpstreamCall, UpstreamConfig,
//! };
//!
//! // A rate-limit answer, classified with a fixed "now" (unix ms).
//! let mut headers = reqwest::header::HeaderMap::new();
//! headers.insert("retry-after", "30".parse()?);
//! let body = br#"{"error":{"message":"Rate limit reached","type":"requests","param":null,"code":"rate_limit_exceeded"}}"#;
//! let failure = classify_response(429, &headers, body, 1_000_000);
//! assert_eq!(failure.kind, FailureKind::RateLimited { reset_at_unix_ms: Some(1_030_000), images_only: false });
//! assert_eq!(failure.client_error().status(), 429);
//!
//! // A call to an account whose server is down fails as Transient (another account may be tried).
//! let port = std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?.port(); // closed again at once
//! let target = AccountTarget {
//!     account_id: 1,
//!     kind: AccountKind::OpenAi,
//!     base_url: format!("http://127.0.0.1:{port}/v1"),
//!     credential: Secret::new("sk-test"),
//!     main_models: Vec::new(),
//! };
//! let draft = ImageParamsDraft {
//!     model: Some("gpt-image-2".into()),
//!     prompt: Some("a lighthouse at dusk".into()),
//!     ..Default::default()
//! };
//! let params = validate_generation(draft, &ModelCatalog::default())?;
//! let upstream = HttpUpstream::new(UpstreamConfig::default())?;
//! let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
//! let result = runtime.block_on(upstream.call(&target, UpstreamCall::Generate { params: &params }, Duration::from_secs(5)));
//! let failure = result.unwrap_err();
//! assert_eq!(failure.kind, FailureKind::Transient);
//! assert_eq!(failure.client_error().status(), 502);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

// `Failure` (136 bytes, with the agreed `passthrough: Option<ApiError>` field) is built at most once
// per failed call, never on a per-byte path: its size in `Result` costs nothing that matters.
#![allow(clippy::result_large_err)]

mod call;
mod client;
mod codex;
mod credential_store;
pub mod failure;
mod openai;
mod reply;
mod target;
mod url_cache;

/// The attribute of the async traits of this crate ([`Upstream`], [`CredentialStore`]), so an
/// implementation needs no dependency of its own: `#[imagegate_upstream::async_trait]`.
pub use async_trait::async_trait;
pub use call::{Endpoint, UploadedImage, UpstreamCall};
pub use client::{BuildError, CodexAuthConfig, HttpUpstream, UpstreamConfig};
pub use credential_store::CredentialStore;
pub use failure::{
    Failure, FailureKind, Spent, SpentSoFar, classify_error_object, classify_response, classify_transport,
};
pub use reply::{
    BodyStream, EndSummary, EventStream, ItemStream, JsonStream, Reply, joined_events, whole_events,
};
/// The header map type of [`classify_response`] (the `http` crate's, as used by reqwest and axum).
pub use reqwest::header::HeaderMap;
pub use target::{AccountKind, AccountTarget, Secret, UnknownAccountKind};

/// Calls one upstream account.
#[async_trait::async_trait]
pub trait Upstream: Send + Sync {
    /// Sends `call` to `target` and returns its answer, within `deadline` (which covers the whole
    /// call, a stream's events included).
    ///
    /// Non-streaming calls return [`Reply::Json`], or [`Reply::JsonStream`] for an Images answer
    /// sent in pieces; streaming calls return [`Reply::Events`] as soon
    /// as the upstream has answered with a success status, and the events follow as they arrive.
    /// Nothing has been relayed to the client when the first item of the stream is an error, so a
    /// caller may still try another account then.
    async fn call(
        &self,
        target: &AccountTarget,
        call: UpstreamCall<'_>,
        deadline: std::time::Duration,
    ) -> Result<Reply, Failure> {
        self.call_reporting(target, call, deadline, &SpentSoFar::default())
            .await
    }

    /// [`Upstream::call`], reporting into `spent` what the call has made while it runs, for a
    /// caller that may give it up before it returns.
    async fn call_reporting(
        &self,
        target: &AccountTarget,
        call: UpstreamCall<'_>,
        deadline: std::time::Duration,
        spent: &SpentSoFar,
    ) -> Result<Reply, Failure>;
}

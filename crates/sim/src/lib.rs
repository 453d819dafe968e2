//! A simulated OpenAI upstream for imagegate: it speaks the Images API (`/v1/images/generations`,
//! `/v1/images/edits`, JSON and streamed) and the Responses API with the `image_generation` tool, using the
//! wire types of `imagegate-codec` and the validation rules of `imagegate-domain`.
//!
//! Every image is real (PNG, JPEG or WebP of the requested size), seeded from the prompt, and carries a
//! large "SIMULATED" banner so it can never pass for model output. Streams send blockier partial images
//! before the final one. `usage` grows with prompt length, input images, pixel count, quality and partial
//! images. Latency and faults (429 usage limit or rate limit, 5xx, stalls, moderation refusals, HTML error
//! pages, answers without an image) are set by [`SimConfig`], by the `x-sim-latency-ms` / `x-sim-fault`
//! request headers, or by the `/sim/faults` admin API; `/sim/stats` counts requests and concurrency per
//! bearer token.
//!
//! For ChatGPT-subscription accounts it also plays the sign-in service: `POST /oauth/token` exchanges a
//! refresh token (configured, registered with `POST /sim/oauth/refresh_tokens`, or issued earlier) for a
//! new access token `sim-at-<n>` and a rotated refresh token, once per refresh token. The stats record
//! per token the last `chatgpt-account-id` header and the main models of Responses calls, and a
//! `model_unsupported` fault rule with a `model` refuses that main model like the subscription backend.
//!
//! Use it without HTTP through [`Simulator`], in-process through [`router`] or [`serve`], or as the
//! `imagegate-sim --listen 127.0.0.1:0` binary, which prints `listening on http://ADDR` first.
//!
//! ```
//! use imagegate_domain::{Dimensions, ImageSize, OutputFormat};
//! use imagegate_sim::{ImageJob, SimConfig, Simulator};
//!
//! let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
//! runtime.block_on(async {
//!     // Direct use: render one JPEG with two partial images.
//!     let simulator = Simulator::new(&SimConfig::default());
//!     let mut job = ImageJob::generation("a lighthouse at dusk", ImageSize::Exact(Dimensions::new(96, 64)));
//!     job.output_format = OutputFormat::Jpeg;
//!     job.partial_images = 2;
//!     let outcome = simulator.generate(&job).await?;
//!     let jpeg = outcome.images[0].bytes()?;
//!     assert_eq!(&jpeg[..2], &[0xFF, 0xD8]);
//!     assert_eq!(outcome.partials[0].len(), 2);
//!     assert!(outcome.usage.output_tokens > 0);
//!
//!     // Over HTTP on an ephemeral port, shut down by a future.
//!     let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
//!     let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
//!     let server = tokio::spawn(imagegate_sim::serve(listener, SimConfig::default(), async move {
//!         let _ = stopped.await;
//!     }));
//!     let _ = stop.send(());
//!     server.await??;
//!     Ok::<(), Box<dyn std::error::Error + Send + Sync>>(())
//! })?;
//! # Ok::<(), Box<dyn std::error::Error + Send + Sync>>(())
//! ```

pub mod config;
pub mod errors;
pub mod faults;
pub mod oauth;
pub mod params;
pub mod render;
pub mod responses;
pub mod routes;
pub mod simulator;
pub mod state;
pub mod stats;
pub mod usage;
pub mod wire;

use std::future::Future;

pub use config::{SimConfig, TINY_IMAGE_EDGE};
pub use faults::{Fault, FaultKind, FaultRule};
pub use render::RenderedImage;
pub use routes::router;
pub use simulator::{ImageJob, ImageOutcome, JobKind, Simulator};
pub use state::SimState;
pub use stats::{OAuthStats, StatsSnapshot, TokenStats};

/// Serves a fresh simulator configured by `config` on `listener` until `shutdown` completes, then waits for
/// open requests to finish.
pub async fn serve(
    listener: tokio::net::TcpListener,
    config: SimConfig,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    serve_state(listener, SimState::new(config), shutdown).await
}

/// Like [`serve`], for a state the caller keeps (to read stats or script faults in-process).
pub async fn serve_state(
    listener: tokio::net::TcpListener,
    state: SimState,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    axum::serve(without_nagle(listener), router(state))
        .with_graceful_shutdown(shutdown)
        .await
}

/// `listener` with `TCP_NODELAY` set on every accepted connection. An event stream is written one
/// event at a time; with Nagle's algorithm on, an event's small tail waited for the client to
/// acknowledge the bytes before it (up to its delayed-ACK timer), which no real upstream does to
/// its streams. A connection whose option cannot be set is served anyway.
fn without_nagle(
    listener: tokio::net::TcpListener,
) -> axum::serve::TapIo<tokio::net::TcpListener, fn(&mut tokio::net::TcpStream)> {
    use axum::serve::ListenerExt as _;
    listener.tap_io(|stream: &mut tokio::net::TcpStream| {
        let _ = stream.set_nodelay(true);
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use axum::serve::Listener as _;

    #[tokio::test]
    async fn accepted_connections_send_without_waiting_for_acknowledgements() {
        let plain = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = plain.local_addr().unwrap();
        let mut listener = super::without_nagle(plain);
        let _client = tokio::net::TcpStream::connect(address).await.unwrap();
        let (accepted, _) = listener.accept().await;
        assert!(accepted.nodelay().unwrap());
    }
}

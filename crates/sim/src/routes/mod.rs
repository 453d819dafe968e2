//! The HTTP surface: the OpenAI endpoints behind a gate (auth, counters, latency and faults), and the
//! `/sim/...` admin API.

pub mod admin;
pub mod edits;
pub mod images;
pub mod models;
pub mod oauth;
pub mod responses;
pub mod stream;

use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::Router;
use axum::body::{Body, Bytes, HttpBody};
use axum::extract::{DefaultBodyLimit, Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use tokio::time::Instant;

use crate::errors::{ApiFailure, fault_response};
use crate::faults::{Fault, FaultKind};
use crate::state::SimState;
use crate::stats::InFlight;

/// Header that sets the latency of one request in milliseconds.
pub const LATENCY_HEADER: &str = "x-sim-latency-ms";
/// Header that injects a fault into one request (a [`FaultKind`] name).
pub const FAULT_HEADER: &str = "x-sim-fault";
/// Header that sets the stall duration (milliseconds) of a `stall` fault set by [`FAULT_HEADER`].
pub const STALL_HEADER: &str = "x-sim-stall-ms";
/// Header that sets `resets_in_seconds` of a `usage_limit` fault set by [`FAULT_HEADER`].
pub const RESETS_HEADER: &str = "x-sim-resets-in-seconds";
/// Header of a ChatGPT-subscription request naming the account; the last one per token is in the stats.
pub const ACCOUNT_ID_HEADER: &str = "chatgpt-account-id";

/// What the gate decided for a request; handlers read it as an extension.
#[derive(Clone, Debug)]
pub struct RequestContext {
    /// When the request arrived.
    pub start: Instant,
    /// Total time the generation should take.
    pub latency: Duration,
    /// A fault that shapes the answer (`stall_mid_stream`, `no_image`, `no_usage`, ...); immediate faults never get here.
    pub fault: Option<Fault>,
    /// The `x-request-id` of the answer.
    pub request_id: String,
    /// The bearer token of the request.
    pub token: String,
}

impl RequestContext {
    /// Whether the answer must carry no image.
    pub fn no_image(&self) -> bool {
        self.fault.is_some_and(|f| f.kind == FaultKind::NoImage)
    }

    /// The wait named by a `response.failed` rate limit after the stream started, for
    /// `rate_limit_in_stream`.
    pub fn in_stream_rate_limit(&self) -> Option<u64> {
        self.fault
            .filter(|f| f.kind == FaultKind::RateLimitInStream)
            .map(|f| f.retry_after_seconds)
    }

    /// Whether a Responses stream must fail with `server_error` after it started
    /// (`server_error_in_stream`).
    pub fn in_stream_server_error(&self) -> bool {
        self.fault
            .is_some_and(|f| f.kind == FaultKind::ServerErrorInStream)
    }

    /// Whether a Responses answer's image usage must be left out (`no_usage`).
    pub fn no_usage(&self) -> bool {
        self.fault.is_some_and(|f| f.kind == FaultKind::NoUsage)
    }

    /// Whether a Responses stream's finished image must be refused (`refused_after_image`).
    pub fn refused_after_image(&self) -> bool {
        self.fault.is_some_and(|f| f.kind == FaultKind::RefusedAfterImage)
    }

    /// Whether an Images answer must hold one image whatever `n` asked for (`one_image`).
    pub fn one_image(&self) -> bool {
        self.fault.is_some_and(|f| f.kind == FaultKind::OneImage)
    }

    /// Whether an Images answer must be cut short (`truncated_body`).
    pub fn truncated(&self) -> bool {
        self.fault.is_some_and(|f| f.kind == FaultKind::TruncatedBody)
    }

    /// The pause after the first bytes, for `stall_mid_stream`.
    pub fn mid_stream_stall(&self) -> Option<Duration> {
        self.fault
            .filter(|f| f.kind == FaultKind::StallMidStream)
            .map(|f| f.stall)
    }
}

/// The simulator's routes over `state`.
pub fn router(state: SimState) -> Router {
    let api = Router::new()
        .route("/v1/images/generations", post(images::generations))
        .route("/v1/images/edits", post(edits::edits))
        .route("/v1/responses", post(responses::create))
        .route("/v1/models", get(models::list))
        .route("/v1/models/{id}", get(models::retrieve))
        .route_layer(middleware::from_fn_with_state(state.clone(), gate));
    Router::new()
        .merge(api)
        .route(oauth::TOKEN_PATH, post(oauth::token))
        .merge(admin::routes())
        .fallback(not_found)
        .layer(DefaultBodyLimit::disable())
        .with_state(state)
}

async fn not_found(request: Request) -> Response {
    let message = format!("Invalid URL ({} {})", request.method(), request.uri().path());
    ApiFailure::new(
        StatusCode::NOT_FOUND,
        &message,
        "invalid_request_error",
        None,
        None,
    )
    .into_response()
}

/// The bearer token of a request, if present and non-empty.
pub fn bearer_token(headers: &HeaderMap) -> Option<String> {
    let value = headers
        .get(axum::http::header::AUTHORIZATION)?
        .to_str()
        .ok()?
        .trim();
    let (scheme, token) = value.split_once(' ')?;
    let token = token.trim();
    (scheme.eq_ignore_ascii_case("bearer") && !token.is_empty()).then(|| token.to_owned())
}

async fn gate(State(state): State<SimState>, mut request: Request, next: Next) -> Response {
    let path = request.uri().path().to_owned();
    let token = bearer_token(request.headers());
    let guard = state.stats().begin(token.as_deref(), &path);
    let request_id = state.next_request_id();
    let response = match admit(&state, &mut request, token.as_deref(), &path, &request_id).await {
        Ok(()) => next.run(request).await,
        Err(response) => response,
    };
    let (mut parts, body) = response.into_parts();
    if let Ok(value) = HeaderValue::from_str(&request_id) {
        parts.headers.insert("x-request-id", value);
    }
    Response::from_parts(
        parts,
        Body::new(Tracked {
            inner: body,
            _in_flight: guard,
        }),
    )
}

async fn admit(
    state: &SimState,
    request: &mut Request,
    token: Option<&str>,
    path: &str,
    request_id: &str,
) -> Result<(), Response> {
    let Some(token) = token else {
        return Err(ApiFailure::missing_key().into_response());
    };
    let headers = request.headers();
    if let Some(account_id) = headers
        .get(ACCOUNT_ID_HEADER)
        .and_then(|value| value.to_str().ok())
    {
        state.stats().record_account_id(token, account_id);
    }
    let config = state.config();
    let latency = header_u64(headers, LATENCY_HEADER).map_or(config.latency, Duration::from_millis);
    let fault = match headers.get(FAULT_HEADER).map(|v| v.to_str().unwrap_or("")) {
        Some(name) => {
            let kind = name.parse::<FaultKind>().map_err(|e| {
                ApiFailure::invalid_request(&e.to_string(), Some(FAULT_HEADER), None).into_response()
            })?;
            let mut fault = Fault::from_config(kind, config);
            if let Some(ms) = header_u64(headers, STALL_HEADER) {
                fault.stall = Duration::from_millis(ms);
            }
            if let Some(seconds) = header_u64(headers, RESETS_HEADER) {
                fault.resets_in_seconds = seconds;
            }
            Some(fault)
        }
        None => state.faults().choose(Some(token), path, config),
    };
    if let Some(fault) = &fault {
        state.stats().record_fault(fault.kind.as_str());
        tracing::debug!(fault = fault.kind.as_str(), path, "injecting fault");
        if let Some(response) = fault_response(fault, Some(token), request_id) {
            tokio::time::sleep(fault.delay).await;
            return Err(response);
        }
        if fault.kind == FaultKind::Stall {
            tokio::time::sleep(fault.stall).await;
        }
    }
    request.extensions_mut().insert(RequestContext {
        start: Instant::now(),
        latency,
        fault,
        request_id: request_id.to_owned(),
        token: token.to_owned(),
    });
    Ok(())
}

fn header_u64(headers: &HeaderMap, name: &str) -> Option<u64> {
    headers.get(name)?.to_str().ok()?.trim().parse().ok()
}

/// A response body that keeps its request counted as in flight until the body ends or is dropped.
struct Tracked {
    inner: Body,
    _in_flight: InFlight,
}

impl HttpBody for Tracked {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<Self::Data>, Self::Error>>> {
        Pin::new(&mut self.inner).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.inner.size_hint()
    }
}

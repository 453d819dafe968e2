//! The part every `/v1` handler shares once the request is valid: per-key limits, the failover
//! relay (and, for images, the opt-in fallback ladder), and the answer as JSON or SSE.

use std::time::Duration;

use axum::body::Body;
use axum::http::{HeaderName, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use imagegate_codec::ApiError;
use imagegate_dispatch::{GroupId, KeyLimits, KeyPermit, SizeClass};
use imagegate_domain::{ErrorKind, ImageParams};
use imagegate_store::AuthContext;
use imagegate_upstream::{Reply, UploadedImage, UpstreamCall};

use crate::fallback;
use crate::http::error::HttpError;
use crate::http::images::fail;
use crate::relay::held::Held;
use crate::relay::json::{images_body, responses_body};
use crate::relay::json_stream::streamed_images_body;
use crate::relay::stream::{StreamKind, relay_events};
use crate::relay::{Deadline, RelayRequest, Relayed, relay};
use crate::state::AppState;
use crate::usage::UsageRecorder;

/// A validated call, ready to relay.
#[derive(Debug, Clone, Copy)]
pub struct ServeCall<'a> {
    pub call: UpstreamCall<'a>,
    pub class: imagegate_domain::SizeClass,
    pub kind: StreamKind,
}

/// An images call, apart from its parameters (which the fallback ladder may change).
#[derive(Debug, Clone, Copy)]
pub enum ImageCall<'f> {
    Generate,
    Edit {
        images: &'f [UploadedImage],
        mask: Option<&'f UploadedImage>,
    },
}

impl<'f> ImageCall<'f> {
    fn with<'a>(&self, params: &'a ImageParams) -> ServeCall<'a>
    where
        'f: 'a,
    {
        let call = match *self {
            Self::Generate => UpstreamCall::Generate { params },
            Self::Edit { images, mask } => UpstreamCall::Edit { params, images, mask },
        };
        ServeCall {
            call,
            class: params.size_class(),
            kind: StreamKind::Images,
        }
    }
}

/// Serves an images request, walking the fallback ladder when it is enabled and the request
/// keeps failing upstream.
/// `permit` is the caller's key's, from [`admit`].
pub async fn serve_images(
    app: &AppState,
    caller: &AuthContext,
    params: &ImageParams,
    call: ImageCall<'_>,
    mut usage: UsageRecorder,
    fallback_enabled: bool,
    permit: Option<KeyPermit>,
) -> Response {
    // One deadline for the request, the asked size's, shared by the ladder's rungs: a cheaper
    // try gets what the failed ones left, so the ladder never outlasts what the client expects.
    let mut deadline = deadline(app, params.size_class());
    let mut result = relay_call(app, caller, call.with(params), &mut deadline, &mut usage)
        .await
        .map(|r| (r, None));
    if fallback_enabled {
        for step in fallback::ladder(params) {
            if !matches!(&result, Err(error) if worth_a_fallback(error)) || deadline.passed() {
                break;
            }
            tracing::info!(change = %step.change, "trying the fallback ladder");
            let rung = call.with(&step.params);
            result = relay_call(app, caller, rung, &mut deadline, &mut usage)
                .await
                .map(|r| (r, Some(step.change)));
        }
    }
    match result {
        Ok((relayed, change)) => {
            let header = change.map(|change| {
                usage.note(format!("fallback: {change}"));
                change
            });
            let kind = Answer::Images {
                model: params.model.upstream(),
            };
            let mut response = respond(app, relayed, kind, usage, permit);
            if let Some(value) = header.and_then(|c| HeaderValue::from_str(&c).ok()) {
                response
                    .headers_mut()
                    .insert(HeaderName::from_static(fallback::HEADER), value);
            }
            response
        }
        Err(error) => fail(usage, error),
    }
}

/// Only upstream failures (not refusals, validation or exhausted pools) make a cheaper try useful.
fn worth_a_fallback(error: &HttpError) -> bool {
    matches!(
        error.api.kind,
        ErrorKind::UpstreamFailed | ErrorKind::UpstreamTimeout
    )
}

/// Serves any call without a ladder (the Responses endpoint).
/// `permit` is the caller's key's, from [`admit`].
pub async fn serve(
    app: &AppState,
    caller: &AuthContext,
    call: ServeCall<'_>,
    mut usage: UsageRecorder,
    permit: Option<KeyPermit>,
) -> Response {
    let mut deadline = deadline(app, call.class);
    match relay_call(app, caller, call, &mut deadline, &mut usage).await {
        Ok(relayed) => respond(app, relayed, Answer::Of(call.kind), usage, permit),
        Err(error) => fail(usage, error),
    }
}

/// Takes a slot of the caller's key's limits (concurrency, requests per minute), or answers why not.
pub async fn admit(app: &AppState, caller: &AuthContext) -> Result<Option<KeyPermit>, HttpError> {
    let limits = KeyLimits {
        max_concurrency: caller.limits.max_concurrency,
        requests_per_minute: caller.limits.rpm,
    };
    match app.key_gate.admit(&caller.key_id.to_string(), limits).await {
        Ok(permit) => Ok(Some(permit)),
        Err(err) => {
            let api = ApiError::new(ErrorKind::KeyRateLimited, err.to_string());
            Err(HttpError::new(api).with_retry_after(err.retry_after()))
        }
    }
}

async fn relay_call(
    app: &AppState,
    caller: &AuthContext,
    call: ServeCall<'_>,
    deadline: &mut Deadline,
    usage: &mut UsageRecorder,
) -> Result<Relayed, HttpError> {
    let group = GroupId::new(&caller.group_id.to_string());
    let request = RelayRequest {
        group: &group,
        class: dispatch_class(call.class),
        image: true,
        call: call.call,
    };
    relay(app, request, deadline, usage).await
}

/// What kind of answer a reply becomes.
#[derive(Clone, Copy)]
enum Answer<'a> {
    /// An Images answer, naming `model` (the one used upstream) where the upstream's does not.
    Images { model: &'a str },
    /// Any other, or one that names no model of its own.
    Of(StreamKind),
}

fn respond(
    app: &AppState,
    relayed: Relayed,
    answer: Answer<'_>,
    mut usage: UsageRecorder,
    permit: Option<KeyPermit>,
) -> Response {
    let (kind, model) = match answer {
        Answer::Images { model } => (StreamKind::Images, Some(model)),
        Answer::Of(kind) => (kind, None),
    };
    let held = Held {
        lease: relayed.lease,
        permit,
        pool: app.dispatcher.clone(),
        later_try: relayed.later_try,
    };
    match (relayed.reply, kind) {
        (Reply::Json { body, summary, .. }, StreamKind::Images) => {
            images_body(body, summary, usage, held, model)
        }
        (Reply::Json { body, .. }, StreamKind::Responses) => responses_body(body, usage, held),
        (Reply::JsonStream(reply), _) => streamed_images_body(reply, usage, held, model),
        (Reply::Events(events), kind) => {
            usage.first_byte();
            let keepalive = app.config.timeouts.keepalive();
            let call_per_image = app
                .accounts
                .target(held.lease.account())
                .is_some_and(|target| target.kind == imagegate_upstream::AccountKind::Codex);
            let events = relay_events(events, kind, keepalive, usage, held, call_per_image);
            let body = Body::from_stream(crate::http::in_span::in_current_span(events));
            let mut response = (StatusCode::OK, body).into_response();
            let headers = response.headers_mut();
            headers.insert(
                header::CONTENT_TYPE,
                HeaderValue::from_static("text/event-stream"),
            );
            headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
            headers.insert("x-accel-buffering", HeaderValue::from_static("no"));
            response
                .extensions_mut()
                .insert(crate::in_flight::EndsItselfOnShutdown);
            response
        }
    }
}

fn dispatch_class(class: imagegate_domain::SizeClass) -> SizeClass {
    match class {
        imagegate_domain::SizeClass::Large => SizeClass::Large,
        imagegate_domain::SizeClass::Standard => SizeClass::Standard,
    }
}

/// The upstream deadline of a request of `class`, not yet started.
fn deadline(app: &AppState, class: imagegate_domain::SizeClass) -> Deadline {
    let timeouts = &app.config.timeouts;
    Deadline::new(Duration::from_secs(match class {
        imagegate_domain::SizeClass::Large => timeouts.large_secs,
        imagegate_domain::SizeClass::Standard => timeouts.standard_secs,
    }))
}

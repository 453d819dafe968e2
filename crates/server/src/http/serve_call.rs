//! The part every `/v1` handler shares once the request is valid: per-key limits, the failover
//! relay, and the answer as JSON or SSE.

use std::time::Duration;

use axum::body::Body;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use imagegate_dispatch::{GroupId, KeyLimits, SizeClass};
use imagegate_domain::ImageParams;
use imagegate_store::AuthContext;
use imagegate_upstream::{Reply, UpstreamCall};

use crate::http::error::HttpError;
use crate::http::images::fail;
use crate::relay::held::Held;
use crate::relay::json::{images_body, responses_body};
use crate::relay::stream::{StreamKind, relay_events};
use crate::relay::{RelayRequest, relay};
use crate::state::AppState;
use crate::usage::UsageRecorder;

/// A validated call, ready to relay.
#[derive(Debug, Clone, Copy)]
pub struct ServeCall<'a> {
    pub call: UpstreamCall<'a>,
    pub class: imagegate_domain::SizeClass,
    pub kind: StreamKind,
}

impl<'a> ServeCall<'a> {
    pub fn images(params: &ImageParams, call: UpstreamCall<'a>) -> Self {
        Self {
            call,
            class: params.size_class(),
            kind: StreamKind::Images,
        }
    }
}

pub async fn serve(
    app: &AppState,
    caller: &AuthContext,
    call: ServeCall<'_>,
    mut usage: UsageRecorder,
) -> Response {
    let limits = KeyLimits {
        max_concurrency: caller.limits.max_concurrency,
        requests_per_minute: caller.limits.rpm,
    };
    let permit = match app.key_gate.admit(&caller.key_id.to_string(), limits).await {
        Ok(permit) => Some(permit),
        Err(err) => {
            let api =
                imagegate_codec::ApiError::new(imagegate_domain::ErrorKind::KeyRateLimited, err.to_string());
            return fail(usage, HttpError::new(api).with_retry_after(err.retry_after()));
        }
    };
    let group = GroupId::new(&caller.group_id.to_string());
    let request = RelayRequest {
        group: &group,
        class: dispatch_class(call.class),
        image: true,
        call: call.call,
        deadline: deadline(app, call.class),
    };
    let relayed = match relay(app, request).await {
        Ok(relayed) => relayed,
        Err(failure) => {
            usage.account(failure.account_id);
            if failure.switches > 0 {
                usage.note(format!("failed over {} time(s)", failure.switches));
            }
            return fail(usage, failure.error);
        }
    };
    usage.account(relayed.account_id);
    if relayed.switches > 0 {
        usage.note(format!("failed over {} time(s)", relayed.switches));
    }
    let held = Held {
        lease: relayed.lease,
        permit,
    };
    match (relayed.reply, call.kind) {
        (Reply::Json { body, .. }, StreamKind::Images) => images_body(body, usage, held),
        (Reply::Json { body, .. }, StreamKind::Responses) => responses_body(body, usage, held),
        (Reply::Events(events), kind) => {
            usage.first_byte();
            let keepalive = app.config.timeouts.keepalive();
            let body = Body::from_stream(relay_events(events, kind, keepalive, usage, held));
            let mut response = (StatusCode::OK, body).into_response();
            let headers = response.headers_mut();
            headers.insert(
                header::CONTENT_TYPE,
                HeaderValue::from_static("text/event-stream"),
            );
            headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
            headers.insert("x-accel-buffering", HeaderValue::from_static("no"));
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

fn deadline(app: &AppState, class: imagegate_domain::SizeClass) -> Duration {
    let timeouts = &app.config.timeouts;
    Duration::from_secs(match class {
        imagegate_domain::SizeClass::Large => timeouts.large_secs,
        imagegate_domain::SizeClass::Standard => timeouts.standard_secs,
    })
}

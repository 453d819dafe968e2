//! `POST /v1/images/generations` and `POST /v1/images/edits`.

use std::sync::Arc;

use axum::body::Body;
use axum::extract::rejection::BytesRejection;
use axum::extract::{Extension, FromRequest, Request, State};
use axum::http::HeaderMap;
use axum::http::header::CONTENT_TYPE;
use axum::response::{IntoResponse, Response};
use bytes::{Bytes, BytesMut};
use imagegate_codec::ApiError;
use imagegate_codec::multipart::EditLimits;
use imagegate_domain::{ErrorKind, ImageParams, validate_edit, validate_generation};
use imagegate_store::AuthContext;

use crate::fallback;
use crate::http::auth::Caller;
use crate::http::error::HttpError;
use crate::http::json_keepalive;
use crate::http::request_id::RequestId;
use crate::http::serve_call::{ImageCall, admit, serve_images};
use crate::state::AppState;
use crate::usage::UsageRecorder;

pub async fn generations(
    State(app): State<Arc<AppState>>,
    Extension(request_id): Extension<RequestId>,
    Caller(caller): Caller,
    request: Request,
) -> Response {
    // Started before the body is read: a request abandoned while its body arrives (the client
    // left, the shutdown's grace period ended) is recorded too.
    let mut usage = start_usage(&app, &request_id, "/v1/images/generations", &caller);
    let (headers, body) = match read_body(request, crate::http::GENERATION_BODY_LIMIT).await {
        Ok(read) => read,
        Err(err) => return fail(usage, err),
    };
    let params = match decode_generation(&app, &body, &mut usage) {
        Ok(params) => params,
        Err(err) => return fail(usage, err),
    };
    let fallback = fallback::enabled(caller.fallback_ladder, &headers);
    let keepalive = match keepalive(&app, &headers, params.stream, &mut usage) {
        Ok(keepalive) => keepalive,
        Err(err) => return fail(usage, err),
    };
    let permit = match admit(&app, &caller).await {
        Ok(permit) => permit,
        Err(err) => return fail(usage, err),
    };
    json_keepalive::answer(keepalive, async move {
        serve_images(
            &app,
            &caller,
            &params,
            ImageCall::Generate,
            usage,
            fallback,
            permit,
        )
        .await
    })
    .await
}

/// The request's keepalive for a non-streaming answer (see [`json_keepalive`]), its commitment
/// noted by `usage`.
pub fn keepalive(
    app: &AppState,
    headers: &HeaderMap,
    streaming: bool,
    usage: &mut UsageRecorder,
) -> Result<Option<json_keepalive::Keepalive>, HttpError> {
    let every = json_keepalive::interval(app.config.timeouts.json_keepalive_secs, headers, streaming)?;
    Ok(every.map(|every| json_keepalive::Keepalive {
        every,
        committed: usage.keepalive_commitment(),
    }))
}

fn decode_generation(
    app: &AppState,
    body: &[u8],
    usage: &mut UsageRecorder,
) -> Result<ImageParams, HttpError> {
    let draft = imagegate_codec::json::decode_generation(body)?;
    if let Some(model) = &draft.model {
        usage.model(model);
    }
    let params = validate_generation(draft, &app.catalog)?;
    usage.params(&params);
    Ok(params)
}

pub async fn edits(
    State(app): State<Arc<AppState>>,
    Extension(request_id): Extension<RequestId>,
    Caller(caller): Caller,
    request: Request,
) -> Response {
    let mut usage = start_usage(&app, &request_id, "/v1/images/edits", &caller);
    let headers = request.headers().clone();
    let content_type = headers
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default();
    let boundary = match imagegate_codec::multipart::boundary(content_type) {
        Ok(boundary) => boundary,
        Err(err) => return fail(usage, err.into()),
    };
    // The key's limits before the upload, which they bound too: a key at its limit is refused
    // before it sends megabytes, and an upload in progress holds its slot.
    let permit = match admit(&app, &caller).await {
        Ok(permit) => permit,
        Err(err) => return fail(usage, err),
    };
    let body: Body = request.into_body();
    // The model asked for, kept for the record of a form refused before its end.
    let model_so_far = parking_lot::Mutex::new(None::<String>);
    let fields_so_far = |draft: &imagegate_domain::ImageParamsDraft| {
        if let Some(model) = &draft.model {
            model_so_far.lock().get_or_insert_with(|| model.clone());
        }
        imagegate_domain::check_edit_so_far(draft, &app.catalog).map_err(ApiError::from)
    };
    let decoded = imagegate_codec::multipart::decode_edit_checked(
        body.into_data_stream(),
        &boundary,
        EditLimits {
            disk_budget: Some(app.upload_disk.clone()),
            ..EditLimits::default()
        },
        fields_so_far,
    );
    let form = match decoded.await {
        Ok(form) => form,
        Err(err) => {
            if let Some(model) = model_so_far.lock().take() {
                usage.model(&model);
            }
            return fail(usage, err.into());
        }
    };
    if let Some(model) = &form.draft.model {
        usage.model(model);
    }
    let params = match validate_edit(form.draft.clone(), &app.catalog) {
        Ok(params) => params,
        Err(err) => return fail(usage, err.into()),
    };
    usage.params(&params);
    let fallback = fallback::enabled(caller.fallback_ladder, &headers);
    let keepalive = match keepalive(&app, &headers, params.stream, &mut usage) {
        Ok(keepalive) => keepalive,
        Err(err) => return fail(usage, err),
    };
    json_keepalive::answer(keepalive, async move {
        let call = ImageCall::Edit {
            images: &form.images,
            mask: form.mask.as_ref(),
        };
        serve_images(&app, &caller, &params, call, usage, fallback, permit).await
    })
    .await
}

/// A body that could not be read (larger than `limit` bytes, or cut off), in the OpenAI envelope.
/// The request's headers and whole body (within the route's body limit), copied frame by frame
/// into one buffer: a body sent in tiny chunks is not kept as one entry (and one hold on the
/// connection's read buffer) per chunk until its end, many times its size.
pub async fn read_body(request: Request, limit: usize) -> Result<(HeaderMap, Bytes), HttpError> {
    let headers = request.headers().clone();
    let body = BytesMut::from_request(request, &())
        .await
        .map_err(|rejection| body_error(&rejection, limit))?;
    Ok((headers, body.freeze()))
}

fn body_error(rejection: &BytesRejection, limit: usize) -> HttpError {
    if let Some(cut) = imagegate_codec::BodyCut::find(rejection) {
        return HttpError::new(cut.api_error());
    }
    if rejection.status() == axum::http::StatusCode::PAYLOAD_TOO_LARGE {
        let message = format!(
            "The request body is larger than the {} MiB this endpoint takes.",
            limit / (1024 * 1024)
        );
        // No file is involved: the whole document is too large.
        return HttpError::new(
            ApiError::new(ErrorKind::PayloadTooLarge, message).with_code("request_too_large"),
        );
    }
    let message = format!("The request body could not be read: {}", rejection.body_text());
    HttpError::new(ApiError::new(ErrorKind::InvalidRequest, message))
}

/// Starts the usage record of a call to `endpoint` (it counts as in flight until the record is
/// finished).
pub fn start_usage(
    app: &AppState,
    request_id: &RequestId,
    endpoint: &str,
    caller: &AuthContext,
) -> UsageRecorder {
    UsageRecorder::start(
        app.usage.clone(),
        app.metrics.clone(),
        app.in_flight.enter(),
        &request_id.0,
        endpoint,
        caller,
    )
}

/// Records a request that ends in an error before any upstream call, and answers it.
pub fn fail(usage: UsageRecorder, err: HttpError) -> Response {
    usage.finish(err.api.status(), err.api.code());
    err.into_response()
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;

    /// Frames still held by someone, and the most held at once.
    static HELD: AtomicUsize = AtomicUsize::new(0);
    static MOST_HELD: AtomicUsize = AtomicUsize::new(0);

    /// The storage of one body frame, counted while anything holds it.
    struct Frame;

    impl AsRef<[u8]> for Frame {
        fn as_ref(&self) -> &[u8] {
            b"x"
        }
    }

    impl Drop for Frame {
        fn drop(&mut self) {
            HELD.fetch_sub(1, Ordering::SeqCst);
        }
    }

    fn frame() -> Result<Bytes, std::io::Error> {
        let held = HELD.fetch_add(1, Ordering::SeqCst) + 1;
        MOST_HELD.fetch_max(held, Ordering::SeqCst);
        Ok(Bytes::from_owner(Frame))
    }

    #[tokio::test]
    async fn a_body_in_one_byte_chunks_is_not_held_chunk_by_chunk() {
        const CHUNKS: usize = 10_000;
        let body = Body::from_stream(futures::stream::iter((0..CHUNKS).map(|_| frame())));
        let request = Request::builder().uri("/v1/responses").body(body).unwrap();
        let (_, read) = read_body(request, crate::http::RESPONSES_BODY_LIMIT)
            .await
            .unwrap();
        assert_eq!(read.len(), CHUNKS);
        assert!(read.iter().all(|&b| b == b'x'));
        assert_eq!(HELD.load(Ordering::SeqCst), 0);
        let most = MOST_HELD.load(Ordering::SeqCst);
        assert!(most <= 2, "{most} chunks held at once while reading");
    }
}

//! Opt-in keepalive for non-streaming answers, for clients behind a proxy that cuts quiet
//! connections (Cloudflare's 100 s, nginx's and AWS ALB's 60 s) while a large image is made.
//!
//! A non-streaming answer sends nothing until the image is done. When the request asks for it
//! (`x-imagegate-keepalive: <seconds>`), or the gateway's `[timeouts] json_keepalive_secs` does,
//! and the answer is not ready after one interval, the gateway commits to `200` with
//! `content-type: application/json` and sends a newline every interval until the answer is
//! ready, then the answer's own body. JSON allows whitespace before a value, so the official SDKs
//! parse the document as usual. An answer ready within the first interval goes out untouched: its
//! own status, headers and a body that starts with `{`.
//!
//! The price, and the reason it is opt-in: once the first newline is sent the status is `200`
//! whatever happens, so a failure after it arrives as a `200` whose body is the error envelope
//! (`{"error": {...}}`), and the answer's own headers (`retry-after`, the fallback ladder's
//! `x-imagegate-fallback`) are not sent. The usage record keeps the
//! real status, and notes that the client was answered `200`. The failover loop is not affected: it runs to its end behind the newlines, as it
//! would behind a silent connection. A client that leaves drops the request as before (recorded
//! 499), and a shutdown cuts the body, which the SDKs retry as a connection error.
//!
//! ```text
//! POST /v1/images/generations        x-imagegate-keepalive: 20
//! HTTP/1.1 200 OK                    (after 20 s of waiting)
//! content-type: application/json
//! x-imagegate-keepalive: 20
//!
//! \n\n\n{"created": ..., "data": [...]}
//! ```

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use axum::body::Body;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::Response;
use bytes::Bytes;
use http_body::Frame;
use imagegate_codec::ApiError;
use imagegate_domain::ErrorKind;
use tokio::time::{Interval, MissedTickBehavior};
use tracing::Instrument as _;

use crate::http::error::HttpError;

/// The request header that asks for (or, with `0`, declines) the keepalive.
pub const HEADER: &str = "x-imagegate-keepalive";

/// Longest interval a request may ask for, in seconds (the configuration's too).
pub const MAX_SECS: u64 = crate::config::MAX_JSON_KEEPALIVE_SECS;

/// A request's keepalive.
#[derive(Debug, Clone)]
pub struct Keepalive {
    /// The interval between newlines, and the wait before the first.
    pub every: Duration,
    /// Set when the answer is committed to `200` before it is made (the usage record notes it:
    /// [`crate::usage::UsageRecorder::keepalive_commitment`]).
    pub committed: Arc<AtomicBool>,
}

/// What is sent while the answer is not ready: whitespace JSON allows before a value.
const FILLER: &[u8] = b"\n";

/// The keepalive interval of a request: its header's, else `default_secs` (`0` is off). A
/// streaming request has its own keepalive (SSE comments) and gets none, but its header is still
/// checked: a client whose SDK sends a malformed value everywhere hears of it at once.
pub fn interval(
    default_secs: u64,
    headers: &HeaderMap,
    streaming: bool,
) -> Result<Option<Duration>, HttpError> {
    let secs = match headers.get(HEADER) {
        None => default_secs,
        Some(value) => parse_secs(value).ok_or_else(|| {
            let message =
                format!("The {HEADER} header must be a whole number of seconds from 0 (off) to {MAX_SECS}.");
            HttpError::new(ApiError::new(ErrorKind::InvalidRequest, message).with_param(HEADER))
        })?,
    };
    Ok((!streaming && secs > 0).then(|| Duration::from_secs(secs)))
}

fn parse_secs(value: &HeaderValue) -> Option<u64> {
    let text = value.to_str().ok()?.trim();
    if text.is_empty() || !text.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    text.parse::<u64>().ok().filter(|secs| *secs <= MAX_SECS)
}

/// The answer `answer` makes, sent as is when it is ready within `every`; otherwise a `200` whose
/// body is a newline every `every` and then the answer's body (see the module's docs).
///
/// `answer` runs inside the body once the headers are sent, so a client that leaves drops it as it
/// would drop the handler.
pub async fn answer<F>(keepalive: Option<Keepalive>, answer: F) -> Response
where
    F: Future<Output = Response> + Send + 'static,
{
    let Some(Keepalive { every, committed }) = keepalive else {
        return answer.await;
    };
    // The answer may go on inside the body, outside the request's span: it keeps the span, so
    // what it logs still carries the request id.
    let mut answer: PendingAnswer = Box::pin(answer.instrument(tracing::Span::current()));
    if let Ok(response) = tokio::time::timeout(every, &mut answer).await {
        return response;
    }
    committed.store(true, Ordering::Release);
    // The first tick of an interval is immediate: the first newline goes with the headers.
    let mut ticks = tokio::time::interval(every);
    ticks.set_missed_tick_behavior(MissedTickBehavior::Delay);
    let body = Body::new(KeptAlive(State::Waiting { answer, ticks }));
    let mut response = Response::new(body);
    *response.status_mut() = StatusCode::OK;
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
    headers.insert(HEADER, HeaderValue::from(every.as_secs()));
    // nginx passes the newlines on at once instead of holding them in its buffers.
    headers.insert("x-accel-buffering", HeaderValue::from_static("no"));
    response
}

type PendingAnswer = Pin<Box<dyn Future<Output = Response> + Send>>;

/// The body of a committed answer.
struct KeptAlive(State);

enum State {
    /// The answer is still being made: a newline at every tick.
    Waiting { answer: PendingAnswer, ticks: Interval },
    /// The answer is made: its body, frame by frame.
    Relaying(Body),
}

impl http_body::Body for KeptAlive {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
        let state = &mut self.get_mut().0;
        if let State::Waiting { answer, ticks } = state {
            match answer.as_mut().poll(cx) {
                Poll::Ready(response) => *state = State::Relaying(response.into_body()),
                Poll::Pending => {
                    return ticks
                        .poll_tick(cx)
                        .map(|_| Some(Ok(Frame::data(Bytes::from_static(FILLER)))));
                }
            }
        }
        match state {
            State::Relaying(body) => Pin::new(body).poll_frame(cx),
            State::Waiting { .. } => Poll::Pending,
        }
    }
}

#[cfg(test)]
mod tests {
    use axum::response::IntoResponse;
    use http_body_util::BodyExt as _;

    use super::*;

    fn headers(value: &str) -> HeaderMap {
        let mut headers = HeaderMap::new();
        headers.insert(HEADER, HeaderValue::from_str(value).unwrap());
        headers
    }

    #[test]
    fn the_header_overrides_the_default_and_streams_get_none() {
        let none = HeaderMap::new();
        assert_eq!(interval(0, &none, false).unwrap(), None);
        assert_eq!(interval(20, &none, false).unwrap(), Some(Duration::from_secs(20)));
        assert_eq!(
            interval(0, &headers(" 5 "), false).unwrap(),
            Some(Duration::from_secs(5))
        );
        assert_eq!(interval(20, &headers("0"), false).unwrap(), None);
        assert_eq!(interval(20, &none, true).unwrap(), None);
        assert_eq!(interval(0, &headers("5"), true).unwrap(), None);
    }

    #[test]
    fn a_header_that_is_no_number_of_seconds_is_refused() {
        for bad in ["", "on", "-1", "1.5", "601", "99999999999999999999999"] {
            let err = interval(0, &headers(bad), false).unwrap_err();
            assert_eq!(err.api.status(), 400, "{bad:?}");
            assert_eq!(err.api.param.as_deref(), Some(HEADER), "{bad:?}");
        }
        assert!(interval(0, &headers("600"), false).is_ok());
        assert!(
            interval(0, &headers("on"), true).is_err(),
            "a stream's header is checked too"
        );
    }

    fn flag() -> Arc<AtomicBool> {
        Arc::default()
    }

    fn keepalive(secs: u64, committed: &Arc<AtomicBool>) -> Option<Keepalive> {
        Some(Keepalive {
            every: Duration::from_secs(secs),
            committed: Arc::clone(committed),
        })
    }

    async fn body_text(response: Response) -> String {
        let bytes = response.into_body().collect().await.unwrap().to_bytes();
        String::from_utf8(bytes.to_vec()).unwrap()
    }

    fn error_answer() -> Response {
        (
            StatusCode::BAD_GATEWAY,
            [(header::RETRY_AFTER, "3")],
            "{\"error\":{}}",
        )
            .into_response()
    }

    #[tokio::test(start_paused = true)]
    async fn an_answer_ready_within_the_interval_goes_out_untouched() {
        let committed = flag();
        let every = keepalive(10, &committed);
        let response = answer(every, async {
            tokio::time::sleep(Duration::from_secs(9)).await;
            error_answer()
        })
        .await;
        assert!(!committed.load(Ordering::SeqCst));
        assert_eq!(response.status(), StatusCode::BAD_GATEWAY);
        assert_eq!(response.headers()[header::RETRY_AFTER], "3");
        assert!(response.headers().get(HEADER).is_none());
        assert_eq!(body_text(response).await, "{\"error\":{}}");
    }

    #[tokio::test(start_paused = true)]
    async fn a_slow_answer_gets_a_newline_per_interval_before_its_body() {
        let committed = flag();
        let every = keepalive(10, &committed);
        let response = answer(every, async {
            tokio::time::sleep(Duration::from_secs(35)).await;
            error_answer()
        })
        .await;
        assert!(committed.load(Ordering::SeqCst));
        assert_eq!(response.status(), StatusCode::OK);
        assert_eq!(response.headers()[header::CONTENT_TYPE], "application/json");
        assert_eq!(response.headers()[HEADER], "10");
        // Committed at 10 s, then newlines at 10, 20 and 30 s; the answer at 35 s.
        assert_eq!(body_text(response).await, "\n\n\n{\"error\":{}}");
    }

    #[tokio::test(start_paused = true)]
    async fn the_answer_s_body_is_relayed_as_it_comes() {
        let every = keepalive(1, &flag());
        let response = answer(every, async {
            tokio::time::sleep(Duration::from_millis(1500)).await;
            let pieces = futures::stream::iter(["{\"a\":", "1}"].map(Ok::<_, std::io::Error>));
            Response::new(Body::from_stream(pieces))
        })
        .await;
        assert_eq!(body_text(response).await, "\n{\"a\":1}");
    }

    #[tokio::test(start_paused = true)]
    async fn the_answer_keeps_the_request_s_span_once_committed() {
        let _subscriber = tracing::subscriber::set_default(tracing_subscriber::registry());
        let request = tracing::info_span!("request", request_id = "req_1");
        let expected = request.id();
        assert!(expected.is_some());
        let response = answer(keepalive(1, &flag()), async move {
            tokio::time::sleep(Duration::from_secs(2)).await;
            let seen = tracing::Span::current().id();
            let text = if seen == expected { "same" } else { "other" };
            Response::new(Body::from(text))
        })
        .instrument(request)
        .await;
        // The body runs where the server polls it, outside the request's span.
        let body = body_text(response).await;
        assert_eq!(body.trim_start(), "same");
    }

    #[tokio::test(start_paused = true)]
    async fn dropping_the_body_drops_the_answer_being_made() {
        struct Flag(Arc<AtomicBool>);
        impl Drop for Flag {
            fn drop(&mut self) {
                self.0.store(true, Ordering::SeqCst);
            }
        }
        let dropped = Arc::new(AtomicBool::new(false));
        let guard = Flag(Arc::clone(&dropped));
        let response = answer(keepalive(1, &flag()), async move {
            let _guard = guard;
            tokio::time::sleep(Duration::from_secs(3600)).await;
            error_answer()
        })
        .await;
        let mut body = response.into_body();
        let first = body.frame().await.unwrap().unwrap().into_data().unwrap();
        assert_eq!(&first[..], FILLER);
        assert!(!dropped.load(Ordering::SeqCst));
        drop(body);
        assert!(dropped.load(Ordering::SeqCst), "the answer outlived its client");
    }
}

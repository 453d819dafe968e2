//! Requests still running when the shutdown grace period ends.
//!
//! Each connection is served by a task of its own, which outlives the server's accept loop. When
//! the grace period is over, the gateway abandons what is still running: the handlers and the
//! bodies they answered with are dropped, so each request's usage recorder submits its record
//! (status 503, `shutting_down`), and the writer is shut down only once every recorder is gone (or
//! a short bound passed). Without this, a request longer than the grace period (a 4K image can take
//! minutes) would reach the writer after it closed, and its record would be lost.

use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::body::Body;
use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use futures::future::BoxFuture;
use http_body::Frame;
use imagegate_codec::ApiError;
use imagegate_domain::ErrorKind;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tokio_util::task::task_tracker::TaskTrackerToken;

use crate::http::error::HttpError;
use crate::http::taken_body::TakenBody;

/// The requests in flight, and the signal that abandons them.
#[derive(Debug, Clone, Default)]
pub struct InFlight {
    tracker: TaskTracker,
    abandon: CancellationToken,
}

/// One request's part in [`InFlight`]: held by its usage recorder until the record is submitted.
#[derive(Debug)]
pub struct Entered {
    _token: TaskTrackerToken,
    abandon: CancellationToken,
}

impl InFlight {
    /// Counts a request in until the returned guard is dropped.
    pub fn enter(&self) -> Entered {
        Entered {
            _token: self.tracker.token(),
            abandon: self.abandon.clone(),
        }
    }

    /// Abandons every request still running, and waits at most `within` for their records.
    /// Returns whether every record was submitted in time.
    pub async fn abandon(&self, within: Duration) -> bool {
        self.abandon.cancel();
        self.tracker.close();
        tokio::time::timeout(within, self.tracker.wait()).await.is_ok()
    }
}

impl Entered {
    /// Whether the request is being abandoned by the shutdown.
    pub fn abandoned(&self) -> bool {
        self.abandon.is_cancelled()
    }

    /// Resolves when the request is abandoned.
    pub async fn until_abandoned(&self) {
        self.abandon.cancelled().await;
    }
}

/// Runs the handler until it answers or the request is abandoned, and ends its answer's body
/// early when the request is abandoned while the body is being sent.
pub async fn layer(State(in_flight): State<InFlight>, request: Request, next: Next) -> Response {
    let abandon = in_flight.abandon;
    let response = tokio::select! {
        response = next.run(request) => response,
        () = abandon.cancelled() => return shutting_down(),
    };
    response.map(|body| {
        Body::new(Abandonable {
            body: TakenBody::new(body),
            abandoned: Box::pin(abandon.cancelled_owned()),
        })
    })
}

/// How long a client is told to wait before retrying a request the shutdown abandoned: behind a
/// load balancer the retry reaches another replica, and the SDKs honour `retry-after`.
const SHUTDOWN_RETRY_AFTER: Duration = Duration::from_secs(1);

fn shutting_down() -> Response {
    HttpError::new(ApiError::new(
        ErrorKind::Overloaded,
        "The gateway is shutting down; retry the request.",
    ))
    .with_retry_after(Some(SHUTDOWN_RETRY_AFTER))
    .into_response()
}

/// An answer's body that ends with an error (the client's connection is cut) when abandoned.
struct Abandonable {
    body: TakenBody,
    abandoned: BoxFuture<'static, ()>,
}

/// The answer was cut short by the shutdown.
#[derive(Debug, thiserror::Error)]
#[error("the gateway shut down before the answer ended")]
struct Abandoned;

impl http_body::Body for Abandonable {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
        let this = self.get_mut();
        if !this.body.has_ended() && this.abandoned.as_mut().poll(cx).is_ready() {
            this.body.take();
            return Poll::Ready(Some(Err(axum::Error::new(Abandoned))));
        }
        Pin::new(&mut this.body).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.body.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use http_body_util::BodyExt as _;

    use super::*;

    #[tokio::test]
    async fn abandoning_waits_for_the_entered_requests_to_leave() {
        let in_flight = InFlight::default();
        let entered = in_flight.enter();
        let left = tokio::spawn(async move {
            entered.until_abandoned().await;
            assert!(entered.abandoned());
            drop(entered);
        });
        assert!(in_flight.abandon(Duration::from_secs(5)).await);
        left.await.unwrap();
        let stuck = InFlight::default();
        let _held = stuck.enter();
        assert!(!stuck.abandon(Duration::from_millis(20)).await);
    }

    #[test]
    fn the_shutdown_answer_says_when_to_retry() {
        let answer = shutting_down();
        assert_eq!(answer.status(), 503);
        assert_eq!(answer.headers()["retry-after"], "1");
    }

    #[tokio::test]
    async fn an_abandoned_body_ends_with_an_error() {
        let abandon = CancellationToken::new();
        let (tx, rx) = futures::channel::mpsc::unbounded::<Result<Bytes, std::io::Error>>();
        let mut body = Abandonable {
            body: TakenBody::new(Body::from_stream(rx)),
            abandoned: Box::pin(abandon.clone().cancelled_owned()),
        };
        tx.unbounded_send(Ok(Bytes::from_static(b"first"))).unwrap();
        let first = body.frame().await.unwrap().unwrap();
        assert_eq!(first.into_data().unwrap(), "first");
        abandon.cancel();
        assert!(body.frame().await.unwrap().is_err());
        assert!(body.frame().await.is_none());
        drop(tx);
    }
}

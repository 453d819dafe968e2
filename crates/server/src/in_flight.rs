//! Requests still running when the shutdown grace period ends.
//!
//! Each connection is served by a task of its own, which outlives the server's accept loop. When
//! the grace period is over, the gateway abandons what is still running: the handlers and the
//! bodies they answered with are dropped (an SSE stream first ends itself with an error event when
//! it is between two events, see [`EndsItselfOnShutdown`]), so each request's usage recorder submits its record
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

    /// Resolves once every request still counted in has submitted its record (no new one may come:
    /// the server has stopped accepting). Requests whose clients left are still read for their
    /// usage after their connections closed; this waits for them without cutting them off.
    pub async fn settled(&self) {
        self.tracker.close();
        self.tracker.wait().await;
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
    let ends_itself = response.extensions().get::<EndsItselfOnShutdown>().is_some();
    response.map(|body| {
        Body::new(Abandonable {
            body: TakenBody::new(body),
            abandoned: Some(Box::pin(abandon.cancelled_owned())),
            cut_within: ends_itself.then_some(SELF_ENDING_BOUND),
            cut_at: None,
        })
    })
}

/// Marks an answer whose body ends itself when its request is abandoned (an SSE stream, with an
/// error event): it is given [`SELF_ENDING_BOUND`] to do so before it is cut.
#[derive(Debug, Clone, Copy)]
pub struct EndsItselfOnShutdown;

/// How long a body that ends itself on abandonment has before it is cut all the same.
const SELF_ENDING_BOUND: Duration = Duration::from_millis(500);

/// How long a client is told to wait before retrying a request the shutdown abandoned: behind a
/// load balancer the retry reaches another replica, and the SDKs honour `retry-after`.
const SHUTDOWN_RETRY_AFTER: Duration = Duration::from_secs(1);

/// The error of a request the shutdown abandoned: an answer of its own before the answer began,
/// the last event of a stream after.
pub fn shutting_down_error() -> ApiError {
    ApiError::new(
        ErrorKind::Overloaded,
        "The gateway is shutting down; retry the request.",
    )
}

fn shutting_down() -> Response {
    HttpError::new(shutting_down_error())
        .with_retry_after(Some(SHUTDOWN_RETRY_AFTER))
        .into_response()
}

/// An answer's body that ends with an error (the client's connection is cut) when abandoned: at
/// once, or, for a body that ends itself, if it has not within `cut_within`.
struct Abandonable {
    body: TakenBody,
    /// Resolves when the request is abandoned; `None` once it has.
    abandoned: Option<BoxFuture<'static, ()>>,
    cut_within: Option<Duration>,
    cut_at: Option<Pin<Box<tokio::time::Sleep>>>,
}

impl Abandonable {
    fn cut(&mut self) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
        self.body.take();
        Poll::Ready(Some(Err(axum::Error::new(Abandoned))))
    }
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
        if !this.body.has_ended() {
            if let Some(abandoned) = this.abandoned.as_mut()
                && abandoned.as_mut().poll(cx).is_ready()
            {
                this.abandoned = None;
                match this.cut_within {
                    None => return this.cut(),
                    Some(within) => this.cut_at = Some(Box::pin(tokio::time::sleep(within))),
                }
            }
            if let Some(cut_at) = this.cut_at.as_mut()
                && cut_at.as_mut().poll(cx).is_ready()
            {
                return this.cut();
            }
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
#[allow(clippy::disallowed_methods, reason = "tests: every task ends with its test")]
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

    type Sender = futures::channel::mpsc::UnboundedSender<Result<Bytes, std::io::Error>>;

    /// A body fed through the returned sender, abandoned with `abandon`.
    fn abandonable(abandon: &CancellationToken, cut_within: Option<Duration>) -> (Abandonable, Sender) {
        let (tx, rx) = futures::channel::mpsc::unbounded::<Result<Bytes, std::io::Error>>();
        let body = Abandonable {
            body: TakenBody::new(Body::from_stream(rx)),
            abandoned: Some(Box::pin(abandon.clone().cancelled_owned())),
            cut_within,
            cut_at: None,
        };
        (body, tx)
    }

    #[tokio::test(start_paused = true)]
    async fn a_body_that_ends_itself_is_given_the_time_to_and_then_cut() {
        let abandon = CancellationToken::new();
        let (mut body, tx) = abandonable(&abandon, Some(SELF_ENDING_BOUND));
        abandon.cancel();
        tx.unbounded_send(Ok(Bytes::from_static(b"event: error")))
            .unwrap();
        drop(tx);
        let last = body.frame().await.unwrap().unwrap();
        assert_eq!(last.into_data().unwrap(), "event: error");
        assert!(body.frame().await.is_none(), "it ended itself, uncut");

        let abandon = CancellationToken::new();
        let (mut stuck, _tx) = abandonable(&abandon, Some(SELF_ENDING_BOUND));
        abandon.cancel();
        let started = tokio::time::Instant::now();
        assert!(stuck.frame().await.unwrap().is_err());
        assert_eq!(started.elapsed(), SELF_ENDING_BOUND, "cut once its time was up");
    }

    #[tokio::test]
    async fn an_abandoned_body_ends_with_an_error() {
        let abandon = CancellationToken::new();
        let (mut body, tx) = abandonable(&abandon, None);
        tx.unbounded_send(Ok(Bytes::from_static(b"first"))).unwrap();
        let first = body.frame().await.unwrap().unwrap();
        assert_eq!(first.into_data().unwrap(), "first");
        abandon.cancel();
        assert!(body.frame().await.unwrap().is_err());
        assert!(body.frame().await.is_none());
        drop(tx);
    }
}

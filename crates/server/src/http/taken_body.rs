//! A request or response body that is let go of once it ended, so whoever wraps it can tell a
//! body read to its end from one dropped half-way, or end it early.

use std::pin::Pin;
use std::task::{Context, Poll};

use axum::body::Body;
use bytes::Bytes;
use http_body::{Frame, SizeHint};

/// A body, until it ends (or fails, or is taken away).
#[derive(Debug)]
pub struct TakenBody(Option<Body>);

impl TakenBody {
    /// Wraps `body`.
    pub fn new(body: Body) -> Self {
        TakenBody(Some(body))
    }

    /// Whether the body ended (or was taken away).
    pub fn has_ended(&self) -> bool {
        self.0.is_none()
    }

    /// The body, if it has not ended: the caller now owns what is left of it.
    pub fn take(&mut self) -> Option<Body> {
        self.0.take()
    }
}

impl http_body::Body for TakenBody {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
        let this = self.get_mut();
        let Some(inner) = this.0.as_mut() else {
            return Poll::Ready(None);
        };
        let polled = Pin::new(inner).poll_frame(cx);
        if matches!(polled, Poll::Ready(None) | Poll::Ready(Some(Err(_)))) {
            this.0 = None;
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.0.as_ref().is_none_or(http_body::Body::is_end_stream)
    }

    fn size_hint(&self) -> SizeHint {
        self.0
            .as_ref()
            .map_or_else(|| SizeHint::with_exact(0), http_body::Body::size_hint)
    }
}

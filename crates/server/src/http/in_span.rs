//! Response bodies polled, and dropped, inside the span of the request that made them.
//!
//! Hyper polls a streamed body after the handler returned, outside the request's span: what the
//! body logs as it relays (an upstream failing in the middle of a stream, say) and the tasks it
//! starts when its client leaves would carry no request id, and an exported request span would end
//! with the headers. [`InSpan`] enters the span for each poll and for the drop.

use std::pin::Pin;
use std::task::{Context, Poll};

use futures::Stream;
use tracing::Span;

/// A stream polled and dropped inside `span`.
pub struct InSpan<S> {
    inner: Option<Pin<Box<S>>>,
    span: Span,
}

/// `inner`, polled and dropped inside the current span.
pub fn in_current_span<S>(inner: S) -> InSpan<S> {
    InSpan {
        inner: Some(Box::pin(inner)),
        span: Span::current(),
    }
}

impl<S: Stream> Stream for InSpan<S> {
    type Item = S::Item;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = &mut *self;
        let _entered = this.span.enter();
        match this.inner.as_mut() {
            Some(inner) => inner.as_mut().poll_next(cx),
            None => Poll::Ready(None),
        }
    }
}

impl<S> Drop for InSpan<S> {
    fn drop(&mut self) {
        let _entered = self.span.enter();
        drop(self.inner.take());
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

    use std::sync::{Arc, Mutex};

    use futures::StreamExt as _;

    use super::*;

    /// What was done to a stream (`poll`, `drop`), and in which span.
    type Seen = Arc<Mutex<Vec<(&'static str, Option<tracing::Id>)>>>;

    /// Notes the current span when polled and when dropped.
    struct Witness(Seen);

    impl Stream for Witness {
        type Item = ();

        fn poll_next(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<Option<()>> {
            self.0.lock().unwrap().push(("poll", Span::current().id()));
            Poll::Ready(Some(()))
        }
    }

    impl Drop for Witness {
        fn drop(&mut self) {
            self.0.lock().unwrap().push(("drop", Span::current().id()));
        }
    }

    #[tokio::test]
    async fn the_body_is_polled_and_dropped_in_the_request_span() {
        let _subscriber = tracing::subscriber::set_default(tracing_subscriber::registry());
        let seen = Arc::new(Mutex::new(Vec::new()));
        let request = tracing::info_span!("request", request_id = "req_1");
        let body = request.in_scope(|| in_current_span(Witness(Arc::clone(&seen))));
        // The server polls and drops the body outside the request's span.
        let mut body = body;
        body.next().await;
        drop(body);
        let expected = request.id();
        assert!(expected.is_some());
        assert_eq!(
            *seen.lock().unwrap(),
            [("poll", expected.clone()), ("drop", expected)]
        );
    }
}

//! Reading what is left of a request body the gateway answered without reading it all.
//!
//! A body that is too large is refused as soon as that is known, often from its `content-length`
//! before a byte of it was read, and a handler that fails early drops the rest of its body. If the
//! connection were then closed with the client still sending, the client's kernel would receive a
//! reset, and the client would often report "broken pipe" or "connection reset" instead of the
//! gateway's clear 413 error. So a body dropped before its end is read on in the background, and
//! thrown away, for at most [`LINGER_BYTES`] and [`LINGER_TIME`] (the way web servers linger before
//! closing): the client finishes sending, reads the answer, and may even reuse the connection.

use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::body::Body;
use axum::extract::Request;
use bytes::Bytes;
use http_body::{Frame, SizeHint};
use http_body_util::BodyExt as _;

use crate::http::taken_body::TakenBody;

/// Most bytes of an abandoned body read (and discarded) after the answer.
pub const LINGER_BYTES: u64 = 64 * 1024 * 1024;
/// Longest time spent reading an abandoned body.
pub const LINGER_TIME: Duration = Duration::from_secs(10);

/// `request`, with a body that lingers when dropped before its end.
pub async fn layer(request: Request, next: axum::middleware::Next) -> axum::response::Response {
    next.run(request.map(|body| Body::new(Lingering::new(body))))
        .await
}

/// A request body that is read to its end, within bounds, when dropped before it.
#[derive(Debug)]
pub struct Lingering(TakenBody);

impl Lingering {
    /// Wraps `inner`.
    pub fn new(inner: Body) -> Self {
        Lingering(TakenBody::new(inner))
    }
}

impl http_body::Body for Lingering {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
        Pin::new(&mut self.get_mut().0).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.0.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.0.size_hint()
    }
}

impl Drop for Lingering {
    fn drop(&mut self) {
        let Some(rest) = self.0.take() else {
            return;
        };
        if http_body::Body::is_end_stream(&rest) {
            return;
        }
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(async move {
                let _ = tokio::time::timeout(LINGER_TIME, discard(rest, LINGER_BYTES)).await;
            });
        }
    }
}

/// Reads `body` until its end, an error, or more than `at_most` bytes.
async fn discard(mut body: Body, at_most: u64) {
    let mut read = 0u64;
    while let Some(Ok(frame)) = body.frame().await {
        let len = frame.data_ref().map_or(0, Bytes::len);
        read = read.saturating_add(u64::try_from(len).unwrap_or(u64::MAX));
        if read > at_most {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    use futures::StreamExt as _;

    use super::*;

    /// A body of `pieces` pieces of 1 KiB, counting how many were read.
    fn counted(pieces: usize, read: &Arc<AtomicUsize>) -> Body {
        let read = Arc::clone(read);
        Body::from_stream(futures::stream::iter(0..pieces).then(move |_| {
            let read = Arc::clone(&read);
            async move {
                tokio::task::yield_now().await;
                read.fetch_add(1, Ordering::SeqCst);
                Ok::<_, std::io::Error>(Bytes::from(vec![0u8; 1024]))
            }
        }))
    }

    async fn settle() {
        for _ in 0..200 {
            tokio::task::yield_now().await;
        }
    }

    #[tokio::test]
    async fn a_body_dropped_before_its_end_is_read_to_the_end() {
        let read = Arc::new(AtomicUsize::new(0));
        let mut body = Lingering::new(counted(50, &read));
        let first = body.frame().await;
        assert!(first.is_some());
        drop(body);
        settle().await;
        assert_eq!(read.load(Ordering::SeqCst), 50);
    }

    #[tokio::test]
    async fn lingering_stops_after_its_byte_bound() {
        let read = Arc::new(AtomicUsize::new(0));
        discard(counted(50, &read), 10 * 1024).await;
        assert_eq!(read.load(Ordering::SeqCst), 11, "stops once past 10 KiB");
    }

    #[tokio::test]
    async fn a_body_read_to_its_end_passes_every_byte_through() {
        let read = Arc::new(AtomicUsize::new(0));
        let body = Body::new(Lingering::new(counted(5, &read)));
        let bytes = axum::body::to_bytes(body, usize::MAX).await.unwrap();
        assert_eq!(bytes.len(), 5 * 1024);
        assert_eq!(read.load(Ordering::SeqCst), 5);
    }
}

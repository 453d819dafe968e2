//! Serving HTTP/1.1 connections with the gateway's router, on hyper directly, for three things
//! `axum::serve` does not do:
//!
//! - **`TCP_NODELAY`** on every client connection. A streamed answer (server-sent events, an
//!   Images body relayed as it arrives) is written in pieces; with Nagle's algorithm on, a small
//!   piece that follows another waits for the client's acknowledgement of the first, which the
//!   client may delay by up to 40 ms.
//! - **A limit on quiet clients** ([`TimeoutConfig::client_idle`](crate::config::TimeoutConfig)):
//!   a connection idle between requests, or whose request headers have not all arrived, is closed
//!   after it; a request body that stops arriving for as long fails. Without it, a client that
//!   sends half a request holds its connection (and its task) for ever. A body that stops so, or
//!   whose client leaves, fails with a [`BodyCut`] the handlers answer 408 or record as 499.
//! - **The same limit on clients that stop reading** (`TCP_USER_TIMEOUT`): a connection whose
//!   answer the client has not taken a byte of for that long (its receive window stays shut, or
//!   what was sent stays unacknowledged) is reset by the kernel. A streamed answer is written only
//!   as fast as the client reads, and holds its upstream account's slot while it lasts: without
//!   this, a client that keeps its connection open and stops reading would hold the slot for ever.
//! - The client's address as [`ConnectInfo`] on every request (as axum's server gives it).
//!
//! On shutdown it stops accepting, lets every connection finish the request it is serving (idle
//! ones close at once), and returns when all are closed.

use std::convert::Infallible;
use std::pin::pin;
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::extract::ConnectInfo;
use http_body_util::BodyExt as _;
use hyper::body::{Body as _, Incoming};
use hyper_util::rt::{TokioIo, TokioTimer};
use imagegate_codec::BodyCut;
use tokio::net::{TcpListener, TcpStream};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tower_http::timeout::{TimeoutBody, TimeoutError};
use tower_service::Service;

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// A request body's error as the handlers tell it apart: a body that stopped arriving for the
/// idle timeout, or whose client closed or reset the connection, is a [`BodyCut`]; any other
/// error (a malformed chunked encoding) stays as it is.
fn body_cut(error: BoxError) -> BoxError {
    if error.is::<TimeoutError>() {
        return Box::new(BodyCut::Stalled);
    }
    match error.downcast_ref::<hyper::Error>() {
        Some(error) if client_gone(error) => Box::new(BodyCut::ClientGone),
        _ => error,
    }
}

/// Whether a body's `error` says its client went away: the connection ended before the body
/// did, or was reset.
fn client_gone(error: &hyper::Error) -> bool {
    use std::io::ErrorKind::{BrokenPipe, ConnectionAborted, ConnectionReset, UnexpectedEof};
    if error.is_incomplete_message() || error.is_closed() || error.is_canceled() {
        return true;
    }
    std::error::Error::source(error)
        .and_then(|source| source.downcast_ref::<std::io::Error>())
        .is_some_and(|io| {
            matches!(
                io.kind(),
                BrokenPipe | ConnectionAborted | ConnectionReset | UnexpectedEof
            )
        })
}

/// Serves `app` on `listener` until `shutdown`, then until every connection has closed.
pub async fn serve(listener: TcpListener, app: Router, client_idle: Duration, shutdown: CancellationToken) {
    let mut http = hyper::server::conn::http1::Builder::new();
    http.timer(TokioTimer::new()).header_read_timeout(client_idle);
    let connections = TaskTracker::new();
    loop {
        let accepted = tokio::select! {
            accepted = accept(&listener, client_idle) => accepted,
            () = shutdown.cancelled() => break,
        };
        let (stream, remote) = match accepted {
            Ok(accepted) => accepted,
            Err(err) => {
                tokio::select! {
                    () = pause_after_accept_error(&err) => continue,
                    () = shutdown.cancelled() => break,
                }
            }
        };
        let app = app.clone();
        let service = hyper::service::service_fn(move |request: hyper::Request<Incoming>| {
            // A body that is already over (a GET's) needs no timer, and keeps saying it is over.
            let mut request = request.map(|body| {
                if body.is_end_stream() {
                    Body::new(body)
                } else {
                    Body::new(TimeoutBody::new(client_idle, body).map_err(body_cut))
                }
            });
            request.extensions_mut().insert(ConnectInfo(remote));
            let mut app = app.clone();
            async move { Ok::<_, Infallible>(app.call(request).await.unwrap_or_else(|never| match never {})) }
        });
        let connection = http.serve_connection(TokioIo::new(stream), service);
        let shutdown = shutdown.clone();
        connections.spawn(async move {
            let mut connection = pin!(connection);
            let result = tokio::select! {
                result = connection.as_mut() => result,
                () = shutdown.cancelled() => {
                    connection.as_mut().graceful_shutdown();
                    connection.await
                }
            };
            if let Err(err) = result {
                tracing::debug!(error = %err, "client connection ended with an error");
            }
        });
    }
    drop(listener);
    connections.close();
    connections.wait().await;
}

/// The next client connection, with `TCP_NODELAY` set and reset by the kernel when what is sent to
/// it stays untaken for `client_idle`.
async fn accept(
    listener: &TcpListener,
    client_idle: Duration,
) -> std::io::Result<(TcpStream, std::net::SocketAddr)> {
    let (stream, remote) = listener.accept().await?;
    set_options(&stream, client_idle);
    Ok((stream, remote))
}

/// After a failed accept: nothing for a connection the client gave up on; otherwise (out of
/// file descriptors, say) a pause, so the loop does not spin while the condition lasts.
async fn pause_after_accept_error(err: &std::io::Error) {
    use std::io::ErrorKind;
    if matches!(
        err.kind(),
        ErrorKind::ConnectionAborted | ErrorKind::ConnectionReset | ErrorKind::ConnectionRefused
    ) {
        return;
    }
    tracing::error!(error = %err, "could not accept a connection; pausing for a second");
    tokio::time::sleep(Duration::from_secs(1)).await;
}

/// A connection whose options cannot be set is served anyway (slower, or without the limit).
fn set_options(stream: &TcpStream, client_idle: Duration) {
    if let Err(err) = stream.set_nodelay(true) {
        tracing::debug!(error = %err, "could not set TCP_NODELAY on a client connection");
    }
    set_send_timeout(stream, client_idle);
}

#[cfg(any(target_os = "linux", target_os = "android", target_os = "fuchsia"))]
fn set_send_timeout(stream: &TcpStream, timeout: Duration) {
    if let Err(err) = socket2::SockRef::from(stream).set_tcp_user_timeout(Some(timeout)) {
        tracing::debug!(error = %err, "could not set TCP_USER_TIMEOUT on a client connection");
    }
}

/// Elsewhere the kernel's own retransmission limits apply.
#[cfg(not(any(target_os = "linux", target_os = "android", target_os = "fuchsia")))]
fn set_send_timeout(_stream: &TcpStream, _timeout: Duration) {}

#[cfg(test)]
#[allow(clippy::disallowed_methods, reason = "tests: every task ends with its test")]
mod tests {
    use std::io::{Read as _, Write as _};
    use std::net::SocketAddr;
    use std::time::Instant;

    use axum::routing::{get, post};

    use super::*;

    /// A server of a tiny app, with `client_idle`; its address and its shutdown.
    async fn start(client_idle: Duration) -> (SocketAddr, CancellationToken, tokio::task::JoinHandle<()>) {
        let app = Router::new()
            .route(
                "/peer",
                get(|ConnectInfo(peer): ConnectInfo<SocketAddr>| async move { peer.ip().to_string() }),
            )
            .route(
                "/echo",
                post(|body: axum::body::Bytes| async move { body.len().to_string() }),
            );
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap();
        let shutdown = CancellationToken::new();
        let server = tokio::spawn(serve(listener, app, client_idle, shutdown.clone()));
        (address, shutdown, server)
    }

    /// Sends `request` and reads until the server closes the connection (or 10 s pass).
    fn exchange(address: SocketAddr, request: &str) -> (String, Duration) {
        let started = Instant::now();
        let mut stream = std::net::TcpStream::connect(address).unwrap();
        stream.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        stream.write_all(request.as_bytes()).unwrap();
        let mut answer = Vec::new();
        let _ = stream.read_to_end(&mut answer);
        (String::from_utf8_lossy(&answer).into_owned(), started.elapsed())
    }

    #[tokio::test]
    async fn accepted_connections_get_nodelay_and_the_send_timeout() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let _client = TcpStream::connect(listener.local_addr().unwrap()).await.unwrap();
        let (accepted, _) = accept(&listener, Duration::from_secs(7)).await.unwrap();
        assert!(accepted.nodelay().unwrap());
        assert_eq!(
            socket2::SockRef::from(&accepted).tcp_user_timeout().unwrap(),
            Some(Duration::from_secs(7))
        );
        let _client = TcpStream::connect(listener.local_addr().unwrap()).await.unwrap();
        let (plain, _) = listener.accept().await.unwrap();
        assert!(!plain.nodelay().unwrap(), "the default, which `accept` changes");
    }

    /// Sends a message when dropped.
    struct OnDrop(Option<tokio::sync::oneshot::Sender<()>>);

    impl Drop for OnDrop {
        fn drop(&mut self) {
            if let Some(tx) = self.0.take() {
                let _ = tx.send(());
            }
        }
    }

    #[tokio::test]
    async fn a_client_that_stops_reading_is_cut_off_and_its_answer_dropped() {
        let (dropped_tx, dropped_rx) = tokio::sync::oneshot::channel();
        let guard = std::sync::Arc::new(parking_lot::Mutex::new(Some(OnDrop(Some(dropped_tx)))));
        // An endless answer (as a long stream is, to a client that reads nothing) that reports
        // when the server lets go of it.
        let app = Router::new().route(
            "/endless",
            get(move || {
                let guard = guard.lock().take();
                async move {
                    let chunks = futures::stream::unfold(guard, |guard| async move {
                        Some((Ok::<_, Infallible>(bytes::Bytes::from(vec![b'x'; 65_536])), guard))
                    });
                    Body::from_stream(chunks)
                }
            }),
        );
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap();
        let shutdown = CancellationToken::new();
        let server = tokio::spawn(serve(listener, app, Duration::from_secs(1), shutdown.clone()));

        let client = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
        client.set_recv_buffer_size(4096).unwrap();
        client.connect(&address.into()).unwrap();
        let mut client = std::net::TcpStream::from(client);
        client
            .write_all(b"GET /endless HTTP/1.1\r\nhost: x\r\n\r\n")
            .unwrap();
        // The client reads nothing and keeps its connection open: its window shuts, and the
        // kernel resets the connection a second (the limit) or so later.
        let dropped = tokio::time::timeout(Duration::from_secs(30), dropped_rx).await;
        assert!(
            matches!(dropped, Ok(Ok(()))),
            "the answer was still held 30 s after its client stopped reading"
        );
        drop(client);
        shutdown.cancel();
        tokio::time::timeout(Duration::from_secs(10), server)
            .await
            .unwrap()
            .unwrap();
    }

    #[tokio::test]
    async fn requests_are_served_with_the_peer_address() {
        let (address, shutdown, server) = start(Duration::from_secs(5)).await;
        let (answer, _) = tokio::task::spawn_blocking(move || {
            exchange(
                address,
                "GET /peer HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n",
            )
        })
        .await
        .unwrap();
        assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
        assert!(answer.ends_with("127.0.0.1"), "{answer}");
        shutdown.cancel();
        server.await.unwrap();
    }

    #[tokio::test]
    async fn a_client_that_never_finishes_its_headers_is_closed() {
        let (address, shutdown, server) = start(Duration::from_secs(1)).await;
        let (answer, took) =
            tokio::task::spawn_blocking(move || exchange(address, "POST /echo HTTP/1.1\r\nhost: x\r\n"))
                .await
                .unwrap();
        assert!(took < Duration::from_secs(8), "closed after {took:?}: {answer:?}");
        assert!(!answer.starts_with("HTTP/1.1 200"), "{answer}");
        shutdown.cancel();
        server.await.unwrap();
    }

    #[tokio::test]
    async fn a_body_that_stops_arriving_fails_the_request() {
        let (address, shutdown, server) = start(Duration::from_secs(1)).await;
        let (answer, took) = tokio::task::spawn_blocking(move || {
            exchange(
                address,
                "POST /echo HTTP/1.1\r\nhost: x\r\ncontent-length: 1000\r\n\r\nonly nine",
            )
        })
        .await
        .unwrap();
        assert!(
            took < Duration::from_secs(8),
            "answered after {took:?}: {answer:?}"
        );
        assert!(!answer.starts_with("HTTP/1.1 200"), "{answer}");
        shutdown.cancel();
        server.await.unwrap();
    }

    #[tokio::test]
    async fn shutdown_lets_the_request_in_progress_finish() {
        let app = Router::new().route(
            "/slow",
            get(|| async {
                tokio::time::sleep(Duration::from_millis(500)).await;
                "done"
            }),
        );
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap();
        let shutdown = CancellationToken::new();
        let server = tokio::spawn(serve(listener, app, Duration::from_secs(5), shutdown.clone()));
        let client =
            tokio::task::spawn_blocking(move || exchange(address, "GET /slow HTTP/1.1\r\nhost: x\r\n\r\n"));
        tokio::time::sleep(Duration::from_millis(200)).await;
        shutdown.cancel();
        server.await.unwrap();
        let (answer, _) = client.await.unwrap();
        assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
        assert!(answer.ends_with("done"), "{answer}");
        assert!(
            std::net::TcpStream::connect(address).is_err(),
            "no longer accepting"
        );
    }
}

//! `TCP_NODELAY` on every accepted client connection.
//!
//! `axum::serve` leaves Nagle's algorithm on. A streamed answer (server-sent events, an Images body
//! relayed as it arrives) is written in pieces; with Nagle on, a small piece that follows another
//! one waits for the client's acknowledgement of the first, which the client may delay by up to
//! 40 ms. The gateway only ever writes whole messages or chunks it wants sent now, so it turns the
//! algorithm off.

use axum::serve::{ListenerExt, TapIo};
use tokio::net::{TcpListener, TcpStream};

/// `listener`, with `TCP_NODELAY` set on each connection it accepts. A connection whose option
/// cannot be set is served anyway (slower, not wrong).
pub fn listener(listener: TcpListener) -> TapIo<TcpListener, fn(&mut TcpStream)> {
    listener.tap_io(set_nodelay as fn(&mut TcpStream))
}

fn set_nodelay(stream: &mut TcpStream) {
    if let Err(err) = stream.set_nodelay(true) {
        tracing::debug!(error = %err, "could not set TCP_NODELAY on a client connection");
    }
}

#[cfg(test)]
mod tests {
    use axum::serve::Listener;

    use super::*;

    #[tokio::test]
    async fn accepted_connections_have_nodelay_set() {
        let plain = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = plain.local_addr().unwrap();
        let mut wrapped = listener(plain);
        let _client = TcpStream::connect(address).await.unwrap();
        let (accepted, _) = wrapped.accept().await;
        assert!(accepted.nodelay().unwrap());

        let mut bare = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let _client = TcpStream::connect(bare.local_addr().unwrap()).await.unwrap();
        let (accepted, _) = Listener::accept(&mut bare).await;
        assert!(
            !accepted.nodelay().unwrap(),
            "the default, which the wrapper changes"
        );
    }
}

//! A TCP proxy in front of a server (the database) that a test can cut (every connection dropped, new ones
//! closed at once) and restore, to play a database outage without stopping the shared server.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;

#[derive(Debug, Default)]
struct Shared {
    down: AtomicBool,
    connections: Mutex<Vec<JoinHandle<()>>>,
}

/// Forwards `127.0.0.1:<port>` to a target address until dropped.
#[derive(Debug)]
pub struct TcpProxy {
    addr: SocketAddr,
    shared: Arc<Shared>,
    acceptor: JoinHandle<()>,
}

impl TcpProxy {
    pub async fn start(target: SocketAddr) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let shared = Arc::new(Shared::default());
        let state = Arc::clone(&shared);
        let acceptor = tokio::spawn(async move {
            while let Ok((mut inbound, _)) = listener.accept().await {
                if state.down.load(Ordering::SeqCst) {
                    drop(inbound);
                    continue;
                }
                let task = tokio::spawn(async move {
                    if let Ok(mut outbound) = TcpStream::connect(target).await {
                        let _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound).await;
                    }
                });
                let mut connections = state.connections.lock().unwrap();
                connections.retain(|c| !c.is_finished());
                connections.push(task);
            }
        });
        Self {
            addr,
            shared,
            acceptor,
        }
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Drops every open connection and refuses new ones until [`TcpProxy::restore`].
    pub fn cut(&self) {
        self.shared.down.store(true, Ordering::SeqCst);
        for connection in self.shared.connections.lock().unwrap().drain(..) {
            connection.abort();
        }
    }

    pub fn restore(&self) {
        self.shared.down.store(false, Ordering::SeqCst);
    }
}

impl Drop for TcpProxy {
    fn drop(&mut self) {
        self.acceptor.abort();
        self.cut();
    }
}

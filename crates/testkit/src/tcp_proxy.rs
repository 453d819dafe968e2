//! [`TcpProxy`]: a TCP proxy in front of a server (a database, Redis) that a test can cut (every
//! connection dropped, new ones closed at once) and restore, to play an outage without stopping
//! the shared server.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;

#[derive(Debug, Default)]
struct Shared {
    down: AtomicBool,
    connections: Mutex<Vec<JoinHandle<()>>>,
}

impl Shared {
    fn connections(&self) -> MutexGuard<'_, Vec<JoinHandle<()>>> {
        // Each update pushes or drains whole handles: a poisoned lock still holds a usable list.
        self.connections.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// Forwards `127.0.0.1:<port>` to a target address until dropped.
///
/// Must be started within a Tokio runtime: it spawns a task that accepts connections and one per
/// forwarded connection.
#[derive(Debug)]
pub struct TcpProxy {
    addr: SocketAddr,
    shared: Arc<Shared>,
    acceptor: JoinHandle<()>,
}

impl TcpProxy {
    /// Listens on a free loopback port and forwards each connection to `target`.
    ///
    /// # Errors
    ///
    /// When the loopback port cannot be bound.
    pub async fn start(target: SocketAddr) -> std::io::Result<Self> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let shared = Arc::new(Shared::default());
        let state = Arc::clone(&shared);
        let acceptor = tokio::spawn(async move {
            while let Ok((mut inbound, _)) = listener.accept().await {
                // Checked and recorded under the lock `cut` takes, so a connection accepted while
                // the proxy is being cut is either refused or aborted by the cut.
                let mut connections = state.connections();
                if state.down.load(Ordering::SeqCst) {
                    drop(inbound);
                    continue;
                }
                let task = tokio::spawn(async move {
                    if let Ok(mut outbound) = TcpStream::connect(target).await {
                        let _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound).await;
                    }
                });
                connections.retain(|c| !c.is_finished());
                connections.push(task);
            }
        });
        Ok(Self {
            addr,
            shared,
            acceptor,
        })
    }

    /// The address to connect to instead of the target.
    #[must_use]
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Drops every open connection and refuses new ones until [`TcpProxy::restore`].
    pub fn cut(&self) {
        let mut connections = self.shared.connections();
        self.shared.down.store(true, Ordering::SeqCst);
        for connection in connections.drain(..) {
            connection.abort();
        }
    }

    /// Forwards new connections again after [`TcpProxy::cut`].
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

//! [`TcpProxy`]: a TCP proxy in front of a server (a database, Redis) that a test can cut (every
//! connection dropped, new ones closed at once) or stall (every connection held open and silent,
//! like a network black hole) and restore, to play an outage without stopping the shared server.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::task::JoinHandle;

#[derive(Debug)]
struct Shared {
    down: AtomicBool,
    connections: Mutex<Vec<JoinHandle<()>>>,
    /// True while stalled: nothing is forwarded.
    stalled: watch::Sender<bool>,
    /// The client sides of the connections held open, silent, while stalled.
    held: Mutex<Vec<TcpStream>>,
}

impl Shared {
    fn connections(&self) -> MutexGuard<'_, Vec<JoinHandle<()>>> {
        // Each update pushes or drains whole handles: a poisoned lock still holds a usable list.
        self.connections.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn held(&self) -> MutexGuard<'_, Vec<TcpStream>> {
        self.held.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Forwards `inbound` to `target` until either side closes, or holds it open once stalled.
    async fn forward(&self, mut inbound: TcpStream, target: SocketAddr) {
        let mut stalled = self.stalled.subscribe();
        if !*stalled.borrow_and_update() {
            let Ok(mut outbound) = TcpStream::connect(target).await else {
                return;
            };
            tokio::select! {
                _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound) => return,
                _ = stalled.wait_for(|stalled| *stalled) => {}
            }
        }
        self.held().push(inbound);
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
        let shared = Arc::new(Shared {
            down: AtomicBool::new(false),
            connections: Mutex::default(),
            stalled: watch::Sender::new(false),
            held: Mutex::default(),
        });
        let state = Arc::clone(&shared);
        let acceptor = tokio::spawn(async move {
            while let Ok((inbound, _)) = listener.accept().await {
                // Checked and recorded under the lock `cut` takes, so a connection accepted while
                // the proxy is being cut is either refused or aborted by the cut.
                let mut connections = state.connections();
                if state.down.load(Ordering::SeqCst) {
                    drop(inbound);
                    continue;
                }
                let shared = Arc::clone(&state);
                let task = tokio::spawn(async move { shared.forward(inbound, target).await });
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
        self.shared.held().clear();
    }

    /// Stops forwarding: open connections and new ones are held open and get no byte, until
    /// [`TcpProxy::restore`] (a database that went silent, not one that refuses).
    pub fn stall(&self) {
        self.shared.stalled.send_replace(true);
    }

    /// Forwards new connections again after [`TcpProxy::cut`] or [`TcpProxy::stall`]; the
    /// connections held while stalled are closed.
    pub fn restore(&self) {
        self.shared.stalled.send_replace(false);
        self.shared.held().clear();
        self.shared.down.store(false, Ordering::SeqCst);
    }
}

impl Drop for TcpProxy {
    fn drop(&mut self) {
        self.acceptor.abort();
        self.cut();
    }
}

//! A TCP forwarder that can be switched off and on again, to take a server (Redis) away from a
//! gateway and give it back without touching the server itself.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinSet;

/// Forwards `127.0.0.1:<port>` to `target` while it is on.
#[derive(Debug)]
pub struct TcpProxy {
    /// The address clients connect to (stable across off/on).
    pub addr: SocketAddr,
    target: SocketAddr,
    tasks: Arc<Mutex<Option<JoinSet<()>>>>,
}

impl TcpProxy {
    /// Starts forwarding to `target` on a free loopback port.
    pub async fn start(target: SocketAddr) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind proxy");
        let addr = listener.local_addr().expect("proxy address");
        let proxy = Self {
            addr,
            target,
            tasks: Arc::new(Mutex::new(None)),
        };
        proxy.serve(listener);
        proxy
    }

    fn serve(&self, listener: TcpListener) {
        let mut set = JoinSet::new();
        let target = self.target;
        let connections = Arc::clone(&self.tasks);
        set.spawn(async move {
            while let Ok((mut client, _)) = listener.accept().await {
                let Ok(mut server) = TcpStream::connect(target).await else {
                    continue;
                };
                let mut guard = connections.lock().expect("proxy lock");
                if let Some(set) = guard.as_mut() {
                    set.spawn(async move {
                        let _ = tokio::io::copy_bidirectional(&mut client, &mut server).await;
                    });
                }
            }
        });
        *self.tasks.lock().expect("proxy lock") = Some(set);
    }

    /// Closes the port and every forwarded connection.
    pub fn off(&self) {
        let set = self.tasks.lock().expect("proxy lock").take();
        if let Some(mut set) = set {
            set.abort_all();
        }
    }

    /// Listens on the same port again.
    pub async fn on(&self) {
        // The aborted listener closes when its task is next polled: retry briefly.
        for _ in 0..100 {
            if let Ok(listener) = TcpListener::bind(self.addr).await {
                self.serve(listener);
                return;
            }
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
        panic!("cannot listen on {} again", self.addr);
    }
}

impl Drop for TcpProxy {
    fn drop(&mut self) {
        self.off();
    }
}

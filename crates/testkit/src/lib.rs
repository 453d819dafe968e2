//! Test support shared by the imagegate test suites (the store's backend tests and the black-box
//! end-to-end tests of `imagegate-e2e`, which cannot depend on each other).
//!
//! - [`TcpProxy`]: a TCP proxy in front of a server (PostgreSQL, Redis) that a test can cut, stall and
//!   restore, to play an outage without stopping the shared server.
//! - [`TestDatabase`]: a fresh PostgreSQL database per test, on the server named by
//!   `IMAGEGATE_TEST_POSTGRES_URL` (default `postgres://postgres@127.0.0.1:5432/test`).
//! - [`unique_name`]: names (databases, Redis key prefixes) no other test or run uses.
//!
//! ```
//! use imagegate_testkit::TcpProxy;
//! use tokio::io::{AsyncReadExt, AsyncWriteExt};
//! use tokio::net::{TcpListener, TcpStream};
//!
//! # tokio::runtime::Builder::new_current_thread().enable_io().build()?.block_on(async {
//! // A server that echoes what it reads.
//! let server = TcpListener::bind("127.0.0.1:0").await?;
//! let target = server.local_addr()?;
//! tokio::spawn(async move {
//!     while let Ok((mut stream, _)) = server.accept().await {
//!         tokio::spawn(async move {
//!             let (mut read, mut write) = stream.split();
//!             let _ = tokio::io::copy(&mut read, &mut write).await;
//!         });
//!     }
//! });
//!
//! let proxy = TcpProxy::start(target).await?;
//! let mut client = TcpStream::connect(proxy.addr()).await?;
//! client.write_all(b"ping").await?;
//! let mut reply = [0; 4];
//! client.read_exact(&mut reply).await?;
//! assert_eq!(&reply, b"ping");
//!
//! // Cut: the open connection is closed, and so is every new one.
//! proxy.cut();
//! assert_eq!(client.read(&mut reply).await?, 0);
//! let mut refused = TcpStream::connect(proxy.addr()).await?;
//! assert_eq!(refused.read(&mut reply).await?, 0);
//!
//! // Restored: new connections reach the server again.
//! proxy.restore();
//! let mut client = TcpStream::connect(proxy.addr()).await?;
//! client.write_all(b"pong").await?;
//! client.read_exact(&mut reply).await?;
//! assert_eq!(&reply, b"pong");
//! # Ok::<(), std::io::Error>(())
//! # })?;
//! # Ok::<(), std::io::Error>(())
//! ```

#![allow(
    clippy::disallowed_methods,
    reason = "test support: its proxy tasks end with the test's runtime"
)]

pub mod postgres;
pub mod tcp_proxy;
mod unique;

pub use postgres::TestDatabase;
pub use tcp_proxy::TcpProxy;
pub use unique::unique_name;

//! Helpers for the tests against a real Redis: a random key prefix per test, removed afterwards.
//!
//! The server is `IMAGEGATE_TEST_REDIS_URL` (default `redis://127.0.0.1:6379`; `cargo xtask test`
//! starts it).
#![allow(dead_code)]

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use imagegate_dispatch::{
    AccountSpec, CooldownPolicy, DispatchConfig, Dispatcher, ManualClock, RedisConfig, RedisPoolState,
    UnixMillis,
};

pub const START: UnixMillis = UnixMillis(1_700_000_000_000);

pub fn redis_url() -> String {
    std::env::var("IMAGEGATE_TEST_REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1:6379".to_owned())
}

/// A unique key prefix; its keys are deleted when it is dropped (also when the test panics).
#[derive(Debug)]
pub struct TestPrefix {
    pub prefix: String,
}

impl TestPrefix {
    pub fn new() -> Self {
        Self {
            prefix: format!("imagegate-test:{:016x}:", fastrand::u64(..)),
        }
    }

    pub fn config(&self) -> RedisConfig {
        RedisConfig::new(redis_url()).with_prefix(self.prefix.clone())
    }

    /// A new replica: its own connection to the shared keys.
    pub fn state(&self) -> Arc<RedisPoolState> {
        Arc::new(RedisPoolState::new(&self.config(), CooldownPolicy::default()).unwrap())
    }

    /// Keys currently under the prefix.
    pub fn keys(&self) -> Vec<String> {
        let mut connection = sync_connection();
        let mut cursor = 0u64;
        let mut keys = Vec::new();
        loop {
            let (next, batch): (u64, Vec<String>) = redis::cmd("SCAN")
                .arg(cursor)
                .arg("MATCH")
                .arg(format!("{}*", self.prefix))
                .arg("COUNT")
                .arg(1000)
                .query(&mut connection)
                .unwrap();
            keys.extend(batch);
            if next == 0 {
                return keys;
            }
            cursor = next;
        }
    }
}

impl Drop for TestPrefix {
    fn drop(&mut self) {
        let keys = self.keys();
        if !keys.is_empty() {
            let _: redis::RedisResult<i64> = redis::cmd("DEL").arg(keys).query(&mut sync_connection());
        }
    }
}

pub fn sync_connection() -> redis::Connection {
    redis::Client::open(redis_url())
        .unwrap()
        .get_connection()
        .expect("Redis must run for these tests (see IMAGEGATE_TEST_REDIS_URL)")
}

pub fn no_wait() -> DispatchConfig {
    DispatchConfig {
        max_wait: Duration::ZERO,
        ..DispatchConfig::default()
    }
}

/// A dispatcher over `state` with `specs`, reading time from `clock`.
pub fn dispatcher(
    state: Arc<RedisPoolState>,
    clock: &Arc<ManualClock>,
    config: DispatchConfig,
    specs: &[AccountSpec],
) -> Arc<Dispatcher> {
    let pool = Dispatcher::new(state, clock.clone(), config);
    pool.replace_accounts(specs.to_vec());
    Arc::new(pool)
}

/// A TCP relay to Redis whose answers can be held back, as by a stalled network, and whose
/// connections can go silent, as through a firewall that forgot them.
pub struct SlowRedis {
    pub addr: std::net::SocketAddr,
    knobs: Arc<RelayKnobs>,
}

/// What the tests turn on a running relay.
#[derive(Default)]
struct RelayKnobs {
    /// Milliseconds every answer is held back.
    delay: AtomicU64,
    /// Connections accepted before the latest silencing drop what they carry, both ways.
    silenced: AtomicU64,
    accepted: AtomicU64,
}

impl SlowRedis {
    pub async fn start() -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let upstream = redis_url()
            .trim_start_matches("redis://")
            .trim_end_matches('/')
            .to_owned();
        let knobs = Arc::new(RelayKnobs::default());
        let relay = Arc::clone(&knobs);
        tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                let generation = relay.silenced.load(Ordering::SeqCst);
                relay.accepted.fetch_add(1, Ordering::SeqCst);
                let server = tokio::net::TcpStream::connect(&upstream).await.unwrap();
                let (client_read, client_write) = client.into_split();
                let (server_read, server_write) = server.into_split();
                tokio::spawn(forward(
                    client_read,
                    server_write,
                    Arc::clone(&relay),
                    generation,
                    false,
                ));
                tokio::spawn(forward(
                    server_read,
                    client_write,
                    Arc::clone(&relay),
                    generation,
                    true,
                ));
            }
        });
        Self { addr, knobs }
    }

    /// Connections accepted so far.
    pub fn connections(&self) -> u64 {
        self.knobs.accepted.load(Ordering::SeqCst)
    }

    /// From now on the connections already open carry nothing either way, and stay open; new
    /// connections work.
    pub fn silence_open_connections(&self) {
        self.knobs.silenced.fetch_add(1, Ordering::SeqCst);
    }

    /// Holds every answer back by `millis` from now on.
    pub fn hold_answers(&self, millis: u64) {
        self.knobs.delay.store(millis, Ordering::SeqCst);
    }
}

/// Copies one direction of a relayed connection until either side closes; answers (`held`) wait
/// for the relay's delay first, and nothing passes once the connection was silenced.
async fn forward(
    mut from: tokio::net::tcp::OwnedReadHalf,
    mut to: tokio::net::tcp::OwnedWriteHalf,
    relay: Arc<RelayKnobs>,
    generation: u64,
    held: bool,
) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut buffer = vec![0u8; 64 * 1024];
    while let Ok(read) = from.read(&mut buffer).await {
        if read == 0 {
            break;
        }
        if held {
            let wait = relay.delay.load(Ordering::SeqCst);
            tokio::time::sleep(Duration::from_millis(wait)).await;
        }
        let heard = relay.silenced.load(Ordering::SeqCst) == generation;
        if heard && to.write_all(&buffer[..read]).await.is_err() {
            break;
        }
    }
}

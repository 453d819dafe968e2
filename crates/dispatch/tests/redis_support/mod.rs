//! Helpers for the tests against a real Redis: a random key prefix per test, removed afterwards.
//!
//! The server is `IMAGEGATE_TEST_REDIS_URL` (default `redis://127.0.0.1:6379`; `cargo xtask test`
//! starts it).
#![allow(dead_code)]

use std::sync::Arc;
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
    delay: Arc<std::sync::atomic::AtomicU64>,
    /// Connections accepted before the latest silencing drop what they carry, both ways.
    silenced: Arc<std::sync::atomic::AtomicU64>,
    accepted: Arc<std::sync::atomic::AtomicU64>,
}

impl SlowRedis {
    pub async fn start() -> Self {
        use std::sync::atomic::Ordering;
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let delay = Arc::new(std::sync::atomic::AtomicU64::new(0));
        let upstream = redis_url()
            .trim_start_matches("redis://")
            .trim_end_matches('/')
            .to_owned();
        let silenced = Arc::new(std::sync::atomic::AtomicU64::new(0));
        let held = Arc::clone(&delay);
        let silence = Arc::clone(&silenced);
        let accepted = Arc::new(std::sync::atomic::AtomicU64::new(0));
        let counted = Arc::clone(&accepted);
        tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                let generation = silence.load(Ordering::SeqCst);
                counted.fetch_add(1, Ordering::SeqCst);
                let server = tokio::net::TcpStream::connect(&upstream).await.unwrap();
                let (mut client_read, mut client_write) = client.into_split();
                let (mut server_read, mut server_write) = server.into_split();
                let heard = {
                    let silence = Arc::clone(&silence);
                    move || silence.load(Ordering::SeqCst) == generation
                };
                let heard_too = heard.clone();
                tokio::spawn(async move {
                    let mut buffer = vec![0u8; 64 * 1024];
                    while let Ok(read) = client_read.read(&mut buffer).await {
                        if read == 0 {
                            break;
                        }
                        if heard_too() && server_write.write_all(&buffer[..read]).await.is_err() {
                            break;
                        }
                    }
                });
                let held = Arc::clone(&held);
                tokio::spawn(async move {
                    let mut buffer = vec![0u8; 64 * 1024];
                    while let Ok(read) = server_read.read(&mut buffer).await {
                        if read == 0 {
                            break;
                        }
                        let wait = held.load(Ordering::SeqCst);
                        tokio::time::sleep(Duration::from_millis(wait)).await;
                        if heard() && client_write.write_all(&buffer[..read]).await.is_err() {
                            break;
                        }
                    }
                });
            }
        });
        Self {
            addr,
            delay,
            silenced,
            accepted,
        }
    }

    /// Connections accepted so far.
    pub fn connections(&self) -> u64 {
        self.accepted.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// From now on the connections already open carry nothing either way, and stay open; new
    /// connections work.
    pub fn silence_open_connections(&self) {
        self.silenced.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    }

    /// Holds every answer back by `millis` from now on.
    pub fn hold_answers(&self, millis: u64) {
        self.delay.store(millis, std::sync::atomic::Ordering::SeqCst);
    }
}

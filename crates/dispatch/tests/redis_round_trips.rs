//! "One round trip per acquisition in the common case": the Redis traffic of an acquisition,
//! counted by a proxy between the pool state and Redis.
#![cfg(feature = "redis")]
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::disallowed_methods
)]

mod redis_support;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use imagegate_dispatch::{
    AccountSpec, CooldownPolicy, DispatchRequest, GroupId, ManualClock, RedisConfig, RedisPoolState,
    SizeClass, Tier,
};
use redis_support::{START, TestPrefix, dispatcher, no_wait, redis_url};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// Counts request/response exchanges: a client write that follows a server reply (or opens the
/// connection) starts a new round trip.
#[derive(Default)]
struct RoundTrips {
    count: AtomicU64,
    replied: AtomicBool,
}

async fn counting_proxy(target: String, trips: Arc<RoundTrips>) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((client, _)) = listener.accept().await {
            let server = TcpStream::connect(&target).await.unwrap();
            let (mut client_read, mut client_write) = client.into_split();
            let (mut server_read, mut server_write) = server.into_split();
            trips.replied.store(true, Ordering::SeqCst);
            let up = Arc::clone(&trips);
            tokio::spawn(async move {
                let mut buf = vec![0u8; 64 * 1024];
                while let Ok(n) = client_read.read(&mut buf).await {
                    if n == 0 {
                        break;
                    }
                    if up.replied.swap(false, Ordering::SeqCst) {
                        up.count.fetch_add(1, Ordering::SeqCst);
                    }
                    if server_write.write_all(&buf[..n]).await.is_err() {
                        break;
                    }
                }
            });
            let down = Arc::clone(&trips);
            tokio::spawn(async move {
                let mut buf = vec![0u8; 64 * 1024];
                while let Ok(n) = server_read.read(&mut buf).await {
                    if n == 0 {
                        break;
                    }
                    down.replied.store(true, Ordering::SeqCst);
                    if client_write.write_all(&buf[..n]).await.is_err() {
                        break;
                    }
                }
            });
        }
    });
    format!("redis://{addr}")
}

#[tokio::test]
async fn an_acquisition_is_one_round_trip_once_the_scripts_are_loaded() {
    let prefix = TestPrefix::new();
    let target = redis_url()
        .trim_start_matches("redis://")
        .trim_end_matches('/')
        .to_owned();
    let trips = Arc::new(RoundTrips::default());
    let url = counting_proxy(target, Arc::clone(&trips)).await;
    let config = RedisConfig::new(url).with_prefix(prefix.prefix.clone());
    let state = Arc::new(RedisPoolState::new(&config, CooldownPolicy::default()).unwrap());
    let clock = Arc::new(ManualClock::new(START));
    let specs: Vec<AccountSpec> = (0..20)
        .map(|i| AccountSpec::new(&format!("a{i}"), Tier::Pro, &["g"]))
        .collect();
    let pool = dispatcher(state, &clock, no_wait(), &specs);
    let request = DispatchRequest::image(&GroupId::new("g"), SizeClass::Standard);

    // The first call connects and loads the scripts.
    let warm = pool.acquire(&request).await.unwrap();
    let mut leases = vec![warm];
    for _ in 0..5 {
        let before = trips.count.load(Ordering::SeqCst);
        leases.push(pool.acquire(&request).await.unwrap());
        let after = trips.count.load(Ordering::SeqCst);
        assert_eq!(after - before, 1, "one acquisition, one round trip to Redis");
    }
    assert!(trips.count.load(Ordering::SeqCst) >= 6);
}

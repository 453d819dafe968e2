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

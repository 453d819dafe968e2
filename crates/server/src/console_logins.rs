//! Failed console sign-ins counted in Redis, so replicas behind one load balancer enforce one
//! limit together (each counting alone, N replicas would allow N times the attempts).

use std::fmt;
use std::time::Duration;

use async_trait::async_trait;
use imagegate_console::{LoginLimit, LoginSubject, SessionError, SharedLoginCounter};

use crate::console_sessions::redis_store::failed;
use redis::Script;
use redis::aio::ConnectionManager;

/// Counts an attempt (ARGV[3], at ARGV[1] ms) against every subject (KEYS: sorted sets of attempt
/// ids by time) unless one already holds its allowance (ARGV[3 + i]) within the window (ARGV[2]
/// ms). Returns 0 when counted, else the milliseconds until the oldest counted attempt leaves the
/// window. Only each subject's newest allowance of attempts is kept.
const BEGIN: &str = r"
    local now = tonumber(ARGV[1])
    local window = tonumber(ARGV[2])
    local wait = 0
    for i, key in ipairs(KEYS) do
      redis.call('ZREMRANGEBYSCORE', key, '-inf', now - window)
      local max = tonumber(ARGV[3 + i])
      if redis.call('ZCARD', key) >= max then
        local oldest = redis.call('ZRANGE', key, 0, 0, 'WITHSCORES')
        local until_free = window
        if #oldest == 2 then until_free = tonumber(oldest[2]) + window - now end
        if until_free > wait then wait = until_free end
      end
    end
    if wait > 0 then return wait end
    for i, key in ipairs(KEYS) do
      redis.call('ZADD', key, now, ARGV[3])
      redis.call('ZREMRANGEBYRANK', key, 0, -(tonumber(ARGV[3 + i]) + 1))
      redis.call('PEXPIRE', key, window)
    end
    return 0
";

/// The shared counter for `config`'s Redis, if one is set.
pub fn build(
    config: &crate::config::Config,
) -> Result<Option<std::sync::Arc<dyn SharedLoginCounter>>, crate::pool_backend::BackendError> {
    let Some(url) = &config.redis_url else {
        return Ok(None);
    };
    let redis = crate::pool_backend::redis_config(config, url);
    let connection = redis
        .connect()
        .map_err(crate::pool_backend::BackendError::Redis)?;
    let limit = imagegate_console::ConsoleConfig::default().login_limit;
    Ok(Some(std::sync::Arc::new(RedisLoginCounter::new(
        connection,
        &redis.prefix,
        &limit,
    ))))
}

/// Sign-in attempts under `<prefix>console:login:<subject>`.
pub struct RedisLoginCounter {
    connection: ConnectionManager,
    prefix: String,
    window: Duration,
    begin: Script,
}

impl fmt::Debug for RedisLoginCounter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RedisLoginCounter")
            .field("prefix", &self.prefix)
            .field("window", &self.window)
            .finish_non_exhaustive()
    }
}

impl RedisLoginCounter {
    /// Attempts on `connection` under keys starting with `prefix`, within `limit`'s window.
    pub fn new(connection: ConnectionManager, prefix: &str, limit: &LoginLimit) -> Self {
        Self {
            connection,
            prefix: prefix.to_owned(),
            window: limit.window,
            begin: Script::new(BEGIN),
        }
    }

    fn key(&self, subject: &LoginSubject) -> String {
        format!("{}console:login:{}", self.prefix, subject.key())
    }
}

fn now_ms() -> i64 {
    imagegate_store::Timestamp::now().unix_ms()
}

#[async_trait]
impl SharedLoginCounter for RedisLoginCounter {
    async fn begin_attempt(
        &self,
        subjects: &[LoginSubject],
    ) -> Result<Result<String, Duration>, SessionError> {
        let id = imagegate_console::SessionToken::generate().expose().to_owned();
        let window_ms = u64::try_from(self.window.as_millis()).unwrap_or(u64::MAX).max(1);
        let mut invocation = self.begin.prepare_invoke();
        for subject in subjects {
            invocation.key(self.key(subject));
        }
        invocation.arg(now_ms()).arg(window_ms).arg(&id);
        for subject in subjects {
            invocation.arg(subject.max());
        }
        let mut connection = self.connection.clone();
        let wait_ms: u64 = invocation
            .invoke_async(&mut connection)
            .await
            .map_err(|e| failed("counting a sign-in", &e))?;
        Ok(if wait_ms == 0 {
            Ok(id)
        } else {
            Err(Duration::from_millis(wait_ms))
        })
    }

    async fn forgive(&self, subjects: &[LoginSubject], id: &str) -> Result<(), SessionError> {
        let mut pipe = redis::pipe();
        for subject in subjects {
            pipe.zrem(self.key(subject), id).ignore();
        }
        let mut connection = self.connection.clone();
        pipe.exec_async(&mut connection)
            .await
            .map_err(|e| failed("taking back a sign-in", &e))
    }

    async fn clear(&self, subject: &LoginSubject) -> Result<(), SessionError> {
        let mut connection = self.connection.clone();
        redis::cmd("DEL")
            .arg(self.key(subject))
            .exec_async(&mut connection)
            .await
            .map_err(|e| failed("clearing sign-in failures", &e))
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
mod tests {
    use super::*;
    use crate::console_sessions::redis_store::tests::{test_connection, unique_prefix};

    const LIMIT: LoginLimit = LoginLimit {
        max_failures: 3,
        max_failures_per_name: 3,
        max_failures_per_address: 5,
        window: Duration::from_secs(60),
    };

    fn counter(prefix: &str) -> RedisLoginCounter {
        RedisLoginCounter::new(test_connection(), prefix, &LIMIT)
    }

    #[tokio::test]
    async fn replicas_share_one_allowance_and_a_right_password_takes_its_attempt_back() {
        let prefix = unique_prefix();
        let (one, other) = (counter(&prefix), counter(&prefix));
        let subjects = [
            LoginSubject::user("Alice", &LIMIT),
            LoginSubject::address("10.0.0.1", &LIMIT),
        ];
        let first = one.begin_attempt(&subjects).await.unwrap().unwrap();
        other.begin_attempt(&subjects).await.unwrap().unwrap();
        one.begin_attempt(&subjects).await.unwrap().unwrap();
        // Three attempts on two replicas: the user's allowance is spent on both.
        let wait = other.begin_attempt(&subjects).await.unwrap().unwrap_err();
        assert!(
            wait > Duration::from_secs(50) && wait <= Duration::from_secs(60),
            "{wait:?}"
        );
        assert!(one.begin_attempt(&subjects).await.unwrap().is_err());

        // The first one's password was right: it no longer counts, on either replica.
        one.forgive(&subjects, &first).await.unwrap();
        other.begin_attempt(&subjects).await.unwrap().unwrap();
        assert!(one.begin_attempt(&subjects).await.unwrap().is_err());

        // Another name from the same address has its own allowance, until the address's is spent.
        let bob = [
            LoginSubject::user("bob", &LIMIT),
            LoginSubject::address("10.0.0.1", &LIMIT),
        ];
        one.begin_attempt(&bob).await.unwrap().unwrap();
        other.begin_attempt(&bob).await.unwrap().unwrap();
        assert!(
            one.begin_attempt(&bob).await.unwrap().is_err(),
            "the address's five are spent (three of alice's, two of bob's)"
        );

        // A successful sign-in clears the user's failures.
        other.clear(&subjects[0]).await.unwrap();
        let alice_elsewhere = [LoginSubject::user("alice", &LIMIT)];
        one.begin_attempt(&alice_elsewhere).await.unwrap().unwrap();
    }
}

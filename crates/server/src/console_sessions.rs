//! Where the console keeps its sign-in sessions: in this process, or, with `--redis-url`, in Redis,
//! so replicas behind one load balancer share them (a session started on one replica works on the
//! next, and signing out or a password reset ends it on all).

use std::sync::Arc;

use imagegate_console::{MemorySessionStore, SessionStore};
use imagegate_store::MasterKey;

use crate::config::Config;
use crate::pool_backend::BackendError;

/// The session store for `config`: Redis when a Redis URL is set, else this process's memory.
/// Sessions are sealed under `master_key`; during a key rotation those sealed under `previous` (by
/// replicas not yet restarted) stay readable.
pub fn build(
    config: &Config,
    master_key: &MasterKey,
    previous: Option<&MasterKey>,
) -> Result<Arc<dyn SessionStore>, BackendError> {
    match &config.redis_url {
        None => Ok(Arc::new(MemorySessionStore::new())),
        #[cfg(feature = "redis")]
        Some(url) => {
            let redis = crate::pool_backend::redis_config(config, url);
            let connection = redis.connect().map_err(BackendError::Redis)?;
            let crypto = imagegate_store::Crypto::new(master_key).with_previous(previous);
            Ok(Arc::new(redis_store::RedisSessionStore::new(
                connection,
                &redis.prefix,
                crypto,
            )))
        }
        #[cfg(not(feature = "redis"))]
        Some(_) => {
            let _ = (master_key, previous);
            Err(BackendError::NotBuilt)
        }
    }
}

#[cfg(feature = "redis")]
pub mod redis_store {
    use std::fmt;

    use async_trait::async_trait;
    use imagegate_console::{Flash, FlashKind, Reveal};
    use imagegate_console::{PasswordStamp, Session, SessionError, SessionKey, SessionStore};
    use imagegate_store::{Crypto, SealContext, Secret, Timestamp, UserId};
    use redis::aio::ConnectionManager;
    use redis::{AsyncCommands, Script};
    use serde::{Deserialize, Serialize};

    /// Stores a sealed session (KEYS[1]) for ARGV[2] ms, replacing any (ARGV[4] = "new") or only an
    /// existing one ("existing": one signed out meanwhile stays out); then lists it in its user's
    /// set (KEYS[2]), which lives as long as the user's longest session. Returns 1 when stored.
    /// (`PEXPIRE`'s GT and NX options would need Redis 7; the dispatcher needs only 3.2.)
    const PUT: &str = r"
        local stored
        if ARGV[4] == 'existing' then
          stored = redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2], 'XX')
        else
          stored = redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
        end
        if not stored then return 0 end
        redis.call('SADD', KEYS[2], ARGV[3])
        if redis.call('PTTL', KEYS[2]) < tonumber(ARGV[2]) then
          redis.call('PEXPIRE', KEYS[2], ARGV[2])
        end
        return 1
    ";

    /// Sessions in Redis, each under `<prefix>console:session:<SHA-256 of its token>` with the
    /// session's own expiry, sealed with the master key (AES-256-GCM): a session holds its CSRF
    /// token and, for one page, a new API key or password, none of which Redis may hold in clear.
    /// `<prefix>console:user:<id>` lists a user's sessions, to end them all.
    pub struct RedisSessionStore {
        connection: ConnectionManager,
        prefix: String,
        crypto: Crypto,
        put: Script,
    }

    impl fmt::Debug for RedisSessionStore {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.debug_struct("RedisSessionStore")
                .field("prefix", &self.prefix)
                .finish_non_exhaustive()
        }
    }

    impl RedisSessionStore {
        /// Sessions on `connection`, under keys starting with `prefix`, sealed by `crypto`.
        pub fn new(connection: ConnectionManager, prefix: &str, crypto: Crypto) -> Self {
            Self {
                connection,
                prefix: prefix.to_owned(),
                crypto,
                put: Script::new(PUT),
            }
        }

        fn session_key(&self, key: &SessionKey) -> String {
            format!("{}console:session:{}", self.prefix, key.as_str())
        }

        fn user_key(&self, user: UserId) -> String {
            format!("{}console:user:{}", self.prefix, user.0)
        }

        /// `session` sealed for the Redis key `at` (authenticated as associated data, and named in
        /// the sealed text, as sessions sealed by earlier versions were): moved to another key (by
        /// someone who can write to Redis), it does not open.
        fn seal(&self, at: &str, session: &Session) -> Result<Vec<u8>, SessionError> {
            let stored = Stored::new(at, session);
            let json = serde_json::to_vec(&stored).map_err(|e| SessionError::new(e.to_string()))?;
            self.crypto
                .encrypt(&json, &SealContext::console_session(at))
                .map_err(|e| SessionError::new(e.to_string()))
        }

        /// The session sealed in `bytes` for the Redis key `at`; `None` when it cannot be opened
        /// (sealed under a master key rotated away since, or for another key), which signs the
        /// user out.
        fn open(&self, at: &str, bytes: &[u8]) -> Option<Session> {
            let json = self
                .crypto
                .decrypt(bytes, &SealContext::console_session(at))
                .inspect_err(|e| tracing::warn!(error = %e, "a console session could not be opened"))
                .ok()?;
            let stored = serde_json::from_slice::<Stored>(&json)
                .inspect_err(|e| tracing::warn!(error = %e, "a console session could not be read"))
                .ok()?;
            if stored.at != at {
                tracing::warn!("a console session was found under another key than its own");
                return None;
            }
            Some(Session::from(stored))
        }

        /// Stores `session` as a new one (`existing` false) or in place of one still there.
        async fn store(
            &self,
            key: &SessionKey,
            session: &Session,
            existing: bool,
        ) -> Result<(), SessionError> {
            let session_key = self.session_key(key);
            let ttl_ms = session
                .expires_at
                .unix_ms()
                .saturating_sub(Timestamp::now().unix_ms());
            if ttl_ms <= 0 {
                return self.remove(key).await; // already over
            }
            let sealed = self.seal(&session_key, session)?;
            let mut connection = self.connection.clone();
            self.put
                .key(&session_key)
                .key(self.user_key(session.user_id))
                .arg(sealed)
                .arg(ttl_ms)
                .arg(key.as_str())
                .arg(if existing { "existing" } else { "new" })
                .invoke_async::<i64>(&mut connection)
                .await
                .map(drop)
                .map_err(|e| failed("storing a session", &e))
        }
    }

    /// A Redis failure of the console's shared state, as the console reports it.
    pub(crate) fn failed(operation: &str, error: &redis::RedisError) -> SessionError {
        let message = format!("redis: {operation} failed: {error}");
        if is_out_of_reach(error) {
            SessionError::unavailable(message)
        } else {
            SessionError::new(message)
        }
    }

    /// Whether Redis could not answer for now, so the console asks to come back: a connection
    /// refused, dropped or timed out, a server loading its data, a cluster or master down, or a
    /// replica that became read-only in a failover. Not: a denied permission or a TLS set-up that
    /// cannot work (mistakes no wait mends), nor a refused command or an unexpected reply.
    pub(crate) fn is_out_of_reach(error: &redis::RedisError) -> bool {
        use redis::{ErrorKind, RetryMethod, ServerErrorKind};
        let method = error.retry_method();
        (error.is_io_error() && !matches!(method, RetryMethod::NoRetry))
            || matches!(method, RetryMethod::WaitAndRetry)
            || error.kind() == ErrorKind::Server(ServerErrorKind::ReadOnly)
    }

    #[async_trait]
    impl SessionStore for RedisSessionStore {
        async fn put(&self, key: &SessionKey, session: Session) -> Result<(), SessionError> {
            self.store(key, &session, false).await
        }

        async fn update(&self, key: &SessionKey, session: Session) -> Result<(), SessionError> {
            self.store(key, &session, true).await
        }

        async fn get(&self, key: &SessionKey) -> Result<Option<Session>, SessionError> {
            let mut connection = self.connection.clone();
            let session_key = self.session_key(key);
            let sealed: Option<Vec<u8>> = connection
                .get(&session_key)
                .await
                .map_err(|e| failed("reading a session", &e))?;
            let session = sealed.and_then(|bytes| self.open(&session_key, &bytes));
            Ok(session.filter(|s| !s.is_expired(Timestamp::now())))
        }

        async fn remove(&self, key: &SessionKey) -> Result<(), SessionError> {
            let mut connection = self.connection.clone();
            connection
                .del::<_, ()>(self.session_key(key))
                .await
                .map_err(|e| failed("ending a session", &e))
        }

        async fn remove_user(&self, user_id: UserId, keep: Option<&SessionKey>) -> Result<(), SessionError> {
            let mut connection = self.connection.clone();
            let user_key = self.user_key(user_id);
            let keys: Vec<String> = connection
                .smembers(&user_key)
                .await
                .map_err(|e| failed("listing a user's sessions", &e))?;
            let mut pipe = redis::pipe();
            for key in keys
                .iter()
                .filter(|key| Some(key.as_str()) != keep.map(SessionKey::as_str))
            {
                pipe.del(format!("{}console:session:{key}", self.prefix)).ignore();
                pipe.srem(&user_key, key).ignore();
            }
            pipe.exec_async(&mut connection)
                .await
                .map_err(|e| failed("ending a user's sessions", &e))
        }
    }

    /// A session as sealed in Redis.
    #[derive(Serialize, Deserialize)]
    struct Stored {
        /// The Redis key it was sealed for.
        at: String,
        user_id: i64,
        /// Absent from sessions sealed before stamps existed: those end (their users sign in
        /// again).
        #[serde(default)]
        password_stamp: String,
        csrf_token: String,
        created_at: Timestamp,
        expires_at: Timestamp,
        flash: Vec<StoredFlash>,
        reveal: Option<StoredReveal>,
    }

    #[derive(Serialize, Deserialize)]
    struct StoredFlash {
        success: bool,
        message: String,
    }

    #[derive(Serialize, Deserialize)]
    enum StoredReveal {
        ApiKey { name: String, key: String },
        Password { user: String, password: String },
    }

    impl Stored {
        fn new(at: &str, session: &Session) -> Self {
            Self {
                at: at.to_owned(),
                user_id: session.user_id.0,
                password_stamp: session.password_stamp.as_str().to_owned(),
                csrf_token: session.csrf_token.clone(),
                created_at: session.created_at,
                expires_at: session.expires_at,
                flash: session
                    .flash
                    .iter()
                    .map(|flash| StoredFlash {
                        success: flash.kind == FlashKind::Success,
                        message: flash.message.clone(),
                    })
                    .collect(),
                reveal: session.reveal.as_ref().map(|reveal| match reveal {
                    Reveal::ApiKey { name, key } => StoredReveal::ApiKey {
                        name: name.clone(),
                        key: key.expose().to_owned(),
                    },
                    Reveal::Password { user, password } => StoredReveal::Password {
                        user: user.clone(),
                        password: password.expose().to_owned(),
                    },
                }),
            }
        }
    }

    impl From<Stored> for Session {
        fn from(stored: Stored) -> Self {
            Self {
                user_id: UserId(stored.user_id),
                password_stamp: PasswordStamp::from_stored(stored.password_stamp),
                csrf_token: stored.csrf_token,
                created_at: stored.created_at,
                expires_at: stored.expires_at,
                flash: stored
                    .flash
                    .into_iter()
                    .map(|flash| {
                        if flash.success {
                            Flash::success(flash.message)
                        } else {
                            Flash::error(flash.message)
                        }
                    })
                    .collect(),
                reveal: stored.reveal.map(|reveal| match reveal {
                    StoredReveal::ApiKey { name, key } => Reveal::ApiKey {
                        name,
                        key: Secret::new(key),
                    },
                    StoredReveal::Password { user, password } => Reveal::Password {
                        user,
                        password: Secret::new(password),
                    },
                }),
            }
        }
    }

    #[cfg(test)]
    #[allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
    pub(crate) mod tests {
        use std::time::Duration;

        use imagegate_console::SessionToken;
        use imagegate_dispatch::RedisConfig;
        use imagegate_store::MasterKey;

        use super::*;

        #[test]
        fn outages_are_told_from_mistakes() {
            use redis::{ErrorKind, RedisError, ServerErrorKind};
            let io = |kind| RedisError::from(std::io::Error::new(kind, "test"));
            let server = |kind| RedisError::from((ErrorKind::Server(kind), "test"));
            let cases = [
                (io(std::io::ErrorKind::ConnectionRefused), true),
                (io(std::io::ErrorKind::ConnectionReset), true),
                (io(std::io::ErrorKind::TimedOut), true),
                (server(ServerErrorKind::BusyLoading), true),
                (server(ServerErrorKind::MasterDown), true),
                (server(ServerErrorKind::TryAgain), true),
                (server(ServerErrorKind::ReadOnly), true),
                (io(std::io::ErrorKind::PermissionDenied), false),
                (server(ServerErrorKind::ResponseError), false),
                (server(ServerErrorKind::NoScript), false),
                (server(ServerErrorKind::NoPerm), false),
                (RedisError::from((ErrorKind::UnexpectedReturnType, "test")), false),
            ];
            for (error, out_of_reach) in cases {
                assert_eq!(is_out_of_reach(&error), out_of_reach, "{error:?}");
                assert_eq!(
                    failed("testing", &error).is_unavailable(),
                    out_of_reach,
                    "{error:?}"
                );
            }
        }

        #[tokio::test]
        async fn a_redis_that_refuses_connections_is_out_of_reach() {
            let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            let url = format!("redis://{}", closed.local_addr().unwrap());
            drop(closed);
            let mut connection = RedisConfig::new(url).connect().unwrap();
            let error = redis::cmd("GET")
                .arg("k")
                .query_async::<Option<String>>(&mut connection)
                .await
                .unwrap_err();
            assert!(is_out_of_reach(&error), "{error:?}");
        }

        /// The test Redis (`IMAGEGATE_TEST_REDIS_URL`, default the local one).
        pub(crate) fn test_connection() -> ConnectionManager {
            let url = std::env::var("IMAGEGATE_TEST_REDIS_URL")
                .unwrap_or_else(|_| "redis://127.0.0.1:6379".to_owned());
            RedisConfig::new(url).connect().unwrap()
        }

        /// A key prefix no other test run uses.
        pub(crate) fn unique_prefix() -> String {
            format!(
                "imagegate-test-console-{}:",
                SessionToken::generate().expose().get(..12).unwrap_or("x")
            )
        }

        fn store(prefix: &str, key: &MasterKey) -> RedisSessionStore {
            RedisSessionStore::new(test_connection(), prefix, Crypto::new(key))
        }

        #[tokio::test]
        async fn replicas_share_sessions_sealed_and_ending_together() {
            let key = MasterKey::generate().unwrap();
            let prefix = unique_prefix();
            let (one, other) = (store(&prefix, &key), store(&prefix, &key));

            let token = SessionToken::generate();
            let mut session = Session::new(UserId(7), "$argon2id$test", Duration::from_secs(60));
            session.flash.push(Flash::error("not saved"));
            session.reveal = Some(Reveal::ApiKey {
                name: "laptop".into(),
                key: Secret::new("sk-ig-secret-value"),
            });
            one.put(&token.key(), session.clone()).await.unwrap();

            let seen = other.get(&token.key()).await.unwrap().expect("shared");
            assert_eq!(seen.user_id, UserId(7));
            assert_eq!(seen.csrf_token, session.csrf_token);
            assert_eq!(seen.expires_at, session.expires_at);
            assert_eq!(seen.flash, session.flash);
            match seen.reveal {
                Some(Reveal::ApiKey { name, key }) => {
                    assert_eq!((name.as_str(), key.expose()), ("laptop", "sk-ig-secret-value"));
                }
                other => panic!("{other:?}"),
            }

            // Nothing readable in Redis: neither the new key nor the CSRF token.
            let mut connection = test_connection();
            let raw: Vec<u8> = connection
                .get(format!("{prefix}console:session:{}", token.key().as_str()))
                .await
                .unwrap();
            let text = String::from_utf8_lossy(&raw);
            assert!(!text.contains("sk-ig-secret-value") && !text.contains(&session.csrf_token));
            let ttl: i64 = connection
                .pttl(format!("{prefix}console:session:{}", token.key().as_str()))
                .await
                .unwrap();
            assert!((1..=60_000).contains(&ttl), "{ttl}");

            // A replica with another master key cannot open it: signed out, not an error.
            let stranger = store(&prefix, &MasterKey::generate().unwrap());
            assert!(stranger.get(&token.key()).await.unwrap().is_none());

            // A second session of the same user; a password reset ends both, on every replica.
            let second = SessionToken::generate();
            other
                .put(
                    &second.key(),
                    Session::new(UserId(7), "$argon2id$test", Duration::from_secs(60)),
                )
                .await
                .unwrap();
            let someone_else = SessionToken::generate();
            other
                .put(
                    &someone_else.key(),
                    Session::new(UserId(8), "$argon2id$test", Duration::from_secs(60)),
                )
                .await
                .unwrap();
            one.remove_user(UserId(7), None).await.unwrap();
            assert!(other.get(&token.key()).await.unwrap().is_none());
            assert!(other.get(&second.key()).await.unwrap().is_none());
            assert!(one.get(&someone_else.key()).await.unwrap().is_some());

            // One's own reset: every session of the user ends but the one making it.
            let (third, fourth) = (SessionToken::generate(), SessionToken::generate());
            for token in [&third, &fourth] {
                other
                    .put(
                        &token.key(),
                        Session::new(UserId(7), "$argon2id$test", Duration::from_secs(60)),
                    )
                    .await
                    .unwrap();
            }
            one.remove_user(UserId(7), Some(&fourth.key())).await.unwrap();
            assert!(other.get(&third.key()).await.unwrap().is_none());
            assert!(other.get(&fourth.key()).await.unwrap().is_some());
            one.remove_user(UserId(7), None).await.unwrap();
            assert!(
                other.get(&fourth.key()).await.unwrap().is_none(),
                "still listed as the user's"
            );

            // Signing out on one replica ends the session on the other.
            other.remove(&someone_else.key()).await.unwrap();
            assert!(one.get(&someone_else.key()).await.unwrap().is_none());
        }

        #[tokio::test]
        async fn a_session_ended_elsewhere_stays_ended_and_a_moved_one_does_not_open() {
            let key = MasterKey::generate().unwrap();
            let prefix = unique_prefix();
            let (one, other) = (store(&prefix, &key), store(&prefix, &key));
            let admin = SessionToken::generate();
            let session = Session::new(UserId(1), "$argon2id$test", Duration::from_secs(60));
            one.put(&admin.key(), session.clone()).await.unwrap();

            // Someone who can write to Redis copies the admin's sealed session under their own
            // token's key: it must not open there.
            let mut connection = test_connection();
            let sealed: Vec<u8> = connection
                .get(format!("{prefix}console:session:{}", admin.key().as_str()))
                .await
                .unwrap();
            let intruder = SessionToken::generate();
            connection
                .set::<_, _, ()>(
                    format!("{prefix}console:session:{}", intruder.key().as_str()),
                    sealed,
                )
                .await
                .unwrap();
            assert!(other.get(&intruder.key()).await.unwrap().is_none());
            assert!(other.get(&admin.key()).await.unwrap().is_some());

            // A password reset on one replica while a request on the other still holds the
            // session: that request's save does not bring it back.
            let mut held = other.get(&admin.key()).await.unwrap().unwrap();
            one.remove_user(UserId(1), None).await.unwrap();
            held.flash.push(Flash::success("saved"));
            other.update(&admin.key(), held).await.unwrap();
            assert!(one.get(&admin.key()).await.unwrap().is_none());
        }

        #[tokio::test]
        async fn a_session_sealed_under_the_previous_master_key_opens_during_a_rotation() {
            let (old, new) = (MasterKey::generate().unwrap(), MasterKey::generate().unwrap());
            let prefix = unique_prefix();
            let not_restarted = store(&prefix, &old);
            let connection = test_connection();
            let restarted =
                RedisSessionStore::new(connection, &prefix, Crypto::new(&new).with_previous(Some(&old)));
            let token = SessionToken::generate();
            not_restarted
                .put(
                    &token.key(),
                    Session::new(UserId(3), "$argon2id$test", Duration::from_secs(60)),
                )
                .await
                .unwrap();
            assert!(restarted.get(&token.key()).await.unwrap().is_some());
        }

        #[tokio::test]
        async fn an_expired_session_is_not_stored() {
            let key = MasterKey::generate().unwrap();
            let sessions = store(&unique_prefix(), &key);
            let token = SessionToken::generate();
            sessions
                .put(
                    &token.key(),
                    Session::new(UserId(1), "$argon2id$test", Duration::ZERO),
                )
                .await
                .unwrap();
            assert!(sessions.get(&token.key()).await.unwrap().is_none());
        }
    }
}

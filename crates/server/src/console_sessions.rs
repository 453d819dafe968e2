//! Where the console keeps its sign-in sessions: in this process, or, with `--redis-url`, in Redis,
//! so replicas behind one load balancer share them (a session started on one replica works on the
//! next, and signing out or a password reset ends it on all).

use std::sync::Arc;

use imagegate_console::{MemorySessionStore, SessionStore};
use imagegate_store::MasterKey;

use crate::config::Config;
use crate::pool_backend::BackendError;

/// The session store for `config`: Redis when a Redis URL is set, else this process's memory.
pub fn build(config: &Config, master_key: &MasterKey) -> Result<Arc<dyn SessionStore>, BackendError> {
    match &config.redis_url {
        None => Ok(Arc::new(MemorySessionStore::new())),
        #[cfg(feature = "redis")]
        Some(url) => {
            let redis = imagegate_dispatch::RedisConfig::new(url)
                .with_prefix(crate::pool_backend::key_prefix(&config.redis_prefix));
            let connection = redis.connect().map_err(BackendError::Redis)?;
            let crypto = imagegate_store::Crypto::new(master_key);
            Ok(Arc::new(redis_store::RedisSessionStore::new(
                connection,
                &redis.prefix,
                crypto,
            )))
        }
        #[cfg(not(feature = "redis"))]
        Some(_) => {
            let _ = master_key;
            Err(BackendError::NotBuilt)
        }
    }
}

#[cfg(feature = "redis")]
pub mod redis_store {
    use std::fmt;

    use async_trait::async_trait;
    use imagegate_console::{Flash, FlashKind, Reveal};
    use imagegate_console::{Session, SessionError, SessionKey, SessionStore};
    use imagegate_store::{Crypto, Secret, Timestamp, UserId};
    use redis::AsyncCommands;
    use redis::aio::ConnectionManager;
    use serde::{Deserialize, Serialize};

    /// Sessions in Redis, each under `<prefix>console:session:<SHA-256 of its token>` with the
    /// session's own expiry, sealed with the master key (AES-256-GCM): a session holds its CSRF
    /// token and, for one page, a new API key or password, none of which Redis may hold in clear.
    /// `<prefix>console:user:<id>` lists a user's sessions, to end them all.
    pub struct RedisSessionStore {
        connection: ConnectionManager,
        prefix: String,
        crypto: Crypto,
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
            }
        }

        fn session_key(&self, key: &SessionKey) -> String {
            format!("{}console:session:{}", self.prefix, key.as_str())
        }

        fn user_key(&self, user: UserId) -> String {
            format!("{}console:user:{}", self.prefix, user.0)
        }

        fn seal(&self, session: &Session) -> Result<Vec<u8>, SessionError> {
            let json = serde_json::to_vec(&Stored::from(session)).map_err(|e| SessionError(e.to_string()))?;
            self.crypto
                .encrypt(&json)
                .map_err(|e| SessionError(e.to_string()))
        }

        /// The session sealed in `bytes`; `None` when it cannot be opened (sealed under a master
        /// key that has been rotated away since), which signs the user out.
        fn open(&self, bytes: &[u8]) -> Option<Session> {
            let json = self
                .crypto
                .decrypt(bytes)
                .inspect_err(|e| tracing::warn!(error = %e, "a console session could not be opened"))
                .ok()?;
            serde_json::from_slice::<Stored>(&json)
                .inspect_err(|e| tracing::warn!(error = %e, "a console session could not be read"))
                .ok()
                .map(Session::from)
        }
    }

    fn failed(operation: &str, error: &redis::RedisError) -> SessionError {
        SessionError(format!("redis: {operation} failed: {error}"))
    }

    #[async_trait]
    impl SessionStore for RedisSessionStore {
        async fn put(&self, key: &SessionKey, session: Session) -> Result<(), SessionError> {
            let ttl_ms = session.expires_at.unix_ms() - Timestamp::now().unix_ms();
            let Ok(ttl_ms) = u64::try_from(ttl_ms) else {
                return self.remove(key).await; // already over
            };
            let ttl_ms = ttl_ms.max(1);
            let sealed = self.seal(&session)?;
            let session_key = self.session_key(key);
            let user_key = self.user_key(session.user_id);
            let ttl = i64::try_from(ttl_ms).unwrap_or(i64::MAX);
            let mut connection = self.connection.clone();
            // The user's list lives as long as their longest session: set on a new list (NX),
            // lengthened on an existing one (GT).
            redis::pipe()
                .cmd("SET")
                .arg(&session_key)
                .arg(sealed)
                .arg("PX")
                .arg(ttl_ms)
                .ignore()
                .sadd(&user_key, key.as_str())
                .ignore()
                .cmd("PEXPIRE")
                .arg(&user_key)
                .arg(ttl)
                .arg("NX")
                .ignore()
                .cmd("PEXPIRE")
                .arg(&user_key)
                .arg(ttl)
                .arg("GT")
                .ignore()
                .exec_async(&mut connection)
                .await
                .map_err(|e| failed("storing a session", &e))
        }

        async fn get(&self, key: &SessionKey) -> Result<Option<Session>, SessionError> {
            let mut connection = self.connection.clone();
            let sealed: Option<Vec<u8>> = connection
                .get(self.session_key(key))
                .await
                .map_err(|e| failed("reading a session", &e))?;
            let session = sealed.and_then(|bytes| self.open(&bytes));
            Ok(session.filter(|s| !s.is_expired(Timestamp::now())))
        }

        async fn remove(&self, key: &SessionKey) -> Result<(), SessionError> {
            let mut connection = self.connection.clone();
            connection
                .del::<_, ()>(self.session_key(key))
                .await
                .map_err(|e| failed("ending a session", &e))
        }

        async fn remove_user(&self, user_id: UserId) -> Result<(), SessionError> {
            let mut connection = self.connection.clone();
            let user_key = self.user_key(user_id);
            let keys: Vec<String> = connection
                .smembers(&user_key)
                .await
                .map_err(|e| failed("listing a user's sessions", &e))?;
            let mut pipe = redis::pipe();
            for key in &keys {
                pipe.del(format!("{}console:session:{key}", self.prefix)).ignore();
            }
            pipe.del(&user_key).ignore();
            pipe.exec_async(&mut connection)
                .await
                .map_err(|e| failed("ending a user's sessions", &e))
        }
    }

    /// A session as sealed in Redis.
    #[derive(Serialize, Deserialize)]
    struct Stored {
        user_id: i64,
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

    impl From<&Session> for Stored {
        fn from(session: &Session) -> Self {
            Self {
                user_id: session.user_id.0,
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
    mod tests {
        use std::time::Duration;

        use imagegate_console::SessionToken;
        use imagegate_dispatch::RedisConfig;
        use imagegate_store::MasterKey;

        use super::*;

        fn redis_url() -> String {
            std::env::var("IMAGEGATE_TEST_REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1:6379".to_owned())
        }

        fn store(prefix: &str, key: &MasterKey) -> RedisSessionStore {
            let connection = RedisConfig::new(redis_url()).connect().unwrap();
            RedisSessionStore::new(connection, prefix, Crypto::new(key))
        }

        fn unique_prefix() -> String {
            format!(
                "imagegate-test-sessions-{}:",
                SessionToken::generate().expose().get(..12).unwrap_or("x")
            )
        }

        #[tokio::test]
        async fn replicas_share_sessions_sealed_and_ending_together() {
            let key = MasterKey::generate().unwrap();
            let prefix = unique_prefix();
            let (one, other) = (store(&prefix, &key), store(&prefix, &key));

            let token = SessionToken::generate();
            let mut session = Session::new(UserId(7), Duration::from_secs(60));
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
            let mut connection = RedisConfig::new(redis_url()).connect().unwrap();
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
                .put(&second.key(), Session::new(UserId(7), Duration::from_secs(60)))
                .await
                .unwrap();
            let someone_else = SessionToken::generate();
            other
                .put(
                    &someone_else.key(),
                    Session::new(UserId(8), Duration::from_secs(60)),
                )
                .await
                .unwrap();
            one.remove_user(UserId(7)).await.unwrap();
            assert!(other.get(&token.key()).await.unwrap().is_none());
            assert!(other.get(&second.key()).await.unwrap().is_none());
            assert!(one.get(&someone_else.key()).await.unwrap().is_some());

            // Signing out on one replica ends the session on the other.
            other.remove(&someone_else.key()).await.unwrap();
            assert!(one.get(&someone_else.key()).await.unwrap().is_none());
        }

        #[tokio::test]
        async fn an_expired_session_is_not_stored() {
            let key = MasterKey::generate().unwrap();
            let sessions = store(&unique_prefix(), &key);
            let token = SessionToken::generate();
            sessions
                .put(&token.key(), Session::new(UserId(1), Duration::ZERO))
                .await
                .unwrap();
            assert!(sessions.get(&token.key()).await.unwrap().is_none());
        }
    }
}

//! Server-side sessions: a random 256-bit token in the cookie, the session data behind the SHA-256
//! of that token in a [`SessionStore`].
//!
//! [`MemorySessionStore`] keeps them in this process: they do not survive a restart and are not
//! shared between replicas (users sign in again). The gateway keeps them in Redis instead when its
//! replicas share one (its `console_sessions` module implements the same trait).

use std::collections::HashMap;
use std::fmt;

use async_trait::async_trait;
use imagegate_store::{Secret, Timestamp, UserId};
use parking_lot::Mutex;
use rand::RngCore;
use sha2::{Digest, Sha256};

/// Bytes of randomness in a session token (256 bits).
const TOKEN_BYTES: usize = 32;

/// Sessions kept by a [`MemorySessionStore`] before expired ones are swept.
const SWEEP_THRESHOLD: usize = 1024;

/// `n` random bytes from the thread-local CSPRNG (seeded by the operating system), as hex.
pub(crate) fn random_hex(n: usize) -> String {
    let mut bytes = vec![0_u8; n];
    rand::rng().fill_bytes(&mut bytes);
    hex::encode(bytes)
}

/// The secret a browser holds in its session cookie. `Debug` never shows it.
#[derive(Clone, PartialEq, Eq)]
pub struct SessionToken(String);

impl SessionToken {
    /// A fresh random token.
    pub fn generate() -> Self {
        Self(random_hex(TOKEN_BYTES))
    }

    /// Accepts a cookie value only if it has the shape of a token (64 lowercase hex digits).
    pub fn parse(value: &str) -> Option<Self> {
        let ok =
            value.len() == TOKEN_BYTES * 2 && value.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'));
        ok.then(|| Self(value.to_owned()))
    }

    /// The cookie value.
    pub fn expose(&self) -> &str {
        &self.0
    }

    /// The key the session is stored under: the SHA-256 of the token, so a leaked session table
    /// does not hand out live cookies.
    pub fn key(&self) -> SessionKey {
        SessionKey(hex::encode(Sha256::digest(self.0.as_bytes())))
    }
}

impl fmt::Debug for SessionToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("SessionToken([REDACTED])")
    }
}

/// Where a session is stored: hex SHA-256 of its token.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct SessionKey(String);

impl SessionKey {
    /// The hex digest.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// How a flash message looks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FlashKind {
    /// The action worked.
    Success,
    /// The action failed; nothing changed.
    Error,
}

/// A message shown once, on the next page the user sees.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Flash {
    /// Success or error.
    pub kind: FlashKind,
    /// The text (escaped when rendered).
    pub message: String,
}

impl Flash {
    /// A success message.
    pub fn success(message: impl Into<String>) -> Self {
        Self {
            kind: FlashKind::Success,
            message: message.into(),
        }
    }

    /// An error message.
    pub fn error(message: impl Into<String>) -> Self {
        Self {
            kind: FlashKind::Error,
            message: message.into(),
        }
    }
}

/// A secret shown exactly once, on the next page the user sees.
#[derive(Debug, Clone)]
pub enum Reveal {
    /// A new API key.
    ApiKey {
        /// The key's label.
        name: String,
        /// The full key.
        key: Secret,
    },
    /// A generated password for a user.
    Password {
        /// The user's name.
        user: String,
        /// The password.
        password: Secret,
    },
}

/// Which password a session was opened with: a digest of the user's stored password hash, so a
/// session ends when the password changes, whichever replica or command changed it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PasswordStamp(String);

impl PasswordStamp {
    /// The stamp of a stored password hash (PHC string): its SHA-256, truncated to 128 bits.
    pub fn of(password_hash: &str) -> Self {
        let digest = Sha256::digest(password_hash.as_bytes());
        Self(hex::encode(digest.get(..16).unwrap_or_default()))
    }

    /// A stamp kept as text (in a shared session store).
    pub fn from_stored(text: String) -> Self {
        Self(text)
    }

    /// The text to store.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// Whether `password_hash` is the one this stamp was taken of.
    pub fn matches(&self, password_hash: &str) -> bool {
        *self == Self::of(password_hash)
    }
}

/// What the server knows about a signed-in browser.
#[derive(Debug, Clone)]
pub struct Session {
    /// Who signed in.
    pub user_id: UserId,
    /// The password they signed in with; a session whose user's password changed since ends.
    pub password_stamp: PasswordStamp,
    /// The token every POST form must carry.
    pub csrf_token: String,
    /// When the session started.
    pub created_at: Timestamp,
    /// When it ends.
    pub expires_at: Timestamp,
    /// Messages for the next page.
    pub flash: Vec<Flash>,
    /// A secret for the next page.
    pub reveal: Option<Reveal>,
}

impl Session {
    /// A new session for `user_id`, who signed in with the password stored as `password_hash`,
    /// lasting `ttl`, with a fresh CSRF token.
    pub fn new(user_id: UserId, password_hash: &str, ttl: std::time::Duration) -> Self {
        let now = Timestamp::now();
        Self {
            user_id,
            password_stamp: PasswordStamp::of(password_hash),
            csrf_token: crate::csrf::new_token(),
            created_at: now,
            expires_at: now.saturating_add(ttl),
            flash: Vec::new(),
            reveal: None,
        }
    }

    /// Whether it has ended at `now`.
    pub fn is_expired(&self, now: Timestamp) -> bool {
        self.expires_at <= now
    }
}

/// A session store failed (a shared one; the memory store never does).
#[derive(Debug, thiserror::Error)]
#[error("session store: {message}")]
pub struct SessionError {
    message: String,
    unavailable: bool,
}

impl SessionError {
    /// The store failed on this call (it could not seal a session, say).
    pub fn new(message: impl Into<String>) -> Self {
        Self {
            message: message.into(),
            unavailable: false,
        }
    }

    /// The store could not be reached (refused, dropped or timed-out connection): the console
    /// answers 503 and the visitor may try again shortly.
    pub fn unavailable(message: impl Into<String>) -> Self {
        Self {
            message: message.into(),
            unavailable: true,
        }
    }

    /// Whether the store could not be reached, rather than failing this call.
    pub fn is_unavailable(&self) -> bool {
        self.unavailable
    }
}

/// Where sessions live.
#[async_trait]
pub trait SessionStore: Send + Sync + fmt::Debug {
    /// Stores a new session under `key` (replacing any).
    async fn put(&self, key: &SessionKey, session: Session) -> Result<(), SessionError>;
    /// Replaces the session under `key` if it still exists: one that ended meanwhile (signed out,
    /// or a password reset, perhaps on another replica) must not come back with a request that read
    /// it before.
    async fn update(&self, key: &SessionKey, session: Session) -> Result<(), SessionError>;
    /// The session under `key`, if it exists and has not expired.
    async fn get(&self, key: &SessionKey) -> Result<Option<Session>, SessionError>;
    /// Ends one session.
    async fn remove(&self, key: &SessionKey) -> Result<(), SessionError>;
    /// Ends every session of a user (after a password reset) but `keep` (the one resetting its
    /// own user's password).
    async fn remove_user(&self, user_id: UserId, keep: Option<&SessionKey>) -> Result<(), SessionError>;
}

/// Sessions in a map in this process.
#[derive(Debug, Default)]
pub struct MemorySessionStore {
    sessions: Mutex<HashMap<SessionKey, Session>>,
}

impl MemorySessionStore {
    /// An empty store.
    pub fn new() -> Self {
        Self::default()
    }

    /// Sessions held, expired ones included until the next sweep.
    pub fn len(&self) -> usize {
        self.sessions.lock().len()
    }

    /// Whether no session is held.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[async_trait]
impl SessionStore for MemorySessionStore {
    async fn put(&self, key: &SessionKey, session: Session) -> Result<(), SessionError> {
        let mut sessions = self.sessions.lock();
        if sessions.len() >= SWEEP_THRESHOLD && !sessions.contains_key(key) {
            let now = Timestamp::now();
            sessions.retain(|_, s| !s.is_expired(now));
        }
        sessions.insert(key.clone(), session);
        Ok(())
    }

    async fn update(&self, key: &SessionKey, session: Session) -> Result<(), SessionError> {
        if let Some(stored) = self.sessions.lock().get_mut(key) {
            *stored = session;
        }
        Ok(())
    }

    async fn get(&self, key: &SessionKey) -> Result<Option<Session>, SessionError> {
        let mut sessions = self.sessions.lock();
        let now = Timestamp::now();
        match sessions.get(key) {
            Some(session) if session.is_expired(now) => {
                sessions.remove(key);
                Ok(None)
            }
            found => Ok(found.cloned()),
        }
    }

    async fn remove(&self, key: &SessionKey) -> Result<(), SessionError> {
        self.sessions.lock().remove(key);
        Ok(())
    }

    async fn remove_user(&self, user_id: UserId, keep: Option<&SessionKey>) -> Result<(), SessionError> {
        self.sessions
            .lock()
            .retain(|key, s| s.user_id != user_id || Some(key) == keep);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn tokens_are_random_hex_and_parse_back() {
        let a = SessionToken::generate();
        let b = SessionToken::generate();
        assert_ne!(a, b);
        assert_eq!(a.expose().len(), 64);
        assert_eq!(SessionToken::parse(a.expose()), Some(a.clone()));
        assert_eq!(SessionToken::parse("abc"), None);
        assert_eq!(SessionToken::parse(&"G".repeat(64)), None);
        assert_ne!(a.key().as_str(), a.expose());
        assert!(!format!("{a:?}").contains(a.expose()));
    }

    #[tokio::test]
    async fn expired_sessions_are_not_returned() {
        let store = MemorySessionStore::new();
        let live = SessionToken::generate().key();
        let dead = SessionToken::generate().key();
        store
            .put(
                &live,
                Session::new(UserId(1), "$argon2id$test", Duration::from_secs(60)),
            )
            .await
            .unwrap();
        store
            .put(&dead, Session::new(UserId(1), "$argon2id$test", Duration::ZERO))
            .await
            .unwrap();
        assert_eq!(store.get(&live).await.unwrap().unwrap().user_id, UserId(1));
        assert!(store.get(&dead).await.unwrap().is_none());
        assert_eq!(store.len(), 1);
    }

    #[tokio::test]
    async fn an_update_does_not_bring_back_an_ended_session() {
        let store = MemorySessionStore::new();
        let key = SessionToken::generate().key();
        let session = Session::new(UserId(1), "$argon2id$test", Duration::from_secs(60));
        store.put(&key, session.clone()).await.unwrap();
        let mut changed = session.clone();
        changed.flash.push(Flash::success("saved"));
        store.update(&key, changed).await.unwrap();
        assert_eq!(store.get(&key).await.unwrap().unwrap().flash.len(), 1);
        // Signed out while a request that read the session was still running.
        store.remove_user(UserId(1), None).await.unwrap();
        store.update(&key, session).await.unwrap();
        assert!(store.get(&key).await.unwrap().is_none());
    }

    #[tokio::test]
    async fn remove_user_ends_only_their_sessions() {
        let store = MemorySessionStore::new();
        let (a, b) = (SessionToken::generate().key(), SessionToken::generate().key());
        store
            .put(
                &a,
                Session::new(UserId(1), "$argon2id$test", Duration::from_secs(60)),
            )
            .await
            .unwrap();
        store
            .put(
                &b,
                Session::new(UserId(2), "$argon2id$test", Duration::from_secs(60)),
            )
            .await
            .unwrap();
        store.remove_user(UserId(1), None).await.unwrap();
        assert!(store.get(&a).await.unwrap().is_none());
        assert!(store.get(&b).await.unwrap().is_some());
        // All but one.
        let (c, d) = (SessionToken::generate().key(), SessionToken::generate().key());
        for key in [&c, &d] {
            store
                .put(
                    key,
                    Session::new(UserId(2), "$argon2id$test", Duration::from_secs(60)),
                )
                .await
                .unwrap();
        }
        store.remove_user(UserId(2), Some(&d)).await.unwrap();
        assert!(store.get(&b).await.unwrap().is_none());
        assert!(store.get(&c).await.unwrap().is_none());
        assert!(store.get(&d).await.unwrap().is_some());
    }
}

//! Persistence for imagegate: users, groups, API keys, upstream accounts and usage records.
//!
//! One [`Store`] trait, two backends chosen by URL in [`connect`]: SQLite (`sqlite://...`, the
//! embedded default; WAL journal and a busy timeout) and PostgreSQL (`postgres://...`, behind
//! the default `postgres` feature). Each backend has its own embedded migrations, applied on
//! connect. Callers never see SQL.
//!
//! - **API keys** look like `sk-ig-<public id>-<secret>`. The full key is returned once, by
//!   [`Store::create_key`]; the database keeps only the SHA-256 of the secret, and
//!   [`Store::authenticate`] compares in constant time. [`KeyCache`] puts a short-lived
//!   in-process cache in front of it.
//! - **Account credentials** are encrypted with AES-256-GCM under a [`MasterKey`] (from
//!   `IMAGEGATE_MASTER_KEY` or a `master.key` file) and only come back decrypted through
//!   [`Store::account_credential`] as a [`Secret`]. A key rotation opens them under the previous
//!   key as well ([`connect_with_previous`]) until [`reseal_credentials`] has sealed them all again.
//! - **Usage records** go through a [`UsageWriter`], which batches inserts in the background
//!   and never drops a record silently; with a [`UsageSpool`] it parks them in a local file while
//!   the database is unreachable and replays them when it is back.
//!
//! ```
//! use imagegate_store::{KeyLimits, MasterKey, NewApiKey, NewUser, connect};
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let dir = tempfile::tempdir()?;
//! let master_key = MasterKey::load_or_create(dir.path(), None)?;
//! let url = format!("sqlite://{}?mode=rwc", dir.path().join("imagegate.db").display());
//! let store = connect(&url, &master_key).await?;
//!
//! let alice = store.create_user(NewUser { name: "alice".into(), ..NewUser::default() }).await?;
//! let group = store.default_group().await?;
//! let created = store
//!     .create_key(NewApiKey {
//!         user_id: alice.id,
//!         group_id: group.id,
//!         name: "laptop".into(),
//!         limits: KeyLimits { max_concurrency: Some(2), rpm: None },
//!         fallback_ladder: false,
//!     })
//!     .await?;
//!
//! // The full key is shown once; afterwards it only authenticates.
//! let auth = store.authenticate(created.key.expose()).await?.expect("active key");
//! assert_eq!(auth.user_id, alice.id);
//! assert!(store.authenticate("sk-ig-not-a-key").await?.is_none());
//!
//! store.delete_key(created.record.id).await?;
//! assert!(store.authenticate(created.key.expose()).await?.is_none());
//! store.close().await;
//! # Ok(())
//! # }
//! ```

mod cache;
mod crypto;
mod error;
pub mod keys;
mod migrations;
mod model;
mod priority;
mod rekey;
mod replay;
mod rows;
mod secret;
mod spool;
mod sqlite;
mod store;
mod writer;

#[cfg(feature = "postgres")]
mod postgres;

use std::path::Path;
use std::sync::Arc;

pub use cache::KeyCache;
pub use crypto::{
    Crypto, KeySource, MASTER_KEY_ENV, MASTER_KEY_FILE, MasterKey, PREVIOUS_MASTER_KEY_ENV, SealContext,
};
pub use error::{CryptoError, StoreError, StoreResult};
pub use model::{
    Account, AccountId, AccountKind, AccountStatus, AccountTier, AccountUpdate, ApiKeyRecord, AuthContext,
    Backend, DEFAULT_GROUP, DailyUsage, Group, GroupId, KeyCheck, KeyId, KeyLimits, KeyRefusal, KeyStatus,
    KeyUpdate, KeyUse, NewAccount, NewApiKey, NewKey, NewUser, StatusFilter, StoredCredential, Timestamp,
    TokenCounts, UnknownVariant, UsageCursor, UsageEntry, UsageFilter, UsageId, UsageRecord, User, UserId,
};
pub use priority::WriterPriority;
pub use rekey::{Resealed, reseal_credentials};
pub use replay::{MAX_USAGE_LINE, RefusedRecord, ReplayError, Replayed, UnreadableLine, replay_usage_file};
pub use secret::Secret;
pub use spool::{SpoolError, UsageSpool};
pub use store::Store;
pub use writer::{
    BACKLOG_BATCHES, RecordRejected, RejectReason, UsageSink, UsageWriter, UsageWriterConfig, WriterError,
    WriterStats,
};

/// Opens the database named by `url` and applies its migrations.
///
/// - `sqlite://PATH?mode=rwc` (or `sqlite:PATH`, `sqlite::memory:`): SQLite. Add `mode=rwc`
///   to create the file.
/// - `postgres://USER@HOST:PORT/DB` (or `postgresql://`): PostgreSQL (feature `postgres`).
///
/// `master_key` encrypts and decrypts account credentials; see [`MasterKey::load_or_create`].
pub async fn connect(url: &str, master_key: &MasterKey) -> StoreResult<Arc<dyn Store>> {
    connect_with_previous(url, master_key, None).await
}

/// [`connect`] during a master key rotation: credentials sealed under `previous` stay readable
/// (everything is sealed under `master_key`); [`reseal_credentials`] moves them all over.
pub async fn connect_with_previous(
    url: &str,
    master_key: &MasterKey,
    previous: Option<&MasterKey>,
) -> StoreResult<Arc<dyn Store>> {
    let crypto = Crypto::new(master_key).with_previous(previous);
    let scheme = url.split(':').next().unwrap_or_default();
    match scheme {
        "sqlite" => Ok(Arc::new(sqlite::SqliteStore::connect_url(url, crypto).await?)),
        #[cfg(feature = "postgres")]
        "postgres" | "postgresql" => Ok(Arc::new(postgres::PostgresStore::connect_url(url, crypto).await?)),
        #[cfg(not(feature = "postgres"))]
        "postgres" | "postgresql" => Err(StoreError::UnsupportedUrl(
            "postgres:// needs imagegate-store's `postgres` feature".to_owned(),
        )),
        _ => Err(StoreError::UnsupportedUrl(format!(
            "unknown scheme {scheme:?}; expected sqlite:// or postgres://"
        ))),
    }
}

/// Opens (creating it if missing) the SQLite database file at `path`, for paths that would need
/// escaping in a URL. Applies migrations.
pub async fn connect_sqlite_file(path: &Path, master_key: &MasterKey) -> StoreResult<Arc<dyn Store>> {
    let crypto = Crypto::new(master_key);
    Ok(Arc::new(sqlite::SqliteStore::connect_file(path, crypto).await?))
}

//! The SQLite backend: one database file, WAL journal, a busy timeout, foreign keys on.

use std::path::Path;
use std::str::FromStr;
use std::time::Duration;

use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions, SqliteSynchronous};

use crate::crypto::Crypto;
use crate::error::{StoreError, StoreResult};
use crate::model::Backend;

/// The driver type the shared query modules are compiled against.
type Db = sqlx::Sqlite;
type BackendStore = SqliteStore;
const BACKEND: Backend = Backend::Sqlite;

// The query modules in `src/sql/` are written once against the alias `Db` and compiled into
// each backend module, so both backends run the same SQL (PostgreSQL-style `$N` placeholders,
// which SQLite accepts too) without generic trait bounds.
#[allow(clippy::duplicate_mod, reason = "compiled once per backend on purpose")]
#[path = "../sql/accounts.rs"]
mod accounts;
#[allow(clippy::duplicate_mod, reason = "compiled once per backend on purpose")]
#[path = "../sql/keys.rs"]
mod keys;
#[allow(clippy::duplicate_mod, reason = "compiled once per backend on purpose")]
#[path = "../sql/store_impl.rs"]
mod store_impl;
#[allow(clippy::duplicate_mod, reason = "compiled once per backend on purpose")]
#[path = "../sql/usage.rs"]
mod usage;
#[allow(clippy::duplicate_mod, reason = "compiled once per backend on purpose")]
#[path = "../sql/users.rs"]
mod users;

/// How long a connection waits for another writer's lock before failing.
const BUSY_TIMEOUT: Duration = Duration::from_secs(5);
/// Pool size for a database file (WAL lets readers run beside the one writer).
const MAX_CONNECTIONS: u32 = 8;

/// A [`Store`](crate::Store) in an SQLite database.
#[derive(Debug)]
pub(crate) struct SqliteStore {
    pool: sqlx::SqlitePool,
    crypto: Crypto,
}

impl SqliteStore {
    /// Opens `sqlite:` URL (e.g. `sqlite://data/imagegate.db?mode=rwc`) and applies migrations.
    pub(crate) async fn connect_url(url: &str, crypto: Crypto) -> StoreResult<Self> {
        let options = SqliteConnectOptions::from_str(url)
            .map_err(|e| StoreError::UnsupportedUrl(format!("invalid sqlite url: {e}")))?;
        let in_memory = url.contains(":memory:") || url.contains("mode=memory");
        Self::open(options, in_memory, crypto).await
    }

    /// Opens (creating if needed) the database file at `path` and applies migrations.
    pub(crate) async fn connect_file(path: &Path, crypto: Crypto) -> StoreResult<Self> {
        let options = SqliteConnectOptions::new().filename(path).create_if_missing(true);
        Self::open(options, false, crypto).await
    }

    async fn open(options: SqliteConnectOptions, in_memory: bool, crypto: Crypto) -> StoreResult<Self> {
        // Temporary storage in memory: a multi-row usage INSERT otherwise writes its statement
        // journal to a new file under /var/tmp (create, write each page, unlink) on every flush.
        let options = options
            .busy_timeout(BUSY_TIMEOUT)
            .foreign_keys(true)
            .pragma("temp_store", "memory");
        let pool = if in_memory {
            // Every connection to `:memory:` is a separate database: keep exactly one, forever.
            SqlitePoolOptions::new()
                .max_connections(1)
                .min_connections(1)
                .idle_timeout(None)
                .max_lifetime(None)
                .connect_with(options)
                .await?
        } else {
            let options = options
                .journal_mode(SqliteJournalMode::Wal)
                .synchronous(SqliteSynchronous::Normal);
            SqlitePoolOptions::new()
                .max_connections(MAX_CONNECTIONS)
                .connect_with(options)
                .await?
        };
        sqlx::migrate!("./migrations/sqlite").run(&pool).await?;
        Ok(Self { pool, crypto })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::crypto::MasterKey;

    #[tokio::test]
    async fn temporary_storage_stays_in_memory() {
        let dir = tempfile::tempdir().unwrap();
        let crypto = Crypto::new(&MasterKey::from_bytes([7; 32]));
        let store = SqliteStore::connect_file(&dir.path().join("t.db"), crypto)
            .await
            .unwrap();
        // Every pooled connection gets it, not just the first.
        let mut connections = Vec::new();
        for _ in 0..3 {
            let mut connection = store.pool.acquire().await.unwrap();
            let (mode,): (i64,) = sqlx::query_as("PRAGMA temp_store")
                .fetch_one(&mut *connection)
                .await
                .unwrap();
            assert_eq!(mode, 2, "2 = MEMORY");
            connections.push(connection);
        }
    }
}

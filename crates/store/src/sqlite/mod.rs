//! The SQLite backend: one database file, WAL journal, a busy timeout, foreign keys on.
//!
//! Usage records are written through a connection of their own whose worker thread runs only
//! when the CPU is otherwise idle (`crate::priority`), unless the writer falls behind.

use std::fs::{File, OpenOptions};
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions, SqliteSynchronous};

use crate::crypto::Crypto;
use crate::error::{StoreError, StoreResult};
use crate::model::Backend;
use crate::priority::{NamedThread, UsageLane};

/// The driver type the shared query modules are compiled against.
type Db = sqlx::Sqlite;
type BackendStore = SqliteStore;
const BACKEND: Backend = Backend::Sqlite;
/// How a transaction that writes begins: with the write lock taken at once. A deferred one that
/// reads first and then writes cannot wait for a writer still holding the lock (a transaction
/// being rolled back, say): SQLite answers it `database is locked` at once instead of waiting
/// out the busy timeout, since its snapshot may be stale by the time the lock frees.
const BEGIN_WRITE: &str = "BEGIN IMMEDIATE";
/// How a transaction that reads several tables begins: in WAL mode its first read fixes the
/// snapshot every later statement sees.
const BEGIN_SNAPSHOT: &str = "BEGIN";
/// Most rows per usage INSERT statement. SQLite does the insert on the gateway's own CPU, in one
/// uninterrupted run per statement, and the scheduler lets a batch-policy thread that has waited
/// run until the next 4 ms tick: with 256 rows a statement kept every request waiting for 1-7 ms
/// about 120 times in a 5 s window at small c64 (`perf sched`), with 64 about 13 times. Between two
/// statements the thread sleeps and request handling runs.
const USAGE_ROWS_PER_STATEMENT: usize = 64;

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
    usage: UsageLane<Db>,
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
        // One process at a time sets a file up: SQLite's migrator takes no lock of its own, and
        // two processes opening a new file together (a gateway and an admin command on a fresh
        // data directory) would both create its tables, or both switch it to WAL, and one fail.
        let _setting_up = if in_memory {
            None
        } else {
            Some(lock_exclusively(setup_lock_path(options.get_filename())).await?)
        };
        let (pool, usage_options) = if in_memory {
            // Every connection to `:memory:` is a separate database: keep exactly one, forever,
            // and let usage share it.
            (single_connection().connect_with(options).await?, None)
        } else {
            // FULL: a commit is on disk when it returns. NORMAL (WAL's usual pairing) survives a
            // crash of the process but may lose the last commits on a power cut, and a usage
            // batch whose commit returned is no longer kept anywhere else. Usage is written in
            // batches, so the extra sync costs a few per second at most.
            let options = options
                .journal_mode(SqliteJournalMode::Wal)
                .synchronous(SqliteSynchronous::Full);
            let pool = SqlitePoolOptions::new()
                .max_connections(MAX_CONNECTIONS)
                .connect_with(options.clone())
                .await?;
            (pool, Some(options))
        };
        crate::migrations::SQLITE.migrator().await?.run(&pool).await?;
        let background = match usage_options {
            Some(options) => background_pool(options).await,
            None => None,
        };
        let usage = background.map_or_else(UsageLane::ordinary, UsageLane::with_background);
        Ok(Self { pool, usage, crypto })
    }
}

/// `<database>.setup-lock`: not the database file itself, whose POSIX locks (SQLite's own) a
/// process loses when it closes any handle of that file.
fn setup_lock_path(database: &Path) -> PathBuf {
    let mut name = database.as_os_str().to_owned();
    name.push(".setup-lock");
    PathBuf::from(name)
}

/// Opens `path` (created if missing) and waits for an exclusive lock on it, released when the
/// returned file is dropped (or the process exits).
async fn lock_exclusively(path: PathBuf) -> StoreResult<File> {
    let locking = path.clone();
    let locked = tokio::task::spawn_blocking(move || {
        // Read-only when it exists: `flock` needs no more, and a lock file an administrator's
        // command created (as root, mode 0644) must not keep the service's user out.
        let file = match File::open(&locking) {
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => OpenOptions::new()
                .create(true)
                .truncate(false)
                .write(true)
                .open(&locking)?,
            opened => opened?,
        };
        lock_file(&file)?;
        Ok(file)
    })
    .await
    .unwrap_or_else(|joined| Err(std::io::Error::other(joined.to_string())));
    locked.map_err(|source| StoreError::SetupLock { path, source })
}

/// Waits for an exclusive `flock` on `file`.
#[cfg(unix)]
fn lock_file(file: &File) -> std::io::Result<()> {
    rustix::fs::flock(file, rustix::fs::FlockOperation::LockExclusive).map_err(std::io::Error::from)
}

/// Without `flock`, processes must not open a new database file at the same moment.
#[cfg(not(unix))]
fn lock_file(_file: &File) -> std::io::Result<()> {
    Ok(())
}

/// A pool of exactly one connection that is never closed for idleness or age.
fn single_connection() -> SqlitePoolOptions {
    SqlitePoolOptions::new()
        .max_connections(1)
        .min_connections(1)
        .idle_timeout(None)
        .max_lifetime(None)
}

/// One connection, kept for the life of the store, whose worker thread gets the batch policy;
/// `None` where that policy cannot be had (the usage writer then uses the ordinary pool).
async fn background_pool(options: SqliteConnectOptions) -> Option<sqlx::SqlitePool> {
    let thread = Arc::new(NamedThread::default());
    let namer = Arc::clone(&thread);
    let pool = single_connection()
        .connect_with(options.thread_name(move |id| namer.name(id)))
        .await
        .inspect_err(|error| tracing::warn!(%error, "no background connection for usage records"))
        .ok()?;
    if thread.make_background() {
        Some(pool)
    } else {
        pool.close().await;
        None
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

    #[tokio::test]
    async fn every_connection_syncs_each_commit() {
        const FULL: i64 = 2;
        let dir = tempfile::tempdir().unwrap();
        let crypto = Crypto::new(&MasterKey::from_bytes([7; 32]));
        let store = SqliteStore::connect_file(&dir.path().join("t.db"), crypto)
            .await
            .unwrap();
        for (pool, lane) in [
            (&store.pool, "ordinary"),
            (store.usage.pool(&store.pool), "usage"),
        ] {
            let (mode,): (i64,) = sqlx::query_as("PRAGMA synchronous")
                .fetch_one(pool)
                .await
                .unwrap();
            assert_eq!(mode, FULL, "the {lane} lane");
        }
    }

    #[cfg(target_os = "linux")]
    #[tokio::test]
    async fn usage_goes_through_a_batch_policy_thread_unless_the_writer_falls_behind() {
        use crate::model::UsageRecord;
        use crate::priority::{WriterPriority, os};
        use crate::store::Store;

        const SCHED_OTHER: i32 = 0;
        const SCHED_BATCH: i32 = 3;
        let dir = tempfile::tempdir().unwrap();
        let crypto = Crypto::new(&MasterKey::from_bytes([7; 32]));
        let store = SqliteStore::connect_file(&dir.path().join("t.db"), crypto)
            .await
            .unwrap();
        let background = store.usage.pool(&store.pool);
        assert!(!background.is_closed());
        assert!(
            !std::ptr::eq(background, &store.pool),
            "usage starts in the background"
        );

        // The background connection's thread has the batch policy; the ordinary pool's do not.
        let ordinary = store.pool.acquire().await.unwrap();
        drop(ordinary);
        let thread_named = |prefix: &str| os::thread_where(|comm| comm.starts_with(prefix)).unwrap();
        assert_eq!(os::policy_of(thread_named("ig-usage-")), Some(SCHED_BATCH));
        assert_eq!(os::policy_of(thread_named("sqlx-sqlite")), Some(SCHED_OTHER));

        // Both lanes write to the same database.
        let record = |id: &str| UsageRecord::new(id, "/v1/images/generations", "gpt-image-2");
        assert_eq!(store.insert_usage_batch(&[record("req_a")]).await.unwrap(), 1);
        store.set_usage_priority(WriterPriority::Normal);
        assert!(std::ptr::eq(store.usage.pool(&store.pool), &store.pool));
        assert_eq!(store.insert_usage_batch(&[record("req_b")]).await.unwrap(), 1);
        store.set_usage_priority(WriterPriority::Background);
        assert_eq!(store.insert_usage_batch(&[record("req_a")]).await.unwrap(), 0);
        let (rows,): (i64,) = sqlx::query_as("SELECT COUNT(*) FROM usage_records")
            .fetch_one(&store.pool)
            .await
            .unwrap();
        assert_eq!(rows, 2);
        store.close().await;
    }
}

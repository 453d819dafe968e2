//! The PostgreSQL backend. Migrations take PostgreSQL's advisory lock, so several gateway
//! replicas may start at once.

use std::str::FromStr;
use std::time::Duration;

use sqlx::postgres::{PgConnectOptions, PgPoolOptions};

use crate::crypto::Crypto;
use crate::error::{StoreError, StoreResult};
use crate::model::Backend;
use crate::priority::UsageLane;

/// The driver type the shared query modules are compiled against.
type Db = sqlx::Postgres;
type BackendStore = PostgresStore;
const BACKEND: Backend = Backend::Postgres;
/// How a transaction that writes begins (row locks are taken as it writes).
const BEGIN_WRITE: &str = "BEGIN";
/// How a transaction that reads several tables begins: every statement sees the same snapshot.
const BEGIN_SNAPSHOT: &str = "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY";
/// Most rows per usage INSERT statement: the server does the work, so fewer round trips win
/// (28 parameters a row stays below the protocol's 65,535).
const USAGE_ROWS_PER_STATEMENT: usize = 256;

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

/// Connections per gateway process.
const MAX_CONNECTIONS: u32 = 16;
/// How long a caller waits for a free connection.
const ACQUIRE_TIMEOUT: Duration = Duration::from_secs(10);

/// A [`Store`](crate::Store) in a PostgreSQL database.
#[derive(Debug)]
pub(crate) struct PostgresStore {
    pool: sqlx::PgPool,
    /// Always the ordinary pool: the database server does the work, not this process.
    usage: UsageLane<Db>,
    crypto: Crypto,
}

impl PostgresStore {
    /// Connects to a `postgres://` URL and applies migrations.
    pub(crate) async fn connect_url(url: &str, crypto: Crypto) -> StoreResult<Self> {
        let options = PgConnectOptions::from_str(url)
            .map_err(|e| StoreError::UnsupportedUrl(format!("invalid postgres url: {e}")))?;
        let pool = PgPoolOptions::new()
            .max_connections(MAX_CONNECTIONS)
            .acquire_timeout(ACQUIRE_TIMEOUT)
            .connect_with(options)
            .await?;
        crate::migrations::POSTGRES.migrator().await?.run(&pool).await?;
        Ok(Self {
            pool,
            usage: UsageLane::ordinary(),
            crypto,
        })
    }
}

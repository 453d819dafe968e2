//! Error types of the store.

/// Everything that can go wrong in a [`Store`](crate::Store) call.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    /// The entity does not exist (or a referenced entity does not exist).
    #[error("{what} not found: {key}")]
    NotFound {
        /// The kind of entity, e.g. `"user"`.
        what: &'static str,
        /// How it was looked up (an id or a name).
        key: String,
    },
    /// A unique name is already taken, or the change conflicts with the entity's state.
    #[error("conflict: {0}")]
    Conflict(String),
    /// The user may not do this: a key in a restricted group they are not a member of.
    #[error("not allowed: {0}")]
    Forbidden(String),
    /// The input was rejected before reaching the database (empty name, zero limit, ...).
    #[error("invalid input: {0}")]
    Invalid(String),
    /// The database URL is malformed or names a backend that is not compiled in.
    #[error("unsupported database url: {0}")]
    UnsupportedUrl(String),
    /// A value read from the database could not be understood (unknown enum text, bad JSON).
    #[error("corrupt value in database: {0}")]
    Corrupt(String),
    /// The database driver failed (connection lost, timeout, SQL error).
    #[error("database error: {0}")]
    Database(#[source] sqlx::Error),
    /// Applying the embedded migrations failed.
    #[error("migration failed: {0}")]
    Migration(#[from] sqlx::migrate::MigrateError),
    /// The lock that keeps processes from setting up (migrating) an SQLite file together could
    /// not be taken.
    #[error("setup lock {path}: {source}")]
    SetupLock {
        /// The lock file.
        path: std::path::PathBuf,
        /// The failure.
        #[source]
        source: std::io::Error,
    },
    /// Encrypting or decrypting an account credential failed.
    #[error(transparent)]
    Crypto(#[from] CryptoError),
    /// The database was not asked because it failed moments ago (see [`KeyCache`](crate::KeyCache)).
    #[error("database unavailable: {0}")]
    Unavailable(String),
}

impl StoreError {
    pub(crate) fn not_found(what: &'static str, key: impl ToString) -> Self {
        Self::NotFound {
            what,
            key: key.to_string(),
        }
    }

    /// Maps a driver error, turning unique and foreign-key violations into [`StoreError::Conflict`]
    /// and [`StoreError::NotFound`]; `what` names the entity being written.
    pub(crate) fn from_write(what: &'static str, err: sqlx::Error) -> Self {
        if let sqlx::Error::Database(db) = &err {
            if db.is_unique_violation() {
                return Self::Conflict(format!("{what} already exists"));
            }
            if db.is_foreign_key_violation() {
                let target = match what {
                    "api key" => "user or group",
                    "account group" => "group",
                    "group member" => "user",
                    _ => "referenced row",
                };
                return Self::not_found(target, format!("referenced by the new {what}"));
            }
        }
        Self::Database(err)
    }
}

impl StoreError {
    /// Whether the database could not be reached (connection refused or lost, pool timeout, server
    /// shutting down or out of connections) rather than refusing this particular call. Callers
    /// may fall back to a degraded mode for these and retry later.
    pub fn is_unavailable(&self) -> bool {
        match self {
            Self::Unavailable(_) => true,
            Self::Database(err) => sqlx_error_is_unavailable(err),
            _ => false,
        }
    }
}

impl StoreError {
    /// Whether the database refused the data itself (a constraint, a value out of range, a value
    /// it cannot take): the same rows fail again however often they are retried, while other rows
    /// go in. A lost connection, a timeout, a lock or a missing table is not such a refusal.
    pub fn is_refusal(&self) -> bool {
        match self {
            Self::Database(sqlx::Error::Encode(_)) => true,
            Self::Database(sqlx::Error::Database(db)) => {
                use sqlx::error::ErrorKind;
                if !matches!(db.kind(), ErrorKind::Other) {
                    return true; // unique, foreign key, not null or check violation
                }
                let Some(code) = db.code() else {
                    return false;
                };
                if db.try_downcast_ref::<sqlx::sqlite::SqliteError>().is_some() {
                    // The primary code of an extended one: TOOBIG, CONSTRAINT, MISMATCH, RANGE.
                    code.parse::<u32>()
                        .is_ok_and(|code| matches!(code & 0xff, 18 | 19 | 20 | 25))
                } else {
                    // SQLSTATE classes 22 (data exception) and 23 (integrity constraint violation).
                    code.starts_with("22") || code.starts_with("23")
                }
            }
            _ => false,
        }
    }
}

impl StoreError {
    /// Whether the database refused a value of the data (a refusal, see [`Self::is_refusal`],
    /// that is not a constraint violation): a value it cannot encode or store, out of range, too
    /// big, of the wrong type. Such an error belongs to the rows that carry the value, however
    /// many of them come in a row; a constraint that every row breaks is rather a change of the
    /// schema.
    pub fn is_data_refusal(&self) -> bool {
        match self {
            Self::Database(sqlx::Error::Encode(_)) => true,
            Self::Database(sqlx::Error::Database(db)) => {
                use sqlx::error::ErrorKind;
                if !matches!(db.kind(), ErrorKind::Other) {
                    return false;
                }
                let Some(code) = db.code() else {
                    return false;
                };
                if db.try_downcast_ref::<sqlx::sqlite::SqliteError>().is_some() {
                    // TOOBIG, MISMATCH, RANGE (CONSTRAINT is left out).
                    code.parse::<u32>()
                        .is_ok_and(|code| matches!(code & 0xff, 18 | 20 | 25))
                } else {
                    // SQLSTATE class 22 (data exception).
                    code.starts_with("22")
                }
            }
            _ => false,
        }
    }
}

fn sqlx_error_is_unavailable(err: &sqlx::Error) -> bool {
    match err {
        sqlx::Error::Io(_)
        | sqlx::Error::Tls(_)
        | sqlx::Error::Protocol(_)
        | sqlx::Error::PoolTimedOut
        | sqlx::Error::PoolClosed
        | sqlx::Error::WorkerCrashed => true,
        // SQLSTATE class 08 (connection exception), 57P01-57P03 (admin shutdown, crash shutdown,
        // cannot connect now) and 53300 (too many connections).
        sqlx::Error::Database(db) => db
            .code()
            .is_some_and(|code| code.starts_with("08") || code.starts_with("57P0") || code == "53300"),
        _ => false,
    }
}

impl From<sqlx::Error> for StoreError {
    fn from(err: sqlx::Error) -> Self {
        Self::Database(err)
    }
}

/// Failures of the master key and of credential encryption.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CryptoError {
    /// The master key text is neither 64 hex digits nor base64 of 32 bytes.
    #[error("invalid master key: {0}")]
    InvalidMasterKey(String),
    /// Reading or creating the key file failed.
    #[error("master key file {path}: {source}")]
    KeyFile {
        /// The file involved.
        path: std::path::PathBuf,
        /// The I/O failure.
        #[source]
        source: std::io::Error,
    },
    /// The operating system's random source failed.
    #[error("random source failed: {0}")]
    Random(String),
    /// Encryption failed (the plaintext is too long for AES-GCM).
    #[error("credential encryption failed")]
    Encrypt,
    /// The stored ciphertext is malformed, was tampered with, or was made with another master key.
    #[error("credential decryption failed (wrong master key or corrupt data)")]
    Decrypt,
}

/// Shorthand for results of store calls.
pub type StoreResult<T> = Result<T, StoreError>;

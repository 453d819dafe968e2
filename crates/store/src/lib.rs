//! Persistence for imagegate.
//!
//! This crate will own users, groups, API keys (only a SHA-256 of each secret is stored), upstream
//! accounts (credentials encrypted at rest) and usage records, behind a `Store` trait with an SQLite
//! implementation (the embedded default) and a PostgreSQL implementation, each with its own
//! migrations, plus a batched usage writer. Callers never see an SQL dialect.
//!
//! ```
//! assert_eq!(imagegate_store::CRATE_ROLE, "persistence");
//! ```

/// What this crate is for, until the store lands.
pub const CRATE_ROLE: &str = "persistence";

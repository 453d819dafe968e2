//! Each backend's schema migrations, embedded in the binary and applied on connect.
//!
//! The files keep sqlx's layout (`migrations/<backend>/<version>_<description>.sql`) and each
//! migration's checksum is the one `sqlx::migrate!` computed for the same file, so databases made
//! by earlier builds open unchanged. A test checks that the list below names every file.

use std::borrow::Cow;
use std::future::Future;
use std::pin::Pin;

use sqlx::error::BoxDynError;
use sqlx::migrate::{MigrateError, Migration, MigrationSource, MigrationType, Migrator};

/// One backend's migrations, oldest first: version, description, SQL.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Embedded(&'static [(i64, &'static str, &'static str)]);

/// The SQLite schema.
pub(crate) const SQLITE: Embedded = Embedded(&[
    (
        1,
        "initial",
        include_str!("../migrations/sqlite/0001_initial.sql"),
    ),
    (
        2,
        "group access",
        include_str!("../migrations/sqlite/0002_group_access.sql"),
    ),
]);

/// The PostgreSQL schema.
#[cfg(feature = "postgres")]
pub(crate) const POSTGRES: Embedded = Embedded(&[
    (
        1,
        "initial",
        include_str!("../migrations/postgres/0001_initial.sql"),
    ),
    (
        2,
        "group access",
        include_str!("../migrations/postgres/0002_group_access.sql"),
    ),
]);

impl Embedded {
    /// A migrator that applies these migrations and, during a rolling upgrade or a rollback,
    /// tolerates newer (additive) ones a replica already upgraded has applied.
    pub(crate) async fn migrator(self) -> Result<Migrator, MigrateError> {
        let mut migrator = Migrator::new(self).await?;
        migrator.set_ignore_missing(true);
        Ok(migrator)
    }
}

impl MigrationSource<'static> for Embedded {
    fn resolve(self) -> Pin<Box<dyn Future<Output = Result<Vec<Migration>, BoxDynError>> + Send + 'static>> {
        let migrations = self
            .0
            .iter()
            .map(|&(version, description, sql)| {
                Migration::new(
                    version,
                    Cow::Borrowed(description),
                    MigrationType::Simple,
                    Cow::Borrowed(sql),
                    sql.starts_with("-- no-transaction"),
                )
            })
            .collect();
        Box::pin(std::future::ready(Ok(migrations)))
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

    use std::path::Path;

    use super::*;

    /// The embedded list against the folder, read the way `sqlx::migrate!` read it: same
    /// versions, descriptions, kinds and checksums (a file added to the folder but not to the list
    /// would otherwise never be applied).
    async fn same_as_folder(embedded: Embedded, folder: &str) {
        let folder = Path::new(env!("CARGO_MANIFEST_DIR")).join(folder);
        let from_folder = Migrator::new(folder.as_path()).await.unwrap();
        let embedded = embedded.migrator().await.unwrap();
        let describe = |migrator: &Migrator| -> Vec<_> {
            migrator
                .iter()
                .map(|m| {
                    (
                        m.version,
                        m.description.to_string(),
                        m.migration_type,
                        m.checksum.to_vec(),
                        m.no_tx,
                    )
                })
                .collect()
        };
        assert!(!describe(&from_folder).is_empty());
        assert_eq!(describe(&embedded), describe(&from_folder));
    }

    #[tokio::test]
    async fn the_sqlite_list_is_the_folder() {
        same_as_folder(SQLITE, "migrations/sqlite").await;
    }

    #[cfg(feature = "postgres")]
    #[tokio::test]
    async fn the_postgres_list_is_the_folder() {
        same_as_folder(POSTGRES, "migrations/postgres").await;
    }
}

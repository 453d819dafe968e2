//! [`TestDatabase`]: a fresh PostgreSQL database per test, on the server named by
//! [`POSTGRES_URL_ENV`] (default [`DEFAULT_POSTGRES_URL`]).

use sqlx::Connection;

use crate::unique::unique_name;

/// Environment variable naming the PostgreSQL server (an admin URL ending in `/<database>`) where
/// the tests create their databases.
pub const POSTGRES_URL_ENV: &str = "IMAGEGATE_TEST_POSTGRES_URL";

/// The server used when [`POSTGRES_URL_ENV`] is not set.
pub const DEFAULT_POSTGRES_URL: &str = "postgres://postgres@127.0.0.1:5432/test";

/// Why a test database could not be created or dropped.
#[derive(Debug, thiserror::Error)]
pub enum PostgresError {
    /// The server could not be reached.
    #[error("PostgreSQL tests need a server at {url} (set {POSTGRES_URL_ENV}): {source}")]
    Connect {
        /// The admin URL tried.
        url: String,
        /// What the driver said.
        source: sqlx::Error,
    },
    /// `CREATE DATABASE` or `DROP DATABASE` failed.
    #[error("{statement} failed: {source}")]
    Statement {
        /// The statement run.
        statement: String,
        /// What the server said.
        source: sqlx::Error,
    },
    /// The admin URL has no `/<database>` to replace.
    #[error("{POSTGRES_URL_ENV} must end in /<database>: {0}")]
    BadUrl(String),
}

/// The admin URL: [`POSTGRES_URL_ENV`] or else [`DEFAULT_POSTGRES_URL`].
#[must_use]
pub fn admin_url() -> String {
    std::env::var(POSTGRES_URL_ENV).unwrap_or_else(|_| DEFAULT_POSTGRES_URL.to_owned())
}

/// A database created for one test. It is not dropped automatically (dropping needs an async
/// connection): call [`TestDatabase::drop_database`] at the end of the test.
#[derive(Debug, Clone)]
pub struct TestDatabase {
    admin_url: String,
    name: String,
    url: String,
}

impl TestDatabase {
    /// Creates a database named `<stem>_<unique suffix>` ([`crate::unique_name`]) on the server at
    /// [`admin_url`]. `stem` must be a valid SQL identifier.
    ///
    /// # Errors
    ///
    /// When the server cannot be reached, the database cannot be created, or the admin URL has no
    /// database part.
    pub async fn create(stem: &str) -> Result<Self, PostgresError> {
        let admin_url = admin_url();
        let (base, _) = admin_url
            .rsplit_once('/')
            .ok_or_else(|| PostgresError::BadUrl(admin_url.clone()))?;
        let name = unique_name(stem);
        let url = format!("{base}/{name}");
        let mut admin = connect(&admin_url).await?;
        execute(&mut admin, &format!("CREATE DATABASE {name}")).await?;
        // Closing is a courtesy to the server: the database exists whether or not it succeeds.
        let _ = admin.close().await;
        Ok(Self { admin_url, name, url })
    }

    /// The URL of the server the database was created on (with its original database).
    #[must_use]
    pub fn admin_url(&self) -> &str {
        &self.admin_url
    }

    /// The database's name.
    #[must_use]
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The URL of the database.
    #[must_use]
    pub fn url(&self) -> &str {
        &self.url
    }

    /// Drops the database, closing the connections still open to it (`WITH (FORCE)`). Dropping
    /// it twice is not an error.
    ///
    /// # Errors
    ///
    /// When the server cannot be reached or refuses.
    pub async fn drop_database(&self) -> Result<(), PostgresError> {
        let mut admin = connect(&self.admin_url).await?;
        execute(
            &mut admin,
            &format!("DROP DATABASE IF EXISTS {} WITH (FORCE)", self.name),
        )
        .await
    }
}

async fn connect(url: &str) -> Result<sqlx::PgConnection, PostgresError> {
    sqlx::PgConnection::connect(url)
        .await
        .map_err(|source| PostgresError::Connect {
            url: url.to_owned(),
            source,
        })
}

async fn execute(connection: &mut sqlx::PgConnection, statement: &str) -> Result<(), PostgresError> {
    sqlx::query(statement)
        .execute(connection)
        .await
        .map(drop)
        .map_err(|source| PostgresError::Statement {
            statement: statement.to_owned(),
            source,
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_database_is_created_usable_and_dropped() {
        let database = TestDatabase::create("imagegate_testkit").await.unwrap();
        assert!(database.name().starts_with("imagegate_testkit_"));
        assert!(database.url().ends_with(&format!("/{}", database.name())));
        let mut connection = sqlx::PgConnection::connect(database.url()).await.unwrap();
        let one: i32 = sqlx::query_scalar("SELECT 1")
            .fetch_one(&mut connection)
            .await
            .unwrap();
        assert_eq!(one, 1);

        // Open connections do not stop the drop, and a second drop is no error.
        database.drop_database().await.unwrap();
        database.drop_database().await.unwrap();
        assert!(sqlx::PgConnection::connect(database.url()).await.is_err());
    }
}

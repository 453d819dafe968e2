//! Test databases: a temporary SQLite file, or a fresh PostgreSQL database per test.

use std::future::Future;
use std::sync::Arc;

use imagegate_store::{MasterKey, Store, connect};
use imagegate_testkit::TestDatabase;
use sqlx::Connection;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Sqlite,
    Postgres,
}

/// A database made for one test, with the store connected to it.
pub struct TestDb {
    pub kind: Kind,
    pub url: String,
    pub master_key: MasterKey,
    pub store: Arc<dyn Store>,
    _dir: Option<tempfile::TempDir>,
    postgres: Option<TestDatabase>,
}

impl TestDb {
    pub async fn new(kind: Kind) -> Self {
        let master_key = MasterKey::generate().unwrap();
        match kind {
            Kind::Sqlite => {
                let dir = tempfile::tempdir().unwrap();
                let url = format!("sqlite://{}?mode=rwc", dir.path().join("test.db").display());
                let store = connect(&url, &master_key).await.unwrap();
                Self {
                    kind,
                    url,
                    master_key,
                    store,
                    _dir: Some(dir),
                    postgres: None,
                }
            }
            Kind::Postgres => {
                let database = TestDatabase::create("imagegate_test")
                    .await
                    .unwrap_or_else(|e| panic!("{e}"));
                let url = database.url().to_owned();
                let store = connect(&url, &master_key).await.unwrap();
                Self {
                    kind,
                    url,
                    master_key,
                    store,
                    _dir: None,
                    postgres: Some(database),
                }
            }
        }
    }

    /// A second store on the same database (migrations run again).
    pub async fn reconnect(&self, master_key: &MasterKey) -> Arc<dyn Store> {
        connect(&self.url, master_key).await.unwrap()
    }

    /// Runs each statement on a connection of its own.
    pub async fn execute(&self, statements: &[&str]) {
        for sql in statements {
            match self.kind {
                Kind::Sqlite => {
                    let mut conn = sqlx::SqliteConnection::connect(&self.url).await.unwrap();
                    sqlx::query(sql).execute(&mut conn).await.unwrap();
                }
                Kind::Postgres => {
                    let mut conn = sqlx::PgConnection::connect(&self.url).await.unwrap();
                    sqlx::query(sql).execute(&mut conn).await.unwrap();
                }
            }
        }
    }

    /// Another process's write: runs `sql` in a transaction of its own, which holds the database's
    /// write lock (SQLite) for `hold` before it commits; returns once `sql` ran, with the commit to
    /// wait for.
    pub async fn write_meanwhile(
        &self,
        sql: &'static str,
        hold: std::time::Duration,
    ) -> tokio::task::JoinHandle<()> {
        self.write_bytes_meanwhile(sql, None, hold).await
    }

    /// [`Self::write_meanwhile`] with `bytes`, when given, bound to `$1`.
    pub async fn write_bytes_meanwhile(
        &self,
        sql: &'static str,
        bytes: Option<Vec<u8>>,
        hold: std::time::Duration,
    ) -> tokio::task::JoinHandle<()> {
        match self.kind {
            Kind::Sqlite => {
                let mut conn = sqlx::SqliteConnection::connect(&self.url).await.unwrap();
                sqlx::query("BEGIN IMMEDIATE").execute(&mut conn).await.unwrap();
                sqlx::query(sql).bind(bytes).execute(&mut conn).await.unwrap();
                tokio::spawn(async move {
                    tokio::time::sleep(hold).await;
                    sqlx::query("COMMIT").execute(&mut conn).await.unwrap();
                })
            }
            Kind::Postgres => {
                let mut conn = sqlx::PgConnection::connect(&self.url).await.unwrap();
                sqlx::query("BEGIN").execute(&mut conn).await.unwrap();
                sqlx::query(sql).bind(bytes).execute(&mut conn).await.unwrap();
                tokio::spawn(async move {
                    tokio::time::sleep(hold).await;
                    sqlx::query("COMMIT").execute(&mut conn).await.unwrap();
                })
            }
        }
    }

    /// Runs `sql` with `bytes` bound to `$1`.
    pub async fn execute_with_bytes(&self, sql: &str, bytes: &[u8]) {
        match self.kind {
            Kind::Sqlite => {
                let mut conn = sqlx::SqliteConnection::connect(&self.url).await.unwrap();
                sqlx::query(sql).bind(bytes).execute(&mut conn).await.unwrap();
            }
            Kind::Postgres => {
                let mut conn = sqlx::PgConnection::connect(&self.url).await.unwrap();
                sqlx::query(sql).bind(bytes).execute(&mut conn).await.unwrap();
            }
        }
    }

    /// The first column of every row of `sql`, read as text.
    pub async fn raw_strings(&self, sql: &str) -> Vec<String> {
        match self.kind {
            Kind::Sqlite => {
                let mut conn = sqlx::SqliteConnection::connect(&self.url).await.unwrap();
                sqlx::query_scalar(sql).fetch_all(&mut conn).await.unwrap()
            }
            Kind::Postgres => {
                let mut conn = sqlx::PgConnection::connect(&self.url).await.unwrap();
                sqlx::query_scalar(sql).fetch_all(&mut conn).await.unwrap()
            }
        }
    }

    /// The first column of every row of `sql`, read as bytes.
    pub async fn raw_bytes(&self, sql: &str) -> Vec<Vec<u8>> {
        match self.kind {
            Kind::Sqlite => {
                let mut conn = sqlx::SqliteConnection::connect(&self.url).await.unwrap();
                sqlx::query_scalar(sql).fetch_all(&mut conn).await.unwrap()
            }
            Kind::Postgres => {
                let mut conn = sqlx::PgConnection::connect(&self.url).await.unwrap();
                sqlx::query_scalar(sql).fetch_all(&mut conn).await.unwrap()
            }
        }
    }

    /// The first column of every row of `sql`, read as integers.
    pub async fn raw_ints(&self, sql: &str) -> Vec<i64> {
        match self.kind {
            Kind::Sqlite => {
                let mut conn = sqlx::SqliteConnection::connect(&self.url).await.unwrap();
                sqlx::query_scalar(sql).fetch_all(&mut conn).await.unwrap()
            }
            Kind::Postgres => {
                let mut conn = sqlx::PgConnection::connect(&self.url).await.unwrap();
                sqlx::query_scalar(sql).fetch_all(&mut conn).await.unwrap()
            }
        }
    }

    async fn cleanup(&self) {
        self.store.close().await;
        if let Some(database) = &self.postgres {
            database.drop_database().await.unwrap();
        }
    }
}

/// Runs `test` against a fresh database of `kind`, then removes the database, even when the
/// test panics (the panic is passed on afterwards).
pub async fn run<F, Fut>(kind: Kind, test: F)
where
    F: FnOnce(Arc<TestDb>) -> Fut,
    Fut: Future<Output = ()> + Send + 'static,
{
    let db = Arc::new(TestDb::new(kind).await);
    let outcome = tokio::spawn(test(Arc::clone(&db))).await;
    db.cleanup().await;
    if let Err(e) = outcome {
        std::panic::resume_unwind(e.into_panic());
    }
}

/// Declares one `#[tokio::test]` per backend for each listed suite function.
#[macro_export]
macro_rules! on_every_backend {
    ($($name:ident),+ $(,)?) => {
        mod sqlite {
            $(
                #[tokio::test]
                async fn $name() {
                    $crate::common::run($crate::common::Kind::Sqlite, super::$name).await;
                }
            )+
        }
        mod postgres {
            $(
                #[tokio::test]
                async fn $name() {
                    $crate::common::run($crate::common::Kind::Postgres, super::$name).await;
                }
            )+
        }
    };
}

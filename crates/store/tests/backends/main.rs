//! The same suite against SQLite (a temporary file) and PostgreSQL (a fresh database per test,
//! on the server named by `IMAGEGATE_TEST_POSTGRES_URL`, default
//! `postgres://postgres@127.0.0.1:5432/test`).
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::disallowed_methods
)]

mod common;

mod accounts;
mod group_access;
mod keys;
mod outage;
mod usage;
mod users;

use imagegate_store::{MasterKey, StoreError, connect};

#[tokio::test]
async fn unknown_url_schemes_are_refused() {
    let key = MasterKey::generate().unwrap();
    let err = connect("mysql://root@localhost/db", &key).await.unwrap_err();
    assert!(
        matches!(err, StoreError::UnsupportedUrl(ref m) if m.contains("mysql")),
        "{err}"
    );
    let err = connect("not a url", &key).await.unwrap_err();
    assert!(matches!(err, StoreError::UnsupportedUrl(_)), "{err}");
}

#[tokio::test]
async fn in_memory_sqlite_keeps_its_data_across_calls() {
    let key = MasterKey::generate().unwrap();
    let store = connect("sqlite::memory:", &key).await.unwrap();
    let group = store.create_group("memory").await.unwrap();
    assert_eq!(store.group(group.id).await.unwrap().name, "memory");
    assert_eq!(store.list_groups().await.unwrap().len(), 2);
}

#[tokio::test]
async fn sqlite_file_path_connect_creates_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("with space?#.db");
    let key = MasterKey::generate().unwrap();
    let store = imagegate_store::connect_sqlite_file(&path, &key).await.unwrap();
    store.ping().await.unwrap();
    assert!(path.exists());
    store.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn processes_opening_a_new_sqlite_file_together_migrate_it_once() {
    // The gateway and an admin command started together on a fresh data directory (or several
    // gateways sharing one): each applies the migrations, and none may fail because another one
    // created the tables a moment before.
    for round in 0..5 {
        let dir = tempfile::tempdir().unwrap();
        let url = format!("sqlite://{}?mode=rwc", dir.path().join("new.db").display());
        let key = MasterKey::generate().unwrap();
        let opening: Vec<_> = (0..6)
            .map(|_| {
                let (url, key) = (url.clone(), key.clone());
                tokio::spawn(async move { connect(&url, &key).await.map(|_| ()) })
            })
            .collect();
        for open in opening {
            open.await
                .unwrap()
                .unwrap_or_else(|e| panic!("round {round}: {e}"));
        }
        let store = connect(&url, &key).await.unwrap();
        assert_eq!(store.list_groups().await.unwrap().len(), 1, "round {round}");
    }
}

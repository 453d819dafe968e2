//! Database outages: usage records are spooled on disk while PostgreSQL is unreachable and
//! replayed when it is back (none lost, none doubled); the key cache serves known keys stale;
//! a spool left by a dead process is replayed at the next start, on either backend.

use std::sync::Arc;
use std::time::Duration;

use imagegate_store::{
    KeyCache, NewApiKey, NewKey, NewUser, Store, UsageRecord, UsageSink, UsageSpool, UsageWriter,
    UsageWriterConfig, WriterStats, connect,
};
use imagegate_testkit::TcpProxy;

use crate::common::{Kind, TestDb};

crate::on_every_backend!(a_spool_left_by_a_dead_process_is_replayed_at_the_next_start);

/// Fast retries so an outage is noticed (and its end too) within a fraction of a second.
fn writer_config() -> UsageWriterConfig {
    UsageWriterConfig {
        batch_size: 10,
        flush_interval: Duration::from_millis(50),
        retry_initial: Duration::from_millis(20),
        retry_max: Duration::from_millis(200),
        shutdown_timeout: Duration::from_secs(10),
        ..UsageWriterConfig::default()
    }
}

fn record(prefix: &str, i: usize) -> UsageRecord {
    UsageRecord::new(format!("{prefix}-{i}"), "/v1/images/generations", "gpt-image-2")
}

/// Waits up to 30 s for `done` (a bound, not a timing claim).
async fn wait_for(what: &str, sink: &UsageSink, done: impl Fn(&WriterStats) -> bool) {
    for _ in 0..600 {
        if done(&sink.stats()) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("{what} not reached within 30 s: {:?}", sink.stats());
}

async fn usage_rows(db: &TestDb) -> (i64, i64) {
    let total = db.raw_ints("SELECT COUNT(*) FROM usage_records").await[0];
    let distinct = db
        .raw_ints("SELECT COUNT(DISTINCT request_id) FROM usage_records")
        .await[0];
    (total, distinct)
}

/// The database URL with its host and port replaced by the proxy's.
async fn through_proxy(db: &TestDb) -> (TcpProxy, String) {
    let (scheme_user, rest) = db.url.split_once('@').unwrap();
    let (host_port, name) = rest.split_once('/').unwrap();
    let target = tokio::net::lookup_host(host_port).await.unwrap().next().unwrap();
    let proxy = TcpProxy::start(target).await.unwrap();
    let url = format!("{scheme_user}@{}/{name}", proxy.addr());
    (proxy, url)
}

async fn new_key(store: &dyn Store, user: &str) -> NewKey {
    let user = store
        .create_user(NewUser {
            name: user.into(),
            ..NewUser::default()
        })
        .await
        .unwrap();
    let group = store.default_group().await.unwrap();
    store
        .create_key(NewApiKey {
            user_id: user.id,
            group_id: group.id,
            name: "outage".into(),
            limits: Default::default(),
            fallback_ladder: false,
        })
        .await
        .unwrap()
}

#[tokio::test]
async fn usage_written_during_a_postgres_outage_is_spooled_then_replayed() {
    crate::common::run(Kind::Postgres, |db| async move {
        let (proxy, url) = through_proxy(&db).await;
        let store = connect(&url, &db.master_key).await.unwrap();
        let spool_dir = tempfile::tempdir().unwrap();
        let spool = UsageSpool::open(spool_dir.path()).unwrap();
        let (sink, writer) = UsageWriter::spawn_spooled(Arc::clone(&store), writer_config(), spool);

        for i in 0..10 {
            sink.record(record("before", i)).unwrap();
        }
        wait_for("written before the outage", &sink, |s| s.written == 10).await;

        proxy.cut();
        for i in 0..25 {
            sink.record(record("during", i)).unwrap();
        }
        wait_for("spooled during the outage", &sink, |s| {
            s.spooled == 25 && s.pending == 0
        })
        .await;
        assert_eq!(usage_rows(&db).await, (10, 10), "nothing reached the database");
        assert_eq!(sink.stats().replayed, 0);

        proxy.restore();
        wait_for("replayed after the outage", &sink, |s| s.replayed == 25).await;
        for i in 0..5 {
            sink.record(record("after", i)).unwrap();
        }
        drop(sink);
        let stats = writer.shutdown().await.unwrap();
        assert_eq!(usage_rows(&db).await, (40, 40), "none lost, none doubled");
        assert_eq!(stats.written, 40);
        assert_eq!(stats.failed_spool_writes, 0);
        assert!(stats.failed_writes > 0);
        assert_eq!(
            std::fs::read_dir(spool_dir.path()).unwrap().count(),
            0,
            "the emptied spool file is gone"
        );
        store.close().await;
    })
    .await;
}

#[tokio::test]
async fn known_keys_keep_working_while_postgres_is_unreachable() {
    crate::common::run(Kind::Postgres, |db| async move {
        let (proxy, url) = through_proxy(&db).await;
        let store = connect(&url, &db.master_key).await.unwrap();
        let known = new_key(db.store.as_ref(), "known").await;
        let unknown = new_key(db.store.as_ref(), "unknown").await;
        // A zero TTL sends every call to the store: the stale entry is only used on failure.
        let cache = KeyCache::new(Arc::clone(&store), Duration::ZERO)
            .with_outage_policy(Duration::from_secs(3600), Duration::ZERO);
        let held = KeyCache::new(Arc::clone(&store), Duration::ZERO)
            .with_outage_policy(Duration::from_secs(3600), Duration::from_secs(3600));
        for c in [&cache, &held] {
            assert!(c.authenticate(known.key.expose()).await.unwrap().is_some());
        }

        proxy.cut();
        for c in [&cache, &held] {
            let auth = c.authenticate(known.key.expose()).await.unwrap().unwrap();
            assert_eq!(auth.key_id, known.record.id, "served from the cache");
            let err = c.authenticate(unknown.key.expose()).await.unwrap_err();
            assert!(err.is_unavailable(), "{err}");
        }

        proxy.restore();
        // Without a hold the store is asked again at once; with one, not before it ends.
        assert!(cache.authenticate(unknown.key.expose()).await.unwrap().is_some());
        let err = held.authenticate(unknown.key.expose()).await.unwrap_err();
        assert!(err.is_unavailable(), "{err}");
        assert!(held.authenticate(known.key.expose()).await.unwrap().is_some());

        // A key deleted while cached is not served stale by a later outage.
        db.store.delete_key(known.record.id).await.unwrap();
        assert!(cache.authenticate(known.key.expose()).await.unwrap().is_none());
        proxy.cut();
        assert!(cache.authenticate(known.key.expose()).await.is_err());
        store.close().await;
    })
    .await;
}

async fn a_spool_left_by_a_dead_process_is_replayed_at_the_next_start(db: Arc<TestDb>) {
    let spool_dir = tempfile::tempdir().unwrap();
    let already_stored = record("crash", 0);
    db.store
        .insert_usage_batch(std::slice::from_ref(&already_stored))
        .await
        .unwrap();

    let mut dead = UsageSpool::open(spool_dir.path()).unwrap();
    let records: Vec<UsageRecord> = (0..12).map(|i| record("crash", i)).collect();
    dead.append(&records[..7]).unwrap();
    dead.append(&records[7..]).unwrap();
    let path = dead.path().to_owned();
    // The process dies: its lock goes, its file stays, with half a line written at the end.
    drop(dead);
    let half = serde_json::to_string(&record("crash", 99)).unwrap();
    let mut tail = std::fs::OpenOptions::new().append(true).open(&path).unwrap();
    std::io::Write::write_all(&mut tail, &half.as_bytes()[..half.len() / 2]).unwrap();
    drop(tail);

    let spool = UsageSpool::open(spool_dir.path()).unwrap();
    let (sink, writer) = UsageWriter::spawn_spooled(Arc::clone(&db.store), writer_config(), spool);
    wait_for("replay of the dead process's spool", &sink, |s| s.replayed == 12).await;
    drop(sink);
    let stats = writer.shutdown().await.unwrap();
    assert_eq!(stats.written, 11);
    assert_eq!(
        stats.duplicates, 1,
        "the record stored before the crash is not doubled"
    );
    assert_eq!(usage_rows(&db).await, (12, 12));
    assert!(!path.exists());
}

#[tokio::test]
async fn values_postgres_cannot_store_are_set_aside_even_a_whole_batch_of_them() {
    crate::common::run(Kind::Postgres, |db| async move {
        // A column narrower than what some records carry: PostgreSQL refuses those values
        // (SQLSTATE 22001, a data exception), whatever else the batch holds.
        db.execute(&["ALTER TABLE usage_records ALTER COLUMN model TYPE VARCHAR(12)"])
            .await;
        let spool_dir = tempfile::tempdir().unwrap();
        let spool = UsageSpool::open(spool_dir.path()).unwrap();
        let config = UsageWriterConfig {
            batch_size: 3,
            ..writer_config()
        };
        let (sink, writer) = UsageWriter::spawn_spooled(Arc::clone(&db.store), config, spool);
        // A first batch of nothing but such records, then one the column takes.
        for i in 0..3 {
            let long = UsageRecord::new(
                format!("long-{i}"),
                "/v1/images/generations",
                "a-model-name-longer-than-the-column",
            );
            sink.record(long).unwrap();
        }
        for i in 0..3 {
            sink.record(record("short", i)).unwrap();
        }
        wait_for("the short records in the database", &sink, |s| {
            s.written == 3 && s.set_aside == 3
        })
        .await;
        drop(sink);
        let stats = writer.shutdown().await.unwrap();
        assert_eq!(stats.pending, 0, "{stats:?}");
        assert_eq!(usage_rows(&db).await, (3, 3));
        let rejected: usize = std::fs::read_dir(spool_dir.path())
            .unwrap()
            .map(|entry| entry.unwrap().path())
            .filter(|path| path.extension().is_some_and(|e| e == "rejected"))
            .map(|path| std::fs::read_to_string(path).unwrap().lines().count())
            .sum();
        assert_eq!(
            rejected, 3,
            "the refused records are kept in the spool's *.rejected file"
        );
    })
    .await;
}

//! Unit tests of the usage writer against an in-memory backend that can fail on demand.

#![allow(clippy::disallowed_methods)]

use std::sync::Mutex;
use std::sync::atomic::AtomicBool;

use super::*;
use crate::error::StoreError;
use crate::model::{KeyId, Timestamp};

#[derive(Default)]
struct FakeBackend {
    batches: Mutex<Vec<Vec<String>>>,
    touches: Mutex<Vec<KeyUse>>,
    fail_next: AtomicUsize,
    fail_always: AtomicBool,
    /// While set, inserts never return (a connection gone silent).
    hang: AtomicBool,
    priority: Mutex<Option<WriterPriority>>,
    /// The priority each successful batch was written at.
    priorities: Mutex<Vec<WriterPriority>>,
    /// While set, `touch_keys` waits (until `touches_released` is notified).
    hold_touches: AtomicBool,
    touches_released: tokio::sync::Notify,
    /// Request ids the database refuses: a batch holding one fails, for a value it cannot store
    /// or, with `refuse_as_constraint`, for a constraint it breaks.
    refused: Mutex<Vec<String>>,
    refuse_as_constraint: AtomicBool,
    /// Request ids whose batch fails as if the database were unreachable.
    unreachable_at: Mutex<Vec<String>>,
    /// Inserts tried, whatever their outcome.
    attempts: AtomicUsize,
}

/// A check constraint's violation, as a database reports it.
#[derive(Debug)]
struct CheckViolation(String);

impl std::fmt::Display for CheckViolation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for CheckViolation {}

impl sqlx::error::DatabaseError for CheckViolation {
    fn message(&self) -> &str {
        &self.0
    }

    fn as_error(&self) -> &(dyn std::error::Error + Send + Sync + 'static) {
        self
    }

    fn as_error_mut(&mut self) -> &mut (dyn std::error::Error + Send + Sync + 'static) {
        self
    }

    fn into_error(self: Box<Self>) -> Box<dyn std::error::Error + Send + Sync + 'static> {
        self
    }

    fn kind(&self) -> sqlx::error::ErrorKind {
        sqlx::error::ErrorKind::CheckViolation
    }
}

impl FakeBackend {
    fn written_ids(&self) -> Vec<String> {
        self.batches.lock().unwrap().iter().flatten().cloned().collect()
    }
}

#[async_trait]
impl UsageBackend for FakeBackend {
    async fn insert_usage_batch(&self, records: &[UsageRecord]) -> StoreResult<u64> {
        self.attempts.fetch_add(1, Ordering::SeqCst);
        if self.hang.load(Ordering::SeqCst) {
            std::future::pending::<()>().await;
        }
        let failing = self.fail_always.load(Ordering::SeqCst)
            || self
                .fail_next
                .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
                .is_ok();
        if failing {
            return Err(StoreError::Invalid("database unavailable (fake)".to_owned()));
        }
        if records
            .iter()
            .any(|r| self.unreachable_at.lock().unwrap().contains(&r.request_id))
        {
            return Err(StoreError::Unavailable("database unavailable (fake)".to_owned()));
        }
        let refused = self.refused.lock().unwrap();
        if let Some(bad) = records.iter().find(|r| refused.contains(&r.request_id)) {
            if self.refuse_as_constraint.load(Ordering::SeqCst) {
                let refusal = format!("{} breaks a check (fake)", bad.request_id);
                return Err(StoreError::Database(sqlx::Error::Database(Box::new(
                    CheckViolation(refusal),
                ))));
            }
            let refusal = format!("value of {} refused (fake)", bad.request_id);
            return Err(StoreError::Database(sqlx::Error::Encode(refusal.into())));
        }
        drop(refused);
        let ids = records.iter().map(|r| r.request_id.clone()).collect();
        self.batches.lock().unwrap().push(ids);
        let priority = self.priority.lock().unwrap().expect("set before every insert");
        self.priorities.lock().unwrap().push(priority);
        Ok(records.len() as u64)
    }

    async fn touch_keys(&self, uses: &[KeyUse]) -> StoreResult<()> {
        while self.hold_touches.load(Ordering::SeqCst) {
            self.touches_released.notified().await;
        }
        self.touches.lock().unwrap().extend_from_slice(uses);
        Ok(())
    }

    fn set_priority(&self, priority: WriterPriority) {
        *self.priority.lock().unwrap() = Some(priority);
    }
}

/// Log lines written while a subscriber of it is the default.
#[derive(Clone, Default)]
struct CapturedLogs(Arc<Mutex<Vec<u8>>>);

impl CapturedLogs {
    fn subscriber(&self) -> impl tracing::Subscriber + Send + Sync + 'static {
        let logs = self.clone();
        tracing_subscriber::fmt()
            .with_ansi(false)
            .with_writer(move || logs.clone())
            .finish()
    }

    fn text(&self) -> String {
        String::from_utf8_lossy(&self.0.lock().unwrap()).into_owned()
    }
}

impl std::io::Write for CapturedLogs {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

fn record(i: usize) -> UsageRecord {
    let mut r = UsageRecord::new(format!("req-{i}"), "/v1/images/generations", "gpt-image-2");
    r.created_at = Timestamp::from_unix_ms(1_000 + i as i64);
    r.key_id = Some(KeyId((i % 2) as i64 + 1));
    r
}

fn config() -> UsageWriterConfig {
    UsageWriterConfig {
        batch_size: 3,
        flush_interval: Duration::from_secs(3600),
        queue_capacity: 100,
        retry_initial: Duration::from_millis(100),
        retry_max: Duration::from_secs(1),
        shutdown_timeout: Duration::from_secs(5),
        touch_keys: true,
        spool_after_failures: 3,
        write_timeout: Duration::from_secs(15),
    }
}

/// Lets the writer task run until `done` holds (time is paused, so sleeps advance instantly).
async fn wait_until(done: impl Fn() -> bool) {
    for _ in 0..10_000 {
        if done() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("condition not reached");
}

#[tokio::test(start_paused = true)]
async fn writes_full_batches_without_waiting_for_the_interval() {
    let backend = Arc::new(FakeBackend::default());
    let (sink, writer) = UsageWriter::spawn_with(backend.clone(), config(), None);
    for i in 0..6 {
        sink.record(record(i)).unwrap();
    }
    wait_until(|| backend.batches.lock().unwrap().len() == 2).await;
    assert_eq!(backend.batches.lock().unwrap()[0], ["req-0", "req-1", "req-2"]);
    assert_eq!(sink.queue_depth(), 0);
    let stats = writer.shutdown().await.unwrap();
    assert_eq!(stats.written, 6);
    assert_eq!(stats.pending, 0);
}

#[tokio::test(start_paused = true)]
async fn writes_in_the_background_unless_records_pile_up() {
    let backend = Arc::new(FakeBackend::default());
    let (sink, writer) = UsageWriter::spawn_with(backend.clone(), config(), None);
    // Ten records before the writer runs: more than BACKLOG_BATCHES (2) batches of 3 wait.
    for i in 0..10 {
        sink.record(record(i)).unwrap();
    }
    // Three full batches, then the interval's first (immediate) tick writes the last record.
    wait_until(|| backend.batches.lock().unwrap().len() == 4).await;
    use WriterPriority::{Background, Normal};
    // 10 pending, then 7: behind. Then 4, then 1: caught up.
    assert_eq!(
        *backend.priorities.lock().unwrap(),
        [Normal, Normal, Background, Background]
    );
    // Keeping up: a full batch goes in the background.
    for i in 10..13 {
        sink.record(record(i)).unwrap();
    }
    wait_until(|| backend.batches.lock().unwrap().len() == 5).await;
    assert_eq!(backend.priorities.lock().unwrap()[4], Background);
    // What shutdown writes goes at normal priority.
    sink.record(record(13)).unwrap();
    writer.shutdown().await.unwrap();
    assert_eq!(backend.written_ids().len(), 14);
    assert_eq!(backend.priorities.lock().unwrap()[5..], [Normal]);
}

#[tokio::test(start_paused = true)]
async fn writes_a_partial_batch_when_the_interval_elapses() {
    let backend = Arc::new(FakeBackend::default());
    let cfg = UsageWriterConfig {
        flush_interval: Duration::from_millis(200),
        ..config()
    };
    let (sink, writer) = UsageWriter::spawn_with(backend.clone(), cfg, None);
    sink.record(record(7)).unwrap();
    assert_eq!(sink.queue_depth(), 1);
    wait_until(|| !backend.written_ids().is_empty()).await;
    assert_eq!(backend.written_ids(), ["req-7"]);
    writer.shutdown().await.unwrap();
}

#[tokio::test(start_paused = true)]
async fn failed_writes_are_retried_and_nothing_is_lost() {
    let backend = Arc::new(FakeBackend::default());
    backend.fail_next.store(4, Ordering::SeqCst);
    let (sink, writer) = UsageWriter::spawn_with(backend.clone(), config(), None);
    for i in 0..5 {
        sink.record(record(i)).unwrap();
    }
    let stats = writer.shutdown().await.unwrap();
    assert_eq!(stats.failed_writes, 4);
    assert_eq!(stats.written, 5);
    assert_eq!(
        backend.written_ids(),
        ["req-0", "req-1", "req-2", "req-3", "req-4"]
    );
}

#[tokio::test(start_paused = true)]
async fn shutdown_flushes_everything_queued() {
    let backend = Arc::new(FakeBackend::default());
    let cfg = UsageWriterConfig {
        batch_size: 1000,
        ..config()
    };
    let (sink, writer) = UsageWriter::spawn_with(backend.clone(), cfg, None);
    for i in 0..10 {
        sink.record(record(i)).unwrap();
    }
    let stats = writer.shutdown().await.unwrap();
    assert_eq!(stats.written, 10);
    assert_eq!(backend.written_ids().len(), 10);
    let refused = sink.record(record(99)).unwrap_err();
    assert_eq!(refused.reason, RejectReason::ShutDown);
    assert_eq!(refused.record.request_id, "req-99");
}

#[tokio::test(start_paused = true)]
async fn shutdown_returns_records_it_could_not_write() {
    let backend = Arc::new(FakeBackend::default());
    backend.fail_always.store(true, Ordering::SeqCst);
    let (sink, writer) = UsageWriter::spawn_with(backend.clone(), config(), None);
    for i in 0..5 {
        sink.record(record(i)).unwrap();
    }
    match writer.shutdown().await {
        Err(WriterError::Unflushed { records, last_error }) => {
            let ids: Vec<_> = records.iter().map(|r| r.request_id.as_str()).collect();
            assert_eq!(ids, ["req-0", "req-1", "req-2", "req-3", "req-4"]);
            assert!(last_error.contains("unavailable"), "{last_error}");
        }
        other => panic!("expected unflushed records, got {other:?}"),
    }
    assert!(backend.written_ids().is_empty());
}

#[tokio::test(start_paused = true)]
async fn a_full_queue_hands_the_record_back() {
    let backend = Arc::new(FakeBackend::default());
    backend.fail_always.store(true, Ordering::SeqCst);
    let cfg = UsageWriterConfig {
        batch_size: 1,
        queue_capacity: 2,
        ..config()
    };
    let (sink, writer) = UsageWriter::spawn_with(backend.clone(), cfg, None);
    // The first record is taken by the task (stuck retrying); two more fill the queue.
    sink.record(record(0)).unwrap();
    wait_until(|| backend.fail_always.load(Ordering::SeqCst) && sink.stats().failed_writes > 0).await;
    sink.record(record(1)).unwrap();
    sink.record(record(2)).unwrap();
    let logs = CapturedLogs::default();
    let refused =
        tracing::subscriber::with_default(logs.subscriber(), || sink.record(record(3))).unwrap_err();
    assert_eq!(refused.reason, RejectReason::QueueFull);
    let logged = logs.text();
    let whole = serde_json::to_string(&record(3)).unwrap();
    assert!(
        logged.contains(&whole),
        "the refused record is logged whole, the last place it can go: {logged}"
    );
    assert_eq!(refused.record.request_id, "req-3");
    assert_eq!(sink.stats().rejected, 1);
    assert_eq!(sink.queue_depth(), 3);
    backend.fail_always.store(false, Ordering::SeqCst);
    let stats = writer.shutdown().await.unwrap();
    assert_eq!(backend.written_ids(), ["req-0", "req-1", "req-2"]);
    assert_eq!(stats.pending, 0);
}

#[tokio::test(start_paused = true)]
async fn keys_are_touched_with_their_latest_use() {
    let backend = Arc::new(FakeBackend::default());
    let (sink, writer) = UsageWriter::spawn_with(backend.clone(), config(), None);
    for i in 0..3 {
        sink.record(record(i)).unwrap();
    }
    writer.shutdown().await.unwrap();
    let mut touches = backend.touches.lock().unwrap().clone();
    touches.sort_by_key(|t| t.key_id);
    // Records 0 and 2 use key 1 (latest at 1002); record 1 uses key 2 (1001).
    assert_eq!(
        touches,
        [
            KeyUse {
                key_id: KeyId(1),
                at: Timestamp::from_unix_ms(1002)
            },
            KeyUse {
                key_id: KeyId(2),
                at: Timestamp::from_unix_ms(1001)
            },
        ]
    );
}

#[tokio::test(start_paused = true)]
async fn a_database_call_that_never_returns_does_not_hold_the_writer() {
    let backend = Arc::new(FakeBackend::default());
    backend.hang.store(true, Ordering::SeqCst);
    let (sink, writer) = UsageWriter::spawn_with(backend.clone(), config(), None);
    for i in 0..3 {
        sink.record(record(i)).unwrap();
    }
    wait_until(|| backend.priority.lock().unwrap().is_some()).await;
    let stopped = tokio::time::timeout(Duration::from_secs(600), writer.shutdown())
        .await
        .expect("shutdown ends although the database never answers");
    match stopped {
        Err(WriterError::Unflushed { records, last_error }) => {
            assert_eq!(records.len(), 3);
            assert!(last_error.contains("reached during a write"), "{last_error}");
        }
        other => panic!("{other:?}"),
    }
}

#[tokio::test(start_paused = true)]
async fn records_queued_behind_an_unwritable_batch_come_back_at_shutdown() {
    let backend = Arc::new(FakeBackend::default());
    backend.fail_always.store(true, Ordering::SeqCst);
    let (sink, writer) = UsageWriter::spawn_with(backend.clone(), config(), None);
    for i in 0..3 {
        sink.record(record(i)).unwrap();
    }
    wait_until(|| sink.stats().failed_writes > 0).await;
    for i in 3..5 {
        sink.record(record(i)).unwrap();
    }
    match writer.shutdown().await {
        Err(WriterError::Unflushed { records, .. }) => {
            let ids: Vec<_> = records.iter().map(|r| r.request_id.as_str()).collect();
            assert_eq!(ids, ["req-0", "req-1", "req-2", "req-3", "req-4"]);
        }
        other => panic!("{other:?}"),
    }
}

#[tokio::test(start_paused = true)]
async fn keys_are_touched_in_key_order() {
    // Replicas locking the same keys in different orders would deadlock in PostgreSQL.
    let backend = Arc::new(FakeBackend::default());
    let config = UsageWriterConfig {
        batch_size: 40,
        ..config()
    };
    let (sink, writer) = UsageWriter::spawn_with(backend.clone(), config, None);
    for i in 0..40 {
        let mut r = record(i);
        r.key_id = Some(KeyId((i as i64 * 7919) % 40));
        sink.record(r).unwrap();
    }
    writer.shutdown().await.unwrap();
    let touched: Vec<i64> = backend
        .touches
        .lock()
        .unwrap()
        .iter()
        .map(|t| t.key_id.0)
        .collect();
    assert_eq!(touched, (0..40).collect::<Vec<_>>());
}

#[tokio::test(start_paused = true)]
async fn dropping_every_sink_ends_the_task_after_writing() {
    let backend = Arc::new(FakeBackend::default());
    let cfg = UsageWriterConfig {
        batch_size: 1000,
        ..config()
    };
    let (sink, writer) = UsageWriter::spawn_with(backend.clone(), cfg, None);
    sink.record(record(1)).unwrap();
    drop(sink);
    wait_until(|| writer.task.is_finished()).await;
    assert_eq!(backend.written_ids(), ["req-1"]);
    assert_eq!(writer.shutdown().await.unwrap().written, 1);
}

#[tokio::test(start_paused = true)]
async fn batches_go_to_the_spool_while_the_database_is_down_and_are_replayed_after() {
    let dir = tempfile::tempdir().unwrap();
    let backend = Arc::new(FakeBackend::default());
    backend.fail_always.store(true, Ordering::SeqCst);
    let spool = UsageSpool::open(dir.path()).unwrap();
    let cfg = UsageWriterConfig {
        flush_interval: Duration::from_millis(200),
        ..config()
    };
    let (sink, writer) = UsageWriter::spawn_with(backend.clone(), cfg, Some(spool));
    for i in 0..6 {
        sink.record(record(i)).unwrap();
    }
    // The first batch fails three times and is spooled; the second goes straight after it.
    wait_until(|| sink.stats().spooled == 6).await;
    assert_eq!(sink.queue_depth(), 0, "spooled records no longer wait in memory");
    assert!(backend.written_ids().is_empty());
    sink.record(record(6)).unwrap();
    wait_until(|| sink.stats().spooled == 7).await;

    backend.fail_always.store(false, Ordering::SeqCst);
    wait_until(|| sink.stats().replayed == 7).await;
    let stats = writer.shutdown().await.unwrap();
    let mut ids = backend.written_ids();
    ids.sort();
    let mut expected: Vec<String> = (0..7).map(|i| format!("req-{i}")).collect();
    expected.sort();
    assert_eq!(ids, expected, "every record written once");
    assert_eq!(stats.pending, 0);
    assert_eq!(stats.written, 7);
    assert_eq!(stats.failed_spool_writes, 0);
    assert_eq!(
        std::fs::read_dir(dir.path()).unwrap().count(),
        0,
        "the emptied spool file is removed"
    );
}

/// A writer spooling into `dir`, flushing every `flush_interval`, whose shutdown deadline (30 s)
/// outlasts every write timeout here: what ends a write at shutdown is the shutdown's own limit.
fn spooling_writer(
    backend: &Arc<FakeBackend>,
    dir: &std::path::Path,
    flush_interval: Duration,
) -> (UsageSink, UsageWriter) {
    let cfg = UsageWriterConfig {
        flush_interval,
        shutdown_timeout: Duration::from_secs(30),
        ..config()
    };
    UsageWriter::spawn_with(backend.clone(), cfg, Some(UsageSpool::open(dir).unwrap()))
}

/// Asserts that what `happened` since the stop at `started` took at most one shutdown write (3 s,
/// virtual time), not a write timeout (15 s): on disk well before the orchestrator's kill.
fn within_one_shutdown_write(started: tokio::time::Instant, happened: &str) {
    let took = started.elapsed();
    assert!(
        took <= Duration::from_secs(4),
        "{happened} {took:?} after the stop"
    );
}

#[tokio::test(start_paused = true)]
async fn at_shutdown_a_silent_database_gets_one_short_try_before_the_spool() {
    // The database went silent (a network black hole); the writer is stopped with records queued.
    let dir = tempfile::tempdir().unwrap();
    let backend = Arc::new(FakeBackend::default());
    backend.hang.store(true, Ordering::SeqCst);
    let (sink, writer) = spooling_writer(&backend, dir.path(), config().flush_interval);
    // The writer's first flush (of nothing) is behind it; then fewer records than a batch come,
    // and wait for the next flush, which the shutdown makes.
    tokio::time::sleep(Duration::from_millis(10)).await;
    for i in 0..2 {
        sink.record(record(i)).unwrap();
    }
    tokio::time::sleep(Duration::from_millis(10)).await;
    assert_eq!(backend.attempts.load(Ordering::SeqCst), 0);
    let started = tokio::time::Instant::now();
    let stopping = tokio::spawn(writer.shutdown());
    wait_until(|| sink.stats().spooled == 2).await;
    // Virtual time (paused): on disk well before the orchestrator's kill, a few seconds after
    // the grace period, which three tries of a 15 s write timeout would outlast.
    within_one_shutdown_write(started, "spooled");
    let stats = stopping.await.unwrap().unwrap();
    assert_eq!(stats.spooled, 2);
    assert!(backend.written_ids().is_empty());
    assert_eq!(
        backend.attempts.load(Ordering::SeqCst),
        1,
        "no last replay into the database that just failed"
    );
    within_one_shutdown_write(started, "exited");
}

#[tokio::test(start_paused = true)]
async fn a_stop_during_a_write_into_a_silent_database_cuts_that_write_short() {
    // The database went silent while a batch was being written: that write has its whole 15 s
    // write timeout ahead of it when the stop comes.
    let dir = tempfile::tempdir().unwrap();
    let backend = Arc::new(FakeBackend::default());
    backend.hang.store(true, Ordering::SeqCst);
    let (sink, writer) = spooling_writer(&backend, dir.path(), config().flush_interval);
    for i in 0..3 {
        sink.record(record(i)).unwrap();
    }
    wait_until(|| backend.attempts.load(Ordering::SeqCst) == 1).await;
    let started = tokio::time::Instant::now();
    let stopping = tokio::spawn(writer.shutdown());
    wait_until(|| sink.stats().spooled == 3).await;
    // Virtual time: the write under way gets the shutdown's 3 s, not what is left of its 15 s.
    within_one_shutdown_write(started, "spooled");
    let stats = stopping.await.unwrap().unwrap();
    assert_eq!(stats.spooled, 3);
    assert_eq!(
        backend.attempts.load(Ordering::SeqCst),
        1,
        "the write was cut, not tried again"
    );
    within_one_shutdown_write(started, "exited");
}

#[tokio::test(start_paused = true)]
async fn a_stop_during_a_replay_into_a_silent_database_cuts_that_replay_short() {
    let dir = tempfile::tempdir().unwrap();
    let backend = Arc::new(FakeBackend::default());
    backend.fail_always.store(true, Ordering::SeqCst);
    let (sink, writer) = spooling_writer(&backend, dir.path(), Duration::from_millis(200));
    for i in 0..3 {
        sink.record(record(i)).unwrap();
    }
    wait_until(|| sink.stats().spooled == 3).await;
    // The database stops answering at all; the next replay hangs in its write.
    backend.hang.store(true, Ordering::SeqCst);
    backend.fail_always.store(false, Ordering::SeqCst);
    let before = backend.attempts.load(Ordering::SeqCst);
    wait_until(|| backend.attempts.load(Ordering::SeqCst) == before + 1).await;
    let started = tokio::time::Instant::now();
    let stats = writer.shutdown().await.unwrap();
    within_one_shutdown_write(started, "exited");
    assert_eq!(stats.replayed, 0);
    assert!(
        std::fs::read_dir(dir.path()).unwrap().count() > 0,
        "the spool stays for the next process"
    );
}

#[tokio::test(start_paused = true)]
async fn replayed_records_are_counted_as_soon_as_they_are_in_the_database() {
    let dir = tempfile::tempdir().unwrap();
    let backend = Arc::new(FakeBackend::default());
    backend.fail_always.store(true, Ordering::SeqCst);
    let spool = UsageSpool::open(dir.path()).unwrap();
    let cfg = UsageWriterConfig {
        flush_interval: Duration::from_millis(200),
        ..config()
    };
    let (sink, writer) = UsageWriter::spawn_with(backend.clone(), cfg, Some(spool));
    for i in 0..3 {
        sink.record(record(i)).unwrap();
    }
    wait_until(|| sink.stats().spooled == 3).await;
    backend.hold_touches.store(true, Ordering::SeqCst);
    backend.fail_always.store(false, Ordering::SeqCst);
    wait_until(|| backend.written_ids().len() == 3).await;
    // The rows are in while the keys' `last_used_at` update still waits: the counter says so.
    assert_eq!(sink.stats().replayed, 3);
    backend.hold_touches.store(false, Ordering::SeqCst);
    backend.touches_released.notify_one();
    assert_eq!(writer.shutdown().await.unwrap().replayed, 3);
}

#[tokio::test(start_paused = true)]
async fn records_spooled_at_shutdown_are_replayed_by_the_next_writer() {
    let dir = tempfile::tempdir().unwrap();
    let backend = Arc::new(FakeBackend::default());
    backend.fail_always.store(true, Ordering::SeqCst);
    let (sink, writer) = UsageWriter::spawn_with(
        backend.clone(),
        config(),
        Some(UsageSpool::open(dir.path()).unwrap()),
    );
    for i in 0..4 {
        sink.record(record(i)).unwrap();
    }
    drop(sink);
    let stats = writer.shutdown().await.unwrap();
    assert_eq!(stats.spooled, 4, "nothing is handed back: it is all on disk");
    assert!(backend.written_ids().is_empty());

    backend.fail_always.store(false, Ordering::SeqCst);
    let (sink, writer) = UsageWriter::spawn_with(
        backend.clone(),
        config(),
        Some(UsageSpool::open(dir.path()).unwrap()),
    );
    wait_until(|| sink.stats().replayed == 4).await;
    drop(sink);
    writer.shutdown().await.unwrap();
    assert_eq!(backend.written_ids().len(), 4);
}

fn refusing(ids: &[&str]) -> Arc<FakeBackend> {
    let backend = FakeBackend::default();
    *backend.refused.lock().unwrap() = ids.iter().map(|id| (*id).to_owned()).collect();
    Arc::new(backend)
}

/// The records in the spool directory's `*.rejected` files.
fn set_aside_ids(dir: &std::path::Path) -> Vec<String> {
    let mut ids = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "rejected") {
            for line in std::fs::read_to_string(&path).unwrap().lines() {
                let record: UsageRecord = serde_json::from_str(line).unwrap();
                ids.push(record.request_id);
            }
        }
    }
    ids
}

#[tokio::test(start_paused = true)]
async fn records_the_database_refuses_are_set_aside_and_the_rest_written() {
    let dir = tempfile::tempdir().unwrap();
    let backend = refusing(&["req-1", "req-5"]);
    let cfg = UsageWriterConfig {
        batch_size: 8,
        ..config()
    };
    let spool = UsageSpool::open(dir.path()).unwrap();
    let (sink, writer) = UsageWriter::spawn_with(backend.clone(), cfg, Some(spool));
    for i in 0..8 {
        sink.record(record(i)).unwrap();
    }
    wait_until(|| sink.stats().set_aside == 2).await;
    let mut written = backend.written_ids();
    written.sort();
    assert_eq!(written, ["req-0", "req-2", "req-3", "req-4", "req-6", "req-7"]);
    let mut aside = set_aside_ids(dir.path());
    aside.sort();
    assert_eq!(aside, ["req-1", "req-5"]);
    let stats = writer.shutdown().await.unwrap();
    assert_eq!(stats.pending, 0);
    assert_eq!(stats.written, 6);
    assert_eq!(
        stats.spooled, 0,
        "a refusal is not an outage: nothing waits in the spool"
    );
}

#[tokio::test(start_paused = true)]
async fn a_refused_record_in_the_spool_does_not_stop_its_replay() {
    let dir = tempfile::tempdir().unwrap();
    let backend = refusing(&["req-2"]);
    backend.fail_always.store(true, Ordering::SeqCst);
    let cfg = UsageWriterConfig {
        flush_interval: Duration::from_millis(200),
        ..config()
    };
    let spool = UsageSpool::open(dir.path()).unwrap();
    let (sink, writer) = UsageWriter::spawn_with(backend.clone(), cfg, Some(spool));
    for i in 0..6 {
        sink.record(record(i)).unwrap();
    }
    wait_until(|| sink.stats().spooled == 6).await;

    backend.fail_always.store(false, Ordering::SeqCst);
    wait_until(|| sink.stats().replayed == 5).await;
    assert_eq!(set_aside_ids(dir.path()), ["req-2"]);
    // Replayed, the spool is empty: a new record goes to the database, not behind the bad one.
    sink.record(record(6)).unwrap();
    drop(sink);
    let stats = writer.shutdown().await.unwrap();
    let mut written = backend.written_ids();
    written.sort();
    assert_eq!(written, ["req-0", "req-1", "req-3", "req-4", "req-5", "req-6"]);
    assert_eq!(stats.set_aside, 1);
    assert_eq!(stats.pending, 0);
}

#[tokio::test(start_paused = true)]
async fn without_a_spool_a_refused_record_is_counted_and_the_rest_written() {
    let backend = refusing(&["req-0"]);
    let (sink, writer) = UsageWriter::spawn_with(backend.clone(), config(), None);
    for i in 0..3 {
        sink.record(record(i)).unwrap();
    }
    drop(sink);
    let stats = writer.shutdown().await.unwrap();
    assert_eq!(backend.written_ids(), ["req-1", "req-2"]);
    assert_eq!(stats.set_aside, 1);
    assert_eq!(stats.pending, 0);
}

#[tokio::test(start_paused = true)]
async fn a_replay_cut_short_after_setting_a_record_aside_does_not_set_it_aside_twice() {
    let dir = tempfile::tempdir().unwrap();
    let backend = refusing(&["req-2"]);
    backend.fail_always.store(true, Ordering::SeqCst);
    let cfg = UsageWriterConfig {
        flush_interval: Duration::from_millis(200),
        ..config()
    };
    let spool = UsageSpool::open(dir.path()).unwrap();
    let (sink, writer) = UsageWriter::spawn_with(backend.clone(), cfg, Some(spool));
    for i in 0..6 {
        sink.record(record(i)).unwrap();
    }
    wait_until(|| sink.stats().spooled == 6).await;

    // The database is back for the first batch (req-2 is set aside) but not for the second: the
    // replay stops there, and the next ones start again from the first batch.
    *backend.unreachable_at.lock().unwrap() = vec!["req-4".to_owned()];
    backend.fail_always.store(false, Ordering::SeqCst);
    wait_until(|| backend.written_ids().iter().filter(|id| *id == "req-0").count() >= 3).await;
    backend.unreachable_at.lock().unwrap().clear();
    wait_until(|| backend.written_ids().contains(&"req-5".to_owned())).await;
    drop(sink);
    let stats = writer.shutdown().await.unwrap();
    assert_eq!(
        set_aside_ids(dir.path()),
        ["req-2"],
        "one line, however many replays"
    );
    assert_eq!(stats.set_aside, 1);
}

#[tokio::test(start_paused = true)]
async fn a_batch_the_database_refuses_whole_is_spooled_like_an_outage_not_set_aside() {
    // A constraint every record breaks: nothing about these records is wrong, and setting them
    // all aside one insert at a time would leave the writer far behind.
    let dir = tempfile::tempdir().unwrap();
    let backend = refusing(&["req-0", "req-1", "req-2"]);
    backend.refuse_as_constraint.store(true, Ordering::SeqCst);
    let spool = UsageSpool::open(dir.path()).unwrap();
    let (sink, writer) = UsageWriter::spawn_with(backend.clone(), config(), Some(spool));
    for i in 0..3 {
        sink.record(record(i)).unwrap();
    }
    wait_until(|| sink.stats().spooled == 3).await;
    assert_eq!(sink.stats().set_aside, 0);
    assert!(set_aside_ids(dir.path()).is_empty());
    // The batch, then its parts ([0], [1, 2], [1], [2]); the two retries before spooling are not
    // split again (they would be 5 inserts each).
    assert_eq!(backend.attempts.load(Ordering::SeqCst), 7);
    drop(sink);
    let stats = writer.shutdown().await.unwrap();
    assert_eq!(stats.spooled, 3, "kept on disk for a later replay");
}

#[tokio::test(start_paused = true)]
async fn a_batch_whose_every_value_is_refused_is_set_aside_and_the_spool_replayed() {
    // Values the database cannot store, in every record of a batch (say a thousand refused
    // requests naming a model in characters its encoding lacks): those records are the problem,
    // not the database. Handed back like an outage's they would head the spool for good, and
    // nothing would be replayed again.
    let dir = tempfile::tempdir().unwrap();
    let backend = refusing(&["req-0", "req-1", "req-2"]);
    backend.fail_always.store(true, Ordering::SeqCst);
    let cfg = UsageWriterConfig {
        batch_size: 3,
        flush_interval: Duration::from_millis(200),
        ..config()
    };
    let spool = UsageSpool::open(dir.path()).unwrap();
    let (sink, writer) = UsageWriter::spawn_with(backend.clone(), cfg, Some(spool));
    for i in 0..9 {
        sink.record(record(i)).unwrap();
    }
    wait_until(|| sink.stats().spooled == 9).await;

    backend.fail_always.store(false, Ordering::SeqCst);
    wait_until(|| sink.stats().replayed == 6).await;
    let mut aside = set_aside_ids(dir.path());
    aside.sort();
    assert_eq!(aside, ["req-0", "req-1", "req-2"]);
    // Replayed, the spool is empty: a new record goes to the database.
    sink.record(record(9)).unwrap();
    drop(sink);
    let stats = writer.shutdown().await.unwrap();
    let mut written = backend.written_ids();
    written.sort();
    assert_eq!(
        written,
        ["req-3", "req-4", "req-5", "req-6", "req-7", "req-8", "req-9"]
    );
    assert_eq!(stats.set_aside, 3);
    assert_eq!(stats.pending, 0);
}

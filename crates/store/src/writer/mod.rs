//! [`UsageWriter`]: batches usage records and writes them in the background.
//!
//! The server hands each record to a cloneable [`UsageSink`] without waiting for the database.
//! A task collects records and inserts them every `batch_size` records or `flush_interval`,
//! whichever comes first. When a write fails, the batch is kept and retried with exponential
//! backoff; new records wait in a bounded queue meanwhile.
//!
//! With a [`UsageSpool`] ([`UsageWriter::spawn_spooled`]), a batch that still fails after
//! `spool_after_failures` attempts is appended to the spool file (fsynced) instead, and so is every
//! later batch until a replay of the spool into the database succeeds; replays are tried every
//! flush interval with backoff up to `retry_max`. If the spool cannot be written (disk full), the
//! batch stays in memory and is retried as without a spool ([`WriterStats::failed_spool_writes`]).
//!
//! Writes run at [`WriterPriority::Background`] while the writer keeps up, and at
//! [`WriterPriority::Normal`] while more than [`BACKLOG_BATCHES`] batches wait, while the spool
//! holds records, and during shutdown.
//!
//! A batch the database refuses for what it holds (a constraint, a value it cannot take) is
//! stored in halves until each refused record stands alone; those are set aside
//! ([`UsageSpool::set_aside`], or the log without a spool) and counted in
//! [`WriterStats::set_aside`], so one bad record never holds back the others.
//!
//! A record is lost only visibly: the sink refuses it when the queue is full (handing it back), or
//! [`UsageWriter::shutdown`] returns the records it could neither write nor spool before its
//! deadline.

mod flusher;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use tokio::sync::{Notify, mpsc};
use tokio::task::JoinHandle;
use tokio::time::Instant;

use self::flusher::Flusher;
use crate::error::StoreResult;
use crate::model::{KeyUse, UsageRecord};
use crate::priority::WriterPriority;
use crate::spool::UsageSpool;
use crate::store::Store;

/// Waiting batches beyond which the writer stops deferring to request handling.
pub const BACKLOG_BATCHES: usize = 2;

/// Tuning of a [`UsageWriter`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UsageWriterConfig {
    /// Write as soon as this many records are waiting. Each write is one transaction whose fixed
    /// cost (the pages every commit rewrites, checkpoints) dwarfs a row's, so at high rates large
    /// batches matter: on SQLite, 1,000 rather than 200 cut the usage writer's CPU per request
    /// from about 18 µs to about 4 µs (measured at commit f60a1b1).
    pub batch_size: usize,
    /// Write whatever is waiting at least this often.
    pub flush_interval: Duration,
    /// Records that may wait in the queue; beyond that [`UsageSink::record`] refuses.
    pub queue_capacity: usize,
    /// First delay after a failed write.
    pub retry_initial: Duration,
    /// Longest delay between retries.
    pub retry_max: Duration,
    /// How long [`UsageWriter::shutdown`] keeps retrying before giving the records back.
    pub shutdown_timeout: Duration,
    /// Also move the keys' `last_used_at` forward after each write.
    pub touch_keys: bool,
    /// With a spool: failed attempts at a batch before it goes to the spool.
    pub spool_after_failures: u32,
    /// Longest wait for one database call. A connection that went silent (a network black hole)
    /// or an insert stuck behind a lock otherwise holds the writer until TCP gives up, about 15
    /// minutes, while the queue fills and nothing is spooled; a call that outlasts this counts as
    /// a failed attempt (a late commit of it is harmless: request ids are unique).
    pub write_timeout: Duration,
}

impl Default for UsageWriterConfig {
    fn default() -> Self {
        Self {
            batch_size: 1000,
            flush_interval: Duration::from_millis(500),
            queue_capacity: 50_000,
            retry_initial: Duration::from_millis(100),
            retry_max: Duration::from_secs(10),
            shutdown_timeout: Duration::from_secs(30),
            touch_keys: true,
            spool_after_failures: 3,
            write_timeout: Duration::from_secs(15),
        }
    }
}

/// Counters of a writer, for metrics.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct WriterStats {
    /// Records accepted but not yet written (queued or being written).
    pub pending: usize,
    /// Records written.
    pub written: u64,
    /// Records skipped by the database because their request id was already stored.
    pub duplicates: u64,
    /// Records refused by the sink (queue full or writer stopped).
    pub rejected: u64,
    /// Failed write attempts (each was retried, or its batch spooled).
    pub failed_writes: u64,
    /// Records put in the local spool because the database was unreachable.
    pub spooled: u64,
    /// Spooled records later stored in the database (including those of a previous process).
    pub replayed: u64,
    /// Failed appends to the spool (disk full?); the batch stayed in memory.
    pub failed_spool_writes: u64,
    /// Records the database refused one by one (a constraint, a value it cannot take), set aside
    /// in the spool's `*.rejected` file (or, without a spool, in the log) so the others go in.
    pub set_aside: u64,
}

/// Why a sink refused a record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RejectReason {
    /// The queue holds `queue_capacity` records (the database is likely down or slow).
    QueueFull,
    /// The writer has shut down.
    ShutDown,
}

/// A record the sink could not accept; the record is handed back.
#[derive(Debug, thiserror::Error)]
#[error("usage record {} refused: {reason:?}", record.request_id)]
pub struct RecordRejected {
    /// Why.
    pub reason: RejectReason,
    /// The record, for the caller to log or keep.
    pub record: Box<UsageRecord>,
}

/// How shutting a writer down can fail.
#[derive(Debug, thiserror::Error)]
pub enum WriterError {
    /// The database kept failing until the shutdown deadline; these records were not written.
    #[error("{} usage records not written: {last_error}", records.len())]
    Unflushed {
        /// The records, oldest first.
        records: Vec<UsageRecord>,
        /// The last database error.
        last_error: String,
    },
    /// The writer task panicked or was cancelled.
    #[error("usage writer task failed: {0}")]
    TaskFailed(String),
}

#[derive(Debug, Default)]
struct Counters {
    pending: AtomicUsize,
    written: AtomicU64,
    duplicates: AtomicU64,
    rejected: AtomicU64,
    failed_writes: AtomicU64,
    spooled: AtomicU64,
    replayed: AtomicU64,
    failed_spool_writes: AtomicU64,
    set_aside: AtomicU64,
}

impl Counters {
    fn snapshot(&self) -> WriterStats {
        WriterStats {
            pending: self.pending.load(Ordering::Relaxed),
            written: self.written.load(Ordering::Relaxed),
            duplicates: self.duplicates.load(Ordering::Relaxed),
            rejected: self.rejected.load(Ordering::Relaxed),
            failed_writes: self.failed_writes.load(Ordering::Relaxed),
            spooled: self.spooled.load(Ordering::Relaxed),
            replayed: self.replayed.load(Ordering::Relaxed),
            failed_spool_writes: self.failed_spool_writes.load(Ordering::Relaxed),
            set_aside: self.set_aside.load(Ordering::Relaxed),
        }
    }
}

/// The sending side: cheap to clone, never waits for the database.
#[derive(Debug, Clone)]
pub struct UsageSink {
    tx: mpsc::Sender<UsageRecord>,
    counters: Arc<Counters>,
}

impl UsageSink {
    /// Queues a record without waiting. On refusal the record comes back in the error (and
    /// is counted in [`WriterStats::rejected`]).
    pub fn record(&self, record: UsageRecord) -> Result<(), RecordRejected> {
        self.counters.pending.fetch_add(1, Ordering::AcqRel);
        self.tx.try_send(record).map_err(|e| {
            let (reason, record) = match e {
                mpsc::error::TrySendError::Full(r) => (RejectReason::QueueFull, r),
                mpsc::error::TrySendError::Closed(r) => (RejectReason::ShutDown, r),
            };
            self.refused(reason, record)
        })
    }

    /// Queues a record, waiting for room if the queue is full.
    pub async fn record_wait(&self, record: UsageRecord) -> Result<(), RecordRejected> {
        self.counters.pending.fetch_add(1, Ordering::AcqRel);
        self.tx
            .send(record)
            .await
            .map_err(|e| self.refused(RejectReason::ShutDown, e.0))
    }

    /// Records accepted but not yet written.
    pub fn queue_depth(&self) -> usize {
        self.counters.pending.load(Ordering::Relaxed)
    }

    /// The writer's counters.
    pub fn stats(&self) -> WriterStats {
        self.counters.snapshot()
    }

    fn refused(&self, reason: RejectReason, record: UsageRecord) -> RecordRejected {
        self.counters.pending.fetch_sub(1, Ordering::AcqRel);
        self.counters.rejected.fetch_add(1, Ordering::Relaxed);
        // Unless the caller keeps it, the log is the last place the record can go (it holds ids,
        // counts and times, no secret and no image).
        match serde_json::to_string(&record) {
            Ok(json) => tracing::error!(?reason, record = %json, "usage record refused by the writer"),
            Err(_) => {
                tracing::error!(request_id = %record.request_id, ?reason, "usage record refused by the writer");
            }
        }
        RecordRejected {
            reason,
            record: Box::new(record),
        }
    }
}

/// What the writer needs from a store; a seam for tests.
#[async_trait]
pub(crate) trait UsageBackend: Send + Sync {
    async fn insert_usage_batch(&self, records: &[UsageRecord]) -> StoreResult<u64>;
    async fn touch_keys(&self, uses: &[KeyUse]) -> StoreResult<()>;
    fn set_priority(&self, priority: WriterPriority);
}

#[async_trait]
impl UsageBackend for Arc<dyn Store> {
    async fn insert_usage_batch(&self, records: &[UsageRecord]) -> StoreResult<u64> {
        self.as_ref().insert_usage_batch(records).await
    }
    async fn touch_keys(&self, uses: &[KeyUse]) -> StoreResult<()> {
        self.as_ref().touch_keys(uses).await
    }
    fn set_priority(&self, priority: WriterPriority) {
        self.as_ref().set_usage_priority(priority);
    }
}

/// The background task that writes usage records; keep it and call
/// [`UsageWriter::shutdown`] when the server stops. If it is dropped instead, the task goes on
/// until every [`UsageSink`] is dropped, then writes what is left.
#[derive(Debug)]
pub struct UsageWriter {
    stop: Arc<Notify>,
    task: JoinHandle<Result<(), WriterError>>,
    counters: Arc<Counters>,
}

impl UsageWriter {
    /// Starts the writer on the current tokio runtime.
    ///
    /// # Panics
    ///
    /// Outside a tokio runtime (like `tokio::spawn`).
    pub fn spawn(store: Arc<dyn Store>, config: UsageWriterConfig) -> (UsageSink, UsageWriter) {
        Self::spawn_with(Arc::new(store), config, None)
    }

    /// Like [`UsageWriter::spawn`], parking batches in `spool` while the database is unreachable
    /// and replaying them (with whatever a dead process left in the spool directory) once it
    /// answers.
    ///
    /// # Panics
    ///
    /// Outside a tokio runtime (like `tokio::spawn`).
    pub fn spawn_spooled(
        store: Arc<dyn Store>,
        config: UsageWriterConfig,
        spool: UsageSpool,
    ) -> (UsageSink, UsageWriter) {
        Self::spawn_with(Arc::new(store), config, Some(spool))
    }

    pub(crate) fn spawn_with(
        backend: Arc<dyn UsageBackend>,
        config: UsageWriterConfig,
        spool: Option<UsageSpool>,
    ) -> (UsageSink, UsageWriter) {
        let (tx, rx) = mpsc::channel(config.queue_capacity.max(1));
        let counters = Arc::new(Counters::default());
        let stop = Arc::new(Notify::new());
        let config_retry_initial = config.retry_initial;
        let flusher = Flusher {
            backend,
            config,
            counters: Arc::clone(&counters),
            stop: Arc::clone(&stop),
            deadline: None,
            spool,
            // Whatever a previous process left is replayed at the first tick.
            next_replay: Instant::now(),
            replay_backoff: config_retry_initial,
            set_aside_ids: std::collections::HashSet::new(),
            refusing_all_until: None,
            failed_since_shutdown: false,
        };
        #[expect(
            clippy::disallowed_methods,
            reason = "kept in UsageWriter, whose shutdown awaits it"
        )]
        let task = tokio::spawn(flusher.run(rx));
        let sink = UsageSink {
            tx,
            counters: Arc::clone(&counters),
        };
        (sink, UsageWriter { stop, task, counters })
    }

    /// The writer's counters.
    pub fn stats(&self) -> WriterStats {
        self.counters.snapshot()
    }

    /// Stops accepting records, writes everything queued (retrying until `shutdown_timeout`),
    /// and returns the final counters, or the records that could not be written.
    pub async fn shutdown(self) -> Result<WriterStats, WriterError> {
        self.stop.notify_one();
        self.task
            .await
            .map_err(|e| WriterError::TaskFailed(e.to_string()))??;
        Ok(self.counters.snapshot())
    }
}

#[cfg(test)]
mod tests;

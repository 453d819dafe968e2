//! [`UsageWriter`]: batches usage records and writes them in the background.
//!
//! The server hands each record to a cloneable [`UsageSink`] without waiting for the database.
//! A task collects records and inserts them every `batch_size` records or `flush_interval`,
//! whichever comes first. When a write fails, the batch is kept and retried with exponential
//! backoff; new records wait in a bounded queue meanwhile. A record is lost only visibly: the
//! sink refuses it when the queue is full (handing it back), or [`UsageWriter::shutdown`] returns
//! the records it could not write before its deadline.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use tokio::sync::{Notify, mpsc};
use tokio::task::JoinHandle;
use tokio::time::Instant;

use crate::error::StoreResult;
use crate::model::{KeyUse, UsageRecord};
use crate::store::Store;

/// Tuning of a [`UsageWriter`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UsageWriterConfig {
    /// Write as soon as this many records are waiting.
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
}

impl Default for UsageWriterConfig {
    fn default() -> Self {
        Self {
            batch_size: 200,
            flush_interval: Duration::from_millis(500),
            queue_capacity: 50_000,
            retry_initial: Duration::from_millis(100),
            retry_max: Duration::from_secs(10),
            shutdown_timeout: Duration::from_secs(30),
            touch_keys: true,
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
    /// Failed write attempts (each was retried).
    pub failed_writes: u64,
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
}

impl Counters {
    fn snapshot(&self) -> WriterStats {
        WriterStats {
            pending: self.pending.load(Ordering::Relaxed),
            written: self.written.load(Ordering::Relaxed),
            duplicates: self.duplicates.load(Ordering::Relaxed),
            rejected: self.rejected.load(Ordering::Relaxed),
            failed_writes: self.failed_writes.load(Ordering::Relaxed),
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
        tracing::error!(request_id = %record.request_id, ?reason, "usage record refused by the writer");
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
}

#[async_trait]
impl UsageBackend for Arc<dyn Store> {
    async fn insert_usage_batch(&self, records: &[UsageRecord]) -> StoreResult<u64> {
        self.as_ref().insert_usage_batch(records).await
    }
    async fn touch_keys(&self, uses: &[KeyUse]) -> StoreResult<()> {
        self.as_ref().touch_keys(uses).await
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
        Self::spawn_with(Arc::new(store), config)
    }

    pub(crate) fn spawn_with(
        backend: Arc<dyn UsageBackend>,
        config: UsageWriterConfig,
    ) -> (UsageSink, UsageWriter) {
        let (tx, rx) = mpsc::channel(config.queue_capacity.max(1));
        let counters = Arc::new(Counters::default());
        let stop = Arc::new(Notify::new());
        let flusher = Flusher {
            backend,
            config,
            counters: Arc::clone(&counters),
            stop: Arc::clone(&stop),
            deadline: None,
        };
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

struct Flusher {
    backend: Arc<dyn UsageBackend>,
    config: UsageWriterConfig,
    counters: Arc<Counters>,
    stop: Arc<Notify>,
    /// Set once shutdown was asked for: retries end there.
    deadline: Option<Instant>,
}

impl Flusher {
    async fn run(mut self, mut rx: mpsc::Receiver<UsageRecord>) -> Result<(), WriterError> {
        let batch_size = self.config.batch_size.max(1);
        let mut buffer: Vec<UsageRecord> = Vec::with_capacity(batch_size);
        let mut ticker = tokio::time::interval(self.config.flush_interval);
        ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        while self.deadline.is_none() {
            tokio::select! {
                biased;
                () = self.stop.notified() => self.begin_shutdown(),
                received = rx.recv() => match received {
                    Some(record) => {
                        buffer.push(record);
                        if buffer.len() >= batch_size {
                            self.flush_all(&mut buffer).await?;
                        }
                    }
                    // Every sink is gone: nothing more can arrive.
                    None => self.begin_shutdown(),
                },
                _ = ticker.tick() => self.flush_all(&mut buffer).await?,
            }
        }
        rx.close();
        while let Some(record) = rx.recv().await {
            buffer.push(record);
        }
        self.flush_all(&mut buffer).await
    }

    fn begin_shutdown(&mut self) {
        if self.deadline.is_none() {
            self.deadline = Some(Instant::now() + self.config.shutdown_timeout);
        }
    }

    /// Writes `buffer` in batches; on a failure past the deadline returns everything unwritten.
    async fn flush_all(&mut self, buffer: &mut Vec<UsageRecord>) -> Result<(), WriterError> {
        let batch_size = self.config.batch_size.max(1);
        while !buffer.is_empty() {
            let end = buffer.len().min(batch_size);
            if let Err(last_error) = self.write_with_retry(buffer.get(..end).unwrap_or_default()).await {
                return Err(WriterError::Unflushed {
                    records: std::mem::take(buffer),
                    last_error,
                });
            }
            buffer.drain(..end);
        }
        Ok(())
    }

    /// Retries until the batch is written, or until the shutdown deadline has passed.
    async fn write_with_retry(&mut self, batch: &[UsageRecord]) -> Result<(), String> {
        let mut backoff = self.config.retry_initial;
        loop {
            let attempt = self.backend.insert_usage_batch(batch);
            let result = match self.deadline {
                Some(deadline) => match tokio::time::timeout_at(deadline, attempt).await {
                    Ok(result) => result.map_err(|e| e.to_string()),
                    Err(_) => Err("shutdown deadline reached during a write".to_owned()),
                },
                None => attempt.await.map_err(|e| e.to_string()),
            };
            match result {
                Ok(inserted) => {
                    self.on_written(batch, inserted).await;
                    return Ok(());
                }
                Err(error) => {
                    self.counters.failed_writes.fetch_add(1, Ordering::Relaxed);
                    let past_deadline = self.deadline.is_some_and(|d| Instant::now() >= d);
                    if past_deadline {
                        tracing::error!(%error, records = batch.len(), "usage write failed at shutdown");
                        return Err(error);
                    }
                    tracing::warn!(%error, records = batch.len(), retry_in_ms = backoff.as_millis(), "usage write failed; will retry");
                    self.sleep_unless_stopped(backoff).await;
                    backoff = backoff.saturating_mul(2).min(self.config.retry_max);
                }
            }
        }
    }

    /// Sleeps for `delay`, cut short by the deadline once shutdown has begun.
    async fn sleep_unless_stopped(&mut self, delay: Duration) {
        let until = Instant::now() + delay;
        match self.deadline {
            Some(deadline) => tokio::time::sleep_until(until.min(deadline)).await,
            None => {
                tokio::select! {
                    () = tokio::time::sleep_until(until) => {}
                    () = self.stop.notified() => self.begin_shutdown(),
                }
            }
        }
    }

    async fn on_written(&self, batch: &[UsageRecord], inserted: u64) {
        let len = u64::try_from(batch.len()).unwrap_or(u64::MAX);
        self.counters.written.fetch_add(inserted, Ordering::Relaxed);
        self.counters
            .duplicates
            .fetch_add(len.saturating_sub(inserted), Ordering::Relaxed);
        self.counters.pending.fetch_sub(batch.len(), Ordering::AcqRel);
        if !self.config.touch_keys {
            return;
        }
        let mut latest: HashMap<_, _> = HashMap::new();
        for record in batch {
            if let Some(key_id) = record.key_id {
                let at = latest.entry(key_id).or_insert(record.created_at);
                *at = (*at).max(record.created_at);
            }
        }
        let uses: Vec<KeyUse> = latest
            .into_iter()
            .map(|(key_id, at)| KeyUse { key_id, at })
            .collect();
        if let Err(error) = self.backend.touch_keys(&uses).await {
            // Only `last_used_at` lags; the usage itself is stored.
            tracing::warn!(%error, "updating last_used_at of keys failed");
        }
    }
}

#[cfg(test)]
#[path = "writer_tests.rs"]
mod tests;

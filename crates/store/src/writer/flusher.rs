//! The writer's background task: batches records, writes them, retries, and (with a spool)
//! parks batches on disk while the database is unreachable, replaying them when it is back.

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use tokio::sync::{Notify, mpsc};
use tokio::time::Instant;

use super::{BACKLOG_BATCHES, Counters, UsageBackend, UsageWriterConfig, WriterError};
use crate::error::StoreError;
use crate::model::{KeyUse, UsageRecord};
use crate::priority::WriterPriority;
use crate::spool::UsageSpool;

/// Once the process is stopping, the longest one database call may take before its batch goes to
/// the spool: a database silent this long will not answer before the orchestrator's kill, and the
/// records must be on disk by then.
const SHUTDOWN_WRITE_TIMEOUT: Duration = Duration::from_secs(3);

pub(super) struct Flusher {
    pub(super) backend: Arc<dyn UsageBackend>,
    pub(super) config: UsageWriterConfig,
    pub(super) counters: Arc<Counters>,
    pub(super) stop: Arc<Notify>,
    /// Set once shutdown was asked for: retries end there.
    pub(super) deadline: Option<Instant>,
    /// Where batches go while the database is unreachable.
    pub(super) spool: Option<UsageSpool>,
    /// Replay of the spool is not tried before this instant.
    pub(super) next_replay: Instant,
    /// Delay before the next replay attempt after a failed one.
    pub(super) replay_backoff: Duration,
    /// Request ids of the records set aside by this process: a replay cut short after setting one
    /// aside reads it again from the spool, and must not set it aside twice.
    pub(super) set_aside_ids: HashSet<String>,
    /// Until when a refused batch counts as an outage without being split: the database refused
    /// every record of a whole batch lately, and splitting again would only repeat 2N-1 inserts.
    /// Cleared by any write that goes in.
    pub(super) refusing_all_until: Option<Instant>,
    /// A write failed (the database out of reach) since the shutdown began.
    pub(super) failed_since_shutdown: bool,
}

/// How long a batch refused whole makes later refusals count as an outage.
const REFUSING_ALL_HOLD: Duration = Duration::from_secs(60);

impl Flusher {
    pub(super) async fn run(mut self, mut rx: mpsc::Receiver<UsageRecord>) -> Result<(), WriterError> {
        match self.write_until_stopped(&mut rx).await {
            // Records still queued behind the batch that could not be written go back with it:
            // none may vanish unreported.
            Err(WriterError::Unflushed {
                mut records,
                last_error,
            }) => {
                rx.close();
                while let Ok(record) = rx.try_recv() {
                    records.push(record);
                }
                Err(WriterError::Unflushed { records, last_error })
            }
            done => done,
        }
    }

    async fn write_until_stopped(&mut self, rx: &mut mpsc::Receiver<UsageRecord>) -> Result<(), WriterError> {
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
                _ = ticker.tick() => {
                    self.replay_if_due().await;
                    self.flush_all(&mut buffer).await?;
                }
            }
        }
        rx.close();
        while let Some(record) = rx.recv().await {
            buffer.push(record);
        }
        self.flush_all(&mut buffer).await?;
        // Last chance to empty the spool, when the database took this shutdown's writes; what
        // stays is replayed by the next process. A database that just failed would only hold
        // the exit up for another write timeout.
        if !self.failed_since_shutdown {
            self.next_replay = Instant::now();
            self.replay_if_due().await;
        }
        Ok(())
    }

    /// Failed attempts at a batch before it goes to the spool: one once the process is stopping,
    /// which the orchestrator kills soon after.
    fn spool_after(&self) -> u32 {
        match self.deadline {
            Some(_) => 1,
            None => self.config.spool_after_failures,
        }
    }

    fn begin_shutdown(&mut self) {
        if self.deadline.is_none() {
            self.deadline = Some(Instant::now() + self.config.shutdown_timeout);
        }
    }

    /// Whether batches are known to need the spool (it holds records not yet replayed).
    fn degraded(&self) -> bool {
        self.spool.as_ref().is_some_and(|s| !s.is_empty())
    }

    /// Writes `buffer` in batches; on a failure past the deadline returns everything unwritten.
    async fn flush_all(&mut self, buffer: &mut Vec<UsageRecord>) -> Result<(), WriterError> {
        let batch_size = self.config.batch_size.max(1);
        while !buffer.is_empty() {
            let end = buffer.len().min(batch_size);
            let batch: Vec<UsageRecord> = buffer.drain(..end).collect();
            if let Err(Unwritten { mut records, error }) = self.store_batch(batch).await {
                records.append(buffer);
                return Err(WriterError::Unflushed {
                    records,
                    last_error: error,
                });
            }
        }
        Ok(())
    }

    /// Puts the batch in the database or, when that keeps failing and there is a spool, in the
    /// spool. Retries until one works, or until the shutdown deadline has passed. Records the
    /// database refuses one by one are set aside, not retried.
    async fn store_batch(&mut self, mut batch: Vec<UsageRecord>) -> Result<(), Unwritten> {
        let mut backoff = self.config.retry_initial;
        let mut failures: u32 = 0;
        let mut last_error = String::new();
        // While the spool holds records the database is known to be down (or just back: the
        // next replay finds out): the first attempt goes straight to the spool.
        let mut straight_to_spool = self.degraded();
        loop {
            if !straight_to_spool {
                match self.attempt(&batch).await {
                    Ok(inserted) => {
                        self.refusing_all_until = None;
                        self.on_written(&batch, inserted).await;
                        self.counters.pending.fetch_sub(batch.len(), Ordering::AcqRel);
                        return Ok(());
                    }
                    Err(failure) => {
                        self.counters.failed_writes.fetch_add(1, Ordering::Relaxed);
                        failures += 1;
                        self.failed_since_shutdown |= self.deadline.is_some() && !failure.refusal;
                        last_error.clone_from(&failure.message);
                        if failure.refusal {
                            let before = batch.len();
                            let left = match self.isolate(&batch, &failure).await {
                                Ok(_) => Vec::new(),
                                Err(Unwritten { records, error }) => {
                                    last_error = error;
                                    records
                                }
                            };
                            self.counters
                                .pending
                                .fetch_sub(before.saturating_sub(left.len()), Ordering::AcqRel);
                            if left.is_empty() {
                                return Ok(());
                            }
                            batch = left;
                        }
                    }
                }
            }
            let past_deadline = self.deadline.is_some_and(|d| Instant::now() >= d);
            let give_up_on_db = straight_to_spool || past_deadline || failures >= self.spool_after();
            straight_to_spool = false;
            if give_up_on_db && self.spool_batch(&batch) {
                return Ok(());
            }
            if past_deadline {
                tracing::error!(error = %last_error, records = batch.len(), "usage write failed at shutdown");
                return Err(Unwritten {
                    records: batch,
                    error: last_error,
                });
            }
            tracing::warn!(error = %last_error, records = batch.len(), retry_in_ms = backoff.as_millis(), "usage write failed; will retry");
            self.sleep_unless_stopped(backoff).await;
            backoff = backoff.saturating_mul(2).min(self.config.retry_max);
        }
    }

    /// How the next write competes for the CPU: in the background unless records pile up, the
    /// spool needs emptying or the process is stopping.
    fn priority(&self) -> WriterPriority {
        let backlog = self.config.batch_size.max(1).saturating_mul(BACKLOG_BATCHES);
        let behind = self.counters.pending.load(Ordering::Relaxed) > backlog;
        if behind || self.degraded() || self.deadline.is_some() {
            WriterPriority::Normal
        } else {
            WriterPriority::Background
        }
    }

    /// One insert, cut short by the write timeout or the shutdown deadline.
    async fn attempt(&mut self, batch: &[UsageRecord]) -> Result<u64, WriteFailure> {
        self.backend.set_priority(self.priority());
        let backend = Arc::clone(&self.backend);
        match self.call(backend.insert_usage_batch(batch)).await {
            Ok(result) => result.map_err(|e| WriteFailure::from(&e)),
            Err(what) => Err(WriteFailure {
                message: format!("{what} reached during a write"),
                refusal: false,
                of_a_value: false,
            }),
        }
    }

    /// Runs one database call until its deadline (`Err` names what ended it). A stop asked for
    /// while it runs begins the shutdown there and then, and cuts the call to the shutdown's
    /// shorter limit: a call into a silent database must not keep its whole write timeout past
    /// the stop, when the records have to be on disk before the orchestrator's kill.
    async fn call<T>(&mut self, call: impl Future<Output = T>) -> Result<T, &'static str> {
        let mut call = std::pin::pin!(call);
        let (until, what) = self.call_deadline();
        if self.deadline.is_none() {
            tokio::select! {
                biased;
                done = tokio::time::timeout_at(until, call.as_mut()) => return done.map_err(|_| what),
                () = self.stop.notified() => self.begin_shutdown(),
            }
        }
        let (stopping_until, stopping_what) = self.call_deadline();
        let (until, what) = if stopping_until < until {
            (stopping_until, stopping_what)
        } else {
            (until, what)
        };
        tokio::time::timeout_at(until, call).await.map_err(|_| what)
    }

    /// Stores a batch the database refused as a whole, in halves and halves of halves, until each
    /// record it refuses stands alone; those are set aside. So one bad record holds back neither
    /// its batch nor, once spooled, every record after it (a replay would stop at it forever).
    /// Returns the records stored; cut short by any other failure, with the records neither stored
    /// nor set aside. When not one record of a batch goes in for a constraint they break, the
    /// database refuses everything (a constraint every record breaks, a schema it no longer
    /// matches), not these records: they are all handed back, to be retried and spooled like an
    /// outage's. A value the database refuses (one it cannot encode or store) is the record's own
    /// however many records in a row carry one: those are set aside even when none went in, or a
    /// spool starting with a batch of them would never be replayed.
    async fn isolate(&mut self, batch: &[UsageRecord], refusal: &WriteFailure) -> Result<usize, Unwritten> {
        if self
            .refusing_all_until
            .is_some_and(|until| Instant::now() < until)
        {
            return Err(Unwritten {
                records: batch.to_vec(),
                error: format!("the database refuses every record lately: {}", refusal.message),
            });
        }
        let mut stored = 0;
        let mut parts = Vec::new();
        let mut refused = Vec::new();
        split_refused(batch, refusal, &mut parts, &mut refused);
        while let Some(part) = parts.pop() {
            match self.attempt(part).await {
                Ok(inserted) => {
                    self.refusing_all_until = None;
                    self.on_written(part, inserted).await;
                    stored += part.len();
                }
                Err(failure) if failure.refusal => {
                    self.counters.failed_writes.fetch_add(1, Ordering::Relaxed);
                    split_refused(part, &failure, &mut parts, &mut refused);
                }
                Err(failure) => {
                    self.counters.failed_writes.fetch_add(1, Ordering::Relaxed);
                    let mut records = part.to_vec();
                    for rest in parts.iter().rev() {
                        records.extend_from_slice(rest);
                    }
                    records.extend(refused.into_iter().map(|refused| refused.record.clone()));
                    return Err(Unwritten {
                        records,
                        error: failure.message,
                    });
                }
            }
        }
        let refused_for_their_values = refused.iter().all(|refused| refused.of_a_value);
        if stored == 0 && batch.len() > 1 && !refused_for_their_values {
            self.refusing_all_until = Some(Instant::now() + REFUSING_ALL_HOLD);
            return Err(Unwritten {
                records: batch.to_vec(),
                error: format!(
                    "the database refused every record of a batch: {}",
                    refusal.message
                ),
            });
        }
        for refused in refused {
            self.set_aside(std::slice::from_ref(refused.record), &refused.message);
        }
        Ok(stored)
    }

    /// Keeps records the database refused out of its way: in the spool's `*.rejected` file or,
    /// without a spool or when that cannot be written, in the log, the last place they can go (a
    /// record holds ids, counts and times, no secret and no image).
    fn set_aside(&mut self, records: &[UsageRecord], refusal: &str) {
        let records: Vec<UsageRecord> = records
            .iter()
            .filter(|record| self.set_aside_ids.insert(record.request_id.clone()))
            .cloned()
            .collect();
        if records.is_empty() {
            return;
        }
        let records = records.as_slice();
        let len = u64::try_from(records.len()).unwrap_or(u64::MAX);
        self.counters.set_aside.fetch_add(len, Ordering::Relaxed);
        match self.spool.as_mut().map(|spool| spool.set_aside(records)) {
            Some(Ok(path)) => {
                tracing::error!(error = %refusal, records = records.len(), path = %path.display(),
                    "the database refused usage records: set aside (once the cause is fixed, `imagegate usage replay FILE` inserts them)");
                return;
            }
            Some(Err(error)) => tracing::error!(%error, "could not set aside refused usage records"),
            None => {}
        }
        for record in records {
            match serde_json::to_string(record) {
                Ok(json) => {
                    tracing::error!(error = %refusal, record = %json, "usage record refused by the database")
                }
                Err(_) => {
                    tracing::error!(error = %refusal, request_id = %record.request_id, "usage record refused by the database")
                }
            }
        }
    }

    /// When the next database call must end, and what ends it.
    fn call_deadline(&self) -> (Instant, &'static str) {
        let limit = match self.deadline {
            Some(_) => self.config.write_timeout.min(SHUTDOWN_WRITE_TIMEOUT),
            None => self.config.write_timeout,
        };
        let timeout = Instant::now() + limit;
        match self.deadline {
            Some(deadline) if deadline < timeout => (deadline, "shutdown deadline"),
            _ => (timeout, "write timeout"),
        }
    }

    /// Appends the batch to the spool; false when there is none or the write failed.
    fn spool_batch(&mut self, batch: &[UsageRecord]) -> bool {
        let Some(spool) = self.spool.as_mut() else {
            return false;
        };
        let was_empty = spool.is_empty();
        match spool.append(batch) {
            Ok(()) => {
                let len = u64::try_from(batch.len()).unwrap_or(u64::MAX);
                self.counters.spooled.fetch_add(len, Ordering::Relaxed);
                self.counters.pending.fetch_sub(batch.len(), Ordering::AcqRel);
                if was_empty {
                    tracing::warn!(path = %spool.path().display(), "database unreachable: usage records go to the local spool until it is back");
                    self.replay_backoff = self.config.retry_initial;
                    self.next_replay = Instant::now() + self.replay_backoff;
                }
                true
            }
            Err(error) => {
                self.counters.failed_spool_writes.fetch_add(1, Ordering::Relaxed);
                tracing::error!(%error, records = batch.len(), "usage spool write failed; the records stay in memory and are retried");
                false
            }
        }
    }

    /// Replays the spool into the database when it holds records and a replay is due.
    async fn replay_if_due(&mut self) {
        if !self.degraded() || Instant::now() < self.next_replay {
            return;
        }
        let Some(mut cursor) = self.spool.as_ref().map(UsageSpool::start_replay) else {
            return;
        };
        let batch_size = self.config.batch_size.max(1);
        let mut result = Ok(());
        while let Some(batch) = self
            .spool
            .as_mut()
            .and_then(|spool| spool.next_batch(&mut cursor, batch_size))
        {
            if batch.is_empty() {
                continue;
            }
            match self.attempt(&batch).await {
                Ok(inserted) => {
                    // Counted as soon as the rows are committed: `on_written` then moves the keys'
                    // `last_used_at` in a transaction of its own, and the counters must not lag
                    // behind what the database already shows.
                    self.refusing_all_until = None;
                    let len = u64::try_from(batch.len()).unwrap_or(u64::MAX);
                    self.counters.replayed.fetch_add(len, Ordering::Relaxed);
                    self.on_written(&batch, inserted).await;
                }
                Err(failure) if failure.refusal => match self.isolate(&batch, &failure).await {
                    Ok(stored) => {
                        let len = u64::try_from(stored).unwrap_or(u64::MAX);
                        self.counters.replayed.fetch_add(len, Ordering::Relaxed);
                    }
                    Err(unwritten) => {
                        result = Err(unwritten.error);
                        break;
                    }
                },
                Err(failure) => {
                    self.failed_since_shutdown |= self.deadline.is_some();
                    result = Err(failure.message);
                    break;
                }
            }
        }
        if result.is_ok()
            && let Some(spool) = self.spool.as_mut()
        {
            spool.finish_replay(&cursor);
        }
        let summary = cursor.summary;
        match result {
            Ok(()) => {
                tracing::info!(
                    records = summary.records,
                    skipped_lines = summary.corrupt_lines,
                    "usage spool replayed into the database"
                );
                self.replay_backoff = self.config.retry_initial;
            }
            Err(error) => {
                self.counters.failed_writes.fetch_add(1, Ordering::Relaxed);
                tracing::debug!(%error, retry_in_ms = self.replay_backoff.as_millis(), "usage spool replay failed");
                self.next_replay = Instant::now() + self.replay_backoff;
                self.replay_backoff = self.replay_backoff.saturating_mul(2).min(self.config.retry_max);
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

    /// Counts a stored batch and moves its keys' `last_used_at` forward.
    async fn on_written(&mut self, batch: &[UsageRecord], inserted: u64) {
        let len = u64::try_from(batch.len()).unwrap_or(u64::MAX);
        self.counters.written.fetch_add(inserted, Ordering::Relaxed);
        self.counters
            .duplicates
            .fetch_add(len.saturating_sub(inserted), Ordering::Relaxed);
        if !self.config.touch_keys {
            return;
        }
        // In key order: replicas touching the same keys in one transaction each then lock them in
        // the same order, so two of them never wait on each other (a deadlock PostgreSQL breaks
        // by failing one after a second).
        let mut latest: BTreeMap<_, _> = BTreeMap::new();
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
        let backend = Arc::clone(&self.backend);
        match self.call(backend.touch_keys(&uses)).await {
            Ok(Ok(())) => {}
            // Only `last_used_at` lags; the usage itself is stored.
            Ok(Err(error)) => tracing::warn!(%error, "updating last_used_at of keys failed"),
            Err(what) => tracing::warn!("updating last_used_at of keys failed: {what} reached"),
        }
    }
}

/// Why a write failed.
struct WriteFailure {
    message: String,
    /// The database refused the rows themselves: retrying the same batch cannot help.
    refusal: bool,
    /// A refusal of a value the rows carry, not of a constraint they break.
    of_a_value: bool,
}

impl From<&StoreError> for WriteFailure {
    fn from(error: &StoreError) -> Self {
        Self {
            message: error.to_string(),
            refusal: error.is_refusal(),
            of_a_value: error.is_data_refusal(),
        }
    }
}

/// A record refused on its own, why, and whether for a value it carries.
struct Refused<'a> {
    record: &'a UsageRecord,
    message: String,
    of_a_value: bool,
}

/// Records that could be neither stored nor spooled, and the last error.
struct Unwritten {
    records: Vec<UsageRecord>,
    error: String,
}

/// Queues the halves of a refused part (the first half on top), or notes a lone refused record.
fn split_refused<'a>(
    part: &'a [UsageRecord],
    refusal: &WriteFailure,
    parts: &mut Vec<&'a [UsageRecord]>,
    refused: &mut Vec<Refused<'a>>,
) {
    match part {
        [] => {}
        [record] => refused.push(Refused {
            record,
            message: refusal.message.clone(),
            of_a_value: refusal.of_a_value,
        }),
        _ => {
            let (first, second) = part.split_at(part.len() / 2);
            parts.push(second);
            parts.push(first);
        }
    }
}

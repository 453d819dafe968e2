//! Replaying a file of usage records into the store by hand: the records the database once refused
//! (set aside in the spool's `*.rejected` files) once their cause is fixed, or records copied out of
//! the log, one JSON object per line.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};

use crate::error::{StoreError, StoreResult};
use crate::model::UsageRecord;
use crate::store::Store;

/// Records inserted together; a batch the database refuses is tried again one record at a time.
const BATCH: usize = 100;

/// What [`replay_usage_file`] did with a file.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Replayed {
    /// Records inserted.
    pub inserted: u64,
    /// Records whose request id was already stored (not inserted twice).
    pub already_stored: u64,
    /// Records the database refused, in file order.
    pub refused: Vec<RefusedRecord>,
    /// Lines that hold no usage record, in file order.
    pub unreadable: Vec<UnreadableLine>,
}

impl Replayed {
    /// Whether every record of the file is now stored.
    pub fn is_complete(&self) -> bool {
        self.refused.is_empty() && self.unreadable.is_empty()
    }
}

/// A record the database refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RefusedRecord {
    /// Its line in the file, from 1.
    pub line: usize,
    /// Its request id.
    pub request_id: String,
    /// The database's reason.
    pub reason: String,
}

/// A line that holds no usage record (a write cut short by a crash, or text that is not one).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnreadableLine {
    /// The line, from 1.
    pub line: usize,
    /// Why it does not parse.
    pub reason: String,
}

/// Why a replay stopped before the end of its file.
#[derive(Debug, thiserror::Error)]
pub enum ReplayError {
    /// The file could not be read.
    #[error("reading {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// The failure.
        #[source]
        source: std::io::Error,
    },
    /// The database failed for another reason than the records themselves (unreachable, say).
    #[error(
        "the database failed at line {line} ({stored} record(s) stored before it; replaying the file again is safe): {source}"
    )]
    Store {
        /// The first line of the batch that failed.
        line: usize,
        /// Records inserted or found already stored before it.
        stored: u64,
        /// The failure.
        #[source]
        source: StoreError,
    },
}

/// Inserts every usage record of `path` (JSON Lines, as the usage spool and its `*.rejected` files
/// hold them) into `store`. A record the database refuses is reported and does not hold back the
/// others; one whose request id is already stored is counted, not inserted twice, so replaying a
/// file again is safe. The file is left as it is.
pub async fn replay_usage_file(store: &dyn Store, path: &Path) -> Result<Replayed, ReplayError> {
    let read_error = |source| ReplayError::Read {
        path: path.to_owned(),
        source,
    };
    let mut reader = BufReader::new(std::fs::File::open(path).map_err(read_error)?);
    let mut replayed = Replayed::default();
    let mut batch: Vec<(usize, UsageRecord)> = Vec::with_capacity(BATCH);
    let mut text = Vec::new();
    let mut line = 0;
    loop {
        text.clear();
        if reader.read_until(b'\n', &mut text).map_err(read_error)? == 0 {
            break;
        }
        line += 1;
        if text.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        match serde_json::from_slice::<UsageRecord>(&text) {
            Ok(record) => batch.push((line, record)),
            Err(error) => replayed.unreadable.push(UnreadableLine {
                line,
                reason: error.to_string(),
            }),
        }
        if batch.len() == BATCH {
            insert(store, &mut batch, &mut replayed).await?;
        }
    }
    insert(store, &mut batch, &mut replayed).await?;
    Ok(replayed)
}

/// Inserts `batch` (and empties it): whole, or one record at a time when the database refuses it.
async fn insert(
    store: &dyn Store,
    batch: &mut Vec<(usize, UsageRecord)>,
    replayed: &mut Replayed,
) -> Result<(), ReplayError> {
    let records: Vec<UsageRecord> = batch.iter().map(|(_, record)| record.clone()).collect();
    match store.insert_usage_batch(&records).await {
        Err(error) if error.is_refusal() && records.len() > 1 => {
            for entry in batch.iter() {
                let result = store.insert_usage_batch(std::slice::from_ref(&entry.1)).await;
                tally(std::slice::from_ref(entry), result, replayed)?;
            }
        }
        result => tally(batch, result, replayed)?,
    }
    batch.clear();
    Ok(())
}

/// Counts what inserting `records` together did.
fn tally(
    records: &[(usize, UsageRecord)],
    result: StoreResult<u64>,
    replayed: &mut Replayed,
) -> Result<(), ReplayError> {
    match result {
        Ok(inserted) => {
            let count = u64::try_from(records.len()).unwrap_or(u64::MAX);
            replayed.inserted += inserted;
            replayed.already_stored += count.saturating_sub(inserted);
            Ok(())
        }
        Err(error) if error.is_refusal() => {
            let reason = error.to_string();
            replayed
                .refused
                .extend(records.iter().map(|(line, record)| RefusedRecord {
                    line: *line,
                    request_id: record.request_id.clone(),
                    reason: reason.clone(),
                }));
            Ok(())
        }
        Err(source) => Err(ReplayError::Store {
            line: records.first().map_or(0, |(line, _)| *line),
            stored: replayed.inserted + replayed.already_stored,
            source,
        }),
    }
}

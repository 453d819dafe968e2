//! Replaying a file of usage records into the store by hand: the records the database once refused
//! (set aside in the spool's `*.rejected` files) once their cause is fixed, or records copied out of
//! the log, one JSON object per line.

use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};

use crate::error::{StoreError, StoreResult};
use crate::model::UsageRecord;
use crate::store::Store;

/// Records inserted together (one statement's worth); a batch the database refuses is tried again
/// one record at a time.
const BATCH: usize = 256;

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
/// file again is safe. The file is left as it is. It is read with blocking calls (a command-line
/// tool's needs), a line at most [`MAX_USAGE_LINE`] bytes long (a record takes about 1 KB).
pub async fn replay_usage_file(store: &dyn Store, path: &Path) -> Result<Replayed, ReplayError> {
    let read_error = |source| ReplayError::Read {
        path: path.to_owned(),
        source,
    };
    let mut reader = BufReader::new(std::fs::File::open(path).map_err(read_error)?);
    let mut replayed = Replayed::default();
    let mut batch = Batch::default();
    let mut text = Vec::new();
    let mut line = 0;
    while let Some(complete) = read_line(&mut reader, &mut text).map_err(read_error)? {
        line += 1;
        if !complete {
            replayed.unreadable.push(UnreadableLine {
                line,
                reason: format!("longer than {MAX_USAGE_LINE} bytes"),
            });
            continue;
        }
        if text.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        match serde_json::from_slice::<UsageRecord>(&text) {
            Ok(record) => {
                batch.lines.push(line);
                batch.records.push(record);
            }
            Err(error) => replayed.unreadable.push(UnreadableLine {
                line,
                reason: error.to_string(),
            }),
        }
        if batch.records.len() == BATCH {
            batch.insert(store, &mut replayed).await?;
        }
    }
    batch.insert(store, &mut replayed).await?;
    Ok(replayed)
}

/// The longest line read, in bytes.
pub const MAX_USAGE_LINE: usize = 1 << 20;

/// Reads the next line into `text`: `None` at the end of the file, `Some(false)` for a line longer
/// than [`MAX_USAGE_LINE`] (skipped to its end, not kept).
fn read_line(reader: &mut impl BufRead, text: &mut Vec<u8>) -> std::io::Result<Option<bool>> {
    text.clear();
    let limit = u64::try_from(MAX_USAGE_LINE).unwrap_or(u64::MAX);
    if reader.by_ref().take(limit).read_until(b'\n', text)? == 0 {
        return Ok(None);
    }
    if text.len() < MAX_USAGE_LINE || text.ends_with(b"\n") {
        return Ok(Some(true));
    }
    loop {
        text.clear();
        if reader.by_ref().take(limit).read_until(b'\n', text)? == 0 || text.ends_with(b"\n") {
            text.clear();
            return Ok(Some(false));
        }
    }
}

/// Records read and not yet inserted, with their lines.
#[derive(Default)]
struct Batch {
    lines: Vec<usize>,
    records: Vec<UsageRecord>,
}

impl Batch {
    /// Inserts the records (and forgets them): together, or one at a time when the database
    /// refuses them together.
    async fn insert(&mut self, store: &dyn Store, replayed: &mut Replayed) -> Result<(), ReplayError> {
        if self.records.is_empty() {
            return Ok(());
        }
        match store.insert_usage_batch(&self.records).await {
            Err(error) if error.is_refusal() && self.records.len() > 1 => {
                for (line, record) in self.lines.iter().zip(&self.records) {
                    let one = std::slice::from_ref(record);
                    let result = store.insert_usage_batch(one).await;
                    tally(std::slice::from_ref(line), one, result, replayed)?;
                }
            }
            result => tally(&self.lines, &self.records, result, replayed)?,
        }
        self.lines.clear();
        self.records.clear();
        Ok(())
    }
}

/// Counts what inserting `records` (from `lines`) together did.
fn tally(
    lines: &[usize],
    records: &[UsageRecord],
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
                .extend(lines.iter().zip(records).map(|(line, record)| RefusedRecord {
                    line: *line,
                    request_id: record.request_id.clone(),
                    reason: reason.clone(),
                }));
            Ok(())
        }
        Err(source) => Err(ReplayError::Store {
            line: lines.first().copied().unwrap_or(0),
            stored: replayed.inserted + replayed.already_stored,
            source,
        }),
    }
}

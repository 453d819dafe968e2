//! [`UsageSpool`]: a durable local file for usage records the database could not take.
//!
//! When the database is unreachable, the [`UsageWriter`](crate::UsageWriter) appends whole batches
//! here instead of holding them in memory. A record counts as spooled only once its line is
//! written and `fsync`ed, so from then on a crash or a kill loses nothing. When the database
//! answers again the writer replays the spool (inserts are idempotent on the request id, so a
//! replay cut short and redone never double-counts) and empties the file.
//!
//! Layout: one JSON Lines file per process in the spool directory (`<data_dir>/usage-spool/`),
//! named `usage-<pid>-<nanos>.jsonl` and held with an exclusive `flock` for the life of the
//! process. At start a process claims every spool file whose lock is free (its owner died) and
//! replays it with its own. A line that does not parse (a crash in the middle of a write leaves a
//! partial last line; a record written by another version of the gateway may not read) is skipped
//! with a warning and, when the replay is done, set aside as it was in the `*.rejected` file below,
//! never deleted.
//!
//! Records the database refuses one by one (a constraint, a value it cannot take) are set aside in
//! `usage-<pid>-<nanos>.rejected` beside them, in the same format, so they cannot hold back the
//! others. They are never replayed on their own: once the cause is fixed,
//! [`replay_usage_file`](crate::replay_usage_file) (`imagegate usage replay FILE`) inserts them, or
//! renaming the file to `*.jsonl` makes the next start replay it.

use std::fs::{File, OpenOptions};
use std::io::{BufRead, BufReader, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use crate::model::UsageRecord;

/// Extension of live spool files.
const SPOOL_EXT: &str = "jsonl";
/// Extension of a spool file being created (not yet locked, never claimed by others).
const CREATING_EXT: &str = "creating";
/// Extension of the file of records the database refused.
const REJECTED_EXT: &str = "rejected";

/// How the spool can fail.
#[derive(Debug, thiserror::Error)]
pub enum SpoolError {
    /// Creating, locking, writing or syncing a spool file failed (disk full, permissions...).
    #[error("usage spool {path}: {source}")]
    Io {
        /// The file or directory involved.
        path: PathBuf,
        /// The failure.
        #[source]
        source: std::io::Error,
    },
    /// A record could not be serialized (should not happen).
    #[error("usage spool: cannot serialize a record: {0}")]
    Serialize(#[from] serde_json::Error),
}

fn io_error(path: &Path) -> impl FnOnce(std::io::Error) -> SpoolError + '_ {
    move |source| SpoolError::Io {
        path: path.to_owned(),
        source,
    }
}

/// One locked spool file: this process's own, or one claimed from a dead process.
#[derive(Debug)]
struct LockedFile {
    path: PathBuf,
    /// Opened for reading and appending; the `flock` lives as long as this handle.
    file: File,
}

impl LockedFile {
    /// Forgets the file's records: truncates it (so a process that opened it before it was
    /// unlinked reads nothing) and removes it.
    fn discard(self) {
        if let Err(err) = self.file.set_len(0) {
            tracing::warn!(path = %self.path.display(), error = %err, "could not truncate a replayed spool file");
        }
        if let Err(err) = std::fs::remove_file(&self.path) {
            tracing::warn!(path = %self.path.display(), error = %err, "could not remove a replayed spool file");
        }
    }
}

/// The spool of one process: batches the database could not take, one JSON line per record and
/// fsynced per batch, replayed once it answers (see [`UsageWriter::spawn_spooled`](crate::UsageWriter::spawn_spooled)).
#[derive(Debug)]
pub struct UsageSpool {
    own: LockedFile,
    /// Length of the own file after the last complete append: a failed append is cut back to it,
    /// so a partial line never glues onto the next one.
    own_len: u64,
    /// Records appended to the own file since it was last emptied.
    own_records: u64,
    /// Files of dead processes, claimed at open and not yet replayed.
    orphans: Vec<LockedFile>,
    /// Where refused records are set aside, once there was one.
    rejected: Option<(PathBuf, File)>,
}

/// What a replay read.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ReadSummary {
    /// Records read.
    pub records: u64,
    /// Lines skipped because they did not parse.
    pub corrupt_lines: u64,
}

impl UsageSpool {
    /// Opens a new spool file in `dir` (created if missing), locks it, and claims the spool files
    /// left there by processes that are gone.
    pub fn open(dir: &Path) -> Result<Self, SpoolError> {
        std::fs::create_dir_all(dir).map_err(io_error(dir))?;
        let orphans = claim_orphans(dir)?;
        let own = create_own(dir)?;
        if !orphans.is_empty() {
            tracing::warn!(
                files = orphans.len(),
                dir = %dir.display(),
                "found usage spool files of stopped processes; they will be replayed"
            );
        }
        Ok(Self {
            own,
            own_len: 0,
            own_records: 0,
            orphans,
            rejected: None,
        })
    }

    /// Path of this process's spool file.
    pub fn path(&self) -> &Path {
        &self.own.path
    }

    /// Whether nothing waits for replay (neither own records nor claimed files).
    pub fn is_empty(&self) -> bool {
        self.own_records == 0 && self.orphans.is_empty()
    }

    /// Records appended by this process and not replayed yet.
    pub fn own_records(&self) -> u64 {
        self.own_records
    }

    /// Appends `records` as one line each and syncs the file to disk. On error nothing of the
    /// batch stays in the file.
    pub fn append(&mut self, records: &[UsageRecord]) -> Result<(), SpoolError> {
        let text = lines(records)?;
        let written = (&self.own.file)
            .write_all(&text)
            .and_then(|()| self.own.file.sync_data());
        if let Err(source) = written {
            // Cut back a partial write; if even that fails, the next replay skips the broken line.
            let _ = self.own.file.set_len(self.own_len);
            return Err(SpoolError::Io {
                path: self.own.path.clone(),
                source,
            });
        }
        self.own_len += u64::try_from(text.len()).unwrap_or(u64::MAX);
        self.own_records += u64::try_from(records.len()).unwrap_or(u64::MAX);
        Ok(())
    }

    /// Sets aside records the database refused, in this process's `*.rejected` file (created on
    /// first use), fsynced. Returns the file's path.
    pub fn set_aside(&mut self, records: &[UsageRecord]) -> Result<PathBuf, SpoolError> {
        let text = lines(records)?;
        self.append_rejected(&text)
    }

    /// Appends `text` (whole lines) to the `*.rejected` file, fsynced; cut back when it fails.
    fn append_rejected(&mut self, text: &[u8]) -> Result<PathBuf, SpoolError> {
        let (path, file) = match self.rejected.take() {
            Some(open) => open,
            None => {
                let path = self.own.path.with_extension(REJECTED_EXT);
                let file = OpenOptions::new()
                    .append(true)
                    .create(true)
                    .open(&path)
                    .map_err(io_error(&path))?;
                // Its name must outlive a crash of the machine as the records synced into it do.
                if let Some(dir) = path.parent() {
                    sync_dir(dir).map_err(io_error(dir))?;
                }
                (path, file)
            }
        };
        let written = file.metadata().map_err(io_error(&path)).and_then(|metadata| {
            let before = metadata.len();
            let result = (&file).write_all(text).and_then(|()| file.sync_data());
            if result.is_err() {
                // Cut back a partial write, so the next record does not glue onto its line.
                let _ = file.set_len(before);
            }
            result.map_err(io_error(&path))
        });
        let kept = path.clone();
        self.rejected = Some((path, file));
        written.map(|()| kept)
    }

    /// Starts reading every spooled record: claimed files first, then the own file. Feed the
    /// cursor to [`UsageSpool::next_batch`] until it returns `None`, store each batch, then call
    /// [`UsageSpool::finish_replay`]. Stopping early (the database failed) forgets nothing: the
    /// next replay starts from the beginning again, so storing must be idempotent.
    pub(crate) fn start_replay(&self) -> ReplayCursor {
        ReplayCursor::default()
    }

    /// The next batch of at most `batch_size` records, or `None` when every file has been read.
    /// A batch may be empty (a file with only unreadable lines).
    pub(crate) fn next_batch(
        &self,
        cursor: &mut ReplayCursor,
        batch_size: usize,
    ) -> Option<Vec<UsageRecord>> {
        let file = match cursor.file.cmp(&self.orphans.len()) {
            std::cmp::Ordering::Less => self.orphans.get(cursor.file)?,
            std::cmp::Ordering::Equal => &self.own,
            std::cmp::Ordering::Greater => return None,
        };
        let read = read_from(file, cursor.offset, batch_size.max(1), cursor);
        let (batch, consumed, at_end) = match read {
            Ok(read) => read,
            // Kept by `finish_replay`, for a later replay to read whole.
            Err(partly) => {
                cursor.unreadable.push(cursor.file);
                (partly, 0, true)
            }
        };
        cursor.summary.records += u64::try_from(batch.len()).unwrap_or(u64::MAX);
        if at_end {
            cursor.file += 1;
            cursor.offset = 0;
        } else {
            cursor.offset += consumed;
        }
        Some(batch)
    }

    /// Forgets everything read by a replay that went through: claimed files are removed, the
    /// own file is emptied; a file that could not be read to its end (an I/O error) is kept. The
    /// lines that did not parse are set aside first, as they were; when that fails nothing is
    /// forgotten (the next replay reads it all again, harmlessly).
    pub(crate) fn finish_replay(&mut self, cursor: &ReplayCursor) {
        if !cursor.unparsed.is_empty() {
            let mut text = Vec::new();
            for line in &cursor.unparsed {
                text.extend_from_slice(line.strip_suffix(b"\n").unwrap_or(line));
                text.push(b'\n');
            }
            match self.append_rejected(&text) {
                Ok(path) => tracing::warn!(path = %path.display(), lines = cursor.unparsed.len(),
                    "unreadable usage spool lines set aside"),
                Err(err) => {
                    tracing::error!(error = %err, "could not set aside unreadable usage spool lines; the spool is kept");
                    return;
                }
            }
        }
        let mut index = 0;
        for orphan in std::mem::take(&mut self.orphans) {
            if cursor.unreadable.contains(&index) {
                self.orphans.push(orphan);
            } else {
                orphan.discard();
            }
            index += 1;
        }
        if cursor.unreadable.contains(&index) {
            return;
        }
        match self.own.file.set_len(0) {
            Ok(()) => {
                self.own_len = 0;
                self.own_records = 0;
            }
            // Kept as it is: replayed again later, harmlessly (inserts are idempotent).
            Err(err) => {
                tracing::warn!(path = %self.own.path.display(), error = %err, "could not empty the usage spool")
            }
        }
    }
}

/// Where a replay has got to.
#[derive(Debug, Default)]
pub(crate) struct ReplayCursor {
    /// Index into the claimed files; their count means the own file.
    file: usize,
    /// Byte offset of the next line in that file.
    offset: u64,
    /// What was read so far.
    pub(crate) summary: ReadSummary,
    /// Files (by the index of `file`) whose reading failed before their end.
    unreadable: Vec<usize>,
    /// The lines that did not parse, as they were.
    unparsed: Vec<Vec<u8>>,
}

impl Drop for UsageSpool {
    fn drop(&mut self) {
        if self.own_records == 0 && self.own_len == 0 {
            let _ = std::fs::remove_file(&self.own.path);
        }
    }
}

/// `records` as JSON Lines.
fn lines(records: &[UsageRecord]) -> Result<Vec<u8>, SpoolError> {
    let mut text = Vec::with_capacity(records.len() * 512);
    for record in records {
        serde_json::to_writer(&mut text, record)?;
        text.push(b'\n');
    }
    Ok(text)
}

/// Reads up to `batch_size` records from `locked` starting at byte `offset`. Returns them, the
/// bytes consumed, and whether the end of the file was reached; on an I/O error, the records read
/// before it.
fn read_from(
    locked: &LockedFile,
    offset: u64,
    batch_size: usize,
    cursor: &mut ReplayCursor,
) -> Result<(Vec<UsageRecord>, u64, bool), Vec<UsageRecord>> {
    let mut batch = Vec::with_capacity(batch_size);
    let mut file = &locked.file;
    if let Err(err) = file.seek(SeekFrom::Start(offset)) {
        tracing::error!(path = %locked.path.display(), error = %err, "cannot read a usage spool file; it is kept for a later replay");
        return Err(batch);
    }
    let mut reader = BufReader::new(file);
    let mut consumed = 0u64;
    let mut line = Vec::new();
    while batch.len() < batch_size {
        line.clear();
        match reader.read_until(b'\n', &mut line) {
            Ok(0) => return Ok((batch, consumed, true)),
            Ok(n) => consumed += u64::try_from(n).unwrap_or(u64::MAX),
            Err(err) => {
                tracing::error!(path = %locked.path.display(), error = %err, "reading a usage spool file failed; it is kept for a later replay");
                return Err(batch);
            }
        }
        if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        match serde_json::from_slice::<UsageRecord>(&line) {
            Ok(record) => batch.push(record),
            Err(err) => {
                cursor.summary.corrupt_lines += 1;
                cursor.unparsed.push(line.clone());
                tracing::warn!(path = %locked.path.display(), offset = offset + consumed, error = %err, "skipping an unreadable usage spool line (a write cut short by a crash?)");
            }
        }
    }
    Ok((batch, consumed, false))
}

/// Creates, locks and only then names the own file `*.jsonl`, so no other process can claim it.
fn create_own(dir: &Path) -> Result<LockedFile, SpoolError> {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or_default();
    let stem = format!("usage-{}-{nanos}", std::process::id());
    let creating = dir.join(format!("{stem}.{CREATING_EXT}"));
    let path = dir.join(format!("{stem}.{SPOOL_EXT}"));
    let file = OpenOptions::new()
        .read(true)
        .append(true)
        .create_new(true)
        .open(&creating)
        .map_err(io_error(&creating))?;
    match lock::try_exclusive(&file) {
        Ok(true) => {}
        Ok(false) => {
            return Err(SpoolError::Io {
                path: creating,
                source: std::io::Error::new(std::io::ErrorKind::WouldBlock, "new spool file is locked"),
            });
        }
        Err(source) => {
            return Err(SpoolError::Io {
                path: creating,
                source,
            });
        }
    }
    std::fs::rename(&creating, &path).map_err(io_error(&path))?;
    // The new name must outlive a crash of the machine as the records synced into the file do.
    sync_dir(dir).map_err(io_error(dir))?;
    Ok(LockedFile { path, file })
}

/// Makes the names last created or changed in `dir` outlive a crash of the machine.
#[cfg(unix)]
pub(crate) fn sync_dir(dir: &Path) -> std::io::Result<()> {
    std::fs::File::open(dir)?.sync_all()
}

#[cfg(not(unix))]
pub(crate) fn sync_dir(_dir: &Path) -> std::io::Result<()> {
    Ok(())
}

/// Locks every `*.jsonl` file whose owner is gone; removes abandoned empty `*.creating` files
/// (claiming one that holds records: its name was lost in a crash of the machine).
fn claim_orphans(dir: &Path) -> Result<Vec<LockedFile>, SpoolError> {
    let mut claimed = Vec::new();
    for entry in std::fs::read_dir(dir).map_err(io_error(dir))? {
        let path = entry.map_err(io_error(dir))?.path();
        let ext = path.extension().and_then(|e| e.to_str());
        if ext != Some(SPOOL_EXT) && ext != Some(CREATING_EXT) {
            continue;
        }
        let file = match OpenOptions::new().read(true).append(true).open(&path) {
            Ok(file) => file,
            // Removed by its owner or another claimant meanwhile.
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => continue,
            Err(source) => return Err(SpoolError::Io { path, source }),
        };
        match lock::try_exclusive(&file) {
            Ok(true) if ext == Some(CREATING_EXT) && file.metadata().is_ok_and(|m| m.len() == 0) => {
                // Its creator died before naming it: it holds no records.
                let _ = std::fs::remove_file(&path);
            }
            Ok(true) => claimed.push(LockedFile { path, file }),
            Ok(false) => {} // a live process owns it
            Err(source) => return Err(SpoolError::Io { path, source }),
        }
    }
    Ok(claimed)
}

mod lock {
    use std::fs::File;

    /// Takes an exclusive `flock` without waiting: `Ok(false)` when another process holds it.
    #[cfg(unix)]
    pub(super) fn try_exclusive(file: &File) -> std::io::Result<bool> {
        use rustix::fs::{FlockOperation, flock};
        match flock(file, FlockOperation::NonBlockingLockExclusive) {
            Ok(()) => Ok(true),
            Err(err) if err == rustix::io::Errno::WOULDBLOCK => Ok(false),
            Err(err) => Err(err.into()),
        }
    }

    /// Without `flock`, every file counts as free: only one gateway may use a data directory.
    #[cfg(not(unix))]
    pub(super) fn try_exclusive(_file: &File) -> std::io::Result<bool> {
        Ok(true)
    }
}

#[cfg(test)]
#[path = "spool_tests.rs"]
mod tests;

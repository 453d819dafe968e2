//! One uploaded file of an edit form, and how it is read from the request: files up to
//! [`SPILL_THRESHOLD`] bytes stay in memory; larger files are written to a temporary file as they
//! arrive, so a request's memory does not grow with the size of its images. The temporary file has
//! no name (`O_TMPFILE` where the file system has it, else unlinked at once): the system frees it
//! with its last descriptor, even when the gateway is killed. It is read back with positioned reads,
//! so every reader (a try, the next try) starts from its own offset.
//!
//! Validation does not wait for the disk: the size limit is enforced on the running length, the
//! format is sniffed from the first bytes, and the header (dimensions, alpha) is read from the
//! start of the file that is kept in memory.

use std::io;
use std::sync::Arc;

use bytes::{Bytes, BytesMut};
use futures::Stream;
use imagegate_domain::{ImageInfo, RequestError};
use tokio::io::AsyncWriteExt;

use super::disk_budget::Charge;
use crate::error::ApiError;
use crate::image_header::{self, HeaderError, MAGIC_LEN};

/// Files larger than this many bytes are spilled to a temporary file.
pub const SPILL_THRESHOLD: usize = 256 * 1024;

/// How far into a spilled file the header is looked for when it does not fit in the first
/// [`SPILL_THRESHOLD`] bytes (a JPEG with large metadata segments before its frame header).
const MAX_HEADER_SEARCH: u64 = 8 * 1024 * 1024;

/// Size of the reads when a spilled file is streamed back.
const READ_CHUNK: usize = 64 * 1024;

/// One uploaded file.
#[derive(Clone)]
pub struct UploadedImage {
    /// The part name as sent (`image`, `image[]`, `image[2]`, `mask`).
    pub field: String,
    /// The file name the client gave, if any.
    pub filename: Option<String>,
    /// Format, dimensions and alpha read from the header; `byte_len` is the whole file's size.
    pub info: ImageInfo,
    /// The file's bytes, in memory or on disk.
    pub data: UploadData,
}

/// Where the bytes of an uploaded file are kept. Clones share the same bytes or file.
#[derive(Clone)]
pub enum UploadData {
    /// A file of at most [`SPILL_THRESHOLD`] bytes (the only copy).
    Memory(Bytes),
    /// A larger file, in a temporary file that is deleted when the last clone is dropped.
    Spilled(Arc<SpilledFile>),
}

/// A temporary file holding one upload.
pub struct SpilledFile {
    file: std::fs::File,
    len: u64,
    /// Its bytes in the uploads' disk budget, given back with the file.
    _charge: Charge,
}

impl SpilledFile {
    /// Up to `len` bytes from `offset` (fewer at the end of the file), read on a blocking thread.
    async fn read_at(self: &Arc<Self>, offset: u64, len: usize) -> io::Result<Bytes> {
        let spilled = Arc::clone(self);
        let read = tokio::task::spawn_blocking(move || {
            let mut buf = vec![0u8; len];
            let mut filled = 0;
            while filled < len {
                let at = offset + filled as u64;
                match read_at(&spilled.file, &mut buf[filled..], at) {
                    Ok(0) => break,
                    Ok(n) => filled += n,
                    Err(err) if err.kind() == io::ErrorKind::Interrupted => {}
                    Err(err) => return Err(err),
                }
            }
            buf.truncate(filled);
            Ok(Bytes::from(buf))
        });
        read.await.map_err(io::Error::other)?
    }
}

#[cfg(unix)]
fn read_at(file: &std::fs::File, buf: &mut [u8], offset: u64) -> io::Result<usize> {
    std::os::unix::fs::FileExt::read_at(file, buf, offset)
}

#[cfg(windows)]
fn read_at(file: &std::fs::File, buf: &mut [u8], offset: u64) -> io::Result<usize> {
    std::os::windows::fs::FileExt::seek_read(file, buf, offset)
}

impl UploadData {
    /// The file's size in bytes.
    pub fn len(&self) -> u64 {
        match self {
            Self::Memory(bytes) => u64::try_from(bytes.len()).unwrap_or(u64::MAX),
            Self::Spilled(file) => file.len,
        }
    }

    /// Whether the file is empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Whether the file was spilled to disk.
    pub fn is_spilled(&self) -> bool {
        matches!(self, Self::Spilled(_))
    }

    /// The whole file from its start, in chunks of at most 64 KiB for a spilled file. Each call
    /// reads from the start, so the same upload can be sent again (to another account), and
    /// readers do not disturb each other.
    pub fn stream(&self) -> io::Result<impl Stream<Item = io::Result<Bytes>> + Send + 'static> {
        let source = match self {
            Self::Memory(bytes) => Source::Memory(Some(bytes.clone())),
            Self::Spilled(spilled) => Source::File(Arc::clone(spilled), 0),
        };
        Ok(futures::stream::unfold(source, |source| async move {
            match source {
                Source::Memory(bytes) => bytes
                    .filter(|b| !b.is_empty())
                    .map(|b| (Ok(b), Source::Memory(None))),
                Source::File(spilled, offset) if offset >= spilled.len => None,
                Source::File(spilled, offset) => match spilled.read_at(offset, READ_CHUNK).await {
                    Ok(chunk) if chunk.is_empty() => {
                        let short = io::Error::new(
                            io::ErrorKind::UnexpectedEof,
                            "an upload's temporary file is short",
                        );
                        Some((Err(short), Source::Memory(None)))
                    }
                    Ok(chunk) => {
                        let next = offset + chunk.len() as u64;
                        Some((Ok(chunk), Source::File(spilled, next)))
                    }
                    Err(err) => Some((Err(err), Source::Memory(None))),
                },
            }
        }))
    }

    /// The whole file in memory (for tests and tools; the transports stream it with [`Self::stream`]).
    pub async fn to_bytes(&self) -> io::Result<Bytes> {
        match self {
            Self::Memory(bytes) => Ok(bytes.clone()),
            Self::Spilled(spilled) => {
                let len = usize::try_from(spilled.len).map_err(io::Error::other)?;
                spilled.read_at(0, len).await
            }
        }
    }
}

enum Source {
    Memory(Option<Bytes>),
    File(Arc<SpilledFile>, u64),
}

/// Reads one file part: refuses it once its running size reaches `limit` or when its first bytes
/// are not a PNG, JPEG or WebP signature, spills it past [`SPILL_THRESHOLD`], and reads its header.
pub(super) async fn read_file(
    field: &mut multer::Field<'_>,
    name: &str,
    limits: &super::EditLimits,
) -> Result<(ImageInfo, UploadData), ApiError> {
    let limit = limits.max_file_bytes;
    let mut head = BytesMut::new();
    let mut spill: Option<Spill> = None;
    let mut len: u64 = 0;
    let mut magic_checked = false;
    while let Some(chunk) = field.chunk().await.map_err(super::multipart_error)? {
        len = len.saturating_add(u64::try_from(chunk.len()).unwrap_or(u64::MAX));
        if len >= limit {
            return Err(RequestError::FileTooLarge {
                param: name.to_owned(),
                limit,
            }
            .into());
        }
        match spill.as_mut() {
            Some(spill) => {
                if !spill.charge.add(chunk.len()) {
                    return Err(over_budget(limits));
                }
                spill.write(&chunk).await.map_err(spill_error)?;
            }
            None => {
                head.extend_from_slice(&chunk);
                if head.len() > SPILL_THRESHOLD {
                    let mut charge = Charge::new(limits.disk_budget.clone());
                    if !charge.add(head.len()) {
                        return Err(over_budget(limits));
                    }
                    let dir = limits.spill_dir.as_deref();
                    spill = Some(Spill::start(dir, &head, charge).await.map_err(spill_error)?);
                }
            }
        }
        if !magic_checked && head.len() >= MAGIC_LEN {
            magic_checked = true;
            if image_header::sniff_format(&head).is_none() {
                return Err(unsupported(name));
            }
        }
    }
    match spill {
        None => {
            let bytes = head.freeze();
            let info = sniff(name, &bytes)?;
            Ok((info, UploadData::Memory(bytes)))
        }
        Some(spill) => {
            let spilled = Arc::new(spill.finish(len).await.map_err(spill_error)?);
            let mut info = match image_header::sniff(&head) {
                Err(HeaderError::Truncated(_)) => {
                    let search = usize::try_from(MAX_HEADER_SEARCH.min(len)).unwrap_or(usize::MAX);
                    let longer = spilled.read_at(0, search).await.map_err(spill_error)?;
                    sniff(name, &longer)?
                }
                other => other.map_err(|err| header_error(name, err))?,
            };
            info.byte_len = len;
            Ok((info, UploadData::Spilled(spilled)))
        }
    }
}

/// How much of an upload is gathered before each write to its temporary file: each write is a
/// blocking task, and a body may come in chunks of any size, down to a byte.
const SPILL_WRITE_BYTES: usize = 256 * 1024;

/// A temporary file being written.
struct Spill {
    file: std::fs::File,
    writer: tokio::io::BufWriter<tokio::fs::File>,
    /// What it has taken of the disk budget so far.
    charge: Charge,
}

impl Spill {
    /// A new unnamed file in `dir` (the system's temporary directory when none), holding `head`,
    /// whose bytes `charge` has taken.
    async fn start(dir: Option<&std::path::Path>, head: &[u8], charge: Charge) -> io::Result<Self> {
        let file = match dir {
            Some(dir) => tempfile::tempfile_in(dir)?,
            None => tempfile::tempfile()?,
        };
        let mut writer = tokio::io::BufWriter::with_capacity(
            SPILL_WRITE_BYTES,
            tokio::fs::File::from_std(file.try_clone()?),
        );
        writer.write_all(head).await?;
        Ok(Self { file, writer, charge })
    }

    async fn write(&mut self, chunk: &[u8]) -> io::Result<()> {
        self.writer.write_all(chunk).await
    }

    async fn finish(mut self, len: u64) -> io::Result<SpilledFile> {
        self.writer.flush().await?;
        Ok(SpilledFile {
            file: self.file,
            len,
            _charge: self.charge,
        })
    }
}

fn sniff(name: &str, bytes: &[u8]) -> Result<ImageInfo, ApiError> {
    image_header::sniff(bytes).map_err(|err| header_error(name, err))
}

fn header_error(name: &str, err: HeaderError) -> ApiError {
    match err {
        HeaderError::Unrecognized => unsupported(name),
        other => ApiError::new(
            imagegate_domain::ErrorKind::InvalidRequest,
            format!("Invalid file '{name}': {other}."),
        )
        .with_param(name)
        .with_code("invalid_image"),
    }
}

fn unsupported(name: &str) -> ApiError {
    RequestError::UnsupportedFileType {
        param: name.to_owned(),
    }
    .into()
}

/// The uploads in flight keep all the disk they may ([`super::EditLimits::disk_budget`]): load to
/// shed, not a failure, so a warning, and a 503 the SDKs retry.
fn over_budget(limits: &super::EditLimits) -> ApiError {
    let limit = limits.disk_budget.as_ref().map_or(0, |budget| budget.limit());
    tracing::warn!(
        limit_bytes = limit,
        "an upload was refused: the uploads in flight keep all the disk they may"
    );
    ApiError::new(
        imagegate_domain::ErrorKind::Overloaded,
        "The gateway has no room left for uploads at the moment; retry shortly.",
    )
}

/// The gateway could not write or read its temporary file: its own failure, not the client's, and
/// logged for the operator. A full disk (or quota) passes: a 503 the SDKs retry. Anything else is a
/// 500. The I/O error is not shown to the client (it may name server paths).
fn spill_error(err: io::Error) -> ApiError {
    tracing::error!(error = %err, "an upload could not be kept in a temporary file");
    match err.kind() {
        io::ErrorKind::StorageFull | io::ErrorKind::QuotaExceeded => ApiError::new(
            imagegate_domain::ErrorKind::Overloaded,
            "The gateway has no room left for uploads at the moment; retry shortly.",
        ),
        _ => ApiError::internal(),
    }
}

impl std::fmt::Debug for UploadedImage {
    /// Never prints the file itself, only what it is.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UploadedImage")
            .field("field", &self.field)
            .field("filename", &self.filename)
            .field("info", &self.info)
            .field("data", &self.data)
            .finish()
    }
}

impl std::fmt::Debug for SpilledFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "SpilledFile(<{} bytes>)", self.len)
    }
}

impl std::fmt::Debug for UploadData {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Memory(bytes) => write!(f, "<{} bytes in memory>", bytes.len()),
            Self::Spilled(file) => write!(f, "<{} bytes on disk>", file.len),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_full_disk_is_a_503_to_retry_and_other_failures_a_500() {
        let full = spill_error(io::Error::from(io::ErrorKind::StorageFull));
        assert_eq!((full.status(), full.code()), (503, Some("overloaded")));
        let quota = spill_error(io::Error::from(io::ErrorKind::QuotaExceeded));
        assert_eq!(quota.status(), 503);
        let other = spill_error(io::Error::other("disk on fire at /var/tmp/x"));
        assert_eq!(other.status(), 500);
        assert!(!other.message.contains("/var/tmp"), "{}", other.message);
    }
}

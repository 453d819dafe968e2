//! The multipart form of `POST /v1/images/edits`.
//!
//! Parts may come in any order. Files: `image` (one), `image[]` (repeated, what the SDKs send),
//! `image[N]` (some third-party clients; sorted by `N` when every image is indexed) and `mask`.
//! Text fields are parsed from their string form (`"true"`, `"2"`). A file's type is sniffed from
//! its bytes, never taken from the part's `Content-Type`; dimensions and alpha come from the
//! header. Each file is held once, and refused as soon as its running size reaches the limit:
//! in memory up to [`SPILL_THRESHOLD`] bytes, in a temporary file beyond (see [`UploadData`]).

use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::task::{Context, Poll};

use bytes::Bytes;
use futures::Stream;
use imagegate_domain::{
    ErrorKind, ImageParamsDraft, MAX_EDIT_IMAGES, MAX_FILE_BYTES, RequestError, check_mask,
};

use crate::error::ApiError;

mod disk_budget;
mod upload;

pub use disk_budget::DiskBudget;
use upload::read_file;
pub use upload::{SPILL_THRESHOLD, SpilledFile, UploadData, UploadedImage};

/// A decoded edit form (not yet validated: pass `draft` to `imagegate_domain::validate_edit`).
#[derive(Debug, Clone)]
pub struct EditForm {
    /// The text fields.
    pub draft: ImageParamsDraft,
    /// The input images, first image first.
    pub images: Vec<UploadedImage>,
    /// The mask, already checked against the first image.
    pub mask: Option<UploadedImage>,
}

/// Bounds applied while reading the form, and where its large files wait.
#[derive(Debug, Clone)]
pub struct EditLimits {
    /// Most images accepted.
    pub max_images: usize,
    /// A file must be strictly smaller than this many bytes.
    pub max_file_bytes: u64,
    /// Largest text field, in bytes.
    pub max_text_bytes: usize,
    /// The directory of the temporary files of uploads over [`SPILL_THRESHOLD`] (`None`: the
    /// system's, `TMPDIR`).
    pub spill_dir: Option<std::path::PathBuf>,
    /// The bound on what every upload in flight keeps on disk at once (`None`: no bound); a file
    /// that would pass it is refused with a 503.
    pub disk_budget: Option<std::sync::Arc<DiskBudget>>,
}

impl Default for EditLimits {
    fn default() -> Self {
        Self {
            max_images: MAX_EDIT_IMAGES,
            max_file_bytes: MAX_FILE_BYTES,
            max_text_bytes: 1024 * 1024,
            spill_dir: None,
            disk_budget: None,
        }
    }
}

/// The boundary of a `multipart/form-data` content type.
pub fn boundary(content_type: &str) -> Result<String, ApiError> {
    multer::parse_boundary(content_type).map_err(|_| {
        ApiError::new(
            ErrorKind::InvalidRequest,
            "Expected 'Content-Type: multipart/form-data' with a boundary for an image edit.",
        )
        .with_code("invalid_content_type")
    })
}

/// Reads an edit form with the default limits (16 images, files under 50 MB).
pub async fn decode_edit<S, E>(body: S, boundary: &str) -> Result<EditForm, ApiError>
where
    S: Stream<Item = Result<Bytes, E>> + Send,
    E: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    decode_edit_with_limits(body, boundary, EditLimits::default()).await
}

/// Reads an edit form with explicit limits.
pub async fn decode_edit_with_limits<S, E>(
    body: S,
    boundary: &str,
    limits: EditLimits,
) -> Result<EditForm, ApiError>
where
    S: Stream<Item = Result<Bytes, E>> + Send,
    E: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    decode_edit_checked(body, boundary, limits, |_| Ok(())).await
}

/// Reads an edit form with explicit limits, calling `check` with the text fields read so far
/// before each file that follows new ones (see `imagegate_domain::check_edit_so_far`): a form whose
/// fields are already wrong fails before its files are read.
pub async fn decode_edit_checked<S, E>(
    body: S,
    boundary: &str,
    limits: EditLimits,
    check: impl Fn(&ImageParamsDraft) -> Result<(), ApiError>,
) -> Result<EditForm, ApiError>
where
    S: Stream<Item = Result<Bytes, E>> + Send,
    E: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let mut unchecked_fields = false;
    let budget = Arc::new(HeadBudget::default());
    let body = OneChunkPerPoll::new(body, Arc::clone(&budget));
    let mut multipart = multer::Multipart::new(body, boundary);
    let mut draft = ImageParamsDraft::default();
    let mut seen = Vec::<String>::new();
    let mut images: Vec<(Option<u64>, UploadedImage)> = Vec::new();
    let mut mask = None;
    loop {
        budget.limit(MAX_PART_HEAD_BYTES, MAX_PART_HEAD_CHUNKS);
        let next = multipart.next_field().await.map_err(multipart_error);
        budget.lift();
        let Some(mut field) = next? else { break };
        let name = field.name().map(str::to_owned).ok_or_else(|| {
            ApiError::new(
                ErrorKind::InvalidRequest,
                "A part of the multipart body has no name.",
            )
            .with_code("invalid_multipart")
        })?;
        let filename = field.file_name().map(str::to_owned);
        let part = PartName::parse(&name);
        if unchecked_fields && matches!(part, PartName::Image(_) | PartName::Mask) {
            check(&draft)?;
            unchecked_fields = false;
        }
        match part {
            PartName::Image(index) => {
                if images.len() >= limits.max_images {
                    let err = ApiError::from(RequestError::TooManyImages {
                        count: images.len() + 1,
                    });
                    return Err(ApiError {
                        message: format!(
                            "Too many input images: an edit accepts at most {}.",
                            limits.max_images
                        ),
                        ..err
                    });
                }
                let (info, data) = read_file(&mut field, &name, &limits).await?;
                images.push((
                    index,
                    UploadedImage {
                        field: name,
                        filename,
                        info,
                        data,
                    },
                ));
            }
            PartName::Mask => {
                if mask.is_some() {
                    return Err(duplicate(&name));
                }
                let (info, data) = read_file(&mut field, &name, &limits).await?;
                mask = Some(UploadedImage {
                    field: name,
                    filename,
                    info,
                    data,
                });
            }
            PartName::Unknown => {
                // Refused by its name, before its content is read: a file part named
                // `images[]` is not "text that is not UTF-8".
                return Err(RequestError::UnknownParameter { param: name }.into());
            }
            PartName::Text => {
                if seen.contains(&name) {
                    return Err(duplicate(&name));
                }
                let text = read_text(&mut field, &name, limits.max_text_bytes).await?;
                set_text_field(&mut draft, &name, text)?;
                seen.push(name);
                unchecked_fields = true;
            }
        }
    }
    if images.iter().all(|(index, _)| index.is_some()) {
        images.sort_by_key(|(index, _)| *index);
    }
    let images: Vec<UploadedImage> = images.into_iter().map(|(_, image)| image).collect();
    imagegate_domain::check_image_count(images.len())?;
    if let (Some(mask), Some(first)) = (&mask, images.first()) {
        check_mask(&first.info, &mask.info)?;
    }
    Ok(EditForm { draft, images, mask })
}

/// What a part name says about the part.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum PartName {
    /// An input image, with its explicit index for `image[N]`.
    Image(Option<u64>),
    Mask,
    /// One of [`TEXT_FIELDS`].
    Text,
    Unknown,
}

/// The text fields of an edit form.
const TEXT_FIELDS: [&str; 14] = [
    "model",
    "prompt",
    "n",
    "size",
    "quality",
    "output_format",
    "output_compression",
    "background",
    "moderation",
    "stream",
    "partial_images",
    "user",
    "input_fidelity",
    "response_format",
];

impl PartName {
    fn parse(name: &str) -> Self {
        if name == "image" || name == "image[]" {
            return Self::Image(None);
        }
        if name == "mask" {
            return Self::Mask;
        }
        let index = name
            .strip_prefix("image[")
            .and_then(|rest| rest.strip_suffix(']'));
        match index.and_then(|digits| digits.parse::<u64>().ok()) {
            Some(index) => Self::Image(Some(index)),
            None if TEXT_FIELDS.contains(&name) => Self::Text,
            None => Self::Unknown,
        }
    }
}

async fn read_text(field: &mut multer::Field<'_>, name: &str, limit: usize) -> Result<String, ApiError> {
    let mut text = Vec::new();
    while let Some(chunk) = field.chunk().await.map_err(multipart_error)? {
        if text.len() + chunk.len() > limit {
            return Err(ApiError::new(
                ErrorKind::PayloadTooLarge,
                format!("The form field '{name}' is larger than {limit} bytes."),
            )
            .with_param(name)
            .with_code("field_too_large"));
        }
        text.extend_from_slice(&chunk);
    }
    String::from_utf8(text).map_err(|_| {
        ApiError::from(RequestError::InvalidType {
            param: name.to_owned(),
            expected: "UTF-8 text".to_owned(),
        })
    })
}

fn set_text_field(draft: &mut ImageParamsDraft, name: &str, text: String) -> Result<(), ApiError> {
    match name {
        "model" => draft.model = Some(text),
        "prompt" => draft.prompt = Some(text),
        "n" => draft.n = Some(parse_integer(name, &text)?),
        "size" => draft.size = Some(text),
        "quality" => draft.quality = Some(text),
        "output_format" => draft.output_format = Some(text),
        "output_compression" => draft.output_compression = Some(parse_integer(name, &text)?),
        "background" => draft.background = Some(text),
        "moderation" => draft.moderation = Some(text),
        "stream" => draft.stream = Some(parse_bool(name, &text)?),
        "partial_images" => draft.partial_images = Some(parse_integer(name, &text)?),
        "user" => draft.user = Some(text),
        "input_fidelity" => draft.input_fidelity = Some(text),
        "response_format" => draft.response_format = Some(text),
        _ => {
            return Err(RequestError::UnknownParameter {
                param: name.to_owned(),
            }
            .into());
        }
    }
    Ok(())
}

fn parse_integer(name: &str, text: &str) -> Result<i64, ApiError> {
    let trimmed = text.trim();
    trimmed.parse::<i64>().or_else(|_| {
        let digits = trimmed.strip_prefix(['+', '-']).unwrap_or(trimmed);
        if !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()) {
            Ok(if trimmed.starts_with('-') {
                i64::MIN
            } else {
                i64::MAX
            })
        } else {
            Err(text_type_error(name, "an integer", text))
        }
    })
}

fn parse_bool(name: &str, text: &str) -> Result<bool, ApiError> {
    match text.trim() {
        t if t.eq_ignore_ascii_case("true") => Ok(true),
        t if t.eq_ignore_ascii_case("false") => Ok(false),
        _ => Err(text_type_error(name, "a boolean ('true' or 'false')", text)),
    }
}

fn text_type_error(name: &str, expected: &str, text: &str) -> ApiError {
    let shown: String = text.chars().take(32).collect();
    RequestError::InvalidType {
        param: name.to_owned(),
        expected: format!("{expected}, but got '{shown}' instead"),
    }
    .into()
}

fn duplicate(name: &str) -> ApiError {
    ApiError::new(
        ErrorKind::InvalidRequest,
        format!("The form field '{name}' was sent more than once; send it once."),
    )
    .with_param(name)
    .with_code("duplicate_parameter")
}

fn multipart_error(err: multer::Error) -> ApiError {
    if let multer::Error::StreamReadFailed(cause) = &err
        && let Some(cut) = crate::BodyCut::find(cause.as_ref())
    {
        return cut.api_error();
    }
    let message = match err {
        multer::Error::StreamReadFailed(cause) if cause.is::<PartHeadTooLong>() => format!(
            "The multipart body is malformed: {cause} (a part's headers, or the text before the \
             first boundary, never ended)."
        ),
        multer::Error::StreamReadFailed(cause) => format!("Could not read the request body: {cause}."),
        other => format!("The multipart body is malformed: {other}."),
    };
    ApiError::new(ErrorKind::InvalidRequest, message).with_code("invalid_multipart")
}

/// The most body bytes `multer` may take while it looks for the next part's start and headers.
///
/// `multer` keeps everything until a part's headers end, so without a bound a part header (or a
/// preamble) that never ends would grow in memory as long as the client sends. Counted in whole
/// chunks, so this also covers the end of the part before and a chunk of look-ahead.
pub const MAX_PART_HEAD_BYTES: u64 = 1024 * 1024;

/// The most body chunks `multer` may take while it looks for the next part's start and headers.
///
/// It searches everything it holds again for each chunk that comes, so a head sent a byte per
/// chunk would cost time growing with the square of its length; no client splits a part's few
/// hundred bytes of headers this finely.
pub const MAX_PART_HEAD_CHUNKS: u32 = 256;

/// How many bytes and chunks may still be handed to `multer` before the part it looks for has
/// started; unlimited while a part's content is read (the file and text limits bound that).
#[derive(Debug)]
struct HeadBudget {
    bytes_left: AtomicU64,
    chunks_left: AtomicU32,
}

impl Default for HeadBudget {
    fn default() -> Self {
        Self {
            bytes_left: AtomicU64::new(u64::MAX),
            chunks_left: AtomicU32::new(u32::MAX),
        }
    }
}

impl HeadBudget {
    fn limit(&self, bytes: u64, chunks: u32) {
        self.bytes_left.store(bytes, Ordering::Relaxed);
        self.chunks_left.store(chunks, Ordering::Relaxed);
    }

    fn lift(&self) {
        self.limit(u64::MAX, u32::MAX);
    }

    /// Takes a chunk of `bytes` from the budget; the bound it would break, if any.
    fn take(&self, bytes: usize) -> Result<(), PartHeadTooLong> {
        let bytes = u64::try_from(bytes).unwrap_or(u64::MAX);
        let left = self.bytes_left.load(Ordering::Relaxed);
        if left == u64::MAX {
            return Ok(());
        }
        let chunks = self
            .chunks_left
            .load(Ordering::Relaxed)
            .checked_sub(1)
            .ok_or(PartHeadTooLong::Chunks)?;
        let rest = left.checked_sub(bytes).ok_or(PartHeadTooLong::Bytes)?;
        self.bytes_left.store(rest, Ordering::Relaxed);
        self.chunks_left.store(chunks, Ordering::Relaxed);
        Ok(())
    }
}

/// The error a body stream gives `multer` when a part's headers run past [`MAX_PART_HEAD_BYTES`]
/// or [`MAX_PART_HEAD_CHUNKS`].
#[derive(Debug, thiserror::Error)]
enum PartHeadTooLong {
    #[error("a part's headers are longer than {MAX_PART_HEAD_BYTES} bytes")]
    Bytes,
    #[error("a part's headers came in more than {MAX_PART_HEAD_CHUNKS} chunks")]
    Chunks,
}

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// Hands the body to `multer` one chunk per poll, within the [`HeadBudget`].
///
/// `multer` reads every chunk that is ready before it looks at them, so on a fast connection it
/// could buffer far past a file's size limit. Returning `Pending` (with an immediate wake-up)
/// after each chunk keeps its look-ahead to about one chunk, so the limits here are enforced
/// while the body streams in.
struct OneChunkPerPoll<S> {
    inner: Pin<Box<S>>,
    just_yielded: bool,
    budget: Arc<HeadBudget>,
}

impl<S> OneChunkPerPoll<S> {
    fn new(inner: S, budget: Arc<HeadBudget>) -> Self {
        Self {
            inner: Box::pin(inner),
            just_yielded: false,
            budget,
        }
    }
}

impl<S, E> Stream for OneChunkPerPoll<S>
where
    S: Stream<Item = Result<Bytes, E>>,
    E: Into<BoxError>,
{
    type Item = Result<Bytes, BoxError>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        if self.just_yielded {
            self.just_yielded = false;
            cx.waker().wake_by_ref();
            return Poll::Pending;
        }
        let next = match self.inner.as_mut().poll_next(cx) {
            Poll::Ready(Some(Ok(chunk))) => match self.budget.take(chunk.len()) {
                Ok(()) => Some(Ok(chunk)),
                Err(too_long) => Some(Err(too_long.into())),
            },
            Poll::Ready(next) => next.map(|item| item.map_err(Into::into)),
            Poll::Pending => return Poll::Pending,
        };
        if matches!(next, Some(Ok(_))) {
            self.just_yielded = true;
        }
        Poll::Ready(next)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn every_text_field_is_one_the_form_sets() {
        for name in TEXT_FIELDS {
            let mut draft = ImageParamsDraft::default();
            let text = match name {
                "n" | "output_compression" | "partial_images" => "1",
                "stream" => "true",
                _ => "x",
            };
            assert!(
                set_text_field(&mut draft, name, text.to_owned()).is_ok(),
                "{name}"
            );
            assert_eq!(PartName::parse(name), PartName::Text, "{name}");
        }
        assert_eq!(PartName::parse("images[]"), PartName::Unknown);
    }
}

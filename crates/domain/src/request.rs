//! Image generation and edit requests: the decoded [`ImageParamsDraft`], the validated
//! [`ImageParams`] and the rules between them ([`validate_generation`], [`validate_edit`]).

use std::str::FromStr;

use crate::error::RequestError;
use crate::model::{ModelCatalog, ModelId};
use crate::params::{Background, Moderation, OutputFormat, Quality};
use crate::size::{ImageSize, SizeClass};

/// Longest prompt accepted, in characters (Unicode scalar values).
pub const MAX_PROMPT_CHARS: usize = 32_000;
/// Fewest images per request.
pub const MIN_N: i64 = 1;
/// Most images per request.
pub const MAX_N: i64 = 10;
/// Most partial images per streamed image.
pub const MAX_PARTIAL_IMAGES: i64 = 3;
/// Largest `output_compression` (percent).
pub const MAX_OUTPUT_COMPRESSION: i64 = 100;

/// A generation or edit request as decoded from the wire, before any rule is applied.
/// `None` means absent (JSON `null` counts as absent).
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(default)]
pub struct ImageParamsDraft {
    /// `model`.
    pub model: Option<String>,
    /// `prompt`.
    pub prompt: Option<String>,
    /// `n`.
    pub n: Option<i64>,
    /// `size`.
    pub size: Option<String>,
    /// `quality`.
    pub quality: Option<String>,
    /// `output_format`.
    pub output_format: Option<String>,
    /// `output_compression`.
    pub output_compression: Option<i64>,
    /// `background`.
    pub background: Option<String>,
    /// `moderation`.
    pub moderation: Option<String>,
    /// `stream`.
    pub stream: Option<bool>,
    /// `partial_images`.
    pub partial_images: Option<i64>,
    /// `user`.
    pub user: Option<String>,
    /// `input_fidelity` (always refused by `gpt-image-2`).
    pub input_fidelity: Option<String>,
    /// `response_format` (only `b64_json` is accepted).
    pub response_format: Option<String>,
}

/// A validated generation or edit request with every default filled in.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ImageParams {
    /// The model, resolved through the catalog.
    pub model: ModelId,
    /// Non-empty prompt of at most [`MAX_PROMPT_CHARS`] characters.
    pub prompt: String,
    /// Number of images, 1 to 10 (default 1).
    pub n: u8,
    /// Output size (default `auto`).
    pub size: ImageSize,
    /// Quality (default `auto`).
    pub quality: Quality,
    /// Output format (default `png`).
    pub output_format: OutputFormat,
    /// Compression 0-100 for `jpeg`/`webp`; always `None` for `png` (a value sent with png
    /// is accepted and dropped) and when absent (the upstream default applies).
    pub output_compression: Option<u8>,
    /// Background (default `auto`).
    pub background: Background,
    /// Moderation (default `auto`).
    pub moderation: Moderation,
    /// Whether the response is a stream of server-sent events (default false).
    pub stream: bool,
    /// Partial images per image, 0-3 (default 0); above 0 only when `stream` is true.
    pub partial_images: u8,
    /// End-user id, passed through.
    pub user: Option<String>,
}

impl ImageParams {
    /// Size class of the requested size.
    pub fn size_class(&self) -> SizeClass {
        self.size.size_class()
    }
}

/// Validates a `POST /v1/images/generations` draft.
///
/// Rules, checked in this order: `model` present and accepted by `catalog`; `prompt`
/// present, not blank, at most 32,000 characters; `n` 1-10; `size` (see [`ImageSize`]);
/// `quality`, `output_format`, `background` (`transparent` refused), `moderation`;
/// `output_compression` 0-100 (with `png` it is accepted and dropped: the result holds
/// `None`); `partial_images` 0-3 and above 0 only with `stream: true`; `response_format`
/// absent or `b64_json`. `input_fidelity` is not a generation parameter
/// ([`RequestError::UnknownParameter`]).
pub fn validate_generation(
    draft: ImageParamsDraft,
    catalog: &ModelCatalog,
) -> Result<ImageParams, RequestError> {
    if draft.input_fidelity.is_some() {
        return Err(RequestError::UnknownParameter {
            param: "input_fidelity".to_owned(),
        });
    }
    validate_common(draft, catalog)
}

/// Validates the text fields of a `POST /v1/images/edits` form: the same rules as
/// [`validate_generation`], except that `input_fidelity` is refused with
/// [`RequestError::Unsupported`] because `gpt-image-2` always reads input images at high
/// fidelity. The files are checked separately ([`crate::check_mask`],
/// [`crate::check_image_count`], [`crate::check_file_size`]).
pub fn validate_edit(draft: ImageParamsDraft, catalog: &ModelCatalog) -> Result<ImageParams, RequestError> {
    if draft.input_fidelity.is_some() {
        return Err(input_fidelity_refused());
    }
    validate_common(draft, catalog)
}

/// Checks the fields of an edit form read so far, before the files after them are read: a field
/// that already breaks a rule fails with the error [`validate_edit`] gives it, so a client never
/// uploads megabytes to hear that its `size` is wrong. Rules that need a field not read yet (a
/// missing model or prompt, `partial_images` without `stream`) wait for [`validate_edit`].
pub fn check_edit_so_far(draft: &ImageParamsDraft, catalog: &ModelCatalog) -> Result<(), RequestError> {
    if draft.input_fidelity.is_some() {
        return Err(input_fidelity_refused());
    }
    if let Some(model) = draft.model.as_deref() {
        resolve_model(Some(model), catalog)?;
    }
    if draft.prompt.is_some() {
        check_prompt(draft.prompt.clone())?;
    }
    ranged("n", draft.n, MIN_N, MAX_N)?;
    parse_size(draft.size.as_deref())?;
    parse_enum::<Quality>(draft.quality.as_deref())?;
    let output_format: OutputFormat = parse_enum(draft.output_format.as_deref())?;
    compression(draft.output_compression, output_format)?;
    parse_enum::<Background>(draft.background.as_deref())?;
    parse_enum::<Moderation>(draft.moderation.as_deref())?;
    if partial_images(draft.partial_images)? > 0 && draft.stream == Some(false) {
        return Err(RequestError::PartialImagesWithoutStream);
    }
    check_response_format(draft.response_format.as_deref())
}

/// `input_fidelity` is refused where it would reach the upstream (edits, the Responses image
/// tool): `gpt-image-2` always processes input images at high fidelity and refuses the parameter.
pub(crate) fn input_fidelity_refused() -> RequestError {
    RequestError::Unsupported {
        param: "input_fidelity".to_owned(),
        reason: "input_fidelity must be omitted: gpt-image-2 always processes input images at high \
                 fidelity"
            .to_owned(),
    }
}

fn validate_common(draft: ImageParamsDraft, catalog: &ModelCatalog) -> Result<ImageParams, RequestError> {
    let model = resolve_model(draft.model.as_deref(), catalog)?;
    let prompt = check_prompt(draft.prompt)?;
    let n = ranged("n", draft.n, MIN_N, MAX_N)?.unwrap_or(1);
    let size = parse_size(draft.size.as_deref())?;
    let quality: Quality = parse_enum(draft.quality.as_deref())?;
    let output_format: OutputFormat = parse_enum(draft.output_format.as_deref())?;
    let output_compression = compression(draft.output_compression, output_format)?;
    let background: Background = parse_enum(draft.background.as_deref())?;
    let moderation: Moderation = parse_enum(draft.moderation.as_deref())?;
    let stream = draft.stream.unwrap_or(false);
    let partial_images = partial_images(draft.partial_images)?;
    if partial_images > 0 && !stream {
        return Err(RequestError::PartialImagesWithoutStream);
    }
    check_response_format(draft.response_format.as_deref())?;
    Ok(ImageParams {
        model,
        prompt,
        n,
        size,
        quality,
        output_format,
        output_compression,
        background,
        moderation,
        stream,
        partial_images,
        user: draft.user,
    })
}

/// Resolves a required model id (absent or empty: [`RequestError::Missing`]).
pub(crate) fn resolve_model(model: Option<&str>, catalog: &ModelCatalog) -> Result<ModelId, RequestError> {
    match model {
        None | Some("") => Err(RequestError::Missing {
            param: "model".to_owned(),
        }),
        Some(id) => catalog.resolve(id),
    }
}

fn check_prompt(prompt: Option<String>) -> Result<String, RequestError> {
    let prompt = prompt.ok_or_else(|| RequestError::Missing {
        param: "prompt".to_owned(),
    })?;
    if prompt.trim().is_empty() {
        return Err(RequestError::Empty {
            param: "prompt".to_owned(),
        });
    }
    let length = prompt.chars().count();
    if length > MAX_PROMPT_CHARS {
        return Err(RequestError::TooLong {
            param: "prompt".to_owned(),
            length,
            max: MAX_PROMPT_CHARS,
        });
    }
    Ok(prompt)
}

/// Checks an optional integer against `min..=max` and narrows it to `u8`.
pub(crate) fn ranged(
    param: &str,
    value: Option<i64>,
    min: i64,
    max: i64,
) -> Result<Option<u8>, RequestError> {
    let Some(value) = value else { return Ok(None) };
    let out_of_range = || RequestError::OutOfRange {
        param: param.to_owned(),
        value,
        min,
        max,
    };
    if value < min || value > max {
        return Err(out_of_range());
    }
    u8::try_from(value).map(Some).map_err(|_| out_of_range())
}

pub(crate) fn parse_size(size: Option<&str>) -> Result<ImageSize, RequestError> {
    size.map_or(Ok(ImageSize::Auto), |s| {
        s.parse().map_err(RequestError::InvalidSize)
    })
}

pub(crate) fn parse_enum<T>(value: Option<&str>) -> Result<T, RequestError>
where
    T: FromStr<Err = RequestError> + Default,
{
    value.map_or_else(|| Ok(T::default()), str::parse)
}

pub(crate) fn partial_images(value: Option<i64>) -> Result<u8, RequestError> {
    Ok(ranged("partial_images", value, 0, MAX_PARTIAL_IMAGES)?.unwrap_or(0))
}

/// Range-checks `output_compression` and drops it for `png`, where it has no meaning.
pub(crate) fn compression(value: Option<i64>, format: OutputFormat) -> Result<Option<u8>, RequestError> {
    let value = ranged("output_compression", value, 0, MAX_OUTPUT_COMPRESSION)?;
    Ok(if format == OutputFormat::Png { None } else { value })
}

fn check_response_format(value: Option<&str>) -> Result<(), RequestError> {
    match value {
        None | Some("b64_json") => Ok(()),
        Some("url") => Err(RequestError::Unsupported {
            param: "response_format".to_owned(),
            reason: "response_format 'url' is not supported: gpt-image-2 returns images only as \
                     base64 (b64_json); omit response_format or set it to b64_json"
                .to_owned(),
        }),
        Some(other) => Err(RequestError::InvalidValue {
            param: "response_format".to_owned(),
            value: crate::error::echo(other),
            allowed: "b64_json".to_owned(),
        }),
    }
}

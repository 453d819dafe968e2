//! The Responses API (`POST /v1/responses`): the main model must be a text/agent model, and
//! the `image_generation` tool follows the same value rules as the Images API.

use crate::error::{RequestError, echo};
use crate::model::{ModelCatalog, ModelId};
use crate::params::{Background, ImageAction, Moderation, OutputFormat, Quality};
use crate::request::{compression, parse_enum, parse_size, partial_images};
use crate::size::ImageSize;

/// An `image_generation` tool entry as decoded from the wire, before any rule is applied.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(default)]
pub struct ImageToolDraft {
    /// `quality`.
    pub quality: Option<String>,
    /// `size`.
    pub size: Option<String>,
    /// `output_format`.
    pub output_format: Option<String>,
    /// `background`.
    pub background: Option<String>,
    /// `moderation`.
    pub moderation: Option<String>,
    /// `model` (the image model).
    pub model: Option<String>,
    /// `output_compression`.
    pub output_compression: Option<i64>,
    /// `partial_images`.
    pub partial_images: Option<i64>,
    /// `action`.
    pub action: Option<String>,
    /// `input_fidelity` (always refused: `gpt-image-2` reads input images at high fidelity).
    pub input_fidelity: Option<String>,
}

/// A validated `image_generation` tool with every default filled in.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ImageTool {
    /// The image model, resolved through the catalog; `None` when the tool names none (the
    /// gateway decides what to send upstream).
    pub model: Option<ModelId>,
    /// Quality (default `auto`).
    pub quality: Quality,
    /// Output size (default `auto`).
    pub size: ImageSize,
    /// Output format (default `png`).
    pub output_format: OutputFormat,
    /// Compression for `jpeg`/`webp`; `None` for `png` (dropped) or when absent.
    pub output_compression: Option<u8>,
    /// Background (default `auto`; `transparent` refused).
    pub background: Background,
    /// Moderation (default `auto`).
    pub moderation: Moderation,
    /// Partial images, 0-3 (default 0). Only streamed responses carry them.
    pub partial_images: u8,
    /// Generate, edit, or let the model decide (default `auto`).
    pub action: ImageAction,
}

/// Checks the top-level `model` of a Responses request and returns it.
///
/// Absent or empty: [`RequestError::Missing`]. An image model (any id or alias in
/// `catalog`, or any id starting with `gpt-image-`): [`RequestError::ImageModelAsMainModel`],
/// whose message tells the caller to use a text/agent model and put the image model in the
/// `image_generation` tool.
pub fn validate_main_model(model: Option<&str>, catalog: &ModelCatalog) -> Result<String, RequestError> {
    match model {
        None | Some("") => Err(RequestError::Missing {
            param: "model".to_owned(),
        }),
        Some(id) if catalog.is_image_model(id) || id.starts_with("gpt-image-") => {
            Err(RequestError::ImageModelAsMainModel { model: echo(id) })
        }
        Some(id) if id.len() > MAX_MAIN_MODEL_CHARS && id.chars().count() > MAX_MAIN_MODEL_CHARS => {
            Err(RequestError::TooLong {
                param: "model".to_owned(),
                length: id.chars().count(),
                max: MAX_MAIN_MODEL_CHARS,
            })
        }
        Some(id) => Ok(id.to_owned()),
    }
}

/// The longest main model id passed on; real ids are a few dozen characters.
const MAX_MAIN_MODEL_CHARS: usize = 256;

/// Validates one `image_generation` tool entry with the Images API value rules.
///
/// Errors carry the bare parameter name (e.g. `size`); the codec may prefix it with the
/// tool's position (`tools[0].size`). `partial_images` is not tied to `stream` here: the
/// Responses request's own `stream` decides whether partial images are sent.
pub fn validate_image_tool(draft: ImageToolDraft, catalog: &ModelCatalog) -> Result<ImageTool, RequestError> {
    if draft.input_fidelity.is_some() {
        return Err(crate::request::input_fidelity_refused());
    }
    let model = match draft.model.as_deref() {
        None => None,
        Some("") => {
            return Err(RequestError::Empty {
                param: "model".to_owned(),
            });
        }
        Some(id) => Some(catalog.resolve(id)?),
    };
    let quality: Quality = parse_enum(draft.quality.as_deref())?;
    let size = parse_size(draft.size.as_deref())?;
    let output_format: OutputFormat = parse_enum(draft.output_format.as_deref())?;
    let output_compression = compression(draft.output_compression, output_format)?;
    let background: Background = parse_enum(draft.background.as_deref())?;
    let moderation: Moderation = parse_enum(draft.moderation.as_deref())?;
    let partial_images = partial_images(draft.partial_images)?;
    let action: ImageAction = parse_enum(draft.action.as_deref())?;
    Ok(ImageTool {
        model,
        quality,
        size,
        output_format,
        output_compression,
        background,
        moderation,
        partial_images,
        action,
    })
}

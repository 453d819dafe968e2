//! Pure domain model of imagegate, a gateway for OpenAI `gpt-image-2` image generation.
//!
//! No I/O, no async, no HTTP: this crate says what a valid request is. It holds the model
//! ids and their configurable [`ModelCatalog`], the output [`ImageSize`] with every size
//! rule of `gpt-image-2`, the closed-set parameters ([`Quality`], [`OutputFormat`],
//! [`Background`], [`Moderation`], [`ImageAction`]), the decoded drafts and their validated
//! forms ([`validate_generation`], [`validate_edit`], [`validate_image_tool`],
//! [`validate_main_model`]), the edit file rules ([`check_mask`]), token [`Usage`], and the
//! typed refusals ([`RequestError`]) with the [`ErrorKind`] the gateway answers with.
//!
//! Every refusal names the parameter at fault and says what to change:
//!
//! ```
//! use imagegate_domain::{
//!     validate_generation, ImageParamsDraft, ImageSize, ModelCatalog, OutputFormat, SizeClass,
//!     SizeRule,
//! };
//!
//! // Sizes: `auto` or WIDTHxHEIGHT meeting every size rule.
//! let size: ImageSize = "3840x2160".parse()?;
//! assert_eq!(size.size_class(), SizeClass::Large);
//! assert_eq!(size.to_string(), "3840x2160");
//!
//! let err = "1792x936".parse::<ImageSize>().unwrap_err();
//! assert_eq!(err.rule, SizeRule::EdgeMultipleOf16);
//! assert!(err.to_string().starts_with("size 1792x936: height 936 is not a multiple of 16"));
//!
//! // A generation request, as decoded by the codec.
//! let catalog = ModelCatalog::default();
//! let draft = ImageParamsDraft {
//!     model: Some("gpt-image-2".into()),
//!     prompt: Some("a lighthouse at dusk, watercolor".into()),
//!     size: Some("1536x1024".into()),
//!     output_format: Some("webp".into()),
//!     output_compression: Some(80),
//!     ..Default::default()
//! };
//! let params = validate_generation(draft.clone(), &catalog)?;
//! assert_eq!(params.n, 1);
//! assert_eq!(params.output_format, OutputFormat::Webp);
//! assert_eq!(params.output_compression, Some(80));
//! assert_eq!(params.size_class(), SizeClass::Standard);
//!
//! // Refusals name the parameter.
//! let transparent = ImageParamsDraft { background: Some("transparent".into()), ..draft };
//! let err = validate_generation(transparent, &catalog).unwrap_err();
//! assert_eq!(err.param(), Some("background"));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod edit;
mod error;
mod model;
mod params;
mod request;
mod responses;
mod size;
mod size_rules;
mod usage;

pub use edit::{
    ImageFileFormat, ImageInfo, MAX_EDIT_IMAGES, MAX_FILE_BYTES, MaskError, check_file_size,
    check_image_count, check_mask,
};
pub use error::{ErrorKind, RequestError};
pub use model::{GPT_IMAGE_2, GPT_IMAGE_2_SNAPSHOT, ModelCatalog, ModelId};
pub use params::{Background, ImageAction, Moderation, OutputFormat, Quality};
pub use request::{
    ImageParams, ImageParamsDraft, MAX_N, MAX_OUTPUT_COMPRESSION, MAX_PARTIAL_IMAGES, MAX_PROMPT_CHARS,
    MIN_N, check_edit_so_far, validate_edit, validate_generation,
};
pub use responses::{ImageTool, ImageToolDraft, validate_image_tool, validate_main_model};
pub use size::{
    Dimensions, EDGE_MULTIPLE, ImageSize, LARGE_PIXELS, MAX_ASPECT, MAX_EDGE, MAX_EDGE_DIGITS, MAX_PIXELS,
    MIN_PIXELS, SizeClass, SizeError, SizeRule,
};
pub use usage::{TokenDetails, Usage};

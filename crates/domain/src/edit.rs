//! Rules for the input files of an edit: formats, count and size limits, and the mask.

use std::fmt;

use crate::error::RequestError;
use crate::size::Dimensions;

/// Most input images one edit accepts.
pub const MAX_EDIT_IMAGES: usize = 16;
/// Size limit of every uploaded file, in bytes: a file must be strictly smaller.
pub const MAX_FILE_BYTES: u64 = 50 * 1024 * 1024;

/// Image file formats accepted as edit inputs (identified from the bytes, not the name).
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum ImageFileFormat {
    /// PNG.
    Png,
    /// JPEG.
    Jpeg,
    /// WebP.
    Webp,
}

impl ImageFileFormat {
    /// Lowercase name: `png`, `jpeg` or `webp`.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Png => "png",
            Self::Jpeg => "jpeg",
            Self::Webp => "webp",
        }
    }

    /// MIME type, e.g. `image/png`.
    pub const fn mime(self) -> &'static str {
        match self {
            Self::Png => "image/png",
            Self::Jpeg => "image/jpeg",
            Self::Webp => "image/webp",
        }
    }
}

impl fmt::Display for ImageFileFormat {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What the gateway knows about an uploaded image after reading its header.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub struct ImageInfo {
    /// File format found in the bytes.
    pub format: ImageFileFormat,
    /// Pixel dimensions from the header.
    pub dimensions: Dimensions,
    /// Whether the image has an alpha channel (or PNG transparency).
    pub has_alpha: bool,
    /// File length in bytes.
    pub byte_len: u64,
}

/// Why a mask does not fit the first input image.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum MaskError {
    /// The mask has no alpha channel, so it marks no area to edit.
    #[error(
        "the mask has no alpha channel: {} whose transparent pixels mark the area to edit",
        no_alpha_advice(*format, *image)
    )]
    NoAlpha {
        /// Format of the mask.
        format: ImageFileFormat,
        /// Format of the first image.
        image: ImageFileFormat,
    },
    /// The mask is not of the image's format (PNG for a JPEG image).
    #[error(
        "the mask is {mask} but the image is {image}: save the mask as {}",
        mask_format_for(*image)
    )]
    FormatMismatch {
        /// Format of the first image.
        image: ImageFileFormat,
        /// Format of the mask.
        mask: ImageFileFormat,
    },
    /// Mask and image have different pixel dimensions.
    #[error("the mask is {mask} pixels but the image is {image}: resize the mask to {image}")]
    DimensionMismatch {
        /// Dimensions of the first image.
        image: Dimensions,
        /// Dimensions of the mask.
        mask: Dimensions,
    },
}

/// The format a mask for an image of format `image` must have: the image's own, or PNG for a
/// JPEG image (JPEG cannot carry an alpha channel; OpenAI takes PNG masks).
fn mask_format_for(image: ImageFileFormat) -> ImageFileFormat {
    match image {
        ImageFileFormat::Jpeg => ImageFileFormat::Png,
        other => other,
    }
}

/// What a mask without alpha should be instead.
fn no_alpha_advice(mask: ImageFileFormat, image: ImageFileFormat) -> String {
    let wanted = mask_format_for(image);
    match mask {
        ImageFileFormat::Jpeg => format!("jpeg has none, so send a {wanted} mask"),
        _ => format!("it must be a {wanted} image"),
    }
}

/// Checks a mask against the first input image: alpha channel present, same format, same
/// dimensions (in that order). A JPEG image, whose format cannot carry alpha, takes a PNG mask.
/// Each failure is a [`RequestError::InvalidMask`] with param `mask`.
pub fn check_mask(first_image: &ImageInfo, mask: &ImageInfo) -> Result<(), RequestError> {
    if !mask.has_alpha {
        return Err(MaskError::NoAlpha {
            format: mask.format,
            image: first_image.format,
        }
        .into());
    }
    if mask.format != mask_format_for(first_image.format) {
        return Err(MaskError::FormatMismatch {
            image: first_image.format,
            mask: mask.format,
        }
        .into());
    }
    if mask.dimensions != first_image.dimensions {
        return Err(MaskError::DimensionMismatch {
            image: first_image.dimensions,
            mask: mask.dimensions,
        }
        .into());
    }
    Ok(())
}

/// Checks the number of input images of an edit: at least one
/// ([`RequestError::Missing`] with param `image`), at most [`MAX_EDIT_IMAGES`]
/// ([`RequestError::TooManyImages`]).
pub fn check_image_count(count: usize) -> Result<(), RequestError> {
    if count == 0 {
        return Err(RequestError::Missing {
            param: "image".to_owned(),
        });
    }
    if count > MAX_EDIT_IMAGES {
        return Err(RequestError::TooManyImages { count });
    }
    Ok(())
}

/// Checks that a file of `byte_len` bytes in form field `param` is under
/// [`MAX_FILE_BYTES`] ([`RequestError::FileTooLarge`] otherwise).
pub fn check_file_size(param: &str, byte_len: u64) -> Result<(), RequestError> {
    if byte_len >= MAX_FILE_BYTES {
        return Err(RequestError::FileTooLarge {
            param: param.to_owned(),
            limit: MAX_FILE_BYTES,
        });
    }
    Ok(())
}

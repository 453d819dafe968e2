//! Identify PNG, JPEG and WebP files from their bytes, and read their dimensions and alpha channel
//! from the headers only (no pixel data is decoded).
//!
//! - PNG: the `IHDR` colour type (grey+alpha or RGBA), or a `tRNS` chunk before the first `IDAT`.
//! - JPEG: the first start-of-frame (`SOFn`) segment; JPEG has no alpha channel.
//! - WebP: the `VP8 ` key-frame header (no alpha), the `VP8L` header's alpha hint, or the `VP8X`
//!   canvas size and alpha flag.

use imagegate_domain::{Dimensions, ImageFileFormat, ImageInfo};

/// Bytes needed by [`sniff_format`] to recognise a format.
pub const MAGIC_LEN: usize = 12;

const PNG_SIGNATURE: &[u8] = b"\x89PNG\r\n\x1a\n";

/// Why a file's header could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HeaderError {
    /// The bytes are not a PNG, JPEG or WebP file.
    #[error("the file is not a PNG, JPEG or WebP image")]
    Unrecognized,
    /// The file ends inside its header.
    #[error("the {0} file is truncated: its header is incomplete")]
    Truncated(ImageFileFormat),
    /// The header is present but not valid.
    #[error("the {format} header is invalid: {reason}")]
    Invalid {
        /// Format recognised from the signature.
        format: ImageFileFormat,
        /// What is wrong.
        reason: &'static str,
    },
    /// Animated WebP files are not accepted as input images.
    #[error("animated WebP images are not supported")]
    Animated,
}

/// The format named by the file's signature, if it is one of the three accepted formats.
/// Needs [`MAGIC_LEN`] bytes for WebP, 8 for PNG, 3 for JPEG.
pub fn sniff_format(prefix: &[u8]) -> Option<ImageFileFormat> {
    if prefix.starts_with(PNG_SIGNATURE) {
        Some(ImageFileFormat::Png)
    } else if prefix.starts_with(&[0xFF, 0xD8, 0xFF]) {
        Some(ImageFileFormat::Jpeg)
    } else if prefix.starts_with(b"RIFF") && prefix.get(8..12) == Some(b"WEBP") {
        Some(ImageFileFormat::Webp)
    } else {
        None
    }
}

/// Reads format, dimensions and alpha from the header of a whole file; `byte_len` is
/// `bytes.len()`.
pub fn sniff(bytes: &[u8]) -> Result<ImageInfo, HeaderError> {
    let (format, width, height, has_alpha) = match sniff_format(bytes) {
        Some(ImageFileFormat::Png) => png(bytes)?,
        Some(ImageFileFormat::Jpeg) => jpeg(bytes)?,
        Some(ImageFileFormat::Webp) => webp(bytes)?,
        None => return Err(HeaderError::Unrecognized),
    };
    if width == 0 || height == 0 {
        return Err(HeaderError::Invalid {
            format,
            reason: "width or height is zero",
        });
    }
    Ok(ImageInfo {
        format,
        dimensions: Dimensions { width, height },
        has_alpha,
        byte_len: u64::try_from(bytes.len()).unwrap_or(u64::MAX),
    })
}

/// The pixel size in the header at the start of a file, when it is complete there: unlike
/// [`sniff`], the alpha channel is not looked for, so a PNG needs only its `IHDR` chunk (the
/// chunks before its pixel data, such as an ICC profile, may lie past `prefix`).
pub fn dimensions(prefix: &[u8]) -> Option<Dimensions> {
    let (width, height) = match sniff_format(prefix)? {
        ImageFileFormat::Png => {
            let (width, height, _) = png_ihdr(prefix).ok()?;
            (width, height)
        }
        _ => {
            let info = sniff(prefix).ok()?;
            (info.dimensions.width, info.dimensions.height)
        }
    };
    (width > 0 && height > 0).then_some(Dimensions { width, height })
}

type Header = (ImageFileFormat, u32, u32, bool);

fn be_u32(bytes: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_be_bytes([
        *bytes.get(at)?,
        *bytes.get(at + 1)?,
        *bytes.get(at + 2)?,
        *bytes.get(at + 3)?,
    ]))
}

fn be_u16(bytes: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_be_bytes([*bytes.get(at)?, *bytes.get(at + 1)?]))
}

fn le_u16(bytes: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_le_bytes([*bytes.get(at)?, *bytes.get(at + 1)?]))
}

fn le_u24(bytes: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_le_bytes([
        *bytes.get(at)?,
        *bytes.get(at + 1)?,
        *bytes.get(at + 2)?,
        0,
    ]))
}

fn le_u32(bytes: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_le_bytes([
        *bytes.get(at)?,
        *bytes.get(at + 1)?,
        *bytes.get(at + 2)?,
        *bytes.get(at + 3)?,
    ]))
}

fn png(bytes: &[u8]) -> Result<Header, HeaderError> {
    let (width, height, color_type) = png_ihdr(bytes)?;
    let has_alpha = match color_type {
        4 | 6 => true,
        0 | 2 | 3 => {
            has_trns_chunk(bytes, PNG_SIGNATURE.len()).ok_or(HeaderError::Truncated(ImageFileFormat::Png))?
        }
        _ => {
            return Err(HeaderError::Invalid {
                format: ImageFileFormat::Png,
                reason: "unknown colour type",
            });
        }
    };
    Ok((ImageFileFormat::Png, width, height, has_alpha))
}

/// Width, height and colour type from a PNG's `IHDR` chunk, which must come first.
fn png_ihdr(bytes: &[u8]) -> Result<(u32, u32, u8), HeaderError> {
    const FORMAT: ImageFileFormat = ImageFileFormat::Png;
    let truncated = HeaderError::Truncated(FORMAT);
    let ihdr_at = PNG_SIGNATURE.len();
    if bytes.get(ihdr_at + 4..ihdr_at + 8) != Some(b"IHDR") {
        return Err(if bytes.len() < ihdr_at + 8 {
            truncated
        } else {
            HeaderError::Invalid {
                format: FORMAT,
                reason: "the first chunk is not IHDR",
            }
        });
    }
    let width = be_u32(bytes, ihdr_at + 8).ok_or(truncated.clone())?;
    let height = be_u32(bytes, ihdr_at + 12).ok_or(truncated.clone())?;
    let color_type = *bytes.get(ihdr_at + 17).ok_or(truncated)?;
    if width > i32::MAX as u32 || height > i32::MAX as u32 {
        return Err(HeaderError::Invalid {
            format: FORMAT,
            reason: "width or height exceeds 2^31-1",
        });
    }
    Ok((width, height, color_type))
}

/// Walks the chunks after the signature until `IDAT`/`IEND`; `None` if the file ends first.
fn has_trns_chunk(bytes: &[u8], first_chunk_at: usize) -> Option<bool> {
    let mut at = first_chunk_at;
    loop {
        let length = usize::try_from(be_u32(bytes, at)?).ok()?;
        match bytes.get(at + 4..at + 8)? {
            b"tRNS" => return Some(true),
            b"IDAT" | b"IEND" => return Some(false),
            _ => at = at.checked_add(12)?.checked_add(length)?,
        }
    }
}

fn jpeg(bytes: &[u8]) -> Result<Header, HeaderError> {
    const FORMAT: ImageFileFormat = ImageFileFormat::Jpeg;
    let truncated = HeaderError::Truncated(FORMAT);
    let invalid = |reason| HeaderError::Invalid {
        format: FORMAT,
        reason,
    };
    let mut at = 2;
    loop {
        if *bytes.get(at).ok_or(truncated.clone())? != 0xFF {
            return Err(invalid("a segment does not start with a marker"));
        }
        while bytes.get(at) == Some(&0xFF) {
            at += 1;
        }
        let marker = *bytes.get(at).ok_or(truncated.clone())?;
        at += 1;
        match marker {
            0xD8 | 0x01 | 0xD0..=0xD7 => continue,
            0xD9 => return Err(invalid("the image ends before a frame header")),
            0xDA => return Err(invalid("scan data starts before a frame header")),
            _ => {}
        }
        let length = usize::from(be_u16(bytes, at).ok_or(truncated.clone())?);
        if length < 2 {
            return Err(invalid("a segment length is shorter than 2"));
        }
        let is_sof = matches!(marker, 0xC0..=0xCF) && !matches!(marker, 0xC4 | 0xC8 | 0xCC);
        if is_sof {
            let height = be_u16(bytes, at + 3).ok_or(truncated.clone())?;
            let width = be_u16(bytes, at + 5).ok_or(truncated)?;
            return Ok((FORMAT, u32::from(width), u32::from(height), false));
        }
        at += length;
    }
}

fn webp(bytes: &[u8]) -> Result<Header, HeaderError> {
    const FORMAT: ImageFileFormat = ImageFileFormat::Webp;
    let truncated = HeaderError::Truncated(FORMAT);
    let invalid = |reason| HeaderError::Invalid {
        format: FORMAT,
        reason,
    };
    let chunk = bytes.get(12..16).ok_or(truncated.clone())?;
    let body = 20;
    match chunk {
        b"VP8 " => {
            let frame_tag = *bytes.get(body).ok_or(truncated.clone())?;
            if frame_tag & 1 != 0 {
                return Err(invalid("the first VP8 frame is not a key frame"));
            }
            if bytes.get(body + 3..body + 6).ok_or(truncated.clone())? != [0x9D, 0x01, 0x2A] {
                return Err(invalid("the VP8 start code is missing"));
            }
            let width = le_u16(bytes, body + 6).ok_or(truncated.clone())? & 0x3FFF;
            let height = le_u16(bytes, body + 8).ok_or(truncated)? & 0x3FFF;
            Ok((FORMAT, u32::from(width), u32::from(height), false))
        }
        b"VP8L" => {
            if *bytes.get(body).ok_or(truncated.clone())? != 0x2F {
                return Err(invalid("the VP8L signature is missing"));
            }
            let bits = le_u32(bytes, body + 1).ok_or(truncated)?;
            if bits >> 29 != 0 {
                return Err(invalid("unknown VP8L version"));
            }
            let width = (bits & 0x3FFF) + 1;
            let height = ((bits >> 14) & 0x3FFF) + 1;
            Ok((FORMAT, width, height, bits & (1 << 28) != 0))
        }
        b"VP8X" => {
            let flags = *bytes.get(body).ok_or(truncated.clone())?;
            if flags & 0x02 != 0 {
                return Err(HeaderError::Animated);
            }
            let width = le_u24(bytes, body + 4).ok_or(truncated.clone())? + 1;
            let height = le_u24(bytes, body + 7).ok_or(truncated)? + 1;
            Ok((FORMAT, width, height, flags & 0x10 != 0))
        }
        _ => Err(invalid("the first chunk is not VP8, VP8L or VP8X")),
    }
}

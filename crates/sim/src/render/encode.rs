//! PNG, JPEG and WebP encoding of a rendered picture.

use std::io::Cursor;

use image::RgbImage;
use image::codecs::jpeg::JpegEncoder;
use image::codecs::png::{CompressionType, FilterType, PngEncoder};
use image::codecs::webp::WebPEncoder;
use imagegate_domain::OutputFormat;

use super::RenderError;

/// Encodes `image` as `format`. PNG uses fast deflate, JPEG takes `compression` as its quality (default
/// 100, like the API's `output_compression`), WebP is lossless.
pub fn encode(
    image: &RgbImage,
    format: OutputFormat,
    compression: Option<u8>,
) -> Result<Vec<u8>, RenderError> {
    let mut out = Cursor::new(Vec::new());
    match format {
        OutputFormat::Png => {
            let encoder = PngEncoder::new_with_quality(&mut out, CompressionType::Fast, FilterType::Sub);
            image.write_with_encoder(encoder)?;
        }
        OutputFormat::Jpeg => {
            let quality = compression.unwrap_or(100).clamp(1, 100);
            image.write_with_encoder(JpegEncoder::new_with_quality(&mut out, quality))?;
        }
        OutputFormat::Webp => {
            image.write_with_encoder(WebPEncoder::new_lossless(&mut out))?;
        }
    }
    Ok(out.into_inner())
}

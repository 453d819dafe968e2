//! The image renderer: a seeded gradient-and-rings picture with a "SIMULATED" banner, its blockier partial
//! versions, PNG/JPEG/WebP encoding and a cache of the encoded results.

pub mod cache;
mod encode;
pub mod font;
pub mod partial;

use std::sync::Arc;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use image::{Rgb, RgbImage};

pub use cache::{CacheCounters, RenderCache};
pub use encode::encode;

use imagegate_domain::{Dimensions, OutputFormat, Quality};

/// Rendering or encoding failed.
#[derive(Debug, thiserror::Error)]
pub enum RenderError {
    /// The image crate could not encode the picture.
    #[error("encoding the simulated image failed: {0}")]
    Encode(#[from] image::ImageError),
    /// The blocking render task was cancelled or panicked.
    #[error("the render task did not finish: {0}")]
    Task(String),
    /// Zero-sized image requested.
    #[error("cannot render an image of {0}")]
    Empty(Dimensions),
}

/// Which version of an image: a partial (coarse) frame or the final image.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Variant {
    /// Partial image `index` (0-based) out of `count`.
    Partial {
        /// 0-based index.
        index: u8,
        /// How many partial images the request asked for.
        count: u8,
    },
    /// The final image.
    Final,
}

/// Everything that determines the pixels and bytes of one image.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct RenderSpec {
    /// Output size.
    pub dimensions: Dimensions,
    /// Output encoding.
    pub format: OutputFormat,
    /// Resolved quality (more noise, hence bigger files, at higher quality).
    pub quality: Quality,
    /// JPEG quality (0-100); ignored for PNG and for the lossless WebP encoder.
    pub compression: Option<u8>,
    /// Seed of the picture (see [`image_seed`]).
    pub seed: u64,
}

/// Cache key: a spec plus the variant.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct CacheKey {
    /// Output size.
    pub dimensions: Dimensions,
    /// Output encoding.
    pub format: OutputFormat,
    /// Resolved quality.
    pub quality: Quality,
    /// Compression setting that affects the bytes (None for PNG/WebP).
    pub compression: Option<u8>,
    /// Picture seed.
    pub seed: u64,
    /// Partial or final.
    pub variant: Variant,
}

impl CacheKey {
    fn new(spec: &RenderSpec, variant: Variant) -> Self {
        let compression = match spec.format {
            OutputFormat::Jpeg => spec.compression,
            OutputFormat::Png | OutputFormat::Webp => None,
        };
        Self {
            dimensions: spec.dimensions,
            format: spec.format,
            quality: spec.quality,
            compression,
            seed: spec.seed,
            variant,
        }
    }
}

/// An encoded image, held as base64 text (what every wire format carries); cheap to clone.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RenderedImage {
    /// Encoding.
    pub format: OutputFormat,
    /// Size in pixels.
    pub dimensions: Dimensions,
    /// Standard base64 of the encoded file, no `data:` prefix.
    pub b64: Arc<str>,
}

impl RenderedImage {
    /// Length of the base64 text.
    pub fn b64_len(&self) -> usize {
        self.b64.len()
    }

    /// The encoded file bytes.
    pub fn bytes(&self) -> Result<Vec<u8>, base64::DecodeError> {
        BASE64.decode(self.b64.as_bytes())
    }
}

/// Seed of image `index` of a request for `prompt` (FNV-1a of the prompt, mixed with the index).
pub fn image_seed(prompt: &str, index: u32) -> u64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in prompt.as_bytes() {
        hash ^= u64::from(*byte);
        hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
    }
    mix(hash ^ u64::from(index).wrapping_mul(0x9E37_79B9_7F4A_7C15))
}

/// SplitMix64 finaliser.
fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// Renders (or takes from `cache`) the requested variants of one image, in the order given. Runs on the
/// calling thread: call it from `spawn_blocking`.
pub fn render_variants(
    cache: &RenderCache,
    spec: &RenderSpec,
    variants: &[Variant],
) -> Result<Vec<RenderedImage>, RenderError> {
    let mut found: Vec<Option<RenderedImage>> = variants
        .iter()
        .map(|variant| cache.get(&CacheKey::new(spec, *variant)))
        .collect();
    if found.iter().any(Option::is_none) {
        let base = render_base(spec)?;
        for (slot, variant) in found.iter_mut().zip(variants) {
            if slot.is_some() {
                continue;
            }
            let bytes = match variant {
                Variant::Final => encode(&base, spec.format, spec.compression)?,
                Variant::Partial { index, count } => {
                    let short = spec.dimensions.width.min(spec.dimensions.height);
                    let coarse = partial::pixelate(&base, partial::block_size(*index, *count, short));
                    encode(&coarse, spec.format, spec.compression)?
                }
            };
            let image = RenderedImage {
                format: spec.format,
                dimensions: spec.dimensions,
                b64: BASE64.encode(bytes).into(),
            };
            cache.insert(CacheKey::new(spec, *variant), image.clone());
            *slot = Some(image);
        }
    }
    Ok(found.into_iter().flatten().collect())
}

/// Draws the full-detail picture of `spec`.
pub fn render_base(spec: &RenderSpec) -> Result<RgbImage, RenderError> {
    let Dimensions { width, height } = spec.dimensions;
    if width == 0 || height == 0 {
        return Err(RenderError::Empty(spec.dimensions));
    }
    let seed = spec.seed;
    let first = hsv((seed % 360) as f32, 0.65, 0.95);
    let second = hsv(((seed >> 9) % 180 + 90 + seed % 360) as f32, 0.75, 0.55);
    let angle = ((seed >> 20) % 628) as f32 / 100.0;
    let (dx, dy) = (angle.cos(), angle.sin());
    let corners = [
        0.0,
        width as f32 * dx,
        height as f32 * dy,
        width as f32 * dx + height as f32 * dy,
    ];
    let low = corners.iter().copied().fold(f32::INFINITY, f32::min);
    let high = corners.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    let span = (high - low).max(1.0);
    let centre_x = ((seed >> 30) % u64::from(width)) as f32;
    let centre_y = ((seed >> 40) % u64::from(height)) as f32;
    let ring = (width.min(height) as f32 / (6.0 + ((seed >> 50) % 6) as f32)).max(2.0);
    let noise = match spec.quality {
        Quality::Low => 2,
        Quality::Medium | Quality::Auto => 4,
        Quality::High => 8,
    };
    let band_top = height * 3 / 8;
    let band_bottom = height * 5 / 8;
    let grain = noise_tile(seed, noise);
    let base: [f32; 3] = first.map(|c| c * 255.0);
    let delta: [f32; 3] = [0, 1, 2]
        .map(|i| (second.get(i).copied().unwrap_or(0.0) - first.get(i).copied().unwrap_or(0.0)) * 255.0);
    let row_len = width as usize * 3;
    let mut pixels = vec![0u8; row_len * height as usize];
    for (y, row) in (0u32..).zip(pixels.chunks_exact_mut(row_len)) {
        let dim = if (band_top..band_bottom).contains(&y) {
            0.3
        } else {
            1.0
        };
        let row_offset = y as f32 * dy - low;
        let dist_y = (y as f32 - centre_y).powi(2);
        let grain_row = grain.get((y as usize % NOISE_TILE) * NOISE_TILE..).unwrap_or(&[]);
        for (x, pixel) in (0u32..).zip(row.chunks_exact_mut(3)) {
            let t = (x as f32 * dx + row_offset) / span;
            let distance = ((x as f32 - centre_x).powi(2) + dist_y).sqrt();
            let shade = if ((distance / ring) as u32).is_multiple_of(2) {
                dim
            } else {
                0.82 * dim
            };
            let noise = grain_row.get(x as usize % NOISE_TILE).copied().unwrap_or(0.0);
            for ((out, b), d) in pixel.iter_mut().zip(base).zip(delta) {
                *out = ((b + d * t) * shade + noise).clamp(0.0, 255.0) as u8;
            }
        }
    }
    let mut image = RgbImage::from_raw(width, height, pixels).ok_or(RenderError::Empty(spec.dimensions))?;
    draw_banner(&mut image, spec, band_top, band_bottom);
    Ok(image)
}

fn draw_banner(image: &mut RgbImage, spec: &RenderSpec, band_top: u32, band_bottom: u32) {
    let Dimensions { width, .. } = spec.dimensions;
    let band = band_bottom.saturating_sub(band_top);
    let title = "SIMULATED";
    let title_scale = font::fit_scale(title, width * 4 / 5, band * 11 / 20);
    let title_height = font::text_height(title_scale);
    let caption = format!(
        "IMAGEGATE-SIM {} {} #{:06X}",
        spec.dimensions,
        spec.quality,
        spec.seed >> 40
    );
    let caption_scale = font::fit_scale(&caption, width * 7 / 10, band / 8);
    let gap = band / 12;
    let block = title_height + gap + font::text_height(caption_scale);
    let top = band_top + band.saturating_sub(block) / 2;
    let title_x = width.saturating_sub(font::text_width(title, title_scale)) / 2;
    font::draw_text(image, title, title_x, top, title_scale, Rgb([255, 255, 255]));
    let caption_x = width.saturating_sub(font::text_width(&caption, caption_scale)) / 2;
    let caption_y = top + title_height + gap;
    font::draw_text(
        image,
        &caption,
        caption_x,
        caption_y,
        caption_scale,
        Rgb([255, 226, 120]),
    );
}

/// Edge of the square tile of grain repeated over the picture.
const NOISE_TILE: usize = 64;

/// A deterministic tile of grain values in `-amplitude..amplitude`.
fn noise_tile(seed: u64, amplitude: i32) -> Vec<f32> {
    let span = u64::from(amplitude.unsigned_abs() * 2).max(1);
    (0..NOISE_TILE * NOISE_TILE)
        .map(|i| ((mix(seed ^ i as u64) % span) as i64 - i64::from(amplitude)) as f32)
        .collect()
}

fn hsv(hue: f32, saturation: f32, value: f32) -> [f32; 3] {
    let h = (hue % 360.0) / 60.0;
    let c = value * saturation;
    let x = c * (1.0 - ((h % 2.0) - 1.0).abs());
    let m = value - c;
    let (r, g, b) = match h as u32 {
        0 => (c, x, 0.0),
        1 => (x, c, 0.0),
        2 => (0.0, c, x),
        3 => (0.0, x, c),
        4 => (x, 0.0, c),
        _ => (c, 0.0, x),
    };
    [r + m, g + m, b + m]
}

#[cfg(test)]
mod tests;

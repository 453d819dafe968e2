//! Small deterministic test images.

use std::io::Cursor;

use image::{ImageFormat, Rgb, RgbImage, Rgba, RgbaImage};

/// An opaque RGB PNG with a gradient.
pub fn png_rgb(width: u32, height: u32) -> Vec<u8> {
    let img = RgbImage::from_fn(width, height, |x, y| Rgb([(x % 256) as u8, (y % 256) as u8, 128]));
    encode(image::DynamicImage::ImageRgb8(img), ImageFormat::Png)
}

/// An opaque RGB PNG of `side`x`side` pseudo-random noise (from `seed`), barely compressed: about
/// `3 * side * side` bytes, for uploads larger than the gateway keeps in memory.
pub fn png_noise(side: u32, seed: u32) -> Vec<u8> {
    let mut state = seed.wrapping_mul(2_654_435_761) | 1;
    let img = RgbImage::from_fn(side, side, |_, _| {
        state ^= state << 13;
        state ^= state >> 17;
        state ^= state << 5;
        let [a, b, c, _] = state.to_le_bytes();
        Rgb([a, b, c])
    });
    let mut out = Vec::new();
    let encoder = image::codecs::png::PngEncoder::new_with_quality(
        &mut out,
        image::codecs::png::CompressionType::Fast,
        image::codecs::png::FilterType::NoFilter,
    );
    img.write_with_encoder(encoder).expect("encode noise PNG");
    out
}

/// An RGB JPEG with a gradient (JPEG has no alpha channel).
pub fn jpeg_rgb(width: u32, height: u32) -> Vec<u8> {
    let img = RgbImage::from_fn(width, height, |x, y| Rgb([(x % 256) as u8, (y % 256) as u8, 128]));
    encode(image::DynamicImage::ImageRgb8(img), ImageFormat::Jpeg)
}

/// An RGBA PNG with a gradient.
pub fn png_rgba(width: u32, height: u32) -> Vec<u8> {
    let img = RgbaImage::from_fn(width, height, |x, y| {
        Rgba([(x % 256) as u8, (y % 256) as u8, 64, 255])
    });
    encode(image::DynamicImage::ImageRgba8(img), ImageFormat::Png)
}

/// An RGBA PNG mask whose left half is transparent (the area to edit).
pub fn solid_mask(width: u32, height: u32) -> Vec<u8> {
    let img = RgbaImage::from_fn(width, height, |x, _| {
        Rgba([0, 0, 0, if x < width / 2 { 0 } else { 255 }])
    });
    encode(image::DynamicImage::ImageRgba8(img), ImageFormat::Png)
}

fn encode(img: image::DynamicImage, format: ImageFormat) -> Vec<u8> {
    let mut out = Cursor::new(Vec::new());
    img.write_to(&mut out, format).expect("encode test image");
    out.into_inner()
}

//! Test support: small deterministic images made at test time, multipart bodies, chunked streams.
//!
//! Each integration test file that needs it declares `mod support;`.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::convert::Infallible;

use bytes::Bytes;
use futures::Stream;

/// A deterministic pixel pattern with `channels` bytes per pixel; alpha (4th channel) varies.
pub fn pixels(width: u32, height: u32, channels: usize) -> Vec<u8> {
    let mut data = Vec::with_capacity(width as usize * height as usize * channels);
    for y in 0..height {
        for x in 0..width {
            let base = [
                (x * 7 % 256) as u8,
                (y * 13 % 256) as u8,
                ((x + y) * 5 % 256) as u8,
                if (x + y) % 3 == 0 { 0 } else { 255 },
            ];
            data.extend_from_slice(&base[..channels]);
        }
    }
    data
}

fn png_with(width: u32, height: u32, color: png::ColorType, channels: usize, trns: Option<&[u8]>) -> Vec<u8> {
    let mut out = Vec::new();
    {
        let mut encoder = png::Encoder::new(&mut out, width, height);
        encoder.set_color(color);
        encoder.set_depth(png::BitDepth::Eight);
        if let Some(trns) = trns {
            encoder.set_trns(trns.to_vec());
        }
        let mut writer = encoder.write_header().unwrap();
        writer.write_image_data(&pixels(width, height, channels)).unwrap();
        writer.finish().unwrap();
    }
    out
}

/// PNG, RGBA (colour type 6): has alpha.
pub fn png_rgba(width: u32, height: u32) -> Vec<u8> {
    png_with(width, height, png::ColorType::Rgba, 4, None)
}

/// PNG, RGB (colour type 2): no alpha.
pub fn png_rgb(width: u32, height: u32) -> Vec<u8> {
    png_with(width, height, png::ColorType::Rgb, 3, None)
}

/// PNG, RGB with a `tRNS` chunk (one transparent colour): counts as alpha.
pub fn png_rgb_trns(width: u32, height: u32) -> Vec<u8> {
    png_with(width, height, png::ColorType::Rgb, 3, Some(&[0, 0, 0, 0, 0, 0]))
}

/// PNG, grey + alpha (colour type 4).
pub fn png_gray_alpha(width: u32, height: u32) -> Vec<u8> {
    png_with(width, height, png::ColorType::GrayscaleAlpha, 2, None)
}

/// Baseline JPEG (no alpha).
pub fn jpeg(width: u16, height: u16) -> Vec<u8> {
    let mut out = Vec::new();
    let encoder = jpeg_encoder::Encoder::new(&mut out, 80);
    encoder
        .encode(
            &pixels(u32::from(width), u32::from(height), 3),
            width,
            height,
            jpeg_encoder::ColorType::Rgb,
        )
        .unwrap();
    out
}

/// Lossless WebP in the simple container (`VP8L`); `alpha` sets the header's alpha hint.
pub fn webp_lossless(width: u32, height: u32, alpha: bool) -> Vec<u8> {
    let mut out = Vec::new();
    let (color, channels) = if alpha {
        (image_webp::ColorType::Rgba8, 4)
    } else {
        (image_webp::ColorType::Rgb8, 3)
    };
    image_webp::WebPEncoder::new(&mut out)
        .encode(&pixels(width, height, channels), width, height, color)
        .unwrap();
    out
}

/// Lossless WebP in the extended container (`VP8X` + `VP8L` + EXIF); the VP8X alpha flag follows
/// `alpha`.
pub fn webp_extended(width: u32, height: u32, alpha: bool) -> Vec<u8> {
    let mut out = Vec::new();
    let (color, channels) = if alpha {
        (image_webp::ColorType::Rgba8, 4)
    } else {
        (image_webp::ColorType::Rgb8, 3)
    };
    let mut encoder = image_webp::WebPEncoder::new(&mut out);
    encoder.set_exif_metadata(b"Exif\0\0imagegate-test".to_vec());
    encoder
        .encode(&pixels(width, height, channels), width, height, color)
        .unwrap();
    out
}

/// A lossy WebP (`VP8 `) container whose key-frame header says `width` x `height`. Only the
/// header is real (no encoder for lossy WebP is used here), which is all the sniffer reads.
pub fn webp_lossy_header(width: u16, height: u16) -> Vec<u8> {
    let mut frame = vec![0x10, 0x02, 0x00, 0x9D, 0x01, 0x2A];
    frame.extend_from_slice(&width.to_le_bytes());
    frame.extend_from_slice(&height.to_le_bytes());
    frame.extend_from_slice(&[0; 8]);
    let mut out = b"RIFF".to_vec();
    out.extend_from_slice(&(4 + 8 + frame.len() as u32).to_le_bytes());
    out.extend_from_slice(b"WEBPVP8 ");
    out.extend_from_slice(&(frame.len() as u32).to_le_bytes());
    out.extend_from_slice(&frame);
    out
}

/// A `multipart/form-data` body under construction.
#[derive(Debug)]
pub struct Form {
    pub boundary: String,
    body: Vec<u8>,
}

impl Default for Form {
    fn default() -> Self {
        Self::new()
    }
}

impl Form {
    pub fn new() -> Self {
        Self {
            boundary: "imagegate-test-boundary-7MA4YWxk".to_owned(),
            body: Vec::new(),
        }
    }

    pub fn text(mut self, name: &str, value: &str) -> Self {
        let header = format!(
            "--{}\r\nContent-Disposition: form-data; name=\"{name}\"\r\n\r\n",
            self.boundary
        );
        self.body.extend_from_slice(header.as_bytes());
        self.body.extend_from_slice(value.as_bytes());
        self.body.extend_from_slice(b"\r\n");
        self
    }

    pub fn file(mut self, name: &str, filename: &str, content_type: &str, bytes: &[u8]) -> Self {
        let header = format!(
            "--{}\r\nContent-Disposition: form-data; name=\"{name}\"; filename=\"{filename}\"\r\n\
             Content-Type: {content_type}\r\n\r\n",
            self.boundary
        );
        self.body.extend_from_slice(header.as_bytes());
        self.body.extend_from_slice(bytes);
        self.body.extend_from_slice(b"\r\n");
        self
    }

    pub fn finish(mut self) -> (String, Vec<u8>) {
        self.body
            .extend_from_slice(format!("--{}--\r\n", self.boundary).as_bytes());
        (self.boundary, self.body)
    }
}

/// The bytes as a stream of chunks of at most `chunk` bytes.
pub fn chunked(bytes: Vec<u8>, chunk: usize) -> impl Stream<Item = Result<Bytes, Infallible>> + Send + Unpin {
    let bytes = Bytes::from(bytes);
    let pieces: Vec<Result<Bytes, Infallible>> = (0..bytes.len())
        .step_by(chunk.max(1))
        .map(|start| Ok(bytes.slice(start..(start + chunk.max(1)).min(bytes.len()))))
        .collect();
    futures::stream::iter(pieces)
}

/// Splits `bytes` at the given cut points (sorted, deduplicated, clamped).
pub fn split_at_points(bytes: &[u8], cuts: &[usize]) -> Vec<Vec<u8>> {
    let mut cuts: Vec<usize> = cuts.iter().map(|c| (*c).min(bytes.len())).collect();
    cuts.sort_unstable();
    cuts.dedup();
    let mut pieces = Vec::new();
    let mut start = 0;
    for cut in cuts {
        pieces.push(bytes[start..cut].to_vec());
        start = cut;
    }
    pieces.push(bytes[start..].to_vec());
    pieces
}

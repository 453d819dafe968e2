#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::disallowed_methods
)]

mod support;

use imagegate_codec::image_header::{HeaderError, dimensions, sniff, sniff_format};
use imagegate_domain::{Dimensions, ImageFileFormat};
use proptest::prelude::*;

fn check(bytes: &[u8], format: ImageFileFormat, width: u32, height: u32, alpha: bool) {
    let info = sniff(bytes).unwrap();
    assert_eq!(info.format, format);
    assert_eq!(info.dimensions, Dimensions { width, height });
    assert_eq!(info.has_alpha, alpha, "alpha of {format} {width}x{height}");
    assert_eq!(info.byte_len, bytes.len() as u64);
    assert_eq!(sniff_format(bytes), Some(format));
}

#[test]
fn png_colour_types_and_trns() {
    check(&support::png_rgba(37, 21), ImageFileFormat::Png, 37, 21, true);
    check(&support::png_rgb(16, 48), ImageFileFormat::Png, 16, 48, false);
    check(&support::png_rgb_trns(5, 3), ImageFileFormat::Png, 5, 3, true);
    check(&support::png_gray_alpha(9, 9), ImageFileFormat::Png, 9, 9, true);
}

#[test]
fn dimensions_need_only_the_header_at_the_start() {
    let size = |width, height| Some(Dimensions { width, height });
    assert_eq!(dimensions(&support::png_rgba(37, 21)), size(37, 21));
    // An opaque PNG cut right after its IHDR chunk: `sniff` would look on for a tRNS chunk.
    let opaque = support::png_rgb(16, 48);
    let cut = &opaque[..8 + 8 + 13 + 4];
    assert_eq!(sniff(cut), Err(HeaderError::Truncated(ImageFileFormat::Png)));
    assert_eq!(dimensions(cut), size(16, 48));
    assert_eq!(dimensions(&opaque[..20]), None, "IHDR cut short");
    assert_eq!(dimensions(&support::jpeg(40, 24)), size(40, 24));
    assert_eq!(dimensions(&support::webp_lossless(33, 17, true)), size(33, 17));
    assert_eq!(dimensions(b"GIF89a..........."), None);
}

#[test]
fn jpeg_frame_header() {
    check(&support::jpeg(40, 24), ImageFileFormat::Jpeg, 40, 24, false);
    check(&support::jpeg(1, 300), ImageFileFormat::Jpeg, 1, 300, false);
}

#[test]
fn webp_lossless_extended_and_lossy() {
    check(
        &support::webp_lossless(33, 17, true),
        ImageFileFormat::Webp,
        33,
        17,
        true,
    );
    check(
        &support::webp_lossless(33, 17, false),
        ImageFileFormat::Webp,
        33,
        17,
        false,
    );
    check(
        &support::webp_extended(64, 20, true),
        ImageFileFormat::Webp,
        64,
        20,
        true,
    );
    check(
        &support::webp_extended(64, 20, false),
        ImageFileFormat::Webp,
        64,
        20,
        false,
    );
    check(
        &support::webp_lossy_header(1024, 768),
        ImageFileFormat::Webp,
        1024,
        768,
        false,
    );
}

#[test]
fn generated_webp_files_are_real_and_agree_with_a_decoder() {
    for bytes in [
        support::webp_lossless(31, 7, true),
        support::webp_extended(12, 40, false),
    ] {
        let decoder = image_webp::WebPDecoder::new(std::io::Cursor::new(&bytes)).unwrap();
        let info = sniff(&bytes).unwrap();
        assert_eq!(
            decoder.dimensions(),
            (info.dimensions.width, info.dimensions.height)
        );
        assert_eq!(decoder.has_alpha(), info.has_alpha);
    }
}

#[test]
fn generated_png_files_agree_with_a_decoder() {
    for bytes in [support::png_rgba(3, 4), support::png_rgb(8, 2)] {
        let decoder = png::Decoder::new(std::io::Cursor::new(&bytes));
        let reader = decoder.read_info().unwrap();
        let header = reader.info();
        let info = sniff(&bytes).unwrap();
        assert_eq!(
            (header.width, header.height),
            (info.dimensions.width, info.dimensions.height)
        );
    }
}

#[test]
fn other_files_are_unrecognized() {
    for bytes in [
        &b"GIF89a......"[..],
        b"%PDF-1.7",
        b"",
        b"RIFF\0\0\0\0WAVEfmt ",
        b"<svg/>",
    ] {
        assert_eq!(sniff(bytes), Err(HeaderError::Unrecognized), "{bytes:?}");
    }
}

#[test]
fn truncated_headers_say_so() {
    let png = support::png_rgba(4, 4);
    assert_eq!(
        sniff(&png[..20]),
        Err(HeaderError::Truncated(ImageFileFormat::Png))
    );
    let jpeg = support::jpeg(8, 8);
    assert_eq!(
        sniff(&jpeg[..10]),
        Err(HeaderError::Truncated(ImageFileFormat::Jpeg))
    );
    let webp = support::webp_lossless(4, 4, true);
    assert_eq!(
        sniff(&webp[..16]),
        Err(HeaderError::Truncated(ImageFileFormat::Webp))
    );
}

#[test]
fn png_rgb_without_idat_before_the_end_is_truncated() {
    let png = support::png_rgb(4, 4);
    // Signature + IHDR (25 bytes) only: the tRNS search runs off the end.
    assert_eq!(
        sniff(&png[..33]),
        Err(HeaderError::Truncated(ImageFileFormat::Png))
    );
}

#[test]
fn zero_dimensions_and_bad_markers_are_invalid() {
    let mut png = support::png_rgba(4, 4);
    png[16..20].copy_from_slice(&0u32.to_be_bytes());
    assert!(matches!(
        sniff(&png),
        Err(HeaderError::Invalid {
            format: ImageFileFormat::Png,
            ..
        })
    ));
    let jpeg = [0xFF, 0xD8, 0xFF, 0xD9];
    assert!(matches!(
        sniff(&jpeg),
        Err(HeaderError::Invalid {
            format: ImageFileFormat::Jpeg,
            ..
        })
    ));
}

#[test]
fn animated_webp_is_refused() {
    let mut webp = support::webp_extended(8, 8, true);
    webp[20] |= 0x02;
    assert_eq!(sniff(&webp), Err(HeaderError::Animated));
}

proptest! {
    #[test]
    fn sniff_never_panics_on_arbitrary_bytes(bytes in prop::collection::vec(any::<u8>(), 0..256)) {
        if let Ok(info) = sniff(&bytes) {
            prop_assert!(info.dimensions.width > 0 && info.dimensions.height > 0);
        }
    }

    #[test]
    fn sniff_never_panics_on_corrupted_real_files(
        which in 0usize..4,
        flips in prop::collection::vec((0usize..128, any::<u8>()), 0..6),
        cut in 0usize..200,
    ) {
        let mut bytes = match which {
            0 => support::png_rgb(5, 5),
            1 => support::jpeg(5, 5),
            2 => support::webp_extended(5, 5, true),
            _ => support::webp_lossless(5, 5, false),
        };
        for (at, value) in flips {
            if let Some(byte) = bytes.get_mut(at) {
                *byte = value;
            }
        }
        bytes.truncate(cut);
        if let Ok(info) = sniff(&bytes) {
            prop_assert!(info.dimensions.width > 0 && info.dimensions.height > 0);
            prop_assert_eq!(info.byte_len, bytes.len() as u64);
        }
    }
}

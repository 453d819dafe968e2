//! Edit inputs: mask checks, image count, file size limit, formats.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::disallowed_methods
)]

use imagegate_domain::{
    Dimensions, ErrorKind, ImageFileFormat, ImageInfo, MAX_EDIT_IMAGES, MAX_FILE_BYTES, MaskError,
    RequestError, check_file_size, check_image_count, check_mask,
};

fn png(width: u32, height: u32, has_alpha: bool) -> ImageInfo {
    ImageInfo {
        format: ImageFileFormat::Png,
        dimensions: Dimensions::new(width, height),
        has_alpha,
        byte_len: 1234,
    }
}

#[test]
fn matching_mask_passes() {
    assert_eq!(
        check_mask(&png(1024, 1024, false), &png(1024, 1024, true)),
        Ok(())
    );
}

#[test]
fn a_jpeg_image_takes_a_png_mask() {
    // JPEG has no alpha channel, so a mask of the image's own format could never mark an area.
    let jpeg_image = ImageInfo {
        format: ImageFileFormat::Jpeg,
        ..png(1024, 1024, false)
    };
    assert_eq!(check_mask(&jpeg_image, &png(1024, 1024, true)), Ok(()));
    let webp_mask = ImageInfo {
        format: ImageFileFormat::Webp,
        ..png(1024, 1024, true)
    };
    let err = check_mask(&jpeg_image, &webp_mask).unwrap_err();
    assert!(err.to_string().contains("save the mask as png"), "{err}");
    let jpeg_mask = ImageInfo {
        format: ImageFileFormat::Jpeg,
        ..png(1024, 1024, false)
    };
    let err = check_mask(&jpeg_image, &jpeg_mask).unwrap_err();
    assert!(
        err.to_string().contains("jpeg has none, so send a png mask"),
        "{err}"
    );
    // A WebP image still takes a WebP mask, and is told so.
    let webp_image = ImageInfo {
        format: ImageFileFormat::Webp,
        ..png(1024, 1024, false)
    };
    let err = check_mask(&webp_image, &jpeg_mask).unwrap_err();
    assert!(
        err.to_string().contains("jpeg has none, so send a webp mask"),
        "{err}"
    );
    assert_eq!(check_mask(&webp_image, &webp_mask), Ok(()));
}

#[test]
fn mask_without_alpha() {
    let err = check_mask(&png(1024, 1024, false), &png(1024, 1024, false)).unwrap_err();
    assert_eq!(
        err,
        RequestError::InvalidMask(MaskError::NoAlpha {
            format: ImageFileFormat::Png,
            image: ImageFileFormat::Png,
        })
    );
    assert_eq!(err.param(), Some("mask"));
    assert_eq!(err.kind(), ErrorKind::InvalidRequest);
    assert!(err.to_string().contains("alpha channel"), "{err}");
}

#[test]
fn mask_of_another_format() {
    let mask = ImageInfo {
        format: ImageFileFormat::Webp,
        ..png(1024, 1024, true)
    };
    let err = check_mask(&png(1024, 1024, false), &mask).unwrap_err();
    assert_eq!(
        err,
        RequestError::InvalidMask(MaskError::FormatMismatch {
            image: ImageFileFormat::Png,
            mask: ImageFileFormat::Webp
        })
    );
    assert_eq!(
        err.to_string(),
        "the mask is webp but the image is png: save the mask as png"
    );
}

#[test]
fn mask_of_another_size() {
    let err = check_mask(&png(1024, 1536, false), &png(1024, 1024, true)).unwrap_err();
    assert_eq!(err.param(), Some("mask"));
    assert_eq!(
        err.to_string(),
        "the mask is 1024x1024 pixels but the image is 1024x1536: resize the mask to 1024x1536"
    );
}

#[test]
fn mask_checks_run_alpha_then_format_then_size() {
    let mask = ImageInfo {
        format: ImageFileFormat::Jpeg,
        ..png(10, 10, false)
    };
    let err = check_mask(&png(1024, 1024, true), &mask).unwrap_err();
    assert!(
        matches!(err, RequestError::InvalidMask(MaskError::NoAlpha { .. })),
        "{err:?}"
    );
    let mask = ImageInfo {
        format: ImageFileFormat::Jpeg,
        ..png(10, 10, true)
    };
    let err = check_mask(&png(1024, 1024, true), &mask).unwrap_err();
    assert!(
        matches!(err, RequestError::InvalidMask(MaskError::FormatMismatch { .. })),
        "{err:?}"
    );
}

#[test]
fn image_count_limits() {
    assert_eq!(MAX_EDIT_IMAGES, 16);
    assert_eq!(
        check_image_count(0),
        Err(RequestError::Missing {
            param: "image".into()
        })
    );
    assert_eq!(check_image_count(1), Ok(()));
    assert_eq!(check_image_count(16), Ok(()));
    let err = check_image_count(17).unwrap_err();
    assert_eq!(err, RequestError::TooManyImages { count: 17 });
    assert_eq!(
        err.to_string(),
        "17 input images were sent; an edit accepts at most 16"
    );
    assert_eq!(err.param(), Some("image"));
}

#[test]
fn files_must_be_strictly_under_50_mb() {
    assert_eq!(MAX_FILE_BYTES, 52_428_800);
    assert_eq!(check_file_size("image[]", MAX_FILE_BYTES - 1), Ok(()));
    let err = check_file_size("mask", MAX_FILE_BYTES).unwrap_err();
    assert_eq!(
        err,
        RequestError::FileTooLarge {
            param: "mask".into(),
            limit: MAX_FILE_BYTES
        }
    );
    assert_eq!(err.kind(), ErrorKind::PayloadTooLarge);
    assert_eq!(err.param(), Some("mask"));
}

#[test]
fn file_formats() {
    let all = [ImageFileFormat::Png, ImageFileFormat::Jpeg, ImageFileFormat::Webp];
    let names: Vec<_> = all.iter().map(|f| (f.as_str(), f.mime())).collect();
    assert_eq!(
        names,
        [
            ("png", "image/png"),
            ("jpeg", "image/jpeg"),
            ("webp", "image/webp")
        ]
    );
    assert_eq!(serde_json::to_string(&ImageFileFormat::Jpeg).unwrap(), "\"jpeg\"");
    let err = RequestError::UnsupportedFileType {
        param: "image".into(),
    };
    assert_eq!(err.to_string(), "file 'image' is not a PNG, JPEG or WebP image");
}

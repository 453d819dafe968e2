use std::collections::HashSet;

use image::{GenericImageView, ImageFormat};

use super::*;

fn spec(width: u32, height: u32, format: OutputFormat, seed: u64) -> RenderSpec {
    RenderSpec {
        dimensions: Dimensions { width, height },
        format,
        quality: Quality::Medium,
        compression: None,
        seed,
    }
}

fn decode(image: &RenderedImage) -> (ImageFormat, image::DynamicImage) {
    let bytes = image.bytes().unwrap();
    let format = image::guess_format(&bytes).unwrap();
    (format, image::load_from_memory(&bytes).unwrap())
}

#[test]
fn encodes_each_format_at_the_requested_size() {
    let cache = RenderCache::new(0);
    for (format, expected) in [
        (OutputFormat::Png, ImageFormat::Png),
        (OutputFormat::Jpeg, ImageFormat::Jpeg),
        (OutputFormat::Webp, ImageFormat::WebP),
    ] {
        let images = render_variants(&cache, &spec(160, 96, format, 7), &[Variant::Final]).unwrap();
        assert_eq!(images.len(), 1);
        let (found, decoded) = decode(&images[0]);
        assert_eq!(found, expected);
        assert_eq!(decoded.dimensions(), (160, 96));
        assert_eq!(
            images[0].dimensions,
            Dimensions {
                width: 160,
                height: 96
            }
        );
    }
}

#[test]
fn different_prompts_and_indexes_give_different_pictures() {
    let cache = RenderCache::new(0);
    let render = |seed| {
        let images = render_variants(
            &cache,
            &spec(128, 128, OutputFormat::Png, seed),
            &[Variant::Final],
        )
        .unwrap();
        decode(&images[0]).1.to_rgb8().into_raw()
    };
    let cat = render(image_seed("a cat", 0));
    let dog = render(image_seed("a dog", 0));
    let cat_again = render(image_seed("a cat", 0));
    let second_cat = render(image_seed("a cat", 1));
    assert_ne!(cat, dog);
    assert_ne!(cat, second_cat);
    assert_eq!(cat, cat_again, "rendering is deterministic");
}

#[test]
fn the_banner_says_simulated_in_white() {
    let image = render_base(&spec(1024, 1024, OutputFormat::Png, 42)).unwrap();
    let white = image.pixels().filter(|p| p.0 == [255, 255, 255]).count();
    // "SIMULATED" at ~80% of the width covers tens of thousands of pixels; the gradient itself is never
    // pure white inside the darkened band.
    assert!(white > 20_000, "only {white} white pixels");
    let band_row = 1024 * 3 / 8 + 2;
    let dark = (0..1024)
        .filter(|x| image.get_pixel(*x, band_row).0.iter().all(|c| *c < 120))
        .count();
    assert!(dark > 900, "band row is not dark: {dark}");
}

#[test]
fn partials_are_coarser_than_the_final_image() {
    let cache = RenderCache::new(0);
    let variants = [
        Variant::Partial { index: 0, count: 2 },
        Variant::Partial { index: 1, count: 2 },
        Variant::Final,
    ];
    let images = render_variants(&cache, &spec(256, 256, OutputFormat::Png, 3), &variants).unwrap();
    assert_eq!(images.len(), 3);
    let distinct = |image: &RenderedImage| {
        let rgb = decode(image).1.to_rgb8();
        rgb.pixels().map(|p| p.0).collect::<HashSet<_>>().len()
    };
    let (coarse, finer, full) = (distinct(&images[0]), distinct(&images[1]), distinct(&images[2]));
    assert!(
        coarse < finer && finer < full,
        "distinct colours {coarse} {finer} {full}"
    );
    assert!(
        coarse <= 256,
        "16 px blocks on 256x256 give at most (256/16)^2 colours: {coarse}"
    );
    assert!(
        finer <= 1024,
        "8 px blocks give at most (256/8)^2 colours: {finer}"
    );
    for image in &images {
        assert_eq!(decode(image).1.dimensions(), (256, 256));
    }
}

#[test]
fn the_cache_answers_repeated_requests() {
    let cache = RenderCache::new(10 * 1024 * 1024);
    let spec = spec(64, 64, OutputFormat::Webp, 9);
    let first = render_variants(&cache, &spec, &[Variant::Final]).unwrap();
    let second = render_variants(&cache, &spec, &[Variant::Final]).unwrap();
    assert_eq!(first, second);
    let counters = cache.counters();
    assert_eq!((counters.hits, counters.misses, counters.entries), (1, 1, 1));
}

#[test]
fn jpeg_compression_changes_the_bytes_and_empty_sizes_fail() {
    let cache = RenderCache::new(0);
    let mut spec = spec(128, 128, OutputFormat::Jpeg, 5);
    spec.compression = Some(20);
    let small = render_variants(&cache, &spec, &[Variant::Final]).unwrap();
    spec.compression = Some(100);
    let large = render_variants(&cache, &spec, &[Variant::Final]).unwrap();
    assert!(small[0].b64_len() < large[0].b64_len());
    spec.dimensions = Dimensions { width: 0, height: 10 };
    assert!(matches!(render_base(&spec), Err(RenderError::Empty(_))));
}

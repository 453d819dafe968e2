//! Hand-picked size cases: exact messages, syntax refusals, boundaries and size classes.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::disallowed_methods
)]

use std::time::Duration;

use imagegate_domain::{Dimensions, ImageSize, SizeClass, SizeRule};

fn refused(input: &str) -> imagegate_domain::SizeError {
    input.parse::<ImageSize>().expect_err(input)
}

#[test]
fn multiple_of_16_message_names_the_edge_and_neighbours() {
    let err = refused("1792x936");
    assert_eq!(err.rule, SizeRule::EdgeMultipleOf16);
    assert_eq!(err.input, "1792x936");
    assert_eq!(
        err.to_string(),
        "size 1792x936: height 936 is not a multiple of 16 (928 or 944 would be)"
    );
    let both = refused("1000x1001").to_string();
    assert!(
        both.contains("width 1000 is not a multiple of 16 (992 or 1008 would be)"),
        "{both}"
    );
    assert!(
        both.contains("height 1001 is not a multiple of 16 (992 or 1008 would be)"),
        "{both}"
    );
}

#[test]
fn other_rules_name_their_numbers() {
    let edge = refused("4096x2048");
    assert_eq!(edge.rule, SizeRule::LongestEdge);
    assert_eq!(
        edge.detail(),
        "width 4096 is over the longest-edge limit of 3840 pixels"
    );
    let edge = refused("1536x3856");
    assert!(edge.detail().starts_with("height 3856"), "{edge}");

    let ratio = refused("3840x1264");
    assert_eq!(ratio.rule, SizeRule::AspectRatio);
    assert!(ratio.to_string().contains("3840:1264 is beyond 3:1"), "{ratio}");
    assert!(ratio.to_string().contains("(3792 here)"), "{ratio}");

    let few = refused("512x512");
    assert_eq!(few.rule, SizeRule::TooFewPixels);
    assert!(
        few.to_string()
            .contains("262144 pixels is below the minimum of 655360"),
        "{few}"
    );

    let many = refused("3840x2176");
    assert_eq!(many.rule, SizeRule::TooManyPixels);
    assert!(
        many.to_string()
            .contains("8355840 pixels is above the maximum of 8294400"),
        "{many}"
    );
}

#[test]
fn checks_run_in_the_documented_order() {
    // Breaks every rule after syntax: the multiple-of-16 rule is reported.
    assert_eq!(refused("9999x1").rule, SizeRule::EdgeMultipleOf16);
    // Edge too long and ratio too wide: edge first.
    assert_eq!(refused("4800x16").rule, SizeRule::LongestEdge);
    // Ratio too wide and too few pixels: ratio first.
    assert_eq!(refused("1024x16").rule, SizeRule::AspectRatio);
    // Zero edges: 0 is a multiple of 16, the ratio check catches 16x0, pixels catch 0x0.
    assert_eq!(refused("16x0").rule, SizeRule::AspectRatio);
    assert_eq!(refused("0x0").rule, SizeRule::TooFewPixels);
}

#[test]
fn syntax_refusals() {
    for input in [
        "",
        " ",
        "1024",
        "1024x",
        "x1024",
        " 1024x1024",
        "1024x1024 ",
        "+1024x1024",
        "1024x+1024",
        "-1024x1024",
        "1024X1024",
        "1024 x 1024",
        "1024x1024x16",
        "１０２４x1024",
        "1024.0x1024",
        "0x10x",
        "Auto",
        "AUTO",
        " auto",
        "1234567890x1024",
        "1024x99999999999999999999999999",
    ] {
        let err = refused(input);
        assert_eq!(err.rule, SizeRule::Syntax, "{input:?}");
        assert!(err.to_string().contains("1024x1024"), "{input:?}: {err}");
    }
    assert!(refused("1024X1024").to_string().contains("lowercase 'x'"));
    assert!(refused("1234567890x1024").to_string().contains("10 digits"));
}

#[test]
fn long_inputs_are_shortened_in_errors() {
    let long = "9".repeat(10_000);
    let err = refused(&long);
    assert_eq!(err.rule, SizeRule::Syntax);
    assert_eq!(err.input.chars().count(), 65);
    assert!(err.to_string().len() < 300);
}

#[test]
fn boundary_sizes_are_accepted() {
    for input in [
        "auto",
        "1024x640",
        "640x1024",
        "816x816",
        "3840x2160",
        "2160x3840",
        "2880x2880",
        "3840x1280",
        "1024x1024",
        "1536x1024",
        "2048x1152",
    ] {
        let size: ImageSize = input.parse().expect(input);
        assert_eq!(size.to_string(), input);
    }
    assert_eq!(
        "0001024x1024".parse::<ImageSize>().unwrap().to_string(),
        "1024x1024"
    );
    assert_eq!("auto".parse::<ImageSize>().unwrap(), ImageSize::Auto);
    assert_eq!(ImageSize::default(), ImageSize::Auto);
}

#[test]
fn size_class_splits_above_2560x1440() {
    let class = |s: &str| s.parse::<ImageSize>().unwrap().size_class();
    assert_eq!(class("auto"), SizeClass::Standard);
    assert_eq!(class("2560x1440"), SizeClass::Standard);
    assert_eq!(class("1440x2560"), SizeClass::Standard);
    assert_eq!(class("2576x1440"), SizeClass::Large);
    assert_eq!(class("2048x2048"), SizeClass::Large);
    assert_eq!(class("3840x2160"), SizeClass::Large);
    assert_eq!(SizeClass::Standard.default_timeout(), Duration::from_secs(120));
    assert_eq!(SizeClass::Large.default_timeout(), Duration::from_secs(300));
    assert_eq!(SizeClass::Large.to_string(), "large");
    assert_eq!(
        serde_json::to_string(&SizeClass::Standard).unwrap(),
        "\"standard\""
    );
}

#[test]
fn dimensions_accessors() {
    let d = Dimensions::new(3840, 2160);
    assert_eq!(d.pixels(), 8_294_400);
    assert_eq!((d.long_edge(), d.short_edge()), (3840, 2160));
    assert_eq!(d.to_string(), "3840x2160");
    assert_eq!(
        Dimensions::new(u32::MAX, u32::MAX).pixels(),
        u64::from(u32::MAX) * u64::from(u32::MAX)
    );
    assert_eq!(ImageSize::Exact(d).dimensions(), Some(d));
    assert_eq!(ImageSize::Auto.dimensions(), None);
    assert_eq!(
        ImageSize::from_dimensions(Dimensions::new(100, 100))
            .unwrap_err()
            .rule,
        SizeRule::EdgeMultipleOf16
    );
}

#[test]
fn serde_uses_the_string_form_and_validates() {
    assert_eq!(serde_json::to_string(&ImageSize::Auto).unwrap(), "\"auto\"");
    let err = serde_json::from_str::<ImageSize>("\"1792x936\"")
        .unwrap_err()
        .to_string();
    assert!(err.contains("height 936 is not a multiple of 16"), "{err}");
    assert!(serde_json::from_str::<ImageSize>("1024").is_err());
    let schema = serde_json::to_value(schemars::schema_for!(ImageSize)).unwrap();
    assert_eq!(schema["type"], "string");
}

//! Property tests of size parsing. The five size rules are restated here from the seed
//! (not taken from the crate) so the parser is checked against an independent oracle.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::disallowed_methods
)]

use imagegate_domain::{Dimensions, ImageSize, SizeRule};
use proptest::prelude::*;

// The seed's limits, written out again on purpose.
const EDGE_STEP: u64 = 16;
const LONGEST: u64 = 3840;
const RATIO: u64 = 3;
const PIXELS_MIN: u64 = 655_360;
const PIXELS_MAX: u64 = 8_294_400;

fn multiple_ok(w: u64, h: u64) -> bool {
    w.is_multiple_of(EDGE_STEP) && h.is_multiple_of(EDGE_STEP)
}
fn edge_ok(w: u64, h: u64) -> bool {
    w.max(h) <= LONGEST
}
fn ratio_ok(w: u64, h: u64) -> bool {
    w.max(h) <= RATIO * w.min(h)
}
fn few_ok(w: u64, h: u64) -> bool {
    w * h >= PIXELS_MIN
}
fn many_ok(w: u64, h: u64) -> bool {
    w * h <= PIXELS_MAX
}
fn all_ok(w: u64, h: u64) -> bool {
    multiple_ok(w, h) && edge_ok(w, h) && ratio_ok(w, h) && few_ok(w, h) && many_ok(w, h)
}

/// Sizes near the valid region, as multiples of 16 (and sometimes not).
fn near_valid() -> impl Strategy<Value = (u64, u64)> {
    prop_oneof![
        (1u64..=300, 1u64..=300).prop_map(|(a, b)| (a * 16, b * 16)),
        (0u64..=5000, 0u64..=5000),
    ]
}

/// Swaps width and height half of the time.
fn oriented(long: u64, short: u64, flip: bool) -> (u64, u64) {
    if flip { (short, long) } else { (long, short) }
}

fn refuse(w: u64, h: u64) -> imagegate_domain::SizeError {
    let input = format!("{w}x{h}");
    match input.parse::<ImageSize>() {
        Ok(size) => panic!("{input} was accepted as {size}"),
        Err(err) => err,
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    /// Accepted exactly when every rule holds; accepted sizes keep their numbers.
    #[test]
    fn accepts_exactly_the_valid_sizes((w, h) in near_valid()) {
        let input = format!("{w}x{h}");
        match input.parse::<ImageSize>() {
            Ok(ImageSize::Exact(d)) => {
                prop_assert!(all_ok(w, h), "{input} accepted but breaks a rule");
                prop_assert_eq!((u64::from(d.width), u64::from(d.height)), (w, h));
            }
            Ok(ImageSize::Auto) => prop_assert!(false, "{input} parsed as auto"),
            Err(err) => {
                prop_assert!(!all_ok(w, h), "{input} refused ({err}) but meets every rule");
                prop_assert!(err.rule != SizeRule::Syntax);
            }
        }
    }

    /// Round trip: display(parse(s)) == s for canonical strings, and serde agrees.
    #[test]
    fn parse_display_round_trip((w, h) in near_valid()) {
        let input = format!("{w}x{h}");
        if let Ok(size) = input.parse::<ImageSize>() {
            prop_assert_eq!(size.to_string(), input.clone());
            prop_assert_eq!(size.to_string().parse::<ImageSize>().unwrap(), size);
            let json = serde_json::to_string(&size).unwrap();
            prop_assert_eq!(&json, &format!("\"{input}\""));
            prop_assert_eq!(serde_json::from_str::<ImageSize>(&json).unwrap(), size);
            prop_assert_eq!(ImageSize::from_dimensions(size.dimensions().unwrap()).unwrap(), size);
        }
    }

    /// Breaking only the multiple-of-16 rule names it and the offending edge.
    #[test]
    fn breaks_multiple_of_16(a in 51u64..=180, b in 51u64..=180, off in 1u64..16, which in 0u8..3) {
        let (w, h) = match which {
            0 => (a * 16 + off, b * 16),
            1 => (a * 16, b * 16 + off),
            _ => (a * 16 + off, b * 16 + off),
        };
        prop_assume!(!multiple_ok(w, h) && edge_ok(w, h) && ratio_ok(w, h) && few_ok(w, h) && many_ok(w, h));
        let err = refuse(w, h);
        prop_assert_eq!(err.rule, SizeRule::EdgeMultipleOf16);
        let msg = err.to_string();
        if w % 16 != 0 { prop_assert!(msg.contains(&format!("width {w} is not a multiple of 16")), "{}", msg); }
        if h % 16 != 0 { prop_assert!(msg.contains(&format!("height {h} is not a multiple of 16")), "{}", msg); }
    }

    /// Breaking only the longest-edge rule names it and the edge.
    #[test]
    fn breaks_longest_edge(
        (k, j) in (241u64..=311).prop_flat_map(|k| (Just(k), k.div_ceil(3)..=32_400 / k)),
        flip: bool,
    ) {
        let (w, h) = oriented(k * 16, j * 16, flip);
        prop_assume!(multiple_ok(w, h) && !edge_ok(w, h) && ratio_ok(w, h) && few_ok(w, h) && many_ok(w, h));
        let err = refuse(w, h);
        prop_assert_eq!(err.rule, SizeRule::LongestEdge);
        let msg = err.to_string();
        prop_assert!(msg.contains(&(k * 16).to_string()) && msg.contains("3840"), "{}", msg);
    }

    /// Breaking only the aspect-ratio rule names it and both edges.
    #[test]
    fn breaks_aspect_ratio(j in 11u64..=79, extra in 1u64..=230, flip: bool) {
        let long = (3 * j + extra).min(240) * 16;
        let short = j * 16;
        let (w, h) = oriented(long, short, flip);
        prop_assume!(multiple_ok(w, h) && edge_ok(w, h) && !ratio_ok(w, h) && few_ok(w, h) && many_ok(w, h));
        let err = refuse(w, h);
        prop_assert_eq!(err.rule, SizeRule::AspectRatio);
        let msg = err.to_string();
        prop_assert!(msg.contains(&format!("{long}:{short}")) && msg.contains("3:1"), "{}", msg);
    }

    /// Breaking only the minimum-pixel rule names it and the pixel count.
    #[test]
    fn breaks_too_few_pixels(
        (j, k) in (1u64..=50).prop_flat_map(|j| (Just(j), j..=(3 * j).min(2559 / j))),
        flip: bool,
    ) {
        let (w, h) = oriented(k * 16, j * 16, flip);
        prop_assume!(multiple_ok(w, h) && edge_ok(w, h) && ratio_ok(w, h) && !few_ok(w, h) && many_ok(w, h));
        let err = refuse(w, h);
        prop_assert_eq!(err.rule, SizeRule::TooFewPixels);
        let msg = err.to_string();
        prop_assert!(msg.contains(&(w * h).to_string()) && msg.contains("655360"), "{}", msg);
    }

    /// Breaking only the maximum-pixel rule names it and the pixel count.
    #[test]
    fn breaks_too_many_pixels(a in 150u64..=240, b in 150u64..=240) {
        let (w, h) = (a * 16, b * 16);
        prop_assume!(multiple_ok(w, h) && edge_ok(w, h) && ratio_ok(w, h) && few_ok(w, h) && !many_ok(w, h));
        let err = refuse(w, h);
        prop_assert_eq!(err.rule, SizeRule::TooManyPixels);
        let msg = err.to_string();
        prop_assert!(msg.contains(&(w * h).to_string()) && msg.contains("8294400"), "{}", msg);
    }

    /// No string makes the parser panic; whatever it accepts is valid.
    #[test]
    fn arbitrary_strings_never_panic(input in prop_oneof![
        any::<String>(),
        "[0-9]{0,40}x[0-9]{0,40}",
        "[ +\\-]?[0-9]{1,6}[xX× ]{0,2}[ +\\-]?[0-9]{1,6} ?",
        "(auto|AUTO| auto)",
    ]) {
        match input.parse::<ImageSize>() {
            Ok(ImageSize::Auto) => prop_assert_eq!(input.as_str(), "auto"),
            Ok(ImageSize::Exact(Dimensions { width, height })) => {
                prop_assert!(all_ok(u64::from(width), u64::from(height)), "{} accepted", input);
                prop_assert!(input.bytes().all(|b| b.is_ascii_digit() || b == b'x'));
            }
            Err(err) => {
                let msg = err.to_string();
                prop_assert!(msg.starts_with("size "));
                prop_assert!(err.input.chars().count() <= 65);
            }
        }
    }
}

//! The size rules themselves: syntax first, then multiple of 16, longest edge, aspect ratio
//! and pixel count, each refusal naming the numbers at fault.

use crate::size::{
    Dimensions, EDGE_MULTIPLE, MAX_ASPECT, MAX_EDGE, MAX_EDGE_DIGITS, MAX_PIXELS, MIN_PIXELS, SizeError,
    SizeRule,
};

fn syntax_error(input: &str, why: &str) -> SizeError {
    SizeError::new(
        input,
        SizeRule::Syntax,
        format!("{why}; use 'auto' or WIDTHxHEIGHT in pixels, such as 1024x1024"),
    )
}

fn parse_edge(input: &str, digits: &str, edge: &str) -> Result<u32, SizeError> {
    if digits.is_empty() {
        return Err(syntax_error(input, &format!("the {edge} is missing")));
    }
    if !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Err(syntax_error(
            input,
            &format!("the {edge} must be written with digits 0-9 only"),
        ));
    }
    if digits.len() > MAX_EDGE_DIGITS {
        return Err(syntax_error(
            input,
            &format!(
                "the {edge} has {} digits, far beyond the {MAX_EDGE}-pixel limit",
                digits.len()
            ),
        ));
    }
    digits
        .parse::<u32>()
        .map_err(|_| syntax_error(input, &format!("the {edge} is not a number")))
}

pub(crate) fn parse_syntax(input: &str) -> Result<Dimensions, SizeError> {
    let Some((width, height)) = input.split_once('x') else {
        let why = if input.contains('X') {
            "the separator must be a lowercase 'x'"
        } else if input.trim().is_empty() {
            "it is empty"
        } else {
            "it is not of the form WIDTHxHEIGHT"
        };
        return Err(syntax_error(input, why));
    };
    Ok(Dimensions::new(
        parse_edge(input, width, "width")?,
        parse_edge(input, height, "height")?,
    ))
}

/// Nearest multiples of [`EDGE_MULTIPLE`] below and above `edge`.
fn neighbours(edge: u32) -> (u32, u32) {
    let below = edge - edge % EDGE_MULTIPLE;
    (below, below.saturating_add(EDGE_MULTIPLE))
}

pub(crate) fn check_rules(input: &str, d: Dimensions) -> Result<(), SizeError> {
    let fail = |rule, detail| Err(SizeError::new(input, rule, detail));
    let (w, h) = (d.width, d.height);
    let fix = |edge: &str, value: u32| {
        let (below, above) = neighbours(value);
        format!("{edge} {value} is not a multiple of {EDGE_MULTIPLE} ({below} or {above} would be)")
    };
    match (w % EDGE_MULTIPLE != 0, h % EDGE_MULTIPLE != 0) {
        (false, false) => {}
        (true, false) => return fail(SizeRule::EdgeMultipleOf16, fix("width", w)),
        (false, true) => return fail(SizeRule::EdgeMultipleOf16, fix("height", h)),
        (true, true) => {
            let detail = format!("{}, and {}", fix("width", w), fix("height", h));
            return fail(SizeRule::EdgeMultipleOf16, detail);
        }
    }
    let long = d.long_edge();
    let short = d.short_edge();
    if long > MAX_EDGE {
        let edge = if w >= h { "width" } else { "height" };
        return fail(
            SizeRule::LongestEdge,
            format!("{edge} {long} is over the longest-edge limit of {MAX_EDGE} pixels"),
        );
    }
    if u64::from(long) > u64::from(short) * u64::from(MAX_ASPECT) {
        return fail(
            SizeRule::AspectRatio,
            format!(
                "aspect ratio {long}:{short} is beyond {MAX_ASPECT}:1; the longer edge may be at \
                 most {MAX_ASPECT} times the shorter one ({} here)",
                u64::from(short) * u64::from(MAX_ASPECT)
            ),
        );
    }
    let pixels = d.pixels();
    if pixels < MIN_PIXELS {
        return fail(
            SizeRule::TooFewPixels,
            format!("{pixels} pixels is below the minimum of {MIN_PIXELS} (for example 1024x640 or 816x816)"),
        );
    }
    if pixels > MAX_PIXELS {
        return fail(
            SizeRule::TooManyPixels,
            format!("{pixels} pixels is above the maximum of {MAX_PIXELS} (3840x2160)"),
        );
    }
    Ok(())
}

//! Output sizes: [`ImageSize`] (`auto` or `WxH`), the size rules of `gpt-image-2` and the
//! [`SizeClass`] that decides timeouts and concurrency.

use std::borrow::Cow;
use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use crate::error::echo;
use crate::size_rules::{check_rules, parse_syntax};

/// Longest allowed edge, in pixels.
pub const MAX_EDGE: u32 = 3840;
/// Width and height must each be a multiple of this many pixels.
pub const EDGE_MULTIPLE: u32 = 16;
/// Long edge : short edge may be at most `MAX_ASPECT : 1`.
pub const MAX_ASPECT: u32 = 3;
/// Fewest pixels an exact size may have (1024x640).
pub const MIN_PIXELS: u64 = 655_360;
/// Most pixels an exact size may have (3840x2160).
pub const MAX_PIXELS: u64 = 8_294_400;
/// Sizes with more pixels than this (2560x1440) are [`SizeClass::Large`].
pub const LARGE_PIXELS: u64 = 2560 * 1440;
/// Most digits accepted for one edge in a size string; more is a syntax error.
pub const MAX_EDGE_DIGITS: usize = 9;

/// Width and height of an image, in pixels.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize, schemars::JsonSchema,
)]
pub struct Dimensions {
    /// Width in pixels.
    pub width: u32,
    /// Height in pixels.
    pub height: u32,
}

impl Dimensions {
    /// Builds dimensions from a width and a height.
    pub const fn new(width: u32, height: u32) -> Self {
        Self { width, height }
    }

    /// Number of pixels (`width * height`, cannot overflow).
    pub const fn pixels(&self) -> u64 {
        self.width as u64 * self.height as u64
    }

    /// The longer edge.
    pub const fn long_edge(&self) -> u32 {
        if self.width >= self.height {
            self.width
        } else {
            self.height
        }
    }

    /// The shorter edge.
    pub const fn short_edge(&self) -> u32 {
        if self.width >= self.height {
            self.height
        } else {
            self.width
        }
    }
}

impl fmt::Display for Dimensions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}x{}", self.width, self.height)
    }
}

/// Which size rule a size string breaks, in the order they are checked.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum SizeRule {
    /// Not `auto` and not `WIDTHxHEIGHT` written with digits and a lowercase `x`.
    Syntax,
    /// Width or height is not a multiple of [`EDGE_MULTIPLE`].
    EdgeMultipleOf16,
    /// The longer edge exceeds [`MAX_EDGE`].
    LongestEdge,
    /// Long edge : short edge exceeds [`MAX_ASPECT`] : 1.
    AspectRatio,
    /// Fewer than [`MIN_PIXELS`] pixels.
    TooFewPixels,
    /// More than [`MAX_PIXELS`] pixels.
    TooManyPixels,
}

/// A size string that breaks a size rule. Its message names the numbers at fault, e.g.
/// `size 1792x936: height 936 is not a multiple of 16 (928 or 944 would be)`.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("size {shown}: {detail}")]
pub struct SizeError {
    /// The size string given (shortened to 64 characters if longer).
    pub input: String,
    /// The rule it breaks (the first one, in checking order).
    pub rule: SizeRule,
    shown: String,
    detail: String,
}

impl SizeError {
    pub(crate) fn new(input: &str, rule: SizeRule, detail: String) -> Self {
        let input = echo(input);
        let shown = if rule == SizeRule::Syntax {
            format!("'{input}'")
        } else {
            input.clone()
        };
        Self {
            input,
            rule,
            shown,
            detail,
        }
    }

    /// The explanation after `size <input>: `.
    pub fn detail(&self) -> &str {
        &self.detail
    }
}

/// Size bucket of a request: decides the upstream timeout and how many such requests one
/// upstream account may run at a time (large images use low concurrency).
#[derive(
    Clone,
    Copy,
    Debug,
    Default,
    PartialEq,
    Eq,
    Hash,
    PartialOrd,
    Ord,
    serde::Serialize,
    serde::Deserialize,
    schemars::JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum SizeClass {
    /// Up to 2560x1440 pixels, and `auto`.
    #[default]
    Standard,
    /// More than 2560x1440 pixels (e.g. 3840x2160): slow, costly, more likely to fail.
    Large,
}

impl SizeClass {
    /// Class of an exact size: large when it has more than [`LARGE_PIXELS`] pixels.
    pub const fn of(dimensions: Dimensions) -> Self {
        if dimensions.pixels() > LARGE_PIXELS {
            Self::Large
        } else {
            Self::Standard
        }
    }

    /// Recommended upstream timeout: 120 s standard, 300 s large.
    pub const fn default_timeout(self) -> Duration {
        match self {
            Self::Standard => Duration::from_secs(120),
            Self::Large => Duration::from_secs(300),
        }
    }

    /// `standard` or `large`.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Standard => "standard",
            Self::Large => "large",
        }
    }
}

impl fmt::Display for SizeClass {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Requested output size: `auto` or an exact `WIDTHxHEIGHT` that meets every size rule.
///
/// Parsing checks, in order: syntax (`^\d+x\d+$`, at most [`MAX_EDGE_DIGITS`] digits per
/// edge), each edge a multiple of 16, longest edge at most 3840, long:short at most 3:1,
/// then 655,360 to 8,294,400 pixels. Serialized as its string form.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum ImageSize {
    /// Let the model choose.
    #[default]
    Auto,
    /// An exact size that passed every rule.
    Exact(Dimensions),
}

impl ImageSize {
    /// Size class: [`SizeClass::Large`] above 2560x1440 pixels, otherwise standard
    /// (`auto` is standard).
    pub const fn size_class(&self) -> SizeClass {
        match self {
            Self::Auto => SizeClass::Standard,
            Self::Exact(d) => SizeClass::of(*d),
        }
    }

    /// The exact dimensions, or `None` for `auto`.
    pub const fn dimensions(&self) -> Option<Dimensions> {
        match self {
            Self::Auto => None,
            Self::Exact(d) => Some(*d),
        }
    }

    /// Checks exact dimensions against the size rules (everything but syntax).
    pub fn from_dimensions(dimensions: Dimensions) -> Result<Self, SizeError> {
        check_rules(&dimensions.to_string(), dimensions).map(|()| Self::Exact(dimensions))
    }
}

impl FromStr for ImageSize {
    type Err = SizeError;

    fn from_str(input: &str) -> Result<Self, Self::Err> {
        if input == "auto" {
            return Ok(Self::Auto);
        }
        let dimensions = parse_syntax(input)?;
        check_rules(input, dimensions)?;
        Ok(Self::Exact(dimensions))
    }
}

impl fmt::Display for ImageSize {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Auto => f.write_str("auto"),
            Self::Exact(d) => d.fmt(f),
        }
    }
}

impl serde::Serialize for ImageSize {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> serde::Deserialize<'de> for ImageSize {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = <Cow<'de, str>>::deserialize(deserializer)?;
        text.parse().map_err(serde::de::Error::custom)
    }
}

impl schemars::JsonSchema for ImageSize {
    fn schema_name() -> Cow<'static, str> {
        "ImageSize".into()
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "type": "string",
            "pattern": "^(auto|[0-9]+x[0-9]+)$",
            "description": "`auto` or WIDTHxHEIGHT: each edge a multiple of 16, longest edge at most \
                3840, long:short at most 3:1, 655360 to 8294400 pixels",
            "examples": ["auto", "1024x1024", "1536x1024", "3840x2160"]
        })
    }
}

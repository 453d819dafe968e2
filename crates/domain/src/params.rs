//! The closed-set request parameters: [`Quality`], [`OutputFormat`], [`Background`],
//! [`Moderation`] and [`ImageAction`]. Each parses from its lowercase wire name; a wrong
//! value is refused with [`RequestError::InvalidValue`] naming the parameter and the
//! allowed values.

use std::fmt;
use std::str::FromStr;

use crate::error::{RequestError, echo};

/// Declares a lowercase wire enum with `ALL`, `as_str`, `Display` and a `FromStr` that
/// names its parameter.
macro_rules! wire_enum {
    (
        $(#[$meta:meta])*
        $name:ident, param = $param:literal, default = $default:ident,
        { $( $(#[$vmeta:meta])* $variant:ident => $wire:literal ),+ $(,)? }
    ) => {
        $(#[$meta])*
        #[derive(
            Clone, Copy, Debug, PartialEq, Eq, Hash,
            serde::Serialize, serde::Deserialize, schemars::JsonSchema,
        )]
        #[serde(rename_all = "lowercase")]
        pub enum $name {
            $(
                $(#[$vmeta])*
                $variant,
            )+
        }

        impl $name {
            /// Every value, in wire order.
            pub const ALL: &'static [Self] = &[$(Self::$variant),+];
            /// Name of the request parameter holding this value.
            pub const PARAM: &'static str = $param;

            /// The wire name.
            pub const fn as_str(self) -> &'static str {
                match self {
                    $(Self::$variant => $wire,)+
                }
            }

            /// The allowed wire names, comma-separated (for error messages).
            pub fn allowed() -> String {
                Self::ALL.iter().map(|v| v.as_str()).collect::<Vec<_>>().join(", ")
            }

            fn parse_wire(value: &str) -> Option<Self> {
                match value {
                    $($wire => Some(Self::$variant),)+
                    _ => None,
                }
            }

            fn invalid(value: &str) -> RequestError {
                RequestError::InvalidValue {
                    param: Self::PARAM.to_owned(),
                    value: echo(value),
                    allowed: Self::allowed(),
                }
            }
        }

        impl Default for $name {
            fn default() -> Self {
                Self::$default
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.as_str())
            }
        }
    };
}

wire_enum!(
    /// Rendering quality. Default `auto`.
    Quality, param = "quality", default = Auto,
    {
        /// Fast drafts.
        Low => "low",
        /// Normal use.
        Medium => "medium",
        /// Final renders (slowest, most output tokens).
        High => "high",
        /// The model chooses.
        Auto => "auto",
    }
);

wire_enum!(
    /// Encoding of the returned image. Default `png`.
    OutputFormat, param = "output_format", default = Png,
    {
        /// PNG (lossless; `output_compression` does not apply).
        Png => "png",
        /// JPEG (usually the fastest).
        Jpeg => "jpeg",
        /// WebP.
        Webp => "webp",
    }
);

wire_enum!(
    /// Background handling. Default `auto`. `transparent` is refused: `gpt-image-2` does not
    /// support transparent backgrounds.
    Background, param = "background", default = Auto,
    {
        /// The model chooses (never transparent).
        Auto => "auto",
        /// A solid background.
        Opaque => "opaque",
    }
);

wire_enum!(
    /// Strictness of the upstream content filter. Default `auto`. `low` does not bypass the
    /// content policy.
    Moderation, param = "moderation", default = Auto,
    {
        /// Standard filtering.
        Auto => "auto",
        /// Less restrictive filtering.
        Low => "low",
    }
);

wire_enum!(
    /// What the Responses `image_generation` tool should do. Default `auto`.
    ImageAction, param = "action", default = Auto,
    {
        /// The model decides between generating and editing.
        Auto => "auto",
        /// Always generate a new image.
        Generate => "generate",
        /// Always edit an input image.
        Edit => "edit",
    }
);

impl FromStr for Quality {
    type Err = RequestError;
    fn from_str(value: &str) -> Result<Self, Self::Err> {
        Self::parse_wire(value).ok_or_else(|| Self::invalid(value))
    }
}

impl FromStr for OutputFormat {
    type Err = RequestError;
    fn from_str(value: &str) -> Result<Self, Self::Err> {
        Self::parse_wire(value).ok_or_else(|| Self::invalid(value))
    }
}

impl FromStr for Moderation {
    type Err = RequestError;
    fn from_str(value: &str) -> Result<Self, Self::Err> {
        Self::parse_wire(value).ok_or_else(|| Self::invalid(value))
    }
}

impl FromStr for ImageAction {
    type Err = RequestError;
    fn from_str(value: &str) -> Result<Self, Self::Err> {
        Self::parse_wire(value).ok_or_else(|| Self::invalid(value))
    }
}

impl FromStr for Background {
    type Err = RequestError;

    /// `transparent` is refused with [`RequestError::Unsupported`]; other unknown values
    /// with [`RequestError::InvalidValue`].
    fn from_str(value: &str) -> Result<Self, Self::Err> {
        if value == "transparent" {
            return Err(RequestError::Unsupported {
                param: Self::PARAM.to_owned(),
                reason: "background 'transparent' is not supported: gpt-image-2 cannot produce \
                         transparent backgrounds; use 'opaque' or 'auto'"
                    .to_owned(),
            });
        }
        Self::parse_wire(value).ok_or_else(|| Self::invalid(value))
    }
}

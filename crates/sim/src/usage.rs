//! Token accounting that looks like the real API's: text tokens from prompt length, image input tokens from
//! input image tiles, image output tokens from pixel count and quality, plus 100 per partial image.

use imagegate_codec::wire::ResponsesUsage;
use imagegate_domain::{Dimensions, Quality, TokenDetails, Usage};

/// Output image tokens of a 1024x1024 image at low, medium and high quality (the published gpt-image-1
/// figures; other sizes scale with the pixel count).
pub const SQUARE_TOKENS: [u64; 3] = [272, 1056, 4160];
/// Output tokens each partial image adds.
pub const PARTIAL_IMAGE_TOKENS: u64 = 100;
const SQUARE_PIXELS: u64 = 1024 * 1024;

/// Quality as the API reports it after resolving `auto` (the simulator resolves `auto` to `medium`).
pub fn resolve_quality(quality: Quality) -> Quality {
    match quality {
        Quality::Auto => Quality::Medium,
        other => other,
    }
}

/// Tokens of a piece of text (about four characters per token, at least one for non-empty text).
pub fn text_tokens(text: &str) -> u64 {
    (text.chars().count() as u64).div_ceil(4)
}

/// Output image tokens of one image.
pub fn image_output_tokens(size: Dimensions, quality: Quality) -> u64 {
    let per_square = match resolve_quality(quality) {
        Quality::Low => SQUARE_TOKENS[0],
        Quality::High => SQUARE_TOKENS[2],
        Quality::Medium | Quality::Auto => SQUARE_TOKENS[1],
    };
    (per_square * size.pixels()).div_ceil(SQUARE_PIXELS).max(1)
}

/// Input tokens of one input image: fit into 2048x2048, shorter edge down to 768, then 85 + 170 per
/// 512 px tile (the vision formula).
pub fn image_input_tokens(size: Dimensions) -> u64 {
    let (mut width, mut height) = (f64::from(size.width.max(1)), f64::from(size.height.max(1)));
    let fit = (2048.0 / width.max(height)).min(1.0);
    width *= fit;
    height *= fit;
    let shrink = (768.0 / width.min(height)).min(1.0);
    width *= shrink;
    height *= shrink;
    let tiles = (width / 512.0).ceil() * (height / 512.0).ceil();
    85 + 170 * tiles as u64
}

/// What an image request consumed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ImageUsageInput<'a> {
    /// The prompt.
    pub prompt: &'a str,
    /// Sizes of the input images (edits).
    pub input_images: &'a [Dimensions],
    /// Output size.
    pub size: Dimensions,
    /// Requested quality.
    pub quality: Quality,
    /// Images produced.
    pub images: u64,
    /// Partial images per produced image.
    pub partial_images: u64,
}

/// Usage of an image request (the Images API `usage`, and the Responses `tool_usage.image_gen`).
pub fn image_usage(input: &ImageUsageInput<'_>) -> Usage {
    let text = text_tokens(input.prompt);
    let image_in: u64 = input.input_images.iter().map(|d| image_input_tokens(*d)).sum();
    let per_image =
        image_output_tokens(input.size, input.quality) + PARTIAL_IMAGE_TOKENS * input.partial_images;
    let image_out = per_image * input.images;
    Usage {
        input_tokens: text + image_in,
        input_tokens_details: TokenDetails {
            text_tokens: text,
            image_tokens: image_in,
        },
        output_tokens: image_out,
        output_tokens_details: TokenDetails {
            text_tokens: 0,
            image_tokens: image_out,
        },
        total_tokens: text + image_in + image_out,
    }
}

/// Tokens the main model is charged for the tool definitions and instructions around the user's input.
pub const RESPONSES_OVERHEAD_TOKENS: u64 = 64;

/// Main-model usage: input text and images plus a fixed overhead; output is the revised prompt it wrote
/// for the image tool and its closing message.
pub fn responses_usage(
    input_text: &str,
    input_images: &[Dimensions],
    revised_prompt: &str,
    message: &str,
) -> ResponsesUsage {
    let input = RESPONSES_OVERHEAD_TOKENS
        + text_tokens(input_text)
        + input_images.iter().map(|d| image_input_tokens(*d)).sum::<u64>();
    let output = text_tokens(revised_prompt) + text_tokens(message) + 8;
    ResponsesUsage {
        input_tokens: input,
        output_tokens: output,
        total_tokens: input + output,
        ..ResponsesUsage::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SQUARE: Dimensions = Dimensions {
        width: 1024,
        height: 1024,
    };

    #[test]
    fn output_tokens_grow_with_quality_and_pixels() {
        let low = image_output_tokens(SQUARE, Quality::Low);
        let medium = image_output_tokens(SQUARE, Quality::Medium);
        let high = image_output_tokens(SQUARE, Quality::High);
        assert_eq!((low, medium, high), (272, 1056, 4160));
        assert_eq!(image_output_tokens(SQUARE, Quality::Auto), medium);
        let wide = image_output_tokens(
            Dimensions {
                width: 1536,
                height: 1024,
            },
            Quality::High,
        );
        assert_eq!(wide, 6240);
        let uhd = image_output_tokens(
            Dimensions {
                width: 3840,
                height: 2160,
            },
            Quality::High,
        );
        assert!(uhd > wide * 5, "{uhd}");
    }

    #[test]
    fn input_image_tokens_follow_tiles() {
        assert_eq!(image_input_tokens(SQUARE), 85 + 170 * 4);
        assert_eq!(
            image_input_tokens(Dimensions {
                width: 512,
                height: 512
            }),
            85 + 170
        );
        assert_eq!(
            image_input_tokens(Dimensions {
                width: 4096,
                height: 1024
            }),
            85 + 170 * 4
        );
        assert_eq!(image_input_tokens(Dimensions { width: 0, height: 0 }), 85 + 170);
    }

    #[test]
    fn request_usage_adds_up() {
        let usage = image_usage(&ImageUsageInput {
            prompt: "a red fox in the snow",
            input_images: &[SQUARE],
            size: SQUARE,
            quality: Quality::Low,
            images: 2,
            partial_images: 3,
        });
        assert_eq!(
            usage.input_tokens_details,
            TokenDetails {
                text_tokens: 6,
                image_tokens: 765
            }
        );
        assert_eq!(usage.input_tokens, 771);
        assert_eq!(usage.output_tokens, 2 * (272 + 300));
        assert_eq!(usage.output_tokens_details.image_tokens, usage.output_tokens);
        assert_eq!(usage.total_tokens, usage.input_tokens + usage.output_tokens);
    }

    #[test]
    fn responses_usage_counts_the_main_model() {
        let usage = responses_usage("draw a cat", &[], "a cat", "Done.");
        assert_eq!(usage.input_tokens, 64 + 3);
        assert_eq!(usage.output_tokens, 2 + 2 + 8);
        assert_eq!(usage.total_tokens, usage.input_tokens + usage.output_tokens);
        assert_eq!(usage.input_tokens_details.cache_write_tokens, 0);
    }
}

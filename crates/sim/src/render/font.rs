//! A tiny 5x7 bitmap font (upper-case letters, digits and a few signs), drawn scaled into an RGB image.

use image::{Rgb, RgbImage};

/// Width of a glyph in font pixels.
pub const GLYPH_WIDTH: u32 = 5;
/// Height of a glyph in font pixels.
pub const GLYPH_HEIGHT: u32 = 7;
/// Horizontal advance per character in font pixels (glyph plus one column of spacing).
pub const ADVANCE: u32 = GLYPH_WIDTH + 1;

/// Rows of a glyph, top to bottom; bit 4 is the leftmost column. Lower-case letters use the upper-case
/// glyphs; characters without a glyph are drawn as `?`.
pub fn glyph(c: char) -> [u8; 7] {
    match c.to_ascii_uppercase() {
        'A' => [0x0E, 0x11, 0x11, 0x1F, 0x11, 0x11, 0x11],
        'B' => [0x1E, 0x11, 0x11, 0x1E, 0x11, 0x11, 0x1E],
        'C' => [0x0E, 0x11, 0x10, 0x10, 0x10, 0x11, 0x0E],
        'D' => [0x1E, 0x11, 0x11, 0x11, 0x11, 0x11, 0x1E],
        'E' => [0x1F, 0x10, 0x10, 0x1E, 0x10, 0x10, 0x1F],
        'F' => [0x1F, 0x10, 0x10, 0x1E, 0x10, 0x10, 0x10],
        'G' => [0x0E, 0x11, 0x10, 0x17, 0x11, 0x11, 0x0F],
        'H' => [0x11, 0x11, 0x11, 0x1F, 0x11, 0x11, 0x11],
        'I' => [0x0E, 0x04, 0x04, 0x04, 0x04, 0x04, 0x0E],
        'J' => [0x07, 0x02, 0x02, 0x02, 0x02, 0x12, 0x0C],
        'K' => [0x11, 0x12, 0x14, 0x18, 0x14, 0x12, 0x11],
        'L' => [0x10, 0x10, 0x10, 0x10, 0x10, 0x10, 0x1F],
        'M' => [0x11, 0x1B, 0x15, 0x15, 0x11, 0x11, 0x11],
        'N' => [0x11, 0x11, 0x19, 0x15, 0x13, 0x11, 0x11],
        'O' => [0x0E, 0x11, 0x11, 0x11, 0x11, 0x11, 0x0E],
        'P' => [0x1E, 0x11, 0x11, 0x1E, 0x10, 0x10, 0x10],
        'Q' => [0x0E, 0x11, 0x11, 0x11, 0x15, 0x12, 0x0D],
        'R' => [0x1E, 0x11, 0x11, 0x1E, 0x14, 0x12, 0x11],
        'S' => [0x0F, 0x10, 0x10, 0x0E, 0x01, 0x01, 0x1E],
        'T' => [0x1F, 0x04, 0x04, 0x04, 0x04, 0x04, 0x04],
        'U' => [0x11, 0x11, 0x11, 0x11, 0x11, 0x11, 0x0E],
        'V' => [0x11, 0x11, 0x11, 0x11, 0x11, 0x0A, 0x04],
        'W' => [0x11, 0x11, 0x11, 0x15, 0x15, 0x15, 0x0A],
        'X' => [0x11, 0x11, 0x0A, 0x04, 0x0A, 0x11, 0x11],
        'Y' => [0x11, 0x11, 0x0A, 0x04, 0x04, 0x04, 0x04],
        'Z' => [0x1F, 0x01, 0x02, 0x04, 0x08, 0x10, 0x1F],
        '0' => [0x0E, 0x11, 0x13, 0x15, 0x19, 0x11, 0x0E],
        '1' => [0x04, 0x0C, 0x04, 0x04, 0x04, 0x04, 0x0E],
        '2' => [0x0E, 0x11, 0x01, 0x02, 0x04, 0x08, 0x1F],
        '3' => [0x1F, 0x02, 0x04, 0x02, 0x01, 0x11, 0x0E],
        '4' => [0x02, 0x06, 0x0A, 0x12, 0x1F, 0x02, 0x02],
        '5' => [0x1F, 0x10, 0x1E, 0x01, 0x01, 0x11, 0x0E],
        '6' => [0x06, 0x08, 0x10, 0x1E, 0x11, 0x11, 0x0E],
        '7' => [0x1F, 0x01, 0x02, 0x04, 0x08, 0x08, 0x08],
        '8' => [0x0E, 0x11, 0x11, 0x0E, 0x11, 0x11, 0x0E],
        '9' => [0x0E, 0x11, 0x11, 0x0F, 0x01, 0x02, 0x0C],
        ' ' => [0; 7],
        '-' => [0x00, 0x00, 0x00, 0x1F, 0x00, 0x00, 0x00],
        '.' => [0x00, 0x00, 0x00, 0x00, 0x00, 0x0C, 0x0C],
        ':' => [0x00, 0x0C, 0x0C, 0x00, 0x0C, 0x0C, 0x00],
        '/' => [0x01, 0x01, 0x02, 0x04, 0x08, 0x10, 0x10],
        '#' => [0x0A, 0x0A, 0x1F, 0x0A, 0x1F, 0x0A, 0x0A],
        _ => [0x0E, 0x11, 0x01, 0x02, 0x04, 0x00, 0x04],
    }
}

/// Width in image pixels of `text` drawn at `scale` (no trailing spacing column).
pub fn text_width(text: &str, scale: u32) -> u32 {
    let chars = u32::try_from(text.chars().count()).unwrap_or(u32::MAX);
    (chars.saturating_mul(ADVANCE))
        .saturating_sub(1)
        .saturating_mul(scale)
}

/// Height in image pixels of a line drawn at `scale`.
pub fn text_height(scale: u32) -> u32 {
    GLYPH_HEIGHT.saturating_mul(scale)
}

/// The largest scale at which `text` fits in `max_width` x `max_height` pixels (at least 1).
pub fn fit_scale(text: &str, max_width: u32, max_height: u32) -> u32 {
    let unit_width = text_width(text, 1).max(1);
    (max_width / unit_width).min(max_height / GLYPH_HEIGHT).max(1)
}

/// Draws `text` with its top-left corner at (`x`, `y`), each font pixel a `scale` x `scale` square.
/// Whatever falls outside the image is clipped.
pub fn draw_text(image: &mut RgbImage, text: &str, x: u32, y: u32, scale: u32, color: Rgb<u8>) {
    let scale = scale.max(1);
    for (index, c) in text.chars().enumerate() {
        let index = u32::try_from(index).unwrap_or(u32::MAX);
        let glyph_x = x.saturating_add(index.saturating_mul(ADVANCE).saturating_mul(scale));
        for (row, bits) in (0u32..).zip(glyph(c)) {
            for column in 0..GLYPH_WIDTH {
                if bits & (1 << (GLYPH_WIDTH - 1 - column)) != 0 {
                    let px = glyph_x.saturating_add(column * scale);
                    let py = y.saturating_add(row * scale);
                    fill_rect(image, px, py, scale, scale, color);
                }
            }
        }
    }
}

/// Fills a rectangle, clipped to the image.
pub fn fill_rect(image: &mut RgbImage, x: u32, y: u32, width: u32, height: u32, color: Rgb<u8>) {
    let x_end = x.saturating_add(width).min(image.width());
    let y_end = y.saturating_add(height).min(image.height());
    for py in y.min(y_end)..y_end {
        for px in x.min(x_end)..x_end {
            image.put_pixel(px, py, color);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_glyph_fits_five_columns() {
        for c in "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789 -.:/#?".chars() {
            assert!(
                glyph(c).iter().all(|row| *row < 0x20),
                "glyph {c} is wider than 5 columns"
            );
        }
    }

    #[test]
    fn lower_case_uses_upper_case_glyphs_and_unknown_is_question_mark() {
        assert_eq!(glyph('s'), glyph('S'));
        assert_eq!(glyph('~'), glyph('?'));
        assert_ne!(glyph('S'), glyph('?'));
    }

    #[test]
    fn width_and_fit() {
        assert_eq!(text_width("SIM", 1), 17);
        assert_eq!(text_width("SIM", 3), 51);
        assert_eq!(text_width("", 4), 0);
        assert_eq!(fit_scale("SIM", 170, 1000), 10);
        assert_eq!(fit_scale("SIM", 1000, 21), 3);
        assert_eq!(fit_scale("SIM", 1, 1), 1);
    }

    #[test]
    fn draws_the_lit_pixels_of_a_glyph_and_clips() {
        let mut image = RgbImage::new(12, 14);
        let white = Rgb([255, 255, 255]);
        draw_text(&mut image, "T", 0, 0, 2, white);
        // The top bar of T spans all five columns.
        assert_eq!(image.get_pixel(0, 0), &white);
        assert_eq!(image.get_pixel(9, 1), &white);
        // Below the bar only the middle column is lit.
        assert_eq!(image.get_pixel(0, 2), &Rgb([0, 0, 0]));
        assert_eq!(image.get_pixel(4, 13), &white);
        // Drawing far outside does not panic.
        draw_text(&mut image, "TEXT", 10, 12, 5, white);
    }
}

//! Partial images: blockier versions of the final image, the earliest being the coarsest.

use image::{Rgb, RgbImage};

/// Edge of the square blocks of partial image `index` (0-based) out of `count`, for an image whose shorter
/// edge is `short_edge`: the last partial uses 8 px blocks at 1024 px, each earlier one twice as large.
pub fn block_size(index: u8, count: u8, short_edge: u32) -> u32 {
    let steps_from_last = u32::from(count.saturating_sub(1).saturating_sub(index)).min(6);
    let base = 8u32 << steps_from_last;
    let scale = (short_edge / 1024).max(1);
    base.saturating_mul(scale)
}

/// Replaces every `block` x `block` square of `image` by the colour at its centre.
pub fn pixelate(image: &RgbImage, block: u32) -> RgbImage {
    let block = block.max(1);
    let (width, height) = image.dimensions();
    let row_len = width as usize * 3;
    let mut pixels = Vec::with_capacity(row_len * height as usize);
    let mut row = Vec::with_capacity(row_len);
    for block_y in (0..height).step_by(block as usize) {
        let rows = block.min(height - block_y);
        let sample_y = block_y + rows / 2;
        row.clear();
        for block_x in (0..width).step_by(block as usize) {
            let columns = block.min(width - block_x);
            let Rgb(colour) = image
                .get_pixel_checked(block_x + columns / 2, sample_y)
                .copied()
                .unwrap_or(Rgb([0; 3]));
            for _ in 0..columns {
                row.extend_from_slice(&colour);
            }
        }
        for _ in 0..rows {
            pixels.extend_from_slice(&row);
        }
    }
    RgbImage::from_raw(width, height, pixels).unwrap_or_else(|| RgbImage::new(width, height))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn earlier_partials_use_larger_blocks() {
        assert_eq!(block_size(0, 3, 1024), 32);
        assert_eq!(block_size(1, 3, 1024), 16);
        assert_eq!(block_size(2, 3, 1024), 8);
        assert_eq!(block_size(0, 1, 1024), 8);
        assert_eq!(block_size(0, 2, 2160), 32);
        // Out-of-range input does not overflow.
        assert_eq!(block_size(9, 3, 0), 8);
    }

    #[test]
    fn pixelate_fills_blocks_with_their_centre_colour() {
        let mut image = RgbImage::new(5, 3);
        image.put_pixel(1, 1, Rgb([200, 40, 0]));
        image.put_pixel(3, 1, Rgb([0, 0, 80]));
        image.put_pixel(4, 2, Rgb([9, 9, 9]));
        let out = pixelate(&image, 2);
        assert_eq!(out.dimensions(), (5, 3));
        for (x, y) in [(0, 0), (1, 0), (0, 1), (1, 1)] {
            assert_eq!(out.get_pixel(x, y), &Rgb([200, 40, 0]));
        }
        assert_eq!(out.get_pixel(2, 0), &Rgb([0, 0, 80]));
        assert_eq!(out.get_pixel(3, 1), &Rgb([0, 0, 80]));
        // The partial last column and last row are blocks of their own.
        assert_eq!(out.get_pixel(4, 0), &Rgb([0, 0, 0]));
        assert_eq!(out.get_pixel(4, 2), &Rgb([9, 9, 9]));
        assert_eq!(out.get_pixel(0, 2), &Rgb([0, 0, 0]));
    }
}

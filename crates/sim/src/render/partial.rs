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

/// Averages every `block` x `block` square of `image` into one color.
pub fn pixelate(image: &RgbImage, block: u32) -> RgbImage {
    let block = block.max(1);
    let (width, height) = image.dimensions();
    let mut out = RgbImage::new(width, height);
    for block_y in (0..height).step_by(block as usize) {
        let y_end = block_y.saturating_add(block).min(height);
        for block_x in (0..width).step_by(block as usize) {
            let x_end = block_x.saturating_add(block).min(width);
            let mut sum = [0u64; 3];
            let mut count = 0u64;
            for y in block_y..y_end {
                for x in block_x..x_end {
                    if let Some(Rgb(px)) = image.get_pixel_checked(x, y) {
                        for (total, channel) in sum.iter_mut().zip(px) {
                            *total += u64::from(*channel);
                        }
                        count += 1;
                    }
                }
            }
            let count = count.max(1);
            let color = Rgb(sum.map(|total| u8::try_from(total / count).unwrap_or(u8::MAX)));
            for y in block_y..y_end {
                for x in block_x..x_end {
                    if let Some(px) = out.get_pixel_mut_checked(x, y) {
                        *px = color;
                    }
                }
            }
        }
    }
    out
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
    fn pixelate_averages_blocks() {
        let mut image = RgbImage::new(4, 2);
        image.put_pixel(0, 0, Rgb([100, 0, 0]));
        image.put_pixel(1, 1, Rgb([200, 40, 0]));
        image.put_pixel(3, 0, Rgb([0, 0, 80]));
        let out = pixelate(&image, 2);
        assert_eq!(out.get_pixel(0, 0), &Rgb([75, 10, 0]));
        assert_eq!(out.get_pixel(1, 1), &Rgb([75, 10, 0]));
        assert_eq!(out.get_pixel(2, 1), &Rgb([0, 0, 20]));
        assert_eq!(out.dimensions(), (4, 2));
    }
}

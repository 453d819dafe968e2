//! The explicit fallback ladder: what to try when a request keeps failing upstream.
//!
//! It follows the interface's advice for `3840x2160` at `high`: retry at `medium`; if that fails,
//! generate at a standard size of the same orientation at `medium` (to be upscaled separately). It
//! is off unless the key enables it or the request sends `x-imagegate-fallback: on`; a request can
//! turn it off with `x-imagegate-fallback: off`. Whenever a step changed what was asked, the answer
//! says so in the `x-imagegate-fallback` header and in its `size`/`quality` fields, and the usage
//! record keeps both what was asked and what was produced. Nothing is ever downgraded silently.

use axum::http::HeaderMap;
use imagegate_domain::{Dimensions, ImageParams, ImageSize, Quality, SizeClass};

/// The request header (and response header) of the ladder.
pub const HEADER: &str = "x-imagegate-fallback";

/// Whether the ladder applies to this request.
pub fn enabled(key_default: bool, headers: &HeaderMap) -> bool {
    match headers.get(HEADER).and_then(|v| v.to_str().ok()).map(str::trim) {
        Some(v)
            if ["on", "true", "1", "allow"]
                .iter()
                .any(|t| v.eq_ignore_ascii_case(t)) =>
        {
            true
        }
        Some(v)
            if ["off", "false", "0", "deny"]
                .iter()
                .any(|t| v.eq_ignore_ascii_case(t)) =>
        {
            false
        }
        _ => key_default,
    }
}

/// One rung: the parameters to try and how they differ from the request.
#[derive(Debug, Clone)]
pub struct Step {
    pub params: ImageParams,
    /// e.g. `quality=high->medium; size=3840x2160->1536x1024`
    pub change: String,
}

/// The rungs below `asked`, in order; empty when nothing cheaper makes sense.
pub fn ladder(asked: &ImageParams) -> Vec<Step> {
    let mut steps = Vec::new();
    let lowered = matches!(asked.quality, Quality::High | Quality::Auto);
    if lowered {
        steps.push(step(asked, Quality::Medium, asked.size));
    }
    if asked.size_class() == SizeClass::Large {
        let quality = if lowered { Quality::Medium } else { asked.quality };
        steps.push(step(asked, quality, standard_size_like(asked.size)));
    }
    steps
}

fn step(asked: &ImageParams, quality: Quality, size: ImageSize) -> Step {
    let mut changes = Vec::new();
    if quality != asked.quality {
        changes.push(format!(
            "quality={}->{}",
            asked.quality.as_str(),
            quality.as_str()
        ));
    }
    if size != asked.size {
        changes.push(format!("size={}->{size}", asked.size));
    }
    let mut params = asked.clone();
    params.quality = quality;
    params.size = size;
    Step {
        params,
        change: changes.join("; "),
    }
}

/// 1536x1024, 1024x1536 or 1024x1024, following the orientation of `size`.
fn standard_size_like(size: ImageSize) -> ImageSize {
    let (width, height) = match size.dimensions() {
        Some(d) if d.width > d.height => (1536, 1024),
        Some(d) if d.width < d.height => (1024, 1536),
        _ => (1024, 1024),
    };
    ImageSize::from_dimensions(Dimensions { width, height }).unwrap_or(ImageSize::Auto)
}

#[cfg(test)]
mod tests {
    use imagegate_domain::{ImageParamsDraft, ModelCatalog, validate_generation};

    use super::*;

    fn params(size: &str, quality: &str) -> ImageParams {
        let draft = ImageParamsDraft {
            model: Some("gpt-image-2".into()),
            prompt: Some("p".into()),
            size: Some(size.into()),
            quality: Some(quality.into()),
            ..ImageParamsDraft::default()
        };
        validate_generation(draft, &ModelCatalog::default()).unwrap()
    }

    #[test]
    fn four_k_high_steps_down_quality_then_size() {
        let steps = ladder(&params("3840x2160", "high"));
        let shown: Vec<(String, &str, &str)> = steps
            .iter()
            .map(|s| {
                (
                    s.params.size.to_string(),
                    s.params.quality.as_str(),
                    s.change.as_str(),
                )
            })
            .collect();
        assert_eq!(
            shown,
            [
                ("3840x2160".to_owned(), "medium", "quality=high->medium"),
                (
                    "1536x1024".to_owned(),
                    "medium",
                    "quality=high->medium; size=3840x2160->1536x1024"
                ),
            ]
        );
    }

    #[test]
    fn portrait_large_low_only_shrinks_and_standard_medium_has_no_ladder() {
        let steps = ladder(&params("2160x3840", "low"));
        assert_eq!(steps.len(), 1);
        assert_eq!(steps[0].params.size.to_string(), "1024x1536");
        assert_eq!(steps[0].params.quality, Quality::Low);
        assert!(ladder(&params("1024x1024", "medium")).is_empty());
        assert_eq!(ladder(&params("1024x1024", "high")).len(), 1);
    }

    #[test]
    fn the_header_overrides_the_key_setting() {
        let mut headers = HeaderMap::new();
        assert!(!enabled(false, &headers));
        assert!(enabled(true, &headers));
        headers.insert(HEADER, "on".parse().unwrap());
        assert!(enabled(false, &headers));
        headers.insert(HEADER, "off".parse().unwrap());
        assert!(!enabled(true, &headers));
    }
}

//! What the simulator puts on the wire for the Images API, built from the codec's wire types so the
//! simulator and the gateway share one definition.

use imagegate_codec::wire::{
    CompletedImageEvent, ImageData, ImageEndpoint, ImageStreamEvent, ImagesResponse, PartialImageEvent,
};
use imagegate_domain::Usage;

use crate::simulator::{ImageOutcome, JobKind};

/// The stream endpoint of a job kind.
pub fn endpoint(kind: JobKind) -> ImageEndpoint {
    match kind {
        JobKind::Generate => ImageEndpoint::Generation,
        JobKind::Edit => ImageEndpoint::Edit,
    }
}

fn timestamp(outcome: &ImageOutcome) -> i64 {
    i64::try_from(outcome.created).unwrap_or(i64::MAX)
}

/// Non-stream Images API response for an outcome (`data` empty when `with_images` is false).
pub fn images_response(outcome: &ImageOutcome, with_images: bool) -> ImagesResponse {
    let data = if with_images {
        outcome
            .images
            .iter()
            .map(|image| ImageData {
                b64_json: image.b64.to_string(),
                revised_prompt: None,
            })
            .collect()
    } else {
        Vec::new()
    };
    ImagesResponse {
        created: timestamp(outcome),
        background: Some(outcome.background.as_str().to_owned()),
        data,
        model: None,
        output_format: Some(outcome.output_format.as_str().to_owned()),
        quality: Some(outcome.quality.as_str().to_owned()),
        size: Some(outcome.size.to_string()),
        usage: Some(outcome.usage),
    }
}

/// The stream of an outcome: for each image its partial frames, then (when `with_completed`) its
/// `*.completed` event. The usage on the completed event of image `k` is cumulative (input tokens plus
/// the output of images `0..=k`), so the last completed event carries the usage of the whole request.
pub fn image_stream_events(outcome: &ImageOutcome, with_completed: bool) -> Vec<ImageStreamEvent> {
    let endpoint = endpoint(outcome.kind);
    let count = outcome.images.len().max(1) as u64;
    let per_image = outcome.usage.output_tokens / count;
    let size = outcome.size.to_string();
    let mut events = Vec::new();
    for (number, (image, partials)) in (1u64..).zip(outcome.images.iter().zip(&outcome.partials)) {
        for (partial_image_index, partial) in (0u32..).zip(partials) {
            let event = PartialImageEvent {
                b64_json: partial.b64.to_string(),
                created_at: timestamp(outcome),
                size: size.clone(),
                quality: outcome.quality.as_str().to_owned(),
                background: outcome.background.as_str().to_owned(),
                output_format: outcome.output_format.as_str().to_owned(),
                partial_image_index,
            };
            events.push(ImageStreamEvent::partial(endpoint, event));
        }
        if with_completed {
            let output = if number == count {
                outcome.usage.output_tokens
            } else {
                per_image * number
            };
            let event = CompletedImageEvent {
                b64_json: image.b64.to_string(),
                created_at: timestamp(outcome),
                size: size.clone(),
                quality: outcome.quality.as_str().to_owned(),
                background: outcome.background.as_str().to_owned(),
                output_format: outcome.output_format.as_str().to_owned(),
                usage: cumulative_usage(&outcome.usage, output),
            };
            events.push(ImageStreamEvent::completed(endpoint, event));
        }
    }
    events
}

fn cumulative_usage(total: &Usage, output_tokens: u64) -> Usage {
    let mut usage = *total;
    usage.output_tokens = output_tokens;
    usage.output_tokens_details.image_tokens = output_tokens;
    usage.total_tokens = usage.input_tokens + output_tokens;
    usage
}

impl ImageOutcome {
    /// The non-stream Images API body of this outcome.
    pub fn images_response(&self) -> ImagesResponse {
        images_response(self, true)
    }

    /// The Images API stream of this outcome (`image_generation.*` or `image_edit.*` by kind); encode each
    /// with [`ImageStreamEvent::to_sse`].
    pub fn stream_events(&self) -> Vec<ImageStreamEvent> {
        image_stream_events(self, true)
    }
}

#[cfg(test)]
mod tests {
    use imagegate_domain::{Dimensions, ImageSize};

    use super::*;
    use crate::config::SimConfig;
    use crate::simulator::{ImageJob, Simulator};

    #[tokio::test]
    async fn outcome_converts_to_the_codec_wire_types() {
        let mut job = ImageJob::generation("wire", ImageSize::Exact(Dimensions::new(64, 32)));
        job.kind = JobKind::Edit;
        job.partial_images = 1;
        let outcome = Simulator::new(&SimConfig::default())
            .generate(&job)
            .await
            .unwrap();
        let response = outcome.images_response();
        assert_eq!(response.data.len(), 1);
        assert_eq!(response.size.as_deref(), Some("64x32"));
        assert_eq!(response.usage, Some(outcome.usage));
        let events = outcome.stream_events();
        let types: Vec<&str> = events.iter().map(ImageStreamEvent::event_type).collect();
        assert_eq!(types, ["image_edit.partial_image", "image_edit.completed"]);
        let frame = events[1].to_sse();
        assert!(frame.starts_with(b"event: image_edit.completed\ndata: {"));
        assert!(images_response(&outcome, false).data.is_empty());
    }
}

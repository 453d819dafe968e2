//! Request decoding and validation through the codec and the domain crate (the same rules the gateway
//! applies), turned into simulator jobs.

use imagegate_codec::ApiError;
use imagegate_domain::{ModelCatalog, validate_generation};

use crate::errors::ApiFailure;
use crate::simulator::{ImageJob, JobKind};

/// A validated image request: the job and whether to stream it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ImageDraft {
    /// What to render.
    pub job: ImageJob,
    /// Answer as server-sent events.
    pub stream: bool,
}

/// Decodes and validates a `POST /v1/images/generations` body.
pub fn parse_generation(body: &[u8], catalog: &ModelCatalog) -> Result<ImageDraft, ApiFailure> {
    let draft = imagegate_codec::json::decode_generation(body)?;
    let params = validate_generation(draft, catalog).map_err(ApiError::from)?;
    Ok(ImageDraft {
        job: ImageJob::from_params(&params, JobKind::Generate, Vec::new()),
        stream: params.stream,
    })
}

#[cfg(test)]
mod tests {
    use imagegate_domain::{Dimensions, ImageSize, OutputFormat, Quality};

    use super::*;

    #[test]
    fn a_valid_body_becomes_a_job() {
        let body = br#"{"model":"gpt-image-2","prompt":"a lighthouse","n":2,"size":"1536x1024",
            "quality":"low","output_format":"webp","output_compression":null,"stream":true,"partial_images":2}"#;
        let draft = parse_generation(body, &ModelCatalog::default()).unwrap();
        assert!(draft.stream);
        assert_eq!(draft.job.n, 2);
        assert_eq!(
            draft.job.size,
            ImageSize::Exact(Dimensions {
                width: 1536,
                height: 1024
            })
        );
        assert_eq!(draft.job.quality, Quality::Low);
        assert_eq!(draft.job.output_format, OutputFormat::Webp);
        assert_eq!(draft.job.partial_images, 2);
        assert_eq!(draft.job.kind, JobKind::Generate);
    }

    #[test]
    fn invalid_bodies_are_refused_like_the_gateway_refuses_them() {
        let catalog = ModelCatalog::default();
        let unknown =
            parse_generation(br#"{"model":"gpt-image-2","prompt":"x","foo":1}"#, &catalog).unwrap_err();
        assert_eq!(unknown.status, 400);
        assert_eq!(unknown.body["error"]["param"], "foo");
        let size = parse_generation(
            br#"{"model":"gpt-image-2","prompt":"x","size":"1792x936"}"#,
            &catalog,
        )
        .unwrap_err();
        assert_eq!(size.body["error"]["param"], "size");
        let missing = parse_generation(br#"{"model":"gpt-image-2"}"#, &catalog).unwrap_err();
        assert_eq!(missing.body["error"]["param"], "prompt");
    }
}

//! The exact error bodies, status codes and retry advice: any change is a reviewed snapshot diff.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::disallowed_methods
)]

use imagegate_codec::sse::encode_error;
use imagegate_codec::{ApiError, error_spec, json, wire};
use imagegate_domain::{
    Dimensions, ErrorKind, ImageFileFormat, ImageInfo, ImageParamsDraft, ModelCatalog, RequestError,
    check_mask, validate_edit, validate_generation, validate_main_model,
};

const ALL_KINDS: [ErrorKind; 18] = [
    ErrorKind::InvalidRequest,
    ErrorKind::UnknownParameter,
    ErrorKind::ModelNotFound,
    ErrorKind::InvalidApiKey,
    ErrorKind::PermissionDenied,
    ErrorKind::NotFound,
    ErrorKind::MethodNotAllowed,
    ErrorKind::PayloadTooLarge,
    ErrorKind::KeyRateLimited,
    ErrorKind::UsageLimitReached,
    ErrorKind::ContentPolicy,
    ErrorKind::UpstreamFailed,
    ErrorKind::UpstreamTimeout,
    ErrorKind::ClientTooSlow,
    ErrorKind::RequestTimeout,
    ErrorKind::ClientClosed,
    ErrorKind::Overloaded,
    ErrorKind::Internal,
];

/// Status line, retry advice and the body bytes.
fn render(err: &ApiError) -> String {
    let retry = match err.should_retry() {
        Some(flag) => flag.to_string(),
        None => "(no header)".to_owned(),
    };
    let body = String::from_utf8(err.to_json_bytes().to_vec()).unwrap();
    // The typed bytes and the Value body are the same document.
    assert_eq!(
        serde_json::from_str::<serde_json::Value>(&body).unwrap(),
        err.to_body()
    );
    format!("HTTP {}\nx-should-retry: {retry}\n{body}", err.status())
}

fn example(kind: ErrorKind) -> ApiError {
    match kind {
        ErrorKind::InvalidRequest => {
            ApiError::new(kind, "Invalid value 'ultra' for 'quality'.").with_param("quality")
        }
        ErrorKind::UnknownParameter => RequestError::UnknownParameter { param: "foo".into() }.into(),
        ErrorKind::ModelNotFound => ApiError::model_not_found("dall-e-3"),
        ErrorKind::InvalidApiKey => ApiError::invalid_api_key(),
        ErrorKind::PermissionDenied => ApiError::new(kind, "This API key may not use /v1/images/edits."),
        ErrorKind::NotFound => ApiError::route_not_found("GET", "/v1/nothing"),
        ErrorKind::MethodNotAllowed => ApiError::method_not_allowed("GET", "/v1/images/generations"),
        ErrorKind::PayloadTooLarge => ApiError::new(kind, "The request body is larger than 820 MiB."),
        ErrorKind::KeyRateLimited => ApiError::new(
            kind,
            "Rate limit reached for this API key: 5 images per minute. Try again in 12s.",
        ),
        ErrorKind::UsageLimitReached => ApiError::new(
            kind,
            "Every upstream account has reached its usage limit. Try again after the reset in 3600s.",
        ),
        ErrorKind::ContentPolicy => ApiError::new(
            kind,
            "Upstream request failed: the content was refused. Your request was rejected by the safety system.",
        ),
        ErrorKind::UpstreamFailed => ApiError::upstream_failed(Some("the upstream returned no image")),
        ErrorKind::UpstreamTimeout => ApiError::new(kind, "The upstream did not answer within 300 seconds."),
        ErrorKind::ClientTooSlow => ApiError::new(
            kind,
            "The answer was cut because the client read it too slowly and held the stream for longer than 300 s",
        ),
        ErrorKind::RequestTimeout => imagegate_codec::BodyCut::Stalled.api_error(),
        ErrorKind::ClientClosed => imagegate_codec::BodyCut::ClientGone.api_error(),
        ErrorKind::Overloaded => ApiError::new(kind, "The gateway is at capacity. Try again shortly."),
        ErrorKind::Internal => ApiError::internal(),
    }
}

#[test]
fn the_table_matches_the_agreed_interface() {
    let rows: Vec<(u16, &str, Option<&str>)> = ALL_KINDS
        .iter()
        .map(|kind| error_spec(*kind))
        .map(|s| (s.status, s.error_type, s.code))
        .collect();
    assert_eq!(
        rows,
        vec![
            (400, "invalid_request_error", Some("invalid_value")),
            (400, "invalid_request_error", Some("unknown_parameter")),
            (404, "invalid_request_error", Some("model_not_found")),
            (401, "invalid_request_error", Some("INVALID_API_KEY")),
            (403, "permission_error", None),
            (404, "invalid_request_error", None),
            (405, "invalid_request_error", Some("method_not_allowed")),
            (413, "invalid_request_error", Some("file_too_large")),
            (429, "rate_limit_error", Some("rate_limit_exceeded")),
            (429, "usage_limit_reached", Some("usage_limit_reached")),
            (502, "image_generation_user_error", Some("moderation_blocked")),
            (502, "upstream_error", Some("upstream_request_failed")),
            (504, "upstream_error", Some("upstream_timeout")),
            (408, "invalid_request_error", Some("client_too_slow")),
            (408, "invalid_request_error", Some("request_timeout")),
            (499, "invalid_request_error", Some("client_closed")),
            (503, "server_error", Some("overloaded")),
            (500, "server_error", None),
        ]
    );
    assert!(
        ApiError::upstream_failed(None)
            .message
            .starts_with("Upstream request failed")
    );
}

#[test]
fn one_body_per_error_kind() {
    for kind in ALL_KINDS {
        let err = example(kind);
        assert_eq!(err.kind, kind);
        insta::assert_snapshot!(format!("kind_{kind}"), render(&err));
    }
}

fn refusal(draft: ImageParamsDraft) -> ApiError {
    validate_generation(draft, &ModelCatalog::default())
        .unwrap_err()
        .into()
}

fn draft() -> ImageParamsDraft {
    ImageParamsDraft {
        model: Some("gpt-image-2".into()),
        prompt: Some("a fox".into()),
        ..Default::default()
    }
}

fn info(format: ImageFileFormat, width: u32, height: u32, has_alpha: bool) -> ImageInfo {
    ImageInfo {
        format,
        dimensions: Dimensions { width, height },
        has_alpha,
        byte_len: 100,
    }
}

#[test]
fn request_error_bodies() {
    let png = info(ImageFileFormat::Png, 1024, 1024, true);
    let mask = |m: ImageInfo| -> ApiError { check_mask(&png, &m).unwrap_err().into() };
    let cases: Vec<(&str, ApiError)> = vec![
        (
            "missing_prompt",
            refusal(ImageParamsDraft {
                prompt: None,
                ..draft()
            }),
        ),
        (
            "invalid_type_n",
            json::decode_generation(br#"{"n":"2"}"#).unwrap_err(),
        ),
        (
            "invalid_json",
            json::decode_generation(b"{\"prompt\":").unwrap_err(),
        ),
        (
            "invalid_value_quality",
            refusal(ImageParamsDraft {
                quality: Some("ultra".into()),
                ..draft()
            }),
        ),
        (
            "out_of_range_n",
            refusal(ImageParamsDraft {
                n: Some(11),
                ..draft()
            }),
        ),
        (
            "empty_prompt",
            refusal(ImageParamsDraft {
                prompt: Some(String::new()),
                ..draft()
            }),
        ),
        (
            "too_long_prompt",
            refusal(ImageParamsDraft {
                prompt: Some("x".repeat(32_001)),
                ..draft()
            }),
        ),
        (
            "invalid_size",
            refusal(ImageParamsDraft {
                size: Some("1792x936".into()),
                ..draft()
            }),
        ),
        (
            "transparent_background",
            refusal(ImageParamsDraft {
                background: Some("transparent".into()),
                ..draft()
            }),
        ),
        (
            "input_fidelity_on_edit",
            validate_edit(
                ImageParamsDraft {
                    input_fidelity: Some("high".into()),
                    ..draft()
                },
                &ModelCatalog::default(),
            )
            .unwrap_err()
            .into(),
        ),
        (
            "model_not_accepted",
            refusal(ImageParamsDraft {
                model: Some("dall-e-3".into()),
                ..draft()
            }),
        ),
        (
            "image_model_as_main_model",
            validate_main_model(Some("gpt-image-2"), &ModelCatalog::default())
                .unwrap_err()
                .into(),
        ),
        (
            "partial_images_without_stream",
            refusal(ImageParamsDraft {
                partial_images: Some(2),
                ..draft()
            }),
        ),
        (
            "unknown_parameter",
            json::decode_generation(br#"{"prompt":"p","foo":1}"#).unwrap_err(),
        ),
        (
            "too_many_images",
            RequestError::TooManyImages { count: 17 }.into(),
        ),
        (
            "file_too_large",
            RequestError::FileTooLarge {
                param: "image[]".into(),
                limit: 52_428_800,
            }
            .into(),
        ),
        (
            "unsupported_file_type",
            RequestError::UnsupportedFileType {
                param: "image[]".into(),
            }
            .into(),
        ),
        (
            "mask_no_alpha",
            mask(info(ImageFileFormat::Png, 1024, 1024, false)),
        ),
        (
            "mask_format_mismatch",
            mask(info(ImageFileFormat::Webp, 1024, 1024, true)),
        ),
        (
            "mask_dimension_mismatch",
            mask(info(ImageFileFormat::Png, 512, 512, true)),
        ),
    ];
    for (name, err) in cases {
        assert!(
            err.status() == 400 || err.status() == 404 || err.status() == 413,
            "{name}"
        );
        insta::assert_snapshot!(format!("request_{name}"), render(&err));
    }
}

#[test]
fn stream_error_frames() {
    let err = ApiError::upstream_failed(Some("the upstream closed the stream"));
    let frame = String::from_utf8(encode_error(&err).to_vec()).unwrap();
    assert!(frame.starts_with("event: error\ndata: {\"error\":{"));
    let responses = wire::ResponseEventSequencer::new().frame(wire::ResponseEvent::error(&err));
    let frames = format!("{frame}{}", String::from_utf8(responses.to_vec()).unwrap());
    insta::assert_snapshot!("stream_error_frames", frames);
}

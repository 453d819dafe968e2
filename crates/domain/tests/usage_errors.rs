//! Usage serde and the error-kind/param mapping of every refusal.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::disallowed_methods
)]

use imagegate_domain::{
    Dimensions, ErrorKind, ImageFileFormat, MaskError, RequestError, SizeRule, TokenDetails, Usage,
};

#[test]
fn usage_wire_shape() {
    let usage = Usage {
        input_tokens: 14,
        input_tokens_details: TokenDetails {
            text_tokens: 14,
            image_tokens: 0,
        },
        output_tokens: 1056,
        output_tokens_details: TokenDetails {
            text_tokens: 0,
            image_tokens: 1056,
        },
        total_tokens: 1070,
    };
    let json = serde_json::to_value(usage).unwrap();
    assert_eq!(
        json,
        serde_json::json!({
            "input_tokens": 14,
            "input_tokens_details": {"text_tokens": 14, "image_tokens": 0},
            "output_tokens": 1056,
            "output_tokens_details": {"text_tokens": 0, "image_tokens": 1056},
            "total_tokens": 1070
        })
    );
    assert_eq!(serde_json::from_value::<Usage>(json).unwrap(), usage);
}

#[test]
fn usage_tolerates_missing_output_details_and_sums() {
    let usage: Usage = serde_json::from_str(
        r#"{"input_tokens":5,"input_tokens_details":{"text_tokens":5,"image_tokens":0},"output_tokens":7,"total_tokens":12}"#,
    )
    .unwrap();
    assert_eq!(usage.output_tokens_details, TokenDetails::default());
    let twice = usage.saturating_add(usage);
    assert_eq!(
        (twice.input_tokens, twice.output_tokens, twice.total_tokens),
        (10, 14, 24)
    );
    assert_eq!(twice.input_tokens_details.text_tokens, 10);
    let max = Usage {
        total_tokens: u64::MAX,
        ..Usage::default()
    };
    assert_eq!(max.saturating_add(usage).total_tokens, u64::MAX);
}

#[test]
fn usage_reads_nulls_as_zero_and_keeps_the_other_fields() {
    let usage: Usage = serde_json::from_str(
        r#"{"input_tokens":5,"input_tokens_details":{"text_tokens":null,"image_tokens":2},"output_tokens":7,"output_tokens_details":null,"total_tokens":null}"#,
    )
    .unwrap();
    assert_eq!(
        usage,
        Usage {
            input_tokens: 5,
            input_tokens_details: TokenDetails {
                text_tokens: 0,
                image_tokens: 2,
            },
            output_tokens: 7,
            output_tokens_details: TokenDetails::default(),
            total_tokens: 0,
        }
    );
}

#[test]
fn usage_schema_lists_every_field() {
    let schema = serde_json::to_value(schemars::schema_for!(Usage)).unwrap();
    let props = schema["properties"].as_object().unwrap();
    let keys: Vec<_> = props.keys().map(String::as_str).collect();
    for key in [
        "input_tokens",
        "input_tokens_details",
        "output_tokens",
        "output_tokens_details",
        "total_tokens",
    ] {
        assert!(keys.contains(&key), "{key} missing from {keys:?}");
    }
}

#[test]
fn every_error_has_a_kind_and_param() {
    let size = "1792x936".parse::<imagegate_domain::ImageSize>().unwrap_err();
    assert_eq!(size.rule, SizeRule::EdgeMultipleOf16);
    let p = |s: &str| s.to_owned();
    let cases: Vec<(RequestError, ErrorKind, Option<&str>)> = vec![
        (
            RequestError::Missing { param: p("prompt") },
            ErrorKind::InvalidRequest,
            Some("prompt"),
        ),
        (
            RequestError::InvalidType {
                param: p("n"),
                expected: p("an integer"),
            },
            ErrorKind::InvalidRequest,
            Some("n"),
        ),
        (
            RequestError::InvalidValue {
                param: p("quality"),
                value: p("x"),
                allowed: p("low"),
            },
            ErrorKind::InvalidRequest,
            Some("quality"),
        ),
        (
            RequestError::OutOfRange {
                param: p("n"),
                value: 0,
                min: 1,
                max: 10,
            },
            ErrorKind::InvalidRequest,
            Some("n"),
        ),
        (
            RequestError::Empty { param: p("prompt") },
            ErrorKind::InvalidRequest,
            Some("prompt"),
        ),
        (
            RequestError::TooLong {
                param: p("prompt"),
                length: 2,
                max: 1,
            },
            ErrorKind::InvalidRequest,
            Some("prompt"),
        ),
        (
            RequestError::InvalidSize(size),
            ErrorKind::InvalidRequest,
            Some("size"),
        ),
        (
            RequestError::Unsupported {
                param: p("background"),
                reason: p("r"),
            },
            ErrorKind::InvalidRequest,
            Some("background"),
        ),
        (
            RequestError::ModelNotAccepted { model: p("m") },
            ErrorKind::ModelNotFound,
            Some("model"),
        ),
        (
            RequestError::ImageModelAsMainModel {
                model: p("gpt-image-2"),
            },
            ErrorKind::InvalidRequest,
            Some("model"),
        ),
        (
            RequestError::PartialImagesWithoutStream,
            ErrorKind::InvalidRequest,
            Some("partial_images"),
        ),
        (
            RequestError::UnknownParameter { param: p("style") },
            ErrorKind::UnknownParameter,
            Some("style"),
        ),
        (
            RequestError::TooManyImages { count: 17 },
            ErrorKind::InvalidRequest,
            Some("image"),
        ),
        (
            RequestError::FileTooLarge {
                param: p("image[]"),
                limit: 1,
            },
            ErrorKind::PayloadTooLarge,
            Some("image[]"),
        ),
        (
            RequestError::UnsupportedFileType { param: p("image") },
            ErrorKind::InvalidRequest,
            Some("image"),
        ),
        (
            RequestError::InvalidMask(MaskError::DimensionMismatch {
                image: Dimensions::new(1, 1),
                mask: Dimensions::new(2, 2),
            }),
            ErrorKind::InvalidRequest,
            Some("mask"),
        ),
        (
            RequestError::InvalidMask(MaskError::NoAlpha {
                format: ImageFileFormat::Png,
                image: ImageFileFormat::Png,
            }),
            ErrorKind::InvalidRequest,
            Some("mask"),
        ),
    ];
    for (err, kind, param) in cases {
        assert_eq!(err.kind(), kind, "{err:?}");
        assert_eq!(err.param(), param, "{err:?}");
        assert!(!err.to_string().is_empty());
    }
    assert_eq!(
        RequestError::InvalidType {
            param: "n".into(),
            expected: "an integer".into()
        }
        .to_string(),
        "invalid type for 'n': expected an integer"
    );
    assert_eq!(
        RequestError::UnknownParameter {
            param: "style".into()
        }
        .to_string(),
        "unknown parameter 'style'"
    );
}

#[test]
fn error_kind_names() {
    assert_eq!(ErrorKind::UsageLimitReached.to_string(), "usage_limit_reached");
    assert_eq!(
        serde_json::to_string(&ErrorKind::UpstreamTimeout).unwrap(),
        "\"upstream_timeout\""
    );
    assert_eq!(ErrorKind::InvalidApiKey.as_str(), "invalid_api_key");
}

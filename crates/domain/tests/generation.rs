//! Validation of generation and edit drafts: defaults and every field rule.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::disallowed_methods
)]

use imagegate_domain::{
    Background, Dimensions, ErrorKind, ImageParamsDraft, ImageSize, ModelCatalog, Moderation, OutputFormat,
    Quality, RequestError, SizeClass, SizeRule, validate_edit, validate_generation,
};

fn draft() -> ImageParamsDraft {
    ImageParamsDraft {
        model: Some("gpt-image-2".into()),
        prompt: Some("a red bicycle against a white wall".into()),
        ..Default::default()
    }
}

fn refuse(d: ImageParamsDraft) -> RequestError {
    validate_generation(d, &ModelCatalog::default()).unwrap_err()
}

fn out_of_range(param: &str, value: i64, min: i64, max: i64) -> RequestError {
    RequestError::OutOfRange {
        param: param.into(),
        value,
        min,
        max,
    }
}

#[test]
fn minimal_draft_gets_every_default() {
    let p = validate_generation(draft(), &ModelCatalog::default()).unwrap();
    assert_eq!(p.model.requested(), "gpt-image-2");
    assert_eq!(p.model.upstream(), "gpt-image-2");
    assert_eq!(p.prompt, "a red bicycle against a white wall");
    assert_eq!(p.n, 1);
    assert_eq!(p.size, ImageSize::Auto);
    assert_eq!(p.quality, Quality::Auto);
    assert_eq!(p.output_format, OutputFormat::Png);
    assert_eq!(p.output_compression, None);
    assert_eq!(p.background, Background::Auto);
    assert_eq!(p.moderation, Moderation::Auto);
    assert!(!p.stream);
    assert_eq!(p.partial_images, 0);
    assert_eq!(p.user, None);
    assert_eq!(p.size_class(), SizeClass::Standard);
}

#[test]
fn every_field_is_carried_over() {
    let d = ImageParamsDraft {
        model: Some("gpt-image-2-2026-04-21".into()),
        n: Some(10),
        size: Some("3840x2160".into()),
        quality: Some("high".into()),
        output_format: Some("jpeg".into()),
        output_compression: Some(0),
        background: Some("opaque".into()),
        moderation: Some("low".into()),
        stream: Some(true),
        partial_images: Some(3),
        user: Some("user-42".into()),
        response_format: Some("b64_json".into()),
        ..draft()
    };
    let p = validate_generation(d, &ModelCatalog::default()).unwrap();
    assert_eq!(p.model.upstream(), "gpt-image-2-2026-04-21");
    assert_eq!(p.n, 10);
    assert_eq!(p.size, ImageSize::Exact(Dimensions::new(3840, 2160)));
    assert_eq!(p.size_class(), SizeClass::Large);
    assert_eq!(p.quality, Quality::High);
    assert_eq!(p.output_format, OutputFormat::Jpeg);
    assert_eq!(p.output_compression, Some(0));
    assert_eq!(p.background, Background::Opaque);
    assert_eq!(p.moderation, Moderation::Low);
    assert!(p.stream);
    assert_eq!(p.partial_images, 3);
    assert_eq!(p.user.as_deref(), Some("user-42"));
}

#[test]
fn model_is_required_and_must_be_accepted() {
    assert_eq!(
        refuse(ImageParamsDraft {
            model: None,
            ..draft()
        }),
        RequestError::Missing {
            param: "model".into()
        }
    );
    assert_eq!(
        refuse(ImageParamsDraft {
            model: Some(String::new()),
            ..draft()
        })
        .param(),
        Some("model")
    );
    let err = refuse(ImageParamsDraft {
        model: Some("dall-e-3".into()),
        ..draft()
    });
    assert_eq!(
        err,
        RequestError::ModelNotAccepted {
            model: "dall-e-3".into()
        }
    );
    assert_eq!(err.kind(), ErrorKind::ModelNotFound);
    assert_eq!(err.param(), Some("model"));
}

#[test]
fn prompt_rules() {
    assert_eq!(
        refuse(ImageParamsDraft {
            prompt: None,
            ..draft()
        }),
        RequestError::Missing {
            param: "prompt".into()
        }
    );
    for blank in ["", "   ", "\n\t"] {
        let err = refuse(ImageParamsDraft {
            prompt: Some(blank.into()),
            ..draft()
        });
        assert_eq!(
            err,
            RequestError::Empty {
                param: "prompt".into()
            }
        );
    }
    // The limit counts characters, not bytes: 32,000 three-byte characters pass.
    let at_limit = "é".repeat(16_000) + &"a".repeat(16_000);
    let p = validate_generation(
        ImageParamsDraft {
            prompt: Some(at_limit.clone()),
            ..draft()
        },
        &ModelCatalog::default(),
    );
    assert_eq!(p.unwrap().prompt, at_limit);
    let err = refuse(ImageParamsDraft {
        prompt: Some("x".repeat(32_001)),
        ..draft()
    });
    assert_eq!(
        err,
        RequestError::TooLong {
            param: "prompt".into(),
            length: 32_001,
            max: 32_000
        }
    );
    assert!(
        err.to_string().contains("32001") && err.to_string().contains("32000"),
        "{err}"
    );
}

#[test]
fn n_must_be_1_to_10() {
    for bad in [0, -1, 11, i64::MAX, i64::MIN] {
        assert_eq!(
            refuse(ImageParamsDraft {
                n: Some(bad),
                ..draft()
            }),
            out_of_range("n", bad, 1, 10)
        );
    }
    let p = validate_generation(
        ImageParamsDraft {
            n: Some(1),
            ..draft()
        },
        &ModelCatalog::default(),
    );
    assert_eq!(p.unwrap().n, 1);
    let err = refuse(ImageParamsDraft {
        n: Some(11),
        ..draft()
    });
    assert_eq!(err.to_string(), "'n' is 11, but it must be between 1 and 10");
    assert_eq!(err.kind(), ErrorKind::InvalidRequest);
}

#[test]
fn size_errors_keep_their_rule() {
    let err = refuse(ImageParamsDraft {
        size: Some("1792x936".into()),
        ..draft()
    });
    let RequestError::InvalidSize(size) = &err else {
        panic!("{err:?}")
    };
    assert_eq!(size.rule, SizeRule::EdgeMultipleOf16);
    assert_eq!(err.param(), Some("size"));
    assert_eq!(
        err.to_string(),
        "size 1792x936: height 936 is not a multiple of 16 (928 or 944 would be)"
    );
}

#[test]
fn enum_fields_name_their_param() {
    let cases: [(ImageParamsDraft, &str); 4] = [
        (
            ImageParamsDraft {
                quality: Some("hd".into()),
                ..draft()
            },
            "quality",
        ),
        (
            ImageParamsDraft {
                output_format: Some("gif".into()),
                ..draft()
            },
            "output_format",
        ),
        (
            ImageParamsDraft {
                background: Some("white".into()),
                ..draft()
            },
            "background",
        ),
        (
            ImageParamsDraft {
                moderation: Some("off".into()),
                ..draft()
            },
            "moderation",
        ),
    ];
    for (d, param) in cases {
        let err = refuse(d);
        assert!(
            matches!(&err, RequestError::InvalidValue { param: p, .. } if p == param),
            "{err:?}"
        );
    }
}

#[test]
fn transparent_background_is_refused() {
    let err = refuse(ImageParamsDraft {
        background: Some("transparent".into()),
        ..draft()
    });
    assert!(matches!(err, RequestError::Unsupported { .. }), "{err:?}");
    assert_eq!(err.param(), Some("background"));
    assert_eq!(err.kind(), ErrorKind::InvalidRequest);
    assert!(err.to_string().contains("transparent"), "{err}");
}

#[test]
fn output_compression_range_and_png() {
    let ok = |format: &str, value: i64| {
        let d = ImageParamsDraft {
            output_format: Some(format.into()),
            output_compression: Some(value),
            ..draft()
        };
        validate_generation(d, &ModelCatalog::default())
            .unwrap()
            .output_compression
    };
    assert_eq!(ok("jpeg", 0), Some(0));
    assert_eq!(ok("webp", 100), Some(100));
    assert_eq!(ok("jpeg", 55), Some(55));
    // png: accepted and dropped.
    assert_eq!(ok("png", 80), None);
    let implicit_png = ImageParamsDraft {
        output_compression: Some(80),
        ..draft()
    };
    assert_eq!(
        validate_generation(implicit_png, &ModelCatalog::default())
            .unwrap()
            .output_compression,
        None
    );
    for bad in [-1, 101, i64::MAX] {
        for format in ["png", "jpeg"] {
            let d = ImageParamsDraft {
                output_format: Some(format.into()),
                output_compression: Some(bad),
                ..draft()
            };
            assert_eq!(refuse(d), out_of_range("output_compression", bad, 0, 100));
        }
    }
}

#[test]
fn partial_images_need_stream() {
    let with = |stream: Option<bool>, partial: i64| ImageParamsDraft {
        stream,
        partial_images: Some(partial),
        ..draft()
    };
    assert_eq!(refuse(with(None, 1)), RequestError::PartialImagesWithoutStream);
    assert_eq!(
        refuse(with(Some(false), 3)),
        RequestError::PartialImagesWithoutStream
    );
    assert_eq!(
        RequestError::PartialImagesWithoutStream.param(),
        Some("partial_images")
    );
    let catalog = ModelCatalog::default();
    assert_eq!(
        validate_generation(with(Some(true), 2), &catalog)
            .unwrap()
            .partial_images,
        2
    );
    assert_eq!(
        validate_generation(with(Some(false), 0), &catalog)
            .unwrap()
            .partial_images,
        0
    );
    assert_eq!(
        refuse(with(Some(true), 4)),
        out_of_range("partial_images", 4, 0, 3)
    );
    assert_eq!(
        refuse(with(Some(true), -1)),
        out_of_range("partial_images", -1, 0, 3)
    );
}

#[test]
fn response_format_only_b64_json() {
    let err = refuse(ImageParamsDraft {
        response_format: Some("url".into()),
        ..draft()
    });
    assert!(matches!(err, RequestError::Unsupported { .. }), "{err:?}");
    assert_eq!(err.param(), Some("response_format"));
    assert!(err.to_string().contains("b64_json"), "{err}");
    let err = refuse(ImageParamsDraft {
        response_format: Some("png".into()),
        ..draft()
    });
    assert_eq!(
        err,
        RequestError::InvalidValue {
            param: "response_format".into(),
            value: "png".into(),
            allowed: "b64_json".into()
        }
    );
}

#[test]
fn input_fidelity_is_refused_on_both_endpoints() {
    let d = ImageParamsDraft {
        input_fidelity: Some("high".into()),
        ..draft()
    };
    let err = validate_edit(d.clone(), &ModelCatalog::default()).unwrap_err();
    assert!(matches!(err, RequestError::Unsupported { .. }), "{err:?}");
    assert_eq!(err.param(), Some("input_fidelity"));
    assert!(err.to_string().contains("high fidelity"), "{err}");
    let err = refuse(d);
    assert_eq!(
        err,
        RequestError::UnknownParameter {
            param: "input_fidelity".into()
        }
    );
    assert_eq!(err.kind(), ErrorKind::UnknownParameter);
}

#[test]
fn edit_applies_the_generation_rules() {
    let catalog = ModelCatalog::default();
    let p = validate_edit(
        ImageParamsDraft {
            size: Some("1024x1536".into()),
            ..draft()
        },
        &catalog,
    )
    .unwrap();
    assert_eq!(p.size.to_string(), "1024x1536");
    let err = validate_edit(
        ImageParamsDraft {
            background: Some("transparent".into()),
            ..draft()
        },
        &catalog,
    );
    assert_eq!(err.unwrap_err().param(), Some("background"));
    let err = validate_edit(
        ImageParamsDraft {
            prompt: None,
            ..draft()
        },
        &catalog,
    );
    assert_eq!(
        err.unwrap_err(),
        RequestError::Missing {
            param: "prompt".into()
        }
    );
}

#[test]
fn draft_deserializes_with_nulls_as_absent() {
    let d: ImageParamsDraft =
        serde_json::from_str(r#"{"model":"gpt-image-2","prompt":"p","n":null,"size":"auto"}"#).unwrap();
    assert_eq!(d.n, None);
    assert_eq!(d.size.as_deref(), Some("auto"));
    assert_eq!(d.quality, None);
}

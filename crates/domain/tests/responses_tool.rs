//! The Responses API rules: main-model refusal and the image_generation tool.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::disallowed_methods
)]

use std::collections::BTreeMap;

use imagegate_domain::{
    Background, ErrorKind, ImageAction, ImageSize, ImageToolDraft, ModelCatalog, Moderation, OutputFormat,
    Quality, RequestError, SizeRule, validate_image_tool, validate_main_model,
};

#[test]
fn text_models_pass_as_main_model() {
    let catalog = ModelCatalog::default();
    assert_eq!(validate_main_model(Some("gpt-5"), &catalog).unwrap(), "gpt-5");
    assert_eq!(
        validate_main_model(Some("gpt-4.1-mini"), &catalog).unwrap(),
        "gpt-4.1-mini"
    );
}

#[test]
fn an_overlong_main_model_is_refused() {
    let catalog = ModelCatalog::default();
    let wide = "é".repeat(256);
    assert_eq!(validate_main_model(Some(&wide), &catalog).unwrap(), wide);
    let long = "m".repeat(257);
    assert_eq!(
        validate_main_model(Some(&long), &catalog),
        Err(RequestError::TooLong {
            param: "model".into(),
            length: 257,
            max: 256
        })
    );
}

#[test]
fn main_model_is_required() {
    let catalog = ModelCatalog::default();
    assert_eq!(
        validate_main_model(None, &catalog),
        Err(RequestError::Missing {
            param: "model".into()
        })
    );
    assert_eq!(
        validate_main_model(Some(""), &catalog),
        Err(RequestError::Missing {
            param: "model".into()
        })
    );
}

#[test]
fn image_model_as_main_model_is_refused_with_a_fix() {
    let catalog = ModelCatalog::new(
        ["gpt-image-2".to_owned()],
        BTreeMap::from([("painter".into(), "gpt-image-2".into())]),
    );
    for id in ["gpt-image-2", "painter", "gpt-image-1", "gpt-image-2-2026-04-21"] {
        let err = validate_main_model(Some(id), &catalog).unwrap_err();
        assert_eq!(err, RequestError::ImageModelAsMainModel { model: id.into() });
        assert_eq!(err.param(), Some("model"));
        assert_eq!(err.kind(), ErrorKind::InvalidRequest);
        let msg = err.to_string();
        assert!(msg.contains("text/agent model"), "{msg}");
        assert!(msg.contains("image_generation"), "{msg}");
        assert!(msg.contains(&format!("\"model\": \"{id}\"")), "{msg}");
    }
}

#[test]
fn empty_tool_gets_defaults() {
    let tool = validate_image_tool(ImageToolDraft::default(), &ModelCatalog::default()).unwrap();
    assert_eq!(tool.model, None);
    assert_eq!(tool.quality, Quality::Auto);
    assert_eq!(tool.size, ImageSize::Auto);
    assert_eq!(tool.output_format, OutputFormat::Png);
    assert_eq!(tool.output_compression, None);
    assert_eq!(tool.background, Background::Auto);
    assert_eq!(tool.moderation, Moderation::Auto);
    assert_eq!(tool.partial_images, 0);
    assert_eq!(tool.action, ImageAction::Auto);
}

#[test]
fn tool_values_are_parsed() {
    let catalog = ModelCatalog::new(
        ["gpt-image-2".to_owned()],
        BTreeMap::from([("img".into(), "gpt-image-2".into())]),
    );
    let draft = ImageToolDraft {
        model: Some("img".into()),
        quality: Some("medium".into()),
        size: Some("2048x1152".into()),
        output_format: Some("webp".into()),
        output_compression: Some(70),
        background: Some("opaque".into()),
        moderation: Some("low".into()),
        partial_images: Some(2),
        action: Some("edit".into()),
        input_fidelity: None,
    };
    let tool = validate_image_tool(draft, &catalog).unwrap();
    let model = tool.model.unwrap();
    assert_eq!((model.requested(), model.upstream()), ("img", "gpt-image-2"));
    assert_eq!(tool.quality, Quality::Medium);
    assert_eq!(tool.size.to_string(), "2048x1152");
    assert_eq!(tool.output_format, OutputFormat::Webp);
    assert_eq!(tool.output_compression, Some(70));
    assert_eq!(tool.background, Background::Opaque);
    assert_eq!(tool.moderation, Moderation::Low);
    assert_eq!(tool.partial_images, 2);
    assert_eq!(tool.action, ImageAction::Edit);
}

#[test]
fn tool_refusals_follow_the_images_rules() {
    let catalog = ModelCatalog::default();
    let refuse = |d: ImageToolDraft| validate_image_tool(d, &catalog).unwrap_err();

    let err = refuse(ImageToolDraft {
        model: Some("gpt-image-1".into()),
        ..Default::default()
    });
    assert_eq!(
        err,
        RequestError::ModelNotAccepted {
            model: "gpt-image-1".into()
        }
    );
    assert_eq!(
        refuse(ImageToolDraft {
            model: Some(String::new()),
            ..Default::default()
        })
        .param(),
        Some("model")
    );

    let err = refuse(ImageToolDraft {
        size: Some("4000x2000".into()),
        ..Default::default()
    });
    assert!(
        matches!(&err, RequestError::InvalidSize(e) if e.rule == SizeRule::LongestEdge),
        "{err:?}"
    );

    let err = refuse(ImageToolDraft {
        background: Some("transparent".into()),
        ..Default::default()
    });
    assert!(matches!(err, RequestError::Unsupported { .. }), "{err:?}");

    let err = refuse(ImageToolDraft {
        input_fidelity: Some("high".into()),
        ..Default::default()
    });
    assert!(
        matches!(&err, RequestError::Unsupported { param, .. } if param == "input_fidelity"),
        "as on the edits endpoint: {err:?}"
    );

    let err = refuse(ImageToolDraft {
        partial_images: Some(4),
        ..Default::default()
    });
    assert_eq!(
        err,
        RequestError::OutOfRange {
            param: "partial_images".into(),
            value: 4,
            min: 0,
            max: 3
        }
    );

    let err = refuse(ImageToolDraft {
        output_compression: Some(101),
        ..Default::default()
    });
    assert_eq!(err.param(), Some("output_compression"));

    let err = refuse(ImageToolDraft {
        action: Some("paint".into()),
        ..Default::default()
    });
    assert_eq!(err.param(), Some("action"));

    let err = refuse(ImageToolDraft {
        quality: Some("ultra".into()),
        ..Default::default()
    });
    assert_eq!(err.param(), Some("quality"));
}

#[test]
fn tool_partial_images_do_not_need_stream_and_png_drops_compression() {
    let draft = ImageToolDraft {
        partial_images: Some(3),
        output_compression: Some(50),
        ..Default::default()
    };
    let tool = validate_image_tool(draft, &ModelCatalog::default()).unwrap();
    assert_eq!(tool.partial_images, 3);
    assert_eq!(tool.output_compression, None);
}

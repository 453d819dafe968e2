//! The closed-set parameters: wire names, defaults, serde, and refusals.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::disallowed_methods
)]

use std::fmt::Display;
use std::str::FromStr;

use imagegate_domain::{Background, ImageAction, Moderation, OutputFormat, Quality, RequestError};
use serde::Serialize;
use serde::de::DeserializeOwned;

/// Every listed wire name parses to a distinct value that prints and serializes back to it.
fn round_trips<T>(names: &[&str])
where
    T: FromStr<Err = RequestError>
        + Display
        + Serialize
        + DeserializeOwned
        + PartialEq
        + std::fmt::Debug
        + Copy,
{
    let mut seen = Vec::new();
    for name in names {
        let value: T = name.parse().unwrap();
        assert_eq!(value.to_string(), *name);
        assert_eq!(serde_json::to_string(&value).unwrap(), format!("\"{name}\""));
        assert_eq!(serde_json::from_str::<T>(&format!("\"{name}\"")).unwrap(), value);
        assert!(!seen.contains(&value), "{name} parsed to a value already seen");
        seen.push(value);
    }
}

fn refused<T: FromStr<Err = RequestError> + std::fmt::Debug>(value: &str) -> RequestError {
    value.parse::<T>().unwrap_err()
}

#[test]
fn wire_names_round_trip() {
    round_trips::<Quality>(&["low", "medium", "high", "auto"]);
    round_trips::<OutputFormat>(&["png", "jpeg", "webp"]);
    round_trips::<Background>(&["auto", "opaque"]);
    round_trips::<Moderation>(&["auto", "low"]);
    round_trips::<ImageAction>(&["auto", "generate", "edit"]);
    assert_eq!(Quality::ALL.len(), 4);
    assert_eq!(OutputFormat::ALL.len(), 3);
    assert_eq!(ImageAction::ALL.len(), 3);
}

#[test]
fn defaults() {
    assert_eq!(Quality::default(), Quality::Auto);
    assert_eq!(OutputFormat::default(), OutputFormat::Png);
    assert_eq!(Background::default(), Background::Auto);
    assert_eq!(Moderation::default(), Moderation::Auto);
    assert_eq!(ImageAction::default(), ImageAction::Auto);
}

#[test]
fn unknown_values_name_param_and_allowed_values() {
    let cases = [
        (
            refused::<Quality>("standard"),
            "quality",
            "standard",
            "low, medium, high, auto",
        ),
        (
            refused::<Quality>("HIGH"),
            "quality",
            "HIGH",
            "low, medium, high, auto",
        ),
        (
            refused::<OutputFormat>("jpg"),
            "output_format",
            "jpg",
            "png, jpeg, webp",
        ),
        (refused::<Background>(""), "background", "", "auto, opaque"),
        (refused::<Moderation>("none"), "moderation", "none", "auto, low"),
        (
            refused::<ImageAction>("create"),
            "action",
            "create",
            "auto, generate, edit",
        ),
    ];
    for (err, param, value, allowed) in cases {
        assert_eq!(
            err,
            RequestError::InvalidValue {
                param: param.into(),
                value: value.into(),
                allowed: allowed.into()
            }
        );
        assert_eq!(err.param(), Some(param));
    }
    let msg = refused::<OutputFormat>("gif").to_string();
    assert_eq!(
        msg,
        "invalid value 'gif' for 'output_format': allowed values are png, jpeg, webp"
    );
}

#[test]
fn long_values_are_shortened_in_errors() {
    let RequestError::InvalidValue { value, .. } = refused::<Quality>(&"q".repeat(5000)) else {
        panic!()
    };
    assert_eq!(value.chars().count(), 65);
    assert!(value.ends_with('…'));
}

#[test]
fn transparent_background_is_unsupported_not_unknown() {
    let err = refused::<Background>("transparent");
    let RequestError::Unsupported { param, reason } = &err else {
        panic!("{err:?}")
    };
    assert_eq!(param, "background");
    assert!(
        reason.contains("does not support") || reason.contains("cannot"),
        "{reason}"
    );
    assert!(reason.contains("opaque"), "{reason}");
    assert!(serde_json::from_str::<Background>("\"transparent\"").is_err());
}

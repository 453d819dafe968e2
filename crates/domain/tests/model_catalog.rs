//! Model ids, aliases and the catalog configuration format.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::disallowed_methods
)]

use std::collections::BTreeMap;

use imagegate_domain::{GPT_IMAGE_2, GPT_IMAGE_2_SNAPSHOT, ModelCatalog, ModelId, RequestError};

#[test]
fn default_accepts_both_ids_without_rewriting() {
    let catalog = ModelCatalog::default();
    assert_eq!(GPT_IMAGE_2, "gpt-image-2");
    assert_eq!(GPT_IMAGE_2_SNAPSHOT, "gpt-image-2-2026-04-21");
    for id in [GPT_IMAGE_2, GPT_IMAGE_2_SNAPSHOT] {
        assert_eq!(catalog.resolve(id).unwrap(), ModelId::new(id, id));
        assert!(catalog.is_image_model(id));
    }
    assert_eq!(
        catalog.ids().collect::<Vec<_>>(),
        [GPT_IMAGE_2, GPT_IMAGE_2_SNAPSHOT]
    );
    assert!(catalog.aliases().is_empty());
}

#[test]
fn unknown_and_differently_cased_ids_are_refused() {
    let catalog = ModelCatalog::default();
    for id in ["gpt-image-1", "GPT-IMAGE-2", " gpt-image-2", "gpt-5"] {
        assert_eq!(
            catalog.resolve(id),
            Err(RequestError::ModelNotAccepted { model: id.into() })
        );
        assert!(!catalog.is_image_model(id));
    }
    let err = catalog.resolve("dall-e-2").unwrap_err();
    assert_eq!(
        err.to_string(),
        "model 'dall-e-2' is not available on this gateway"
    );
}

#[test]
fn aliases_rewrite_to_their_upstream_id() {
    let aliases = BTreeMap::from([
        ("image-latest".to_owned(), GPT_IMAGE_2_SNAPSHOT.to_owned()),
        (GPT_IMAGE_2.to_owned(), GPT_IMAGE_2_SNAPSHOT.to_owned()),
    ]);
    let catalog = ModelCatalog::new(
        [
            GPT_IMAGE_2.to_owned(),
            GPT_IMAGE_2.to_owned(),
            GPT_IMAGE_2_SNAPSHOT.to_owned(),
        ],
        aliases,
    );
    let pinned = catalog.resolve(GPT_IMAGE_2).unwrap();
    assert_eq!(
        (pinned.requested(), pinned.upstream()),
        (GPT_IMAGE_2, GPT_IMAGE_2_SNAPSHOT)
    );
    let alias = catalog.resolve("image-latest").unwrap();
    assert_eq!(
        (alias.requested(), alias.upstream()),
        ("image-latest", GPT_IMAGE_2_SNAPSHOT)
    );
    assert!(catalog.is_image_model("image-latest"));
    // Duplicates listed once; alias names that are not already accepted come last.
    assert_eq!(
        catalog.ids().collect::<Vec<_>>(),
        [GPT_IMAGE_2, GPT_IMAGE_2_SNAPSHOT, "image-latest"]
    );
}

#[test]
fn catalog_loads_from_configuration() {
    let catalog: ModelCatalog =
        serde_json::from_str(r#"{"accepted":["gpt-image-2"],"aliases":{"img":"gpt-image-2"}}"#).unwrap();
    assert!(catalog.resolve(GPT_IMAGE_2_SNAPSHOT).is_err());
    assert_eq!(catalog.resolve("img").unwrap().upstream(), GPT_IMAGE_2);

    let only_aliases: ModelCatalog = serde_json::from_str(r#"{"aliases":{"img":"gpt-image-2"}}"#).unwrap();
    assert!(only_aliases.resolve(GPT_IMAGE_2_SNAPSHOT).is_ok());
    assert_eq!(
        serde_json::from_str::<ModelCatalog>("{}").unwrap(),
        ModelCatalog::default()
    );

    let typo = serde_json::from_str::<ModelCatalog>(r#"{"acepted":["x"]}"#)
        .unwrap_err()
        .to_string();
    assert!(typo.contains("acepted"), "{typo}");
}

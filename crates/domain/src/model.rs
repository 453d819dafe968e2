//! Image model identifiers and the configurable [`ModelCatalog`] of accepted ids and aliases.

use std::collections::BTreeMap;

use crate::error::{RequestError, echo};

/// The moving alias of the image model.
pub const GPT_IMAGE_2: &str = "gpt-image-2";
/// The dated snapshot of the image model.
pub const GPT_IMAGE_2_SNAPSHOT: &str = "gpt-image-2-2026-04-21";

/// A model id as the caller wrote it and as it is sent upstream (after alias mapping).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ModelId {
    requested: String,
    upstream: String,
}

impl ModelId {
    /// Builds a model id directly, bypassing the catalog (for tests and simulators).
    pub fn new(requested: impl Into<String>, upstream: impl Into<String>) -> Self {
        Self {
            requested: requested.into(),
            upstream: upstream.into(),
        }
    }

    /// The id the caller sent.
    pub fn requested(&self) -> &str {
        &self.requested
    }

    /// The id to send upstream.
    pub fn upstream(&self) -> &str {
        &self.upstream
    }
}

/// Which image model ids the gateway accepts, and which ids are aliases rewritten to
/// another upstream id. Loaded from the server configuration, e.g. (JSON)
/// `{"accepted": ["gpt-image-2"], "aliases": {"image-latest": "gpt-image-2"}}`; a missing
/// `accepted` keeps the default list, a missing `aliases` means no rewriting.
///
/// [`Default`] accepts [`GPT_IMAGE_2`] and [`GPT_IMAGE_2_SNAPSHOT`] and rewrites nothing.
/// Ids are compared exactly (case-sensitive).
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ModelCatalog {
    accepted: Vec<String>,
    aliases: BTreeMap<String, String>,
}

impl Default for ModelCatalog {
    fn default() -> Self {
        Self::new(
            [GPT_IMAGE_2.to_owned(), GPT_IMAGE_2_SNAPSHOT.to_owned()],
            BTreeMap::new(),
        )
    }
}

impl ModelCatalog {
    /// A catalog accepting `accepted` ids as they are, plus every alias key (rewritten to
    /// its value). Duplicate ids are kept once, in first-seen order.
    pub fn new(accepted: impl IntoIterator<Item = String>, aliases: BTreeMap<String, String>) -> Self {
        let mut ids: Vec<String> = Vec::new();
        for id in accepted {
            if !ids.contains(&id) {
                ids.push(id);
            }
        }
        Self {
            accepted: ids,
            aliases,
        }
    }

    /// Resolves a requested id: an alias maps to its upstream id, an accepted id maps to
    /// itself, anything else is [`RequestError::ModelNotAccepted`].
    pub fn resolve(&self, requested: &str) -> Result<ModelId, RequestError> {
        if let Some(upstream) = self.aliases.get(requested) {
            return Ok(ModelId::new(requested, upstream.as_str()));
        }
        if self.accepted.iter().any(|id| id == requested) {
            return Ok(ModelId::new(requested, requested));
        }
        Err(RequestError::ModelNotAccepted {
            model: echo(requested),
        })
    }

    /// Whether `id` is an accepted image model id or alias.
    pub fn is_image_model(&self, id: &str) -> bool {
        self.aliases.contains_key(id) || self.accepted.iter().any(|a| a == id)
    }

    /// Every id a caller may send: accepted ids first, then alias names not already listed.
    pub fn ids(&self) -> impl Iterator<Item = &str> {
        let accepted = self.accepted.iter().map(String::as_str);
        let aliases = self
            .aliases
            .keys()
            .filter(|alias| !self.accepted.contains(alias))
            .map(String::as_str);
        accepted.chain(aliases)
    }

    /// The alias map (alias -> upstream id).
    pub fn aliases(&self) -> &BTreeMap<String, String> {
        &self.aliases
    }
}

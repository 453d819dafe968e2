//! `GET /v1/models` and `GET /v1/models/{id}`.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The constant `object` of a model list: `"list"`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum ListObject {
    /// `"list"`.
    #[default]
    #[serde(rename = "list")]
    List,
}

/// The constant `object` of a model: `"model"`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum ModelObject {
    /// `"model"`.
    #[default]
    #[serde(rename = "model")]
    Model,
}

/// Body of `GET /v1/models` (no pagination keys: the SDKs read only `object` and `data`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ModelList {
    /// Always `list`.
    pub object: ListObject,
    /// The models.
    pub data: Vec<ModelEntry>,
}

/// One model; also the body of `GET /v1/models/{id}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ModelEntry {
    /// Model id, e.g. `gpt-image-2`.
    pub id: String,
    /// Always `model`.
    pub object: ModelObject,
    /// Creation time, unix seconds.
    pub created: i64,
    /// Owner, e.g. `system`.
    pub owned_by: String,
}

impl ModelEntry {
    /// A model entry.
    pub fn new(id: impl Into<String>, created: i64, owned_by: impl Into<String>) -> Self {
        Self {
            id: id.into(),
            object: ModelObject::Model,
            created,
            owned_by: owned_by.into(),
        }
    }
}

impl ModelList {
    /// A list of `entries`.
    pub fn new(entries: Vec<ModelEntry>) -> Self {
        Self {
            object: ListObject::List,
            data: entries,
        }
    }
}

impl FromIterator<ModelEntry> for ModelList {
    fn from_iter<I: IntoIterator<Item = ModelEntry>>(iter: I) -> Self {
        Self::new(iter.into_iter().collect())
    }
}

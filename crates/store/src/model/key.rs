//! API key records and what authentication yields.

use serde::{Deserialize, Serialize};

use super::{GroupId, KeyId, Timestamp, UserId, text_enum};
use crate::Secret;

/// The life cycle of a key. Only `Active` keys authenticate; `Deleted` is final.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum KeyStatus {
    /// Usable.
    Active,
    /// Switched off by its owner; the owner may enable it again.
    Disabled,
    /// Switched off by an administrator: only an administrator enables it again
    /// ([`Store::reinstate_key`](crate::Store::reinstate_key)); its owner can still delete it.
    Suspended,
    /// Soft-deleted: kept for usage history, never authenticates again.
    Deleted,
}

text_enum!(KeyStatus { Active => "active", Disabled => "disabled", Suspended => "suspended", Deleted => "deleted" });

/// Per-key limits enforced by the server (`None` = no limit of that kind).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct KeyLimits {
    /// Requests of this key in flight at once.
    pub max_concurrency: Option<u32>,
    /// Requests per minute.
    pub rpm: Option<u32>,
}

/// A stored API key. The secret is not part of it: only its SHA-256 is kept, and that is not exposed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ApiKeyRecord {
    /// Its id.
    pub id: KeyId,
    /// The public part of the key (`sk-ig-<public_id>-...`), safe to show and log.
    pub public_id: String,
    /// The owner.
    pub user_id: UserId,
    /// The group whose accounts serve this key.
    pub group_id: GroupId,
    /// A label chosen by the owner.
    pub name: String,
    /// Life cycle state.
    pub status: KeyStatus,
    /// Limits.
    pub limits: KeyLimits,
    /// Whether the server may fall back to a cheaper size/quality ladder for this key.
    pub fallback_ladder: bool,
    /// When it was created.
    pub created_at: Timestamp,
    /// When it was last used (updated in batches, so it may lag).
    pub last_used_at: Option<Timestamp>,
}

impl ApiKeyRecord {
    /// The key as it can be shown after creation: `sk-ig-<public_id>-…`.
    pub fn masked(&self) -> String {
        format!("{}{}-…", crate::keys::KEY_PREFIX, self.public_id)
    }
}

/// Input of [`Store::create_key`](crate::Store::create_key).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewApiKey {
    /// The owner.
    pub user_id: UserId,
    /// The group.
    pub group_id: GroupId,
    /// A label (not empty).
    pub name: String,
    /// Limits.
    pub limits: KeyLimits,
    /// See [`ApiKeyRecord::fallback_ladder`].
    pub fallback_ladder: bool,
}

/// A freshly created key: the full key text is only available here, once.
#[derive(Debug, Clone)]
pub struct NewKey {
    /// The full key (`sk-ig-<public id>-<secret>`) to hand to the user.
    pub key: Secret,
    /// The stored record.
    pub record: ApiKeyRecord,
}

/// A change to a key's settings; `None` fields are left as they are.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct KeyUpdate {
    /// New label.
    pub name: Option<String>,
    /// New group.
    pub group_id: Option<GroupId>,
    /// New limits (replaces both limits).
    pub limits: Option<KeyLimits>,
    /// New fallback setting.
    pub fallback_ladder: Option<bool>,
}

/// The identity attached to a request whose key authenticated.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AuthContext {
    /// The key's id.
    pub key_id: KeyId,
    /// The key's public id (for logs and cache invalidation).
    pub key_public_id: String,
    /// The key's label.
    pub key_name: String,
    /// The owner.
    pub user_id: UserId,
    /// The group whose accounts serve the request.
    pub group_id: GroupId,
    /// The key's limits.
    pub limits: KeyLimits,
    /// See [`ApiKeyRecord::fallback_ladder`].
    pub fallback_ladder: bool,
}

/// What a presented key is worth ([`Store::check_key`](crate::Store::check_key)).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KeyCheck {
    /// The key authenticates.
    Valid(AuthContext),
    /// Not a key of the service: malformed, unknown, or presented with a secret that does not
    /// match. Nothing more is said, so a guess learns nothing.
    Unknown,
    /// A key of the service, presented with its secret, that may not be used. Only the holder of
    /// the secret learns why.
    Refused(KeyRefusal),
}

impl KeyCheck {
    /// The identity of a valid key; `None` for every other answer.
    pub fn valid(self) -> Option<AuthContext> {
        match self {
            Self::Valid(context) => Some(context),
            Self::Unknown | Self::Refused(_) => None,
        }
    }
}

/// Why a genuine key may not be used.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum KeyRefusal {
    /// Its owner switched it off.
    Disabled,
    /// An administrator switched it off.
    Suspended,
    /// It was deleted.
    Deleted,
    /// Its group is restricted and its owner is neither a member nor an admin
    /// ([`Store::may_use_group`](crate::Store::may_use_group)).
    GroupClosed,
}

impl KeyRefusal {
    /// The refusal a key's status alone makes; `None` for an active key.
    pub fn of_status(status: KeyStatus) -> Option<Self> {
        match status {
            KeyStatus::Active => None,
            KeyStatus::Disabled => Some(Self::Disabled),
            KeyStatus::Suspended => Some(Self::Suspended),
            KeyStatus::Deleted => Some(Self::Deleted),
        }
    }
}

/// One use of a key, for [`Store::touch_keys`](crate::Store::touch_keys).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KeyUse {
    /// The key.
    pub key_id: KeyId,
    /// When it was used; `last_used_at` only moves forward.
    pub at: Timestamp,
}

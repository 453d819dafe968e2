//! Upstream accounts: where image requests are sent.

use serde::{Deserialize, Serialize};

use super::{AccountId, GroupId, Timestamp, text_enum};
use crate::Secret;

/// How the gateway talks to an account.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum AccountKind {
    /// An OpenAI-compatible Images API with an API key.
    Openai,
    /// A ChatGPT-subscription account (OAuth tokens, Responses API).
    Codex,
    /// The simulated upstream.
    Sim,
}

text_enum!(AccountKind { Openai => "openai", Codex => "codex", Sim => "sim" });

/// The subscription tier of an account (dispatch prefers higher tiers).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum AccountTier {
    /// Free.
    Free,
    /// Plus.
    Plus,
    /// Team.
    Team,
    /// Pro.
    Pro,
}

text_enum!(AccountTier { Free => "free", Plus => "plus", Team => "team", Pro => "pro" });

/// Whether dispatch may use an account.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum AccountStatus {
    /// In the pool.
    Active,
    /// Taken out by an operator.
    Disabled,
    /// Taken out automatically (revoked credential, ...); see `status_reason`.
    Error,
}

text_enum!(AccountStatus { Active => "active", Disabled => "disabled", Error => "error" });

/// A stored upstream account. Its credential is not part of it (see
/// [`Store::account_credential`](crate::Store::account_credential)), so printing or serializing an
/// account never reveals it.
/// An account's credential as stored, with the base URL it is sent to and the row's `updated_at`,
/// all read in one statement ([`Store::account_credential_as_of`](crate::Store::account_credential_as_of)).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredCredential {
    /// The decrypted credential, `None` if the account has none.
    pub credential: Option<Secret>,
    /// The base URL stored with it.
    pub base_url: Option<String>,
    /// The row's `updated_at` at that read.
    pub updated_at: Timestamp,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Account {
    /// Its id.
    pub id: AccountId,
    /// Unique name.
    pub name: String,
    /// Transport kind.
    pub kind: AccountKind,
    /// Base URL of the upstream API; `None` means the kind's default.
    pub base_url: Option<String>,
    /// Subscription tier.
    pub tier: AccountTier,
    /// Higher is tried first among accounts of the same tier.
    pub priority: i32,
    /// Concurrent standard-size requests allowed.
    pub concurrency_standard: u32,
    /// Concurrent large-size requests allowed.
    pub concurrency_large: u32,
    /// Pool state.
    pub status: AccountStatus,
    /// Why the status was set (e.g. `"401 from upstream"`).
    pub status_reason: Option<String>,
    /// Groups this account serves.
    pub groups: Vec<GroupId>,
    /// The model the transport asks for first (codex).
    pub main_model: Option<String>,
    /// Models to try next, in order (codex).
    pub fallback_models: Vec<String>,
    /// Whether an encrypted credential is stored.
    pub has_credential: bool,
    /// When it was created.
    pub created_at: Timestamp,
    /// When it was last changed.
    pub updated_at: Timestamp,
}

/// Input of [`Store::create_account`](crate::Store::create_account).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewAccount {
    /// Unique name (not empty).
    pub name: String,
    /// Transport kind.
    pub kind: AccountKind,
    /// Base URL (`None` = the kind's default).
    pub base_url: Option<String>,
    /// Tier.
    pub tier: AccountTier,
    /// Priority.
    pub priority: i32,
    /// Standard-size concurrency (default 4).
    pub concurrency_standard: u32,
    /// Large-size concurrency (default 1).
    pub concurrency_large: u32,
    /// Groups served (at least one is usual; may be empty).
    pub groups: Vec<GroupId>,
    /// Main model.
    pub main_model: Option<String>,
    /// Fallback models.
    pub fallback_models: Vec<String>,
    /// Credential to encrypt and store: an API key, or an opaque JSON document for codex
    /// (`{"access_token", "refresh_token", "expires_at", "account_id"}`).
    pub credential: Option<Secret>,
}

impl NewAccount {
    /// An account with the defaults: tier `free`, priority 0, concurrency 4 / 1, no groups,
    /// no models, no credential.
    pub fn new(name: impl Into<String>, kind: AccountKind) -> Self {
        Self {
            name: name.into(),
            kind,
            base_url: None,
            tier: AccountTier::Free,
            priority: 0,
            concurrency_standard: 4,
            concurrency_large: 1,
            groups: Vec::new(),
            main_model: None,
            fallback_models: Vec::new(),
            credential: None,
        }
    }
}

/// A change to an account; `None` fields are left as they are. All of it is written at once: a
/// process reading the account meanwhile never sees a new base URL with the old credential.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct AccountUpdate {
    /// New name.
    pub name: Option<String>,
    /// New base URL (`Some(None)` resets to the kind's default).
    pub base_url: Option<Option<String>>,
    /// New tier.
    pub tier: Option<AccountTier>,
    /// New priority.
    pub priority: Option<i32>,
    /// New standard-size concurrency.
    pub concurrency_standard: Option<u32>,
    /// New large-size concurrency.
    pub concurrency_large: Option<u32>,
    /// New status and reason.
    pub status: Option<(AccountStatus, Option<String>)>,
    /// New set of groups (replaces the old set).
    pub groups: Option<Vec<GroupId>>,
    /// New main model (`Some(None)` clears it).
    pub main_model: Option<Option<String>>,
    /// New fallback models.
    pub fallback_models: Option<Vec<String>>,
    /// New credential (`Some(None)` removes it), stored encrypted.
    pub credential: Option<Option<crate::Secret>>,
}

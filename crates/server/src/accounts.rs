//! The account directory: upstream accounts from the store, kept in step with the dispatcher.
//!
//! Accounts change through the CLI or the console, possibly in another process, so the directory
//! re-reads them periodically. Credentials are decrypted only for accounts whose row changed.

use std::collections::HashMap;
use std::sync::Arc;

use parking_lot::RwLock;

use imagegate_dispatch::{AccountSpec, ClassLimits, Dispatcher, Tier};
use imagegate_store::{Account, AccountKind, AccountStatus, AccountTier, Store, StoreError, Timestamp};
use imagegate_upstream::{AccountKind as UpstreamKind, AccountTarget};

/// Base URL of an account kind when the account gives none.
pub fn default_base_url(kind: AccountKind) -> Option<&'static str> {
    match kind {
        AccountKind::Openai => Some("https://api.openai.com/v1"),
        AccountKind::Codex => Some("https://chatgpt.com/backend-api/codex"),
        AccountKind::Sim => None,
    }
}

/// Dispatcher id of a store account.
pub fn dispatch_id(id: imagegate_store::AccountId) -> imagegate_dispatch::AccountId {
    imagegate_dispatch::AccountId::new(&id.to_string())
}

struct Entry {
    updated_at: Timestamp,
    status: AccountStatus,
    target: Option<Arc<AccountTarget>>,
}

/// Upstream targets by account, and the source of the dispatcher's account specs.
pub struct AccountDirectory {
    store: Arc<dyn Store>,
    dispatcher: Arc<Dispatcher>,
    entries: RwLock<HashMap<i64, Entry>>,
}

impl AccountDirectory {
    pub fn new(store: Arc<dyn Store>, dispatcher: Arc<Dispatcher>) -> Self {
        Self {
            store,
            dispatcher,
            entries: RwLock::new(HashMap::new()),
        }
    }

    /// The transport target of an account, if it is usable.
    pub fn target(&self, id: &imagegate_dispatch::AccountId) -> Option<Arc<AccountTarget>> {
        let id: i64 = id.as_str().parse().ok()?;
        let entries = self.entries.read();
        entries.get(&id).and_then(|entry| entry.target.clone())
    }

    /// Re-reads the accounts and hands the dispatcher the new specs.
    pub async fn refresh(&self) -> Result<usize, StoreError> {
        let accounts = self.store.list_accounts().await?;
        let stale: Vec<&Account> = {
            let entries = self.entries.read();
            accounts
                .iter()
                .filter(|a| entries.get(&a.id.0).is_none_or(|e| e.updated_at != a.updated_at))
                .collect()
        };
        // An operator who switches an account back on (after fixing its credential, say) wants it
        // used again: forget what the pool learned about it while it was failing (error, disabled,
        // cooldowns). So for the failures held against an active account this process sees for the
        // first time (it just started): the operator may have switched it back on while this
        // process was not watching. Only what was learnt before the row changed: a failure learnt
        // since (another replica saw the account fail again after the operator's change, before
        // this one noticed the change) stands.
        let (reactivated, first_seen): (Vec<&Account>, Vec<&Account>) = {
            let entries = self.entries.read();
            let active = stale
                .iter()
                .copied()
                .filter(|a| a.status == AccountStatus::Active);
            let switched_on = active.filter(|a| {
                entries
                    .get(&a.id.0)
                    .is_none_or(|e| e.status != AccountStatus::Active)
            });
            switched_on.partition(|a| entries.contains_key(&a.id.0))
        };
        let mut fresh = Vec::with_capacity(stale.len());
        for account in stale {
            let target = match self.build_target(account).await? {
                Built::Target(target) => target,
                // Written since it was listed: built at the next refresh, from its new row.
                Built::RowChanged => continue,
            };
            fresh.push((
                account.id.0,
                Entry {
                    updated_at: account.updated_at,
                    status: account.status,
                    target,
                },
            ));
        }
        {
            let mut entries = self.entries.write();
            entries.retain(|id, _| accounts.iter().any(|a| a.id.0 == *id));
            entries.extend(fresh);
        }
        let specs: Vec<AccountSpec> = {
            let entries = self.entries.read();
            accounts
                .iter()
                .map(|a| spec_of(a, entries.get(&a.id.0).is_some_and(|e| e.target.is_some())))
                .collect()
        };
        let count = specs.len();
        self.dispatcher.replace_accounts(specs);
        let outdated = [
            self.learnt_before_their_rows(&reactivated, Learnt::FailuresAndCooldowns)
                .await,
            self.learnt_before_their_rows(&first_seen, Learnt::Failures).await,
        ];
        for id in outdated.into_iter().flatten() {
            if let Err(err) = self.dispatcher.clear_health(&dispatch_id(id)).await {
                tracing::warn!(error = %err, "could not reset the health of a reactivated account");
            }
        }
        Ok(count)
    }

    /// Those of `accounts` against which the pool holds what it learnt (`what`) only before their
    /// row last changed.
    async fn learnt_before_their_rows(
        &self,
        accounts: &[&Account],
        what: Learnt,
    ) -> Vec<imagegate_store::AccountId> {
        if accounts.is_empty() {
            return Vec::new();
        }
        let snapshot = match self.dispatcher.snapshot().await {
            Ok(snapshot) => snapshot,
            Err(err) => {
                tracing::warn!(error = %err, "could not read the pool's health of the accounts");
                return Vec::new();
            }
        };
        let rows: HashMap<String, &Account> = accounts.iter().map(|a| (a.id.0.to_string(), *a)).collect();
        snapshot
            .accounts
            .iter()
            .filter(|health| {
                health.status != imagegate_dispatch::AccountStatus::Ok
                    || (what == Learnt::FailuresAndCooldowns && !health.cooldowns.is_empty())
            })
            .filter_map(|health| {
                let row = rows.get(health.id.as_str())?;
                let failed_at = health.last_error.as_ref().map_or(0, |e| e.at.0);
                let changed_at = u64::try_from(row.updated_at.unix_ms()).unwrap_or(0);
                (failed_at < changed_at).then_some(row.id)
            })
            .collect()
    }

    /// The target of `account` as listed, from its credential as stored when that is still the
    /// one of this row (a credential is never sent to the base URL it replaced).
    async fn build_target(&self, account: &Account) -> Result<Built, StoreError> {
        let stored = match self.store.account_credential_as_of(account.id).await {
            Ok(stored) if stored.updated_at != account.updated_at => return Ok(Built::RowChanged),
            Ok(stored) => stored,
            // Removed since it was listed.
            Err(StoreError::NotFound { .. }) => return Ok(Built::RowChanged),
            // One credential sealed under another master key (a replica behind in a key rotation,
            // say) or for another account costs that account, not every account.
            Err(StoreError::Crypto(err)) => {
                tracing::error!(account = %account.name, error = %err,
                    "the master key does not open this account's credential (sealed under another key, or for another account); it is not used");
                return Ok(Built::Target(None));
            }
            Err(err) => return Err(err),
        };
        // The base URL read with the credential (the listed row's may be older by a write made
        // within the same millisecond).
        let Some(base_url) = stored
            .base_url
            .or_else(|| default_base_url(account.kind).map(str::to_owned))
        else {
            tracing::warn!(account = %account.name, "account has no base URL; it is not used");
            return Ok(Built::Target(None));
        };
        let Some(credential) = stored.credential else {
            tracing::warn!(account = %account.name, "account has no credential; it is not used");
            return Ok(Built::Target(None));
        };
        let mut main_models: Vec<String> = account.main_model.iter().cloned().collect();
        main_models.extend(account.fallback_models.iter().cloned());
        Ok(Built::Target(Some(Arc::new(AccountTarget {
            account_id: account.id.0,
            kind: match account.kind {
                AccountKind::Openai => UpstreamKind::OpenAi,
                AccountKind::Codex => UpstreamKind::Codex,
                AccountKind::Sim => UpstreamKind::Sim,
            },
            base_url: base_url.trim_end_matches('/').to_owned(),
            credential: imagegate_upstream::Secret::new(credential.expose().to_owned()),
            main_models,
        }))))
    }
}

/// What [`AccountDirectory::build_target`] made of a listed account.
enum Built {
    /// Its target (none: not usable).
    Target(Option<Arc<AccountTarget>>),
    /// The row was written (or removed) since it was listed.
    RowChanged,
}

/// What a change of an account's row makes the pool forget, when learnt before it.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Learnt {
    /// A refused credential (error) or repeated 403s (disabled).
    Failures,
    /// Those, and cooldowns.
    FailuresAndCooldowns,
}

fn spec_of(account: &Account, usable: bool) -> AccountSpec {
    AccountSpec {
        id: dispatch_id(account.id),
        groups: account
            .groups
            .iter()
            .map(|g| imagegate_dispatch::GroupId::new(&g.to_string()))
            .collect(),
        tier: match account.tier {
            AccountTier::Free => Tier::Free,
            AccountTier::Plus => Tier::Plus,
            AccountTier::Team => Tier::Team,
            AccountTier::Pro => Tier::Pro,
        },
        priority: account.priority,
        limits: ClassLimits {
            large: account.concurrency_large,
            standard: account.concurrency_standard,
        },
        active: usable && account.status == AccountStatus::Active,
    }
}

#[cfg(test)]
#[path = "accounts_tests.rs"]
mod tests;

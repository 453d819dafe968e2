//! Refreshed subscription credentials, saved to the store: the upstream refreshes an account's OAuth
//! access token (rotating its refresh token) and hands the new credential here, which encrypts it
//! into the account's row. The account directory then reads it back like any credential change.

use std::sync::Arc;

use imagegate_store::{AccountId, Secret, Store};
use imagegate_upstream::CredentialStore;

/// Saves refreshed credentials with [`Store::replace_account_credential`] (never over a
/// credential that changed meanwhile) and reads them back with [`Store::account_credential`].
pub struct StoreCredentials {
    store: Arc<dyn Store>,
}

impl StoreCredentials {
    pub fn new(store: Arc<dyn Store>) -> Self {
        Self { store }
    }
}

#[imagegate_upstream::async_trait]
impl CredentialStore for StoreCredentials {
    async fn save(
        &self,
        account_id: i64,
        previous: &imagegate_upstream::Secret,
        credential: imagegate_upstream::Secret,
    ) -> Result<bool, String> {
        let previous = Secret::new(previous.expose());
        let credential = Secret::new(credential.expose());
        self.store
            .replace_account_credential(AccountId(account_id), &previous, &credential)
            .await
            .map_err(|err| err.to_string())
    }

    async fn load(&self, account_id: i64) -> Result<Option<imagegate_upstream::Secret>, String> {
        let stored = self
            .store
            .account_credential(AccountId(account_id))
            .await
            .map_err(|err| err.to_string())?;
        Ok(stored.map(|secret| imagegate_upstream::Secret::new(secret.expose())))
    }
}

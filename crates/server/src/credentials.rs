//! Refreshed subscription credentials, saved to the store: the upstream refreshes an account's OAuth
//! access token (rotating its refresh token) and hands the new credential here, which encrypts it
//! into the account's row. The account directory then reads it back like any credential change.

use std::sync::Arc;

use imagegate_store::{AccountId, Secret, Store};
use imagegate_upstream::CredentialStore;

/// Saves refreshed credentials with [`Store::update_account_credential`].
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
    async fn save(&self, account_id: i64, credential: imagegate_upstream::Secret) -> Result<(), String> {
        let credential = Secret::new(credential.expose());
        self.store
            .update_account_credential(AccountId(account_id), Some(&credential))
            .await
            .map_err(|err| err.to_string())
    }
}

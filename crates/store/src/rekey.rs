//! Master key rotation: every stored credential sealed again under the current master key.

use crate::error::{CryptoError, StoreError, StoreResult};
use crate::model::AccountId;
use crate::store::Store;

/// What [`reseal_credentials`] did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Resealed {
    /// Credentials sealed again under the current master key.
    pub resealed: usize,
    /// Accounts whose credential neither the current nor the previous key opens (left as they are).
    pub unreadable: Vec<AccountId>,
}

/// Seals every account's credential again under the current master key of `store`, opening it
/// with the current or the previous one. Accounts without a credential are skipped; one that no key
/// opens is reported, not fatal. Safe to run again, and while gateways run.
pub async fn reseal_credentials(store: &dyn Store) -> StoreResult<Resealed> {
    let mut done = Resealed::default();
    for account in store.list_accounts().await? {
        if !account.has_credential {
            continue;
        }
        match store.reseal_account_credential(account.id).await {
            Ok(true) => done.resealed += 1,
            // The credential or the account removed meanwhile.
            Ok(false) | Err(StoreError::NotFound { .. }) => {}
            Err(StoreError::Crypto(CryptoError::Decrypt)) => done.unreadable.push(account.id),
            Err(err) => return Err(err),
        }
    }
    Ok(done)
}

//! [`CredentialStore`]: where refreshed subscription credentials are kept beyond this process.

use crate::target::Secret;

/// Keeps the credentials of subscription accounts where every replica sees them: saves an
/// account's credential after its OAuth access token was refreshed (the refresh token may have
/// been rotated, so the old credential stops working), and reads it back before a refresh, since
/// another replica may have refreshed it first.
///
/// The saved credential is the JSON object the codex transport reads:
/// `{"access_token", "refresh_token", "expires_at" (unix seconds), "account_id"}` (the optional
/// keys only when known). It is called once per refresh, while other calls of the same account
/// wait, so it should be quick. A failure is logged (without the credential) and the refreshed
/// credential is still used by this process.
///
/// ```
/// use std::collections::HashMap;
/// use std::sync::{Arc, Mutex};
/// use imagegate_upstream::{CredentialStore, Secret};
///
/// /// Keeps each account's credential in memory.
/// #[derive(Default)]
/// struct Memory(Mutex<HashMap<i64, Secret>>);
///
/// #[imagegate_upstream::async_trait]
/// impl CredentialStore for Memory {
///     async fn save(&self, account_id: i64, previous: &Secret, credential: Secret) -> Result<bool, String> {
///         let mut stored = self.0.lock().map_err(|_| "poisoned".to_owned())?;
///         if stored.get(&account_id) != Some(previous) {
///             return Ok(false);
///         }
///         stored.insert(account_id, credential);
///         Ok(true)
///     }
///
///     async fn load(&self, account_id: i64) -> Result<Option<Secret>, String> {
///         Ok(self.0.lock().map_err(|_| "poisoned".to_owned())?.get(&account_id).cloned())
///     }
/// }
///
/// let store: Arc<dyn CredentialStore> = Arc::new(Memory::default());
/// # let _ = store;
/// ```
#[async_trait::async_trait]
pub trait CredentialStore: Send + Sync {
    /// Replaces the stored credential of `account_id` with `credential`, a refresh of `previous`,
    /// only if the stored one is still `previous`: `Ok(true)` when it did, `Ok(false)` when the
    /// account holds another credential by now (an operator's new one, or another replica's
    /// refresh), which must not be overwritten. The error text must not contain a credential.
    async fn save(&self, account_id: i64, previous: &Secret, credential: Secret) -> Result<bool, String>;

    /// The stored credential of `account_id` now (`None` when it has none). The error text must
    /// not contain a credential.
    async fn load(&self, account_id: i64) -> Result<Option<Secret>, String>;
}

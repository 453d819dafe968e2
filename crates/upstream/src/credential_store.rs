//! [`CredentialStore`]: where refreshed subscription credentials are kept beyond this process.

use crate::target::Secret;

/// Saves the credential of an account after its OAuth access token was refreshed (the refresh
/// token may have been rotated, so the old credential stops working).
///
/// The saved credential is the JSON object the codex transport reads:
/// `{"access_token", "refresh_token", "expires_at" (unix seconds), "account_id"}` (the optional
/// keys only when known). It is called once per refresh, while other calls of the same account
/// wait, so it should be quick. A failure is logged (without the credential) and the refreshed
/// credential is still used by this process.
///
/// ```
/// use std::sync::{Arc, Mutex};
/// use imagegate_upstream::{CredentialStore, Secret};
///
/// /// Keeps the last saved credential per account in memory.
/// #[derive(Default)]
/// struct Memory(Mutex<Vec<(i64, Secret)>>);
///
/// #[imagegate_upstream::async_trait]
/// impl CredentialStore for Memory {
///     async fn save(&self, account_id: i64, credential: Secret) -> Result<(), String> {
///         self.0.lock().map_err(|_| "poisoned".to_owned())?.push((account_id, credential));
///         Ok(())
///     }
/// }
///
/// let store: Arc<dyn CredentialStore> = Arc::new(Memory::default());
/// # let _ = store;
/// ```
#[async_trait::async_trait]
pub trait CredentialStore: Send + Sync {
    /// Replaces the stored credential of `account_id` with `credential`. The error text must not
    /// contain the credential.
    async fn save(&self, account_id: i64, credential: Secret) -> Result<(), String>;
}

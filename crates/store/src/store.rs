//! The [`Store`] trait: everything the gateway persists, independent of the database.

use std::collections::BTreeMap;

use async_trait::async_trait;

use crate::error::StoreResult;
use crate::model::{
    Account, AccountId, AccountStatus, AccountUpdate, ApiKeyRecord, AuthContext, Backend, DailyUsage, Group,
    GroupId, KeyCheck, KeyId, KeyStatus, KeyUpdate, KeyUse, NewAccount, NewApiKey, NewKey, NewUser,
    StoredCredential, UsageEntry, UsageFilter, UsageRecord, User, UserId,
};
use crate::priority::WriterPriority;
use crate::secret::Secret;

/// Persistence of users, groups, API keys, upstream accounts and usage.
///
/// Obtained from [`connect`](crate::connect) as `Arc<dyn Store>`. Every method is one short
/// transaction; errors are [`StoreError`](crate::StoreError)s, never raw SQL.
#[async_trait]
pub trait Store: Send + Sync + std::fmt::Debug {
    /// Which database this is.
    fn backend(&self) -> Backend;

    /// Checks that the database answers (for readiness probes).
    async fn ping(&self) -> StoreResult<()>;

    /// Closes the connection pool; later calls fail.
    async fn close(&self);

    // ---- users ----

    /// Creates a user; [`Conflict`](crate::StoreError::Conflict) if the name is taken.
    async fn create_user(&self, user: NewUser) -> StoreResult<User>;
    /// A user by id.
    async fn user(&self, id: UserId) -> StoreResult<User>;
    /// A user by name.
    async fn user_by_name(&self, name: &str) -> StoreResult<Option<User>>;
    /// All users, by id.
    async fn list_users(&self) -> StoreResult<Vec<User>>;
    /// Sets or clears the argon2 password hash.
    async fn set_user_password_hash(&self, id: UserId, password_hash: Option<&str>) -> StoreResult<()>;
    /// Grants or revokes admin rights.
    async fn set_user_admin(&self, id: UserId, is_admin: bool) -> StoreResult<()>;

    // ---- groups ----

    /// Creates a group; [`Conflict`](crate::StoreError::Conflict) if the name is taken.
    async fn create_group(&self, name: &str) -> StoreResult<Group>;
    /// A group by id.
    async fn group(&self, id: GroupId) -> StoreResult<Group>;
    /// A group by name.
    async fn group_by_name(&self, name: &str) -> StoreResult<Option<Group>>;
    /// All groups, by id.
    async fn list_groups(&self) -> StoreResult<Vec<Group>>;
    /// The group named [`DEFAULT_GROUP`](crate::DEFAULT_GROUP), created by the migrations.
    async fn default_group(&self) -> StoreResult<Group> {
        self.group_by_name(crate::DEFAULT_GROUP)
            .await?
            .ok_or_else(|| crate::StoreError::not_found("group", crate::DEFAULT_GROUP))
    }
    /// Opens a group to every user, or restricts it to its members and admins. Keys of users who
    /// lose the right stop authenticating (within a [`KeyCache`](crate::KeyCache)'s ttl on other
    /// replicas).
    async fn set_group_restricted(&self, id: GroupId, restricted: bool) -> StoreResult<Group>;
    /// The members of a group, by user id (they matter while it is restricted).
    async fn group_members(&self, id: GroupId) -> StoreResult<Vec<UserId>>;
    /// The members of every group, in one query (for pages that list every group): each group
    /// with members, by id, with its members by user id.
    async fn group_memberships(&self) -> StoreResult<BTreeMap<GroupId, Vec<UserId>>>;
    /// Replaces the members of a group, in one transaction.
    async fn set_group_members(&self, id: GroupId, members: &[UserId]) -> StoreResult<()>;
    /// Whether `user` may hold and use keys in `group`: it is open, or the user is an admin or a
    /// member. `false` for a user or group that does not exist.
    async fn may_use_group(&self, user: UserId, group: GroupId) -> StoreResult<bool>;
    /// The groups `user` may use, by id.
    async fn groups_for(&self, user: UserId) -> StoreResult<Vec<Group>>;

    // ---- API keys ----

    /// Creates a key. The full key text is in the result and nowhere else: only a SHA-256 of
    /// its secret is stored. [`Forbidden`](crate::StoreError::Forbidden) if its user may not use
    /// its group ([`Store::may_use_group`]).
    async fn create_key(&self, key: NewApiKey) -> StoreResult<NewKey>;
    /// A key by id (deleted keys included).
    async fn key(&self, id: KeyId) -> StoreResult<ApiKeyRecord>;
    /// A key by its public id (the part after `sk-ig-`; deleted keys included).
    async fn key_by_public_id(&self, public_id: &str) -> StoreResult<Option<ApiKeyRecord>>;
    /// Keys that are not deleted, of one user or of everyone, by id.
    async fn list_keys(&self, user: Option<UserId>) -> StoreResult<Vec<ApiKeyRecord>>;
    /// Changes a key's name, group, limits or fallback setting.
    async fn update_key(&self, id: KeyId, update: KeyUpdate) -> StoreResult<ApiKeyRecord>;
    /// Sets a key's status. A deleted key stays deleted, and a suspended one only becomes
    /// deleted ([`Conflict`](crate::StoreError::Conflict) otherwise).
    async fn set_key_status(&self, id: KeyId, status: KeyStatus) -> StoreResult<ApiKeyRecord>;
    /// Disables a key, as its owner (remember to
    /// [`KeyCache::invalidate`](crate::KeyCache::invalidate)). Not a suspended key.
    async fn disable_key(&self, id: KeyId) -> StoreResult<ApiKeyRecord> {
        self.set_key_status(id, KeyStatus::Disabled).await
    }
    /// Enables a disabled key, as its owner. Not a suspended key.
    async fn enable_key(&self, id: KeyId) -> StoreResult<ApiKeyRecord> {
        self.set_key_status(id, KeyStatus::Active).await
    }
    /// Switches a key off as an administrator: its owner cannot enable it again.
    async fn suspend_key(&self, id: KeyId) -> StoreResult<ApiKeyRecord> {
        self.set_key_status(id, KeyStatus::Suspended).await
    }
    /// Makes a disabled or suspended key active again, as an administrator.
    async fn reinstate_key(&self, id: KeyId) -> StoreResult<ApiKeyRecord>;
    /// Soft-deletes a key: it stays for usage history and never authenticates again.
    async fn delete_key(&self, id: KeyId) -> StoreResult<ApiKeyRecord> {
        self.set_key_status(id, KeyStatus::Deleted).await
    }
    /// Checks a presented key (`sk-ig-<public id>-<secret>`): valid, not a key of the service
    /// (malformed, unknown or a wrong secret, alike), or a genuine key that may not be used, and
    /// why.
    async fn check_key(&self, presented: &str) -> StoreResult<KeyCheck>;
    /// The identity of a valid presented key ([`Store::check_key`]); `Ok(None)` for every key that
    /// is not valid, whatever the reason.
    async fn authenticate(&self, presented: &str) -> StoreResult<Option<AuthContext>> {
        Ok(self.check_key(presented).await?.valid())
    }
    /// Moves `last_used_at` forward for each use (never backwards).
    async fn touch_keys(&self, uses: &[KeyUse]) -> StoreResult<()>;

    // ---- upstream accounts ----

    /// Creates an account, encrypting its credential.
    async fn create_account(&self, account: NewAccount) -> StoreResult<Account>;
    /// An account by id.
    async fn account(&self, id: AccountId) -> StoreResult<Account>;
    /// An account by name.
    async fn account_by_name(&self, name: &str) -> StoreResult<Option<Account>>;
    /// All accounts, by id.
    async fn list_accounts(&self) -> StoreResult<Vec<Account>>;
    /// Changes an account's settings (and its credential, if the update has one) in one
    /// transaction.
    async fn update_account(&self, id: AccountId, update: AccountUpdate) -> StoreResult<Account>;
    /// Sets the pool status and its reason (e.g. after a revoked credential).
    async fn set_account_status(
        &self,
        id: AccountId,
        status: AccountStatus,
        reason: Option<&str>,
    ) -> StoreResult<()>;
    /// Marks the account failed (status error, with `reason`) after the upstream refused a
    /// credential: with `refused`, only if that is still the account's credential (`false` when
    /// it was replaced meanwhile, the failure then being no verdict on the new one); without, in
    /// any case. `false` also when the account is gone.
    async fn mark_account_failed(
        &self,
        id: AccountId,
        reason: &str,
        refused: Option<&Secret>,
    ) -> StoreResult<bool>;
    /// Deletes an account (its usage records keep the id).
    async fn delete_account(&self, id: AccountId) -> StoreResult<()>;
    /// The decrypted credential, `None` if the account has none.
    /// [`Crypto`](crate::StoreError::Crypto) error if the master key is not the one it was
    /// stored with.
    async fn account_credential(&self, id: AccountId) -> StoreResult<Option<Secret>>;
    /// [`account_credential`](Store::account_credential) with the base URL it is sent to and the
    /// row's `updated_at`, read in one statement: the credential is never paired with a base URL it
    /// did not go with, and a caller holding an earlier read of the row (from
    /// [`list_accounts`](Store::list_accounts)) sees whether the row changed since.
    async fn account_credential_as_of(&self, id: AccountId) -> StoreResult<StoredCredential>;
    /// Replaces (or with `None` removes) the credential (an operator's new one).
    async fn update_account_credential(&self, id: AccountId, credential: Option<&Secret>) -> StoreResult<()>;
    /// Replaces the credential with `credential` only if it is still `previous` (an OAuth refresh
    /// of `previous`), checked and written with no write between: `true` when it did, `false` when
    /// the account has another one by now (an operator's, or another replica's refresh), which is
    /// then left as it is.
    async fn replace_account_credential(
        &self,
        id: AccountId,
        previous: &Secret,
        credential: &Secret,
    ) -> StoreResult<bool>;
    /// Seals the credential again under the current master key (see
    /// [`reseal_credentials`](crate::reseal_credentials)): `true` when it did, `false` when the
    /// account has no credential. The value is read and written back with no write between (an
    /// OAuth refresh is never overwritten by the older value), and a reseal changes only the bytes:
    /// [`replace_account_credential`](Store::replace_account_credential) and
    /// [`mark_account_failed`](Store::mark_account_failed) compare secrets, not bytes.
    async fn reseal_account_credential(&self, id: AccountId) -> StoreResult<bool>;

    // ---- usage ----

    /// Inserts records in one transaction; records whose `request_id` is already stored are
    /// skipped. Returns how many rows were inserted.
    async fn insert_usage_batch(&self, records: &[UsageRecord]) -> StoreResult<u64>;
    /// How the next [`Store::insert_usage_batch`] and [`Store::touch_keys`] compete for this
    /// process's CPU. A hint, ignored by default (see [`WriterPriority`]).
    fn set_usage_priority(&self, priority: WriterPriority) {
        let _ = priority;
    }
    /// Records matching `filter`, newest first.
    async fn list_usage(&self, filter: &UsageFilter) -> StoreResult<Vec<UsageEntry>>;
    /// Totals per UTC day of the records matching `filter` (`offset` ignored, `limit` counts
    /// days), newest day first.
    async fn daily_usage(&self, filter: &UsageFilter) -> StoreResult<Vec<DailyUsage>>;
}

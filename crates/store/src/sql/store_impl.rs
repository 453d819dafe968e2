//! The [`Store`] implementation over the functions of the sibling modules. Compiled once per
//! backend: `super::BackendStore` is the backend's struct with `pool`, `usage` and `crypto` fields.

use std::collections::BTreeMap;

use async_trait::async_trait;

use super::{BACKEND, BackendStore, accounts, keys, usage, users};
use crate::error::StoreResult;
use crate::model::{
    Account, AccountId, AccountStatus, AccountUpdate, ApiKeyRecord, Backend, DailyUsage, Group, GroupId,
    KeyCheck, KeyId, KeyStatus, KeyUpdate, KeyUse, NewAccount, NewApiKey, NewKey, NewUser, StoredCredential,
    UsageEntry, UsageFilter, UsageRecord, User, UserId,
};
use crate::priority::WriterPriority;
use crate::secret::Secret;
use crate::store::Store;

#[async_trait]
impl Store for BackendStore {
    fn backend(&self) -> Backend {
        BACKEND
    }

    async fn ping(&self) -> StoreResult<()> {
        sqlx::query("SELECT 1").execute(&self.pool).await?;
        Ok(())
    }

    async fn close(&self) {
        self.usage.close().await;
        self.pool.close().await;
    }

    async fn create_user(&self, user: NewUser) -> StoreResult<User> {
        users::create_user(&self.pool, user).await
    }

    async fn user(&self, id: UserId) -> StoreResult<User> {
        users::user(&self.pool, id).await
    }

    async fn user_by_name(&self, name: &str) -> StoreResult<Option<User>> {
        users::user_by_name(&self.pool, name).await
    }

    async fn list_users(&self) -> StoreResult<Vec<User>> {
        users::list_users(&self.pool).await
    }

    async fn set_user_password_hash(&self, id: UserId, password_hash: Option<&str>) -> StoreResult<()> {
        users::set_user_password_hash(&self.pool, id, password_hash).await
    }

    async fn set_user_admin(&self, id: UserId, is_admin: bool) -> StoreResult<()> {
        users::set_user_admin(&self.pool, id, is_admin).await
    }

    async fn create_group(&self, name: &str) -> StoreResult<Group> {
        users::create_group(&self.pool, name).await
    }

    async fn group(&self, id: GroupId) -> StoreResult<Group> {
        users::group(&self.pool, id).await
    }

    async fn group_by_name(&self, name: &str) -> StoreResult<Option<Group>> {
        users::group_by_name(&self.pool, name).await
    }

    async fn list_groups(&self) -> StoreResult<Vec<Group>> {
        users::list_groups(&self.pool).await
    }

    async fn set_group_restricted(&self, id: GroupId, restricted: bool) -> StoreResult<Group> {
        users::set_group_restricted(&self.pool, id, restricted).await
    }

    async fn group_members(&self, id: GroupId) -> StoreResult<Vec<UserId>> {
        users::group_members(&self.pool, id).await
    }

    async fn group_memberships(&self) -> StoreResult<BTreeMap<GroupId, Vec<UserId>>> {
        users::group_memberships(&self.pool).await
    }

    async fn set_group_members(&self, id: GroupId, members: &[UserId]) -> StoreResult<()> {
        users::set_group_members(&self.pool, id, members).await
    }

    async fn may_use_group(&self, user: UserId, group: GroupId) -> StoreResult<bool> {
        users::may_use_group(&self.pool, user, group).await
    }

    async fn groups_for(&self, user: UserId) -> StoreResult<Vec<Group>> {
        users::groups_for(&self.pool, user).await
    }

    async fn create_key(&self, key: NewApiKey) -> StoreResult<NewKey> {
        keys::create_key(&self.pool, key).await
    }

    async fn key(&self, id: KeyId) -> StoreResult<ApiKeyRecord> {
        keys::key(&self.pool, id).await
    }

    async fn key_by_public_id(&self, public_id: &str) -> StoreResult<Option<ApiKeyRecord>> {
        keys::key_by_public_id(&self.pool, public_id).await
    }

    async fn list_keys(&self, user: Option<UserId>) -> StoreResult<Vec<ApiKeyRecord>> {
        keys::list_keys(&self.pool, user).await
    }

    async fn update_key(&self, id: KeyId, update: KeyUpdate) -> StoreResult<ApiKeyRecord> {
        keys::update_key(&self.pool, id, update).await
    }

    async fn set_key_status(&self, id: KeyId, status: KeyStatus) -> StoreResult<ApiKeyRecord> {
        keys::set_key_status(&self.pool, id, status).await
    }

    async fn reinstate_key(&self, id: KeyId) -> StoreResult<ApiKeyRecord> {
        keys::reinstate_key(&self.pool, id).await
    }

    async fn check_key(&self, presented: &str) -> StoreResult<KeyCheck> {
        keys::check_key(&self.pool, presented).await
    }

    async fn touch_keys(&self, uses: &[KeyUse]) -> StoreResult<()> {
        keys::touch_keys(self.usage.pool(&self.pool), uses).await
    }

    async fn create_account(&self, account: NewAccount) -> StoreResult<Account> {
        accounts::create_account(&self.pool, &self.crypto, account).await
    }

    async fn account(&self, id: AccountId) -> StoreResult<Account> {
        accounts::account(&self.pool, id).await
    }

    async fn account_by_name(&self, name: &str) -> StoreResult<Option<Account>> {
        accounts::account_by_name(&self.pool, name).await
    }

    async fn list_accounts(&self) -> StoreResult<Vec<Account>> {
        accounts::list_accounts(&self.pool).await
    }

    async fn update_account(&self, id: AccountId, update: AccountUpdate) -> StoreResult<Account> {
        accounts::update_account(&self.pool, &self.crypto, id, update).await
    }

    async fn set_account_status(
        &self,
        id: AccountId,
        status: AccountStatus,
        reason: Option<&str>,
    ) -> StoreResult<()> {
        accounts::set_account_status(&self.pool, id, status, reason).await
    }

    async fn mark_account_failed(
        &self,
        id: AccountId,
        reason: &str,
        refused: Option<&Secret>,
    ) -> StoreResult<bool> {
        accounts::mark_account_failed(&self.pool, &self.crypto, id, reason, refused).await
    }

    async fn delete_account(&self, id: AccountId) -> StoreResult<()> {
        accounts::delete_account(&self.pool, id).await
    }

    async fn account_credential(&self, id: AccountId) -> StoreResult<Option<Secret>> {
        accounts::account_credential(&self.pool, &self.crypto, id).await
    }

    async fn account_credential_as_of(&self, id: AccountId) -> StoreResult<StoredCredential> {
        accounts::account_credential_as_of(&self.pool, &self.crypto, id).await
    }

    async fn update_account_credential(&self, id: AccountId, credential: Option<&Secret>) -> StoreResult<()> {
        accounts::update_account_credential(&self.pool, &self.crypto, id, credential).await
    }

    async fn replace_account_credential(
        &self,
        id: AccountId,
        previous: &Secret,
        credential: &Secret,
    ) -> StoreResult<bool> {
        accounts::replace_account_credential(&self.pool, &self.crypto, id, previous, credential).await
    }

    async fn reseal_account_credential(&self, id: AccountId) -> StoreResult<bool> {
        accounts::reseal_account_credential(&self.pool, &self.crypto, id).await
    }

    async fn insert_usage_batch(&self, records: &[UsageRecord]) -> StoreResult<u64> {
        usage::insert_usage_batch(self.usage.pool(&self.pool), records).await
    }

    fn set_usage_priority(&self, priority: WriterPriority) {
        self.usage.set(priority);
    }

    async fn list_usage(&self, filter: &UsageFilter) -> StoreResult<Vec<UsageEntry>> {
        usage::list_usage(&self.pool, filter).await
    }

    async fn daily_usage(&self, filter: &UsageFilter) -> StoreResult<Vec<DailyUsage>> {
        usage::daily_usage(&self.pool, filter).await
    }
}

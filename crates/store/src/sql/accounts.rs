//! Upstream accounts and their encrypted credentials. Compiled once per backend.

use sqlx::{Pool, Transaction};

use super::Db;
use crate::crypto::{Crypto, SealContext};
use crate::error::{StoreError, StoreResult};
use crate::model::{
    Account, AccountId, AccountStatus, AccountUpdate, GroupId, NewAccount, StoredCredential, Timestamp,
    check_name, could_be_a_name,
};
use crate::rows::{ACCOUNT_COLUMNS, AccountRow, accounts_with_groups, models_json};
use crate::secret::Secret;

async fn insert_groups(tx: &mut Transaction<'_, Db>, id: AccountId, groups: &[GroupId]) -> StoreResult<()> {
    let mut unique = groups.to_vec();
    unique.sort_unstable();
    unique.dedup();
    for group in unique {
        sqlx::query("INSERT INTO account_groups (account_id, group_id) VALUES ($1, $2)")
            .bind(id.0)
            .bind(group.0)
            .execute(&mut **tx)
            .await
            .map_err(|e| StoreError::from_write("account group", e))?;
    }
    Ok(())
}

pub(super) async fn create_account(
    pool: &Pool<Db>,
    crypto: &Crypto,
    new: NewAccount,
) -> StoreResult<Account> {
    check_name("account", &new.name)?;
    let now = Timestamp::now().unix_ms();
    let mut tx = pool.begin_with(super::BEGIN_WRITE).await?;
    let id: i64 = sqlx::query_scalar(
        "INSERT INTO accounts (name, kind, base_url, tier, priority, concurrency_standard, \
         concurrency_large, status, main_model, fallback_models, created_at, updated_at) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $11) RETURNING id",
    )
    .bind(&new.name)
    .bind(new.kind.as_str())
    .bind(new.base_url.as_deref())
    .bind(new.tier.as_str())
    .bind(i64::from(new.priority))
    .bind(i64::from(new.concurrency_standard))
    .bind(i64::from(new.concurrency_large))
    .bind(AccountStatus::Active.as_str())
    .bind(new.main_model.as_deref())
    .bind(models_json(&new.fallback_models))
    .bind(now)
    .fetch_one(&mut *tx)
    .await
    .map_err(|e| StoreError::from_write("account", e))?;
    let id = AccountId(id);
    // Sealed for the id the row was given, in the same transaction.
    if let Some(credential) = &new.credential {
        let sealed = crypto.seal(credential, &SealContext::account_credential(id))?;
        sqlx::query("UPDATE accounts SET credential = $2 WHERE id = $1")
            .bind(id.0)
            .bind(sealed)
            .execute(&mut *tx)
            .await
            .map_err(|e| StoreError::from_write("account", e))?;
    }
    insert_groups(&mut tx, id, &new.groups).await?;
    tx.commit().await?;
    account(pool, id).await
}

async fn groups_of(pool: &Pool<Db>, id: AccountId) -> StoreResult<Vec<GroupId>> {
    let ids: Vec<i64> =
        sqlx::query_scalar("SELECT group_id FROM account_groups WHERE account_id = $1 ORDER BY group_id")
            .bind(id.0)
            .fetch_all(pool)
            .await?;
    Ok(ids.into_iter().map(GroupId).collect())
}

pub(super) async fn account(pool: &Pool<Db>, id: AccountId) -> StoreResult<Account> {
    let sql = format!("SELECT {ACCOUNT_COLUMNS} FROM accounts WHERE id = $1");
    let row: Option<AccountRow> = sqlx::query_as(&sql).bind(id.0).fetch_optional(pool).await?;
    let row = row.ok_or_else(|| StoreError::not_found("account", id))?;
    row.into_account(groups_of(pool, id).await?)
}

pub(super) async fn account_by_name(pool: &Pool<Db>, name: &str) -> StoreResult<Option<Account>> {
    if !could_be_a_name(name) {
        return Ok(None);
    }
    let sql = format!("SELECT {ACCOUNT_COLUMNS} FROM accounts WHERE name = $1");
    let row: Option<AccountRow> = sqlx::query_as(&sql).bind(name).fetch_optional(pool).await?;
    match row {
        Some(row) => {
            let groups = groups_of(pool, AccountId(row.id)).await?;
            Ok(Some(row.into_account(groups)?))
        }
        None => Ok(None),
    }
}

pub(super) async fn list_accounts(pool: &Pool<Db>) -> StoreResult<Vec<Account>> {
    // One snapshot for both tables: a row is never paired with the groups of another version of it.
    let mut tx = pool.begin_with(super::BEGIN_SNAPSHOT).await?;
    let sql = format!("SELECT {ACCOUNT_COLUMNS} FROM accounts ORDER BY id");
    let rows: Vec<AccountRow> = sqlx::query_as(&sql).fetch_all(&mut *tx).await?;
    let pairs: Vec<(i64, i64)> =
        sqlx::query_as("SELECT account_id, group_id FROM account_groups ORDER BY account_id, group_id")
            .fetch_all(&mut *tx)
            .await?;
    tx.commit().await?;
    accounts_with_groups(rows, &pairs)
}

pub(super) async fn update_account(
    pool: &Pool<Db>,
    crypto: &Crypto,
    id: AccountId,
    update: AccountUpdate,
) -> StoreResult<Account> {
    if let Some(name) = &update.name {
        check_name("account", name)?;
    }
    let context = SealContext::account_credential(id);
    let sealed = match &update.credential {
        Some(Some(credential)) => Some(Some(crypto.seal(credential, &context)?)),
        Some(None) => Some(None),
        None => None,
    };
    let mut tx = pool.begin_with(super::BEGIN_WRITE).await?;
    let done = sqlx::query(
        "UPDATE accounts SET name = COALESCE($2, name), \
         base_url = CASE WHEN $3 THEN $4 ELSE base_url END, \
         tier = COALESCE($5, tier), priority = COALESCE($6, priority), \
         concurrency_standard = COALESCE($7, concurrency_standard), \
         concurrency_large = COALESCE($8, concurrency_large), \
         status = COALESCE($9, status), \
         status_reason = CASE WHEN $10 THEN $11 ELSE status_reason END, \
         main_model = CASE WHEN $12 THEN $13 ELSE main_model END, \
         fallback_models = COALESCE($14, fallback_models), updated_at = $15, \
         credential = CASE WHEN $16 THEN $17 ELSE credential END WHERE id = $1",
    )
    .bind(id.0)
    .bind(update.name.as_deref())
    .bind(update.base_url.is_some())
    .bind(update.base_url.clone().flatten())
    .bind(update.tier.map(|t| t.as_str()))
    .bind(update.priority.map(i64::from))
    .bind(update.concurrency_standard.map(i64::from))
    .bind(update.concurrency_large.map(i64::from))
    .bind(update.status.as_ref().map(|(s, _)| s.as_str()))
    .bind(update.status.is_some())
    .bind(update.status.as_ref().and_then(|(_, reason)| reason.clone()))
    .bind(update.main_model.is_some())
    .bind(update.main_model.clone().flatten())
    .bind(update.fallback_models.as_deref().map(models_json))
    .bind(Timestamp::now().unix_ms())
    .bind(sealed.is_some())
    .bind(sealed.flatten())
    .execute(&mut *tx)
    .await
    .map_err(|e| StoreError::from_write("account", e))?;
    if done.rows_affected() == 0 {
        return Err(StoreError::not_found("account", id));
    }
    if let Some(groups) = &update.groups {
        sqlx::query("DELETE FROM account_groups WHERE account_id = $1")
            .bind(id.0)
            .execute(&mut *tx)
            .await?;
        insert_groups(&mut tx, id, groups).await?;
    }
    tx.commit().await?;
    account(pool, id).await
}

pub(super) async fn set_account_status(
    pool: &Pool<Db>,
    id: AccountId,
    status: AccountStatus,
    reason: Option<&str>,
) -> StoreResult<()> {
    let done =
        sqlx::query("UPDATE accounts SET status = $2, status_reason = $3, updated_at = $4 WHERE id = $1")
            .bind(id.0)
            .bind(status.as_str())
            .bind(reason)
            .bind(Timestamp::now().unix_ms())
            .execute(pool)
            .await?;
    if done.rows_affected() == 0 {
        return Err(StoreError::not_found("account", id));
    }
    Ok(())
}

pub(super) async fn mark_account_failed(
    pool: &Pool<Db>,
    crypto: &Crypto,
    id: AccountId,
    reason: &str,
    refused: Option<&Secret>,
) -> StoreResult<bool> {
    let mut tx = pool.begin_with(super::BEGIN_WRITE).await?;
    // With `refused`: only while the credential opens to it (one replaced meanwhile does not, one
    // resealed under a new master key still does).
    if let Some(refused) = refused {
        let sealed = match locked_credential(&mut tx, id).await {
            Ok(Some(sealed)) => sealed,
            // No credential, or no account any more: nothing of the refused one to mark.
            Ok(None) | Err(StoreError::NotFound { .. }) => return Ok(false),
            Err(err) => return Err(err),
        };
        if crypto.open(&sealed, &SealContext::account_credential(id))? != *refused {
            return Ok(false);
        }
    }
    let done =
        sqlx::query("UPDATE accounts SET status = $2, status_reason = $3, updated_at = $4 WHERE id = $1")
            .bind(id.0)
            .bind(AccountStatus::Error.as_str())
            .bind(reason)
            .bind(Timestamp::now().unix_ms())
            .execute(&mut *tx)
            .await?;
    tx.commit().await?;
    Ok(done.rows_affected() == 1)
}

pub(super) async fn delete_account(pool: &Pool<Db>, id: AccountId) -> StoreResult<()> {
    let done = sqlx::query("DELETE FROM accounts WHERE id = $1")
        .bind(id.0)
        .execute(pool)
        .await?;
    if done.rows_affected() == 0 {
        return Err(StoreError::not_found("account", id));
    }
    Ok(())
}

/// The account's sealed credential as stored (`None`: it has none); `NotFound` without the account.
async fn sealed_credential(pool: &Pool<Db>, id: AccountId) -> StoreResult<Option<Vec<u8>>> {
    let row: Option<(Option<Vec<u8>>,)> = sqlx::query_as("SELECT credential FROM accounts WHERE id = $1")
        .bind(id.0)
        .fetch_optional(pool)
        .await?;
    let (sealed,) = row.ok_or_else(|| StoreError::not_found("account", id))?;
    Ok(sealed)
}

/// The account's sealed credential (`None`: it has none; `NotFound` without the account), read
/// with its row locked until `tx` ends, so what is written next in `tx` is decided on the value it
/// replaces. A write that changes nothing takes the lock the same way on both backends.
async fn locked_credential(tx: &mut Transaction<'_, Db>, id: AccountId) -> StoreResult<Option<Vec<u8>>> {
    let row: Option<(Option<Vec<u8>>,)> =
        sqlx::query_as("UPDATE accounts SET updated_at = updated_at WHERE id = $1 RETURNING credential")
            .bind(id.0)
            .fetch_optional(&mut **tx)
            .await?;
    let (sealed,) = row.ok_or_else(|| StoreError::not_found("account", id))?;
    Ok(sealed)
}

/// Stores `sealed` as the credential, in `tx`.
async fn write_sealed_credential(
    tx: &mut Transaction<'_, Db>,
    id: AccountId,
    sealed: Vec<u8>,
) -> StoreResult<()> {
    sqlx::query("UPDATE accounts SET credential = $2, updated_at = $3 WHERE id = $1")
        .bind(id.0)
        .bind(sealed)
        .bind(Timestamp::now().unix_ms())
        .execute(&mut **tx)
        .await?;
    Ok(())
}

pub(super) async fn account_credential(
    pool: &Pool<Db>,
    crypto: &Crypto,
    id: AccountId,
) -> StoreResult<Option<Secret>> {
    let context = SealContext::account_credential(id);
    Ok(sealed_credential(pool, id)
        .await?
        .map(|bytes| crypto.open(&bytes, &context))
        .transpose()?)
}

pub(super) async fn account_credential_as_of(
    pool: &Pool<Db>,
    crypto: &Crypto,
    id: AccountId,
) -> StoreResult<StoredCredential> {
    let row: Option<(Option<Vec<u8>>, Option<String>, i64)> =
        sqlx::query_as("SELECT credential, base_url, updated_at FROM accounts WHERE id = $1")
            .bind(id.0)
            .fetch_optional(pool)
            .await?;
    let (sealed, base_url, updated_at) = row.ok_or_else(|| StoreError::not_found("account", id))?;
    let context = SealContext::account_credential(id);
    Ok(StoredCredential {
        credential: sealed.map(|bytes| crypto.open(&bytes, &context)).transpose()?,
        base_url,
        updated_at: Timestamp::from_unix_ms(updated_at),
    })
}

pub(super) async fn reseal_account_credential(
    pool: &Pool<Db>,
    crypto: &Crypto,
    id: AccountId,
) -> StoreResult<bool> {
    let mut tx = pool.begin_with(super::BEGIN_WRITE).await?;
    let Some(sealed) = locked_credential(&mut tx, id).await? else {
        return Ok(false);
    };
    // Also seals again for its account a value sealed before values were bound to one. The row
    // stays locked from the read to the write, so a refresh committed meanwhile is what is
    // resealed, and one after it waits and then finds its value still there.
    let context = SealContext::account_credential(id);
    let resealed = crypto.seal(&crypto.open(&sealed, &context)?, &context)?;
    write_sealed_credential(&mut tx, id, resealed).await?;
    tx.commit().await?;
    Ok(true)
}

pub(super) async fn replace_account_credential(
    pool: &Pool<Db>,
    crypto: &Crypto,
    id: AccountId,
    previous: &Secret,
    credential: &Secret,
) -> StoreResult<bool> {
    let mut tx = pool.begin_with(super::BEGIN_WRITE).await?;
    let Some(sealed) = locked_credential(&mut tx, id).await? else {
        return Ok(false);
    };
    // Compared as secrets, not bytes: a reseal under a new master key changes only the bytes.
    let context = SealContext::account_credential(id);
    if crypto.open(&sealed, &context)? != *previous {
        return Ok(false);
    }
    write_sealed_credential(&mut tx, id, crypto.seal(credential, &context)?).await?;
    tx.commit().await?;
    Ok(true)
}

pub(super) async fn update_account_credential(
    pool: &Pool<Db>,
    crypto: &Crypto,
    id: AccountId,
    credential: Option<&Secret>,
) -> StoreResult<()> {
    let context = SealContext::account_credential(id);
    let sealed = credential.map(|c| crypto.seal(c, &context)).transpose()?;
    let done = sqlx::query("UPDATE accounts SET credential = $2, updated_at = $3 WHERE id = $1")
        .bind(id.0)
        .bind(sealed)
        .bind(Timestamp::now().unix_ms())
        .execute(pool)
        .await?;
    if done.rows_affected() == 0 {
        return Err(StoreError::not_found("account", id));
    }
    Ok(())
}

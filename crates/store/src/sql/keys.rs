//! API keys: creation, status, authentication. Compiled once per backend.

use sqlx::{FromRow, Pool, Row};

use super::{Db, users};
use crate::error::{StoreError, StoreResult};
use crate::keys::{generate_key, parse_key, verify_secret};
use crate::model::{
    ApiKeyRecord, KeyCheck, KeyId, KeyLimits, KeyRefusal, KeyStatus, KeyUpdate, KeyUse, NewApiKey, NewKey,
    Timestamp, UserId, check_name,
};
use crate::rows::{KEY_COLUMNS, KeyRow};

fn check_limits(limits: &KeyLimits) -> StoreResult<()> {
    if limits.max_concurrency == Some(0) || limits.rpm == Some(0) {
        return Err(StoreError::Invalid(
            "a key limit of 0 would block the key; disable the key instead".to_owned(),
        ));
    }
    Ok(())
}

pub(super) async fn create_key(pool: &Pool<Db>, new: NewApiKey) -> StoreResult<NewKey> {
    check_name("key", &new.name)?;
    check_limits(&new.limits)?;
    users::check_group_use(pool, new.user_id, new.group_id).await?;
    let generated = generate_key()?;
    let sql = format!(
        "INSERT INTO api_keys (public_id, secret_sha256, user_id, group_id, name, status, \
         max_concurrency, rpm, fallback_ladder, created_at) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10) RETURNING {KEY_COLUMNS}"
    );
    let row: KeyRow = sqlx::query_as(&sql)
        .bind(&generated.public_id)
        .bind(&generated.secret_sha256)
        .bind(new.user_id.0)
        .bind(new.group_id.0)
        .bind(&new.name)
        .bind(KeyStatus::Active.as_str())
        .bind(new.limits.max_concurrency.map(i64::from))
        .bind(new.limits.rpm.map(i64::from))
        .bind(new.fallback_ladder)
        .bind(Timestamp::now().unix_ms())
        .fetch_one(pool)
        .await
        .map_err(|e| StoreError::from_write("api key", e))?;
    Ok(NewKey {
        key: generated.key,
        record: row.into_record()?,
    })
}

pub(super) async fn key(pool: &Pool<Db>, id: KeyId) -> StoreResult<ApiKeyRecord> {
    let sql = format!("SELECT {KEY_COLUMNS} FROM api_keys WHERE id = $1");
    let row: Option<KeyRow> = sqlx::query_as(&sql).bind(id.0).fetch_optional(pool).await?;
    row.ok_or_else(|| StoreError::not_found("api key", id))?
        .into_record()
}

pub(super) async fn key_by_public_id(pool: &Pool<Db>, public_id: &str) -> StoreResult<Option<ApiKeyRecord>> {
    let sql = format!("SELECT {KEY_COLUMNS} FROM api_keys WHERE public_id = $1");
    let row: Option<KeyRow> = sqlx::query_as(&sql).bind(public_id).fetch_optional(pool).await?;
    row.map(KeyRow::into_record).transpose()
}

pub(super) async fn list_keys(pool: &Pool<Db>, user: Option<UserId>) -> StoreResult<Vec<ApiKeyRecord>> {
    let sql = format!(
        "SELECT {KEY_COLUMNS} FROM api_keys WHERE status <> 'deleted' AND ($1 IS NULL OR user_id = $1) \
         ORDER BY id"
    );
    let rows: Vec<KeyRow> = sqlx::query_as(&sql)
        .bind(user.map(|u| u.0))
        .fetch_all(pool)
        .await?;
    rows.into_iter().map(KeyRow::into_record).collect()
}

pub(super) async fn update_key(pool: &Pool<Db>, id: KeyId, update: KeyUpdate) -> StoreResult<ApiKeyRecord> {
    if let Some(name) = &update.name {
        check_name("key", name)?;
    }
    if let Some(limits) = &update.limits {
        check_limits(limits)?;
    }
    // Moved to another group only if its user may hold keys there, as when it was made.
    if let Some(group_id) = update.group_id {
        let user_id: Option<i64> = sqlx::query_scalar("SELECT user_id FROM api_keys WHERE id = $1")
            .bind(id.0)
            .fetch_optional(pool)
            .await?;
        let user_id = user_id.ok_or_else(|| StoreError::not_found("api key", id))?;
        users::check_group_use(pool, UserId(user_id), group_id).await?;
    }
    let sql = format!(
        "UPDATE api_keys SET name = COALESCE($2, name), group_id = COALESCE($3, group_id), \
         max_concurrency = CASE WHEN $4 THEN $5 ELSE max_concurrency END, \
         rpm = CASE WHEN $4 THEN $6 ELSE rpm END, \
         fallback_ladder = COALESCE($7, fallback_ladder) WHERE id = $1 RETURNING {KEY_COLUMNS}"
    );
    let row: Option<KeyRow> = sqlx::query_as(&sql)
        .bind(id.0)
        .bind(update.name.as_deref())
        .bind(update.group_id.map(|g| g.0))
        .bind(update.limits.is_some())
        .bind(update.limits.and_then(|l| l.max_concurrency).map(i64::from))
        .bind(update.limits.and_then(|l| l.rpm).map(i64::from))
        .bind(update.fallback_ladder)
        .fetch_optional(pool)
        .await
        .map_err(|e| StoreError::from_write("api key", e))?;
    row.ok_or_else(|| StoreError::not_found("api key", id))?
        .into_record()
}

pub(super) async fn set_key_status(
    pool: &Pool<Db>,
    id: KeyId,
    status: KeyStatus,
) -> StoreResult<ApiKeyRecord> {
    // A deleted key stays deleted; a suspended one only becomes deleted (or is reinstated).
    let sql = format!(
        "UPDATE api_keys SET status = $2 WHERE id = $1 \
         AND (status <> 'deleted' OR $2 = 'deleted') \
         AND (status <> 'suspended' OR $2 IN ('deleted', 'suspended')) \
         RETURNING {KEY_COLUMNS}"
    );
    let row: Option<KeyRow> = sqlx::query_as(&sql)
        .bind(id.0)
        .bind(status.as_str())
        .fetch_optional(pool)
        .await?;
    changed_or_conflict(pool, id, status, row).await
}

/// Makes a key that is not deleted active again, whether its owner disabled it or an
/// administrator suspended it.
pub(super) async fn reinstate_key(pool: &Pool<Db>, id: KeyId) -> StoreResult<ApiKeyRecord> {
    let sql = format!(
        "UPDATE api_keys SET status = 'active' WHERE id = $1 AND status <> 'deleted' RETURNING {KEY_COLUMNS}"
    );
    let row: Option<KeyRow> = sqlx::query_as(&sql).bind(id.0).fetch_optional(pool).await?;
    changed_or_conflict(pool, id, KeyStatus::Active, row).await
}

async fn changed_or_conflict(
    pool: &Pool<Db>,
    id: KeyId,
    status: KeyStatus,
    row: Option<KeyRow>,
) -> StoreResult<ApiKeyRecord> {
    match row {
        Some(row) => row.into_record(),
        None => {
            // Either there is no such key, or its status cannot become `status`.
            let existing = key(pool, id).await?;
            Err(StoreError::Conflict(format!(
                "api key {id} is {} and cannot become {status}",
                existing.status
            )))
        }
    }
}

/// Looks up the presented key, its status and whether its user may still use its group in one
/// query: this runs on every key-cache miss, in front of a request.
pub(super) async fn check_key(pool: &Pool<Db>, presented: &str) -> StoreResult<KeyCheck> {
    let Some(parsed) = parse_key(presented) else {
        return Ok(KeyCheck::Unknown);
    };
    let sql = format!(
        "SELECT {KEY_COLUMNS}, EXISTS (SELECT 1 FROM groups g WHERE g.id = k.group_id AND {}) AS may_use \
         FROM api_keys k WHERE k.public_id = $1",
        users::may_use("k.user_id")
    );
    let row = sqlx::query(&sql)
        .bind(parsed.public_id)
        .fetch_optional(pool)
        .await?;
    let Some(row) = row else {
        return Ok(KeyCheck::Unknown);
    };
    let key = KeyRow::from_row(&row)?;
    if !verify_secret(parsed.secret, &key.secret_sha256) {
        return Ok(KeyCheck::Unknown);
    }
    let may_use: bool = row.try_get("may_use")?;
    let (status, context) = key.into_record_and_context()?;
    if let Some(refusal) = KeyRefusal::of_status(status) {
        return Ok(KeyCheck::Refused(refusal));
    }
    if !may_use {
        return Ok(KeyCheck::Refused(KeyRefusal::GroupClosed));
    }
    Ok(KeyCheck::Valid(context))
}

pub(super) async fn touch_keys(pool: &Pool<Db>, uses: &[KeyUse]) -> StoreResult<()> {
    if uses.is_empty() {
        return Ok(());
    }
    let mut tx = pool.begin_with(super::BEGIN_WRITE).await?;
    for key_use in uses {
        sqlx::query(
            "UPDATE api_keys SET last_used_at = $2 WHERE id = $1 \
             AND (last_used_at IS NULL OR last_used_at < $2)",
        )
        .bind(key_use.key_id.0)
        .bind(key_use.at.unix_ms())
        .execute(&mut *tx)
        .await?;
    }
    tx.commit().await?;
    Ok(())
}

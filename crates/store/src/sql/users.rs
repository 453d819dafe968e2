//! Users and groups. Compiled once per backend (see `sql/mod` note in `lib.rs`).

use sqlx::Pool;

use super::Db;
use crate::error::{StoreError, StoreResult};
use crate::model::{Group, GroupId, NewUser, Timestamp, User, UserId, check_name, could_be_a_name};
use crate::rows::{GroupRow, UserRow};

const USER_COLUMNS: &str = "id, name, is_admin, password_hash, created_at";

pub(super) async fn create_user(pool: &Pool<Db>, user: NewUser) -> StoreResult<User> {
    check_name("user", &user.name)?;
    let sql = format!(
        "INSERT INTO users (name, is_admin, password_hash, created_at) VALUES ($1, $2, $3, $4) \
         RETURNING {USER_COLUMNS}"
    );
    let row: UserRow = sqlx::query_as(&sql)
        .bind(&user.name)
        .bind(user.is_admin)
        .bind(user.password_hash.as_deref())
        .bind(Timestamp::now().unix_ms())
        .fetch_one(pool)
        .await
        .map_err(|e| StoreError::from_write("user", e))?;
    Ok(row.into())
}

pub(super) async fn user(pool: &Pool<Db>, id: UserId) -> StoreResult<User> {
    let sql = format!("SELECT {USER_COLUMNS} FROM users WHERE id = $1");
    let row: Option<UserRow> = sqlx::query_as(&sql).bind(id.0).fetch_optional(pool).await?;
    row.map(User::from)
        .ok_or_else(|| StoreError::not_found("user", id))
}

pub(super) async fn user_by_name(pool: &Pool<Db>, name: &str) -> StoreResult<Option<User>> {
    if !could_be_a_name(name) {
        return Ok(None);
    }
    let sql = format!("SELECT {USER_COLUMNS} FROM users WHERE name = $1");
    let row: Option<UserRow> = sqlx::query_as(&sql).bind(name).fetch_optional(pool).await?;
    Ok(row.map(User::from))
}

pub(super) async fn list_users(pool: &Pool<Db>) -> StoreResult<Vec<User>> {
    let sql = format!("SELECT {USER_COLUMNS} FROM users ORDER BY id");
    let rows: Vec<UserRow> = sqlx::query_as(&sql).fetch_all(pool).await?;
    Ok(rows.into_iter().map(User::from).collect())
}

pub(super) async fn set_user_password_hash(
    pool: &Pool<Db>,
    id: UserId,
    hash: Option<&str>,
) -> StoreResult<()> {
    let done = sqlx::query("UPDATE users SET password_hash = $2 WHERE id = $1")
        .bind(id.0)
        .bind(hash)
        .execute(pool)
        .await?;
    if done.rows_affected() == 0 {
        return Err(StoreError::not_found("user", id));
    }
    Ok(())
}

pub(super) async fn set_user_admin(pool: &Pool<Db>, id: UserId, is_admin: bool) -> StoreResult<()> {
    let done = sqlx::query("UPDATE users SET is_admin = $2 WHERE id = $1")
        .bind(id.0)
        .bind(is_admin)
        .execute(pool)
        .await?;
    if done.rows_affected() == 0 {
        return Err(StoreError::not_found("user", id));
    }
    Ok(())
}

pub(super) async fn create_group(pool: &Pool<Db>, name: &str) -> StoreResult<Group> {
    check_name("group", name)?;
    let row: GroupRow = sqlx::query_as(
        "INSERT INTO groups (name, created_at) VALUES ($1, $2) RETURNING id, name, created_at",
    )
    .bind(name)
    .bind(Timestamp::now().unix_ms())
    .fetch_one(pool)
    .await
    .map_err(|e| StoreError::from_write("group", e))?;
    Ok(row.into())
}

pub(super) async fn group(pool: &Pool<Db>, id: GroupId) -> StoreResult<Group> {
    let row: Option<GroupRow> = sqlx::query_as("SELECT id, name, created_at FROM groups WHERE id = $1")
        .bind(id.0)
        .fetch_optional(pool)
        .await?;
    row.map(Group::from)
        .ok_or_else(|| StoreError::not_found("group", id))
}

pub(super) async fn group_by_name(pool: &Pool<Db>, name: &str) -> StoreResult<Option<Group>> {
    if !could_be_a_name(name) {
        return Ok(None);
    }
    let row: Option<GroupRow> = sqlx::query_as("SELECT id, name, created_at FROM groups WHERE name = $1")
        .bind(name)
        .fetch_optional(pool)
        .await?;
    Ok(row.map(Group::from))
}

pub(super) async fn list_groups(pool: &Pool<Db>) -> StoreResult<Vec<Group>> {
    let rows: Vec<GroupRow> = sqlx::query_as("SELECT id, name, created_at FROM groups ORDER BY id")
        .fetch_all(pool)
        .await?;
    Ok(rows.into_iter().map(Group::from).collect())
}

//! Users and groups. Compiled once per backend (see `sql/mod` note in `lib.rs`).

use std::collections::BTreeMap;

use sqlx::Pool;

use super::Db;
use crate::error::{StoreError, StoreResult};
use crate::model::{Group, GroupId, NewUser, Timestamp, User, UserId, check_name, could_be_a_name};
use crate::rows::{GROUP_COLUMNS, GroupRow, UserRow};

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
    let sql = format!("INSERT INTO groups (name, created_at) VALUES ($1, $2) RETURNING {GROUP_COLUMNS}");
    let row: GroupRow = sqlx::query_as(&sql)
        .bind(name)
        .bind(Timestamp::now().unix_ms())
        .fetch_one(pool)
        .await
        .map_err(|e| StoreError::from_write("group", e))?;
    Ok(row.into())
}

pub(super) async fn group(pool: &Pool<Db>, id: GroupId) -> StoreResult<Group> {
    let sql = format!("SELECT {GROUP_COLUMNS} FROM groups WHERE id = $1");
    let row: Option<GroupRow> = sqlx::query_as(&sql).bind(id.0).fetch_optional(pool).await?;
    row.map(Group::from)
        .ok_or_else(|| StoreError::not_found("group", id))
}

pub(super) async fn group_by_name(pool: &Pool<Db>, name: &str) -> StoreResult<Option<Group>> {
    if !could_be_a_name(name) {
        return Ok(None);
    }
    let sql = format!("SELECT {GROUP_COLUMNS} FROM groups WHERE name = $1");
    let row: Option<GroupRow> = sqlx::query_as(&sql).bind(name).fetch_optional(pool).await?;
    Ok(row.map(Group::from))
}

pub(super) async fn list_groups(pool: &Pool<Db>) -> StoreResult<Vec<Group>> {
    let sql = format!("SELECT {GROUP_COLUMNS} FROM groups ORDER BY id");
    let rows: Vec<GroupRow> = sqlx::query_as(&sql).fetch_all(pool).await?;
    Ok(rows.into_iter().map(Group::from).collect())
}

pub(super) async fn set_group_restricted(
    pool: &Pool<Db>,
    id: GroupId,
    restricted: bool,
) -> StoreResult<Group> {
    let sql = format!("UPDATE groups SET restricted = $2 WHERE id = $1 RETURNING {GROUP_COLUMNS}");
    let row: Option<GroupRow> = sqlx::query_as(&sql)
        .bind(id.0)
        .bind(restricted)
        .fetch_optional(pool)
        .await?;
    row.map(Group::from)
        .ok_or_else(|| StoreError::not_found("group", id))
}

pub(super) async fn group_members(pool: &Pool<Db>, id: GroupId) -> StoreResult<Vec<UserId>> {
    group(pool, id).await?;
    let ids: Vec<i64> =
        sqlx::query_scalar("SELECT user_id FROM group_members WHERE group_id = $1 ORDER BY user_id")
            .bind(id.0)
            .fetch_all(pool)
            .await?;
    Ok(ids.into_iter().map(UserId).collect())
}

pub(super) async fn group_memberships(pool: &Pool<Db>) -> StoreResult<BTreeMap<GroupId, Vec<UserId>>> {
    let pairs: Vec<(i64, i64)> =
        sqlx::query_as("SELECT group_id, user_id FROM group_members ORDER BY group_id, user_id")
            .fetch_all(pool)
            .await?;
    let mut memberships: BTreeMap<GroupId, Vec<UserId>> = BTreeMap::new();
    for (group, user) in pairs {
        memberships.entry(GroupId(group)).or_default().push(UserId(user));
    }
    Ok(memberships)
}

/// Replaces the members of `id` in one transaction: nobody sees half a list.
pub(super) async fn set_group_members(pool: &Pool<Db>, id: GroupId, members: &[UserId]) -> StoreResult<()> {
    let mut tx = pool.begin_with(super::BEGIN_WRITE).await?;
    // A write that changes nothing locks the group's row (PostgreSQL; SQLite's write lock is taken
    // already): two edits of one group's members run one after the other, and the later one's list
    // is what stays, never a merge of both.
    let locked = sqlx::query("UPDATE groups SET restricted = restricted WHERE id = $1")
        .bind(id.0)
        .execute(&mut *tx)
        .await?;
    if locked.rows_affected() == 0 {
        return Err(StoreError::not_found("group", id));
    }
    sqlx::query("DELETE FROM group_members WHERE group_id = $1")
        .bind(id.0)
        .execute(&mut *tx)
        .await?;
    for member in members {
        sqlx::query("INSERT INTO group_members (group_id, user_id) VALUES ($1, $2) ON CONFLICT DO NOTHING")
            .bind(id.0)
            .bind(member.0)
            .execute(&mut *tx)
            .await
            .map_err(|e| StoreError::from_write("group member", e))?;
    }
    tx.commit().await?;
    Ok(())
}

/// The condition under which user `user` (an SQL expression: a parameter or a column) may use
/// group `g`: the user exists, and the group is open or the user is an admin or one of its members.
pub(super) fn may_use(user: &str) -> String {
    format!(
        "EXISTS (SELECT 1 FROM users u WHERE u.id = {user} AND (NOT g.restricted OR u.is_admin \
         OR EXISTS (SELECT 1 FROM group_members m WHERE m.group_id = g.id AND m.user_id = u.id)))"
    )
}

pub(super) async fn may_use_group(pool: &Pool<Db>, user: UserId, group: GroupId) -> StoreResult<bool> {
    let sql = format!("SELECT g.id FROM groups g WHERE g.id = $2 AND {}", may_use("$1"));
    let found: Option<i64> = sqlx::query_scalar(&sql)
        .bind(user.0)
        .bind(group.0)
        .fetch_optional(pool)
        .await?;
    Ok(found.is_some())
}

pub(super) async fn groups_for(pool: &Pool<Db>, user: UserId) -> StoreResult<Vec<Group>> {
    let sql = format!(
        "SELECT g.id, g.name, g.restricted, g.created_at FROM groups g WHERE {} ORDER BY g.id",
        may_use("$1")
    );
    let rows: Vec<GroupRow> = sqlx::query_as(&sql).bind(user.0).fetch_all(pool).await?;
    Ok(rows.into_iter().map(Group::from).collect())
}

/// Fails unless `user_id` may hold keys in `group_id`: [`StoreError::NotFound`] for a missing
/// user or group, [`StoreError::Forbidden`] for a restricted group the user is not a member of.
pub(super) async fn check_group_use(pool: &Pool<Db>, user_id: UserId, group_id: GroupId) -> StoreResult<()> {
    if may_use_group(pool, user_id, group_id).await? {
        return Ok(());
    }
    let group = group(pool, group_id).await?;
    let user = user(pool, user_id).await?;
    Err(StoreError::Forbidden(format!(
        "group {:?} is open to its members only, and user {:?} is not one",
        group.name, user.name
    )))
}

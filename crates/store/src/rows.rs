//! Row shapes shared by both backends and their conversion into the public records.
//!
//! Integers are `i64` in every table (SQLite `INTEGER`, PostgreSQL `BIGINT`); times are
//! milliseconds since the epoch.

use std::collections::HashMap;

use sqlx::{Database, Encode, QueryBuilder, Type};

use crate::error::{StoreError, StoreResult};
use crate::model::{
    Account, AccountId, ApiKeyRecord, AuthContext, DailyUsage, Group, GroupId, KeyId, KeyLimits, KeyStatus,
    StatusFilter, Timestamp, TokenCounts, UsageEntry, UsageFilter, UsageId, UsageRecord, User, UserId,
};

/// Declares a row struct and its [`sqlx::FromRow`] for every backend: each field is read from the
/// column of the same name. It stands in for `#[derive(sqlx::FromRow)]`, whose `sqlx-macros` would
/// compile a second copy of both database drivers for the compiler's own use (about a minute of
/// every fresh build on two cores) for a few lines of code. Fields take no attributes and no raw
/// identifiers (`stringify!(r#type)` is `"r#type"`, not the column's name).
macro_rules! row_struct {
    (
        $(#[$meta:meta])*
        $vis:vis struct $name:ident { $($field_vis:vis $field:ident: $ty:ty),* $(,)? }
    ) => {
        $(#[$meta])*
        $vis struct $name { $($field_vis $field: $ty),* }

        impl<'r, R: sqlx::Row> sqlx::FromRow<'r, R> for $name
        where
            &'static str: sqlx::ColumnIndex<R>,
            $($ty: sqlx::Decode<'r, R::Database> + sqlx::Type<R::Database>,)*
        {
            fn from_row(row: &'r R) -> Result<Self, sqlx::Error> {
                Ok(Self { $($field: row.try_get(stringify!($field))?),* })
            }
        }
    };
}

/// `u64` into a signed column, saturating.
pub(crate) fn to_i64(value: u64) -> i64 {
    i64::try_from(value).unwrap_or(i64::MAX)
}

/// A signed column into `u64`; negative values are corrupt.
pub(crate) fn to_u64(column: &str, value: i64) -> StoreResult<u64> {
    u64::try_from(value).map_err(|_| StoreError::Corrupt(format!("{column} = {value}")))
}

/// A signed column into `u32`.
pub(crate) fn to_u32(column: &str, value: i64) -> StoreResult<u32> {
    u32::try_from(value).map_err(|_| StoreError::Corrupt(format!("{column} = {value}")))
}

fn opt_u64(column: &str, value: Option<i64>) -> StoreResult<Option<u64>> {
    value.map(|v| to_u64(column, v)).transpose()
}

fn parse_text<T: std::str::FromStr<Err = crate::model::UnknownVariant>>(text: &str) -> StoreResult<T> {
    text.parse()
        .map_err(|e: crate::model::UnknownVariant| StoreError::Corrupt(e.to_string()))
}

row_struct! {
    pub(crate) struct UserRow {
        id: i64,
        name: String,
        is_admin: bool,
        password_hash: Option<String>,
        created_at: i64,
    }
}

impl From<UserRow> for User {
    fn from(row: UserRow) -> Self {
        User {
            id: UserId(row.id),
            name: row.name,
            is_admin: row.is_admin,
            password_hash: row.password_hash,
            created_at: Timestamp::from_unix_ms(row.created_at),
        }
    }
}

row_struct! {
    pub(crate) struct GroupRow {
        id: i64,
        name: String,
        restricted: bool,
        created_at: i64,
    }
}

/// The columns of [`GroupRow`], in its order.
pub(crate) const GROUP_COLUMNS: &str = "id, name, restricted, created_at";

impl From<GroupRow> for Group {
    fn from(row: GroupRow) -> Self {
        Group {
            id: GroupId(row.id),
            name: row.name,
            restricted: row.restricted,
            created_at: Timestamp::from_unix_ms(row.created_at),
        }
    }
}

/// Columns of `api_keys`, in the order of [`KeyRow`].
pub(crate) const KEY_COLUMNS: &str = "id, public_id, secret_sha256, user_id, group_id, name, status, \
     max_concurrency, rpm, fallback_ladder, created_at, last_used_at";

row_struct! {
    pub(crate) struct KeyRow {
        id: i64,
        public_id: String,
        pub(crate) secret_sha256: String,
        user_id: i64,
        group_id: i64,
        name: String,
        status: String,
        max_concurrency: Option<i64>,
        rpm: Option<i64>,
        fallback_ladder: bool,
        created_at: i64,
        last_used_at: Option<i64>,
    }
}

impl KeyRow {
    pub(crate) fn into_record(self) -> StoreResult<ApiKeyRecord> {
        Ok(ApiKeyRecord {
            id: KeyId(self.id),
            public_id: self.public_id,
            user_id: UserId(self.user_id),
            group_id: GroupId(self.group_id),
            name: self.name,
            status: parse_text(&self.status)?,
            limits: KeyLimits {
                max_concurrency: self
                    .max_concurrency
                    .map(|v| to_u32("max_concurrency", v))
                    .transpose()?,
                rpm: self.rpm.map(|v| to_u32("rpm", v)).transpose()?,
            },
            fallback_ladder: self.fallback_ladder,
            created_at: Timestamp::from_unix_ms(self.created_at),
            last_used_at: self.last_used_at.map(Timestamp::from_unix_ms),
        })
    }

    /// The key's status and the identity of a request using it (the caller verifies the secret
    /// and only accepts an active status).
    pub(crate) fn into_record_and_context(self) -> StoreResult<(KeyStatus, AuthContext)> {
        let record = self.into_record()?;
        let status = record.status;
        let context = AuthContext {
            key_id: record.id,
            key_public_id: record.public_id,
            key_name: record.name,
            user_id: record.user_id,
            group_id: record.group_id,
            limits: record.limits,
            fallback_ladder: record.fallback_ladder,
        };
        Ok((status, context))
    }
}

/// Columns of `accounts` as read into [`AccountRow`].
pub(crate) const ACCOUNT_COLUMNS: &str = "id, name, kind, base_url, tier, priority, concurrency_standard, \
     concurrency_large, status, status_reason, main_model, fallback_models, \
     (credential IS NOT NULL) AS has_credential, created_at, updated_at";

row_struct! {
    pub(crate) struct AccountRow {
        pub(crate) id: i64,
        name: String,
        kind: String,
        base_url: Option<String>,
        tier: String,
        priority: i64,
        concurrency_standard: i64,
        concurrency_large: i64,
        status: String,
        status_reason: Option<String>,
        main_model: Option<String>,
        fallback_models: String,
        has_credential: bool,
        created_at: i64,
        updated_at: i64,
    }
}

impl AccountRow {
    /// The record, with the group ids read from `account_groups`.
    pub(crate) fn into_account(self, groups: Vec<GroupId>) -> StoreResult<Account> {
        Ok(Account {
            id: AccountId(self.id),
            name: self.name,
            kind: parse_text(&self.kind)?,
            base_url: self.base_url,
            tier: parse_text(&self.tier)?,
            priority: i32::try_from(self.priority)
                .map_err(|_| StoreError::Corrupt(format!("priority = {}", self.priority)))?,
            concurrency_standard: to_u32("concurrency_standard", self.concurrency_standard)?,
            concurrency_large: to_u32("concurrency_large", self.concurrency_large)?,
            status: parse_text(&self.status)?,
            status_reason: self.status_reason,
            groups,
            main_model: self.main_model,
            fallback_models: serde_json::from_str(&self.fallback_models)
                .map_err(|e| StoreError::Corrupt(format!("fallback_models: {e}")))?,
            has_credential: self.has_credential,
            created_at: Timestamp::from_unix_ms(self.created_at),
            updated_at: Timestamp::from_unix_ms(self.updated_at),
        })
    }
}

/// Joins account rows with `(account_id, group_id)` pairs.
pub(crate) fn accounts_with_groups(rows: Vec<AccountRow>, pairs: &[(i64, i64)]) -> StoreResult<Vec<Account>> {
    // Grouped once: a pool of 10,000 accounts would otherwise scan every pair for every account.
    let mut groups: HashMap<i64, Vec<GroupId>> = HashMap::with_capacity(rows.len());
    for (account, group) in pairs {
        groups.entry(*account).or_default().push(GroupId(*group));
    }
    rows.into_iter()
        .map(|row| {
            let own = groups.remove(&row.id).unwrap_or_default();
            row.into_account(own)
        })
        .collect()
}

/// The fallback model list as stored (a JSON array).
pub(crate) fn models_json(models: &[String]) -> String {
    serde_json::to_string(models).unwrap_or_else(|_| "[]".to_owned())
}

/// Columns of `usage_records` without `id`, in insertion order (28 columns).
pub(crate) const USAGE_INSERT_COLUMNS: &str = "request_id, created_at, endpoint, model, size_requested, \
     size_produced, quality_requested, quality_produced, output_format, n, images, stream, status, \
     error_code, input_tokens, output_tokens, total_tokens, input_text_tokens, input_image_tokens, \
     output_text_tokens, output_image_tokens, latency_ms, ttfb_ms, account_id, group_id, user_id, \
     key_id, fallback_note";

row_struct! {
    pub(crate) struct UsageRow {
        id: i64,
        request_id: String,
        created_at: i64,
        endpoint: String,
        model: String,
        size_requested: Option<String>,
        size_produced: Option<String>,
        quality_requested: Option<String>,
        quality_produced: Option<String>,
        output_format: Option<String>,
        n: i64,
        images: i64,
        stream: bool,
        status: i64,
        error_code: Option<String>,
        input_tokens: i64,
        output_tokens: i64,
        total_tokens: i64,
        input_text_tokens: Option<i64>,
        input_image_tokens: Option<i64>,
        output_text_tokens: Option<i64>,
        output_image_tokens: Option<i64>,
        latency_ms: i64,
        ttfb_ms: Option<i64>,
        account_id: Option<i64>,
        group_id: Option<i64>,
        user_id: Option<i64>,
        key_id: Option<i64>,
        fallback_note: Option<String>,
    }
}

impl UsageRow {
    pub(crate) fn into_entry(self) -> StoreResult<UsageEntry> {
        let record = UsageRecord {
            request_id: self.request_id,
            created_at: Timestamp::from_unix_ms(self.created_at),
            endpoint: self.endpoint,
            model: self.model,
            size_requested: self.size_requested,
            size_produced: self.size_produced,
            quality_requested: self.quality_requested,
            quality_produced: self.quality_produced,
            output_format: self.output_format,
            n: to_u32("n", self.n)?,
            images: to_u32("images", self.images)?,
            stream: self.stream,
            status: u16::try_from(self.status)
                .map_err(|_| StoreError::Corrupt(format!("status = {}", self.status)))?,
            error_code: self.error_code,
            tokens: TokenCounts {
                input: to_u64("input_tokens", self.input_tokens)?,
                output: to_u64("output_tokens", self.output_tokens)?,
                total: to_u64("total_tokens", self.total_tokens)?,
                input_text: opt_u64("input_text_tokens", self.input_text_tokens)?,
                input_image: opt_u64("input_image_tokens", self.input_image_tokens)?,
                output_text: opt_u64("output_text_tokens", self.output_text_tokens)?,
                output_image: opt_u64("output_image_tokens", self.output_image_tokens)?,
            },
            latency_ms: to_u64("latency_ms", self.latency_ms)?,
            ttfb_ms: opt_u64("ttfb_ms", self.ttfb_ms)?,
            account_id: self.account_id.map(AccountId),
            group_id: self.group_id.map(GroupId),
            user_id: self.user_id.map(UserId),
            key_id: self.key_id.map(KeyId),
            fallback_note: self.fallback_note,
        };
        Ok(UsageEntry {
            id: UsageId(self.id),
            record,
        })
    }
}

/// The select list of the daily aggregate, read into [`DailyRow`].
pub(crate) const DAILY_SELECT: &str = "SELECT created_at / 86400000 AS day, COUNT(*) AS requests, \
     CAST(COALESCE(SUM(CASE WHEN status >= 400 THEN 1 ELSE 0 END), 0) AS BIGINT) AS failed_requests, \
     CAST(COALESCE(SUM(images), 0) AS BIGINT) AS images, \
     CAST(COALESCE(SUM(input_tokens), 0) AS BIGINT) AS input_tokens, \
     CAST(COALESCE(SUM(output_tokens), 0) AS BIGINT) AS output_tokens, \
     CAST(COALESCE(SUM(total_tokens), 0) AS BIGINT) AS total_tokens FROM usage_records";

row_struct! {
    pub(crate) struct DailyRow {
        day: i64,
        requests: i64,
        failed_requests: i64,
        images: i64,
        input_tokens: i64,
        output_tokens: i64,
        total_tokens: i64,
    }
}

impl DailyRow {
    pub(crate) fn into_daily(self) -> StoreResult<DailyUsage> {
        let day_start = Timestamp::start_of_unix_day(self.day);
        Ok(DailyUsage {
            date: day_start.date_string(),
            day_start,
            requests: to_u64("requests", self.requests)?,
            failed_requests: to_u64("failed_requests", self.failed_requests)?,
            images: to_u64("images", self.images)?,
            input_tokens: to_u64("input_tokens", self.input_tokens)?,
            output_tokens: to_u64("output_tokens", self.output_tokens)?,
            total_tokens: to_u64("total_tokens", self.total_tokens)?,
        })
    }
}

/// Appends ` WHERE ...` for `filter` (nothing if it selects everything); `offset` and `limit`
/// are left to the caller.
pub(crate) fn push_usage_conditions<'a, DB>(qb: &mut QueryBuilder<'a, DB>, filter: &UsageFilter)
where
    DB: Database,
    i64: Encode<'a, DB> + Type<DB>,
    String: Encode<'a, DB> + Type<DB>,
{
    let mut first = true;
    let mut next = |qb: &mut QueryBuilder<'a, DB>, sql: &str| {
        qb.push(if first { " WHERE " } else { " AND " });
        qb.push(sql);
        first = false;
    };
    let ids = [
        ("user_id = ", filter.user.map(|v| v.0)),
        ("key_id = ", filter.key.map(|v| v.0)),
        ("account_id = ", filter.account.map(|v| v.0)),
        ("group_id = ", filter.group.map(|v| v.0)),
        ("created_at >= ", filter.since.map(Timestamp::unix_ms)),
        ("created_at < ", filter.until.map(Timestamp::unix_ms)),
    ];
    for (sql, value) in ids {
        if let Some(value) = value {
            next(qb, sql);
            qb.push_bind(value);
        }
    }
    if let Some(model) = &filter.model {
        next(qb, "model = ");
        qb.push_bind(stored_text(model).into_owned());
    }
    match filter.status {
        Some(StatusFilter::Exact(status)) => {
            next(qb, "status = ");
            qb.push_bind(i64::from(status));
        }
        Some(StatusFilter::Success) => next(qb, "status < 400"),
        Some(StatusFilter::Failure) => next(qb, "status >= 400"),
        None => {}
    }
    if let Some(size) = &filter.size {
        let size = stored_text(size);
        next(qb, "(size_produced = ");
        qb.push_bind(size.clone().into_owned());
        qb.push(" OR size_requested = ");
        qb.push_bind(size.into_owned());
        qb.push(")");
    }
    if let Some(cursor) = filter.older_than {
        let at = cursor.created_at.unix_ms();
        next(qb, "(created_at < ");
        qb.push_bind(at);
        qb.push(" OR (created_at = ");
        qb.push_bind(at);
        qb.push(" AND id < ");
        qb.push_bind(cursor.id.0);
        qb.push("))");
    }
}

/// Text as both backends store it. PostgreSQL refuses a NUL character in `TEXT`, which JSON allows
/// (`"model": "a\u0000b"`) and the record keeps as the client sent it: unreplaced, one such
/// record would fail its whole batch on every try. SQLite gets the same text, so both agree; filters compare with it too.
pub(crate) fn stored_text(value: &str) -> std::borrow::Cow<'_, str> {
    if value.contains('\0') {
        std::borrow::Cow::Owned(value.replace('\0', "\u{FFFD}"))
    } else {
        std::borrow::Cow::Borrowed(value)
    }
}

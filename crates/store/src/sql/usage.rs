//! Usage records. Compiled once per backend.

use std::borrow::Cow;
use std::sync::OnceLock;

use sqlx::{Pool, QueryBuilder};

use super::Db;
use crate::error::StoreResult;
use crate::model::{DailyUsage, UsageEntry, UsageFilter, UsageRecord};
use crate::rows::{
    DAILY_SELECT, DailyRow, USAGE_INSERT_COLUMNS, UsageRow, push_usage_conditions, stored_text as text,
    to_i64,
};

/// Token counts above this are stored as this: no request comes near it (a trillion tokens), and a
/// day's `SUM` of stored counts then stays far inside `i64`, which both backends refuse to
/// overflow (SQLite: "integer overflow", PostgreSQL: "bigint out of range"): one absurd count
/// from an upstream must not break the daily totals of its day.
const MAX_TOKENS: u64 = 1 << 40;

fn tokens(count: u64) -> i64 {
    to_i64(count.min(MAX_TOKENS))
}

/// Most rows per INSERT statement, per backend (28 parameters a row stays below both backends'
/// parameter limits).
const ROWS_PER_STATEMENT: usize = super::USAGE_ROWS_PER_STATEMENT;

/// How many statement sizes there are: 1, 2, 4, ..., [`ROWS_PER_STATEMENT`].
const STATEMENT_SIZES: usize = ROWS_PER_STATEMENT.trailing_zeros() as usize + 1;

/// Splits `len` rows into statement sizes that are powers of two up to [`ROWS_PER_STATEMENT`],
/// largest first, so a connection only ever sees a handful of distinct INSERT texts (7 or 9) and keeps them all in its
/// prepared-statement cache. One text per batch size made SQLite parse a new statement on most
/// flushes (about 34,000 instructions per request in the callgrind profile, docs/benchmarks.md).
fn statement_sizes(mut len: usize) -> impl Iterator<Item = usize> {
    std::iter::from_fn(move || {
        if len == 0 {
            return None;
        }
        let size = if len >= ROWS_PER_STATEMENT {
            ROWS_PER_STATEMENT
        } else {
            1 << len.ilog2()
        };
        len -= size;
        Some(size)
    })
}

/// The INSERT text for `rows` rows, built once per statement size and kept: writing the
/// placeholders of 256 rows x 28 columns anew for every flush cost about 8,000 instructions per
/// record in the callgrind profile (docs/benchmarks.md).
fn insert_sql(rows: usize) -> Cow<'static, str> {
    static TEXTS: [OnceLock<String>; STATEMENT_SIZES] = [const { OnceLock::new() }; STATEMENT_SIZES];
    let slot = usize::try_from(rows.trailing_zeros())
        .ok()
        .and_then(|index| TEXTS.get(index));
    match slot {
        Some(text) if rows.is_power_of_two() => Cow::Borrowed(text.get_or_init(|| build_insert_sql(rows))),
        _ => Cow::Owned(build_insert_sql(rows)),
    }
}

fn build_insert_sql(rows: usize) -> String {
    let columns = USAGE_INSERT_COLUMNS.split(',').count();
    let mut qb: QueryBuilder<'_, Db> =
        QueryBuilder::new(format!("INSERT INTO usage_records ({USAGE_INSERT_COLUMNS}) "));
    qb.push_values(0..rows, |mut row, _| {
        for _ in 0..columns {
            row.push_bind(None::<i64>);
        }
    });
    qb.push(" ON CONFLICT (request_id) DO NOTHING");
    qb.into_sql()
}

pub(super) async fn insert_usage_batch(pool: &Pool<Db>, records: &[UsageRecord]) -> StoreResult<u64> {
    if records.is_empty() {
        return Ok(0);
    }
    let mut inserted = 0;
    let mut tx = pool.begin_with(super::BEGIN_WRITE).await?;
    let mut rest = records;
    for size in statement_sizes(records.len()) {
        let (chunk, after) = rest.split_at(size.min(rest.len()));
        rest = after;
        let sql = insert_sql(chunk.len());
        let mut query = sqlx::query::<Db>(&sql);
        for r in chunk {
            query = query
                .bind(text(&r.request_id))
                .bind(r.created_at.unix_ms())
                .bind(text(&r.endpoint))
                .bind(text(&r.model))
                .bind(r.size_requested.as_deref().map(text))
                .bind(r.size_produced.as_deref().map(text))
                .bind(r.quality_requested.as_deref().map(text))
                .bind(r.quality_produced.as_deref().map(text))
                .bind(r.output_format.as_deref().map(text))
                .bind(i64::from(r.n))
                .bind(i64::from(r.images))
                .bind(r.stream)
                .bind(i64::from(r.status))
                .bind(r.error_code.as_deref().map(text))
                .bind(tokens(r.tokens.input))
                .bind(tokens(r.tokens.output))
                .bind(tokens(r.tokens.total))
                .bind(r.tokens.input_text.map(tokens))
                .bind(r.tokens.input_image.map(tokens))
                .bind(r.tokens.output_text.map(tokens))
                .bind(r.tokens.output_image.map(tokens))
                .bind(to_i64(r.latency_ms))
                .bind(r.ttfb_ms.map(to_i64))
                .bind(r.account_id.map(|v| v.0))
                .bind(r.group_id.map(|v| v.0))
                .bind(r.user_id.map(|v| v.0))
                .bind(r.key_id.map(|v| v.0))
                .bind(r.fallback_note.as_deref().map(text));
        }
        inserted += query.execute(&mut *tx).await?.rows_affected();
    }
    tx.commit().await?;
    Ok(inserted)
}

pub(super) async fn list_usage(pool: &Pool<Db>, filter: &UsageFilter) -> StoreResult<Vec<UsageEntry>> {
    let mut qb: QueryBuilder<'_, Db> =
        QueryBuilder::new(format!("SELECT id, {USAGE_INSERT_COLUMNS} FROM usage_records"));
    push_usage_conditions(&mut qb, filter);
    qb.push(" ORDER BY created_at DESC, id DESC LIMIT ");
    qb.push_bind(i64::from(filter.effective_limit()));
    qb.push(" OFFSET ");
    qb.push_bind(i64::from(filter.offset.unwrap_or(0)));
    let rows: Vec<UsageRow> = qb.build_query_as().fetch_all(pool).await?;
    rows.into_iter().map(UsageRow::into_entry).collect()
}

pub(super) async fn daily_usage(pool: &Pool<Db>, filter: &UsageFilter) -> StoreResult<Vec<DailyUsage>> {
    let mut qb: QueryBuilder<'_, Db> = QueryBuilder::new(DAILY_SELECT);
    push_usage_conditions(&mut qb, filter);
    qb.push(" GROUP BY day ORDER BY day DESC LIMIT ");
    qb.push_bind(i64::from(filter.effective_limit()));
    let rows: Vec<DailyRow> = qb.build_query_as().fetch_all(pool).await?;
    rows.into_iter().map(DailyRow::into_daily).collect()
}

#[cfg(test)]
mod tests {

    use std::borrow::Cow;

    use super::{ROWS_PER_STATEMENT, STATEMENT_SIZES, build_insert_sql, insert_sql, statement_sizes};

    #[test]
    fn each_statement_size_keeps_its_own_insert_text() {
        for size in statement_sizes(2 * ROWS_PER_STATEMENT - 1).chain([ROWS_PER_STATEMENT]) {
            let first = insert_sql(size);
            assert!(matches!(first, Cow::Borrowed(_)), "size {size} is kept");
            assert_eq!(first, build_insert_sql(size), "size {size}");
            assert_eq!(
                first.matches("), (").count() + 1,
                size,
                "rows in the text for size {size}"
            );
            assert!(
                std::ptr::eq(first.as_ptr(), insert_sql(size).as_ptr()),
                "built once"
            );
        }
        assert!(
            matches!(insert_sql(3), Cow::Owned(_)),
            "other sizes are built, not kept"
        );
        assert_eq!(insert_sql(3), build_insert_sql(3));
    }

    #[test]
    fn statement_sizes_cover_the_batch_with_few_distinct_sizes() {
        let mut distinct = std::collections::BTreeSet::new();
        for len in 0..=3 * ROWS_PER_STATEMENT + 7 {
            let sizes: Vec<usize> = statement_sizes(len).collect();
            assert_eq!(sizes.iter().sum::<usize>(), len);
            assert!(sizes.windows(2).all(|w| w[0] >= w[1]));
            assert!(
                sizes
                    .iter()
                    .all(|s| s.is_power_of_two() && *s <= ROWS_PER_STATEMENT)
            );
            distinct.extend(sizes);
        }
        assert!(ROWS_PER_STATEMENT.is_power_of_two());
        assert_eq!(distinct.len(), STATEMENT_SIZES);
        assert!(distinct.len() <= 9, "few enough to stay prepared");
    }
}

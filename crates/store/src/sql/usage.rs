//! Usage records. Compiled once per backend.

use std::borrow::Cow;

use sqlx::{Pool, QueryBuilder};

use super::Db;
use crate::error::StoreResult;
use crate::model::{DailyUsage, UsageEntry, UsageFilter, UsageRecord};
use crate::rows::{DAILY_SELECT, DailyRow, USAGE_INSERT_COLUMNS, UsageRow, push_usage_conditions, to_i64};

/// Token counts above this are stored as this: no request comes near it (a trillion tokens), and a
/// day's `SUM` of stored counts then stays far inside `i64`, which both backends refuse to
/// overflow (SQLite: "integer overflow", PostgreSQL: "bigint out of range"): one absurd count
/// from an upstream must not break the daily totals of its day.
const MAX_TOKENS: u64 = 1 << 40;

fn tokens(count: u64) -> i64 {
    to_i64(count.min(MAX_TOKENS))
}

/// Text as both backends store it. PostgreSQL refuses a NUL character in `TEXT`, which JSON allows
/// (`"model": "a\u0000b"`) and the record keeps as the client sent it: unreplaced, one such
/// record would fail its whole batch on every try. SQLite gets the same text, so both agree.
fn text(value: &str) -> Cow<'_, str> {
    if value.contains('\0') {
        Cow::Owned(value.replace('\0', "\u{FFFD}"))
    } else {
        Cow::Borrowed(value)
    }
}

/// Most rows per INSERT statement: 28 parameters each stays below both backends' parameter limits.
const ROWS_PER_STATEMENT: usize = 256;

/// Splits `len` rows into statement sizes that are powers of two up to [`ROWS_PER_STATEMENT`],
/// largest first, so a connection only ever sees 9 distinct INSERT texts and keeps them all in its
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

pub(super) async fn insert_usage_batch(pool: &Pool<Db>, records: &[UsageRecord]) -> StoreResult<u64> {
    if records.is_empty() {
        return Ok(0);
    }
    let mut inserted = 0;
    let mut tx = pool.begin().await?;
    let mut rest = records;
    for size in statement_sizes(records.len()) {
        let (chunk, after) = rest.split_at(size.min(rest.len()));
        rest = after;
        let mut qb: QueryBuilder<'_, Db> =
            QueryBuilder::new(format!("INSERT INTO usage_records ({USAGE_INSERT_COLUMNS}) "));
        qb.push_values(chunk, |mut row, r| {
            row.push_bind(text(&r.request_id))
                .push_bind(r.created_at.unix_ms())
                .push_bind(text(&r.endpoint))
                .push_bind(text(&r.model))
                .push_bind(r.size_requested.as_deref().map(text))
                .push_bind(r.size_produced.as_deref().map(text))
                .push_bind(r.quality_requested.as_deref().map(text))
                .push_bind(r.quality_produced.as_deref().map(text))
                .push_bind(r.output_format.as_deref().map(text))
                .push_bind(i64::from(r.n))
                .push_bind(i64::from(r.images))
                .push_bind(r.stream)
                .push_bind(i64::from(r.status))
                .push_bind(r.error_code.as_deref().map(text))
                .push_bind(tokens(r.tokens.input))
                .push_bind(tokens(r.tokens.output))
                .push_bind(tokens(r.tokens.total))
                .push_bind(r.tokens.input_text.map(tokens))
                .push_bind(r.tokens.input_image.map(tokens))
                .push_bind(r.tokens.output_text.map(tokens))
                .push_bind(r.tokens.output_image.map(tokens))
                .push_bind(to_i64(r.latency_ms))
                .push_bind(r.ttfb_ms.map(to_i64))
                .push_bind(r.account_id.map(|v| v.0))
                .push_bind(r.group_id.map(|v| v.0))
                .push_bind(r.user_id.map(|v| v.0))
                .push_bind(r.key_id.map(|v| v.0))
                .push_bind(r.fallback_note.as_deref().map(text));
        });
        qb.push(" ON CONFLICT (request_id) DO NOTHING");
        inserted += qb.build().execute(&mut *tx).await?.rows_affected();
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
    use super::{ROWS_PER_STATEMENT, statement_sizes};

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
        assert_eq!(distinct.len(), 9);
    }
}

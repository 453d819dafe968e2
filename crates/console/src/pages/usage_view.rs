//! What `/usage` and `/admin/usage` share: the filter query, the store filter built from it,
//! totals and the daily charts.

use std::collections::HashMap;

use imagegate_store::{AccountId, DailyUsage, GroupId, KeyId, StatusFilter, Timestamp, UsageFilter, UserId};
use serde::{Deserialize, Serialize};

use crate::chart::{Bar, bar_chart};
use crate::dates;
use crate::error::PageResult;
use crate::pages::usage_table::{Names, UsageRow, group_digits};
use crate::state::ConsoleState;

/// Rows per page of the table.
pub(crate) const PAGE_ROWS: u32 = 50;
/// Days shown by default and at most in a chart.
const DEFAULT_DAYS: i64 = 30;
const MAX_CHART_DAYS: i64 = 92;

/// The filter form as it arrives in the query string (all text; blank = any).
#[derive(Debug, Default, Clone, Deserialize, Serialize)]
#[serde(default)]
pub(crate) struct UsageQuery {
    /// `1` once the filter form was submitted (otherwise the default date range applies).
    #[serde(skip_serializing_if = "String::is_empty")]
    pub f: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub from: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub to: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub status: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub key: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub user: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub account: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub group: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub model: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub size: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub page: String,
}

/// Whose usage a page may show.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Scope {
    /// One user's, whatever the query says.
    Own(UserId),
    /// Everyone's (admins), narrowed by the query.
    Everyone,
}

/// A parsed query.
#[derive(Debug, Clone)]
pub(crate) struct Selection {
    /// The query with defaults filled in (what the form shows).
    pub query: UsageQuery,
    /// The store filter (without paging).
    pub filter: UsageFilter,
    /// Size to match (the store cannot filter by size: done in memory).
    pub size: Option<String>,
    /// Zero-based page.
    pub page: u32,
    /// Parts of the query that were ignored, to tell the user.
    pub problems: Vec<String>,
}

fn parse_id(text: &str, what: &str, problems: &mut Vec<String>) -> Option<i64> {
    let text = text.trim();
    if text.is_empty() {
        return None;
    }
    let parsed = text.parse().ok();
    if parsed.is_none() {
        problems.push(format!("Ignored the {what} filter “{text}”."));
    }
    parsed
}

fn parse_status(text: &str, problems: &mut Vec<String>) -> Option<StatusFilter> {
    match text.trim() {
        "" => None,
        "ok" => Some(StatusFilter::Success),
        "failed" => Some(StatusFilter::Failure),
        code => match code.parse::<u16>() {
            Ok(code) if (100..=599).contains(&code) => Some(StatusFilter::Exact(code)),
            _ => {
                problems.push(format!("Ignored the status filter “{code}”."));
                None
            }
        },
    }
}

/// Reads the query into a store filter for `scope`.
pub(crate) fn select(mut query: UsageQuery, scope: Scope) -> Selection {
    let mut problems = Vec::new();
    let today = Timestamp::now().unix_day();
    if query.f.is_empty() && query.from.is_empty() && query.to.is_empty() {
        query.from = Timestamp::start_of_unix_day(today - (DEFAULT_DAYS - 1)).date_string();
    }
    let mut day = |text: &str, what: &str| {
        let text = text.trim();
        if text.is_empty() {
            return None;
        }
        let parsed = dates::parse_day(text);
        if parsed.is_none() {
            problems.push(format!("Ignored the {what} date “{text}” (use YYYY-MM-DD)."));
        }
        parsed
    };
    let since = day(&query.from.clone(), "from").map(Timestamp::start_of_unix_day);
    let until = day(&query.to.clone(), "to").map(|d| Timestamp::start_of_unix_day(d + 1));
    let mut filter = UsageFilter {
        since,
        until,
        status: parse_status(&query.status, &mut problems),
        key: parse_id(&query.key, "key", &mut problems).map(KeyId),
        ..UsageFilter::default()
    };
    match scope {
        Scope::Own(user) => filter.user = Some(user),
        Scope::Everyone => {
            filter.user = parse_id(&query.user, "user", &mut problems).map(UserId);
            filter.account = parse_id(&query.account, "account", &mut problems).map(AccountId);
            filter.group = parse_id(&query.group, "group", &mut problems).map(GroupId);
            filter.model = Some(query.model.trim().to_owned()).filter(|m| !m.is_empty());
        }
    }
    let size = match scope {
        Scope::Everyone => Some(query.size.trim().to_owned()).filter(|s| !s.is_empty()),
        Scope::Own(_) => None,
    };
    let page = query.page.trim().parse::<u32>().unwrap_or(0);
    Selection {
        query,
        filter,
        size,
        page,
        problems,
    }
}

/// Sums over the selection.
#[derive(Debug, Default)]
pub(crate) struct Totals {
    pub requests: String,
    pub failed: String,
    pub images: String,
    pub input_tokens: String,
    pub output_tokens: String,
    pub total_tokens: String,
}

/// Everything the usage pages show below the filters.
#[derive(Debug)]
pub(crate) struct UsageData {
    pub rows: Vec<UsageRow>,
    pub totals: Totals,
    pub images_chart: String,
    pub tokens_chart: String,
    pub chart_caption: String,
    /// Links to the newer and older pages, when there are any.
    pub newer: Option<String>,
    pub older: Option<String>,
}

fn page_link(base: &str, query: &UsageQuery, page: u32) -> String {
    let mut query = query.clone();
    query.f = "1".to_owned();
    query.page = if page == 0 {
        String::new()
    } else {
        page.to_string()
    };
    match serde_html_form::to_string(&query) {
        Ok(q) if !q.is_empty() => format!("{base}?{q}"),
        _ => base.to_owned(),
    }
}

/// Loads the table page, totals and charts of a selection.
pub(crate) async fn load(
    state: &ConsoleState,
    sel: &Selection,
    names: &Names,
    base: &str,
) -> PageResult<UsageData> {
    let offset = sel.page.saturating_mul(PAGE_ROWS);
    let filter = UsageFilter {
        size: sel.size.clone(),
        ..sel.filter.clone()
    };
    let page = UsageFilter {
        offset: Some(offset),
        limit: Some(PAGE_ROWS + 1),
        ..filter.clone()
    };
    let days = UsageFilter {
        limit: Some(UsageFilter::MAX_LIMIT),
        ..filter
    };
    let mut entries = state.store.list_usage(&page).await?;
    let daily = state.store.daily_usage(&days).await?;
    let page_rows = usize::try_from(PAGE_ROWS).unwrap_or(usize::MAX);
    let has_older = entries.len() > page_rows;
    entries.truncate(page_rows);
    let now = Timestamp::now();
    let rows = entries.iter().map(|e| UsageRow::new(e, names, now)).collect();
    let sum = |f: fn(&DailyUsage) -> u64| group_digits(daily.iter().map(f).sum());
    let totals = Totals {
        requests: sum(|d| d.requests),
        failed: sum(|d| d.failed_requests),
        images: sum(|d| d.images),
        input_tokens: sum(|d| d.input_tokens),
        output_tokens: sum(|d| d.output_tokens),
        total_tokens: sum(|d| d.total_tokens),
    };
    let (images_chart, tokens_chart, chart_caption) = charts(sel, &daily, now);
    Ok(UsageData {
        rows,
        totals,
        images_chart,
        tokens_chart,
        chart_caption,
        newer: (sel.page > 0).then(|| page_link(base, &sel.query, sel.page - 1)),
        older: has_older.then(|| page_link(base, &sel.query, sel.page + 1)),
    })
}

/// The two daily charts over the selected range (at most the last [`MAX_CHART_DAYS`] of it).
fn charts(sel: &Selection, daily: &[DailyUsage], now: Timestamp) -> (String, String, String) {
    let last = sel.filter.until.map_or(now.unix_day(), |u| u.unix_day() - 1);
    let first = sel
        .filter
        .since
        .map_or(last - (DEFAULT_DAYS - 1), Timestamp::unix_day);
    let first = first.max(last - (MAX_CHART_DAYS - 1)).min(last);
    let by_day: HashMap<i64, &DailyUsage> = daily.iter().map(|d| (d.day_start.unix_day(), d)).collect();
    let bars = |value: fn(&DailyUsage) -> u64| -> Vec<Bar> {
        (first..=last)
            .map(|day| Bar {
                day: Timestamp::start_of_unix_day(day).date_string(),
                value: by_day.get(&day).map_or(0, |d| value(d)),
            })
            .collect()
    };
    let images = bar_chart(
        "chart-images",
        "Images per day",
        "images",
        &bars(|d| d.images),
        "images",
    );
    let tokens = bar_chart(
        "chart-tokens",
        "Tokens per day",
        "tokens",
        &bars(|d| d.total_tokens),
        "tokens",
    );
    let caption = format!(
        "{} to {} (UTC)",
        Timestamp::start_of_unix_day(first).date_string(),
        Timestamp::start_of_unix_day(last).date_string()
    );
    (images, tokens, caption)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn own_scope_always_filters_by_the_user() {
        let query = UsageQuery {
            f: "1".into(),
            user: "99".into(),
            key: "7".into(),
            ..UsageQuery::default()
        };
        let sel = select(query, Scope::Own(UserId(3)));
        assert_eq!(sel.filter.user, Some(UserId(3)));
        assert_eq!(sel.filter.key, Some(KeyId(7)));
        assert_eq!(sel.filter.since, None);
    }

    #[test]
    fn defaults_to_the_last_thirty_days_until_the_form_is_used() {
        let sel = select(UsageQuery::default(), Scope::Everyone);
        let since = sel.filter.since.unwrap();
        assert_eq!(Timestamp::now().unix_day() - since.unix_day(), 29);
        assert_eq!(sel.query.from, since.date_string());
    }

    #[test]
    fn bad_values_are_reported_and_ignored() {
        let query = UsageQuery {
            f: "1".into(),
            from: "2025-02-30".into(),
            to: "2025-03-01".into(),
            status: "teapot".into(),
            account: "x".into(),
            size: "1024x1024".into(),
            ..UsageQuery::default()
        };
        let sel = select(query, Scope::Everyone);
        assert_eq!(sel.problems.len(), 3, "{:?}", sel.problems);
        assert_eq!(sel.filter.since, None);
        assert_eq!(sel.filter.until.unwrap().date_string(), "2025-03-02");
        assert_eq!(sel.size.as_deref(), Some("1024x1024"));
        let failed = select(
            UsageQuery {
                status: "failed".into(),
                ..UsageQuery::default()
            },
            Scope::Everyone,
        );
        assert_eq!(failed.filter.status, Some(StatusFilter::Failure));
    }
}

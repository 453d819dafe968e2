//! `/admin/usage` and `/admin/usage.csv`: everyone's usage.

use std::sync::Arc;

use axum::body::Body;
use axum::extract::State;
use axum::http::header::{self, HeaderValue};
use axum::response::{IntoResponse, Response};
use futures::stream::{self, StreamExt};
use imagegate_store::{Timestamp, UsageCursor, UsageFilter};

use crate::csv;
use crate::error::PageResult;
use crate::extract::Admin;
use crate::form::HtmlQuery;
use crate::layout::FlashView;
use crate::pages::render;
use crate::pages::usage::{AdminFilters, UsagePage};
use crate::pages::usage_table::{self, Names};
use crate::pages::usage_view::{self, Scope, Selection, UsageQuery};
use crate::session::Flash;
use crate::state::ConsoleState;

/// Records fetched per store call while exporting.
const EXPORT_BATCH: u32 = 1000;

async fn all_names(state: &ConsoleState) -> PageResult<Names> {
    let mut names = Names::default();
    for user in state.store.list_users().await? {
        names.users.insert(user.id.0, user.name);
    }
    for key in state.store.list_keys(None).await? {
        names.keys.insert(key.id.0, key.name);
    }
    for group in state.store.list_groups().await? {
        names.groups.insert(group.id.0, group.name);
    }
    for account in state.store.list_accounts().await? {
        names.accounts.insert(account.id.0, account.name);
    }
    Ok(names)
}

fn csv_link(query: &UsageQuery) -> String {
    let mut query = query.clone();
    query.page = String::new();
    query.f = "1".to_owned();
    match serde_html_form::to_string(&query) {
        Ok(q) if !q.is_empty() => format!("/admin/usage.csv?{q}"),
        _ => "/admin/usage.csv".to_owned(),
    }
}

/// `GET /admin/usage`
pub(crate) async fn page(
    State(state): State<ConsoleState>,
    Admin(mut me): Admin,
    HtmlQuery(query): HtmlQuery<UsageQuery>,
) -> PageResult {
    let mut layout = me.layout(&state, "All usage", "admin_usage").await?;
    let selection = usage_view::select(query, Scope::Everyone);
    layout.flashes.extend(
        selection
            .problems
            .iter()
            .map(|p| FlashView::from(Flash::error(p.clone()))),
    );
    let names = all_names(&state).await?;
    let data = usage_view::load(&state, &selection, &names, "/admin/usage").await?;
    let q = &selection.query;
    let admin = AdminFilters {
        users: usage_table::id_options(&names.users, &q.user, "All users"),
        accounts: usage_table::id_options(&names.accounts, &q.account, "All accounts"),
        groups: usage_table::id_options(&names.groups, &q.group, "All groups"),
        csv_link: csv_link(q),
    };
    render(&UsagePage {
        layout,
        heading: "All usage",
        keys: usage_table::id_options(&names.keys, &q.key, "All keys"),
        statuses: usage_table::status_options(&q.status),
        query: selection.query,
        data,
        admin: Some(admin),
        action: "/admin/usage",
    })
}

/// The next batch of CSV lines of an export, after the row at `cursor` (from the newest when
/// `None`), with the place of its last row; `None` when done. Paging by place, not by offset:
/// records written meanwhile cannot shift a row into two batches or out of all of them.
async fn next_batch(
    state: &ConsoleState,
    selection: &Selection,
    names: &Names,
    cursor: Option<UsageCursor>,
) -> Option<(Result<String, std::io::Error>, Option<UsageCursor>)> {
    let filter = UsageFilter {
        size: selection.size.clone(),
        older_than: cursor,
        offset: None,
        limit: Some(EXPORT_BATCH),
        ..selection.filter.clone()
    };
    match state.store.list_usage(&filter).await {
        Ok(entries) => {
            let last = entries.last()?.cursor();
            let text: String = entries.iter().map(|e| csv::row(e, names)).collect();
            Some((Ok(text), Some(last)))
        }
        Err(err) => {
            tracing::error!(error = %err, "usage export failed");
            Some((Err(std::io::Error::other("usage export failed")), None))
        }
    }
}

/// `GET /admin/usage.csv`: the selection as CSV, newest first, streamed in batches.
pub(crate) async fn csv_export(
    State(state): State<ConsoleState>,
    Admin(_me): Admin,
    HtmlQuery(query): HtmlQuery<UsageQuery>,
) -> PageResult<Response> {
    let mut selection = usage_view::select(query, Scope::Everyone);
    // Records written while the export runs must not shift the pages.
    let now = Timestamp::now();
    selection.filter.until = Some(selection.filter.until.map_or(now, |u| u.min(now)));
    let names = Arc::new(all_names(&state).await?);
    let selection = Arc::new(selection);
    let header = stream::once(async { Ok::<String, std::io::Error>(csv::HEADER.to_owned()) });
    // `Some(place)`: go on after `place` (`None` within: from the newest); `None`: stop.
    let rows = stream::unfold(Some(None), move |cursor: Option<Option<UsageCursor>>| {
        let (state, selection, names) = (state.clone(), selection.clone(), names.clone());
        async move {
            let cursor = cursor?;
            let (chunk, last) = next_batch(&state, &selection, &names, cursor).await?;
            // After an error (no last row), stop.
            Some((chunk, last.map(Some)))
        }
    });
    let filename = format!(
        "attachment; filename=\"imagegate-usage-{}.csv\"",
        now.date_string()
    );
    let disposition =
        HeaderValue::from_str(&filename).unwrap_or_else(|_| HeaderValue::from_static("attachment"));
    Ok((
        [
            (
                header::CONTENT_TYPE,
                HeaderValue::from_static("text/csv; charset=utf-8"),
            ),
            (header::CONTENT_DISPOSITION, disposition),
        ],
        Body::from_stream(header.chain(rows)),
    )
        .into_response())
}

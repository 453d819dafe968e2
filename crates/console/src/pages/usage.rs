//! `/usage`: the signed-in user's requests.

use askama::Template;
use axum::extract::State;

use crate::error::PageResult;
use crate::extract::SignedIn;
use crate::form::HtmlQuery;
use crate::layout::{FlashView, Layout};
use crate::pages::render;
use crate::pages::usage_table::{self, Names, SelectOption};
use crate::pages::usage_view::{self, Scope, UsageData, UsageQuery};
use crate::session::Flash;
use crate::state::ConsoleState;

/// The usage page, for one user or (with `admin`) for everyone.
#[derive(Template)]
#[template(path = "usage.html")]
pub(crate) struct UsagePage {
    pub layout: Layout,
    pub heading: &'static str,
    pub query: UsageQuery,
    pub keys: Vec<SelectOption>,
    pub statuses: Vec<SelectOption>,
    pub data: UsageData,
    /// Admin filters and columns.
    pub admin: Option<AdminFilters>,
    /// Where the filter form submits.
    pub action: &'static str,
}

/// The filters only admins have, and the CSV link.
#[derive(Debug)]
pub(crate) struct AdminFilters {
    pub users: Vec<SelectOption>,
    pub accounts: Vec<SelectOption>,
    pub groups: Vec<SelectOption>,
    /// `/admin/usage.csv?...` with the current filters.
    pub csv_link: String,
}

/// `GET /usage`
pub(crate) async fn page(
    State(state): State<ConsoleState>,
    mut me: SignedIn,
    HtmlQuery(query): HtmlQuery<UsageQuery>,
) -> PageResult {
    let mut layout = me.layout(&state, "Usage", "usage").await?;
    let selection = usage_view::select(query, Scope::Own(me.user.id));
    layout.flashes.extend(
        selection
            .problems
            .iter()
            .map(|p| FlashView::from(Flash::error(p.clone()))),
    );
    let mut names = Names::default();
    for key in state.store.list_keys(Some(me.user.id)).await? {
        names.keys.insert(key.id.0, key.name);
    }
    for group in state.store.list_groups().await? {
        names.groups.insert(group.id.0, group.name);
    }
    let data = usage_view::load(&state, &selection, &names, "/usage").await?;
    render(&UsagePage {
        layout,
        keys: usage_table::id_options(&names.keys, &selection.query.key, "All keys"),
        statuses: usage_table::status_options(&selection.query.status),
        heading: "Your usage",
        query: selection.query,
        data,
        admin: None,
        action: "/usage",
    })
}

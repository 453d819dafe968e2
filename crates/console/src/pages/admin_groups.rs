//! `/admin/groups`: groups of keys and accounts.

use std::collections::HashMap;

use askama::Template;
use axum::extract::State;
use imagegate_store::{GroupId, StoreError};
use serde::Deserialize;

use crate::dates;
use crate::error::PageResult;
use crate::extract::Admin;
use crate::form::{HtmlForm, non_blank};
use crate::layout::Layout;
use crate::pages::render;
use crate::session::Flash;
use crate::state::ConsoleState;

struct GroupRow {
    name: String,
    keys: usize,
    accounts: usize,
    /// Names of the accounts serving it.
    account_names: String,
    created: String,
}

#[derive(Template)]
#[template(path = "admin_groups.html")]
struct GroupsPage {
    layout: Layout,
    groups: Vec<GroupRow>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(crate) struct GroupForm {
    name: String,
}

/// `GET /admin/groups`
pub(crate) async fn list(State(state): State<ConsoleState>, Admin(mut me): Admin) -> PageResult {
    let layout = me.layout(&state, "Groups", "groups").await?;
    let mut keys: HashMap<GroupId, usize> = HashMap::new();
    for key in state.store.list_keys(None).await? {
        *keys.entry(key.group_id).or_default() += 1;
    }
    let accounts = state.store.list_accounts().await?;
    let groups = state
        .store
        .list_groups()
        .await?
        .into_iter()
        .map(|g| {
            let serving: Vec<&str> = accounts
                .iter()
                .filter(|a| a.groups.contains(&g.id))
                .map(|a| a.name.as_str())
                .collect();
            GroupRow {
                keys: keys.get(&g.id).copied().unwrap_or(0),
                accounts: serving.len(),
                account_names: serving.join(", "),
                created: dates::minute(g.created_at),
                name: g.name,
            }
        })
        .collect();
    render(&GroupsPage { layout, groups })
}

/// `POST /admin/groups`
pub(crate) async fn create(
    State(state): State<ConsoleState>,
    Admin(mut me): Admin,
    HtmlForm(form): HtmlForm<GroupForm>,
) -> PageResult {
    let Some(name) = non_blank(&form.name) else {
        return me
            .redirect_with(&state, Flash::error("Give the group a name."), "/admin/groups")
            .await;
    };
    let flash = match state.store.create_group(&name).await {
        Ok(group) => {
            tracing::info!(admin = %me.user.name, group = %group.name, "console: group added");
            Flash::success(format!(
                "Group “{}” added. Assign accounts to it on the accounts page.",
                group.name
            ))
        }
        Err(StoreError::Conflict(_)) => Flash::error(format!("A group named “{name}” already exists.")),
        Err(StoreError::Invalid(msg)) => Flash::error(format!("The group was not added: {msg}.")),
        Err(err) => return Err(err.into()),
    };
    me.redirect_with(&state, flash, "/admin/groups").await
}

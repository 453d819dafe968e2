//! `/admin/groups`: groups of keys and accounts.

use std::collections::HashMap;

use askama::Template;
use axum::extract::{Path, State};
use imagegate_store::{GroupId, StoreError, UserId};
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
    id: i64,
    name: String,
    /// Open to its members and the admins only.
    restricted: bool,
    /// Names of its members, for the table.
    member_names: String,
    /// Every user who is not an admin, checked when a member.
    member_checks: Vec<MemberCheck>,
    keys: usize,
    accounts: usize,
    /// Names of the accounts serving it.
    account_names: String,
    created: String,
}

/// A user who may be made a member of a group.
struct MemberCheck {
    id: i64,
    name: String,
    checked: bool,
}

#[derive(Template)]
#[template(path = "admin_groups.html")]
struct GroupsPage {
    layout: Layout,
    groups: Vec<GroupRow>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(crate) struct AccessForm {
    /// `open` (every user) or `members` (its members and the admins).
    access: String,
    /// Ids of the members, one field each.
    members: Vec<String>,
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
    let users: Vec<_> = state
        .store
        .list_users()
        .await?
        .into_iter()
        .filter(|u| !u.is_admin)
        .collect();
    let memberships = state.store.group_memberships().await?;
    let mut groups = Vec::new();
    for g in state.store.list_groups().await? {
        let members = memberships.get(&g.id).map_or(&[][..], Vec::as_slice);
        let serving: Vec<&str> = accounts
            .iter()
            .filter(|a| a.groups.contains(&g.id))
            .map(|a| a.name.as_str())
            .collect();
        let member_checks: Vec<MemberCheck> = users
            .iter()
            .map(|u| MemberCheck {
                id: u.id.0,
                name: u.name.clone(),
                checked: members.contains(&u.id),
            })
            .collect();
        let member_names: Vec<&str> = member_checks
            .iter()
            .filter(|m| m.checked)
            .map(|m| m.name.as_str())
            .collect();
        groups.push(GroupRow {
            id: g.id.0,
            restricted: g.restricted,
            member_names: member_names.join(", "),
            keys: keys.get(&g.id).copied().unwrap_or(0),
            accounts: serving.len(),
            account_names: serving.join(", "),
            created: dates::minute(g.created_at),
            name: g.name,
            member_checks,
        });
    }
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

/// `POST /admin/groups/{id}/access`: opens a group to every user, or restricts it to the checked
/// users (and the admins). The checked users become its members either way, so opening a group
/// and restricting it again keeps them.
pub(crate) async fn set_access(
    State(state): State<ConsoleState>,
    Admin(mut me): Admin,
    Path(id): Path<i64>,
    HtmlForm(form): HtmlForm<AccessForm>,
) -> PageResult {
    let group = state.store.group(GroupId(id)).await?;
    let restricted = match form.access.as_str() {
        "open" => false,
        "members" => true,
        _ => {
            return me
                .redirect_with(
                    &state,
                    Flash::error("Choose who may use the group."),
                    "/admin/groups",
                )
                .await;
        }
    };
    // Every member named by a user id that exists, and stored: else nothing changes.
    let parsed: Option<Vec<UserId>> = form.members.iter().map(|m| m.parse().ok().map(UserId)).collect();
    let stored = match parsed {
        None => None,
        Some(members) => match state.store.set_group_members(group.id, &members).await {
            Ok(()) => Some(members),
            Err(StoreError::NotFound { what: "user", .. }) => None,
            Err(err) => return Err(err.into()),
        },
    };
    let Some(members) = stored else {
        return me
            .redirect_with(
                &state,
                Flash::error("The form named an unknown user."),
                "/admin/groups",
            )
            .await;
    };
    state.store.set_group_restricted(group.id, restricted).await?;
    // Keys of this group cached on this replica see the change at once (other replicas within
    // their cache's ttl).
    for key in state.store.list_keys(None).await? {
        if key.group_id == group.id {
            state.backend.invalidate_key(&key.public_id);
        }
    }
    tracing::info!(
        admin = %me.user.name,
        group = %group.name,
        restricted,
        members = members.len(),
        "console: group access changed"
    );
    let flash = if restricted {
        Flash::success(format!(
            "Group “{}” is now open to its {} member(s) and the admins; other users' keys in it are refused.",
            group.name,
            members.len()
        ))
    } else {
        Flash::success(format!("Group “{}” is open to every user.", group.name))
    };
    me.redirect_with(&state, flash, "/admin/groups").await
}

//! `/admin/accounts`: upstream accounts with their live pool state.

use std::collections::HashMap;

use askama::Template;
use axum::extract::{Path, State};
use axum::response::Redirect;
use imagegate_dispatch::{AccountSnapshot, AccountStatus as PoolStatus, CooldownKind, LimitScope};
use imagegate_store::{
    Account, AccountId, AccountStatus, AccountUpdate, GroupId, NewAccount, StoreError, Timestamp,
};

use crate::dates;
use crate::error::{ConsoleError, PageResult};
use crate::extract::Admin;
use crate::form::HtmlForm;
use crate::layout::Layout;
use crate::pages::account_form::{AccountForm, AccountFormView, ParsedAccount};
use crate::pages::{ConfirmPage, render};
use crate::session::Flash;
use crate::state::ConsoleState;

/// An account as a table row.
struct AccountRow {
    id: i64,
    name: String,
    kind: &'static str,
    tier: &'static str,
    groups: String,
    status: String,
    status_class: &'static str,
    in_flight_standard: String,
    in_flight_large: String,
    cooldowns: Vec<Cooldown>,
    last_error: Option<LastErrorView>,
    calls_ok: String,
    calls_failed: String,
    credential: &'static str,
    enabled: bool,
}

/// A cooldown in force, as shown.
struct Cooldown {
    /// `until 12:03:04`
    until: String,
    /// `rate limited (image requests): 429 from upstream`
    detail: String,
}

/// The most recent failure, as shown.
struct LastErrorView {
    message: String,
    at: String,
}

#[derive(Template)]
#[template(path = "admin_accounts.html")]
struct AccountsPage {
    layout: Layout,
    accounts: Vec<AccountRow>,
    snapshot_error: Option<String>,
    form: AccountFormView,
}

#[derive(Template)]
#[template(path = "admin_account_edit.html")]
struct EditPage {
    layout: Layout,
    account_id: i64,
    account_name: String,
    form: AccountFormView,
}

fn cooldowns(snap: &AccountSnapshot, now: Timestamp) -> Vec<Cooldown> {
    snap.cooldowns
        .iter()
        .map(|c| {
            let kind = match c.kind {
                CooldownKind::RateLimited => "rate limited",
                CooldownKind::Forbidden => "forbidden",
                CooldownKind::CircuitOpen => "circuit open",
            };
            let scope = match c.scope {
                LimitScope::All => "all requests",
                LimitScope::ImagesOnly => "image requests",
            };
            Cooldown {
                until: format!("until {}", dates::short(dates::from_unix_millis(c.until.0), now)),
                detail: format!("{kind} ({scope}): {}", c.reason),
            }
        })
        .collect()
}

fn row(
    account: Account,
    snap: Option<&AccountSnapshot>,
    groups: &HashMap<GroupId, String>,
    now: Timestamp,
) -> AccountRow {
    let (status, status_class) = match (account.status, snap.map(|s| &s.status)) {
        (AccountStatus::Disabled, _) => ("disabled".to_owned(), "muted"),
        (AccountStatus::Error, _) => (
            format!("error: {}", account.status_reason.clone().unwrap_or_default()),
            "bad",
        ),
        (AccountStatus::Active, Some(PoolStatus::Error { reason })) => (format!("error: {reason}"), "bad"),
        (AccountStatus::Active, Some(PoolStatus::Disabled { reason })) => {
            (format!("disabled by the pool: {reason}"), "bad")
        }
        (AccountStatus::Active, Some(PoolStatus::Ok)) if snap.is_some_and(|s| !s.cooldowns.is_empty()) => {
            ("cooling down".to_owned(), "warn")
        }
        (AccountStatus::Active, Some(PoolStatus::Ok)) => ("active".to_owned(), "good"),
        (AccountStatus::Active, None) => ("not in the pool yet".to_owned(), "warn"),
    };
    let load = |in_flight: Option<u32>, limit: u32| format!("{} / {limit}", in_flight.unwrap_or(0));
    AccountRow {
        id: account.id.0,
        kind: account.kind.as_str(),
        tier: account.tier.as_str(),
        groups: account
            .groups
            .iter()
            .map(|g| groups.get(g).cloned().unwrap_or_else(|| format!("#{g}")))
            .collect::<Vec<_>>()
            .join(", "),
        status,
        status_class,
        in_flight_standard: load(snap.map(|s| s.in_flight.standard), account.concurrency_standard),
        in_flight_large: load(snap.map(|s| s.in_flight.large), account.concurrency_large),
        cooldowns: snap.map(|s| cooldowns(s, now)).unwrap_or_default(),
        last_error: snap.and_then(|s| s.last_error.as_ref()).map(|e| LastErrorView {
            message: e.message.clone(),
            at: dates::short(dates::from_unix_millis(e.at.0), now),
        }),
        calls_ok: snap.map_or_else(|| "—".to_owned(), |s| format!("{} ok", s.successes)),
        calls_failed: snap.map_or_else(String::new, |s| format!("{} failed", s.failures)),
        credential: if account.has_credential { "stored" } else { "none" },
        enabled: account.status != AccountStatus::Disabled,
        name: account.name,
    }
}

/// `GET /admin`: the accounts page.
pub(crate) async fn home() -> Redirect {
    Redirect::to("/admin/accounts")
}

/// `GET /admin/accounts`
pub(crate) async fn list(State(state): State<ConsoleState>, Admin(mut me): Admin) -> PageResult {
    let layout = me.layout(&state, "Accounts", "accounts").await?;
    let groups = state.store.list_groups().await?;
    let group_names: HashMap<GroupId, String> = groups.iter().map(|g| (g.id, g.name.clone())).collect();
    let (snapshots, snapshot_error) = match state.backend.pool_snapshot().await {
        Ok(snapshot) => (snapshot.accounts, None),
        Err(err) => (Vec::new(), Some(err)),
    };
    let by_id: HashMap<&str, &AccountSnapshot> = snapshots.iter().map(|s| (s.id.as_str(), s)).collect();
    let now = Timestamp::now();
    let accounts = state
        .store
        .list_accounts()
        .await?
        .into_iter()
        .map(|a| {
            let snap = by_id.get(a.id.to_string().as_str()).copied();
            row(a, snap, &group_names, now)
        })
        .collect();
    let form = AccountFormView::new_account(&groups);
    render(&AccountsPage {
        layout,
        accounts,
        snapshot_error,
        form,
    })
}

/// `POST /admin/accounts`
pub(crate) async fn create(
    State(state): State<ConsoleState>,
    Admin(mut me): Admin,
    HtmlForm(form): HtmlForm<AccountForm>,
) -> PageResult {
    let parsed = match form.parse() {
        Ok(parsed) => parsed,
        Err(msg) => {
            return me
                .redirect_with(&state, Flash::error(msg), "/admin/accounts")
                .await;
        }
    };
    let name = parsed.name.clone();
    let account = NewAccount {
        name: parsed.name,
        kind: parsed.kind,
        base_url: parsed.base_url,
        tier: parsed.tier,
        priority: parsed.priority,
        concurrency_standard: parsed.concurrency_standard,
        concurrency_large: parsed.concurrency_large,
        groups: parsed.groups,
        main_model: parsed.main_model,
        fallback_models: parsed.fallback_models,
        credential: parsed.credential,
    };
    match state.store.create_account(account).await {
        Ok(account) => {
            tracing::info!(admin = %me.user.name, account = %account.name, "console: account added");
            state.backend.accounts_changed().await;
            let flash = Flash::success(format!("Account “{name}” added."));
            me.redirect_with(&state, flash, "/admin/accounts").await
        }
        Err(StoreError::Invalid(msg) | StoreError::Conflict(msg)) => {
            let flash = Flash::error(format!("The account was not added: {msg}."));
            me.redirect_with(&state, flash, "/admin/accounts").await
        }
        Err(err) => Err(err.into()),
    }
}

async fn account(state: &ConsoleState, id: i64) -> PageResult<Account> {
    state.store.account(AccountId(id)).await.map_err(|err| match err {
        StoreError::NotFound { .. } => ConsoleError::NotFound,
        err => err.into(),
    })
}

/// `GET /admin/accounts/{id}`: the edit form.
pub(crate) async fn edit_form(
    State(state): State<ConsoleState>,
    Admin(mut me): Admin,
    Path(id): Path<i64>,
) -> PageResult {
    let account = account(&state, id).await?;
    let layout = me
        .layout(&state, &format!("Edit {}", account.name), "accounts")
        .await?;
    let groups = state.store.list_groups().await?;
    let form = AccountFormView::edit(&account, &groups);
    render(&EditPage {
        layout,
        account_id: account.id.0,
        account_name: account.name,
        form,
    })
}

/// `POST /admin/accounts/{id}`: saves the edit form.
pub(crate) async fn update(
    State(state): State<ConsoleState>,
    Admin(mut me): Admin,
    Path(id): Path<i64>,
    HtmlForm(form): HtmlForm<AccountForm>,
) -> PageResult {
    let account = account(&state, id).await?;
    let back = format!("/admin/accounts/{id}");
    let parsed = match form.parse() {
        Ok(parsed) => parsed,
        Err(msg) => return me.redirect_with(&state, Flash::error(msg), &back).await,
    };
    if moves_stored_credential(&account, &parsed) {
        let flash = Flash::error(
            "Nothing was saved: a new base URL needs the credential typed again (the stored one is \
             only ever sent where it was entered for), or removed.",
        );
        return me.redirect_with(&state, flash, &back).await;
    }
    let update = AccountUpdate {
        name: Some(parsed.name.clone()),
        base_url: Some(parsed.base_url),
        tier: Some(parsed.tier),
        priority: Some(parsed.priority),
        concurrency_standard: Some(parsed.concurrency_standard),
        concurrency_large: Some(parsed.concurrency_large),
        status: None,
        groups: Some(parsed.groups),
        main_model: Some(parsed.main_model),
        fallback_models: Some(parsed.fallback_models),
        // With the base URL, in one write: no replica reads the new URL with the old credential.
        credential: if parsed.credential.is_some() {
            Some(parsed.credential.clone())
        } else if parsed.clear_credential {
            Some(None)
        } else {
            None
        },
    };
    match state.store.update_account(account.id, update).await {
        Ok(_) => {}
        Err(StoreError::Invalid(msg) | StoreError::Conflict(msg)) => {
            let flash = Flash::error(format!("Nothing was saved: {msg}."));
            return me.redirect_with(&state, flash, &back).await;
        }
        Err(err) => return Err(err.into()),
    }
    let credential_note = if parsed.credential.is_some() {
        " The new credential is stored."
    } else if parsed.clear_credential {
        " The credential was removed."
    } else {
        ""
    };
    tracing::info!(admin = %me.user.name, account = %parsed.name, "console: account updated");
    state.backend.accounts_changed().await;
    let flash = Flash::success(format!("Account “{}” saved.{credential_note}", parsed.name));
    me.redirect_with(&state, flash, "/admin/accounts").await
}

/// Whether saving `parsed` would send the account's stored credential to another base URL: the
/// credential can be written but never read back in the console, and moving it would read it out
/// (to a server of the editor's choosing).
fn moves_stored_credential(account: &Account, parsed: &ParsedAccount) -> bool {
    account.has_credential
        && account.base_url != parsed.base_url
        && parsed.credential.is_none()
        && !parsed.clear_credential
}

async fn set_enabled(
    state: ConsoleState,
    mut me: crate::extract::SignedIn,
    id: i64,
    enabled: bool,
) -> PageResult {
    let account = account(&state, id).await?;
    let (status, reason, verb) = if enabled {
        (AccountStatus::Active, None, "enabled")
    } else {
        (
            AccountStatus::Disabled,
            Some(format!("disabled in the console by {}", me.user.name)),
            "disabled",
        )
    };
    state
        .store
        .set_account_status(account.id, status, reason.as_deref())
        .await?;
    tracing::info!(admin = %me.user.name, account = %account.name, verb, "console: account status");
    state.backend.accounts_changed().await;
    let flash = Flash::success(format!("Account “{}” {verb}.", account.name));
    me.redirect_with(&state, flash, "/admin/accounts").await
}

/// `POST /admin/accounts/{id}/disable`
pub(crate) async fn disable(
    State(state): State<ConsoleState>,
    Admin(me): Admin,
    Path(id): Path<i64>,
) -> PageResult {
    set_enabled(state, me, id, false).await
}

/// `POST /admin/accounts/{id}/enable`
pub(crate) async fn enable(
    State(state): State<ConsoleState>,
    Admin(me): Admin,
    Path(id): Path<i64>,
) -> PageResult {
    set_enabled(state, me, id, true).await
}

/// `POST /admin/accounts/{id}/test`: one small generation through the account.
pub(crate) async fn test(
    State(state): State<ConsoleState>,
    Admin(mut me): Admin,
    Path(id): Path<i64>,
) -> PageResult {
    let account = account(&state, id).await?;
    let flash = match state.backend.test_account(account.id).await {
        Ok(summary) => Flash::success(format!("Test of “{}” passed: {summary}", account.name)),
        Err(reason) => Flash::error(format!("Test of “{}” failed: {reason}", account.name)),
    };
    me.redirect_with(&state, flash, "/admin/accounts").await
}

/// `GET /admin/accounts/{id}/delete`: asks for confirmation.
pub(crate) async fn confirm_delete(
    State(state): State<ConsoleState>,
    Admin(mut me): Admin,
    Path(id): Path<i64>,
) -> PageResult {
    let account = account(&state, id).await?;
    let layout = me.layout(&state, "Delete account", "accounts").await?;
    render(&ConfirmPage {
        layout,
        heading: format!("Delete account “{}”?", account.name),
        message: "Requests stop going to it at once, and its stored credential is destroyed. Usage records keep its id."
            .to_owned(),
        action: format!("/admin/accounts/{}/delete", account.id),
        button: "Delete account",
        cancel: "/admin/accounts",
    })
}

/// `POST /admin/accounts/{id}/delete`
pub(crate) async fn delete(
    State(state): State<ConsoleState>,
    Admin(mut me): Admin,
    Path(id): Path<i64>,
) -> PageResult {
    let account = account(&state, id).await?;
    state.store.delete_account(account.id).await?;
    tracing::info!(admin = %me.user.name, account = %account.name, "console: account deleted");
    state.backend.accounts_changed().await;
    let flash = Flash::success(format!("Account “{}” deleted.", account.name));
    me.redirect_with(&state, flash, "/admin/accounts").await
}

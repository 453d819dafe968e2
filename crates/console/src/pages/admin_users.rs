//! `/admin/users`: who may use the gateway and the console.

use std::collections::HashMap;

use askama::Template;
use axum::extract::{Path, State};
use imagegate_store::{NewUser, Secret, StoreError, UserId};
use serde::Deserialize;

use crate::auth::{generate_password, hash_password};
use crate::dates;
use crate::error::{ConsoleError, PageResult};
use crate::extract::Admin;
use crate::form::{HtmlForm, non_blank};
use crate::layout::Layout;
use crate::pages::render;
use crate::session::{Flash, PasswordStamp, Reveal};
use crate::state::ConsoleState;

struct UserRow {
    id: i64,
    name: String,
    is_admin: bool,
    can_sign_in: bool,
    keys: usize,
    created: String,
    is_me: bool,
}

/// A generated password shown once.
struct NewPassword {
    user: String,
    password: String,
}

#[derive(Template)]
#[template(path = "admin_users.html")]
struct UsersPage {
    layout: Layout,
    users: Vec<UserRow>,
    new_password: Option<NewPassword>,
}

/// The posted add-user form. No `Debug`: it may hold a password.
#[derive(Default, Deserialize)]
#[serde(default)]
pub(crate) struct UserForm {
    name: String,
    password: String,
    admin: String,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(crate) struct AdminForm {
    admin: String,
}

/// `GET /admin/users`
pub(crate) async fn list(State(state): State<ConsoleState>, Admin(mut me): Admin) -> PageResult {
    let layout = me.layout(&state, "Users", "users").await?;
    let mut keys: HashMap<UserId, usize> = HashMap::new();
    for key in state.store.list_keys(None).await? {
        *keys.entry(key.user_id).or_default() += 1;
    }
    let users = state
        .store
        .list_users()
        .await?
        .into_iter()
        .map(|u| UserRow {
            id: u.id.0,
            is_admin: u.is_admin,
            can_sign_in: u.password_hash.is_some(),
            keys: keys.get(&u.id).copied().unwrap_or(0),
            created: dates::minute(u.created_at),
            is_me: u.id == me.user.id,
            name: u.name,
        })
        .collect();
    // Taken once everything else is read, as on the keys page.
    let reveal = me.take_reveal(&state).await?;
    let new_password = match reveal {
        Some(Reveal::Password { user, password }) => Some(NewPassword {
            user,
            password: password.expose().to_owned(),
        }),
        _ => None,
    };
    render(&UsersPage {
        layout,
        users,
        new_password,
    })
}

/// Hashes off the async executor.
async fn hash(password: Secret) -> PageResult<Result<String, String>> {
    let joined =
        tokio::task::spawn_blocking(move || hash_password(password.expose()).map_err(|e| e.to_string()))
            .await;
    joined.map_err(|_| ConsoleError::BadRequest("Password hashing was interrupted.".to_owned()))
}

/// `POST /admin/users`: adds a user with the given or a generated password.
pub(crate) async fn create(
    State(state): State<ConsoleState>,
    Admin(mut me): Admin,
    HtmlForm(form): HtmlForm<UserForm>,
) -> PageResult {
    let Some(name) = non_blank(&form.name) else {
        return me
            .redirect_with(&state, Flash::error("Give the user a name."), "/admin/users")
            .await;
    };
    let generated = form.password.is_empty();
    let password = Secret::new(if generated {
        generate_password()
    } else {
        form.password
    });
    let password_hash = match hash(password.clone()).await? {
        Ok(hash) => hash,
        Err(msg) => {
            return me
                .redirect_with(
                    &state,
                    Flash::error(format!("The user was not added: {msg}.")),
                    "/admin/users",
                )
                .await;
        }
    };
    let is_admin = !form.admin.is_empty();
    let created = state
        .store
        .create_user(NewUser {
            name: name.clone(),
            is_admin,
            password_hash: Some(password_hash),
        })
        .await;
    match created {
        Ok(user) => {
            tracing::info!(admin = %me.user.name, user = %user.name, is_admin, "console: user added");
            let role = if is_admin { "Admin" } else { "User" };
            if generated {
                let flash = Flash::success(format!(
                    "{role} “{name}” added. Hand over the password below: it is shown only once."
                ));
                me.redirect_revealing(
                    &state,
                    Reveal::Password { user: name, password },
                    flash,
                    "/admin/users",
                )
                .await
            } else {
                me.redirect_with(
                    &state,
                    Flash::success(format!("{role} “{name}” added.")),
                    "/admin/users",
                )
                .await
            }
        }
        Err(StoreError::Conflict(_)) => {
            me.redirect_with(
                &state,
                Flash::error(format!("A user named “{name}” already exists.")),
                "/admin/users",
            )
            .await
        }
        Err(StoreError::Invalid(msg)) => {
            me.redirect_with(
                &state,
                Flash::error(format!("The user was not added: {msg}.")),
                "/admin/users",
            )
            .await
        }
        Err(err) => Err(err.into()),
    }
}

async fn user(state: &ConsoleState, id: i64) -> PageResult<imagegate_store::User> {
    state.store.user(UserId(id)).await.map_err(|err| match err {
        StoreError::NotFound { .. } => ConsoleError::NotFound,
        err => err.into(),
    })
}

/// `POST /admin/users/{id}/password`: a new generated password, shown once; the user's sessions end.
pub(crate) async fn reset_password(
    State(state): State<ConsoleState>,
    Admin(mut me): Admin,
    Path(id): Path<i64>,
) -> PageResult {
    let user = user(&state, id).await?;
    let password = Secret::new(generate_password());
    let password_hash = match hash(password.clone()).await? {
        Ok(hash) => hash,
        Err(msg) => return me.redirect_with(&state, Flash::error(msg), "/admin/users").await,
    };
    state
        .store
        .set_user_password_hash(user.id, Some(&password_hash))
        .await?;
    // One's own reset ends one's other sessions (a stolen one among them) but not this one, which
    // now stands for the new password.
    let own = user.id == me.user.id;
    if own {
        me.session.password_stamp = PasswordStamp::of(&password_hash);
    }
    let keep = own.then_some(&me.key);
    state.sessions.remove_user(user.id, keep).await?;
    tracing::info!(admin = %me.user.name, user = %user.name, "console: password reset");
    let flash = Flash::success(format!(
        "New password for “{}”: shown below only once.",
        user.name
    ));
    me.redirect_revealing(
        &state,
        Reveal::Password {
            user: user.name,
            password,
        },
        flash,
        "/admin/users",
    )
    .await
}

/// `POST /admin/users/{id}/admin`: grants (`admin=1`) or revokes admin rights (not one's own).
pub(crate) async fn set_admin(
    State(state): State<ConsoleState>,
    Admin(mut me): Admin,
    Path(id): Path<i64>,
    HtmlForm(form): HtmlForm<AdminForm>,
) -> PageResult {
    let user = user(&state, id).await?;
    let grant = form.admin == "1";
    if user.id == me.user.id && !grant {
        return me
            .redirect_with(
                &state,
                Flash::error("You cannot remove your own admin rights."),
                "/admin/users",
            )
            .await;
    }
    state.store.set_user_admin(user.id, grant).await?;
    tracing::info!(admin = %me.user.name, user = %user.name, grant, "console: admin rights");
    let flash = if grant {
        Flash::success(format!("“{}” is now an admin.", user.name))
    } else {
        Flash::success(format!("“{}” is no longer an admin.", user.name))
    };
    me.redirect_with(&state, flash, "/admin/users").await
}

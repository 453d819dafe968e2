//! `/keys`: the signed-in user's API keys.

use std::collections::{HashMap, HashSet};

use askama::Template;
use axum::extract::{Path, State};
use axum::http::HeaderMap;
use imagegate_store::{ApiKeyRecord, GroupId, KeyId, KeyLimits, KeyStatus, NewApiKey, StoreError};
use serde::Deserialize;

use crate::dates;
use crate::error::{ConsoleError, PageResult};
use crate::extract::SignedIn;
use crate::form::HtmlForm;
use crate::layout::Layout;
use crate::pages::{ConfirmPage, render};
use crate::session::{Flash, Reveal};
use crate::state::ConsoleState;

/// A key as a table row.
struct KeyRow {
    id: i64,
    name: String,
    prefix: String,
    group: String,
    /// Its group is restricted and the user is no longer a member: the gateway refuses the key.
    group_closed: bool,
    created: String,
    last_used: String,
    status: &'static str,
    active: bool,
    /// Switched off by an administrator: its owner cannot switch it back on.
    suspended: bool,
}

/// A key shown once after creation, with ready-to-run snippets.
struct NewKeyView {
    name: String,
    key: String,
    curl: String,
    python: String,
}

struct GroupOption {
    id: i64,
    name: String,
    selected: bool,
}

#[derive(Template)]
#[template(path = "keys.html")]
struct KeysPage {
    layout: Layout,
    keys: Vec<KeyRow>,
    groups: Vec<GroupOption>,
    new_key: Option<NewKeyView>,
    base_url: String,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(crate) struct CreateKeyForm {
    name: String,
    group: String,
}

/// The gateway's base URL as clients should use it: the configured hint, or this request's host.
pub(crate) fn base_url(state: &ConsoleState, headers: &HeaderMap) -> String {
    if let Some(hint) = &state.config.base_url_hint {
        return hint.trim_end_matches('/').to_owned();
    }
    let header = |name: &str| headers.get(name).and_then(|v| v.to_str().ok()).map(str::trim);
    let host = header("x-forwarded-host")
        .or_else(|| header("host"))
        .unwrap_or("127.0.0.1:8080");
    let scheme = match header("x-forwarded-proto") {
        Some(proto) if proto.eq_ignore_ascii_case("https") => "https",
        _ => "http",
    };
    format!("{scheme}://{host}")
}

fn snippets(base_url: &str, key: &str) -> (String, String) {
    let curl = format!(
        "curl -sS {base_url}/v1/images/generations \\\n  -H \"Authorization: Bearer {key}\" \\\n  \
         -H \"Content-Type: application/json\" \\\n  \
         -d '{{\"model\": \"gpt-image-2\", \"prompt\": \"a lighthouse at dusk\", \"size\": \"1024x1024\"}}' \\\n  \
         | python3 -c 'import base64, json, sys; open(\"lighthouse.png\", \"wb\").write(base64.b64decode(json.load(sys.stdin)[\"data\"][0][\"b64_json\"]))'"
    );
    let python = format!(
        "import base64\nfrom openai import OpenAI\n\nclient = OpenAI(base_url=\"{base_url}/v1\", api_key=\"{key}\")\n\
         result = client.images.generate(model=\"gpt-image-2\", prompt=\"a lighthouse at dusk\", size=\"1024x1024\")\n\
         with open(\"lighthouse.png\", \"wb\") as f:\n    f.write(base64.b64decode(result.data[0].b64_json))"
    );
    (curl, python)
}

/// `GET /keys`
pub(crate) async fn list(
    State(state): State<ConsoleState>,
    headers: HeaderMap,
    mut me: SignedIn,
) -> PageResult {
    let layout = me.layout(&state, "API keys", "keys").await?;
    let group_names: HashMap<GroupId, String> = state
        .store
        .list_groups()
        .await?
        .into_iter()
        .map(|g| (g.id, g.name))
        .collect();
    let groups = state.store.groups_for(me.user.id).await?;
    let usable: HashSet<GroupId> = groups.iter().map(|g| g.id).collect();
    let now = imagegate_store::Timestamp::now();
    let records = state.store.list_keys(Some(me.user.id)).await?;
    // The group of the user's newest key still open to them, else `default`: a newcomer's second
    // key goes where the first one works (the demo's keys are in `demo`, whose account is the
    // simulator, while `default` may have no account at all).
    let newest_group = records
        .iter()
        .filter(|k| usable.contains(&k.group_id))
        .max_by_key(|k| (k.created_at, k.id.0))
        .map(|k| k.group_id);
    let keys = records
        .into_iter()
        .map(|k| KeyRow {
            id: k.id.0,
            prefix: k.masked(),
            group: group_names
                .get(&k.group_id)
                .cloned()
                .unwrap_or_else(|| format!("#{}", k.group_id)),
            group_closed: !usable.contains(&k.group_id),
            created: dates::minute(k.created_at),
            last_used: k
                .last_used_at
                .map_or_else(|| "never".to_owned(), |t| dates::short(t, now)),
            status: k.status.as_str(),
            active: k.status == KeyStatus::Active,
            suspended: k.status == KeyStatus::Suspended,
            name: k.name,
        })
        .collect();
    // Taken once everything else is read: a page that fails before it is shown keeps the secret
    // for the next try instead of losing it.
    let reveal = me.take_reveal(&state).await?;
    let base_url = base_url(&state, &headers);
    let new_key = match reveal {
        Some(Reveal::ApiKey { name, key }) => {
            let (curl, python) = snippets(&base_url, key.expose());
            Some(NewKeyView {
                name,
                key: key.expose().to_owned(),
                curl,
                python,
            })
        }
        _ => None,
    };
    let preselected = newest_group.or_else(|| {
        groups
            .iter()
            .find(|g| g.name == imagegate_store::DEFAULT_GROUP)
            .map(|g| g.id)
    });
    let groups = groups
        .into_iter()
        .map(|g| GroupOption {
            id: g.id.0,
            selected: Some(g.id) == preselected,
            name: g.name,
        })
        .collect();
    render(&KeysPage {
        layout,
        keys,
        groups,
        new_key,
        base_url,
    })
}

/// `POST /keys`: creates a key; the next page shows it once.
pub(crate) async fn create(
    State(state): State<ConsoleState>,
    mut me: SignedIn,
    HtmlForm(form): HtmlForm<CreateKeyForm>,
) -> PageResult {
    let name = form.name.trim().to_owned();
    if name.is_empty() {
        return me
            .redirect_with(&state, Flash::error("Give the key a name."), "/keys")
            .await;
    }
    let Ok(group_id) = form.group.parse::<i64>().map(GroupId) else {
        return me
            .redirect_with(&state, Flash::error("Choose a group for the key."), "/keys")
            .await;
    };
    if let Err(StoreError::NotFound { .. }) = state.store.group(group_id).await {
        return me
            .redirect_with(&state, Flash::error("That group does not exist."), "/keys")
            .await;
    }
    let created = state
        .store
        .create_key(NewApiKey {
            user_id: me.user.id,
            group_id,
            name: name.clone(),
            limits: KeyLimits::default(),
            fallback_ladder: false,
        })
        .await;
    match created {
        Ok(created) => {
            tracing::info!(user = %me.user.name, key = %created.record.public_id, "console: key created");
            let flash = Flash::success(format!(
                "Key “{name}” created. Copy it now: it will not be shown again."
            ));
            let reveal = Reveal::ApiKey {
                name,
                key: created.key,
            };
            me.redirect_revealing(&state, reveal, flash, "/keys").await
        }
        Err(StoreError::Forbidden(_)) => {
            me.redirect_with(
                &state,
                Flash::error("That group is open to its members only: ask an administrator to add you."),
                "/keys",
            )
            .await
        }
        Err(StoreError::Invalid(msg) | StoreError::Conflict(msg)) => {
            me.redirect_with(
                &state,
                Flash::error(format!("The key was not created: {msg}.")),
                "/keys",
            )
            .await
        }
        Err(err) => Err(err.into()),
    }
}

/// The signed-in user's key `id` (not deleted), else 404.
async fn own_key(state: &ConsoleState, me: &SignedIn, id: i64) -> PageResult<ApiKeyRecord> {
    match state.store.key(KeyId(id)).await {
        Ok(key) if key.user_id == me.user.id && key.status != KeyStatus::Deleted => Ok(key),
        Ok(_) | Err(StoreError::NotFound { .. }) => Err(ConsoleError::NotFound),
        Err(err) => Err(err.into()),
    }
}

/// `POST /keys/{id}/disable`
pub(crate) async fn disable(
    State(state): State<ConsoleState>,
    mut me: SignedIn,
    Path(id): Path<i64>,
) -> PageResult {
    let key = own_key(&state, &me, id).await?;
    if key.status == KeyStatus::Suspended {
        return suspended(&state, &mut me, &key).await;
    }
    match state.store.disable_key(key.id).await {
        Err(StoreError::Conflict(_)) => return suspended(&state, &mut me, &key).await,
        done => done?,
    };
    state.backend.invalidate_key(&key.public_id);
    let flash = Flash::success(format!(
        "Key “{}” disabled: requests with it are refused until you enable it.",
        key.name
    ));
    me.redirect_with(&state, flash, "/keys").await
}

/// The answer to a change of a key an administrator suspended.
async fn suspended(state: &ConsoleState, me: &mut SignedIn, key: &ApiKeyRecord) -> PageResult {
    let flash = Flash::error(format!(
        "Key “{}” was disabled by an administrator; only an administrator can enable it.",
        key.name
    ));
    me.redirect_with(state, flash, "/keys").await
}

/// `POST /keys/{id}/enable`
pub(crate) async fn enable(
    State(state): State<ConsoleState>,
    mut me: SignedIn,
    Path(id): Path<i64>,
) -> PageResult {
    let key = own_key(&state, &me, id).await?;
    if key.status == KeyStatus::Suspended {
        return suspended(&state, &mut me, &key).await;
    }
    match state.store.enable_key(key.id).await {
        // Suspended meanwhile.
        Err(StoreError::Conflict(_)) => return suspended(&state, &mut me, &key).await,
        done => done?,
    };
    state.backend.invalidate_key(&key.public_id);
    me.redirect_with(
        &state,
        Flash::success(format!("Key “{}” enabled.", key.name)),
        "/keys",
    )
    .await
}

/// `GET /keys/{id}/delete`: asks for confirmation.
pub(crate) async fn confirm_delete(
    State(state): State<ConsoleState>,
    mut me: SignedIn,
    Path(id): Path<i64>,
) -> PageResult {
    let key = own_key(&state, &me, id).await?;
    let layout = me.layout(&state, "Delete key", "keys").await?;
    render(&ConfirmPage {
        layout,
        heading: format!("Delete key “{}”?", key.name),
        message: format!(
            "{} stops working at once and cannot be restored. Its usage history is kept.",
            key.masked()
        ),
        action: format!("/keys/{}/delete", key.id),
        button: "Delete key",
        cancel: "/keys",
    })
}

/// `POST /keys/{id}/delete`
pub(crate) async fn delete(
    State(state): State<ConsoleState>,
    mut me: SignedIn,
    Path(id): Path<i64>,
) -> PageResult {
    let key = own_key(&state, &me, id).await?;
    state.store.delete_key(key.id).await?;
    state.backend.invalidate_key(&key.public_id);
    tracing::info!(user = %me.user.name, key = %key.public_id, "console: key deleted");
    me.redirect_with(
        &state,
        Flash::success(format!("Key “{}” deleted.", key.name)),
        "/keys",
    )
    .await
}

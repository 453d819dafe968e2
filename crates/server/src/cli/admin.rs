//! Administration without the browser: users, groups, keys, accounts and usage, on the database.

use std::io::Read;
use std::sync::Arc;

use imagegate_store::{
    Account, AccountKind, AccountStatus, AccountTier, AccountUpdate, ApiKeyRecord, GroupId, KeyLimits,
    MasterKey, NewAccount, NewApiKey, NewUser, Secret, Store, StoreError, UsageFilter,
};

use crate::cli::{
    AccountFields, AccountKindArg, AccountsCommand, GroupsCommand, KeysCommand, TierArg, UsageCommand,
    UsersCommand,
};

/// Why an admin command failed.
#[derive(Debug, thiserror::Error)]
pub enum AdminError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("{0}")]
    Usage(String),
    #[error("reading the credential: {0}")]
    Io(#[from] std::io::Error),
    #[error("output: {0}")]
    Json(#[from] serde_json::Error),
    #[error("master key: {0}")]
    Key(#[from] imagegate_store::CryptoError),
}

type Result<T> = std::result::Result<T, AdminError>;

pub async fn users(store: &Arc<dyn Store>, command: UsersCommand) -> Result<()> {
    match command {
        UsersCommand::Add {
            name,
            admin,
            password_stdin,
        } => {
            let password = if password_stdin {
                let mut text = String::new();
                std::io::stdin().read_to_string(&mut text)?;
                text.trim_end_matches(['\r', '\n']).to_owned()
            } else {
                imagegate_console::generate_password()
            };
            let hash =
                imagegate_console::hash_password(&password).map_err(|e| AdminError::Usage(e.to_string()))?;
            let user = NewUser {
                name,
                is_admin: admin,
                password_hash: Some(hash),
            };
            let user = store.create_user(user).await?;
            println!("{}", user.id);
            if !password_stdin {
                println!("password: {password}");
            }
        }
        UsersCommand::List { json } => {
            let users = store.list_users().await?;
            if json {
                println!("{}", serde_json::to_string_pretty(&users)?);
            } else {
                for user in users {
                    println!(
                        "{}\t{}\t{}",
                        user.id,
                        user.name,
                        if user.is_admin { "admin" } else { "user" }
                    );
                }
            }
        }
    }
    Ok(())
}

pub async fn groups(store: &Arc<dyn Store>, command: GroupsCommand) -> Result<()> {
    match command {
        GroupsCommand::Add { name } => println!("{}", store.create_group(&name).await?.id),
        GroupsCommand::List { json } => {
            let groups = store.list_groups().await?;
            if json {
                println!("{}", serde_json::to_string_pretty(&groups)?);
            } else {
                let users = store.list_users().await?;
                let memberships = store.group_memberships().await?;
                for group in groups {
                    let open_to = if group.restricted {
                        let members = memberships.get(&group.id).map_or(&[][..], Vec::as_slice);
                        let names: Vec<&str> = users
                            .iter()
                            .filter(|u| members.contains(&u.id))
                            .map(|u| u.name.as_str())
                            .collect();
                        format!("members: {}", names.join(","))
                    } else {
                        "every user".to_owned()
                    };
                    println!("{}\t{}\t{open_to}", group.id, group.name);
                }
            }
        }
        GroupsCommand::Restrict { name, members } => {
            let group = group_named(store, &name).await?;
            if let Some(members) = members {
                let mut ids = Vec::with_capacity(members.len());
                for member in members.iter().map(|m| m.trim()).filter(|m| !m.is_empty()) {
                    let user = store
                        .user_by_name(member)
                        .await?
                        .ok_or_else(|| AdminError::Usage(format!("no user named {member:?}")))?;
                    ids.push(user.id);
                }
                store.set_group_members(group, &ids).await?;
            }
            store.set_group_restricted(group, true).await?;
        }
        GroupsCommand::Open { name } => {
            let group = group_named(store, &name).await?;
            store.set_group_restricted(group, false).await?;
        }
    }
    Ok(())
}

pub async fn keys(store: &Arc<dyn Store>, command: KeysCommand) -> Result<()> {
    match command {
        KeysCommand::Create {
            user,
            group,
            name,
            max_concurrency,
            rpm,
            fallback_ladder,
        } => {
            let user = store
                .user_by_name(&user)
                .await?
                .ok_or_else(|| AdminError::Usage(format!("no user named {user:?}")))?;
            let group = group_named(store, &group).await?;
            let created = store
                .create_key(NewApiKey {
                    user_id: user.id,
                    group_id: group,
                    name,
                    limits: KeyLimits { max_concurrency, rpm },
                    fallback_ladder,
                })
                .await?;
            println!("{}", created.key.expose());
        }
        KeysCommand::List { user, json } => {
            let user_id = match user {
                Some(name) => Some(
                    store
                        .user_by_name(&name)
                        .await?
                        .ok_or_else(|| AdminError::Usage(format!("no user named {name:?}")))?
                        .id,
                ),
                None => None,
            };
            let keys = store.list_keys(user_id).await?;
            if json {
                println!("{}", serde_json::to_string_pretty(&keys)?);
            } else {
                for key in keys {
                    println!(
                        "{}\tsk-ig-{}-…\t{}\t{}",
                        key.id, key.public_id, key.name, key.status
                    );
                }
            }
        }
        KeysCommand::Disable { key } => {
            let record = find_key(store, &key).await?;
            store.suspend_key(record.id).await?;
            println!(
                "disabled key {} (suspended: only `keys enable` turns it on again)",
                record.id
            );
        }
        KeysCommand::Enable { key } => {
            let record = find_key(store, &key).await?;
            store.reinstate_key(record.id).await?;
            println!("enabled key {}", record.id);
        }
        KeysCommand::Delete { key } => {
            let record = find_key(store, &key).await?;
            store.delete_key(record.id).await?;
            println!("deleted key {}", record.id);
        }
    }
    Ok(())
}

async fn find_key(store: &Arc<dyn Store>, given: &str) -> Result<ApiKeyRecord> {
    if let Ok(id) = given.parse() {
        return Ok(store.key(id).await?);
    }
    let public_id = imagegate_store::keys::parse_key(given)
        .map(|parsed| parsed.public_id)
        .or_else(|| listed_public_id(given))
        .unwrap_or(given);
    store
        .list_keys(None)
        .await?
        .into_iter()
        .find(|k| k.public_id == public_id)
        .ok_or_else(|| AdminError::Usage(format!("no key {}", key_named(given))))
}

/// The public id of a key given as `keys list` prints it: `sk-ig-<public id>-…` (or `-...`).
fn listed_public_id(given: &str) -> Option<&str> {
    let rest = given.strip_prefix(imagegate_store::keys::KEY_PREFIX)?;
    rest.strip_suffix("-…").or_else(|| rest.strip_suffix("-..."))
}

/// How an error names the key it was given, never echoing a secret: a full key by its public id
/// alone, anything else that looks like a key not at all.
fn key_named(given: &str) -> String {
    use imagegate_store::keys::{KEY_PREFIX, parse_key};
    match parse_key(given) {
        Some(parsed) => format!("with the public id {:?}", parsed.public_id),
        None if given.contains(KEY_PREFIX) => {
            "matching the given text (not shown: it looks like a secret key)".to_owned()
        }
        None => format!("{given:?}"),
    }
}

async fn group_named(store: &Arc<dyn Store>, name: &str) -> Result<GroupId> {
    if name == imagegate_store::DEFAULT_GROUP {
        return Ok(store.default_group().await?.id);
    }
    Ok(store
        .group_by_name(name)
        .await?
        .ok_or_else(|| AdminError::Usage(format!("no group named {name:?}")))?
        .id)
}

pub async fn accounts(
    store: &Arc<dyn Store>,
    data_dir: &std::path::Path,
    command: AccountsCommand,
) -> Result<()> {
    match command {
        AccountsCommand::Add { name, kind, fields } => {
            let credential = read_credential(fields.credential_env.as_deref())?;
            let groups = group_ids(store, fields.groups.as_deref()).await?;
            let (main_model, fallback_models) = split_models(fields.main_models.clone());
            let account = store
                .create_account(NewAccount {
                    name,
                    kind: kind_of(kind),
                    base_url: fields.base_url.clone(),
                    tier: fields.tier.map_or(AccountTier::Plus, tier_of),
                    priority: fields.priority.unwrap_or(0),
                    concurrency_standard: fields.concurrency_standard.unwrap_or(4),
                    concurrency_large: fields.concurrency_large.unwrap_or(1),
                    groups,
                    main_model,
                    fallback_models,
                    credential: Some(credential),
                })
                .await?;
            println!("{}", account.id);
        }
        AccountsCommand::List { json } => {
            let accounts = store.list_accounts().await?;
            let live = crate::cli::live::pool_state(data_dir).await;
            if json {
                println!(
                    "{}",
                    serde_json::to_string_pretty(&crate::cli::live::merge(&accounts, &live))?
                );
            } else {
                for a in &accounts {
                    print_account(a);
                    if let Some(state) = live.as_ref().ok().and_then(|l| crate::cli::live::entry(l, a.id)) {
                        println!("\t{}", crate::cli::live::summary(state));
                    }
                }
                if let Err(why) = &live {
                    println!("(no live state: {why})");
                }
            }
        }
        AccountsCommand::Update {
            account,
            fields,
            credential_stdin,
            active,
        } => {
            let found = find_account(store, &account).await?;
            let mut update = account_update(store, &fields, active).await?;
            if credential_stdin || fields.credential_env.is_some() {
                update.credential = Some(Some(read_credential(fields.credential_env.as_deref())?));
            }
            store.update_account(found.id, update).await?;
            println!("updated account {}", found.id);
        }
        AccountsCommand::Remove { account } => {
            let found = find_account(store, &account).await?;
            store.delete_account(found.id).await?;
            println!("removed account {}", found.id);
        }
        AccountsCommand::Rekey { .. } => {
            let done = imagegate_store::reseal_credentials(store.as_ref()).await?;
            println!(
                "resealed {} credential(s) under the current master key",
                done.resealed
            );
            if !done.unreadable.is_empty() {
                let ids: Vec<String> = done.unreadable.iter().map(|id| id.to_string()).collect();
                return Err(AdminError::Usage(format!(
                    "no key given opens the credential of account(s) {}: left as they were (after a \
                     master key change, give the key being replaced with --previous-key-file or {})",
                    ids.join(", "),
                    imagegate_store::PREVIOUS_MASTER_KEY_ENV
                )));
            }
        }
    }
    Ok(())
}

/// The key being replaced in a rotation, if any: from `file`, else from
/// `IMAGEGATE_PREVIOUS_MASTER_KEY`.
pub fn previous_key(file: Option<&std::path::Path>) -> Result<Option<MasterKey>> {
    Ok(match file {
        Some(path) => Some(MasterKey::read_file(path)?),
        None => MasterKey::previous_from_env()?,
    })
}

fn print_account(a: &Account) {
    println!(
        "{}\t{}\t{}\t{}\tpriority {}\tstandard {}\tlarge {}\t{}{}",
        a.id,
        a.name,
        a.kind,
        a.tier,
        a.priority,
        a.concurrency_standard,
        a.concurrency_large,
        a.status,
        a.status_reason
            .as_deref()
            .map(|r| format!(" ({r})"))
            .unwrap_or_default()
    );
}

async fn account_update(
    store: &Arc<dyn Store>,
    fields: &AccountFields,
    active: Option<bool>,
) -> Result<AccountUpdate> {
    let groups = match &fields.groups {
        Some(names) => Some(group_ids(store, Some(names)).await?),
        None => None,
    };
    let models = fields.main_models.clone().map(|m| split_models(Some(m)));
    Ok(AccountUpdate {
        base_url: fields.base_url.clone().map(Some),
        tier: fields.tier.map(tier_of),
        priority: fields.priority,
        concurrency_standard: fields.concurrency_standard,
        concurrency_large: fields.concurrency_large,
        status: active.map(|on| {
            (
                if on {
                    AccountStatus::Active
                } else {
                    AccountStatus::Disabled
                },
                None,
            )
        }),
        groups,
        main_model: models.as_ref().map(|(main, _)| main.clone()),
        fallback_models: models.map(|(_, rest)| rest),
        ..AccountUpdate::default()
    })
}

async fn find_account(store: &Arc<dyn Store>, given: &str) -> Result<Account> {
    if let Ok(id) = given.parse() {
        return Ok(store.account(id).await?);
    }
    store
        .account_by_name(given)
        .await?
        .ok_or_else(|| AdminError::Usage(format!("no account {given:?}")))
}

async fn group_ids(store: &Arc<dyn Store>, names: Option<&[String]>) -> Result<Vec<GroupId>> {
    let defaults = [imagegate_store::DEFAULT_GROUP.to_owned()];
    let names = names.filter(|n| !n.is_empty()).unwrap_or(&defaults);
    let mut ids = Vec::with_capacity(names.len());
    for name in names {
        ids.push(group_named(store, name).await?);
    }
    Ok(ids)
}

fn split_models(models: Option<Vec<String>>) -> (Option<String>, Vec<String>) {
    let mut models = models.unwrap_or_default().into_iter().filter(|m| !m.is_empty());
    let main = models.next();
    (main, models.collect())
}

/// The credential from the named environment variable, else from stdin; never echoed.
fn read_credential(env: Option<&str>) -> Result<Secret> {
    let text = match env {
        Some(name) => std::env::var(name)
            .map_err(|_| AdminError::Usage(format!("environment variable {name} is not set")))?,
        None => {
            let mut text = String::new();
            std::io::stdin().read_to_string(&mut text)?;
            text
        }
    };
    let text = text.trim();
    if text.is_empty() {
        return Err(AdminError::Usage("the credential is empty".to_owned()));
    }
    Ok(Secret::new(text.to_owned()))
}

fn kind_of(kind: AccountKindArg) -> AccountKind {
    match kind {
        AccountKindArg::Openai => AccountKind::Openai,
        AccountKindArg::Codex => AccountKind::Codex,
        AccountKindArg::Sim => AccountKind::Sim,
    }
}

fn tier_of(tier: TierArg) -> AccountTier {
    match tier {
        TierArg::Free => AccountTier::Free,
        TierArg::Plus => AccountTier::Plus,
        TierArg::Team => AccountTier::Team,
        TierArg::Pro => AccountTier::Pro,
    }
}

pub async fn usage(store: &Arc<dyn Store>, command: UsageCommand) -> Result<()> {
    match command {
        UsageCommand::List { json, limit } => list_usage(store, json, limit).await,
        UsageCommand::Replay { files } => replay_usage(store, &files).await,
    }
}

async fn replay_usage(store: &Arc<dyn Store>, files: &[std::path::PathBuf]) -> Result<()> {
    /// Lines listed per file and kind of problem; the rest are counted.
    const LISTED: usize = 100;
    let mut incomplete = Vec::new();
    for path in files {
        let done = match imagegate_store::replay_usage_file(store.as_ref(), path).await {
            Ok(done) => done,
            // The next file may be readable.
            Err(error @ imagegate_store::ReplayError::Read { .. }) => {
                println!("{error}");
                incomplete.push(path.display().to_string());
                continue;
            }
            Err(error) => return Err(AdminError::Usage(error.to_string())),
        };
        println!(
            "{}: {} record(s) inserted, {} already stored",
            path.display(),
            done.inserted,
            done.already_stored
        );
        for refused in done.refused.iter().take(LISTED) {
            println!(
                "  line {}: record {} refused by the database: {}",
                refused.line, refused.request_id, refused.reason
            );
        }
        print_more(done.refused.len(), LISTED, "refused record(s)");
        for unreadable in done.unreadable.iter().take(LISTED) {
            println!(
                "  line {}: not a usage record: {}",
                unreadable.line, unreadable.reason
            );
        }
        print_more(done.unreadable.len(), LISTED, "line(s) that are not records");
        if done.is_complete() {
            println!("  every record of the file is stored; it can be removed");
        } else {
            incomplete.push(path.display().to_string());
        }
    }
    if incomplete.is_empty() {
        Ok(())
    } else {
        Err(AdminError::Usage(format!(
            "not every record was stored, from {}",
            incomplete.join(", ")
        )))
    }
}

fn print_more(count: usize, listed: usize, what: &str) {
    if count > listed {
        println!("  and {} more {what}", count - listed);
    }
}

async fn list_usage(store: &Arc<dyn Store>, json: bool, limit: u32) -> Result<()> {
    let entries = store
        .list_usage(&UsageFilter {
            limit: Some(limit),
            ..UsageFilter::default()
        })
        .await?;
    if json {
        println!("{}", serde_json::to_string_pretty(&entries)?);
        return Ok(());
    }
    for e in entries {
        let r = &e.record;
        println!(
            "{}\t{}\t{}\t{}\t{}\t{}\t{}\ttokens {}\t{} ms",
            r.created_at,
            r.request_id,
            r.endpoint,
            r.model,
            r.size_produced
                .as_deref()
                .or(r.size_requested.as_deref())
                .unwrap_or("-"),
            r.quality_produced
                .as_deref()
                .or(r.quality_requested.as_deref())
                .unwrap_or("-"),
            r.status,
            r.tokens.total,
            r.latency_ms
        );
    }
    Ok(())
}

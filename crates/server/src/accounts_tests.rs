#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::time::Duration;

use imagegate_dispatch::{DispatchConfig, MemoryPoolState, Outcome, SystemClock};
use imagegate_store::{AccountUpdate, MasterKey, NewAccount, Secret, connect};

use super::*;

/// A directory over a fresh SQLite store holding one active account, the account's pool id, and
/// the store.
async fn directory() -> (
    AccountDirectory,
    imagegate_dispatch::AccountId,
    Arc<dyn Store>,
    tempfile::TempDir,
) {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}?mode=rwc", dir.path().join("t.db").display());
    let store = connect(&url, &MasterKey::from_bytes([7; 32])).await.unwrap();
    let group = store.create_group("g").await.unwrap();
    let account = store
        .create_account(NewAccount {
            name: "a".to_owned(),
            kind: AccountKind::Sim,
            base_url: Some("http://127.0.0.1:1/v1".to_owned()),
            tier: AccountTier::Pro,
            priority: 0,
            concurrency_standard: 4,
            concurrency_large: 1,
            groups: vec![group.id],
            main_model: None,
            fallback_models: Vec::new(),
            credential: Some(Secret::new("sk-test")),
        })
        .await
        .unwrap();
    let state = Arc::new(MemoryPoolState::new(imagegate_dispatch::CooldownPolicy::default()));
    let dispatcher = Arc::new(Dispatcher::new(
        state,
        Arc::new(SystemClock),
        DispatchConfig::default(),
    ));
    let directory = AccountDirectory::new(Arc::clone(&store), dispatcher);
    directory.refresh().await.unwrap();
    (directory, dispatch_id(account.id), store, dir)
}

async fn pool_status(
    directory: &AccountDirectory,
    id: &imagegate_dispatch::AccountId,
) -> imagegate_dispatch::AccountStatus {
    let snapshot = directory.dispatcher.snapshot().await.unwrap();
    let account = snapshot.accounts.iter().find(|a| &a.id == id).unwrap();
    account.status.clone()
}

async fn refused(directory: &AccountDirectory, id: &imagegate_dispatch::AccountId) {
    let outcome = Outcome::AuthFailed {
        reason: "invalid_api_key".to_owned(),
    };
    directory.dispatcher.record_outcome(id, &outcome).await.unwrap();
}

async fn set_status(store: &Arc<dyn Store>, id: imagegate_store::AccountId, status: AccountStatus) {
    let update = AccountUpdate {
        status: Some((status, None)),
        ..AccountUpdate::default()
    };
    store.update_account(id, update).await.unwrap();
}

#[tokio::test]
async fn an_account_switched_back_on_forgets_the_failures_from_before_the_switch() {
    let (directory, id, store, _dir) = directory().await;
    let row = imagegate_store::AccountId(id.as_str().parse().unwrap());
    refused(&directory, &id).await;
    set_status(&store, row, AccountStatus::Error).await;
    directory.refresh().await.unwrap();
    tokio::time::sleep(Duration::from_millis(5)).await;
    set_status(&store, row, AccountStatus::Active).await;
    directory.refresh().await.unwrap();
    assert_eq!(
        pool_status(&directory, &id).await,
        imagegate_dispatch::AccountStatus::Ok,
        "the operator's fix clears the failure it fixed"
    );
}

#[tokio::test]
async fn a_failure_learnt_after_the_switch_back_on_stands() {
    let (directory, id, store, _dir) = directory().await;
    let row = imagegate_store::AccountId(id.as_str().parse().unwrap());
    refused(&directory, &id).await;
    set_status(&store, row, AccountStatus::Error).await;
    directory.refresh().await.unwrap();
    set_status(&store, row, AccountStatus::Active).await;
    tokio::time::sleep(Duration::from_millis(5)).await;
    // Another replica, which saw the switch first, finds the credential refused again before
    // this one notices the switch.
    refused(&directory, &id).await;
    directory.refresh().await.unwrap();
    assert!(
        matches!(
            pool_status(&directory, &id).await,
            imagegate_dispatch::AccountStatus::Error { .. }
        ),
        "a failure from after the operator's change is not the one the operator fixed"
    );
}

async fn limited(directory: &AccountDirectory, id: &imagegate_dispatch::AccountId) {
    let outcome = Outcome::RateLimited {
        reset_at: None,
        scope: imagegate_dispatch::LimitScope::All,
    };
    directory.dispatcher.record_outcome(id, &outcome).await.unwrap();
}

async fn cooling(directory: &AccountDirectory, id: &imagegate_dispatch::AccountId) -> bool {
    let snapshot = directory.dispatcher.snapshot().await.unwrap();
    let account = snapshot.accounts.iter().find(|a| &a.id == id).unwrap();
    !account.cooldowns.is_empty()
}

#[tokio::test]
async fn switched_back_on_an_account_forgets_its_old_cooldown_but_not_a_new_one() {
    let (directory, id, store, _dir) = directory().await;
    let row = imagegate_store::AccountId(id.as_str().parse().unwrap());
    limited(&directory, &id).await;
    set_status(&store, row, AccountStatus::Disabled).await;
    directory.refresh().await.unwrap();
    tokio::time::sleep(Duration::from_millis(5)).await;
    set_status(&store, row, AccountStatus::Active).await;
    directory.refresh().await.unwrap();
    assert!(
        !cooling(&directory, &id).await,
        "the cooldown from before the switch is forgotten"
    );

    set_status(&store, row, AccountStatus::Disabled).await;
    directory.refresh().await.unwrap();
    set_status(&store, row, AccountStatus::Active).await;
    tokio::time::sleep(Duration::from_millis(5)).await;
    limited(&directory, &id).await;
    directory.refresh().await.unwrap();
    assert!(
        cooling(&directory, &id).await,
        "a cooldown learnt after the switch stands"
    );
}

#[tokio::test]
async fn a_process_starting_keeps_the_cooldowns_the_pool_holds() {
    // A shared pool state (Redis) keeps what other replicas learnt across this one's restart.
    let (directory, id, store, _dir) = directory().await;
    let row = imagegate_store::AccountId(id.as_str().parse().unwrap());
    limited(&directory, &id).await;
    tokio::time::sleep(Duration::from_millis(5)).await;
    // The operator edits the row (not switching it on: it was on).
    let update = AccountUpdate {
        priority: Some(3),
        ..AccountUpdate::default()
    };
    store.update_account(row, update).await.unwrap();
    let restarted = AccountDirectory::new(Arc::clone(&store), Arc::clone(&directory.dispatcher));
    restarted.refresh().await.unwrap();
    assert!(
        cooling(&restarted, &id).await,
        "an edit is no fix of a rate limit"
    );
}

#[tokio::test]
async fn a_credential_is_never_paired_with_the_base_url_it_replaced() {
    let (directory, id, store, _dir) = directory().await;
    let row = imagegate_store::AccountId(id.as_str().parse().unwrap());
    // A refresh lists the account; the operator then moves it to another host with another key
    // before the refresh reads the credential.
    let listed = store.account(row).await.unwrap();
    tokio::time::sleep(Duration::from_millis(5)).await;
    let moved = AccountUpdate {
        base_url: Some(Some("http://127.0.0.2:1/v1".to_owned())),
        credential: Some(Some(Secret::new("sk-for-the-new-host"))),
        ..AccountUpdate::default()
    };
    store.update_account(row, moved).await.unwrap();
    assert!(
        matches!(directory.build_target(&listed).await.unwrap(), Built::RowChanged),
        "the new key is not sent to the old host"
    );
    // The next refresh builds the account from its new row.
    directory.refresh().await.unwrap();
    let target = directory.target(&id).unwrap();
    assert_eq!(target.base_url, "http://127.0.0.2:1/v1");
    assert_eq!(target.credential.expose(), "sk-for-the-new-host");
}

//! Upstream accounts and encrypted credentials.

use std::sync::Arc;

use imagegate_store::{
    AccountKind, AccountStatus, AccountTier, AccountUpdate, CryptoError, MasterKey, NewAccount, Secret,
    StoreError,
};

use crate::common::TestDb;

crate::on_every_backend!(
    account_crud,
    credential_is_encrypted_at_rest,
    credentials_move_to_a_new_master_key,
    a_credential_opens_only_in_its_own_account_row,
    resealing_never_writes_over_a_credential_refreshed_meanwhile,
    a_refresh_replaces_only_the_credential_it_refreshed,
    a_new_base_url_and_its_credential_are_written_together,
    an_account_is_marked_failed_only_while_it_holds_the_refused_credential,
    a_refresh_is_saved_over_its_credential_resealed_meanwhile,
    a_credential_is_read_with_the_time_of_its_row
);

async fn an_account_is_marked_failed_only_while_it_holds_the_refused_credential(db: Arc<TestDb>) {
    let store = db.store.as_ref();
    let revoked = Secret::new("sk-revoked-0123456789");
    let account = store
        .create_account(NewAccount {
            credential: Some(revoked.clone()),
            ..NewAccount::new("rotated", AccountKind::Openai)
        })
        .await
        .unwrap();
    // An edit that keeps the credential changes nothing.
    let edit = AccountUpdate {
        priority: Some(4),
        ..AccountUpdate::default()
    };
    store.update_account(account.id, edit).await.unwrap();
    // The operator replaces the revoked key while a request that used it is still out.
    let fresh = Secret::new("sk-fresh-0123456789");
    let rotate = AccountUpdate {
        credential: Some(Some(fresh.clone())),
        ..AccountUpdate::default()
    };
    store.update_account(account.id, rotate).await.unwrap();
    assert!(
        !store
            .mark_account_failed(account.id, "401 from upstream", Some(&revoked))
            .await
            .unwrap(),
        "the refusal of the old key is not the new key's"
    );
    let kept = store.account(account.id).await.unwrap();
    assert_eq!((kept.status, kept.status_reason), (AccountStatus::Active, None));
    // A refusal of the key the row holds marks it.
    assert!(
        store
            .mark_account_failed(account.id, "401 from upstream", Some(&fresh))
            .await
            .unwrap()
    );
    let failed = store.account(account.id).await.unwrap();
    assert_eq!(failed.status, AccountStatus::Error);
    assert_eq!(failed.status_reason.as_deref(), Some("401 from upstream"));
    // Without a credential to compare, the account is marked whatever it holds.
    store
        .set_account_status(account.id, AccountStatus::Active, None)
        .await
        .unwrap();
    assert!(
        store
            .mark_account_failed(account.id, "refresh refused", None)
            .await
            .unwrap()
    );
    assert_eq!(
        store.account(account.id).await.unwrap().status,
        AccountStatus::Error
    );
    // An account removed meanwhile is not marked, with its credential or without.
    store.delete_account(account.id).await.unwrap();
    for refused in [Some(&fresh), None] {
        let marked = store.mark_account_failed(account.id, "401", refused).await;
        assert!(matches!(marked, Ok(false)), "{marked:?}");
    }
}

async fn a_new_base_url_and_its_credential_are_written_together(db: Arc<TestDb>) {
    let store = db.store.as_ref();
    let old = Secret::new("sk-old-0123456789");
    let account = store
        .create_account(NewAccount {
            base_url: Some("https://old.example/v1".into()),
            credential: Some(old.clone()),
            ..NewAccount::new("moved", AccountKind::Openai)
        })
        .await
        .unwrap();
    store
        .create_account(NewAccount::new("taken", AccountKind::Openai))
        .await
        .unwrap();
    let new = Secret::new("sk-new-0123456789");
    let moved = |name: &str| AccountUpdate {
        name: Some(name.to_owned()),
        base_url: Some(Some("https://new.example/v1".into())),
        credential: Some(Some(new.clone())),
        ..AccountUpdate::default()
    };
    // A failing update (the name is another account's) writes neither.
    let refused = store.update_account(account.id, moved("taken")).await;
    assert!(matches!(refused, Err(StoreError::Conflict(_))), "{refused:?}");
    let unchanged = store.account(account.id).await.unwrap();
    assert_eq!(unchanged.base_url.as_deref(), Some("https://old.example/v1"));
    assert_eq!(
        store.account_credential(account.id).await.unwrap(),
        Some(old.clone())
    );
    assert_eq!(unchanged.updated_at, account.updated_at);

    let updated = store.update_account(account.id, moved("moved")).await.unwrap();
    assert_eq!(updated.base_url.as_deref(), Some("https://new.example/v1"));
    assert!(updated.has_credential);
    assert_eq!(
        store.account_credential(account.id).await.unwrap(),
        Some(new.clone())
    );
    let stored = db
        .raw_bytes("SELECT credential FROM accounts WHERE name = 'moved'")
        .await;
    let plaintext = new.expose().as_bytes();
    assert!(
        !stored[0].windows(plaintext.len()).any(|w| w == plaintext),
        "stored encrypted"
    );

    // `Some(None)` removes it; `None` leaves it as it is.
    let cleared = AccountUpdate {
        credential: Some(None),
        ..AccountUpdate::default()
    };
    assert!(
        !store
            .update_account(account.id, cleared)
            .await
            .unwrap()
            .has_credential
    );
    let kept = AccountUpdate {
        priority: Some(3),
        ..AccountUpdate::default()
    };
    store
        .update_account(
            account.id,
            AccountUpdate {
                credential: Some(Some(new.clone())),
                ..AccountUpdate::default()
            },
        )
        .await
        .unwrap();
    store.update_account(account.id, kept).await.unwrap();
    assert_eq!(store.account_credential(account.id).await.unwrap(), Some(new));
}

async fn a_refresh_replaces_only_the_credential_it_refreshed(db: Arc<TestDb>) {
    let store = db.store.as_ref();
    let first = Secret::new(r#"{"access_token":"at-1","refresh_token":"rt-1"}"#);
    let account = store
        .create_account(NewAccount {
            credential: Some(first.clone()),
            ..NewAccount::new("codex-1", AccountKind::Codex)
        })
        .await
        .unwrap();
    let second = Secret::new(r#"{"access_token":"at-2","refresh_token":"rt-2"}"#);
    assert!(
        store
            .replace_account_credential(account.id, &first, &second)
            .await
            .unwrap()
    );
    assert_eq!(
        store.account_credential(account.id).await.unwrap(),
        Some(second.clone())
    );

    // Another refresh of the first (a replica that had not seen the second): left alone.
    let stale = Secret::new(r#"{"access_token":"at-x","refresh_token":"rt-x"}"#);
    assert!(
        !store
            .replace_account_credential(account.id, &first, &stale)
            .await
            .unwrap()
    );
    assert_eq!(
        store.account_credential(account.id).await.unwrap(),
        Some(second.clone())
    );

    // An operator's new credential is not overwritten by a refresh of the one it replaced.
    let operators = Secret::new(r#"{"access_token":"at-op","refresh_token":"rt-op"}"#);
    store
        .update_account_credential(account.id, Some(&operators))
        .await
        .unwrap();
    let third = Secret::new(r#"{"access_token":"at-3","refresh_token":"rt-3"}"#);
    assert!(
        !store
            .replace_account_credential(account.id, &second, &third)
            .await
            .unwrap()
    );
    assert_eq!(
        store.account_credential(account.id).await.unwrap(),
        Some(operators)
    );

    // Removed meanwhile: nothing to replace.
    store.update_account_credential(account.id, None).await.unwrap();
    assert!(
        !store
            .replace_account_credential(account.id, &second, &third)
            .await
            .unwrap()
    );
    assert_eq!(store.account_credential(account.id).await.unwrap(), None);
    let missing = store
        .replace_account_credential(imagegate_store::AccountId(999), &second, &third)
        .await;
    assert!(matches!(missing, Err(StoreError::NotFound { .. })), "{missing:?}");
}

async fn account_crud(db: Arc<TestDb>) {
    let store = db.store.as_ref();
    let default = store.default_group().await.unwrap();
    let team = store.create_group("team").await.unwrap();

    let sim = store
        .create_account(NewAccount::new("sim-1", AccountKind::Sim))
        .await
        .unwrap();
    assert_eq!((sim.concurrency_standard, sim.concurrency_large), (4, 1));
    assert_eq!(sim.status, AccountStatus::Active);
    assert!(!sim.has_credential);
    assert!(sim.groups.is_empty());
    assert_eq!(store.account_credential(sim.id).await.unwrap(), None);

    let codex = store
        .create_account(NewAccount {
            base_url: Some("https://chatgpt.example/backend-api".into()),
            tier: AccountTier::Pro,
            priority: -3,
            concurrency_standard: 6,
            concurrency_large: 2,
            groups: vec![team.id, default.id, team.id],
            main_model: Some("gpt-5".into()),
            fallback_models: vec!["gpt-5-mini".into(), "gpt-4.1".into()],
            credential: Some(Secret::new("oauth-token-abc")),
            ..NewAccount::new("codex-1", AccountKind::Codex)
        })
        .await
        .unwrap();
    assert_eq!(codex.tier, AccountTier::Pro);
    assert_eq!(codex.priority, -3);
    assert_eq!(codex.groups, [default.id, team.id]);
    assert_eq!(codex.fallback_models, ["gpt-5-mini", "gpt-4.1"]);
    assert!(codex.has_credential);
    let shown = format!("{codex:?} {}", serde_json::to_string(&codex).unwrap());
    assert!(!shown.contains("oauth-token-abc"), "{shown}");

    let dup = store
        .create_account(NewAccount::new("codex-1", AccountKind::Openai))
        .await;
    assert!(matches!(dup, Err(StoreError::Conflict(_))), "{dup:?}");

    let updated = store
        .update_account(
            codex.id,
            AccountUpdate {
                name: Some("codex-main".into()),
                base_url: Some(None),
                priority: Some(7),
                status: Some((AccountStatus::Error, Some("401 from upstream".into()))),
                groups: Some(vec![team.id]),
                main_model: Some(None),
                ..AccountUpdate::default()
            },
        )
        .await
        .unwrap();
    assert_eq!(updated.name, "codex-main");
    assert_eq!(updated.base_url, None);
    assert_eq!(updated.priority, 7);
    assert_eq!(updated.status, AccountStatus::Error);
    assert_eq!(updated.status_reason.as_deref(), Some("401 from upstream"));
    assert_eq!(updated.groups, [team.id]);
    assert_eq!(updated.main_model, None);
    // Untouched fields stay.
    assert_eq!(updated.tier, AccountTier::Pro);
    assert_eq!(updated.concurrency_standard, 6);
    assert_eq!(updated.fallback_models, ["gpt-5-mini", "gpt-4.1"]);
    assert!(updated.has_credential);
    assert!(updated.updated_at >= codex.updated_at);

    store
        .set_account_status(codex.id, AccountStatus::Active, None)
        .await
        .unwrap();
    let by_name = store.account_by_name("codex-main").await.unwrap().unwrap();
    assert_eq!(
        (by_name.status, by_name.status_reason),
        (AccountStatus::Active, None)
    );

    let all = store.list_accounts().await.unwrap();
    assert_eq!(
        all.iter().map(|a| a.name.as_str()).collect::<Vec<_>>(),
        ["sim-1", "codex-main"]
    );
    assert_eq!(all[1].groups, [team.id]);

    store.delete_account(codex.id).await.unwrap();
    assert!(matches!(
        store.account(codex.id).await,
        Err(StoreError::NotFound { .. })
    ));
    assert!(matches!(
        store.delete_account(codex.id).await,
        Err(StoreError::NotFound { .. })
    ));
    assert_eq!(db.raw_ints("SELECT COUNT(*) FROM account_groups").await, [0]);
    let bad_group = store
        .update_account(
            sim.id,
            AccountUpdate {
                groups: Some(vec![imagegate_store::GroupId(999)]),
                ..AccountUpdate::default()
            },
        )
        .await;
    assert!(
        matches!(bad_group, Err(StoreError::NotFound { .. })),
        "{bad_group:?}"
    );
    assert!(
        store.account(sim.id).await.unwrap().groups.is_empty(),
        "failed update must roll back"
    );
}

async fn credential_is_encrypted_at_rest(db: Arc<TestDb>) {
    let store = db.store.as_ref();
    let plaintext = "sk-upstream-0123456789abcdef";
    let account = store
        .create_account(NewAccount {
            credential: Some(Secret::new(plaintext)),
            ..NewAccount::new("openai-1", AccountKind::Openai)
        })
        .await
        .unwrap();

    let stored = db.raw_bytes("SELECT credential FROM accounts").await;
    assert_eq!(stored.len(), 1);
    let sealed = &stored[0];
    assert_eq!(
        sealed.len(),
        12 + plaintext.len() + 16,
        "nonce || ciphertext || tag"
    );
    assert!(!sealed.windows(plaintext.len()).any(|w| w == plaintext.as_bytes()));
    assert_eq!(
        store
            .account_credential(account.id)
            .await
            .unwrap()
            .unwrap()
            .expose(),
        plaintext
    );

    // The same value stored again gets a new nonce.
    store
        .update_account_credential(account.id, Some(&Secret::new(plaintext)))
        .await
        .unwrap();
    let resealed = db.raw_bytes("SELECT credential FROM accounts").await;
    assert_ne!(&resealed[0], sealed);

    // An OAuth refresh stores an opaque JSON document.
    let refreshed =
        r#"{"access_token":"at-2","refresh_token":"rt-2","expires_at":1767225600,"account_id":"acc"}"#;
    store
        .update_account_credential(account.id, Some(&Secret::new(refreshed)))
        .await
        .unwrap();
    assert_eq!(
        store
            .account_credential(account.id)
            .await
            .unwrap()
            .unwrap()
            .expose(),
        refreshed
    );

    // Another master key cannot read it; the right one can, after a reconnect.
    let wrong = db.reconnect(&MasterKey::generate().unwrap()).await;
    let err = wrong.account_credential(account.id).await.unwrap_err();
    assert!(matches!(err, StoreError::Crypto(CryptoError::Decrypt)), "{err:?}");
    wrong.close().await;
    let right = db.reconnect(&db.master_key).await;
    assert_eq!(
        right
            .account_credential(account.id)
            .await
            .unwrap()
            .unwrap()
            .expose(),
        refreshed
    );
    right.close().await;

    store.update_account_credential(account.id, None).await.unwrap();
    assert_eq!(store.account_credential(account.id).await.unwrap(), None);
    assert!(!store.account(account.id).await.unwrap().has_credential);
    let missing = store.account_credential(imagegate_store::AccountId(999)).await;
    assert!(matches!(missing, Err(StoreError::NotFound { .. })), "{missing:?}");
}

async fn credentials_move_to_a_new_master_key(db: Arc<TestDb>) {
    let store = db.store.as_ref();
    let mut ids = Vec::new();
    for (name, credential) in [("a", Some("sk-a")), ("b", Some("sk-b")), ("none", None)] {
        let account = store
            .create_account(NewAccount {
                credential: credential.map(Secret::new),
                ..NewAccount::new(name, AccountKind::Openai)
            })
            .await
            .unwrap();
        ids.push(account.id);
    }
    let old_key = db.master_key.clone();
    let new_key = MasterKey::generate().unwrap();
    let rotating = imagegate_store::connect_with_previous(&db.url, &new_key, Some(&old_key))
        .await
        .unwrap();
    // Both keys open the credentials while they move.
    assert_eq!(
        rotating
            .account_credential(ids[0])
            .await
            .unwrap()
            .unwrap()
            .expose(),
        "sk-a"
    );
    let done = imagegate_store::reseal_credentials(rotating.as_ref())
        .await
        .unwrap();
    assert_eq!(done.resealed, 2, "{done:?}");
    assert!(done.unreadable.is_empty(), "{done:?}");
    // Running it again is harmless.
    let again = imagegate_store::reseal_credentials(rotating.as_ref())
        .await
        .unwrap();
    assert_eq!(again.resealed, 2, "{again:?}");
    rotating.close().await;

    // The new key alone opens every credential; the old one no longer opens any.
    let after = db.reconnect(&new_key).await;
    assert_eq!(
        after.account_credential(ids[0]).await.unwrap().unwrap().expose(),
        "sk-a"
    );
    assert_eq!(
        after.account_credential(ids[1]).await.unwrap().unwrap().expose(),
        "sk-b"
    );
    assert_eq!(after.account_credential(ids[2]).await.unwrap(), None);
    after.close().await;
    let before = db.reconnect(&old_key).await;
    let err = before.account_credential(ids[0]).await.unwrap_err();
    assert!(matches!(err, StoreError::Crypto(CryptoError::Decrypt)), "{err:?}");
    // A credential no key opens is reported and left alone.
    let stranger =
        imagegate_store::connect_with_previous(&db.url, &MasterKey::generate().unwrap(), Some(&old_key))
            .await
            .unwrap();
    let done = imagegate_store::reseal_credentials(stranger.as_ref())
        .await
        .unwrap();
    assert_eq!((done.resealed, done.unreadable.len()), (0, 2), "{done:?}");
    stranger.close().await;
    before.close().await;
}

async fn resealing_never_writes_over_a_credential_refreshed_meanwhile(db: Arc<TestDb>) {
    let store = Arc::clone(&db.store);
    let account = store
        .create_account(NewAccount {
            credential: Some(Secret::new("token-0")),
            ..NewAccount::new("codex-1", AccountKind::Codex)
        })
        .await
        .unwrap();
    // A gateway refreshing the token while the key rotation reseals it, over and over.
    for round in 1..=150 {
        let refreshed = format!("token-{round}");
        let writer = {
            let store = Arc::clone(&store);
            let refreshed = refreshed.clone();
            tokio::spawn(async move {
                store
                    .update_account_credential(account.id, Some(&Secret::new(&refreshed)))
                    .await
                    .unwrap();
            })
        };
        let resealer = {
            let store = Arc::clone(&store);
            tokio::spawn(async move { store.reseal_account_credential(account.id).await.unwrap() })
        };
        writer.await.unwrap();
        resealer.await.unwrap();
        let stored = store.account_credential(account.id).await.unwrap().unwrap();
        assert_eq!(stored.expose(), refreshed, "round {round}");
    }
}

async fn a_refresh_is_saved_over_its_credential_resealed_meanwhile(db: Arc<TestDb>) {
    let store = Arc::clone(&db.store);
    let token = Secret::new("token-0");
    let account = store
        .create_account(NewAccount {
            credential: Some(token.clone()),
            ..NewAccount::new("codex-1", AccountKind::Codex)
        })
        .await
        .unwrap();
    // Two sealings of the same token: what a key rotation's reseal writes over the other.
    let first = credential_of(&db, "codex-1").await;
    assert!(store.reseal_account_credential(account.id).await.unwrap());
    assert_ne!(credential_of(&db, "codex-1").await, first);
    let hold = std::time::Duration::from_millis(400);
    let sql = "UPDATE accounts SET credential = $1 WHERE name = 'codex-1'";

    // A gateway saves its refresh of the token while the rotation is writing it back resealed.
    let resealing = db.write_bytes_meanwhile(sql, Some(first.clone()), hold).await;
    let refreshed = Secret::new("token-1");
    let saved = store.replace_account_credential(account.id, &token, &refreshed);
    let (saved, ()) = tokio::join!(saved, async { resealing.await.unwrap() });
    assert!(saved.unwrap(), "the refresh of the stored token is saved");
    let stored = store.account_credential(account.id).await.unwrap().unwrap();
    assert_eq!(stored.expose(), "token-1");

    // The upstream refuses the refreshed token while the rotation reseals it: the account is marked.
    let resealed = credential_of(&db, "codex-1").await;
    assert!(store.reseal_account_credential(account.id).await.unwrap());
    let resealing = db.write_bytes_meanwhile(sql, Some(resealed), hold).await;
    let marked = store.mark_account_failed(account.id, "refresh refused", Some(&refreshed));
    let (marked, ()) = tokio::join!(marked, async { resealing.await.unwrap() });
    assert!(
        marked.unwrap(),
        "the refusal of the stored token marks its account"
    );
    assert_eq!(
        store.account(account.id).await.unwrap().status,
        AccountStatus::Error
    );
}

async fn a_credential_is_read_with_the_time_of_its_row(db: Arc<TestDb>) {
    let store = db.store.as_ref();
    let account = store
        .create_account(NewAccount {
            base_url: Some("https://one.example/v1".into()),
            credential: Some(Secret::new("sk-one")),
            ..NewAccount::new("timed", AccountKind::Openai)
        })
        .await
        .unwrap();
    let read = store.account_credential_as_of(account.id).await.unwrap();
    assert_eq!(read.credential.unwrap().expose(), "sk-one");
    assert_eq!(read.base_url.as_deref(), Some("https://one.example/v1"));
    assert_eq!(read.updated_at, account.updated_at);
    tokio::time::sleep(std::time::Duration::from_millis(3)).await;
    let update = AccountUpdate {
        base_url: Some(Some("https://two.example/v1".into())),
        credential: Some(Some(Secret::new("sk-two"))),
        ..AccountUpdate::default()
    };
    let updated = store.update_account(account.id, update).await.unwrap();
    let read = store.account_credential_as_of(account.id).await.unwrap();
    assert_eq!(read.credential.unwrap().expose(), "sk-two");
    assert_eq!(read.base_url.as_deref(), Some("https://two.example/v1"));
    assert_eq!(read.updated_at, updated.updated_at);
    assert_ne!(
        read.updated_at, account.updated_at,
        "a write moves the row's time"
    );
    store.delete_account(account.id).await.unwrap();
    assert!(matches!(
        store.account_credential_as_of(account.id).await,
        Err(StoreError::NotFound { .. })
    ));
}

/// What versions before credentials were bound to their account wrote: `nonce || ciphertext ||
/// tag` under one associated data for every row.
fn sealed_unbound(key: &MasterKey, plaintext: &str) -> Vec<u8> {
    use aes_gcm::aead::{Aead, KeyInit, Payload};
    use base64::Engine as _;
    let key_bytes = base64::engine::general_purpose::STANDARD
        .decode(key.to_base64().expose())
        .unwrap();
    let cipher = aes_gcm::Aes256Gcm::new_from_slice(&key_bytes).unwrap();
    let nonce = [9u8; 12];
    let payload = Payload {
        msg: plaintext.as_bytes(),
        aad: b"imagegate/account-credential/v1".as_slice(),
    };
    let mut sealed = nonce.to_vec();
    sealed.extend(cipher.encrypt(&nonce.into(), payload).unwrap());
    sealed
}

async fn credential_of(db: &TestDb, account: &str) -> Vec<u8> {
    let sql = format!("SELECT credential FROM accounts WHERE name = '{account}'");
    db.raw_bytes(&sql).await.remove(0)
}

async fn a_credential_opens_only_in_its_own_account_row(db: Arc<TestDb>) {
    let store = db.store.as_ref();
    for (name, credential) in [("a", "sk-a"), ("b", "sk-b")] {
        store
            .create_account(NewAccount {
                credential: Some(Secret::new(credential)),
                ..NewAccount::new(name, AccountKind::Openai)
            })
            .await
            .unwrap();
    }
    let a = store.account_by_name("a").await.unwrap().unwrap().id;
    let b = store.account_by_name("b").await.unwrap().unwrap().id;

    // Someone who can write to the database but has no key copies a's credential into b's row.
    let sealed_for_a = credential_of(&db, "a").await;
    db.execute_with_bytes(
        "UPDATE accounts SET credential = $1 WHERE name = 'b'",
        &sealed_for_a,
    )
    .await;
    let err = store.account_credential(b).await.unwrap_err();
    assert!(matches!(err, StoreError::Crypto(CryptoError::Decrypt)), "{err:?}");
    assert_eq!(
        store.account_credential(a).await.unwrap().unwrap().expose(),
        "sk-a"
    );

    // A credential sealed by an earlier version, bound to no row, still opens, in any row (only a
    // key rotation shuts out copies of one); a rekey seals it again for its own row, after which it
    // no longer opens elsewhere.
    let unbound = sealed_unbound(&db.master_key, "sk-legacy");
    for row in ["a", "b"] {
        let sql = format!("UPDATE accounts SET credential = $1 WHERE name = '{row}'");
        db.execute_with_bytes(&sql, &unbound).await;
    }
    for id in [a, b] {
        assert_eq!(
            store.account_credential(id).await.unwrap().unwrap().expose(),
            "sk-legacy"
        );
    }
    let done = imagegate_store::reseal_credentials(store).await.unwrap();
    assert_eq!((done.resealed, done.unreadable.len()), (2, 0), "{done:?}");
    let bound = credential_of(&db, "b").await;
    assert_ne!(bound, unbound);
    assert_eq!(
        store.account_credential(b).await.unwrap().unwrap().expose(),
        "sk-legacy"
    );
    db.execute_with_bytes("UPDATE accounts SET credential = $1 WHERE name = 'a'", &bound)
        .await;
    let err = store.account_credential(a).await.unwrap_err();
    assert!(matches!(err, StoreError::Crypto(CryptoError::Decrypt)), "{err:?}");
}

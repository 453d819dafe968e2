//! API keys: creation, authentication, life cycle, storage, cache.

use std::sync::Arc;
use std::time::Duration;

use imagegate_store::keys::{KEY_PREFIX, hash_secret, parse_key};
use imagegate_store::{
    GroupId, KeyCache, KeyCheck, KeyId, KeyLimits, KeyRefusal, KeyStatus, KeyUpdate, KeyUse, NewApiKey,
    NewKey, NewUser, Store, StoreError, Timestamp, UserId,
};

use crate::common::TestDb;

crate::on_every_backend!(
    key_authentication,
    key_life_cycle,
    key_secret_is_only_stored_hashed,
    key_for_missing_user_or_group_is_refused,
    key_updates_and_touches,
    key_cache_follows_disable_and_delete,
    key_cache_refreshes_through_one_request,
);

async fn user_and_key(store: &dyn Store, user: &str, limits: KeyLimits) -> (UserId, NewKey) {
    let user = store
        .create_user(NewUser {
            name: user.into(),
            ..NewUser::default()
        })
        .await
        .unwrap();
    let group = store.default_group().await.unwrap();
    let key = store
        .create_key(NewApiKey {
            user_id: user.id,
            group_id: group.id,
            name: format!("{}-key", user.name),
            limits,
            fallback_ladder: true,
        })
        .await
        .unwrap();
    (user.id, key)
}

async fn key_authentication(db: Arc<TestDb>) {
    let store = db.store.as_ref();
    let limits = KeyLimits {
        max_concurrency: Some(3),
        rpm: Some(60),
    };
    let (user_id, created) = user_and_key(store, "alice", limits).await;
    let text = created.key.expose();
    assert!(text.starts_with(KEY_PREFIX));
    assert!(
        !format!("{created:?}").contains(text),
        "Debug of NewKey shows the key"
    );

    let auth = store.authenticate(text).await.unwrap().unwrap();
    assert_eq!(auth.key_id, created.record.id);
    assert_eq!(auth.user_id, user_id);
    assert_eq!(auth.group_id, store.default_group().await.unwrap().id);
    assert_eq!(auth.key_name, "alice-key");
    assert_eq!(auth.key_public_id, created.record.public_id);
    assert_eq!(auth.limits, limits);
    assert!(auth.fallback_ladder);

    // Same public id, another (well-formed) secret.
    let parsed = parse_key(text).unwrap();
    let wrong = format!("{KEY_PREFIX}{}-{}", parsed.public_id, "Z".repeat(40));
    assert_eq!(store.authenticate(&wrong).await.unwrap(), None);
    assert_eq!(store.check_key(&wrong).await.unwrap(), KeyCheck::Unknown);
    // Unknown public id with the right secret.
    let unknown = format!("{KEY_PREFIX}zzzzzzzzzzzz-{}", parsed.secret);
    assert_eq!(store.authenticate(&unknown).await.unwrap(), None);
    assert_eq!(store.check_key(&unknown).await.unwrap(), KeyCheck::Unknown);
    assert_eq!(store.check_key(text).await.unwrap(), KeyCheck::Valid(auth));
    for malformed in [
        "",
        "Bearer x",
        "sk-ig-",
        &text[..text.len() - 10],
        &format!("{text}!"),
    ] {
        assert_eq!(
            store.authenticate(malformed).await.unwrap(),
            None,
            "{malformed:?}"
        );
        assert_eq!(
            store.check_key(malformed).await.unwrap(),
            KeyCheck::Unknown,
            "{malformed:?}"
        );
    }
}

async fn key_life_cycle(db: Arc<TestDb>) {
    let store = db.store.as_ref();
    let (alice, key) = user_and_key(store, "alice", KeyLimits::default()).await;
    let (bob, bob_key) = user_and_key(store, "bob", KeyLimits::default()).await;
    let text = key.key.expose();
    let id = key.record.id;

    let refused = |refusal| KeyCheck::Refused(refusal);
    // Another secret for the same public id: only the holder of the secret learns the status.
    let parsed = parse_key(text).unwrap();
    let wrong = format!("{KEY_PREFIX}{}-{}", parsed.public_id, "Z".repeat(40));

    assert_eq!(store.disable_key(id).await.unwrap().status, KeyStatus::Disabled);
    assert_eq!(store.authenticate(text).await.unwrap(), None);
    assert_eq!(
        store.check_key(text).await.unwrap(),
        refused(KeyRefusal::Disabled)
    );
    assert_eq!(store.check_key(&wrong).await.unwrap(), KeyCheck::Unknown);
    assert_eq!(store.enable_key(id).await.unwrap().status, KeyStatus::Active);
    assert!(store.authenticate(text).await.unwrap().is_some());

    // Suspended by an administrator: its owner can neither enable nor re-disable it.
    assert_eq!(store.suspend_key(id).await.unwrap().status, KeyStatus::Suspended);
    assert_eq!(store.authenticate(text).await.unwrap(), None);
    assert_eq!(
        store.check_key(text).await.unwrap(),
        refused(KeyRefusal::Suspended)
    );
    assert_eq!(store.check_key(&wrong).await.unwrap(), KeyCheck::Unknown);
    assert!(matches!(store.enable_key(id).await, Err(StoreError::Conflict(_))));
    assert!(matches!(
        store.disable_key(id).await,
        Err(StoreError::Conflict(_))
    ));
    assert_eq!(store.key(id).await.unwrap().status, KeyStatus::Suspended);
    assert_eq!(store.authenticate(text).await.unwrap(), None);
    assert_eq!(store.reinstate_key(id).await.unwrap().status, KeyStatus::Active);
    assert!(store.authenticate(text).await.unwrap().is_some());
    store.disable_key(id).await.unwrap();
    assert_eq!(store.reinstate_key(id).await.unwrap().status, KeyStatus::Active);

    let listed: Vec<KeyId> = store
        .list_keys(None)
        .await
        .unwrap()
        .iter()
        .map(|k| k.id)
        .collect();
    assert_eq!(listed, [id, bob_key.record.id]);
    let only_bob: Vec<KeyId> = store
        .list_keys(Some(bob))
        .await
        .unwrap()
        .iter()
        .map(|k| k.id)
        .collect();
    assert_eq!(only_bob, [bob_key.record.id]);

    assert_eq!(store.delete_key(id).await.unwrap().status, KeyStatus::Deleted);
    assert_eq!(store.authenticate(text).await.unwrap(), None);
    assert_eq!(store.check_key(text).await.unwrap(), refused(KeyRefusal::Deleted));
    assert_eq!(store.check_key(&wrong).await.unwrap(), KeyCheck::Unknown);
    let revive = store.enable_key(id).await;
    assert!(matches!(revive, Err(StoreError::Conflict(_))), "{revive:?}");
    let reinstated = store.reinstate_key(id).await;
    assert!(
        matches!(reinstated, Err(StoreError::Conflict(_))),
        "{reinstated:?}"
    );
    assert_eq!(store.authenticate(text).await.unwrap(), None);
    assert!(store.list_keys(Some(alice)).await.unwrap().is_empty());
    assert_eq!(store.key(id).await.unwrap().status, KeyStatus::Deleted);
    let by_public = store
        .key_by_public_id(&key.record.public_id)
        .await
        .unwrap()
        .unwrap();
    assert_eq!((by_public.id, by_public.status), (id, KeyStatus::Deleted));
    assert_eq!(store.key_by_public_id("zzzzzzzzzzzz").await.unwrap(), None);
    assert!(matches!(
        store.disable_key(KeyId(424242)).await,
        Err(StoreError::NotFound { .. })
    ));
}

async fn key_secret_is_only_stored_hashed(db: Arc<TestDb>) {
    let (_, created) = user_and_key(db.store.as_ref(), "alice", KeyLimits::default()).await;
    let secret = parse_key(created.key.expose()).unwrap().secret.to_owned();
    let stored = db
        .raw_strings("SELECT public_id || '|' || secret_sha256 || '|' || name || '|' || status FROM api_keys")
        .await;
    assert_eq!(stored.len(), 1);
    let row = &stored[0];
    assert!(!row.contains(&secret), "plaintext secret stored: {row}");
    assert!(!row.contains(created.key.expose()));
    let hashes = db.raw_strings("SELECT secret_sha256 FROM api_keys").await;
    assert_eq!(hashes, [hash_secret(&secret)]);
    assert_eq!(hashes[0].len(), 64);
}

async fn key_for_missing_user_or_group_is_refused(db: Arc<TestDb>) {
    let store = db.store.as_ref();
    let user = store
        .create_user(NewUser {
            name: "alice".into(),
            ..NewUser::default()
        })
        .await
        .unwrap();
    let group = store.default_group().await.unwrap();
    let attempt = |user_id, group_id| NewApiKey {
        user_id,
        group_id,
        name: "k".into(),
        limits: KeyLimits::default(),
        fallback_ladder: false,
    };
    let no_user = store.create_key(attempt(UserId(999), group.id)).await;
    assert!(matches!(no_user, Err(StoreError::NotFound { .. })), "{no_user:?}");
    let no_group = store.create_key(attempt(user.id, GroupId(999))).await;
    assert!(
        matches!(no_group, Err(StoreError::NotFound { .. })),
        "{no_group:?}"
    );
    let zero = NewApiKey {
        limits: KeyLimits {
            max_concurrency: Some(0),
            rpm: None,
        },
        ..attempt(user.id, group.id)
    };
    assert!(matches!(
        store.create_key(zero).await,
        Err(StoreError::Invalid(_))
    ));
    assert!(store.list_keys(None).await.unwrap().is_empty());
}

async fn key_updates_and_touches(db: Arc<TestDb>) {
    let store = db.store.as_ref();
    let (_, created) = user_and_key(
        store,
        "alice",
        KeyLimits {
            max_concurrency: Some(2),
            rpm: Some(10),
        },
    )
    .await;
    let id = created.record.id;
    let team = store.create_group("team").await.unwrap();

    let renamed = store
        .update_key(
            id,
            KeyUpdate {
                name: Some("renamed".into()),
                ..KeyUpdate::default()
            },
        )
        .await
        .unwrap();
    assert_eq!(renamed.name, "renamed");
    assert_eq!(
        renamed.limits,
        KeyLimits {
            max_concurrency: Some(2),
            rpm: Some(10)
        }
    );

    let moved = store
        .update_key(
            id,
            KeyUpdate {
                group_id: Some(team.id),
                limits: Some(KeyLimits {
                    max_concurrency: None,
                    rpm: Some(5),
                }),
                fallback_ladder: Some(false),
                ..KeyUpdate::default()
            },
        )
        .await
        .unwrap();
    assert_eq!(moved.group_id, team.id);
    assert_eq!(
        moved.limits,
        KeyLimits {
            max_concurrency: None,
            rpm: Some(5)
        }
    );
    assert!(!moved.fallback_ladder);
    assert_eq!(moved.name, "renamed");
    let auth = store.authenticate(created.key.expose()).await.unwrap().unwrap();
    assert_eq!(auth.group_id, team.id);
    // Not into a group closed to the key's user, as it could not have been made there.
    let vip = store.create_group("vip").await.unwrap();
    store.set_group_restricted(vip.id, true).await.unwrap();
    let closed = store
        .update_key(
            id,
            KeyUpdate {
                group_id: Some(vip.id),
                ..KeyUpdate::default()
            },
        )
        .await;
    assert!(matches!(closed, Err(StoreError::Forbidden(_))), "{closed:?}");
    assert_eq!(store.key(id).await.unwrap().group_id, team.id);

    assert_eq!(created.record.last_used_at, None);
    let at = |ms| KeyUse {
        key_id: id,
        at: Timestamp::from_unix_ms(ms),
    };
    store.touch_keys(&[at(2_000)]).await.unwrap();
    store.touch_keys(&[at(1_000)]).await.unwrap();
    assert_eq!(
        store.key(id).await.unwrap().last_used_at,
        Some(Timestamp::from_unix_ms(2_000))
    );
    store.touch_keys(&[at(3_000)]).await.unwrap();
    assert_eq!(
        store.key(id).await.unwrap().last_used_at,
        Some(Timestamp::from_unix_ms(3_000))
    );
}

async fn key_cache_follows_disable_and_delete(db: Arc<TestDb>) {
    let store = Arc::clone(&db.store);
    let (_, first) = user_and_key(store.as_ref(), "alice", KeyLimits::default()).await;
    let (_, second) = user_and_key(store.as_ref(), "bob", KeyLimits::default()).await;
    // A long TTL makes the cache's staleness observable without timing.
    let cache = KeyCache::new(Arc::clone(&store), Duration::from_secs(3600));

    let text = first.key.expose();
    assert_eq!(
        cache.authenticate(text).await.unwrap().unwrap().key_id,
        first.record.id
    );
    assert_eq!(cache.len(), 1);
    // Wrong secret for a cached public id: not answered from the cache.
    let parsed = parse_key(text).unwrap();
    let wrong = format!("{KEY_PREFIX}{}-{}", parsed.public_id, "Q".repeat(40));
    assert_eq!(cache.authenticate(&wrong).await.unwrap(), None);

    // Disabled behind the cache's back: served stale until invalidated.
    store.disable_key(first.record.id).await.unwrap();
    assert!(cache.authenticate(text).await.unwrap().is_some());
    cache.invalidate(&first.record.public_id);
    assert_eq!(cache.authenticate(text).await.unwrap(), None);
    // The cache passes the reason on to the holder of the secret, and nothing to a guess.
    assert_eq!(
        cache.check(text).await.unwrap(),
        KeyCheck::Refused(KeyRefusal::Disabled)
    );
    assert_eq!(cache.check(&wrong).await.unwrap(), KeyCheck::Unknown);

    // Through the cache: effective at once.
    let other = second.key.expose();
    assert!(cache.authenticate(other).await.unwrap().is_some());
    cache.disable_key(second.record.id).await.unwrap();
    assert_eq!(cache.authenticate(other).await.unwrap(), None);
    store.enable_key(second.record.id).await.unwrap();
    assert!(cache.authenticate(other).await.unwrap().is_some());
    cache.delete_key(second.record.id).await.unwrap();
    assert_eq!(cache.authenticate(other).await.unwrap(), None);

    // With a zero TTL every call reaches the store.
    let (_, third) = user_and_key(store.as_ref(), "carol", KeyLimits::default()).await;
    let fresh = KeyCache::new(Arc::clone(&store), Duration::ZERO);
    assert!(fresh.authenticate(third.key.expose()).await.unwrap().is_some());
    store.disable_key(third.record.id).await.unwrap();
    assert_eq!(fresh.authenticate(third.key.expose()).await.unwrap(), None);
}

async fn key_cache_refreshes_through_one_request(db: Arc<TestDb>) {
    let store = Arc::clone(&db.store);
    let (_, created) = user_and_key(store.as_ref(), "dave", KeyLimits::default()).await;
    let text = created.key.expose();
    let ttl = Duration::from_secs(2);
    let cache = KeyCache::new(Arc::clone(&store), ttl);
    assert!(cache.authenticate(text).await.unwrap().is_some());

    // Disabled behind the cache's back: before half the TTL, the cached entry answers.
    store.disable_key(created.record.id).await.unwrap();
    assert!(cache.authenticate(text).await.unwrap().is_some());

    // Past half the TTL the first request asks the store and learns of the disabling. (That the
    // others keep the cached entry meanwhile is a unit test in `cache.rs`.)
    tokio::time::sleep(ttl / 2 + Duration::from_millis(100)).await;
    assert_eq!(
        cache.authenticate(text).await.unwrap(),
        None,
        "the refresh saw the disabled key"
    );
    // The refresh dropped the entry: everyone now gets the store's answer.
    assert_eq!(cache.authenticate(text).await.unwrap(), None);
    assert!(cache.is_empty());
}

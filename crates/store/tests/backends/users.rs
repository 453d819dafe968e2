//! Users, groups and migrations.

use std::sync::Arc;

use imagegate_store::{DEFAULT_GROUP, NewUser, StoreError, UserId};

use crate::common::TestDb;

crate::on_every_backend!(
    migrations_are_idempotent_on_reconnect,
    a_migration_only_a_newer_version_knows_does_not_stop_an_older_one,
    users_and_groups
);

/// A rolling upgrade: a new replica has applied its (additive) migration, and an old one restarts
/// on the same database. It must start, not refuse the migration it does not know.
async fn a_migration_only_a_newer_version_knows_does_not_stop_an_older_one(db: Arc<TestDb>) {
    let checksum = match db.kind {
        crate::common::Kind::Sqlite => "x'00'",
        crate::common::Kind::Postgres => "'\\x00'::bytea",
    };
    db.execute(&[&format!(
        "INSERT INTO _sqlx_migrations (version, description, success, checksum, execution_time) \
         VALUES (9999, 'added by a newer version', TRUE, {checksum}, 1)"
    )])
    .await;
    let older = db.reconnect(&db.master_key).await;
    assert!(!older.list_groups().await.unwrap().is_empty());
}

async fn migrations_are_idempotent_on_reconnect(db: Arc<TestDb>) {
    let alice = db
        .store
        .create_user(NewUser {
            name: "alice".into(),
            ..NewUser::default()
        })
        .await
        .unwrap();
    for _ in 0..2 {
        let again = db.reconnect(&db.master_key).await;
        assert_eq!(again.user(alice.id).await.unwrap().name, "alice");
        let groups = again.list_groups().await.unwrap();
        assert_eq!(
            groups.iter().filter(|g| g.name == DEFAULT_GROUP).count(),
            1,
            "{groups:?}"
        );
        again.close().await;
    }
    let applied = db.raw_ints("SELECT version FROM _sqlx_migrations").await;
    assert_eq!(applied, [1, 2]);
}

async fn users_and_groups(db: Arc<TestDb>) {
    let store = &db.store;
    let default = store.default_group().await.unwrap();
    assert_eq!(default.name, DEFAULT_GROUP);

    let bob = store
        .create_user(NewUser {
            name: "bob".into(),
            is_admin: true,
            password_hash: Some("$argon2id$v=19$m=19456,t=2,p=1$c2FsdA$aGFzaA".into()),
        })
        .await
        .unwrap();
    assert!(bob.is_admin);
    let shown = serde_json::to_string(&bob).unwrap();
    assert!(!shown.contains("argon2"), "password hash serialized: {shown}");

    let dup = store
        .create_user(NewUser {
            name: "bob".into(),
            ..NewUser::default()
        })
        .await;
    assert!(matches!(dup, Err(StoreError::Conflict(_))), "{dup:?}");
    let blank = store
        .create_user(NewUser {
            name: " ".into(),
            ..NewUser::default()
        })
        .await;
    assert!(matches!(blank, Err(StoreError::Invalid(_))), "{blank:?}");

    store.set_user_admin(bob.id, false).await.unwrap();
    store.set_user_password_hash(bob.id, None).await.unwrap();
    let reread = store.user_by_name("bob").await.unwrap().unwrap();
    assert!(!reread.is_admin);
    assert_eq!(reread.password_hash, None);
    assert!(store.user_by_name("nobody").await.unwrap().is_none());
    assert!(matches!(
        store.user(UserId(9999)).await,
        Err(StoreError::NotFound { what: "user", .. })
    ));
    assert!(matches!(
        store.set_user_admin(UserId(9999), true).await,
        Err(StoreError::NotFound { .. })
    ));

    let carol = store
        .create_user(NewUser {
            name: "carol".into(),
            ..NewUser::default()
        })
        .await
        .unwrap();
    let names: Vec<_> = store
        .list_users()
        .await
        .unwrap()
        .into_iter()
        .map(|u| u.name)
        .collect();
    assert_eq!(names, ["bob", "carol"]);
    assert!(carol.id > bob.id);

    let team = store.create_group("team").await.unwrap();
    assert_eq!(store.group_by_name("team").await.unwrap().unwrap().id, team.id);
    // A name no row can have (a sign-in form posting `a%00b`): nothing found, on both backends
    // (PostgreSQL refuses a NUL character in a parameter).
    for odd in ["bob\0", "te\0am", "\u{7}"] {
        assert!(store.user_by_name(odd).await.unwrap().is_none(), "{odd:?}");
        assert!(store.group_by_name(odd).await.unwrap().is_none(), "{odd:?}");
        assert!(store.account_by_name(odd).await.unwrap().is_none(), "{odd:?}");
    }
    assert!(matches!(
        store.create_group("team").await,
        Err(StoreError::Conflict(_))
    ));
    let groups: Vec<_> = store
        .list_groups()
        .await
        .unwrap()
        .into_iter()
        .map(|g| g.name)
        .collect();
    assert_eq!(groups, [DEFAULT_GROUP, "team"]);
}

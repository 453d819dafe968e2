//! Restricted groups: who may hold and use keys in a group.

use std::sync::Arc;

use imagegate_store::{
    GroupId, KeyCheck, KeyLimits, KeyRefusal, NewApiKey, NewUser, Store, StoreError, User, UserId,
};

use crate::common::TestDb;

crate::on_every_backend!(
    a_restricted_group_is_for_its_members_and_admins,
    replacing_the_members_is_all_or_nothing,
    every_group_s_members_come_in_one_list,
    a_database_from_before_group_access_keeps_every_group_open,
    a_change_that_reads_first_waits_for_another_writer,
    the_later_of_two_member_edits_is_what_stays
);

async fn user(store: &Arc<dyn Store>, name: &str, is_admin: bool) -> User {
    store
        .create_user(NewUser {
            name: name.into(),
            is_admin,
            ..NewUser::default()
        })
        .await
        .unwrap()
}

fn key_for(user: UserId, group: GroupId) -> NewApiKey {
    NewApiKey {
        user_id: user,
        group_id: group,
        name: "k".into(),
        limits: KeyLimits::default(),
        fallback_ladder: false,
    }
}

async fn names_of_groups_for(store: &Arc<dyn Store>, user: UserId) -> Vec<String> {
    store
        .groups_for(user)
        .await
        .unwrap()
        .into_iter()
        .map(|g| g.name)
        .collect()
}

async fn a_restricted_group_is_for_its_members_and_admins(db: Arc<TestDb>) {
    let store = &db.store;
    let carol = user(store, "carol", false).await;
    let dave = user(store, "dave", false).await;
    let erin = user(store, "erin", true).await;
    let vip = store.create_group("vip").await.unwrap();
    assert!(!vip.restricted, "a new group is open");

    // Open: anyone may hold a key in it.
    let carols = store.create_key(key_for(carol.id, vip.id)).await.unwrap();
    assert!(store.authenticate(carols.key.expose()).await.unwrap().is_some());

    let restricted = store.set_group_restricted(vip.id, true).await.unwrap();
    assert!(restricted.restricted);
    assert!(store.group(vip.id).await.unwrap().restricted);
    // Carol is no member: her key stops working and she may not make another.
    assert!(store.authenticate(carols.key.expose()).await.unwrap().is_none());
    assert_eq!(
        store.check_key(carols.key.expose()).await.unwrap(),
        KeyCheck::Refused(KeyRefusal::GroupClosed)
    );
    let (public, _) = carols.key.expose().rsplit_once('-').unwrap();
    let guessed = format!("{public}-{}", "0".repeat(40));
    assert_eq!(
        store.check_key(&guessed).await.unwrap(),
        KeyCheck::Unknown,
        "a guess learns nothing"
    );
    assert!(!store.may_use_group(carol.id, vip.id).await.unwrap());
    let refused = store.create_key(key_for(carol.id, vip.id)).await;
    assert!(matches!(refused, Err(StoreError::Forbidden(_))), "{refused:?}");
    assert_eq!(names_of_groups_for(store, carol.id).await, ["default"]);
    // An admin may use every group.
    assert!(store.may_use_group(erin.id, vip.id).await.unwrap());
    let erins = store.create_key(key_for(erin.id, vip.id)).await.unwrap();
    assert!(store.authenticate(erins.key.expose()).await.unwrap().is_some());
    assert_eq!(names_of_groups_for(store, erin.id).await, ["default", "vip"]);

    // Made a member, Carol's key works again; Dave is still out.
    store.set_group_members(vip.id, &[carol.id]).await.unwrap();
    assert_eq!(store.group_members(vip.id).await.unwrap(), [carol.id]);
    assert!(store.authenticate(carols.key.expose()).await.unwrap().is_some());
    assert_eq!(names_of_groups_for(store, carol.id).await, ["default", "vip"]);
    assert_eq!(names_of_groups_for(store, dave.id).await, ["default"]);
    let refused = store.create_key(key_for(dave.id, vip.id)).await;
    assert!(matches!(refused, Err(StoreError::Forbidden(_))), "{refused:?}");

    // An admin made a plain user loses the groups it held as admin only.
    store.set_user_admin(erin.id, false).await.unwrap();
    assert!(store.authenticate(erins.key.expose()).await.unwrap().is_none());
    assert_eq!(
        store.check_key(erins.key.expose()).await.unwrap(),
        KeyCheck::Refused(KeyRefusal::GroupClosed)
    );

    // Opened again, the group is for everyone; its members are kept for the next restriction.
    store.set_group_restricted(vip.id, false).await.unwrap();
    assert!(store.authenticate(erins.key.expose()).await.unwrap().is_some());
    assert!(store.create_key(key_for(dave.id, vip.id)).await.is_ok());
    assert_eq!(store.group_members(vip.id).await.unwrap(), [carol.id]);

    // Missing rows.
    assert!(!store.may_use_group(carol.id, GroupId(9999)).await.unwrap());
    assert!(!store.may_use_group(UserId(9999), vip.id).await.unwrap());
    for outcome in [
        store.set_group_restricted(GroupId(9999), true).await.map(|_| ()),
        store.group_members(GroupId(9999)).await.map(|_| ()),
        store.set_group_members(GroupId(9999), &[]).await,
        store
            .create_key(key_for(carol.id, GroupId(9999)))
            .await
            .map(|_| ()),
    ] {
        assert!(
            matches!(outcome, Err(StoreError::NotFound { what: "group", .. })),
            "{outcome:?}"
        );
    }
}

async fn replacing_the_members_is_all_or_nothing(db: Arc<TestDb>) {
    let store = &db.store;
    let carol = user(store, "carol", false).await;
    let dave = user(store, "dave", false).await;
    let vip = store.create_group("vip").await.unwrap();
    store.set_group_restricted(vip.id, true).await.unwrap();

    store
        .set_group_members(vip.id, &[dave.id, carol.id, dave.id])
        .await
        .unwrap();
    assert_eq!(store.group_members(vip.id).await.unwrap(), [carol.id, dave.id]);

    // A list naming a user who does not exist changes nothing.
    let refused = store.set_group_members(vip.id, &[carol.id, UserId(9999)]).await;
    assert!(
        matches!(refused, Err(StoreError::NotFound { what: "user", .. })),
        "{refused:?}"
    );
    assert_eq!(store.group_members(vip.id).await.unwrap(), [carol.id, dave.id]);

    store.set_group_members(vip.id, &[]).await.unwrap();
    assert!(store.group_members(vip.id).await.unwrap().is_empty());
    assert!(!store.may_use_group(carol.id, vip.id).await.unwrap());
}

async fn every_group_s_members_come_in_one_list(db: Arc<TestDb>) {
    let store = &db.store;
    let carol = user(store, "carol", false).await;
    let dave = user(store, "dave", false).await;
    let vip = store.create_group("vip").await.unwrap();
    let staff = store.create_group("staff").await.unwrap();
    let empty = store.create_group("empty").await.unwrap();
    store
        .set_group_members(vip.id, &[dave.id, carol.id])
        .await
        .unwrap();
    store.set_group_members(staff.id, &[dave.id]).await.unwrap();
    let all = store.group_memberships().await.unwrap();
    assert_eq!(
        all.get(&vip.id).map(Vec::as_slice),
        Some(&[carol.id, dave.id][..])
    );
    assert_eq!(all.get(&staff.id).map(Vec::as_slice), Some(&[dave.id][..]));
    assert!(!all.contains_key(&empty.id), "{all:?}");
    // The same as asking group by group.
    for group in [vip.id, staff.id] {
        assert_eq!(all[&group], store.group_members(group).await.unwrap());
    }
}

/// A database made before restricted groups existed: the migration leaves every group open, so
/// every key goes on working.
async fn a_database_from_before_group_access_keeps_every_group_open(db: Arc<TestDb>) {
    let carol = user(&db.store, "carol", false).await;
    let team = db.store.create_group("team").await.unwrap();
    let made = db.store.create_key(key_for(carol.id, team.id)).await.unwrap();
    // Undo migration 2 as if it had never run.
    db.execute(&[
        "DROP TABLE group_members",
        "ALTER TABLE groups DROP COLUMN restricted",
        "DELETE FROM _sqlx_migrations WHERE version = 2",
    ])
    .await;
    let upgraded = db.reconnect(&db.master_key).await;
    let applied = db
        .raw_ints("SELECT version FROM _sqlx_migrations ORDER BY version")
        .await;
    assert_eq!(applied, [1, 2]);
    let groups = upgraded.list_groups().await.unwrap();
    assert_eq!(groups.len(), 2, "{groups:?}");
    assert!(groups.iter().all(|g| !g.restricted), "{groups:?}");
    assert!(upgraded.authenticate(made.key.expose()).await.unwrap().is_some());
    assert!(upgraded.group_members(team.id).await.unwrap().is_empty());
}

async fn a_change_that_reads_first_waits_for_another_writer(db: Arc<TestDb>) {
    let store = &db.store;
    let carol = user(store, "carol", false).await;
    let vip = store.create_group("vip").await.unwrap();
    // Another process (an admin command, another gateway on the same file) is writing. The change
    // reads the group before it writes: it must wait for that writer and then see its commit, not
    // fail with "database is locked" because what it read went stale meanwhile.
    let other = db
        .write_meanwhile(
            "INSERT INTO groups (name, created_at) VALUES ('other', 0)",
            std::time::Duration::from_millis(300),
        )
        .await;
    store.set_group_members(vip.id, &[carol.id]).await.unwrap();
    other.await.unwrap();
    assert_eq!(store.group_members(vip.id).await.unwrap(), [carol.id]);
    assert!(store.group_by_name("other").await.unwrap().is_some());
}

async fn the_later_of_two_member_edits_is_what_stays(db: Arc<TestDb>) {
    let store = &db.store;
    let (carol, dave, erin) = (
        user(store, "carol", false).await,
        user(store, "dave", false).await,
        user(store, "erin", false).await,
    );
    let vip = store.create_group("vip").await.unwrap();
    store.set_group_members(vip.id, &[carol.id]).await.unwrap();
    // One admin sets the members to {dave}, as `set_group_members` does it, and commits 400 ms
    // later; another sets them to {erin} meanwhile. The later edit's list is what stays.
    let (id, dave_id) = (vip.id.0, dave.id.0);
    let sql = match db.kind {
        crate::common::Kind::Postgres => format!(
            "WITH locked AS (UPDATE groups SET restricted = restricted WHERE id = {id} RETURNING id), \
             removed AS (DELETE FROM group_members WHERE group_id IN (SELECT id FROM locked)) \
             INSERT INTO group_members (group_id, user_id) SELECT id, {dave_id} FROM locked"
        ),
        crate::common::Kind::Sqlite => format!(
            "DELETE FROM group_members WHERE group_id = {id}; \
             INSERT INTO group_members (group_id, user_id) VALUES ({id}, {dave_id})"
        ),
    };
    let sql: &'static str = Box::leak(sql.into_boxed_str());
    let first = db
        .write_meanwhile(sql, std::time::Duration::from_millis(400))
        .await;
    store.set_group_members(vip.id, &[erin.id]).await.unwrap();
    first.await.unwrap();
    assert_eq!(store.group_members(vip.id).await.unwrap(), [erin.id]);
}

//! Admin pages: 403 for non-admins, accounts (live state, write-only credentials, test), groups,
//! users.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::disallowed_methods
)]

mod support;

use axum::http::StatusCode;
use imagegate_dispatch::{
    AccountSnapshot, AccountStatus as PoolStatus, ClassCounts, ClassLimits, CooldownKind, CooldownView,
    LastError, LimitScope, PoolSnapshot, Tier, UnixMillis,
};
use imagegate_store::{
    AccountId, AccountKind, AccountStatus, AccountTier, KeyLimits, NewAccount, NewApiKey, Secret, Timestamp,
};
use support::{Console, unescape};

const ADMIN_PAGES: [&str; 6] = [
    "/admin/accounts",
    "/admin/groups",
    "/admin/users",
    "/admin/usage",
    "/admin/usage.csv",
    "/admin/accounts/1",
];

#[tokio::test]
async fn non_admins_get_403_on_every_admin_page_and_action() {
    let console = Console::new().await;
    console.user("alice", "alice-password", false).await;
    let browser = console.login("alice", "alice-password").await;
    for page in ADMIN_PAGES {
        let reply = console.get(page, Some(&browser.cookie)).await;
        assert_eq!(reply.status, StatusCode::FORBIDDEN, "{page}");
        assert!(reply.body.contains("Admins only"), "{page}");
    }
    for action in [
        "/admin/groups",
        "/admin/users",
        "/admin/accounts",
        "/admin/accounts/1/test",
        "/admin/groups/1/access",
    ] {
        let reply = console.submit(&browser, action, &[("name", "sneaky")]).await;
        assert_eq!(reply.status, StatusCode::FORBIDDEN, "{action}");
    }
    assert!(console.store.group_by_name("sneaky").await.unwrap().is_none());
    assert!(!console.store.default_group().await.unwrap().restricted);
    assert!(console.store.user_by_name("sneaky").await.unwrap().is_none());
    assert!(console.backend.tested_accounts().is_empty());
    // Signed out: to the login page, not a 403.
    assert_eq!(
        console.get("/admin/accounts", None).await.status,
        StatusCode::SEE_OTHER
    );
    // The navigation does not offer admin pages to non-admins.
    let keys = console.get("/keys", Some(&browser.cookie)).await;
    assert!(!keys.body.contains("/admin/accounts"));
}

fn snapshot(id: AccountId) -> PoolSnapshot {
    let now = Timestamp::now().unix_ms().try_into().unwrap();
    PoolSnapshot {
        at: UnixMillis(now),
        accounts: vec![AccountSnapshot {
            id: imagegate_dispatch::AccountId::new(&id.to_string()),
            groups: vec![],
            tier: Tier::Pro,
            priority: 0,
            active: true,
            in_flight: ClassCounts {
                large: 1,
                standard: 3,
            },
            limits: ClassLimits {
                large: 2,
                standard: 6,
            },
            status: PoolStatus::Ok,
            cooldowns: vec![CooldownView {
                scope: LimitScope::ImagesOnly,
                until: UnixMillis(now + 90_000),
                kind: CooldownKind::RateLimited,
                reason: "429 from upstream, reset in 90 s".into(),
            }],
            successes: 12,
            failures: 2,
            last_error: Some(LastError {
                at: UnixMillis(now),
                message: "upstream 429 usage_limit_reached".into(),
            }),
        }],
    }
}

#[tokio::test]
async fn accounts_page_shows_live_state_and_never_the_credential() {
    let console = Console::new().await;
    console.user("root", "root-password", true).await;
    let group = console.store.default_group().await.unwrap();
    let mut new = NewAccount::new("pro-1", AccountKind::Openai);
    new.tier = AccountTier::Pro;
    new.concurrency_standard = 6;
    new.concurrency_large = 2;
    new.groups = vec![group.id];
    new.credential = Some(Secret::new("sk-upstream-TOPSECRET-1"));
    let account = console.store.create_account(new).await.unwrap();
    console.backend.set_snapshot(snapshot(account.id));
    let admin = console.login("root", "root-password").await;

    let page = console.get("/admin/accounts", Some(&admin.cookie)).await;
    assert_eq!(page.status, StatusCode::OK);
    for expected in [
        "pro-1",
        "pill-tier\">pro",
        "3 / 6",
        "1 / 2",
        "cooling down",
        "rate limited (image requests): 429 from upstream, reset in 90 s",
        "upstream 429 usage_limit_reached",
        "12 ok",
        "2 failed",
        "credential stored",
    ] {
        assert!(page.body.contains(expected), "missing {expected:?}");
    }
    let edit = console
        .get(&format!("/admin/accounts/{}", account.id), Some(&admin.cookie))
        .await;
    assert!(edit.body.contains("A credential is stored. It is never shown"));
    assert!(
        edit.body
            .contains(&format!("href=\"/admin/accounts/{}/delete\"", account.id)),
        "delete from the edit page"
    );
    assert!(!page.body.contains("TOPSECRET") && !edit.body.contains("TOPSECRET"));

    // Editing without a new credential keeps it; with one replaces it; neither shows it.
    let action = format!("/admin/accounts/{}", account.id);
    let form = [
        ("name", "pro-1"),
        ("tier", "team"),
        ("concurrency_standard", "5"),
        ("concurrency_large", "1"),
    ];
    let reply = console.submit(&admin, &action, &form).await;
    let after = console.follow(&reply, &admin).await;
    assert!(after.body.contains("Account “pro-1” saved."));
    let stored = console.store.account(account.id).await.unwrap();
    assert_eq!(
        (stored.tier, stored.concurrency_standard, stored.groups.len()),
        (AccountTier::Team, 5, 0)
    );
    assert_eq!(
        console
            .store
            .account_credential(account.id)
            .await
            .unwrap()
            .unwrap()
            .expose(),
        "sk-upstream-TOPSECRET-1"
    );
    let mut replaced = form.to_vec();
    replaced.push(("credential", "sk-upstream-TOPSECRET-2"));
    let reply = console.submit(&admin, &action, &replaced).await;
    let after = console.follow(&reply, &admin).await;
    assert!(after.body.contains("The new credential is stored."));
    assert!(!after.body.contains("TOPSECRET"));
    assert_eq!(
        console
            .store
            .account_credential(account.id)
            .await
            .unwrap()
            .unwrap()
            .expose(),
        "sk-upstream-TOPSECRET-2"
    );
    assert!(console.backend.account_changes() >= 2);
}

#[tokio::test]
async fn add_disable_test_and_delete_an_account() {
    let console = Console::new().await;
    console.user("root", "root-password", true).await;
    let admin = console.login("root", "root-password").await;
    let empty = console.get("/admin/accounts", Some(&admin.cookie)).await;
    assert!(empty.body.contains("No upstream accounts yet."));
    let group = console.store.default_group().await.unwrap().id.to_string();
    let reply = console
        .submit(
            &admin,
            "/admin/accounts",
            &[
                ("name", "sim-1"),
                ("kind", "openai"),
                ("tier", "plus"),
                ("base_url", "http://127.0.0.1:9/v1"),
                ("groups", &group),
                ("credential", "sk-upstream-NEWSECRET"),
            ],
        )
        .await;
    let page = console.follow(&reply, &admin).await;
    assert!(page.body.contains("Account “sim-1” added."), "{}", page.body);
    assert!(!page.body.contains("NEWSECRET"));
    let account = console.store.account_by_name("sim-1").await.unwrap().unwrap();
    assert_eq!(account.tier, AccountTier::Plus);
    assert_eq!(account.base_url.as_deref(), Some("http://127.0.0.1:9/v1"));
    assert!(account.has_credential);

    let bad = console
        .submit(
            &admin,
            "/admin/accounts",
            &[("name", "x"), ("concurrency_large", "0")],
        )
        .await;
    assert!(
        console
            .follow(&bad, &admin)
            .await
            .body
            .contains("Large concurrency must be a whole number")
    );

    let reply = console
        .submit(&admin, &format!("/admin/accounts/{}/disable", account.id), &[])
        .await;
    assert!(
        console
            .follow(&reply, &admin)
            .await
            .body
            .contains("Account “sim-1” disabled.")
    );
    assert_eq!(
        console.store.account(account.id).await.unwrap().status,
        AccountStatus::Disabled
    );
    console
        .submit(&admin, &format!("/admin/accounts/{}/enable", account.id), &[])
        .await;
    assert_eq!(
        console.store.account(account.id).await.unwrap().status,
        AccountStatus::Active
    );

    console
        .backend
        .set_test_result(Ok("1024x1024 png in 0.4 s".into()));
    let reply = console
        .submit(&admin, &format!("/admin/accounts/{}/test", account.id), &[])
        .await;
    assert!(
        console
            .follow(&reply, &admin)
            .await
            .body
            .contains("Test of “sim-1” passed: 1024x1024 png in 0.4 s")
    );
    console.backend.set_test_result(Err("401 invalid api key".into()));
    let reply = console
        .submit(&admin, &format!("/admin/accounts/{}/test", account.id), &[])
        .await;
    let page = console.follow(&reply, &admin).await;
    assert!(page.body.contains("Test of “sim-1” failed: 401 invalid api key"));
    assert!(page.body.contains("flash-error"));
    assert_eq!(console.backend.tested_accounts(), vec![account.id, account.id]);

    let confirm = console
        .get(
            &format!("/admin/accounts/{}/delete", account.id),
            Some(&admin.cookie),
        )
        .await;
    assert!(confirm.body.contains("Delete account “sim-1”?"));
    let reply = console
        .submit(&admin, &format!("/admin/accounts/{}/delete", account.id), &[])
        .await;
    assert!(
        console
            .follow(&reply, &admin)
            .await
            .body
            .contains("Account “sim-1” deleted.")
    );
    assert!(console.store.account_by_name("sim-1").await.unwrap().is_none());
}

#[tokio::test]
async fn a_stored_credential_is_not_sent_to_a_new_base_url_without_being_typed_again() {
    let console = Console::new().await;
    console.user("root", "root-password", true).await;
    let admin = console.login("root", "root-password").await;
    let reply = console
        .submit(
            &admin,
            "/admin/accounts",
            &[
                ("name", "main"),
                ("base_url", "https://upstream.example/v1"),
                ("credential", "sk-upstream-SECRET"),
            ],
        )
        .await;
    assert!(
        console
            .follow(&reply, &admin)
            .await
            .body
            .contains("Account “main” added.")
    );
    let account = console.store.account_by_name("main").await.unwrap().unwrap();
    let edit = format!("/admin/accounts/{}", account.id);
    let saved = |base_url: &'static str, extra: &'static [(&'static str, &'static str)]| {
        let mut form = vec![("name", "main"), ("base_url", base_url)];
        form.extend_from_slice(extra);
        form
    };

    // Moved without the credential: refused, nothing saved.
    let reply = console
        .submit(&admin, &edit, &saved("https://elsewhere.example/v1", &[]))
        .await;
    let page = console.follow(&reply, &admin).await;
    assert!(
        page.body
            .contains("a new base URL needs the credential typed again"),
        "{}",
        page.body
    );
    let stored = console.store.account(account.id).await.unwrap();
    assert_eq!(stored.base_url.as_deref(), Some("https://upstream.example/v1"));
    assert!(stored.has_credential);
    // Also when the URL is blanked (back to the default upstream).
    let reply = console.submit(&admin, &edit, &saved("", &[])).await;
    assert!(
        console
            .follow(&reply, &admin)
            .await
            .body
            .contains("a new base URL needs the credential typed again")
    );

    // Same URL, other fields: saved, the credential kept.
    let reply = console
        .submit(
            &admin,
            &edit,
            &saved("https://upstream.example/v1", &[("priority", "3")]),
        )
        .await;
    assert!(
        console
            .follow(&reply, &admin)
            .await
            .body
            .contains("Account “main” saved.")
    );
    let stored = console.store.account(account.id).await.unwrap();
    assert_eq!(stored.priority, 3);
    assert!(stored.has_credential);

    // Moved with a new credential, or with the old one removed: saved.
    let reply = console
        .submit(
            &admin,
            &edit,
            &saved("https://elsewhere.example/v1", &[("credential", "sk-other")]),
        )
        .await;
    assert!(
        console
            .follow(&reply, &admin)
            .await
            .body
            .contains("The new credential is stored.")
    );
    let reply = console
        .submit(
            &admin,
            &edit,
            &saved("https://third.example/v1", &[("clear_credential", "1")]),
        )
        .await;
    assert!(
        console
            .follow(&reply, &admin)
            .await
            .body
            .contains("The credential was removed.")
    );
    let stored = console.store.account(account.id).await.unwrap();
    assert_eq!(stored.base_url.as_deref(), Some("https://third.example/v1"));
    assert!(!stored.has_credential);
}

#[tokio::test]
async fn resetting_ones_own_password_ends_ones_other_sessions_but_not_this_one() {
    let console = Console::new().await;
    let root = console.user("root", "root-password", true).await;
    let here = console.login("root", "root-password").await;
    let elsewhere = console.login("root", "root-password").await;
    let reply = console
        .submit(&here, &format!("/admin/users/{}/password", root.id), &[])
        .await;
    let page = console.follow(&reply, &here).await;
    assert!(page.body.contains("New password for “root”"), "{}", page.body);
    assert_eq!(
        console.get("/keys", Some(&elsewhere.cookie)).await.status,
        StatusCode::SEE_OTHER,
        "the other session ended"
    );
    assert_eq!(
        console.get("/keys", Some(&here.cookie)).await.status,
        StatusCode::OK,
        "this one goes on"
    );
}

#[tokio::test]
async fn a_password_changed_elsewhere_ends_the_sessions_opened_with_the_old_one() {
    let console = Console::new().await;
    let carol = console.user("carol", "carol-password", false).await;
    let browser = console.login("carol", "carol-password").await;
    assert_eq!(
        console.get("/keys", Some(&browser.cookie)).await.status,
        StatusCode::OK
    );
    // Changed where this process's sessions are not told: another replica, or the command line.
    let hash = imagegate_console::hash_password("a-new-password").unwrap();
    console
        .store
        .set_user_password_hash(carol.id, Some(&hash))
        .await
        .unwrap();
    let reply = console.get("/keys", Some(&browser.cookie)).await;
    assert_eq!(reply.status, StatusCode::SEE_OTHER, "the old session ended");
    assert!(reply.location().starts_with("/login"), "{}", reply.location());
    let again = console.login("carol", "a-new-password").await;
    assert_eq!(
        console.get("/keys", Some(&again.cookie)).await.status,
        StatusCode::OK
    );
}

#[tokio::test]
async fn groups_can_be_added_once() {
    let console = Console::new().await;
    console.user("root", "root-password", true).await;
    let admin = console.login("root", "root-password").await;
    let reply = console.submit(&admin, "/admin/groups", &[("name", "vip")]).await;
    let page = console.follow(&reply, &admin).await;
    assert!(page.body.contains("Group “vip” added."));
    assert!(page.body.contains("no account: its keys get 429"));
    let again = console.submit(&admin, "/admin/groups", &[("name", "vip")]).await;
    assert!(
        console
            .follow(&again, &admin)
            .await
            .body
            .contains("A group named “vip” already exists.")
    );
}

#[tokio::test]
async fn an_admin_opens_a_group_to_chosen_members_only() {
    let console = Console::new().await;
    console.user("root", "root-password", true).await;
    let carol = console.user("carol", "carol-password", false).await;
    let dave = console.user("dave", "dave-password", false).await;
    let vip = console.store.create_group("vip").await.unwrap();
    let carols = console
        .store
        .create_key(NewApiKey {
            user_id: carol.id,
            group_id: vip.id,
            name: "carol-vip".into(),
            limits: KeyLimits::default(),
            fallback_ladder: false,
        })
        .await
        .unwrap();
    let admin = console.login("root", "root-password").await;
    let page = console.get("/admin/groups", Some(&admin.cookie)).await;
    assert!(page.body.contains("every user"));
    assert!(
        page.body
            .contains(&format!("name=\"members\" value=\"{}\"", dave.id))
    );
    assert!(
        !page.body.contains("> root</label>"),
        "admins are not offered as members"
    );

    let access = format!("/admin/groups/{}/access", vip.id);
    let dave_id = dave.id.to_string();
    let reply = console
        .submit(&admin, &access, &[("access", "members"), ("members", &dave_id)])
        .await;
    let page = unescape(&console.follow(&reply, &admin).await.body);
    assert!(
        page.contains("Group “vip” is now open to its 1 member(s) and the admins"),
        "{page}"
    );
    assert!(page.contains("members: dave, and admins"), "{page}");
    assert!(console.store.group(vip.id).await.unwrap().restricted);
    assert_eq!(console.store.group_members(vip.id).await.unwrap(), [dave.id]);
    assert!(
        console
            .store
            .authenticate(carols.key.expose())
            .await
            .unwrap()
            .is_none()
    );
    assert!(
        console
            .backend
            .invalidated_keys()
            .contains(&carols.record.public_id),
        "the group's keys are dropped from this replica's cache"
    );

    // Bad forms change nothing.
    for (form, said) in [
        (vec![("access", "everyone")], "Choose who may use the group."),
        (
            vec![("access", "members"), ("members", "99999")],
            "The form named an unknown user.",
        ),
        (
            vec![("access", "members"), ("members", "carol")],
            "The form named an unknown user.",
        ),
    ] {
        let reply = console.submit(&admin, &access, &form).await;
        let page = unescape(&console.follow(&reply, &admin).await.body);
        assert!(page.contains(said), "{form:?}: {page}");
        assert_eq!(
            console.store.group_members(vip.id).await.unwrap(),
            [dave.id],
            "{form:?}"
        );
        assert!(console.store.group(vip.id).await.unwrap().restricted, "{form:?}");
    }
    let missing = console
        .submit(&admin, "/admin/groups/99999/access", &[("access", "open")])
        .await;
    assert_eq!(missing.status, StatusCode::NOT_FOUND);

    // Opened again, with its members kept for next time.
    let reply = console
        .submit(&admin, &access, &[("access", "open"), ("members", &dave_id)])
        .await;
    let page = unescape(&console.follow(&reply, &admin).await.body);
    assert!(page.contains("Group “vip” is open to every user."), "{page}");
    assert!(!console.store.group(vip.id).await.unwrap().restricted);
    assert_eq!(console.store.group_members(vip.id).await.unwrap(), [dave.id]);
    assert!(
        console
            .store
            .authenticate(carols.key.expose())
            .await
            .unwrap()
            .is_some()
    );
}

#[tokio::test]
async fn users_get_a_generated_password_shown_once_and_can_sign_in() {
    let console = Console::new().await;
    let root = console.user("root", "root-password", true).await;
    let admin = console.login("root", "root-password").await;
    let reply = console.submit(&admin, "/admin/users", &[("name", "carol")]).await;
    let page = console.follow(&reply, &admin).await;
    assert!(page.body.contains("User “carol” added."), "{}", page.body);
    let marker = "<code id=\"new-password\" class=\"secret\">";
    let start = page.body.find(marker).unwrap() + marker.len();
    let password = page.body[start..start + 20].to_owned();
    assert!(password.chars().all(char::is_alphanumeric), "{password}");
    assert!(
        !console
            .get("/admin/users", Some(&admin.cookie))
            .await
            .body
            .contains(&password),
        "shown once"
    );
    let carol = console.login("carol", &password).await;
    assert_eq!(
        console.get("/admin/users", Some(&carol.cookie)).await.status,
        StatusCode::FORBIDDEN
    );

    // A reset ends carol's sessions and gives a new password.
    let carol_id = console.store.user_by_name("carol").await.unwrap().unwrap().id;
    let reply = console
        .submit(&admin, &format!("/admin/users/{carol_id}/password"), &[])
        .await;
    assert!(
        console
            .follow(&reply, &admin)
            .await
            .body
            .contains("New password for “carol”")
    );
    assert_eq!(
        console.get("/keys", Some(&carol.cookie)).await.status,
        StatusCode::SEE_OTHER
    );
    assert_eq!(
        console.try_login("carol", &password).await.status,
        StatusCode::UNAUTHORIZED
    );

    // Admin rights: granted to others, never removed from oneself.
    console
        .submit(
            &admin,
            &format!("/admin/users/{carol_id}/admin"),
            &[("admin", "1")],
        )
        .await;
    assert!(console.store.user(carol_id).await.unwrap().is_admin);
    let reply = console
        .submit(
            &admin,
            &format!("/admin/users/{}/admin", root.id),
            &[("admin", "0")],
        )
        .await;
    assert!(
        console
            .follow(&reply, &admin)
            .await
            .body
            .contains("You cannot remove your own admin rights.")
    );
    assert!(console.store.user(root.id).await.unwrap().is_admin);

    // A chosen password that is too short is refused.
    let reply = console
        .submit(&admin, "/admin/users", &[("name", "dave"), ("password", "short")])
        .await;
    assert!(
        console
            .follow(&reply, &admin)
            .await
            .body
            .contains("at least 8 characters")
    );
    assert!(console.store.user_by_name("dave").await.unwrap().is_none());
}

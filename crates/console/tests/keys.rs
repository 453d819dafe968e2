//! `/keys`: creating (shown once, only the hash stored), disabling, deleting, isolation, CSRF.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::disallowed_methods
)]

mod support;

use axum::http::StatusCode;
use imagegate_console::ConsoleConfig;
use imagegate_store::KeyStatus;
use support::{Console, unescape};

/// The first `sk-ig-...` key printed in full in `html`.
fn full_key(html: &str) -> Option<String> {
    let start =
        html.find("<code id=\"new-key\" class=\"secret\">")? + "<code id=\"new-key\" class=\"secret\">".len();
    let end = html[start..].find('<')?;
    Some(html[start..start + end].to_owned())
}

#[tokio::test]
async fn a_new_key_is_shown_once_with_snippets_and_only_its_hash_is_stored() {
    let console = Console::with_config(ConsoleConfig {
        base_url_hint: Some("https://images.example.com/".into()),
        ..ConsoleConfig::default()
    })
    .await;
    let alice = console.user("alice", "alice-password", false).await;
    let browser = console.login("alice", "alice-password").await;
    let empty = console.get("/keys", Some(&browser.cookie)).await;
    assert!(empty.body.contains("You have no keys yet."));
    let group = console.store.default_group().await.unwrap();

    let reply = console
        .submit(
            &browser,
            "/keys",
            &[("name", "laptop"), ("group", &group.id.to_string())],
        )
        .await;
    let page = console.follow(&reply, &browser).await;
    assert!(page.body.contains("Key “laptop” created. Copy it now"), "flash");
    let key = full_key(&page.body).expect("the new key on the page");
    assert!(key.starts_with("sk-ig-"));
    let text = unescape(&page.body);
    assert!(
        text.contains(&format!("-H \"Authorization: Bearer {key}\"")),
        "curl snippet"
    );
    assert!(text.contains("curl -sS https://images.example.com/v1/images/generations"));
    assert!(text.contains(&format!(
        "OpenAI(base_url=\"https://images.example.com/v1\", api_key=\"{key}\")"
    )));
    assert!(page.body.contains("data-copy=\"new-key\""), "copy button");

    // It works, and it is never shown again.
    let auth = console
        .store
        .authenticate(&key)
        .await
        .unwrap()
        .expect("the key authenticates");
    assert_eq!(auth.user_id, alice.id);
    let again = console.get("/keys", Some(&browser.cookie)).await;
    assert!(!again.body.contains(&key));
    let record = console
        .store
        .list_keys(Some(alice.id))
        .await
        .unwrap()
        .pop()
        .unwrap();
    assert!(
        again.body.contains(&record.masked()),
        "the visible prefix is listed"
    );
    assert!(again.body.contains("laptop") && again.body.contains("never"));

    // The database files hold the public id but not the secret part.
    let secret = key.rsplit('-').next().unwrap();
    let mut stored = Vec::new();
    for entry in std::fs::read_dir(console.dir.path()).unwrap() {
        stored.extend(std::fs::read(entry.unwrap().path()).unwrap());
    }
    let stored = String::from_utf8_lossy(&stored);
    assert!(stored.contains(&record.public_id));
    assert!(!stored.contains(secret), "the secret must not be stored");
}

#[tokio::test]
async fn a_new_key_survives_a_page_that_failed_before_showing_it() {
    use sqlx::Connection as _;
    let console = Console::new().await;
    console.user("alice", "alice-password", false).await;
    let browser = console.login("alice", "alice-password").await;
    let group = console.store.default_group().await.unwrap();
    let reply = console
        .submit(
            &browser,
            "/keys",
            &[("name", "laptop"), ("group", &group.id.to_string())],
        )
        .await;
    // The database fails the page's list of keys once (the table is briefly away).
    let url = format!("sqlite://{}", console.dir.path().join("imagegate.db").display());
    let mut raw = sqlx::SqliteConnection::connect(&url).await.unwrap();
    sqlx::query("ALTER TABLE api_keys RENAME TO api_keys_away")
        .execute(&mut raw)
        .await
        .unwrap();
    let failed = console.follow(&reply, &browser).await;
    assert!(failed.status.is_server_error(), "{}", failed.status);
    assert!(full_key(&failed.body).is_none());
    sqlx::query("ALTER TABLE api_keys_away RENAME TO api_keys")
        .execute(&mut raw)
        .await
        .unwrap();
    // Trying again shows the key that was created, still only once.
    let page = console.get("/keys", Some(&browser.cookie)).await;
    let key = full_key(&page.body).expect("the new key, kept for the next try");
    assert!(key.starts_with("sk-ig-"));
    let again = console.get("/keys", Some(&browser.cookie)).await;
    assert!(full_key(&again.body).is_none(), "shown once");
}

#[tokio::test]
async fn disable_enable_and_delete_with_confirmation_invalidate_the_cache() {
    let console = Console::new().await;
    let alice = console.user("alice", "alice-password", false).await;
    let browser = console.login("alice", "alice-password").await;
    let group = console.store.default_group().await.unwrap();
    console
        .submit(
            &browser,
            "/keys",
            &[("name", "ci"), ("group", &group.id.to_string())],
        )
        .await;
    let key = console
        .store
        .list_keys(Some(alice.id))
        .await
        .unwrap()
        .pop()
        .unwrap();

    let disabled = console
        .submit(&browser, &format!("/keys/{}/disable", key.id), &[])
        .await;
    let page = console.follow(&disabled, &browser).await;
    assert!(page.body.contains("Key “ci” disabled"));
    assert!(page.body.contains("pill-disabled"));
    assert_eq!(
        console.store.key(key.id).await.unwrap().status,
        KeyStatus::Disabled
    );

    console
        .submit(&browser, &format!("/keys/{}/enable", key.id), &[])
        .await;
    assert_eq!(console.store.key(key.id).await.unwrap().status, KeyStatus::Active);

    // Switched off by an administrator: the owner can no longer switch it on (or turn the
    // suspension into an ordinary disabling it could then undo).
    console.store.suspend_key(key.id).await.unwrap();
    let keys_page = console.get("/keys", Some(&browser.cookie)).await;
    assert!(keys_page.body.contains("pill-suspended"));
    assert!(
        !keys_page
            .body
            .contains(&format!("action=\"/keys/{}/enable\"", key.id)),
        "no enable button for a suspended key"
    );
    for action in ["enable", "disable"] {
        let refused = console
            .submit(&browser, &format!("/keys/{}/{action}", key.id), &[])
            .await;
        let page = console.follow(&refused, &browser).await;
        assert!(
            page.body.contains("only an administrator can enable it"),
            "{action}: {}",
            page.body
        );
        assert_eq!(
            console.store.key(key.id).await.unwrap().status,
            KeyStatus::Suspended
        );
    }
    console.store.reinstate_key(key.id).await.unwrap();

    let confirm = console
        .get(&format!("/keys/{}/delete", key.id), Some(&browser.cookie))
        .await;
    assert_eq!(confirm.status, StatusCode::OK);
    assert!(confirm.body.contains("Delete key “ci”?"));
    assert!(
        confirm
            .body
            .contains(&format!("action=\"/keys/{}/delete\"", key.id))
    );
    assert_eq!(
        console.store.key(key.id).await.unwrap().status,
        KeyStatus::Active,
        "GET changes nothing"
    );

    let deleted = console
        .submit(&browser, &format!("/keys/{}/delete", key.id), &[])
        .await;
    let page = console.follow(&deleted, &browser).await;
    assert!(page.body.contains("Key “ci” deleted."));
    assert!(page.body.contains("You have no keys yet."));
    assert_eq!(
        console.store.key(key.id).await.unwrap().status,
        KeyStatus::Deleted
    );
    assert_eq!(console.backend.invalidated_keys(), vec![key.public_id.clone(); 3]);
}

#[tokio::test]
async fn invalid_input_is_explained() {
    let console = Console::new().await;
    console.user("alice", "alice-password", false).await;
    let browser = console.login("alice", "alice-password").await;
    let reply = console
        .submit(&browser, "/keys", &[("name", "  "), ("group", "1")])
        .await;
    assert!(
        console
            .follow(&reply, &browser)
            .await
            .body
            .contains("Give the key a name.")
    );
    let reply = console
        .submit(&browser, "/keys", &[("name", "x"), ("group", "999")])
        .await;
    assert!(
        console
            .follow(&reply, &browser)
            .await
            .body
            .contains("That group does not exist.")
    );
}

#[tokio::test]
async fn posts_never_followed_keep_only_the_newest_messages() {
    let console = Console::new().await;
    console.user("alice", "alice-password", false).await;
    let browser = console.login("alice", "alice-password").await;
    for _ in 0..40 {
        console
            .submit(&browser, "/keys", &[("name", "x"), ("group", "999")])
            .await;
    }
    let last = console
        .submit(&browser, "/keys", &[("name", "  "), ("group", "1")])
        .await;
    let page = console.follow(&last, &browser).await.body;
    let shown = page.matches("flash-error").count();
    assert!(
        (2..=5).contains(&shown),
        "41 unread messages are cut to the newest few, not {shown}"
    );
    assert!(page.contains("Give the key a name."), "the newest one stays");
    assert!(page.contains("That group does not exist."));
    let again = console.get("/keys", Some(&browser.cookie)).await.body;
    assert_eq!(again.matches("flash-error").count(), 0, "shown once");
}

#[tokio::test]
async fn users_see_and_touch_only_their_own_keys() {
    let console = Console::new().await;
    let alice = console.user("alice", "alice-password", false).await;
    console.user("bob", "bob-password", false).await;
    let group = console.store.default_group().await.unwrap();
    let alice_browser = console.login("alice", "alice-password").await;
    console
        .submit(
            &alice_browser,
            "/keys",
            &[("name", "alice-secret-project"), ("group", &group.id.to_string())],
        )
        .await;
    let key = console
        .store
        .list_keys(Some(alice.id))
        .await
        .unwrap()
        .pop()
        .unwrap();

    let bob = console.login("bob", "bob-password").await;
    let page = console.get("/keys", Some(&bob.cookie)).await;
    assert!(!page.body.contains("alice-secret-project"));
    assert!(!page.body.contains(&key.public_id));
    for action in ["disable", "delete"] {
        let reply = console
            .submit(&bob, &format!("/keys/{}/{action}", key.id), &[])
            .await;
        assert_eq!(reply.status, StatusCode::NOT_FOUND, "{action}");
    }
    assert_eq!(
        console
            .get(&format!("/keys/{}/delete", key.id), Some(&bob.cookie))
            .await
            .status,
        StatusCode::NOT_FOUND
    );
    assert_eq!(console.store.key(key.id).await.unwrap().status, KeyStatus::Active);
    assert!(console.backend.invalidated_keys().is_empty());
}

#[tokio::test]
async fn posts_without_the_right_csrf_token_are_refused() {
    let console = Console::new().await;
    let alice = console.user("alice", "alice-password", false).await;
    let browser = console.login("alice", "alice-password").await;
    let group = console.store.default_group().await.unwrap().id.to_string();

    let without = console
        .post(
            "/keys",
            Some(&browser.cookie),
            &[("name", "forged"), ("group", &group)],
        )
        .await;
    assert_eq!(without.status, StatusCode::FORBIDDEN);
    assert!(without.body.contains("security token"));
    let wrong = "0".repeat(64);
    let forged = console
        .post(
            "/keys",
            Some(&browser.cookie),
            &[("csrf", &wrong), ("name", "forged"), ("group", &group)],
        )
        .await;
    assert_eq!(forged.status, StatusCode::FORBIDDEN);
    // Another user's token does not work either.
    console.user("bob", "bob-password", false).await;
    let bob = console.login("bob", "bob-password").await;
    let crossed = console
        .post(
            "/keys",
            Some(&browser.cookie),
            &[("csrf", &bob.csrf), ("name", "forged"), ("group", &group)],
        )
        .await;
    assert_eq!(crossed.status, StatusCode::FORBIDDEN);
    assert!(console.store.list_keys(Some(alice.id)).await.unwrap().is_empty());
    // Signed out: back to the login page.
    let anonymous = console
        .post(
            "/keys",
            None,
            &[("csrf", &browser.csrf), ("name", "x"), ("group", &group)],
        )
        .await;
    assert_eq!(anonymous.status, StatusCode::SEE_OTHER);
    assert_eq!(anonymous.location(), "/login");
}

#[tokio::test]
async fn a_restricted_group_is_offered_and_usable_only_by_its_members() {
    let console = Console::new().await;
    let alice = console.user("alice", "alice-password", false).await;
    let bob = console.user("bob", "bob-password", false).await;
    let vip = console.store.create_group("vip").await.unwrap();
    let option = format!("<option value=\"{}\"", vip.id);
    let alice_browser = console.login("alice", "alice-password").await;
    // Open: offered to Alice, and she makes a key in it.
    assert!(
        console
            .get("/keys", Some(&alice_browser.cookie))
            .await
            .body
            .contains(&option)
    );
    let made = console
        .submit(
            &alice_browser,
            "/keys",
            &[("name", "vip-key"), ("group", &vip.id.to_string())],
        )
        .await;
    let page = console.follow(&made, &alice_browser).await;
    assert!(full_key(&page.body).is_some(), "{}", page.body);

    console.store.set_group_restricted(vip.id, true).await.unwrap();
    console.store.set_group_members(vip.id, &[bob.id]).await.unwrap();
    // Restricted to Bob: Alice is not offered it, a forged form is refused, and her key is marked.
    let page = console.get("/keys", Some(&alice_browser.cookie)).await;
    assert!(!page.body.contains(&option), "{}", page.body);
    assert!(page.body.contains("closed to you: the key is refused"));
    let forged = console
        .submit(
            &alice_browser,
            "/keys",
            &[("name", "sneaky"), ("group", &vip.id.to_string())],
        )
        .await;
    let page = unescape(&console.follow(&forged, &alice_browser).await.body);
    assert!(page.contains("That group is open to its members only"), "{page}");
    let alices = console.store.list_keys(Some(alice.id)).await.unwrap();
    assert_eq!(alices.len(), 1, "no key made in the restricted group: {alices:?}");

    let bob_browser = console.login("bob", "bob-password").await;
    let page = console.get("/keys", Some(&bob_browser.cookie)).await;
    assert!(page.body.contains(&option));
    let made = console
        .submit(
            &bob_browser,
            "/keys",
            &[("name", "bob-vip"), ("group", &vip.id.to_string())],
        )
        .await;
    let page = console.follow(&made, &bob_browser).await;
    let key = full_key(&page.body).expect("bob's key shown");
    assert!(console.store.authenticate(&key).await.unwrap().is_some());
    assert!(!page.body.contains("closed to you"));
}

#[tokio::test]
async fn the_form_offers_the_group_of_the_newest_key_first() {
    let console = Console::new().await;
    let alice = console.user("alice", "alice-password", false).await;
    let demo = console.store.create_group("demo").await.unwrap();
    let browser = console.login("alice", "alice-password").await;
    let selected = |id: imagegate_store::GroupId| format!("<option value=\"{id}\" selected>");
    let default = console
        .store
        .group_by_name(imagegate_store::DEFAULT_GROUP)
        .await
        .unwrap()
        .unwrap();
    // No key yet: `default`.
    let page = console.get("/keys", Some(&browser.cookie)).await;
    assert!(page.body.contains(&selected(default.id)), "{}", page.body);
    // A key in `demo` (as `imagegate demo` makes one): the next goes there too.
    console
        .store
        .create_key(imagegate_store::NewApiKey {
            user_id: alice.id,
            group_id: demo.id,
            name: "first".into(),
            limits: imagegate_store::KeyLimits::default(),
            fallback_ladder: false,
        })
        .await
        .unwrap();
    let page = console.get("/keys", Some(&browser.cookie)).await;
    assert!(page.body.contains(&selected(demo.id)), "{}", page.body);
    assert!(!page.body.contains(&selected(default.id)));
}

#[tokio::test]
async fn a_page_asked_with_another_method_is_a_405_page() {
    let console = Console::new().await;
    let request = axum::http::Request::builder()
        .method("PUT")
        .uri("/keys")
        .body(axum::body::Body::empty())
        .unwrap();
    let reply = console.send(request).await;
    assert_eq!(reply.status, StatusCode::METHOD_NOT_ALLOWED, "{}", reply.body);
    assert!(reply.body.contains("Method not allowed"), "{}", reply.body);
}

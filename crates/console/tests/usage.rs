//! `/usage` and `/admin/usage`: isolation, filters, totals, the SVG chart, CSV export.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::disallowed_methods
)]

mod support;

use axum::http::StatusCode;
use imagegate_store::{AccountKind, KeyLimits, NewAccount, NewApiKey, Timestamp};
use support::{Console, record};

struct World {
    console: Console,
    alice_key: imagegate_store::ApiKeyRecord,
    bob_key: imagegate_store::ApiKeyRecord,
}

/// alice (2 requests, one failed) and bob (1 request, 1536x1024) with one key each; root is admin.
async fn world() -> World {
    let console = Console::new().await;
    let alice = console.user("alice", "alice-password", false).await;
    let bob = console.user("bob", "bob-password", false).await;
    console.user("root", "root-password", true).await;
    let group = console.store.default_group().await.unwrap();
    let account = console
        .store
        .create_account(NewAccount::new("acct-a", AccountKind::Sim))
        .await
        .unwrap();
    let mut keys = Vec::new();
    for (user, name) in [(alice.id, "alice-laptop"), (bob.id, "=HYPERLINK(\"x\")")] {
        let key = NewApiKey {
            user_id: user,
            group_id: group.id,
            name: name.into(),
            limits: KeyLimits::default(),
            fallback_ladder: false,
        };
        keys.push(console.store.create_key(key).await.unwrap().record);
    }
    let (alice_key, bob_key) = (keys.remove(0), keys.remove(0));
    let mut ok = record("req-alice-ok", alice.id, alice_key.id, group.id, 2, 4_010);
    ok.account_id = Some(account.id);
    let mut failed = record("req-alice-failed", alice.id, alice_key.id, group.id, 0, 10);
    failed.status = 429;
    failed.error_code = Some("usage_limit_reached".into());
    failed.created_at = Timestamp::from_unix_ms(Timestamp::now().unix_ms() - 86_400_000);
    let mut bobs = record("req-bob", bob.id, bob_key.id, group.id, 1, 7_010);
    bobs.size_requested = Some("1536x1024".into());
    bobs.size_produced = Some("1536x1024".into());
    bobs.account_id = Some(account.id);
    console.usage(vec![ok, failed, bobs]).await;
    World {
        console,
        alice_key,
        bob_key,
    }
}

#[tokio::test]
async fn a_user_sees_only_their_requests_with_totals_and_a_chart() {
    let w = world().await;
    let alice = w.console.login("alice", "alice-password").await;
    let page = w.console.get("/usage", Some(&alice.cookie)).await;
    assert_eq!(page.status, StatusCode::OK);
    assert!(page.body.contains("alice-laptop"));
    assert!(
        !page.body.contains("HYPERLINK") && !page.body.contains("1536x1024"),
        "bob's request leaked"
    );
    // Totals: 2 requests, 1 failed, 2 images, 4,020 tokens.
    for expected in [
        "<dt>Requests</dt><dd>2</dd>",
        "<dt>Failed</dt><dd>1</dd>",
        "<dt>Images</dt><dd>2</dd>",
        "<dd>4,020</dd>",
    ] {
        assert!(page.body.contains(expected), "missing {expected}");
    }
    assert!(page.body.contains("usage_limit_reached"));
    // Two inline SVG charts, 30 days each, with today's bar.
    assert_eq!(page.body.matches("<svg class=\"chart").count(), 2);
    assert_eq!(page.body.matches("<rect class=\"bar\"").count(), 60);
    let today = Timestamp::now().date_string();
    assert!(
        page.body.contains(&format!("<title>{today}: 2 images</title>")),
        "today's image bar"
    );
    assert!(
        page.body
            .contains(&format!("<title>{today}: 4010 tokens</title>")),
        "today's token bar"
    );

    // Asking for bob's key through the query does not reveal his usage.
    let sneaky = w
        .console
        .get(&format!("/usage?f=1&key={}", w.bob_key.id), Some(&alice.cookie))
        .await;
    assert!(!sneaky.body.contains("1536x1024"));
    assert!(sneaky.body.contains("No requests match these filters."));
}

#[tokio::test]
async fn filters_by_status_and_date() {
    let w = world().await;
    let alice = w.console.login("alice", "alice-password").await;
    let failed = w
        .console
        .get("/usage?f=1&status=failed", Some(&alice.cookie))
        .await;
    assert!(failed.body.contains("<dt>Requests</dt><dd>1</dd>"));
    assert!(failed.body.contains("429"));
    let today = Timestamp::now().date_string();
    let today_only = w
        .console
        .get(
            &format!("/usage?f=1&from={today}&to={today}"),
            Some(&alice.cookie),
        )
        .await;
    assert!(today_only.body.contains("<dt>Requests</dt><dd>1</dd>"));
    assert!(!today_only.body.contains("usage_limit_reached"));
    let by_key = w
        .console
        .get(&format!("/usage?f=1&key={}", w.alice_key.id), Some(&alice.cookie))
        .await;
    assert!(by_key.body.contains("<dt>Requests</dt><dd>2</dd>"));
    let bad = w
        .console
        .get("/usage?f=1&from=yesterday", Some(&alice.cookie))
        .await;
    assert_eq!(bad.status, StatusCode::OK);
    assert!(
        bad.body
            .contains("Ignored the from date “yesterday” (use YYYY-MM-DD).")
    );
}

#[tokio::test]
async fn admins_see_everyone_filter_by_size_and_export_csv() {
    let w = world().await;
    let root = w.console.login("root", "root-password").await;
    let page = w.console.get("/admin/usage", Some(&root.cookie)).await;
    assert_eq!(page.status, StatusCode::OK);
    assert!(page.body.contains("<dt>Requests</dt><dd>3</dd>"));
    assert!(page.body.contains("acct-a") && page.body.contains("alice") && page.body.contains("bob"));
    assert!(page.body.contains("href=\"/admin/usage.csv?"), "CSV link");

    let by_size = w
        .console
        .get("/admin/usage?f=1&size=1536x1024", Some(&root.cookie))
        .await;
    assert!(by_size.body.contains("<dt>Requests</dt><dd>1</dd>"));
    assert!(by_size.body.contains("<dd>7,010</dd>"));
    let by_user = w
        .console
        .get(
            &format!("/admin/usage?f=1&key={}", w.alice_key.id),
            Some(&root.cookie),
        )
        .await;
    assert!(by_user.body.contains("<dt>Requests</dt><dd>2</dd>"));

    let csv = w.console.get("/admin/usage.csv?f=1", Some(&root.cookie)).await;
    assert_eq!(csv.status, StatusCode::OK);
    assert_eq!(csv.headers["content-type"], "text/csv; charset=utf-8");
    assert!(
        csv.headers["content-disposition"]
            .to_str()
            .unwrap()
            .starts_with("attachment; filename=\"imagegate-usage-")
    );
    let lines: Vec<&str> = csv.body.split("\r\n").filter(|l| !l.is_empty()).collect();
    assert_eq!(lines.len(), 4, "{}", csv.body);
    assert!(lines[0].starts_with("created_at,request_id,user,key,group,account,"));
    let bob_line = lines.iter().find(|l| l.contains("req-bob")).unwrap();
    assert!(bob_line.contains(",bob,\"'=HYPERLINK(\"\"x\"\")\",default,acct-a,/v1/images/generations,gpt-image-2,1536x1024,1536x1024,low,png,1,1,false,200,,10,7000,7010,1500"), "{bob_line}");
    let failed_line = lines.iter().find(|l| l.contains("req-alice-failed")).unwrap();
    assert!(failed_line.contains(",429,usage_limit_reached,"));

    let filtered = w
        .console
        .get("/admin/usage.csv?f=1&size=1536x1024", Some(&root.cookie))
        .await;
    assert_eq!(filtered.body.split("\r\n").filter(|l| !l.is_empty()).count(), 2);
}

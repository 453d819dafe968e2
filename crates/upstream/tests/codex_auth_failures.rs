//! ChatGPT-subscription accounts: refreshes that fail, refused refreshed tokens, credentials that
//! cannot be used, and no token in any failure.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::disallowed_methods
)]

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::oauth::*;
use imagegate_upstream::{AccountTarget, FailureKind, Secret};
use serde_json::json;
use wiremock::matchers::{header, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

#[tokio::test]
async fn a_refused_refresh_token_makes_the_call_unauthorized() {
    let server = MockServer::start().await;
    Mock::given(path("/v1/responses"))
        .respond_with(unauthorized())
        .expect(1)
        .mount(&server)
        .await;
    Mock::given(path("/oauth/token"))
        .respond_with(ResponseTemplate::new(400).set_body_json(
            json!({"error": "invalid_grant", "error_description": "Refresh token rt-secret-9 is revoked"}),
        ))
        .expect(1)
        .mount(&server)
        .await;
    let store = Arc::new(Recorder::default());
    let target = codex_target(
        &server,
        json!({"access_token": "at-secret-1", "refresh_token": "rt-secret-9"}),
    );
    let failure = generate(&upstream_with(&server, &store), &target)
        .await
        .unwrap_err();
    assert_eq!(failure.kind, FailureKind::Unauthorized);
    assert_eq!(
        failure.message,
        "the upstream refused the access token (HTTP 401) and refreshing it failed: the token endpoint \
         refused the refresh token (HTTP 400, invalid_grant)"
    );
    assert_no_secret(&failure);
    assert!(store.saved().is_empty());
}

#[tokio::test]
async fn an_expired_token_whose_refresh_is_refused_is_not_sent() {
    let server = MockServer::start().await;
    Mock::given(path("/oauth/token"))
        .respond_with(ResponseTemplate::new(401).set_body_json(
            json!({"error": {"message": "Your refresh token has already been used",
            "type": "invalid_request_error", "code": "refresh_token_reused", "param": null}}),
        ))
        .expect(1)
        .mount(&server)
        .await;
    let store = Arc::new(Recorder::default());
    let target = codex_target(
        &server,
        json!({"access_token": "at-secret-1", "refresh_token": "rt-secret-9", "expires_at": now() - 1}),
    );
    let failure = generate(&upstream_with(&server, &store), &target)
        .await
        .unwrap_err();
    assert_eq!(failure.kind, FailureKind::Unauthorized);
    assert!(
        failure
            .message
            .contains("refreshing the expiring access token failed")
            && failure.message.contains("refresh_token_reused"),
        "{}",
        failure.message
    );
    assert_no_secret(&failure);
    let responses = server
        .received_requests()
        .await
        .unwrap()
        .iter()
        .filter(|r| r.url.path() == "/v1/responses")
        .count();
    assert_eq!(responses, 0, "an expired token is not sent");
}

#[tokio::test]
async fn a_second_refusal_after_the_refresh_is_unauthorized() {
    let server = MockServer::start().await;
    Mock::given(path("/v1/responses"))
        .respond_with(unauthorized())
        .expect(2)
        .mount(&server)
        .await;
    Mock::given(path("/oauth/token"))
        .respond_with(token_answer("at-secret-2", Some("rt-secret-2")))
        .expect(1)
        .mount(&server)
        .await;
    let store = Arc::new(Recorder::default());
    let target = codex_target(
        &server,
        json!({"access_token": "at-secret-1", "refresh_token": "rt-secret-1"}),
    );
    let failure = generate(&upstream_with(&server, &store), &target)
        .await
        .unwrap_err();
    assert_eq!(failure.kind, FailureKind::Unauthorized);
    assert_eq!(failure.status, Some(401));
    assert!(
        failure.message.contains("refreshed access token"),
        "{}",
        failure.message
    );
    assert_no_secret(&failure);
    assert_eq!(store.saved().len(), 1, "the refresh itself worked and was saved");
}

#[tokio::test]
async fn a_bare_access_token_is_not_refreshed() {
    let server = MockServer::start().await;
    Mock::given(path("/v1/responses"))
        .and(header("authorization", "Bearer at-secret-bare"))
        .respond_with(unauthorized())
        .expect(1)
        .mount(&server)
        .await;
    let store = Arc::new(Recorder::default());
    let target = AccountTarget {
        credential: Secret::new("at-secret-bare"),
        ..codex_target(&server, json!({}))
    };
    let failure = generate(&upstream_with(&server, &store), &target)
        .await
        .unwrap_err();
    assert_eq!(failure.kind, FailureKind::Unauthorized);
    assert!(
        failure.message.contains("no refresh token"),
        "{}",
        failure.message
    );
    assert_no_secret(&failure);
}

#[tokio::test]
async fn an_unreachable_token_endpoint_leaves_a_valid_token_in_use() {
    let server = MockServer::start().await;
    Mock::given(path("/oauth/token"))
        .respond_with(ResponseTemplate::new(503))
        .expect(1)
        .mount(&server)
        .await;
    Mock::given(path("/v1/responses"))
        .and(header("authorization", "Bearer at-1"))
        .respond_with(image_stream())
        .expect(1)
        .mount(&server)
        .await;
    let store = Arc::new(Recorder::default());
    let target = codex_target(
        &server,
        json!({"access_token": "at-1", "refresh_token": "rt-1", "expires_at": now() + 20}),
    );
    generate(&upstream_with(&server, &store), &target).await.unwrap();

    // Once expired, the outage is the call's failure, and a transient one.
    let expired = codex_target(
        &server,
        json!({"access_token": "at-9", "refresh_token": "rt-9", "expires_at": now() - 20}),
    );
    server.verify().await;
    server.reset().await;
    Mock::given(path("/oauth/token"))
        .respond_with(ResponseTemplate::new(503))
        .mount(&server)
        .await;
    let failure = generate(&upstream_with(&server, &store), &expired)
        .await
        .unwrap_err();
    assert_eq!(failure.kind, FailureKind::Transient);
    assert!(failure.message.contains("HTTP 503"), "{}", failure.message);
}

#[tokio::test]
async fn an_unusable_credential_is_unauthorized_without_a_request() {
    let server = MockServer::start().await;
    let store = Arc::new(Recorder::default());
    let target = AccountTarget {
        credential: Secret::new(r#"{"access_token": "at-secret-broken""#),
        ..codex_target(&server, json!({}))
    };
    let failure = generate(&upstream_with(&server, &store), &target)
        .await
        .unwrap_err();
    assert_eq!(failure.kind, FailureKind::Unauthorized);
    assert!(failure.message.contains("not valid JSON"), "{}", failure.message);
    assert_no_secret(&failure);
    assert!(server.received_requests().await.unwrap().is_empty());
}

/// Sets the account's stored credential (as another replica or an operator would) when the token
/// endpoint is called, or `later` (a replica still saving its refresh), and answers `answer` at
/// once.
struct ChangesTheStore {
    store: Arc<Recorder>,
    stored: serde_json::Value,
    answer: ResponseTemplate,
    later: Option<Duration>,
}

impl wiremock::Respond for ChangesTheStore {
    fn respond(&self, _request: &wiremock::Request) -> ResponseTemplate {
        let (store, stored) = (self.store.clone(), self.stored.clone());
        match self.later {
            None => store.store(7, &stored),
            Some(later) => {
                std::thread::spawn(move || {
                    std::thread::sleep(later);
                    store.store(7, &stored);
                });
            }
        }
        self.answer.clone()
    }
}

fn refresh_token_reused() -> ResponseTemplate {
    ResponseTemplate::new(401).set_body_json(json!({"error": {
        "message": "Your refresh token has already been used to generate a new access token.",
        "type": "invalid_request_error", "code": "refresh_token_reused", "param": null}}))
}

#[tokio::test]
async fn a_credential_another_replica_refreshed_is_used_without_refreshing_again() {
    let server = MockServer::start().await;
    Mock::given(path("/oauth/token"))
        .respond_with(refresh_token_reused())
        .expect(0)
        .mount(&server)
        .await;
    serves_one_image_to(&server, "at-2").await;
    let store = Arc::new(Recorder::default());
    // The other replica swapped rt-1 for rt-2 and saved; this one's directory still has rt-1.
    store.store(
        7,
        &json!({"access_token": "at-2", "refresh_token": "rt-2", "expires_at": now() + 3600}),
    );
    let target = codex_target(
        &server,
        json!({"access_token": "at-1", "refresh_token": "rt-1", "expires_at": now() + 30}),
    );
    generate(&upstream_with(&server, &store), &target).await.unwrap();
    assert!(store.saved().is_empty(), "nothing refreshed, nothing saved");
}

/// A refresh of `rt-1` refused as reused because another replica used it: that replica's refresh
/// lands in the store as the token endpoint answers, or `later`. The call uses it, saving nothing.
async fn refused_as_reused_while_another_replica_saves(later: Option<Duration>) {
    let server = MockServer::start().await;
    let store = Arc::new(Recorder::default());
    let first = json!({"access_token": "at-1", "refresh_token": "rt-1", "expires_at": now() + 30});
    store.store(7, &first);
    Mock::given(path("/oauth/token"))
        .and(wiremock::matchers::body_json(grant("rt-1")))
        .respond_with(ChangesTheStore {
            store: store.clone(),
            stored: json!({"access_token": "at-2", "refresh_token": "rt-2", "expires_at": now() + 3600}),
            answer: refresh_token_reused(),
            later,
        })
        .expect(1)
        .mount(&server)
        .await;
    serves_one_image_to(&server, "at-2").await;
    let target = codex_target(&server, first);
    let reply = generate(&upstream_with(&server, &store), &target).await;
    assert!(reply.is_ok(), "not unauthorized: {:?}", reply.err());
    assert!(store.saved().is_empty());
}

#[tokio::test]
async fn a_refresh_refused_because_another_replica_refreshed_first_uses_its_credential() {
    // The other replica's refresh lands while this one's is on its way, and uses up rt-1.
    refused_as_reused_while_another_replica_saves(None).await;
}

#[tokio::test]
async fn a_refresh_refused_while_another_replica_is_still_saving_its_refresh_uses_it() {
    refused_as_reused_while_another_replica_saves(Some(Duration::from_millis(300))).await;
}

#[tokio::test]
async fn a_refresh_never_overwrites_a_credential_replaced_while_it_ran() {
    let server = MockServer::start().await;
    let store = Arc::new(Recorder::default());
    let first = json!({"access_token": "at-1", "refresh_token": "rt-1", "expires_at": now() + 30});
    store.store(7, &first);
    let operators = json!({"access_token": "at-op", "refresh_token": "rt-op", "expires_at": now() + 3600});
    Mock::given(path("/oauth/token"))
        .respond_with(ChangesTheStore {
            store: store.clone(),
            stored: operators.clone(),
            answer: token_answer("at-2", Some("rt-2")),
            later: None,
        })
        .expect(1)
        .mount(&server)
        .await;
    serves_one_image_to(&server, "at-2").await;
    let target = codex_target(&server, first);
    let upstream = upstream_with(&server, &store);
    generate(&upstream, &target).await.unwrap();
    assert!(
        store.saved().is_empty(),
        "the refresh was not saved over the new credential"
    );
    use imagegate_upstream::CredentialStore as _;
    assert_eq!(
        store.load(7).await.unwrap().unwrap().expose(),
        operators.to_string(),
        "the operator's credential stays"
    );
}

#[tokio::test]
async fn a_refresh_whose_save_failed_is_refreshed_again_and_saved_over_the_credential_it_replaced() {
    let server = MockServer::start().await;
    let store = Arc::new(Recorder::default());
    let first = json!({"access_token": "at-1", "refresh_token": "rt-1", "expires_at": now() + 30});
    store.store(7, &first);
    store.fail_saves(1);
    let short_lived = |access: &str, refresh: &str| {
        ResponseTemplate::new(200)
            .set_body_json(json!({"access_token": access, "refresh_token": refresh, "expires_in": 30}))
    };
    Mock::given(path("/oauth/token"))
        .and(wiremock::matchers::body_json(grant("rt-1")))
        .respond_with(short_lived("at-2", "rt-2"))
        .expect(1)
        .mount(&server)
        .await;
    Mock::given(path("/oauth/token"))
        .and(wiremock::matchers::body_json(grant("rt-2")))
        .respond_with(short_lived("at-3", "rt-3"))
        .expect(1)
        .mount(&server)
        .await;
    for token in ["at-2", "at-3"] {
        serves_one_image_to(&server, token).await;
    }
    let upstream = upstream_with(&server, &store);
    let target = codex_target(&server, first);
    // Refreshed to at-2, whose save fails: the store still holds the first credential.
    generate(&upstream, &target).await.unwrap();
    assert_eq!(store.stored().unwrap()["access_token"], "at-1");
    // at-2 expires soon too: it is refreshed (its own refresh token, not the used-up rt-1, which
    // the store still holds), and the result saved over the credential it replaced.
    generate(&upstream, &target).await.unwrap();
    assert_eq!(store.stored().unwrap()["access_token"], "at-3");
}

#[tokio::test]
async fn a_refresh_refused_as_reused_waits_for_the_other_replicas_slow_save() {
    // The other replica's token call and save take 5 s: longer than a plain refusal is rechecked.
    refused_as_reused_while_another_replica_saves(Some(Duration::from_secs(5))).await;
}

#[tokio::test]
async fn a_silent_credential_store_does_not_hold_the_call() {
    // The token is refreshed; reading and saving the credential never answer.
    let server = MockServer::start().await;
    Mock::given(path("/oauth/token"))
        .respond_with(token_answer("at-2", Some("rt-2")))
        .expect(1)
        .mount(&server)
        .await;
    serves_one_image_to(&server, "at-2").await;
    let store = Arc::new(Recorder::default());
    store.go_silent();
    let target = codex_target(
        &server,
        json!({"access_token": "at-1", "refresh_token": "rt-1", "expires_at": now() + 30}),
    );
    let upstream = upstream_with(&server, &store);
    let reply = tokio::time::timeout(Duration::from_secs(25), generate(&upstream, &target))
        .await
        .expect("the call did not wait on the store for good");
    assert!(reply.is_ok(), "{:?}", reply.err());
}

#[tokio::test]
async fn a_failed_refresh_is_not_tried_again_by_every_call_while_the_token_works() {
    let server = MockServer::start().await;
    Mock::given(path("/oauth/token"))
        .respond_with(ResponseTemplate::new(503))
        .expect(1)
        .mount(&server)
        .await;
    Mock::given(path("/v1/responses"))
        .and(header("authorization", "Bearer at-1"))
        .respond_with(image_stream())
        .expect(2)
        .mount(&server)
        .await;
    let store = Arc::new(Recorder::default());
    let target = codex_target(
        &server,
        json!({"access_token": "at-1", "refresh_token": "rt-1", "expires_at": now() + 30}),
    );
    let upstream = upstream_with(&server, &store);
    generate(&upstream, &target).await.unwrap();
    generate(&upstream, &target).await.unwrap();
}

#[tokio::test]
async fn a_proxy_page_from_the_token_endpoint_is_an_outage_not_a_refusal() {
    let server = MockServer::start().await;
    Mock::given(path("/oauth/token"))
        .respond_with(ResponseTemplate::new(403).set_body_raw("<html>Just a moment...</html>", "text/html"))
        .mount(&server)
        .await;
    let store = Arc::new(Recorder::default());
    let expired = codex_target(
        &server,
        json!({"access_token": "at-9", "refresh_token": "rt-9", "expires_at": now() - 20}),
    );
    let failure = generate(&upstream_with(&server, &store), &expired)
        .await
        .unwrap_err();
    assert_eq!(failure.kind, FailureKind::Transient, "{}", failure.message);
    assert!(failure.message.contains("HTTP 403"), "{}", failure.message);
}

#[tokio::test]
async fn a_new_sign_in_stored_with_only_a_refresh_token_is_refreshed_and_used() {
    let server = MockServer::start().await;
    let store = Arc::new(Recorder::default());
    // The operator pasted a new sign-in (a refresh token alone); this process still holds the
    // old credential, whose refresh token is dead.
    store.store(7, &json!({"refresh_token": "rt-new"}));
    Mock::given(path("/oauth/token"))
        .and(wiremock::matchers::body_json(grant("rt-new")))
        .respond_with(token_answer("at-new", Some("rt-newer")))
        .expect(1)
        .mount(&server)
        .await;
    Mock::given(path("/oauth/token"))
        .and(wiremock::matchers::body_json(grant("rt-old")))
        .respond_with(ResponseTemplate::new(400).set_body_json(json!({"error": "invalid_grant"})))
        .expect(0)
        .mount(&server)
        .await;
    serves_one_image_to(&server, "at-new").await;
    let target = codex_target(
        &server,
        json!({"access_token": "at-old", "refresh_token": "rt-old", "expires_at": now() + 30}),
    );
    let reply = generate(&upstream_with(&server, &store), &target).await;
    assert!(reply.is_ok(), "{:?}", reply.err());
}

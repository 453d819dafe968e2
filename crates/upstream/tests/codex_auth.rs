//! ChatGPT-subscription accounts: the OAuth access token, the subscription headers, and the refresh
//! before expiry or after a 401 (once, shared by concurrent calls, saved once).
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
use common::{DEADLINE, events, generation, json_body, prompt_only};
use imagegate_domain::ImageParamsDraft;
use imagegate_upstream::{AccountTarget, HttpUpstream, Secret, Upstream, UpstreamCall};
use serde_json::{Value, json};
use wiremock::matchers::{body_json, body_partial_json, header, method, path};
use wiremock::{Mock, MockServer};

#[tokio::test]
async fn every_request_carries_the_token_and_the_subscription_headers() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v1/responses"))
        .and(header("authorization", "Bearer at-1"))
        .and(header("chatgpt-account-id", "acct-123"))
        .and(header("openai-beta", "responses=experimental"))
        .and(header("originator", "codex_cli_rs"))
        .respond_with(image_stream())
        .expect(1)
        .mount(&server)
        .await;
    let store = Arc::new(Recorder::default());
    let target = codex_target(
        &server,
        json!({"access_token": "at-1", "refresh_token": "rt-1", "expires_at": now() + 3600, "account_id": "acct-123"}),
    );
    let reply = generate(&upstream_with(&server, &store), &target).await.unwrap();
    assert_eq!(image_of(reply).await, "SU1H");
    assert!(store.saved().is_empty(), "nothing was refreshed");
}

#[tokio::test]
async fn a_token_about_to_expire_is_refreshed_before_the_call_and_saved_once() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/oauth/token"))
        .and(body_json(grant("rt-1")))
        .respond_with(token_answer("at-2", Some("rt-2")))
        .expect(1)
        .mount(&server)
        .await;
    Mock::given(path("/v1/responses"))
        .and(header("authorization", "Bearer at-2"))
        .and(header("chatgpt-account-id", "acct-1"))
        .respond_with(image_stream())
        .expect(3)
        .mount(&server)
        .await;
    let store = Arc::new(Recorder::default());
    let upstream = upstream_with(&server, &store);
    let target = codex_target(
        &server,
        json!({"access_token": "at-1", "refresh_token": "rt-1", "expires_at": now() + 30, "account_id": "acct-1"}),
    );
    generate(&upstream, &target).await.unwrap();
    // The account's stored credential has not been re-read yet: the refreshed one is still used.
    generate(&upstream, &target).await.unwrap();

    let saved = store.saved();
    assert_eq!(saved.len(), 1, "one refresh, saved once");
    let (account, credential) = &saved[0];
    assert_eq!(*account, 7);
    assert_eq!(credential["access_token"], "at-2");
    assert_eq!(
        credential["refresh_token"], "rt-2",
        "the rotated refresh token is kept"
    );
    assert_eq!(credential["account_id"], "acct-1");
    let expires_at = credential["expires_at"].as_i64().unwrap();
    assert!(
        (now() + 3590..=now() + 3610).contains(&expires_at),
        "{expires_at}"
    );

    // Once the server reads the saved credential back, it is recognised: still no second refresh.
    let reread = AccountTarget {
        credential: Secret::new(credential.to_string()),
        ..target
    };
    generate(&upstream, &reread).await.unwrap();
    assert_eq!(store.saved().len(), 1);
}

#[tokio::test]
async fn a_refused_token_is_refreshed_once_and_the_call_sent_again() {
    let server = MockServer::start().await;
    Mock::given(path("/v1/responses"))
        .and(header("authorization", "Bearer at-old"))
        .respond_with(unauthorized())
        .expect(1)
        .mount(&server)
        .await;
    Mock::given(path("/v1/responses"))
        .and(header("authorization", "Bearer at-new"))
        .respond_with(image_stream())
        .expect(2)
        .mount(&server)
        .await;
    Mock::given(path("/oauth/token"))
        .and(body_json(grant("rt-old")))
        .respond_with(token_answer("at-new", None))
        .expect(1)
        .mount(&server)
        .await;
    let store = Arc::new(Recorder::default());
    let upstream = upstream_with(&server, &store);
    // No expiry known: only the 401 tells the token is stale.
    let target = codex_target(
        &server,
        json!({"access_token": "at-old", "refresh_token": "rt-old"}),
    );
    let params = generation(ImageParamsDraft {
        stream: Some(true),
        ..prompt_only("a cat")
    });
    let reply = upstream
        .call(&target, UpstreamCall::Generate { params: &params }, DEADLINE)
        .await
        .unwrap();
    let events = events(reply).await;
    assert_eq!(events.len(), 1);
    let completed = events[0].as_ref().unwrap();
    assert_eq!(completed.event.as_deref(), Some("image_generation.completed"));
    generate(&upstream, &target).await.unwrap();
    let saved = store.saved();
    assert_eq!(saved.len(), 1);
    assert_eq!(
        saved[0].1,
        json!({"access_token": "at-new", "refresh_token": "rt-old", "expires_at": saved[0].1["expires_at"]})
    );
}

#[tokio::test]
async fn concurrent_calls_share_one_refresh() {
    let server = MockServer::start().await;
    Mock::given(path("/oauth/token"))
        .respond_with(token_answer("at-2", Some("rt-2")).set_delay(Duration::from_millis(300)))
        .expect(1)
        .mount(&server)
        .await;
    Mock::given(path("/v1/responses"))
        .and(header("authorization", "Bearer at-2"))
        .respond_with(image_stream())
        .expect(4)
        .mount(&server)
        .await;
    let store = Arc::new(Recorder::default());
    let upstream = upstream_with(&server, &store);
    let target = codex_target(
        &server,
        json!({"access_token": "at-1", "refresh_token": "rt-1", "expires_at": now() - 5}),
    );
    let calls = (0..4).map(|_| generate(&upstream, &target));
    for result in futures::future::join_all(calls).await {
        assert_eq!(image_of(result.unwrap()).await, "SU1H");
    }
    assert_eq!(store.saved().len(), 1);
}

#[tokio::test]
async fn a_credential_changed_from_outside_replaces_the_cached_one() {
    let server = MockServer::start().await;
    Mock::given(path("/oauth/token"))
        .respond_with(token_answer("at-2", Some("rt-2")))
        .expect(1)
        .mount(&server)
        .await;
    Mock::given(path("/v1/responses"))
        .and(header("authorization", "Bearer at-2"))
        .respond_with(image_stream())
        .expect(1)
        .mount(&server)
        .await;
    Mock::given(path("/v1/responses"))
        .and(header("authorization", "Bearer at-admin"))
        .respond_with(image_stream())
        .expect(1)
        .mount(&server)
        .await;
    let store = Arc::new(Recorder::default());
    let upstream = upstream_with(&server, &store);
    let target = codex_target(
        &server,
        json!({"access_token": "at-1", "refresh_token": "rt-1", "expires_at": now()}),
    );
    generate(&upstream, &target).await.unwrap();
    let replaced = codex_target(
        &server,
        json!({"access_token": "at-admin", "refresh_token": "rt-admin", "expires_at": now() + 3600}),
    );
    generate(&upstream, &replaced).await.unwrap();
}

#[tokio::test]
async fn forwarded_responses_calls_are_adapted_to_the_backend_and_use_the_token_and_its_refresh() {
    let server = MockServer::start().await;
    Mock::given(path("/v1/responses"))
        .and(header("authorization", "Bearer at-old"))
        .respond_with(unauthorized())
        .expect(1)
        .mount(&server)
        .await;
    Mock::given(path("/v1/responses"))
        .and(header("authorization", "Bearer at-new"))
        .and(header("chatgpt-account-id", "acct-5"))
        // What the ChatGPT backend takes: streamed, not stored, `input` a list, instructions.
        .and(body_partial_json(
            json!({"model": "gpt-5", "stream": true, "store": false,
            "input": [{"role": "user", "content": [{"type": "input_text", "text": "hi"}]}]}),
        ))
        .and(BodyHas("instructions"))
        .respond_with(image_stream())
        .expect(1)
        .mount(&server)
        .await;
    Mock::given(path("/oauth/token"))
        .respond_with(token_answer("at-new", Some("rt-new")))
        .expect(1)
        .mount(&server)
        .await;
    let store = Arc::new(Recorder::default());
    let target = codex_target(
        &server,
        json!({"access_token": "at-old", "refresh_token": "rt-old", "account_id": "acct-5"}),
    );
    let body = json!({"model": "gpt-5", "input": "hi"});
    let call = UpstreamCall::Respond {
        body: body.as_object().unwrap(),
        stream: false,
    };
    let reply = upstream_with(&server, &store)
        .call(&target, call, DEADLINE)
        .await
        .unwrap();
    // The client asked for no stream: it gets the response the stream ended with, whose output
    // the backend listed only in its items.
    let answer: Value = serde_json::from_slice(&json_body(reply).await).unwrap();
    assert_eq!(answer["id"], "resp_1");
    assert_eq!(answer["status"], "completed");
    assert_eq!(answer["output"][0]["result"], "SU1H");
    assert_eq!(answer["tool_usage"]["image_gen"]["total_tokens"], 3);
}

/// Matches a JSON body with a non-empty string at `key`.
struct BodyHas(&'static str);

impl wiremock::Match for BodyHas {
    fn matches(&self, request: &wiremock::Request) -> bool {
        serde_json::from_slice::<Value>(&request.body)
            .ok()
            .and_then(|body| body[self.0].as_str().map(|text| !text.is_empty()))
            .unwrap_or(false)
    }
}

/// An account whose token is about to expire, and a token endpoint that rotates rt-1 into rt-2
/// but answers only after 300 ms: the upstream, the account and where its refresh is saved.
async fn a_refresh_answering_late(server: &MockServer) -> (HttpUpstream, AccountTarget, Arc<Recorder>) {
    Mock::given(method("POST"))
        .and(path("/oauth/token"))
        .and(body_json(grant("rt-1")))
        .respond_with(token_answer("at-2", Some("rt-2")).set_delay(Duration::from_millis(300)))
        .expect(1)
        .mount(server)
        .await;
    Mock::given(path("/v1/responses"))
        .and(header("authorization", "Bearer at-2"))
        .respond_with(image_stream())
        .expect(1)
        .mount(server)
        .await;
    let store = Arc::new(Recorder::default());
    let target = codex_target(
        server,
        json!({"access_token": "at-1", "refresh_token": "rt-1", "expires_at": now() + 30, "account_id": "acct-1"}),
    );
    (upstream_with(server, &store), target, store)
}

/// After a call that ended before its refresh: the token endpoint used up rt-1, so its answer
/// was kept and saved, and the next call uses it without spending rt-1 again.
async fn the_late_refresh_was_kept(upstream: &HttpUpstream, target: &AccountTarget, store: &Recorder) {
    tokio::time::sleep(Duration::from_millis(600)).await;
    let saved = store.saved();
    assert_eq!(saved.len(), 1, "the rotated credential was saved");
    assert_eq!(saved[0].1["refresh_token"], "rt-2");
    generate(upstream, target).await.unwrap();
}

#[tokio::test]
async fn a_refresh_that_outlasts_its_calls_deadline_still_keeps_and_saves_the_rotated_token() {
    let server = MockServer::start().await;
    let (upstream, target, store) = a_refresh_answering_late(&server).await;
    // A late failover try: the call has 100 ms left.
    let params = generation(prompt_only("a cat"));
    let call = UpstreamCall::Generate { params: &params };
    let late = upstream.call(&target, call, Duration::from_millis(100)).await;
    assert!(late.is_err(), "the call ran out of time");
    the_late_refresh_was_kept(&upstream, &target, &store).await;
}

#[tokio::test]
async fn a_refresh_whose_caller_gave_up_still_keeps_and_saves_the_rotated_token() {
    let server = MockServer::start().await;
    let (upstream, target, store) = a_refresh_answering_late(&server).await;
    // The request is dropped (its client left) while the token endpoint is answering.
    let gave_up = tokio::time::timeout(Duration::from_millis(100), generate(&upstream, &target)).await;
    assert!(gave_up.is_err(), "the call ended before the refresh did");
    the_late_refresh_was_kept(&upstream, &target, &store).await;
}

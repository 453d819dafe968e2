//! What a ChatGPT-subscription upstream needs: the OAuth token endpoint, expired access tokens,
//! unsupported main models, and the account id and main models in the stats.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::disallowed_methods
)]

mod common;

use axum::http::StatusCode;
use common::*;
use imagegate_sim::SimConfig;
use serde_json::{Value, json};

fn grant(refresh_token: &str) -> Value {
    json!({"client_id": "app_test", "grant_type": "refresh_token", "refresh_token": refresh_token,
        "scope": "openid profile email"})
}

fn image_request(model: &str) -> Value {
    json!({"model": model, "stream": false, "input": "a red kite",
        "tools": [{"type": "image_generation", "size": "1024x640", "quality": "low"}],
        "tool_choice": {"type": "image_generation"}})
}

fn with_account(
    request: axum::http::Request<axum::body::Body>,
    account_id: &str,
) -> axum::http::Request<axum::body::Body> {
    with_header(request, "chatgpt-account-id", account_id)
}

#[tokio::test]
async fn refresh_tokens_are_exchanged_once_and_rotated() {
    let (state, app) = app_with(SimConfig {
        refresh_tokens: vec!["rt-config".into()],
        access_token_ttl: std::time::Duration::from_secs(900),
        ..SimConfig::default()
    });
    let answer = send(&app, post_json("/oauth/token", None, &grant("rt-config"))).await;
    assert_eq!(answer.status, StatusCode::OK);
    let tokens = answer.json();
    assert_eq!(tokens["access_token"], "sim-at-1");
    assert_eq!(tokens["refresh_token"], "sim-rt-1");
    assert_eq!(tokens["expires_in"], 900);
    assert_eq!(tokens["token_type"], "Bearer");
    assert_eq!(tokens["id_token"].as_str().unwrap().split('.').count(), 3);

    let reused = send(&app, post_json("/oauth/token", None, &grant("rt-config"))).await;
    assert_eq!(reused.status, StatusCode::UNAUTHORIZED);
    assert_eq!(reused.json()["error"]["code"], "refresh_token_reused");
    let unknown = send(&app, post_json("/oauth/token", None, &grant("rt-nobody"))).await;
    assert_eq!(unknown.status, StatusCode::BAD_REQUEST);
    assert_eq!(unknown.json()["error"], "invalid_grant");
    let rotated = send(&app, post_json("/oauth/token", None, &grant("sim-rt-1"))).await;
    assert_eq!(rotated.json()["access_token"], "sim-at-2");

    let stats = state.stats_snapshot();
    assert_eq!((stats.oauth.refreshes, stats.oauth.rejected), (2, 2));
    assert_eq!(stats.oauth.last_client_id.as_deref(), Some("app_test"));
    assert_eq!(stats.requests, 0, "the token endpoint is not an API request");
}

#[tokio::test]
async fn malformed_grants_are_refused_like_an_oauth_server() {
    let (state, app) = app();
    let cases = [
        (
            json!({"grant_type": "password", "client_id": "c", "refresh_token": "r"}),
            400,
            "unsupported_grant_type",
        ),
        (
            json!({"grant_type": "refresh_token", "refresh_token": "r"}),
            401,
            "invalid_client",
        ),
        (
            json!({"grant_type": "refresh_token", "client_id": "c"}),
            400,
            "invalid_request",
        ),
        (json!(["not", "an", "object"]), 400, "invalid_request"),
    ];
    for (body, status, error) in cases {
        let answer = send(&app, post_json("/oauth/token", None, &body)).await;
        assert_eq!(answer.status.as_u16(), status, "{body}");
        assert_eq!(answer.json()["error"], error, "{body}");
    }
    assert_eq!(state.stats_snapshot().oauth.rejected, 4);
}

#[tokio::test]
async fn registered_refresh_tokens_carry_the_account_id_into_the_id_token() {
    use base64::Engine as _;
    let (_, app) = app();
    let register =
        json!([{"refresh_token": "rt-admin", "account_id": "acct-42"}, {"refresh_token": "rt-other"}]);
    let answer = send(&app, post_json("/sim/oauth/refresh_tokens", None, &register)).await;
    assert_eq!(answer.json(), json!({"registered": 2}));
    let tokens = send(&app, post_json("/oauth/token", None, &grant("rt-admin")))
        .await
        .json();
    let claims = tokens["id_token"]
        .as_str()
        .unwrap()
        .split('.')
        .nth(1)
        .unwrap()
        .to_owned();
    let claims: Value = serde_json::from_slice(
        &base64::engine::general_purpose::URL_SAFE_NO_PAD
            .decode(claims)
            .unwrap(),
    )
    .unwrap();
    assert_eq!(
        claims["https://api.openai.com/auth"]["chatgpt_account_id"],
        "acct-42"
    );
    let bad = send(
        &app,
        post_json("/sim/oauth/refresh_tokens", None, &json!({"token": "x"})),
    )
    .await;
    assert_eq!(bad.status, StatusCode::BAD_REQUEST);
}

#[tokio::test]
async fn the_token_endpoint_takes_faults_scripted_for_its_path() {
    let (state, app) = app_with(SimConfig {
        refresh_tokens: vec!["rt-1".into()],
        ..SimConfig::default()
    });
    let rule = json!({"path": "/oauth/token", "fault": "503", "times": 1});
    send(&app, post_json("/sim/faults", None, &rule)).await;
    let down = send(&app, post_json("/oauth/token", None, &grant("rt-1"))).await;
    assert_eq!(down.status, StatusCode::SERVICE_UNAVAILABLE);
    let up = send(&app, post_json("/oauth/token", None, &grant("rt-1"))).await;
    assert_eq!(
        up.status,
        StatusCode::OK,
        "the refresh token was not used by the failed call"
    );
    assert_eq!(state.stats_snapshot().faults["503"], 1);
}

#[tokio::test]
async fn an_expired_access_token_is_refused_on_the_responses_endpoint() {
    let (_, app) = app();
    let rule = json!({"key": "at-expired", "fault": "401"});
    send(&app, post_json("/sim/faults", None, &rule)).await;
    for _ in 0..2 {
        let refused = send(
            &app,
            post_json("/v1/responses", Some("at-expired"), &image_request("gpt-5")),
        )
        .await;
        assert_eq!(refused.status, StatusCode::UNAUTHORIZED);
        assert_eq!(refused.json()["error"]["code"], "invalid_api_key");
    }
    let fine = send(
        &app,
        post_json("/v1/responses", Some("at-fresh"), &image_request("gpt-5")),
    )
    .await;
    assert_eq!(fine.status, StatusCode::OK);
}

#[tokio::test]
async fn an_unsupported_main_model_is_refused_and_the_models_and_account_are_recorded() {
    let (state, app) = app();
    let rule = json!({"key": "at-1", "fault": "model_unsupported", "model": "gpt-5.5"});
    send(&app, post_json("/sim/faults", None, &rule)).await;
    let request = with_account(
        post_json("/v1/responses", Some("at-1"), &image_request("gpt-5.5")),
        "acct-1",
    );
    let refused = send(&app, request).await;
    assert_eq!(refused.status, StatusCode::BAD_REQUEST);
    assert_eq!(
        refused.json(),
        json!({"detail": "The 'gpt-5.5' model is not supported when using Codex with a ChatGPT account."})
    );
    let request = with_account(
        post_json("/v1/responses", Some("at-1"), &image_request("gpt-5")),
        "acct-1",
    );
    let answer = send(&app, request).await;
    assert_eq!(answer.status, StatusCode::OK);
    assert_eq!(answer.json()["output"][0]["type"], "image_generation_call");
    // Another token is not concerned by the rule.
    let other = send(
        &app,
        post_json("/v1/responses", Some("at-2"), &image_request("gpt-5.5")),
    )
    .await;
    assert_eq!(other.status, StatusCode::OK);

    let stats = state.stats_snapshot();
    let at1 = &stats.by_token["at-1"];
    assert_eq!(at1.chatgpt_account_id.as_deref(), Some("acct-1"));
    assert_eq!(at1.main_models["gpt-5.5"], 1);
    assert_eq!(at1.main_models["gpt-5"], 1);
    assert_eq!(stats.by_token["at-2"].chatgpt_account_id, None);
    assert_eq!(stats.faults["model_unsupported"], 1);
    let json = send(&app, get("/sim/stats", None)).await.json();
    assert_eq!(
        json["by_token"]["at-1"]["main_models"],
        json!({"gpt-5": 1, "gpt-5.5": 1})
    );
    assert_eq!(json["by_token"]["at-1"]["chatgpt_account_id"], "acct-1");
}

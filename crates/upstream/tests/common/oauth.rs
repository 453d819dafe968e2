//! Helpers of the subscription-credential tests: a recording credential store, token endpoint
//! answers and a Responses stream with one image.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use imagegate_upstream::{
    AccountKind, AccountTarget, CodexAuthConfig, CredentialStore, Failure, HttpUpstream, Reply, Secret,
    Upstream, UpstreamCall, UpstreamConfig,
};
use serde_json::{Value, json};
use wiremock::matchers::{header, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

use super::{DEADLINE, generation, json_body, now_ms, prompt_only};

pub const CLIENT_ID: &str = "app_test_client";

/// Saved credentials, in order; and, once [`Recorder::store`] set one, the account's stored
/// credential, replaced only by a refresh of it (as the gateway's store does).
#[derive(Default)]
pub struct Recorder {
    saves: Mutex<Vec<(i64, String)>>,
    stored: Mutex<Option<(i64, Secret)>>,
    /// Saves still to fail (the database out of reach).
    failing: Mutex<u32>,
    /// Whether reads and writes never answer (a database that went silent).
    silent: std::sync::atomic::AtomicBool,
}

#[async_trait::async_trait]
impl CredentialStore for Recorder {
    async fn save(&self, account_id: i64, previous: &Secret, credential: Secret) -> Result<bool, String> {
        if self.silent.load(std::sync::atomic::Ordering::SeqCst) {
            std::future::pending::<()>().await;
        }
        {
            let mut failing = self.failing.lock().unwrap();
            if *failing > 0 {
                *failing -= 1;
                return Err("the database is out of reach".into());
            }
        }
        let mut stored = self.stored.lock().unwrap();
        if let Some((id, current)) = stored.as_ref()
            && (*id != account_id || current != previous)
        {
            return Ok(false);
        }
        if stored.is_some() {
            *stored = Some((account_id, credential.clone()));
        }
        self.saves
            .lock()
            .unwrap()
            .push((account_id, credential.expose().to_owned()));
        Ok(true)
    }

    async fn load(&self, account_id: i64) -> Result<Option<Secret>, String> {
        if self.silent.load(std::sync::atomic::Ordering::SeqCst) {
            std::future::pending::<()>().await;
        }
        let stored = self.stored.lock().unwrap();
        Ok(stored
            .as_ref()
            .filter(|(id, _)| *id == account_id)
            .map(|(_, credential)| credential.clone()))
    }
}

impl Recorder {
    /// Makes every read and write hang from now on.
    pub fn go_silent(&self) {
        self.silent.store(true, std::sync::atomic::Ordering::SeqCst);
    }

    /// Makes the next `count` saves fail.
    pub fn fail_saves(&self, count: u32) {
        *self.failing.lock().unwrap() = count;
    }

    /// The stored credential, once [`Recorder::store`] set one.
    pub fn stored(&self) -> Option<Value> {
        self.stored
            .lock()
            .unwrap()
            .as_ref()
            .map(|(_, credential)| serde_json::from_str(credential.expose()).unwrap())
    }

    /// Holds `credential` as the stored one of `account_id` (another replica saved it).
    pub fn store(&self, account_id: i64, credential: &Value) {
        *self.stored.lock().unwrap() = Some((account_id, Secret::new(credential.to_string())));
    }

    pub fn saved(&self) -> Vec<(i64, Value)> {
        self.saves
            .lock()
            .unwrap()
            .iter()
            .map(|(id, text)| (*id, serde_json::from_str(text).unwrap()))
            .collect()
    }
}

pub fn now() -> i64 {
    (now_ms() / 1000) as i64
}

pub fn upstream_with(server: &MockServer, store: &Arc<Recorder>) -> HttpUpstream {
    let config = UpstreamConfig {
        codex: CodexAuthConfig {
            token_url: format!("{}/oauth/token", server.uri()),
            client_id: CLIENT_ID.into(),
            refresh_skew: Duration::from_secs(60),
        },
        ..UpstreamConfig::default()
    };
    HttpUpstream::new(config)
        .unwrap()
        .with_credential_store(store.clone())
}

pub fn codex_target(server: &MockServer, credential: Value) -> AccountTarget {
    AccountTarget {
        account_id: 7,
        kind: AccountKind::Codex,
        base_url: format!("{}/v1", server.uri()),
        credential: Secret::new(credential.to_string()),
        main_models: vec!["gpt-5".into()],
    }
}

/// A Responses stream with one finished image.
pub fn image_stream() -> ResponseTemplate {
    let frames = [
        json!({"type": "response.created", "sequence_number": 0, "response": {"id": "resp_1", "status": "in_progress", "output": []}}),
        json!({"type": "response.output_item.done", "sequence_number": 1, "output_index": 0, "item": {
            "id": "ig_1", "type": "image_generation_call", "status": "completed", "result": "SU1H"}}),
        json!({"type": "response.completed", "sequence_number": 2, "response": {"id": "resp_1", "status": "completed",
            "output": [], "tool_usage": {"image_gen": {"input_tokens": 1, "output_tokens": 2, "total_tokens": 3}}}}),
    ];
    let body: String = frames
        .iter()
        .map(|frame| format!("event: {}\ndata: {frame}\n\n", frame["type"].as_str().unwrap()))
        .collect();
    ResponseTemplate::new(200).set_body_raw(body, "text/event-stream")
}

/// Mounts a Responses endpoint that answers one call with `Bearer <token>` with an image, and
/// expects exactly that one.
pub async fn serves_one_image_to(server: &MockServer, token: &str) {
    Mock::given(path("/v1/responses"))
        .and(header("authorization", format!("Bearer {token}")))
        .respond_with(image_stream())
        .expect(1)
        .mount(server)
        .await;
}

pub fn unauthorized() -> ResponseTemplate {
    ResponseTemplate::new(401).set_body_json(
        json!({"error": {"message": "Your authentication token has expired.",
        "type": "invalid_request_error", "code": "token_expired", "param": null}}),
    )
}

pub fn token_answer(access: &str, refresh: Option<&str>) -> ResponseTemplate {
    let mut answer = json!({"access_token": access, "expires_in": 3600, "token_type": "Bearer",
        "id_token": "not.a-jwt.really"});
    if let Some(refresh) = refresh {
        answer["refresh_token"] = json!(refresh);
    }
    ResponseTemplate::new(200).set_body_json(answer)
}

pub fn grant(refresh_token: &str) -> Value {
    json!({"client_id": CLIENT_ID, "grant_type": "refresh_token", "refresh_token": refresh_token,
        "scope": "openid profile email"})
}

pub async fn generate(upstream: &HttpUpstream, target: &AccountTarget) -> Result<Reply, Failure> {
    let params = generation(prompt_only("a cat"));
    upstream
        .call(target, UpstreamCall::Generate { params: &params }, DEADLINE)
        .await
}

pub async fn image_of(reply: Reply) -> Value {
    let body: Value = serde_json::from_slice(&json_body(reply).await).unwrap();
    body["data"][0]["b64_json"].clone()
}

pub fn assert_no_secret(failure: &Failure) {
    let shown = format!("{failure:?} {} {:?}", failure.message, failure.client_error());
    assert!(!shown.contains("secret"), "a token leaked: {shown}");
}

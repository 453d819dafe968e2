//! End to end: ChatGPT-subscription (`codex`) accounts. The gateway turns Images requests into
//! Responses calls on the simulator, with the account's OAuth access token, refreshes it at the
//! simulator's token endpoint and falls back to the next main model.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::disallowed_methods
)]

mod common;

use std::path::PathBuf;

use base64::Engine;
use common::Setup;
use imagegate_e2e::{Gateway, Sim, admin, admin_with_stdin, parse_sse, png_rgb, solid_mask};
use serde_json::{Value, json};

/// The OAuth client id the gateway is configured with.
const CLIENT_ID: &str = "app_e2e_client";
/// The refresh token the simulator accepts from the start.
const SEED_REFRESH_TOKEN: &str = "rt-e2e-seed";

struct Codex {
    s: Setup,
    config: PathBuf,
}

fn unix_now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64
}

/// A credential with a valid access token `access_token` (the simulator takes any bearer token).
fn fresh_credential(access_token: &str) -> Value {
    json!({"access_token": access_token, "refresh_token": "rt-not-needed",
        "expires_at": unix_now() + 3600, "account_id": "acct-e2e"})
}

/// A simulator that accepts [`SEED_REFRESH_TOKEN`], one codex account with `credential` and the
/// main models `gpt-5.5,gpt-5`, and a gateway whose token URL is the simulator's.
fn codex_setup(credential: &Value) -> Codex {
    codex_setup_with(credential, &[])
}

/// [`codex_setup`] with a simulator started with `sim_args` too.
fn codex_setup_with(credential: &Value, sim_args: &[&str]) -> Codex {
    codex_setup_configured(credential, sim_args, "")
}

/// [`codex_setup_with`] with `extra` added to the gateway's configuration file.
fn codex_setup_configured(credential: &Value, sim_args: &[&str], extra: &str) -> Codex {
    let dir = tempfile::tempdir().unwrap();
    let mut args = vec!["--refresh-token", SEED_REFRESH_TOKEN];
    args.extend_from_slice(sim_args);
    let sim = Sim::spawn(&args);
    admin(dir.path(), &["users", "add", "alice"]);
    let base = sim.base_url();
    admin_with_stdin(
        dir.path(),
        &[
            "accounts",
            "add",
            "--name",
            "sub-a",
            "--kind",
            "codex",
            "--base-url",
            &base,
            "--main-models",
            "gpt-5.5,gpt-5",
            "--tier",
            "pro",
        ],
        &credential.to_string(),
    );
    let key = admin(
        dir.path(),
        &["keys", "create", "--user", "alice", "--name", "e2e"],
    )
    .trim()
    .to_owned();
    let config = dir.path().join("gateway.toml");
    std::fs::write(
        &config,
        format!(
            "{extra}\n[codex]\ntoken_url = \"{}/oauth/token\"\nclient_id = \"{CLIENT_ID}\"\n",
            sim.url
        ),
    )
    .unwrap();
    let gateway = Gateway::spawn(dir.path(), &["--config", config.to_str().unwrap()]);
    Codex {
        s: Setup {
            dir,
            sim,
            gateway,
            key,
            client: reqwest::Client::new(),
        },
        config,
    }
}

impl Codex {
    /// Stops the gateway and starts a new one on the same database (nothing kept in memory).
    fn restart_gateway(&mut self) {
        assert!(self.s.gateway.stop(), "the gateway stops cleanly");
        self.s.gateway = Gateway::spawn(self.s.dir.path(), &["--config", self.config.to_str().unwrap()]);
    }

    async fn generate(&self, body: Value) -> Value {
        let response = self
            .s
            .post_json("/images/generations", body)
            .send()
            .await
            .unwrap();
        let status = response.status();
        let text = response.text().await.unwrap();
        assert_eq!(status, 200, "{text}");
        serde_json::from_str(&text).unwrap()
    }
}

fn decode_png(b64: &Value) -> image::DynamicImage {
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(b64.as_str().unwrap())
        .unwrap();
    assert_eq!(&bytes[..8], b"\x89PNG\r\n\x1a\n");
    image::load_from_memory(&bytes).unwrap()
}

/// The simulator's counters of one bearer token.
fn token<'a>(stats: &'a Value, token: &str) -> &'a Value {
    &stats["by_token"][token]
}

#[tokio::test]
async fn a_subscription_account_streams_partial_images_through_the_responses_endpoint() {
    let c = codex_setup(&fresh_credential("at-sub"));
    let response =
        c.s.post_json(
            "/images/generations",
            json!({"model": "gpt-image-2", "prompt": "a kite over dunes", "size": "1024x1024",
                "stream": true, "partial_images": 2}),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let events = parse_sse(&response.text().await.unwrap());
    let names: Vec<&str> = events.iter().map(|(name, _)| name.as_str()).collect();
    assert_eq!(
        names,
        [
            "image_generation.partial_image",
            "image_generation.partial_image",
            "image_generation.completed"
        ]
    );
    assert_eq!(events[1].1["partial_image_index"], 1);
    let completed = &events[2].1;
    let image = decode_png(&completed["b64_json"]);
    assert_eq!((image.width(), image.height()), (1024, 1024));
    assert!(completed["usage"]["total_tokens"].as_u64().unwrap() > 0);

    let stats = c.s.sim_stats().await;
    let sub = token(&stats, "at-sub");
    assert_eq!(sub["by_path"], json!({"/v1/responses": 1}), "{stats}");
    assert_eq!(sub["chatgpt_account_id"], "acct-e2e");
    assert_eq!(sub["main_models"], json!({"gpt-5.5": 1}));
    assert_eq!(stats["oauth"]["refreshes"], 0, "a valid token is not refreshed");
    let records = c.s.usage_at_least(1).await;
    assert_eq!(
        (&records[0]["status"], &records[0]["stream"]),
        (&json!(200), &json!(true))
    );
}

#[tokio::test]
async fn a_clients_responses_call_reaches_a_subscription_account_as_its_backend_takes_it() {
    // The seed's own request: no stream, no store, no instructions, `input` a string; the
    // simulator refuses such a call from a subscription as the ChatGPT backend does (400).
    let c = codex_setup(&fresh_credential("at-sub"));
    let request = json!({"model": "gpt-5.5", "input": "draw a fox",
        "tools": [{"type": "image_generation", "size": "1024x1024", "quality": "low"}]});
    let response = c.s.post_json("/responses", request.clone()).send().await.unwrap();
    let status = response.status();
    let body: Value = response.json().await.unwrap();
    assert_eq!(status, 200, "{}", body["error"]);
    assert_eq!(body["status"], "completed");
    let call = body["output"]
        .as_array()
        .unwrap()
        .iter()
        .find(|item| item["type"] == "image_generation_call")
        .unwrap_or_else(|| panic!("no image in {:.300}", body["output"]));
    let image = decode_png(&call["result"]);
    assert_eq!((image.width(), image.height()), (1024, 1024));

    let mut streamed = request;
    streamed["stream"] = json!(true);
    let response = c.s.post_json("/responses", streamed).send().await.unwrap();
    assert_eq!(response.status(), 200);
    let events = parse_sse(&response.text().await.unwrap());
    // As the OpenAI API streams it: the backend's own `codex.*` events (the simulator starts with
    // one, as the backend does) are left out, since the SDKs refuse a stream whose first event is
    // not `response.created`, and the final event lists the output the backend leaves out of it.
    let names: Vec<&str> = events.iter().map(|(name, _)| name.as_str()).collect();
    assert_eq!(names.first(), Some(&"response.created"), "{names:?}");
    assert!(!names.iter().any(|name| name.starts_with("codex.")), "{names:?}");
    let (last, completed) = events.last().unwrap();
    assert_eq!(last, "response.completed");
    let output = completed["response"]["output"].as_array().unwrap();
    let call = output
        .iter()
        .find(|item| item["type"] == "image_generation_call")
        .unwrap_or_else(|| panic!("no image in the final event's output: {:.300}", completed));
    let image = decode_png(&call["result"]);
    assert_eq!((image.width(), image.height()), (1024, 1024));
    assert_eq!(output.last().unwrap()["type"], "message", "in the stream's order");
    let records = c.s.usage_at_least(2).await;
    for record in &records[..2] {
        assert_eq!(record["status"], 200, "{record:?}");
        assert_eq!(record["images"], 1, "{record:?}");
    }
    let stats = c.s.sim_stats().await;
    assert_eq!(
        token(&stats, "at-sub")["by_path"],
        json!({"/v1/responses": 2}),
        "{stats}"
    );
}

#[tokio::test]
async fn an_edit_with_a_mask_is_a_responses_call_with_the_images() {
    let c = codex_setup(&fresh_credential("at-sub"));
    let part = |bytes: Vec<u8>, name: &str| {
        reqwest::multipart::Part::bytes(bytes)
            .file_name(name.to_owned())
            .mime_str("image/png")
            .unwrap()
    };
    let form = reqwest::multipart::Form::new()
        .text("model", "gpt-image-2")
        .text("prompt", "add a red hat")
        .text("size", "1024x1024")
        .text("quality", "low")
        .part("image", part(png_rgb(512, 512), "a.png"))
        .part("mask", part(solid_mask(512, 512), "mask.png"));
    let response =
        c.s.client
            .post(c.s.gateway.v1("/images/edits"))
            .bearer_auth(&c.s.key)
            .multipart(form)
            .send()
            .await
            .unwrap();
    let status = response.status();
    let body: Value = response.json().await.unwrap();
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["data"].as_array().unwrap().len(), 1);
    let image = decode_png(&body["data"][0]["b64_json"]);
    assert_eq!((image.width(), image.height()), (1024, 1024));
    assert!(
        body["usage"]["input_tokens_details"]["image_tokens"]
            .as_u64()
            .unwrap()
            > 0,
        "the input image reached the upstream: {body}"
    );
    let stats = c.s.sim_stats().await;
    assert_eq!(token(&stats, "at-sub")["by_path"], json!({"/v1/responses": 1}));
    assert!(stats["by_path"].get("/v1/images/edits").is_none());
    let records = c.s.usage_at_least(1).await;
    assert_eq!(records[0]["endpoint"], "/v1/images/edits");
}

#[tokio::test]
async fn an_edit_with_images_spilled_to_disk_reaches_the_backend_byte_for_byte() {
    // Two images larger than the gateway keeps in memory (each about 480 KB), and a mask: their
    // base64 is made from the files on disk as the body is sent, and a second try (the first
    // account's main model is refused) sends them again.
    let c = codex_setup(&fresh_credential("at-sub"));
    c.s.sim_fault(json!({"key": "at-sub", "fault": "model_unsupported", "model": "gpt-5.5"}))
        .await;
    let first = imagegate_e2e::png_noise(400, 1);
    let second = imagegate_e2e::png_noise(400, 2);
    let mask = solid_mask(400, 400);
    let part = |bytes: &[u8], name: &str| {
        reqwest::multipart::Part::bytes(bytes.to_vec())
            .file_name(name.to_owned())
            .mime_str("image/png")
            .unwrap()
    };
    let form = reqwest::multipart::Form::new()
        .text("model", "gpt-image-2")
        .text("prompt", "add a red hat")
        .text("size", "1024x1024")
        .text("quality", "low")
        .part("image[]", part(&first, "a.png"))
        .part("image[]", part(&second, "b.png"))
        .part("mask", part(&mask, "mask.png"));
    let response =
        c.s.client
            .post(c.s.gateway.v1("/images/edits"))
            .bearer_auth(&c.s.key)
            .multipart(form)
            .send()
            .await
            .unwrap();
    let status = response.status();
    let body: Value = response.json().await.unwrap();
    assert_eq!(status, 200, "{}", body["error"]);
    let stats = c.s.sim_stats().await;
    assert_eq!(
        token(&stats, "at-sub")["main_models"],
        json!({"gpt-5.5": 1, "gpt-5": 1})
    );
    let sha = |bytes: &[u8]| hex::encode(<sha2::Sha256 as sha2::Digest>::digest(bytes));
    let received: Vec<(&str, u64, &str)> = stats["last_edit_inputs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|input| {
            (
                input["field"].as_str().unwrap(),
                input["bytes"].as_u64().unwrap(),
                input["sha256"].as_str().unwrap(),
            )
        })
        .collect();
    let (a, b, m) = (sha(&first), sha(&second), sha(&mask));
    assert!(first.len() > 256 * 1024, "spilled: {}", first.len());
    assert_eq!(
        received,
        [
            ("input_image[0]", first.len() as u64, a.as_str()),
            ("input_image[1]", second.len() as u64, b.as_str()),
            ("input_image_mask", mask.len() as u64, m.as_str()),
        ]
    );
}

#[tokio::test]
async fn an_image_smaller_than_asked_is_reported_and_recorded_at_its_own_size() {
    // With `--tiny-images` the simulator makes 32x32 images and says they have the size asked for,
    // as an upstream that downgrades a request without saying so would.
    let c = codex_setup_with(&fresh_credential("at-sub"), &["--tiny-images"]);
    let body = c
        .generate(
            json!({"model": "gpt-image-2", "prompt": "a harbour", "size": "1536x1024", "quality": "low"}),
        )
        .await;
    let image = decode_png(&body["data"][0]["b64_json"]);
    assert_eq!((image.width(), image.height()), (32, 32));
    assert_eq!(
        body["size"], "32x32",
        "the size the image has, not the one asked for: {body}"
    );

    let response =
        c.s.post_json(
            "/images/generations",
            json!({"model": "gpt-image-2", "prompt": "a harbour", "size": "1536x1024",
                "quality": "low", "stream": true, "partial_images": 1}),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let events = parse_sse(&response.text().await.unwrap());
    let sizes: Vec<&Value> = events.iter().map(|(_, event)| &event["size"]).collect();
    assert_eq!(sizes, [&json!("32x32"), &json!("32x32")], "{events:?}");

    let records = c.s.usage_at_least(2).await;
    for record in &records {
        assert_eq!(record["size_requested"], "1536x1024", "{record}");
        assert_eq!(record["size_produced"], "32x32", "{record}");
    }
}

#[tokio::test]
async fn a_client_leaving_during_the_download_leaves_the_account_its_success() {
    let c = codex_setup(&fresh_credential("at-sub"));
    // Three 3840x2160 images, about 39 MB: more than the sockets hold, so the client leaves with
    // most of the document unsent.
    let response =
        c.s.post_json(
            "/images/generations",
            json!({"model": "gpt-image-2", "prompt": "three lighthouses", "size": "3840x2160",
                "quality": "low", "n": 3}),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    drop(response);
    let records = c.s.usage_at_least(1).await;
    assert_eq!(records[0]["status"], 499, "{}", records[0]);
    assert_eq!(
        records[0]["images"], 3,
        "the images made are billed: {}",
        records[0]
    );
    // The upstream did its part: the account is not left short of a success, which is what keeps
    // its failure streak and circuit breaker honest.
    let live = &c.s.accounts()["accounts"][0]["live"];
    assert_eq!(
        (&live["successes"], &live["failures"]),
        (&json!(1), &json!(0)),
        "{live}"
    );
}

#[tokio::test]
async fn n_two_gives_two_images_from_two_calls() {
    let c = codex_setup(&fresh_credential("at-sub"));
    let body = c
        .generate(
            json!({"model": "gpt-image-2", "prompt": "two foxes", "size": "1024x1024",
            "quality": "low", "n": 2}),
        )
        .await;
    let data = body["data"].as_array().unwrap();
    assert_eq!(data.len(), 2, "never silently fewer images: {body}");
    for item in data {
        let image = decode_png(&item["b64_json"]);
        assert_eq!((image.width(), image.height()), (1024, 1024));
    }
    let stats = c.s.sim_stats().await;
    assert_eq!(token(&stats, "at-sub")["by_path"]["/v1/responses"], 2);
    let one = c
        .generate(json!({"model": "gpt-image-2", "prompt": "one fox", "size": "1024x1024", "quality": "low"}))
        .await;
    let usage_one = one["usage"]["output_tokens"].as_u64().unwrap();
    let usage_two = body["usage"]["output_tokens"].as_u64().unwrap();
    assert_eq!(usage_two, 2 * usage_one, "the usage of both images is summed");
}

#[tokio::test]
async fn images_made_before_a_later_call_fails_are_billed_though_the_request_fails() {
    let c = codex_setup(&fresh_credential("at-sub"));
    // The first of the two calls makes its image; the second finds the usage window spent.
    c.s.sim_fault(json!({"fault": "429", "after": 1, "times": 1, "resets_in_seconds": 600}))
        .await;
    let response =
        c.s.post_json(
            "/images/generations",
            json!({"model": "gpt-image-2", "prompt": "two foxes", "size": "1024x1024",
            "quality": "low", "n": 2}),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 429, "never silently fewer images");
    let stats = c.s.sim_stats().await;
    assert_eq!(token(&stats, "at-sub")["by_path"]["/v1/responses"], 2);
    let records = c.s.usage_at_least(1).await;
    let record = &records[0];
    assert_eq!(record["status"], 429, "{record}");
    assert!(record["tokens"]["output"].as_u64().unwrap() > 0, "{record}");
    let note = record["fallback_note"].as_str().unwrap_or_default();
    assert!(note.contains("billed 1 image of a failed call"), "{record}");
}

#[tokio::test]
async fn images_made_before_the_client_left_are_billed() {
    let c = codex_setup(&fresh_credential("at-sub"));
    let one = c
        .generate(
            json!({"model": "gpt-image-2", "prompt": "two foxes", "size": "1024x1024", "quality": "low"}),
        )
        .await;
    // The first of the two calls makes its image; the second is still at work when the client
    // gives up on the (unstreamed) answer.
    c.s.sim_fault(json!({"fault": "stall", "stall_ms": 5000, "after": 1, "times": 1}))
        .await;
    let sent =
        c.s.post_json(
            "/images/generations",
            json!({"model": "gpt-image-2", "prompt": "two foxes", "size": "1024x1024",
            "quality": "low", "n": 2}),
        )
        .timeout(std::time::Duration::from_millis(1500))
        .send()
        .await;
    assert!(sent.unwrap_err().is_timeout());
    let records = c.s.usage_at_least(2).await;
    let record = records
        .iter()
        .find(|record| record["status"] == 499)
        .expect("the record of the request its client left");
    // Exactly the one image made: what a one-image request of the same prompt costs.
    assert_eq!(
        (&record["tokens"]["input"], &record["tokens"]["output"]),
        (&one["usage"]["input_tokens"], &one["usage"]["output_tokens"]),
        "{record}"
    );
    let note = record["fallback_note"].as_str().unwrap_or_default();
    assert!(
        note.contains("billed 1 image of a call its client left"),
        "{record}"
    );
    let stats = c.s.sim_stats().await;
    assert_eq!(token(&stats, "at-sub")["by_path"]["/v1/responses"], 3);
}

#[tokio::test]
async fn a_stream_its_client_left_starts_no_further_call() {
    // Each call takes 3 s, its events spread over it.
    let c = codex_setup_with(&fresh_credential("at-sub"), &["--latency-ms", "3000"]);
    let response =
        c.s.post_json(
            "/images/generations",
            json!({"model": "gpt-image-2", "prompt": "three foxes", "size": "1024x1024",
            "quality": "low", "n": 3, "stream": true, "partial_images": 1}),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    common::leave_after_first_bytes(response).await;
    let records = c.s.usage_at_least(1).await;
    assert_eq!(records[0]["status"], 499, "{:?}", records[0]);
    // The call under way ran to its end and was billed; the two others were never made.
    assert_eq!(records[0]["images"], 1, "{:?}", records[0]);
    tokio::time::sleep(std::time::Duration::from_millis(3500)).await;
    let stats = c.s.sim_stats().await;
    assert_eq!(token(&stats, "at-sub")["by_path"]["/v1/responses"], 1);
}

#[tokio::test]
async fn a_stream_its_client_left_between_images_has_the_call_under_way_read_to_its_end() {
    // Each call takes 3 s and sends no partial image; a keepalive comment every second tells the
    // gateway the client left while the second call is under way.
    let c = codex_setup_configured(
        &fresh_credential("at-sub"),
        &["--latency-ms", "3000"],
        "[timeouts]\nkeepalive_secs = 1\n",
    );
    let response =
        c.s.post_json(
            "/images/generations",
            json!({"model": "gpt-image-2", "prompt": "three foxes", "size": "1024x1024",
            "quality": "low", "n": 3, "stream": true, "partial_images": 0}),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    use futures::StreamExt as _;
    let mut body = response.bytes_stream();
    let mut seen = String::new();
    while !(seen.contains("event: image_generation.completed") && seen.ends_with("\n\n")) {
        let chunk = body.next().await.unwrap().unwrap();
        seen.push_str(&String::from_utf8_lossy(&chunk));
    }
    drop(body);
    let records = c.s.usage_at_least(1).await;
    assert_eq!(records[0]["status"], 499, "{:?}", records[0]);
    // The second call, under way when the client left, ran to its end and was billed; the
    // third was never made.
    assert_eq!(records[0]["images"], 2, "{:?}", records[0]);
    tokio::time::sleep(std::time::Duration::from_millis(3500)).await;
    let stats = c.s.sim_stats().await;
    assert_eq!(token(&stats, "at-sub")["by_path"]["/v1/responses"], 2);
}

/// The events of a streamed request for two images (answered 200).
async fn stream_two_foxes(c: &Codex) -> Vec<(String, Value)> {
    let response =
        c.s.post_json(
            "/images/generations",
            json!({"model": "gpt-image-2", "prompt": "two foxes", "size": "1024x1024",
            "quality": "low", "n": 2, "stream": true}),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    parse_sse(&response.text().await.unwrap())
}

/// The usage on each `image_generation.completed` event of `events`.
fn completed_usages(events: &[(String, Value)]) -> Vec<&Value> {
    events
        .iter()
        .filter(|(name, _)| name == "image_generation.completed")
        .map(|(_, data)| &data["usage"])
        .collect()
}

#[tokio::test]
async fn a_stream_whose_second_call_reports_no_usage_is_billed_the_first_calls() {
    let c = codex_setup(&fresh_credential("at-sub"));
    c.s.sim_fault(json!({"fault": "no_usage", "after": 1, "times": 1, "path": "/v1/responses"}))
        .await;
    let events = stream_two_foxes(&c).await;
    let completed = completed_usages(&events);
    assert_eq!(completed.len(), 2, "{events:?}");
    assert_eq!(
        completed[0], completed[1],
        "the second call added nothing to the total so far"
    );
    let records = c.s.usage_at_least(1).await;
    assert_eq!(records[0]["images"], 2, "{:?}", records[0]);
    assert_eq!(
        (&records[0]["tokens"]["output"], &records[0]["tokens"]["total"]),
        (&completed[1]["output_tokens"], &completed[1]["total_tokens"]),
        "the last total, not the totals added up: {:?}",
        records[0]
    );
}

#[tokio::test]
async fn an_image_refused_once_made_is_billed_its_tokens_though_the_client_gets_none() {
    let c = codex_setup(&fresh_credential("at-sub"));
    c.s.sim_fault(json!({"fault": "refused_after_image", "times": 1, "path": "/v1/responses"}))
        .await;
    let response =
        c.s.post_json(
            "/images/generations",
            json!({"model": "gpt-image-2", "prompt": "a fox", "size": "1024x1024", "quality": "low"}),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 502, "a refusal is the upstream's failure");
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["error"]["code"], "image_content_policy_violation", "{body}");
    let records = c.s.usage_at_least(1).await;
    let record = &records[0];
    assert_eq!(record["status"], 502, "{record}");
    assert_eq!(record["images"], 0, "{record}");
    assert!(
        record["tokens"]["output_image"].as_u64().unwrap_or(0) > 0,
        "the refused image's tokens are billed: {record}"
    );
    let note = record["fallback_note"].as_str().unwrap_or_default();
    assert!(
        note.contains("billed the tokens of a failed call, with no image"),
        "{record}"
    );
}

#[tokio::test]
async fn a_stream_whose_second_image_is_refused_is_billed_both_images_once() {
    let c = codex_setup(&fresh_credential("at-sub"));
    c.s.sim_fault(json!({"fault": "refused_after_image", "after": 1, "times": 1, "path": "/v1/responses"}))
        .await;
    let events = stream_two_foxes(&c).await;
    let completed = completed_usages(&events);
    assert_eq!(completed.len(), 1, "{events:?}");
    assert!(
        events.iter().any(|(name, _)| name == "error"),
        "the refusal ends the stream: {events:?}"
    );
    let first = completed[0]["output_tokens"].as_u64().unwrap();
    let records = c.s.usage_at_least(1).await;
    let record = &records[0];
    assert_eq!(record["images"], 1, "{record}");
    assert_eq!(
        record["tokens"]["output"].as_u64().unwrap(),
        2 * first,
        "the image sent and the refused one, each counted once: {record}"
    );
}

#[tokio::test]
async fn a_limit_met_in_a_later_call_is_billed_alike_streamed_or_not() {
    let mut billed = Vec::new();
    for stream in [false, true] {
        // A gateway of its own each time: the limit cools the account down.
        let c = codex_setup(&fresh_credential("at-sub"));
        // The first call makes its image; the second meets a limit after its stream started.
        c.s.sim_fault(json!({"fault": "rate_limit_in_stream", "after": 1, "times": 1,
            "path": "/v1/responses"}))
            .await;
        let request = json!({"model": "gpt-image-2", "prompt": "two foxes", "size": "1024x1024",
            "quality": "low", "n": 2, "stream": stream});
        let response =
            c.s.post_json("/images/generations", request)
                .send()
                .await
                .unwrap();
        let body = response.text().await.unwrap();
        if stream {
            // The client already had one image: the stream ends with the Images API's error
            // event, which its SDK raises, not with the Responses event the account sent.
            assert!(
                body.contains("event: error\n") && body.contains("usage_limit_reached"),
                "{body:.300}"
            );
            assert!(!body.contains("response.failed"), "{body:.300}");
        }
        let records = c.s.usage_at_least(1).await;
        billed.push(records[0]["tokens"].clone());
    }
    assert!(billed[0]["output_image"].as_u64().unwrap_or(0) > 0, "{billed:?}");
    assert_eq!(
        billed[0], billed[1],
        "the image made and the failed call's reported tokens, either way"
    );
}

#[tokio::test]
async fn a_refused_access_token_is_refreshed_once_and_the_refreshed_one_is_persisted() {
    let credential = json!({"access_token": "at-expired", "refresh_token": SEED_REFRESH_TOKEN,
        "account_id": "acct-r"});
    let mut c = codex_setup(&credential);
    c.s.sim_fault(json!({"key": "at-expired", "fault": "401"})).await;
    let request =
        json!({"model": "gpt-image-2", "prompt": "a lighthouse", "size": "1024x1024", "quality": "low"});
    let first = c.generate(request.clone()).await;
    assert_eq!(first["data"].as_array().unwrap().len(), 1);
    let stats = c.s.sim_stats().await;
    assert_eq!(stats["oauth"]["refreshes"], 1, "{stats}");
    assert_eq!(stats["oauth"]["last_client_id"], CLIENT_ID);
    assert_eq!(token(&stats, "at-expired")["requests"], 1);
    assert_eq!(token(&stats, "sim-at-1")["requests"], 1);
    assert_eq!(token(&stats, "sim-at-1")["chatgpt_account_id"], "acct-r");

    c.generate(request.clone()).await;
    let stats = c.s.sim_stats().await;
    assert_eq!(
        stats["oauth"]["refreshes"], 1,
        "the second request does not refresh again"
    );
    assert_eq!(token(&stats, "at-expired")["requests"], 1);
    assert_eq!(token(&stats, "sim-at-1")["requests"], 2);

    // A new process reads the refreshed credential from the database: the seed refresh token
    // was rotated away, so only the saved credential can work.
    c.restart_gateway();
    c.generate(request).await;
    let stats = c.s.sim_stats().await;
    assert_eq!(
        (&stats["oauth"]["refreshes"], &stats["oauth"]["rejected"]),
        (&json!(1), &json!(0))
    );
    assert_eq!(token(&stats, "at-expired")["requests"], 1);
    assert_eq!(token(&stats, "sim-at-1")["requests"], 3);
}

#[tokio::test]
async fn a_token_refused_again_after_its_refresh_marks_the_account_failed() {
    let credential = json!({"access_token": "at-expired", "refresh_token": SEED_REFRESH_TOKEN,
        "account_id": "acct-r"});
    let c = codex_setup(&credential);
    // The refresh works, and the refreshed token is refused too: the account itself is refused.
    c.s.sim_fault(json!({"key": "at-expired", "fault": "401"})).await;
    c.s.sim_fault(json!({"key": "sim-at-1", "fault": "401"})).await;
    let response =
        c.s.post_json(
            "/images/generations",
            json!({"model": "gpt-image-2", "prompt": "a lighthouse", "size": "1024x1024", "quality": "low"}),
        )
        .send()
        .await
        .unwrap();
    assert_ne!(response.status(), 200);
    let stats = c.s.sim_stats().await;
    assert_eq!(stats["oauth"]["refreshes"], 1, "{stats}");
    let listed = c.s.accounts();
    let account = &listed["accounts"][0];
    assert_eq!(
        account["status"], "error",
        "saving the refreshed token changed the row, yet the refusal is the account's: {account}"
    );
}

#[tokio::test]
async fn an_access_token_past_its_expiry_is_refreshed_before_it_is_sent() {
    let credential = json!({"access_token": "at-old", "refresh_token": SEED_REFRESH_TOKEN,
        "expires_at": unix_now() - 60, "account_id": "acct-p"});
    let c = codex_setup(&credential);
    let request =
        json!({"model": "gpt-image-2", "prompt": "a harbour", "size": "1024x1024", "quality": "low"});
    c.generate(request.clone()).await;
    c.generate(request).await;
    let stats = c.s.sim_stats().await;
    assert_eq!(stats["oauth"]["refreshes"], 1, "{stats}");
    assert!(
        stats["by_token"].get("at-old").is_none(),
        "the expired token never reached the upstream: {stats}"
    );
    assert_eq!(token(&stats, "sim-at-1")["requests"], 2);
}

#[tokio::test]
async fn an_unsupported_main_model_falls_back_to_the_next() {
    let c = codex_setup(&fresh_credential("at-sub"));
    c.s.sim_fault(json!({"key": "at-sub", "fault": "model_unsupported", "model": "gpt-5.5"}))
        .await;
    let body = c
        .generate(
            json!({"model": "gpt-image-2", "prompt": "a lantern", "size": "1024x1024", "quality": "low"}),
        )
        .await;
    decode_png(&body["data"][0]["b64_json"]);
    let stats = c.s.sim_stats().await;
    assert_eq!(
        token(&stats, "at-sub")["main_models"],
        json!({"gpt-5.5": 1, "gpt-5": 1}),
        "{stats}"
    );
    assert_eq!(stats["faults"]["model_unsupported"], 1);
    let records = c.s.usage_at_least(1).await;
    assert_eq!(records[0]["status"], 200);
}

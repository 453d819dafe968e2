//! End to end: upstream failures, shutdown and disconnects, against the real binaries.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::disallowed_methods
)]

mod common;

use std::time::Duration;

use common::{
    credential, leave_after_first_bytes, read_until_cut, setup, setup_custom, setup_with, setup_with_config,
};
use serde_json::{Value, json};

fn small_generation() -> Value {
    json!({"model": "gpt-image-2", "prompt": "x", "size": "1024x1024", "quality": "low"})
}

/// A streamed generation without partial images: its only event is the completed one.
fn stream_generation() -> Value {
    json!({"model": "gpt-image-2", "prompt": "x", "size": "1024x1024", "stream": true})
}

#[tokio::test]
async fn an_html_error_page_becomes_a_502_upstream_request_failed() {
    let s = setup();
    s.sim_fault(json!({"key": credential("acct-a"), "fault": "html_502"}))
        .await;
    let response = s
        .post_json("/images/generations", small_generation())
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 502);
    let body: Value = response.json().await.unwrap();
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .starts_with("Upstream request failed"),
        "{body}"
    );
    assert!(
        !body.to_string().contains("<html"),
        "the proxy page must not leak: {body}"
    );
    let records = s.usage_at_least(1).await;
    assert_eq!(records[0]["status"], 502);
}

#[tokio::test]
async fn an_account_whose_base_url_is_wrong_fails_over_instead_of_answering_the_client_404() {
    // The simulator answers a path it does not serve as OpenAI does: 404 `Invalid URL (...)`.
    let s = setup_custom(
        &[],
        &[
            // Tried first (higher priority), at a path the simulator does not serve.
            (
                "acct-wrong",
                &["--tier", "pro", "--priority", "10", "--base-url", "{sim}/v2"],
            ),
            ("acct-a", &["--tier", "pro"]),
        ],
        &[],
    );
    let response = s
        .post_json("/images/generations", small_generation())
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200, "{:?}", response.text().await);
    let records = s.usage_at_least(1).await;
    assert_eq!(
        records[0]["fallback_note"], "failed over 1 time(s)",
        "{:?}",
        records[0]
    );
}

#[tokio::test]
async fn a_content_refusal_is_a_502_not_to_retry_and_is_not_retried() {
    let s = setup_with(&["acct-a", "acct-b"], &[]);
    s.sim_fault(json!({"fault": "refusal"})).await;
    let response = s
        .post_json("/images/generations", small_generation())
        .send()
        .await
        .unwrap();
    // The interface's row: 502 "Upstream request failed" for content refused.
    assert_eq!(response.status(), 502);
    assert_eq!(response.headers()["x-should-retry"], "false");
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["error"]["code"], "moderation_blocked");
    assert_eq!(body["error"]["type"], "image_generation_user_error");
    let message = body["error"]["message"].as_str().unwrap();
    assert!(
        message.starts_with(
            "Upstream request failed: the content was refused. Your request was rejected by the safety system"
        ),
        "{message}"
    );
    assert_eq!(
        s.sim_stats().await["requests"],
        1,
        "a policy refusal must not be retried"
    );
}

#[tokio::test]
async fn a_passing_upstream_rate_limit_is_answered_as_one_to_retry() {
    // A limit of a few seconds: the interface's 429 `usage_limit_reached`, but the SDKs should wait
    // the `retry-after` and retry, not give up (`x-should-retry: false` is for long windows).
    let s = setup();
    s.sim_fault(json!({"key": credential("acct-a"), "fault": "rate_limit", "retry_after_seconds": 20}))
        .await;
    for attempt in ["the upstream's 429", "the account cooling down"] {
        let response = s
            .post_json("/images/generations", small_generation())
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 429, "{attempt}");
        assert_eq!(response.headers()["x-should-retry"], "true", "{attempt}");
        let retry_after: u64 = response.headers()["retry-after"]
            .to_str()
            .unwrap()
            .parse()
            .unwrap();
        assert!(
            (15..=21).contains(&retry_after),
            "{attempt}: retry-after {retry_after}"
        );
        let body: Value = response.json().await.unwrap();
        assert_eq!(body["error"]["code"], "usage_limit_reached", "{attempt}");
        assert_eq!(body["error"]["type"], "usage_limit_reached", "{attempt}");
        let message = body["error"]["message"].as_str().unwrap();
        assert!(message.contains("Try again in "), "{attempt}: {message}");
    }
    assert_eq!(s.sim_stats().await["requests"], 1);
    // The records tell it from the key's own limit, which has the same status.
    let records = s.usage_at_least(2).await;
    for record in &records {
        assert_eq!(record["status"], 429, "{record}");
        let note = record["fallback_note"].as_str().unwrap_or_default();
        assert!(note.starts_with("upstream accounts limited"), "{record}");
    }
}

#[tokio::test]
async fn a_usage_limit_answer_names_the_first_reset_of_every_account_tried() {
    // acct-a (higher priority, tried first) frees in 30 s; acct-b, tried last, in 5 hours.
    let s = setup_custom(
        &[],
        &[
            ("acct-a", &["--tier", "pro", "--priority", "10"]),
            ("acct-b", &["--tier", "pro"]),
        ],
        &[],
    );
    s.sim_fault(json!({"key": credential("acct-a"), "fault": "usage_limit", "resets_in_seconds": 30}))
        .await;
    s.sim_fault(json!({"key": credential("acct-b"), "fault": "usage_limit", "resets_in_seconds": 18000}))
        .await;
    let response = s
        .post_json("/images/generations", small_generation())
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 429);
    assert_eq!(s.sim_stats().await["requests"], 2, "both accounts were tried");
    let retry_after: u64 = response.headers()["retry-after"]
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!((25..=30).contains(&retry_after), "retry-after {retry_after}");
    assert_eq!(response.headers()["x-should-retry"], "true");
}

#[tokio::test]
async fn a_single_exhausted_account_answers_429_with_retry_after() {
    let s = setup();
    s.sim_fault(json!({"key": credential("acct-a"), "fault": "usage_limit", "resets_in_seconds": 120}))
        .await;
    let response = s
        .post_json("/images/generations", small_generation())
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 429);
    let retry_after: u64 = response.headers()["retry-after"]
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!((100..=121).contains(&retry_after), "retry-after {retry_after}");
    assert_eq!(response.headers()["x-should-retry"], "false");
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["error"]["code"], "usage_limit_reached");
    // The account cools down until its reset: the next request does not reach the upstream.
    let again = s
        .post_json("/images/generations", small_generation())
        .send()
        .await
        .unwrap();
    assert_eq!(again.status(), 429);
    assert_eq!(s.sim_stats().await["requests"], 1);

    // The operator sees why, and until when, through the admin CLI.
    let listed = s.accounts();
    let live = &listed["accounts"][0]["live"];
    assert_eq!(listed["accounts"][0]["name"], "acct-a");
    assert_eq!(live["limits"]["large"], 1);
    assert_eq!(live["in_flight"]["standard"], 0);
    assert_eq!(live["failures"], 1);
    let cooldown = &live["cooldowns"][0];
    let until = cooldown["until"].as_u64().unwrap();
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64;
    assert!(
        until > now + 100_000 && until <= now + 121_000,
        "cooldown until {until}, now {now}"
    );
    assert!(!cooldown["reason"].as_str().unwrap().is_empty(), "{cooldown}");
    assert!(
        !listed.to_string().contains(&credential("acct-a")),
        "a credential leaked into the listing"
    );
}

#[tokio::test]
async fn a_rate_limited_account_fails_over_to_the_next() {
    let s = setup_with(&["acct-a", "acct-b"], &[]);
    s.sim_fault(json!({"key": credential("acct-a"), "fault": "usage_limit", "resets_in_seconds": 300}))
        .await;
    for _ in 0..3 {
        let response = s
            .post_json("/images/generations", small_generation())
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 200);
    }
    let stats = s.sim_stats().await;
    assert!(
        stats["by_token"][credential("acct-a")]["requests"]
            .as_u64()
            .unwrap_or(0)
            <= 1,
        "{stats}"
    );
    assert_eq!(stats["by_token"][credential("acct-b")]["requests"], 3, "{stats}");
}

#[tokio::test]
async fn shutdown_lets_an_in_flight_request_finish_and_flushes_its_usage() {
    let mut s = setup();
    s.sim_fault(json!({"fault": "stall", "stall_ms": 1500})).await;
    let request = s.post_json("/images/generations", small_generation()).send();
    let started = std::time::Instant::now();
    let in_flight = tokio::spawn(request);
    tokio::time::sleep(Duration::from_millis(500)).await;
    let stopped = tokio::task::spawn_blocking(move || {
        let ok = s.gateway.stop();
        (ok, s)
    });
    let response = in_flight.await.unwrap().unwrap();
    assert_eq!(response.status(), 200);
    assert!(
        started.elapsed() >= Duration::from_millis(1400),
        "the request was not in flight during shutdown"
    );
    let body: Value = response.json().await.unwrap();
    assert!(body["data"][0]["b64_json"].is_string());
    let (exited_cleanly, s) = stopped.await.unwrap();
    assert!(exited_cleanly, "gateway did not exit cleanly on SIGTERM");
    let records = s.usage();
    assert_eq!(records.len(), 1, "{records:?}");
    assert_eq!(records[0]["status"], 200);
}

#[tokio::test]
async fn a_second_signal_stops_the_gateway_without_waiting_for_the_requests_in_flight() {
    let mut s = setup();
    // The request in flight would hold the drain for 20 s (the grace is 30 s).
    s.sim_fault(json!({"fault": "stall", "stall_ms": 20000})).await;
    let in_flight = tokio::spawn(s.post_json("/images/generations", small_generation()).send());
    tokio::time::sleep(Duration::from_millis(500)).await;
    let started = std::time::Instant::now();
    let stopped = tokio::task::spawn_blocking(move || s.gateway.stop_twice(Duration::from_millis(300)));
    let status = stopped.await.unwrap().expect("the gateway stopped");
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "the second signal waited for the request in flight: {:?}",
        started.elapsed()
    );
    assert_eq!(status.code(), Some(143), "{status}");
    assert!(in_flight.await.unwrap().is_err(), "the connection was cut");
}

#[tokio::test]
async fn a_request_still_running_when_the_grace_period_ends_is_recorded_before_exit() {
    let mut s = setup_with_config("[timeouts]\nshutdown_grace_secs = 1\n");
    s.sim_fault(json!({"fault": "stall", "stall_ms": 10000})).await;
    let in_flight = tokio::spawn(s.post_json("/images/generations", small_generation()).send());
    tokio::time::sleep(Duration::from_millis(500)).await;
    let started = std::time::Instant::now();
    let stopped = tokio::task::spawn_blocking(move || {
        let ok = s.gateway.stop();
        (ok, s)
    });
    let answer = in_flight.await.unwrap();
    let (exited_cleanly, s) = stopped.await.unwrap();
    assert!(exited_cleanly, "gateway did not exit cleanly on SIGTERM");
    assert!(
        started.elapsed() < Duration::from_secs(8),
        "the gateway waited for the upstream instead of abandoning the request"
    );
    if let Ok(response) = answer {
        assert_eq!(response.status(), 503);
        assert_eq!(response.headers()["retry-after"], "1");
    }
    let records = s.usage();
    assert_eq!(records.len(), 1, "{records:?}");
    assert_eq!(records[0]["status"], 503, "{:?}", records[0]);
    assert_eq!(records[0]["error_code"], "shutting_down", "{:?}", records[0]);
    assert!(records[0]["account_id"].is_i64(), "{:?}", records[0]);
}

#[tokio::test]
async fn a_request_whose_body_still_arrives_when_the_grace_period_ends_is_recorded() {
    use futures::StreamExt as _;
    let mut s = setup_with_config("[timeouts]\nshutdown_grace_secs = 1\n");
    // The start of a body, and then nothing: the client is still uploading.
    let start =
        futures::stream::once(async { Ok::<_, std::io::Error>(bytes::Bytes::from_static(b"{\"model\":")) });
    let body = reqwest::Body::wrap_stream(start.chain(futures::stream::pending()));
    let request = s
        .client
        .post(s.gateway.v1("/images/generations"))
        .bearer_auth(&s.key)
        .header("content-type", "application/json")
        .body(body)
        .send();
    let in_flight = tokio::spawn(request);
    // The handler runs (and counts the request in) before it reads the body.
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let text = s.metrics().await;
        if text.lines().any(|line| line == "imagegate_requests_in_flight 1") {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the request never reached its handler"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let stopped = tokio::task::spawn_blocking(move || {
        let ok = s.gateway.stop();
        (ok, s)
    });
    let (exited_cleanly, s) = stopped.await.unwrap();
    assert!(exited_cleanly, "gateway did not exit cleanly on SIGTERM");
    if let Ok(Ok(Ok(response))) = tokio::time::timeout(Duration::from_secs(5), in_flight).await {
        assert_eq!(response.status(), 503);
    }
    let records = s.usage();
    assert_eq!(records.len(), 1, "{records:?}");
    assert_eq!(
        records[0]["endpoint"], "/v1/images/generations",
        "{:?}",
        records[0]
    );
    assert_eq!(records[0]["status"], 503, "{:?}", records[0]);
    assert_eq!(records[0]["error_code"], "shutting_down", "{:?}", records[0]);
}

#[tokio::test]
async fn a_client_leaving_a_stream_of_two_images_is_billed_both_the_account_makes() {
    let s = setup();
    // An API-key account makes both images in one call; the second comes 1.5 s after the first.
    s.sim_fault(json!({"fault": "stall_mid_stream", "stall_ms": 1500}))
        .await;
    let response = s
        .post_json(
            "/images/generations",
            json!({"model": "gpt-image-2", "prompt": "x", "size": "1024x1024", "quality": "low",
                "n": 2, "stream": true}),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    leave_after_first_bytes(response).await;
    let records = s.usage_at_least(1).await;
    let record = &records[0];
    assert_eq!(record["status"], 499, "{record:?}");
    assert_eq!(
        record["images"], 2,
        "the call went on to its second image, which the account pays for: {record:?}"
    );
}

/// The record of a stream whose image stalls halfway, when the gateway is stopped (1 s of grace)
/// half a second after the stream began, and what its client read: with `leave`, its client left
/// before (and the gateway was still reading the image for its usage), and read nothing; else the
/// client was still reading.
async fn record_of_a_stream_at_shutdown(leave: bool) -> (Value, Option<reqwest::Result<String>>) {
    record_of_a_stream_stalled_at_shutdown(leave, 1, 6000).await
}

/// The record of a stream whose upstream stalls `stall_ms` after its first event, when the gateway
/// (with a grace period of `grace_secs`) is stopped half a second after the stream began.
async fn record_of_a_stream_stalled_at_shutdown(
    leave: bool,
    grace_secs: u64,
    stall_ms: u64,
) -> (Value, Option<reqwest::Result<String>>) {
    let mut s = setup_with_config(&format!("[timeouts]\nshutdown_grace_secs = {grace_secs}\n"));
    s.sim_fault(json!({"fault": "stall_mid_stream", "stall_ms": stall_ms}))
        .await;
    let response = s
        .post_json(
            "/images/generations",
            json!({"model": "gpt-image-2", "prompt": "x", "size": "1024x1024", "stream": true, "partial_images": 2}),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let reading = if leave {
        leave_after_first_bytes(response).await;
        None
    } else {
        Some(tokio::spawn(async move { response.text().await }))
    };
    tokio::time::sleep(Duration::from_millis(500)).await;
    let stopped = tokio::task::spawn_blocking(move || {
        let ok = s.gateway.stop();
        (ok, s)
    });
    let (exited_cleanly, s) = stopped.await.unwrap();
    assert!(exited_cleanly, "gateway did not exit cleanly on SIGTERM");
    let read = match reading {
        Some(reading) => Some(reading.await.unwrap()),
        None => None,
    };
    let records = s.usage();
    assert_eq!(records.len(), 1, "{records:?}");
    (records[0].clone(), read)
}

#[tokio::test]
async fn a_stream_still_read_when_the_grace_period_ends_is_recorded_as_cut_by_the_shutdown() {
    let (record, read) = record_of_a_stream_at_shutdown(false).await;
    assert_eq!(
        (&record["status"], &record["error_code"]),
        (&json!(503), &json!("shutting_down")),
        "{record:?}"
    );
    // Between two events, the stream ends with an error event the SDKs raise, not a cut connection.
    let body = read.unwrap().expect("the stream ends cleanly");
    let last = body.trim_end().rsplit("\n\n").next().unwrap();
    assert!(last.starts_with("event: error\ndata: "), "{last}");
    let data: Value = serde_json::from_str(last.trim_start_matches("event: error\ndata: ")).unwrap();
    assert_eq!(data["error"]["code"], "overloaded", "{data}");
    assert!(
        data["error"]["message"]
            .as_str()
            .unwrap()
            .contains("shutting down"),
        "{data}"
    );
    assert!(
        body.contains("event: image_generation.partial_image"),
        "the first event came before"
    );
}

#[tokio::test]
async fn a_client_that_left_before_the_shutdown_keeps_its_499() {
    let (record, _) = record_of_a_stream_at_shutdown(true).await;
    assert_eq!(
        (&record["status"], &record["error_code"]),
        (&json!(499), &json!("client_closed")),
        "the client left first, not cut off by the shutdown: {record:?}"
    );
}

#[tokio::test]
async fn a_stream_its_client_left_is_read_to_its_end_within_the_grace_period() {
    // The client left, so its connection is closed before the shutdown begins; the upstream goes
    // on for 3 s, well within the 20 s grace period, and its image is billed.
    let (record, _) = record_of_a_stream_stalled_at_shutdown(true, 20, 3000).await;
    assert_eq!(record["status"], 499, "{record:?}");
    assert_eq!(
        record["images"], 1,
        "the rest of the stream was read before the gateway exited: {record:?}"
    );
    assert!(record["tokens"]["output"].as_u64().unwrap() > 0, "{record:?}");
}

#[tokio::test]
async fn a_client_that_leaves_mid_stream_still_gets_a_usage_record() {
    let s = setup();
    s.sim_fault(json!({"fault": "stall_mid_stream", "stall_ms": 5000}))
        .await;
    let response = s
        .post_json(
            "/images/generations",
            json!({"model": "gpt-image-2", "prompt": "x", "size": "1024x1024", "stream": true, "partial_images": 2}),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    leave_after_first_bytes(response).await;
    let records = s.usage_at_least(1).await;
    assert_eq!(records[0]["status"], 499, "{:?}", records[0]);
    assert_eq!(records[0]["stream"], true);
    // The upstream went on and made (and billed) the image after the client left: the rest of
    // the stream was read for it.
    assert_eq!(records[0]["images"], 1, "{:?}", records[0]);
    assert!(
        records[0]["tokens"]["output"].as_u64().unwrap() > 0,
        "{:?}",
        records[0]
    );
}

/// A new key of alice's limited to one request at a time.
fn one_at_a_time_key(s: &common::Setup) -> String {
    let args = [
        "keys",
        "create",
        "--user",
        "alice",
        "--name",
        "one",
        "--max-concurrency",
        "1",
    ];
    imagegate_e2e::admin(s.dir.path(), &args).trim().to_owned()
}

#[tokio::test]
async fn a_stream_its_client_left_keeps_the_keys_slot_until_the_upstream_ends() {
    // Generations take 8 s, a stream's four events come 2 s apart.
    let s = setup_custom(&["--latency-ms", "8000"], &[("acct-a", &["--tier", "pro"])], &[]);
    let one_at_a_time = one_at_a_time_key(&s);
    let generate = |body: Value| {
        s.client
            .post(s.gateway.v1("/images/generations"))
            .bearer_auth(&one_at_a_time)
            .json(&body)
    };
    let response = generate(json!({"model": "gpt-image-2", "prompt": "x", "size": "1024x1024",
        "stream": true, "partial_images": 3}))
    .send()
    .await
    .unwrap();
    assert_eq!(response.status(), 200);
    leave_after_first_bytes(response).await;
    // By the second event (4 s) the gateway knows the client left; the upstream goes on to 8 s,
    // and all that time the account works for this key.
    tokio::time::sleep(Duration::from_millis(3000)).await;
    let meanwhile = generate(small_generation()).send().await.unwrap();
    assert_eq!(meanwhile.status(), 429, "the key's one slot is still taken");
    let records = s.usage_at_least(2).await;
    let left = records.iter().find(|r| r["stream"] == true).unwrap();
    assert_eq!(left["status"], 499, "{left:?}");
    assert_eq!(left["images"], 1, "the rest of the stream was read: {left:?}");
}

/// A request to `path` whose body starts with `head` and then stalls (never ends).
fn stalled_body<H: Into<bytes::Bytes>>(
    s: &common::Setup,
    key: &str,
    path: &str,
    content_type: &str,
    head: H,
) -> impl std::future::Future<Output = reqwest::Result<reqwest::Response>> + use<H> {
    use futures::StreamExt as _;
    let body =
        futures::stream::iter([Ok::<_, std::io::Error>(head.into())]).chain(futures::stream::pending());
    s.client
        .post(s.gateway.v1(path))
        .bearer_auth(key)
        .header("content-type", content_type)
        .body(reqwest::Body::wrap_stream(body))
        .send()
}

/// Two requests of a one-at-a-time key whose bodies stall: the second is refused with a 429 while
/// its body is still open, since the first one's unfinished body holds the key's slot.
async fn second_stalled_body_is_refused(
    s: &common::Setup,
    path: &str,
    body: impl Fn(&str) -> (String, String),
) {
    let one_at_a_time = one_at_a_time_key(s);
    let (content_type, head) = body("first-boundary");
    let first = tokio::spawn(stalled_body(s, &one_at_a_time, path, &content_type, head));
    tokio::time::sleep(Duration::from_millis(500)).await;
    let (content_type, head) = body("second-boundary");
    let second = stalled_body(s, &one_at_a_time, path, &content_type, head);
    let second = tokio::time::timeout(Duration::from_secs(10), second)
        .await
        .expect("answered before its body ended")
        .unwrap();
    assert_eq!(second.status(), 429, "the key's one slot is the first body's");
    assert!(second.headers().contains_key("retry-after"));
    first.abort();
}

#[tokio::test]
async fn an_upload_holds_its_keys_slot_and_a_key_at_its_limit_is_refused_before_its_upload() {
    let s = setup();
    // An edit whose upload starts and then stalls: the form's fields and the start of a file.
    second_stalled_body_is_refused(&s, "/images/edits", |boundary| {
        let content_type = format!("multipart/form-data; boundary={boundary}");
        (content_type, edit_form_head(boundary))
    })
    .await;
}

#[tokio::test]
async fn a_responses_body_holds_its_keys_slot_and_a_key_at_its_limit_is_refused_before_its_body() {
    let s = setup();
    // A Responses call whose JSON (up to 64 MiB, held in memory) stalls inside an image's data URL.
    second_stalled_body_is_refused(&s, "/responses", |_| {
        let head = r#"{"model": "gpt-5", "tools": [{"type": "image_generation"}], "input": [{"role": "user", "content": [{"type": "input_image", "image_url": "data:image/png;base64,iVBORw0KGgo"#;
        ("application/json".to_owned(), head.to_owned())
    })
    .await;
}

/// The start of an edit form (its fields and the start of a file) under `boundary`.
fn edit_form_head(boundary: &str) -> String {
    format!(
        "--{boundary}\r\nContent-Disposition: form-data; name=\"model\"\r\n\r\ngpt-image-2\r\n\
         --{boundary}\r\nContent-Disposition: form-data; name=\"prompt\"\r\n\r\nx\r\n\
         --{boundary}\r\nContent-Disposition: form-data; name=\"image\"; filename=\"a.png\"\r\n\
         Content-Type: image/png\r\n\r\n\u{89}PNG\r\n"
    )
}

#[tokio::test]
async fn a_body_that_stops_arriving_is_answered_408_for_the_sdks_to_retry() {
    let s = setup_with_config("[timeouts]\nclient_idle_secs = 1\n");
    let upload = stalled_body(
        &s,
        &s.key,
        "/images/edits",
        "multipart/form-data; boundary=b",
        edit_form_head("b"),
    );
    let generation = stalled_body(
        &s,
        &s.key,
        "/images/generations",
        "application/json",
        r#"{"model": "gpt-image-2", "prompt": "#.to_owned(),
    );
    for sent in [upload, generation] {
        let response = tokio::time::timeout(Duration::from_secs(20), sent)
            .await
            .expect("answered once the body stopped for the idle timeout")
            .unwrap();
        assert_eq!(response.status(), 408);
        assert!(
            !response.headers().contains_key("x-should-retry"),
            "the SDKs' own rule retries 408"
        );
        let body: Value = response.json().await.unwrap();
        assert_eq!(body["error"]["code"], "request_timeout", "{body}");
    }
    let records = s.usage_at_least(2).await;
    for record in &records {
        assert_eq!(record["status"], 408, "{record:?}");
        assert_eq!(record["error_code"], "request_timeout", "{record:?}");
    }
}

#[tokio::test]
async fn a_client_that_leaves_during_its_upload_is_recorded_as_gone_not_as_a_bad_form() {
    use tokio::io::AsyncWriteExt as _;
    let s = setup();
    let head = edit_form_head("b");
    let address = s.gateway.url.trim_start_matches("http://").to_owned();
    let mut stream = tokio::net::TcpStream::connect(&address).await.unwrap();
    let request = format!(
        "POST /v1/images/edits HTTP/1.1\r\nHost: {address}\r\nAuthorization: Bearer {}\r\n\
         Content-Type: multipart/form-data; boundary=b\r\nContent-Length: 1000000\r\n\r\n{head}",
        s.key
    );
    stream.write_all(request.as_bytes()).await.unwrap();
    tokio::time::sleep(Duration::from_millis(300)).await;
    drop(stream);
    let records = s.usage_at_least(1).await;
    assert_eq!(records[0]["status"], 499, "{:?}", records[0]);
    assert_eq!(records[0]["error_code"], "client_closed", "{:?}", records[0]);
    assert_eq!(records[0]["model"], "gpt-image-2", "{:?}", records[0]);
}

#[tokio::test]
async fn a_client_that_leaves_during_the_upstream_call_is_recorded_with_its_account() {
    let s = setup();
    s.sim_fault(json!({"fault": "stall", "stall_ms": 3000})).await;
    let sent = s
        .post_json("/images/generations", small_generation())
        .timeout(Duration::from_millis(500))
        .send()
        .await;
    assert!(sent.unwrap_err().is_timeout());
    let records = s.usage_at_least(1).await;
    assert_eq!(records.len(), 1, "{records:?}");
    assert_eq!(records[0]["status"], 499, "{:?}", records[0]);
    // The account was called, and its quota spent on the abandoned request.
    assert!(records[0]["account_id"].is_i64(), "{:?}", records[0]);
}

#[tokio::test]
async fn a_client_that_leaves_after_a_failover_is_recorded_with_the_failover() {
    let s = setup_with(&["acct-a", "acct-b"], &[]);
    // The first account called fails; the second one holds the request until the client leaves.
    s.sim_fault(json!({"fault": "500", "times": 1})).await;
    s.sim_fault(json!({"fault": "stall", "stall_ms": 5000})).await;
    let sent = s
        .post_json("/images/generations", small_generation())
        .timeout(Duration::from_millis(1500))
        .send()
        .await;
    assert!(sent.unwrap_err().is_timeout());
    let records = s.usage_at_least(1).await;
    assert_eq!(records[0]["status"], 499, "{:?}", records[0]);
    assert_eq!(
        records[0]["fallback_note"], "failed over 1 time(s)",
        "{:?}",
        records[0]
    );
}

#[tokio::test]
async fn an_answer_with_fewer_images_than_asked_for_is_recorded_as_such() {
    let s = setup();
    s.sim_fault(json!({"fault": "one_image", "times": 2})).await;
    let asked = json!({"model": "gpt-image-2", "prompt": "x", "size": "1024x1024", "quality": "low", "n": 3});
    let answer: Value = s
        .post_json("/images/generations", asked.clone())
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(answer["data"].as_array().unwrap().len(), 1, "{answer}");
    let mut streamed = asked;
    streamed["stream"] = json!(true);
    let response = s.post_json("/images/generations", streamed).send().await.unwrap();
    assert_eq!(response.status(), 200);
    let events = imagegate_e2e::parse_sse(&response.text().await.unwrap());
    let completed = events
        .iter()
        .filter(|(name, _)| name == "image_generation.completed")
        .count();
    assert_eq!(completed, 1, "{events:?}");
    // And one that got all it asked for says nothing.
    s.post_json(
        "/images/generations",
        json!({"model": "gpt-image-2", "prompt": "x", "size": "1024x1024", "quality": "low", "n": 2}),
    )
    .send()
    .await
    .unwrap()
    .bytes()
    .await
    .unwrap();
    let mut records = s.usage_at_least(3).await;
    records.sort_by_key(|record| record["id"].as_i64());
    for record in &records[..2] {
        assert_eq!(
            (&record["status"], &record["n"], &record["images"]),
            (&json!(200), &json!(3), &json!(1))
        );
        assert_eq!(
            record["fallback_note"], "the upstream made 1 of the 3 images asked for",
            "{record:?}"
        );
    }
    assert_eq!(records[2]["images"], 2);
    assert_eq!(records[2]["fallback_note"], Value::Null, "{:?}", records[2]);
}

#[tokio::test]
async fn an_answer_without_an_image_is_retried_a_little_and_not_held_against_the_accounts() {
    let s = setup_with(&["acct-a", "acct-b", "acct-c", "acct-d"], &[]);
    s.sim_fault(json!({"fault": "no_image"})).await;
    let response = s
        .post_json("/images/generations", small_generation())
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 502);
    // One try and the two retries of a transient failure, not one try per account.
    assert_eq!(s.sim_stats().await["requests"], 3);
    let listed = s.accounts();
    for account in listed["accounts"].as_array().unwrap() {
        assert_eq!(account["live"]["failures"], 0, "{account}");
        assert_eq!(account["live"]["cooldowns"], json!([]), "{account}");
    }
}

#[tokio::test]
async fn a_stream_that_fails_before_its_first_event_moves_to_another_account() {
    let s = setup_with(&["acct-a", "acct-b"], &[]);
    // The first call answers 200 and an event stream that ends without a single event.
    s.sim_fault(json!({"fault": "no_image", "times": 1})).await;
    let response = s
        .post_json("/images/generations", stream_generation())
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let text = response.text().await.unwrap();
    assert!(text.contains("image_generation.completed"), "{text}");
    assert!(!text.contains("error"), "{text}");
    assert_eq!(s.sim_stats().await["requests"], 2);
    let records = s.usage_at_least(1).await;
    assert_eq!(records[0]["status"], 200, "{:?}", records[0]);
    assert_eq!(records[0]["images"], 1, "{:?}", records[0]);
}

#[tokio::test]
async fn a_stream_that_fails_before_its_first_event_on_every_try_is_an_http_error() {
    let s = setup_with(&["acct-a", "acct-b", "acct-c", "acct-d"], &[]);
    s.sim_fault(json!({"fault": "no_image"})).await;
    let response = s
        .post_json("/images/generations", stream_generation())
        .send()
        .await
        .unwrap();
    // Nothing reached the client before the failure, so it gets a status it (and its SDK's
    // retries) can act on, not a 200 with an error frame.
    assert_eq!(response.status(), 502);
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["error"]["code"], "upstream_request_failed", "{body}");
    assert_eq!(s.sim_stats().await["requests"], 3);
}

#[tokio::test]
async fn a_try_after_a_slow_failure_gets_only_the_time_the_request_has_left() {
    // Every generation takes 1 s; the request's deadline is 2 s. acct-a (pro, tried first) answers
    // 502 after 1.5 s, so acct-b has 0.5 s left: too little for its 1 s. A try with a deadline of
    // its own would answer 200 after 2.5 s, past what the client was told to wait.
    let config = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(config.path(), "[timeouts]\nstandard_secs = 2\n").unwrap();
    let s = setup_custom(
        &["--latency-ms", "1000"],
        &[("acct-a", &["--tier", "pro"]), ("acct-b", &["--tier", "plus"])],
        &["--config", config.path().to_str().unwrap()],
    );
    s.sim_fault(json!({"key": credential("acct-a"), "fault": "502", "delay_ms": 1500}))
        .await;
    let response = s
        .post_json("/images/generations", small_generation())
        .send()
        .await
        .unwrap();
    let status = response.status().as_u16();
    let body: Value = response.json().await.unwrap();
    // 504 when acct-b's try ran out of time; 502 (acct-a's failure) on a machine so slow that no
    // time was left for a second try at all.
    // (Only the error is shown on failure: a 200's body is a whole image.)
    assert!(matches!(status, 502 | 504), "{status}: {}", body["error"]);
    assert!(body["error"]["code"].is_string(), "{status}: {}", body["error"]);
    // acct-b ran out of the time acct-a used up: not a failure of acct-b's.
    let listed = s.accounts();
    let b = listed["accounts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["name"] == "acct-b")
        .unwrap();
    assert_eq!(b["live"]["failures"], 0, "{b}");
}

#[tokio::test]
async fn a_later_try_whose_stream_runs_out_of_the_time_left_is_not_held_against_its_account() {
    // The request's deadline is 3 s. acct-a (pro, tried first) answers 502 after 1.5 s; acct-b's
    // stream starts (a partial image) and then stalls until the deadline cuts it. acct-b ran out
    // of the time acct-a used up, after its answer started: no failure of acct-b's either.
    let config = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(config.path(), "[timeouts]\nstandard_secs = 3\n").unwrap();
    let s = setup_custom(
        &["--latency-ms", "200"],
        &[("acct-a", &["--tier", "pro"]), ("acct-b", &["--tier", "plus"])],
        &["--config", config.path().to_str().unwrap()],
    );
    s.sim_fault(json!({"key": credential("acct-a"), "fault": "502", "delay_ms": 1500}))
        .await;
    s.sim_fault(json!({"key": credential("acct-b"), "fault": "stall_mid_stream", "stall_ms": 5000}))
        .await;
    let response = s
        .post_json(
            "/images/generations",
            json!({"model": "gpt-image-2", "prompt": "x", "size": "1024x1024", "quality": "low",
                "stream": true, "partial_images": 1}),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200, "acct-b's stream started");
    let body = response.text().await.unwrap();
    let events = imagegate_e2e::parse_sse(&body);
    assert_eq!(
        events.first().map(|(name, _)| name.as_str()),
        Some("image_generation.partial_image")
    );
    assert_eq!(
        events.last().map(|(name, _)| name.as_str()),
        Some("error"),
        "cut by the deadline"
    );
    let listed = s.accounts();
    let b = listed["accounts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["name"] == "acct-b")
        .unwrap();
    assert_eq!(b["live"]["failures"], 0, "{b}");
}

#[tokio::test]
async fn no_try_is_made_once_the_request_deadline_is_spent() {
    // The request's deadline is 1 s. acct-a (pro, tried first) answers 502 after 0.95 s; the pause
    // before a retry (100 ms or more) then spends the rest. The client gets acct-a's 502, and acct-b
    // is never called: a call with no time at all could only time out (a 504 that hides the real
    // failure, held against an account that did nothing wrong).
    let config = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(config.path(), "[timeouts]\nstandard_secs = 1\n").unwrap();
    let s = setup_custom(
        &["--latency-ms", "10"],
        &[("acct-a", &["--tier", "pro"]), ("acct-b", &["--tier", "plus"])],
        &["--config", config.path().to_str().unwrap()],
    );
    s.sim_fault(json!({"key": credential("acct-a"), "fault": "502", "delay_ms": 950}))
        .await;
    let response = s
        .post_json("/images/generations", small_generation())
        .send()
        .await
        .unwrap();
    let status = response.status().as_u16();
    let body: Value = response.json().await.unwrap();
    assert_eq!(status, 502, "{}", body["error"]);
    assert_eq!(body["error"]["code"], "upstream_request_failed", "{body}");
    assert_eq!(s.sim_stats().await["requests"], 1, "only acct-a was called");
    let listed = s.accounts();
    let b = listed["accounts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["name"] == "acct-b")
        .unwrap();
    assert_eq!(b["live"]["failures"], 0, "{b}");
}

#[tokio::test]
async fn the_fallback_ladder_shares_the_request_deadline() {
    // Every generation takes 1 s; the request's deadline is 2 s. The one account answers 502 after
    // 1.5 s, so the ladder's cheaper rung (quality medium) has 0.5 s left: too little for its 1 s.
    // A rung with a deadline of its own would answer 200 after 2.5 s, past the request's deadline.
    let config = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(config.path(), "[timeouts]\nstandard_secs = 2\n").unwrap();
    let s = setup_custom(
        &["--latency-ms", "1000"],
        &[("acct-a", &[])],
        &["--config", config.path().to_str().unwrap()],
    );
    s.sim_fault(json!({"fault": "502", "delay_ms": 1500, "times": 1}))
        .await;
    let response = s
        .post_json(
            "/images/generations",
            json!({"model": "gpt-image-2", "prompt": "x", "size": "1024x1024", "quality": "high"}),
        )
        .header("x-imagegate-fallback", "on")
        .send()
        .await
        .unwrap();
    let status = response.status().as_u16();
    let fallback = response.headers().get("x-imagegate-fallback").cloned();
    let body: Value = response.json().await.unwrap();
    // 504 when the rung ran out of time; 502 (the first failure) on a machine so slow that no
    // time was left for the rung at all.
    assert!(matches!(status, 502 | 504), "{status}: {}", body["error"]);
    assert!(fallback.is_none(), "{fallback:?}");
}

#[tokio::test]
async fn streams_that_fail_after_their_headers_open_the_circuit_breaker() {
    let s = setup_with_config("[timeouts]\nstandard_secs = 1\n");
    // Each stream starts, then goes quiet past the gateway's deadline.
    s.sim_fault(json!({"fault": "stall_mid_stream", "stall_ms": 5000}))
        .await;
    for _ in 0..3 {
        let response = s
            .post_json(
                "/images/generations",
                json!({"model": "gpt-image-2", "prompt": "x", "size": "1024x1024", "stream": true, "partial_images": 1}),
            )
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 200);
        let text = response.text().await.unwrap();
        assert!(text.contains("error"), "{text}");
    }
    // Three failures in a row, none of them cancelled out by the headers that came first.
    let listed = s.accounts();
    let live = &listed["accounts"][0]["live"];
    assert_eq!(live["failures"], 3, "{live}");
    let reasons = live["cooldowns"].to_string();
    assert!(reasons.contains("circuit breaker"), "{live}");
}

#[tokio::test]
async fn a_rejected_credential_marks_the_account_failed_and_moves_on() {
    // acct-a (pro) is preferred over acct-b (plus), so it is tried first.
    let s = setup_custom(
        &[],
        &[("acct-a", &["--tier", "pro"]), ("acct-b", &["--tier", "plus"])],
        &[],
    );
    s.sim_fault(json!({"key": credential("acct-a"), "fault": "401"}))
        .await;
    for _ in 0..3 {
        let response = s
            .post_json("/images/generations", small_generation())
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 200);
    }
    let stats = s.sim_stats().await;
    assert_eq!(stats["by_token"][credential("acct-a")]["requests"], 1, "{stats}");
    assert_eq!(stats["by_token"][credential("acct-b")]["requests"], 3, "{stats}");
    let listed = s.accounts();
    let a = listed["accounts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["name"] == "acct-a")
        .unwrap()
        .clone();
    assert_eq!(a["status"], "error", "{a}");
    assert!(a["status_reason"].as_str().unwrap().contains("401"), "{a}");
}

#[tokio::test]
async fn a_credential_refused_after_the_operator_replaced_it_leaves_the_account_serving() {
    let s = setup_custom(&[], &[("acct-a", &[])], &[]);
    // The old key is refused, slowly: the operator replaces it while the request is out.
    s.sim_fault(json!({"key": credential("acct-a"), "fault": "401", "delay_ms": 1500}))
        .await;
    let request = s.post_json("/images/generations", small_generation()).send();
    let out = tokio::spawn(request);
    tokio::time::sleep(Duration::from_millis(300)).await;
    imagegate_e2e::admin_with_stdin(
        s.dir.path(),
        &["accounts", "update", "acct-a", "--credential-stdin"],
        "sk-upstream-acct-a-rotated",
    );
    let refused = out.await.unwrap().unwrap();
    assert_ne!(refused.status(), 200, "the old key was refused");
    let listed = s.accounts();
    let a = &listed["accounts"][0];
    assert_eq!(a["status"], "active", "the refusal was the replaced key's: {a}");
    // Once the gateway has read the new key (within 5 s), the account serves with it.
    let mut served = false;
    for _ in 0..40 {
        let response = s
            .post_json("/images/generations", small_generation())
            .send()
            .await
            .unwrap();
        if response.status() == 200 {
            served = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    assert!(
        served,
        "the account never served with its new key: {}",
        s.accounts()
    );
    let stats = s.sim_stats().await;
    assert!(
        stats["by_token"]["sk-upstream-acct-a-rotated"]["requests"]
            .as_u64()
            .unwrap_or(0)
            >= 1,
        "{stats}"
    );
}

#[tokio::test]
async fn a_sigterm_right_after_the_gateway_says_it_is_up_drains_it() {
    let mut s = setup();
    // Each time, the signal follows the "listening" line at once: the gateway must already be
    // listening for it (a graceful exit, status 0), not be killed by it.
    for attempt in 0..20 {
        assert!(s.gateway.stop(), "attempt {attempt}: killed instead of drained");
        s.gateway = imagegate_e2e::Gateway::spawn(s.dir.path(), &[]);
    }
}

#[tokio::test]
async fn a_stream_cut_inside_an_image_event_cuts_the_client_after_the_whole_events() {
    let s = setup();
    // The upstream's stream ends halfway through its second event, an image the gateway relays
    // in pieces as it arrives: the client has part of it, so no error frame can follow.
    s.sim_fault(json!({"fault": "truncated_body"})).await;
    let response = s
        .post_json(
            "/images/generations",
            json!({"model": "gpt-image-2", "prompt": "x", "size": "1024x1024", "stream": true, "partial_images": 2}),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let (received, cut) = read_until_cut(response).await;
    let text = String::from_utf8(received).unwrap();
    assert!(cut, "the stream ended cleanly: {:.300}", text);
    let (whole, rest) = text.split_once("\n\n").unwrap();
    let (name, data) = whole
        .strip_prefix("event: ")
        .and_then(|whole| whole.split_once("\ndata: "))
        .unwrap();
    assert_eq!(name, "image_generation.partial_image");
    serde_json::from_str::<Value>(data).expect("the first event is whole");
    // Then as much of the second as was written before the cut (hyper may drop what it had not
    // sent yet), and no error frame.
    let opening = "event: image_generation.partial_image\ndata: {";
    assert!(
        (rest.starts_with(opening) || opening.starts_with(rest)) && !rest.contains("\n\n"),
        "then part of the second, and nothing after it: {:.200}",
        rest
    );
    let records = s.usage_at_least(1).await;
    assert_eq!(records[0]["status"], 502, "{:?}", records[0]);
    assert_eq!(records[0]["stream"], true, "{:?}", records[0]);
    assert!(records[0]["error_code"].is_string(), "{:?}", records[0]);
}

#[tokio::test]
async fn uploads_past_the_disk_budget_are_answered_503_to_retry_and_within_it_go_through() {
    let s = setup_with_config("[uploads]\ndisk_budget_mb = 1\n");
    let edit = |image: Vec<u8>| {
        let part = reqwest::multipart::Part::bytes(image)
            .file_name("a.png")
            .mime_str("image/png")
            .unwrap();
        let form = reqwest::multipart::Form::new()
            .text("model", "gpt-image-2")
            .text("prompt", "x")
            .text("quality", "low")
            .part("image", part);
        s.client
            .post(s.gateway.v1("/images/edits"))
            .bearer_auth(&s.key)
            .multipart(form)
            .send()
    };
    // About 480 kB: kept on disk (past 256 KiB), within the 1 MiB budget.
    let within = edit(imagegate_e2e::png_noise(400, 1)).await.unwrap();
    assert_eq!(within.status(), 200, "{:?}", within.text().await);
    // About 1.5 MB: past the budget, refused before the upstream is called.
    let past = edit(imagegate_e2e::png_noise(700, 2)).await.unwrap();
    assert_eq!(past.status(), 503);
    assert_eq!(past.headers()["x-should-retry"], "true");
    let body: Value = past.json().await.unwrap();
    assert_eq!(body["error"]["code"], "overloaded", "{body}");
    assert_eq!(
        s.sim_stats().await["requests"],
        1,
        "only the edit within the budget was sent"
    );
    // The first upload's bytes were given back: it fits again.
    let again = edit(imagegate_e2e::png_noise(400, 3)).await.unwrap();
    assert_eq!(again.status(), 200);
    // While an upload is on disk, /metrics shows its bytes against the budget.
    let mut head = b"--b\r\nContent-Disposition: form-data; name=\"model\"\r\n\r\ngpt-image-2\r\n\
        --b\r\nContent-Disposition: form-data; name=\"prompt\"\r\n\r\nx\r\n\
        --b\r\nContent-Disposition: form-data; name=\"image\"; filename=\"a.png\"\r\n\
        Content-Type: image/png\r\n\r\n"
        .to_vec();
    head.extend_from_slice(&imagegate_e2e::png_noise(400, 4)[..300 * 1024]);
    let stalled = tokio::spawn(stalled_body(
        &s,
        &s.key,
        "/images/edits",
        "multipart/form-data; boundary=b",
        head,
    ));
    let scrape = || async {
        let text = s.metrics().await;
        let value = |name: &str| -> f64 {
            let line = text.lines().find(|l| l.starts_with(name)).unwrap();
            line.rsplit(' ').next().unwrap().parse().unwrap()
        };
        (
            value("imagegate_upload_disk_bytes "),
            value("imagegate_upload_disk_budget_bytes "),
        )
    };
    let mut seen = (0.0, 0.0);
    for _ in 0..50 {
        seen = scrape().await;
        if seen.0 > 0.0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(seen.0 >= 256.0 * 1024.0, "the stalled upload's bytes: {seen:?}");
    assert_eq!(seen.1, 1024.0 * 1024.0);
    stalled.abort();
}

//! End to end: the account pool seen through the real binaries: failover on 5xx, size-class
//! concurrency, the fallback ladder, keepalive comments, agent tool injection and a Responses stream
//! failing over after its lifecycle events.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::disallowed_methods
)]

mod common;

use common::{credential, setup_custom, setup_with};
use futures::future::join_all;
use serde_json::{Value, json};

/// How many requests the simulator saw with `account`'s credential.
fn sim_requests(stats: &Value, account: &str) -> u64 {
    stats["by_token"][credential(account)]["requests"]
        .as_u64()
        .unwrap_or(0)
}

/// The usage record says the request failed over once.
fn assert_failed_over_once(record: &Value) {
    assert!(
        record["fallback_note"]
            .as_str()
            .unwrap()
            .contains("failed over 1"),
        "{record:?}"
    );
}

fn generation(size: &str, quality: &str) -> Value {
    json!({"model": "gpt-image-2", "prompt": "pool", "size": size, "quality": quality})
}

#[tokio::test]
async fn a_502_is_retried_once_on_another_account() {
    let s = setup_with(&["acct-a", "acct-b"], &[]);
    s.sim_fault(json!({"fault": "502", "times": 1})).await;
    let response = s
        .post_json("/images/generations", generation("1024x1024", "low"))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let stats = s.sim_stats().await;
    assert_eq!(stats["requests"], 2, "{stats}");
    let (a, b) = (sim_requests(&stats, "acct-a"), sim_requests(&stats, "acct-b"));
    assert_eq!((a, b), (1, 1), "the retry must go to the other account: {stats}");
    let records = s.usage_at_least(1).await;
    assert_failed_over_once(&records[0]);
}

#[tokio::test]
async fn large_requests_respect_the_large_limit_while_standard_ones_continue() {
    let s = setup_custom(
        &["--latency-ms", "700"],
        &[(
            "acct-a",
            &[
                "--tier",
                "pro",
                "--concurrency-large",
                "1",
                "--concurrency-standard",
                "4",
            ],
        )],
        &[],
    );
    let large = || {
        s.post_json("/images/generations", generation("2560x1600", "low"))
            .send()
    };
    let responses = join_all([large(), large(), large()]).await;
    assert!(responses.into_iter().all(|r| r.unwrap().status() == 200));
    let stats = s.sim_stats().await;
    assert_eq!(
        stats["max_in_flight"], 1,
        "two large requests reached the account at once: {stats}"
    );

    s.client
        .post(format!("{}/sim/stats/reset", s.sim.url))
        .send()
        .await
        .unwrap();
    let standard = || {
        s.post_json("/images/generations", generation("1024x1024", "low"))
            .send()
    };
    let (l1, l2, s1, s2) = tokio::join!(large(), large(), standard(), standard());
    for response in [l1, l2, s1, s2] {
        assert_eq!(response.unwrap().status(), 200);
    }
    let max = s.sim_stats().await["max_in_flight"].as_u64().unwrap();
    assert!(
        (2..=3).contains(&max),
        "standard requests must run beside the one large request: {max}"
    );
}

#[tokio::test]
async fn the_fallback_ladder_is_opt_in_and_always_reported() {
    let s = setup_with(&["acct-a"], &[]);
    s.sim_fault(json!({"fault": "502", "times": 1})).await;
    let plain = s
        .post_json("/images/generations", generation("3840x2160", "high"))
        .send()
        .await
        .unwrap();
    assert_eq!(plain.status(), 502, "without opting in nothing is downgraded");
    assert!(plain.headers().get("x-imagegate-fallback").is_none());

    s.sim_fault(json!({"fault": "502", "times": 1})).await;
    let response = s
        .post_json("/images/generations", generation("3840x2160", "high"))
        .header("x-imagegate-fallback", "on")
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(response.headers()["x-imagegate-fallback"], "quality=high->medium");
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["quality"], "medium");
    assert_eq!(body["size"], "3840x2160");
    let records = s.usage_at_least(2).await;
    let record = &records[0];
    assert_eq!(record["quality_requested"], "high");
    assert_eq!(record["quality_produced"], "medium");
    assert!(
        record["fallback_note"]
            .as_str()
            .unwrap()
            .contains("quality=high->medium"),
        "{record}"
    );
}

#[tokio::test]
async fn keepalive_comments_flow_while_the_upstream_is_quiet() {
    let config = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(config.path(), "[timeouts]\nkeepalive_secs = 1\n").unwrap();
    let config_path = config.path().to_str().unwrap().to_owned();
    let s = setup_with(&["acct-a"], &["--config", &config_path]);
    s.sim_fault(json!({"fault": "stall_mid_stream", "stall_ms": 2600}))
        .await;
    let body = s
        .post_json(
            "/images/generations",
            json!({"model": "gpt-image-2", "prompt": "x", "size": "1024x1024", "stream": true, "partial_images": 1}),
        )
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        body.contains(": keepalive\n\n"),
        "no keepalive comment in {} bytes",
        body.len()
    );
    let events = imagegate_e2e::parse_sse(&body);
    assert_eq!(events.last().unwrap().0, "image_generation.completed");
}

#[tokio::test]
async fn official_agent_clients_get_the_image_tool_injected() {
    let s = setup_with(&["acct-a"], &[]);
    let ask = |user_agent: &'static str| {
        s.post_json("/responses", json!({"model": "gpt-5", "input": "draw a heron"}))
            .header("user-agent", user_agent)
            .send()
    };
    let agent: Value = ask("codex_cli_rs/0.50.0 (Linux; x86_64)")
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let calls = |body: &Value| {
        body["output"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|o| o["type"] == "image_generation_call")
            .count()
    };
    assert_eq!(calls(&agent), 1, "{agent}");
    let other: Value = ask("OpenAI/Python 3.54.0").await.unwrap().json().await.unwrap();
    assert_eq!(calls(&other), 0, "{other}");
}

#[tokio::test]
async fn a_responses_call_failed_by_a_limit_is_billed_what_its_failed_event_says() {
    let s = setup_with(&["acct-a", "acct-b"], &[]);
    let tool = json!([{"type": "image_generation", "size": "1024x1024", "quality": "low"}]);
    let body = json!({"model": "gpt-5", "input": "draw a fox", "tools": tool, "stream": true});
    let request_id =
        |response: &reqwest::Response| response.headers()["x-request-id"].to_str().unwrap().to_owned();
    let clean = s.post_json("/responses", body.clone()).send().await.unwrap();
    let clean_id = request_id(&clean);
    clean.text().await.unwrap();
    // The next call fails after its start, its `response.failed` carrying the main model's usage.
    s.sim_fault(
        json!({"fault": "rate_limit_in_stream", "times": 1, "retry_after_seconds": 90,
        "path": "/v1/responses"}),
    )
    .await;
    let failed_over = s.post_json("/responses", body).send().await.unwrap();
    let failed_over_id = request_id(&failed_over);
    failed_over.text().await.unwrap();
    let records = s.usage_at_least(2).await;
    let input = |id: &str| {
        let record = records.iter().find(|r| r["request_id"] == id).unwrap();
        assert_eq!(record["status"], 200, "{record:?}");
        record["tokens"]["input"].as_u64().unwrap()
    };
    assert!(
        input(&failed_over_id) > input(&clean_id),
        "the failed call's tokens are billed on top of the call that answered: {records:?}"
    );
}

/// A streamed Responses call whose first try fails after its start (the fault set on the
/// simulator): the client sees one response, ended by `response.completed`, and each of the two
/// accounts got one call.
async fn streamed_response_failed_over_once(s: &common::Setup) {
    let tool = json!([{"type": "image_generation", "size": "1024x1024", "quality": "low"}]);
    let response = s
        .post_json(
            "/responses",
            json!({"model": "gpt-5", "input": "draw a fox", "tools": tool, "stream": true}),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let events = imagegate_e2e::parse_sse(&response.text().await.unwrap());
    let names: Vec<&str> = events.iter().map(|(name, _)| name.as_str()).collect();
    assert_eq!(
        names.iter().filter(|n| **n == "response.created").count(),
        1,
        "the client sees one response: {names:?}"
    );
    assert_eq!(names.last(), Some(&"response.completed"), "{names:?}");
    imagegate_e2e::assert_sequence_counts_from_zero(&events);
    let stats = s.sim_stats().await;
    let (a, b) = (sim_requests(&stats, "acct-a"), sim_requests(&stats, "acct-b"));
    assert_eq!((a + b, a.min(b)), (2, 1), "one call on each account: {stats}");
}

#[tokio::test]
async fn a_responses_stream_failing_on_a_server_error_after_it_started_goes_to_another_account() {
    let s = setup_with(&["acct-a", "acct-b"], &[]);
    // The first call starts its stream, then its model fails (`response.failed`, `server_error`).
    s.sim_fault(json!({"fault": "server_error_in_stream", "times": 1, "path": "/v1/responses"}))
        .await;
    streamed_response_failed_over_once(&s).await;
    let records = s.usage_at_least(1).await;
    assert_eq!(records[0]["status"], 200, "{:?}", records[0]);
    assert_failed_over_once(&records[0]);
    // The failed call counts against its account (a streak of them opens its breaker).
    let listed = s.accounts();
    let failures: Vec<u64> = listed["accounts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["live"]["failures"].as_u64().unwrap_or(0))
        .collect();
    assert_eq!(failures.iter().sum::<u64>(), 1, "{listed}");
}

#[tokio::test]
async fn a_responses_stream_hitting_a_limit_after_it_started_goes_to_another_account() {
    let s = setup_with(&["acct-a", "acct-b"], &[]);
    // The first call starts its stream, then fails with a rate limit, as the ChatGPT backend
    // reports a limit met during a call.
    s.sim_fault(
        json!({"fault": "rate_limit_in_stream", "times": 1, "retry_after_seconds": 90,
        "path": "/v1/responses"}),
    )
    .await;
    streamed_response_failed_over_once(&s).await;

    // The limited account cools down until the wait the upstream named.
    let listed = s.accounts();
    let limited: Vec<&Value> = listed["accounts"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|a| !a["live"]["cooldowns"].as_array().unwrap().is_empty())
        .collect();
    assert_eq!(limited.len(), 1, "{listed}");
    let until = limited[0]["live"]["cooldowns"][0]["until"].as_u64().unwrap();
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64;
    assert!(
        until > now + 60_000 && until <= now + 91_000,
        "cooldown until {until}, now {now}"
    );
    let records = s.usage_at_least(1).await;
    assert_eq!(records[0]["status"], 200, "{:?}", records[0]);
    assert_failed_over_once(&records[0]);
}

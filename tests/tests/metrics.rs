//! End to end: `/metrics` of the real gateway counts requests and shows the pool.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::disallowed_methods
)]

mod common;

use common::{credential, setup};
use serde_json::json;

async fn scrape(s: &common::Setup) -> String {
    let response = s
        .client
        .get(format!("{}/metrics", s.gateway.url))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    assert!(
        response.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("application/openmetrics-text")
    );
    response.text().await.unwrap()
}

fn value(text: &str, series: &str) -> f64 {
    text.lines()
        .find(|l| l.starts_with(series) && l[series.len()..].starts_with(' '))
        .unwrap_or_else(|| panic!("no series {series} in\n{text}"))
        .rsplit(' ')
        .next()
        .unwrap()
        .parse()
        .unwrap()
}

#[tokio::test]
async fn metrics_count_requests_and_show_cooldowns() {
    let s = setup();
    for _ in 0..2 {
        let ok = s
            .post_json(
                "/images/generations",
                json!({"model": "gpt-image-2", "prompt": "a lighthouse", "size": "1024x1024", "quality": "low"}),
            )
            .send()
            .await
            .unwrap();
        assert_eq!(ok.status(), 200);
        ok.bytes().await.unwrap();
    }
    let bad = s
        .post_json(
            "/images/generations",
            json!({"model": "gpt-image-2", "prompt": "x", "size": "17x17"}),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(bad.status(), 400);

    let text = scrape(&s).await;
    let ok_series = "imagegate_requests_total{endpoint=\"/v1/images/generations\",status=\"200\",model=\"gpt-image-2\",size_class=\"standard\"}";
    assert_eq!(value(&text, ok_series), 2.0, "{text}");
    let bad_series = "imagegate_requests_total{endpoint=\"/v1/images/generations\",status=\"400\",model=\"gpt-image-2\",size_class=\"none\"}";
    assert_eq!(value(&text, bad_series), 1.0, "{text}");
    let upstream = "imagegate_upstream_duration_seconds_count{endpoint=\"/v1/images/generations\",size_class=\"standard\"}";
    assert_eq!(value(&text, upstream), 2.0, "{text}");
    let overhead = "imagegate_gateway_overhead_seconds_count{endpoint=\"/v1/images/generations\"}";
    assert_eq!(value(&text, overhead), 3.0, "{text}");
    let waited =
        "imagegate_pool_wait_seconds_count{endpoint=\"/v1/images/generations\",size_class=\"standard\"}";
    assert_eq!(
        value(&text, waited),
        2.0,
        "the refused request asked for no account: {text}"
    );
    assert_eq!(value(&text, "imagegate_requests_in_flight"), 0.0, "{text}");
    assert!(text.contains("imagegate_usage_queue_depth "), "{text}");

    // A usage limit on the only account shows as a cooldown of about the reset the upstream gave.
    s.sim_fault(json!({"key": credential("acct-a"), "fault": "usage_limit", "resets_in_seconds": 120}))
        .await;
    let limited = s
        .post_json(
            "/images/generations",
            json!({"model": "gpt-image-2", "prompt": "a lighthouse", "size": "1024x1024", "quality": "low"}),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(limited.status(), 429);
    let text = scrape(&s).await;
    let cooling = text
        .lines()
        .filter(|l| l.starts_with("imagegate_account_cooldown_seconds{"))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .fold(0.0, f64::max);
    assert!(
        (100.0..=121.0).contains(&cooling),
        "cooldown {cooling} in\n{text}"
    );
}

#[tokio::test]
async fn requests_refused_before_a_usage_record_are_counted_too() {
    let s = setup();
    for key in ["sk-ig-nope", ""] {
        let refused = s
            .client
            .post(s.gateway.v1("/images/generations"))
            .bearer_auth(key)
            .json(&json!({"model": "gpt-image-2", "prompt": "x"}))
            .send()
            .await
            .unwrap();
        assert_eq!(refused.status(), 401);
    }
    let text = scrape(&s).await;
    let series = "imagegate_requests_total{endpoint=\"/v1/images/generations\",status=\"401\",model=\"none\",size_class=\"none\"}";
    assert_eq!(value(&text, series), 2.0, "{text}");
    let timed =
        "imagegate_request_duration_seconds_count{endpoint=\"/v1/images/generations\",size_class=\"none\"}";
    assert_eq!(value(&text, timed), 2.0, "{text}");
}

#[tokio::test]
async fn a_responses_request_is_counted_under_the_size_class_it_was_served_as() {
    let s = setup();
    let body = json!({"model": "gpt-5", "input": "two pictures",
        "tools": [{"type": "image_generation", "size": "1024x1024", "quality": "low"},
                  {"type": "image_generation", "size": "3840x2160", "quality": "low"}]});
    let response = s.post_json("/responses", body).send().await.unwrap();
    let status = response.status();
    response.bytes().await.unwrap();
    let text = scrape(&s).await;
    let series = format!(
        "imagegate_requests_total{{endpoint=\"/v1/responses\",status=\"{}\",model=\"gpt-5\",size_class=\"large\"}}",
        status.as_u16()
    );
    assert_eq!(value(&text, &series), 1.0, "{text}");
}

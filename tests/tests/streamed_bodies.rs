//! Issue #8: bodies pass through the gateway without being held whole. Large non-streaming answers
//! arrive intact with their usage recorded, an upstream that dies mid-body cuts the client off
//! (never a shorter document that parses), and large edit uploads reach the upstream byte for byte.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::disallowed_methods
)]

mod common;

use base64::Engine as _;
use common::{read_until_cut, setup, setup_with_config};
use futures::StreamExt;
use imagegate_e2e::png_noise;
use serde_json::{Value, json};

fn sha256_hex(bytes: &[u8]) -> String {
    use sha2::Digest as _;
    hex::encode(sha2::Sha256::digest(bytes))
}

#[tokio::test]
async fn a_large_generation_arrives_intact_with_its_usage_recorded() {
    let s = setup();
    let response = s
        .post_json(
            "/images/generations",
            json!({"model": "gpt-image-2", "prompt": "a harbour at night", "size": "3840x2160", "quality": "low"}),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(response.headers()["content-type"], "application/json");
    let declared = response.headers().get("content-length").cloned();
    let body = response.bytes().await.unwrap();
    assert_eq!(
        declared.map(|length| length.to_str().unwrap().to_owned()),
        Some(body.len().to_string()),
        "the upstream's length is passed on with the relayed bytes"
    );
    assert!(
        body.len() > 1024 * 1024,
        "a 4K image is larger than 1 MiB: {}",
        body.len()
    );
    let answer: Value = serde_json::from_slice(&body).unwrap();
    let png = base64::engine::general_purpose::STANDARD
        .decode(answer["data"][0]["b64_json"].as_str().unwrap())
        .unwrap();
    let image = image::load_from_memory(&png).unwrap();
    assert_eq!((image.width(), image.height()), (3840, 2160));
    let total = answer["usage"]["total_tokens"].as_u64().unwrap();
    assert!(total > 0);
    let records = s.usage_at_least(1).await;
    let record = &records[0];
    assert_eq!(record["status"], 200, "{record:?}");
    assert_eq!(record["tokens"]["total"].as_u64().unwrap(), total);
    assert_eq!(record["size_produced"], "3840x2160");
    assert_eq!(record["images"], 1, "{record:?}");
}

#[tokio::test]
async fn a_client_that_hangs_up_before_the_usage_is_still_billed_for_the_image() {
    let s = setup();
    // The simulator sends the first bytes, pauses, then the rest: the image, then the usage.
    s.sim_fault(json!({"fault": "stall_body", "stall_ms": 1500}))
        .await;
    let response = s
        .post_json(
            "/images/generations",
            json!({"model": "gpt-image-2", "prompt": "x", "size": "1024x1024", "quality": "low"}),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    assert!(
        response.headers().contains_key("content-length"),
        "a length-delimited answer, whose end the relay settles itself"
    );
    let mut body = response.bytes_stream();
    let head = body.next().await.unwrap().unwrap();
    assert!(head.starts_with(b"{"), "the head was relayed");
    drop(body);
    let records = s.usage_at_least(1).await;
    let record = &records[0];
    assert_eq!(record["status"], 499, "{record:?}");
    assert!(record["tokens"]["total"].as_u64().unwrap() > 0, "{record:?}");
    assert_eq!(record["images"], 1, "{record:?}");
    assert_eq!(record["size_produced"], "1024x1024", "{record:?}");
}

#[tokio::test]
async fn an_upstream_dying_mid_body_cuts_the_client_and_records_a_failure() {
    let s = setup_with_config("[timeouts]\nstandard_secs = 2\n");
    // The simulator sends the body up to a few bytes into the image, then goes quiet past the
    // gateway's deadline.
    s.sim_fault(json!({"fault": "stall_body", "stall_ms": 30000}))
        .await;
    let response = s
        .post_json(
            "/images/generations",
            json!({"model": "gpt-image-2", "prompt": "x", "size": "1024x1024"}),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200, "the answer had started");
    assert!(response.headers().contains_key("content-length"));
    let (received, broke) = read_until_cut(response).await;
    assert!(
        broke,
        "the connection ended cleanly after {} bytes",
        received.len()
    );
    assert!(
        serde_json::from_slice::<Value>(&received).is_err(),
        "the client got a document that parses"
    );
    assert!(received.starts_with(b"{"), "the head was relayed");
    let records = s.usage_at_least(1).await;
    assert_eq!(records[0]["status"], 504, "{:?}", records[0]);
    assert!(records[0]["error_code"].is_string(), "{:?}", records[0]);
}

#[tokio::test]
async fn an_answer_whose_client_left_still_counts_for_its_account() {
    // The client leaves after the head; the rest of the body, still read for its usage, ends
    // cleanly (after 0.5 s) or not at all (cut by the 2 s deadline): the account is told either
    // way, as it is when the client reads to the end.
    for (stall_ms, failures, successes) in [(30_000, 1, 0), (500, 0, 1)] {
        let s = setup_with_config("[timeouts]\nstandard_secs = 2\n");
        s.sim_fault(json!({"fault": "stall_body", "stall_ms": stall_ms}))
            .await;
        let response = s
            .post_json(
                "/images/generations",
                json!({"model": "gpt-image-2", "prompt": "x", "size": "1024x1024"}),
            )
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 200, "the answer had started");
        common::leave_after_first_bytes(response).await;
        let records = s.usage_at_least(1).await;
        assert_eq!(records[0]["status"], 499, "{:?}", records[0]);
        let listed = s.accounts();
        let live = &listed["accounts"][0]["live"];
        assert_eq!(
            (&live["failures"], &live["successes"]),
            (&json!(failures), &json!(successes)),
            "stall {stall_ms} ms: {live}"
        );
    }
}

#[tokio::test]
async fn edits_with_large_images_reach_the_upstream_byte_for_byte() {
    let s = setup();
    // ~600 KiB and ~1.2 MiB: both past the 256 KiB spill threshold.
    let first = png_noise(450, 1);
    let second = png_noise(640, 2);
    assert!(first.len() > 256 * 1024 && second.len() > 256 * 1024);
    let part = |bytes: &[u8], name: &str| {
        reqwest::multipart::Part::bytes(bytes.to_vec())
            .file_name(name.to_owned())
            .mime_str("image/png")
            .unwrap()
    };
    let form = reqwest::multipart::Form::new()
        .text("model", "gpt-image-2")
        .text("prompt", "add a hat")
        .text("size", "1024x1024")
        .part("image[]", part(&first, "a.png"))
        .part("image[]", part(&second, "b.png"));
    let response = s
        .client
        .post(s.gateway.v1("/images/edits"))
        .bearer_auth(&s.key)
        .multipart(form)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let answer: Value = response.json().await.unwrap();
    assert!(answer["data"][0]["b64_json"].is_string());
    let stats = s.sim_stats().await;
    let inputs = stats["last_edit_inputs"].as_array().unwrap();
    let seen: Vec<(u64, &str)> = inputs
        .iter()
        .map(|i| (i["bytes"].as_u64().unwrap(), i["sha256"].as_str().unwrap()))
        .collect();
    let (first_hash, second_hash) = (sha256_hex(&first), sha256_hex(&second));
    assert_eq!(
        seen,
        [
            (first.len() as u64, first_hash.as_str()),
            (second.len() as u64, second_hash.as_str())
        ]
    );
    let records = s.usage_at_least(1).await;
    assert_eq!(records[0]["status"], 200);
}

#[tokio::test]
async fn a_document_cut_short_at_its_declared_length_cuts_the_client_and_records_a_failure() {
    let s = setup();
    // The simulator's document ends halfway through its image, and its content-length says so:
    // every declared byte arrives, yet the document is incomplete.
    s.sim_fault(json!({"fault": "truncated_body"})).await;
    let response = s
        .post_json(
            "/images/generations",
            json!({"model": "gpt-image-2", "prompt": "x", "size": "1024x1024", "quality": "low"}),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200, "the answer had started");
    let declared: usize = response.headers()["content-length"]
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    let (received, broke) = read_until_cut(response).await;
    assert!(
        broke && received.len() < declared,
        "the client read {} of {declared} declared bytes and {}",
        received.len(),
        if broke { "was cut" } else { "saw a clean end" }
    );
    assert!(
        received.starts_with(b"{\"model\":\"gpt-image-2\",\"created\""),
        "the head was relayed, naming the model"
    );
    let records = s.usage_at_least(1).await;
    assert_eq!(records[0]["status"], 502, "{:?}", records[0]);
    assert!(records[0]["error_code"].is_string(), "{:?}", records[0]);
    assert_eq!(records[0]["images"], 0, "{:?}", records[0]);
    let listed = s.accounts();
    assert_eq!(
        listed["accounts"][0]["live"]["failures"], 1,
        "the failure is the account's: {listed}"
    );
}

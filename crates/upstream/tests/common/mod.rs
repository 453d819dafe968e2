//! Shared helpers of the integration tests.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, dead_code)]

use std::collections::BTreeMap;
use std::time::Duration;

use bytes::Bytes;
use futures::StreamExt;
use imagegate_codec::sse::SseEvent;
use imagegate_domain::{
    Dimensions, ImageFileFormat, ImageInfo, ImageParams, ImageParamsDraft, ModelCatalog, validate_edit,
    validate_generation,
};
use imagegate_upstream::{
    AccountKind, AccountTarget, Failure, HttpUpstream, Reply, Secret, UploadedImage, Upstream, UpstreamCall,
    UpstreamConfig,
};
use wiremock::MockServer;

pub mod oauth;

pub const KEY: &str = "sk-test-0123456789";
pub const DEADLINE: Duration = Duration::from_secs(20);

/// A catalog where the alias `image-latest` is sent upstream as the dated snapshot.
pub fn catalog() -> ModelCatalog {
    ModelCatalog::new(
        ["gpt-image-2".to_owned()],
        BTreeMap::from([("image-latest".to_owned(), "gpt-image-2-2026-04-21".to_owned())]),
    )
}

pub fn generation(draft: ImageParamsDraft) -> ImageParams {
    validate_generation(draft, &catalog()).unwrap()
}

pub fn edit(draft: ImageParamsDraft) -> ImageParams {
    validate_edit(draft, &catalog()).unwrap()
}

pub fn prompt_only(prompt: &str) -> ImageParamsDraft {
    ImageParamsDraft {
        model: Some("image-latest".into()),
        prompt: Some(prompt.into()),
        ..Default::default()
    }
}

pub fn target(server: &MockServer, kind: AccountKind) -> AccountTarget {
    AccountTarget {
        account_id: 42,
        kind,
        base_url: format!("{}/v1", server.uri()),
        credential: Secret::new(KEY),
        main_models: vec!["gpt-5".into()],
    }
}

pub fn upstream() -> HttpUpstream {
    HttpUpstream::new(UpstreamConfig::default()).unwrap()
}

pub fn upload(
    field: &str,
    filename: Option<&str>,
    format: ImageFileFormat,
    bytes: &'static [u8],
) -> UploadedImage {
    UploadedImage {
        field: field.into(),
        filename: filename.map(str::to_owned),
        info: ImageInfo {
            format,
            dimensions: Dimensions {
                width: 1024,
                height: 1024,
            },
            has_alpha: true,
            byte_len: bytes.len() as u64,
        },
        data: imagegate_codec::multipart::UploadData::Memory(Bytes::from_static(bytes)),
    }
}

/// A minimal images answer holding one image.
pub fn image_answer() -> &'static str {
    r#"{"created":1766000000,"background":"opaque","output_format":"png","quality":"high","size":"1024x1024","data":[{"b64_json":"iVBORw0KGgoAAAANSUhEUg=="}],"usage":{"input_tokens":10,"input_tokens_details":{"text_tokens":10,"image_tokens":0},"output_tokens":100,"output_tokens_details":{"image_tokens":100,"text_tokens":0},"total_tokens":110}}"#
}

pub async fn generate(server: &MockServer, params: &ImageParams) -> Result<Reply, Failure> {
    upstream()
        .call(
            &target(server, AccountKind::OpenAi),
            UpstreamCall::Generate { params },
            DEADLINE,
        )
        .await
}

pub async fn json_body(reply: Reply) -> Bytes {
    reply.into_json().await.expect("a JSON reply")
}

pub async fn events(reply: Reply) -> Vec<Result<SseEvent, Failure>> {
    match reply {
        Reply::Events(stream) => imagegate_upstream::joined_events(stream).collect().await,
        Reply::Json { .. } | Reply::JsonStream(_) => panic!("expected an event stream"),
    }
}

/// The one request the mock server received.
pub async fn only_request(server: &MockServer) -> wiremock::Request {
    let mut requests = server.received_requests().await.unwrap();
    assert_eq!(requests.len(), 1, "exactly one upstream request");
    requests.remove(0)
}

pub fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
}

use bytes::Bytes;
use futures::StreamExt;
use proptest::prelude::*;

use super::*;
use crate::failure::FailureKind;

/// An Images answer with two images and usage last, as the API sends it.
fn answer() -> Vec<u8> {
    let b64: String = "iVBORw0KGgoAAAANSUhEUgAA".repeat(40);
    format!(
        r#"{{"created":1700000000,"background":"opaque","data":[{{"b64_json":"{b64}"}},{{"b64_json":"{b64}"}}],"output_format":"png","quality":"low","size":"1024x1024","usage":{{"input_tokens":12,"input_tokens_details":{{"text_tokens":12,"image_tokens":0}},"output_tokens":272,"output_tokens_details":{{"text_tokens":0,"image_tokens":272}},"total_tokens":284}}}}"#
    )
    .into_bytes()
}

fn chunks(pieces: Vec<Result<Bytes, Failure>>) -> Chunks {
    futures::stream::iter(pieces).boxed()
}

/// `body` cut at `cuts` (sorted, deduplicated positions inside it).
fn split(body: &[u8], cuts: &[usize]) -> Vec<Result<Bytes, Failure>> {
    let mut pieces = Vec::new();
    let mut from = 0;
    for &cut in cuts.iter().chain(std::iter::once(&body.len())) {
        if cut > from {
            pieces.push(Ok(Bytes::copy_from_slice(&body[from..cut])));
            from = cut;
        }
    }
    pieces
}

async fn relay(pieces: Vec<Result<Bytes, Failure>>) -> Result<Reply, Failure> {
    images_reply(chunks(pieces), Endpoint::Generations, 1 << 20, None).await
}

async fn whole(pieces: Vec<Result<Bytes, Failure>>) -> Result<Bytes, Failure> {
    relay(pieces).await?.into_json().await
}

#[tokio::test]
async fn every_two_chunk_split_relays_the_same_bytes_and_streams_once_an_image_began() {
    let body = answer();
    let image_starts = memchr::memmem::find(&body, b"\"b64_json\":\"").unwrap() + 13;
    for cut in 0..=body.len() {
        let reply = relay(split(&body, &[cut])).await.unwrap();
        match &reply {
            Reply::JsonStream(stream) => {
                assert!(stream.head.len() >= image_starts, "cut {cut}");
                assert!(stream.head.len() < body.len(), "cut {cut}");
            }
            Reply::Json { .. } => assert!(cut == 0 || cut >= body.len() || cut < image_starts, "cut {cut}"),
            Reply::Events(_) => panic!("events"),
        }
        assert_eq!(
            reply.into_json().await.unwrap(),
            Bytes::from(body.clone()),
            "cut {cut}"
        );
    }
}

#[tokio::test]
async fn every_split_hands_over_the_whole_bodys_summary() {
    let body = answer();
    let expected = imagegate_codec::usage_scan::scan(&body);
    assert_eq!(expected.images, 2);
    assert!(expected.usage.is_some());
    for cut in 0..=body.len() {
        let summary = match relay(split(&body, &[cut])).await.unwrap() {
            Reply::Json { summary, .. } => summary,
            Reply::JsonStream(mut stream) => {
                assert_eq!(stream.summary.take(), None, "cut {cut}: not before the end");
                while let Some(chunk) = stream.rest.next().await {
                    chunk.unwrap();
                }
                stream.summary.take()
            }
            Reply::Events(_) => panic!("events"),
        };
        assert_eq!(summary.as_ref(), Some(&expected), "cut {cut}");
    }
}

#[tokio::test]
async fn a_failed_body_hands_over_no_summary() {
    let body = answer();
    let at = body.len() / 2;
    let mut pieces = split(&body[..at], &[40]);
    pieces.push(Err(Failure::transient("connection reset")));
    let Reply::JsonStream(mut stream) = relay(pieces).await.unwrap() else {
        panic!("expected a stream")
    };
    while stream.rest.next().await.is_some() {}
    assert_eq!(stream.summary.take(), None);
}

#[tokio::test]
async fn one_byte_chunks_relay_the_same_bytes() {
    let body = answer();
    let cuts: Vec<usize> = (1..body.len()).collect();
    let reply = relay(split(&body, &cuts)).await.unwrap();
    let Reply::JsonStream(stream) = &reply else {
        panic!("expected a stream")
    };
    assert!(
        stream.head.len() < 100,
        "held only up to the first image: {}",
        stream.head.len()
    );
    assert_eq!(reply.into_json().await.unwrap(), Bytes::from(body));
}

#[tokio::test]
async fn a_body_cut_anywhere_never_ends_cleanly() {
    let body = answer();
    for end in 0..body.len() {
        for cut in [end / 2, end.saturating_sub(1)] {
            let result = whole(split(&body[..end], &[cut])).await;
            assert!(
                result.is_err(),
                "a body cut at {end} (split at {cut}) was relayed as complete"
            );
        }
    }
}

#[tokio::test]
async fn a_failure_mid_body_is_the_last_item() {
    let body = answer();
    let at = body.len() / 2;
    let mut pieces = split(&body[..at], &[40]);
    pieces.push(Err(Failure::transient("connection reset")));
    pieces.push(Ok(Bytes::copy_from_slice(&body[at..])));
    let Reply::JsonStream(stream) = relay(pieces).await.unwrap() else {
        panic!("expected a stream")
    };
    let items: Vec<_> = stream.rest.collect().await;
    let last = items.last().unwrap();
    assert_eq!(last.as_ref().unwrap_err().kind, FailureKind::Transient);
    assert!(items[..items.len() - 1].iter().all(Result::is_ok));
}

#[tokio::test]
async fn trailing_garbage_after_the_document_fails_the_stream() {
    let mut body = answer();
    body.extend_from_slice(b" {\"more\":1}");
    assert!(whole(split(&body, &[30])).await.is_err());
}

#[tokio::test]
async fn answers_without_an_image_are_no_image_failures_whatever_the_chunks() {
    let body = br#"{"created":1,"data":[{"url":"https://example.com/x.png"}],"usage":{"total_tokens":1}}"#;
    for cut in 0..=body.len() {
        let failure = relay(split(body, &[cut])).await.unwrap_err();
        assert_eq!(failure.kind, FailureKind::NoImage, "cut {cut}");
    }
}

#[tokio::test]
async fn bodies_over_the_bound_fail() {
    let body = answer();
    let result = images_reply(chunks(split(&body, &[60])), Endpoint::Generations, 200, None).await;
    let failure = match result {
        Ok(reply) => reply.into_json().await.unwrap_err(),
        Err(failure) => failure,
    };
    assert_eq!(failure.kind, FailureKind::Protocol);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn any_chunking_relays_the_same_bytes(mut cuts in proptest::collection::vec(0usize..2100, 0..12)) {
        let body = answer();
        cuts.retain(|c| *c < body.len());
        cuts.sort_unstable();
        cuts.dedup();
        let runtime = tokio::runtime::Builder::new_current_thread().build().unwrap();
        let relayed = runtime.block_on(whole(split(&body, &cuts))).unwrap();
        prop_assert_eq!(relayed, Bytes::from(body));
    }
}

use std::time::Duration;

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
    images_reply(
        chunks(pieces),
        Endpoint::Generations,
        1 << 20,
        Declared::default(),
    )
    .await
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
    let result = images_reply(
        chunks(split(&body, &[60])),
        Endpoint::Generations,
        200,
        Declared::default(),
    )
    .await;
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

/// `pieces`, each arriving 10 ms after it is asked for, read under a 5 s deadline by a client that
/// takes `pause` with each chunk; what the client got.
async fn read_paced(pieces: Vec<Result<Bytes, Failure>>, pause: Duration) -> Vec<Result<Bytes, Failure>> {
    let body = futures::stream::iter(pieces)
        .then(|piece| async move {
            tokio::time::sleep(Duration::from_millis(10)).await;
            piece
        })
        .boxed();
    let mut chunks = timed(body, Deadline::from_now(Duration::from_secs(5)));
    let mut got = Vec::new();
    while let Some(item) = chunks.next().await {
        got.push(item);
        tokio::time::sleep(pause).await;
    }
    got
}

#[tokio::test(start_paused = true)]
async fn a_client_slower_than_the_deadline_does_not_time_the_upstream_out() {
    let body = answer();
    let pieces = split(&body, &[100, 200, 300, 400]);
    // 5 x 2 s with the client: past the 5 s deadline, but the upstream took 50 ms of it.
    let got = read_paced(pieces, Duration::from_secs(2)).await;
    assert_eq!(got.len(), 5, "{got:?}");
    let bytes: Vec<u8> = got.into_iter().flat_map(|c| c.unwrap().to_vec()).collect();
    assert_eq!(bytes, body);
}

#[tokio::test(start_paused = true)]
async fn a_client_holding_the_body_past_its_own_budget_is_too_slow() {
    let pieces = split(&answer(), &[100, 200]);
    // 6 s with the client after each chunk: by the third read it has held the body for 12 s, past
    // the 5 + 5 s the call allows.
    let got = read_paced(pieces, Duration::from_secs(6)).await;
    assert_eq!(got.len(), 3, "{got:?}");
    assert_eq!(got[2].as_ref().unwrap_err().kind, FailureKind::ClientTooSlow);
}

#[tokio::test(start_paused = true)]
async fn an_upstream_slower_than_the_deadline_times_out_whatever_the_client() {
    let body = futures::stream::iter(vec![Ok(Bytes::from_static(b"{\"data\":"))])
        .chain(futures::stream::pending())
        .boxed();
    let mut chunks = timed(body, Deadline::from_now(Duration::from_secs(5)));
    assert!(chunks.next().await.unwrap().is_ok());
    tokio::time::sleep(Duration::from_secs(1)).await;
    let started = tokio::time::Instant::now();
    let failure = chunks.next().await.unwrap().unwrap_err();
    assert_eq!(failure.kind, FailureKind::Timeout);
    assert_eq!(
        started.elapsed(),
        Duration::from_secs(5),
        "the client's second is not the upstream's"
    );
}

#[test]
fn the_first_image_search_goes_on_where_it_stopped() {
    // An image whose base64 has not begun, trickling in: each look starts where the last one
    // stopped, so the head is not searched again from its start for every chunk.
    let mut first = FirstImage::default();
    let mut scanner = ImagesResponseScanner::new();
    let mut head = br#"  {"data":[{"revised_prompt":""#.to_vec();
    scanner.push(&head);
    assert!(!first.began(&head, &scanner));
    for _ in 0..3 {
        let more = b"a long prompt ".repeat(100);
        scanner.push(&more);
        head.extend_from_slice(&more);
        assert!(!first.began(&head, &scanner));
        assert_eq!(first.search_from, head.len() - (b"\"b64_json\"".len() - 1));
    }
    let rest = br#"","b64_json":"iVBOR"#;
    scanner.push(rest);
    head.extend_from_slice(rest);
    assert!(first.began(&head, &scanner));
}

//! Server-sent-event bodies: frames paced over the simulated latency, with an optional stall after the
//! first frame.

use std::convert::Infallible;
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::http::{HeaderValue, header};
use axum::response::Response;
use futures::StreamExt as _;
use futures::stream::{self, BoxStream};
use tokio::time::Instant;

/// A stream of encoded SSE frames.
pub type FrameStream = BoxStream<'static, Result<Bytes, Infallible>>;

/// Sends `frames` spread evenly between `from` and `until` (frame `j` of `n` at `from + span*(j+1)/n`;
/// frames whose time has passed go at once). With `stall`, the stream pauses that long after its first
/// frame (before the only frame when there is just one).
pub fn paced(frames: Vec<Bytes>, from: Instant, until: Instant, stall: Option<Duration>) -> FrameStream {
    let count = u32::try_from(frames.len()).unwrap_or(u32::MAX).max(1);
    let span = until.saturating_duration_since(from);
    let stall_before = if count > 1 { 1 } else { 0 };
    let frames = frames.into_iter().zip(0u32..);
    stream::unfold((frames, stall), move |(mut frames, mut stall)| async move {
        let (frame, index) = frames.next()?;
        if index == stall_before
            && let Some(pause) = stall.take()
        {
            tokio::time::sleep(pause).await;
        }
        let offset = span
            .checked_mul(index.saturating_add(1))
            .map_or(span, |d| d / count);
        tokio::time::sleep_until(from + offset).await;
        Some((Ok(frame), (frames, stall)))
    })
    .boxed()
}

/// A `200 text/event-stream` response over `frames`.
pub fn sse_response(frames: FrameStream) -> Response {
    let mut response = Response::new(Body::from_stream(frames));
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/event-stream; charset=utf-8"),
    );
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    response
}

/// A JSON body sent in one piece, or, with `stall`, its first 64 bytes, then a pause, then the rest.
pub fn json_body(json: Vec<u8>, stall: Option<Duration>) -> Response {
    let length = json.len();
    let body = match stall {
        None => Body::from(json),
        Some(pause) => {
            let mut first = json;
            let rest = first.split_off(stall_point(&first));
            let chunks = vec![Bytes::from(first), Bytes::from(rest)];
            let now = Instant::now();
            Body::from_stream(paced(chunks, now, now, Some(pause)))
        }
    };
    let mut response = Response::new(body);
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
    // Declared even when the body is held back, as an upstream sending a known document slowly does.
    headers.insert(header::CONTENT_LENGTH, HeaderValue::from(length));
    response
}

/// Where a stalled JSON body pauses: a few bytes into the first image's base64 when there is one
/// (so a relay that holds the body until an image begins has started answering), else after 64
/// bytes.
fn stall_point(json: &[u8]) -> usize {
    const KEY: &[u8] = b"\"b64_json\":\"";
    let at = json
        .windows(KEY.len())
        .position(|window| window == KEY)
        .map_or(64, |at| at + KEY.len() + 8);
    at.min(json.len())
}

/// A JSON document cut halfway through its first image's base64 (halfway through the document when
/// it has no image), for `truncated_body`; [`json_body`] declares the shorter length.
pub fn cut_document(mut json: Vec<u8>) -> Vec<u8> {
    let start = stall_point(&json).min(json.len());
    let cut = start + (json.len() - start) / 2;
    json.truncate(cut);
    json
}

/// The frames of a stream cut halfway through its second frame (its first when it has only one),
/// for `truncated_body`: the frames before it whole, then half of it, then the end of the body.
pub fn cut_frames(mut frames: Vec<Bytes>) -> Vec<Bytes> {
    let at = usize::from(frames.len() > 1);
    frames.truncate(at + 1);
    if let Some(last) = frames.last_mut() {
        *last = last.slice(..last.len() / 2);
    }
    frames
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cut_document_ends_inside_its_first_image() {
        let json = br#"{"created":1,"data":[{"b64_json":"QUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFB"}],"usage":{"total_tokens":3}}"#;
        let cut = cut_document(json.to_vec());
        assert!(json.starts_with(&cut));
        let text = std::str::from_utf8(&cut).unwrap();
        let (_, image) = text.split_once(r#""b64_json":""#).unwrap();
        assert!(image.len() > 8 && !image.contains('"'), "{text}");
        assert!(serde_json::from_slice::<serde_json::Value>(&cut).is_err());
    }

    #[test]
    fn a_cut_stream_ends_halfway_through_its_second_frame() {
        let frames = vec![
            Bytes::from("event: a\ndata: {}\n\n"),
            Bytes::from("event: b\ndata: {\"x\":1}\n\n"),
            Bytes::from("event: c\ndata: {}\n\n"),
        ];
        let cut = cut_frames(frames.clone());
        assert_eq!(cut.len(), 2);
        assert_eq!(cut[0], frames[0]);
        assert!(frames[1].starts_with(&cut[1]) && cut[1].len() < frames[1].len());
        assert!(!cut[1].is_empty());
        let only = cut_frames(vec![Bytes::from("event: a\ndata: {}\n\n")]);
        assert_eq!(only, vec![Bytes::from("event: a\n")]);
    }

    async fn collect(stream: FrameStream) -> Vec<(Bytes, Duration)> {
        let start = Instant::now();
        stream
            .map(|frame| (frame.unwrap_or_default(), start.elapsed()))
            .collect()
            .await
    }

    #[tokio::test(start_paused = true)]
    async fn frames_are_spread_over_the_latency() {
        let start = Instant::now();
        let frames = vec![
            Bytes::from("a"),
            Bytes::from("b"),
            Bytes::from("c"),
            Bytes::from("d"),
        ];
        let sent = collect(paced(frames, start, start + Duration::from_millis(400), None)).await;
        let times: Vec<u128> = sent.iter().map(|(_, t)| t.as_millis()).collect();
        assert_eq!(times, vec![100, 200, 300, 400]);
        assert_eq!(sent[3].0, Bytes::from("d"));
    }

    #[tokio::test(start_paused = true)]
    async fn a_stall_pauses_after_the_first_frame() {
        let start = Instant::now();
        let frames = vec![Bytes::from("a"), Bytes::from("b")];
        let sent = collect(paced(frames, start, start, Some(Duration::from_secs(30)))).await;
        assert_eq!(sent[0].1.as_secs(), 0);
        assert_eq!(sent[1].1.as_secs(), 30);
        let single = collect(paced(
            vec![Bytes::from("x")],
            start,
            start,
            Some(Duration::from_secs(5)),
        ))
        .await;
        assert!(single[0].1.as_secs() >= 5);
    }
}

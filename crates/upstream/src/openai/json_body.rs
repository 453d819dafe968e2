//! A non-streaming Images answer, relayed as it arrives instead of held whole.
//!
//! The body is held only until the first image's base64 begins: by then the answer is known to be
//! a JSON object holding at least one non-empty `b64_json` string (the check of
//! [`super::check_body`]), and the rest is handed on chunk by chunk ([`Reply::JsonStream`]). The
//! rest is scanned as it passes, so a document that ends early or turns malformed ends the stream
//! with a failure instead of a clean end, and the deadline and the body size bound still apply.
//! An answer that ends before its first image begins is held whole and checked as before
//! ([`Reply::Json`]). Either way every byte is scanned once, here, and what the scan found goes
//! with the reply, so the relay records usage without a second pass.

use bytes::{Bytes, BytesMut};
use futures::StreamExt;
use futures::channel::oneshot;
use imagegate_codec::usage_scan::{ImagesResponseScanner, ResponseSummary};
use tokio::time::timeout_at;

use super::read_clock::ReadClock;
use super::{Deadline, check_scanned, find_b64_json_string};
use crate::call::Endpoint;
use crate::failure::{Failure, classify_transport};
use crate::reply::{BodyStream, EndSummary, JsonStream, Reply};

/// Where the upstream's body comes from: the HTTP response, or chunks in tests.
pub(crate) type Chunks = futures::stream::BoxStream<'static, Result<Bytes, Failure>>;

/// The body of `response` as [`Chunks`], each read bounded by `deadline`, the time the reader
/// holds the stream not counting against the upstream ([`ReadClock`]).
pub(crate) fn chunks_of(response: reqwest::Response, deadline: Deadline) -> Chunks {
    let body = response
        .bytes_stream()
        .map(|chunk| chunk.map_err(|err| classify_transport(&err)))
        .boxed();
    timed(body, deadline)
}

/// `body` with its reads bounded by `deadline` (the transport-independent part of [`chunks_of`]).
pub(crate) fn timed(body: Chunks, deadline: Deadline) -> Chunks {
    futures::stream::unfold(Some((body, ReadClock::new(deadline))), |state| async move {
        let (mut body, mut clock) = state?;
        clock.resumed();
        match timeout_at(clock.at(), body.next()).await {
            Err(_elapsed) => Some((Err(clock.failure()), None)),
            Ok(Some(Err(failure))) => Some((Err(failure), None)),
            Ok(None) => None,
            Ok(Some(Ok(chunk))) => {
                clock.handed_over();
                Some((Ok(chunk), Some((body, clock))))
            }
        }
    })
    .boxed()
}

/// What the upstream's headers said about its answer.
#[derive(Debug, Clone, Default)]
pub(crate) struct Declared {
    /// `x-request-id`.
    pub request_id: Option<String>,
    /// `content-length`.
    pub content_length: Option<u64>,
}

/// Reads an Images answer until its first image begins, and returns the rest as a stream.
pub(crate) async fn images_reply(
    mut body: Chunks,
    endpoint: Endpoint,
    max_bytes: usize,
    declared: Declared,
) -> Result<Reply, Failure> {
    let Declared {
        request_id,
        content_length,
    } = declared;
    let mut head = BytesMut::new();
    let mut scanner = ImagesResponseScanner::new();
    let mut first_image = FirstImage::default();
    loop {
        match body.next().await {
            None => {
                let body = head.freeze();
                check_scanned(endpoint, &body, &scanner)?;
                return Ok(Reply::Json {
                    body,
                    request_id,
                    summary: Some(scanner.into_summary()),
                });
            }
            Some(Err(failure)) => return Err(failure),
            Some(Ok(chunk)) => {
                if head.len().saturating_add(chunk.len()) > max_bytes {
                    return Err(too_large(max_bytes));
                }
                head.extend_from_slice(&chunk);
                scanner.push(&chunk);
                if scanner.is_malformed() {
                    return Err(Failure::protocol("the upstream answer is not a JSON object"));
                }
                if !scanner.is_complete() && first_image.began(&head, &scanner) {
                    let budget = max_bytes - head.len();
                    let (summary_sender, summary) = EndSummary::channel();
                    return Ok(Reply::JsonStream(JsonStream {
                        head: head.freeze(),
                        rest: rest(body, scanner, summary_sender, budget, max_bytes),
                        summary,
                        request_id,
                        content_length,
                        in_hand: false,
                    }));
                }
            }
        }
    }
}

/// Watches a growing head for the start of a JSON object in which an image's base64 has begun.
/// Each byte is looked at a bounded number of times, however the body is cut into chunks.
#[derive(Debug, Default)]
struct FirstImage {
    /// Whether the head's first byte that is not whitespace is `{`, once it came.
    object: Option<bool>,
    /// The whitespace before it seen so far.
    blank: usize,
    /// Where the search for a `b64_json` string goes on.
    search_from: usize,
}

impl FirstImage {
    fn began(&mut self, head: &[u8], scanner: &ImagesResponseScanner) -> bool {
        if self.object.is_none() {
            let rest = head.get(self.blank..).unwrap_or_default();
            match rest.iter().find(|b| !b.is_ascii_whitespace()) {
                Some(first) => self.object = Some(*first == b'{'),
                None => self.blank = head.len(),
            }
        }
        if self.object != Some(true) || scanner.summary().images == 0 {
            return false;
        }
        match find_b64_json_string(head, self.search_from) {
            None => true,
            Some(resume) => {
                self.search_from = resume;
                false
            }
        }
    }
}

struct Rest {
    body: Chunks,
    scanner: ImagesResponseScanner,
    /// Takes the scan's summary when the document ends cleanly.
    summary: Option<oneshot::Sender<ResponseSummary>>,
    /// Bytes the rest may still have.
    budget: usize,
    max_bytes: usize,
    done: bool,
}

/// The rest of the body, checked as it passes: the stream ends cleanly only after a complete,
/// well-formed document; otherwise its last item is the failure.
fn rest(
    body: Chunks,
    scanner: ImagesResponseScanner,
    summary: oneshot::Sender<ResponseSummary>,
    budget: usize,
    max_bytes: usize,
) -> BodyStream {
    let state = Rest {
        body,
        scanner,
        summary: Some(summary),
        budget,
        max_bytes,
        done: false,
    };
    futures::stream::unfold(state, |mut state| async move {
        if state.done {
            return None;
        }
        let item = match state.body.next().await {
            None if state.scanner.is_complete() => {
                if let Some(sender) = state.summary.take() {
                    // The receiver may be gone (the client left): nobody needs the summary then.
                    let _ = sender.send(std::mem::take(&mut state.scanner).into_summary());
                }
                return None;
            }
            None => Err(Failure::protocol(
                "the upstream answer ended before its JSON document did",
            )),
            Some(Err(failure)) => Err(failure),
            Some(Ok(chunk)) => {
                state.scanner.push(&chunk);
                if chunk.len() > state.budget {
                    Err(too_large(state.max_bytes))
                } else if state.scanner.is_malformed() {
                    Err(Failure::protocol("the upstream answer is not valid JSON"))
                } else {
                    state.budget -= chunk.len();
                    Ok(chunk)
                }
            }
        };
        state.done = item.is_err();
        Some((item, state))
    })
    .boxed()
}

fn too_large(max_bytes: usize) -> Failure {
    Failure::protocol(format!(
        "the upstream answer is larger than the {max_bytes} bytes allowed"
    ))
}

#[cfg(test)]
#[path = "json_body_tests.rs"]
mod tests;

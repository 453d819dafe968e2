//! Answering with a non-streaming Images reply as it arrives: the upstream's JSON body passes
//! through byte for byte (with the upstream's `content-length`, when it declared one), never held
//! whole, and its usage comes from the upstream crate's scan of it (every byte is scanned once,
//! there), so the usage record is complete when the document ends. The one change: a document
//! whose head names no model gets `"model"` as its first key (the interface names the model
//! used; OpenAI's Images answers do not), and its declared length grows by as much.
//!
//! The account's slot and the key's permit are freed as the body starts: the upstream has finished
//! generating by then, and a slow client must not keep an account busy. The upstream time runs
//! until the last byte arrived from the upstream. If the upstream fails mid-body, the failure is
//! recorded against the account and in the usage record, and the client's connection is cut: it
//! never receives a truncated document that ends like a complete one.
//!
//! A subscription account's answer takes the same path with its body in hand
//! ([`JsonStream::in_hand`]): the gateway built it in pieces, each image one, from the summary it
//! hands over; the relay recorded the account's success and closed the upstream time when the reply
//! came, so only the client's part runs here.
//!
//! A client that leaves before the end still owes what the upstream produced: the tokens come last
//! in the document, after the image, so the rest of the body is read (and dropped) in a task of its
//! own, and the client's record (499) carries the tokens and images all the same. Otherwise a
//! client could take the image and hang up before the usage, and never be billed.

use axum::body::Body;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use futures::StreamExt;
use imagegate_codec::usage_scan::{ImagesResponseScanner, ResponseSummary, model_key};
use imagegate_dispatch::Outcome;
use imagegate_upstream::{BodyStream, EndSummary, Failure, JsonStream};

use crate::relay::held::Held;
use crate::relay::{failure_error, outcome_of_late};
use crate::usage::UsageRecorder;

/// The client's connection is cut: the upstream failed after the body started.
#[derive(Debug, thiserror::Error)]
#[error("the upstream failed after the answer started")]
pub struct CutShort;

struct Passing {
    head: Option<Bytes>,
    rest: BodyStream,
    /// The length declared to the client, if any, and the bytes relayed so far: hyper stops
    /// polling a length-delimited body once it has that many, so the end is settled on the last
    /// chunk instead of on a final poll that never comes.
    declared: Option<u64>,
    relayed: u64,
    summary: Option<EndSummary>,
    /// The body was in memory whole when the relay began: the relay recorded the account's
    /// success then ([`JsonStream::in_hand`]).
    in_hand: bool,
    usage: Option<UsageRecorder>,
    serving: ServingAccount,
}

/// The account an answer comes from, told how the answer ended.
struct ServingAccount {
    pool: std::sync::Arc<imagegate_dispatch::Dispatcher>,
    account: imagegate_dispatch::AccountId,
    /// The answer comes from a try made after others ([`Held::later_try`]).
    later_try: bool,
}

impl ServingAccount {
    /// Tells the pool `outcome`, to its end whatever becomes of the body: a client leaving
    /// during a shared pool's round trip must neither cut it short nor leave the answer's end to
    /// be told a second time by the reading of the rest.
    fn tell(&self, outcome: Outcome) {
        let (pool, account) = (std::sync::Arc::clone(&self.pool), self.account.clone());
        super::finish_apart(async move {
            if let Err(err) = pool.record_outcome(&account, &outcome).await {
                tracing::error!(error = %err, "could not record an upstream outcome");
            }
        });
    }

    fn tell_failure(&self, failure: &Failure) {
        self.tell(outcome_of_late(failure, self.later_try));
    }
}

/// The response for a [`JsonStream`] reply, naming `model` where its head names none.
pub fn streamed_images_body(
    reply: JsonStream,
    mut usage: UsageRecorder,
    held: Held,
    model: Option<&str>,
) -> Response {
    let Held {
        lease,
        permit,
        pool,
        later_try,
    } = held;
    let (head, content_length) = match model {
        Some(model) => with_model_named(reply.head, reply.content_length, model),
        None => (reply.head, reply.content_length),
    };
    let account = lease.account().clone();
    drop(lease);
    drop(permit);
    usage.first_byte();
    let passing = Passing {
        head: Some(head),
        // Fused: a client that leaves while the end is being settled hands the rest, already
        // ended, to `read_abandoned`, which polls it again.
        rest: reply.rest.fuse().boxed(),
        declared: content_length,
        relayed: 0,
        summary: Some(reply.summary),
        in_hand: reply.in_hand,
        usage: Some(usage),
        serving: ServingAccount {
            pool,
            account,
            later_try,
        },
    };
    let body = futures::stream::unfold(Some(passing), |state| async move {
        let mut passing = state?;
        let next = match passing.head.take() {
            Some(head) => Some(Ok(head)),
            None => passing.rest.next().await,
        };
        let chunk = match next {
            Some(Ok(chunk)) => chunk,
            end => {
                return match passing.settle(end) {
                    Ok(()) => None,
                    Err(cut) => Some((Err(cut), None)),
                };
            }
        };
        passing.relayed = passing.relayed.saturating_add(chunk.len() as u64);
        match passing.declared {
            // The last declared byte: the upstream's body must end here, cleanly.
            Some(declared) if passing.relayed >= declared => {
                let end = if passing.relayed > declared {
                    Some(Ok(Bytes::new()))
                } else {
                    passing.rest.next().await
                };
                match passing.settle(end) {
                    Ok(()) => Some((Ok(chunk), None)),
                    Err(cut) => Some((Err(cut), None)),
                }
            }
            _ => Some((Ok(chunk), Some(passing))),
        }
    });
    let body = crate::http::in_span::in_current_span(body);
    let mut response = (StatusCode::OK, Body::from_stream(body)).into_response();
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
    // The bytes pass unchanged, so the upstream's length holds: the client reads a
    // length-delimited body (and knows its size up front). A body cut short still ends in a cut
    // connection, never in a shorter document.
    if let Some(length) = content_length {
        headers.insert(header::CONTENT_LENGTH, HeaderValue::from(length));
    }
    response
}

/// `head` (and the declared length) with `"model"` as the document's first key, when it names
/// no model before its images. Only the head is looked at: an upstream naming the model after
/// the images would have the key twice, its own last (OpenAI's Images API names none).
fn with_model_named(head: Bytes, content_length: Option<u64>, model: &str) -> (Bytes, Option<u64>) {
    let mut scanner = ImagesResponseScanner::new();
    scanner.push(&head);
    if scanner.summary().names_model || scanner.is_malformed() {
        return (head, content_length);
    }
    let Some(key) = model_key(&head, model) else {
        return (head, content_length);
    };
    let mut named = Vec::with_capacity(head.len() + key.bytes.len());
    named.extend_from_slice(&head[..key.at]);
    named.extend_from_slice(&key.bytes);
    named.extend_from_slice(&head[key.at..]);
    let added = key.bytes.len() as u64;
    (Bytes::from(named), content_length.map(|length| length + added))
}

impl Passing {
    /// Settles the answer on what the upstream's body gave where it had to end: nothing (a clean
    /// end: the usage is recorded), more bytes than declared, or a failure (both cut the client).
    /// Nothing here waits: a body dropped while the end is settled would be taken for a client
    /// that left, and its end told twice.
    fn settle(&mut self, end: Option<Result<Bytes, Failure>>) -> Result<(), CutShort> {
        match end {
            None => {
                self.completed();
                Ok(())
            }
            Some(Ok(_)) => {
                let failure = Failure::protocol("the upstream answer is longer than it declared");
                self.failed(&failure);
                Err(CutShort)
            }
            Some(Err(failure)) => {
                self.failed(&failure);
                Err(CutShort)
            }
        }
    }

    /// Records a failure after the start: on the account, and as the request's outcome.
    fn failed(&mut self, failure: &Failure) {
        tracing::warn!(kind = ?failure.kind, "upstream failed in the middle of a JSON answer");
        self.serving.tell_failure(failure);
        if let Some(mut usage) = self.usage.take() {
            usage.upstream_closed();
            let error = failure_error(failure).api;
            usage.finish(error.status(), error.code());
        }
    }

    /// Records the account's success (unless it was recorded when the body, in hand, began) and
    /// completes the usage record once the document ended.
    fn completed(&mut self) {
        if !self.in_hand {
            self.serving.tell(Outcome::Success);
        }
        let Some(mut usage) = self.usage.take() else {
            return;
        };
        usage.upstream_closed();
        let summary = self
            .summary
            .as_mut()
            .and_then(EndSummary::take)
            .unwrap_or_else(|| {
                // The upstream crate hands the summary over before the clean end it follows.
                tracing::warn!("no usage summary came with a complete Images answer");
                ResponseSummary::default()
            });
        record_summary(&mut usage, &summary);
        usage.finish(200, None);
    }
}

impl Drop for Passing {
    /// The client left before the end of the document: the rest is read for its usage.
    fn drop(&mut self) {
        let Some(mut usage) = self.usage.take() else {
            return;
        };
        usage.client_left();
        let (Ok(runtime), Some(summary)) = (tokio::runtime::Handle::try_current(), self.summary.take())
        else {
            return;
        };
        let rest = std::mem::replace(&mut self.rest, futures::stream::empty().boxed());
        let serving = ServingAccount {
            pool: std::sync::Arc::clone(&self.serving.pool),
            account: self.serving.account.clone(),
            later_try: self.serving.later_try,
        };
        // In the request's span: the body is dropped inside it (`http::in_span`).
        runtime.spawn(tracing::Instrument::in_current_span(read_abandoned(
            rest,
            summary,
            usage,
            serving,
            self.in_hand,
        )));
    }
}

/// Reads the rest of an answer whose client left, and records what the upstream produced (the
/// record keeps the client's status) and how the answer ended, on its account, as a client still
/// reading would have (a success only when not told already, `success_told`: the body was in
/// hand). The upstream's own deadline bounds the wait.
async fn read_abandoned(
    mut rest: BodyStream,
    mut summary: EndSummary,
    mut usage: UsageRecorder,
    serving: ServingAccount,
    success_told: bool,
) {
    let read_to_the_end = async {
        loop {
            match rest.next().await {
                Some(Ok(_)) => {}
                Some(Err(failure)) => break Some(failure),
                None => break None,
            }
        }
    };
    let failure = tokio::select! {
        failure = read_to_the_end => failure,
        () = usage.until_abandoned() => return,
    };
    usage.upstream_closed();
    match &failure {
        None if success_told => {}
        None => serving.tell(Outcome::Success),
        Some(failure) => serving.tell_failure(failure),
    }
    if let Some(summary) = summary.take() {
        record_summary(&mut usage, &summary);
    }
}

fn record_summary(usage: &mut UsageRecorder, summary: &ResponseSummary) {
    usage.produced(
        summary.size.as_deref(),
        summary.quality.as_deref(),
        summary.output_format.as_deref(),
        u32::try_from(summary.images).unwrap_or(u32::MAX),
    );
    if let Some(tokens) = &summary.usage {
        usage.usage(tokens);
    }
}

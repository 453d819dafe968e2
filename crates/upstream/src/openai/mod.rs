//! The OpenAI wire: `POST {base_url}/images/generations`, `/images/edits` and `/responses` with
//! `Authorization: Bearer <credential>`. Used for API-key accounts and for the simulator.
//!
//! The deadline covers the whole call: connecting, the answer's headers, and reading the body (for
//! a stream: every event up to the last). The connect timeout of [`crate::UpstreamConfig`] is a
//! separate, shorter bound whose expiry is [`crate::FailureKind::Transient`].

mod edits;
mod images;
mod json_body;
pub(crate) mod read_clock;
mod responses;
pub(crate) mod stream;

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use bytes::{Bytes, BytesMut};
use reqwest::header::{ACCEPT, AUTHORIZATION, CONTENT_LENGTH, CONTENT_TYPE, HeaderMap, HeaderValue};
use tokio::time::{Instant, timeout_at};

use crate::call::{Endpoint, UpstreamCall};
use crate::client::UpstreamConfig;
use crate::failure::{Failure, classify_response, classify_transport};
use crate::reply::Reply;
use crate::target::AccountTarget;

/// What goes in the request body.
pub(crate) enum RequestBody {
    /// `application/json`.
    Json(Bytes),
    /// `multipart/form-data`.
    Multipart(reqwest::multipart::Form),
    /// `application/json` made as it is sent, `length` bytes long.
    JsonStream {
        /// The bytes.
        body: reqwest::Body,
        /// How many.
        length: u64,
    },
}

/// One call over the OpenAI wire, authorized with `Authorization: Bearer <credential>`.
pub(crate) async fn call(
    client: &reqwest::Client,
    config: &UpstreamConfig,
    target: &AccountTarget,
    call: UpstreamCall<'_>,
    deadline: Duration,
) -> Result<Reply, Failure> {
    let deadline = Deadline::from_now(deadline);
    let (shape, body) = prepare(call)?;
    let auth = bearer_headers(target.credential.expose())?;
    let outgoing = Outgoing {
        target,
        auth: &auth,
        endpoint: shape.endpoint,
        body,
        is_stream: shape.is_stream,
        deadline,
    };
    let response = send(client, config, outgoing).await?;
    finish(response, shape, config, deadline).await
}

/// What a call expects back: the endpoint, whether it streams, and how many final events end the
/// stream.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Shape {
    /// The endpoint called.
    pub(crate) endpoint: Endpoint,
    /// Whether the answer is an event stream.
    pub(crate) is_stream: bool,
    /// How many final events a stream carries (`n` for images, 1 for a response).
    pub(crate) finals_expected: usize,
}

/// The request body of `call` and what its answer looks like.
pub(crate) fn prepare(call: UpstreamCall<'_>) -> Result<(Shape, RequestBody), Failure> {
    let shape = Shape {
        endpoint: call.endpoint(),
        is_stream: call.is_stream(),
        finals_expected: match call {
            UpstreamCall::Generate { params } | UpstreamCall::Edit { params, .. } => usize::from(params.n),
            UpstreamCall::Respond { .. } => 1,
        },
    };
    let body = match call {
        UpstreamCall::Generate { params } => RequestBody::Json(images::generation_body(params)?),
        UpstreamCall::Edit { params, images, mask } => {
            RequestBody::Multipart(edits::edit_form(params, images, mask)?)
        }
        UpstreamCall::Respond { body, .. } => RequestBody::Json(responses::responses_body(body)?),
    };
    Ok((shape, body))
}

/// Turns a successful answer into the [`Reply`]: the relayed events of a stream, an Images answer
/// relayed from the start of its first image (see [`json_body`]), or the checked JSON body.
pub(crate) async fn finish(
    response: reqwest::Response,
    shape: Shape,
    config: &UpstreamConfig,
    deadline: Deadline,
) -> Result<Reply, Failure> {
    if shape.is_stream {
        return Ok(Reply::Events(stream::relay(
            response,
            shape.endpoint,
            shape.finals_expected,
            deadline,
        )));
    }
    let status = response.status().as_u16();
    let request_id = response
        .headers()
        .get("x-request-id")
        .and_then(|value| value.to_str().ok())
        .map(str::to_owned);
    if shape.endpoint.is_images() {
        if response
            .content_length()
            .and_then(|len| usize::try_from(len).ok())
            .is_some_and(|len| len > config.max_body_bytes)
        {
            return Err(Failure::protocol(format!(
                "the upstream answer is larger than {} bytes",
                config.max_body_bytes
            )));
        }
        let declared = json_body::Declared {
            request_id,
            content_length: response.content_length(),
        };
        let chunks = json_body::chunks_of(response, deadline);
        return json_body::images_reply(chunks, shape.endpoint, config.max_body_bytes, declared)
            .await
            .map_err(|failure| failure.with_status(status));
    }
    let body = read_body(response, config.max_body_bytes, deadline).await?;
    check_body(shape.endpoint, &body).map_err(|failure| failure.with_status(status))?;
    Ok(Reply::Json {
        body,
        request_id,
        summary: None,
    })
}

/// `Authorization: Bearer <token>`, marked sensitive (never shown by the HTTP client's `Debug`).
pub(crate) fn bearer_headers(token: &str) -> Result<HeaderMap, Failure> {
    let mut headers = HeaderMap::new();
    let mut value = HeaderValue::from_str(&format!("Bearer {token}"))
        .map_err(|_| Failure::protocol("the credential holds characters that cannot be sent in a header"))?;
    value.set_sensitive(true);
    headers.insert(AUTHORIZATION, value);
    Ok(headers)
}

/// The deadline of a call: the instant it passes and the budget it was given (for messages).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Deadline {
    /// When it passes.
    pub(crate) at: Instant,
    /// The whole budget.
    pub(crate) budget: Duration,
}

impl Deadline {
    /// A deadline `budget` from now.
    pub(crate) fn from_now(budget: Duration) -> Self {
        Self {
            at: Instant::now() + budget,
            budget,
        }
    }

    /// The timeout failure.
    pub(crate) fn failure(self) -> Failure {
        Failure::timeout(self.budget)
    }
}

/// One request to send.
pub(crate) struct Outgoing<'a> {
    /// The account called.
    pub(crate) target: &'a AccountTarget,
    /// The authorization headers (at least `Authorization`).
    pub(crate) auth: &'a HeaderMap,
    /// The endpoint.
    pub(crate) endpoint: Endpoint,
    /// The body.
    pub(crate) body: RequestBody,
    /// Whether an event stream is asked for.
    pub(crate) is_stream: bool,
    /// The call's deadline.
    pub(crate) deadline: Deadline,
}

/// Sends one request and returns the answer when its status is a success; an error answer is read
/// (up to the configured bound) and classified. A stream request answered with JSON is a
/// [`crate::FailureKind::Protocol`] failure.
pub(crate) async fn send(
    client: &reqwest::Client,
    config: &UpstreamConfig,
    outgoing: Outgoing<'_>,
) -> Result<reqwest::Response, Failure> {
    let Outgoing {
        target,
        auth,
        endpoint,
        body,
        is_stream,
        deadline,
    } = outgoing;
    let started = Instant::now();
    let accept = if is_stream {
        "text/event-stream"
    } else {
        "application/json"
    };
    let url = target.url(endpoint.path());
    let request = match crate::url_cache::parsed(&url) {
        Some(parsed) => client.post(parsed),
        None => client.post(url),
    }
    .headers(auth.clone())
    .header(ACCEPT, accept);
    let request = match body {
        RequestBody::Json(bytes) => request.header(CONTENT_TYPE, "application/json").body(bytes),
        RequestBody::Multipart(form) => request.multipart(form),
        RequestBody::JsonStream { body, length } => request
            .header(CONTENT_TYPE, "application/json")
            .header(CONTENT_LENGTH, length)
            .body(body),
    };
    let response = match timeout_at(deadline.at, request.send()).await {
        Err(_elapsed) => return Err(deadline.failure()),
        Ok(Err(err)) => return Err(classify_transport(&err)),
        Ok(Ok(response)) => response,
    };
    let status = response.status().as_u16();
    tracing::debug!(
        account_id = target.account_id,
        kind = target.kind.as_str(),
        endpoint = endpoint.path(),
        status,
        elapsed_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX),
        "upstream answered"
    );
    if !response.status().is_success() {
        let headers = response.headers().clone();
        let body = read_error_body(response, config.max_error_body_bytes, deadline).await?;
        return Err(classify_response(status, &headers, &body, now_unix_ms()));
    }
    if is_stream && content_type_is_json(&response) {
        let headers = response.headers().clone();
        let body = read_error_body(response, config.max_error_body_bytes, deadline).await?;
        return Err(json_instead_of_stream(status, &headers, &body));
    }
    Ok(response)
}

/// The failure a JSON answer to a stream request stands for: the error it carries, as an error
/// event of the stream would (a relay in front of the upstream that reports a rate limit or a
/// refusal with a 200, say), else an unusable answer.
fn json_instead_of_stream(status: u16, headers: &HeaderMap, body: &[u8]) -> Failure {
    let unusable = || Failure::protocol("the upstream answered JSON to a stream request").with_status(status);
    let Ok(serde_json::Value::Object(mut answer)) = serde_json::from_slice(body) else {
        return unusable();
    };
    match answer.remove("error") {
        Some(serde_json::Value::Object(error)) => {
            crate::failure::classify_error_object(None, &error, headers, now_unix_ms()).with_status(status)
        }
        _ => unusable(),
    }
}

/// Reads a success body whole, failing past `max_bytes` or the deadline.
async fn read_body(
    mut response: reqwest::Response,
    max_bytes: usize,
    deadline: Deadline,
) -> Result<Bytes, Failure> {
    let too_large = || Failure::protocol(format!("the upstream answer is larger than {max_bytes} bytes"));
    let expected = response
        .content_length()
        .and_then(|len| usize::try_from(len).ok());
    if expected.is_some_and(|len| len > max_bytes) {
        return Err(too_large());
    }
    let mut body = BytesMut::with_capacity(expected.unwrap_or(64 * 1024));
    loop {
        match timeout_at(deadline.at, response.chunk()).await {
            Err(_elapsed) => return Err(deadline.failure()),
            Ok(Err(err)) => return Err(classify_transport(&err)),
            Ok(Ok(None)) => return Ok(body.freeze()),
            Ok(Ok(Some(chunk))) => {
                if body.len().saturating_add(chunk.len()) > max_bytes {
                    return Err(too_large());
                }
                body.extend_from_slice(&chunk);
            }
        }
    }
}

/// Reads at most `max_bytes` of an error body; a body cut short by the connection is classified
/// with what arrived.
async fn read_error_body(
    mut response: reqwest::Response,
    max_bytes: usize,
    deadline: Deadline,
) -> Result<Bytes, Failure> {
    let mut body = BytesMut::new();
    while body.len() < max_bytes {
        match timeout_at(deadline.at, response.chunk()).await {
            Err(_elapsed) => return Err(deadline.failure()),
            Ok(Err(_) | Ok(None)) => break,
            Ok(Ok(Some(chunk))) => {
                let room = max_bytes - body.len();
                body.extend_from_slice(chunk.get(..room.min(chunk.len())).unwrap_or_default());
            }
        }
    }
    Ok(body.freeze())
}

/// Checks a non-streaming success body: an Images answer must be a JSON object holding at least one
/// `b64_json` string ([`crate::FailureKind::NoImage`] otherwise); a Responses answer a JSON object.
pub(crate) fn check_body(endpoint: Endpoint, body: &[u8]) -> Result<(), Failure> {
    let mut scanner = imagegate_codec::usage_scan::ImagesResponseScanner::new();
    scanner.push(body);
    check_scanned(endpoint, body, &scanner)
}

/// [`check_body`] for a body `scanner` has already read whole.
pub(crate) fn check_scanned(
    endpoint: Endpoint,
    body: &[u8],
    scanner: &imagegate_codec::usage_scan::ImagesResponseScanner,
) -> Result<(), Failure> {
    let is_object = body.iter().find(|b| !b.is_ascii_whitespace()) == Some(&b'{');
    if !scanner.is_complete() || !is_object {
        return Err(Failure::protocol("the upstream answer is not a JSON object"));
    }
    if endpoint.is_images() && (scanner.summary().images == 0 || !has_b64_json_string(body)) {
        return Err(Failure::no_image());
    }
    Ok(())
}

/// Whether `"b64_json"` is followed by `:` and a non-empty string somewhere in `body`.
fn has_b64_json_string(body: &[u8]) -> bool {
    find_b64_json_string(body, 0).is_none()
}

const B64_JSON_KEY: &[u8] = b"\"b64_json\"";

/// Looks for `"b64_json"` followed by `:` and a non-empty string in `body`, from `from` on:
/// `None` when one is there, or else where a search of the same body grown by more bytes must
/// start again (the first key whose value the end cut off, or the last bytes that could begin a
/// key), so a body searched as it arrives is searched once, not once per chunk.
fn find_b64_json_string(body: &[u8], from: usize) -> Option<usize> {
    let tail = body.get(from..).unwrap_or_default();
    for at in memchr::memmem::find_iter(tail, B64_JSON_KEY) {
        let value = tail.get(at + B64_JSON_KEY.len()..).unwrap_or_default();
        match string_begins(value) {
            Some(true) => return None,
            Some(false) => {}
            None => return Some(from + at),
        }
    }
    Some(body.len().saturating_sub(B64_JSON_KEY.len() - 1).max(from))
}

/// Whether `rest` (what follows a key) is `:` and a non-empty string; `None` when it ends first.
fn string_begins(rest: &[u8]) -> Option<bool> {
    let mut rest = rest.iter().skip_while(|b| b.is_ascii_whitespace());
    if rest.next()? != &b':' {
        return Some(false);
    }
    let mut rest = rest.skip_while(|b| b.is_ascii_whitespace());
    if rest.next()? != &b'"' {
        return Some(false);
    }
    Some(*rest.next()? != b'"')
}

fn content_type_is_json(response: &reqwest::Response) -> bool {
    response
        .headers()
        .get(CONTENT_TYPE)
        .and_then(|value| value.to_str().ok())
        .is_some_and(|value| value.to_ascii_lowercase().contains("json"))
}

/// Unix time in milliseconds.
pub(crate) fn now_unix_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::failure::FailureKind;

    #[test]
    fn images_body_needs_a_b64_json_string() {
        let ok = br#"{"created":1,"data":[{"b64_json" : "iVBORw0KGgo="}]}"#;
        assert_eq!(check_body(Endpoint::Generations, ok), Ok(()));
        for body in [
            &br#"{"created":1,"data":[]}"#[..],
            br#"{"created":1,"data":[{"url":"https://x"}]}"#,
            br#"{"created":1,"data":[{"b64_json":null}]}"#,
            br#"{"created":1,"data":[{"b64_json":""}]}"#,
            br#"{"created":1,"note":"\"b64_json\": \"x\"","data":[{}]}"#,
        ] {
            let failure = check_body(Endpoint::Edits, body).unwrap_err();
            assert_eq!(
                failure.kind,
                FailureKind::NoImage,
                "{}",
                String::from_utf8_lossy(body)
            );
        }
    }

    #[test]
    fn a_growing_body_is_searched_once_for_its_b64_json_string() {
        let body = br#"{"data":[{"revised_prompt":"a \"b64_json\" key","b64_json" :  "iVBOR"}]}"#;
        // Grown one byte at a time from where the last search stopped, the search finds the
        // string exactly when the whole body does, and never starts again from the beginning.
        let mut resume = 0;
        let mut found_at = None;
        for end in 0..=body.len() {
            let grown = &body[..end];
            match find_b64_json_string(grown, resume) {
                None => {
                    found_at = Some(end);
                    break;
                }
                Some(next) => {
                    assert!(next >= resume, "{next} < {resume}");
                    assert!(!has_b64_json_string(grown), "{end}");
                    resume = next;
                }
            }
        }
        let first = (0..=body.len()).find(|&end| has_b64_json_string(&body[..end]));
        assert_eq!(found_at, first);
        assert!(first.is_some());

        // A long string without the key: the next search starts near the end.
        let long = format!(r#"{{"data":[{{"x":"{}"#, "a".repeat(10_000));
        let resume = find_b64_json_string(long.as_bytes(), 0).unwrap();
        assert_eq!(resume, long.len() - (B64_JSON_KEY.len() - 1));
        // A key whose value the end cut off: the search resumes at that key.
        let cut = br#"{"data":[{"b64_json": "#;
        assert_eq!(find_b64_json_string(cut, 0), Some(10));
    }

    #[test]
    fn bodies_that_are_not_json_objects_are_protocol_failures() {
        for body in [
            &b"<html></html>"[..],
            b"[1,2]",
            br#"{"data":[{"b64_json":"x"}]"#,
            b"",
        ] {
            let failure = check_body(Endpoint::Generations, body).unwrap_err();
            assert_eq!(
                failure.kind,
                FailureKind::Protocol,
                "{}",
                String::from_utf8_lossy(body)
            );
        }
        assert_eq!(
            check_body(Endpoint::Responses, br#"{"id":"resp_1","output":[]}"#),
            Ok(())
        );
        assert_eq!(
            check_body(Endpoint::Responses, b"[]").unwrap_err().kind,
            FailureKind::Protocol
        );
    }
}

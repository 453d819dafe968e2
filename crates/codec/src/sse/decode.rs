//! Incremental Server-Sent Events decoder (WHATWG "event stream interpretation").

use std::collections::VecDeque;

use bytes::Bytes;
use futures::{Stream, StreamExt};

/// Default bound on the bytes one event may hold (line buffer plus data buffer).
///
/// A final image event carries the whole base64 image on one `data:` line, so the bound is generous.
pub const DEFAULT_MAX_EVENT_BYTES: usize = 128 * 1024 * 1024;

/// One dispatched event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SseEvent {
    /// The `event:` field, `None` when the event had no (or an empty) event type.
    pub event: Option<String>,
    /// The `data:` lines joined with `\n`.
    pub data: String,
    /// The last event id seen on the stream (ids persist across events, as WHATWG says).
    pub id: Option<String>,
}

/// What the decoder yields when it streams large events ([`SseDecoder::stream_events_over`]): whole
/// events, or a large event in pieces, so that its data is never held whole.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SseItem {
    /// A whole event.
    Event(SseEvent),
    /// A large event began. It has an `event:` type (never `error`), and its data follows.
    Opened {
        /// The `event:` field.
        event: String,
        /// The last event id seen on the stream.
        id: Option<String>,
    },
    /// The next bytes of the open event's data: its `data:` lines joined with `\n`, as in
    /// [`SseEvent::data`] (the bytes as received, not checked as UTF-8).
    Data(Bytes),
    /// The open event ended.
    Closed,
}

/// Why decoding stopped.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum SseError {
    /// One event grew beyond the configured bound.
    #[error("server-sent event larger than {limit} bytes")]
    EventTooLarge {
        /// The bound in bytes.
        limit: usize,
    },
    /// An `event:` line changed the type of an event already yielded in pieces under another.
    #[error("an event's type changed after its data began to be relayed")]
    TypeChangedInOpenEvent,
}

/// Longest `id:` value kept. The id is copied into every later event, so a longer one (no real
/// stream sends one) is ignored like an id with a NUL, rather than multiplied.
pub const MAX_ID_BYTES: usize = 1024;

/// Decoder state: feed chunks with [`SseDecoder::push`], take events with [`SseDecoder::pop`].
///
/// Lines may end in CR, LF or CRLF, and a chunk may end anywhere, including between CR and LF.
/// Lines starting with `:` are comments. An event is dispatched on a blank line; an event whose
/// data is empty is dropped (WHATWG). The text is decoded as UTF-8 with replacement characters.
///
/// A `data:` line spanning chunks (an image's base64) is copied once: as soon as its field name is
/// in, the rest of its value goes straight to the event's data, and the event's text is checked
/// once when it is dispatched.
#[derive(Debug)]
pub struct SseDecoder {
    /// The start of a line whose end has not arrived (unless it is a `data` line, see `in_data_line`).
    line: Vec<u8>,
    /// The unfinished line is a `data` line: its value is being appended to `data`.
    in_data_line: bool,
    skip_lf: bool,
    at_stream_start: bool,
    event_type: String,
    /// The event's data lines so far, each followed by `\n`, as received (UTF-8 checked at dispatch).
    data: Vec<u8>,
    has_data: bool,
    last_id: Option<String>,
    retry_ms: Option<u64>,
    comments: u64,
    ready: VecDeque<SseItem>,
    max_event_bytes: usize,
    /// Events with a type whose data grows past this many bytes are yielded in pieces.
    stream_over: Option<usize>,
    /// An event is being yielded in pieces.
    open: bool,
    /// Data bytes of the open event already yielded (they count against `max_event_bytes`).
    passed: usize,
}

impl Default for SseDecoder {
    fn default() -> Self {
        Self::new()
    }
}

impl SseDecoder {
    /// A decoder with [`DEFAULT_MAX_EVENT_BYTES`].
    pub fn new() -> Self {
        Self::with_max_event_bytes(DEFAULT_MAX_EVENT_BYTES)
    }

    /// A decoder that fails once one event holds more than `max_event_bytes`.
    pub fn with_max_event_bytes(max_event_bytes: usize) -> Self {
        Self {
            line: Vec::new(),
            in_data_line: false,
            skip_lf: false,
            at_stream_start: true,
            event_type: String::new(),
            data: Vec::new(),
            has_data: false,
            last_id: None,
            retry_ms: None,
            comments: 0,
            ready: VecDeque::new(),
            max_event_bytes,
            stream_over: None,
            open: false,
            passed: 0,
        }
    }

    /// Yields an event in pieces ([`SseItem::Opened`], [`SseItem::Data`], [`SseItem::Closed`])
    /// once its data passes `bytes`, if an `event:` line gave it a type other than `error`: its
    /// data is then never held whole. Take items with [`Self::pop_item`].
    #[must_use]
    pub fn stream_events_over(mut self, bytes: usize) -> Self {
        self.stream_over = Some(bytes);
        self
    }

    /// Feeds the next chunk of the stream; complete events become available through [`Self::pop`].
    pub fn push(&mut self, chunk: &[u8]) -> Result<(), SseError> {
        let mut rest = chunk;
        if self.skip_lf && !rest.is_empty() {
            self.skip_lf = false;
            if let Some(after) = rest.strip_prefix(b"\n") {
                rest = after;
            }
        }
        while let Some(pos) = memchr::memchr2(b'\n', b'\r', rest) {
            let (head, tail) = rest.split_at(pos);
            let is_cr = tail.first() == Some(&b'\r');
            let mut after = tail.get(1..).unwrap_or_default();
            if is_cr {
                if after.is_empty() {
                    self.skip_lf = true;
                } else if let Some(stripped) = after.strip_prefix(b"\n") {
                    after = stripped;
                }
            }
            if self.in_data_line {
                self.in_data_line = false;
                self.data.extend_from_slice(head);
                self.end_data_line()?;
            } else if self.line.is_empty() {
                self.process_line(head)?;
            } else {
                self.line.extend_from_slice(head);
                let line = std::mem::take(&mut self.line);
                self.process_line(&line)?;
            }
            rest = after;
        }
        if !rest.is_empty() {
            if self.in_data_line {
                self.data.extend_from_slice(rest);
            } else {
                self.line.extend_from_slice(rest);
                self.start_data_line();
            }
        }
        self.pass_open_data();
        self.check_size()
    }

    /// Hands the data of a large event on as a piece, opening the event first if it just grew
    /// large. A trailing `\n` is kept back: it is the event's last and is dropped, if the event
    /// ends there.
    fn pass_open_data(&mut self) {
        if !self.open {
            let Some(over) = self.stream_over else { return };
            if self.data.len() <= over || self.event_type.is_empty() || self.event_type == "error" {
                return;
            }
            self.open = true;
            self.ready.push_back(SseItem::Opened {
                event: self.event_type.clone(),
                id: self.last_id.clone(),
            });
        }
        let kept = usize::from(self.data.last() == Some(&b'\n'));
        let piece = self.data.len() - kept;
        if piece == 0 {
            return;
        }
        let rest = self.data.split_off(piece);
        let piece = std::mem::replace(&mut self.data, rest);
        self.passed = self.passed.saturating_add(piece.len());
        self.ready.push_back(SseItem::Data(Bytes::from(piece)));
    }

    /// Moves an unfinished line known to be a `data` line into the event's data. Undecided until
    /// the byte after `data:` is in (an optional space is not part of the value); the stream's first
    /// line (maybe behind a byte order mark) always takes the general path.
    fn start_data_line(&mut self) {
        const FIELD: &[u8] = b"data:";
        if self.at_stream_start || !self.line.starts_with(FIELD) {
            return;
        }
        let value = match self.line.get(FIELD.len()) {
            None => return,
            Some(b' ') => FIELD.len() + 1,
            Some(_) => FIELD.len(),
        };
        self.data
            .extend_from_slice(self.line.get(value..).unwrap_or_default());
        self.line.clear();
        self.in_data_line = true;
    }

    /// A `data` line is complete: it ends with `\n` in the event's data.
    fn end_data_line(&mut self) -> Result<(), SseError> {
        self.data.push(b'\n');
        self.has_data = true;
        self.check_size()
    }

    /// The next complete event, if any. A decoder that streams large events yields them only
    /// through [`Self::pop_item`]; this skips their pieces.
    pub fn pop(&mut self) -> Option<SseEvent> {
        while let Some(item) = self.ready.pop_front() {
            if let SseItem::Event(event) = item {
                return Some(event);
            }
        }
        None
    }

    /// The next item: a complete event, or a piece of a large one.
    pub fn pop_item(&mut self) -> Option<SseItem> {
        self.ready.pop_front()
    }

    /// True when no partial line or undispatched event is pending: a stream that ends while this is
    /// false was cut in the middle of an event (which WHATWG discards).
    pub fn is_idle(&self) -> bool {
        self.line.is_empty()
            && !self.in_data_line
            && !self.has_data
            && !self.open
            && self.event_type.is_empty()
    }

    /// The last `retry:` value seen, in milliseconds.
    pub fn retry_ms(&self) -> Option<u64> {
        self.retry_ms
    }

    /// How many comment lines (e.g. `: keepalive`) were seen.
    pub fn comments_seen(&self) -> u64 {
        self.comments
    }

    fn check_size(&self) -> Result<(), SseError> {
        if self.line.len() + self.data.len() + self.passed > self.max_event_bytes {
            return Err(SseError::EventTooLarge {
                limit: self.max_event_bytes,
            });
        }
        Ok(())
    }

    fn process_line(&mut self, raw: &[u8]) -> Result<(), SseError> {
        let mut raw = raw;
        if self.at_stream_start {
            self.at_stream_start = false;
            if let Some(stripped) = raw.strip_prefix("\u{feff}".as_bytes()) {
                raw = stripped;
            }
        }
        if raw.is_empty() {
            self.dispatch();
            return Ok(());
        }
        if raw.first() == Some(&b':') {
            self.comments += 1;
            return Ok(());
        }
        let (name, value) = match memchr::memchr(b':', raw) {
            Some(colon) => {
                let (name, value) = raw.split_at(colon);
                let value = value.get(1..).unwrap_or_default();
                (name, value.strip_prefix(b" ").unwrap_or(value))
            }
            None => (raw, &b""[..]),
        };
        if name == b"data" {
            self.data.extend_from_slice(value);
            return self.end_data_line();
        }
        let value = text(value);
        match name {
            b"event" if self.open && value != self.event_type => {
                return Err(SseError::TypeChangedInOpenEvent);
            }
            b"event" => self.event_type = value.into_owned(),
            b"id" if !value.contains('\0') && value.len() <= MAX_ID_BYTES => {
                self.last_id = Some(value.into_owned());
            }
            b"retry" if !value.is_empty() && value.bytes().all(|b| b.is_ascii_digit()) => {
                self.retry_ms = value.parse().ok();
            }
            _ => {}
        }
        Ok(())
    }

    fn dispatch(&mut self) {
        if self.open {
            self.pass_open_data();
            self.data.clear();
            self.event_type.clear();
            self.has_data = false;
            self.open = false;
            self.passed = 0;
            self.ready.push_back(SseItem::Closed);
            return;
        }
        let event_type = std::mem::take(&mut self.event_type);
        if !self.has_data {
            return;
        }
        self.has_data = false;
        let mut data = std::mem::take(&mut self.data);
        if data.last() == Some(&b'\n') {
            data.pop();
        }
        let data = match String::from_utf8(data) {
            Ok(data) => data,
            Err(invalid) => String::from_utf8_lossy(invalid.as_bytes()).into_owned(),
        };
        self.ready.push_back(SseItem::Event(SseEvent {
            event: (!event_type.is_empty()).then_some(event_type),
            data,
            id: self.last_id.clone(),
        }));
    }
}

/// `bytes` as text: borrowed when valid UTF-8 (nearly always, checked by the fast validator),
/// with replacement characters otherwise.
fn text(bytes: &[u8]) -> std::borrow::Cow<'_, str> {
    match std::str::from_utf8(bytes) {
        Ok(text) => std::borrow::Cow::Borrowed(text),
        Err(_) => String::from_utf8_lossy(bytes),
    }
}

/// Error of [`decode_stream`]: the body stream failed or an event was too large.
#[derive(Debug, thiserror::Error)]
pub enum SseStreamError<E> {
    /// The underlying byte stream failed.
    #[error("reading the event stream failed: {0}")]
    Body(E),
    /// The decoder refused the input.
    #[error(transparent)]
    Decode(#[from] SseError),
}

/// Decodes a stream of body chunks into events (runtime-agnostic). A trailing event that is not
/// ended by a blank line is discarded, as WHATWG says.
pub fn decode_stream<S, E>(body: S) -> impl Stream<Item = Result<SseEvent, SseStreamError<E>>>
where
    S: Stream<Item = Result<Bytes, E>> + Unpin,
{
    let state = (body, SseDecoder::new(), false);
    futures::stream::unfold(state, |(mut body, mut decoder, mut done)| async move {
        loop {
            if let Some(event) = decoder.pop() {
                return Some((Ok(event), (body, decoder, done)));
            }
            if done {
                return None;
            }
            match body.next().await {
                Some(Ok(chunk)) => {
                    if let Err(err) = decoder.push(&chunk) {
                        return Some((Err(err.into()), (body, decoder, true)));
                    }
                }
                Some(Err(err)) => return Some((Err(SseStreamError::Body(err)), (body, decoder, true))),
                None => done = true,
            }
        }
    })
}

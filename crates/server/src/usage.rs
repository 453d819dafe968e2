//! One usage record per request, success or failure, written even when the client went away.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use imagegate_domain::{ImageParams, ImageSize, SizeClass, Usage};
use imagegate_store::{AuthContext, Timestamp, TokenCounts, UsageRecord, UsageSink};
use imagegate_upstream::{Spent, SpentSoFar};

use crate::completed_usage::CompletedUsage;
use crate::in_flight::Entered;
use crate::metrics::{InFlight, Metrics, RequestObservation};

/// A usage record being filled in while the request runs. Dropping it unfinished records the
/// request as abandoned by the client (status 499), or by the shutdown (503), so no request goes
/// unrecorded.
#[derive(Debug)]
pub struct UsageRecorder {
    record: Option<UsageRecord>,
    started: Instant,
    sink: UsageSink,
    metrics: Arc<Metrics>,
    _in_flight: InFlight,
    size_class: Option<SizeClass>,
    /// Time spent in finished upstream calls.
    upstream: Duration,
    /// When the upstream call whose answer is being relayed began (its end is not known yet).
    upstream_open: Option<Instant>,
    /// Time spent waiting for a free account slot, over every try; `None` before the first.
    pool_wait: Option<Duration>,
    /// Accounts left for another one so far, over every try of the request.
    switches: u32,
    /// The request's place among those in flight, left once the record is submitted.
    entered: Entered,
    /// What the upstream call under way has made so far: billed if the record is submitted in
    /// the middle of the call (the client left), since the account spent it all the same.
    call_spent: Option<Arc<SpentSoFar>>,
    /// The client left (the rest of the answer is read in the background): its record keeps 499
    /// even if the shutdown then cuts that reading short.
    client_left: bool,
    /// What the completed events of a stream said ([`UsageRecorder::completed_image`]).
    completed: CompletedUsage,
    /// Set when the keepalive of a non-streaming answer answered the client `200` before the
    /// outcome was known ([`UsageRecorder::keepalive_commitment`]).
    keepalive: Option<Arc<AtomicBool>>,
}

/// Status recorded for a request whose client went away before the end.
pub const CLIENT_CLOSED: u16 = 499;
/// Status recorded for a request abandoned when the shutdown grace period ended.
pub const SHUTTING_DOWN: u16 = 503;

impl UsageRecorder {
    pub fn start(
        sink: UsageSink,
        metrics: Arc<Metrics>,
        entered: Entered,
        request_id: &str,
        endpoint: &str,
        caller: &AuthContext,
    ) -> Self {
        let record = UsageRecord {
            request_id: request_id.to_owned(),
            created_at: Timestamp::now(),
            endpoint: endpoint.to_owned(),
            model: String::new(),
            size_requested: None,
            size_produced: None,
            quality_requested: None,
            quality_produced: None,
            output_format: None,
            n: 1,
            images: 0,
            stream: false,
            status: CLIENT_CLOSED,
            error_code: Some("client_closed".to_owned()),
            tokens: TokenCounts::default(),
            latency_ms: 0,
            ttfb_ms: None,
            account_id: None,
            group_id: Some(caller.group_id),
            user_id: Some(caller.user_id),
            key_id: Some(caller.key_id),
            fallback_note: None,
        };
        Self {
            record: Some(record),
            started: Instant::now(),
            _in_flight: metrics.request_started(),
            sink,
            metrics,
            size_class: None,
            upstream: Duration::ZERO,
            upstream_open: None,
            pool_wait: None,
            switches: 0,
            entered,
            call_spent: None,
            client_left: false,
            completed: CompletedUsage::default(),
            keepalive: None,
        }
    }

    /// A flag for the keepalive of a non-streaming answer to set when it commits the answer to
    /// `200`: the record then notes that the client got `200` whatever its status says.
    pub fn keepalive_commitment(&mut self) -> Arc<AtomicBool> {
        Arc::clone(self.keepalive.get_or_insert_with(Default::default))
    }

    /// Resolves when the shutdown abandons the request.
    pub async fn until_abandoned(&self) {
        self.entered.until_abandoned().await;
    }

    fn with(&mut self, change: impl FnOnce(&mut UsageRecord)) {
        if let Some(record) = self.record.as_mut() {
            change(record);
        }
    }

    /// The model asked for, before validation (so refused requests still show it).
    pub fn model(&mut self, model: &str) {
        self.with(|r| r.model = model.to_owned());
    }

    /// What a validated images request asked for.
    pub fn params(&mut self, params: &ImageParams) {
        self.size_class = Some(params.size_class());
        self.with(|r| {
            r.model = params.model.requested().to_owned();
            r.size_requested = Some(params.size.to_string());
            r.quality_requested = Some(params.quality.as_str().to_owned());
            r.output_format = Some(params.output_format.as_str().to_owned());
            r.n = u32::from(params.n);
            r.stream = params.stream;
        });
    }

    /// The tool parameters of a Responses request.
    pub fn tool(&mut self, size: &str, quality: &str, output_format: &str) {
        self.size_class = size.parse::<ImageSize>().ok().map(|s| s.size_class());
        self.with(|r| {
            r.size_requested = Some(size.to_owned());
            r.quality_requested = Some(quality.to_owned());
            r.output_format = Some(output_format.to_owned());
        });
    }

    /// Whether a Responses request asked for a stream (with an image tool or not).
    pub fn stream(&mut self, stream: bool) {
        self.with(|r| r.stream = stream);
    }

    /// The account currently serving the request.
    pub fn account(&mut self, account_id: Option<i64>) {
        self.with(|r| r.account_id = account_id.map(imagegate_store::AccountId));
    }

    /// The request left an account for another one (noted in the record when it is submitted, so
    /// an abandoned request's record has it too, and the tries of a fallback ladder add up).
    pub fn failed_over(&mut self) {
        self.switches = self.switches.saturating_add(1);
    }

    /// A note on what failover or a fallback changed.
    pub fn note(&mut self, note: String) {
        self.with(|r| {
            r.fallback_note = Some(match r.fallback_note.take() {
                Some(before) => format!("{before}; {note}"),
                None => note,
            });
        });
    }

    /// Tokens an account spent on a call whose answer the client never gets (`what`: "a failed
    /// call", say): of images it made, or billed for none; with a note saying so.
    pub fn spent(&mut self, spent: &Spent, what: &str) {
        self.usage(&spent.usage);
        let note = match spent.images {
            0 => format!("billed the tokens of {what}, with no image"),
            1 => format!("billed 1 image of {what}"),
            n => format!("billed {n} images of {what}"),
        };
        self.note(note);
    }

    /// Follows what the upstream call about to start makes while it runs, until
    /// [`UsageRecorder::call_returned`].
    pub fn call_reports_into(&mut self, spent: Arc<SpentSoFar>) {
        self.call_spent = Some(spent);
    }

    /// The call returned: its answer or failure says what it made.
    pub fn call_returned(&mut self) {
        self.call_spent = None;
    }

    /// The answer's client went away before its end (the rest is still read for its usage);
    /// unless the shutdown had already abandoned the request, which is then what cut it off.
    pub fn client_left(&mut self) {
        if !self.entered.abandoned() {
            self.client_left = true;
        }
    }

    /// An upstream call begins: its time counts until [`UsageRecorder::upstream_closed`], or until
    /// the record is submitted (a request abandoned in the middle of the call).
    pub fn upstream_started(&mut self) {
        self.upstream_closed();
        self.upstream_open = Some(Instant::now());
    }

    /// The request waited `waited` for an account slot (granted or not).
    pub fn waited_for_account(&mut self, waited: Duration) {
        self.pool_wait = Some(self.pool_wait.unwrap_or_default().saturating_add(waited));
    }

    /// The upstream's answer has ended (its last event or byte arrived).
    pub fn upstream_closed(&mut self) {
        if let Some(since) = self.upstream_open.take() {
            self.upstream = self.upstream.saturating_add(since.elapsed());
        }
    }

    /// The first byte of the answer is leaving now.
    pub fn first_byte(&mut self) {
        let ms = elapsed_ms(self.started);
        self.with(|r| {
            r.ttfb_ms.get_or_insert(ms);
        });
    }

    /// What the upstream produced.
    pub fn produced(&mut self, size: Option<&str>, quality: Option<&str>, format: Option<&str>, images: u32) {
        self.with(|r| {
            if let Some(size) = size {
                r.size_produced = Some(size.to_owned());
            }
            if let Some(quality) = quality {
                r.quality_produced = Some(quality.to_owned());
            }
            if let Some(format) = format {
                r.output_format = Some(format.to_owned());
            }
            r.images = r.images.saturating_add(images);
        });
    }

    /// Token usage reported by the upstream (added up over several images or events).
    pub fn usage(&mut self, usage: &Usage) {
        self.with(|r| {
            let t = &mut r.tokens;
            t.input = t.input.saturating_add(usage.input_tokens);
            t.output = t.output.saturating_add(usage.output_tokens);
            t.total = t.total.saturating_add(usage.total_tokens);
            add(&mut t.input_text, usage.input_tokens_details.text_tokens);
            add(&mut t.input_image, usage.input_tokens_details.image_tokens);
            add(&mut t.output_text, usage.output_tokens_details.text_tokens);
            add(&mut t.output_image, usage.output_tokens_details.image_tokens);
        });
    }

    /// The `*.completed` events of this Images stream carry the request's usage so far (the
    /// gateway adds up a subscription account's calls itself).
    pub fn completed_carry_running_totals(&mut self) {
        self.completed.know_running_totals();
    }

    /// The usage on a `*.completed` event of an Images stream: the request's so far, or the
    /// image's own, as [`CompletedUsage`] tells; added to the record once, when it is submitted.
    pub fn completed_image(&mut self, usage: &Usage) {
        self.completed.push(usage);
    }

    /// Ends the record with the status and error code the client saw, and queues it.
    pub fn finish(mut self, status: u16, error_code: Option<&str>) {
        self.with(|r| {
            r.status = status;
            r.error_code = error_code.map(str::to_owned);
        });
        self.submit();
    }

    fn submit(&mut self) {
        let elapsed = self.started.elapsed();
        let latency = u64::try_from(elapsed.as_millis()).unwrap_or(u64::MAX);
        self.upstream_closed();
        if let Some(spent) = self.call_spent.take().and_then(|cell| cell.take()) {
            let cut_by = match self.entered.abandoned() && !self.client_left {
                true => "a call the shutdown cut short",
                false => "a call its client left",
            };
            self.spent(&spent, cut_by);
        }
        if let Some(completed) = std::mem::take(&mut self.completed).total() {
            self.usage(&completed);
        }
        if self.switches > 0 {
            self.note(format!("failed over {} time(s)", self.switches));
            self.switches = 0;
        }
        let kept_alive = self
            .keepalive
            .take()
            .is_some_and(|committed| committed.load(Ordering::Acquire));
        if kept_alive {
            self.note("keepalive: the client was answered 200 and newlines while it waited".to_owned());
        }
        if let Some(short) = self.record.as_ref().and_then(fewer_images_than_asked) {
            self.note(short);
        }
        if let Some(mut record) = self.record.take() {
            if record.status == CLIENT_CLOSED && self.entered.abandoned() && !self.client_left {
                // Not the client: the shutdown's grace period ended first.
                record.status = SHUTTING_DOWN;
                record.error_code = Some("shutting_down".to_owned());
            }
            self.metrics.observe(&RequestObservation {
                endpoint: &record.endpoint,
                status: record.status,
                model: &record.model,
                size_class: self.size_class,
                total: elapsed,
                upstream: self.upstream.min(elapsed),
                pool_wait: self.pool_wait,
                kept_alive,
            });
            record.latency_ms = latency;
            clip_free_text(&mut record);
            // A record the sink refuses (its queue full, the writer stopped) is logged whole by
            // the sink: nothing more can be done with it here, in a `Drop`.
            let _refused = self.sink.record(record);
        }
    }
}

/// What an Images answer says when the upstream made fewer images than `n` asked for: nothing the
/// client asked for is changed without the record saying so.
fn fewer_images_than_asked(record: &UsageRecord) -> Option<String> {
    // No image counted in a 200 means the answer could not be read for them, not that it had none
    // (an answer without an image is a failure).
    let short = record.status == 200
        && record.endpoint.starts_with("/v1/images/")
        && record.images > 0
        && record.images < record.n;
    short.then(|| {
        format!(
            "the upstream made {} of the {} images asked for",
            record.images, record.n
        )
    })
}

impl Drop for UsageRecorder {
    fn drop(&mut self) {
        self.submit();
    }
}

/// The longest a client- or upstream-chosen string of a record may be, in bytes: as long as the
/// longest main model id `/v1/responses` passes on when written in ASCII (256 characters), as real
/// ids are; a refused request's model can be anything.
const MAX_FREE_TEXT: usize = 256;

/// Cuts every string a client or an upstream chose to [`MAX_FREE_TEXT`] bytes (on a character
/// boundary), so a refused request cannot make its record, the usage pages or the logs huge.
fn clip_free_text(record: &mut UsageRecord) {
    clip(&mut record.model);
    let optional = [
        &mut record.size_requested,
        &mut record.size_produced,
        &mut record.quality_requested,
        &mut record.quality_produced,
        &mut record.output_format,
        &mut record.error_code,
    ];
    for text in optional.into_iter().flatten() {
        clip(text);
    }
}

fn clip(text: &mut String) {
    if text.len() > MAX_FREE_TEXT {
        let mut end = MAX_FREE_TEXT;
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        text.truncate(end);
    }
}

fn add(slot: &mut Option<u64>, value: u64) {
    *slot = Some(slot.unwrap_or(0).saturating_add(value));
}

fn elapsed_ms(since: Instant) -> u64 {
    u64::try_from(since.elapsed().as_millis()).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::{MAX_FREE_TEXT, clip};

    #[test]
    fn clip_cuts_on_a_character_boundary() {
        // '€' is three bytes, so the limit falls inside one.
        let mut text = "€".repeat(MAX_FREE_TEXT);
        clip(&mut text);
        assert_eq!(text, "€".repeat(MAX_FREE_TEXT / 3));
        let mut short = "gpt-image-2".to_owned();
        clip(&mut short);
        assert_eq!(short, "gpt-image-2");
        let mut exact = "m".repeat(MAX_FREE_TEXT);
        clip(&mut exact);
        assert_eq!(exact.len(), MAX_FREE_TEXT);
    }
}

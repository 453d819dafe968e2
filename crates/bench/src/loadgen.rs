//! The load generator: `concurrency` closed-loop workers send the same request back to back for a
//! warm-up and then a measured window; latencies are recorded in HdrHistograms corrected for
//! coordinated omission.
//!
//! Coordinated omission: a worker blocked on a slow response does not send the requests it would
//! have sent meanwhile, so a stall is sampled once instead of once per missed send. Every latency is
//! therefore recorded with [`Histogram::record_correct`], the expected interval being the run's own
//! raw median latency (the pace a worker keeps when nothing stalls): a 50 ms stall in a run whose
//! median is 1 ms also counts the 49, 48, ... ms its missed requests would have waited.

use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use futures::StreamExt as _;
use hdrhistogram::Histogram;
use serde::Serialize;

use super::cpu_time::{CpuUse, Snapshot, Spent};

/// One HTTP request, sent unchanged by every worker.
#[derive(Debug, Clone)]
pub struct RequestSpec {
    /// Full URL.
    pub url: String,
    /// `Authorization: Bearer` token, if any.
    pub bearer: Option<String>,
    /// `content-type` of the body.
    pub content_type: String,
    /// Request body (cheap to clone).
    pub body: Bytes,
    /// Record the time to the first SSE `data:` line.
    pub first_event: bool,
}

/// How long and how wide a run is.
#[derive(Debug, Clone, Copy)]
pub struct LoadShape {
    /// Workers, each with at most one request in flight.
    pub concurrency: usize,
    /// Requests completed before this elapsed time are not recorded.
    pub warmup: Duration,
    /// Length of the measured window after the warm-up.
    pub measure: Duration,
}

/// What a run measured (latencies in milliseconds).
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct LoadResult {
    /// Successful requests completed in the measured window.
    pub requests: u64,
    /// Failed requests (transport errors and non-200 answers) in the measured window.
    pub errors: u64,
    /// The first failure, if any.
    pub first_error: Option<String>,
    /// Response body bytes of the successful requests.
    pub bytes: u64,
    /// Measured window, seconds.
    pub seconds: f64,
    /// Successful requests per second.
    pub rps: f64,
    /// Response body megabytes (10^6 bytes) per second.
    pub mb_per_s: f64,
    /// Pieces the client's HTTP stack handed over per successful answer's body: how finely the
    /// answer arrived (every piece is a wakeup and a pass through the client's code).
    pub body_reads_per_answer: f64,
    /// Corrected percentiles of the whole request time.
    pub latency: Percentiles,
    /// Percentiles of the raw (uncorrected) request time.
    pub latency_raw: Percentiles,
    /// Corrected percentiles of the time to the first SSE data line (streams only).
    pub first_event: Option<Percentiles>,
    /// Each CPU's time per successful answer over the measured window (the whole machine's, not
    /// only the target's).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub cpu_per_answer: Vec<CpuUse>,
}

impl LoadResult {
    /// CPU `number`'s time per answer, when measured.
    pub fn cpu(&self, number: usize) -> Option<CpuUse> {
        self.cpu_per_answer.iter().find(|c| c.cpu == number).copied()
    }
}

/// Median and tail, milliseconds.
#[derive(Debug, Clone, Copy, Default, Serialize, PartialEq)]
pub struct Percentiles {
    /// 50th percentile.
    pub p50_ms: f64,
    /// 99th percentile.
    pub p99_ms: f64,
    /// Largest value.
    pub max_ms: f64,
    /// Mean. In a closed loop at saturation every proxy has the same mean as the floor when it
    /// has the same throughput (Little's law), whatever the shape of its distribution.
    pub mean_ms: f64,
}

/// Raw latencies of one run, nanoseconds.
#[derive(Debug, Default, Clone)]
pub struct Samples {
    /// Whole request times.
    pub total_ns: Vec<u64>,
    /// Times to the first SSE data line.
    pub first_event_ns: Vec<u64>,
}

/// Runs `shape` against `spec` with `client` and returns the measurements.
pub async fn run(client: &reqwest::Client, spec: &RequestSpec, shape: LoadShape) -> LoadResult {
    let mut pooled = Pooled::default();
    pooled.add(client, spec, shape).await;
    pooled.result()
}

/// The samples of one or more load runs against the same target, summarized together: the rounds
/// of an interleaved comparison.
#[derive(Debug, Default, Clone)]
pub struct Pooled {
    samples: Samples,
    tally: Tally,
    spent: Spent,
    /// A round without CPU counters: the pooled CPU time would be divided among answers it does
    /// not cover, so there is none.
    cpu_missing: bool,
    window: Duration,
}

impl Pooled {
    /// Runs `shape` against `spec` and adds its samples; returns that round's own result.
    pub async fn add(
        &mut self,
        client: &reqwest::Client,
        spec: &RequestSpec,
        shape: LoadShape,
    ) -> LoadResult {
        let (samples, tally, spent) = run_workers(client, spec, shape).await;
        self.absorb(samples, tally, spent, shape.measure)
    }

    /// Adds one round's samples and CPU time, measured over `window`; returns that round's own
    /// result.
    fn absorb(&mut self, samples: Samples, tally: Tally, spent: Spent, window: Duration) -> LoadResult {
        let round = summarize(&samples, &tally, &spent, window);
        self.samples.total_ns.extend(samples.total_ns);
        self.samples.first_event_ns.extend(samples.first_event_ns);
        self.tally.merge(tally);
        self.cpu_missing |= spent.is_empty();
        self.spent.add(&spent);
        self.window += window;
        round
    }

    /// The result of every round together.
    pub fn result(&self) -> LoadResult {
        let spent = if self.cpu_missing {
            &Spent::default()
        } else {
            &self.spent
        };
        summarize(&self.samples, &self.tally, spent, self.window)
    }
}

async fn run_workers(
    client: &reqwest::Client,
    spec: &RequestSpec,
    shape: LoadShape,
) -> (Samples, Tally, Spent) {
    let start = Instant::now();
    let measure_from = start + shape.warmup;
    let end = measure_from + shape.measure;
    // The machine's CPU time over the measured window, from its first to its last instant.
    #[expect(clippy::disallowed_methods, reason = "awaited at the end of the run")]
    let cpu = tokio::spawn(async move {
        tokio::time::sleep_until(measure_from.into()).await;
        let before = Snapshot::read();
        tokio::time::sleep_until(end.into()).await;
        Snapshot::read().since(&before)
    });
    let spec = Arc::new(spec.clone());
    #[expect(clippy::disallowed_methods, reason = "every worker is joined below")]
    let workers = (0..shape.concurrency.max(1)).map(|_| {
        let client = client.clone();
        let spec = Arc::clone(&spec);
        tokio::spawn(async move { worker(&client, &spec, measure_from, end).await })
    });
    let mut samples = Samples::default();
    let mut tally = Tally::default();
    for joined in futures::future::join_all(workers).await {
        match joined {
            Ok((worker_samples, worker_tally)) => {
                samples.total_ns.extend(worker_samples.total_ns);
                samples.first_event_ns.extend(worker_samples.first_event_ns);
                tally.merge(worker_tally);
            }
            Err(error) => tally.fail(format!("worker task failed: {error}")),
        }
    }
    (samples, tally, cpu.await.unwrap_or_default())
}

/// Counters of one worker.
#[derive(Debug, Default, Clone)]
pub struct Tally {
    /// Successes in the window.
    pub ok: u64,
    /// Failures in the window.
    pub errors: u64,
    /// Body bytes of successes.
    pub bytes: u64,
    /// Body pieces of successes.
    pub body_reads: u64,
    /// First failure.
    pub first_error: Option<String>,
}

impl Tally {
    fn fail(&mut self, message: String) {
        self.errors += 1;
        self.first_error.get_or_insert(message);
    }

    fn merge(&mut self, other: Tally) {
        self.ok += other.ok;
        self.errors += other.errors;
        self.bytes += other.bytes;
        self.body_reads += other.body_reads;
        if self.first_error.is_none() {
            self.first_error = other.first_error;
        }
    }
}

async fn worker(
    client: &reqwest::Client,
    spec: &RequestSpec,
    measure_from: Instant,
    end: Instant,
) -> (Samples, Tally) {
    let mut samples = Samples::default();
    let mut tally = Tally::default();
    loop {
        let sent = Instant::now();
        if sent >= end {
            break;
        }
        let outcome = send_once(client, spec, sent).await;
        let done = Instant::now();
        if done < measure_from || done > end {
            continue;
        }
        match outcome {
            Ok(answer) => {
                tally.ok += 1;
                tally.bytes += answer.bytes;
                tally.body_reads += answer.body_reads;
                samples.total_ns.push(nanos(done - sent));
                if let Some(first) = answer.first_event {
                    samples.first_event_ns.push(nanos(first));
                }
            }
            Err(message) => tally.fail(message),
        }
    }
    (samples, tally)
}

/// One successful answer.
#[derive(Debug, Clone)]
pub struct Answer {
    /// HTTP status.
    pub status: u16,
    /// Body length.
    pub bytes: u64,
    /// Pieces the body came in.
    pub body_reads: u64,
    /// Time from sending to the first SSE data line, when asked for and seen.
    pub first_event: Option<Duration>,
    /// Whether the body holds a `"b64_json"` key (only looked for when asked).
    pub saw_b64_json: bool,
    /// The start of the body (up to 512 bytes), for checks and error messages.
    pub head: String,
}

const B64_KEY: &[u8] = b"\"b64_json\"";

/// Sends `spec` once and reads the whole body; any status but 200 is an error.
pub async fn send_once(
    client: &reqwest::Client,
    spec: &RequestSpec,
    sent: Instant,
) -> Result<Answer, String> {
    let answer = send_raw(client, spec, sent, false).await?;
    if answer.status == 200 {
        Ok(answer)
    } else {
        Err(format!("HTTP {}: {}", answer.status, answer.head))
    }
}

/// Sends `spec` once and reads the whole body, whatever the status; with `inspect`, also looks for
/// a `"b64_json"` key anywhere in the body.
pub async fn send_raw(
    client: &reqwest::Client,
    spec: &RequestSpec,
    sent: Instant,
    inspect: bool,
) -> Result<Answer, String> {
    let mut request = client
        .post(&spec.url)
        .header("content-type", &spec.content_type)
        .body(spec.body.clone());
    if let Some(token) = &spec.bearer {
        request = request.bearer_auth(token);
    }
    let response = request.send().await.map_err(|e| format!("send: {e}"))?;
    let status = response.status().as_u16();
    let mut body = response.bytes_stream();
    let mut bytes = 0u64;
    let mut body_reads = 0u64;
    let mut head = Vec::new();
    let mut first_event = None;
    let mut saw_b64_json = false;
    let mut tail: Vec<u8> = Vec::new();
    while let Some(chunk) = body.next().await {
        let chunk = chunk.map_err(|e| format!("body: {e}"))?;
        bytes += chunk.len() as u64;
        body_reads += 1;
        if head.len() < 512 {
            head.extend_from_slice(&chunk[..chunk.len().min(512 - head.len())]);
        }
        if spec.first_event && first_event.is_none() && has_data_line(&head, &chunk) {
            first_event = Some(sent.elapsed());
        }
        if inspect && !saw_b64_json {
            tail.extend_from_slice(&chunk[..chunk.len().min(B64_KEY.len())]);
            saw_b64_json = contains(&tail, B64_KEY) || contains(&chunk, B64_KEY);
            tail.clear();
            tail.extend_from_slice(&chunk[chunk.len().saturating_sub(B64_KEY.len())..]);
        }
    }
    Ok(Answer {
        status,
        bytes,
        body_reads,
        first_event,
        saw_b64_json,
        head: String::from_utf8_lossy(&head).into_owned(),
    })
}

/// Whether an SSE `data:` line has started, in the first bytes of the body or in this chunk
/// (comments such as `: keepalive` do not count).
pub fn has_data_line(head: &[u8], chunk: &[u8]) -> bool {
    let starts = |b: &[u8]| b.starts_with(b"data:") || b.starts_with(b"event:");
    starts(head) || contains(head, b"\ndata:") || contains(chunk, b"\ndata:") || starts(chunk)
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle)
}

fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

/// Builds the result of a run from its samples and counters.
pub fn summarize(samples: &Samples, tally: &Tally, spent: &Spent, window: Duration) -> LoadResult {
    let seconds = window.as_secs_f64().max(f64::EPSILON);
    let first_event = (!samples.first_event_ns.is_empty()).then(|| corrected(&samples.first_event_ns));
    LoadResult {
        requests: tally.ok,
        errors: tally.errors,
        first_error: tally.first_error.clone(),
        bytes: tally.bytes,
        seconds,
        rps: tally.ok as f64 / seconds,
        mb_per_s: tally.bytes as f64 / 1e6 / seconds,
        body_reads_per_answer: tally.body_reads as f64 / tally.ok.max(1) as f64,
        latency: corrected(&samples.total_ns),
        latency_raw: percentiles(&histogram(&samples.total_ns, None)),
        first_event,
        cpu_per_answer: spent.per_answer(tally.ok),
    }
}

/// Percentiles of `values` recorded with coordinated-omission correction, the expected interval
/// being the raw median.
pub fn corrected(values: &[u64]) -> Percentiles {
    let Some(raw) = histogram(values, None) else {
        return Percentiles::default();
    };
    let interval = raw.value_at_quantile(0.5).max(1);
    percentiles(&histogram(values, Some(interval)))
}

/// A histogram of nanosecond values (3 significant digits, resized as needed); with an interval,
/// values are recorded with `record_correct`.
pub fn histogram(values: &[u64], expected_interval: Option<u64>) -> Option<Histogram<u64>> {
    let mut histogram = Histogram::<u64>::new(3).ok()?;
    for &value in values {
        let value = value.max(1);
        let _ = match expected_interval {
            Some(interval) => histogram.record_correct(value, interval),
            None => histogram.record(value),
        };
    }
    Some(histogram)
}

/// p50, p99, max and mean of a nanosecond histogram, in milliseconds (zeros when empty).
pub fn percentiles(histogram: &Option<Histogram<u64>>) -> Percentiles {
    let Some(histogram) = histogram.as_ref().filter(|h| !h.is_empty()) else {
        return Percentiles::default();
    };
    let ms = |ns: u64| ns as f64 / 1e6;
    Percentiles {
        p50_ms: ms(histogram.value_at_quantile(0.5)),
        p99_ms: ms(histogram.value_at_quantile(0.99)),
        max_ms: ms(histogram.max()),
        mean_ms: histogram.mean() / 1e6,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_of_a_uniform_run() {
        let values: Vec<u64> = (1..=1000).map(|i| i * 1_000_000).collect();
        let p = percentiles(&histogram(&values, None));
        assert!((p.p50_ms - 500.0).abs() < 1.0, "{p:?}");
        assert!((p.p99_ms - 990.0).abs() < 1.0, "{p:?}");
        assert!((p.max_ms - 1000.0).abs() < 1.0, "{p:?}");
    }

    #[test]
    fn correction_adds_the_requests_a_stall_held_back() {
        // 990 requests of 1 ms and one stall of 1 s: raw p99 stays 1 ms, but the stall held back
        // about 1,000 sends at a 1 ms pace, so the corrected p99 lands inside the stall.
        let mut values = vec![1_000_000u64; 990];
        values.push(1_000_000_000);
        let raw = percentiles(&histogram(&values, None));
        let fixed = corrected(&values);
        assert!((raw.p99_ms - 1.0).abs() < 0.01, "{raw:?}");
        assert!(fixed.p99_ms > 900.0, "{fixed:?}");
        assert!((fixed.max_ms - 1000.0).abs() < 1.0, "{fixed:?}");
    }

    #[test]
    fn correction_leaves_a_steady_run_alone() {
        let values = vec![2_000_000u64; 500];
        assert_eq!(corrected(&values), percentiles(&histogram(&values, None)));
    }

    #[test]
    fn summary_rates_use_the_window() {
        let samples = Samples {
            total_ns: vec![1_000_000; 10],
            first_event_ns: vec![],
        };
        let tally = Tally {
            ok: 10,
            errors: 1,
            bytes: 5_000_000,
            body_reads: 25,
            first_error: Some("HTTP 500".into()),
        };
        let result = summarize(&samples, &tally, &Spent::default(), Duration::from_secs(2));
        assert_eq!(result.rps, 5.0);
        assert_eq!(result.mb_per_s, 2.5);
        assert_eq!(result.body_reads_per_answer, 2.5);
        assert_eq!(result.errors, 1);
        assert!(result.first_event.is_none());
    }

    #[test]
    fn pooled_rounds_are_summarized_together() {
        let round = |ms: u64, count: usize| Samples {
            total_ns: vec![ms * 1_000_000; count],
            first_event_ns: vec![],
        };
        let tally = |ok: u64| Tally {
            ok,
            bytes: ok * 1_000_000,
            ..Tally::default()
        };
        let mut pooled = Pooled::default();
        let first = pooled.absorb(
            round(10, 300),
            tally(300),
            Spent::default(),
            Duration::from_secs(3),
        );
        let second = pooled.absorb(
            round(30, 100),
            tally(100),
            Spent::default(),
            Duration::from_secs(1),
        );
        assert_eq!((first.rps, second.rps), (100.0, 100.0));
        assert!((first.latency_raw.p50_ms - 10.0).abs() < 0.1, "{first:?}");
        assert!((second.latency_raw.p50_ms - 30.0).abs() < 0.1, "{second:?}");
        let all = pooled.result();
        assert_eq!((all.requests, all.seconds, all.rps), (400, 4.0, 100.0));
        assert!((all.latency_raw.p50_ms - 10.0).abs() < 0.1, "{all:?}");
        assert!((all.latency_raw.mean_ms - 15.0).abs() < 0.1, "{all:?}");
    }

    #[test]
    fn pooled_cpu_time_is_divided_among_every_round_s_answers() {
        let spent = |busy: u64| {
            let before = Snapshot::parse("cpu0 0 0 0 0\ncpu1 0 0 0 0\n", "");
            let after = Snapshot::parse(&format!("cpu0 0 0 0 100\ncpu1 {busy} 0 0 0\n"), "");
            after.since(&before)
        };
        let tally = |ok: u64| Tally {
            ok,
            ..Tally::default()
        };
        let samples = || Samples {
            total_ns: vec![1_000_000; 10],
            first_event_ns: vec![],
        };
        let mut pooled = Pooled::default();
        let first = pooled.absorb(samples(), tally(100), spent(100), Duration::from_secs(1));
        pooled.absorb(samples(), tally(100), spent(300), Duration::from_secs(1));
        assert_eq!(first.cpu_per_answer[1].user_ms, 10.0);
        let all = pooled.result();
        // 400 ticks of 10 ms over 200 answers.
        assert_eq!(all.cpu_per_answer[1].user_ms, 20.0);
        assert_eq!(all.cpu_per_answer[0].idle_ms, 10.0);
        assert_eq!(all.cpu(1), Some(all.cpu_per_answer[1]));
        pooled.absorb(samples(), tally(100), Spent::default(), Duration::from_secs(1));
        assert!(
            pooled.result().cpu_per_answer.is_empty(),
            "a round without counters"
        );
    }

    #[test]
    fn data_lines_are_found_but_comments_are_not() {
        assert!(!has_data_line(b": keepalive\n\n", b": keepalive\n\n"));
        assert!(has_data_line(b"event: x\ndata: {}", b"event: x\ndata: {}"));
        assert!(has_data_line(b": keepalive\n\n", b"\ndata: {}"));
    }
}

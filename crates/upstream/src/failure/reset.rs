//! When a rate-limited account resets: read from the 429 body and headers, relative to a given
//! "now" so that it can be tested with fixed clocks.
//!
//! Sources, first found wins:
//! 1. body `error.resets_at` (unix seconds);
//! 2. body `error.resets_in_seconds`;
//! 3. the ChatGPT usage windows `x-codex-{primary,secondary}-reset-after-seconds` (or
//!    `-reset-at`, unix seconds) with `x-codex-{primary,secondary}-used-percent`: the reset of the
//!    exhausted window (used >= 100; the later one if both are); when no window reports its use,
//!    the earliest given; when every reported window has room left, none (a burst 429 must not
//!    bench an account for a five-hour or weekly window it has not used up);
//! 4. header `retry-after-ms`;
//! 5. header `retry-after` (seconds or an HTTP date);
//! 6. the API's `x-ratelimit-reset-{requests,tokens,images}` (Go-style durations such as `6m0s`)
//!    of the limits whose `x-ratelimit-remaining-*` is 0 (the later if several are), or the
//!    earliest when no remaining count is given;
//! 7. "try again in 12s" (Go-style durations such as `1m30s`, `500ms`) in `error.message`.

use reqwest::header::HeaderMap;
use serde_json::{Map, Value};

/// Milliseconds per second.
const MS: f64 = 1000.0;

/// When the limit resets, unix milliseconds, or `None` when nothing says.
pub fn reset_at_unix_ms(
    headers: &HeaderMap,
    error: Option<&Map<String, Value>>,
    now_unix_ms: u64,
) -> Option<u64> {
    let after = |seconds: f64| now_unix_ms.saturating_add(seconds_to_ms(seconds));
    let from_body = error.and_then(|error| {
        number(error.get("resets_at"))
            .map(|at| seconds_to_ms(at).max(now_unix_ms))
            .or_else(|| number(error.get("resets_in_seconds")).map(after))
    });
    from_body
        .or_else(|| codex_windows(headers, now_unix_ms))
        .or_else(|| header_number(headers, "retry-after-ms").map(|ms| after(ms / MS)))
        .or_else(|| retry_after(headers, now_unix_ms))
        .or_else(|| api_limits(headers, now_unix_ms))
        .or_else(|| {
            let message = error?.get("message")?.as_str()?;
            try_again_in(message).map(after)
        })
}

/// One ChatGPT usage window from the `x-codex-<name>-*` headers.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Window {
    reset_at_ms: u64,
    used_percent: Option<f64>,
}

fn window(headers: &HeaderMap, name: &str, now_unix_ms: u64) -> Option<Window> {
    let reset_at_ms = header_number(headers, &format!("x-codex-{name}-reset-after-seconds"))
        .map(|seconds| now_unix_ms.saturating_add(seconds_to_ms(seconds)))
        .or_else(|| {
            header_number(headers, &format!("x-codex-{name}-reset-at"))
                .map(|at| seconds_to_ms(at).max(now_unix_ms))
        })?;
    let used_percent = header_number(headers, &format!("x-codex-{name}-used-percent"));
    Some(Window {
        reset_at_ms,
        used_percent,
    })
}

fn codex_windows(headers: &HeaderMap, now_unix_ms: u64) -> Option<u64> {
    let windows: Vec<Window> = ["primary", "secondary"]
        .iter()
        .filter_map(|name| window(headers, name, now_unix_ms))
        .collect();
    let exhausted = windows
        .iter()
        .filter(|w| w.used_percent.is_some_and(|used| used >= 100.0))
        .map(|w| w.reset_at_ms)
        .max();
    let use_unknown = windows.iter().all(|w| w.used_percent.is_none());
    exhausted.or_else(|| {
        use_unknown
            .then(|| windows.iter().map(|w| w.reset_at_ms).min())
            .flatten()
    })
}

/// The API's per-minute limits: `x-ratelimit-reset-<name>` with `x-ratelimit-remaining-<name>`.
fn api_limits(headers: &HeaderMap, now_unix_ms: u64) -> Option<u64> {
    let limits: Vec<(u64, Option<f64>)> = ["requests", "tokens", "images"]
        .iter()
        .filter_map(|name| {
            let reset = headers
                .get(format!("x-ratelimit-reset-{name}"))?
                .to_str()
                .ok()?
                .trim();
            let seconds = parse_seconds(reset).or_else(|| parse_go_duration(reset))?;
            let remaining = header_number(headers, &format!("x-ratelimit-remaining-{name}"));
            Some((now_unix_ms.saturating_add(seconds_to_ms(seconds)), remaining))
        })
        .collect();
    let exhausted = limits
        .iter()
        .filter(|(_, remaining)| remaining.is_some_and(|left| left <= 0.0))
        .map(|(at, _)| *at)
        .max();
    let remaining_unknown = limits.iter().all(|(_, remaining)| remaining.is_none());
    exhausted.or_else(|| {
        remaining_unknown
            .then(|| limits.iter().map(|(at, _)| *at).min())
            .flatten()
    })
}

fn retry_after(headers: &HeaderMap, now_unix_ms: u64) -> Option<u64> {
    let value = headers.get("retry-after")?.to_str().ok()?.trim();
    if let Some(seconds) = parse_seconds(value) {
        return Some(now_unix_ms.saturating_add(seconds_to_ms(seconds)));
    }
    let at = httpdate::parse_http_date(value).ok()?;
    let ms = at.duration_since(std::time::UNIX_EPOCH).ok()?.as_millis();
    Some(u64::try_from(ms).unwrap_or(u64::MAX).max(now_unix_ms))
}

/// A non-negative finite number, from a JSON number or a numeric string.
fn number(value: Option<&Value>) -> Option<f64> {
    match value? {
        Value::Number(n) => n.as_f64().filter(|v| v.is_finite() && *v >= 0.0),
        Value::String(s) => parse_seconds(s.trim()),
        _ => None,
    }
}

fn header_number(headers: &HeaderMap, name: &str) -> Option<f64> {
    parse_seconds(headers.get(name)?.to_str().ok()?.trim())
}

fn parse_seconds(text: &str) -> Option<f64> {
    text.parse::<f64>().ok().filter(|v| v.is_finite() && *v >= 0.0)
}

/// Seconds (non-negative, finite) to whole milliseconds, rounded up, saturating.
#[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
fn seconds_to_ms(seconds: f64) -> u64 {
    let ms = (seconds * MS).ceil();
    if ms >= u64::MAX as f64 {
        u64::MAX
    } else {
        ms.max(0.0) as u64
    }
}

/// The duration in "... try again in 1m30s ..." (Go duration syntax), in seconds.
fn try_again_in(message: &str) -> Option<f64> {
    let lower = message.to_ascii_lowercase();
    let start = lower.find("try again in ")? + "try again in ".len();
    let rest = lower.get(start..)?;
    let end = rest
        .find(|c: char| !(c.is_ascii_alphanumeric() || c == '.'))
        .unwrap_or(rest.len());
    parse_go_duration(rest.get(..end)?.trim_end_matches('.'))
}

/// `1h2m3.5s`, `250ms`, `12s` (units h, m, s, ms) to seconds.
fn parse_go_duration(text: &str) -> Option<f64> {
    let mut total = 0.0;
    let mut rest = text;
    if rest.is_empty() {
        return None;
    }
    while !rest.is_empty() {
        let digits = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        let (amount, tail) = rest.split_at(digits);
        let amount: f64 = amount.parse().ok()?;
        let (unit_seconds, unit_len) = if tail.starts_with("ms") {
            (0.001, 2)
        } else if tail.starts_with('h') {
            (3600.0, 1)
        } else if tail.starts_with('m') {
            (60.0, 1)
        } else if tail.starts_with('s') {
            (1.0, 1)
        } else {
            return None;
        };
        total += amount * unit_seconds;
        rest = tail.get(unit_len..)?;
    }
    Some(total)
}

#[cfg(test)]
mod tests {
    use super::*;
    use reqwest::header::HeaderValue;
    use serde_json::json;

    const NOW: u64 = 1_766_000_000_000;

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.insert(*name, HeaderValue::from_str(value).unwrap());
        }
        map
    }

    fn error(value: Value) -> Map<String, Value> {
        value.as_object().unwrap().clone()
    }

    #[test]
    fn body_resets_at_is_unix_seconds() {
        let err = error(json!({"type": "usage_limit_reached", "resets_at": 1_766_003_600}));
        assert_eq!(
            reset_at_unix_ms(&HeaderMap::new(), Some(&err), NOW),
            Some(1_766_003_600_000)
        );
    }

    #[test]
    fn body_resets_at_in_the_past_is_now() {
        let err = error(json!({"resets_at": 1_700_000_000}));
        assert_eq!(reset_at_unix_ms(&HeaderMap::new(), Some(&err), NOW), Some(NOW));
    }

    #[test]
    fn body_resets_in_seconds_is_relative_to_now() {
        let err = error(json!({"resets_in_seconds": 90}));
        assert_eq!(
            reset_at_unix_ms(&HeaderMap::new(), Some(&err), NOW),
            Some(NOW + 90_000)
        );
        let err = error(json!({"resets_in_seconds": "12.5"}));
        assert_eq!(
            reset_at_unix_ms(&HeaderMap::new(), Some(&err), NOW),
            Some(NOW + 12_500)
        );
    }

    #[test]
    fn body_wins_over_headers() {
        let err = error(json!({"resets_in_seconds": 10}));
        let h = headers(&[("retry-after", "999")]);
        assert_eq!(reset_at_unix_ms(&h, Some(&err), NOW), Some(NOW + 10_000));
    }

    #[test]
    fn retry_after_ms_then_seconds() {
        let h = headers(&[("retry-after-ms", "1500"), ("retry-after", "30")]);
        assert_eq!(reset_at_unix_ms(&h, None, NOW), Some(NOW + 1_500));
        let h = headers(&[("retry-after", "30")]);
        assert_eq!(reset_at_unix_ms(&h, None, NOW), Some(NOW + 30_000));
        let h = headers(&[("retry-after", "0.25")]);
        assert_eq!(reset_at_unix_ms(&h, None, NOW), Some(NOW + 250));
    }

    #[test]
    fn retry_after_http_date() {
        // 1766000000 is Wed, 17 Dec 2025 19:33:20 GMT.
        let h = headers(&[("retry-after", "Wed, 17 Dec 2025 19:34:20 GMT")]);
        assert_eq!(reset_at_unix_ms(&h, None, NOW), Some(NOW + 60_000));
        let h = headers(&[("retry-after", "not a date")]);
        assert_eq!(reset_at_unix_ms(&h, None, NOW), None);
    }

    #[test]
    fn codex_exhausted_window_is_chosen_not_the_longest() {
        let h = headers(&[
            ("x-codex-primary-used-percent", "100"),
            ("x-codex-primary-reset-after-seconds", "600"),
            ("x-codex-secondary-used-percent", "42"),
            ("x-codex-secondary-reset-after-seconds", "400000"),
        ]);
        assert_eq!(reset_at_unix_ms(&h, None, NOW), Some(NOW + 600_000));
        let h = headers(&[
            ("x-codex-primary-used-percent", "37.5"),
            ("x-codex-primary-reset-after-seconds", "600"),
            ("x-codex-secondary-used-percent", "100.0"),
            ("x-codex-secondary-reset-after-seconds", "400000"),
        ]);
        assert_eq!(reset_at_unix_ms(&h, None, NOW), Some(NOW + 400_000_000));
    }

    #[test]
    fn codex_both_exhausted_takes_the_later_reset() {
        let h = headers(&[
            ("x-codex-primary-used-percent", "100"),
            ("x-codex-primary-reset-after-seconds", "600"),
            ("x-codex-secondary-used-percent", "101"),
            ("x-codex-secondary-reset-after-seconds", "7200"),
        ]);
        assert_eq!(reset_at_unix_ms(&h, None, NOW), Some(NOW + 7_200_000));
    }

    #[test]
    fn codex_without_used_percent_takes_the_earliest() {
        let h = headers(&[
            ("x-codex-primary-reset-after-seconds", "900"),
            ("x-codex-secondary-reset-after-seconds", "300"),
        ]);
        assert_eq!(reset_at_unix_ms(&h, None, NOW), Some(NOW + 300_000));
        let h = headers(&[("x-codex-secondary-reset-at", "1766000100")]);
        assert_eq!(reset_at_unix_ms(&h, None, NOW), Some(NOW + 100_000));
    }

    #[test]
    fn codex_windows_with_room_left_say_nothing_about_a_burst_429() {
        let h = headers(&[
            ("x-codex-primary-used-percent", "12"),
            ("x-codex-primary-reset-after-seconds", "14400"),
            ("x-codex-secondary-used-percent", "3"),
            ("x-codex-secondary-reset-after-seconds", "600000"),
            ("retry-after", "2"),
        ]);
        assert_eq!(reset_at_unix_ms(&h, None, NOW), Some(NOW + 2_000));
        let h = headers(&[
            ("x-codex-primary-used-percent", "99.5"),
            ("x-codex-primary-reset-after-seconds", "14400"),
        ]);
        assert_eq!(
            reset_at_unix_ms(&h, None, NOW),
            None,
            "the caller's backoff applies"
        );
    }

    #[test]
    fn api_rate_limit_headers_give_the_reset_of_the_exhausted_limit() {
        let h = headers(&[
            ("x-ratelimit-remaining-requests", "0"),
            ("x-ratelimit-reset-requests", "6m0s"),
            ("x-ratelimit-remaining-tokens", "149000"),
            ("x-ratelimit-reset-tokens", "20ms"),
        ]);
        assert_eq!(reset_at_unix_ms(&h, None, NOW), Some(NOW + 360_000));
        let h = headers(&[
            ("x-ratelimit-remaining-requests", "0"),
            ("x-ratelimit-reset-requests", "1s"),
            ("x-ratelimit-remaining-tokens", "0"),
            ("x-ratelimit-reset-tokens", "1m30s"),
        ]);
        assert_eq!(reset_at_unix_ms(&h, None, NOW), Some(NOW + 90_000));
        let h = headers(&[("x-ratelimit-reset-images", "12s")]);
        assert_eq!(reset_at_unix_ms(&h, None, NOW), Some(NOW + 12_000));
        let h = headers(&[
            ("x-ratelimit-remaining-requests", "4"),
            ("x-ratelimit-reset-requests", "6m0s"),
        ]);
        assert_eq!(reset_at_unix_ms(&h, None, NOW), None);
        let h = headers(&[("x-ratelimit-reset-requests", "6m0s"), ("retry-after", "3")]);
        assert_eq!(
            reset_at_unix_ms(&h, None, NOW),
            Some(NOW + 3_000),
            "retry-after first"
        );
    }

    #[test]
    fn codex_windows_win_over_retry_after() {
        let h = headers(&[
            ("x-codex-primary-reset-after-seconds", "900"),
            ("retry-after", "5"),
        ]);
        assert_eq!(reset_at_unix_ms(&h, None, NOW), Some(NOW + 900_000));
    }

    #[test]
    fn message_try_again_in_is_the_last_resort() {
        let err = error(
            json!({"message": "Rate limit reached for gpt-image-2 on images per min (IPM): Limit 5, Used 5, Requested 1. Please try again in 12s. Visit https://x"}),
        );
        assert_eq!(
            reset_at_unix_ms(&HeaderMap::new(), Some(&err), NOW),
            Some(NOW + 12_000)
        );
        let err = error(json!({"message": "Please try again in 1m30.5s."}));
        assert_eq!(
            reset_at_unix_ms(&HeaderMap::new(), Some(&err), NOW),
            Some(NOW + 90_500)
        );
        let err = error(json!({"message": "Please try again in 250ms."}));
        assert_eq!(
            reset_at_unix_ms(&HeaderMap::new(), Some(&err), NOW),
            Some(NOW + 250)
        );
        let err = error(json!({"message": "Please try again in a while."}));
        assert_eq!(reset_at_unix_ms(&HeaderMap::new(), Some(&err), NOW), None);
    }

    #[test]
    fn garbage_is_ignored() {
        let h = headers(&[
            ("retry-after-ms", "-5"),
            ("x-codex-primary-reset-after-seconds", "soon"),
        ]);
        let err = error(json!({"resets_at": "tomorrow", "resets_in_seconds": -3}));
        assert_eq!(reset_at_unix_ms(&h, Some(&err), NOW), None);
    }

    #[test]
    fn go_durations() {
        assert_eq!(parse_go_duration("1h2m3s"), Some(3723.0));
        assert_eq!(parse_go_duration("6m0s"), Some(360.0));
        assert_eq!(parse_go_duration("s"), None);
        assert_eq!(parse_go_duration("12"), None);
        assert_eq!(parse_go_duration(""), None);
    }
}

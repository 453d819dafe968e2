//! Fault injection: the kinds of failure the simulator can produce, the script set through the admin API,
//! and the choice of a fault for one request (header, then script, then random rate).

use std::fmt;
use std::str::FromStr;
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::config::SimConfig;

/// A failure the simulator can inject.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub enum FaultKind {
    /// 429 `usage_limit_reached` with `resets_in_seconds`/`resets_at` and `x-codex-*` headers
    /// (names: `429`, `usage_limit`, `usage_limit_reached`).
    UsageLimit,
    /// 429 `rate_limit_exceeded` with `retry-after` (names: `rate_limit`, `rate_limit_exceeded`).
    RateLimit,
    /// 500 `server_error`.
    Server500,
    /// 502 `server_error`.
    BadGateway502,
    /// 503 `server_error`.
    Unavailable503,
    /// 401 `invalid_api_key` (names: `401`, `invalid_api_key`).
    InvalidApiKey,
    /// Hold the request for the stall duration before answering normally.
    Stall,
    /// Send the first bytes (headers and the first event, or a JSON body up to a few bytes into
    /// its first image), then hold for the stall duration before the rest (names:
    /// `stall_mid_stream`, `stall_body`).
    StallMidStream,
    /// 400 `moderation_blocked` of type `image_generation_user_error` (names: `refusal`, `moderation_blocked`).
    Refusal,
    /// A Cloudflare-like 403 HTML page (`text/html`).
    Html403,
    /// A Cloudflare-like 502 HTML page (`text/html`).
    Html502,
    /// 200 with no image (an empty `data`, a stream without a completed event, a response without an
    /// image call).
    NoImage,
    /// 400 saying the main model is not supported, as the ChatGPT-subscription backend answers it
    /// (`{"detail": "The '<model>' model is not supported when using Codex with a ChatGPT account."}`;
    /// names: `model_unsupported`, `model_not_supported`, `model_not_found`). Give the rule a `model`
    /// to refuse only that main model.
    ModelUnsupported,
    /// A Responses stream that starts (`response.created`, `response.in_progress`) and then fails
    /// with `response.failed` carrying `rate_limit_exceeded` ("Please try again in <retry after>s"),
    /// as the ChatGPT-subscription backend reports limits met mid-call (names:
    /// `rate_limit_in_stream`, `response_failed_rate_limit`). Other requests are answered normally,
    /// though a scripted rule counts them down: give it `"path": "/v1/responses"`.
    RateLimitInStream,
    /// A Responses stream that starts (`response.created`, `response.in_progress`) and then fails
    /// with `response.failed` carrying `server_error`, as an upstream whose model fails after it
    /// accepted the call reports it (names: `server_error_in_stream`, `response_failed_server_error`).
    /// Other requests are answered normally, though a scripted rule counts them down: give it
    /// `"path": "/v1/responses"`.
    ServerErrorInStream,
    /// An Images answer cut short, as a broken upstream or a proxy in front of it may send it: a
    /// JSON document that ends halfway through its first image's base64, with a `content-length`
    /// declaring that shorter length, or an event stream that ends halfway through its second
    /// event (names: `truncated_body`, `truncated`, `cut_body`).
    TruncatedBody,
    /// A Responses answer whose image call reports no usage: the `tool_usage` of its envelope is
    /// left out, as upstream issues report image tokens coming back missing (names: `no_usage`,
    /// `missing_usage`). Images API answers are not affected.
    NoUsage,
    /// 200 with one image whatever `n` asked for, as an upstream may quietly answer `n` > 1
    /// (names: `one_image`, `fewer_images`). Responses answers are not affected (they make one).
    OneImage,
    /// A Responses stream whose image call runs (its partial images are sent) and then ends with
    /// `response.failed` carrying `image_content_policy_violation`, as an output check may refuse
    /// a finished image: the envelope reports the image's `tool_usage`, billed with no image
    /// (names: `refused_after_image`, `image_content_policy_violation`). Other answers are not
    /// affected: give the rule `"path": "/v1/responses"`.
    RefusedAfterImage,
}

impl FaultKind {
    /// Every kind, in a stable order.
    pub const ALL: [FaultKind; 19] = [
        Self::UsageLimit,
        Self::RateLimit,
        Self::Server500,
        Self::BadGateway502,
        Self::Unavailable503,
        Self::InvalidApiKey,
        Self::Stall,
        Self::StallMidStream,
        Self::Refusal,
        Self::Html403,
        Self::Html502,
        Self::NoImage,
        Self::ModelUnsupported,
        Self::RateLimitInStream,
        Self::ServerErrorInStream,
        Self::TruncatedBody,
        Self::NoUsage,
        Self::OneImage,
        Self::RefusedAfterImage,
    ];

    /// Canonical name.
    pub fn as_str(&self) -> &'static str {
        match self {
            Self::UsageLimit => "usage_limit",
            Self::RateLimit => "rate_limit",
            Self::Server500 => "500",
            Self::BadGateway502 => "502",
            Self::Unavailable503 => "503",
            Self::InvalidApiKey => "invalid_api_key",
            Self::Stall => "stall",
            Self::StallMidStream => "stall_mid_stream",
            Self::Refusal => "refusal",
            Self::Html403 => "html_403",
            Self::Html502 => "html_502",
            Self::NoImage => "no_image",
            Self::ModelUnsupported => "model_unsupported",
            Self::RateLimitInStream => "rate_limit_in_stream",
            Self::ServerErrorInStream => "server_error_in_stream",
            Self::TruncatedBody => "truncated_body",
            Self::NoUsage => "no_usage",
            Self::OneImage => "one_image",
            Self::RefusedAfterImage => "refused_after_image",
        }
    }
}

/// A fault name that is not known.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "unknown fault '{0}'; known: 429 (usage_limit), rate_limit, 500, 502, 503, 401 (invalid_api_key), stall, stall_mid_stream, refusal, html_403, html_502, no_image, model_unsupported, rate_limit_in_stream, server_error_in_stream, truncated_body, no_usage, one_image, refused_after_image"
)]
pub struct UnknownFault(pub String);

impl FromStr for FaultKind {
    type Err = UnknownFault;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Ok(match s.trim().to_ascii_lowercase().as_str() {
            "429" | "usage_limit" | "usage_limit_reached" => Self::UsageLimit,
            "rate_limit" | "rate_limit_exceeded" | "429_rate_limit" => Self::RateLimit,
            "500" | "server_error" => Self::Server500,
            "502" | "bad_gateway" => Self::BadGateway502,
            "503" | "unavailable" => Self::Unavailable503,
            "401" | "invalid_api_key" => Self::InvalidApiKey,
            "stall" => Self::Stall,
            "stall_mid_stream" | "stall_body" | "stall_stream" => Self::StallMidStream,
            "refusal" | "moderation_blocked" => Self::Refusal,
            "html_403" | "html403" => Self::Html403,
            "html_502" | "html502" => Self::Html502,
            "no_image" | "200_no_image" => Self::NoImage,
            "model_unsupported" | "model_not_supported" | "model_not_found" => Self::ModelUnsupported,
            "rate_limit_in_stream" | "response_failed_rate_limit" => Self::RateLimitInStream,
            "server_error_in_stream" | "response_failed_server_error" => Self::ServerErrorInStream,
            "truncated_body" | "truncated" | "cut_body" => Self::TruncatedBody,
            "no_usage" | "missing_usage" => Self::NoUsage,
            "one_image" | "fewer_images" => Self::OneImage,
            "refused_after_image" | "image_content_policy_violation" => Self::RefusedAfterImage,
            _ => return Err(UnknownFault(s.to_owned())),
        })
    }
}

impl TryFrom<String> for FaultKind {
    type Error = UnknownFault;

    fn try_from(value: String) -> Result<Self, Self::Error> {
        value.parse()
    }
}

impl From<FaultKind> for String {
    fn from(kind: FaultKind) -> Self {
        kind.as_str().to_owned()
    }
}

impl fmt::Display for FaultKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One entry of the fault script (`POST /sim/faults`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FaultRule {
    /// Bearer token the rule applies to; `null` or absent for every token.
    #[serde(default)]
    pub key: Option<String>,
    /// What to inject.
    pub fault: FaultKind,
    /// How many matching requests get the fault; absent means every one until `DELETE /sim/faults`.
    #[serde(default)]
    pub times: Option<u32>,
    /// How many matching requests pass untouched before the fault starts (e.g. the third of the
    /// three calls a subscription account makes for `n: 3`); none by default.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub after: Option<u32>,
    /// Only requests to this path (e.g. `/v1/images/edits`); absent means the three image endpoints.
    #[serde(default)]
    pub path: Option<String>,
    /// Only Responses requests whose main `model` is this one (checked once the body is read).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// `resets_in_seconds` for `usage_limit`.
    #[serde(default)]
    pub resets_in_seconds: Option<u64>,
    /// `retry-after` for `rate_limit` and 503, and the wait named by `rate_limit_in_stream`.
    #[serde(default)]
    pub retry_after_seconds: Option<u64>,
    /// Stall duration in milliseconds for `stall` and `stall_mid_stream`.
    #[serde(default)]
    pub stall_ms: Option<u64>,
    /// Milliseconds to wait before answering with the fault (an upstream that fails slowly, as a
    /// proxy answering 502 after its own timeout); none by default.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delay_ms: Option<u64>,
}

/// The fault chosen for one request, with its parameters resolved.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Fault {
    /// What to inject.
    pub kind: FaultKind,
    /// Seconds until the usage window resets (`usage_limit`).
    pub resets_in_seconds: u64,
    /// Seconds for `retry-after`.
    pub retry_after_seconds: u64,
    /// How long a stall lasts.
    pub stall: Duration,
    /// How long the fault's answer waits.
    pub delay: Duration,
}

impl Fault {
    /// `kind` with the parameters of `config`.
    pub fn from_config(kind: FaultKind, config: &SimConfig) -> Self {
        Self {
            kind,
            resets_in_seconds: config.usage_reset_seconds,
            retry_after_seconds: config.retry_after_seconds,
            stall: config.stall,
            delay: Duration::ZERO,
        }
    }

    fn from_rule(rule: &FaultRule, config: &SimConfig) -> Self {
        let base = Self::from_config(rule.fault, config);
        Self {
            resets_in_seconds: rule.resets_in_seconds.unwrap_or(base.resets_in_seconds),
            retry_after_seconds: rule.retry_after_seconds.unwrap_or(base.retry_after_seconds),
            stall: rule.stall_ms.map(Duration::from_millis).unwrap_or(base.stall),
            delay: rule.delay_ms.map_or(Duration::ZERO, Duration::from_millis),
            ..base
        }
    }
}

/// The paths faults apply to unless a rule names another.
pub const IMAGE_PATHS: [&str; 3] = ["/v1/images/generations", "/v1/images/edits", "/v1/responses"];

/// The fault script plus the random-fault generator.
#[derive(Debug)]
pub struct FaultBook {
    rules: Mutex<Vec<FaultRule>>,
    rng: Mutex<u64>,
}

impl FaultBook {
    /// An empty script whose random faults follow `seed`.
    pub fn new(seed: u64) -> Self {
        Self {
            rules: Mutex::new(Vec::new()),
            rng: Mutex::new(seed | 1),
        }
    }

    /// Appends rules; they are tried in order.
    pub fn add(&self, rules: impl IntoIterator<Item = FaultRule>) {
        self.rules
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .extend(rules);
    }

    /// Removes every rule.
    pub fn clear(&self) {
        self.rules.lock().unwrap_or_else(PoisonError::into_inner).clear();
    }

    /// The rules still active (with their remaining `times`).
    pub fn rules(&self) -> Vec<FaultRule> {
        self.rules.lock().unwrap_or_else(PoisonError::into_inner).clone()
    }

    /// Takes the first scripted fault matching `token` and `path` (rules without a `model`), counting
    /// down its `times`; otherwise draws a random fault for image paths with the configured rate.
    pub fn choose(&self, token: Option<&str>, path: &str, config: &SimConfig) -> Option<Fault> {
        if let Some(fault) = self.take_scripted(token, path, None, config) {
            return Some(fault);
        }
        let rate = config.clamped_fault_rate();
        if rate <= 0.0 || !IMAGE_PATHS.contains(&path) {
            return None;
        }
        let draw = self.next_random();
        if (draw >> 11) as f64 / (1u64 << 53) as f64 >= rate {
            return None;
        }
        let kinds = &config.random_faults;
        let kind = match kinds.len() {
            0 => FaultKind::Server500,
            len => kinds
                .get((draw % len as u64) as usize)
                .copied()
                .unwrap_or(FaultKind::Server500),
        };
        Some(Fault::from_config(kind, config))
    }

    /// Takes the first scripted fault of a rule for main model `model` matching `token` and `path`,
    /// counting down its `times` (no random fault: that was drawn by [`FaultBook::choose`]).
    pub fn choose_for_model(
        &self,
        token: Option<&str>,
        path: &str,
        model: &str,
        config: &SimConfig,
    ) -> Option<Fault> {
        self.take_scripted(token, path, Some(model), config)
    }

    fn take_scripted(
        &self,
        token: Option<&str>,
        path: &str,
        model: Option<&str>,
        config: &SimConfig,
    ) -> Option<Fault> {
        let mut rules = self.rules.lock().unwrap_or_else(PoisonError::into_inner);
        let position = rules.iter().position(|rule| {
            let model_matches = rule.model.as_deref() == model;
            let key_matches = rule.key.as_deref().is_none_or(|key| Some(key) == token);
            let path_matches = match &rule.path {
                Some(only) => only == path,
                None => IMAGE_PATHS.contains(&path),
            };
            model_matches && key_matches && path_matches && rule.times != Some(0)
        })?;
        let rule = rules.get_mut(position)?;
        if let Some(after) = rule.after.as_mut().filter(|after| **after > 0) {
            *after -= 1;
            return None;
        }
        let fault = Fault::from_rule(rule, config);
        if let Some(times) = rule.times.as_mut() {
            *times -= 1;
            if *times == 0 {
                rules.remove(position);
            }
        }
        Some(fault)
    }

    fn next_random(&self) -> u64 {
        let mut state = self.rng.lock().unwrap_or_else(PoisonError::into_inner);
        // xorshift64*
        let mut x = *state;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        *state = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
}

#[cfg(test)]
mod tests;

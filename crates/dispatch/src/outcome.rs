//! Outcomes of upstream calls and what they do to an account's health.
//!
//! The rules are a pure function ([`AccountHealth::apply`]) so every [`crate::PoolState`]
//! implementation applies exactly the same policy.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::clock::UnixMillis;

/// Which requests a rate limit applies to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LimitScope {
    /// Every request to the account.
    All,
    /// Image generation only: the account still serves other requests.
    ImagesOnly,
}

/// What happened to one upstream call, as classified by the upstream layer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// The call succeeded: resets every streak and closes an open circuit breaker.
    Success,
    /// 429: cool down until `reset_at` (the reset of the window that is exhausted, not the
    /// longest one); without a reset, a backoff that grows on repeats.
    RateLimited {
        /// When the exhausted window resets, if the upstream said.
        reset_at: Option<UnixMillis>,
        /// Which requests the limit blocks.
        scope: LimitScope,
    },
    /// Credentials rejected after a refresh already failed: the account needs a manual fix.
    AuthFailed {
        /// Why, for the operator (never a secret).
        reason: String,
    },
    /// HTTP 403. A JSON body comes from the upstream itself: short cooldown, and repeated ones disable
    /// the account. An HTML page comes from a proxy in front of it: not held against the account.
    Forbidden {
        /// Whether the body was JSON.
        json_body: bool,
        /// Short description for the operator.
        detail: String,
    },
    /// Network failure, timeout before the first byte, 502/503/504: a streak opens the breaker.
    Transient {
        /// Short description for the operator.
        detail: String,
    },
    /// 400 validation or content-policy refusal: the client's fault, no penalty.
    Invalid,
}

/// Tunables of the outcome rules.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CooldownPolicy {
    /// First cooldown after a 429 without reset information (default 30 s).
    pub rate_limit_base: Duration,
    /// Cap of the doubling 429 cooldown (default 10 min).
    pub rate_limit_cap: Duration,
    /// Shortest cooldown after a 429 whose reset is already past or imminent (default 1 s).
    pub min_reset_cooldown: Duration,
    /// Cooldown after a JSON 403 (default 60 s).
    pub forbidden_cooldown: Duration,
    /// Consecutive JSON 403s that disable the account (default 3).
    pub forbidden_disable_after: u32,
    /// Consecutive transient failures that open the circuit breaker (default 3).
    pub breaker_after: u32,
    /// How long an open breaker keeps the account out (default 30 s).
    pub breaker_cooldown: Duration,
}

impl Default for CooldownPolicy {
    fn default() -> Self {
        Self {
            rate_limit_base: Duration::from_secs(30),
            rate_limit_cap: Duration::from_secs(600),
            min_reset_cooldown: Duration::from_secs(1),
            forbidden_cooldown: Duration::from_secs(60),
            forbidden_disable_after: 3,
            breaker_after: 3,
            breaker_cooldown: Duration::from_secs(30),
        }
    }
}

/// Why an account is cooling down.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CooldownKind {
    /// A 429.
    RateLimited,
    /// A JSON 403.
    Forbidden,
    /// A streak of transient failures opened the breaker.
    CircuitOpen,
}

/// A cooldown in force until `until`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Cooldown {
    /// End of the cooldown.
    pub until: UnixMillis,
    /// Kind of cause.
    pub kind: CooldownKind,
    /// Human-readable cause.
    pub reason: String,
    /// The end of a rate limit still in force when this longer cooldown of another kind replaced
    /// it: a success that ends this cooldown leaves the rate limit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate_limited_until: Option<UnixMillis>,
}

/// Health status that only an operator (or a spec reload with a reset) clears.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(tag = "state", rename_all = "snake_case")]
pub enum AccountStatus {
    /// Usable.
    #[default]
    Ok,
    /// Credentials failed even after a refresh.
    Error {
        /// Why.
        reason: String,
    },
    /// Disabled after repeated upstream 403s.
    Disabled {
        /// Why.
        reason: String,
    },
}

/// The most recent failure of an account.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LastError {
    /// When it was recorded.
    pub at: UnixMillis,
    /// What it was.
    pub message: String,
}

/// Everything the outcomes have taught the pool about one account.
///
/// Serialisable so a shared backend can store it (missing fields read as their defaults, so a
/// value written by an older version still loads).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct AccountHealth {
    /// Status requiring manual action when not `Ok`.
    pub status: AccountStatus,
    /// Cooldown blocking every request.
    pub cooldown_all: Option<Cooldown>,
    /// Cooldown blocking image requests only.
    pub cooldown_images: Option<Cooldown>,
    /// 429s since the last success.
    pub rate_limit_streak: u32,
    /// JSON 403s since the last success.
    pub forbidden_streak: u32,
    /// Transient failures since the last success.
    pub transient_streak: u32,
    /// Successful calls.
    pub successes: u64,
    /// Failed calls (every outcome except success and invalid).
    pub failures: u64,
    /// Most recent failure.
    pub last_error: Option<LastError>,
}

impl AccountHealth {
    /// Whether the status allows selection at all.
    #[must_use]
    pub fn is_usable(&self) -> bool {
        self.status == AccountStatus::Ok
    }

    /// End of the open circuit breaker that keeps the account out, if the breaker is its
    /// cooldown: once that time passes the breaker is half-open until a success closes it or a
    /// failure opens it again, and the account takes one request at a time (a probe).
    #[must_use]
    pub fn breaker_until(&self) -> Option<UnixMillis> {
        self.cooldown_all
            .as_ref()
            .filter(|c| c.kind == CooldownKind::CircuitOpen)
            .map(|c| c.until)
    }

    /// End of the cooldown that blocks a request (`image` or not) at `now`, if any.
    #[must_use]
    pub fn blocked_until(&self, image: bool, now: UnixMillis) -> Option<UnixMillis> {
        let all = self.cooldown_all.as_ref().map(|c| c.until).filter(|&u| u > now);
        let images = if image {
            self.cooldown_images
                .as_ref()
                .map(|c| c.until)
                .filter(|&u| u > now)
        } else {
            None
        };
        all.max(images)
    }

    /// The health after an operator clears it: cooldowns, streaks and error status gone; success
    /// and failure counts and the last error kept.
    #[must_use]
    pub fn cleared(self) -> Self {
        Self {
            successes: self.successes,
            failures: self.failures,
            last_error: self.last_error,
            ..Self::default()
        }
    }

    /// Applies the rules for `outcome` observed at `now`.
    pub fn apply(&mut self, outcome: &Outcome, policy: &CooldownPolicy, now: UnixMillis) {
        match outcome {
            Outcome::Success => {
                self.successes = self.successes.saturating_add(1);
                self.rate_limit_streak = 0;
                self.forbidden_streak = 0;
                self.transient_streak = 0;
                for slot in [&mut self.cooldown_all, &mut self.cooldown_images] {
                    if let Some(cooldown) = slot.as_ref()
                        && cooldown.kind != CooldownKind::RateLimited
                    {
                        *slot = cooldown.rate_limit_beneath(now);
                    }
                }
            }
            Outcome::RateLimited { reset_at, scope } => {
                self.rate_limit_streak = self.rate_limit_streak.saturating_add(1);
                let (until, reason) = match reset_at {
                    Some(reset) => {
                        let until = (*reset).max(now.plus(policy.min_reset_cooldown));
                        (
                            until,
                            format!("rate limited until the upstream reset ({})", reset.0),
                        )
                    }
                    None => {
                        let backoff = rate_limit_backoff(policy, self.rate_limit_streak);
                        let reason = format!(
                            "rate limited without reset information ({} in a row, backing off {} s)",
                            self.rate_limit_streak,
                            backoff.as_secs()
                        );
                        (now.plus(backoff), reason)
                    }
                };
                let slot = match scope {
                    LimitScope::All => &mut self.cooldown_all,
                    LimitScope::ImagesOnly => &mut self.cooldown_images,
                };
                extend(
                    slot,
                    Cooldown {
                        until,
                        kind: CooldownKind::RateLimited,
                        reason: reason.clone(),
                        rate_limited_until: None,
                    },
                    now,
                );
                self.fail(now, reason);
            }
            Outcome::AuthFailed { reason } => {
                self.status = AccountStatus::Error {
                    reason: reason.clone(),
                };
                self.fail(now, format!("authentication failed: {reason}"));
            }
            Outcome::Forbidden {
                json_body: false,
                detail,
            } => {
                self.fail(
                    now,
                    format!("HTML 403 from a proxy, not held against the account: {detail}"),
                );
            }
            Outcome::Forbidden {
                json_body: true,
                detail,
            } => {
                self.forbidden_streak = self.forbidden_streak.saturating_add(1);
                let message = format!("403 from upstream ({} in a row): {detail}", self.forbidden_streak);
                if self.forbidden_streak >= policy.forbidden_disable_after {
                    self.status = AccountStatus::Disabled {
                        reason: message.clone(),
                    };
                } else {
                    let until = now.plus(policy.forbidden_cooldown);
                    let cooldown = Cooldown {
                        until,
                        kind: CooldownKind::Forbidden,
                        reason: message.clone(),
                        rate_limited_until: None,
                    };
                    extend(&mut self.cooldown_all, cooldown, now);
                }
                self.fail(now, message);
            }
            Outcome::Transient { detail } => {
                self.transient_streak = self.transient_streak.saturating_add(1);
                let message = format!("transient failure ({} in a row): {detail}", self.transient_streak);
                if self.transient_streak >= policy.breaker_after {
                    let until = now.plus(policy.breaker_cooldown);
                    let reason = format!("circuit breaker open after {message}");
                    extend(
                        &mut self.cooldown_all,
                        Cooldown {
                            until,
                            kind: CooldownKind::CircuitOpen,
                            reason,
                            rate_limited_until: None,
                        },
                        now,
                    );
                }
                self.fail(now, message);
            }
            Outcome::Invalid => {}
        }
    }

    fn fail(&mut self, now: UnixMillis, message: String) {
        self.failures = self.failures.saturating_add(1);
        self.last_error = Some(LastError { at: now, message });
    }
}

/// The cooldown after the `streak`-th 429 in a row without reset information: the base doubled
/// per repeat, capped.
#[must_use]
pub fn rate_limit_backoff(policy: &CooldownPolicy, streak: u32) -> Duration {
    let doublings = streak.saturating_sub(1).min(32);
    let factor = 1u32.checked_shl(doublings).unwrap_or(u32::MAX);
    policy
        .rate_limit_base
        .saturating_mul(factor)
        .min(policy.rate_limit_cap)
}

/// Puts `new` in `slot` unless a cooldown still in force there lasts at least as long. A rate limit
/// still in force that a cooldown of another kind replaces is kept in it
/// ([`Cooldown::rate_limited_until`]).
fn extend(slot: &mut Option<Cooldown>, mut new: Cooldown, now: UnixMillis) {
    if let Some(old) = slot.as_mut()
        && old.until > now
        && old.until >= new.until
    {
        // A rate limit under a longer cooldown of another kind is kept in it.
        if new.kind == CooldownKind::RateLimited && old.kind != CooldownKind::RateLimited {
            old.rate_limited_until = old.rate_limited_until.max(Some(new.until));
        }
        return;
    }
    if new.kind != CooldownKind::RateLimited {
        new.rate_limited_until = slot
            .as_ref()
            .and_then(|old| old.rate_limit_beneath(now))
            .map(|limit| limit.until);
    }
    *slot = Some(new);
}

impl Cooldown {
    /// The rate limit in force at `now` under this cooldown: itself if it is one, else the one it
    /// replaced.
    fn rate_limit_beneath(&self, now: UnixMillis) -> Option<Cooldown> {
        if self.kind == CooldownKind::RateLimited {
            return (self.until > now).then(|| self.clone());
        }
        let until = self.rate_limited_until.filter(|until| *until > now)?;
        Some(Cooldown {
            until,
            kind: CooldownKind::RateLimited,
            reason: format!("rate limited until the upstream reset ({})", until.0),
            rate_limited_until: None,
        })
    }
}

#[cfg(test)]
#[path = "outcome_tests.rs"]
mod tests;

//! Limits on failed sign-ins: per user name from one client address, per user name from all of
//! them, and per client address.

use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use parking_lot::Mutex;

use crate::session::SessionError;

/// Entries kept before stale ones are swept.
const SWEEP_THRESHOLD: usize = 4096;

/// How many failed sign-ins are allowed within a sliding window.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LoginLimit {
    /// Failures allowed per user name from one client address in `window`; the next attempt for
    /// that name from there is refused until the oldest failure leaves the window.
    pub max_failures: u32,
    /// Failures allowed per user name from all addresses together in `window` (higher: guesses
    /// from many addresses are bounded, while one address alone cannot lock a user out).
    pub max_failures_per_name: u32,
    /// Failures allowed per client address in `window` (higher: several people may share an
    /// address behind a NAT or proxy). Only counted when the server provides the address
    /// (`into_make_service_with_connect_info`).
    pub max_failures_per_address: u32,
    /// The window.
    pub window: Duration,
}

impl Default for LoginLimit {
    /// 5 failures per user name from one address, 50 per user name and 20 per address, per
    /// 5 minutes.
    fn default() -> Self {
        Self {
            max_failures: 5,
            max_failures_per_name: 50,
            max_failures_per_address: 20,
            window: Duration::from_secs(300),
        }
    }
}

/// Something failures are counted against, with its own allowance.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Subject {
    key: String,
    max: u32,
}

/// Longest user name counted under its own name: no user can have a longer one (the store allows
/// 200 characters), so longer ones are counted together, and a key's size stays bounded.
const LONGEST_NAME: usize = 200;

/// A user name as counted: trimmed and case-insensitive.
fn counted_name(name: &str) -> String {
    let name = name.trim();
    if name.chars().count() > LONGEST_NAME {
        return "(too long)".to_owned();
    }
    name.to_lowercase()
}

impl Subject {
    /// A user name (case-insensitive), from every address together.
    pub fn user(name: &str, limit: &LoginLimit) -> Self {
        Self {
            key: format!("user:{}", counted_name(name)),
            max: limit.max_failures_per_name,
        }
    }

    /// A user name (case-insensitive) from one client address (`ip`; empty when unknown).
    pub fn user_from(name: &str, ip: &str, limit: &LoginLimit) -> Self {
        Self {
            key: format!("from:{ip}:user:{}", counted_name(name)),
            max: limit.max_failures,
        }
    }

    /// A client address.
    pub fn address(ip: &str, limit: &LoginLimit) -> Self {
        Self {
            key: format!("ip:{ip}"),
            max: limit.max_failures_per_address,
        }
    }

    /// What it is counted under: `from:<address>:user:<name>`, `user:<name>` or `ip:<address>`.
    pub fn key(&self) -> &str {
        &self.key
    }

    /// Failures allowed in the window.
    pub fn max(&self) -> u32 {
        self.max
    }
}

/// Failed sign-ins counted where several replicas see them (the gateway's Redis), with the same
/// rules as [`LoginLimit`] describes: an attempt counts before its password is checked, in one
/// step with the check of the limits, and a right password takes it back.
#[async_trait]
pub trait SharedLoginCounter: Send + Sync + fmt::Debug {
    /// Counts an attempt against every subject unless one is at its limit: the attempt's id (for
    /// [`SharedLoginCounter::forgive`]), or how long until an attempt is allowed.
    async fn begin_attempt(&self, subjects: &[Subject]) -> Result<Result<String, Duration>, SessionError>;
    /// Takes back the attempt `id` (its password was right).
    async fn forgive(&self, subjects: &[Subject], id: &str) -> Result<(), SessionError>;
    /// Forgets the failures of one subject (after a successful sign-in).
    async fn clear(&self, subject: &Subject) -> Result<(), SessionError>;
}

/// Where the console counts failed sign-ins: in this process, or shared by replicas.
///
/// Shared, only user names are counted together. Addresses stay per replica: behind a load
/// balancer every client has the balancer's address, and one address allowance for the whole
/// deployment would let one client lock everyone out of the console.
#[derive(Debug, Clone)]
pub(crate) enum LoginCounting {
    Local(Arc<LoginLimiter>),
    Shared {
        users: Arc<dyn SharedLoginCounter>,
        addresses: Arc<LoginLimiter>,
    },
}

/// An attempt counted by [`LoginCounting::begin_attempt`].
#[derive(Debug, Clone)]
pub(crate) enum Attempt {
    Local(Instant),
    Shared { id: String, addresses_at: Instant },
}

impl LoginCounting {
    pub(crate) async fn begin_attempt(
        &self,
        subjects: &[Subject],
    ) -> Result<Result<Attempt, Duration>, SessionError> {
        match self {
            Self::Local(limiter) => Ok(limiter.begin_attempt(subjects).map(Attempt::Local)),
            Self::Shared { users, addresses } => {
                let (names, ips) = split_subjects(subjects);
                let addresses_at = match addresses.begin_attempt(&ips) {
                    Ok(at) => at,
                    Err(wait) => return Ok(Err(wait)),
                };
                match users.begin_attempt(&names).await {
                    Ok(Ok(id)) => Ok(Ok(Attempt::Shared { id, addresses_at })),
                    // Not let through: not counted against the address either.
                    refused => {
                        addresses.forgive(&ips, addresses_at);
                        refused.map(|answer| answer.map(|id| Attempt::Shared { id, addresses_at }))
                    }
                }
            }
        }
    }

    /// Takes back `attempt` without deciding it: its password could not be checked (the database
    /// or Redis was out of reach), so it counts neither as a failure nor as a success. Best
    /// effort: what cannot be taken back from Redis stays counted.
    pub(crate) async fn withdraw(&self, subjects: &[Subject], attempt: Attempt) {
        match (self, attempt) {
            (Self::Local(limiter), Attempt::Local(at)) => limiter.forgive(subjects, at),
            (Self::Shared { users, addresses }, Attempt::Shared { id, addresses_at }) => {
                let (names, ips) = split_subjects(subjects);
                addresses.forgive(&ips, addresses_at);
                if let Err(error) = users.forgive(&names, &id).await {
                    tracing::warn!(%error, "could not take back an unchecked sign-in attempt");
                }
            }
            // An attempt is begun and ended on the same counting.
            _ => {}
        }
    }

    /// Takes back `attempt` (its password was right) and forgets the failures of its user name
    /// (from every address, and from this one).
    pub(crate) async fn succeeded(&self, subjects: &[Subject], attempt: Attempt) -> Result<(), SessionError> {
        let (names, ips) = split_subjects(subjects);
        match (self, attempt) {
            (Self::Local(limiter), Attempt::Local(at)) => {
                limiter.forgive(subjects, at);
                names.iter().for_each(|name| limiter.clear(name));
            }
            (Self::Shared { users, addresses }, Attempt::Shared { id, addresses_at }) => {
                addresses.forgive(&ips, addresses_at);
                users.forgive(&names, &id).await?;
                for name in &names {
                    users.clear(name).await?;
                }
            }
            // An attempt is begun and ended on the same counting.
            _ => {}
        }
        Ok(())
    }
}

/// User names and addresses, apart.
fn split_subjects(subjects: &[Subject]) -> (Vec<Subject>, Vec<Subject>) {
    subjects
        .iter()
        .cloned()
        .partition(|subject| !subject.key.starts_with("ip:"))
}

/// Recent failures per subject (see [`Subject::key`]).
#[derive(Debug)]
pub(crate) struct LoginLimiter {
    limit: LoginLimit,
    failures: Mutex<HashMap<String, Vec<Instant>>>,
}

impl LoginLimiter {
    pub fn new(limit: LoginLimit) -> Self {
        Self {
            limit,
            failures: Mutex::new(HashMap::new()),
        }
    }

    #[cfg(test)]
    fn retry_after_at(&self, subjects: &[Subject], now: Instant) -> Option<Duration> {
        let failures = self.failures.lock();
        self.wait_in(&failures, subjects, now)
    }

    fn wait_in(
        &self,
        failures: &HashMap<String, Vec<Instant>>,
        subjects: &[Subject],
        now: Instant,
    ) -> Option<Duration> {
        subjects
            .iter()
            .filter_map(|subject| {
                let max = usize::try_from(subject.max).unwrap_or(usize::MAX);
                let recent: Vec<&Instant> = failures
                    .get(&subject.key)?
                    .iter()
                    .filter(|at| now.duration_since(**at) < self.limit.window)
                    .collect();
                if recent.len() < max {
                    return None;
                }
                // Allowed again when the oldest counted failure leaves the window.
                let oldest = recent.iter().min()?;
                Some(self.limit.window.saturating_sub(now.duration_since(**oldest)))
            })
            .max()
    }

    /// Counts a sign-in attempt as a failure against every subject before its password is
    /// checked, in one step with the check of the limit; returns when it was counted, for
    /// [`Self::forgive`] if the password was right. Counted afterwards, attempts sent together
    /// would all pass the check before any was counted. `Err` is how long until one is allowed.
    pub fn begin_attempt(&self, subjects: &[Subject]) -> Result<Instant, Duration> {
        let now = Instant::now();
        let mut failures = self.failures.lock();
        if let Some(wait) = self.wait_in(&failures, subjects, now) {
            return Err(wait);
        }
        self.push_failure(&mut failures, subjects, now);
        Ok(now)
    }

    /// Takes back the failure [`Self::begin_attempt`] counted at `at` (the password was right).
    pub fn forgive(&self, subjects: &[Subject], at: Instant) {
        let mut failures = self.failures.lock();
        for subject in subjects {
            if let Some(times) = failures.get_mut(&subject.key)
                && let Some(position) = times.iter().position(|t| *t == at)
            {
                times.remove(position);
            }
        }
    }

    #[cfg(test)]
    fn record_failure_at(&self, subjects: &[Subject], now: Instant) {
        let mut failures = self.failures.lock();
        self.push_failure(&mut failures, subjects, now);
    }

    fn push_failure(&self, failures: &mut HashMap<String, Vec<Instant>>, subjects: &[Subject], now: Instant) {
        let window = self.limit.window;
        if failures.len() >= SWEEP_THRESHOLD {
            failures.retain(|_, times| times.iter().any(|at| now.duration_since(*at) < window));
        }
        for subject in subjects {
            let max = usize::try_from(subject.max).unwrap_or(usize::MAX);
            let times = failures.entry(subject.key.clone()).or_default();
            times.retain(|at| now.duration_since(*at) < window);
            times.push(now);
            // Only the newest `max` matter.
            if times.len() > max {
                let excess = times.len() - max;
                times.drain(..excess);
            }
        }
    }

    /// Forgets the failures of one subject (after a successful sign-in).
    pub fn clear(&self, subject: &Subject) {
        self.failures.lock().remove(&subject.key);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LIMIT: LoginLimit = LoginLimit {
        max_failures: 3,
        max_failures_per_name: 3,
        max_failures_per_address: 5,
        window: Duration::from_secs(60),
    };

    fn limiter() -> LoginLimiter {
        LoginLimiter::new(LIMIT)
    }

    fn user(name: &str) -> Subject {
        Subject::user(name, &LIMIT)
    }

    fn address(ip: &str) -> Subject {
        Subject::address(ip, &LIMIT)
    }

    #[test]
    fn an_attempt_counts_before_its_password_is_checked_and_a_right_one_is_taken_back() {
        let limiter = limiter();
        let subjects = [user("alice"), address("10.0.0.1")];
        let first = limiter.begin_attempt(&subjects).unwrap();
        let _second = limiter.begin_attempt(&subjects).unwrap();
        let _third = limiter.begin_attempt(&subjects).unwrap();
        assert!(
            limiter.begin_attempt(&subjects).is_err(),
            "three still being checked"
        );
        limiter.forgive(&subjects, first);
        assert!(
            limiter.begin_attempt(&subjects).is_ok(),
            "the right one no longer counts"
        );
        assert!(limiter.begin_attempt(&subjects).is_err());
    }

    #[test]
    fn blocks_a_user_name_after_max_failures_until_the_oldest_expires() {
        let limiter = limiter();
        let subjects = [user("Alice"), address("10.0.0.1")];
        let start = Instant::now();
        for i in 0..3 {
            assert_eq!(
                limiter.retry_after_at(&subjects, start + Duration::from_secs(i)),
                None
            );
            limiter.record_failure_at(&subjects, start + Duration::from_secs(i));
        }
        let wait = limiter
            .retry_after_at(&subjects, start + Duration::from_secs(10))
            .unwrap();
        assert_eq!(wait, Duration::from_secs(50));
        // The same user name from another address is still blocked (names are case-insensitive).
        let later = start + Duration::from_secs(10);
        assert!(
            limiter
                .retry_after_at(&[user("alice"), address("10.0.0.2")], later)
                .is_some()
        );
        // The address has allowance left for other users.
        assert_eq!(
            limiter.retry_after_at(&[user("bob"), address("10.0.0.1")], later),
            None
        );
        // After the window the oldest failure no longer counts.
        assert_eq!(
            limiter.retry_after_at(&subjects, start + Duration::from_secs(60)),
            None
        );
    }

    #[test]
    fn blocks_an_address_that_tries_many_names() {
        let limiter = limiter();
        let now = Instant::now();
        for name in ["a", "b", "c", "d", "e"] {
            assert_eq!(
                limiter.retry_after_at(&[user(name), address("10.0.0.9")], now),
                None
            );
            limiter.record_failure_at(&[user(name), address("10.0.0.9")], now);
        }
        assert!(
            limiter
                .retry_after_at(&[user("f"), address("10.0.0.9")], now)
                .is_some()
        );
        assert_eq!(
            limiter.retry_after_at(&[user("f"), address("10.0.0.8")], now),
            None
        );
    }

    #[test]
    fn clear_forgets_one_subject() {
        let limiter = limiter();
        let now = Instant::now();
        for _ in 0..3 {
            limiter.record_failure_at(&[user("alice")], now);
        }
        assert!(limiter.retry_after_at(&[user("alice")], now).is_some());
        limiter.clear(&user("alice"));
        assert_eq!(limiter.retry_after_at(&[user("alice")], now), None);
    }
}

//! The failover loop: pick an account, call it, learn from the outcome, try another.
//!
//! A request moves to another account on rate limits, auth failures, transient errors and unusable
//! answers, at most `max_switches` times and with at most `transient_retries` retries of transient
//! errors and unusable answers, with a small jittered pause before such a retry, and all within the
//! request's one deadline. Validation and policy errors go back to the client untouched and never
//! cost the account anything. Nothing here runs once a byte reached the client: the handlers only
//! start answering with the [`Relayed`] reply in hand. A stream is handed over once its first event
//! is in (or after a short wait), so one that fails before it is failed over too.

mod deadline;
mod first_event;
pub mod held;
pub mod json;
pub mod json_stream;
mod outcome;
pub mod stream;

use std::sync::Arc;
use std::time::Duration;

use imagegate_codec::ApiError;
use imagegate_dispatch::{DispatchRequest, GroupId, Lease, PoolError, SizeClass};
use imagegate_domain::ErrorKind;
use imagegate_upstream::{Failure, FailureKind, Reply, SpentSoFar, UpstreamCall};

use crate::http::error::HttpError;
use crate::state::AppState;
use crate::usage::UsageRecorder;

pub use deadline::Deadline;
use first_event::FirstEventWait;
pub use outcome::outcome_of_late;
use outcome::outcome_of_try;

/// One call to relay.
#[derive(Debug, Clone, Copy)]
pub struct RelayRequest<'a> {
    pub group: &'a GroupId,
    pub class: SizeClass,
    pub image: bool,
    pub call: UpstreamCall<'a>,
}

/// A reply from an account, with the lease that keeps the account's slot while it is relayed.
#[derive(Debug)]
pub struct Relayed {
    pub reply: Reply,
    pub lease: Lease,
    /// Whether the reply came from a try made after others, with what time they left.
    pub later_try: bool,
}

/// Runs the failover loop for one request.
///
/// On failure, the error for the client. `usage` learns each account as it is called, each switch
/// to another account, and the time spent in upstream calls as it is spent, so a request abandoned in the middle of a call (the client left) is still recorded with
/// the account it was using. After a reply whose body is still coming (events, or a relayed JSON
/// body), the upstream time stays open until the caller closes it.
pub async fn relay(
    app: &AppState,
    request: RelayRequest<'_>,
    deadline: &mut Deadline,
    usage: &mut UsageRecorder,
) -> Result<Relayed, HttpError> {
    let failover = &app.config.failover;
    let mut tried = Vec::new();
    let mut switches = 0u32;
    let mut transient_retries = 0u32;
    let mut last: Option<Failure> = None;
    // The earliest reset of the accounts this request found limited: the client may come back
    // then, whichever account limited it last.
    let mut earliest_reset: Option<u64> = None;
    let mut first_event = FirstEventWait::new(app.config.first_event_wait());
    loop {
        let dispatch = DispatchRequest {
            group: request.group.clone(),
            class: request.class,
            image: request.image,
            exclude: tried.clone(),
        };
        let asked = std::time::Instant::now();
        let acquired = app.dispatcher.acquire(&dispatch).await;
        usage.waited_for_account(asked.elapsed());
        let lease = match acquired {
            Ok(lease) => lease,
            Err(err) => return Err(noted(pool_failure(err, last, earliest_reset), usage)),
        };
        let account = lease.account().clone();
        let Some(target) = app.accounts.target(&account) else {
            tried.push(account);
            continue;
        };
        // The request's one deadline, over all its tries: a try after a slow failure gets what
        // is left, and none is made once nothing is (a wait for a free account can outlast it).
        let later_try = deadline.started();
        let time_left = deadline.start();
        if later_try && time_left.is_zero() {
            drop(lease);
            let error = out_of_time(last.as_ref(), earliest_reset, deadline.budget());
            return Err(noted(error, usage));
        }
        usage.account(account.as_str().parse::<i64>().ok());
        usage.upstream_started();
        let spent = Arc::new(SpentSoFar::default());
        usage.call_reports_into(Arc::clone(&spent));
        let answer = match app
            .upstream
            .call_reporting(&target, request.call, time_left, &spent)
            .await
        {
            Ok(reply) => first_event.settle(reply).await,
            failed => failed,
        };
        match answer {
            Ok(reply) => {
                if reply.in_hand() {
                    // The body is in memory whole: the upstream's part is over, and it succeeded.
                    // Recorded apart from this request: a client leaving during a shared pool's
                    // round trip would otherwise drop the answer, whose usage is read only as it
                    // is sent.
                    usage.upstream_closed();
                    let pool = Arc::clone(&app.dispatcher);
                    let succeeded = account.clone();
                    finish_apart(async move {
                        let outcome = imagegate_dispatch::Outcome::Success;
                        if let Err(err) = pool.record_outcome(&succeeded, &outcome).await {
                            tracing::error!(error = %err, "could not record an upstream outcome");
                        }
                    });
                }
                // From here to the reply's own usage there is no await, so no client can leave
                // in between: what the call made is no longer followed.
                usage.call_returned();
                // Events and relayed bodies count as a success only once they end cleanly (their
                // relays record it): an account whose answers fail right after the headers must
                // still reach its circuit breaker.
                return Ok(Relayed {
                    reply,
                    lease,
                    later_try,
                });
            }
            Err(failure) => {
                // The failure says what the call made (`failure.spent`).
                usage.call_returned();
                usage.upstream_closed();
                if let Some(at) = failure.reset_at_unix_ms() {
                    earliest_reset = Some(earliest_reset.map_or(at, |earliest| earliest.min(at)));
                }
                // Images made before the failure are lost with it, but the account spent them; a
                // `response.failed` that ended the call says what it billed.
                stream::record_failure_tokens(usage, &failure);
                let outcome = outcome_of_try(&failure, request.call, later_try);
                record(app, &account, &outcome, &target).await;
                drop(lease);
                tracing::warn!(account = %account, kind = ?failure.kind, status = ?failure.status,
                    "upstream call failed");
                // "No image" may come right on another try, but it is not the account's fault:
                // it gets the few retries of a transient failure, not every account of the group.
                // So does an unusable answer (a proxy's HTML page, JSON cut short, an account
                // missing its configuration): held against the account, but often the network's.
                let transient = matches!(
                    failure.kind,
                    FailureKind::Transient
                        | FailureKind::Timeout
                        | FailureKind::NoImage
                        | FailureKind::Protocol
                );
                if !switchable(&failure.kind)
                    || switches >= failover.max_switches
                    || (transient && transient_retries >= failover.transient_retries)
                    || deadline.passed()
                {
                    return Err(noted(final_error(&failure, earliest_reset), usage));
                }
                switches += 1;
                usage.failed_over();
                if transient {
                    transient_retries += 1;
                    tokio::time::sleep(jitter(transient_retries)).await;
                }
                tried.push(account);
                last = Some(failure);
            }
        }
    }
}

/// Runs `work` to its end whatever becomes of the caller: at once when it completes without
/// waiting (the in-process pool state), else as a task of its own, in the caller's span.
fn finish_apart(work: impl Future<Output = ()> + Send + 'static) {
    use tracing::Instrument as _;
    let mut work = Box::pin(work.in_current_span());
    let mut context = std::task::Context::from_waker(std::task::Waker::noop());
    if work.as_mut().poll(&mut context).is_pending() {
        #[expect(
            clippy::disallowed_methods,
            reason = "detached on purpose: it must finish even when the request that started it is dropped"
        )]
        tokio::spawn(work);
    }
}

/// Records `outcome` of a call to `account` through `target`.
async fn record(
    app: &AppState,
    account: &imagegate_dispatch::AccountId,
    outcome: &imagegate_dispatch::Outcome,
    target: &imagegate_upstream::AccountTarget,
) {
    if let imagegate_dispatch::Outcome::AuthFailed { reason } = outcome {
        // A subscription account's token is refreshed (and saved) inside the call, so the one
        // refused may be newer than the one the call started with: such an account is marked
        // whatever it holds. An API key is the one the call started with.
        let refused = (target.kind != imagegate_upstream::AccountKind::Codex)
            .then(|| imagegate_store::Secret::new(target.credential.expose().to_owned()));
        let (store, pool) = (Arc::clone(&app.store), Arc::clone(&app.dispatcher));
        let (account, reason) = (account.clone(), reason.clone());
        // In a task of its own, awaited: the next try and the answer come after the verdict, and
        // a client leaving while the database answers does not take the verdict with it.
        use tracing::Instrument as _;
        let verdict = mark_failed(store, pool, account, reason, refused).in_current_span();
        #[expect(
            clippy::disallowed_methods,
            reason = "detached on purpose: it must finish even when the request that started it is dropped"
        )]
        let verdict = tokio::spawn(verdict);
        if let Err(err) = verdict.await {
            tracing::error!(error = %err, "marking the account as failed stopped");
        }
        return;
    }
    if let Err(err) = app.dispatcher.record_outcome(account, outcome).await {
        tracing::error!(error = %err, "could not record an upstream outcome");
    }
}

/// A refused credential needs the operator: the verdict is kept in the database too, so it
/// survives restarts and every replica and the console see it; unless the account holds another
/// credential than `refused` by now (an operator replaced it while the call was out), when it is
/// no verdict on the account, in the database or in the pool.
async fn mark_failed(
    store: Arc<dyn imagegate_store::Store>,
    pool: Arc<imagegate_dispatch::Dispatcher>,
    account: imagegate_dispatch::AccountId,
    reason: String,
    refused: Option<imagegate_store::Secret>,
) {
    if let Ok(id) = account.as_str().parse::<i64>() {
        let id = imagegate_store::AccountId(id);
        match store.mark_account_failed(id, &reason, refused.as_ref()).await {
            Ok(true) => {}
            Ok(false) => {
                tracing::info!(account = %account,
                    "a credential replaced since the call started was refused; the account stays as it is");
                return;
            }
            Err(err) => tracing::error!(error = %err, "could not mark the account as failed"),
        }
    }
    let outcome = imagegate_dispatch::Outcome::AuthFailed { reason };
    if let Err(err) = pool.record_outcome(&account, &outcome).await {
        tracing::error!(error = %err, "could not record an upstream outcome");
    }
}

/// Failures another account may not have. A timeout is not one of them: the request already used
/// its time, and another try would double the cost and outlast the client's own timeout (which is
/// also why every try shares the request's one deadline).
fn switchable(kind: &FailureKind) -> bool {
    matches!(
        kind,
        FailureKind::RateLimited { .. }
            | FailureKind::Unauthorized
            | FailureKind::Forbidden { .. }
            | FailureKind::Transient
            | FailureKind::Protocol
            | FailureKind::NoImage
            | FailureKind::ModelUnsupported
    )
}

/// 100-400 ms: 100 ms per retry (at most three) plus up to 100 ms of jitter.
fn jitter(attempt: u32) -> Duration {
    let base = 100 * u64::from(attempt.min(3));
    Duration::from_millis(base + rand::random_range(0..=100))
}

/// The longest wait a usage limit may have and still be answered as one to retry
/// (`x-should-retry: true`): the official SDKs follow a `retry-after` up to 60 s. Longer ones
/// are an exhausted usage window the client should not wait on.
const SHORT_LIMIT: Duration = Duration::from_secs(60);

/// The shortest wait a usage limit is answered with (the dispatcher's default shortest cooldown).
const MIN_LIMIT_WAIT: Duration = Duration::from_secs(1);

/// The answer when the accounts are limited for `wait` (`None`: not known): the interface's 429
/// `usage_limit_reached` with the wait in `retry-after`, to be retried by the SDKs when it is short.
fn limited(wait: Option<Duration>, usage_limit_message: &str) -> HttpError {
    // No sooner than the dispatcher's shortest cooldown: a client back earlier finds it cooling.
    let wait = wait.map(|wait| wait.max(MIN_LIMIT_WAIT));
    let passing = wait.is_some_and(|wait| wait <= SHORT_LIMIT);
    let message = match wait {
        Some(wait) if passing => {
            let secs = wait.as_secs_f64().ceil().max(1.0);
            format!("{usage_limit_message} Try again in {secs}s.")
        }
        _ => usage_limit_message.to_owned(),
    };
    HttpError::new(ApiError::new(ErrorKind::UsageLimitReached, message))
        .with_retry_after(wait.or(Some(Duration::from_secs(1))))
        .with_should_retry(passing)
}

/// `error`, noted on the usage record when it is a 429 of the upstream accounts (limited or too
/// busy), which the record's status alone does not tell from the key's own limits.
fn noted(error: HttpError, usage: &mut UsageRecorder) -> HttpError {
    match error.api.kind {
        ErrorKind::UsageLimitReached => usage.note("upstream accounts limited".to_owned()),
        ErrorKind::KeyRateLimited => usage.note("upstream accounts busy".to_owned()),
        _ => {}
    }
    error
}

/// What the client sees for an upstream failure that ends the request.
pub fn failure_error(failure: &Failure) -> HttpError {
    final_error(failure, failure.reset_at_unix_ms())
}

/// [`failure_error`] for a request whose tried accounts free again at `earliest_reset` at the
/// earliest (unix ms): a usage limit says to come back then.
fn final_error(failure: &Failure, earliest_reset: Option<u64>) -> HttpError {
    match &failure.kind {
        FailureKind::RateLimited { .. } => limited(
            earliest_reset.map(wait_until),
            "The upstream account reached its usage limit.",
        ),
        _ => HttpError::new(failure.client_error()),
    }
}

/// The answer to a request whose deadline passed while it waited for an account: the failure of
/// its last try (a timeout when it made none), with the earliest reset of the accounts it tried.
fn out_of_time(last: Option<&Failure>, earliest_reset: Option<u64>, budget: Duration) -> HttpError {
    let timed_out = Failure::timeout(budget);
    final_error(last.unwrap_or(&timed_out), earliest_reset)
}

/// The time from now until `at` (unix ms), zero once it passed.
fn wait_until(at: u64) -> Duration {
    let now = imagegate_dispatch::UnixMillis::from_system_time(std::time::SystemTime::now()).0;
    Duration::from_millis(at.saturating_sub(now))
}

/// How long clients are told to wait when no account of the group is usable (all disabled or
/// excluded, or none yet): long enough for an operator's fix or a re-enabled account, short enough
/// to fit in the SDKs' retries.
const NO_ACCOUNT_RETRY_AFTER: Duration = Duration::from_secs(5);

fn pool_failure(err: PoolError, last: Option<Failure>, earliest_reset: Option<u64>) -> HttpError {
    match err {
        PoolError::AllCoolingDown { retry_after, .. } => match last {
            // The account tried last failed for another reason (a 502, say) and may serve the
            // retry at once: its failure is the answer, not the others' hours of cooldown.
            Some(failure) if !matches!(failure.kind, FailureKind::RateLimited { .. }) => {
                final_error(&failure, earliest_reset)
            }
            _ => {
                // The pool's wait leaves out the accounts this request already tried.
                let wait = earliest_reset.map_or(retry_after, |at| retry_after.min(wait_until(at)));
                limited(
                    Some(wait),
                    "Every upstream account of this key's group reached its usage limit.",
                )
            }
        },
        PoolError::AllBusy { retry_after } | PoolError::WaitQueueFull { retry_after } => {
            HttpError::new(ApiError::new(
                ErrorKind::KeyRateLimited,
                "Every upstream account of this key's group is busy; retry shortly.",
            ))
            .with_retry_after(Some(retry_after))
        }
        PoolError::NoAccounts { .. } => match last {
            Some(failure) => final_error(&failure, earliest_reset),
            None => HttpError::new(ApiError::new(
                ErrorKind::Overloaded,
                "No upstream account can serve this key's group right now.",
            ))
            .with_retry_after(Some(NO_ACCOUNT_RETRY_AFTER)),
        },
        PoolError::LeaseExpired | PoolError::State(_) => {
            tracing::error!(error = %err, "dispatcher failed");
            HttpError::new(ApiError::internal())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_account_specific_failures_switch_accounts() {
        assert!(switchable(&FailureKind::RateLimited {
            reset_at_unix_ms: None,
            images_only: false
        }));
        assert!(switchable(&FailureKind::Transient));
        assert!(
            switchable(&FailureKind::Protocol),
            "an unusable answer comes from the account (or what stands in front of it)"
        );
        assert!(!switchable(&FailureKind::Invalid));
        assert!(!switchable(&FailureKind::Refused));
        assert!(!switchable(&FailureKind::Timeout));
        assert!(switchable(&FailureKind::ModelUnsupported));
    }

    #[test]
    fn no_usable_account_is_a_503_that_says_when_to_retry() {
        use axum::response::IntoResponse;
        let err = PoolError::NoAccounts {
            group: GroupId::new("default"),
        };
        let response = pool_failure(err, None, None).into_response();
        assert_eq!(response.status(), 503);
        let headers = response.headers();
        assert_eq!(
            headers.get("retry-after").and_then(|v| v.to_str().ok()),
            Some("5")
        );
        assert_eq!(
            headers.get("retry-after-ms").and_then(|v| v.to_str().ok()),
            Some("5000")
        );
    }

    #[test]
    fn a_request_out_of_time_waiting_for_an_account_is_told_the_earliest_reset() {
        use axum::response::IntoResponse;
        // Account A reset in 8 s; B, tried last, in 5 hours; the wait for a third one outlasted
        // the deadline.
        let now = imagegate_dispatch::UnixMillis::from_system_time(std::time::SystemTime::now()).0;
        let last = Failure::new(
            FailureKind::RateLimited {
                reset_at_unix_ms: Some(now + 5 * 3_600_000),
                images_only: false,
            },
            "usage limit",
        );
        let error = out_of_time(Some(&last), Some(now + 8_000), Duration::from_secs(120));
        let response = error.into_response();
        assert_eq!(response.status(), 429);
        let headers = response.headers();
        let retry_after: u64 = headers["retry-after"].to_str().unwrap().parse().unwrap();
        assert!((7..=8).contains(&retry_after), "{retry_after}");
        assert_eq!(headers["x-should-retry"], "true");
        // No try at all: a timeout.
        let response = out_of_time(None, None, Duration::from_secs(120)).into_response();
        assert_eq!(response.status(), 504);
    }

    #[test]
    fn an_upstream_limit_is_usage_limit_reached_retried_only_when_it_resets_soon() {
        use axum::response::IntoResponse;
        for (wait, retry, retry_after) in [
            (Some(Duration::from_secs(20)), "true", "20"),
            (Some(Duration::from_millis(200)), "true", "1"),
            (Some(SHORT_LIMIT), "true", "60"),
            (Some(SHORT_LIMIT + Duration::from_secs(1)), "false", "61"),
            (None, "false", "1"),
        ] {
            let err = limited(wait, "Limited.");
            assert_eq!(err.api.code(), Some("usage_limit_reached"), "{wait:?}");
            let response = err.into_response();
            assert_eq!(response.status(), 429, "{wait:?}");
            let header = |name: &str| response.headers().get(name).and_then(|v| v.to_str().ok());
            assert_eq!(header("x-should-retry"), Some(retry), "{wait:?}");
            assert_eq!(header("retry-after"), Some(retry_after), "{wait:?}");
        }
    }

    #[test]
    fn a_usage_limit_says_to_come_back_when_the_first_tried_account_frees() {
        use axum::response::IntoResponse;
        let now = imagegate_dispatch::UnixMillis::from_system_time(std::time::SystemTime::now()).0;
        let soon = now + 30_000;
        let five_hours = Duration::from_secs(5 * 3600);
        let limited_long = Failure::new(
            FailureKind::RateLimited {
                reset_at_unix_ms: Some(now + 5 * 3_600_000),
                images_only: false,
            },
            "limited",
        );
        let header = |err: HttpError, name: &str| {
            let response = err.into_response();
            response
                .headers()
                .get(name)
                .and_then(|v| v.to_str().ok())
                .map(str::to_owned)
        };
        // Another account tried first frees in 30 s: that is the answer, one to retry.
        for err in [
            final_error(&limited_long, Some(soon)),
            pool_failure(
                PoolError::AllCoolingDown {
                    earliest_reset: imagegate_dispatch::UnixMillis(now + 5 * 3_600_000),
                    retry_after: five_hours,
                },
                None,
                Some(soon),
            ),
        ] {
            let wait: u64 = header(err, "retry-after").unwrap().parse().unwrap();
            assert!((29..=30).contains(&wait), "{wait}");
        }
        assert_eq!(
            header(final_error(&limited_long, Some(soon)), "x-should-retry").as_deref(),
            Some("true")
        );
        // Alone, the long limit says to wait hours and not to retry.
        let alone = failure_error(&limited_long);
        assert_eq!(header(alone, "x-should-retry").as_deref(), Some("false"));
    }

    #[test]
    fn a_transient_failure_is_not_hidden_behind_the_other_accounts_cooldown() {
        use axum::response::IntoResponse;
        let cooling = || PoolError::AllCoolingDown {
            earliest_reset: imagegate_dispatch::UnixMillis(u64::MAX / 2),
            retry_after: Duration::from_secs(5 * 3600),
        };
        let failed = Failure::transient("bad gateway");
        let response = pool_failure(cooling(), Some(failed), None).into_response();
        assert_eq!(response.status(), 502, "the tried account's own failure");
        let limited_too = Failure::new(
            FailureKind::RateLimited {
                reset_at_unix_ms: None,
                images_only: false,
            },
            "limited",
        );
        for last in [None, Some(limited_too)] {
            let response = pool_failure(cooling(), last, None).into_response();
            assert_eq!(response.status(), 429, "every account limited");
        }
    }

    #[test]
    fn jitter_stays_small() {
        for attempt in 0..10 {
            let pause = jitter(attempt);
            assert!(pause <= Duration::from_millis(400), "{pause:?}");
        }
    }
}

#[cfg(test)]
mod finish_apart_tests {
    #![allow(clippy::unwrap_used)]

    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};

    use super::finish_apart;

    #[tokio::test]
    async fn work_finished_apart_ends_even_when_its_caller_is_gone() {
        let done = Arc::new(AtomicBool::new(false));
        let (go, wait) = tokio::sync::oneshot::channel::<()>();
        let caller = {
            let done = Arc::clone(&done);
            async move {
                finish_apart(async move {
                    wait.await.unwrap();
                    done.store(true, Ordering::SeqCst);
                });
                std::future::pending::<()>().await;
            }
        };
        // The caller starts the work and is then dropped, as a request whose client left.
        let started = tokio::time::timeout(std::time::Duration::from_millis(10), caller).await;
        assert!(started.is_err());
        go.send(()).unwrap();
        for _ in 0..100 {
            if done.load(Ordering::SeqCst) {
                return;
            }
            tokio::task::yield_now().await;
        }
        panic!("the work was dropped with its caller");
    }

    #[test]
    fn work_that_needs_no_wait_is_done_at_once_without_a_runtime() {
        let done = Arc::new(AtomicBool::new(false));
        let flag = Arc::clone(&done);
        finish_apart(async move { flag.store(true, Ordering::SeqCst) });
        assert!(done.load(Ordering::SeqCst));
    }
}

//! The deadline of an answer while it is relayed to a client.
//!
//! A relayed body is read only as fast as the client takes it: while the client is busy with what
//! it was handed, nothing more is read, and the upstream waits on TCP flow control. Counting that
//! time against the upstream's deadline would blame a healthy account for a slow client (the
//! account's failure streak, its cooldown, and a usage record saying `upstream_timeout`).
//!
//! So each side gets the call's whole budget: the upstream's deadline moves forward by the time
//! the client held the stream ([`FailureKind::Timeout`](crate::FailureKind::Timeout) when it
//! passes), and the client's time is bounded by a budget of its own, counted from the same start
//! ([`FailureKind::ClientTooSlow`](crate::FailureKind::ClientTooSlow), not the account's fault).
//! Either way the relay ends within twice the budget.

use std::time::Duration;

use tokio::time::Instant;

use super::Deadline;
use crate::failure::Failure;

/// [`Deadline`] of a relayed body, split between the upstream and the client.
#[derive(Debug)]
pub(crate) struct ReadClock {
    /// When the upstream's budget runs out; moves forward by the client's time.
    upstream_at: Instant,
    /// When the client's budget runs out: the call's start plus two budgets.
    client_at: Instant,
    /// When the last item was handed to the client, until it asks for the next.
    handed_at: Option<Instant>,
    /// The budget of each side.
    budget: Duration,
}

impl ReadClock {
    /// A clock for a body read under `deadline`.
    pub(crate) fn new(deadline: Deadline) -> Self {
        Self {
            upstream_at: deadline.at,
            client_at: deadline.at + deadline.budget,
            handed_at: None,
            budget: deadline.budget,
        }
    }

    /// Something was handed to the client: the time until it asks again is the client's.
    pub(crate) fn handed_over(&mut self) {
        self.handed_at = Some(Instant::now());
    }

    /// The client asks for more: the time since the last hand-over does not count against the
    /// upstream.
    pub(crate) fn resumed(&mut self) {
        if let Some(handed_at) = self.handed_at.take() {
            self.upstream_at += handed_at.elapsed();
        }
    }

    /// The deadline a new call of the same request starts under: the upstream's, moved forward
    /// by the client's time so far.
    pub(crate) fn upstream_deadline(&self) -> Deadline {
        Deadline {
            at: self.upstream_at,
            budget: self.budget,
        }
    }

    /// Whether the client has held the stream for its whole budget.
    pub(crate) fn client_out_of_time(&self) -> bool {
        self.client_at <= self.upstream_at
    }

    /// When the next read gives up.
    pub(crate) fn at(&self) -> Instant {
        self.upstream_at.min(self.client_at)
    }

    /// The failure once [`Self::at`] has passed: whose budget ran out first.
    pub(crate) fn failure(&self) -> Failure {
        if self.client_out_of_time() {
            Failure::client_too_slow(self.budget)
        } else {
            Failure::timeout(self.budget)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::FailureKind;

    fn clock(budget_secs: u64) -> ReadClock {
        ReadClock::new(Deadline::from_now(Duration::from_secs(budget_secs)))
    }

    #[tokio::test(start_paused = true)]
    async fn without_a_client_pause_the_deadline_is_the_calls() {
        let start = Instant::now();
        let mut clock = clock(10);
        clock.resumed();
        assert_eq!(clock.at(), start + Duration::from_secs(10));
        assert_eq!(clock.failure().kind, FailureKind::Timeout);
    }

    #[tokio::test(start_paused = true)]
    async fn the_clients_time_moves_the_upstreams_deadline() {
        let start = Instant::now();
        let mut clock = clock(10);
        clock.handed_over();
        tokio::time::advance(Duration::from_secs(4)).await;
        clock.resumed();
        // A second resume without a hand-over in between adds nothing.
        tokio::time::advance(Duration::from_secs(1)).await;
        clock.resumed();
        assert_eq!(clock.at(), start + Duration::from_secs(14));
        assert_eq!(clock.upstream_deadline().at, start + Duration::from_secs(14));
        assert!(!clock.client_out_of_time());
        assert_eq!(clock.failure().kind, FailureKind::Timeout);
    }

    #[tokio::test(start_paused = true)]
    async fn a_client_holding_the_stream_longer_than_a_budget_is_too_slow() {
        let start = Instant::now();
        let mut clock = clock(10);
        clock.handed_over();
        tokio::time::advance(Duration::from_secs(11)).await;
        clock.resumed();
        assert_eq!(clock.at(), start + Duration::from_secs(20));
        assert!(clock.client_out_of_time());
        assert_eq!(clock.failure().kind, FailureKind::ClientTooSlow);
    }
}

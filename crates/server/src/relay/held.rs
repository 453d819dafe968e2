//! What a request holds while its answer is on the way: the account lease and the key permit.

use std::sync::Arc;

use imagegate_dispatch::{Dispatcher, KeyPermit, Lease, Outcome};
use imagegate_upstream::Failure;

/// Dropped when the answer is complete or the client went away, freeing both slots.
#[derive(Debug)]
pub struct Held {
    pub lease: Lease,
    /// Held for what its `Drop` does.
    pub permit: Option<KeyPermit>,
    /// Where an outcome seen after the answer started (a failing stream) is recorded.
    pub pool: Arc<Dispatcher>,
    /// Whether the answer comes from a try made after others (see [`Relayed::later_try`]).
    ///
    /// [`Relayed::later_try`]: crate::relay::Relayed::later_try
    pub later_try: bool,
}

impl Held {
    /// Records what happened to the account serving this answer.
    pub async fn record(&self, outcome: &Outcome) {
        if let Err(err) = self.pool.record_outcome(self.lease.account(), outcome).await {
            tracing::error!(error = %err, "could not record an upstream outcome");
        }
    }

    /// Records `failure`, met after the answer started, against the account serving it.
    pub async fn record_failure(&self, failure: &Failure) {
        self.record(&crate::relay::outcome_of_late(failure, self.later_try))
            .await;
    }
}

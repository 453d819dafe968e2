//! What a request holds while its answer is on the way: the account lease and the key permit.

use std::sync::Arc;

use imagegate_dispatch::{Dispatcher, KeyPermit, Lease, Outcome};

/// Dropped when the answer is complete or the client went away, freeing both slots.
#[derive(Debug)]
pub struct Held {
    pub lease: Lease,
    /// Held for what its `Drop` does.
    pub permit: Option<KeyPermit>,
    /// Where an outcome seen after the answer started (a failing stream) is recorded.
    pub pool: Arc<Dispatcher>,
}

impl Held {
    /// Records what happened to the account serving this answer.
    pub async fn record(&self, outcome: &Outcome) {
        if let Err(err) = self.pool.record_outcome(self.lease.account(), outcome).await {
            tracing::error!(error = %err, "could not record an upstream outcome");
        }
    }
}

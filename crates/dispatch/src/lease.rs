//! Leases: a held concurrency slot on one account, freed when the lease is dropped.

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use tokio::sync::Notify;

use crate::account::{AccountId, SizeClass};
use crate::clock::{Clock, UnixMillis};
use crate::error::PoolError;
use crate::state::{LeaseGrant, LeaseId, PoolState};

/// What every lease of a dispatcher shares.
pub(crate) struct LeaseContext {
    pub(crate) state: Arc<dyn PoolState>,
    pub(crate) clock: Arc<dyn Clock>,
    pub(crate) released: Notify,
    /// Requests waiting for a slot: a release only pays for a wake-up when this is not zero.
    pub(crate) waiting: AtomicUsize,
    pub(crate) ttl: Duration,
}

impl fmt::Debug for LeaseContext {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LeaseContext")
            .field("state", &self.state)
            .field("ttl", &self.ttl)
            .finish()
    }
}

/// A slot held on an account for one request.
///
/// Dropping the lease frees the slot on every path (success, error, client gone, panic unwinding)
/// and wakes requests waiting for a slot. If the holder dies without dropping it (a crashed
/// replica), the slot frees itself at [`Lease::expires_at`]; long requests call [`Lease::renew`].
#[derive(Debug)]
pub struct Lease {
    grant: LeaseGrant,
    context: Arc<LeaseContext>,
}

impl Lease {
    pub(crate) fn new(grant: LeaseGrant, context: Arc<LeaseContext>) -> Self {
        Self { grant, context }
    }

    /// The account to send the request to.
    #[must_use]
    pub fn account(&self) -> &AccountId {
        &self.grant.account
    }

    /// The size class whose slot is held.
    #[must_use]
    pub fn class(&self) -> SizeClass {
        self.grant.class
    }

    /// The lease's identifier in the state backend.
    #[must_use]
    pub fn id(&self) -> LeaseId {
        self.grant.id
    }

    /// When the slot frees itself unless renewed.
    #[must_use]
    pub fn expires_at(&self) -> UnixMillis {
        self.grant.expires_at
    }

    /// Extends the lease by the dispatcher's lease TTL from now.
    ///
    /// # Errors
    /// [`PoolError::LeaseExpired`] when the lease already expired (its slot may be taken by another
    /// request by now); [`PoolError::State`] when the backend fails.
    pub async fn renew(&mut self) -> Result<UnixMillis, PoolError> {
        let now = self.context.clock.now();
        match self
            .context
            .state
            .renew(self.grant.id, self.context.ttl, now)
            .await?
        {
            Some(expires_at) => {
                self.grant.expires_at = expires_at;
                Ok(expires_at)
            }
            None => Err(PoolError::LeaseExpired),
        }
    }
}

impl Drop for Lease {
    fn drop(&mut self) {
        self.context.state.release_detached(self.grant.id);
        // A waiter counts itself before its last attempt, so if it is not counted yet here, that
        // attempt comes after this release and sees the freed slot.
        if self.context.waiting.load(Ordering::SeqCst) > 0 {
            self.context.released.notify_waiters();
        }
    }
}

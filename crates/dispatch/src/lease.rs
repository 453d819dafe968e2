//! Leases: a held concurrency slot on one account, freed when the lease is dropped.

use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use tokio::task::AbortHandle;

use crate::account::{AccountId, SizeClass};
use crate::clock::{Clock, UnixMillis};
use crate::error::{PoolError, StateError};
use crate::state::{LeaseGrant, LeaseId, PoolState};
use crate::wait_lines::WaitLines;

/// What every lease of a dispatcher shares.
pub(crate) struct LeaseContext {
    pub(crate) state: Arc<dyn PoolState>,
    pub(crate) clock: Arc<dyn Clock>,
    /// Requests waiting for a slot, woken when one frees.
    pub(crate) waiters: WaitLines,
    pub(crate) ttl: Duration,
    /// How often each lease renews itself in the background (`None`: never).
    pub(crate) renew_interval: Option<Duration>,
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
/// replica), the slot frees itself at [`Lease::expires_at`]. Long requests either call
/// [`Lease::renew`] or, when the dispatcher has a
/// [`renew_interval`](crate::DispatchConfig::renew_interval), are renewed by a background task
/// that lives exactly as long as the lease.
#[derive(Debug)]
pub struct Lease {
    grant: LeaseGrant,
    /// The current expiry in Unix milliseconds (the renewal task moves it forward).
    expires_at: Arc<AtomicU64>,
    context: Arc<LeaseContext>,
    renewal: Option<Renewal>,
}

/// The background renewal of a lease.
#[derive(Debug)]
struct Renewal {
    task: AbortHandle,
    phase: Arc<Mutex<Phase>>,
}

/// Where a lease's renewal stands, as its task and the lease's drop see it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// Renewing now and then: a drop stops the task and releases the lease itself.
    Renewing,
    /// Taking the slot back ([`PoolState::reinstate`]): a drop leaves the task to finish and to
    /// release the slot it took, or the slot would stay taken, by nobody, until it expired.
    Reinstating,
    /// The lease was dropped.
    Released,
}

fn lock(phase: &Mutex<Phase>) -> MutexGuard<'_, Phase> {
    // A phase is one value: no poisoned state can be half-written.
    phase.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Lease {
    pub(crate) fn new(grant: LeaseGrant, context: Arc<LeaseContext>) -> Self {
        let expires_at = Arc::new(AtomicU64::new(grant.expires_at.0));
        let renewal = context.renew_interval.and_then(|every| {
            spawn_renewal(
                grant.clone(),
                Arc::clone(&context),
                every,
                Arc::clone(&expires_at),
            )
        });
        Self {
            grant,
            expires_at,
            context,
            renewal,
        }
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
        UnixMillis(self.expires_at.load(Ordering::SeqCst))
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
                self.expires_at.store(expires_at.0, Ordering::SeqCst);
                Ok(expires_at)
            }
            None => Err(PoolError::LeaseExpired),
        }
    }
}

/// Renews lease `grant` every `every` until the lease is dropped. A failing backend is retried at
/// the next tick (a [`crate::FallbackPoolState`] meanwhile turns degraded and serves new leases
/// locally). The holder is at work as long as this runs, so a lease the state let go meanwhile
/// (expired while it could not be reached, lost by a restarted Redis) is taken again
/// ([`PoolState::reinstate`]); the task ends where the backend takes none back.
fn spawn_renewal(
    grant: LeaseGrant,
    context: Arc<LeaseContext>,
    every: Duration,
    expires_at: Arc<AtomicU64>,
) -> Option<Renewal> {
    let runtime = tokio::runtime::Handle::try_current().ok()?;
    let phase = Arc::new(Mutex::new(Phase::Renewing));
    let shared = Arc::clone(&phase);
    let task = runtime.spawn(async move {
        let mut tick = tokio::time::interval_at(crate::clock::instant_after(every), every);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tick.tick().await;
            let now = context.clock.now();
            let renewed = match context.state.renew(grant.id, context.ttl, now).await {
                Ok(None) => reinstate(&grant, &context, &shared, now).await,
                other => other,
            };
            match renewed {
                Ok(Some(until)) => expires_at.store(until.0, Ordering::SeqCst),
                Ok(None) => return,
                Err(_) => {}
            }
        }
    });
    Some(Renewal {
        task: task.abort_handle(),
        phase,
    })
}

/// Takes the slot of `grant` back for its holder, unless the holder let go; releases it when the
/// holder let go meanwhile (then answering `None`, which ends the renewal).
async fn reinstate(
    grant: &LeaseGrant,
    context: &LeaseContext,
    phase: &Mutex<Phase>,
    now: UnixMillis,
) -> Result<Option<UnixMillis>, StateError> {
    {
        let mut phase = lock(phase);
        if *phase == Phase::Released {
            return Ok(None);
        }
        *phase = Phase::Reinstating;
    }
    let reinstated = context.state.reinstate(grant, context.ttl, now).await;
    let mut phase = lock(phase);
    if *phase == Phase::Released {
        drop(phase);
        context.state.release_detached(grant.id);
        context.waiters.wake_heads();
        return Ok(None);
    }
    *phase = Phase::Renewing;
    reinstated
}

impl Drop for Lease {
    fn drop(&mut self) {
        if let Some(renewal) = self.renewal.take() {
            let was = std::mem::replace(&mut *lock(&renewal.phase), Phase::Released);
            if was == Phase::Reinstating {
                // The renewal releases the slot it is taking back once it has it.
                return;
            }
            renewal.task.abort();
        }
        self.context.state.release_detached(self.grant.id);
        // A waiter counts itself before its last attempt, so if it is not counted yet here, that
        // attempt comes after this release and sees the freed slot.
        self.context.waiters.wake_heads();
    }
}

#[cfg(test)]
#[path = "lease_tests.rs"]
mod tests;

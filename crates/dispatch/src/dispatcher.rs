//! The dispatcher: account configuration plus shared state, handing out leases and waiting
//! (bounded) when every eligible account is busy.

use std::sync::Arc;
use std::time::Duration;

use arc_swap::ArcSwap;

use crate::account::{AccountId, AccountSpec, GroupId, SizeClass};
use crate::account_set::AccountSet;
use crate::clock::Clock;
use crate::error::PoolError;
use crate::lease::{Lease, LeaseContext};
use crate::outcome::Outcome;
use crate::snapshot::{AccountSnapshot, PoolSnapshot};
use crate::state::{Acquire, AcquireRequest, PoolState};
use crate::wait_lines::WaitLines;

/// Tunables of the dispatcher.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DispatchConfig {
    /// Lifetime of a lease without renewal: a dead holder's slot frees after this (default 5 min).
    pub lease_ttl: Duration,
    /// Longest wait for a busy account to free a slot (default 30 s; zero: never wait).
    pub max_wait: Duration,
    /// Most requests waiting at once; more fail at once (default 256).
    pub max_waiters: usize,
    /// `retry-after` suggested when every account stayed busy (default 2 s).
    pub busy_retry_after: Duration,
    /// While waiting, retry this often even without a release heard of, to see slots freed by
    /// lease expiry, or by other replicas when their announcement was lost (default 1 s).
    pub poll_interval: Duration,
    /// When set, every lease renews itself this often (in a background task stopped when the
    /// lease is dropped), so `lease_ttl` can be short: a crashed holder's slot comes back within
    /// the TTL while live requests keep theirs however long they run. Must be well below
    /// `lease_ttl` (a third of it is a good choice). Default `None`: leases are never renewed
    /// automatically.
    pub renew_interval: Option<Duration>,
}

impl Default for DispatchConfig {
    fn default() -> Self {
        Self {
            lease_ttl: Duration::from_secs(300),
            max_wait: Duration::from_secs(30),
            max_waiters: 256,
            busy_retry_after: Duration::from_secs(2),
            poll_interval: Duration::from_secs(1),
            renew_interval: None,
        }
    }
}

/// Gives the heads of the wait lines a turn whenever another process frees a slot, until the
/// dispatcher or the state's channel is gone.
async fn wake_on_frees_elsewhere(
    mut freed: tokio::sync::watch::Receiver<()>,
    context: std::sync::Weak<LeaseContext>,
) {
    while freed.changed().await.is_ok() {
        let Some(context) = context.upgrade() else {
            return;
        };
        context.waiters.wake_heads();
    }
}

/// What one request needs from the pool.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct DispatchRequest {
    /// The group of the caller's key.
    pub group: GroupId,
    /// Size class of the request.
    pub class: SizeClass,
    /// Whether it generates or edits images (image-only rate limits apply).
    pub image: bool,
    /// Accounts this request already tried (failover).
    pub exclude: Vec<AccountId>,
}

impl DispatchRequest {
    /// An image request of `class` for `group`, nothing excluded.
    #[must_use]
    pub fn image(group: &GroupId, class: SizeClass) -> Self {
        Self {
            group: group.clone(),
            class,
            image: true,
            exclude: Vec::new(),
        }
    }
}

/// The account pool: configuration (replaceable at runtime) plus a [`PoolState`].
#[derive(Debug)]
pub struct Dispatcher {
    config: DispatchConfig,
    accounts: ArcSwap<AccountSet>,
    context: Arc<LeaseContext>,
}

impl Dispatcher {
    /// A dispatcher with no accounts yet; call [`Dispatcher::replace_accounts`].
    #[must_use]
    ///
    /// With a state shared by other processes ([`PoolState::slots_freed_elsewhere`]) and inside a
    /// Tokio runtime, a background task wakes the waiting requests whenever another process frees
    /// a slot; it ends with the dispatcher.
    pub fn new(state: Arc<dyn PoolState>, clock: Arc<dyn Clock>, config: DispatchConfig) -> Self {
        let freed_elsewhere = state.slots_freed_elsewhere();
        let context = Arc::new(LeaseContext {
            state,
            clock,
            waiters: WaitLines::default(),
            ttl: config.lease_ttl,
            renew_interval: config.renew_interval.filter(|every| !every.is_zero()),
        });
        if let (Some(freed), Ok(runtime)) = (freed_elsewhere, tokio::runtime::Handle::try_current()) {
            runtime.spawn(wake_on_frees_elsewhere(freed, Arc::downgrade(&context)));
        }
        Self {
            config,
            accounts: ArcSwap::from_pointee(AccountSet::default()),
            context,
        }
    }

    /// Replaces the account configuration (leases already held stay valid).
    pub fn replace_accounts(&self, specs: impl IntoIterator<Item = AccountSpec>) {
        self.accounts.store(Arc::new(AccountSet::new(specs)));
        self.context.waiters.wake_heads();
    }

    /// The tunables this dispatcher was built with (e.g. `lease_ttl`, to schedule renewals).
    #[must_use]
    pub fn config(&self) -> &DispatchConfig {
        &self.config
    }

    /// The current account configuration.
    #[must_use]
    pub fn accounts(&self) -> Arc<AccountSet> {
        self.accounts.load_full()
    }

    /// Requests currently waiting for a slot.
    #[must_use]
    pub fn waiting(&self) -> usize {
        self.context.waiters.waiting()
    }

    /// Takes a slot on the best eligible account without waiting.
    ///
    /// Like [`Dispatcher::acquire`], it does not take a slot ahead of requests already waiting for
    /// the same slots: while they wait, it answers busy.
    ///
    /// # Errors
    /// [`PoolError::AllBusy`] when every eligible account is at its limit or earlier requests are
    /// waiting, and the errors of [`Dispatcher::acquire`].
    pub async fn try_acquire(&self, request: &DispatchRequest) -> Result<Lease, PoolError> {
        let busy = || PoolError::AllBusy {
            retry_after: self.config.busy_retry_after,
        };
        if !self.context.waiters.may_go_first(request) {
            return Err(busy());
        }
        self.attempt(request).await?.ok_or_else(busy)
    }

    /// Takes a slot on the best eligible account, waiting up to `max_wait` for one to free.
    ///
    /// Waiting requests are served in the order they came, among requests for the same slots (see
    /// the `wait_lines` module): a request does not overtake an earlier one still waiting.
    ///
    /// # Errors
    /// [`PoolError::NoAccounts`] (nothing usable), [`PoolError::AllCoolingDown`] (at once, with the
    /// earliest reset), [`PoolError::AllBusy`] (the wait expired), [`PoolError::WaitQueueFull`]
    /// (too many waiters), [`PoolError::State`] (backend failure).
    pub async fn acquire(&self, request: &DispatchRequest) -> Result<Lease, PoolError> {
        let deadline = crate::clock::instant_after(self.config.max_wait);
        let waiters = &self.context.waiters;
        if waiters.may_go_first(request)
            && let Some(lease) = self.attempt(request).await?
        {
            return Ok(lease);
        }
        let busy = || PoolError::AllBusy {
            retry_after: self.config.busy_retry_after,
        };
        if tokio::time::Instant::now() >= deadline {
            return Err(busy());
        }
        let place = waiters
            .join(request, self.config.max_waiters)
            .ok_or(PoolError::WaitQueueFull {
                retry_after: self.config.busy_retry_after,
            })?;
        loop {
            // Only the head tries: the others want the same slots and would only find them taken.
            // Joining counted this request first, so a slot freed since the try above wakes it.
            if place.is_head()
                && let Some(lease) = self.attempt(request).await?
            {
                return Ok(lease);
            }
            let now = tokio::time::Instant::now();
            if now >= deadline {
                return Err(busy());
            }
            let wake_at = deadline.min(now + self.config.poll_interval);
            tokio::select! {
                () = place.turn() => {}
                () = tokio::time::sleep_until(wake_at) => {}
            }
        }
    }

    /// One atomic select-and-acquire; `Ok(None)` when every eligible account is busy.
    async fn attempt(&self, request: &DispatchRequest) -> Result<Option<Lease>, PoolError> {
        let no_accounts = || PoolError::NoAccounts {
            group: request.group.clone(),
        };
        let candidates = self
            .accounts
            .load()
            .group(&request.group)
            .cloned()
            .ok_or_else(no_accounts)?;
        let now = self.context.clock.now();
        let acquire = AcquireRequest {
            candidates,
            class: request.class,
            image: request.image,
            exclude: request.exclude.clone(),
            lease_ttl: self.config.lease_ttl,
            now,
        };
        match self.context.state.try_acquire(&acquire).await? {
            Acquire::Granted(grant) => Ok(Some(Lease::new(grant, Arc::clone(&self.context)))),
            Acquire::Busy => Ok(None),
            Acquire::CoolingDown { earliest_reset } => {
                let wait_ms = earliest_reset.since(now).as_millis().div_ceil(1000);
                let retry_after = Duration::from_secs(u64::try_from(wait_ms).unwrap_or(u64::MAX).max(1));
                Err(PoolError::AllCoolingDown {
                    earliest_reset,
                    retry_after,
                })
            }
            Acquire::Unavailable => Err(no_accounts()),
        }
    }

    /// Records what a call to `account` did (cooldowns, streaks, status, counters).
    ///
    /// # Errors
    /// [`PoolError::State`] when the backend fails.
    pub async fn record_outcome(&self, account: &AccountId, outcome: &Outcome) -> Result<(), PoolError> {
        let now = self.context.clock.now();
        self.context.state.record_outcome(account, outcome, now).await?;
        Ok(())
    }

    /// Clears an account's cooldowns, streaks and error status (operator action).
    ///
    /// # Errors
    /// [`PoolError::State`] when the backend fails.
    pub async fn clear_health(&self, account: &AccountId) -> Result<(), PoolError> {
        self.context.state.clear_health(account).await?;
        self.context.waiters.wake_heads();
        Ok(())
    }

    /// Load, limits and health of every configured account.
    ///
    /// # Errors
    /// [`PoolError::State`] when the backend fails.
    pub async fn snapshot(&self) -> Result<PoolSnapshot, PoolError> {
        let now = self.context.clock.now();
        let runtime = self.context.state.snapshot(now).await?;
        let accounts = self.accounts.load();
        let accounts = accounts
            .specs()
            .iter()
            .map(|spec| AccountSnapshot::new(spec, runtime.get(&spec.id), now))
            .collect();
        Ok(PoolSnapshot { at: now, accounts })
    }
}

#[cfg(test)]
#[path = "dispatcher_tests.rs"]
mod tests;

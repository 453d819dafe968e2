//! The pool-state backend: where load, leases and health live.
//!
//! One call, [`PoolState::try_acquire`], selects an account and takes its slot atomically, so a
//! Redis implementation can run the same selection as one Lua script and several gateway replicas
//! never overbook an account.

use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};

use crate::account::{AccountId, SizeClass};
use crate::clock::UnixMillis;
use crate::error::StateError;
use crate::outcome::Outcome;
use crate::select::{AccountRuntime, RankedCandidates};

/// Identifier of a lease, unique within a state backend.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct LeaseId(pub u64);

impl fmt::Display for LeaseId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// Everything one atomic select-and-acquire needs.
#[derive(Debug, Clone)]
pub struct AcquireRequest {
    /// The group's active accounts, ranked (shared, built when the specs were loaded).
    pub candidates: Arc<RankedCandidates>,
    /// Size class of the request.
    pub class: SizeClass,
    /// Whether it generates or edits images.
    pub image: bool,
    /// Accounts this request already tried.
    pub exclude: Vec<AccountId>,
    /// How long the lease lives without renewal.
    pub lease_ttl: Duration,
    /// Current time.
    pub now: UnixMillis,
}

/// A slot taken on an account.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaseGrant {
    /// The lease.
    pub id: LeaseId,
    /// The account chosen.
    pub account: AccountId,
    /// The size class whose slot is held.
    pub class: SizeClass,
    /// When the slot frees itself unless renewed.
    pub expires_at: UnixMillis,
}

/// Answer of [`PoolState::try_acquire`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Acquire {
    /// A slot was taken.
    Granted(LeaseGrant),
    /// Every eligible account is at its limit; waiting can help.
    Busy,
    /// Every usable account is cooling down.
    CoolingDown {
        /// When the first one is usable again.
        earliest_reset: UnixMillis,
    },
    /// No usable account.
    Unavailable,
}

/// Load and health of every account the backend knows, after purging expired leases.
pub type StateSnapshot = HashMap<AccountId, AccountRuntime>;

/// Shared runtime state of the pool.
#[async_trait]
pub trait PoolState: Send + Sync + fmt::Debug {
    /// Purges expired leases, selects an account for `request` and takes a slot on it, atomically.
    async fn try_acquire(&self, request: &AcquireRequest) -> Result<Acquire, StateError>;

    /// Frees a lease's slot without waiting (called from `Drop`: must not block on I/O; a remote
    /// backend queues the release for a background task). Unknown or expired leases are ignored.
    fn release_detached(&self, lease: LeaseId);

    /// For a state shared with other processes: a channel that changes whenever one of them may
    /// have freed a slot, so that requests waiting here try again at once rather than at their
    /// next poll. `None` (the default) for a state nobody else changes.
    fn slots_freed_elsewhere(&self) -> Option<tokio::sync::watch::Receiver<()>> {
        None
    }

    /// Extends a lease to `now + ttl`; `None` when it already expired or was released.
    async fn renew(
        &self,
        lease: LeaseId,
        ttl: Duration,
        now: UnixMillis,
    ) -> Result<Option<UnixMillis>, StateError>;

    /// Takes the slot of `grant` again, at `now + ttl`, for a holder still at work whose lease the
    /// state let go: it expired while the state could not be reached to renew it, or a restarted
    /// Redis lost it. Over the account's limit if need be: the request is running, and the
    /// account must count it or other requests (other replicas') are sent to it on top.
    /// `None` when the backend takes no such slot back: the default, for a state whose leases only
    /// expire when their holder stopped renewing them (an in-process one).
    async fn reinstate(
        &self,
        grant: &LeaseGrant,
        ttl: Duration,
        now: UnixMillis,
    ) -> Result<Option<UnixMillis>, StateError> {
        let _ = (grant, ttl, now);
        Ok(None)
    }

    /// Applies the outcome rules to `account`.
    async fn record_outcome(
        &self,
        account: &AccountId,
        outcome: &Outcome,
        now: UnixMillis,
    ) -> Result<(), StateError>;

    /// [`PoolState::record_outcome`] for an outcome that may be told again with the same `id`
    /// (a caller whose first try failed without knowing whether it was applied): a state that can
    /// (a shared one, whose reply may be lost) applies each id once. By default the same as
    /// [`PoolState::record_outcome`].
    async fn record_outcome_once(
        &self,
        account: &AccountId,
        outcome: &Outcome,
        now: UnixMillis,
        id: u64,
    ) -> Result<(), StateError> {
        let _ = id;
        self.record_outcome(account, outcome, now).await
    }

    /// Clears cooldowns, streaks and error status of `account` (operator action); load, success
    /// and failure counts and the last error are kept.
    async fn clear_health(&self, account: &AccountId) -> Result<(), StateError>;

    /// Purges expired leases and returns every known account's runtime state.
    async fn snapshot(&self, now: UnixMillis) -> Result<StateSnapshot, StateError>;
}

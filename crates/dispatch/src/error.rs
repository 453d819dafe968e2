//! Errors of the pool, its state backend and the per-key limiter.

use std::time::Duration;

use thiserror::Error;

use crate::account::GroupId;
use crate::clock::UnixMillis;

/// Failure of a pool-state backend (the in-memory one never fails; Redis can).
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum StateError {
    /// The backend could not be reached or answered nonsense.
    #[error("pool state backend failed: {0}")]
    Backend(String),
}

/// Why the dispatcher could not hand out a lease.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum PoolError {
    /// The group has no usable account (none configured, all inactive, in error, disabled, already
    /// tried by this request, or none allowed to serve the size class).
    #[error("no usable upstream account in group {group}")]
    NoAccounts {
        /// The group asked for.
        group: GroupId,
    },
    /// Every usable account of the group is cooling down.
    #[error("every upstream account of the group is cooling down")]
    AllCoolingDown {
        /// When the first one becomes usable again.
        earliest_reset: UnixMillis,
        /// How long a client should wait before retrying (at least one second).
        retry_after: Duration,
    },
    /// Every eligible account stayed at its concurrency limit for the whole wait.
    #[error("every upstream account is busy")]
    AllBusy {
        /// Suggested wait before retrying.
        retry_after: Duration,
    },
    /// Too many requests are already waiting for an account.
    #[error("too many requests are waiting for an upstream account")]
    WaitQueueFull {
        /// Suggested wait before retrying.
        retry_after: Duration,
    },
    /// The lease expired (its holder was too slow to renew) and its slot went back to the pool.
    #[error("the account lease expired")]
    LeaseExpired,
    /// The state backend failed.
    #[error(transparent)]
    State(#[from] StateError),
}

impl PoolError {
    /// The `retry-after` to send, where retrying later can help.
    #[must_use]
    pub fn retry_after(&self) -> Option<Duration> {
        match self {
            Self::AllCoolingDown { retry_after, .. }
            | Self::AllBusy { retry_after }
            | Self::WaitQueueFull { retry_after } => Some(*retry_after),
            Self::NoAccounts { .. } | Self::LeaseExpired | Self::State(_) => None,
        }
    }
}

/// Why a key was refused by its own limits.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum KeyLimitError {
    /// The key already has `limit` requests in flight.
    #[error("this key already has {limit} requests in flight")]
    TooManyConcurrent {
        /// The key's concurrency limit.
        limit: u32,
        /// Suggested wait before retrying.
        retry_after: Duration,
    },
    /// The key used its `limit` requests of the last minute.
    #[error("this key is limited to {limit} requests per minute")]
    TooManyRequests {
        /// The key's requests-per-minute limit.
        limit: u32,
        /// When the oldest request of the window leaves it.
        retry_after: Duration,
    },
    /// The limiter backend failed.
    #[error("key limiter backend failed: {0}")]
    Backend(String),
}

impl KeyLimitError {
    /// The `retry-after` to send, if any.
    #[must_use]
    pub fn retry_after(&self) -> Option<Duration> {
        match self {
            Self::TooManyConcurrent { retry_after, .. } | Self::TooManyRequests { retry_after, .. } => {
                Some(*retry_after)
            }
            Self::Backend(_) => None,
        }
    }
}

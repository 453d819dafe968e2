//! The upstream account pool of imagegate.
//!
//! Given a request's group and [`SizeClass`], the [`Dispatcher`] picks an upstream account and
//! returns a [`Lease`] holding one of that account's concurrency slots until it is dropped.
//!
//! - **Eligibility**: active, in the key's group, status ok, not cooling down (for every request,
//!   or for image requests only), and under its concurrency limit for the size class (large
//!   default 1, standard default 4).
//! - **Preference**: higher tier first (pro > team > plus > free), then higher priority, then the
//!   least loaded, ties at random (in a busy band, the least loaded of 32 eligible accounts:
//!   [`select::COMPARE_WINDOW`]). Each group's candidates are ranked once when the configuration
//!   is loaded, so a pick does not sort or scan the whole pool ([`select::select`] is a pure
//!   function); the in-memory state also keeps, per band, the accounts below their limits, so
//!   full accounts cost a pick nothing while some account is eligible.
//! - **Leases** free their slot on drop and expire after a TTL if their holder died.
//! - **Outcomes** ([`Outcome`]) drive cooldowns: a 429 cools down exactly until the reset the
//!   upstream gave (or a doubling backoff without one), image-only limits block only image
//!   requests, an HTML 403 from a proxy costs nothing, repeated JSON 403s disable, a streak of
//!   transient failures opens a short circuit breaker; once its cooldown ends the breaker is
//!   half-open (one request at a time, the probe) until a success closes it or a failure opens it
//!   again.
//! - **Waiting**: when every eligible account is busy, [`Dispatcher::acquire`] waits (bounded in
//!   time and in number of waiters) and wakes when a lease is dropped. Waiters for the same slots
//!   are served first come, first served, and a new request does not overtake them.
//! - **Per-key limits**: [`KeyGate`] enforces optional concurrency and requests-per-minute limits.
//! - **Visibility**: [`Dispatcher::snapshot`] is serialisable.
//!
//! All time is passed in as [`UnixMillis`] from a [`Clock`], so tests need no sleeping. The crate
//! does no HTTP.
//!
//! # State backends
//!
//! Load, leases and health live behind [`PoolState`]; per-key counters behind [`KeyLimiter`].
//!
//! - [`MemoryPoolState`] and [`MemoryKeyLimiter`]: one process, one mutex each, no I/O.
//! - `RedisPoolState` and `RedisKeyLimiter` (cargo feature **`redis`**, module `redis_backend`):
//!   several gateway replicas share one Redis and behave as one pool. Selection and slot
//!   acquisition run as one Lua script implementing the rules of [`select::select`] (one round
//!   trip in the common case); leases are sorted-set members scored by expiry, so a crashed
//!   replica's slots come back when their TTL runs out; outcomes apply
//!   [`AccountHealth::apply`] in Rust and store the result with a versioned compare-and-set, so
//!   cooldowns and counters are shared. Scripts use the `now` each replica passes in, never the
//!   Redis clock: replicas need synchronised clocks (NTP). Keys share a configurable prefix
//!   (default `imagegate:`).
//! - [`FallbackPoolState`]: a shared backend with a local [`MemoryPoolState`] standing in while
//!   it fails ([`FallbackPoolState::degraded`]), retried every few seconds. During an outage,
//!   limits hold per replica and cooldowns are not shared; requests keep being served.
//!   [`FallbackKeyLimiter`] does the same for per-key limits.
//!
//! ```
//! use std::sync::Arc;
//! use imagegate_dispatch::{
//!     AccountSpec, Clock, DispatchConfig, DispatchRequest, Dispatcher, GroupId, LimitScope, ManualClock,
//!     MemoryPoolState, Outcome, PoolError, SizeClass, Tier, UnixMillis,
//! };
//!
//! # tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap().block_on(async {
//! let clock = Arc::new(ManualClock::new(UnixMillis(1_700_000_000_000)));
//! let config = DispatchConfig { max_wait: std::time::Duration::ZERO, ..DispatchConfig::default() };
//! let pool = Dispatcher::new(Arc::new(MemoryPoolState::default()), clock.clone(), config);
//! pool.replace_accounts([
//!     AccountSpec::new("pro-1", Tier::Pro, &["team-a"]),
//!     AccountSpec::new("plus-1", Tier::Plus, &["team-a"]),
//! ]);
//! let group = GroupId::new("team-a");
//!
//! // A 4K request goes to the pro account, which takes one large request at a time.
//! let first = pool.acquire(&DispatchRequest::image(&group, SizeClass::Large)).await?;
//! assert_eq!(first.account().as_str(), "pro-1");
//! let second = pool.acquire(&DispatchRequest::image(&group, SizeClass::Large)).await?;
//! assert_eq!(second.account().as_str(), "plus-1");
//! drop(first); // frees the slot
//!
//! // The pro account hits its image limit until a known reset 90 s from now.
//! let reset = clock.now().plus(std::time::Duration::from_secs(90));
//! pool.record_outcome(
//!     &"pro-1".into(),
//!     &Outcome::RateLimited { reset_at: Some(reset), scope: LimitScope::ImagesOnly },
//! )
//! .await?;
//! let err = pool.acquire(&DispatchRequest::image(&group, SizeClass::Large)).await.unwrap_err();
//! assert!(matches!(err, PoolError::AllBusy { .. })); // plus-1 still holds its only large slot
//!
//! let snapshot = pool.snapshot().await?;
//! println!("{}", serde_json::to_string_pretty(&snapshot).unwrap());
//! # Ok::<(), PoolError>(())
//! # }).unwrap();
//! ```

mod account;
mod account_set;
mod clock;
mod degradation;
mod dispatcher;
mod error;
mod expiry_queue;
mod fallback;
mod fallback_keys;
mod key_limits;
mod lease;
mod lease_table;
mod memory;
mod outcome;
#[cfg(feature = "redis")]
pub mod redis_backend;
mod room;
pub mod select;
mod snapshot;
mod state;
mod wait_lines;

pub use account::{AccountId, AccountSpec, ClassLimits, GroupId, SizeClass, Tier};
pub use account_set::AccountSet;
pub use clock::{Clock, ManualClock, SystemClock, UnixMillis};
pub use dispatcher::{DispatchConfig, DispatchRequest, Dispatcher};
pub use error::{KeyLimitError, PoolError, StateError};
pub use fallback::FallbackPoolState;
pub use fallback_keys::FallbackKeyLimiter;
pub use key_limits::{
    KeyAdmission, KeyGate, KeyLimiter, KeyLimits, KeyPermit, MemoryKeyLimiter, RATE_WINDOW,
};
pub use lease::Lease;
pub use memory::MemoryPoolState;
pub use outcome::{
    AccountHealth, AccountStatus, Cooldown, CooldownKind, CooldownPolicy, LastError, LimitScope, Outcome,
    rate_limit_backoff,
};
#[cfg(feature = "redis")]
pub use redis_backend::{RedisConfig, RedisKeyLimiter, RedisPoolState};
pub use select::{AccountRuntime, Candidate, ClassCounts, RankedCandidates};
pub use snapshot::{AccountSnapshot, CooldownView, PoolSnapshot};
pub use state::{Acquire, AcquireRequest, LeaseGrant, LeaseId, PoolState, StateSnapshot};

//! The upstream account pool of imagegate.
//!
//! This crate will own account eligibility (active, in the key's group, not cooling down, under its
//! concurrency limit for the request's size class), tier preference (pro > team > plus > free),
//! leases released on drop and expiring when their holder dies, cooldowns derived from upstream
//! outcomes, and the failover plan, behind a `PoolState` trait with an in-memory implementation and a
//! Redis implementation shared by several gateway replicas. It does no HTTP.
//!
//! ```
//! assert_eq!(imagegate_dispatch::CRATE_ROLE, "account pool");
//! ```

/// What this crate is for, until the pool lands.
pub const CRATE_ROLE: &str = "account pool";

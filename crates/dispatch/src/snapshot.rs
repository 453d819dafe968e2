//! A serialisable view of the pool for `imagegate accounts list --json`, the console and metrics.

use serde::Serialize;

use crate::account::{AccountId, AccountSpec, ClassLimits, GroupId, Tier};
use crate::clock::UnixMillis;
use crate::outcome::{AccountStatus, CooldownKind, LastError, LimitScope};
use crate::select::{AccountRuntime, ClassCounts};

/// The whole pool at one instant.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PoolSnapshot {
    /// When it was taken.
    pub at: UnixMillis,
    /// Every configured account, sorted by id.
    pub accounts: Vec<AccountSnapshot>,
}

/// One account: configuration, load and health.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct AccountSnapshot {
    /// Identifier.
    pub id: AccountId,
    /// Groups served.
    pub groups: Vec<GroupId>,
    /// Tier.
    pub tier: Tier,
    /// Priority within the tier.
    pub priority: i32,
    /// Switched on by the operator.
    pub active: bool,
    /// Requests in flight per size class.
    pub in_flight: ClassCounts,
    /// Concurrency limits per size class.
    pub limits: ClassLimits,
    /// Status (ok, or error/disabled with the reason).
    pub status: AccountStatus,
    /// Cooldowns still in force.
    pub cooldowns: Vec<CooldownView>,
    /// Successful calls.
    pub successes: u64,
    /// Failed calls.
    pub failures: u64,
    /// Most recent failure.
    pub last_error: Option<LastError>,
}

/// A cooldown in force.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CooldownView {
    /// Which requests it blocks.
    pub scope: LimitScope,
    /// When it ends.
    pub until: UnixMillis,
    /// Kind of cause.
    pub kind: CooldownKind,
    /// Human-readable cause.
    pub reason: String,
}

impl AccountSnapshot {
    /// Combines an account's spec with its runtime state (none: idle and healthy) at `now`.
    #[must_use]
    pub fn new(spec: &AccountSpec, runtime: Option<&AccountRuntime>, now: UnixMillis) -> Self {
        let idle = AccountRuntime::default();
        let runtime = runtime.unwrap_or(&idle);
        let health = &runtime.health;
        let scoped = [
            (LimitScope::All, &health.cooldown_all),
            (LimitScope::ImagesOnly, &health.cooldown_images),
        ];
        let cooldowns = scoped
            .into_iter()
            .filter_map(|(scope, cooldown)| {
                let cooldown = cooldown.as_ref().filter(|c| c.until > now)?;
                Some(CooldownView {
                    scope,
                    until: cooldown.until,
                    kind: cooldown.kind,
                    reason: cooldown.reason.clone(),
                })
            })
            .collect();
        Self {
            id: spec.id.clone(),
            groups: spec.groups.clone(),
            tier: spec.tier,
            priority: spec.priority,
            active: spec.active,
            in_flight: runtime.in_flight,
            limits: spec.limits,
            status: health.status.clone(),
            cooldowns,
            successes: health.successes,
            failures: health.failures,
            last_error: health.last_error.clone(),
        }
    }
}

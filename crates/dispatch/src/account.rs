//! Account configuration: the data the server loads from the store and hands to the pool.

use std::fmt;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

/// Identifier of an upstream account (cheap to clone).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct AccountId(Arc<str>);

impl AccountId {
    /// Wraps an identifier.
    #[must_use]
    pub fn new(id: &str) -> Self {
        Self(Arc::from(id))
    }

    /// The identifier as text.
    #[must_use]
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for AccountId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl From<&str> for AccountId {
    fn from(id: &str) -> Self {
        Self::new(id)
    }
}

/// Identifier of a group of accounts; an API key belongs to one group (cheap to clone).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct GroupId(Arc<str>);

impl GroupId {
    /// Wraps an identifier.
    #[must_use]
    pub fn new(id: &str) -> Self {
        Self(Arc::from(id))
    }

    /// The identifier as text.
    #[must_use]
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for GroupId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl From<&str> for GroupId {
    fn from(id: &str) -> Self {
        Self::new(id)
    }
}

/// Subscription tier of an account; higher tiers are preferred for image work.
///
/// API-key accounts have no subscription: the server gives them the tier configured for them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Tier {
    /// Free plan.
    Free,
    /// Plus plan.
    Plus,
    /// Team (business) plan.
    Team,
    /// Pro plan.
    Pro,
}

impl Tier {
    /// Preference rank: larger is preferred (pro 3, team 2, plus 1, free 0).
    #[must_use]
    pub fn rank(self) -> u8 {
        match self {
            Self::Free => 0,
            Self::Plus => 1,
            Self::Team => 2,
            Self::Pro => 3,
        }
    }
}

/// Whether a request produces large (above 2560x1440) or standard images: the domain's type.
pub use imagegate_domain::SizeClass;

/// Per-account concurrency limits, one per size class. A limit of 0 means "never for this class".
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClassLimits {
    /// Concurrent large-image requests (default 1).
    pub large: u32,
    /// Concurrent standard requests (default 4).
    pub standard: u32,
}

impl ClassLimits {
    /// The limit for `class`.
    #[must_use]
    pub fn for_class(self, class: SizeClass) -> u32 {
        match class {
            SizeClass::Large => self.large,
            SizeClass::Standard => self.standard,
        }
    }
}

impl Default for ClassLimits {
    fn default() -> Self {
        Self {
            large: 1,
            standard: 4,
        }
    }
}

/// Configuration of one upstream account, as far as the pool cares.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AccountSpec {
    /// Identifier (stable across restarts; used in usage records and the shared state).
    pub id: AccountId,
    /// Groups the account serves.
    pub groups: Vec<GroupId>,
    /// Subscription tier (or the configured tier for API-key accounts).
    pub tier: Tier,
    /// Preference within a tier: higher first.
    #[serde(default)]
    pub priority: i32,
    /// Concurrency limits per size class.
    #[serde(default)]
    pub limits: ClassLimits,
    /// Switched on by the operator; inactive accounts are never selected.
    #[serde(default = "default_active")]
    pub active: bool,
}

fn default_active() -> bool {
    true
}

impl AccountSpec {
    /// An active account with default limits and priority 0 in the given groups.
    #[must_use]
    pub fn new(id: &str, tier: Tier, groups: &[&str]) -> Self {
        Self {
            id: AccountId::new(id),
            groups: groups.iter().map(|g| GroupId::new(g)).collect(),
            tier,
            priority: 0,
            limits: ClassLimits::default(),
            active: true,
        }
    }

    /// The same spec with another priority.
    #[must_use]
    pub fn with_priority(mut self, priority: i32) -> Self {
        self.priority = priority;
        self
    }

    /// The same spec with other limits.
    #[must_use]
    pub fn with_limits(mut self, large: u32, standard: u32) -> Self {
        self.limits = ClassLimits { large, standard };
        self
    }

    /// The same spec switched on or off.
    #[must_use]
    pub fn with_active(mut self, active: bool) -> Self {
        self.active = active;
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tier_ranks_order_pro_team_plus_free() {
        assert!(Tier::Pro.rank() > Tier::Team.rank());
        assert!(Tier::Team.rank() > Tier::Plus.rank());
        assert!(Tier::Plus.rank() > Tier::Free.rank());
    }

    #[test]
    fn spec_defaults_from_json() {
        let spec: AccountSpec = serde_json::from_str(r#"{"id":"a1","groups":["g"],"tier":"team"}"#).unwrap();
        assert_eq!(spec, AccountSpec::new("a1", Tier::Team, &["g"]));
        assert_eq!(spec.limits.for_class(SizeClass::Large), 1);
        assert_eq!(spec.limits.for_class(SizeClass::Standard), 4);
    }
}

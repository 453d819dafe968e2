//! The loaded account configuration with each group's candidates ranked once.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use crate::account::{AccountId, AccountSpec, GroupId};
use crate::select::RankedCandidates;

/// Every configured account, and per group its ranked active accounts.
///
/// Built once per configuration load (O(n log n)); selection then never sorts.
#[derive(Debug, Clone, Default)]
pub struct AccountSet {
    specs: Vec<AccountSpec>,
    groups: HashMap<GroupId, Arc<RankedCandidates>>,
}

impl AccountSet {
    /// Builds the set; when two specs share an id, the later one wins.
    #[must_use]
    pub fn new(specs: impl IntoIterator<Item = AccountSpec>) -> Self {
        let by_id: BTreeMap<AccountId, AccountSpec> = specs.into_iter().map(|s| (s.id.clone(), s)).collect();
        let specs: Vec<AccountSpec> = by_id.into_values().collect();
        let mut names: Vec<&GroupId> = specs.iter().flat_map(|s| s.groups.iter()).collect();
        names.sort();
        names.dedup();
        let groups = names
            .into_iter()
            .map(|group| {
                (
                    group.clone(),
                    Arc::new(RankedCandidates::for_group(&specs, group)),
                )
            })
            .collect();
        Self { specs, groups }
    }

    /// Every spec, sorted by id.
    #[must_use]
    pub fn specs(&self) -> &[AccountSpec] {
        &self.specs
    }

    /// The spec of one account.
    #[must_use]
    pub fn spec(&self, id: &AccountId) -> Option<&AccountSpec> {
        self.specs
            .binary_search_by(|s| s.id.cmp(id))
            .ok()
            .and_then(|i| self.specs.get(i))
    }

    /// The ranked active accounts of `group` (none if the group has no account).
    #[must_use]
    pub fn group(&self, group: &GroupId) -> Option<&Arc<RankedCandidates>> {
        self.groups.get(group)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::account::Tier;

    #[test]
    fn later_duplicate_wins_and_groups_are_ranked() {
        let set = AccountSet::new([
            AccountSpec::new("b", Tier::Free, &["g", "h"]),
            AccountSpec::new("a", Tier::Free, &["g"]),
            AccountSpec::new("a", Tier::Pro, &["g"]),
        ]);
        assert_eq!(set.specs().len(), 2);
        assert_eq!(set.spec(&AccountId::new("a")).map(|s| s.tier), Some(Tier::Pro));
        let g = set.group(&GroupId::new("g")).unwrap();
        let ids: Vec<&str> = g.entries().iter().map(|c| c.id.as_str()).collect();
        assert_eq!(ids, vec!["a", "b"]);
        assert_eq!(set.group(&GroupId::new("h")).unwrap().len(), 1);
        assert!(set.group(&GroupId::new("nope")).is_none());
    }
}

//! A bound on the bytes that uploads in flight keep on disk at once, shared by every edit of a
//! process: without one, enough concurrent edits (up to 17 files of 50 MB each) fill the disk the
//! database and the usage spool live on, and the gateway then loses records, not only uploads.
//! An upload that would pass the bound is refused with a 503 the SDKs retry.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

/// The bytes uploads may keep on disk at once, and how many they keep now.
#[derive(Debug)]
pub struct DiskBudget {
    limit: u64,
    used: AtomicU64,
}

impl DiskBudget {
    /// A budget of `limit` bytes, none of them used.
    pub fn new(limit: u64) -> Arc<Self> {
        Arc::new(Self {
            limit,
            used: AtomicU64::new(0),
        })
    }

    /// The bound, in bytes.
    pub fn limit(&self) -> u64 {
        self.limit
    }

    /// The bytes uploads keep on disk now.
    pub fn in_use(&self) -> u64 {
        self.used.load(Ordering::Relaxed)
    }

    /// Takes `bytes` if they fit under the bound.
    fn take(&self, bytes: u64) -> bool {
        self.used
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |used| {
                used.checked_add(bytes).filter(|total| *total <= self.limit)
            })
            .is_ok()
    }

    fn give_back(&self, bytes: u64) {
        // Never more than was taken: the charge counts what it took.
        self.used.fetch_sub(bytes, Ordering::AcqRel);
    }
}

/// The bytes one temporary file has taken from a budget (none without one), given back when the
/// file goes.
#[derive(Debug, Default)]
pub(super) struct Charge {
    budget: Option<Arc<DiskBudget>>,
    bytes: u64,
}

impl Charge {
    pub(super) fn new(budget: Option<Arc<DiskBudget>>) -> Self {
        Self { budget, bytes: 0 }
    }

    /// Takes `bytes` more, if the budget has them.
    pub(super) fn add(&mut self, bytes: usize) -> bool {
        let bytes = u64::try_from(bytes).unwrap_or(u64::MAX);
        match &self.budget {
            Some(budget) if !budget.take(bytes) => false,
            _ => {
                self.bytes = self.bytes.saturating_add(bytes);
                true
            }
        }
    }
}

impl Drop for Charge {
    fn drop(&mut self) {
        if let Some(budget) = &self.budget {
            budget.give_back(self.bytes);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn charges_fit_under_the_bound_and_are_given_back_when_dropped() {
        let budget = DiskBudget::new(100);
        let mut first = Charge::new(Some(budget.clone()));
        assert!(first.add(60));
        let mut second = Charge::new(Some(budget.clone()));
        assert!(!second.add(41), "60 + 41 is over 100");
        assert!(second.add(40));
        assert_eq!(budget.in_use(), 100);
        drop(first);
        assert_eq!(budget.in_use(), 40);
        drop(second);
        assert_eq!(budget.in_use(), 0);
        let mut unbounded = Charge::new(None);
        assert!(unbounded.add(usize::MAX));
    }
}

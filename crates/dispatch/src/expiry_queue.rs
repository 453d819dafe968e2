//! When each lease of the in-memory state expires, in a min-heap with lazy removal.
//!
//! A lease is pushed when it is granted and again when it is renewed; a release removes nothing.
//! The entries a release or a renewal leaves behind are told apart when they come out of the heap
//! (the caller checks the lease still exists with that expiry), and are swept whenever they
//! outnumber the live ones, so the heap stays within twice the live leases plus a constant.
//! Leases are granted with the same TTL, so a push lands at the bottom of the heap after one
//! comparison: granting and releasing cost O(1) (amortised) however many leases are held, where
//! an ordered set paid two O(log n) tree walks per lease.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use crate::clock::UnixMillis;
use crate::state::LeaseId;

/// Entries kept beyond twice the live leases before a sweep.
const SLACK: usize = 64;

/// Expiry times of leases, earliest first.
#[derive(Debug, Default)]
pub(crate) struct ExpiryQueue {
    heap: BinaryHeap<Reverse<(UnixMillis, LeaseId)>>,
}

impl ExpiryQueue {
    /// Records that lease `id` expires at `at` (an earlier entry of the same lease goes stale).
    pub(crate) fn push(&mut self, at: UnixMillis, id: LeaseId) {
        self.heap.push(Reverse((at, id)));
    }

    /// Takes the earliest entry due at `now`, stale or not.
    pub(crate) fn pop_due(&mut self, now: UnixMillis) -> Option<(UnixMillis, LeaseId)> {
        let Reverse(earliest) = self.heap.peek()?;
        if earliest.0 > now {
            return None;
        }
        self.heap.pop().map(|Reverse(entry)| entry)
    }

    /// Sweeps the stale entries once they outnumber the `live` leases; `is_current` tells whether
    /// an entry is still its lease's expiry.
    pub(crate) fn sweep_if_stale(&mut self, live: usize, is_current: impl Fn(UnixMillis, LeaseId) -> bool) {
        if self.heap.len() <= live.saturating_mul(2).saturating_add(SLACK) {
            return;
        }
        self.heap.retain(|Reverse((at, id))| is_current(*at, *id));
    }

    /// Entries held, stale ones included (tests).
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.heap.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_come_out_earliest_first_and_only_when_due() {
        let mut queue = ExpiryQueue::default();
        queue.push(UnixMillis(30), LeaseId(3));
        queue.push(UnixMillis(10), LeaseId(1));
        queue.push(UnixMillis(20), LeaseId(2));
        assert_eq!(queue.pop_due(UnixMillis(5)), None);
        assert_eq!(queue.pop_due(UnixMillis(20)), Some((UnixMillis(10), LeaseId(1))));
        assert_eq!(queue.pop_due(UnixMillis(20)), Some((UnixMillis(20), LeaseId(2))));
        assert_eq!(queue.pop_due(UnixMillis(20)), None);
        assert_eq!(
            queue.pop_due(UnixMillis(u64::MAX)),
            Some((UnixMillis(30), LeaseId(3)))
        );
    }

    #[test]
    fn stale_entries_are_swept_once_they_outnumber_the_live_ones() {
        let mut queue = ExpiryQueue::default();
        for id in 0..200 {
            queue.push(UnixMillis(100 + id), LeaseId(id));
        }
        // Only the even leases are still live.
        let current = |_: UnixMillis, id: LeaseId| id.0.is_multiple_of(2);
        queue.sweep_if_stale(100, current);
        assert_eq!(queue.len(), 200, "within twice the live leases plus the slack");
        queue.sweep_if_stale(60, current);
        assert_eq!(queue.len(), 100);
        assert_eq!(
            queue.pop_due(UnixMillis(u64::MAX)),
            Some((UnixMillis(100), LeaseId(0)))
        );
        assert_eq!(
            queue.pop_due(UnixMillis(u64::MAX)),
            Some((UnixMillis(102), LeaseId(2)))
        );
    }
}

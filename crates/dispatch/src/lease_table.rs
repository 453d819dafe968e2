//! A slab of live leases for the in-memory state: O(1) insert, lookup and removal without hashing.
//!
//! A [`LeaseId`] packs the slab index (low 32 bits) and the generation of that entry (high 32
//! bits), so an id of a released or expired lease never matches the entry's next occupant (unless
//! the same entry is reused 2^32 times while the stale id is still held).

use crate::state::LeaseId;

#[derive(Debug)]
struct Entry<T> {
    generation: u32,
    value: Option<T>,
}

/// Live leases by id.
#[derive(Debug)]
pub(crate) struct LeaseTable<T> {
    entries: Vec<Entry<T>>,
    free: Vec<u32>,
}

impl<T> Default for LeaseTable<T> {
    fn default() -> Self {
        Self {
            entries: Vec::new(),
            free: Vec::new(),
        }
    }
}

fn split(id: LeaseId) -> (usize, u32) {
    let index = usize::try_from(id.0 & u64::from(u32::MAX)).unwrap_or(usize::MAX);
    let generation = u32::try_from(id.0 >> 32).unwrap_or(u32::MAX);
    (index, generation)
}

impl<T> LeaseTable<T> {
    /// Stores `value`; `None` only if the table already holds 2^32 leases.
    pub(crate) fn insert(&mut self, value: T) -> Option<LeaseId> {
        let index = match self.free.pop() {
            Some(index) => index,
            None => {
                let index = u32::try_from(self.entries.len()).ok()?;
                self.entries.push(Entry {
                    generation: 0,
                    value: None,
                });
                index
            }
        };
        let entry = self.entries.get_mut(usize::try_from(index).ok()?)?;
        entry.value = Some(value);
        Some(LeaseId((u64::from(entry.generation) << 32) | u64::from(index)))
    }

    /// The live lease `id`.
    pub(crate) fn get(&self, id: LeaseId) -> Option<&T> {
        let (index, generation) = split(id);
        let entry = self.entries.get(index)?;
        if entry.generation != generation {
            return None;
        }
        entry.value.as_ref()
    }

    /// Live leases held.
    pub(crate) fn len(&self) -> usize {
        self.entries.len() - self.free.len()
    }

    /// The live lease `id`, to change it.
    pub(crate) fn get_mut(&mut self, id: LeaseId) -> Option<&mut T> {
        let (index, generation) = split(id);
        let entry = self.entries.get_mut(index)?;
        if entry.generation != generation {
            return None;
        }
        entry.value.as_mut()
    }

    /// Removes the live lease `id`.
    pub(crate) fn remove(&mut self, id: LeaseId) -> Option<T> {
        let (index, generation) = split(id);
        let entry = self.entries.get_mut(index)?;
        if entry.generation != generation {
            return None;
        }
        let value = entry.value.take()?;
        entry.generation = entry.generation.wrapping_add(1);
        self.free.push(u32::try_from(index).ok()?);
        Some(value)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stale_ids_do_not_reach_the_next_occupant() {
        let mut table = LeaseTable::default();
        let first = table.insert("a").unwrap();
        assert_eq!(table.remove(first), Some("a"));
        let second = table.insert("b").unwrap();
        assert_ne!(first, second, "the entry is reused with a new generation");
        assert_eq!(table.remove(first), None);
        assert_eq!(table.get_mut(first), None);
        assert_eq!(table.get_mut(second).copied(), Some("b"));
        assert_eq!(table.get(first), None);
        assert_eq!(table.get(second).copied(), Some("b"));
        assert_eq!(table.len(), 1);
        assert_eq!(table.remove(LeaseId(u64::MAX)), None);
    }
}

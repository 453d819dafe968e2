//! Which accounts of a candidate list still have room, per band and size class, kept current on
//! every lease and release, so a pick skips full accounts without looking at them.
//!
//! [`crate::select::select`] walks every account of a band, full ones included: when the best
//! bands of a large pool are full, a pick costs a look at each of their accounts (2,500 of them
//! with four full bands of 625). The in-memory state keeps a [`RoomIndex`] beside each candidate
//! list it has seen: for each band and size class, the positions of the accounts below their class
//! limit. A pick walks only those, with the same rules and the same compare window as `select`, so
//! while some band has an eligible account, a pick costs about as much with 10,000 accounts as with
//! 10, however many are full.
//!
//! The index only knows load, not health: cooling, errored and excluded accounts are still looked
//! at and passed over, as `select` does. When it finds nothing, the state falls back to `select`,
//! whose walk also tells busy from cooling down from unavailable: a pool with no eligible account
//! at all (every account full or cooling) still costs a walk of the whole list, twice when the
//! accounts with room are all cooling.

use crate::account::{ClassLimits, SizeClass};
use crate::select::{AccountLoad, ClassCounts, RankedCandidates, SelectionQuery, SplitMix, Visit, Walk};

/// Marks a position absent from its band's room list.
const ABSENT: u32 = u32::MAX;

/// The room index of one candidate list.
#[derive(Debug)]
pub(crate) struct RoomIndex {
    positions: Vec<Position>,
    /// Per band: the positions with room, per class ([`class_index`]).
    bands: Vec<[Vec<Room>; 2]>,
}

/// A list position with room for a class, with its limit for that class, so a pick reads the
/// candidate list only for exclusions.
#[derive(Debug, Clone, Copy)]
struct Room {
    position: u32,
    limit: u32,
}

/// A list position: its band, its limits, and where it sits in its band's room lists.
#[derive(Debug)]
struct Position {
    band: usize,
    limits: ClassLimits,
    at: [u32; 2],
}

fn class_index(class: SizeClass) -> usize {
    match class {
        SizeClass::Large => 0,
        SizeClass::Standard => 1,
    }
}

const CLASSES: [SizeClass; 2] = [SizeClass::Large, SizeClass::Standard];

impl RoomIndex {
    /// The index of `list`, with `in_flight` giving the current load of each position.
    pub(crate) fn new(list: &RankedCandidates, in_flight: impl Fn(usize) -> ClassCounts) -> Self {
        let mut index = Self {
            positions: Vec::with_capacity(list.len()),
            bands: Vec::new(),
        };
        for (band, (start, end)) in list.bands().enumerate() {
            index.bands.push([Vec::new(), Vec::new()]);
            for position in start..end {
                let limits = list.entries().get(position).map_or(
                    ClassLimits {
                        large: 0,
                        standard: 0,
                    },
                    |c| c.limits,
                );
                index.positions.push(Position {
                    band,
                    limits,
                    at: [ABSENT; 2],
                });
                for class in CLASSES {
                    index.set(position, class, in_flight(position).get(class));
                }
            }
        }
        index
    }

    /// Records that the account at `position` now has `used` requests of `class` in flight.
    pub(crate) fn set(&mut self, position: usize, class: SizeClass, used: u32) {
        let which = class_index(class);
        let Some(entry) = self.positions.get(position) else {
            return;
        };
        let limit = entry.limits.for_class(class);
        let has_room = used < limit;
        let at = entry.at.get(which).copied().unwrap_or(ABSENT);
        let band = entry.band;
        let Some(room) = self.bands.get_mut(band).and_then(|b| b.get_mut(which)) else {
            return;
        };
        match (has_room, at == ABSENT) {
            (true, true) => {
                let Ok(slot) = u32::try_from(room.len()) else {
                    return;
                };
                let Ok(stored) = u32::try_from(position) else {
                    return;
                };
                room.push(Room {
                    position: stored,
                    limit,
                });
                self.set_at(position, which, slot);
            }
            (false, false) => {
                let slot = at as usize;
                if slot >= room.len() {
                    return;
                }
                room.swap_remove(slot);
                if let Some(&moved) = room.get(slot) {
                    self.set_at(moved.position as usize, which, at);
                }
                self.set_at(position, which, ABSENT);
            }
            _ => {}
        }
    }

    fn set_at(&mut self, position: usize, which: usize, value: u32) {
        if let Some(at) = self.positions.get_mut(position).and_then(|p| p.at.get_mut(which)) {
            *at = value;
        }
    }

    /// Picks like [`crate::select::select`] among the accounts with room, or `None` when none is
    /// eligible (the caller then asks `select` why); `load` reads the state of a list position.
    pub(crate) fn pick(
        &self,
        list: &RankedCandidates,
        query: &SelectionQuery<'_>,
        load: impl Fn(usize) -> Option<AccountLoad>,
        random: u64,
    ) -> Option<usize> {
        let mut rng = SplitMix(random);
        let mut walk = Walk::default();
        let which = class_index(query.class);
        for band in &self.bands {
            let Some(room) = band.get(which) else {
                continue;
            };
            if room.is_empty() {
                continue;
            }
            let offset = rng.below(room.len());
            let rotated = room.get(offset..).into_iter().chain(room.get(..offset)).flatten();
            for room in rotated {
                let index = room.position as usize;
                if index >= list.len() {
                    continue;
                }
                let excluded = || {
                    list.entries()
                        .get(index)
                        .is_some_and(|candidate| query.exclude.contains(&candidate.id))
                };
                if walk.visit(index, room.limit, query, excluded, || load(index)) == Visit::Stop {
                    break;
                }
            }
            if let Some(index) = walk.take_best() {
                return Some(index);
            }
        }
        None
    }

    /// The positions with room in `band` for `class` (tests).
    #[cfg(test)]
    pub(crate) fn room(&self, band: usize, class: SizeClass) -> Vec<u32> {
        let mut room: Vec<u32> = self
            .bands
            .get(band)
            .and_then(|b| b.get(class_index(class)))
            .map(|room| room.iter().map(|r| r.position).collect())
            .unwrap_or_default();
        room.sort_unstable();
        room
    }
}

#[cfg(test)]
#[path = "room_tests.rs"]
mod tests;

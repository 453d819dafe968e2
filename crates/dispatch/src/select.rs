//! Pure account selection over a group's pre-ranked candidate list.
//!
//! A group's candidates are sorted once, when the specs are loaded, into *bands* of equal
//! (tier, priority), best band first. Selection walks the bands in order and takes, in the first
//! band that has an eligible account, the least loaded one it compares. The walk in a band starts
//! at a random offset and stops at the first idle eligible account (nothing can be less loaded), so
//! the usual pick costs a handful of lookups whatever the pool size; only when the best bands are
//! busy or cooling does it look further. Ties between equally loaded accounts are broken by the
//! random start.
//!
//! When every account of a large band is already working, the walk compares at most
//! [`COMPARE_WINDOW`] eligible accounts (from its random start) and takes the least loaded of
//! those: the "best of k random choices" rule that load balancers such as Envoy's least-request
//! policy use, so a pick over 10,000 busy accounts costs as much as one over 32. Bands up to the
//! window's size are compared in full (exact least-loaded). Full, cooling and excluded accounts do
//! not count toward the window, so an eligible account is always found when one exists.

use serde::Serialize;

use crate::account::{AccountId, AccountSpec, ClassLimits, GroupId, SizeClass};
use crate::clock::UnixMillis;
use crate::outcome::AccountHealth;

/// How many eligible accounts a walk through a band compares, at most, before it takes the least
/// loaded of them (see the module docs).
pub const COMPARE_WINDOW: usize = 32;

/// One account as seen by selection.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Candidate {
    /// The account.
    pub id: AccountId,
    /// Tier preference rank (larger first).
    pub tier_rank: u8,
    /// Priority within the tier (larger first).
    pub priority: i32,
    /// Concurrency limits per size class.
    pub limits: ClassLimits,
}

impl Candidate {
    /// The candidate for a spec.
    #[must_use]
    pub fn from_spec(spec: &AccountSpec) -> Self {
        Self {
            id: spec.id.clone(),
            tier_rank: spec.tier.rank(),
            priority: spec.priority,
            limits: spec.limits,
        }
    }
}

/// A group's active accounts sorted best first, split into bands of equal (tier, priority).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RankedCandidates {
    entries: Vec<Candidate>,
    band_ends: Vec<usize>,
}

impl RankedCandidates {
    /// Sorts `entries` (tier, then priority, both descending; id for a stable order).
    #[must_use]
    pub fn new(mut entries: Vec<Candidate>) -> Self {
        entries.sort_by(|a, b| {
            (b.tier_rank, b.priority)
                .cmp(&(a.tier_rank, a.priority))
                .then_with(|| a.id.cmp(&b.id))
        });
        let mut band_ends = Vec::new();
        for (index, pair) in entries.windows(2).enumerate() {
            if let [a, b] = pair
                && (a.tier_rank, a.priority) != (b.tier_rank, b.priority)
            {
                band_ends.push(index + 1);
            }
        }
        if !entries.is_empty() {
            band_ends.push(entries.len());
        }
        Self { entries, band_ends }
    }

    /// The active accounts of `specs` that serve `group`.
    #[must_use]
    pub fn for_group<'a>(specs: impl IntoIterator<Item = &'a AccountSpec>, group: &GroupId) -> Self {
        let entries = specs
            .into_iter()
            .filter(|s| s.active && s.groups.contains(group))
            .map(Candidate::from_spec)
            .collect();
        Self::new(entries)
    }

    /// All candidates, best first.
    #[must_use]
    pub fn entries(&self) -> &[Candidate] {
        &self.entries
    }

    /// Number of candidates.
    #[must_use]
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether there is no candidate.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The bands as (start, end) index ranges, best first.
    pub fn bands(&self) -> impl Iterator<Item = (usize, usize)> + '_ {
        let starts = std::iter::once(0).chain(self.band_ends.iter().copied());
        starts.zip(self.band_ends.iter().copied())
    }
}

/// Requests in flight on an account, per size class.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct ClassCounts {
    /// Large-image requests.
    pub large: u32,
    /// Standard requests.
    pub standard: u32,
}

impl ClassCounts {
    /// The count for `class`.
    #[must_use]
    pub fn get(self, class: SizeClass) -> u32 {
        match class {
            SizeClass::Large => self.large,
            SizeClass::Standard => self.standard,
        }
    }

    /// Mutable count for `class`.
    pub fn get_mut(&mut self, class: SizeClass) -> &mut u32 {
        match class {
            SizeClass::Large => &mut self.large,
            SizeClass::Standard => &mut self.standard,
        }
    }

    fn total(self) -> u64 {
        u64::from(self.large) + u64::from(self.standard)
    }
}

/// Runtime state of one account: load and health.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AccountRuntime {
    /// Requests in flight.
    pub in_flight: ClassCounts,
    /// What outcomes taught.
    pub health: AccountHealth,
}

/// The part of an account's runtime state that selection reads: small and `Copy`, so a state
/// backend can keep these in a dense array and selection stays cache-friendly.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AccountLoad {
    /// Requests in flight.
    pub in_flight: ClassCounts,
    /// Status allows selection (no error, not disabled).
    pub usable: bool,
    /// End of the last cooldown blocking every request (may be past).
    pub cooling_until: Option<UnixMillis>,
    /// End of the last cooldown blocking image requests (may be past).
    pub images_cooling_until: Option<UnixMillis>,
    /// End of the open circuit breaker that is the account's cooldown (may be past: then the
    /// breaker is half-open); see [`AccountHealth::breaker_until`].
    pub breaker_until: Option<UnixMillis>,
}

impl Default for AccountLoad {
    fn default() -> Self {
        Self {
            in_flight: ClassCounts::default(),
            usable: true,
            cooling_until: None,
            images_cooling_until: None,
            breaker_until: None,
        }
    }
}

impl AccountLoad {
    /// The selection view of a runtime state.
    #[must_use]
    pub fn of(runtime: &AccountRuntime) -> Self {
        Self {
            in_flight: runtime.in_flight,
            ..Self::default()
        }
        .with_health(&runtime.health)
    }

    /// The same load with the health-derived fields taken from `health`.
    #[must_use]
    pub fn with_health(self, health: &AccountHealth) -> Self {
        Self {
            in_flight: self.in_flight,
            usable: health.is_usable(),
            cooling_until: health.cooldown_all.as_ref().map(|c| c.until),
            images_cooling_until: health.cooldown_images.as_ref().map(|c| c.until),
            breaker_until: health.breaker_until(),
        }
    }

    /// Whether the account's breaker is half-open at `now`: its cooldown over, no success since.
    #[must_use]
    pub fn half_open(&self, now: UnixMillis) -> bool {
        self.breaker_until.is_some_and(|until| until <= now)
    }

    /// End of the cooldown that blocks a request (`image` or not) at `now`, if any.
    #[must_use]
    pub fn blocked_until(&self, image: bool, now: UnixMillis) -> Option<UnixMillis> {
        let all = self.cooling_until.filter(|&until| until > now);
        let images = self.images_cooling_until.filter(|&until| image && until > now);
        all.max(images)
    }
}

/// What a request needs from the pool.
#[derive(Debug, Clone, Copy)]
pub struct SelectionQuery<'a> {
    /// Size class of the request.
    pub class: SizeClass,
    /// Whether it generates or edits images (image-only cooldowns apply).
    pub image: bool,
    /// Current time.
    pub now: UnixMillis,
    /// Accounts not to use (already tried by this request).
    pub exclude: &'a [AccountId],
}

/// Result of a selection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Selection {
    /// The candidate at this index of [`RankedCandidates::entries`].
    Selected(usize),
    /// No account is eligible, but some would be once a slot frees.
    Busy,
    /// No account is eligible or busy; some are cooling down, the first until `earliest_reset`.
    CoolingDown {
        /// When the first cooling account becomes usable again.
        earliest_reset: UnixMillis,
    },
    /// No usable account at all (none, all in error, excluded, or limit 0 for the class).
    Unavailable,
}

/// Picks an account for `query` among `ranked`; `lookup` gives the load of the candidate at an
/// index of [`RankedCandidates::entries`] (none means idle and healthy); `random` seeds the
/// tie-breaks.
///
/// Within a band the walk starts at an offset drawn from `random` and keeps the first of the least
/// loaded accounts it meets among at most [`COMPARE_WINDOW`] eligible ones, so equally loaded
/// accounts are all picked, though not with exactly equal odds when busy or cooling accounts sit
/// between them.
pub fn select(
    ranked: &RankedCandidates,
    query: &SelectionQuery<'_>,
    lookup: impl Fn(usize, &Candidate) -> Option<AccountLoad>,
    random: u64,
) -> Selection {
    let mut rng = SplitMix(random);
    let mut walk = Walk::default();
    for (start, end) in ranked.bands() {
        let Some(band) = ranked.entries.get(start..end) else {
            continue;
        };
        let offset = rng.below(band.len());
        let rotated = (offset..band.len()).chain(0..offset);
        for position in rotated {
            let Some(candidate) = band.get(position) else {
                continue;
            };
            let index = start + position;
            let limit = candidate.limits.for_class(query.class);
            let excluded = || query.exclude.contains(&candidate.id);
            if walk.visit(index, limit, query, excluded, || lookup(index, candidate)) == Visit::Stop {
                break;
            }
        }
        if let Some(index) = walk.take_best() {
            return Selection::Selected(index);
        }
    }
    walk.outcome()
}

/// One walk of [`select`]'s rules over bands: what it found so far.
#[derive(Debug, Default)]
pub(crate) struct Walk {
    best: Option<(usize, Load)>,
    compared: usize,
    any_busy: bool,
    earliest_reset: Option<UnixMillis>,
}

/// Whether a band's walk goes on after a candidate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Visit {
    Continue,
    /// An idle account, or the compare window is used up: take the band's best.
    Stop,
}

impl Walk {
    /// Considers the candidate at `index`, whose limit for the query's class is `limit`;
    /// `excluded` tells whether the query excludes it (asked only when it excludes any), `load`
    /// reads its state (none: idle and healthy) only when it is not already ruled out by its limit
    /// or the exclusions.
    pub(crate) fn visit(
        &mut self,
        index: usize,
        limit: u32,
        query: &SelectionQuery<'_>,
        excluded: impl FnOnce() -> bool,
        load: impl FnOnce() -> Option<AccountLoad>,
    ) -> Visit {
        if limit == 0 || (!query.exclude.is_empty() && excluded()) {
            return Visit::Continue;
        }
        let account = load().unwrap_or_default();
        if !account.usable {
            return Visit::Continue;
        }
        if let Some(until) = account.blocked_until(query.image, query.now) {
            self.earliest_reset = Some(self.earliest_reset.map_or(until, |e| e.min(until)));
            return Visit::Continue;
        }
        let used = account.in_flight.get(query.class);
        let total = account.in_flight.total();
        // A half-open breaker lets one request through, its probe, and the others wait for it.
        if used >= limit || (total > 0 && account.half_open(query.now)) {
            self.any_busy = true;
            return Visit::Continue;
        }
        if total == 0 {
            self.best = Some((index, Load { used, limit, total }));
            return Visit::Stop;
        }
        let load = Load { used, limit, total };
        if self
            .best
            .as_ref()
            .is_none_or(|(_, current)| load.cmp_to(current).is_lt())
        {
            self.best = Some((index, load));
        }
        self.compared += 1;
        if self.compared >= COMPARE_WINDOW {
            Visit::Stop
        } else {
            Visit::Continue
        }
    }

    /// The band's pick, if it had an eligible account; the next band starts afresh.
    pub(crate) fn take_best(&mut self) -> Option<usize> {
        self.compared = 0;
        self.best.take().map(|(index, _)| index)
    }

    /// What a walk that picked nothing means.
    pub(crate) fn outcome(&self) -> Selection {
        match (self.any_busy, self.earliest_reset) {
            (true, _) => Selection::Busy,
            (false, Some(earliest_reset)) => Selection::CoolingDown { earliest_reset },
            (false, None) => Selection::Unavailable,
        }
    }
}

/// Load of an eligible account: share of the class limit in use, then total requests in flight.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Load {
    used: u32,
    limit: u32,
    total: u64,
}

impl Load {
    fn cmp_to(&self, other: &Self) -> std::cmp::Ordering {
        let mine = u64::from(self.used) * u64::from(other.limit);
        let theirs = u64::from(other.used) * u64::from(self.limit);
        mine.cmp(&theirs).then(self.total.cmp(&other.total))
    }
}

/// Small deterministic generator for tie-breaks (SplitMix64).
#[derive(Debug)]
pub(crate) struct SplitMix(pub(crate) u64);

impl SplitMix {
    /// A number below `len` (0 when `len` is 0).
    pub(crate) fn below(&mut self, len: usize) -> usize {
        usize::try_from(self.next() % len.max(1) as u64).unwrap_or(0)
    }

    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
}

#[cfg(test)]
#[path = "select_tests.rs"]
mod tests;

use super::*;
use crate::account::{AccountSpec, GroupId, Tier};

const NOW: UnixMillis = UnixMillis(1_000_000);

fn list(group: &str, specs: &[AccountSpec]) -> Arc<RankedCandidates> {
    Arc::new(RankedCandidates::for_group(specs, &GroupId::new(group)))
}

fn request(candidates: &Arc<RankedCandidates>) -> AcquireRequest {
    AcquireRequest {
        candidates: Arc::clone(candidates),
        class: SizeClass::Large,
        image: true,
        exclude: Vec::new(),
        lease_ttl: Duration::from_secs(60),
        now: NOW,
    }
}

/// The ids with room for large requests in the first band of `list`, per the state's index.
fn with_room(state: &MemoryPoolState, list: &Arc<RankedCandidates>) -> Vec<String> {
    let mut inner = state.lock();
    let key = inner.cache_slots(list);
    let room = inner.slot_cache.get(&key).unwrap().room.room(0, SizeClass::Large);
    room.iter()
        .map(|&p| list.entries()[p as usize].id.as_str().to_owned())
        .collect()
}

fn granted(acquire: Acquire) -> LeaseGrant {
    match acquire {
        Acquire::Granted(grant) => grant,
        other => panic!("expected a grant, got {other:?}"),
    }
}

#[test]
fn leases_and_releases_reach_the_room_index_of_every_list_holding_the_account() {
    let specs = [
        AccountSpec::new("shared", Tier::Pro, &["a", "b"]).with_limits(1, 1),
        AccountSpec::new("other", Tier::Pro, &["b"]).with_limits(1, 1),
    ];
    let (in_a, in_b) = (list("a", &specs), list("b", &specs));
    let state = MemoryPoolState::with_seed(CooldownPolicy::default(), 3);
    assert_eq!(with_room(&state, &in_b), ["other", "shared"]);
    let grant = granted(state.lock().acquire(&request(&in_a)));
    assert_eq!(grant.account.as_str(), "shared");
    assert_eq!(
        with_room(&state, &in_b),
        ["other"],
        "full through a, so full for b"
    );
    assert!(with_room(&state, &in_a).is_empty());
    state.lock().release(grant.id);
    assert_eq!(with_room(&state, &in_b), ["other", "shared"]);
    assert_eq!(with_room(&state, &in_a), ["shared"]);
}

#[test]
fn an_expired_lease_gives_its_room_back() {
    let specs = [AccountSpec::new("a", Tier::Pro, &["g"]).with_limits(1, 1)];
    let group = list("g", &specs);
    let state = MemoryPoolState::with_seed(CooldownPolicy::default(), 3);
    granted(state.lock().acquire(&request(&group)));
    assert!(with_room(&state, &group).is_empty());
    state.lock().purge_expired(NOW.plus(Duration::from_secs(61)));
    assert_eq!(with_room(&state, &group), ["a"]);
}

#[test]
fn a_renewed_lease_outlives_its_first_expiry_and_a_released_one_leaves_nothing_to_expire() {
    let specs = [AccountSpec::new("a", Tier::Pro, &["g"]).with_limits(2, 2)];
    let group = list("g", &specs);
    let state = MemoryPoolState::with_seed(CooldownPolicy::default(), 3);
    let renewed = granted(state.lock().acquire(&request(&group)));
    let released = granted(state.lock().acquire(&request(&group)));
    let later = NOW.plus(Duration::from_secs(30));
    assert!(
        state
            .lock()
            .renew(renewed.id, Duration::from_secs(60), later)
            .is_some()
    );
    state.lock().release(released.id);
    // The slab entry of the released lease is taken by a new lease expiring later.
    let reused = granted(state.lock().acquire(&AcquireRequest {
        lease_ttl: Duration::from_secs(120),
        ..request(&group)
    }));
    state.lock().purge_expired(NOW.plus(Duration::from_secs(61)));
    assert!(with_room(&state, &group).is_empty(), "both leases are still held");
    assert!(state.lock().leases.get(reused.id).is_some());
    state.lock().purge_expired(later.plus(Duration::from_secs(61)));
    assert_eq!(
        with_room(&state, &group),
        ["a"],
        "the renewed lease expired at its new time"
    );
    state.lock().purge_expired(NOW.plus(Duration::from_secs(121)));
    assert!(state.lock().leases.get(reused.id).is_none());
}

#[test]
fn released_and_renewed_leases_do_not_pile_up_in_the_expiry_queue() {
    let specs = [AccountSpec::new("a", Tier::Pro, &["g"]).with_limits(4, 4)];
    let group = list("g", &specs);
    let state = MemoryPoolState::with_seed(CooldownPolicy::default(), 3);
    let held = granted(state.lock().acquire(&request(&group)));
    for round in 0..10_000_u64 {
        let grant = granted(state.lock().acquire(&request(&group)));
        state.lock().release(grant.id);
        let now = NOW.plus(Duration::from_millis(round));
        assert!(
            state
                .lock()
                .renew(held.id, Duration::from_secs(60), now)
                .is_some()
        );
    }
    let queued = state.lock().expiries.len();
    assert!(queued <= 2 + 64, "{queued} entries for one live lease");
}

#[test]
fn a_new_list_starts_from_the_leases_held_and_dropped_lists_leave_no_memberships() {
    let specs = [AccountSpec::new("a", Tier::Pro, &["g"]).with_limits(1, 1)];
    let old = list("g", &specs);
    let state = MemoryPoolState::with_seed(CooldownPolicy::default(), 3);
    let grant = granted(state.lock().acquire(&request(&old)));
    drop(old);
    let new = list("g", &specs);
    assert!(
        with_room(&state, &new).is_empty(),
        "the held lease counts in the new list"
    );
    assert_eq!(state.lock().memberships.iter().map(Vec::len).sum::<usize>(), 1);
    state.lock().release(grant.id);
    assert_eq!(with_room(&state, &new), ["a"]);
}

mod random_operations {
    use proptest::prelude::*;

    use super::*;

    #[derive(Debug, Clone)]
    enum Op {
        Acquire { group_b: bool, large: bool },
        Release(usize),
        ExpireAll,
        Replace { group_b: bool },
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            4 => (any::<bool>(), any::<bool>()).prop_map(|(group_b, large)| Op::Acquire { group_b, large }),
            2 => (0..64_usize).prop_map(Op::Release),
            1 => Just(Op::ExpireAll),
            1 => any::<bool>().prop_map(|group_b| Op::Replace { group_b }),
        ]
    }

    fn specs(shape: &[(u8, u32, u32, u8)]) -> Vec<AccountSpec> {
        shape
            .iter()
            .enumerate()
            .map(|(i, &(tier, large, standard, groups))| {
                let tier = [Tier::Plus, Tier::Pro][usize::from(tier % 2)];
                let groups: &[&str] = match groups % 3 {
                    0 => &["a"],
                    1 => &["b"],
                    _ => &["a", "b"],
                };
                AccountSpec::new(&format!("acct{i}"), tier, groups).with_limits(large, standard)
            })
            .collect()
    }

    /// The index of `list` against the dense table, band by band and class by class.
    fn check(state: &MemoryPoolState, list: &Arc<RankedCandidates>) -> Result<(), TestCaseError> {
        let mut inner = state.lock();
        let key = inner.cache_slots(list);
        let cached = inner.slot_cache.get(&key).unwrap();
        for (band, (start, end)) in list.bands().enumerate() {
            for class in [SizeClass::Large, SizeClass::Standard] {
                let expected: Vec<u32> = (start..end)
                    .filter(|&p| {
                        let used = inner.loads[cached.slots[p]].in_flight.get(class);
                        used < list.entries()[p].limits.for_class(class)
                    })
                    .map(|p| u32::try_from(p).unwrap())
                    .collect();
                prop_assert_eq!(
                    cached.room.room(band, class),
                    expected,
                    "band {} {:?}",
                    band,
                    class
                );
            }
        }
        Ok(())
    }

    proptest! {
        #[test]
        fn the_room_index_matches_the_loads_whatever_happens(
            shape in prop::collection::vec((any::<u8>(), 0..3_u32, 0..4_u32, any::<u8>()), 1..8),
            ops in prop::collection::vec(op(), 1..60),
        ) {
            let specs = specs(&shape);
            let mut lists = [list("a", &specs), list("b", &specs)];
            let state = MemoryPoolState::with_seed(CooldownPolicy::default(), 11);
            let mut leases = Vec::new();
            let mut now = NOW;
            for op in ops {
                match op {
                    Op::Acquire { group_b, large } => {
                        let mut request = request(&lists[usize::from(group_b)]);
                        request.class = if large { SizeClass::Large } else { SizeClass::Standard };
                        request.now = now;
                        if let Acquire::Granted(grant) = state.lock().acquire(&request) {
                            leases.push(grant.id);
                        }
                    }
                    Op::Release(which) => {
                        if !leases.is_empty() {
                            let id = leases.swap_remove(which % leases.len());
                            state.lock().release(id);
                        }
                    }
                    Op::ExpireAll => {
                        now = now.plus(Duration::from_secs(61));
                        state.lock().purge_expired(now);
                        leases.clear();
                    }
                    Op::Replace { group_b } => {
                        lists[usize::from(group_b)] = list(if group_b { "b" } else { "a" }, &specs);
                    }
                }
                for list in &lists {
                    check(&state, list)?;
                }
            }
        }
    }
}

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

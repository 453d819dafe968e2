//! Selection and slot acquisition: the candidate list sent to the acquire script in chunks.
//!
//! The script needs only the bands it walks: usually the first one has an idle account and it
//! stops there. So the ranked candidates go in chunks of whole bands, at least [`CHUNK_MIN`]
//! candidates each, best first; a grant in the first chunk (the common case) is one round trip.
//! When a chunk has no eligible account, the next one is sent, carrying whether an account was
//! busy and the earliest cooldown met, and the verdict comes after the last chunk. Each chunk is
//! atomic on its own: a slot freed in a better band between two chunks is simply not seen, as if
//! the request had come a moment earlier.

use std::sync::{Arc, LazyLock};

use redis::aio::ConnectionManager;
use redis::{Script, Value};

use super::release::{Release, ReleaseQueue, TakenReleases};
use super::reply::{number, tagged, text};
use super::{Keys, class_name, new_token};
use crate::account::SizeClass;
use crate::clock::UnixMillis;
use crate::error::StateError;
use crate::select::Candidate;
use crate::state::{Acquire, AcquireRequest, LeaseGrant, LeaseId};

static ACQUIRE: LazyLock<Script> = LazyLock::new(|| Script::new(include_str!("lua/acquire.lua")));

/// Fewest candidates per script call (whole bands are never split).
pub(crate) const CHUNK_MIN: usize = 64;

/// A candidate worth sending: its index in the ranked list and its band number.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Pick {
    pub(crate) index: usize,
    pub(crate) band: usize,
}

/// Candidates worth sending, best first. Excluded accounts and those that never serve the class
/// are left out, as selection would skip them.
pub(crate) fn eligible_candidates(request: &AcquireRequest) -> Vec<Pick> {
    let entries = request.candidates.entries();
    let mut picked = Vec::with_capacity(entries.len());
    for (band, (start, end)) in request.candidates.bands().enumerate() {
        for index in start..end {
            let Some(candidate) = entries.get(index) else {
                continue;
            };
            let excluded = !request.exclude.is_empty() && request.exclude.contains(&candidate.id);
            if candidate.limits.for_class(request.class) > 0 && !excluded {
                picked.push(Pick { index, band });
            }
        }
    }
    picked
}

/// Splits `picked` into chunks of whole bands with at least [`CHUNK_MIN`] candidates each (the
/// last may be smaller).
pub(crate) fn chunks(picked: &[Pick]) -> Vec<&[Pick]> {
    let mut chunks = Vec::new();
    let mut rest = picked;
    while !rest.is_empty() {
        let mut end = CHUNK_MIN.min(rest.len());
        while let (Some(last), Some(next)) = (rest.get(end.wrapping_sub(1)), rest.get(end)) {
            if last.band != next.band {
                break;
            }
            end += 1;
        }
        let (chunk, tail) = rest.split_at(end);
        chunks.push(chunk);
        rest = tail;
    }
    chunks
}

/// What one script call found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum ChunkAnswer {
    /// A slot was taken on the candidate at `index` of the ranked list.
    Granted { index: usize },
    /// Nothing eligible in the chunk.
    None {
        busy: bool,
        earliest_reset: Option<UnixMillis>,
    },
}

/// What the chunks seen so far add up to, when none granted.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Verdict {
    busy: bool,
    earliest_reset: Option<UnixMillis>,
}

impl Verdict {
    pub(crate) fn add(&mut self, busy: bool, earliest_reset: Option<UnixMillis>) {
        self.busy |= busy;
        self.earliest_reset = match (self.earliest_reset, earliest_reset) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
    }

    /// The answer when no chunk granted (the rules of `select`).
    pub(crate) fn into_acquire(self) -> Acquire {
        match (self.busy, self.earliest_reset) {
            (true, _) => Acquire::Busy,
            (false, Some(earliest_reset)) => Acquire::CoolingDown { earliest_reset },
            (false, None) => Acquire::Unavailable,
        }
    }
}

fn other_class(class: SizeClass) -> SizeClass {
    match class {
        SizeClass::Large => SizeClass::Standard,
        SizeClass::Standard => SizeClass::Large,
    }
}

/// One acquisition: the ranked candidates sent chunk by chunk until one grants or none is left,
/// with the replica's queued releases riding along on the first script call.
pub(crate) async fn acquire(
    mut connection: ConnectionManager,
    keys: Keys,
    releases: Arc<ReleaseQueue>,
    request: AcquireRequest,
) -> Result<Acquire, StateError> {
    let picked = eligible_candidates(&request);
    let mut taken = releases.take_for_call();
    let mut verdict = Verdict::default();
    // One lease id for every chunk: at most one of them grants.
    let lease = new_token();
    for chunk in chunks(&picked) {
        let answer = run_chunk(&mut connection, keys.prefix(), &request, chunk, lease, &taken).await;
        let answer = match answer {
            Ok(answer) => answer,
            Err(ChunkFailure { error, may_have_run }) => {
                // The script may have run with its reply lost (a timeout, a connection dropped
                // while waiting): give back the lease it may have added to any account of the
                // chunk. Removing a lease never added does nothing.
                if may_have_run {
                    give_back_unseen(&releases, &keys, &request, chunk, lease);
                }
                return Err(error);
            }
        };
        // Sent with the first chunk.
        taken.sent();
        match answer {
            ChunkAnswer::Granted { index } => {
                let account = request
                    .candidates
                    .entries()
                    .get(index)
                    .map(|c| c.id.clone())
                    .ok_or_else(bad_reply)?;
                return Ok(Acquire::Granted(LeaseGrant {
                    id: LeaseId(lease),
                    account,
                    class: request.class,
                    expires_at: request.now.plus(request.lease_ttl),
                }));
            }
            ChunkAnswer::None { busy, earliest_reset } => verdict.add(busy, earliest_reset),
        }
    }
    // With no candidate nothing was sent: the releases go back to the background task.
    Ok(verdict.into_acquire())
}

/// Queues the removal of `lease` from the class's lease set of every account of `chunk`.
fn give_back_unseen(
    releases: &ReleaseQueue,
    keys: &Keys,
    request: &AcquireRequest,
    chunk: &[Pick],
    lease: u64,
) {
    let entries = request.candidates.entries();
    for candidate in chunk.iter().filter_map(|pick| entries.get(pick.index)) {
        releases.push(Release {
            set: keys.leases(&candidate.id, request.class),
            member: lease,
        });
    }
}

fn bad_reply() -> StateError {
    StateError::Backend("redis: unexpected reply to acquire".to_owned())
}

/// Runs the acquire script over one chunk, after applying `releases` (none once sent).
///
/// # Errors
/// [`ChunkFailure`]: the backend error, and whether the script may have run (the reply timed out
/// or the connection dropped while waiting for it, or the reply could not be read).
pub(crate) async fn run_chunk(
    connection: &mut ConnectionManager,
    prefix: &str,
    request: &AcquireRequest,
    chunk: &[Pick],
    lease: u64,
    releases: &TakenReleases,
) -> Result<ChunkAnswer, ChunkFailure> {
    let entries = request.candidates.entries();
    let mut invocation = ACQUIRE.prepare_invoke();
    invocation
        .arg(prefix)
        .arg(request.now.0)
        .arg(class_name(request.class))
        .arg(class_name(other_class(request.class)))
        .arg(u8::from(request.image))
        .arg(request.now.plus(request.lease_ttl).0)
        .arg(fastrand::u32(1..2_147_483_647))
        .arg(lease);
    releases.push_args(&mut invocation);
    let sent: Vec<_> = chunk
        .iter()
        .filter_map(|pick| Some((pick, entries.get(pick.index)?)))
        .collect();
    invocation.arg(sent.len());
    for (pick, candidate) in &sent {
        let limit = candidate.limits.for_class(request.class);
        invocation.arg(candidate.id.as_str()).arg(limit).arg(pick.band);
    }
    let reply: Value = invocation
        .invoke_async(connection)
        .await
        .map_err(|e| ChunkFailure {
            may_have_run: e.is_timeout() || e.is_connection_dropped(),
            error: StateError::Backend(format!("redis: acquire failed: {e}")),
        })?;
    parse(reply, &sent).map_err(|error| ChunkFailure {
        error,
        may_have_run: true,
    })
}

/// A script call that failed, and whether the script may have run all the same.
#[derive(Debug)]
pub(crate) struct ChunkFailure {
    pub(crate) error: StateError,
    pub(crate) may_have_run: bool,
}

fn parse(reply: Value, sent: &[(&Pick, &Candidate)]) -> Result<ChunkAnswer, StateError> {
    let (tag, rest) = tagged(reply).ok_or_else(bad_reply)?;
    match (tag.as_str(), rest.as_slice()) {
        ("granted", [position]) => {
            let (pick, _) = number(position)
                .and_then(|p| sent.get(usize::try_from(p).ok()?))
                .ok_or_else(bad_reply)?;
            Ok(ChunkAnswer::Granted { index: pick.index })
        }
        ("none", [busy, earliest]) => {
            let earliest_reset = match number(earliest) {
                Some(until) => Some(UnixMillis(until)),
                None if text(earliest).as_deref() == Some("") => None,
                None => return Err(bad_reply()),
            };
            Ok(ChunkAnswer::None {
                busy: number(busy).ok_or_else(bad_reply)? == 1,
                earliest_reset,
            })
        }
        _ => Err(bad_reply()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn picks(bands: &[usize]) -> Vec<Pick> {
        bands
            .iter()
            .enumerate()
            .map(|(index, &band)| Pick { index, band })
            .collect()
    }

    fn sizes(picked: &[Pick]) -> Vec<usize> {
        chunks(picked).iter().map(|c| c.len()).collect()
    }

    #[test]
    fn chunks_hold_whole_bands_and_at_least_the_minimum() {
        assert!(chunks(&[]).is_empty());
        assert_eq!(sizes(&picks(&[0, 0, 1])), vec![3]);
        // 100 candidates in bands of 10: the first chunk ends at the band boundary after 64.
        let tens: Vec<usize> = (0..100).map(|i| i / 10).collect();
        assert_eq!(sizes(&picks(&tens)), vec![70, 30]);
        // One band of 200 is never split.
        assert_eq!(sizes(&picks(&[7; 200])), vec![200]);
        // A band ending exactly at the minimum.
        let split: Vec<usize> = (0..130).map(|i| usize::from(i >= 64)).collect();
        assert_eq!(sizes(&picks(&split)), vec![64, 66]);
    }

    #[test]
    fn verdicts_combine_like_selection() {
        let mut verdict = Verdict::default();
        assert_eq!(verdict.into_acquire(), Acquire::Unavailable);
        verdict.add(false, Some(UnixMillis(9)));
        verdict.add(false, Some(UnixMillis(5)));
        verdict.add(false, None);
        assert_eq!(
            verdict.into_acquire(),
            Acquire::CoolingDown {
                earliest_reset: UnixMillis(5)
            }
        );
        verdict.add(true, None);
        assert_eq!(verdict.into_acquire(), Acquire::Busy);
    }

    #[test]
    fn the_script_compares_as_many_accounts_as_select() {
        let line = format!("local compare_window = {}\n", crate::select::COMPARE_WINDOW);
        assert!(
            include_str!("lua/acquire.lua").contains(&line),
            "acquire.lua must set {line:?}"
        );
    }
}

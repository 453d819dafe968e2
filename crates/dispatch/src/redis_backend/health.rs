//! Account health in Redis: read, apply the shared rules in Rust, compare-and-set.

use std::sync::LazyLock;

use redis::aio::ConnectionManager;
use redis::{Script, Value};

use super::Keys;
use super::reply::{array, number, text};
use crate::account::AccountId;
use crate::error::StateError;
use crate::outcome::AccountHealth;

static HEALTH_CAS: LazyLock<Script> = LazyLock::new(|| Script::new(include_str!("lua/health_cas.lua")));

/// Attempts before a contended update gives up (each conflict means another replica succeeded).
const MAX_ATTEMPTS: u32 = 64;

/// Number of lock stripes serialising health updates within one replica.
const STRIPES: usize = 64;

/// Serialises the health updates of one account within this replica, so only replicas compete
/// for the compare-and-set (updates pipelined on one connection would otherwise all read the same
/// version and all but one retry, round after round).
#[derive(Debug)]
pub(crate) struct UpdateLocks {
    stripes: [tokio::sync::Mutex<()>; STRIPES],
}

impl Default for UpdateLocks {
    fn default() -> Self {
        Self {
            stripes: std::array::from_fn(|_| tokio::sync::Mutex::new(())),
        }
    }
}

impl UpdateLocks {
    fn stripe(&self, account: &AccountId) -> &tokio::sync::Mutex<()> {
        let mut hasher = std::hash::DefaultHasher::new();
        std::hash::Hash::hash(account, &mut hasher);
        // A u64 hash reduced modulo the stripe count: always a valid index.
        let index = (std::hash::Hasher::finish(&hasher) % STRIPES as u64) as usize;
        &self.stripes[index]
    }
}

/// How to treat a stored health that does not parse.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Unreadable {
    /// Fail with a backend error (outcomes: do not silently wipe counters).
    Fail,
    /// Start from a fresh health (operator clear: the way out of a bad value).
    Reset,
}

/// Parses a stored health ('' or absent: never written).
pub(crate) fn decode(
    account: &AccountId,
    raw: Option<&str>,
    unreadable: Unreadable,
) -> Result<AccountHealth, StateError> {
    match raw {
        None | Some("") => Ok(AccountHealth::default()),
        Some(json) => serde_json::from_str(json).or_else(|e| match unreadable {
            Unreadable::Reset => Ok(AccountHealth::default()),
            Unreadable::Fail => Err(StateError::Backend(format!(
                "stored health of account {account} is unreadable: {e}"
            ))),
        }),
    }
}

/// How many outcome ids a health remembers as applied (see [`update_once`]).
const APPLIED_KEPT: usize = 32;

/// Applies `change` to the stored health of `account`, atomically with respect to other replicas.
pub(crate) async fn update(
    connection: &mut ConnectionManager,
    keys: &Keys,
    locks: &UpdateLocks,
    account: &AccountId,
    unreadable: Unreadable,
    change: impl Fn(&mut AccountHealth),
) -> Result<(), StateError> {
    apply(connection, keys, locks, account, unreadable, None, change).await
}

/// [`update`] for an outcome with an id: applied once, however many times it is told (a caller
/// whose reply was lost tells it again). The last [`APPLIED_KEPT`] ids are kept with the health.
pub(crate) async fn update_once(
    connection: &mut ConnectionManager,
    keys: &Keys,
    locks: &UpdateLocks,
    account: &AccountId,
    id: Option<u64>,
    change: impl Fn(&mut AccountHealth),
) -> Result<(), StateError> {
    apply(connection, keys, locks, account, Unreadable::Fail, id, change).await
}

async fn apply(
    connection: &mut ConnectionManager,
    keys: &Keys,
    locks: &UpdateLocks,
    account: &AccountId,
    unreadable: Unreadable,
    id: Option<u64>,
    change: impl Fn(&mut AccountHealth),
) -> Result<(), StateError> {
    let _serialised = locks.stripe(account).lock().await;
    let key = keys.health(account);
    let (mut version, mut raw): (Option<String>, Option<String>) = redis::cmd("HMGET")
        .arg(&key)
        .arg("v")
        .arg("h")
        .query_async(connection)
        .await
        .map_err(|e| StateError::Backend(format!("redis: reading the health of {account}: {e}")))?;
    let id = id.map_or_else(|| "-".to_owned(), |id| id.to_string());
    for attempt in 0..MAX_ATTEMPTS {
        if attempt > 0 {
            // Another replica won the last round: let the contenders spread out.
            let jitter = fastrand::u64(0..=u64::from(attempt.min(10)));
            tokio::time::sleep(std::time::Duration::from_millis(jitter)).await;
        }
        let mut health = decode(account, raw.as_deref(), unreadable)?;
        change(&mut health);
        let json = serde_json::to_string(&health)
            .map_err(|e| StateError::Backend(format!("cannot encode the health of {account}: {e}")))?;
        let cooling_all = health.cooldown_all.as_ref().map(|c| c.until.0.to_string());
        let cooling_images = health.cooldown_images.as_ref().map(|c| c.until.0.to_string());
        let breaker = health.breaker_until().map(|until| until.0.to_string());
        let reply: Value = HEALTH_CAS
            .key(&key)
            .key(keys.accounts())
            .arg(version.as_deref().unwrap_or("0"))
            .arg(json)
            .arg(u8::from(health.is_usable()))
            .arg(cooling_all.unwrap_or_default())
            .arg(cooling_images.unwrap_or_default())
            .arg(account.as_str())
            .arg(breaker.unwrap_or_default())
            .arg(&id)
            .arg(APPLIED_KEPT)
            .invoke_async(connection)
            .await
            .map_err(|e| StateError::Backend(format!("redis: storing the health of {account}: {e}")))?;
        let bad_reply =
            || StateError::Backend(format!("redis: unexpected reply storing the health of {account}"));
        let items = array(reply).ok_or_else(bad_reply)?;
        match items.as_slice() {
            [stored] if number(stored) == Some(1) => return Ok(()),
            [_, current_version, current] => {
                version = Some(text(current_version).ok_or_else(bad_reply)?);
                raw = Some(text(current).ok_or_else(bad_reply)?);
            }
            _ => return Err(bad_reply()),
        }
    }
    Err(StateError::Backend(format!(
        "redis: the health of {account} changed {MAX_ATTEMPTS} times while being updated"
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unreadable_health_fails_or_resets() {
        let id = AccountId::new("a");
        assert_eq!(decode(&id, None, Unreadable::Fail), Ok(AccountHealth::default()));
        assert_eq!(
            decode(&id, Some(""), Unreadable::Fail),
            Ok(AccountHealth::default())
        );
        let err = decode(&id, Some("{not json"), Unreadable::Fail).unwrap_err();
        assert!(err.to_string().contains("account a"), "{err}");
        assert_eq!(
            decode(&id, Some("{not json"), Unreadable::Reset),
            Ok(AccountHealth::default())
        );
        let partial = decode(&id, Some(r#"{"successes":7}"#), Unreadable::Fail).unwrap();
        assert_eq!(partial.successes, 7, "missing fields take their defaults");
    }
}

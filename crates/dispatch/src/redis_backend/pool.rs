//! [`RedisPoolState`]: the pool state of several replicas in one Redis.

use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, LazyLock, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use async_trait::async_trait;
use redis::aio::ConnectionManager;
use redis::{Script, Value};
use tokio::sync::{oneshot, watch};

use super::acquire::acquire;
use super::detached::run_to_the_end;
use super::freed;
use super::health::{self, Unreadable, UpdateLocks};
use super::release::{Announce, Release, ReleaseQueue};
use super::reply::{number, text};
use super::{Keys, RedisConfig};
use crate::account::AccountId;
use crate::clock::UnixMillis;
use crate::error::StateError;
use crate::outcome::{AccountHealth, CooldownPolicy, Outcome};
use crate::select::{AccountRuntime, ClassCounts};
use crate::state::{Acquire, AcquireRequest, LeaseGrant, LeaseId, PoolState, StateSnapshot};

static RENEW: LazyLock<Script> = LazyLock::new(|| Script::new(include_str!("lua/renew.lua")));
static SNAPSHOT: LazyLock<Script> = LazyLock::new(|| Script::new(include_str!("lua/snapshot.lua")));

/// Pool state in Redis, shared by every replica using the same server and key prefix.
///
/// Acquisition is one script call (one round trip); see the [module docs](crate::redis_backend)
/// for the key layout, the clock requirement and failure handling. Leases are renewed and
/// released only by the replica that took them: it remembers which sorted set holds each of its
/// leases. A lease whose holder dies frees its slot when its TTL runs out.
pub struct RedisPoolState {
    connection: ConnectionManager,
    keys: Keys,
    policy: CooldownPolicy,
    releases: Arc<ReleaseQueue>,
    /// The sorted set of every lease this replica holds.
    leases: Mutex<HashMap<LeaseId, String>>,
    health_locks: Arc<UpdateLocks>,
    /// Bumped for every release another replica announces.
    freed_elsewhere: watch::Receiver<()>,
    /// Dropped with the state: stops the listener.
    _stop_listening: oneshot::Sender<()>,
}

impl RedisPoolState {
    /// A state in the Redis of `config`, applying `policy` to outcomes. Connects on first use
    /// (and reconnects after failures), so it can be created while Redis is down.
    ///
    /// # Errors
    /// [`StateError::Backend`] for an invalid URL or when called outside a Tokio runtime (the
    /// background release task needs one).
    pub fn new(config: &RedisConfig, policy: CooldownPolicy) -> Result<Self, StateError> {
        let connection = config.connect().map_err(StateError::Backend)?;
        let keys = Keys::new(&config.prefix);
        let replica = fastrand::u64(..);
        let client = config.client().map_err(StateError::Backend)?;
        let announce = Announce {
            channel: keys.freed(),
            replica,
        };
        let listener = freed::listen(client, config, announce.channel.clone(), replica);
        Ok(Self {
            releases: ReleaseQueue::start(connection.clone(), Some(announce)),
            connection,
            keys,
            policy,
            leases: Mutex::new(HashMap::new()),
            health_locks: Arc::default(),
            freed_elsewhere: listener.freed,
            _stop_listening: listener.stop,
        })
    }

    /// Checks that Redis answers.
    ///
    /// # Errors
    /// [`StateError::Backend`] when it does not.
    pub async fn ping(&self) -> Result<(), StateError> {
        let mut connection = self.connection.clone();
        redis::cmd("PING")
            .query_async::<String>(&mut connection)
            .await
            .map(drop)
            .map_err(|e| backend("ping", &e))
    }

    fn lease_sets(&self) -> MutexGuard<'_, HashMap<LeaseId, String>> {
        // Inserts and removals of single entries cannot leave the map inconsistent.
        self.leases.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Applies `outcome` to the account's stored health, once per `id` when one is given (see
    /// [`PoolState::record_outcome_once`]).
    async fn apply_outcome(
        &self,
        account: &AccountId,
        outcome: &Outcome,
        now: UnixMillis,
        id: Option<u64>,
    ) -> Result<(), StateError> {
        // In a task of its own: a caller that stops waiting (its client hung up) must not take
        // a 429's cooldown with it, or every replica keeps picking the limited account.
        let mut connection = self.connection.clone();
        let keys = self.keys.clone();
        let locks = Arc::clone(&self.health_locks);
        let policy = self.policy.clone();
        let account = account.clone();
        let outcome = outcome.clone();
        #[expect(
            clippy::disallowed_methods,
            reason = "awaited below; a task so that a caller that stops waiting does not take the cooldown with it"
        )]
        let update = tokio::spawn(async move {
            health::update_once(&mut connection, &keys, &locks, &account, id, |health| {
                health.apply(&outcome, &policy, now);
            })
            .await
        });
        update
            .await
            .map_err(|e| StateError::Backend(format!("recording an outcome failed: {e}")))?
    }
}

impl fmt::Debug for RedisPoolState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RedisPoolState")
            .field("prefix", &self.keys.prefix())
            .field("policy", &self.policy)
            .finish_non_exhaustive()
    }
}

impl Drop for RedisPoolState {
    fn drop(&mut self) {
        self.releases.close();
    }
}

fn backend(operation: &str, error: &redis::RedisError) -> StateError {
    StateError::Backend(format!("redis: {operation} failed: {error}"))
}

fn bad_reply(operation: &str) -> StateError {
    StateError::Backend(format!("redis: unexpected reply to {operation}"))
}

#[async_trait]
impl PoolState for RedisPoolState {
    async fn try_acquire(&self, request: &AcquireRequest) -> Result<Acquire, StateError> {
        let call = acquire(
            self.connection.clone(),
            self.keys.clone(),
            Arc::clone(&self.releases),
            request.clone(),
        );
        let keys = self.keys.clone();
        let releases = Arc::clone(&self.releases);
        let give_back = move |unclaimed: Acquire| {
            if let Acquire::Granted(grant) = unclaimed {
                releases.push(Release {
                    set: keys.leases(&grant.account, grant.class),
                    member: grant.id.0,
                });
            }
        };
        let lost = || StateError::Backend("redis: the acquisition task failed".to_owned());
        let acquired = run_to_the_end(call, give_back, lost).await?;
        if let Acquire::Granted(grant) = &acquired {
            self.lease_sets()
                .insert(grant.id, self.keys.leases(&grant.account, grant.class));
        }
        Ok(acquired)
    }

    fn slots_freed_elsewhere(&self) -> Option<watch::Receiver<()>> {
        Some(self.freed_elsewhere.clone())
    }

    fn release_detached(&self, lease: LeaseId) {
        let set = self.lease_sets().remove(&lease);
        if let Some(set) = set {
            self.releases.push(Release { set, member: lease.0 });
        }
    }

    async fn renew(
        &self,
        lease: LeaseId,
        ttl: Duration,
        now: UnixMillis,
    ) -> Result<Option<UnixMillis>, StateError> {
        let Some(set) = self.lease_sets().get(&lease).cloned() else {
            return Ok(None);
        };
        let expires_at = now.plus(ttl);
        let mut connection = self.connection.clone();
        let renewed: i64 = RENEW
            .key(&set)
            .arg(now.0)
            .arg(expires_at.0)
            .arg(lease.0)
            .invoke_async(&mut connection)
            .await
            .map_err(|e| backend("renew", &e))?;
        if renewed == 1 {
            Ok(Some(expires_at))
        } else {
            self.lease_sets().remove(&lease);
            Ok(None)
        }
    }

    async fn reinstate(
        &self,
        grant: &LeaseGrant,
        ttl: Duration,
        now: UnixMillis,
    ) -> Result<Option<UnixMillis>, StateError> {
        let set = self.keys.leases(&grant.account, grant.class);
        // Known before the slot is taken: a holder dropping its lease while this runs queues the
        // release after it (one connection keeps the order), rather than leaving it to expire.
        self.lease_sets().insert(grant.id, set.clone());
        let expires_at = now.plus(ttl);
        let mut connection = self.connection.clone();
        redis::pipe()
            .atomic()
            .zadd(&set, grant.id.0, expires_at.0)
            .ignore()
            .sadd(self.keys.accounts(), grant.account.as_str())
            .ignore()
            .query_async::<()>(&mut connection)
            .await
            .map_err(|e| backend("reinstate", &e))?;
        Ok(Some(expires_at))
    }

    async fn record_outcome(
        &self,
        account: &AccountId,
        outcome: &Outcome,
        now: UnixMillis,
    ) -> Result<(), StateError> {
        self.apply_outcome(account, outcome, now, None).await
    }

    async fn record_outcome_once(
        &self,
        account: &AccountId,
        outcome: &Outcome,
        now: UnixMillis,
        id: u64,
    ) -> Result<(), StateError> {
        self.apply_outcome(account, outcome, now, Some(id)).await
    }

    async fn clear_health(&self, account: &AccountId) -> Result<(), StateError> {
        let mut connection = self.connection.clone();
        health::update(
            &mut connection,
            &self.keys,
            &self.health_locks,
            account,
            Unreadable::Reset,
            |health| {
                *health = std::mem::take(health).cleared();
            },
        )
        .await
    }

    async fn snapshot(&self, now: UnixMillis) -> Result<StateSnapshot, StateError> {
        let mut releases = self.releases.take_for_call();
        let mut invocation = SNAPSHOT.prepare_invoke();
        invocation.arg(self.keys.prefix()).arg(now.0);
        releases.push_args(&mut invocation);
        let mut connection = self.connection.clone();
        let items: Vec<Value> = invocation
            .invoke_async(&mut connection)
            .await
            .map_err(|e| backend("snapshot", &e))?;
        releases.sent();
        let mut snapshot = StateSnapshot::with_capacity(items.len() / 4);
        for row in items.chunks(4) {
            let [id, large, standard, raw] = row else {
                return Err(bad_reply("snapshot"));
            };
            let id = AccountId::new(&text(id).ok_or_else(|| bad_reply("snapshot"))?);
            let count = |value: &Value| {
                number(value)
                    .and_then(|n| u32::try_from(n).ok())
                    .ok_or_else(|| bad_reply("snapshot"))
            };
            let in_flight = ClassCounts {
                large: count(large)?,
                standard: count(standard)?,
            };
            let raw = text(raw).ok_or_else(|| bad_reply("snapshot"))?;
            let health: AccountHealth = health::decode(&id, Some(&raw), Unreadable::Fail)?;
            snapshot.insert(id, AccountRuntime { in_flight, health });
        }
        Ok(snapshot)
    }
}

//! [`KeyCache`]: a short-lived in-process cache in front of [`Store::check_key`].

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use crate::error::{StoreError, StoreResult};
use crate::keys::parse_key;
use crate::model::{ApiKeyRecord, AuthContext, KeyCheck, KeyId};
use crate::store::Store;

/// Remembers successful authentications for a short time so most requests skip the database.
///
/// Entries are keyed by public id and hold the SHA-256 of the whole presented key, so a wrong
/// secret never matches a cached entry (it goes to the store, which rejects it). Failures are not
/// cached. An entry is used for at most `ttl` after it was fetched: that bounds how long a key
/// disabled on another replica keeps working here. Past half its `ttl`, the first request for a
/// key asks the store again while the others go on using the entry, so a busy key is refreshed by
/// one query rather than by every request in flight at the moment it expires. On this replica,
/// disabling through [`KeyCache::disable_key`] / [`KeyCache::delete_key`], or calling
/// [`KeyCache::invalidate`], takes effect at once.
///
/// **Database outages.** When the store cannot be reached ([`StoreError::is_unavailable`]), a key
/// seen within `stale_if_error` (default 15 min) keeps authenticating from its cached entry, and
/// for `failure_hold` (default 5 s) after a failure the store is not asked at all, so a dead
/// database is not hammered by every request. A key not in the cache gets the error
/// ([`StoreError::Unavailable`] during the hold). A key the store does not answer valid for
/// (unknown, refused) is dropped from the cache, so a deleted key is never served stale.
#[derive(Debug)]
pub struct KeyCache {
    store: Arc<dyn Store>,
    ttl: Duration,
    stale_if_error: Duration,
    failure_hold: Duration,
    /// When the store last failed as unavailable; cleared by the next success.
    failed_at: Mutex<Option<Instant>>,
    max_entries: usize,
    entries: Mutex<HashMap<String, CachedKey>>,
    /// Bumped by every invalidation; a lookup that started before one does not cache its answer.
    generation: AtomicU64,
}

#[derive(Debug)]
struct CachedKey {
    presented_sha256: [u8; 32],
    context: AuthContext,
    fetched: Instant,
    /// A request is asking the store for a newer copy.
    refreshing: bool,
}

/// What the cache holds for a presented key.
enum Lookup {
    /// A fresh entry: the answer.
    Hit(AuthContext),
    /// A fresh entry past half its TTL, and this caller is to refresh it.
    Refresh(AuthContext),
    /// Nothing usable.
    Miss,
}

impl KeyCache {
    /// The default staleness bound.
    pub const DEFAULT_TTL: Duration = Duration::from_secs(2);
    /// The default number of cached keys.
    pub const DEFAULT_MAX_ENTRIES: usize = 100_000;
    /// How long a cached key keeps working while the database is unreachable, by default.
    pub const DEFAULT_STALE_IF_ERROR: Duration = Duration::from_secs(15 * 60);
    /// How long the store is left alone after it failed, by default.
    pub const DEFAULT_FAILURE_HOLD: Duration = Duration::from_secs(5);

    /// A cache over `store` with entries valid for `ttl`.
    pub fn new(store: Arc<dyn Store>, ttl: Duration) -> Self {
        Self {
            store,
            ttl,
            stale_if_error: Self::DEFAULT_STALE_IF_ERROR,
            failure_hold: Self::DEFAULT_FAILURE_HOLD,
            failed_at: Mutex::new(None),
            max_entries: Self::DEFAULT_MAX_ENTRIES,
            entries: Mutex::new(HashMap::new()),
            generation: AtomicU64::new(0),
        }
    }

    /// Caps the number of cached keys (the cache drops stale entries, then everything, when full).
    pub fn with_max_entries(mut self, max_entries: usize) -> Self {
        self.max_entries = max_entries.max(1);
        self
    }

    /// Sets how long cached keys outlive an unreachable database (`stale_if_error`) and how long
    /// the store is not asked after a failure (`failure_hold`).
    pub fn with_outage_policy(mut self, stale_if_error: Duration, failure_hold: Duration) -> Self {
        self.stale_if_error = stale_if_error;
        self.failure_hold = failure_hold;
        self
    }

    /// The store behind the cache.
    pub fn store(&self) -> &Arc<dyn Store> {
        &self.store
    }

    /// The identity of a valid key, as [`KeyCache::check`] finds it.
    pub async fn authenticate(&self, presented: &str) -> StoreResult<Option<AuthContext>> {
        Ok(self.check(presented).await?.valid())
    }

    /// Like [`Store::check_key`], answered from the cache when a fresh entry matches. Only valid
    /// keys are cached: a refused one is asked about every time (it is rare, and may change).
    pub async fn check(&self, presented: &str) -> StoreResult<KeyCheck> {
        let Some(parsed) = parse_key(presented) else {
            return Ok(KeyCheck::Unknown);
        };
        let digest: [u8; 32] = Sha256::digest(presented.as_bytes()).into();
        let cached = match self.lookup_fresh(parsed.public_id, &digest) {
            Lookup::Hit(context) => return Ok(KeyCheck::Valid(context)),
            Lookup::Refresh(context) => Some(context),
            Lookup::Miss => None,
        };
        if self.in_failure_hold() {
            self.end_refresh(parsed.public_id);
            return cached
                .or_else(|| self.stale(parsed.public_id, &digest))
                .map(KeyCheck::Valid)
                .ok_or_else(|| StoreError::Unavailable("the database failed moments ago".to_owned()));
        }
        let generation = self.generation.load(Ordering::Acquire);
        match self.store.check_key(presented).await {
            Ok(result) => {
                self.set_failed(false);
                // `insert` below replaces the entry; if an invalidation makes it skip that, the
                // next request past half the TTL refreshes again.
                self.end_refresh(parsed.public_id);
                match &result {
                    KeyCheck::Valid(context) => {
                        self.insert(parsed.public_id, digest, context.clone(), generation)
                    }
                    // The very key presented is no longer valid: never serve it stale.
                    KeyCheck::Unknown | KeyCheck::Refused(_) => {
                        let mut entries = self.lock();
                        if entries
                            .get(parsed.public_id)
                            .is_some_and(|e| bool::from(e.presented_sha256.ct_eq(&digest)))
                        {
                            entries.remove(parsed.public_id);
                        }
                    }
                }
                Ok(result)
            }
            Err(err) if err.is_unavailable() => {
                self.set_failed(true);
                self.end_refresh(parsed.public_id);
                match cached.or_else(|| self.stale(parsed.public_id, &digest)) {
                    Some(context) => Ok(KeyCheck::Valid(context)),
                    None => Err(err),
                }
            }
            Err(err) => {
                self.end_refresh(parsed.public_id);
                Err(err)
            }
        }
    }

    /// A cached entry too old for normal use but within `stale_if_error`, used while the
    /// database is unreachable.
    fn stale(&self, public_id: &str, digest: &[u8; 32]) -> Option<AuthContext> {
        let hit = self.lookup(public_id, digest, self.stale_if_error)?;
        tracing::debug!(
            public_id,
            "database unreachable: key authenticated from the cache"
        );
        Some(hit)
    }

    fn in_failure_hold(&self) -> bool {
        let failed_at = self
            .failed_at
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        failed_at.is_some_and(|at| at.elapsed() < self.failure_hold)
    }

    fn set_failed(&self, failed: bool) {
        let mut failed_at = self
            .failed_at
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        *failed_at = failed.then(Instant::now);
    }

    /// Forgets the key with this public id (call after disabling or deleting it).
    pub fn invalidate(&self, public_id: &str) {
        let mut entries = self.lock();
        self.generation.fetch_add(1, Ordering::AcqRel);
        entries.remove(public_id);
    }

    /// Forgets every key.
    pub fn clear(&self) {
        let mut entries = self.lock();
        self.generation.fetch_add(1, Ordering::AcqRel);
        entries.clear();
    }

    /// Number of cached keys (fresh or stale), for metrics.
    pub fn len(&self) -> usize {
        self.lock().len()
    }

    /// Whether nothing is cached.
    pub fn is_empty(&self) -> bool {
        self.lock().is_empty()
    }

    /// Disables a key in the store and forgets it here.
    pub async fn disable_key(&self, id: KeyId) -> StoreResult<ApiKeyRecord> {
        let record = self.store.disable_key(id).await?;
        self.invalidate(&record.public_id);
        Ok(record)
    }

    /// Soft-deletes a key in the store and forgets it here.
    pub async fn delete_key(&self, id: KeyId) -> StoreResult<ApiKeyRecord> {
        let record = self.store.delete_key(id).await?;
        self.invalidate(&record.public_id);
        Ok(record)
    }

    /// The fresh entry for `public_id` if it matches the presented key; past half the TTL, the
    /// first caller is told to refresh it.
    fn lookup_fresh(&self, public_id: &str, digest: &[u8; 32]) -> Lookup {
        let mut entries = self.lock();
        let Some(entry) = entries.get_mut(public_id) else {
            return Lookup::Miss;
        };
        let age = entry.fetched.elapsed();
        if age >= self.ttl || !bool::from(entry.presented_sha256.ct_eq(digest)) {
            return Lookup::Miss;
        }
        if age < self.ttl / 2 || entry.refreshing {
            return Lookup::Hit(entry.context.clone());
        }
        entry.refreshing = true;
        Lookup::Refresh(entry.context.clone())
    }

    /// Lets a later request refresh the entry again (this one's refresh has ended).
    fn end_refresh(&self, public_id: &str) {
        if let Some(entry) = self.lock().get_mut(public_id) {
            entry.refreshing = false;
        }
    }

    /// The entry for `public_id` if it matches the presented key and is younger than `max_age`.
    fn lookup(&self, public_id: &str, digest: &[u8; 32], max_age: Duration) -> Option<AuthContext> {
        let entries = self.lock();
        let entry = entries.get(public_id)?;
        let fresh = entry.fetched.elapsed() < max_age;
        let matches = bool::from(entry.presented_sha256.ct_eq(digest));
        (fresh && matches).then(|| entry.context.clone())
    }

    fn insert(&self, public_id: &str, digest: [u8; 32], context: AuthContext, generation: u64) {
        let mut entries = self.lock();
        if self.generation.load(Ordering::Acquire) != generation {
            // An invalidation ran while the store was asked: the answer may be stale.
            return;
        }
        if entries.len() >= self.max_entries && !entries.contains_key(public_id) {
            let ttl = self.ttl;
            entries.retain(|_, e| e.fetched.elapsed() < ttl);
            if entries.len() >= self.max_entries {
                entries.clear();
            }
        }
        entries.insert(
            public_id.to_owned(),
            CachedKey {
                presented_sha256: digest,
                context,
                fetched: Instant::now(),
                refreshing: false,
            },
        );
    }

    fn lock(&self) -> MutexGuard<'_, HashMap<String, CachedKey>> {
        // The map stays consistent even if a holder panicked: every update is a single call.
        self.entries
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{KeyLimits, NewApiKey, NewUser};
    use crate::{MasterKey, connect};

    #[tokio::test]
    async fn only_one_request_refreshes_an_entry_past_half_its_ttl() {
        let dir = tempfile::tempdir().unwrap();
        let url = format!("sqlite://{}?mode=rwc", dir.path().join("t.db").display());
        let store = connect(&url, &MasterKey::from_bytes([7; 32])).await.unwrap();
        let user = store
            .create_user(NewUser {
                name: "erin".into(),
                ..NewUser::default()
            })
            .await
            .unwrap();
        let group = store.default_group().await.unwrap();
        let created = store
            .create_key(NewApiKey {
                user_id: user.id,
                group_id: group.id,
                name: "k".into(),
                limits: KeyLimits::default(),
                fallback_ladder: false,
            })
            .await
            .unwrap();
        let text = created.key.expose();
        let public_id = created.record.public_id.clone();
        let ttl = Duration::from_secs(60);
        let cache = KeyCache::new(store, ttl);
        assert!(cache.authenticate(text).await.unwrap().is_some());
        let digest: [u8; 32] = Sha256::digest(text.as_bytes()).into();
        assert!(matches!(cache.lookup_fresh(&public_id, &digest), Lookup::Hit(_)));

        // Age the entry past half its TTL: the first caller refreshes, the next ones are answered
        // from the entry while that refresh runs.
        let aged = Instant::now()
            .checked_sub(ttl / 2 + Duration::from_secs(1))
            .unwrap();
        cache.lock().get_mut(public_id.as_str()).unwrap().fetched = aged;
        assert!(matches!(
            cache.lookup_fresh(&public_id, &digest),
            Lookup::Refresh(_)
        ));
        assert!(matches!(cache.lookup_fresh(&public_id, &digest), Lookup::Hit(_)));
        assert!(matches!(cache.lookup_fresh(&public_id, &digest), Lookup::Hit(_)));
        // A refresh that ended without replacing the entry lets the next caller try again.
        cache.end_refresh(&public_id);
        assert!(matches!(
            cache.lookup_fresh(&public_id, &digest),
            Lookup::Refresh(_)
        ));
        // A finished refresh replaces the entry: fresh again, nobody refreshing.
        cache.end_refresh(&public_id);
        assert!(cache.authenticate(text).await.unwrap().is_some());
        let entry_is_new = {
            let entries = cache.lock();
            let entry = entries.get(public_id.as_str()).unwrap();
            entry.fetched > aged && !entry.refreshing
        };
        assert!(entry_is_new);
        assert!(matches!(cache.lookup_fresh(&public_id, &digest), Lookup::Hit(_)));
    }
}

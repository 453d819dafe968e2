//! [`KeyCache`]: a short-lived in-process cache in front of [`Store::authenticate`].

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use crate::error::StoreResult;
use crate::keys::parse_key;
use crate::model::{ApiKeyRecord, AuthContext, KeyId};
use crate::store::Store;

/// Remembers successful authentications for a short time so most requests skip the database.
///
/// Entries are keyed by public id and hold the SHA-256 of the whole presented key, so a wrong
/// secret never matches a cached entry (it goes to the store, which rejects it). Failures are not
/// cached. An entry is used for at most `ttl` after it was fetched: that bounds how long a key
/// disabled on another replica keeps working here. On this replica, disabling through
/// [`KeyCache::disable_key`] / [`KeyCache::delete_key`], or calling [`KeyCache::invalidate`],
/// takes effect at once.
#[derive(Debug)]
pub struct KeyCache {
    store: Arc<dyn Store>,
    ttl: Duration,
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
}

impl KeyCache {
    /// The default staleness bound.
    pub const DEFAULT_TTL: Duration = Duration::from_secs(2);
    /// The default number of cached keys.
    pub const DEFAULT_MAX_ENTRIES: usize = 100_000;

    /// A cache over `store` with entries valid for `ttl`.
    pub fn new(store: Arc<dyn Store>, ttl: Duration) -> Self {
        Self {
            store,
            ttl,
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

    /// The store behind the cache.
    pub fn store(&self) -> &Arc<dyn Store> {
        &self.store
    }

    /// Like [`Store::authenticate`], answered from the cache when a fresh entry matches.
    pub async fn authenticate(&self, presented: &str) -> StoreResult<Option<AuthContext>> {
        let Some(parsed) = parse_key(presented) else {
            return Ok(None);
        };
        let digest: [u8; 32] = Sha256::digest(presented.as_bytes()).into();
        if let Some(hit) = self.lookup(parsed.public_id, &digest) {
            return Ok(Some(hit));
        }
        let generation = self.generation.load(Ordering::Acquire);
        let result = self.store.authenticate(presented).await?;
        if let Some(context) = &result {
            self.insert(parsed.public_id, digest, context.clone(), generation);
        }
        Ok(result)
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

    fn lookup(&self, public_id: &str, digest: &[u8; 32]) -> Option<AuthContext> {
        let entries = self.lock();
        let entry = entries.get(public_id)?;
        let fresh = entry.fetched.elapsed() < self.ttl;
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

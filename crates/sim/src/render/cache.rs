//! A least-recently-used cache of encoded images, bounded by the bytes of base64 text it holds.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Mutex, PoisonError};

use super::{CacheKey, RenderedImage};

/// Hit and miss counters of a [`RenderCache`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct CacheCounters {
    /// Lookups answered from the cache.
    pub hits: u64,
    /// Lookups that had to render.
    pub misses: u64,
    /// Images currently held.
    pub entries: u64,
    /// Base64 bytes currently held.
    pub bytes: u64,
}

#[derive(Debug, Default)]
struct Inner {
    entries: HashMap<CacheKey, (RenderedImage, u64)>,
    order: BTreeMap<u64, CacheKey>,
    next_tick: u64,
    bytes: usize,
    hits: u64,
    misses: u64,
}

/// Bounded LRU of rendered images keyed by everything that determines their bytes.
#[derive(Debug)]
pub struct RenderCache {
    max_bytes: usize,
    inner: Mutex<Inner>,
}

impl RenderCache {
    /// A cache that holds at most `max_bytes` of base64 text (0 disables caching).
    pub fn new(max_bytes: usize) -> Self {
        Self {
            max_bytes,
            inner: Mutex::new(Inner::default()),
        }
    }

    /// The image for `key`, marking it as recently used.
    pub fn get(&self, key: &CacheKey) -> Option<RenderedImage> {
        let mut inner = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        let tick = inner.next_tick;
        let Some((image, old_tick)) = inner.entries.get_mut(key) else {
            inner.misses += 1;
            return None;
        };
        let previous = std::mem::replace(old_tick, tick);
        let image = image.clone();
        inner.order.remove(&previous);
        inner.order.insert(tick, *key);
        inner.next_tick += 1;
        inner.hits += 1;
        Some(image)
    }

    /// Stores an image, evicting the least recently used ones until the byte budget holds. An image larger
    /// than the whole budget is not stored.
    pub fn insert(&self, key: CacheKey, image: RenderedImage) {
        let size = image.b64_len();
        if size > self.max_bytes {
            return;
        }
        let mut inner = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        let tick = inner.next_tick;
        inner.next_tick += 1;
        if let Some((old, old_tick)) = inner.entries.insert(key, (image, tick)) {
            inner.bytes = inner.bytes.saturating_sub(old.b64_len());
            inner.order.remove(&old_tick);
        }
        inner.order.insert(tick, key);
        inner.bytes += size;
        while inner.bytes > self.max_bytes {
            let Some((_, oldest)) = inner.order.pop_first() else {
                break;
            };
            if let Some((evicted, _)) = inner.entries.remove(&oldest) {
                inner.bytes = inner.bytes.saturating_sub(evicted.b64_len());
            }
        }
    }

    /// Current counters.
    pub fn counters(&self) -> CacheCounters {
        let inner = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        CacheCounters {
            hits: inner.hits,
            misses: inner.misses,
            entries: inner.entries.len() as u64,
            bytes: inner.bytes as u64,
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::render::Variant;
    use imagegate_domain::{Dimensions, OutputFormat, Quality};

    fn key(seed: u64) -> CacheKey {
        CacheKey {
            dimensions: Dimensions {
                width: 16,
                height: 16,
            },
            format: OutputFormat::Png,
            quality: Quality::Low,
            compression: None,
            seed,
            variant: Variant::Final,
        }
    }

    fn image(len: usize) -> RenderedImage {
        RenderedImage {
            format: OutputFormat::Png,
            dimensions: Dimensions {
                width: 16,
                height: 16,
            },
            b64: Arc::from("A".repeat(len)),
        }
    }

    #[test]
    fn evicts_least_recently_used_when_over_budget() {
        let cache = RenderCache::new(25);
        cache.insert(key(1), image(10));
        cache.insert(key(2), image(10));
        assert!(cache.get(&key(1)).is_some()); // 1 is now more recent than 2
        cache.insert(key(3), image(10));
        assert!(cache.get(&key(2)).is_none(), "2 was least recently used");
        assert!(cache.get(&key(1)).is_some());
        assert!(cache.get(&key(3)).is_some());
        let counters = cache.counters();
        assert_eq!(counters.entries, 2);
        assert_eq!(counters.bytes, 20);
        assert_eq!(counters.hits, 3);
        assert_eq!(counters.misses, 1);
    }

    #[test]
    fn too_large_images_are_not_stored_and_replacing_keeps_bytes_right() {
        let cache = RenderCache::new(25);
        cache.insert(key(1), image(30));
        assert!(cache.get(&key(1)).is_none());
        cache.insert(key(2), image(10));
        cache.insert(key(2), image(12));
        assert_eq!(cache.counters().bytes, 12);
        assert_eq!(cache.counters().entries, 1);
    }
}

//! A small bounded cache for translated schemas (`schemas.cache.size`).
//!
//! Kafka keeps an LRU of schema translations in each direction; we keep insertion order and
//! evict the oldest entry, which behaves the same for the usual handful of schemas per topic.

use std::collections::{HashMap, VecDeque};
use std::hash::Hash;
use std::sync::{Mutex, MutexGuard};

pub(super) struct BoundedCache<K, V> {
    capacity: usize,
    inner: Mutex<Entries<K, V>>,
}

struct Entries<K, V> {
    map: HashMap<K, V>,
    order: VecDeque<K>,
}

impl<K: Eq + Hash + Clone, V: Clone> BoundedCache<K, V> {
    /// A cache of at most `capacity` entries; zero disables caching.
    pub(super) fn new(capacity: usize) -> Self {
        Self { capacity, inner: Mutex::new(Entries { map: HashMap::new(), order: VecDeque::new() }) }
    }

    fn lock(&self) -> MutexGuard<'_, Entries<K, V>> {
        // A panic while holding the lock cannot leave the map half-updated in a way that
        // matters for a cache, so keep using it.
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub(super) fn get(&self, key: &K) -> Option<V> {
        if self.capacity == 0 {
            return None;
        }
        self.lock().map.get(key).cloned()
    }

    pub(super) fn insert(&self, key: K, value: V) {
        if self.capacity == 0 {
            return;
        }
        let mut entries = self.lock();
        if entries.map.insert(key.clone(), value).is_none() {
            entries.order.push_back(key);
            while entries.order.len() > self.capacity {
                if let Some(oldest) = entries.order.pop_front() {
                    entries.map.remove(&oldest);
                }
            }
        }
    }

    #[cfg(test)]
    pub(super) fn len(&self) -> usize {
        self.lock().map.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn evicts_the_oldest_entry_beyond_capacity() {
        let cache = BoundedCache::new(2);
        cache.insert(1, "a");
        cache.insert(2, "b");
        cache.insert(1, "a2");
        cache.insert(3, "c");
        assert_eq!(cache.get(&1), None);
        assert_eq!(cache.get(&2), Some("b"));
        assert_eq!(cache.get(&3), Some("c"));
        assert_eq!(cache.len(), 2);
        let off = BoundedCache::new(0);
        off.insert(1, "a");
        assert_eq!(off.get(&1), None);
    }
}

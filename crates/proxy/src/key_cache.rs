//! API keys looked up in the last moments, so a request does not read the database for its key.
//!
//! Without it every request made two round trips to a database connection's thread (the
//! lookup, and the pool's check when the connection is given back): half the context switches
//! of a chat request. An entry is kept `[auth] key_cache_ms` (1 s by default; 0 turns the cache
//! off). A key created or revoked through this process empties the cache at once; one revoked
//! by another replica or by `proofgate keys revoke` stops working here within that time.
//! Expiry is checked on every request against the clock, never cached. Unknown keys are kept
//! too: a key's secret is random, so no one presents it before it is created.

use crate::keys::ApiKey;
use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// At most this many keys are kept; a full cache starts over (a flood of made-up keys then
/// costs database reads, as it did without a cache, and no memory).
const MAX_ENTRIES: usize = 4096;

/// What [`KeyCache::get`] found.
#[derive(Debug, PartialEq)]
pub enum Cached {
    /// The stored key for that secret (`None`: there is none), looked up within the TTL.
    Hit(Option<ApiKey>),
    /// Not known: look it up, then [`KeyCache::put`] it with this generation.
    Miss(u64),
}

/// Keys by the SHA-256 of their secret (what the database stores), with when they were read.
#[derive(Debug)]
pub struct KeyCache {
    ttl: Duration,
    inner: Mutex<Inner>,
}

#[derive(Debug, Default)]
struct Inner {
    /// Bumped by [`KeyCache::clear`]: a lookup that started before it must not be kept.
    generation: u64,
    entries: HashMap<String, (Instant, Option<ApiKey>)>,
    /// Hashes found to be stored keys, with when: made-up keys are never in it.
    known: HashMap<String, Instant>,
}

/// How long a key found in the storage counts as known (see [`KeyCache::was_a_key`]).
const KNOWN_FOR: Duration = Duration::from_secs(24 * 3600);

impl KeyCache {
    /// A cache keeping entries for `ttl` (zero: keeps nothing).
    pub fn new(ttl: Duration) -> KeyCache {
        KeyCache {
            ttl,
            inner: Mutex::default(),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The key stored for the secret whose hash is `hash`, if it was read within the TTL.
    pub fn get(&self, hash: &str) -> Cached {
        let inner = self.lock();
        match inner.entries.get(hash) {
            Some((at, key)) if at.elapsed() < self.ttl => Cached::Hit(key.clone()),
            _ => Cached::Miss(inner.generation),
        }
    }

    /// Whether `hash` was found to be a stored key within [`KNOWN_FOR`] (whatever the TTL,
    /// and through [`KeyCache::clear`]): only for deciding what a lookup costs the client's
    /// address, never whether the key is valid.
    pub fn was_a_key(&self, hash: &str) -> bool {
        self.lock()
            .known
            .get(hash)
            .is_some_and(|at| at.elapsed() < KNOWN_FOR)
    }

    /// Notes that `hash` was found to be a stored key (see [`KeyCache::was_a_key`]).
    pub fn note_a_key(&self, hash: &str) {
        let mut inner = self.lock();
        if inner.known.len() >= MAX_ENTRIES && !inner.known.contains_key(hash) {
            inner.known.retain(|_, at| at.elapsed() < KNOWN_FOR);
            if inner.known.len() >= MAX_ENTRIES {
                inner.known.clear();
            }
        }
        inner.known.insert(hash.to_string(), Instant::now());
    }

    /// Forgets that `hash` was a key (it was found revoked or expired): its lookups cost the
    /// client's address again, as a made-up key's do.
    pub fn forget_a_key(&self, hash: &str) {
        self.lock().known.remove(hash);
    }

    /// Keeps what the database said for `hash`, unless the cache was cleared since the lookup
    /// began (`generation` from [`Cached::Miss`]): that answer may predate a revocation.
    pub fn put(&self, hash: String, key: Option<ApiKey>, generation: u64) {
        if self.ttl.is_zero() {
            return;
        }
        let mut inner = self.lock();
        if inner.generation != generation {
            return;
        }
        if inner.entries.len() >= MAX_ENTRIES && !inner.entries.contains_key(&hash) {
            let ttl = self.ttl;
            inner.entries.retain(|_, (at, _)| at.elapsed() < ttl);
            if inner.entries.len() >= MAX_ENTRIES {
                inner.entries.clear();
            }
        }
        inner.entries.insert(hash, (Instant::now(), key));
    }

    /// How many times [`KeyCache::clear`] ran: a key revoked here since a read changes it.
    pub fn generation(&self) -> u64 {
        self.lock().generation
    }

    /// How long an entry is kept: a key revoked on another replica is seen within it.
    pub fn ttl(&self) -> Duration {
        self.ttl
    }

    /// Forgets every key (a key was created or revoked here).
    pub fn clear(&self) {
        let mut inner = self.lock();
        inner.generation += 1;
        inner.entries.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(id: &str) -> ApiKey {
        ApiKey {
            id: id.into(),
            name: "app".into(),
            scopes: vec![],
            created_at: 1,
            expires_at: None,
            revoked_at: None,
        }
    }

    fn miss(cache: &KeyCache, hash: &str) -> u64 {
        match cache.get(hash) {
            Cached::Miss(g) => g,
            hit => panic!("expected a miss, got {hit:?}"),
        }
    }

    #[test]
    fn a_key_is_kept_for_the_ttl_only() {
        let cache = KeyCache::new(Duration::from_millis(50));
        let g = miss(&cache, "h");
        cache.put("h".into(), Some(key("k1")), g);
        cache.put("unknown".into(), None, g);
        assert_eq!(cache.get("h"), Cached::Hit(Some(key("k1"))));
        assert_eq!(cache.get("unknown"), Cached::Hit(None));
        cache.note_a_key("h");
        cache.clear();
        assert!(cache.was_a_key("h") && !cache.was_a_key("unknown") && !cache.was_a_key("x"));
        std::thread::sleep(Duration::from_millis(60));
        miss(&cache, "h");
        miss(&cache, "unknown");
    }

    #[test]
    fn a_zero_ttl_keeps_nothing() {
        let cache = KeyCache::new(Duration::ZERO);
        let g = miss(&cache, "h");
        cache.put("h".into(), Some(key("k1")), g);
        miss(&cache, "h");
    }

    #[test]
    fn a_lookup_from_before_a_clear_is_not_kept() {
        let cache = KeyCache::new(Duration::from_secs(60));
        let g = miss(&cache, "h");
        cache.put("h".into(), Some(key("k1")), g);
        // A revocation here empties the cache while another request's lookup is under way.
        let before = miss(&cache, "other");
        cache.clear();
        miss(&cache, "h");
        cache.put("other".into(), Some(key("k2")), before);
        miss(&cache, "other");
        let after = miss(&cache, "other");
        cache.put("other".into(), Some(key("k2")), after);
        assert_eq!(cache.get("other"), Cached::Hit(Some(key("k2"))));
    }

    #[test]
    fn a_flood_of_unknown_keys_stays_bounded() {
        let cache = KeyCache::new(Duration::from_secs(60));
        let g = miss(&cache, "x");
        for i in 0..3 * MAX_ENTRIES {
            cache.put(format!("made-up-{i}"), None, g);
            assert!(cache.lock().entries.len() <= MAX_ENTRIES);
        }
        cache.put("real".into(), Some(key("k1")), g);
        assert_eq!(cache.get("real"), Cached::Hit(Some(key("k1"))));
    }
}

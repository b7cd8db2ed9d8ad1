//! Findings already computed, shared by the workers of a pool and across one caller's requests.
//!
//! Findings are a pure function of the policy and the k translations (for fixed check
//! options): the key is the policy's content hash and the translations as JSON, compared in
//! full (no digest, so no collision can return another question's findings). The key also
//! names whose requests may share an entry (the caller's API key): a hit answers in
//! microseconds where a check takes milliseconds, so a cache shared by every caller would
//! tell one caller, by timing, that another had asked the same question under the same
//! policy. TOO_COMPLEX is
//! never kept: a solver timeout depends on the load at the time, not only on the input. One
//! part is not pure: where several example scenarios are equally close, which one Z3 returns
//! depends on what its solver did before (a fresh worker and one that has served other checks
//! can show different amounts in a SATISFIABLE finding's scenario). Kinds, translations and
//! cited rules do not vary, and every scenario shown is one the rules allow; a kept entry
//! shows the scenario its first check found.
//!
//! Entries are kept as their JSON text, one allocation each, and read back on a hit. As
//! values (a string per rule, statement and scenario value) 1,024 park entries held about
//! 6 MB of the proxy's heap, spread over pages shared with short-lived request data, so the
//! heap could not give those pages back once the proxy was quiet.

use crate::TranslatorOutput;
use proofgate_core::findings::{Finding, FindingKind};
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

/// Translations larger than this (as JSON) are not kept: they would crowd out many small ones.
const MAX_KEY_BYTES: usize = 16 * 1024;

/// What a cache entry is looked up by.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct FindingsKey {
    scope: String,
    policy_hash: String,
    translations: String,
}

impl FindingsKey {
    /// The key of `translations` checked against the policy whose content hash is
    /// `policy_hash`, for requests in `scope` (only a lookup in the same scope finds the
    /// entry); `None` when they are too large to keep.
    pub fn new(
        scope: &str,
        policy_hash: &str,
        translations: &[TranslatorOutput],
    ) -> Option<FindingsKey> {
        let translations = serde_json::to_string(translations).ok()?;
        (translations.len() <= MAX_KEY_BYTES).then(|| FindingsKey {
            scope: scope.to_string(),
            policy_hash: policy_hash.to_string(),
            translations,
        })
    }
}

/// Hits and misses since the cache was made.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct CacheStats {
    /// Lookups that found findings.
    pub hits: u64,
    /// Lookups that did not.
    pub misses: u64,
    /// Entries held.
    pub entries: usize,
}

/// A bounded map from [`FindingsKey`] to findings; the least recently used entry goes first.
pub struct FindingsCache {
    capacity: usize,
    state: Mutex<State>,
    hits: AtomicU64,
    misses: AtomicU64,
}

#[derive(Default)]
struct State {
    /// Last use (the clock's value then) and the findings as JSON.
    entries: HashMap<FindingsKey, (u64, Arc<str>)>,
    clock: u64,
}

impl FindingsCache {
    /// A cache of at most `capacity` entries (0 keeps nothing).
    pub fn new(capacity: usize) -> FindingsCache {
        FindingsCache {
            capacity,
            state: Mutex::new(State::default()),
            hits: AtomicU64::new(0),
            misses: AtomicU64::new(0),
        }
    }

    /// The findings kept for `key`.
    pub fn get(&self, key: &FindingsKey) -> Option<Vec<Finding>> {
        let found = self.state.lock().ok().and_then(|mut s| {
            s.clock += 1;
            let now = s.clock;
            s.entries.get_mut(key).map(|(used, f)| {
                *used = now;
                f.clone()
            })
        });
        let counter = if found.is_some() {
            &self.hits
        } else {
            &self.misses
        };
        counter.fetch_add(1, Ordering::Relaxed);
        // Outside the lock: reading back takes microseconds. Only text that read back as the
        // findings it was made from was kept, so this cannot fail; if it did, it is a miss.
        found.and_then(|json| serde_json::from_str(&json).ok())
    }

    /// Keeps `findings` for `key`, unless one of them is TOO_COMPLEX or their JSON does not
    /// read back as the same findings (a hit must return exactly what the check found).
    pub fn insert(&self, key: FindingsKey, findings: &[Finding]) {
        if self.capacity == 0 || findings.iter().any(|f| f.kind() == FindingKind::TooComplex) {
            return;
        }
        let Some(json) = serde_json::to_string(findings).ok().filter(|json| {
            serde_json::from_str::<Vec<Finding>>(json).is_ok_and(|back| back == findings)
        }) else {
            return;
        };
        let Ok(mut s) = self.state.lock() else { return };
        s.clock += 1;
        let now = s.clock;
        if s.entries.len() >= self.capacity && !s.entries.contains_key(&key) {
            // Linear in the capacity, which is small; a lookup stays O(1).
            let oldest = s
                .entries
                .iter()
                .min_by_key(|(_, (used, _))| *used)
                .map(|(k, _)| k.clone());
            if let Some(k) = oldest {
                s.entries.remove(&k);
            }
        }
        s.entries.insert(key, (now, Arc::from(json)));
    }

    /// Hits, misses and size.
    pub fn stats(&self) -> CacheStats {
        CacheStats {
            hits: self.hits.load(Ordering::Relaxed),
            misses: self.misses.load(Ordering::Relaxed),
            entries: self.state.lock().map(|s| s.entries.len()).unwrap_or(0),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proofgate_core::findings::EmptyFinding;

    fn key(n: usize) -> FindingsKey {
        let t = crate::parse_translations(
            &serde_json::json!({"translations": [[{"premises": [format!("(= x {n})")], "claims": ["y"]}]]})
                .to_string(),
        )
        .unwrap();
        FindingsKey::new("caller", "hash", &t).unwrap()
    }

    #[test]
    fn bounded_least_recently_used_first_and_never_too_complex() {
        let cache = FindingsCache::new(2);
        let found = vec![Finding::NoTranslations(EmptyFinding::default())];
        cache.insert(key(1), &found);
        cache.insert(key(2), &found);
        assert!(cache.get(&key(1)).is_some());
        cache.insert(key(3), &found);
        // 2 was the least recently used.
        assert!(cache.get(&key(2)).is_none());
        assert!(cache.get(&key(1)).is_some());
        assert!(cache.get(&key(3)).is_some());
        cache.insert(key(4), &[Finding::TooComplex(EmptyFinding::default())]);
        assert!(cache.get(&key(4)).is_none());
        let stats = cache.stats();
        assert_eq!((stats.hits, stats.misses, stats.entries), (3, 2, 2));
    }

    #[test]
    fn findings_whose_json_reads_back_otherwise_are_not_kept() {
        let cache = FindingsCache::new(4);
        // An unknown member spelt like a known one writes `{"valid": ...}`, which reads back
        // as a VALID finding: a hit would return something the check did not find.
        let odd = vec![Finding::Unknown {
            member: "valid".into(),
            body: serde_json::json!({}),
        }];
        cache.insert(key(1), &odd);
        assert!(cache.get(&key(1)).is_none());
        let kept = vec![
            Finding::NoTranslations(EmptyFinding::default()),
            Finding::Unknown {
                member: "laterKind".into(),
                body: serde_json::json!({"a": [1, 2.5, "x"]}),
            },
        ];
        cache.insert(key(2), &kept);
        assert_eq!(cache.get(&key(2)), Some(kept));
    }

    #[test]
    fn every_share_of_agreeing_translators_is_kept() {
        // A translation's confidence is the share of translators that agreed (k of n): its
        // JSON must read back as the same number, or such findings would never be kept.
        use proofgate_core::findings::{Translation, ValidFinding};
        let cache = FindingsCache::new(1024);
        let mut n_key = 0;
        for n in 1..=16u32 {
            for k in 0..=n {
                let share = serde_json::Number::from_f64(f64::from(k) / f64::from(n)).unwrap();
                let found = vec![Finding::Valid(ValidFinding {
                    translation: Some(Translation {
                        confidence: Some(share.clone()),
                        ..Translation::default()
                    }),
                    ..ValidFinding::default()
                })];
                n_key += 1;
                cache.insert(key(n_key), &found);
                assert_eq!(cache.get(&key(n_key)), Some(found), "{k}/{n}: {share}");
            }
        }
    }

    #[test]
    fn the_policy_is_part_of_the_key() {
        let t = crate::parse_translations(
            &serde_json::json!({"translations": [[{"premises": ["x"], "claims": ["y"]}]]})
                .to_string(),
        )
        .unwrap();
        assert_ne!(
            FindingsKey::new("k", "a", &t),
            FindingsKey::new("k", "b", &t)
        );
        assert_eq!(
            FindingsKey::new("k", "a", &t),
            FindingsKey::new("k", "a", &t.clone())
        );
    }

    #[test]
    fn one_scopes_entry_is_not_found_from_another() {
        let cache = FindingsCache::new(8);
        let t = crate::parse_translations(
            &serde_json::json!({"translations": [[{"premises": ["x"], "claims": ["y"]}]]})
                .to_string(),
        )
        .unwrap();
        let found = vec![Finding::NoTranslations(EmptyFinding::default())];
        let mine = FindingsKey::new("key-a", "hash", &t).unwrap();
        cache.insert(mine.clone(), &found);
        // Scopes are compared whole: neither a prefix nor a longer name finds it.
        for other in ["key-b", "key-", "key-aa", ""] {
            let theirs = FindingsKey::new(other, "hash", &t).unwrap();
            assert!(cache.get(&theirs).is_none(), "scope {other:?}");
        }
        assert_eq!(cache.get(&mine), Some(found));
        let stats = cache.stats();
        assert_eq!((stats.hits, stats.misses), (1, 4));
    }
}

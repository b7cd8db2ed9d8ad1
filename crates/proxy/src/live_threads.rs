//! The threads this process is driving right now, so that the resumer never takes one of them
//! for an orphan. A thread is resumed when its last save is older than
//! `[server] resume_after_ms`; a call slower than that (an LLM that takes its time, retries
//! after 429s) would otherwise have its thread driven twice at once: the LLM asked twice, and
//! one of the two requests failing on the other's records. Other replicas cannot see this set:
//! for them `resume_after_ms` must stay above the longest call, as the configuration says.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// Thread ids with how many holders each has.
#[derive(Debug, Default, Clone)]
pub struct LiveThreads(Arc<Mutex<HashMap<String, usize>>>);

/// Holds a thread as live until dropped (the request finished, failed or was dropped).
#[derive(Debug)]
pub struct LiveGuard {
    threads: LiveThreads,
    id: String,
}

impl LiveThreads {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, usize>> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Marks `id` as driven here until the guard is dropped.
    pub fn hold(&self, id: &str) -> LiveGuard {
        *self.lock().entry(id.to_string()).or_insert(0) += 1;
        LiveGuard {
            threads: self.clone(),
            id: id.to_string(),
        }
    }

    /// Whether this process is driving `id`.
    pub fn contains(&self, id: &str) -> bool {
        self.lock().contains_key(id)
    }
}

impl LiveGuard {
    /// The thread held.
    pub fn id(&self) -> &str {
        &self.id
    }
}

impl Drop for LiveGuard {
    fn drop(&mut self) {
        let mut threads = self.threads.lock();
        if let Some(n) = threads.get_mut(&self.id) {
            *n -= 1;
            if *n == 0 {
                threads.remove(&self.id);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_thread_is_live_while_any_guard_holds_it() {
        let live = LiveThreads::default();
        assert!(!live.contains("t"));
        let a = live.hold("t");
        let b = live.hold("t");
        assert!(live.contains("t"));
        drop(a);
        assert!(live.contains("t"));
        drop(b);
        assert!(!live.contains("t"));
        assert!(live.lock().is_empty());
    }
}

//! Values kept once per event loop (`[server] runtime = "per-core"`).
//!
//! An HTTP client's pooled connection is driven by a task on the loop that opened it. With one
//! pool for every loop, a request on loop 1 that takes a connection opened by loop 0 wakes
//! loop 0's thread to write and again to read: the hand-offs the per-core runtime is there to
//! avoid. So each loop gets its own client.

use std::cell::Cell;
use std::sync::{Arc, OnceLock};

static LOOPS: OnceLock<usize> = OnceLock::new();

thread_local! {
    static CURRENT: Cell<usize> = const { Cell::new(0) };
}

/// Declares how many event loops serve. Called once, before any [`PerLoop`] value is made;
/// without it (work-stealing, tests) there is one of each value.
pub fn set_loops(count: usize) {
    let _ = LOOPS.set(count.max(1));
}

/// Marks the calling thread as event loop `index`'s.
pub fn enter(index: usize) {
    CURRENT.with(|c| c.set(index));
}

/// The event loop of the calling thread (0 outside the loops).
pub fn current() -> usize {
    CURRENT.with(Cell::get)
}

/// One value per event loop; each loop uses its own.
#[derive(Clone, Debug)]
pub struct PerLoop<T>(Arc<[T]>);

impl<T> PerLoop<T> {
    /// Makes one value per declared loop.
    pub fn try_new<E>(mut make: impl FnMut() -> Result<T, E>) -> Result<Self, E> {
        let count = LOOPS.get().copied().unwrap_or(1);
        let values = (0..count).map(|_| make()).collect::<Result<Vec<T>, E>>()?;
        Ok(PerLoop(values.into()))
    }

    /// The calling loop's value.
    pub fn get(&self) -> &T {
        &self.0[current() % self.0.len()]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_loop_gets_its_own_value_and_other_threads_the_first() {
        let values = PerLoop(Arc::from(vec!["zero", "one", "two"]));
        assert_eq!(*values.get(), "zero");
        std::thread::scope(|s| {
            for i in 0..3 {
                let values = &values;
                s.spawn(move || {
                    enter(i);
                    assert_eq!(current(), i);
                    assert_eq!(*values.get(), ["zero", "one", "two"][i]);
                });
            }
            s.spawn(|| assert_eq!(*values.get(), "zero"));
        });
    }
}

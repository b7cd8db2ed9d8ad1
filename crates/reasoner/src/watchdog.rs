//! Time limits for the solver calls of checks without Z3's per-call timer.
//!
//! A solver with a `timeout` parameter starts and stops a timer for every call, which costs
//! a wake-up of Z3's timer thread and a wait for it each time: tens of microseconds per call
//! on a busy machine, with a check making about ten calls. Instead, each thread that checks
//! has one watchdog thread: a call records its deadline (a lock, no wake-up), and the watchdog,
//! sleeping until the earliest deadline it knows of, interrupts the thread's Z3 context when a
//! call is still running past its deadline. The interrupted call answers unknown, exactly as
//! a timed-out one. An interrupt reaches only a running call (Z3 ignores it otherwise), and
//! is sent only while the call that overran has not ended (both sides hold the same lock).

use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};
use z3::{Context, ContextHandle};

#[derive(Default)]
struct State {
    /// The deadline of the call running now, if any.
    deadline: Option<Instant>,
    /// The watchdog waits for a call to start (a new deadline must wake it).
    idle: bool,
    /// The thread it watches has ended.
    closed: bool,
}

#[derive(Default)]
struct Shared {
    state: Mutex<State>,
    wake: Condvar,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// The watchdog of the current thread.
struct Watchdog {
    shared: Arc<Shared>,
}

thread_local! {
    static WATCHDOG: Option<Watchdog> = Watchdog::start();
}

impl Watchdog {
    fn start() -> Option<Watchdog> {
        // The watchdog thread needs the context for as long as it runs: one reference to the
        // thread's context is kept for good (the thread's own lasts as long as the thread).
        let context: &'static Context = Box::leak(Box::new(Context::thread_local()));
        let handle = context.handle();
        let shared = Arc::new(Shared::default());
        let theirs = shared.clone();
        std::thread::Builder::new()
            .name("z3-watchdog".into())
            .spawn(move || watch(&theirs, &handle))
            .ok()?;
        Some(Watchdog { shared })
    }
}

impl Drop for Watchdog {
    fn drop(&mut self) {
        self.shared.lock().closed = true;
        self.shared.wake.notify_one();
    }
}

fn watch(shared: &Shared, handle: &ContextHandle<'static>) {
    let mut state = shared.lock();
    loop {
        if state.closed {
            return;
        }
        state = match state.deadline {
            None => {
                state.idle = true;
                let mut s = shared
                    .wake
                    .wait(state)
                    .unwrap_or_else(PoisonError::into_inner);
                s.idle = false;
                s
            }
            Some(deadline) => {
                let now = Instant::now();
                let wait = if now >= deadline {
                    // The call may be between two steps that do not look at the interrupt
                    // flag: interrupt again until it ends.
                    handle.interrupt();
                    Duration::from_millis(5)
                } else {
                    deadline - now
                };
                shared
                    .wake
                    .wait_timeout(state, wait)
                    .unwrap_or_else(PoisonError::into_inner)
                    .0
            }
        };
    }
}

/// Whether solver calls on this thread are limited by the watchdog (else solvers need their
/// `timeout` parameter).
pub(crate) fn available() -> bool {
    WATCHDOG.try_with(|w| w.is_some()).unwrap_or(false)
}

/// Runs `call` (one solver call on this thread's context), interrupted after `limit`. Without a
/// watchdog it just runs it: the solver was then made with its own `timeout` (see `available`).
pub(crate) fn limited<T>(limit: Duration, call: impl FnOnce() -> T) -> T {
    let shared = WATCHDOG
        .try_with(|w| w.as_ref().map(|w| w.shared.clone()))
        .ok()
        .flatten();
    let Some(shared) = shared else {
        return call();
    };
    {
        let mut state = shared.lock();
        state.deadline = Some(Instant::now() + limit);
        if state.idle {
            shared.wake.notify_one();
        }
    }
    let out = call();
    shared.lock().deadline = None;
    out
}

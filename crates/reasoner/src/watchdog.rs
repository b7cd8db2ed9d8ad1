//! Time limits for a check's solver calls without Z3's per-call timer.
//!
//! A solver with a `timeout` parameter starts and stops a timer for every call: a wake-up of
//! Z3's timer thread and a wait for it each time, tens of microseconds per call on a busy
//! machine, and a check makes about ten calls. Instead, a check runs with one watchdog thread
//! (`watched`): each call records its deadline under a lock (no wake-up), and the watchdog,
//! sleeping until the deadline it knows of, interrupts the thread's Z3 context when that call is
//! still running past it. The interrupted call answers unknown, exactly as a timed-out one
//! does. The interrupt is sent only while the overrunning call has not ended (both sides take
//! the same lock), and Z3 ignores an interrupt when no call runs. The watchdog is a scoped
//! thread: it ends with the check and borrows nothing beyond it.
//!
//! Calls made outside `watched` (or when its thread could not be started) are limited by the
//! solver's `timeout` parameter, set for the call.

use std::cell::RefCell;
use std::sync::{Condvar, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};
use z3::{Context, ContextHandle, Params, Solver};

#[derive(Default)]
struct State {
    /// The deadline of the call running now, if any.
    deadline: Option<Instant>,
    /// When the watchdog wakes up next by itself (it waits for an earlier call's deadline): a
    /// call with an earlier deadline must wake it.
    waking_at: Option<Instant>,
    /// The watchdog waits for a call to start (a new deadline must wake it).
    idle: bool,
    /// The check is over.
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

thread_local! {
    /// The watchdog of the check running on this thread, if any.
    static ACTIVE: RefCell<Option<std::sync::Arc<Shared>>> = const { RefCell::new(None) };
    /// Set once the check running on this thread is no longer wanted (see [`unless_unwanted`]).
    static UNWANTED: RefCell<Option<std::sync::Arc<std::sync::atomic::AtomicBool>>> =
        const { RefCell::new(None) };
}

/// Runs `work` (one check) on this thread with `unwanted`: once that is set (the caller gave
/// up: its request ended), each later solver call gets no time and answers unknown, so an
/// abandoned check ends in moments. Before, it ran every remaining call to its own limit: a
/// translation of a hundred hard pairs held a worker, and every caller's checks queued
/// behind it, for many minutes after its request had ended.
pub fn unless_unwanted<T>(
    unwanted: std::sync::Arc<std::sync::atomic::AtomicBool>,
    work: impl FnOnce() -> T,
) -> T {
    struct Restore(Option<std::sync::Arc<std::sync::atomic::AtomicBool>>);
    impl Drop for Restore {
        fn drop(&mut self) {
            let previous = self.0.take();
            UNWANTED.with(|u| *u.borrow_mut() = previous);
        }
    }
    let _restore = Restore(UNWANTED.with(|u| u.replace(Some(unwanted))));
    work()
}

/// Whether the check on this thread is no longer wanted.
pub(crate) fn unwanted() -> bool {
    UNWANTED.with(|u| {
        u.borrow()
            .as_ref()
            .is_some_and(|f| f.load(std::sync::atomic::Ordering::Relaxed))
    })
}

/// Runs `check` with a watchdog for the solver calls it makes through `limited`: the one
/// already watching this thread (see [`with_watchdog`]), or one started for it.
pub(crate) fn watched<T>(check: impl FnOnce() -> T) -> T {
    if ACTIVE.with(|a| a.borrow().is_some()) {
        return check();
    }
    let context = Context::thread_local();
    let handle = context.handle();
    let shared = std::sync::Arc::new(Shared::default());
    std::thread::scope(|scope| {
        let started = std::thread::Builder::new()
            .name("z3-watchdog".into())
            .spawn_scoped(scope, || watch(&shared, &handle))
            .is_ok();
        let previous = started.then(|| ACTIVE.with(|a| a.replace(Some(shared.clone()))));
        // Restores the previous watchdog and stops this one even if `check` panics.
        struct Close<'a> {
            shared: &'a Shared,
            previous: Option<Option<std::sync::Arc<Shared>>>,
        }
        impl Drop for Close<'_> {
            fn drop(&mut self) {
                if let Some(previous) = self.previous.take() {
                    ACTIVE.with(|a| *a.borrow_mut() = previous);
                }
                self.shared.lock().closed = true;
                self.shared.wake.notify_one();
            }
        }
        let _close = Close {
            shared: &shared,
            previous,
        };
        check()
    })
}

fn watch(shared: &Shared, handle: &ContextHandle<'_>) {
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
                state.waking_at = Some(now + wait);
                let mut s = shared
                    .wake
                    .wait_timeout(state, wait)
                    .unwrap_or_else(PoisonError::into_inner)
                    .0;
                s.waking_at = None;
                s
            }
        };
    }
}

/// Runs `work` (a reasoner worker's loop over its jobs) with one watchdog thread for all the
/// checks it makes on this thread: a check then starts no thread of its own (a thread per
/// check was about 2% of the local path's CPU with every question distinct). Call it once the
/// thread's Z3 context is in use: it takes the context for the watchdog's interrupts.
pub fn with_watchdog<T>(work: impl FnOnce() -> T) -> T {
    watched(work)
}

/// Runs `call` (one call of `solver`, a solver without a `timeout` parameter of its own),
/// stopped after `limit`: by the check's watchdog, or else by the solver's `timeout`
/// parameter, set for this call only.
pub(crate) fn limited<T>(solver: &Solver, limit: Duration, call: impl FnOnce() -> T) -> T {
    let limit = if unwanted() { Duration::ZERO } else { limit };
    match ACTIVE.with(|a| a.borrow().clone()) {
        Some(shared) => {
            {
                let mut state = shared.lock();
                let deadline = Instant::now() + limit;
                state.deadline = Some(deadline);
                if state.idle || state.waking_at.is_some_and(|at| deadline < at) {
                    shared.wake.notify_one();
                }
            }
            // Clears the deadline even if `call` panics (the worker catches the panic and goes
            // on): a deadline left behind would have the watchdog interrupt the next calls.
            struct Clear<'a>(&'a Shared);
            impl Drop for Clear<'_> {
                fn drop(&mut self) {
                    self.0.lock().deadline = None;
                }
            }
            let _clear = Clear(&shared);
            call()
        }
        None => {
            let ms = u32::try_from(limit.as_millis()).unwrap_or(u32::MAX).max(1);
            set_timeout(solver, ms);
            let out = call();
            // u32::MAX: no timer (Z3's default).
            set_timeout(solver, u32::MAX);
            out
        }
    }
}

fn set_timeout(solver: &Solver, ms: u32) {
    let mut params = Params::new();
    params.set_u32("timeout", ms);
    solver.set_params(&params);
}

#[cfg(test)]
mod tests {
    use super::{limited, watched, with_watchdog};
    use std::time::{Duration, Instant};
    use z3::ast::Int;
    use z3::{SatResult, Solver};

    /// x^3 + y^3 = z^3 over positive integers: Z3 does not settle it.
    fn hard() -> Solver {
        let s = Solver::new();
        let (x, y, z) = (
            Int::new_const("x"),
            Int::new_const("y"),
            Int::new_const("z"),
        );
        let cube = |v: &Int| Int::mul(&[v.clone(), v.clone(), v.clone()]);
        s.assert(Int::add(&[cube(&x), cube(&y)]).eq(cube(&z)));
        for v in [&x, &y, &z] {
            s.assert(v.gt(Int::from_i64(0)));
        }
        s
    }

    #[test]
    fn calls_stop_at_their_limit_with_or_without_the_watchdog() {
        let limit = Duration::from_millis(50);
        for with_watchdog in [true, false] {
            let s = hard();
            let start = Instant::now();
            let call = || limited(&s, limit, || s.check());
            let r = if with_watchdog { watched(call) } else { call() };
            assert_eq!(r, SatResult::Unknown);
            assert!(start.elapsed() < Duration::from_secs(2));
            // Nothing is left behind: the next call runs to its answer.
            let easy = Solver::new();
            easy.assert(Int::new_const("w").gt(Int::from_i64(3)));
            let again = || limited(&easy, limit, || easy.check());
            let r = if with_watchdog {
                watched(again)
            } else {
                again()
            };
            assert_eq!(r, SatResult::Sat);
        }
    }

    /// A worker's watchdog serves all its checks: a call with a shorter limit than the one
    /// the watchdog last waited for still stops at its own limit, and the checks after it run.
    #[test]
    fn one_watchdog_serves_every_check_of_a_worker() {
        with_watchdog(|| {
            let easy = Solver::new();
            easy.assert(Int::new_const("w").gt(Int::from_i64(3)));
            // The watchdog now waits for a deadline a minute away (the call lasts long enough
            // for it to see that deadline)...
            let long = Duration::from_secs(60);
            let slow = || {
                std::thread::sleep(Duration::from_millis(200));
                easy.check()
            };
            assert_eq!(limited(&easy, long, slow), SatResult::Sat);
            // ...and a later call's earlier deadline wakes it.
            let s = hard();
            let start = Instant::now();
            let short = Duration::from_millis(50);
            let r = watched(|| limited(&s, short, || s.check()));
            assert_eq!(r, SatResult::Unknown);
            assert!(start.elapsed() < Duration::from_secs(2));
            for _ in 0..3 {
                assert_eq!(
                    watched(|| limited(&easy, short, || easy.check())),
                    SatResult::Sat
                );
            }
        });
    }

    #[test]
    fn a_call_that_panics_leaves_no_deadline_behind() {
        with_watchdog(|| {
            let easy = Solver::new();
            let panicked = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                limited(&easy, Duration::from_millis(1), || {
                    panic!("in a solver call")
                })
            }));
            assert!(panicked.is_err());
            let deadline = super::ACTIVE.with(|a| {
                let shared = a.borrow().clone().expect("the worker's watchdog");
                let deadline = shared.lock().deadline;
                deadline
            });
            // Left set, the watchdog would interrupt the context every 5 ms from now on.
            assert_eq!(deadline, None);
            assert_eq!(
                limited(&easy, Duration::from_secs(5), || easy.check()),
                SatResult::Sat
            );
        });
    }
}

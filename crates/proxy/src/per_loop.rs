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

/// For tests of values kept per loop: a keep-alive endpoint and loops that call it in turn.
#[cfg(test)]
pub(crate) mod test_support {
    use std::future::Future;
    use std::net::SocketAddr;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;
    use std::time::Duration;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    /// A keep-alive HTTP/1.1 endpoint on its own runtime that answers every request with
    /// `body` (JSON); the runtime, its address, and how many connections it has accepted.
    pub fn keep_alive_server(
        body: &'static str,
    ) -> (tokio::runtime::Runtime, SocketAddr, impl Fn() -> usize) {
        let runtime = tokio::runtime::Runtime::new().unwrap();
        let accepted = Arc::new(AtomicUsize::new(0));
        let listener = runtime
            .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
            .unwrap();
        let addr = listener.local_addr().unwrap();
        let counter = accepted.clone();
        runtime.spawn(async move {
            while let Ok((mut socket, _)) = listener.accept().await {
                counter.fetch_add(1, Ordering::SeqCst);
                tokio::spawn(async move {
                    let mut buf = Vec::new();
                    loop {
                        let mut chunk = [0u8; 4096];
                        let Ok(n) = socket.read(&mut chunk).await else { return };
                        if n == 0 {
                            return;
                        }
                        buf.extend_from_slice(&chunk[..n]);
                        let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") else {
                            continue;
                        };
                        let head = String::from_utf8_lossy(&buf[..end]).to_lowercase();
                        let length: usize = head
                            .lines()
                            .find_map(|l| l.strip_prefix("content-length:"))
                            .map_or(0, |v| v.trim().parse().unwrap());
                        if buf.len() < end + 4 + length {
                            continue;
                        }
                        buf.drain(..end + 4 + length);
                        let reply = format!(
                            "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
                            body.len()
                        );
                        if socket.write_all(reply.as_bytes()).await.is_err() {
                            return;
                        }
                    }
                });
            }
        });
        (runtime, addr, move || accepted.load(Ordering::SeqCst))
    }

    /// Runs `call(i)` on loop `i`'s own thread and current-thread runtime, one loop after the
    /// other, for the `count` loops declared (before the values under test were made). Each runtime stays alive but idle once its call is
    /// done, as a busy loop would: a call that needs another loop's thread hangs, and fails.
    pub fn each_loop_in_turn<F, Fut>(count: usize, call: F)
    where
        F: Fn(usize) -> Fut,
        Fut: Future<Output = ()> + Send + 'static,
    {
        assert_eq!(super::LOOPS.get(), Some(&count), "declare the loops first");
        let mut idle = Vec::new();
        for index in 0..count {
            let fut = call(index);
            let runtime = std::thread::spawn(move || {
                super::enter(index);
                let runtime = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .unwrap();
                let done = runtime
                    .block_on(async { tokio::time::timeout(Duration::from_secs(5), fut).await });
                (runtime, done.is_ok())
            })
            .join()
            .unwrap();
            assert!(
                runtime.1,
                "loop {index}'s call hung on another loop's connection"
            );
            idle.push(runtime.0);
        }
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

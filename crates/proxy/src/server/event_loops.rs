//! Serving on one single-threaded event loop per core (`[server] runtime = "per-core"`).
//!
//! On Tokio's work-stealing runtime a lone request wakes the second worker at almost every
//! step (its socket, the upstream connection's task, the journal's reply) and the two hand it
//! back and forth: about 15 context switches per request on two cores. Here one task accepts
//! and hands each connection to the loop with the fewest open connections, and everything the
//! connection's requests spawn stays on that loop. The price: a request's own CPU work delays
//! the other connections of its loop, where a work-stealing runtime would give them to an idle
//! thread (`[server] runtime = "work-stealing"` keeps that).

use crate::metrics::Metrics;
use prometheus_client::metrics::gauge::Gauge;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;

/// A client connection held by one loop; its loop's gauge counts it until it is dropped.
pub struct LoopStream {
    stream: TcpStream,
    open: Gauge,
}

impl Drop for LoopStream {
    fn drop(&mut self) {
        self.open.dec();
    }
}

impl AsyncRead for LoopStream {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().stream).poll_read(cx, buf)
    }
}

impl AsyncWrite for LoopStream {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().stream).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().stream).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.stream.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().stream).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().stream).poll_shutdown(cx)
    }
}

/// A connection on its way from the acceptor to a loop. It travels as a std socket: a Tokio
/// socket belongs to the loop that registered it.
struct Handed {
    stream: std::net::TcpStream,
    peer: SocketAddr,
}

/// One loop's end: the connections handed to it.
pub struct LoopListener {
    incoming: mpsc::UnboundedReceiver<Handed>,
    open: Gauge,
    local: SocketAddr,
}

impl axum::serve::Listener for LoopListener {
    type Io = LoopStream;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (LoopStream, SocketAddr) {
        loop {
            let Some(Handed { stream, peer }) = self.incoming.recv().await else {
                // The acceptor is gone, so nothing more comes: the process is stopping.
                return std::future::pending().await;
            };
            match TcpStream::from_std(stream) {
                Ok(stream) => {
                    let open = self.open.clone();
                    return (LoopStream { stream, open }, peer);
                }
                Err(e) => {
                    self.open.dec();
                    tracing::warn!("cannot take the connection from {peer}: {e}");
                }
            }
        }
    }

    fn local_addr(&self) -> io::Result<SocketAddr> {
        Ok(self.local)
    }
}

/// The acceptor's end of one loop.
struct LoopHandle {
    index: usize,
    to: mpsc::UnboundedSender<Handed>,
    open: Gauge,
}

/// Loops and their ends: `count` listeners and the acceptor's handles to them.
fn loops(
    count: usize,
    local: SocketAddr,
    metrics: &Metrics,
) -> (Vec<LoopListener>, Vec<LoopHandle>) {
    (0..count.max(1))
        .map(|index| {
            let (to, incoming) = mpsc::unbounded_channel();
            let open = metrics.open_connections(index);
            let listener = LoopListener {
                incoming,
                open: open.clone(),
                local,
            };
            (listener, LoopHandle { index, to, open })
        })
        .unzip()
}

/// The loop the next connection goes to: the one with the fewest open connections, the
/// first of equals (so a lone client is always served by the first loop, which also runs the
/// journal and the background tasks).
fn least_loaded(open: impl Iterator<Item = i64>) -> Option<usize> {
    open.enumerate()
        .min_by_key(|&(i, n)| (n, i))
        .map(|(i, _)| i)
}

/// Accepts connections for as long as a loop is left to take them.
async fn hand_out(mut listener: TcpListener, mut loops: Vec<LoopHandle>) {
    loop {
        // axum's accept logs and rides out errors (EMFILE: waits a second).
        let (stream, peer) = axum::serve::Listener::accept(&mut listener).await;
        // Responses are written whole: holding back a small one only adds latency.
        let _ = stream.set_nodelay(true);
        let mut handed = match stream.into_std() {
            Ok(stream) => Handed { stream, peer },
            Err(e) => {
                tracing::warn!("cannot hand on the connection from {peer}: {e}");
                continue;
            }
        };
        loop {
            let Some(i) = least_loaded(loops.iter().map(|l| l.open.get())) else {
                tracing::error!("no event loop is left to serve connections");
                return;
            };
            loops[i].open.inc();
            match loops[i].to.send(handed) {
                Ok(()) => break,
                Err(mpsc::error::SendError(back)) => {
                    loops[i].open.dec();
                    tracing::error!("event loop {} has stopped", loops[i].index);
                    loops.remove(i);
                    handed = back;
                }
            }
        }
    }
}

/// Serves `app` on `count` event loops until the process is stopped. The calling task's loop
/// (a current-thread runtime) is loop 0 and also accepts; the others get a thread each. The
/// app's HTTP clients must have been made after [`crate::per_loop::set_loops`]`(count)`.
pub async fn serve(
    app: Arc<crate::app::App>,
    listener: TcpListener,
    count: usize,
) -> io::Result<()> {
    let local = listener.local_addr()?;
    let (mut listeners, handles) = loops(count, local, &app.metrics);
    // One router for all loops: its limits (rate per key, requests in flight) are the server's,
    // not each loop's.
    let limits = super::connections::ConnectionLimits::new(&app.config.limits, Some(&app.metrics));
    let router = super::router(app);
    let first = listeners.remove(0);
    for (i, listener) in listeners.into_iter().enumerate() {
        let router = router.clone();
        let limits = limits.clone();
        std::thread::Builder::new()
            .name(format!("proofgate-loop-{}", i + 1))
            .spawn(move || {
                crate::per_loop::enter(i + 1);
                let runtime = match loop_runtime() {
                    Ok(r) => r,
                    Err(e) => {
                        // Its listener drops with it; the acceptor passes it by.
                        tracing::error!("event loop {}: cannot start its runtime: {e}", i + 1);
                        return;
                    }
                };
                if let Err(e) = runtime.block_on(serve_loop(router, listener, limits)) {
                    tracing::error!("event loop {} stopped: {e}", i + 1);
                }
            })?;
    }
    tokio::spawn(hand_out(listener, handles));
    serve_loop(router, first, limits).await
}

/// A loop's runtime: Tokio's current-thread scheduler with its I/O and timer drivers.
pub fn loop_runtime() -> io::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
}

async fn serve_loop(
    router: axum::Router,
    listener: LoopListener,
    limits: super::connections::ConnectionLimits,
) -> io::Result<()> {
    super::connections::serve_on(listener, router, limits).await
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    #[test]
    fn a_connection_goes_to_the_loop_with_fewest_open_the_first_of_equals() {
        assert_eq!(least_loaded([0, 0, 0].into_iter()), Some(0));
        assert_eq!(least_loaded([1, 0, 0].into_iter()), Some(1));
        assert_eq!(least_loaded([2, 3, 1].into_iter()), Some(2));
        assert_eq!(least_loaded([1, 1, 2].into_iter()), Some(0));
        assert_eq!(least_loaded(std::iter::empty()), None);
    }

    const WAIT: std::time::Duration = std::time::Duration::from_secs(5);

    /// An acceptor on a fresh port handing connections to `count` loops; their ends.
    async fn accepting(count: usize, metrics: &Metrics) -> (SocketAddr, Vec<LoopListener>) {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (listeners, handles) = loops(count, addr, metrics);
        tokio::spawn(hand_out(listener, handles));
        (addr, listeners)
    }

    /// Takes the connection handed to `listener`, as its loop would.
    async fn take(listener: &mut LoopListener) -> LoopStream {
        let h = tokio::time::timeout(WAIT, listener.incoming.recv())
            .await
            .expect("no connection was handed to this loop")
            .expect("the acceptor is gone");
        let stream = TcpStream::from_std(h.stream).unwrap();
        LoopStream {
            stream,
            open: listener.open.clone(),
        }
    }

    /// Connections are spread over the loops as they open, and counted until their loop drops
    /// them; bytes go both ways through a handed-on connection.
    #[tokio::test]
    async fn connections_are_spread_over_the_loops_and_counted_while_open() {
        let metrics = Metrics::new();
        let (addr, mut listeners) = accepting(3, &metrics).await;
        let open = || {
            (0..3)
                .map(|i| metrics.open_connections(i).get())
                .collect::<Vec<_>>()
        };

        let mut clients = Vec::new();
        let mut held: Vec<Vec<LoopStream>> = vec![Vec::new(), Vec::new(), Vec::new()];
        for n in 0..6 {
            clients.push(TcpStream::connect(addr).await.unwrap());
            held[n % 3].push(take(&mut listeners[n % 3]).await);
            for (i, l) in listeners.iter_mut().enumerate() {
                assert!(
                    l.incoming.try_recv().is_err(),
                    "connection {n} also went to loop {i}"
                );
            }
        }
        assert_eq!(open(), [2, 2, 2]);

        // Loop 1 drops a connection (its client went away): the next one goes there.
        drop(held[1].pop());
        assert_eq!(open(), [2, 1, 2]);
        let mut client = TcpStream::connect(addr).await.unwrap();
        let mut served = take(&mut listeners[1]).await;
        assert_eq!(open(), [2, 2, 2]);

        client.write_all(b"ping").await.unwrap();
        let mut buf = [0u8; 4];
        served.read_exact(&mut buf).await.unwrap();
        assert_eq!(&buf, b"ping");
        served.write_all(b"pong").await.unwrap();
        client.read_exact(&mut buf).await.unwrap();
        assert_eq!(&buf, b"pong");
        drop(served);
        drop(held);
        assert_eq!(open(), [0, 0, 0]);
    }

    /// A loop that has stopped is passed by: the connection goes to the next loop, not nowhere.
    #[tokio::test]
    async fn a_stopped_loop_loses_no_connection() {
        let metrics = Metrics::new();
        let (addr, mut listeners) = accepting(2, &metrics).await;
        drop(listeners.remove(0));
        let _client = TcpStream::connect(addr).await.unwrap();
        let _served = take(&mut listeners[0]).await;
        assert_eq!(metrics.open_connections(0).get(), 0);
        assert_eq!(metrics.open_connections(1).get(), 1);
    }
}

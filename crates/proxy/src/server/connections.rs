//! Client connections: each served by hyper with its header-read limit on, and no more open
//! at once than `[limits] max_connections`.
//!
//! axum's `serve` builds hyper's connection without a timer, which leaves hyper's header-read
//! limit off: a client that sent half a header, or nothing, held its connection (a file
//! descriptor) for ever, and enough of them stopped the server from accepting anyone, its own
//! database and upstream sockets included. The request deadline and the rate limits start only
//! once a whole request has arrived, so they never saw such a client.

use crate::config::LimitsConfig;
use axum::extract::ConnectInfo;
use axum::Router;
use hyper::body::Incoming;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto::Builder;
use hyper_util::service::TowerToHyperService;
use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt, ReadBuf};
use tower::ServiceExt;

/// What a connection beyond the cap is told before it is closed: a 503 as the API gives one.
fn over_capacity() -> Vec<u8> {
    let body = serde_json::json!({"error": {
        "code": "overloaded",
        "message": "too many open connections ([limits] max_connections); try again",
    }})
    .to_string();
    format!(
        "HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\n\
         retry-after: 1\r\nconnection: close\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

/// How long a refused connection may take to be told so.
const REFUSAL_WRITE: Duration = Duration::from_secs(1);

/// The connection limits of one server, shared by its event loops.
#[derive(Clone)]
pub struct ConnectionLimits {
    /// Connections open now, across the loops.
    open: Arc<AtomicUsize>,
    /// At most this many (`None`: no cap).
    max: Option<usize>,
    /// Time to send a request's headers, and the longest idle wait between requests.
    header_timeout: Option<Duration>,
}

impl ConnectionLimits {
    /// The limits `[limits]` sets (0: none).
    pub fn new(limits: &LimitsConfig) -> ConnectionLimits {
        ConnectionLimits {
            open: Arc::new(AtomicUsize::new(0)),
            max: (limits.max_connections > 0).then_some(limits.max_connections),
            header_timeout: (limits.header_timeout_ms > 0)
                .then(|| Duration::from_millis(limits.header_timeout_ms)),
        }
    }

    /// Connections open now.
    pub fn open(&self) -> usize {
        self.open.load(Ordering::Relaxed)
    }
}

/// Counts one open connection until dropped.
struct Open(Arc<AtomicUsize>);

impl Drop for Open {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

/// Serves `router` on every connection `listener` accepts, until the process stops.
pub async fn serve_on<L>(
    mut listener: L,
    router: Router,
    limits: ConnectionLimits,
) -> std::io::Result<()>
where
    L: axum::serve::Listener<Addr = SocketAddr>,
{
    loop {
        let (io, peer) = listener.accept().await;
        let open = Open(Arc::clone(&limits.open));
        let now_open = limits.open.fetch_add(1, Ordering::Relaxed) + 1;
        if limits.max.is_some_and(|max| now_open > max) {
            tracing::warn!(
                "refused a connection from {peer}: {} are open ([limits] max_connections)",
                now_open - 1
            );
            tokio::spawn(async move {
                let _open = open;
                let mut io = io;
                let _ = tokio::time::timeout(REFUSAL_WRITE, async {
                    io.write_all(&over_capacity()).await?;
                    io.shutdown().await
                })
                .await;
            });
            continue;
        }
        // Handlers read the client's address (`ConnectInfo`), as with axum's `serve`.
        let service =
            router
                .clone()
                .map_request(move |mut request: axum::http::Request<Incoming>| {
                    request.extensions_mut().insert(ConnectInfo(peer));
                    request
                });
        let header_timeout = limits.header_timeout;
        tokio::spawn(async move {
            let _open = open;
            let mut builder = Builder::new(TokioExecutor::new());
            if let Some(limit) = header_timeout {
                builder
                    .http1()
                    .timer(TokioTimer::new())
                    .header_read_timeout(limit);
            }
            // hyper's limit starts once it reads a request's head; before that, the first
            // bytes (HTTP/1 or HTTP/2?) are awaited with no limit of hyper's.
            let io = FirstBytes::new(io, header_timeout);
            let served = builder
                .serve_connection_with_upgrades(TokioIo::new(io), TowerToHyperService::new(service))
                .await;
            if let Err(e) = served {
                tracing::debug!("connection from {peer} ended: {e}");
            }
        });
    }
}

/// A connection whose first bytes must arrive within a time limit: a client that connects and
/// says nothing is cut off (reads fail with `TimedOut`) as one that sends half a header is.
struct FirstBytes<T> {
    io: T,
    /// Until the first bytes arrive; `None` once they have (or with no limit).
    deadline: Option<Pin<Box<tokio::time::Sleep>>>,
}

impl<T> FirstBytes<T> {
    fn new(io: T, limit: Option<Duration>) -> FirstBytes<T> {
        FirstBytes {
            io,
            deadline: limit.map(|l| Box::pin(tokio::time::sleep(l))),
        }
    }
}

impl<T: AsyncRead + Unpin> AsyncRead for FirstBytes<T> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let this = self.get_mut();
        let before = buf.filled().len();
        let read = Pin::new(&mut this.io).poll_read(cx, buf);
        let Some(deadline) = this.deadline.as_mut() else {
            return read;
        };
        match read {
            Poll::Ready(Ok(())) if buf.filled().len() > before => this.deadline = None,
            Poll::Pending if deadline.as_mut().poll(cx).is_ready() => {
                return Poll::Ready(Err(std::io::Error::new(
                    std::io::ErrorKind::TimedOut,
                    "no request within [limits] header_timeout_ms",
                )));
            }
            _ => {}
        }
        read
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for FirstBytes<T> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.get_mut().io).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.get_mut().io).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_shutdown(cx)
    }
}

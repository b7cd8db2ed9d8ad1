//! Client connections: each served by hyper's HTTP/1.1 server with its header-read limit on,
//! and no more open at once than `[limits] max_connections`.
//!
//! axum's `serve` builds hyper's connection without a timer, which leaves hyper's header-read
//! limit off: a client that sent half a header, or nothing, held its connection (a file
//! descriptor) for ever, and enough of them stopped the server from accepting anyone, its own
//! database and upstream sockets included. The request deadline and the rate limits start only
//! once a whole request has arrived, so they never saw such a client.
//!
//! HTTP/1.1 only: hyper's HTTP/2 server has no header or idle limit, and the auto-detecting
//! builder waits for a possible HTTP/2 preface with no limit either (a client that sent "P"
//! and stopped held its connection). No client of this server speaks cleartext HTTP/2.

use crate::config::LimitsConfig;
use axum::extract::ConnectInfo;
use axum::Router;
use hyper::body::Incoming;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
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

/// How long a refused connection may take to be told so, and to close.
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

/// Whether this is the first refused connection in this second (one warning a second, not
/// one per connection, under a flood).
fn first_refusal_this_second() -> bool {
    static LAST: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    LAST.swap(now, Ordering::Relaxed) != now
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
            if first_refusal_this_second() {
                tracing::warn!(
                    "refusing connections (from {peer}, and any others this second): {} are \
                     open ([limits] max_connections)",
                    now_open - 1
                );
            }
            tokio::spawn(async move {
                let _open = open;
                let mut io = io;
                let _ = tokio::time::timeout(REFUSAL_WRITE, async {
                    io.write_all(&over_capacity()).await?;
                    io.shutdown().await?;
                    // Read what the client sent until it closes too: closing a socket with
                    // unread input sends a reset, which can wipe the 503 from the client's
                    // buffer before it reads it (RFC 9112, 9.6).
                    let mut sink = [0u8; 4096];
                    while io.read(&mut sink).await? > 0 {}
                    std::io::Result::Ok(())
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
            let mut builder = hyper::server::conn::http1::Builder::new();
            // hyper starts the header timer when it first reads a request's head: at once on a
            // new connection, and again each time a kept-alive one waits for its next request.
            if let Some(limit) = header_timeout {
                builder.timer(TokioTimer::new()).header_read_timeout(limit);
            }
            let served = builder
                .serve_connection(TokioIo::new(io), TowerToHyperService::new(service))
                .with_upgrades()
                .await;
            if let Err(e) = served {
                tracing::debug!("connection from {peer} ended: {e}");
            }
        });
    }
}

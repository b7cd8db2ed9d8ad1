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
use crate::metrics::Metrics;
use axum::extract::ConnectInfo;
use axum::Router;
use hyper::body::Incoming;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use prometheus_client::metrics::counter::Counter;
use std::collections::HashMap;
use std::net::{IpAddr, Ipv6Addr, SocketAddr};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tower::ServiceExt;

/// What a connection beyond a cap is told before it is closed: a 503 as the API gives one.
fn over_capacity(message: &str) -> Vec<u8> {
    let body = serde_json::json!({"error": {
        "code": "overloaded",
        "message": message,
    }})
    .to_string();
    format!(
        "HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\n\
         retry-after: 1\r\nconnection: close\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

/// Why a connection over the overall cap is refused.
const OVER_TOTAL: &str = "too many open connections ([limits] max_connections); try again";
/// Why a connection over its client's cap is refused.
const OVER_CLIENT: &str = "too many open connections from your address \
     ([limits] max_connections_per_address); close some, or try again";

/// How long a refused connection may take to be told so.
const REFUSAL_WRITE: Duration = Duration::from_secs(1);
/// How long a refused connection's input is read after the 503, while the client closes.
const REFUSAL_LINGER: Duration = Duration::from_secs(1);
/// Refusals under way at once, beyond which a connection over a cap is closed untold: their
/// sockets are outside the caps, and a flood of them must not use up the file descriptors.
const REFUSALS_AT_ONCE: usize = 128;

/// Connections open now per client, shared by the event loops.
type ClientCounts = Arc<Mutex<HashMap<IpAddr, ClientConnections>>>;

/// One client's open connections, each with the means to ask it to close.
#[derive(Debug, Default)]
struct ClientConnections {
    count: usize,
    /// Oldest first.
    closers: Vec<Arc<Closer>>,
}

/// Asks one connection to close (see [`ConnectionLimits::make_room`]).
#[derive(Debug)]
struct Closer {
    id: u64,
    /// Notified once the connection is to close.
    notify: tokio::sync::Notify,
    /// Whether it was asked to.
    asked: std::sync::atomic::AtomicBool,
}

/// The connection limits of one server, shared by its event loops.
#[derive(Clone)]
pub struct ConnectionLimits {
    /// Connections open now, across the loops.
    open: Arc<AtomicUsize>,
    /// At most this many (`None`: no cap).
    max: Option<usize>,
    /// Connections open now per client (see `client_of`), and at most this many each.
    per_client: Option<(usize, ClientCounts)>,
    /// Whether loopback and private clients are held to the per-client cap too.
    cap_private: bool,
    /// Time to send a request's headers, and the longest idle wait between requests.
    header_timeout: Option<Duration>,
    /// The longest one write to the client may wait for it to read.
    write_timeout: Option<Duration>,
    /// Refusals under way (see `refuse`).
    refusing: Arc<AtomicUsize>,
    /// Connections asked to close for a newcomer that have not closed yet.
    evicting: Arc<AtomicUsize>,
    /// Connections refused over `max`, and over the per-client cap (the server's metrics).
    refused_total: Option<Counter>,
    refused_client: Option<Counter>,
}

impl ConnectionLimits {
    /// The limits `[limits]` sets (0: none), counting refusals in `metrics`.
    pub fn new(limits: &LimitsConfig, metrics: Option<&Metrics>) -> ConnectionLimits {
        ConnectionLimits {
            open: Arc::new(AtomicUsize::new(0)),
            max: (limits.max_connections > 0).then_some(limits.max_connections),
            per_client: (limits.max_connections_per_address > 0)
                .then(|| (limits.max_connections_per_address, Arc::default())),
            cap_private: limits.cap_private_addresses,
            header_timeout: (limits.header_timeout_ms > 0)
                .then(|| Duration::from_millis(limits.header_timeout_ms)),
            write_timeout: (limits.write_timeout_ms > 0)
                .then(|| Duration::from_millis(limits.write_timeout_ms)),
            refusing: Arc::default(),
            evicting: Arc::default(),
            refused_total: metrics.map(|m| m.refused_connections("max_connections")),
            refused_client: metrics.map(|m| m.refused_connections("max_connections_per_address")),
        }
    }

    /// Connections open now.
    pub fn open(&self) -> usize {
        self.open.load(Ordering::Relaxed)
    }
}

/// The client a connection counts against: its address, or for IPv6 its /64 (the block one
/// host or site is usually given whole, so one client cannot pass for thousands).
pub(crate) fn client_of(peer: IpAddr) -> IpAddr {
    match peer {
        IpAddr::V4(v4) => IpAddr::V4(v4),
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => IpAddr::V4(v4),
            None => {
                let prefix = u128::from(v6) & !((1u128 << 64) - 1);
                IpAddr::V6(Ipv6Addr::from(prefix))
            }
        },
    }
}

/// Whether `ip` is reachable from the internet (not loopback, private or link-local).
fn is_public(ip: IpAddr) -> bool {
    let ip = match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
        v4 => v4,
    };
    match ip {
        IpAddr::V4(v4) => !(v4.is_loopback() || v4.is_private() || v4.is_link_local()),
        IpAddr::V6(v6) => {
            // Unique local (fc00::/7) and link-local (fe80::/10) addresses.
            let first = v6.segments()[0];
            !(v6.is_loopback() || (first & 0xfe00) == 0xfc00 || (first & 0xffc0) == 0xfe80)
        }
    }
}

/// Counts one open connection, overall and for its client, until dropped.
struct Open {
    open: Arc<AtomicUsize>,
    client: Option<(IpAddr, ClientCounts)>,
    /// How a newcomer asks this connection to close.
    closer: Arc<Closer>,
    evicting: Arc<AtomicUsize>,
}

impl Drop for Open {
    fn drop(&mut self) {
        self.open.fetch_sub(1, Ordering::Relaxed);
        // Only a counted connection can be asked to close, under the counts' lock: read under
        // it too, or a newcomer asking while this one closed was never subtracted, and each
        // such race took one of the places given up at once for good.
        if let Some((client, counts)) = &self.client {
            let mut counts = counts.lock().unwrap_or_else(|e| e.into_inner());
            if self.closer.asked.load(Ordering::Relaxed) {
                self.evicting.fetch_sub(1, Ordering::Relaxed);
            }
            if let Some(c) = counts.get_mut(client) {
                c.count -= 1;
                c.closers.retain(|k| k.id != self.closer.id);
                if c.count == 0 {
                    counts.remove(client);
                }
            }
        }
    }
}

/// Each connection's number, for its closer.
fn next_connection_id() -> u64 {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    NEXT.fetch_add(1, Ordering::Relaxed)
}

impl ConnectionLimits {
    /// Counts a new connection from `peer`, or, when it is over a cap, counts nothing and
    /// says which: a refused connection must not hold a place while it is told so, or a
    /// client could keep the server full with connections that are being refused.
    fn admit(&self, peer: IpAddr) -> Result<Open, &'static str> {
        let now_open = self.open.fetch_add(1, Ordering::Relaxed) + 1;
        let closer = Arc::new(Closer {
            id: next_connection_id(),
            notify: tokio::sync::Notify::new(),
            asked: std::sync::atomic::AtomicBool::new(false),
        });
        let mut open = Open {
            open: Arc::clone(&self.open),
            client: None,
            closer: Arc::clone(&closer),
            evicting: Arc::clone(&self.evicting),
        };
        let mut mine = 1;
        if let Some((max, counts)) = self
            .per_client
            .as_ref()
            .filter(|_| self.cap_private || is_public(peer))
        {
            let client = client_of(peer);
            let over = {
                let mut counts = counts.lock().unwrap_or_else(|e| e.into_inner());
                let c = counts.entry(client).or_default();
                c.count += 1;
                c.closers.push(closer);
                mine = c.count;
                c.count > *max
            };
            open.client = Some((client, Arc::clone(counts)));
            if over && self.max.is_none_or(|max| now_open <= max) {
                return Err(OVER_CLIENT);
            }
        }
        if let Some(max) = self.max.filter(|&max| now_open > max) {
            let newcomer = open.client.as_ref().map(|(c, _)| *c);
            if !self.make_room(newcomer, mine, max) {
                return Err(OVER_TOTAL);
            }
        }
        Ok(open)
    }

    /// With every place taken, asks one connection of the client holding the most (more than
    /// the newcomer's `mine`, counting its own) to close, so the newcomer can have its place:
    /// a connection waiting for a request closes at once, one serving a request once that
    /// ends. Without it, a few addresses that each kept a quarter of the places open (idle
    /// kept-alive connections pinging `/healthz`, or headers sent slowly and sent again)
    /// kept everyone else out. At most an eighth of the places are being given up at once.
    fn make_room(&self, newcomer: Option<IpAddr>, mine: usize, max: usize) -> bool {
        let Some((_, counts)) = &self.per_client else {
            return false;
        };
        if self.evicting.load(Ordering::Relaxed) >= max.div_ceil(8) {
            return false;
        }
        let counts = counts.lock().unwrap_or_else(|e| e.into_inner());
        let not_asked = |c: &ClientConnections| {
            c.closers
                .iter()
                .filter(|k| !k.asked.load(Ordering::Relaxed))
                .count()
        };
        let Some(top) = counts
            .iter()
            .filter(|(client, _)| Some(**client) != newcomer)
            .map(|(_, c)| c)
            .max_by_key(|c| not_asked(c))
            .filter(|c| not_asked(c) > mine)
        else {
            return false;
        };
        let Some(victim) = top
            .closers
            .iter()
            .find(|k| !k.asked.load(Ordering::Relaxed))
        else {
            return false;
        };
        victim.asked.store(true, Ordering::Relaxed);
        self.evicting.fetch_add(1, Ordering::Relaxed);
        victim.notify.notify_one();
        true
    }
}

impl ConnectionLimits {
    /// Tells a connection over a cap so (a 503), unless too many refusals are under way
    /// already: then it is closed at once.
    fn refuse<I>(&self, io: I, peer: SocketAddr, why: &'static str)
    where
        I: AsyncRead + AsyncWrite + Unpin + Send + 'static,
    {
        let counter = if why == OVER_CLIENT {
            &self.refused_client
        } else {
            &self.refused_total
        };
        if let Some(c) = counter {
            c.inc();
        }
        if first_refusal_this_second() {
            // Every client of a server behind a load balancer or TLS terminator shares the
            // balancer's address: say what to change.
            let hint = if why == OVER_CLIENT {
                "; if this address is a load balancer's or a backend's that all clients come \
                 through, raise [limits] max_connections_per_address or set it to 0"
            } else {
                ""
            };
            tracing::warn!(
                "refusing connections (from {peer}, and any others this second): {why} ({} \
                 open){hint}",
                self.open()
            );
        }
        let refusing = Arc::clone(&self.refusing);
        if refusing.fetch_add(1, Ordering::Relaxed) >= REFUSALS_AT_ONCE {
            refusing.fetch_sub(1, Ordering::Relaxed);
            return;
        }
        tokio::spawn(async move {
            let mut io = io;
            let _ = tokio::time::timeout(REFUSAL_WRITE, async {
                io.write_all(&over_capacity(why)).await?;
                io.shutdown().await
            })
            .await;
            // Read what the client sent until it closes too, for a moment: closing a socket
            // with unread input sends a reset, which can wipe the 503 from the client's buffer
            // before it reads it (RFC 9112, 9.6).
            let _ = tokio::time::timeout(REFUSAL_LINGER, async {
                let mut sink = [0u8; 4096];
                while io.read(&mut sink).await? > 0 {}
                std::io::Result::Ok(())
            })
            .await;
            refusing.fetch_sub(1, Ordering::Relaxed);
        });
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
        let open = match limits.admit(peer.ip()) {
            Ok(open) => open,
            Err(why) => {
                limits.refuse(io, peer, why);
                continue;
            }
        };
        // Handlers read the client's address (`ConnectInfo`), as with axum's `serve`.
        let service =
            router
                .clone()
                .map_request(move |mut request: axum::http::Request<Incoming>| {
                    request.extensions_mut().insert(ConnectInfo(peer));
                    request
                });
        let header_timeout = limits.header_timeout;
        // hyper has no write limit: a client that reads nothing of a response larger than the
        // socket's buffers held its connection (and the task writing to it) for ever, and
        // one reading a little now and then did with a limit on each write alone.
        let io = Box::pin(super::send_rate::MinimumSendRate::new(
            io,
            limits.write_timeout,
        ));
        tokio::spawn(async move {
            let closer = Arc::clone(&open.closer);
            let _open = open;
            let mut builder = hyper::server::conn::http1::Builder::new();
            // hyper starts the header timer when it first reads a request's head: at once on a
            // new connection, and again each time a kept-alive one waits for its next request.
            if let Some(limit) = header_timeout {
                builder.timer(TokioTimer::new()).header_read_timeout(limit);
            }
            let connection = builder
                .serve_connection(TokioIo::new(io), TowerToHyperService::new(service))
                .with_upgrades();
            tokio::pin!(connection);
            let served = tokio::select! {
                served = connection.as_mut() => served,
                () = closer.notify.notified() => {
                    // A newcomer took its place: ends now if idle, or after its request.
                    connection.as_mut().graceful_shutdown();
                    connection.as_mut().await
                }
            };
            if let Err(e) = served {
                tracing::debug!("connection from {peer} ended: {e}");
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits(total: usize, per_address: usize) -> ConnectionLimits {
        ConnectionLimits::new(
            &LimitsConfig {
                max_connections: total,
                max_connections_per_address: per_address,
                ..LimitsConfig::default()
            },
            None,
        )
    }

    #[test]
    fn private_clients_are_held_to_the_per_client_cap_only_when_told() {
        let backend: IpAddr = "10.0.0.5".parse().unwrap();
        let l = limits(10, 1);
        let held: Vec<_> = (0..5).map(|_| l.admit(backend)).collect();
        assert!(held.iter().all(Result::is_ok));
        let l = ConnectionLimits::new(
            &LimitsConfig {
                max_connections: 10,
                max_connections_per_address: 1,
                cap_private_addresses: true,
                ..LimitsConfig::default()
            },
            None,
        );
        let _one = l.admit(backend).unwrap();
        assert_eq!(l.admit(backend).err(), Some(OVER_CLIENT));
    }

    #[test]
    fn an_ipv6_client_is_its_64_and_a_mapped_ipv4_one_its_address() {
        let a: IpAddr = "2001:db8:1:2:aaaa::1".parse().unwrap();
        let b: IpAddr = "2001:db8:1:2:ffff:1:2:3".parse().unwrap();
        let c: IpAddr = "2001:db8:1:3::1".parse().unwrap();
        assert_eq!(client_of(a), client_of(b));
        assert_ne!(client_of(a), client_of(c));
        let mapped: IpAddr = "::ffff:192.0.2.7".parse().unwrap();
        assert_eq!(client_of(mapped), "192.0.2.7".parse::<IpAddr>().unwrap());
        let v4: IpAddr = "192.0.2.8".parse().unwrap();
        assert_eq!(client_of(v4), v4);
    }

    #[test]
    fn loopback_private_and_link_local_addresses_are_not_public() {
        for ip in [
            "127.0.0.1",
            "10.1.2.3",
            "172.16.0.1",
            "192.168.1.1",
            "169.254.1.1",
            "::1",
            "fd00::1",
            "fe80::1",
            "::ffff:10.0.0.1",
        ] {
            assert!(!is_public(ip.parse().unwrap()), "{ip}");
        }
        for ip in ["192.0.2.1", "8.8.8.8", "2001:db8::1", "::ffff:8.8.8.8"] {
            assert!(is_public(ip.parse().unwrap()), "{ip}");
        }
    }

    #[test]
    fn one_client_is_capped_and_others_are_not_and_a_refusal_holds_no_place() {
        let l = limits(10, 2);
        let one: IpAddr = "192.0.2.1".parse().unwrap();
        let other: IpAddr = "192.0.2.2".parse().unwrap();
        let a = l.admit(one).unwrap();
        let b = l.admit(one).unwrap();
        assert_eq!(l.admit(one).err(), Some(OVER_CLIENT));
        assert_eq!(l.admit(one).err(), Some(OVER_CLIENT));
        // The refusals counted nothing: another address gets in, and one place freed by the
        // client is its own again.
        let c = l.admit(other).unwrap();
        assert_eq!(l.open(), 3);
        drop(a);
        let d = l.admit(one).unwrap();
        // Every count goes back to nothing: no address is remembered once its last closes.
        drop((b, c, d));
        assert_eq!(l.open(), 0);
        let counts = l.per_client.as_ref().unwrap().1.lock().unwrap();
        assert!(counts.is_empty(), "{counts:?}");
    }

    /// With every place taken, a newcomer gets the place of one connection of the client
    /// holding the most, asked to close; never one of a client holding as few as the
    /// newcomer would, and never more than an eighth of the places at once.
    #[test]
    fn a_newcomer_takes_a_place_from_the_client_holding_the_most() {
        let l = limits(16, 100);
        let hog: IpAddr = "192.0.2.66".parse().unwrap();
        let one: IpAddr = "192.0.2.1".parse().unwrap();
        let held: Vec<Open> = (0..15).map(|_| l.admit(hog).unwrap()).collect();
        let first = l.admit(one).unwrap();
        assert_eq!(l.open(), 16);
        // The newcomer is let in, and the hog's oldest connection is asked to close.
        let second = l.admit(one).unwrap();
        assert!(held[0].closer.asked.load(Ordering::Relaxed));
        assert!(held[1..]
            .iter()
            .all(|o| !o.closer.asked.load(Ordering::Relaxed)));
        assert_eq!(l.evicting.load(Ordering::Relaxed), 1);
        // The hog itself takes no place from anyone holding fewer.
        assert_eq!(l.admit(hog).err(), Some(OVER_TOTAL));
        assert!(!first.closer.asked.load(Ordering::Relaxed));
        // Two asked at once (16 / 8 = 2); the third newcomer waits for one to close.
        let third = l.admit("192.0.2.3".parse().unwrap()).unwrap();
        assert_eq!(l.evicting.load(Ordering::Relaxed), 2);
        assert_eq!(
            l.admit("192.0.2.4".parse().unwrap()).err(),
            Some(OVER_TOTAL)
        );
        let mut held = held;
        drop(held.remove(0));
        assert_eq!(l.evicting.load(Ordering::Relaxed), 1);
        drop((first, second, third, held));
        assert_eq!(l.open(), 0);
        assert_eq!(l.evicting.load(Ordering::Relaxed), 0);
        let counts = l.per_client.as_ref().unwrap().1.lock().unwrap();
        assert!(counts.is_empty(), "{counts:?}");
    }

    #[test]
    fn the_overall_cap_is_named_when_both_are_over_and_zero_turns_each_cap_off() {
        let l = limits(1, 1);
        let one: IpAddr = "192.0.2.1".parse().unwrap();
        let _a = l.admit(one).unwrap();
        assert_eq!(l.admit(one).err(), Some(OVER_TOTAL));
        assert_eq!(
            l.admit("192.0.2.9".parse().unwrap()).err(),
            Some(OVER_TOTAL)
        );
        assert_eq!(l.open(), 1);
        let l = limits(0, 0);
        let held: Vec<_> = (0..5000).map(|_| l.admit(one)).collect();
        assert!(held.iter().all(Result::is_ok));
        assert!(l.per_client.is_none());
    }
}

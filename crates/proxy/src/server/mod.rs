//! The HTTP server: routes, request metrics, background maintenance.

pub mod api;
pub mod audit;
pub mod auth;
pub mod chat;
pub mod connections;
pub mod error;
pub mod event_loops;
pub mod guardrail;
pub mod keys;
pub mod limits;
pub mod messages;
pub mod models;
pub mod policies;
pub mod responses;
pub mod send_rate;
pub mod summary;

use crate::app::{now_ms, App};
use auth::{Access, Caller, Via};
use axum::extract::{ConnectInfo, DefaultBodyLimit, MatchedPath, Request, State};
use axum::http::{header, HeaderName, HeaderValue, Method, StatusCode};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{any, delete, get, post};
use axum::Router;
use limits::Limits;
use proofgate_core::{Effect, Input};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;
use tower_http::cors::{AllowOrigin, CorsLayer};
use tower_http::services::ServeDir;
use tower_http::set_header::SetResponseHeaderLayer;

async fn count_requests(State(app): State<Arc<App>>, req: Request, next: Next) -> Response {
    let route = req
        .extensions()
        .get::<MatchedPath>()
        .map(|p| p.as_str().to_string())
        .unwrap_or_else(|| "unmatched".into());
    let response = next.run(req).await;
    app.metrics.request(&route, response.status().as_u16());
    response
}

/// What the guard needs: the app (for keys) and the limits with their counters.
#[derive(Clone)]
struct Gate {
    app: Arc<App>,
    limits: Arc<Limits>,
}

/// What a request without a key is counted under: its peer's address, IPv6 by its /64, as the
/// connection caps count it (one host is usually given a whole /64, and each of its addresses
/// had a rate of its own).
fn rate_key(peer: Option<SocketAddr>) -> String {
    peer.map(|p| format!("ip:{}", connections::client_of(p.ip())))
        .unwrap_or_else(|| "anonymous".into())
}

/// Every request passes here first: the route's access rule ([`auth::access`]), the key, its
/// scope, its rate, the requests in flight, the body's type and size, and the deadline. A
/// handler runs only when all of them allow it, with the [`Caller`] as a request extension.
///
/// Work done for a request without a key counts against its client address's quota: reads of
/// the audit log's public material and lookups in the storage that find no key (made-up
/// keys). Public routes other than the health check are also bounded by the deadline and by
/// places in flight of their own (so they cannot take the keyed requests' places).
async fn guard(state: State<Gate>, req: Request, next: Next) -> Response {
    let aws = req.uri().path().starts_with("/guardrail/");
    let anthropic = req.uri().path().starts_with("/v1/messages");
    let response = guard_request(state, req, next).await;
    if aws {
        guardrail::in_aws_shape(response).await
    } else if anthropic {
        messages::in_anthropic_shape(response).await
    } else {
        response
    }
}

async fn guard_request(State(gate): State<Gate>, req: Request, next: Next) -> Response {
    let method = req.method().clone();
    let path = req.uri().path().to_string();
    // A path's ids are stored text: PostgreSQL refuses a NUL in one (a 500, not a 404).
    if path.to_ascii_lowercase().contains("%00") {
        return error::ApiError::bad_request(
            "the path holds a NUL character (%00), which no id here holds",
        )
        .into_response();
    }
    let access = auth::access(&method, &path);
    let address = rate_key(
        req.extensions()
            .get::<ConnectInfo<SocketAddr>>()
            .map(|c| c.0),
    );
    if access == Access::Public {
        if path == "/healthz" {
            // A load balancer sends no one here while the clock is off.
            if clock_off().is_some() {
                return (
                    StatusCode::SERVICE_UNAVAILABLE,
                    axum::Json(serde_json::json!({"status": "clock_off"})),
                )
                    .into_response();
            }
            return next.run(req).await;
        }
        if auth::is_audit_material(&path) {
            if let Err(r) = gate.limits.check_rate(&address) {
                return r.into_response();
            }
        }
        let _in_flight = match gate.limits.admit_public() {
            Ok(p) => p,
            Err(r) => return r.into_response(),
        };
        return within_deadline(&gate, next.run(req)).await;
    }
    // Its stamps would be misread by the other replicas (see `CLOCK_OFF`).
    if let Some(why) = clock_off() {
        let mut e = error::ApiError::new(StatusCode::SERVICE_UNAVAILABLE, "clock_off", why);
        e.retry_after = Some(30);
        return e.into_response();
    }
    let app = &gate.app;
    let caller = match auth::identify(app, req.headers(), &address).await {
        Ok(Some(caller)) => caller,
        Ok(None) if !app.config.auth.required => Caller::anonymous(),
        Ok(None) => {
            let mut r = auth::unauthorized(req.headers()).into_response();
            r.headers_mut().insert(
                header::WWW_AUTHENTICATE,
                HeaderValue::from_static("Bearer realm=\"proofgate\""),
            );
            return r;
        }
        Err(r) => return r,
    };
    match access {
        Access::Needs(scope) if !caller.has(scope) => {
            return auth::forbidden(&caller, &[scope]).into_response();
        }
        Access::NeedsEither(a, b) if !caller.has(a) && !caller.has(b) => {
            return auth::forbidden(&caller, &[a, b]).into_response();
        }
        _ => {}
    }
    // Without keys (auth off), each client address has its own quota.
    let rate_key = match caller.via {
        Via::Anonymous => address,
        _ => caller.id.clone(),
    };
    if let Err(r) = gate.limits.check_rate(&rate_key) {
        return r.into_response();
    }
    if let Err(e) = gate.limits.check_body(&method, req.headers()) {
        return e.into_response();
    }
    // The body is read before a place is taken, within its own time: a client that declares
    // a body and sends it a byte at a time holds its connection (of which there are at most
    // `max_connections`), not one of the places every key shares.
    let mut req = match read_body(req, &gate.limits).await {
        Ok(req) => req,
        Err(e) => return e.into_response(),
    };
    // Held until the response, unless a handler takes it over for work that outlives it.
    let _in_flight = match gate.limits.admit_for(&rate_key) {
        Ok(p) => limits::Place::new(p),
        Err(r) => return r.into_response(),
    };
    req.extensions_mut().insert(_in_flight.clone());
    let _authoring = match gate.limits.admit_authoring(&method, &path) {
        Ok(p) => p,
        Err(r) => return r.into_response(),
    };
    req.extensions_mut().insert(caller);
    within_deadline(&gate, next.run(req)).await
}

/// Whether reading a body failed because it grew past the limit (http-body-util's
/// `LengthLimitError`, somewhere in the error's sources).
fn is_length_limit(e: &axum::Error) -> bool {
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(s) = source {
        if s.to_string().contains("length limit exceeded") {
            return true;
        }
        source = s.source();
    }
    false
}

/// `req` with its body read whole (at most `max_body_bytes`, within `body_timeout`).
async fn read_body(req: Request, limits: &limits::Limits) -> Result<Request, error::ApiError> {
    let (parts, body) = req.into_parts();
    let max = limits.max_body_bytes();
    let limit = limits.body_timeout();
    match tokio::time::timeout(limit, axum::body::to_bytes(body, max)).await {
        Ok(Ok(bytes)) => match escaped_nul(&bytes) {
            Some(at) => Err(error::ApiError::bad_request(format!(
                "the request body holds a NUL character (\\u0000, at byte {at}), which no \
                 text stored here may hold; remove it"
            ))),
            None => Ok(Request::from_parts(parts, axum::body::Body::from(bytes))),
        },
        Ok(Err(e)) if is_length_limit(&e) => Err(limits::too_large(max)),
        Ok(Err(e)) => Err(error::ApiError::bad_request(format!(
            "the request body could not be read: {e}"
        ))),
        Err(_) => Err(limits::body_too_slow(limit)),
    }
}

/// Where a JSON text writes a NUL character (`\u0000` whose backslash is not itself escaped).
/// PostgreSQL refuses NUL in a text column, so a question or end user holding one failed its
/// thread's write after the LLM calls were spent, and sent every key's queued writes down the
/// journal's one-by-one path: refused at the door instead, on every store alike.
fn escaped_nul(body: &[u8]) -> Option<usize> {
    // One pass, an escape at a time (counting the backslashes before each position was
    // quadratic in a body of backslashes).
    let mut i = 0;
    while i < body.len() {
        if body[i] == b'\\' {
            if body[i..].starts_with(b"\\u0000") {
                return Some(i);
            }
            i += 2;
        } else {
            i += 1;
        }
    }
    None
}

/// The handler's response, or 504 at the deadline. Dropping the handler's future stops its
/// work (LLM calls, queued solver jobs), as a client that disconnects does.
async fn within_deadline(
    gate: &Gate,
    handler: impl std::future::Future<Output = Response>,
) -> Response {
    let deadline = gate.limits.deadline();
    match tokio::time::timeout(deadline, handler).await {
        Ok(r) if r.status() == axum::http::StatusCode::PAYLOAD_TOO_LARGE && !is_json(&r) => {
            // A body without a declared length that grew past the limit while being read.
            limits::too_large(gate.limits.max_body_bytes()).into_response()
        }
        Ok(r) => r,
        Err(_) => limits::deadline_exceeded(deadline).into_response(),
    }
}

fn is_json(r: &Response) -> bool {
    r.headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("application/json"))
}

/// Lets any page read the public audit material (the verifier key, the log's checkpoints,
/// leaves and proofs): an auditor's verifier runs on a page of their own, not one the audited
/// server serves (whose script is that server's word), and needs the server's log to see
/// whether a trail is its thread's latest head. No credentials go with such reads, and these
/// routes take none.
async fn public_audit_cors(req: Request, next: Next) -> Response {
    let public = matches!(*req.method(), Method::GET | Method::HEAD)
        && auth::is_audit_material(req.uri().path());
    let mut response = next.run(req).await;
    if public {
        let headers = response.headers_mut();
        headers
            .entry(header::ACCESS_CONTROL_ALLOW_ORIGIN)
            .or_insert(HeaderValue::from_static("*"));
        // A rate-limited read says when to come back.
        headers
            .entry(header::ACCESS_CONTROL_EXPOSE_HEADERS)
            .or_insert(HeaderValue::from_static("retry-after"));
    }
    response
}

/// CORS for the configured origins; none configured: no CORS headers at all (same origin only).
fn cors(origins: &[String]) -> Option<CorsLayer> {
    let list: Vec<HeaderValue> = origins
        .iter()
        .filter_map(|o| HeaderValue::from_str(o.trim_end_matches('/')).ok())
        .collect();
    if list.is_empty() {
        return None;
    }
    let names = |names: &[&'static str]| -> Vec<HeaderName> {
        names.iter().map(|n| HeaderName::from_static(n)).collect()
    };
    Some(
        CorsLayer::new()
            .allow_origin(AllowOrigin::list(list))
            .allow_methods([Method::GET, Method::POST, Method::DELETE])
            .allow_headers(names(&[
                "authorization",
                "x-api-key",
                "content-type",
                chat::THREAD_HEADER,
                auth::USER_HEADER,
            ]))
            .expose_headers(names(&[
                "x-proofgate-verdict",
                chat::THREAD_HEADER,
                "x-proofgate-overhead-ms",
                "retry-after",
            ]))
            .max_age(Duration::from_secs(600)),
    )
}

/// The web UI's Content-Security-Policy (sent with every response).
pub const CONTENT_SECURITY_POLICY: &str = "default-src 'self'; \
     script-src 'self' 'wasm-unsafe-eval'; worker-src 'self' blob:; style-src 'self'; \
     img-src 'self' data: blob:; connect-src 'self' http: https: data: blob:; \
     object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'";

/// Every route.
pub fn router(app: Arc<App>) -> Router {
    let gate = Gate {
        app: app.clone(),
        limits: app.limits.clone(),
    };
    let cors = cors(&app.config.server.cors_origins);
    let router = Router::new()
        .route("/v1/chat/completions", post(chat::chat_completions))
        .route("/v1/responses", post(responses::responses))
        .route("/v1/messages", post(messages::messages))
        .route("/v1/models", get(models::list))
        .route("/v1/models/{*id}", get(models::retrieve))
        .route("/v1/{*rest}", any(api::unknown_api_route))
        .route(
            "/guardrail/{id}/version/{version}/apply",
            post(guardrail::apply_guardrail),
        )
        .route(
            "/api/threads",
            post(api::create_thread).get(api::list_threads),
        )
        .route("/api/threads/{id}", get(api::get_thread))
        .route("/api/threads/{id}/answers", post(api::answer_thread))
        .route("/api/threads/{id}/audit", get(api::audit_trail))
        .route("/api/threads/{id}/audit/bundle", get(audit::bundle))
        .route("/.well-known/proofgate/audit-key", get(audit::audit_key))
        .route("/api/log/checkpoint", get(audit::checkpoint))
        .route("/api/log/consistency", get(audit::consistency))
        .route("/api/log/leaves", get(audit::leaves))
        .route("/api/policies", get(api::policies))
        .route("/api/policies/lint", post(policies::lint))
        .route("/api/policies/test", post(policies::test))
        .route("/api/policies/gen-tests", post(policies::gen_tests))
        .route("/api/policies/diff", post(policies::diff))
        .route("/api/policies/formalize", post(policies::formalize))
        .route("/api/config", get(api::config))
        .route("/api/me", get(keys::me))
        .route("/api/keys", post(keys::create).get(keys::list))
        .route("/api/keys/{id}", delete(keys::revoke))
        .route("/healthz", get(api::healthz))
        .route("/metrics", get(api::metrics))
        .route_layer(middleware::from_fn_with_state(app.clone(), count_requests))
        .fallback_service(tower::Layer::layer(
            &middleware::from_fn_with_state(
                Arc::new(app.config.server.web_dir.clone()),
                web_files_only,
            ),
            ServeDir::new(&app.config.server.web_dir),
        ))
        .layer(DefaultBodyLimit::max(app.config.limits.max_body_bytes))
        .layer(middleware::from_fn_with_state(gate, guard))
        // z3-solver (the in-page proof checker) needs SharedArrayBuffer, which browsers only
        // give cross-origin-isolated pages.
        .layer(SetResponseHeaderLayer::overriding(
            HeaderName::from_static("cross-origin-opener-policy"),
            HeaderValue::from_static("same-origin"),
        ))
        .layer(SetResponseHeaderLayer::overriding(
            HeaderName::from_static("cross-origin-embedder-policy"),
            HeaderValue::from_static("require-corp"),
        ))
        // The page shows LLM output and trails and holds an API key: no script but its own
        // files (WebAssembly compiled, not evaluated), no plugins, no framing, no MIME
        // sniffing. Fetches may go elsewhere (the verifier loads a bundle from a URL).
        .layer(SetResponseHeaderLayer::overriding(
            header::CONTENT_SECURITY_POLICY,
            HeaderValue::from_static(CONTENT_SECURITY_POLICY),
        ))
        .layer(SetResponseHeaderLayer::overriding(
            header::X_CONTENT_TYPE_OPTIONS,
            HeaderValue::from_static("nosniff"),
        ))
        .with_state(app);
    let router = match cors {
        Some(cors) => router.layer(cors),
        None => router,
    };
    router.layer(middleware::from_fn(public_audit_cors))
}

/// Delivers question timeouts (a `Tick` to threads whose questions are overdue) and deletes
/// threads older than the configured time to live.
pub async fn maintain(app: Arc<App>, every: Duration) {
    loop {
        tokio::time::sleep(every).await;
        if let Err(e) = apply_retention(&app).await {
            tracing::warn!("audit retention: {e}");
        }
        // These read other replicas' `updated_at` stamps against this one's clock: a clock
        // ahead would time questions out and expire conversations early, and take over
        // threads another replica is still driving (two would drive one, each signing its own
        // steps into the trail).
        if clock_agrees(&app).await {
            if let Err(e) = tick_overdue(&app).await {
                tracing::warn!("question timeouts: {e}");
            }
            // Conversation expiry (0: never) ends the live conversation; trails stay. After
            // the question timeouts, so that a thread whose questions are overdue goes on
            // rather than expire.
            let ttl_ms = app.config.storage.thread_ttl_secs.saturating_mul(1000);
            if ttl_ms > 0 {
                let cutoff = i64::try_from(now_ms().saturating_sub(ttl_ms)).unwrap_or(0);
                if let Err(e) = expire_waiting(&app, cutoff).await {
                    tracing::warn!("ending expired conversations' waiting threads: {e}");
                }
                match app.store.expire(cutoff).await {
                    Ok(0) => {}
                    Ok(n) => {
                        tracing::info!("ended {n} stale conversation(s); their trails are kept")
                    }
                    Err(e) => tracing::warn!("expiring conversations: {e}"),
                }
            }
            if let Err(e) = resume_orphans(&app).await {
                tracing::warn!("resuming threads: {e}");
            }
        }
    }
}

/// Ends each thread waiting for answers whose conversation expired (last saved before
/// `cutoff`) with its final record, as a failed check ends (no LLM or solver call): before, it
/// was marked `expired` in the store alone, and its trail, stopped at the question for good,
/// was one no audit could tell from a trail cut back to an earlier head. One that cannot be
/// ended (its stored trail altered, say) is logged and skipped. Each is a load and a durable
/// commit: a pass ends them for at most [`RETENTION_BUDGET`], and the next goes on.
async fn expire_waiting(app: &Arc<App>, cutoff: i64) -> Result<(), Box<dyn std::error::Error>> {
    let started = std::time::Instant::now();
    let mut after = None;
    while started.elapsed() < RETENTION_BUDGET {
        let page = app
            .store
            .threads_with_status(crate::storage::Unfinished::AwaitingInput, cutoff, after)
            .await?;
        let Some(last) = page.last() else {
            return Ok(());
        };
        after = Some((last.updated_at, last.id.clone()));
        for stored in &page {
            if app.live.contains(&stored.id) {
                continue;
            }
            // One that failed is not tried (nor logged) again for ten minutes: an altered
            // trail would otherwise be read and logged every pass.
            static FAILED: std::sync::LazyLock<
                std::sync::Mutex<std::collections::HashMap<String, std::time::Instant>>,
            > = std::sync::LazyLock::new(Default::default);
            const FAILED_FOR: Duration = Duration::from_secs(600);
            if FAILED
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .get(&stored.id)
                .is_some_and(|at| at.elapsed() < FAILED_FOR)
            {
                continue;
            }
            if let Err(e) = expire_one(app, stored).await {
                tracing::error!("thread {}: its expiry failed: {e}", stored.id);
                let mut failed = FAILED.lock().unwrap_or_else(|e| e.into_inner());
                if failed.len() >= 10_000 {
                    failed.retain(|_, at| at.elapsed() < FAILED_FOR);
                }
                failed.insert(stored.id.clone(), std::time::Instant::now());
            }
        }
    }
    Ok(())
}

/// Ends one expired waiting thread. It is loaded (and its trail checked) before it is claimed:
/// one that cannot be loaded keeps its stamp, so the conversation's key is still dropped.
async fn expire_one(
    app: &Arc<App>,
    stored: &crate::storage::StoredThread,
) -> Result<(), Box<dyn std::error::Error>> {
    let (mut thread, saved) = crate::app::load_thread(app, stored).await?;
    let now = now_ms();
    // Taken as an answer takes it (status and stamp at once): an answer that read the row
    // after a stamp alone still found it waiting, and both drove it (a review's case).
    if !app
        .store
        .claim_waiting(&stored.id, stored.updated_at, i64::try_from(now)?)
        .await?
    {
        return Ok(());
    }
    let effect = thread.handle(Input::Failed {
        reason: format!(
            "its conversation expired (storage.thread_ttl_secs = {}) while its questions waited \
             for answers",
            app.config.storage.thread_ttl_secs
        ),
        now,
    })?;
    if !matches!(effect, Effect::Finish(_)) {
        return Err(format!("expired, it went on to {}", effect_name(&effect)).into());
    }
    crate::app::persist(app, &thread, saved, None).await?;
    tracing::info!(
        "thread {}: its conversation expired while it waited",
        stored.id
    );
    Ok(())
}

/// Why this server's clock is off from the database's (PostgreSQL), while it is: it then
/// serves nothing but the health check (503) and the public audit material, and its
/// maintenance waits, until the clocks agree. Replicas stamp saves with their own clocks and
/// read each other's stamps: one behind had the threads it was driving taken over by the
/// others (two drivers signing into one trail); one ahead took theirs, and timed their
/// questions out early. A correction applied to its times was tried, and a review found the
/// never-go-back clamp that correction needs froze a replica's time for twice the skew.
static CLOCK_OFF: std::sync::Mutex<Option<String>> = std::sync::Mutex::new(None);

/// Whether [`CLOCK_OFF`] holds a reason: read by every request, without the lock.
static CLOCK_IS_OFF: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Why this server refuses work for its clock, if it does.
pub fn clock_off() -> Option<String> {
    if !CLOCK_IS_OFF.load(std::sync::atomic::Ordering::Acquire) {
        return None;
    }
    CLOCK_OFF.lock().unwrap_or_else(|e| e.into_inner()).clone()
}

/// Reads the database's clock and compares this server's with it (PostgreSQL; SQLite's clock
/// is this machine's, as is every replica's on that file): `Ok(None)` when they agree,
/// `Ok(Some(why))` when they do not, `Err` when the clock could not be read.
async fn clock_reading(app: &App) -> Result<Option<String>, String> {
    if app.store.sqlite {
        return Ok(None);
    }
    let before = now_ms();
    let db = app.store.clock_ms().await.map_err(|e| e.to_string())?;
    let after = now_ms();
    Ok(clock_problem(
        before,
        db,
        after,
        app.config.server.resume_after_ms,
    ))
}

/// At start, before serving: a server whose clock is off from the database's does not start.
pub async fn check_clock_at_start(app: &App) -> Result<(), String> {
    match clock_reading(app).await {
        Ok(None) => Ok(()),
        Ok(Some(why)) => Err(why),
        Err(e) => Err(format!("the database's clock could not be read: {e}")),
    }
}

/// Whether the maintenance may judge by other replicas' `updated_at` stamps which threads are
/// overdue or orphaned: the clocks agree. A disagreement found here also stops this server's
/// serving until they agree again ([`clock_off`]); a failed reading only holds the pass back.
/// Each is logged when it starts and once a minute while it lasts.
async fn clock_agrees(app: &App) -> bool {
    static LOGGED: std::sync::Mutex<Option<std::time::Instant>> = std::sync::Mutex::new(None);
    let reading = clock_reading(app).await;
    let mut off = CLOCK_OFF.lock().unwrap_or_else(|e| e.into_inner());
    let problem = match reading {
        Ok(None) => {
            if off.take().is_some() {
                CLOCK_IS_OFF.store(false, std::sync::atomic::Ordering::Release);
                tracing::warn!("this server's clock agrees with the database's again: serving");
            }
            return true;
        }
        Ok(Some(why)) => {
            *off = Some(why.clone());
            CLOCK_IS_OFF.store(true, std::sync::atomic::Ordering::Release);
            format!("this server serves nothing but the health check until then: {why}")
        }
        Err(e) => format!("the database's clock could not be read: {e}"),
    };
    drop(off);
    let mut logged = LOGGED.lock().unwrap_or_else(|e| e.into_inner());
    if logged.is_none_or(|at| at.elapsed() >= Duration::from_secs(60)) {
        *logged = Some(std::time::Instant::now());
        tracing::error!(
            "question timeouts, conversation expiry and resumes of interrupted threads are held \
             back: {problem}"
        );
    }
    false
}

/// What is wrong when this server's clock, read at `before` and `after`, is further from the
/// database's (`db`, read between) than a quarter of `resume_after_ms` (at least a second),
/// beyond what the round trip leaves unknown. Two replicas each within that are within half
/// of `resume_after_ms` of each other, so neither takes a thread saved by the other within
/// the last half of it for orphaned.
fn clock_problem(before: u64, db: i64, after: u64, resume_after_ms: u64) -> Option<String> {
    let allowed = i128::from((resume_after_ms / 4).max(1000));
    let (before, after) = (i128::from(before), i128::from(after));
    let unknown = (after - before).max(0) / 2 + 1;
    let skew = i128::from(db) - (before + after) / 2;
    (skew.abs() - unknown > allowed).then(|| {
        format!(
            "this server's clock is {} ms {} the database's, more than the {allowed} ms allowed \
             (a quarter of server.resume_after_ms): other replicas' threads would look \
             orphaned or overdue to it, or its own to them; synchronise the clocks (NTP)",
            skew.abs(),
            if skew > 0 { "behind" } else { "ahead of" }
        )
    })
}

/// Threads a retention pass lists at a time.
const RETENTION_PAGE: i64 = 64;

/// How long one pass deletes before the pass's other work (question timeouts, resumes) has its
/// turn; the next pass goes on with what is left. A first pass over a large store deleted
/// every old thread, each a read, a check and a durable commit, while no question timed out.
const RETENTION_BUDGET: Duration = Duration::from_secs(2);

/// Deletes the trails past `[audit] retention_days` (none when unset), logging each deletion:
/// the oldest first, for at most [`RETENTION_BUDGET`] a pass. A thread that cannot be deleted
/// is logged and skipped, so that it does not hold up the others.
async fn apply_retention(app: &App) -> Result<(), Box<dyn std::error::Error>> {
    let Some(days) = app.config.audit.retention_days else {
        return Ok(());
    };
    let keep_ms = days.saturating_mul(86_400_000);
    let cutoff = i64::try_from(now_ms().saturating_sub(keep_ms)).unwrap_or(0);
    let started = std::time::Instant::now();
    let mut after: Option<(i64, String)> = None;
    loop {
        let page = app
            .store
            .trails_past_retention(cutoff, after.as_ref(), RETENTION_PAGE)
            .await?;
        let Some(last) = page.last().cloned() else {
            return Ok(());
        };
        for (_, thread_id) in page {
            if started.elapsed() >= RETENTION_BUDGET {
                return Ok(());
            }
            delete_past_retention(app, &thread_id, cutoff).await;
        }
        after = Some(last);
    }
}

/// Deletes thread `thread_id`'s trail if it is past retention, logging why not otherwise.
async fn delete_past_retention(app: &App, thread_id: &str, cutoff: i64) {
    let thread_id = thread_id.to_string();
    // The columns that listed it are unsigned: the trail's own last record decides, once
    // the trail passes the checks a view makes (whoever holds the database could
    // otherwise have any trail deleted, its deletion logged as ordinary retention).
    // A thread refused is not read again (nor logged again) for ten minutes: an altered
    // trail would otherwise be read every pass, and a storage error is tried again later.
    static REFUSED: std::sync::LazyLock<
        std::sync::Mutex<std::collections::HashMap<String, std::time::Instant>>,
    > = std::sync::LazyLock::new(Default::default);
    const REFUSED_FOR: Duration = Duration::from_secs(600);
    let refuse = |why: String| {
        let mut refused = REFUSED.lock().unwrap_or_else(|e| e.into_inner());
        if refused.len() >= 10_000 {
            refused.retain(|_, at| at.elapsed() < REFUSED_FOR);
        }
        refused.insert(thread_id.clone(), std::time::Instant::now());
        tracing::error!("retention: thread {thread_id} is not deleted: {why}");
    };
    if REFUSED
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .get(&thread_id)
        .is_some_and(|at| at.elapsed() < REFUSED_FOR)
    {
        return;
    }
    match crate::app::signed_last_activity(app, &thread_id).await {
        // Listed as ended by its unsigned status, it still waits (or runs): a thread that
        // waited past retention (conversations that never expire) was deleted so, and the
        // deletion logged as ordinary retention (a review's case).
        Ok(Some((_, false))) => {
            refuse(
                "it is listed as ended, but its trail does not end in a final record: the \
                 store was altered"
                    .into(),
            );
            return;
        }
        Ok(Some((at, _))) if i64::try_from(at).unwrap_or(i64::MAX) >= cutoff => {
            refuse(format!(
                "it is listed as past retention, but its trail's last record is from {at} \
                 (ms since the epoch): the store was altered"
            ));
            return;
        }
        Ok(_) => {}
        Err(e) => {
            refuse(e);
            return;
        }
    }
    match app.log.delete_trail(&app.store, &thread_id, cutoff).await {
        Ok(Some(leaf)) => {
            tracing::info!("retention: deleted the trail of thread {thread_id} (log leaf {leaf})")
        }
        Ok(None) => tracing::debug!(
            "retention: thread {thread_id} had no trail, or was continued since it was listed"
        ),
        // Skipped for a while, as a thread refused: one failing deletion stopped the pass
        // at it, every pass.
        Err(e) => refuse(format!("deleting it failed: {e}")),
    }
}

/// Resumes background threads whose server stopped mid-step: the step that was in flight has
/// no recorded result, so it is simply performed again from the last saved state.
async fn resume_orphans(app: &Arc<App>) -> Result<(), Box<dyn std::error::Error>> {
    let now = i64::try_from(now_ms()).unwrap_or(i64::MAX);
    let stale = i64::try_from(app.config.server.resume_after_ms).unwrap_or(i64::MAX);
    // One page a pass (the next pass takes the next threads: each resumed one is claimed).
    for stored in app
        .store
        .threads_with_status(
            crate::storage::Unfinished::Processing,
            now.saturating_sub(stale),
            None,
        )
        .await?
    {
        if app.live.contains(&stored.id) {
            continue;
        }
        // One thread that cannot be resumed (its stored trail altered, say) is logged and
        // skipped: it must not hold up the others.
        if let Err(e) = resume_orphan(app, &stored, now).await {
            tracing::error!("thread {}: not resumed: {e}", stored.id);
        }
    }
    Ok(())
}

async fn resume_orphan(
    app: &Arc<App>,
    stored: &crate::storage::StoredThread,
    now: i64,
) -> Result<(), Box<dyn std::error::Error>> {
    // A resumed thread is a request in flight like any other, held to the same deadline and
    // counted among its owner's places; when none may start now, it waits for the next pass.
    let Some(scope) = background_scope(app, &stored.id).await else {
        return Ok(());
    };
    let Ok(permit) = app.limits.admit_for(&scope) else {
        return Ok(());
    };
    if !app.store.claim(&stored.id, stored.updated_at, now).await? {
        return Ok(());
    }
    let (mut thread, saved) = crate::app::load_thread(app, stored).await?;
    let effect = match owner_stopped(app, &scope).await? {
        Some(why) => thread.handle(Input::Failed {
            reason: format!("not resumed after an interrupted step: {why}"),
            now: now_ms(),
        })?,
        None => thread.pending_effect(),
    };
    tracing::info!("thread {}: resuming after an interrupted step", stored.id);
    // A thread claimed to be answered whose answer was never stored still waits for it: it
    // keeps the key its conversation finds it by (dropped, the user's next message started a
    // new thread beside it, a review found).
    let key = matches!(effect, Effect::AskUser { .. })
        .then(|| stored.conversation_key.clone())
        .flatten();
    crate::app::drive_in_background(app.clone(), scope, thread, effect, saved, permit, key);
    Ok(())
}

/// The key a thread driven with no request (resumed, or its questions timed out) is counted
/// and cached under: its owner's key, as for the owner's own requests, so that one key's
/// threads continued in the background cannot take the places kept for other keys (they took
/// any free place: a key leaving many questions unanswered had them all continued at once
/// when they timed out, and every other key got a 503). A thread from before owners were
/// recorded is its own scope and shares nothing. `None` while its owner cannot be read: it
/// waits for the next pass rather than run counted under no key. With keys off, every
/// thread's owner is `anonymous`, so background threads share that one count (requests are
/// counted by client address).
async fn background_scope(app: &App, thread_id: &str) -> Option<String> {
    match app.store.owner_of(thread_id).await {
        Ok(Some(owner)) => Some(owner.key),
        Ok(None) => Some(format!("thread:{thread_id}")),
        Err(e) => {
            tracing::warn!(
                "thread {thread_id}: its owner could not be read, left for the next pass: {e}"
            );
            None
        }
    }
}

use crate::app::owner_stopped;

/// Continues the threads whose questions' deadline has passed, each on a task of its own held
/// to a request's place and time, as a resumed thread is. A thread that fails is logged and
/// skipped, so one bad thread does not stop every other thread's timeout. Threads are read a
/// page at a time, and no more are started than there are free places: the rest wait for the
/// next pass. (Each was read at once and driven in turn without a deadline: a backlog of
/// waiting threads, each holding a client's request, filled the memory and held up every
/// other maintenance task for as long as their LLM calls took.)
async fn tick_overdue(app: &Arc<App>) -> Result<(), Box<dyn std::error::Error>> {
    let now = now_ms();
    // A thread's questions were asked at or before its last update, with the question timeout
    // of its day; read only those waiting at least today's timeout (one raised since is felt
    // by the threads that asked before, later than their own deadline, never earlier).
    let timeout = app
        .config
        .rewrite_loop
        .question_timeout_secs
        .saturating_mul(1000);
    let asked_before = i64::try_from(now.saturating_sub(timeout)).unwrap_or(0);
    // A pass works for at most TICK_BUDGET and the next goes on from where it stopped, so that
    // one owner's thousands of waiting threads cannot hold the maintenance (resumes, expiry)
    // behind them; a thread whose tick failed (a damaged trail) is not read again for a while,
    // where it was read, checked and logged every pass (a review's case).
    static NEXT: std::sync::Mutex<Option<(i64, String)>> = std::sync::Mutex::new(None);
    static FAILED: std::sync::LazyLock<
        std::sync::Mutex<std::collections::HashMap<String, std::time::Instant>>,
    > = std::sync::LazyLock::new(Default::default);
    const FAILED_FOR: Duration = Duration::from_secs(600);
    let started = std::time::Instant::now();
    let mut after = NEXT.lock().unwrap_or_else(|e| e.into_inner()).take();
    // Owners whose places left are kept from them this pass: their other threads are skipped
    // without being loaded (each load reads and checks a whole trail).
    let mut refused = std::collections::HashSet::new();
    loop {
        let page = app
            .store
            .threads_with_status(
                crate::storage::Unfinished::AwaitingInput,
                asked_before,
                after.clone(),
            )
            .await?;
        for stored in &page {
            if started.elapsed() >= TICK_BUDGET {
                *NEXT.lock().unwrap_or_else(|e| e.into_inner()) = after;
                return Ok(());
            }
            after = Some((stored.updated_at, stored.id.clone()));
            let failed_lately = FAILED
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .get(&stored.id)
                .is_some_and(|at| at.elapsed() < FAILED_FOR);
            if failed_lately {
                continue;
            }
            match tick_if_overdue(app, stored, now, &mut refused).await {
                Ok(Ticked::NoPlace) => return Ok(()),
                Ok(_) => {}
                Err(e) => {
                    tracing::error!("thread {}: its questions' timeout failed: {e}", stored.id);
                    let mut failed = FAILED.lock().unwrap_or_else(|e| e.into_inner());
                    if failed.len() >= 10_000 {
                        failed.retain(|_, at| at.elapsed() < FAILED_FOR);
                    }
                    failed.insert(stored.id.clone(), std::time::Instant::now());
                }
            }
        }
        if page.len() < crate::storage::MAINTENANCE_PAGE {
            // The end: the next pass starts from the first.
            return Ok(());
        }
    }
}

/// The longest one pass of the questions' timeouts works (see [`tick_overdue`]).
const TICK_BUDGET: Duration = Duration::from_secs(2);

/// What became of a thread whose questions may be overdue.
enum Ticked {
    /// Not overdue, or another task or replica took it.
    Left,
    /// Continued on a task of its own.
    Started,
    /// No place among the requests in flight: the next pass tries again.
    NoPlace,
}

async fn tick_if_overdue(
    app: &Arc<App>,
    stored: &crate::storage::StoredThread,
    now: u64,
    refused: &mut std::collections::HashSet<String>,
) -> Result<Ticked, Box<dyn std::error::Error>> {
    let Some(scope) = background_scope(app, &stored.id).await else {
        return Ok(Ticked::Left);
    };
    if refused.contains(&scope) {
        return Ok(Ticked::Left);
    }
    // A place first, then the load: a thread with none is not loaded for nothing.
    let permit = match app.limits.admit_for(&scope) {
        Ok(permit) => permit,
        // The places left are kept from this thread's owner: other keys' threads may go on.
        Err(r) if r.error.status == StatusCode::TOO_MANY_REQUESTS => {
            refused.insert(scope);
            return Ok(Ticked::Left);
        }
        Err(_) => return Ok(Ticked::NoPlace),
    };
    // Threads asked long enough ago are nearly all overdue: loaded (with the log check) once,
    // as to be extended.
    let (mut thread, saved) = crate::app::load_thread(app, stored).await?;
    let overdue = matches!(
        thread.pending_effect(),
        Effect::AskUser { deadline: Some(d), .. } if d <= now
    );
    if !overdue {
        return Ok(Ticked::Left);
    }
    // One replica, or one pass, continues it; an answer arriving now finds it taken.
    let now_at = i64::try_from(now).unwrap_or(i64::MAX);
    if !app
        .store
        .claim_waiting(&stored.id, stored.updated_at, now_at)
        .await?
    {
        return Ok(Ticked::Left);
    }
    let effect = match owner_stopped(app, &scope).await? {
        Some(why) => thread.handle(Input::Failed {
            reason: format!("not continued after its questions timed out: {why}"),
            now,
        })?,
        None => thread.handle(Input::Tick { now })?,
    };
    tracing::info!(
        "thread {}: questions timed out, continuing to {}",
        stored.id,
        effect_name(&effect)
    );
    crate::app::drive_in_background(
        app.clone(),
        scope,
        thread,
        effect,
        saved,
        permit,
        stored.conversation_key.clone(),
    );
    Ok(Ticked::Started)
}

fn effect_name(e: &Effect) -> &'static str {
    e.name()
}

/// The kinds of file the web page is made of. Anything else under `server.web_dir` is not
/// served: a `web_dir` set to a directory holding the signing key, the database or the
/// configuration served them to anyone (the path is public), and `check` refuses only the
/// files it knows of.
const WEB_FILE_KINDS: [&str; 17] = [
    "html", "htm", "js", "mjs", "css", "wasm", "map", "svg", "png", "jpg", "jpeg", "gif", "ico",
    "webp", "woff", "woff2", "txt",
];

/// Lets through only a page file (or a directory's index) of `web_dir` whose path has no
/// hidden part.
async fn web_files_only(
    State(web_dir): State<Arc<std::path::PathBuf>>,
    req: Request,
    next: Next,
) -> Response {
    if is_web_file(&web_dir, req.uri().path()) {
        next.run(req).await
    } else {
        StatusCode::NOT_FOUND.into_response()
    }
}

/// Whether `path` names a file of the page under `web_dir`: no segment starting with a dot
/// (`.env`, `.git`, `..`), no empty segment but a last one, no backslash, and either a
/// directory that is one (its index) or a file of one of [`WEB_FILE_KINDS`].
fn is_web_file(web_dir: &std::path::Path, path: &str) -> bool {
    // Percent-escapes are read as ServeDir reads them, so `%2e` is a dot here too.
    let decoded = percent_encoding::percent_decode_str(path).decode_utf8_lossy();
    if decoded.contains(['\\', '\0']) {
        return false;
    }
    let segments: Vec<&str> = decoded.trim_start_matches('/').split('/').collect();
    let Some((last, dirs)) = segments.split_last() else {
        return false;
    };
    if dirs.iter().any(|s| s.is_empty() || s.starts_with('.')) || last.starts_with('.') {
        return false;
    }
    if last.is_empty() {
        // A directory's index, only when it is one: ServeDir drops a trailing slash and
        // served `/proofgate.toml/` as the file.
        return web_dir.join(dirs.join("/")).is_dir();
    }
    last.rsplit_once('.')
        .is_some_and(|(_, ext)| WEB_FILE_KINDS.iter().any(|k| k.eq_ignore_ascii_case(ext)))
}

/// Starts the background maintenance and says what an operator should know about access.
fn start_background(app: &Arc<App>) {
    for weakened in app.config.weakened() {
        tracing::warn!("{weakened}");
    }
    let every = Duration::from_millis(app.config.server.maintenance_interval_ms.max(10));
    tokio::spawn(maintain(app.clone(), every));
    let c = &app.config;
    if !app.store.sqlite && c.server.resume_after_ms <= c.limits.request_timeout_ms {
        // Replicas cannot see which threads another is driving: one still driven (for up to a
        // request's time) looks orphaned to them past `resume_after_ms`, and two drive it.
        tracing::warn!(
            "server.resume_after_ms ({} ms) is not above limits.request_timeout_ms ({} ms): with \
             several replicas on this database, one may resume a thread another is still driving",
            c.server.resume_after_ms,
            c.limits.request_timeout_ms
        );
    }
    let auth = &app.config.auth;
    if auth.required && auth.admin_key.is_none() && auth.admin_key_sha256.is_none() {
        tracing::info!(
            "API keys are required and no admin key is configured: create keys with `proofgate keys create --config FILE`"
        );
    }
    if !app.config.auth.required {
        tracing::warn!(
            "auth.required = false: every route is open to anyone who can reach {}; use this for local development only",
            app.config.server.listen
        );
    }
}

/// Serves on the current runtime until the process is stopped.
pub async fn serve(app: Arc<App>, listener: tokio::net::TcpListener) -> std::io::Result<()> {
    start_background(&app);
    let limits = connections::ConnectionLimits::new(&app.config.limits, Some(&app.metrics));
    connections::serve_on(listener, router(app), limits).await
}

/// `proofgate serve`: loads the configuration, starts everything and serves (blocking).
pub fn run(
    config_file: Option<&std::path::Path>,
    listen: Option<String>,
) -> Result<(), crate::app::StartError> {
    use crate::app::StartError;
    let _ = tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .with_writer(std::io::stderr)
        .try_init();
    let mut config =
        crate::config::Config::load(config_file).map_err(|e| StartError::Other(e.to_string()))?;
    if let Some(l) = listen {
        config.server.listen = l;
    }
    use crate::config::RuntimeKind;
    let threads = config.server.serving_threads();
    let kind = config.server.runtime;
    if kind == RuntimeKind::PerCore {
        // Before the app makes its HTTP clients: one per loop.
        crate::per_loop::set_loops(threads);
    }
    let runtime = match kind {
        // Loop 0 is this thread; `event_loops::serve` starts the others.
        RuntimeKind::PerCore => event_loops::loop_runtime(),
        RuntimeKind::WorkStealing => {
            let mut builder = tokio::runtime::Builder::new_multi_thread();
            // Unset, Tokio's own TOKIO_WORKER_THREADS or one per core.
            if config.server.threads > 0 {
                builder.worker_threads(config.server.threads);
            }
            builder.enable_all().build()
        }
    }
    .map_err(|e| StartError::Other(format!("starting the runtime: {e}")))?;
    runtime.block_on(async move {
        let addr = config.server.listen.clone();
        let listener = tokio::net::TcpListener::bind(&addr)
            .await
            .map_err(|e| StartError::Other(format!("cannot listen on {addr}: {e}")))?;
        let local = listener
            .local_addr()
            .map_err(|e| StartError::Other(e.to_string()))?;
        let app = Arc::new(App::start(config).await?);
        check_clock_at_start(&app)
            .await
            .map_err(|why| StartError::Other(format!("not serving: {why}")))?;
        // Tests and scripts wait for this line (the port may have been chosen by the OS).
        println!("proofgate listening on http://{local}");
        let served = match kind {
            RuntimeKind::PerCore => {
                tracing::info!("serving on {threads} event loops");
                start_background(&app);
                event_loops::serve(app, listener, threads).await
            }
            RuntimeKind::WorkStealing => serve(app, listener).await,
        };
        served.map_err(|e| StartError::Other(format!("server: {e}")))
    })
}

#[cfg(test)]
mod clock_tests {
    use super::clock_problem;

    #[test]
    fn a_clock_further_from_the_databases_than_a_quarter_of_the_resume_time_is_off() {
        let resume = 30_000;
        // Within 7.5 s either way, or within what a slow round trip leaves unknown: fine.
        assert_eq!(clock_problem(100_000, 100_005, 100_010, resume), None);
        assert_eq!(clock_problem(100_000, 107_000, 100_000, resume), None);
        assert_eq!(clock_problem(100_000, 93_000, 100_000, resume), None);
        assert_eq!(clock_problem(100_000, 112_000, 110_000, resume), None);
        // Beyond it: this clock is behind, or ahead (20 minutes as well as 8 seconds).
        let behind = clock_problem(100_000, 108_000, 100_000, resume).unwrap();
        assert!(behind.contains("8000 ms behind"), "{behind}");
        let ahead = clock_problem(100_000, 60_000, 100_010, resume).unwrap();
        assert!(ahead.contains("ahead of"), "{ahead}");
        assert!(clock_problem(100_000, 1_300_000, 100_000, resume).is_some());
        // A short resume time still allows a second.
        assert_eq!(clock_problem(100_000, 100_900, 100_000, 100), None);
        assert!(clock_problem(100_000, 101_200, 100_000, 100).is_some());
    }
}

#[cfg(test)]
mod nul_tests {
    use super::escaped_nul;

    /// A JSON escape of NUL is found wherever it is; an escaped backslash followed by
    /// "u0000" is text, not NUL.
    #[test]
    fn an_escaped_nul_is_found_and_an_escaped_backslash_is_not_one() {
        assert_eq!(escaped_nul(br#"{"user": "a\u0000"}"#), Some(11));
        assert_eq!(escaped_nul(br#"{"q": "\\\u0000"}"#), Some(9));
        assert_eq!(escaped_nul(br#"{"q": "\\u0000"}"#), None);
        assert_eq!(escaped_nul(br#"{"q": "u0000 \u0001"}"#), None);
        assert_eq!(escaped_nul(b""), None);
        // A megabyte of backslashes is read in one pass (whatever it finds).
        let mut long = b"{\"q\": \"".to_vec();
        long.extend(std::iter::repeat_n(b'\\', 1 << 20));
        long.extend(b"u0000\"}");
        assert_eq!(escaped_nul(&long), None);
        long.insert(8, b'\\');
        assert_eq!(escaped_nul(&long), Some(long.len() - 8));
    }
}

#[cfg(test)]
mod rate_key_tests {
    use super::rate_key;

    /// Addresses of one IPv6 /64 share a rate; another /64, an IPv4 address (mapped or not)
    /// and no address at all each have their own.
    #[test]
    fn an_ipv6_64_is_one_client() {
        let key = |a: &str| rate_key(Some(a.parse().unwrap()));
        assert_eq!(key("[2001:db8::1]:1"), key("[2001:db8::ffff:1234]:2"));
        assert_eq!(key("[2001:db8::1]:1"), key("[2001:db8:0:0:8000::1]:9"));
        assert_ne!(key("[2001:db8::1]:1"), key("[2001:db8:0:1::1]:1"));
        assert_eq!(key("[::ffff:192.0.2.7]:1"), key("192.0.2.7:5"));
        assert_ne!(key("192.0.2.7:5"), key("192.0.2.8:5"));
        assert_eq!(rate_key(None), "anonymous");
    }
}

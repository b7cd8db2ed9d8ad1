//! The HTTP server: routes, request metrics, background maintenance.

pub mod api;
pub mod chat;
pub mod error;
pub mod guardrail;
pub mod policies;
pub mod summary;

use crate::app::{drive, from_stored, now_ms, persist, App, Waits};
use axum::extract::{MatchedPath, Request, State};
use axum::http::{HeaderName, HeaderValue};
use axum::middleware::{self, Next};
use axum::response::Response;
use axum::routing::{get, post};
use axum::Router;
use proofgate_core::{Effect, Input};
use std::sync::Arc;
use std::time::Duration;
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

/// Every route.
pub fn router(app: Arc<App>) -> Router {
    Router::new()
        .route("/v1/chat/completions", post(chat::chat_completions))
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
        .route("/api/policies", get(api::policies))
        .route("/api/policies/lint", post(policies::lint))
        .route("/api/policies/test", post(policies::test))
        .route("/api/policies/gen-tests", post(policies::gen_tests))
        .route("/api/policies/diff", post(policies::diff))
        .route("/api/policies/formalize", post(policies::formalize))
        .route("/api/config", get(api::config))
        .route("/healthz", get(api::healthz))
        .route("/metrics", get(api::metrics))
        .route_layer(middleware::from_fn_with_state(app.clone(), count_requests))
        .fallback_service(ServeDir::new(&app.config.server.web_dir))
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
        .with_state(app)
}

/// Delivers question timeouts (a `Tick` to threads whose questions are overdue) and deletes
/// threads older than the configured time to live.
pub async fn maintain(app: Arc<App>, every: Duration) {
    loop {
        tokio::time::sleep(every).await;
        let ttl_ms = app.config.storage.thread_ttl_secs.saturating_mul(1000);
        let cutoff = i64::try_from(now_ms().saturating_sub(ttl_ms)).unwrap_or(0);
        match app.store.expire(cutoff).await {
            Ok(0) => {}
            Ok(n) => tracing::info!("expired {n} stale thread(s)"),
            Err(e) => tracing::warn!("expiring threads: {e}"),
        }
        if let Err(e) = tick_overdue(&app).await {
            tracing::warn!("question timeouts: {e}");
        }
        if let Err(e) = resume_orphans(&app).await {
            tracing::warn!("resuming threads: {e}");
        }
    }
}

/// Resumes background threads whose server stopped mid-step: the step that was in flight has
/// no recorded result, so it is simply performed again from the last saved state.
async fn resume_orphans(app: &Arc<App>) -> Result<(), Box<dyn std::error::Error>> {
    let now = i64::try_from(now_ms()).unwrap_or(i64::MAX);
    let stale = i64::try_from(app.config.server.resume_after_ms).unwrap_or(i64::MAX);
    for stored in app.store.threads_with_status("processing").await? {
        if now.saturating_sub(stored.updated_at) < stale
            || !app.store.claim(&stored.id, stored.updated_at, now).await?
        {
            continue;
        }
        let trail = app.store.audit_trail(&stored.id).await?;
        let mut saved = trail.len();
        let mut thread = from_stored(&stored, trail)?;
        let effect = thread.pending_effect();
        tracing::info!("thread {}: resuming after an interrupted step", stored.id);
        let app = app.clone();
        tokio::spawn(async move {
            if let Err(e) =
                crate::app::drive_saving_each_step(&app, &mut thread, effect, &mut saved).await
            {
                tracing::error!("thread {}: {e}", thread.id());
            }
        });
    }
    Ok(())
}

async fn tick_overdue(app: &App) -> Result<(), Box<dyn std::error::Error>> {
    let now = now_ms();
    for stored in app.store.threads_with_status("awaiting_input").await? {
        let trail = app.store.audit_trail(&stored.id).await?;
        let saved = trail.len();
        let mut thread = from_stored(&stored, trail)?;
        let overdue = matches!(
            thread.pending_effect(),
            Effect::AskUser { deadline: Some(d), .. } if d <= now
        );
        if !overdue {
            continue;
        }
        let effect = thread.handle(Input::Tick { now })?;
        let effect = drive(app, &mut thread, effect, &mut Waits::default()).await?;
        persist(app, &thread, saved, stored.conversation_key.clone()).await?;
        tracing::info!(
            "thread {}: questions timed out, continued to {}",
            stored.id,
            effect_name(&effect)
        );
    }
    Ok(())
}

fn effect_name(e: &Effect) -> &'static str {
    e.name()
}

/// Serves until the process is stopped.
pub async fn serve(app: Arc<App>, listener: tokio::net::TcpListener) -> std::io::Result<()> {
    let every = Duration::from_millis(app.config.server.maintenance_interval_ms.max(10));
    tokio::spawn(maintain(app.clone(), every));
    axum::serve(listener, router(app)).await
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
    let runtime = tokio::runtime::Runtime::new()
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
        // Tests and scripts wait for this line (the port may have been chosen by the OS).
        println!("proofgate listening on http://{local}");
        serve(app, listener)
            .await
            .map_err(|e| StartError::Other(format!("server: {e}")))
    })
}

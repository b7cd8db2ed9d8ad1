//! The JSON API: threads, their iterations and audit trails, policies, health.

use super::auth::{end_user, Caller};
use super::error::ApiError;
use super::limits::Place;
use super::summary::thread_view_for;
use crate::app::{now_ms, persist, status_of, App, Waits};
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::IntoResponse;
use axum::{Extension, Json};
use proofgate_core::thread::GivenAnswer;
use proofgate_core::{Effect, Input, Thread};
use serde::Deserialize;
use serde_json::{json, Value};
use std::sync::Arc;

/// `POST /api/threads` body.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NewThread {
    /// The question.
    pub question: String,
    /// An answer to check instead of generating one.
    #[serde(default)]
    pub answer: Option<String>,
    /// `true` (default): reply once the loop stops. `false`: reply 202 at once and run the
    /// loop in the background, saving each step (poll `GET /api/threads/{id}`).
    #[serde(default = "yes")]
    pub wait: bool,
    /// Per-thread changes to the server's loop settings.
    #[serde(default)]
    pub settings: ThreadSettings,
}

/// Loop settings a thread may lower (the policy, validator and LLMs are the server's, and no
/// client gets more than the operator allows).
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ThreadSettings {
    /// At most this many validations (at least 1; above the server's `loop.max_iterations`
    /// counts as the server's).
    #[serde(default)]
    pub max_iterations: Option<u32>,
    /// `ALLOWED` or `DISABLED` (`ALLOWED` only when the server allows questions).
    #[serde(default)]
    pub follow_up_questions: Option<proofgate_core::thread::FollowUpQuestions>,
}

impl ThreadSettings {
    fn apply(
        &self,
        mut config: proofgate_core::ThreadConfig,
    ) -> Result<proofgate_core::ThreadConfig, ApiError> {
        use proofgate_core::thread::FollowUpQuestions;
        if let Some(n) = self.max_iterations {
            if n == 0 {
                return Err(ApiError::bad_request(
                    "settings.maxIterations must be at least 1, got 0",
                ));
            }
            // Clamped, never raised: the operator's setting is the ceiling.
            config.max_iterations = n.min(config.max_iterations);
        }
        if let Some(q) = self.follow_up_questions {
            if config.follow_up_questions == FollowUpQuestions::Allowed {
                config.follow_up_questions = q;
            }
        }
        Ok(config)
    }
}

fn yes() -> bool {
    true
}

/// `POST /api/threads/{id}/answers` body.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Answers {
    /// One answer per question, or one free-text answer.
    #[serde(default)]
    pub answers: Vec<String>,
    /// Skip the questions instead.
    #[serde(default)]
    pub skip: bool,
    /// As for `POST /api/threads`.
    #[serde(default = "yes")]
    pub wait: bool,
}

/// Runs the loop for a thread in the background (see [`crate::app::drive_in_background`]),
/// in the caller's findings-cache scope. `permit` was taken before the thread was saved (see
/// [`background_permit`]).
fn run_in_background(
    app: Arc<App>,
    caller: &Caller,
    thread: Thread,
    effect: Effect,
    saved: usize,
    permit: super::limits::Permit,
) {
    crate::app::drive_in_background(app, caller.id.clone(), thread, effect, saved, permit, None);
}

/// A place among the requests in flight for a thread to run in the background (`wait:
/// false`): the request's own place, taken over (see [`Place`]), so a thread in the
/// background counts as the request it came from until it ends. Taken before anything is
/// saved; with no place to take over (a request not admitted by the guard), a new one, and
/// 503 with `Retry-After` when every place is taken.
fn background_permit(
    app: &App,
    place: Option<&Place>,
    wait: bool,
) -> Result<Option<super::limits::Permit>, ApiError> {
    if wait {
        return Ok(None);
    }
    match place.and_then(Place::take) {
        Some(permit) => Ok(Some(permit)),
        None => Ok(Some(app.limits.admit()?)),
    }
}

fn parse<T: serde::de::DeserializeOwned>(body: &[u8], what: &str) -> Result<T, ApiError> {
    serde_json::from_slice(body).map_err(|e| ApiError::bad_request(format!("{what}: {e}")))
}

/// The thread, when the caller (for the end user the request names) may see it; 404 otherwise,
/// exactly as for a thread that does not exist. `to_extend`: the caller will add steps (and
/// the server sign a new head), so the stored trail is checked against the log first. With it,
/// the time the thread was last saved, to claim it by ([`claim_to_answer`]).
async fn load(
    app: &App,
    caller: &Caller,
    headers: &HeaderMap,
    id: &str,
    to_extend: bool,
) -> Result<(Thread, i64), ApiError> {
    check_access(app, caller, headers, id).await?;
    let stored = app
        .store
        .thread(id)
        .await?
        .ok_or_else(|| ApiError::not_found(format!("no thread {id} (it may have expired)")))?;
    // Only a thread waiting for answers is extended, as on the chat path: an expired one
    // answered came back to life beside its logged deletion.
    if to_extend && stored.status != "awaiting_input" {
        return Err(ApiError::conflict(format!(
            "thread {id} is {} and is not waiting for answers",
            stored.status
        )));
    }
    let loaded = if to_extend {
        crate::app::load_thread(app, &stored)
            .await
            .map(|(thread, _)| thread)
    } else {
        crate::app::load_thread_to_read(app, &stored).await
    };
    loaded
        .map(|t| (t, stored.updated_at))
        .map_err(ApiError::internal)
}

/// Takes waiting thread `id`, last saved at `seen`, for the request answering it; 409 when
/// another request (or the questions' timeout, or the conversation's expiry) took it first.
/// Two answers at once both drove it before: the LLM called twice, and the loser failed with a
/// 500 on the winner's records after its calls were paid for.
pub(crate) async fn claim_to_answer(app: &App, id: &str, seen: i64) -> Result<(), ApiError> {
    let now = i64::try_from(now_ms()).unwrap_or(i64::MAX);
    if app.store.claim_waiting(id, seen, now).await? {
        Ok(())
    } else {
        Err(ApiError::conflict(format!(
            "thread {id} is no longer waiting for answers: another request answered it, or its \
             questions timed out, just now; GET /api/threads/{id} shows what became of it, and \
             to ask again, send the question anew"
        )))
    }
}

pub(crate) async fn check_access(
    app: &App,
    caller: &Caller,
    headers: &HeaderMap,
    id: &str,
) -> Result<(), ApiError> {
    if caller.is_admin() {
        return Ok(());
    }
    let user = end_user(headers)?;
    let owner = app.store.owner_of(id).await?;
    if caller.may_access(owner.as_ref(), user)
        && recorded_owner_is(app, id, &caller.owner(user)).await?
    {
        Ok(())
    } else {
        Err(ApiError::not_found(format!(
            "no thread {id} (it may have expired)"
        )))
    }
}

/// Whether `owner` is the owner thread `id`'s first record names (or it names none, as trails
/// from before owners were recorded do). The owners' table decides access but no signature
/// covers it: a thread handed to another key in the database must not open its trail, its
/// bundle or its listing to them. A trail whose first record was rewritten to match is caught
/// by the chain and the signed heads, as every view and audit checks them.
pub(crate) async fn recorded_owner_is(
    app: &App,
    id: &str,
    owner: &crate::storage::ThreadOwner,
) -> Result<bool, ApiError> {
    let Some(first) = app.store.first_record(id).await? else {
        return Ok(true);
    };
    first_record_gives_it_to(id, first, owner)
}

/// Whether thread `id`'s first record (as far as its owner goes) names `owner`, or no owner;
/// a mismatch is logged as an altered store.
fn first_record_gives_it_to(
    id: &str,
    first: Value,
    owner: &crate::storage::ThreadOwner,
) -> Result<bool, ApiError> {
    let recorded = proofgate_core::audit::ThreadStarted::owner_in_trail(&[first])
        .map_err(ApiError::internal)?;
    let same = recorded
        .as_ref()
        .is_none_or(|r| *r == proofgate_core::audit::ThreadOwner::from(owner.clone()));
    if !same {
        tracing::error!(
            "thread {id}: the owners' table gives it to {owner:?}, its trail to {recorded:?}: \
             the store was altered"
        );
    }
    Ok(same)
}

/// [`recorded_owner_is`] for a listed thread, from what its listing read of its first record.
async fn listed_owner_is(
    app: &App,
    t: &crate::storage::ThreadSummary,
    owner: &crate::storage::ThreadOwner,
) -> Result<bool, ApiError> {
    let Some(first) = &t.first_record else {
        return Ok(true);
    };
    if !first.readable {
        return recorded_owner_is(app, &t.id, owner).await;
    }
    let first = first.as_record().map_err(|e| {
        ApiError::internal(format!("its first record names an unreadable owner: {e}"))
    })?;
    first_record_gives_it_to(&t.id, first, owner)
}

/// Drives a request's thread to its end as a chat request's is (each step saved ahead of the
/// call it asks for), saves the end, and counts its verdict.
async fn drive_to_end(
    app: &Arc<App>,
    caller: &Caller,
    thread: &mut Thread,
    effect: proofgate_core::Effect,
    saver: &mut crate::app::Saver,
) -> Result<(), ApiError> {
    let effect = crate::app::drive_durably(
        app,
        &caller.id,
        thread,
        effect,
        &mut Waits::default(),
        saver,
        None,
    )
    .await
    .map_err(|e| match e {
        crate::app::DurableDriveError::Drive(e) => ApiError::from(e),
        crate::app::DurableDriveError::Storage(e) => ApiError::from(e),
    })?;
    saver.finish(app, thread, None).await?;
    if let proofgate_core::Effect::Finish(o) = &effect {
        app.metrics.verdict(o.status.as_str(), thread.iterations());
    }
    Ok(())
}

/// `POST /api/threads`.
pub async fn create_thread(
    State(app): State<Arc<App>>,
    Extension(caller): Extension<Caller>,
    place: Option<Extension<Place>>,
    headers: HeaderMap,
    body: axum::body::Bytes,
) -> Result<impl IntoResponse, ApiError> {
    let req: NewThread = parse(
        &body,
        "expected {\"question\": \"...\", \"answer\"?: \"...\"}",
    )?;
    let background = background_permit(&app, place.as_deref(), req.wait)?;
    let id = crate::app::new_thread_id();
    let cfg = req.settings.apply(app.thread_config.config().clone())?;
    let owner = caller.owner(end_user(&headers)?);
    let answer = req.answer.map(|text| GivenAnswer {
        text,
        model: None,
        source: "user".into(),
    });
    let mut thread = Thread::owned(
        cfg,
        id,
        req.question,
        answer,
        Some(owner.clone().into()),
        now_ms(),
    )
    .map_err(|e| ApiError::bad_request(e.to_string()))?;
    let effect = thread.start();
    // The owner is recorded with the thread's first save, so no saved thread lacks one, and
    // no owner is left without a thread.
    let mut saver = crate::app::Saver::new(0);
    saver.owned_by(owner);
    if let Some(permit) = background {
        saver.finish(&app, &thread, None).await?;
        let view = thread_view_for(&caller, &thread, status_of(&thread));
        let saved = thread.audit_trail().len();
        run_in_background(app, &caller, thread, effect, saved, permit);
        return Ok((StatusCode::ACCEPTED, Json(view)));
    }
    // Driven as a chat request's thread is: each step saved ahead of the call it asks for
    // (everything was saved once at the end: a client that left, the deadline or a crash lost
    // the LLM and solver calls made, with no trail of them), and ended as ERROR if the request
    // stops driving it before its end.
    saver.ends_if_dropped(app.clone());
    drive_to_end(&app, &caller, &mut thread, effect, &mut saver).await?;
    Ok((
        StatusCode::CREATED,
        Json(thread_view_for(&caller, &thread, status_of(&thread))),
    ))
}

/// The most threads one page of `GET /api/threads` lists (and its default).
const LISTING_PAGE: i64 = 200;

/// `GET /api/threads`'s query: how many threads (1 to [`LISTING_PAGE`]) and where the page
/// starts (the `next` of the page before).
#[derive(Debug, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ListingQuery {
    limit: Option<i64>,
    after: Option<String>,
}

/// `GET /api/threads`: the caller's threads (for the end user named by `x-proofgate-user`);
/// every thread for admins. A page at a time: `next`, when not null, is the `after` of the
/// next page.
pub async fn list_threads(
    State(app): State<Arc<App>>,
    Extension(caller): Extension<Caller>,
    headers: HeaderMap,
    q: Result<axum::extract::Query<ListingQuery>, axum::extract::rejection::QueryRejection>,
) -> Result<Json<Value>, ApiError> {
    const EXPECTED: &str = "?limit=N (1 to 200)&after=CURSOR (the `next` of the page before)";
    let axum::extract::Query(q) =
        q.map_err(|e| ApiError::bad_request(format!("{}; expected {EXPECTED}", e.body_text())))?;
    let limit = q.limit.unwrap_or(LISTING_PAGE);
    if !(1..=LISTING_PAGE).contains(&limit) {
        return Err(ApiError::bad_request(format!(
            "limit {limit} is out of range; expected {EXPECTED}"
        )));
    }
    let after = match q.after.as_deref() {
        Some(text) => Some(
            crate::storage::ListingCursor::from_text(text).ok_or_else(|| {
                ApiError::bad_request(format!(
                    "after is not a listing cursor; expected {EXPECTED}"
                ))
            })?,
        ),
        None => None,
    };
    // One more than the page, to know whether another follows.
    let mut page = if caller.is_admin() {
        app.store
            .thread_summaries(None, limit + 1, after.as_ref())
            .await?
    } else {
        let owner = caller.owner(end_user(&headers)?);
        app.store
            .thread_summaries(Some(&owner), limit + 1, after.as_ref())
            .await?
    };
    let more = page.len() > limit as usize;
    page.truncate(limit as usize);
    // The cursor is the page's last row, shown or not: a thread left out below is not listed
    // again on the next page.
    let next = page
        .last()
        .filter(|_| more)
        .map(|t| crate::storage::ListingCursor::after(t).to_text());
    let threads = if caller.is_admin() {
        page
    } else {
        let owner = caller.owner(end_user(&headers)?);
        let mut mine = Vec::new();
        for t in page {
            // One unreadable thread must not hide the others: it is left out, and logged.
            match listed_owner_is(&app, &t, &owner).await {
                Ok(true) => mine.push(t),
                Ok(false) => {}
                Err(e) => tracing::error!("thread {} left out of a listing: {e:?}", t.id),
            }
        }
        mine
    };
    Ok(Json(json!({
        "threads": threads.iter().map(|t| json!({
            "id": t.id,
            "status": t.status,
            "question": t.question,
            "createdAt": t.created_at,
            "updatedAt": t.updated_at,
            "verdict": t.verdict,
        })).collect::<Vec<_>>(),
        "next": next,
    })))
}

/// `GET /api/threads/{id}`.
pub async fn get_thread(
    State(app): State<Arc<App>>,
    Extension(caller): Extension<Caller>,
    headers: HeaderMap,
    Path(id): Path<String>,
) -> Result<Json<Value>, ApiError> {
    let (thread, _) = load(&app, &caller, &headers, &id, false).await?;
    // A `chat` key without `read` sees its own thread as its replies showed it.
    Ok(Json(thread_view_for(&caller, &thread, status_of(&thread))))
}

/// `POST /api/threads/{id}/answers`.
pub async fn answer_thread(
    State(app): State<Arc<App>>,
    Extension(caller): Extension<Caller>,
    place: Option<Extension<Place>>,
    headers: HeaderMap,
    Path(id): Path<String>,
    body: axum::body::Bytes,
) -> Result<Json<Value>, ApiError> {
    let req: Answers = parse(
        &body,
        "expected {\"answers\": [\"...\"]} or {\"skip\": true}",
    )?;
    let background = background_permit(&app, place.as_deref(), req.wait)?;
    let (mut thread, seen) = load(&app, &caller, &headers, &id, true).await?;
    let saved = thread.audit_trail().len();
    let input = match (req.skip, req.answers.is_empty()) {
        (true, true) => Input::UserSkipped { now: now_ms() },
        (false, false) => Input::UserAnswered {
            answers: req.answers,
            now: now_ms(),
        },
        (true, false) => {
            return Err(ApiError::bad_request(
                "give either answers or skip: true, not both",
            ))
        }
        (false, true) => {
            return Err(ApiError::bad_request(
                "no answers given: send {\"answers\": [...]} or {\"skip\": true}",
            ))
        }
    };
    let effect = thread
        .handle(input)
        .map_err(|e| ApiError::conflict(e.to_string()))?;
    claim_to_answer(&app, &id, seen).await?;
    if let Some(permit) = background {
        persist(&app, &thread, saved, None).await?;
        let view = thread_view_for(&caller, &thread, status_of(&thread));
        let saved = thread.audit_trail().len();
        run_in_background(app, &caller, thread, effect, saved, permit);
        return Ok(Json(view));
    }
    // The answers are stored before any LLM call: held until the end, the thread stayed
    // "awaiting input" while it was driven, and its questions' timeout took it meanwhile (the
    // answers then failed to store, and the trail said the user never answered).
    // Driven as the chat path drives a thread: each step saved ahead of its call, and the
    // thread known to be live here, so the maintenance does not resume it meanwhile.
    // Dropped before its end is durable (the client left, the deadline passed), the thread is
    // ended as a failed call ends it, as a chat request's is: from its first write on.
    let mut saver = crate::app::Saver::new(saved);
    saver.ends_if_dropped(app.clone());
    saver.save_now(&app, &thread).await?;
    drive_to_end(&app, &caller, &mut thread, effect, &mut saver).await?;
    Ok(Json(thread_view_for(&caller, &thread, status_of(&thread))))
}

/// `GET /api/threads/{id}/audit`: the trail, as `replayAudit` and `proofgate` verify it.
pub async fn audit_trail(
    State(app): State<Arc<App>>,
    Extension(caller): Extension<Caller>,
    headers: HeaderMap,
    Path(id): Path<String>,
) -> Result<Json<Value>, ApiError> {
    check_access(&app, &caller, &headers, &id).await?;
    if app.store.thread(&id).await?.is_none() {
        return Err(ApiError::not_found(format!(
            "no thread {id} (it may have expired)"
        )));
    }
    Ok(Json(Value::Array(app.store.audit_trail(&id).await?)))
}

/// `GET /api/policies`: the configured policy with its rules in SMT-LIB and English.
pub async fn policies(State(app): State<Arc<App>>) -> Json<Value> {
    let list: Vec<Value> = app
        .policy
        .iter()
        .map(|m| {
            json!({
                "versionArn": m.version_arn(),
                "contentHash": m.definition().content_hash(),
                // Its name, not where it lies on the server (`/api/config`, admins only, says).
                "file": app.config.validator.policy.as_ref().and_then(|p| p.file_name()).map(|n| n.to_string_lossy().into_owned()),
                "definition": m.definition(),
                "rules": m.rules().iter().map(|r| json!({
                    "id": r.id,
                    "expression": r.term.to_string(),
                    "english": m.english(&r.expr),
                    "alternateExpression": r.alternate_expression,
                })).collect::<Vec<_>>(),
                "smtlib": format!("{}{}", m.smtlib_declarations(), m.smtlib_rules()),
            })
        })
        .collect();
    Json(json!({"policies": list}))
}

/// Any other `/v1/...` path: a JSON error naming the routes served, where an SDK's call to a
/// route proofgate does not serve (`/v1/embeddings`, `/v1/messages/count_tokens`) got the web
/// UI's 404 page or a 405 without a body.
pub async fn unknown_api_route(uri: axum::http::Uri) -> ApiError {
    ApiError::not_found(format!(
        "{} is not served by proofgate: its API routes are POST /v1/chat/completions, \
         /v1/responses and /v1/messages, and GET /v1/models",
        uri.path()
    ))
}

/// `GET /healthz`: whether the server and its storage answer, and nothing more. It takes no
/// key: the policy's version ARN it used to show named the policy (its content hash, or the
/// operator's AWS account and region), and changed when the policy did, for anyone to watch.
pub async fn healthz(State(app): State<Arc<App>>) -> Result<Json<Value>, ApiError> {
    app.store.ping().await?;
    Ok(Json(json!({"status": "ok"})))
}

/// `GET /metrics`.
pub async fn metrics(State(app): State<Arc<App>>) -> impl IntoResponse {
    (
        [(
            axum::http::header::CONTENT_TYPE,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        )],
        app.metrics.render(),
    )
}

fn endpoint_view(e: &crate::config::LlmEndpoint) -> Value {
    // Never the API key.
    json!({
        "kind": format!("{:?}", e.kind).to_lowercase(),
        "baseUrl": e.base_url,
        "model": e.model,
        "temperature": e.temperature,
        "apiKeyConfigured": e.api_key.is_some(),
    })
}

/// `GET /api/config`: the effective settings, without secrets.
pub async fn config(State(app): State<Arc<App>>) -> Json<Value> {
    let c = &app.config;
    let storage = if c.storage.url.starts_with("sqlite:") {
        "sqlite"
    } else {
        "postgres"
    };
    Json(json!({
        "validator": {
            "kind": format!("{:?}", c.validator.kind).to_lowercase(),
            "policy": c.validator.policy.as_ref().map(|p| p.display().to_string()),
            "policyVersionArn": app.policy.as_ref().map(|m| m.version_arn().to_string()),
            "translators": c.translators().iter().map(endpoint_view).collect::<Vec<_>>(),
            "confidenceThreshold": c.validator.threshold,
            "solverTimeoutMs": c.validator.solver_timeout_ms,
            "repairAttempts": c.validator.repair_attempts,
            // What runs, not what was asked for.
            "reasonerWorkers": match &app.validator {
                crate::validator::Validator::Local(v) => Some(v.reasoner_workers()),
                #[cfg(feature = "bedrock")]
                crate::validator::Validator::Bedrock(_) => None,
            },
            "reasonerIdleSecs": c.validator.reasoner_idle_secs,
            "bedrock": c.validator.bedrock.as_ref().map(|b| json!({
                "guardrailId": b.guardrail_id, "guardrailVersion": b.guardrail_version,
                "region": b.region, "endpointUrl": b.endpoint_url,
            })),
        },
        "upstream": endpoint_view(&c.upstream),
        "rewriter": endpoint_view(c.rewriter()),
        "loop": {
            "maxIterations": c.rewrite_loop.max_iterations,
            "allowQuestions": c.rewrite_loop.allow_questions,
            "allowForcedToolCalls": c.rewrite_loop.allow_forced_tool_calls,
            "questionTimeoutSecs": c.rewrite_loop.question_timeout_secs,
        },
        "failureMode": format!("{:?}", c.failure_mode).to_lowercase(),
        "storage": storage,
        // Kept apart: `storage` is a string clients already read.
        "storageConnectionIdleSecs": c.storage.connection_idle_secs,
        "auth": {"required": c.auth.required, "adminKeyConfigured": c.auth.admin_key.is_some() || c.auth.admin_key_sha256.is_some()},
        "limits": {
            "maxBodyBytes": c.limits.max_body_bytes,
            "maxConcurrentRequests": c.limits.max_concurrent_requests,
            "requestsPerMinute": c.limits.requests_per_minute,
            "requestTimeoutMs": c.limits.request_timeout_ms,
            "maxPolicyRules": c.limits.max_policy_rules,
            "maxPolicyVariables": c.limits.max_policy_variables,
            "maxPolicyTypes": c.limits.max_policy_types,
            "maxConnections": c.limits.max_connections,
            "maxConnectionsPerAddress": c.limits.max_connections_per_address,
            "capPrivateAddresses": c.limits.cap_private_addresses,
            "headerTimeoutMs": c.limits.header_timeout_ms,
            "writeTimeoutMs": c.limits.write_timeout_ms,
        },
        "corsOrigins": c.server.cors_origins,
        "server": {
            "runtime": match c.server.runtime {
                crate::config::RuntimeKind::PerCore => "per-core",
                crate::config::RuntimeKind::WorkStealing => "work-stealing",
            },
            // What runs: the setting resolved (0 is one per core).
            "threads": c.server.serving_threads(),
        },
    }))
}

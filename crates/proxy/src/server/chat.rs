//! `POST /v1/chat/completions`: the drop-in verified endpoint.

use super::auth::Caller;
use super::error::ApiError;
use super::summary::proofgate_object;
use crate::app::{drive_durably, now_ms, App, DurableDriveError, FailedCall, Saver, Waits};
use crate::llm::{completion_body, completion_text, LlmError};
use crate::metrics::Stage;
use crate::openai::{
    completion_events, conversation_key_after, tool_call_completion, tool_call_events,
    tool_call_of, verified_completion, with_usage_chunk, ChatRequest,
};
use crate::storage::ThreadOwner;
use axum::body::Bytes;
use axum::extract::{Extension, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::sse::{Event, Sse};
use axum::response::{IntoResponse, Response};
use axum::Json;
use proofgate_core::conversation::{ConversationTurn, TurnRole};
use proofgate_core::thread::{ChatbotReply, ClarificationResponse, GivenAnswer};
use proofgate_core::{Effect, Input, OutcomeStatus, Thread};
use serde_json::Value;
use std::convert::Infallible;
use std::sync::Arc;
use std::time::Instant;

/// The header that names the thread (in responses, and in requests that answer questions).
pub const THREAD_HEADER: &str = "x-proofgate-thread";

/// What the chatbot's reply became.
pub(crate) enum Reply {
    /// A verified (or clearly marked) answer, or follow-up questions: the text to return, and
    /// the upstream completion whose allow-listed members describe the call.
    Answer {
        /// The text.
        text: String,
        /// The upstream's chat completion (or a minimal one when none was made).
        upstream: Value,
        /// How the text ended.
        ending: Ending,
    },
    /// Tool calls, returned unchanged: the upstream's completion, and its own reply when the
    /// upstream speaks another API (an Anthropic message).
    ToolCall {
        /// The upstream's chat completion.
        upstream: Value,
        /// The upstream's native reply, when not a chat completion.
        native: Option<Value>,
    },
}

/// How the text a client receives ended. The upstream's own answer, released as it came, may
/// have been cut at its token limit or by its provider's content filter: the client is told
/// so, as the upstream told proofgate (the text was all checked, but it is not all the answer
/// was to be). A rewrite, questions or a notice end as complete.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Ending {
    /// The whole answer.
    Complete,
    /// Cut at the token limit (`finish_reason: "length"`, `stop_reason: "max_tokens"`).
    TokenLimit,
    /// Cut or withheld by the provider's content filter (`content_filter`, `refusal`).
    ContentFilter,
}

impl Ending {
    /// How the upstream's completion says its answer ended.
    fn of_upstream(upstream: &Value) -> Ending {
        match upstream
            .pointer("/choices/0/finish_reason")
            .and_then(Value::as_str)
        {
            Some("length") => Ending::TokenLimit,
            Some("content_filter") => Ending::ContentFilter,
            _ => Ending::Complete,
        }
    }

    /// As a chat completion's `finish_reason`.
    pub(crate) fn finish_reason(self) -> &'static str {
        match self {
            Ending::Complete => "stop",
            Ending::TokenLimit => "length",
            Ending::ContentFilter => "content_filter",
        }
    }
}

/// A request's result, ready to be written in any of the served APIs.
pub(crate) struct Answered {
    /// The answer or the tool calls.
    pub reply: Reply,
    /// `VALID`, `NEEDS_INPUT`, `TOOL_CALL`, ...
    pub verdict: String,
    /// The thread.
    pub thread_id: String,
    /// The `proofgate` object.
    pub proofgate: Value,
    /// The client asked for a usage chunk at the end of the stream
    /// (`stream_options.include_usage`).
    pub usage_chunk: bool,
}

/// The text shown in the chat when follow-up questions are needed. The questions are the
/// rewriting LLM's words, checked by nothing: a question can carry a claim ("Since seniors
/// enter free, are you over 65?"), so the reader is told, as with every other unverified text.
fn questions_text(questions: &[String]) -> String {
    let mut text = String::from("To answer this precisely I need a little more information:\n");
    for (i, q) in questions.iter().enumerate() {
        text.push_str(&format!("{}. {q}\n", i + 1));
    }
    text.push_str(
        "\n(Reply with your answers, one per line in the order asked, or \"skip\" to get an \
         answer without them.)",
    );
    with_notice(&text, Some(QUESTIONS_NOTICE))
}

/// What a message of follow-up questions says about them.
pub(crate) const QUESTIONS_NOTICE: &str = "these questions are not verified against the policy; \
     the answer that follows is checked, and marked if it could not be verified";

/// What an IMPOSSIBLE outcome's text is: the rewriter's explanation, confirmed only in that the
/// question's facts contradict the policy. An IMPOSSIBLE finding checks none of its pair's
/// claims (from premises that cannot hold, every claim follows), so a sentence the explanation
/// adds ("...and you also get a free pass") goes out unchecked, and the reader must be told.
pub(crate) const IMPOSSIBLE_NOTICE: &str =
    "the facts given contradict the policy; beyond that, this explanation is not verified";

/// An IMPOSSIBLE outcome's notice when the explanation's own validation was VALID (its
/// `verified` is true): every claim it makes was proved, and saying it was not contradicted
/// the outcome a client reads.
pub(crate) const IMPOSSIBLE_VERIFIED_NOTICE: &str = "the facts given contradict the policy";

/// [`IMPOSSIBLE_VERIFIED_NOTICE`] when no finding names a rule of the policy: the facts given
/// contradict each other (or their types), not the policy (a review's case).
pub(crate) const IMPOSSIBLE_FACTS_NOTICE: &str = "the facts given contradict each other";

/// [`IMPOSSIBLE_NOTICE`] when no finding names a rule of the policy.
pub(crate) const IMPOSSIBLE_FACTS_UNVERIFIED_NOTICE: &str =
    "the facts given contradict each other; beyond that, this explanation is not verified";

/// Whether `findings` hold IMPOSSIBLE findings and none of them names a rule.
fn names_no_rule(findings: &[proofgate_core::Finding]) -> bool {
    let rules: Vec<bool> = findings
        .iter()
        .filter_map(|f| match f {
            proofgate_core::Finding::Impossible(c) => Some(
                c.contradicting_rules
                    .as_ref()
                    .is_some_and(|r| !r.is_empty()),
            ),
            _ => None,
        })
        .collect();
    !rules.is_empty() && !rules.contains(&true)
}

/// The notice an answer of `status` goes out with: none for VALID; for IMPOSSIBLE what was and
/// was not checked (`verified`: the explanation's own claims were proved), with the outcome's
/// warning (an explanation with parts outside the policy, from format 3 on); otherwise the
/// outcome's warning when it has one, or what the status means for the end user. With
/// `no_rule` (no IMPOSSIBLE finding of the outcome names a rule: "I am 7 and I am 70"
/// contradicts no policy) an IMPOSSIBLE's notice says the facts contradict each other.
fn notice_for(
    status: OutcomeStatus,
    warning: Option<&str>,
    verified: bool,
    no_rule: bool,
) -> Option<String> {
    match status {
        OutcomeStatus::Valid => None,
        OutcomeStatus::Impossible => {
            let notice = match (verified, no_rule) {
                (true, false) => IMPOSSIBLE_VERIFIED_NOTICE,
                (false, false) => IMPOSSIBLE_NOTICE,
                (true, true) => IMPOSSIBLE_FACTS_NOTICE,
                (false, true) => IMPOSSIBLE_FACTS_UNVERIFIED_NOTICE,
            };
            Some(match warning {
                Some(w) => format!("{notice}; {w}"),
                None => notice.to_string(),
            })
        }
        _ => Some(
            warning
                .unwrap_or(match status {
                    OutcomeStatus::MaxIterations => {
                        "NOT VERIFIED: no answer could be verified against the policy"
                    }
                    OutcomeStatus::NotCovered => "this answer is outside what the policy covers",
                    _ => "",
                })
                .to_string(),
        ),
    }
}

/// The answer text with a notice when it is not a plain VALID answer; the notice is part of
/// what the end user sees, so an unverified answer is never mistaken for a verified one. It
/// goes first: the answer is an LLM's text, and text of its own could hide what came after it
/// where the app renders Markdown (a last line of `<!--` opens an HTML comment that swallowed
/// a notice at the end, on CommonMark renderers and HTML sanitizers alike).
fn with_notice(answer: &str, notice: Option<&str>) -> String {
    match notice {
        Some(n) if !n.is_empty() => format!("[proofgate: {n}]\n\n{answer}"),
        _ => answer.to_string(),
    }
}

/// What the client is told of a failed upstream call. The details (the endpoint's address, the
/// response's body) go to the operator's log, not to the client; the upstream's own error
/// message is passed on for a 4xx, which is about the request the client sent, except when the
/// upstream refused proofgate's own credentials (401/403 with the configured key): that is the
/// operator's to fix, and as a 401 the client's SDK would report the client's key as wrong.
pub(super) fn upstream_error(e: LlmError, client_credentials: bool) -> ApiError {
    tracing::warn!("upstream LLM call failed: {e}");
    match e {
        LlmError::Rejected { status, .. } if matches!(status, 401 | 403) && !client_credentials => {
            ApiError::new(
                StatusCode::BAD_GATEWAY,
                "upstream_error",
                format!(
                    "the upstream LLM refused proofgate's credentials (HTTP {status}); the \
                     operator must check [upstream] api_key (or, for Bedrock, the AWS \
                     credentials)"
                ),
            )
        }
        // The operator's account (billing, quota), not the client's request: its wording may
        // name the operator's organisation, and the client can do nothing about it.
        // (A 429 that reaches here is not a rate: it was not retried, for the quota is
        // exhausted, OpenAI's `insufficient_quota`.)
        LlmError::Rejected {
            status: status @ (402 | 429),
            ..
        } if !client_credentials => ApiError::new(
            StatusCode::BAD_GATEWAY,
            "upstream_error",
            format!(
                "the upstream LLM refused the call for the operator's account (HTTP {status}: \
                 billing or quota); the operator must check it"
            ),
        ),
        LlmError::Rejected { status, body, .. } => {
            let status = StatusCode::from_u16(status).unwrap_or(StatusCode::BAD_GATEWAY);
            // The upstream's own message where its API puts one (OpenAI's, Ollama's, FastAPI's
            // `detail`), not the raw body: a body of unknown shape may quote anything, a
            // gateway's guardrail the unchecked answer included. The body is in the log above.
            let upstream: Value = serde_json::from_str(&body).unwrap_or(Value::Null);
            let message = ["/error/message", "/error", "/message", "/detail"]
                .iter()
                .find_map(|p| upstream.pointer(p).and_then(Value::as_str))
                .map(|m| crate::http_body::truncate(m, 300).to_string())
                .unwrap_or_else(|| "(no message in a known place; see proofgate's log)".into());
            ApiError::new(
                status,
                "upstream_error",
                format!(
                    "the upstream LLM rejected the request (HTTP {}): {message}",
                    status.as_u16()
                ),
            )
        }
        // A 503 with the upstream's `Retry-After`, not a 502: SDKs retry a 502 at once, which
        // only adds calls to an upstream that asked for fewer.
        LlmError::Throttled { retry_after, .. } => ApiError {
            retry_after: Some(retry_after.map_or(1, |d| d.as_secs().max(1))),
            ..ApiError::new(
                StatusCode::SERVICE_UNAVAILABLE,
                "upstream_throttled",
                "the upstream LLM is throttling requests (HTTP 429, after proofgate's retries); \
                 no answer was returned: retry after the time `Retry-After` gives",
            )
        },
        LlmError::Unavailable { .. } => ApiError::new(
            StatusCode::BAD_GATEWAY,
            "upstream_unavailable",
            "the upstream LLM is unavailable (after proofgate's retries); no answer was returned",
        ),
        LlmError::BadResponse { .. } => ApiError::new(
            StatusCode::BAD_GATEWAY,
            "upstream_error",
            "the upstream LLM's response was not a usable chat completion; no answer was returned",
        ),
        LlmError::Misconfigured(_) => ApiError::new(
            StatusCode::BAD_GATEWAY,
            "upstream_error",
            "proofgate is not set up to call the upstream LLM (see the server's log)",
        ),
    }
}

/// The end user of a chat request: OpenAI's `user` field, or else `safety_identifier`, which
/// OpenAI now recommends in its place (an app that moved to it had every end user under one
/// owner, so one could resume another's waiting thread).
fn end_user(req: &ChatRequest) -> Option<&str> {
    ["user", "safety_identifier"].into_iter().find_map(|field| {
        req.body
            .get(field)
            .and_then(Value::as_str)
            .map(str::trim)
            .filter(|u| !u.is_empty())
    })
}

/// The end-user fields of a request going upstream (`user`, `safety_identifier`), each
/// replaced by a name of its own per key: every key's requests reach the provider under the
/// operator's one account, where an end user flagged for abuse can be refused by that id, and
/// a tenant sending abuse as `alice@example.com` got another tenant's `alice` refused. Stable
/// per key and end user, so the provider still tells one key's end users apart.
fn end_user_for_upstream(body: &mut Value, key: &str) {
    use sha2::{Digest, Sha256};
    for field in ["user", "safety_identifier"] {
        let Some(user) = body.get(field).and_then(Value::as_str) else {
            continue;
        };
        let mut h = Sha256::new();
        for part in [key, user] {
            h.update((part.len() as u64).to_be_bytes());
            h.update(part.as_bytes());
        }
        // Not `pg_`, which API keys start with (secret scanners would flag it).
        let named = format!("user_{}", &hex::encode(h.finalize())[..32]);
        body[field] = Value::String(named);
    }
}

/// A conversation key that only its owner's requests produce: the same messages from another
/// key or end user never resume this owner's thread.
fn owned_conversation_key(owner: &ThreadOwner, conversation: &str) -> String {
    use sha2::{Digest, Sha256};
    let mut h = Sha256::new();
    for part in [owner.key.as_str(), owner.user.as_str(), conversation] {
        h.update((part.len() as u64).to_be_bytes());
        h.update(part.as_bytes());
    }
    hex::encode(h.finalize())
}

async fn start_thread(
    app: &App,
    caller: &Caller,
    req: &ChatRequest,
    headers: &HeaderMap,
    waits: &mut Waits,
) -> Result<(Thread, Value, Option<Value>), ApiError> {
    // The client's own Authorization goes upstream only when it is not a proofgate key and
    // keys are off (then it may be the upstream's key); otherwise the configured key is used.
    let auth = (!app.config.auth.required && !caller.sent_proofgate_key())
        .then(|| headers.get(axum::http::header::AUTHORIZATION))
        .flatten()
        .and_then(|v| v.to_str().ok());
    if let Some(how) = req.forced_tool_call() {
        if !app.config.rewrite_loop.allow_forced_tool_calls {
            return Err(ApiError::new(
                StatusCode::BAD_REQUEST,
                "forced_tool_call",
                format!(
                    "the request forces a tool call ({how}): the call's arguments would be the \
                     answer, and proofgate verifies answers given as text only. Let the model \
                     choose (tool_choice auto), or set [loop] allow_forced_tool_calls = true to \
                     pass forced calls through unverified (x-proofgate-verdict: TOOL_CALL)"
                ),
            ));
        }
    }
    if app.config.upstream.kind == crate::config::LlmKind::Anthropic {
        if let Some(why) = crate::anthropic::unsupported_for_upstream(&req.body) {
            return Err(ApiError::bad_request(why));
        }
    }
    let started = Instant::now();
    let mut body = req.body.clone();
    // Under the client's own upstream key (keys off), its end users are its own to name.
    if auth.is_none() {
        end_user_for_upstream(&mut body, &caller.id);
    }
    let upstream = app.upstream.forward_native(body, auth).await;
    waits.upstream += started.elapsed();
    app.metrics.observe(Stage::Upstream, started.elapsed());
    // The client's own key went upstream only to an OpenAI-shaped endpoint with none of its own.
    let client_credentials = auth.is_some()
        && app.config.upstream.api_key.is_none()
        && app.config.upstream.kind == crate::config::LlmKind::Openai;
    let (mut upstream, mut native) = upstream.map_err(|e| upstream_error(e, client_credentials))?;
    // The model named to the client and recorded as the answer's (`outcome.model`) is the one
    // proofgate asked for (the pinned one, else the client's) or its dated snapshot, never
    // another name of the upstream's: a name is text, and a sentence can be written as one.
    let asked = app.config.upstream.model.as_deref().unwrap_or(&req.model);
    crate::openai::report_model(&mut upstream, asked);
    if let Some(native) = native.as_mut() {
        crate::openai::report_model(native, asked);
    }
    let reply = match tool_call_of(&upstream) {
        // Not an answer: recorded, and returned as it came once the thread has ended.
        Some(call) => {
            // A call of a tool the app did not offer is no reply to this request (a model
            // steered by text in the conversation, or a misbehaving endpoint): the app would
            // run, or show, what it never asked for.
            let offered = req.offered_tools();
            if let Some(c) = call.calls.iter().find(|c| !offered.contains(&c.name)) {
                let what = |name: &str| {
                    if c.name.is_empty() {
                        "a tool call that is not a function call (only function calls are \
                         passed on)"
                            .to_string()
                    } else {
                        format!("a tool the request did not offer ({name})")
                    }
                };
                // Worth an operator's look: a model steered by text in the conversation
                // reaching for tools, or an endpoint that is not the one configured.
                tracing::warn!(
                    "the upstream LLM made {}; offered: {offered:?}; refused with a 502",
                    what(&format!("{:?}", c.name))
                );
                // The client is told the name only when it is a name: it is upstream text.
                let name = Value::String(c.name.clone());
                let shown = crate::openai::identifier(Some(&name)).unwrap_or("a name not shown");
                return Err(ApiError::new(
                    StatusCode::BAD_GATEWAY,
                    "upstream_error",
                    format!(
                        "the upstream LLM made {}; nothing was returned",
                        what(&format!("{shown:?}"))
                    ),
                ));
            }
            ChatbotReply::ToolCall(call)
        }
        None => {
            let answer = completion_text(&upstream).unwrap_or_default();
            if answer.trim().is_empty() {
                return Err(ApiError::new(
                    StatusCode::BAD_GATEWAY,
                    "upstream_error",
                    "the upstream LLM returned no answer text and no tool calls \
                     (choices[0].message.content is empty)",
                ));
            }
            ChatbotReply::Answer(GivenAnswer {
                text: answer,
                // As reported above (the upstream's raw name was recorded before).
                model: upstream
                    .get("model")
                    .and_then(Value::as_str)
                    .filter(|m| !m.is_empty())
                    .map(str::to_string),
                source: "upstream".into(),
            })
        }
    };
    let mut thread = Thread::for_reply_prepared(
        &app.thread_config,
        crate::app::new_thread_id(),
        req.question.clone(),
        req.conversation(),
        reply,
        Some(caller.owner(end_user(req)).into()),
        now_ms(),
    )
    .map_err(|e| ApiError::bad_request(e.to_string()))?;
    let mut app_request = req.for_rewriter();
    end_user_for_upstream(&mut app_request, &caller.id);
    thread.set_app_request(app_request);
    Ok((thread, upstream, native))
}

/// A thread awaiting answers that this request continues, if any: the caller's own thread
/// named by `x-proofgate-thread`, or the caller's one waiting thread of this conversation.
/// When several of the caller's threads wait on the same conversation, none is guessed.
async fn resumable(
    app: &App,
    caller: &Caller,
    req: &ChatRequest,
    headers: &HeaderMap,
) -> Result<Option<(Thread, usize, i64)>, ApiError> {
    let owner = caller.owner(end_user(req));
    let named = headers
        .get(THREAD_HEADER)
        .and_then(|v| v.to_str().ok())
        .is_some();
    let stored = match headers.get(THREAD_HEADER).and_then(|v| v.to_str().ok()) {
        Some(id) => {
            let not_found = || ApiError::not_found(format!("no thread {id} (it may have expired)"));
            if !caller.may_access(app.store.owner_of(id).await?.as_ref(), end_user(req))
                || !(caller.is_admin() || super::api::recorded_owner_is(app, id, &owner).await?)
            {
                return Err(not_found());
            }
            let t = app.store.thread(id).await?.ok_or_else(not_found)?;
            if t.status != "awaiting_input" {
                return Err(ApiError::conflict(format!(
                    "thread {id} is {} and is not waiting for answers",
                    t.status
                )));
            }
            Some(t)
        }
        // A first message, or one after the app's own turns: no thread asked it anything.
        None if !req.answers_assistant => None,
        None => {
            let key = owned_conversation_key(&owner, &req.conversation_before_last);
            let mut waiting = app
                .store
                .threads_by_conversation(&key, "awaiting_input", &owner, 2)
                .await?;
            if waiting.len() > 1 {
                tracing::info!(
                    "{} threads of one owner wait on the same conversation; starting a new one",
                    waiting.len()
                );
            }
            (waiting.len() == 1).then(|| waiting.remove(0))
        }
    };
    let Some(s) = stored else {
        return Ok(None);
    };
    let (thread, saved) = crate::app::load_thread(app, &s)
        .await
        .map_err(ApiError::internal)?;
    if !named && !continues(&thread, &req.conversation_before_last_turns()) {
        // Tampering with the key column, or something benign: a client that changed an
        // earlier message's tool calls (the key leaves them out) or sent turns after its
        // answer, or questions worded by another version of the proxy. Either way this thread
        // did not ask this conversation what it is answering: a new thread answers it, and the
        // waiting one is left as it is.
        tracing::warn!(
            "thread {} was found by its conversation key, but its trail records another \
             conversation (the store's conversation_key column altered, a client that changed \
             an earlier message or added turns after its answer, or questions worded by \
             another version); the request starts a new thread",
            s.id
        );
        return Ok(None);
    }
    Ok(Some((thread, saved, s.updated_at)))
}

/// Whether `before_last` (a request's turns before its last user message) is the conversation a
/// waiting thread's trail records, then each round of its follow-up questions as the proxy
/// worded them, with the user's answer to every round but the last, which is pending. The key
/// that finds a waiting thread is a column no signature covers: without this, swapping two
/// threads' keys in the store sent one conversation's answer to the other thread, whose genuine
/// trail then recorded it and was signed.
fn continues(thread: &Thread, before_last: &[ConversationTurn]) -> bool {
    let Some(mut rest) = before_last.strip_prefix(thread.conversation()) else {
        return false;
    };
    for round in thread.clarifications() {
        let Some((asked, after)) = rest.split_first() else {
            return false;
        };
        if asked.role != TurnRole::Assistant || asked.text != questions_text(&round.questions) {
            return false;
        }
        rest = after;
        match &round.response {
            None => return rest.is_empty(),
            Some(ClarificationResponse::Answered { answers, .. }) => {
                let Some((told, after)) = rest.split_first() else {
                    return false;
                };
                if told.role != TurnRole::User || told.text.trim() != answers.join("\n") {
                    return false;
                }
                rest = after;
            }
            // A skip is the word typed (see `answer_chat`); a new answer to the question
            // follows, which may ask again.
            Some(ClarificationResponse::Skipped { .. }) => {
                let Some((told, after)) = rest.split_first() else {
                    return false;
                };
                if told.role != TurnRole::User || !told.text.trim().eq_ignore_ascii_case("skip") {
                    return false;
                }
                rest = after;
            }
            // Timed out: the user was not there, and the key was not moved to what came after.
            Some(_) => return false,
        }
    }
    // No round is pending: the thread is not waiting for this conversation's answer.
    false
}

/// Reads a JSON body, with a clear error when it is not JSON.
pub(crate) fn json_body(body: &Bytes) -> Result<Value, ApiError> {
    crate::http_body::within_values(body, crate::http_body::MAX_REQUEST_VALUES).map_err(|_| {
        ApiError::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            "body_too_large",
            format!(
                "the body holds more than {} JSON values (numbers, strings, arrays and \
                 objects, counted all the way down): send a shorter conversation, or pack large \
                 data such as a tool's result into one string",
                crate::http_body::MAX_REQUEST_VALUES
            ),
        )
    })?;
    serde_json::from_slice(body)
        .map_err(|e| ApiError::bad_request(format!("the body is not JSON: {e}")))
}

/// Answers one chat request (in the chat-completions shape, whichever API it came in):
/// forwards it upstream or resumes the conversation's waiting thread, drives the loop, and
/// returns the verified answer, the follow-up questions, or the tool calls.
pub(crate) async fn answer_chat(
    app: &Arc<App>,
    caller: &Caller,
    headers: &HeaderMap,
    req: &ChatRequest,
    waits: &mut Waits,
) -> Result<Answered, ApiError> {
    let fail = |e: ApiError| e;
    let owner = caller.owner(end_user(req));
    let mut native = None;

    let (mut thread, upstream, effect, saved) =
        match resumable(app, caller, req, headers).await.map_err(fail)? {
            Some((mut t, saved, seen)) => {
                let text = req.question.trim();
                let input = if text.eq_ignore_ascii_case("skip") {
                    Input::UserSkipped { now: now_ms() }
                } else {
                    Input::UserAnswered {
                        answers: vec![text.to_string()],
                        now: now_ms(),
                    }
                };
                let effect = t
                    .handle(input)
                    .map_err(|e| fail(ApiError::conflict(e.to_string())))?;
                super::api::claim_to_answer(app, t.id(), seen).await?;
                (t, None, effect, saved)
            }
            None => {
                let (t, upstream, reply) = start_thread(app, caller, req, headers, waits)
                    .await
                    .map_err(fail)?;
                native = reply;
                let effect = t.start();
                (t, Some(upstream), effect, 0)
            }
        };
    // Each step is written (and its head signed and logged) ahead of the call it asks for;
    // nothing is answered before every write is durable.
    let mut saver = Saver::new(saved);
    // Dropped before the thread's end is durable (the client left, the deadline passed), the
    // saver ends the thread as ERROR: the work stops, and nothing resumes it for no one.
    saver.ends_if_dropped(app.clone());
    if upstream.is_some() {
        // Recorded with the thread's first save: no saved thread lacks an owner.
        saver.owned_by(owner.clone());
    } else {
        // The user's answer is stored before any call, as `POST /api/threads/{id}/answers`
        // stores it: the thread claimed for this request holds it until then.
        saver.save_now(app, &thread).await?;
    }
    let effect = drive_durably(
        app,
        &caller.id,
        &mut thread,
        effect,
        waits,
        &mut saver,
        None,
    )
    .await
    .map_err(|e| {
        fail(match e {
            DurableDriveError::Drive(e) => e.into(),
            DurableDriveError::Storage(e) => e.into(),
        })
    })?;
    let upstream = upstream.unwrap_or_else(|| completion_body(&req.model, ""));

    if let Effect::Finish(outcome) = &effect {
        if outcome.status == OutcomeStatus::ToolCall {
            saver
                .finish(app, &thread, None)
                .await
                .map_err(|e| fail(e.into()))?;
            let verdict = outcome.status.as_str().to_string();
            app.metrics.verdict(&verdict, thread.iterations());
            return Ok(Answered {
                proofgate: proofgate_object(&thread, &effect, &verdict),
                reply: Reply::ToolCall { upstream, native },
                verdict,
                thread_id: thread.id().to_string(),
                usage_chunk: req.wants_usage_chunk(),
            });
        }
    }
    let mut ending = Ending::Complete;
    let (text, verdict, key) = match &effect {
        Effect::AskUser { questions, .. } => {
            let text = questions_text(questions);
            let key =
                owned_conversation_key(&owner, &conversation_key_after(req.messages(), &text));
            (text, "NEEDS_INPUT".to_string(), Some(key))
        }
        Effect::Finish(outcome) => {
            match outcome.status {
                // Fail-open (UNVERIFIED) is the core's outcome, recorded in the trail; an ERROR
                // returns no answer.
                OutcomeStatus::Error => {
                    let reason = outcome.reason.clone().unwrap_or_default();
                    {
                        saver
                            .finish(app, &thread, None)
                            .await
                            .map_err(|e| fail(e.into()))?;
                        let (status, code, what) = match waits.failed {
                            Some(FailedCall::Validator) => (
                                StatusCode::SERVICE_UNAVAILABLE,
                                "validator_unavailable",
                                "the validator failed",
                            ),
                            Some(FailedCall::Rewriter) => (
                                StatusCode::BAD_GATEWAY,
                                "rewriter_unavailable",
                                "the rewriting LLM failed",
                            ),
                            // The operator's guardrail refused the answer: no answer goes out,
                            // and the client is told so, not that something is down.
                            Some(FailedCall::Blocked) => (
                                StatusCode::UNPROCESSABLE_ENTITY,
                                "answer_blocked",
                                "the validator's guardrail blocked the answer",
                            ),
                            // Asking again starts a thread under the policy now in force.
                            Some(FailedCall::PolicyChanged) => (
                                StatusCode::CONFLICT,
                                "policy_changed",
                                "the policy changed while the thread waited for the user's \
                                 answers; ask again",
                            ),
                            None => (
                                StatusCode::INTERNAL_SERVER_ERROR,
                                "internal_error",
                                "the loop failed",
                            ),
                        };
                        app.metrics.verdict("ERROR", thread.iterations());
                        // The reason (endpoints, response bodies: perhaps an unverified
                        // answer's text) is in the trail and the log, not sent to the client.
                        tracing::warn!("thread {}: ended in ERROR: {reason}", thread.id());
                        let message = if waits.failed == Some(FailedCall::Blocked) {
                            format!(
                                "no answer is returned: {what}; the thread's audit trail ({}) \
                                 records which of its policies did",
                                thread.id()
                            )
                        } else {
                            format!(
                                "the answer could not be verified, so none is returned \
                                 (fail-closed): {what}; the thread's audit trail ({}) records why",
                                thread.id()
                            )
                        };
                        return Err(fail(ApiError::new(status, code, message)));
                    }
                }
                status => {
                    let answer = outcome.answer.clone().unwrap_or_default();
                    // The upstream's own text (as the thread checked it), released as it came.
                    let own = completion_text(&upstream).is_some_and(|t| {
                        proofgate_core::thread::without_invisible(&t).trim() == answer.trim()
                    });
                    if own {
                        ending = Ending::of_upstream(&upstream);
                    }
                    (
                        with_notice(
                            &answer,
                            notice_for(
                                status,
                                outcome.warning.as_deref(),
                                outcome.verified,
                                // Bedrock may leave `contradictingRules` out: only the local
                                // reasoner's IMPOSSIBLE without one names no rule for sure.
                                app.config.validator.kind == crate::config::ValidatorKind::Local
                                    && names_no_rule(&outcome.findings),
                            )
                            .as_deref(),
                        ),
                        status.as_str().to_string(),
                        None,
                    )
                }
            }
        }
        _ => {
            return Err(fail(ApiError::internal(
                "the thread stopped waiting for an LLM or validator",
            )))
        }
    };
    saver
        .finish(app, &thread, key)
        .await
        .map_err(|e| fail(e.into()))?;
    app.metrics.verdict(&verdict, thread.iterations());
    Ok(Answered {
        proofgate: proofgate_object(&thread, &effect, &verdict),
        reply: Reply::Answer {
            text,
            upstream,
            ending,
        },
        verdict,
        thread_id: thread.id().to_string(),
        usage_chunk: req.wants_usage_chunk(),
    })
}

/// Server-sent events with data only (the OpenAI streams).
pub(crate) fn sse(events: Vec<String>) -> Response {
    let stream = futures::stream::iter(
        events
            .into_iter()
            .map(|e| Ok::<_, Infallible>(Event::default().data(e))),
    );
    Sse::new(stream).into_response()
}

/// Server-sent events with a name each (the Responses and Messages streams).
pub(crate) fn named_sse(events: Vec<(String, String)>) -> Response {
    let stream = futures::stream::iter(
        events
            .into_iter()
            .map(|(name, data)| Ok::<_, Infallible>(Event::default().event(name).data(data))),
    );
    Sse::new(stream).into_response()
}

/// How one served API writes results and errors.
pub(crate) trait WireFormat {
    /// A result as JSON or as a stream.
    fn answered(&self, answered: Answered, stream: bool) -> Response;
    /// An error, as JSON with its status (and `Retry-After`), streamed or not: nothing is
    /// streamed before verification, so an error always comes before the stream would start,
    /// where the APIs send theirs too, and the SDKs read (and retry) it by its status. It was
    /// an SSE event with status 200, which hid the status and `Retry-After` from them.
    fn error(&self, error: ApiError, stream: bool) -> Response;
}

/// Runs one request of any served API: reads its body with `parse` into a chat request (and
/// whether the client wants a stream), answers it, and writes the result with `format`,
/// adding the `x-proofgate-*` headers and measuring proofgate's own time.
pub(crate) async fn serve_chat<F: WireFormat>(
    app: &Arc<App>,
    caller: &Caller,
    headers: &HeaderMap,
    body: Bytes,
    parse: impl FnOnce(Value) -> Result<ChatRequest, ApiError>,
    format: F,
) -> Response {
    let started = Instant::now();
    let mut waits = Waits::default();
    let mut stream = false;
    let result = match json_body(&body).and_then(parse) {
        Ok(req) => {
            stream = req.stream;
            answer_chat(app, caller, headers, &req, &mut waits).await
        }
        Err(e) => Err(e),
    };
    let overhead = started.elapsed().saturating_sub(waits.total());
    app.metrics.observe(Stage::Overhead, overhead);
    let overhead_ms = format!("{:.3}", overhead.as_secs_f64() * 1000.0);
    let mut response = match result {
        Ok(a) => {
            let (verdict, thread_id) = (a.verdict.clone(), a.thread_id.clone());
            let mut r = format.answered(a, stream);
            let h = r.headers_mut();
            if let Ok(v) = HeaderValue::from_str(&verdict) {
                h.insert("x-proofgate-verdict", v);
            }
            if let Ok(v) = HeaderValue::from_str(&thread_id) {
                h.insert(THREAD_HEADER, v);
            }
            r
        }
        Err(e) => {
            // Nothing unverified has been sent, and no stream started: the error, with its
            // status, streamed or not.
            let mut r = format.error(e, stream);
            r.headers_mut()
                .insert("x-proofgate-verdict", HeaderValue::from_static("ERROR"));
            r
        }
    };
    if let Ok(v) = HeaderValue::from_str(&overhead_ms) {
        response.headers_mut().insert("x-proofgate-overhead-ms", v);
    }
    response
}

/// The chat-completions wire format.
struct ChatCompletions;

impl WireFormat for ChatCompletions {
    fn answered(&self, a: Answered, stream: bool) -> Response {
        match a.reply {
            Reply::Answer {
                text,
                upstream,
                ending,
            } => {
                let mut completion = verified_completion(upstream, &text, a.proofgate);
                completion["choices"][0]["finish_reason"] =
                    serde_json::json!(ending.finish_reason());
                if stream {
                    let events = completion_events(&completion);
                    sse(if a.usage_chunk {
                        with_usage_chunk(events, &completion)
                    } else {
                        events
                    })
                } else {
                    Json(completion).into_response()
                }
            }
            Reply::ToolCall { upstream, .. } => {
                let completion = tool_call_completion(upstream, a.proofgate);
                if stream {
                    let events = tool_call_events(&completion);
                    sse(if a.usage_chunk {
                        with_usage_chunk(events, &completion)
                    } else {
                        events
                    })
                } else {
                    Json(completion).into_response()
                }
            }
        }
    }

    fn error(&self, e: ApiError, _stream: bool) -> Response {
        e.into_response()
    }
}

/// The handler of `POST /v1/chat/completions`.
pub async fn chat_completions(
    State(app): State<Arc<App>>,
    Extension(caller): Extension<Caller>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let parse = |v: Value| ChatRequest::parse(v).map_err(|e| ApiError::bad_request(e.to_string()));
    serve_chat(&app, &caller, &headers, body, parse, ChatCompletions).await
}

#[cfg(test)]
mod notice_tests {
    use super::*;

    #[test]
    fn an_upstream_refusal_passes_on_its_message_not_its_body() {
        let said = |body: &str| {
            let e = LlmError::Rejected {
                endpoint: "http://u".into(),
                status: 400,
                body: body.into(),
            };
            let r = upstream_error(e, false);
            assert_eq!(r.status, StatusCode::BAD_REQUEST);
            r.message
        };
        assert!(said(r#"{"error": {"message": "max_tokens is too large"}}"#)
            .ends_with(": max_tokens is too large"));
        // The operator's billing is the operator's: not passed on, and not as a 402.
        let billing = upstream_error(
            LlmError::Rejected {
                endpoint: "http://u".into(),
                status: 402,
                body: r#"{"error": {"message": "org-123456 has no credit"}}"#.into(),
            },
            false,
        );
        assert_eq!(billing.status, StatusCode::BAD_GATEWAY);
        assert!(
            !billing.message.contains("org-123456"),
            "{}",
            billing.message
        );
        let quota = upstream_error(
            LlmError::Rejected {
                endpoint: "http://u".into(),
                status: 429,
                body: r#"{"error": {"message": "org-123456 exceeded its quota", "code": "insufficient_quota"}}"#.into(),
            },
            false,
        );
        assert_eq!(quota.status, StatusCode::BAD_GATEWAY);
        assert!(quota.message.contains("HTTP 429") && !quota.message.contains("org-123456"));
        // Ollama's and FastAPI's (vLLM's) shapes.
        assert!(said(r#"{"error": "model not found"}"#).ends_with(": model not found"));
        assert!(said(r#"{"detail": "bad field"}"#).ends_with(": bad field"));
        // A body of another shape is not quoted: it may hold anything.
        for body in [
            r#"{"blocked": "Seniors enter free, as the answer said"}"#,
            "Seniors enter free",
        ] {
            let m = said(body);
            assert!(!m.contains("Seniors"), "{m}");
            assert!(m.contains("see proofgate's log"), "{m}");
        }
    }

    #[test]
    fn follow_up_questions_go_out_with_a_notice() {
        let text = questions_text(&["Are you over 65?".into()]);
        assert!(text.contains("1. Are you over 65?\n"), "{text}");
        assert!(
            text.starts_with(&format!("[proofgate: {QUESTIONS_NOTICE}]\n\n")),
            "{text}"
        );
    }

    #[test]
    fn only_a_plain_valid_answer_goes_out_without_a_notice() {
        let covered = proofgate_core::verdict::NOT_COVERED_WARNING;
        let say = |status, warning| {
            with_notice("A.", notice_for(status, warning, false, false).as_deref())
        };
        assert_eq!(say(OutcomeStatus::Valid, None), "A.");
        // An IMPOSSIBLE explanation whose claims were not proved says so, and also when a part
        // of it is outside the policy, as a VALID answer with one does.
        assert_eq!(
            say(OutcomeStatus::Impossible, None),
            format!("[proofgate: {IMPOSSIBLE_NOTICE}]\n\nA.")
        );
        assert_eq!(
            say(OutcomeStatus::Impossible, Some(covered)),
            format!("[proofgate: {IMPOSSIBLE_NOTICE}; {covered}]\n\nA.")
        );
        // One whose own claims were all proved is not said to be unverified.
        assert_eq!(
            with_notice(
                "A.",
                notice_for(OutcomeStatus::Impossible, None, true, false).as_deref()
            ),
            format!("[proofgate: {IMPOSSIBLE_VERIFIED_NOTICE}]\n\nA.")
        );
        // Facts that contradict each other, not the policy, are said to.
        assert_eq!(
            with_notice(
                "A.",
                notice_for(OutcomeStatus::Impossible, None, false, true).as_deref()
            ),
            format!("[proofgate: {IMPOSSIBLE_FACTS_UNVERIFIED_NOTICE}]\n\nA.")
        );
        let ruleless = proofgate_core::Finding::Impossible(Default::default());
        assert!(names_no_rule(std::slice::from_ref(&ruleless)));
        assert!(!names_no_rule(&[]));
        assert_eq!(
            say(OutcomeStatus::ValidWithWarning, Some(covered)),
            format!("[proofgate: {covered}]\n\nA.")
        );
        assert!(say(OutcomeStatus::MaxIterations, None).contains("NOT VERIFIED"));
        assert!(say(OutcomeStatus::NotCovered, None).contains("outside what the policy covers"));
        // An answer that opens an HTML comment at its end hides nothing: the notice is first.
        let hiding = with_notice("Everyone gets a refund.\n<!--", Some("NOT VERIFIED"));
        assert!(
            hiding.starts_with("[proofgate: NOT VERIFIED]\n\n"),
            "{hiding}"
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proofgate_core::findings::{Finding, SatisfiableFinding};
    use proofgate_core::thread::ThreadConfig;

    const QUESTION: &str = "I am 70. How much is my ticket?";

    /// The owner's end user is `user`, or else `safety_identifier` (OpenAI's replacement), so
    /// an app that sends only the latter keeps its end users apart.
    #[test]
    fn the_end_user_is_user_or_else_the_safety_identifier() {
        let of = |extra: Value| {
            let mut body =
                serde_json::json!({"model": "m", "messages": [{"role": "user", "content": "q"}]});
            body.as_object_mut()
                .unwrap()
                .extend(extra.as_object().unwrap().clone());
            end_user(&ChatRequest::parse(body).unwrap()).map(str::to_string)
        };
        assert_eq!(
            of(serde_json::json!({"safety_identifier": "alice"})).as_deref(),
            Some("alice")
        );
        assert_eq!(
            of(serde_json::json!({"user": "bob", "safety_identifier": "x"})).as_deref(),
            Some("bob")
        );
        assert_eq!(
            of(serde_json::json!({"user": " ", "safety_identifier": "carol"})).as_deref(),
            Some("carol")
        );
        assert_eq!(of(serde_json::json!({})), None);
    }

    fn turn(role: TurnRole, text: &str) -> ConversationTurn {
        ConversationTurn::new(role, text)
    }

    fn satisfiable(now: u64) -> Input {
        Input::Validated {
            verdict_rules: None,
            findings: vec![Finding::Satisfiable(SatisfiableFinding::default())],
            evidence: None,
            now,
        }
    }

    fn ask(question: &str, now: u64) -> Input {
        Input::LlmReplied {
            text: format!("DECISION: ASK_QUESTIONS\nQUESTION: {question}"),
            model: None,
            now,
        }
    }

    /// A thread for the app's conversation (a system turn and the question) that asked one
    /// round of questions, was answered (or told "skip" when `skipped`), and asked a second
    /// round.
    fn twice_asked() -> (Thread, Thread) {
        asked_twice(false)
    }

    fn asked_twice(skipped: bool) -> (Thread, Thread) {
        let conversation = vec![
            turn(TurnRole::System, "You are the park's desk."),
            turn(TurnRole::User, QUESTION),
        ];
        let answer = GivenAnswer {
            text: "You pay 5 dollars.".into(),
            model: None,
            source: "upstream".into(),
        };
        let mut t = Thread::for_reply(
            ThreadConfig::default(),
            "t-1",
            QUESTION,
            conversation,
            ChatbotReply::Answer(answer),
            1,
        )
        .unwrap();
        t.handle(satisfiable(2)).unwrap();
        let asked = t.handle(ask("When do you visit?", 3)).unwrap();
        assert!(matches!(asked, Effect::AskUser { .. }), "{asked:?}");
        let once = t.clone();
        let told = if skipped {
            Input::UserSkipped { now: 4 }
        } else {
            Input::UserAnswered {
                answers: vec!["In the low season.".into()],
                now: 4,
            }
        };
        for input in [
            told,
            Input::LlmReplied {
                text: "In the low season you pay 5 dollars.".into(),
                model: None,
                now: 5,
            },
            satisfiable(6),
        ] {
            t.handle(input).unwrap();
        }
        let asked = t.handle(ask("Do you use credits?", 7)).unwrap();
        assert!(matches!(asked, Effect::AskUser { .. }), "{asked:?}");
        (once, t)
    }

    #[test]
    fn a_waiting_thread_is_continued_only_by_the_conversation_its_trail_records() {
        let (once, twice) = twice_asked();
        let app = [
            turn(TurnRole::System, "You are the park's desk."),
            turn(TurnRole::User, QUESTION),
        ];
        let asked = |q: &str| turn(TurnRole::Assistant, &questions_text(&[q.to_string()]));
        let first = [&app[..], &[asked("When do you visit?")]].concat();
        let second = [
            &first[..],
            &[
                // The answer as the user typed it (the thread keeps it trimmed).
                turn(TurnRole::User, "  In the low season.\n"),
                asked("Do you use credits?"),
            ],
        ]
        .concat();
        assert!(continues(&once, &first));
        assert!(continues(&twice, &second));

        // Another thread's conversation, or this one's at another point: not continued.
        assert!(!continues(&twice, &first), "a round is missing");
        assert!(!continues(&once, &second), "a round the thread never asked");
        assert!(!continues(&once, &app), "no questions before the answer");
        assert!(!continues(&once, &first[1..]), "the system turn is missing");
        let mut other = first.clone();
        other[1] = turn(TurnRole::User, "I am 7. How much is my ticket?");
        assert!(!continues(&once, &other), "another question");
        let mut other = second.clone();
        other[3] = turn(TurnRole::User, "In the high season.");
        assert!(!continues(&twice, &other), "another answer");
        let mut other = first.clone();
        other[2] = asked("Do you use credits?");
        assert!(!continues(&once, &other), "other questions");
        let mut other = first.clone();
        other[2].role = TurnRole::User;
        assert!(!continues(&once, &other), "the questions said by the user");
        let longer = [&first[..], &[turn(TurnRole::User, "and?")]].concat();
        assert!(!continues(&once, &longer), "turns after the questions");

        // Skipped, then asked again: the skip is the word the user typed.
        let (_, after_skip) = asked_twice(true);
        let skipped = |said: &str| {
            [
                &first[..],
                &[turn(TurnRole::User, said), asked("Do you use credits?")],
            ]
            .concat()
        };
        assert!(continues(&after_skip, &skipped(" Skip ")));
        assert!(!continues(&after_skip, &skipped("In the low season.")));
        assert!(
            !continues(&twice, &skipped("skip")),
            "it was answered, not skipped"
        );
    }
}

//! `POST /v1/chat/completions`: the drop-in verified endpoint.

use super::error::ApiError;
use super::summary::proofgate_object;
use crate::app::{drive, from_stored, now_ms, persist, App, FailedCall, Waits};
use crate::llm::{completion_body, completion_text, LlmError};
use crate::metrics::Stage;
use crate::openai::{completion_events, conversation_key_after, verified_completion, ChatRequest};
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::sse::{Event, Sse};
use axum::response::{IntoResponse, Response};
use axum::Json;
use proofgate_core::thread::GivenAnswer;
use proofgate_core::{Effect, Input, OutcomeStatus, Thread};
use serde_json::{json, Value};
use std::convert::Infallible;
use std::sync::Arc;
use std::time::Instant;

/// The header that names the thread (in responses, and in requests that answer questions).
pub const THREAD_HEADER: &str = "x-proofgate-thread";

/// A verified (or clearly marked) answer, ready to send.
struct Answered {
    completion: Value,
    verdict: String,
    thread_id: String,
}

/// The text shown in the chat when follow-up questions are needed.
fn questions_text(questions: &[String]) -> String {
    let mut text = String::from("To answer this precisely I need a little more information:\n");
    for (i, q) in questions.iter().enumerate() {
        text.push_str(&format!("{}. {q}\n", i + 1));
    }
    text.push_str("\n(Reply with your answers, or \"skip\" to get an answer without them.)");
    text
}

/// The answer text with a notice when it is not a plain VALID answer; the notice is part of
/// what the end user sees, so an unverified answer is never mistaken for a verified one.
fn with_notice(answer: &str, notice: Option<&str>) -> String {
    match notice {
        Some(n) if !n.is_empty() => format!("{answer}\n\n[proofgate: {n}]"),
        _ => answer.to_string(),
    }
}

fn upstream_error(e: LlmError) -> ApiError {
    match e {
        LlmError::Rejected { status, body, .. } => {
            let status = StatusCode::from_u16(status).unwrap_or(StatusCode::BAD_GATEWAY);
            let upstream: Value = serde_json::from_str(&body).unwrap_or(json!(body));
            let message = upstream
                .pointer("/error/message")
                .and_then(Value::as_str)
                .map(str::to_string)
                .unwrap_or_else(|| body.clone());
            ApiError::new(
                status,
                "upstream_error",
                format!(
                    "the upstream LLM rejected the request (HTTP {}): {message}",
                    status.as_u16()
                ),
            )
        }
        LlmError::Unavailable { .. } => ApiError::new(
            StatusCode::BAD_GATEWAY,
            "upstream_unavailable",
            format!("{e}; no answer was returned"),
        ),
        other => ApiError::new(StatusCode::BAD_GATEWAY, "upstream_error", other.to_string()),
    }
}

async fn start_thread(
    app: &App,
    req: &ChatRequest,
    headers: &HeaderMap,
    waits: &mut Waits,
) -> Result<(Thread, Value), ApiError> {
    let auth = headers
        .get(axum::http::header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok());
    let started = Instant::now();
    let upstream = app.upstream.forward(req.body.clone(), auth).await;
    waits.upstream += started.elapsed();
    app.metrics.observe(Stage::Upstream, started.elapsed());
    let upstream = upstream.map_err(upstream_error)?;
    let answer = completion_text(&upstream).unwrap_or_default();
    if answer.trim().is_empty() {
        return Err(ApiError::new(
            StatusCode::BAD_GATEWAY,
            "upstream_error",
            "the upstream LLM returned no answer text (choices[0].message.content is empty)",
        ));
    }
    let model = upstream
        .get("model")
        .and_then(Value::as_str)
        .map(str::to_string);
    let thread = Thread::with_answer(
        app.thread_config.clone(),
        uuid::Uuid::new_v4().to_string(),
        req.question.clone(),
        GivenAnswer {
            text: answer,
            model,
            source: "upstream".into(),
        },
        now_ms(),
    )
    .map_err(|e| ApiError::bad_request(e.to_string()))?;
    Ok((thread, upstream))
}

/// A thread awaiting answers that this request continues, if any.
async fn resumable(
    app: &App,
    req: &ChatRequest,
    headers: &HeaderMap,
) -> Result<Option<(Thread, usize)>, ApiError> {
    let stored = match headers.get(THREAD_HEADER).and_then(|v| v.to_str().ok()) {
        Some(id) => {
            let t = app.store.thread(id).await?.ok_or_else(|| {
                ApiError::not_found(format!("no thread {id} (it may have expired)"))
            })?;
            if t.status != "awaiting_input" {
                return Err(ApiError::conflict(format!(
                    "thread {id} is {} and is not waiting for answers",
                    t.status
                )));
            }
            Some(t)
        }
        None => {
            app.store
                .thread_by_conversation(&req.conversation_before_last, "awaiting_input")
                .await?
        }
    };
    match stored {
        None => Ok(None),
        Some(s) => {
            let trail = app.store.audit_trail(&s.id).await?;
            let saved = trail.len();
            from_stored(&s, trail)
                .map(|t| Some((t, saved)))
                .map_err(ApiError::internal)
        }
    }
}

async fn answer(
    app: &App,
    headers: &HeaderMap,
    body: Bytes,
    waits: &mut Waits,
) -> Result<(Answered, bool), (ApiError, bool)> {
    let value: Value = serde_json::from_slice(&body).map_err(|e| {
        (
            ApiError::bad_request(format!("the body is not JSON: {e}")),
            false,
        )
    })?;
    let req =
        ChatRequest::parse(value).map_err(|e| (ApiError::bad_request(e.to_string()), false))?;
    let stream = req.stream;
    let fail = |e: ApiError| (e, stream);

    let (mut thread, upstream, effect, saved) =
        match resumable(app, &req, headers).await.map_err(fail)? {
            Some((mut t, saved)) => {
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
                (t, None, effect, saved)
            }
            None => {
                let (t, upstream) = start_thread(app, &req, headers, waits)
                    .await
                    .map_err(fail)?;
                let effect = t.start();
                (t, Some(upstream), effect, 0)
            }
        };
    let effect = drive(app, &mut thread, effect, waits)
        .await
        .map_err(|e| fail(e.into()))?;
    let upstream = upstream.unwrap_or_else(|| completion_body(&req.model, ""));

    let (text, verdict, key) = match &effect {
        Effect::AskUser { questions, .. } => {
            let text = questions_text(questions);
            let key = conversation_key_after(req.messages(), &text);
            (text, "NEEDS_INPUT".to_string(), Some(key))
        }
        Effect::Finish(outcome) => {
            match outcome.status {
                OutcomeStatus::Error => {
                    let reason = outcome.reason.clone().unwrap_or_default();
                    let given = thread
                        .steps()
                        .first()
                        .and_then(|s| s.reply.as_ref())
                        .map(|r| r.text.clone());
                    match (app.fail_open(), given) {
                    (true, Some(answer)) => (
                        with_notice(&answer, Some("UNVERIFIED: this answer could not be checked against the policy")),
                        "UNVERIFIED".to_string(),
                        None,
                    ),
                    _ => {
                        persist(app, &thread, saved, None).await.map_err(|e| fail(e.into()))?;
                        let (status, code) = match waits.failed {
                            Some(FailedCall::Validator) => (StatusCode::SERVICE_UNAVAILABLE, "validator_unavailable"),
                            Some(FailedCall::Rewriter) => (StatusCode::BAD_GATEWAY, "rewriter_unavailable"),
                            None => (StatusCode::INTERNAL_SERVER_ERROR, "internal_error"),
                        };
                        app.metrics.verdict("ERROR", thread.iterations());
                        return Err(fail(ApiError::new(
                            status,
                            code,
                            format!("the answer could not be verified, so none is returned (fail-closed): {reason}"),
                        )));
                    }
                }
                }
                status => {
                    let answer = outcome.answer.clone().unwrap_or_default();
                    let notice = match status {
                        OutcomeStatus::Valid | OutcomeStatus::Impossible => None,
                        _ => outcome.warning.as_deref().or(Some(match status {
                            OutcomeStatus::MaxIterations => {
                                "NOT VERIFIED: no answer could be verified against the policy"
                            }
                            OutcomeStatus::NotCovered => {
                                "this answer is outside what the policy covers"
                            }
                            _ => "",
                        })),
                    };
                    (
                        with_notice(&answer, notice),
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
    persist(app, &thread, saved, key)
        .await
        .map_err(|e| fail(e.into()))?;
    app.metrics.verdict(&verdict, thread.iterations());
    let completion = verified_completion(
        upstream,
        &text,
        proofgate_object(&thread, &effect, &verdict),
    );
    Ok((
        Answered {
            completion,
            verdict,
            thread_id: thread.id().to_string(),
        },
        stream,
    ))
}

fn sse(events: Vec<String>) -> Response {
    let stream = futures::stream::iter(
        events
            .into_iter()
            .map(|e| Ok::<_, Infallible>(Event::default().data(e))),
    );
    Sse::new(stream).into_response()
}

/// The handler.
pub async fn chat_completions(
    State(app): State<Arc<App>>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let started = Instant::now();
    let mut waits = Waits::default();
    let result = answer(&app, &headers, body, &mut waits).await;
    let overhead = started.elapsed().saturating_sub(waits.total());
    app.metrics.observe(Stage::Overhead, overhead);
    let overhead_ms = format!("{:.3}", overhead.as_secs_f64() * 1000.0);
    let mut response = match result {
        Ok((a, stream)) => {
            let mut r = if stream {
                sse(completion_events(&a.completion))
            } else {
                Json(a.completion).into_response()
            };
            let h = r.headers_mut();
            if let Ok(v) = HeaderValue::from_str(&a.verdict) {
                h.insert("x-proofgate-verdict", v);
            }
            if let Ok(v) = HeaderValue::from_str(&a.thread_id) {
                h.insert(THREAD_HEADER, v);
            }
            r
        }
        Err((e, true)) => {
            // Nothing unverified has been sent; the stream carries only the error.
            let mut events = vec![e.body().to_string()];
            events.push("[DONE]".into());
            let mut r = sse(events);
            r.headers_mut()
                .insert("x-proofgate-verdict", HeaderValue::from_static("ERROR"));
            r
        }
        Err((e, false)) => {
            let mut r = e.into_response();
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

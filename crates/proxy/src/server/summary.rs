//! JSON views of threads for the API and the `proofgate` object of chat responses.

use super::auth::Caller;
use crate::keys::Scope;
use proofgate_core::findings::{Finding, Statement};
use proofgate_core::thread::Step;
use proofgate_core::{Effect, Thread};
use serde_json::{json, Value};

/// What a client is shown of statements: each one's logic in the policy's English when the
/// thread has a vocabulary to render it with (see [`Thread::statement_in_english`]), else its
/// text as the finding gives it (Bedrock's, or the logic).
fn texts(thread: Option<&Thread>, statements: &[Statement]) -> Vec<String> {
    statements
        .iter()
        .map(|s| {
            thread
                .zip(s.logic.as_deref())
                .and_then(|(t, logic)| t.statement_in_english(logic))
                .unwrap_or_else(|| s.display_text().to_string())
        })
        .collect()
}

/// One line per finding: kind, premises, claims, rules; statements in the policy's English
/// where `thread` can render them.
pub fn findings_summary(thread: Option<&Thread>, findings: &[Finding]) -> Vec<Value> {
    findings_lines(thread, findings, true)
}

/// [`findings_summary`], with or without the translations' texts.
fn findings_lines(thread: Option<&Thread>, findings: &[Finding], with_text: bool) -> Vec<Value> {
    findings
        .iter()
        .map(|f| {
            let t = f.translation();
            let rules: Vec<&str> = match f {
                Finding::Valid(v) => v.supporting_rules.iter().flatten().collect::<Vec<_>>(),
                Finding::Invalid(c) | Finding::Impossible(c) => {
                    c.contradicting_rules.iter().flatten().collect()
                }
                _ => Vec::new(),
            }
            .into_iter()
            .filter_map(|r| r.identifier.as_deref())
            .collect();
            if !with_text {
                return json!({"kind": f.kind().as_str(), "rules": rules});
            }
            json!({
                "kind": f.kind().as_str(),
                "premises": t.map(|t| texts(thread, t.premises())).unwrap_or_default(),
                "claims": t.map(|t| texts(thread, t.claims())).unwrap_or_default(),
                "rules": rules,
                "confidence": t.and_then(|t| t.confidence()),
            })
        })
        .collect()
}

/// The `proofgate` object added to chat completions.
///
/// While the thread asks the user questions, the findings are those of an answer that was
/// not verified and is not sent: they go out as kinds and rules only, since their premises
/// and claims are that answer's content in the translators' words.
pub fn proofgate_object(thread: &Thread, effect: &Effect, verdict: &str) -> Value {
    let (findings, questions, warning, verified) = match effect {
        Effect::Finish(o) => (
            findings_summary(Some(thread), &o.findings),
            Vec::new(),
            o.warning.clone(),
            o.verified,
        ),
        Effect::AskUser { questions, .. } => (
            findings_lines(Some(thread), &last_findings(thread), false),
            questions.clone(),
            None,
            false,
        ),
        _ => (Vec::new(), Vec::new(), None, false),
    };
    json!({
        "verdict": verdict,
        "verified": verified,
        "iterations": thread.iterations(),
        "threadId": thread.id(),
        "warning": warning,
        "questions": questions,
        "findings": findings,
        "audit": format!("/api/threads/{}/audit", thread.id()),
    })
}

fn last_findings(thread: &Thread) -> Vec<Finding> {
    thread
        .steps()
        .iter()
        .rev()
        .find_map(|s| s.validation.as_ref())
        .map(|v| v.findings.clone())
        .unwrap_or_default()
}

/// [`thread_view`] as `caller` may see it. Starting or answering a thread needs only `chat`,
/// while the thread's iterations and the policy need `read` (see the scopes in `auth`): for a
/// caller without `read`, the view leaves out the thread's configuration (the policy's rules
/// and variables, the translators' vocabulary) and why a failed thread failed, and shows each
/// step only in outline (see [`step_outline`]).
pub fn thread_view_for(caller: &Caller, thread: &Thread, status: &str) -> Value {
    let mut view = thread_view(thread, status);
    if !caller.has(Scope::Read) {
        if let Some(v) = view.as_object_mut() {
            v.remove("config");
            v.insert(
                "steps".into(),
                thread.steps().iter().map(step_outline).collect(),
            );
            // Why a thread failed names endpoints and quotes their responses (perhaps an
            // unverified answer's text): the trail and the log keep it, as on `/v1`.
            if let Some(outcome) = v.get_mut("outcome").and_then(Value::as_object_mut) {
                outcome.remove("reason");
                if let Some(findings) = outcome.get_mut("findings") {
                    in_policy_english(thread, findings);
                }
            }
        }
    }
    view
}

/// Each statement in `value` (an object with `logic` and `naturalLanguage`) gets its logic in
/// the policy's English for its text, where the thread can render it, and the text translators
/// left untranslated goes: the translators' own words are unchecked LLM text (see
/// [`Thread::statement_in_english`]), and the untranslated spans quote answers never released.
fn in_policy_english(thread: &Thread, value: &mut Value) {
    match value {
        Value::Object(map) => {
            map.remove("untranslatedPremises");
            map.remove("untranslatedClaims");
            let english = map
                .get("logic")
                .and_then(Value::as_str)
                .filter(|_| map.contains_key("naturalLanguage"))
                .and_then(|logic| thread.statement_in_english(logic));
            if let Some(english) = english {
                map.insert("naturalLanguage".into(), Value::String(english));
            }
            map.values_mut().for_each(|v| in_policy_english(thread, v));
        }
        Value::Array(items) => items.iter_mut().for_each(|v| in_policy_english(thread, v)),
        _ => {}
    }
}

/// A step as a caller without `read` sees it: why the LLM was called and what the validation
/// found, by kinds, rules and verdict, without any text. A step's answer is not always one
/// that was released: the answer a thread holds back while it asks the user, and each answer a
/// rewrite replaced, are unverified, and their findings' premises and claims are that answer
/// in the translators' words (as on `/v1`, see [`proofgate_object`]). The prompts quote the
/// policy. The answer released, if any, is the outcome's.
fn step_outline(step: &Step) -> Value {
    json!({
        "purpose": step.purpose,
        "addressing": step.addressing,
        "requestedAt": step.requested_at,
        "role": step.role,
        "validation": step.validation.as_ref().map(|v| json!({
            "iteration": v.iteration,
            "verdict": v.verdict,
            "findings": findings_lines(None, &v.findings, false),
            "at": v.at,
        })),
    })
}

/// The full view of a thread: every iteration with prompt, answer, decision and findings.
pub fn thread_view(thread: &Thread, status: &str) -> Value {
    let pending = match thread.pending_effect() {
        Effect::AskUser {
            questions,
            deadline,
        } => json!({"questions": questions, "deadline": deadline}),
        _ => Value::Null,
    };
    json!({
        "id": thread.id(),
        "status": status,
        "phase": thread.phase().as_str(),
        "question": thread.question(),
        "createdAt": thread.created_at(),
        "iterations": thread.iterations(),
        "config": thread.config(),
        "steps": thread.steps(),
        "clarifications": thread.clarifications(),
        "conversation": thread.conversation(),
        "pending": pending,
        "outcome": thread.outcome(),
        "verdict": thread.outcome().map(|o| o.status.as_str()),
        "lastVerdict": thread
            .steps()
            .iter()
            .rev()
            // The verdict the core recorded, by the rules of the thread's own format.
            .find_map(|s| s.validation.as_ref())
            .map(|v| &v.verdict),
    })
}

//! Typed bodies of the first and the final record.

use super::FORMAT_VERSION;
use crate::conversation::ConversationTurn;
use crate::thread::{ClarificationExchange, Outcome, ThreadConfig};
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Body of the THREAD_STARTED record: everything replay needs to rebuild the thread.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ThreadStarted {
    /// The audit format (record encoding and loop behaviour) the trail was written in.
    pub format_version: u32,
    /// The software that wrote it, for people reading the trail (replay ignores it).
    pub producer: String,
    /// The thread id.
    pub thread_id: String,
    /// The user's question.
    pub question: String,
    /// The thread's configuration. From format 2 its policy (`policy`, and
    /// `translation.vocabulary`) is recorded apart, as the document named in
    /// `policy_document` (see [`super::policy_document`]).
    pub config: ThreadConfig,
    /// The name of the policy document that holds the configuration's policy (format 2 on,
    /// when the policy holds anything).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub policy_document: Option<String>,
    /// The first answer, when the caller supplied it (the chatbot's own upstream reply, or an
    /// answer pasted in to be checked) instead of asking the thread's LLM for one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub given_answer: Option<GivenAnswer>,
    /// The app's whole conversation before the answer (system prompt, earlier turns, tool
    /// calls and results), when the caller sent one: translators read it as context.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conversation: Option<Vec<ConversationTurn>>,
    /// The chatbot's reply was a call of the app's tools, not an answer: the thread records
    /// it and ends with TOOL_CALL (nothing to verify until the tool results come back).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_call: Option<GivenToolCall>,
    /// Who the thread belongs to, when the caller named an owner: the trail's signed heads then
    /// cover it, so a store that hands the thread to someone else is caught (absent in trails
    /// written before owners were recorded).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owner: Option<ThreadOwner>,
}

/// The owner of a thread: the API key that started it (its id, never the secret) and the
/// end user the request named. A store keeps the same pair beside the thread to decide who may
/// read and continue it; the recorded one is what that must match.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ThreadOwner {
    /// The id of the API key that started the thread.
    pub key_id: String,
    /// The end user the request named (empty for none).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub end_user: String,
}

/// A reply of the chatbot that calls the app's tools instead of answering.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct GivenToolCall {
    /// The calls, in order.
    pub calls: Vec<ToolCall>,
    /// Text the reply carried alongside the calls, if any (never returned as an answer).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    /// The model that wrote it, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
}

/// One tool call.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ToolCall {
    /// The call's id, when the API gives one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// The tool (function) name.
    pub name: String,
    /// Its arguments, as the model wrote them (usually JSON).
    pub arguments: String,
}

/// An answer supplied with the question rather than generated for it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct GivenAnswer {
    /// The answer, verbatim.
    pub text: String,
    /// The model that wrote it, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// Where it came from, for people reading the trail (e.g. `upstream`, `user`).
    pub source: String,
}

impl ThreadStarted {
    /// The start of a thread written by this version.
    pub fn new(thread_id: String, question: String, config: ThreadConfig) -> Self {
        ThreadStarted {
            format_version: FORMAT_VERSION,
            producer: concat!("proofgate-core ", env!("CARGO_PKG_VERSION")).to_string(),
            thread_id,
            question,
            config,
            policy_document: None,
            given_answer: None,
            conversation: None,
            tool_call: None,
            owner: None,
        }
    }

    /// The owner a trail's THREAD_STARTED record names (its first record, as a trail is
    /// stored: records as JSON objects): `Ok(None)` for a trail written before owners were
    /// recorded, or one whose thread was started without one.
    pub fn owner_in_trail(trail: &[Value]) -> Result<Option<ThreadOwner>, String> {
        let Some(first) = trail.first() else {
            return Ok(None);
        };
        if first.get("kind").and_then(Value::as_str) != Some("THREAD_STARTED") {
            return Err("the trail does not start with THREAD_STARTED".into());
        }
        match first.get("body").and_then(|b| b.get("owner")) {
            None => Ok(None),
            Some(owner) => serde_json::from_value(owner.clone())
                .map(Some)
                .map_err(|e| format!("its THREAD_STARTED record names an unreadable owner: {e}")),
        }
    }
}

/// Body of a final record (VALID_RESPONSE, MAX_ITERATIONS_REACHED, IMPOSSIBLE_RESPONSE,
/// NOT_COVERED, ERROR): what was returned, for whom, on what evidence.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FinalRecord {
    /// When the thread finished (ms since the epoch).
    pub timestamp: u64,
    /// The thread id.
    pub thread_id: String,
    /// The user's question.
    pub question: String,
    /// Status, returned answer, model id, findings, iterations, verified.
    pub outcome: Outcome,
    /// The validator's proof material for the returned answer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub evidence: Option<Value>,
    /// Every follow-up exchange: questions, and whether they were answered or skipped.
    pub clarifications: Vec<ClarificationExchange>,
}

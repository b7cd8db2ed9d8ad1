//! Typed bodies of the first and the final record.

use super::FORMAT_VERSION;
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
    /// The thread's configuration.
    pub config: ThreadConfig,
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

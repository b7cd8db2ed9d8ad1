//! Audit records and their kinds.

use super::canonical::record_hash;
use crate::thread::{Effect, Input, OutcomeStatus};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::fmt;

/// The `prev` of the first record: 64 zeros.
pub const GENESIS_PREV: &str = "0000000000000000000000000000000000000000000000000000000000000000";

/// What a record is about. Inputs and effects are named after the [`Input`] / [`Effect`]
/// variant; a finished thread's last record is named after the event.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum RecordKind {
    /// First record: format version, thread id, question, configuration.
    ThreadStarted,
    /// Input: the LLM replied.
    LlmReplied,
    /// Input: the validator returned findings (and evidence).
    Validated,
    /// Input: the user answered follow-up questions.
    UserAnswered,
    /// Input: the user skipped follow-up questions.
    UserSkipped,
    /// Input: time passed.
    Tick,
    /// Input: the caller gave up on the LLM or validator.
    Failed,
    /// Input: the validator's guardrail blocked the answer.
    Blocked,
    /// Input: a translator replied.
    TranslatorReplied,
    /// Input: a translator's endpoint failed.
    TranslatorFailed,
    /// Effect: call translators.
    Translate,
    /// Effect: check translations with the solver.
    Check,
    /// Effect: call the LLM.
    CallLlm,
    /// Effect: validate a text.
    Validate,
    /// Effect: ask the user.
    AskUser,
    /// Final: VALID or VALID_WITH_WARNING.
    ValidResponse,
    /// Final: iteration limit reached, not verified.
    MaxIterationsReached,
    /// Final: the question's premises contradict the policy; validated explanation returned.
    ImpossibleResponse,
    /// Final: nothing in the answer is covered by the policy.
    NotCovered,
    /// Final: fail-open; the chatbot's answer was returned unchecked.
    Unverified,
    /// Final: the thread failed.
    Error,
    /// Final: the chatbot called the app's tools; the calls were returned, nothing verified.
    ToolCall,
}

impl RecordKind {
    /// Upper-case name, as in JSON.
    pub fn as_str(self) -> &'static str {
        match self {
            RecordKind::ThreadStarted => "THREAD_STARTED",
            RecordKind::LlmReplied => "LLM_REPLIED",
            RecordKind::Validated => "VALIDATED",
            RecordKind::UserAnswered => "USER_ANSWERED",
            RecordKind::UserSkipped => "USER_SKIPPED",
            RecordKind::Tick => "TICK",
            RecordKind::Failed => "FAILED",
            RecordKind::Blocked => "BLOCKED",
            RecordKind::TranslatorReplied => "TRANSLATOR_REPLIED",
            RecordKind::TranslatorFailed => "TRANSLATOR_FAILED",
            RecordKind::Translate => "TRANSLATE",
            RecordKind::Check => "CHECK",
            RecordKind::CallLlm => "CALL_LLM",
            RecordKind::Validate => "VALIDATE",
            RecordKind::AskUser => "ASK_USER",
            RecordKind::ValidResponse => "VALID_RESPONSE",
            RecordKind::MaxIterationsReached => "MAX_ITERATIONS_REACHED",
            RecordKind::ImpossibleResponse => "IMPOSSIBLE_RESPONSE",
            RecordKind::NotCovered => "NOT_COVERED",
            RecordKind::Unverified => "UNVERIFIED",
            RecordKind::Error => "ERROR",
            RecordKind::ToolCall => "TOOL_CALL",
        }
    }

    /// The kind of an input's record.
    pub fn of_input(input: &Input) -> RecordKind {
        match input {
            Input::LlmReplied { .. } => RecordKind::LlmReplied,
            Input::Validated { .. } => RecordKind::Validated,
            Input::UserAnswered { .. } => RecordKind::UserAnswered,
            Input::UserSkipped { .. } => RecordKind::UserSkipped,
            Input::Tick { .. } => RecordKind::Tick,
            Input::Failed { .. } => RecordKind::Failed,
            Input::Blocked { .. } => RecordKind::Blocked,
            Input::TranslatorReplied { .. } => RecordKind::TranslatorReplied,
            Input::TranslatorFailed { .. } => RecordKind::TranslatorFailed,
        }
    }

    /// The kind of an effect's record; `None` for Finish, whose record is a final one, and for
    /// a Translate with no new calls (nothing happens).
    pub fn of_effect(effect: &Effect) -> Option<RecordKind> {
        match effect {
            Effect::Translate { calls } if calls.is_empty() => None,
            Effect::Translate { .. } => Some(RecordKind::Translate),
            Effect::Check { .. } => Some(RecordKind::Check),
            Effect::CallLlm { .. } => Some(RecordKind::CallLlm),
            Effect::Validate { .. } => Some(RecordKind::Validate),
            Effect::AskUser { .. } => Some(RecordKind::AskUser),
            Effect::Finish(_) => None,
        }
    }

    /// The final record's kind for an outcome status.
    pub fn final_for(status: OutcomeStatus) -> RecordKind {
        match status {
            OutcomeStatus::Valid | OutcomeStatus::ValidWithWarning => RecordKind::ValidResponse,
            OutcomeStatus::MaxIterations => RecordKind::MaxIterationsReached,
            OutcomeStatus::Impossible => RecordKind::ImpossibleResponse,
            OutcomeStatus::NotCovered => RecordKind::NotCovered,
            OutcomeStatus::Unverified => RecordKind::Unverified,
            OutcomeStatus::Error => RecordKind::Error,
            OutcomeStatus::ToolCall => RecordKind::ToolCall,
        }
    }

    /// Whether this kind ends its thread (a final record: nothing is recorded after it).
    pub fn is_final(self) -> bool {
        matches!(
            self,
            RecordKind::ValidResponse
                | RecordKind::MaxIterationsReached
                | RecordKind::ImpossibleResponse
                | RecordKind::NotCovered
                | RecordKind::Unverified
                | RecordKind::Error
                | RecordKind::ToolCall
        )
    }

    /// Whether this kind records an input (what replay feeds to the machine).
    pub fn is_input(self) -> bool {
        matches!(
            self,
            RecordKind::LlmReplied
                | RecordKind::Validated
                | RecordKind::UserAnswered
                | RecordKind::UserSkipped
                | RecordKind::Tick
                | RecordKind::Failed
                | RecordKind::Blocked
                | RecordKind::TranslatorReplied
                | RecordKind::TranslatorFailed
        )
    }
}

impl fmt::Display for RecordKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One entry of an audit trail.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AuditRecord {
    /// Position in the trail, from 0.
    pub seq: u64,
    /// The previous record's hash ([`GENESIS_PREV`] for the first).
    pub prev: String,
    /// When it happened, ms since the epoch (the input's `now`).
    pub at: u64,
    /// What it is.
    pub kind: RecordKind,
    /// The input, the effect, or the event's fields (a duplicated key in any of its objects
    /// is refused when read, see `strict_json`).
    #[serde(deserialize_with = "super::strict_json::value")]
    pub body: Value,
    /// SHA-256 (lower-case hex) over the canonical encoding of the other fields; see
    /// [`crate::audit::canonical`].
    pub hash: String,
}

impl AuditRecord {
    /// The hash this record's contents call for.
    pub fn expected_hash(&self) -> String {
        record_hash(self.seq, &self.prev, self.at, self.kind, &self.body)
    }
}

/// Appends a record to a trail, chaining it to the last one.
pub fn append(trail: &mut Vec<AuditRecord>, kind: RecordKind, at: u64, body: Value) {
    let seq = trail.len() as u64;
    let prev = trail
        .last()
        .map_or_else(|| GENESIS_PREV.to_string(), |r| r.hash.clone());
    let hash = record_hash(seq, &prev, at, kind, &body);
    trail.push(AuditRecord {
        seq,
        prev,
        at,
        kind,
        body,
        hash,
    });
}

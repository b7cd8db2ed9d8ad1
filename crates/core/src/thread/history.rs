//! The per-step history a thread keeps for its API and the debug panel: every LLM call, what
//! the machine made of the reply, and the validation that followed; and every follow-up
//! exchange with the user.

use super::io::LlmPurpose;
use crate::decision::Decision;
use crate::findings::Finding;
use crate::verdict::{AggregateVerdict, Verdict};
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// What a validated text is: an answer to the question, or an explanation of why the question
/// cannot be answered (IMPOSSIBLE).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum AnswerRole {
    /// An answer to the question.
    Answer,
    /// The LLM's explanation that the question's premises contradict the policy.
    ImpossibleExplanation,
}

/// The LLM's reply to a step's prompt.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LlmReply {
    /// The reply, verbatim.
    pub text: String,
    /// The model, when reported.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// When it arrived.
    pub at: u64,
}

/// The validation of a step's text.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Validation {
    /// Which validation of the thread this was, from 1.
    pub iteration: u32,
    /// The findings, as the validator returned them.
    pub findings: Vec<Finding>,
    /// Their aggregate verdict.
    pub verdict: AggregateVerdict,
    /// The validator's proof material, verbatim.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub evidence: Option<Value>,
    /// Which conversation turn each premise came from (threads with a conversation).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub premise_sources: Vec<crate::conversation::PremiseSource>,
    /// When it finished.
    pub at: u64,
}

/// One LLM call and what followed from it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Step {
    /// Why the LLM was called.
    pub purpose: LlmPurpose,
    /// The verdict of the finding the prompt addressed (REWRITE steps).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub addressing: Option<Verdict>,
    /// The prompt sent.
    pub prompt: String,
    /// When the call was requested.
    pub requested_at: u64,
    /// The reply, once it arrived.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reply: Option<LlmReply>,
    /// The parsed decision (REWRITE steps).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decision: Option<Decision>,
    /// Why the machine did not follow the decision literally, if it did not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
    /// The text sent for validation, and what it is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub answer: Option<String>,
    /// What the text is (set with `answer`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub role: Option<AnswerRole>,
    /// Its validation, once it arrived.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub validation: Option<Validation>,
}

impl Step {
    /// A step whose LLM call was just requested: nothing has come back yet.
    pub fn requested(
        purpose: LlmPurpose,
        addressing: Option<Verdict>,
        prompt: String,
        requested_at: u64,
    ) -> Step {
        Step {
            purpose,
            addressing,
            prompt,
            requested_at,
            reply: None,
            decision: None,
            note: None,
            answer: None,
            role: None,
            validation: None,
        }
    }
}

/// How the user responded to follow-up questions.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "status", rename_all = "SCREAMING_SNAKE_CASE")]
pub enum ClarificationResponse {
    /// The user answered.
    Answered {
        /// The answers, one per question or a single free-text reply.
        answers: Vec<String>,
        /// When.
        at: u64,
    },
    /// The user skipped the questions.
    Skipped {
        /// When.
        at: u64,
    },
    /// The deadline passed without an answer; handled like a skip.
    TimedOut {
        /// When the tick that noticed arrived.
        at: u64,
    },
}

/// One round of follow-up questions.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ClarificationExchange {
    /// The questions asked.
    pub questions: Vec<String>,
    /// When they were asked.
    pub asked_at: u64,
    /// The user's response; `None` while pending.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub response: Option<ClarificationResponse>,
}

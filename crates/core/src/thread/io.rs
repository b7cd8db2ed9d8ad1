//! What goes into a thread ([`Input`]) and what comes out ([`Effect`]).
//!
//! In JSON both are objects tagged by `type` (`{"type": "LlmReplied", "text": "...", "now": 0}`)
//! with camelCase fields. Times are milliseconds since the Unix epoch, supplied by the caller:
//! the thread has no clock.

use super::outcome::Outcome;
use crate::findings::Finding;
use crate::translation::{TranslatorCall, TranslatorOutput};
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Why the thread wants the LLM called.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum LlmPurpose {
    /// The first answer to the question; the reply is the answer.
    InitialAnswer,
    /// Address the findings of the last validation; the reply is a decision
    /// (`DECISION: REWRITE | ASK_QUESTIONS | IMPOSSIBLE`).
    Rewrite,
    /// A new answer after the user answered follow-up questions; the reply is the answer.
    RegenerateWithClarifications,
    /// A new answer after the user skipped follow-up questions (or the time ran out).
    RegenerateAfterSkip,
}

impl LlmPurpose {
    /// Whether the reply is expected in the decision format rather than as a plain answer.
    pub fn expects_decision(self) -> bool {
        self == LlmPurpose::Rewrite
    }
}

/// Something that happened outside the thread, with the time it happened.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all_fields = "camelCase", deny_unknown_fields)]
pub enum Input {
    /// The LLM answered the last [`Effect::CallLlm`].
    LlmReplied {
        /// The reply, verbatim.
        text: String,
        /// The model that produced it, for the audit trail.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        model: Option<String>,
        /// When the reply arrived.
        now: u64,
    },
    /// The validator checked the last [`Effect::Validate`].
    Validated {
        /// Its findings, in the ApplyGuardrail shape.
        findings: Vec<Finding>,
        /// Proof material to keep in the audit trail (policy version hash, SMT-LIB of the
        /// model, premises and claims, the solver's answer): opaque to the thread.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        evidence: Option<Value>,
        /// The audit format whose verdict rules judge these findings, when it is not the
        /// thread's own: set by [`crate::Thread::handle`] for a thread started by an older
        /// format (one that waited across an upgrade), so it is judged by today's rules and
        /// its trail says so. Never older than the thread's format, nor newer than this
        /// version's.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        verdict_rules: Option<u32>,
        /// When the validation finished.
        now: u64,
    },
    /// A translator replied to a [`TranslatorCall`] of an [`Effect::Translate`] (in any order).
    TranslatorReplied {
        /// The call's `translator`.
        translator: u32,
        /// The call's `attempt`.
        attempt: u32,
        /// The call's `call` id (required from audit format 15).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        call: Option<String>,
        /// The reply, verbatim.
        text: String,
        /// The model that produced it, for the audit trail.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        model: Option<String>,
        /// The audit format whose rules read this reply and ground the round's premises,
        /// when it is not the thread's own: as `verdictRules` of [`Input::Validated`], set by
        /// [`crate::Thread::handle`] for a thread started by an older format, so a thread
        /// that waited across an upgrade is translated by today's rules too.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        translation_rules: Option<u32>,
        /// When the reply arrived.
        now: u64,
    },
    /// A translator's endpoint failed for good (after the caller's retries): that translator
    /// translated nothing.
    TranslatorFailed {
        /// The call's `translator`.
        translator: u32,
        /// The call's `attempt`.
        attempt: u32,
        /// The call's `call` id (required from audit format 15).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        call: Option<String>,
        /// What failed.
        reason: String,
        /// As [`Input::TranslatorReplied`]'s (the round's premises are grounded when its last
        /// call ends, which may be this one).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        translation_rules: Option<u32>,
        /// When the caller gave up.
        now: u64,
    },
    /// The user answered the follow-up questions of the last [`Effect::AskUser`]: one answer
    /// per question in order, or a single free-text reply.
    UserAnswered {
        /// The answers.
        answers: Vec<String>,
        /// When they arrived.
        now: u64,
    },
    /// The user chose not to answer the follow-up questions.
    UserSkipped {
        /// When they said so.
        now: u64,
    },
    /// Time passed. While follow-up questions are pending, a tick at or after their deadline
    /// counts as a skip.
    Tick {
        /// The current time.
        now: u64,
    },
    /// The LLM or validator call failed for good (after the caller's own retries): the thread
    /// finishes with ERROR.
    Failed {
        /// What failed, for the user and the audit trail.
        reason: String,
        /// When the caller gave up.
        now: u64,
    },
    /// The validator's guardrail blocked the answer under validation: a policy of it other
    /// than the reasoning check intervened (a content filter, a denied topic; Bedrock's
    /// Automated Reasoning checks only detect). The thread finishes with ERROR and gives no
    /// answer, with `failure_mode = "open"` too: nothing failed, the answer was refused.
    Blocked {
        /// Which of the guardrail's policies intervened, for the audit trail.
        reason: String,
        /// When the validator answered.
        now: u64,
    },
}

impl Input {
    /// The time the input carries.
    pub fn now(&self) -> u64 {
        match self {
            Input::LlmReplied { now, .. }
            | Input::Validated { now, .. }
            | Input::UserAnswered { now, .. }
            | Input::UserSkipped { now }
            | Input::Tick { now }
            | Input::TranslatorReplied { now, .. }
            | Input::TranslatorFailed { now, .. }
            | Input::Failed { now, .. }
            | Input::Blocked { now, .. } => *now,
        }
    }

    /// The input's `type` tag.
    pub fn name(&self) -> &'static str {
        match self {
            Input::LlmReplied { .. } => "LlmReplied",
            Input::Validated { .. } => "Validated",
            Input::UserAnswered { .. } => "UserAnswered",
            Input::UserSkipped { .. } => "UserSkipped",
            Input::Tick { .. } => "Tick",
            Input::TranslatorReplied { .. } => "TranslatorReplied",
            Input::TranslatorFailed { .. } => "TranslatorFailed",
            Input::Failed { .. } => "Failed",
            Input::Blocked { .. } => "Blocked",
        }
    }
}

/// What the caller must do next.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all_fields = "camelCase")]
pub enum Effect {
    /// Send `prompt` to the LLM and hand back its reply as [`Input::LlmReplied`].
    CallLlm {
        /// Why: tells whether the reply is an answer or a decision.
        purpose: LlmPurpose,
        /// The prompt, complete.
        prompt: String,
    },
    /// Validate `answer` to `question` and hand back the findings as [`Input::Validated`].
    Validate {
        /// The user's question.
        question: String,
        /// The text to validate: exactly the text that will be returned if it is VALID.
        answer: String,
    },
    /// Make these translator calls (concurrently, besides any still in flight) and hand back
    /// each reply as [`Input::TranslatorReplied`] (or [`Input::TranslatorFailed`]), in any
    /// order. An empty list: nothing new to start; keep waiting for the calls in flight.
    Translate {
        /// The calls to start.
        calls: Vec<TranslatorCall>,
    },
    /// Check these translations (one per translator) against the policy with the solver and
    /// hand back the findings as [`Input::Validated`].
    Check {
        /// The user's question.
        question: String,
        /// The text being validated: exactly the text that will be returned if it is VALID.
        answer: String,
        /// What each translator made of it, in translator order (empty for one that
        /// translated nothing).
        translations: Vec<TranslatorOutput>,
    },
    /// Show the user these questions; hand back [`Input::UserAnswered`] or
    /// [`Input::UserSkipped`], or [`Input::Tick`] once the deadline has passed.
    AskUser {
        /// The questions, at most five.
        questions: Vec<String>,
        /// When the questions count as skipped, if they time out.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        deadline: Option<u64>,
    },
    /// The thread is over: return the outcome.
    Finish(Outcome),
}

impl Effect {
    /// The effect's `type` tag.
    pub fn name(&self) -> &'static str {
        match self {
            Effect::CallLlm { .. } => "CallLlm",
            Effect::Validate { .. } => "Validate",
            Effect::Translate { .. } => "Translate",
            Effect::Check { .. } => "Check",
            Effect::AskUser { .. } => "AskUser",
            Effect::Finish(_) => "Finish",
        }
    }
}

//! The states of the rewriting loop.

use super::history::AnswerRole;
use super::io::LlmPurpose;
use super::outcome::Outcome;
use crate::decision::DecisionKind;
use crate::translation::{TranslationRound, TranslatorOutput};
use serde::{Deserialize, Serialize};
use std::fmt;

/// The named phases of the loop, as in the reference chatbot. CHECK_QUESTIONS (reading the
/// LLM's decision) and HANDLE_RESULT (reading the findings) are transient: they run inside one
/// [`Thread::handle`](super::Thread::handle) call, so a thread is never observed in them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum Phase {
    /// Waiting for the LLM's first answer.
    GenerateInitial,
    /// Waiting for the validator.
    Validate,
    /// Reading the LLM's decision (transient).
    CheckQuestions,
    /// Reading the findings (transient).
    HandleResult,
    /// Waiting for the LLM to address findings or regenerate the answer.
    RewritingLoop,
    /// Waiting for the user to answer follow-up questions.
    AwaitingInput,
    /// Finished with an answer.
    Completed,
    /// Finished with an error.
    Error,
}

impl Phase {
    /// Upper-case name.
    pub fn as_str(self) -> &'static str {
        match self {
            Phase::GenerateInitial => "GENERATE_INITIAL",
            Phase::Validate => "VALIDATE",
            Phase::CheckQuestions => "CHECK_QUESTIONS",
            Phase::HandleResult => "HANDLE_RESULT",
            Phase::RewritingLoop => "REWRITING_LOOP",
            Phase::AwaitingInput => "AWAITING_INPUT",
            Phase::Completed => "COMPLETED",
            Phase::Error => "ERROR",
        }
    }
}

impl fmt::Display for Phase {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Where a thread waits, with what it is waiting for.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(
    tag = "phase",
    rename_all = "SCREAMING_SNAKE_CASE",
    rename_all_fields = "camelCase"
)]
pub enum ThreadState {
    /// Waiting for the LLM's first answer to `prompt`.
    GenerateInitial {
        /// The prompt sent.
        prompt: String,
    },
    /// Waiting for the translators' replies on `answer` (local validator).
    Translate {
        /// The text being validated.
        answer: String,
        /// What the text is.
        role: AnswerRole,
        /// The translators' progress.
        round: TranslationRound,
    },
    /// Waiting for the validation of `answer`.
    Validate {
        /// The text being validated.
        answer: String,
        /// What the text is.
        role: AnswerRole,
        /// The translations sent to the solver (local validator); the findings must come
        /// from them.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        translations: Option<Vec<TranslatorOutput>>,
    },
    /// Waiting for the LLM's reply to `prompt`.
    RewritingLoop {
        /// Why the LLM was called.
        purpose: LlmPurpose,
        /// The prompt sent.
        prompt: String,
        /// The decisions the prompt offered (REWRITE steps; empty otherwise).
        offered: Vec<DecisionKind>,
    },
    /// Waiting for the user.
    AwaitingInput {
        /// The questions asked.
        questions: Vec<String>,
        /// When they count as skipped.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        deadline: Option<u64>,
    },
    /// Finished with an answer (any status but ERROR).
    Completed {
        /// The outcome.
        outcome: Outcome,
    },
    /// Finished with an error.
    Error {
        /// The outcome (status ERROR).
        outcome: Outcome,
    },
}

impl ThreadState {
    /// The named phase of this state.
    pub fn phase(&self) -> Phase {
        match self {
            ThreadState::GenerateInitial { .. } => Phase::GenerateInitial,
            ThreadState::Translate { .. } | ThreadState::Validate { .. } => Phase::Validate,
            ThreadState::RewritingLoop { .. } => Phase::RewritingLoop,
            ThreadState::AwaitingInput { .. } => Phase::AwaitingInput,
            ThreadState::Completed { .. } => Phase::Completed,
            ThreadState::Error { .. } => Phase::Error,
        }
    }

    /// The outcome, once finished.
    pub fn outcome(&self) -> Option<&Outcome> {
        match self {
            ThreadState::Completed { outcome } | ThreadState::Error { outcome } => Some(outcome),
            _ => None,
        }
    }
}

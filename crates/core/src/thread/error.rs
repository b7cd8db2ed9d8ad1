//! What can go wrong when driving a thread. Every error leaves the thread unchanged.

use super::state::Phase;
use super::OutcomeStatus;

/// An input the thread cannot take, or a thread that cannot be created.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ThreadError {
    /// The configuration is unusable.
    #[error("invalid thread configuration: {0}")]
    InvalidConfig(String),
    /// The question is empty.
    #[error("the question is empty: a thread needs a question to answer")]
    EmptyQuestion,
    /// A supplied first answer is empty.
    #[error("the given answer is empty: supply the answer to check, or start without one")]
    EmptyAnswer,
    /// The input does not fit the state the thread is in.
    #[error("the thread is in state {phase} and cannot take {input}; it expects {expected}")]
    UnexpectedInput {
        /// Where the thread is.
        phase: Phase,
        /// The input given.
        input: &'static str,
        /// What it would take instead.
        expected: &'static str,
    },
    /// The thread has already finished; nothing more can happen to it.
    #[error("the thread has already finished with {status}; it takes no more input")]
    Finished {
        /// How it finished.
        status: OutcomeStatus,
    },
    /// UserAnswered with no non-blank answer.
    #[error("UserAnswered carries no answer; send UserSkipped to skip the questions")]
    NoAnswers,
    /// A translator input that does not fit the round in progress.
    #[error("translator input rejected: {0}")]
    Translator(#[from] crate::translation::RoundError),
    /// Findings that cannot have come from the translations sent to the solver, or that cite
    /// rules the thread's policy does not have.
    #[error("the findings do not match the thread (its translations or its policy): {0}")]
    FindingsMismatch(String),
    /// The thread's own data contradicts itself (e.g. edited JSON).
    #[error("the thread's data is inconsistent: {0}")]
    Inconsistent(&'static str),
}

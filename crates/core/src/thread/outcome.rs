//! How a thread ends.

use crate::findings::Finding;
use serde::{Deserialize, Serialize};
use std::fmt;

/// The end state of a thread.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum OutcomeStatus {
    /// The answer's last validation was VALID: every finding proved.
    Valid,
    /// VALID, but part of the answer is not covered by the policy (VALID plus NO_TRANSLATIONS).
    ValidWithWarning,
    /// Nothing in the answer could be checked against the policy (or the validator returned
    /// no findings): not verified.
    NotCovered,
    /// The question's premises contradict the policy; the answer is the explanation, which
    /// was validated too.
    Impossible,
    /// The iteration limit was reached: the best answer so far, not verified.
    MaxIterations,
    /// Fail-open: the LLM or the validator failed and the chatbot's own answer was returned
    /// unchecked, marked as such (`answer` and `reason` say what was given and why).
    Unverified,
    /// The LLM or the validator failed; no answer.
    Error,
    /// The chatbot called the app's tools instead of answering: nothing to verify yet; the
    /// calls go back to the app, and the request with the tool results starts the next
    /// thread, whose answer is verified.
    ToolCall,
}

impl OutcomeStatus {
    /// Upper-case name, as in JSON.
    pub fn as_str(self) -> &'static str {
        match self {
            OutcomeStatus::Valid => "VALID",
            OutcomeStatus::ValidWithWarning => "VALID_WITH_WARNING",
            OutcomeStatus::NotCovered => "NOT_COVERED",
            OutcomeStatus::Impossible => "IMPOSSIBLE",
            OutcomeStatus::MaxIterations => "MAX_ITERATIONS",
            OutcomeStatus::Unverified => "UNVERIFIED",
            OutcomeStatus::Error => "ERROR",
            OutcomeStatus::ToolCall => "TOOL_CALL",
        }
    }
}

impl fmt::Display for OutcomeStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What a finished thread returns.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Outcome {
    /// How it ended.
    pub status: OutcomeStatus,
    /// The text to return to the user: exactly the text whose findings are in `findings`.
    /// `None` only for ERROR.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub answer: Option<String>,
    /// What the user should know about the answer (not covered, not verified, ...).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub warning: Option<String>,
    /// The findings of the answer's validation (empty for ERROR before any validation).
    pub findings: Vec<Finding>,
    /// How many validations ran.
    pub iterations: u32,
    /// True only when the answer's validation was VALID in aggregate.
    pub verified: bool,
    /// The model that wrote the answer, when the caller reported it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// Why the thread failed (ERROR and UNVERIFIED).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

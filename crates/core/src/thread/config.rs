//! How a thread behaves: iteration limit, follow-up questions, their timeout, policy context.

use crate::prompts::PolicyContext;
use crate::translation::TranslationConfig;
use serde::{Deserialize, Serialize};

/// The default limit on validations per thread.
pub const DEFAULT_MAX_ITERATIONS: u32 = 5;

/// The default time the user has to answer follow-up questions: 15 minutes.
pub const DEFAULT_QUESTION_TIMEOUT_MS: u64 = 15 * 60 * 1000;

/// Whether the rewriting LLM may ask the user follow-up questions.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum FollowUpQuestions {
    /// Offered for TRANSLATION_AMBIGUOUS and SATISFIABLE findings.
    #[default]
    Allowed,
    /// Never offered: the LLM can only rewrite (e.g. a batch job with no user to ask).
    Disabled,
}

/// What happens when the LLM or the validator fails for good.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum FailureMode {
    /// No answer: the thread ends in ERROR.
    #[default]
    Closed,
    /// The chatbot's first answer is returned, marked UNVERIFIED, and the trail records it.
    Open,
}

impl FailureMode {
    fn is_closed(&self) -> bool {
        *self == FailureMode::Closed
    }
}

/// Configuration of one thread. Recorded in the first audit record, so replay rebuilds the
/// thread with exactly this configuration.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default, deny_unknown_fields)]
pub struct ThreadConfig {
    /// At most this many validations; at least 1.
    pub max_iterations: u32,
    /// Whether follow-up questions may be asked.
    pub follow_up_questions: FollowUpQuestions,
    /// How long the user has to answer follow-up questions, in milliseconds; a
    /// [`Input::Tick`](super::Input::Tick) at or after the deadline counts as a skip. `None`:
    /// wait for ever.
    pub question_timeout_ms: Option<u64>,
    /// The rules and variables shown to the LLM.
    pub policy: PolicyContext,
    /// With the local validator: the translators are driven by the thread
    /// ([`Effect::Translate`](super::Effect::Translate), then
    /// [`Effect::Check`](super::Effect::Check)); without, the caller validates whole texts
    /// ([`Effect::Validate`](super::Effect::Validate)).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub translation: Option<TranslationConfig>,
    /// Without translators (an external validator, Amazon Bedrock): the policy's vocabulary
    /// and whether the system prompt states facts, which hold the premises of the validator's
    /// VALID findings to the conversation (audit format 10 on; only `vocabulary` and
    /// `system_prompt_facts` are read). `None`: no vocabulary is known, so a premise naming an
    /// enum value is never borne out and the user is asked instead.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub validator_grounding: Option<TranslationConfig>,
    /// What a failure of the LLM or validator ends in.
    #[serde(skip_serializing_if = "FailureMode::is_closed")]
    pub failure_mode: FailureMode,
}

impl Default for ThreadConfig {
    fn default() -> Self {
        ThreadConfig {
            max_iterations: DEFAULT_MAX_ITERATIONS,
            follow_up_questions: FollowUpQuestions::Allowed,
            question_timeout_ms: Some(DEFAULT_QUESTION_TIMEOUT_MS),
            policy: PolicyContext::default(),
            translation: None,
            validator_grounding: None,
            failure_mode: FailureMode::Closed,
        }
    }
}

impl ThreadConfig {
    /// Whether follow-up questions may be offered to the LLM.
    pub fn allows_questions(&self) -> bool {
        self.follow_up_questions == FollowUpQuestions::Allowed
    }
}

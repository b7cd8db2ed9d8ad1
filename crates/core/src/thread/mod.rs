//! The rewriting loop as a sans-IO state machine.
//!
//! ```
//! use proofgate_core::thread::{Effect, Input, Thread, ThreadConfig};
//! use proofgate_core::findings::{Finding, Rule, Statement, Translation, ValidFinding};
//!
//! let mut t = Thread::new(ThreadConfig::default(), "t-1", "Can I bring my dog?", 0).unwrap();
//! let mut effect = t.start();
//! let mut now = 0;
//! loop {
//!     now += 1;
//!     effect = match effect {
//!         Effect::CallLlm { .. } => t.handle(Input::LlmReplied {
//!             text: "Yes, dogs are allowed.".into(), model: None, now,
//!         }).unwrap(),
//!         Effect::Validate { .. } => t.handle(Input::Validated {
//!             // A VALID shows what it proved and names the rules that prove it.
//!             findings: vec![Finding::Valid(ValidFinding {
//!                 translation: Some(Translation {
//!                     claims: Some(vec![Statement::new("dogsAllowed", "Dogs are allowed.")]),
//!                     ..Default::default()
//!                 }),
//!                 supporting_rules: Some(vec![Rule::new("R1", "v1")]),
//!                 ..Default::default()
//!             })],
//!             evidence: None, verdict_rules: None, now,
//!         }).unwrap(),
//!         Effect::AskUser { .. } => t.handle(Input::UserSkipped { now }).unwrap(),
//!         // Only with `config.translation` set (the local validator's translators).
//!         Effect::Translate { .. } | Effect::Check { .. } => unreachable!(),
//!         Effect::Finish(outcome) => { assert!(outcome.verified); break }
//!     };
//! }
//! ```
//!
//! Every successful [`Thread::handle`] appends the input and the effect it produced to the
//! thread's audit trail ([`crate::audit`]); a failed one changes nothing.

mod config;
mod error;
mod history;
mod io;
mod outcome;
mod prepared;
mod state;
#[cfg(test)]
mod tests;

pub use config::{
    FailureMode, FollowUpQuestions, ThreadConfig, DEFAULT_MAX_ITERATIONS,
    DEFAULT_QUESTION_TIMEOUT_MS,
};
pub use error::ThreadError;
pub use history::{
    AnswerRole, ClarificationExchange, ClarificationResponse, LlmReply, Step, Validation,
};
pub use io::{Effect, Input, LlmPurpose};
pub use outcome::{Outcome, OutcomeStatus};
pub use prepared::PreparedConfig;
pub use state::{Phase, ThreadState};

use crate::audit::{self, AuditRecord, FinalRecord, RecordKind, ThreadStarted};
pub use crate::audit::{GivenAnswer, GivenToolCall, ThreadOwner, ToolCall};
use crate::conversation::{ground_premises, premise_sources, ConversationTurn, TurnRole};
use crate::decision::{parse_decision, DecisionKind};
use crate::findings::{Finding, FindingKind};
use crate::prompts::{self, RegenerateRequest, RegenerationReason, RewriteRequest};
use crate::translation::{
    check_findings, check_untranslated_reported, TranslationRound, TranslationTexts,
};
use crate::verdict::{top_finding, Verdict};
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Warning of a NOT_COVERED outcome whose findings are all NO_TRANSLATIONS.
pub const OUTSIDE_POLICY_WARNING: &str =
    "the answer is outside the policy: nothing in it could be checked";
/// Warning of a NOT_COVERED outcome whose validation returned no findings.
pub const NO_FINDINGS_WARNING: &str =
    "the validator returned no findings: nothing in the answer was checked";

/// One question being answered: configuration, state, history and audit trail.
///
/// Serializes to JSON (camelCase) and resumes from it: persist it while waiting for the LLM,
/// the validator or the user.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Thread {
    id: String,
    question: String,
    /// Shared, not copied, by the working copy each input is applied to: it never changes
    /// after the start, and holds the whole policy and vocabulary.
    config: std::sync::Arc<ThreadConfig>,
    created_at: u64,
    state: ThreadState,
    steps: Vec<Step>,
    clarifications: Vec<ClarificationExchange>,
    /// The app's conversation before the answer (recorded in THREAD_STARTED). Shared like
    /// the configuration: it never changes, and an app's history can be long.
    #[serde(default, skip_serializing_if = "<[_]>::is_empty")]
    conversation: std::sync::Arc<[ConversationTurn]>,
    /// The app's own request, for the caller to send the rewriter with each prompt (its
    /// system prompt, history and model parameters); opaque to the loop and not recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    app_request: Option<std::sync::Arc<Value>>,
    audit_trail: Vec<AuditRecord>,
    /// The translators' vocabulary as a model, built with the first reply that needs it.
    #[serde(skip)]
    vocabulary: VocabularyCache,
}

/// A thread's vocabulary model, built once instead of once per translator reply. Not part of
/// what a thread is: never serialized, and equal whatever it holds.
#[derive(Default, Clone)]
struct VocabularyCache(std::sync::OnceLock<std::sync::Arc<crate::policy::PolicyModel>>);

impl PartialEq for VocabularyCache {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}

impl std::fmt::Debug for VocabularyCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("VocabularyCache")
    }
}

/// A thread's fields but its audit trail, as serialized for a store.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct WithoutTrail<'a> {
    id: &'a str,
    question: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    config: Option<&'a ThreadConfig>,
    created_at: u64,
    state: &'a ThreadState,
    steps: &'a [Step],
    clarifications: &'a [ClarificationExchange],
    #[serde(skip_serializing_if = "<[_]>::is_empty")]
    conversation: &'a [ConversationTurn],
    #[serde(skip_serializing_if = "Option::is_none")]
    app_request: &'a Option<std::sync::Arc<Value>>,
}

/// How a thread for the app's chatbot reply starts: the reply is an answer to verify, or a
/// call of the app's tools.
#[derive(Debug, Clone, PartialEq)]
pub enum ChatbotReply {
    /// An answer: validated first.
    Answer(GivenAnswer),
    /// Tool calls: recorded, and the thread ends with TOOL_CALL.
    ToolCall(GivenToolCall),
}

fn is_blank(s: &str) -> bool {
    s.trim().is_empty()
}

/// The answer in a reply that should be a plain answer; tolerates a model that wraps it in
/// the decision format anyway.
fn plain_answer(text: &str) -> String {
    let d = parse_decision(text);
    match d.decision {
        DecisionKind::Rewrite => d.answer,
        _ => text.trim().to_string(),
    }
}

/// `text` without the characters that change how it shows but not what a model reads, or hide
/// text a model reads: bidirectional embeddings, overrides and isolates (which reorder what
/// shows), zero-width spaces, format characters (U+2060 to U+206F), the byte order mark,
/// interlinear annotations, soft hyphens, fillers that show as nothing, and Unicode tag
/// characters and variation selectors other than the emoji ones (invisible, and able to carry
/// text that models read).
pub fn without_invisible(text: &str) -> String {
    text.chars()
        .filter(|c| {
            // Stay: ZWNJ and ZWJ (U+200C, U+200D), with which Persian and Indic words are
            // spelt and emoji joined; the direction marks (U+200E, U+200F, U+061C), which move
            // no letter or digit, only the punctuation beside them, and place numbers in Hebrew
            // and Arabic text; and the emoji and text presentation selectors (U+FE0E, U+FE0F).
            !matches!(
                c,
                '\u{00AD}'
                    | '\u{034F}'
                    | '\u{115F}'
                    | '\u{1160}'
                    | '\u{180B}'..='\u{180F}'
                    | '\u{3164}'
                    | '\u{FFA0}'
                    | '\u{200B}'
                    | '\u{202A}'..='\u{202E}'
                    | '\u{2060}'..='\u{206F}'
                    | '\u{FE00}'..='\u{FE0D}'
                    | '\u{FEFF}'
                    | '\u{FFF9}'..='\u{FFFB}'
                    | '\u{E0000}'..='\u{E007F}'
                    | '\u{E0100}'..='\u{E01EF}'
            )
        })
        .collect()
}

/// Whether the validation of an IMPOSSIBLE explanation confirms it (the validator finds the
/// premises impossible again, or proves the explanation's claims, and nothing else), and then
/// the warning the outcome carries. In a trail of format `version` (see
/// [`audit::EFFECTIVE_EXPLANATIONS_SINCE`] for what changed).
fn explanation_confirmed(findings: &[Finding], version: u32) -> Option<Option<String>> {
    let effective = version >= audit::EFFECTIVE_EXPLANATIONS_SINCE;
    let rules = crate::verdict::VerdictRules::of_format(version);
    let kinds: Vec<FindingKind> = if effective {
        findings
            .iter()
            .map(|f| crate::verdict::effective_kind_under(f, rules))
            .collect()
    } else {
        findings.iter().map(Finding::kind).collect()
    };
    let confirmed = kinds
        .iter()
        .any(|k| matches!(k, FindingKind::Impossible | FindingKind::Valid))
        && kinds.iter().all(|k| {
            matches!(
                k,
                FindingKind::Impossible | FindingKind::Valid | FindingKind::NoTranslations
            )
        });
    if !confirmed {
        return None;
    }
    let untranslated = (version >= audit::UNTRANSLATED_CLAIMS_WARNED_SINCE
        && crate::verdict::leaves_claims_untranslated(findings))
        || (version >= audit::SUPPORTED_VALID_SINCE
            && crate::verdict::proves_part_of_its_claims(findings));
    Some(
        (effective && kinds.contains(&FindingKind::NoTranslations) || untranslated)
            .then(|| crate::verdict::NOT_COVERED_WARNING.to_string()),
    )
}

/// The kind of the first finding that refutes its answer (INVALID or IMPOSSIBLE), if any.
fn refuting_kind(findings: &[Finding]) -> Option<&'static str> {
    findings.iter().find_map(|f| match f {
        Finding::Invalid(_) => Some("INVALID"),
        Finding::Impossible(_) => Some("IMPOSSIBLE"),
        _ => None,
    })
}

/// How close an unverified answer is to VALID, for picking the best one at the iteration
/// limit: lower is better.
fn closeness(verdict: Verdict) -> u8 {
    match verdict {
        Verdict::Valid => 0,
        Verdict::Satisfiable => 1,
        Verdict::TranslationAmbiguous => 2,
        Verdict::TooComplex => 3,
        Verdict::NoTranslations => 4,
        Verdict::NoFindings => 5,
        Verdict::Unknown => 6,
        Verdict::Invalid => 7,
        Verdict::Impossible => 8,
    }
}

/// Serializes one of the thread's own types into an audit record body.
fn to_body<T: Serialize>(value: &T) -> Value {
    // Only our own types go through here: structs, enums, strings, numbers and JSON values,
    // all with string keys, which serde_json always serializes.
    serde_json::to_value(value).expect("thread types always serialize to JSON")
}

/// The start of a thread for the chatbot's `reply` (see [`Thread::for_reply`]).
fn started_for_reply(
    config: ThreadConfig,
    thread_id: String,
    question: String,
    conversation: Vec<ConversationTurn>,
    reply: ChatbotReply,
) -> ThreadStarted {
    let mut started = ThreadStarted::new(thread_id, question, config);
    started.conversation = (!conversation.is_empty()).then_some(conversation);
    match reply {
        ChatbotReply::Answer(a) => started.given_answer = Some(a),
        ChatbotReply::ToolCall(c) => started.tool_call = Some(c),
    }
    started
}

impl Thread {
    /// Creates a thread for `question` and records its start; its first effect
    /// ([`Thread::start`]) asks the LLM for an answer. `now` is in ms since the epoch.
    pub fn new(
        config: ThreadConfig,
        thread_id: impl Into<String>,
        question: impl Into<String>,
        now: u64,
    ) -> Result<Thread, ThreadError> {
        Thread::from_started(
            ThreadStarted::new(thread_id.into(), question.into(), config),
            now,
        )
    }

    /// Creates a thread whose first answer is already known (the chatbot's upstream reply, or
    /// an answer to check): its first effect validates that answer; no LLM call is recorded
    /// for it. The answer is part of the THREAD_STARTED record, so replay reproduces it.
    pub fn with_answer(
        config: ThreadConfig,
        thread_id: impl Into<String>,
        question: impl Into<String>,
        answer: GivenAnswer,
        now: u64,
    ) -> Result<Thread, ThreadError> {
        let mut started = ThreadStarted::new(thread_id.into(), question.into(), config);
        started.given_answer = Some(answer);
        Thread::from_started(started, now)
    }

    /// [`Thread::new`] (no `answer`) or [`Thread::with_answer`], for `owner`, whom the
    /// THREAD_STARTED record names (see [`audit::ThreadOwner`]).
    pub fn owned(
        config: ThreadConfig,
        thread_id: impl Into<String>,
        question: impl Into<String>,
        answer: Option<GivenAnswer>,
        owner: Option<audit::ThreadOwner>,
        now: u64,
    ) -> Result<Thread, ThreadError> {
        let mut started = ThreadStarted::new(thread_id.into(), question.into(), config);
        started.given_answer = answer;
        started.owner = owner;
        Thread::from_started(started, now)
    }

    /// Creates a thread for the chatbot's `reply` in the app's `conversation` (the request's
    /// messages, as text turns; `question` is its last user message). An answer is validated
    /// with the conversation as the translators' context; tool calls end the thread with
    /// TOOL_CALL. Both are recorded in THREAD_STARTED, so replay reproduces them.
    pub fn for_reply(
        config: ThreadConfig,
        thread_id: impl Into<String>,
        question: impl Into<String>,
        conversation: Vec<ConversationTurn>,
        reply: ChatbotReply,
        now: u64,
    ) -> Result<Thread, ThreadError> {
        Thread::from_started(
            started_for_reply(
                config,
                thread_id.into(),
                question.into(),
                conversation,
                reply,
            ),
            now,
        )
    }

    /// [`Thread::for_reply`] with a prepared configuration: the same thread and the same
    /// records, without hashing the policy and building the vocabulary model again; the
    /// THREAD_STARTED record names `owner` when given (see [`audit::ThreadOwner`]).
    pub fn for_reply_prepared(
        prepared: &PreparedConfig,
        thread_id: impl Into<String>,
        question: impl Into<String>,
        conversation: Vec<ConversationTurn>,
        reply: ChatbotReply,
        owner: Option<audit::ThreadOwner>,
        now: u64,
    ) -> Result<Thread, ThreadError> {
        let mut started = started_for_reply(
            prepared.config().clone(),
            thread_id.into(),
            question.into(),
            conversation,
            reply,
        );
        started.owner = owner;
        // The name of exactly this configuration's document (see `PreparedConfig`), which
        // the record then names as a new thread's record would.
        started.policy_document = prepared.policy_document().map(str::to_string);
        Thread::start_from(started, now, prepared.vocabulary())
    }

    /// Keeps the app's own request with the thread (see [`Thread::app_request`]).
    pub fn set_app_request(&mut self, request: Value) {
        self.app_request = Some(request.into());
    }

    /// The app's own request, as the caller stored it: the rewriter is called in it.
    pub fn app_request(&self) -> Option<&Value> {
        self.app_request.as_deref()
    }

    /// The app's conversation before the answer; empty for a lone question.
    pub fn conversation(&self) -> &[ConversationTurn] {
        &self.conversation
    }

    /// Creates the thread a THREAD_STARTED record describes (used by replay, so that the
    /// recorded start is reproduced exactly).
    pub(crate) fn from_started(started: ThreadStarted, now: u64) -> Result<Thread, ThreadError> {
        Thread::start_from(started, now, None)
    }

    /// [`Thread::from_started`] with the configuration's vocabulary model when it is already
    /// built (replay: the model of the policy document the configuration came from).
    pub(crate) fn start_from(
        mut started: ThreadStarted,
        now: u64,
        vocabulary: Option<std::sync::Arc<crate::policy::PolicyModel>>,
    ) -> Result<Thread, ThreadError> {
        if started.config.max_iterations == 0 {
            return Err(ThreadError::InvalidConfig(
                "maxIterations must be at least 1 (it counts validations)".into(),
            ));
        }
        if is_blank(&started.question) {
            return Err(ThreadError::EmptyQuestion);
        }
        if let Some(given) = &started.given_answer {
            if is_blank(&given.text) {
                return Err(ThreadError::EmptyAnswer);
            }
        }
        // One policy document holds one vocabulary: the translators' or, without them, the
        // one an external validator's premises are held to.
        if started.config.translation.is_some() && started.config.validator_grounding.is_some() {
            return Err(ThreadError::InvalidConfig(
                "a thread has translators (translation) or an external validator \
                 (validatorGrounding), not both"
                    .into(),
            ));
        }
        // Checked from format 15 (trails written before keep replaying): a count of 0
        // translators ran one, and an agreement of 0 let a VALID stand that no translator
        // supported (an npm app writing 0 for "no extra requirement").
        if let (Some(t), true) = (
            &started.config.translation,
            started.format_version >= audit::TRANSLATION_COUNTS_CHECKED_SINCE,
        ) {
            if t.translators == 0
                || t.required_agreement == 0
                || t.required_agreement > t.translators
            {
                return Err(ThreadError::InvalidConfig(format!(
                    "translation: translators must be at least 1 and requiredAgreement from 1 to \
                     translators (got {} translators, requiredAgreement {}); requiredAgreement \
                     is how many translators must agree on a pair for it to be checked",
                    t.translators, t.required_agreement
                )));
            }
        }
        if started.given_answer.is_some() && started.tool_call.is_some() {
            return Err(ThreadError::InvalidConfig(
                "a thread starts from an answer or from tool calls, not both".into(),
            ));
        }
        let prompt = match (&started.given_answer, &started.tool_call) {
            (Some(_), _) | (_, Some(_)) => String::new(),
            (None, None) => prompts::initial_answer_of_format(
                &started.question,
                &started.config.policy,
                started.format_version,
            ),
        };
        let mut body;
        if started.format_version >= audit::POLICY_DOCUMENTS_SINCE {
            match started.policy_document.take() {
                // A new thread: its document is named by its contents.
                None => {
                    body = to_body(&started);
                    audit::policy_document::take_policy_document(&mut body);
                }
                // Replay: the configuration came from the document filed under this name,
                // which `PolicyDocuments` only files under the hash of its contents. A new
                // thread of a `PreparedConfig`: the hash of its own document. The policy is
                // left out of the record, so it is not written out at all, and the name goes
                // last, as in the record of the first arm (the same members in the same order).
                Some(name) => {
                    let policy = std::mem::take(&mut started.config.policy);
                    let terms = started
                        .config
                        .translation
                        .as_mut()
                        .map(|t| std::mem::take(&mut t.vocabulary));
                    let grounding_terms = started
                        .config
                        .validator_grounding
                        .as_mut()
                        .map(|t| std::mem::take(&mut t.vocabulary));
                    body = to_body(&started);
                    audit::policy_document::leave_out_policy_document(&mut body, &name);
                    started.config.policy = policy;
                    if let (Some(t), Some(v)) = (started.config.translation.as_mut(), terms) {
                        t.vocabulary = v;
                    }
                    if let (Some(t), Some(v)) =
                        (started.config.validator_grounding.as_mut(), grounding_terms)
                    {
                        t.vocabulary = v;
                    }
                }
            }
        } else {
            body = to_body(&started);
        }
        let mut thread = Thread {
            id: started.thread_id.clone(),
            question: started.question.clone(),
            config: std::sync::Arc::new(started.config),
            created_at: now,
            state: ThreadState::GenerateInitial {
                prompt: prompt.clone(),
            },
            steps: vec![Step::requested(
                LlmPurpose::InitialAnswer,
                None,
                prompt.clone(),
                now,
            )],
            clarifications: Vec::new(),
            conversation: started.conversation.clone().unwrap_or_default().into(),
            app_request: None,
            audit_trail: Vec::new(),
            vocabulary: VocabularyCache(vocabulary.map(Into::into).unwrap_or_default()),
        };
        thread.append(RecordKind::ThreadStarted, now, body);
        if let Some(call) = started.tool_call {
            let outcome = Outcome {
                status: OutcomeStatus::ToolCall,
                answer: None,
                warning: None,
                findings: Vec::new(),
                iterations: 0,
                verified: false,
                model: call.model,
                reason: None,
            };
            thread.finish(outcome, None, now);
            return Ok(thread);
        }
        if let Some(given) = started.given_answer {
            if let Some(step) = thread.steps.last_mut() {
                step.reply = Some(LlmReply {
                    text: given.text.clone(),
                    model: given.model,
                    at: now,
                });
            }
            thread.begin_validation(given.text, AnswerRole::Answer, now);
            return Ok(thread);
        }
        thread.emit(
            Effect::CallLlm {
                purpose: LlmPurpose::InitialAnswer,
                prompt,
            },
            now,
        );
        Ok(thread)
    }

    /// The first effect: call the LLM for the initial answer. Calling it again (e.g. after
    /// resuming from JSON) returns whatever the thread is waiting for; it records nothing.
    pub fn start(&self) -> Effect {
        self.pending_effect()
    }

    /// What the thread is waiting for, as the effect that asked for it.
    pub fn pending_effect(&self) -> Effect {
        match &self.state {
            ThreadState::GenerateInitial { prompt } => Effect::CallLlm {
                purpose: LlmPurpose::InitialAnswer,
                prompt: prompt.clone(),
            },
            ThreadState::Translate { round, .. } => Effect::Translate {
                calls: round.pending_calls(),
            },
            ThreadState::Validate {
                answer,
                translations: Some(translations),
                ..
            } => Effect::Check {
                question: self.question.clone(),
                answer: answer.clone(),
                translations: translations.clone(),
            },
            ThreadState::Validate { answer, .. } => Effect::Validate {
                question: self.question.clone(),
                answer: answer.clone(),
            },
            ThreadState::RewritingLoop {
                purpose, prompt, ..
            } => Effect::CallLlm {
                purpose: *purpose,
                prompt: prompt.clone(),
            },
            ThreadState::AwaitingInput {
                questions,
                deadline,
            } => Effect::AskUser {
                questions: questions.clone(),
                deadline: *deadline,
            },
            ThreadState::Completed { outcome } | ThreadState::Error { outcome } => {
                Effect::Finish(outcome.clone())
            }
        }
    }

    /// Feeds one input; returns what to do next. An input that does not fit the current
    /// state is rejected with an error and leaves the thread exactly as it was.
    ///
    /// Findings fed to a thread started by an older version of the audit format are judged
    /// by this version's verdict rules, and the VALIDATED record says so (`verdictRules`):
    /// a thread that waited across an upgrade gets no older, weaker reading of what is VALID.
    /// Replay reads the recorded value ([`Thread::handle_replaying`] adds none).
    pub fn handle(&mut self, mut input: Input) -> Result<Effect, ThreadError> {
        let rules = match &mut input {
            Input::Validated { verdict_rules, .. } => Some(verdict_rules),
            Input::TranslatorReplied {
                translation_rules, ..
            }
            | Input::TranslatorFailed {
                translation_rules, ..
            } => Some(translation_rules),
            _ => None,
        };
        // Only this version's rules judge live input: an older format's are for replaying the
        // trails written then (a caller copying recorded inputs into a resumed thread got
        // that format's weaker reading of what is VALID, a review found).
        if let Some(Some(r)) = &rules {
            if *r != audit::FORMAT_VERSION {
                return Err(ThreadError::Inconsistent(
                    "verdictRules and translationRules are set by handle itself (to this \
                     version's rules): leave them out of the input",
                ));
            }
        }
        if let Some(rules @ None) = rules {
            if self.format_version() < audit::FORMAT_VERSION {
                *rules = Some(audit::FORMAT_VERSION);
            }
        }
        self.check_accepts(&input)?;
        // Work on a copy and commit only on success, so that an internal inconsistency found
        // half-way (e.g. hand-edited JSON) cannot leave a half-applied transition behind.
        // The audit trail is not copied (it grows with every step, and replay handles every
        // record): a transition only appends to it, so a failed one is undone by cutting it
        // back to its length before.
        let recorded = self.audit_trail.len();
        let trail = std::mem::take(&mut self.audit_trail);
        let mut next = self.clone();
        next.audit_trail = trail;
        match next.apply(input) {
            Ok(effect) => {
                *self = next;
                Ok(effect)
            }
            Err(e) => {
                let mut trail = next.audit_trail;
                trail.truncate(recorded);
                self.audit_trail = trail;
                Err(e)
            }
        }
    }

    /// [`Thread::handle`] without the copy that undoes a failed transition: for replay, which
    /// stops at the first input the machine rejects and never uses the thread after that.
    pub(crate) fn handle_replaying(&mut self, input: Input) -> Result<Effect, ThreadError> {
        self.check_accepts(&input)?;
        self.apply(input)
    }

    /// The thread id.
    pub fn id(&self) -> &str {
        &self.id
    }
    /// The user's question.
    pub fn question(&self) -> &str {
        &self.question
    }
    /// The configuration.
    pub fn config(&self) -> &ThreadConfig {
        &self.config
    }
    /// When the thread was created (ms since the epoch).
    pub fn created_at(&self) -> u64 {
        self.created_at
    }
    /// The current state.
    pub fn state(&self) -> &ThreadState {
        &self.state
    }
    /// The current phase.
    pub fn phase(&self) -> Phase {
        self.state.phase()
    }
    /// Every LLM call so far with what followed, oldest first.
    pub fn steps(&self) -> &[Step] {
        &self.steps
    }
    /// Every round of follow-up questions, oldest first.
    pub fn clarifications(&self) -> &[ClarificationExchange] {
        &self.clarifications
    }
    /// The thread's JSON without its audit trail (what a store keeps beside the records, so
    /// that a save does not serialize the whole trail again): [`serde_json::to_value`] of the
    /// thread minus `auditTrail`.
    pub fn to_json_without_trail(&self) -> Result<Value, serde_json::Error> {
        serde_json::to_value(self.without_trail())
    }

    /// [`Thread::to_json_without_trail`] as JSON text, written straight from the thread: what
    /// a store saves on every step, without building (and dropping) a `Value` tree first.
    pub fn to_json_text_without_trail(&self) -> Result<String, serde_json::Error> {
        serde_json::to_string(&self.without_trail())
    }

    /// [`Thread::to_json_text_without_trail`] without the configuration either: the trail's
    /// first record (THREAD_STARTED) holds it, so a store need not keep a copy per thread (with
    /// a local policy it is half of the state). [`Thread::from_stored_json`] puts it back.
    pub fn to_json_text_without_trail_or_config(&self) -> Result<String, serde_json::Error> {
        let mut fields = self.without_trail();
        fields.config = None;
        serde_json::to_string(&fields)
    }

    /// The thread stored as `state` (from [`Thread::to_json_text_without_trail`] or
    /// [`Thread::to_json_text_without_trail_or_config`]) with its audit `trail`: a state without
    /// its configuration takes the one its THREAD_STARTED record holds, with the policy
    /// document that record names (from `documents`).
    pub fn from_stored_json(
        mut state: Value,
        trail: Vec<Value>,
        documents: &audit::PolicyDocuments,
    ) -> Result<Thread, String> {
        let obj = state
            .as_object_mut()
            .ok_or("the stored state is not a JSON object")?;
        if !obj.contains_key("config") {
            let started = trail
                .first()
                .filter(|r| r.get("kind").and_then(Value::as_str) == Some("THREAD_STARTED"))
                .and_then(|r| r.get("body"))
                .ok_or("the stored state has no configuration and the trail does not start with THREAD_STARTED")?;
            let started = audit::policy_document::with_policy_document(started, documents)
                .map_err(|e| match e {
                    audit::policy_document::DocumentProblem::Missing(name) => {
                        format!("the thread's policy document {name} is not available")
                    }
                    audit::policy_document::DocumentProblem::Malformed(e) => e,
                })?;
            let config = started
                .get("config")
                .ok_or("the THREAD_STARTED record has no configuration")?;
            obj.insert("config".into(), config.clone());
        }
        obj.insert("auditTrail".into(), Value::Array(trail));
        serde_json::from_value(state).map_err(|e| e.to_string())
    }

    /// The thread a server resumes: rebuilt by replaying its audit trail (a JSON array of
    /// records, see [`audit::rebuild_json_with`]), with the app's request taken from the
    /// stored `state` (the one field no record holds, see [`Thread::app_request`]; the loop
    /// never reads it, and nothing the rewriter writes with it goes out unchecked). The rest
    /// of the stored state is a copy no signature covers: it must be the rebuilt thread's,
    /// or the thread is not resumed (someone with the database changed it: a question the
    /// user never asked, an answer the loop never gave, a configuration without the policy).
    pub fn resumed(
        state: &str,
        trail: &[u8],
        documents: &audit::PolicyDocuments,
    ) -> Result<Thread, String> {
        let mut thread = audit::rebuild_json_with(trail, documents)
            .map_err(|f| format!("its trail does not replay ({f})"))?;
        let mut stored: Value = serde_json::from_str(state).map_err(|e| e.to_string())?;
        let stored = stored
            .as_object_mut()
            .ok_or("the stored state is not a JSON object")?;
        let request = stored.remove("appRequest").filter(|r| !r.is_null());
        let mut fields = thread.without_trail();
        if !stored.contains_key("config") {
            fields.config = None;
        }
        let rebuilt = match serde_json::to_value(&fields).map_err(|e| e.to_string())? {
            Value::Object(mut rebuilt) => {
                rebuilt.remove("appRequest");
                rebuilt
            }
            _ => return Err("the rebuilt state is not a JSON object".into()),
        };
        if let Some(field) = rebuilt
            .iter()
            .find(|(k, v)| stored.get(*k) != Some(v))
            .map(|(k, _)| k)
            .or_else(|| stored.keys().find(|k| !rebuilt.contains_key(*k)))
        {
            return Err(format!(
                "its stored state differs from the one its trail records (at `{field}`): \
                 the store was altered"
            ));
        }
        thread.app_request = request.map(Into::into);
        Ok(thread)
    }

    fn without_trail(&self) -> WithoutTrail<'_> {
        WithoutTrail {
            id: &self.id,
            question: &self.question,
            config: Some(&*self.config),
            created_at: self.created_at,
            state: &self.state,
            steps: &self.steps,
            clarifications: &self.clarifications,
            conversation: &self.conversation,
            app_request: &self.app_request,
        }
    }

    /// The policy document the trail's THREAD_STARTED names (none when the policy holds
    /// nothing): what replaying the trail takes besides the records
    /// ([`audit::replay_with`]), and what a store keeps once per policy version.
    pub fn policy_documents(&self) -> audit::PolicyDocuments {
        let mut documents = audit::PolicyDocuments::new();
        if let Some((_, document)) = audit::policy_document::policy_document_of(&self.config) {
            documents
                .insert(document)
                .expect("a configuration's policy is a policy document");
        }
        documents
    }

    /// `logic` (a statement of a finding's translation) in the policy's own English, when the
    /// thread translates with a vocabulary (the local validator) and `logic` checks against it:
    /// what a client is shown as a finding's premise or claim. The translator's own
    /// `naturalLanguage` beside it is LLM text that nothing checks (it may say more than its
    /// logic), so it stays in the trail.
    pub fn statement_in_english(&self, logic: &str) -> Option<String> {
        let config = self.config.translation.as_ref()?;
        let cache = &self.vocabulary.0;
        let model = match cache.get() {
            Some(model) => model,
            None => {
                let model = config.vocabulary_model().ok()?;
                cache.get_or_init(|| std::sync::Arc::new(model))
            }
        };
        let checked = model.check_statement(logic).ok()?;
        Some(model.english(&checked.expr))
    }

    /// The owner the THREAD_STARTED record names (none for a thread started without one, or
    /// recorded before owners were).
    pub fn owner(&self) -> Option<audit::ThreadOwner> {
        let body = &self.audit_trail.first()?.body;
        serde_json::from_value(body.get("owner")?.clone()).ok()
    }

    /// The audit trail: one record per input and per effect, hash-chained.
    pub fn audit_trail(&self) -> &[AuditRecord] {
        &self.audit_trail
    }
    /// The outcome, once finished.
    pub fn outcome(&self) -> Option<&Outcome> {
        self.state.outcome()
    }
    /// How many validations have run.
    pub fn iterations(&self) -> u32 {
        let n = self.steps.iter().filter(|s| s.validation.is_some()).count();
        u32::try_from(n).unwrap_or(u32::MAX)
    }

    fn check_accepts(&self, input: &Input) -> Result<(), ThreadError> {
        let expected = match &self.state {
            ThreadState::Completed { outcome } | ThreadState::Error { outcome } => {
                return Err(ThreadError::Finished {
                    status: outcome.status,
                })
            }
            ThreadState::GenerateInitial { .. } | ThreadState::RewritingLoop { .. } => {
                if matches!(input, Input::LlmReplied { .. } | Input::Failed { .. }) {
                    return Ok(());
                }
                "LlmReplied (or Failed)"
            }
            ThreadState::Translate { round, .. } => match input {
                Input::TranslatorReplied {
                    translator,
                    attempt,
                    call,
                    translation_rules,
                    ..
                }
                | Input::TranslatorFailed {
                    translator,
                    attempt,
                    call,
                    translation_rules,
                    ..
                } => {
                    // By the rules reading this reply: a thread started by an older format and
                    // continued by this version is held to them too (`handle` stamps them).
                    let rules = translation_rules.unwrap_or(self.format_version());
                    return Ok(round.accepts_call(
                        *translator,
                        *attempt,
                        call.as_deref(),
                        rules >= audit::CALL_IDS_SINCE,
                    )?);
                }
                Input::Failed { .. } => return Ok(()),
                _ => "TranslatorReplied or TranslatorFailed (or Failed)",
            },
            ThreadState::Validate { .. } => {
                if matches!(
                    input,
                    Input::Validated { .. } | Input::Failed { .. } | Input::Blocked { .. }
                ) {
                    return Ok(());
                }
                "Validated (or Failed, or Blocked)"
            }
            ThreadState::AwaitingInput { .. } => match input {
                Input::UserAnswered { answers, .. } if answers.iter().all(|a| is_blank(a)) => {
                    return Err(ThreadError::NoAnswers)
                }
                Input::UserAnswered { .. }
                | Input::UserSkipped { .. }
                | Input::Tick { .. }
                | Input::Failed { .. } => return Ok(()),
                _ => "UserAnswered, UserSkipped or Tick (or Failed)",
            },
        };
        Err(ThreadError::UnexpectedInput {
            phase: self.phase(),
            input: input.name(),
            expected,
        })
    }

    fn apply(&mut self, input: Input) -> Result<Effect, ThreadError> {
        let now = input.now();
        self.append(RecordKind::of_input(&input), now, to_body(&input));
        match input {
            Input::Failed { reason, now } => Ok(self.fail(reason, now)),
            Input::Blocked { reason, now } => Ok(self.finish_error(reason, now)),
            Input::LlmReplied { text, model, now } => self.on_llm_reply(text, model, now),
            Input::Validated {
                findings,
                evidence,
                verdict_rules,
                now,
            } => self.on_validated(findings, evidence, verdict_rules, now),
            Input::UserAnswered { answers, now } => {
                self.on_clarification(ClarificationResponse::Answered { answers, at: now }, now)
            }
            Input::UserSkipped { now } => {
                self.on_clarification(ClarificationResponse::Skipped { at: now }, now)
            }
            Input::Tick { now } => self.on_tick(now),
            Input::TranslatorReplied {
                translator,
                attempt,
                text,
                translation_rules,
                now,
                ..
            } => self.on_translator(translator, attempt, Ok(text), translation_rules, now),
            Input::TranslatorFailed {
                translator,
                attempt,
                reason,
                translation_rules,
                now,
                ..
            } => self.on_translator(translator, attempt, Err(reason), translation_rules, now),
        }
    }

    fn current_step(&mut self) -> Result<&mut Step, ThreadError> {
        self.steps
            .last_mut()
            .ok_or(ThreadError::Inconsistent("the thread has no LLM step"))
    }

    /// The last validated text with its role and findings.
    fn last_validated(&self) -> Option<(&Step, &str, AnswerRole, &Validation)> {
        self.steps
            .iter()
            .rev()
            .find_map(|s| Some((s, s.answer.as_deref()?, s.role?, s.validation.as_ref()?)))
    }

    // GENERATE_INITIAL / REWRITING_LOOP -> CHECK_QUESTIONS -> VALIDATE | AWAITING_INPUT
    fn on_llm_reply(
        &mut self,
        text: String,
        model: Option<String>,
        now: u64,
    ) -> Result<Effect, ThreadError> {
        let (purpose, offered) = match &self.state {
            ThreadState::GenerateInitial { .. } => (LlmPurpose::InitialAnswer, Vec::new()),
            ThreadState::RewritingLoop {
                purpose, offered, ..
            } => (*purpose, offered.clone()),
            _ => return Err(ThreadError::Inconsistent("LLM reply outside an LLM state")),
        };
        let step = self.current_step()?;
        step.reply = Some(LlmReply {
            text: text.clone(),
            model,
            at: now,
        });
        if !purpose.expects_decision() {
            return Ok(self.begin_validation(plain_answer(&text), AnswerRole::Answer, now));
        }

        let decision = parse_decision(&text);
        step.decision = Some(decision.clone());
        let offers = |k: DecisionKind| offered.contains(&k);
        match decision.decision {
            DecisionKind::AskQuestions
                if offers(DecisionKind::AskQuestions) && !decision.questions.is_empty() =>
            {
                let questions = self.worded_questions(decision.questions.clone());
                if !questions.is_empty() {
                    return Ok(self.ask(questions, now));
                }
            }
            DecisionKind::Impossible
                if offers(DecisionKind::Impossible) && !is_blank(&decision.answer) =>
            {
                return Ok(self.begin_validation(
                    decision.answer,
                    AnswerRole::ImpossibleExplanation,
                    now,
                ));
            }
            DecisionKind::Rewrite if !is_blank(&decision.answer) => {
                return Ok(self.begin_validation(decision.answer, AnswerRole::Answer, now));
            }
            _ => {}
        }

        // A decision the machine cannot act on. An IMPOSSIBLE that was not offered still
        // carries text for the user: validate it as an answer. Otherwise there is no new text:
        // validate the previous one again, which keeps the loop moving toward its limit.
        let (answer, role, note) = if decision.decision == DecisionKind::Impossible
            && !is_blank(&decision.answer)
        {
            (
                decision.answer,
                AnswerRole::Answer,
                "IMPOSSIBLE was not offered for this finding: the explanation is validated as an answer",
            )
        } else {
            let (_, previous, role, _) = self.last_validated().ok_or(ThreadError::Inconsistent(
                "a rewrite step without an earlier validated answer",
            ))?;
            let note = match decision.decision {
                DecisionKind::AskQuestions => {
                    "questions were not offered or none were given: the previous answer is validated again"
                }
                _ => "the reply held no answer: the previous answer is validated again",
            };
            (previous.to_string(), role, note)
        };
        self.current_step()?.note = Some(note.to_string());
        Ok(self.begin_validation(answer, role, now))
    }

    fn begin_validation(&mut self, answer: String, role: AnswerRole, now: u64) -> Effect {
        // From format 14 the text checked, and released, has no characters that change how it
        // shows without changing what a model reads: "$\u{202E}05\u{202C}" read as $05 and
        // was proved, and showed as "$50" wherever bidi is honoured.
        let answer = if self.format_version() >= audit::INVISIBLE_CHARACTERS_REMOVED_SINCE {
            without_invisible(&answer)
        } else {
            answer
        };
        if let Some(step) = self.steps.last_mut() {
            step.answer = Some(answer.clone());
            step.role = Some(role);
        }
        if let Some(config) = &self.config.translation {
            let turns = self.translator_turns();
            let round = TranslationRound::new(
                config,
                TranslationTexts {
                    question: &self.question,
                    answer: &answer,
                    conversation: &turns,
                    grounded: self.grounds_premises(),
                },
            );
            let calls = round.pending_calls();
            self.state = ThreadState::Translate {
                answer,
                role,
                round,
            };
            return self.emit(Effect::Translate { calls }, now);
        }
        self.state = ThreadState::Validate {
            answer: answer.clone(),
            role,
            translations: None,
        };
        self.emit(
            Effect::Validate {
                question: self.question.clone(),
                answer,
            },
            now,
        )
    }

    // VALIDATE (translation): one translator's reply or failure.
    fn on_translator(
        &mut self,
        translator: u32,
        attempt: u32,
        reply: Result<String, String>,
        translation_rules: Option<u32>,
        now: u64,
    ) -> Result<Effect, ThreadError> {
        // The format whose rules read the reply and ground the premises: the thread's own, or
        // a later one a newer version continuing the thread recorded (see `Thread::handle`).
        let format = self.rules_of(translation_rules, "translationRules")?;
        // Borrowed field by field, not cloned: the config holds the policy's vocabulary.
        let config = self
            .config
            .translation
            .as_ref()
            .ok_or(ThreadError::Inconsistent(
                "translation without a translation config",
            ))?;
        let ThreadState::Translate { round, .. } = &mut self.state else {
            return Err(ThreadError::Inconsistent(
                "translator input outside translation",
            ));
        };
        let repair = match reply {
            Ok(text) => {
                let cache = &self.vocabulary.0;
                let vocabulary = match cache.get() {
                    Some(model) => model,
                    None => {
                        let model = config
                            .vocabulary_model()
                            .map_err(ThreadError::InvalidConfig)?;
                        cache.get_or_init(|| std::sync::Arc::new(model))
                    }
                };
                round.on_reply_of_format(config, vocabulary, translator, attempt, &text, format)?
            }
            Err(reason) => {
                round.on_failure(translator, attempt, &reason)?;
                None
            }
        };
        if let Some(call) = repair {
            return Ok(self.emit(Effect::Translate { calls: vec![call] }, now));
        }
        if !round.is_complete() {
            return Ok(Effect::Translate { calls: Vec::new() });
        }
        let failed = round.all_unavailable().or_else(|| {
            (format >= audit::NOTHING_TRANSLATED_FAILS_SINCE)
                .then(|| round.none_translated())
                .flatten()
        });
        if let Some(reason) = failed {
            return Ok(self.fail(format!("validator: {reason}"), now));
        }
        let mut translations = round.outputs();
        if format >= audit::GROUNDED_PREMISES_SINCE {
            let config = self
                .config
                .translation
                .as_ref()
                .ok_or(ThreadError::Inconsistent(
                    "translation without its configuration",
                ))?;
            ground_premises(&self.translator_turns(), &mut translations, format, config);
        }
        let ThreadState::Translate { answer, role, .. } = std::mem::replace(
            &mut self.state,
            ThreadState::GenerateInitial {
                prompt: String::new(),
            },
        ) else {
            return Err(ThreadError::Inconsistent("translation state vanished"));
        };
        self.state = ThreadState::Validate {
            answer: answer.clone(),
            role,
            translations: Some(translations.clone()),
        };
        Ok(self.emit(
            Effect::Check {
                question: self.question.clone(),
                answer,
                translations,
            },
            now,
        ))
    }

    /// The follow-up questions as the thread asks them: from format 14 a line naming a policy
    /// variable is asked in the policy's words ([`crate::policy_questions`]), once.
    fn worded_questions(&self, lines: Vec<String>) -> Vec<String> {
        if self.format_version() < audit::POLICY_QUESTIONS_SINCE {
            return lines;
        }
        // A question the LLM worded shows as it reads, too.
        let lines = lines
            .iter()
            .map(|l| without_invisible(l))
            .filter(|l| !l.trim().is_empty());
        let Some(vocabulary) = self.question_vocabulary() else {
            return lines.collect();
        };
        let lines: Vec<String> = lines.collect();
        let named: Vec<String> = lines
            .iter()
            .filter_map(|l| crate::policy_questions::named_question(vocabulary, l))
            .collect();
        // A round is the policy's questions alone whenever it names a variable: a line the
        // LLM worded beside them could say what the next one "means" ("say yes if you want
        // the discount"), and the user's honest answer was bound to the policy's variable (a
        // review's case). Otherwise the LLM's questions go out, and no short answer to them
        // states anything.
        let round = if named.is_empty() { lines } else { named };
        let mut out: Vec<String> = Vec::new();
        for q in round {
            if !out.contains(&q) {
                out.push(q);
            }
        }
        out
    }

    /// The policy's vocabulary, when the thread knows it (its translators', or the one it
    /// holds an external validator's premises to).
    fn question_vocabulary(&self) -> Option<&crate::policy::PolicyDefinition> {
        self.config
            .translation
            .as_ref()
            .or(self.config.validator_grounding.as_ref())
            .map(|t| &t.vocabulary)
    }

    fn ask(&mut self, questions: Vec<String>, now: u64) -> Effect {
        let deadline = self
            .config
            .question_timeout_ms
            .map(|t| now.saturating_add(t));
        self.clarifications.push(ClarificationExchange {
            questions: questions.clone(),
            asked_at: now,
            response: None,
        });
        self.state = ThreadState::AwaitingInput {
            questions: questions.clone(),
            deadline,
        };
        self.emit(
            Effect::AskUser {
                questions,
                deadline,
            },
            now,
        )
    }

    /// The audit format whose rules apply to an input that records `recorded` (its
    /// `verdictRules` or `translationRules`): the thread's own when it records none; never
    /// older than that, nor newer than this version's.
    fn rules_of(&self, recorded: Option<u32>, name: &'static str) -> Result<u32, ThreadError> {
        match recorded {
            None => Ok(self.format_version()),
            Some(r) if (self.format_version()..=audit::FORMAT_VERSION).contains(&r) => Ok(r),
            Some(r) => Err(ThreadError::Inconsistent(
                match (name, r > audit::FORMAT_VERSION) {
                    ("verdictRules", true) => "verdictRules of a format this version does not know",
                    ("verdictRules", false) => "verdictRules older than the thread's own format",
                    (_, true) => "translationRules of a format this version does not know",
                    (_, false) => "translationRules older than the thread's own format",
                },
            )),
        }
    }

    // VALIDATE -> HANDLE_RESULT -> COMPLETED | REWRITING_LOOP
    fn on_validated(
        &mut self,
        mut findings: Vec<Finding>,
        evidence: Option<Value>,
        verdict_rules: Option<u32>,
        now: u64,
    ) -> Result<Effect, ThreadError> {
        // The format whose verdict rules judge these findings: the thread's own, or a later
        // one that a newer version continuing the thread recorded (see `Thread::handle`).
        let rules = self.rules_of(verdict_rules, "verdictRules")?;
        let (answer, role, sources) = match &self.state {
            ThreadState::Validate {
                answer,
                role,
                translations,
            } => {
                if let (Some(config), Some(translations)) = (&self.config.translation, translations)
                {
                    check_findings(config, translations, &findings)
                        .map_err(ThreadError::FindingsMismatch)?;
                    if rules >= audit::UNTRANSLATED_REPORTED_SINCE {
                        check_untranslated_reported(translations, &findings)
                            .map_err(ThreadError::FindingsMismatch)?;
                    }
                }
                // By the rules judging these findings, so a thread that waited across an
                // upgrade is held to them too (and says so: `verdictRules`).
                if translations.is_none() && rules >= audit::VALIDATOR_RULES_OF_POLICY_SINCE {
                    rules_of_policy(&self.config.policy, &findings)
                        .map_err(ThreadError::FindingsMismatch)?;
                }
                if translations.is_none() && rules >= audit::VALIDATOR_PREMISES_GROUNDED_SINCE {
                    findings = self.validator_findings_grounded(findings, rules);
                }
                if let (Some(translations), true) =
                    (translations, rules >= audit::NUMBERS_READ_SINCE)
                {
                    findings = self.numbers_read(answer, *role, translations, findings, rules);
                }
                let sources = translations
                    .as_deref()
                    .map(|t| premise_sources(&self.translator_turns(), t))
                    .unwrap_or_default();
                (answer.clone(), *role, sources)
            }
            _ => return Err(ThreadError::Inconsistent("findings outside VALIDATE")),
        };
        let iteration = self.iterations().saturating_add(1);
        let verdict = crate::verdict::aggregate_verdict_of_format(&findings, rules);
        self.current_step()?.validation = Some(Validation {
            iteration,
            findings: findings.clone(),
            verdict: verdict.clone(),
            evidence,
            premise_sources: sources,
            at: now,
        });
        let returned = self.steps.len() - 1;

        if role == AnswerRole::ImpossibleExplanation {
            if let Some(warning) = explanation_confirmed(&findings, rules) {
                return Ok(self.finish_with(returned, OutcomeStatus::Impossible, warning, now));
            }
        }
        if verdict.is_valid() {
            let status = match verdict.warning {
                Some(_) => OutcomeStatus::ValidWithWarning,
                None => OutcomeStatus::Valid,
            };
            return Ok(self.finish_with(returned, status, verdict.warning, now));
        }
        match verdict.verdict {
            Verdict::NoTranslations => {
                return Ok(self.finish_with(
                    returned,
                    OutcomeStatus::NotCovered,
                    Some(OUTSIDE_POLICY_WARNING.into()),
                    now,
                ))
            }
            Verdict::NoFindings => {
                return Ok(self.finish_with(
                    returned,
                    OutcomeStatus::NotCovered,
                    Some(NO_FINDINGS_WARNING.into()),
                    now,
                ))
            }
            _ => {}
        }
        if iteration >= self.config.max_iterations {
            let best = self.best_step();
            let validation = self.steps[best].validation.as_ref();
            let mut warning = format!(
                "not verified: no VALID answer within {} iterations; this is the best answer \
                 found, its verdict is {}",
                self.config.max_iterations,
                validation.map_or("unknown", |v| v.verdict.verdict.as_str())
            );
            if self.format_version() >= audit::UNREFUTED_BEST_SINCE {
                if let Some(kind) = validation.and_then(|v| refuting_kind(&v.findings)) {
                    if validation.is_some_and(|v| v.verdict.verdict.as_str() != kind) {
                        warning
                            .push_str(&format!(", and the policy contradicts part of it ({kind})"));
                    }
                }
            }
            return Ok(self.finish_with(best, OutcomeStatus::MaxIterations, Some(warning), now));
        }

        let top = top_finding(&findings)
            .map(Finding::kind)
            .ok_or(ThreadError::Inconsistent(
                "no top finding for a non-empty list",
            ))?;
        let offered = prompts::offered_decisions(top, self.config.allows_questions());
        let prompt = prompts::rewrite(&RewriteRequest {
            question: &self.question,
            answer: &answer,
            findings: &findings,
            policy: &self.config.policy,
            clarifications: &self.clarifications,
            offered: &offered,
            format: self.format_version(),
            questions_by_variable: self.question_vocabulary().is_some(),
        });
        Ok(self.call_llm(
            LlmPurpose::Rewrite,
            Some(Verdict::of_kind(top)),
            prompt,
            offered,
            now,
        ))
    }

    fn call_llm(
        &mut self,
        purpose: LlmPurpose,
        addressing: Option<Verdict>,
        prompt: String,
        offered: Vec<DecisionKind>,
        now: u64,
    ) -> Effect {
        self.steps
            .push(Step::requested(purpose, addressing, prompt.clone(), now));
        self.state = ThreadState::RewritingLoop {
            purpose,
            prompt: prompt.clone(),
            offered,
        };
        self.emit(Effect::CallLlm { purpose, prompt }, now)
    }

    /// The validated step closest to VALID; the later one on ties. From audit format 6
    /// ([`audit::UNREFUTED_BEST_SINCE`]) a step no finding refuted comes before any that one
    /// did, whatever their aggregate verdicts.
    fn best_step(&self) -> usize {
        let unrefuted_first = self.format_version() >= audit::UNREFUTED_BEST_SINCE;
        let mut best: Option<((bool, u8), usize)> = None;
        for (i, s) in self.steps.iter().enumerate() {
            if let (Some(v), Some(_)) = (&s.validation, &s.answer) {
                let refuted = unrefuted_first && refuting_kind(&v.findings).is_some();
                let c = (refuted, closeness(v.verdict.verdict));
                if best.is_none_or(|(bc, _)| c <= bc) {
                    best = Some((c, i));
                }
            }
        }
        best.map_or(self.steps.len().saturating_sub(1), |(_, i)| i)
    }

    // AWAITING_INPUT -> REWRITING_LOOP (regenerate)
    fn on_clarification(
        &mut self,
        response: ClarificationResponse,
        now: u64,
    ) -> Result<Effect, ThreadError> {
        let reason = match response {
            ClarificationResponse::Answered { .. } => RegenerationReason::Clarified,
            _ => RegenerationReason::Skipped,
        };
        let exchange = self
            .clarifications
            .last_mut()
            .filter(|e| e.response.is_none())
            .ok_or(ThreadError::Inconsistent("no pending follow-up questions"))?;
        exchange.response = Some(response);
        let (_, previous, _, validation) = self.last_validated().ok_or(
            ThreadError::Inconsistent("follow-up questions without an earlier validation"),
        )?;
        let prompt = prompts::regenerate(&RegenerateRequest {
            question: &self.question,
            previous_answer: previous,
            findings: &validation.findings,
            policy: &self.config.policy,
            clarifications: &self.clarifications,
            reason,
            format: self.format_version(),
        });
        let purpose = match reason {
            RegenerationReason::Clarified => LlmPurpose::RegenerateWithClarifications,
            RegenerationReason::Skipped => LlmPurpose::RegenerateAfterSkip,
        };
        Ok(self.call_llm(purpose, None, prompt, Vec::new(), now))
    }

    fn on_tick(&mut self, now: u64) -> Result<Effect, ThreadError> {
        match &self.state {
            ThreadState::AwaitingInput {
                deadline: Some(d), ..
            } if now >= *d => {
                self.on_clarification(ClarificationResponse::TimedOut { at: now }, now)
            }
            ThreadState::AwaitingInput { .. } => {
                // Not yet: the questions stay pending; re-issuing the effect is harmless.
                let effect = self.pending_effect();
                Ok(self.emit(effect, now))
            }
            _ => Err(ThreadError::Inconsistent("tick outside AWAITING_INPUT")),
        }
    }

    /// Finishes returning the text of `steps[step]` with its findings.
    fn finish_with(
        &mut self,
        step: usize,
        status: OutcomeStatus,
        warning: Option<String>,
        now: u64,
    ) -> Effect {
        let s = self.steps.get(step);
        let validation = s.and_then(|s| s.validation.as_ref());
        let outcome = Outcome {
            status,
            answer: s.and_then(|s| s.answer.clone()),
            warning,
            findings: validation.map(|v| v.findings.clone()).unwrap_or_default(),
            iterations: self.iterations(),
            // Soundness: verified only for the exact text whose own validation was VALID.
            verified: validation.is_some_and(|v| v.verdict.is_valid()),
            model: s
                .and_then(|s| s.reply.as_ref())
                .and_then(|r| r.model.clone()),
            reason: None,
        };
        let evidence = validation.and_then(|v| v.evidence.clone());
        self.finish(outcome, evidence, now)
    }

    fn fail(&mut self, reason: String, now: u64) -> Effect {
        // Fail-open returns the chatbot's first answer unchecked, and says so in the trail;
        // never an answer the policy already contradicted (INVALID or IMPOSSIBLE).
        // From format 4 any INVALID or IMPOSSIBLE finding refutes it: the aggregate verdict
        // ranks TRANSLATION_AMBIGUOUS and UNKNOWN above INVALID, so reading it alone released
        // an answer one pair of which the policy contradicted.
        // The first answer can be validated again in a later step (a rewrite that holds no
        // answer, or the same text): from format 4 any such validation can refute it too.
        let any_finding = self.format_version() >= audit::REFUTED_BY_ANY_FINDING_SINCE;
        let refuted = |s: &Step| {
            s.validation.as_ref().is_some_and(|v| {
                matches!(v.verdict.verdict, Verdict::Invalid | Verdict::Impossible)
                    || (any_finding
                        && v.findings
                            .iter()
                            .any(|f| matches!(f, Finding::Invalid(_) | Finding::Impossible(_))))
            })
        };
        let first_answer = self.steps.first().and_then(|s| s.answer.as_deref());
        let refuted_later = any_finding
            && self
                .steps
                .iter()
                .skip(1)
                .any(|s| s.answer.as_deref() == first_answer && refuted(s));
        let first = self
            .steps
            .first()
            .filter(|s| !refuted(s) && !refuted_later)
            .and_then(|s| s.reply.as_ref());
        if let (FailureMode::Open, Some(first)) = (self.config.failure_mode, first) {
            // Unchecked, and marked so, but still shown as it reads (format 14).
            let text = if self.format_version() >= audit::INVISIBLE_CHARACTERS_REMOVED_SINCE {
                without_invisible(&first.text)
            } else {
                first.text.clone()
            };
            let outcome = Outcome {
                status: OutcomeStatus::Unverified,
                answer: Some(text),
                warning: Some(
                    "UNVERIFIED: this answer could not be checked against the policy".into(),
                ),
                findings: Vec::new(),
                iterations: self.iterations(),
                verified: false,
                model: first.model.clone(),
                reason: Some(reason),
            };
            return self.finish(outcome, None, now);
        }
        self.finish_error(reason, now)
    }

    /// ERROR, with no answer: what a failure is in fail-closed mode, and a blocked answer in
    /// any mode.
    fn finish_error(&mut self, reason: String, now: u64) -> Effect {
        let outcome = Outcome {
            status: OutcomeStatus::Error,
            answer: None,
            warning: None,
            findings: Vec::new(),
            iterations: self.iterations(),
            verified: false,
            model: None,
            reason: Some(reason),
        };
        self.finish(outcome, None, now)
    }

    fn finish(&mut self, outcome: Outcome, evidence: Option<Value>, now: u64) -> Effect {
        let record = FinalRecord {
            timestamp: now,
            thread_id: self.id.clone(),
            question: self.question.clone(),
            outcome: outcome.clone(),
            evidence,
            clarifications: self.clarifications.clone(),
        };
        self.append(RecordKind::final_for(outcome.status), now, to_body(&record));
        self.state = match outcome.status {
            OutcomeStatus::Error => ThreadState::Error {
                outcome: outcome.clone(),
            },
            _ => ThreadState::Completed {
                outcome: outcome.clone(),
            },
        };
        Effect::Finish(outcome)
    }

    /// Records a non-final effect and returns it.
    fn emit(&mut self, effect: Effect, now: u64) -> Effect {
        if let Some(kind) = RecordKind::of_effect(&effect) {
            let body = audit::effect_record_body(&effect, self.format_version());
            self.append(kind, now, body);
        }
        effect
    }

    /// `findings`, with a NO_TRANSLATIONS finding for the sentences of `answer` whose numbers
    /// what they checked does not read, when they would make it VALID or confirm an
    /// explanation of IMPOSSIBLE (`role`) (audit format 15 on).
    fn numbers_read(
        &self,
        answer: &str,
        role: AnswerRole,
        translations: &[crate::translation::TranslatorOutput],
        mut findings: Vec<Finding>,
        rules: u32,
    ) -> Vec<Finding> {
        let verdict = crate::verdict::aggregate_verdict_of_format(&findings, rules);
        let explains = role == AnswerRole::ImpossibleExplanation
            && verdict.verdict == crate::verdict::Verdict::Impossible;
        if !verdict.is_valid() && !explains {
            return findings;
        }
        let rule_logic = self
            .config
            .policy
            .rules
            .iter()
            .map(|r| (r.id.as_str(), r.expression.as_str(), r.english.as_deref()));
        let unread =
            crate::translation::unread_numbers(answer, &findings, translations, rule_logic);
        if !unread.is_empty() {
            findings.push(crate::translation::unread_numbers_finding(&unread));
        }
        findings
    }

    /// An external validator's findings with the VALIDs whose premises no turn bears out
    /// counted as SATISFIABLE, by the grounding rules of format `rules` (10 on; see
    /// [`crate::conversation::ground_validator_findings`]).
    fn validator_findings_grounded(&self, findings: Vec<Finding>, rules: u32) -> Vec<Finding> {
        let unknown;
        let config = match &self.config.validator_grounding {
            Some(config) => config,
            None => {
                unknown = crate::translation::TranslationConfig::new(
                    &crate::policy::PolicyDefinition::default(),
                    1,
                    0,
                    1.0,
                );
                &unknown
            }
        };
        crate::conversation::ground_validator_findings(
            &self.translator_turns(),
            findings,
            rules,
            config,
        )
    }

    /// Whether this thread holds premises to the turns they cite (audit format 4 on).
    fn grounds_premises(&self) -> bool {
        self.format_version() >= audit::GROUNDED_PREMISES_SINCE
    }

    /// The conversation the translators read. From format 4: the app's conversation (a lone
    /// question is turn 1), then each follow-up exchange the user answered, the questions as
    /// the assistant's turn and the answers as the user's, so that a fact the user gave there
    /// can be a premise of the regenerated answer. Before: the app's conversation alone.
    fn translator_turns(&self) -> std::borrow::Cow<'_, [ConversationTurn]> {
        if !self.grounds_premises() {
            return std::borrow::Cow::Borrowed(&self.conversation);
        }
        let answered: Vec<(&[String], &[String])> = self
            .clarifications
            .iter()
            .filter_map(|e| match &e.response {
                Some(ClarificationResponse::Answered { answers, .. }) => {
                    Some((e.questions.as_slice(), answers.as_slice()))
                }
                _ => None,
            })
            .collect();
        if answered.is_empty() && !self.conversation.is_empty() {
            return std::borrow::Cow::Borrowed(&self.conversation);
        }
        let mut turns = if self.conversation.is_empty() {
            crate::translation::question_as_conversation(&self.question)
        } else {
            self.conversation.to_vec()
        };
        for (questions, answers) in answered {
            turns.push(ConversationTurn::new(
                TurnRole::Assistant,
                questions.join("\n"),
            ));
            turns.push(ConversationTurn::new(TurnRole::User, answers.join("\n")));
        }
        std::borrow::Cow::Owned(turns)
    }

    /// The audit format of the thread's trail: the one its THREAD_STARTED record names (a
    /// replayed thread writes its records as they were written then).
    pub fn format_version(&self) -> u32 {
        self.audit_trail
            .first()
            .and_then(|r| r.body.get("formatVersion"))
            .and_then(Value::as_u64)
            .and_then(|v| u32::try_from(v).ok())
            .unwrap_or(audit::FORMAT_VERSION)
    }

    fn append(&mut self, kind: RecordKind, at: u64, body: Value) {
        audit::append(&mut self.audit_trail, kind, at, body);
    }
}

/// Refuses findings citing a rule the thread's policy does not have (see
/// [`audit::VALIDATOR_RULES_OF_POLICY_SINCE`]). A thread shown no rules (a Bedrock validator
/// without a local copy of its policy) has none to hold them to.
fn rules_of_policy(policy: &prompts::PolicyContext, findings: &[Finding]) -> Result<(), String> {
    if policy.rules.is_empty() {
        return Ok(());
    }
    for (i, f) in findings.iter().enumerate() {
        for rule in f.cited_rules() {
            let id = rule.identifier.as_deref().unwrap_or("");
            if !policy.rules.iter().any(|r| r.id == id) {
                return Err(format!(
                    "finding {i} ({}) cites rule {id:?}, which the thread's policy does not have: \
                     findings of another policy, or of another version of it, prove nothing \
                     under the rules this thread was shown (give the thread the policy version \
                     the validator checks, e.g. the guardrail's in proofgate's `[validator] \
                     policy`)",
                    f.kind()
                ));
            }
        }
    }
    Ok(())
}

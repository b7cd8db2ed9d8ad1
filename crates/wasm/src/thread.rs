//! The rewriting loop and audit replay for JavaScript: the `Thread` class, `replayAudit` and
//! `verifyChain`.
//!
//! Values cross the boundary as JSON text (`JSON.stringify` / `JSON.parse`), not through
//! serde-wasm-bindgen: audit hashes are computed over JSON values, and going through JSON
//! keeps integers integers and every record exactly as a stored trail file has it.

use proofgate_core::audit::policy_document::policy_document_of;
use proofgate_core::audit::{replay_json_with, verify_chain_json, PolicyDocuments};
use proofgate_core::thread::{GivenAnswer, Input, Thread, ThreadConfig};
use serde::{de::DeserializeOwned, Serialize};
use serde_json::Value;
use std::cell::RefCell;
use std::rc::Rc;
use wasm_bindgen::prelude::*;

#[wasm_bindgen(typescript_custom_section)]
const TS_THREAD_TYPES: &'static str = r#"
export interface PolicyContext {
  rules?: { id: string; expression?: string; english?: string }[];
  variables?: { name: string; description?: string }[];
}
/** Thread configuration; every member is optional. */
export interface ThreadConfig {
  /** At most this many validations (default 5). */
  maxIterations?: number;
  /** Whether the LLM may ask the user follow-up questions (default "ALLOWED"). */
  followUpQuestions?: "ALLOWED" | "DISABLED";
  /** Milliseconds the user has to answer; null waits for ever (default 900000). */
  questionTimeoutMs?: number | null;
  policy?: PolicyContext;
  /** With the local validator: the thread drives the translators (Translate, then Check)
   * instead of asking for whole-text validation (Validate). */
  translation?: TranslationConfig;
  /** Without translators (Amazon Bedrock validates whole texts): the policy's vocabulary (and
   * `systemPromptFacts`) that the premises of its VALID findings are held to (audit format 10;
   * only `vocabulary` and `systemPromptFacts` are read). Absent: no vocabulary, so a premise
   * naming an enum value is never borne out. Not with `translation`. */
  validatorGrounding?: TranslationConfig;
  /** What a failure of the LLM or validator ends in (default "CLOSED": ERROR, no answer;
   * "OPEN": the first answer, marked UNVERIFIED). */
  failureMode?: "CLOSED" | "OPEN";
}
/** A policy definition in the AWS shape (types, variables, rules). */
export interface PolicyDefinition {
  version?: string;
  types?: { name: string; description?: string; values?: { value: string; description?: string }[] }[];
  variables?: { name: string; type: string; description?: string }[];
  rules?: { id: string; expression: string; alternateExpression?: string }[];
  [extra: string]: unknown;
}
export interface TranslationConfig {
  /** k: how many translators translate each answer (at least 1). */
  translators: number;
  /** How often a reply with syntax or type errors is sent back for repair. */
  repairAttempts: number;
  /** How many of the k translators must agree on a pair for it to be checked. */
  requiredAgreement: number;
  /** The policy's types and variables. */
  vocabulary: PolicyDefinition;
  /** Whether the app's system prompt states facts about the user (default false). */
  systemPromptFacts?: boolean;
  /** Whether tools' results state facts about the user (default true; turn it off for tools
   * that bring in text written elsewhere: web pages, documents, emails). */
  toolResultFacts?: boolean;
}
export interface ChatTurn { role: string; content: string }
/** One translator call: send `messages`, hand back the reply with the same translator, attempt and call. `call` names this call (from audit format 15 a reply or failure must carry it: a late reply to an earlier round's call is refused). */
export interface TranslatorCall { translator: number; attempt: number; messages: ChatTurn[]; call: string }
/** What one translator made of the answer. */
export interface TranslatorOutput {
  pairs: { premises: Statement[]; claims: Statement[] }[];
  untranslatedPremises: string[]; untranslatedClaims: string[];
}
export type LlmPurpose = "INITIAL_ANSWER" | "REWRITE" | "REGENERATE_WITH_CLARIFICATIONS" | "REGENERATE_AFTER_SKIP";
/** An input; `now` (ms since the epoch) defaults to Date.now(). */
export type Input =
  | { type: "LlmReplied"; text: string; model?: string; now?: number }
  | { type: "Validated"; findings: Finding[]; evidence?: unknown; verdictRules?: number; now?: number }
  | { type: "TranslatorReplied"; translator: number; attempt: number; call: string; text: string; model?: string; translationRules?: number; now?: number }
  | { type: "TranslatorFailed"; translator: number; attempt: number; call: string; reason: string; translationRules?: number; now?: number }
  | { type: "UserAnswered"; answers: string[]; now?: number }
  | { type: "UserSkipped"; now?: number }
  | { type: "Tick"; now?: number }
  | { type: "Failed"; reason: string; now?: number }
  /** The validator's guardrail blocked the answer: ERROR with no answer, fail-open or not. */
  | { type: "Blocked"; reason: string; now?: number };
export type OutcomeStatus = "VALID" | "VALID_WITH_WARNING" | "NOT_COVERED" | "IMPOSSIBLE" | "MAX_ITERATIONS"
  | "UNVERIFIED" | "ERROR" | "TOOL_CALL";
export interface Outcome {
  status: OutcomeStatus;
  /** The answer to show; absent for ERROR. Its findings are below, except for UNVERIFIED
   * (fail-open: the chatbot's answer, checked by nothing). Show `warning` with it: the proxy
   * puts it first, as `[proofgate: warning]`; this package leaves that to the app. */
  answer?: string;
  /** What the user must be told with the answer (part not covered, not verified, ...). */
  warning?: string;
  findings: Finding[];
  iterations: number;
  /** True when this answer's own validation was VALID, also for VALID_WITH_WARNING, whose
   * `warning` names a part nothing checked: only status "VALID" means every claim was
   * checked. MAX_ITERATIONS, NOT_COVERED and UNVERIFIED carry an answer that is not verified. */
  verified: boolean;
  model?: string;
  reason?: string;
}
export type Effect =
  | { type: "CallLlm"; purpose: LlmPurpose; prompt: string }
  | { type: "Validate"; question: string; answer: string }
  /** Start these calls (an empty list: keep waiting for those in flight). */
  | { type: "Translate"; calls: TranslatorCall[] }
  /** Check the translations (one per translator, in order) and hand back Validated. */
  | { type: "Check"; question: string; answer: string; translations: TranslatorOutput[] }
  | { type: "AskUser"; questions: string[]; deadline?: number }
  | ({ type: "Finish" } & Outcome);
export type Phase = "GENERATE_INITIAL" | "VALIDATE" | "CHECK_QUESTIONS" | "HANDLE_RESULT"
  | "REWRITING_LOOP" | "AWAITING_INPUT" | "COMPLETED" | "ERROR";
export interface ClarificationExchange {
  questions: string[];
  askedAt: number;
  response?: { status: "ANSWERED"; answers: string[]; at: number }
    | { status: "SKIPPED"; at: number } | { status: "TIMED_OUT"; at: number };
}
/** One LLM call and what followed: the debug panel's row. */
export interface Step {
  purpose: LlmPurpose;
  addressing?: Verdict;
  prompt: string;
  requestedAt: number;
  reply?: { text: string; model?: string; at: number };
  decision?: Decision;
  note?: string;
  answer?: string;
  role?: "ANSWER" | "IMPOSSIBLE_EXPLANATION";
  validation?: { iteration: number; findings: Finding[]; verdict: AggregateVerdict; evidence?: unknown;
    /** Which conversation turn (1-based) each premise came from, for threads with a conversation. */
    premiseSources?: { logic: string; naturalLanguage?: string; turn?: number; role?: "system" | "user" | "assistant" | "tool" }[];
    at: number };
}
export type RecordKind = "THREAD_STARTED" | "LLM_REPLIED" | "VALIDATED" | "USER_ANSWERED" | "USER_SKIPPED"
  | "TICK" | "FAILED" | "BLOCKED" | "TRANSLATOR_REPLIED" | "TRANSLATOR_FAILED" | "TRANSLATE" | "CHECK"
  | "CALL_LLM" | "VALIDATE" | "ASK_USER" | "VALID_RESPONSE" | "MAX_ITERATIONS_REACHED"
  | "IMPOSSIBLE_RESPONSE" | "NOT_COVERED" | "UNVERIFIED" | "ERROR" | "TOOL_CALL";
/** One audit record; `hash` is SHA-256 over the canonical JSON of the other fields. */
export interface AuditRecord { seq: number; prev: string; at: number; kind: RecordKind; body: any; hash: string }
export type ReplayProblem = "EMPTY" | "MALFORMED" | "HASH_MISMATCH" | "SEQ_MISMATCH" | "BROKEN_LINK"
  | "UNSUPPORTED_VERSION" | "REJECTED_INPUT" | "DIFFERS" | "MISSING" | "POLICY_DOCUMENT_MISSING";
/** The policy's part of a thread's configuration, recorded once per policy version: a trail's
 * THREAD_STARTED names it by the SHA-256 of its canonical JSON (`policyDocument`). */
export interface PolicyDocument { policy: PolicyContext; vocabulary?: unknown }
export interface ReplayFailure { index: number; kind?: RecordKind; problem: ReplayProblem; detail: string }
export interface ReplayReport {
  ok: boolean; formatVersion?: number; threadId?: string; records: number; verifiedRecords: number;
  headHash?: string; status?: OutcomeStatus;
  /** The question and the released answer as the verified records hold them (show these, not
   * a copy the server sent beside the trail). */
  question?: string; answer?: string; failure?: ReplayFailure;
}
export interface ChainReport { ok: boolean; records: number; verifiedRecords: number; headHash?: string; failure?: ReplayFailure }
/** A thread's JSON form, for Thread.fromJSON. */
export interface ThreadJSON {
  id: string; question: string; config: ThreadConfig; createdAt: number;
  state: { phase: Phase; [member: string]: unknown };
  steps: Step[]; clarifications: ClarificationExchange[]; auditTrail: AuditRecord[];
}
"#;

#[wasm_bindgen]
extern "C" {
    #[wasm_bindgen(js_namespace = JSON, js_name = stringify, catch)]
    fn json_stringify(value: &JsValue) -> Result<JsValue, JsValue>;
    #[wasm_bindgen(js_namespace = JSON, js_name = parse, catch)]
    fn json_parse(text: &str) -> Result<JsValue, JsValue>;
    #[wasm_bindgen(js_namespace = Date, js_name = now)]
    fn date_now() -> f64;
    #[wasm_bindgen(js_namespace = crypto, js_name = randomUUID, catch)]
    fn random_uuid() -> Result<String, JsValue>;
}

/// The first integer in `value` beyond ±(2^53 - 1), if any.
fn unsafe_integer(value: &Value) -> Option<String> {
    const MAX: u64 = (1 << 53) - 1;
    match value {
        Value::Number(n) => {
            let beyond = n.as_u64().is_some_and(|u| u > MAX)
                || n.as_i64().is_some_and(|i| i.unsigned_abs() > MAX);
            beyond.then(|| n.to_string())
        }
        Value::Array(a) => a.iter().find_map(unsafe_integer),
        Value::Object(o) => o.values().find_map(unsafe_integer),
        _ => None,
    }
}

/// `given`, or a random UUID. Without `crypto.randomUUID` (a browser page over plain http)
/// the caller must give one: an id made from the time was shared by two threads made in the
/// same millisecond, and audits tell threads apart by their ids (a review).
fn thread_id_or_new(given: Option<String>) -> Result<String, JsError> {
    match given {
        Some(id) => Ok(id),
        None => random_uuid().map_err(|_| {
            JsError::new(
                "proofgate: crypto.randomUUID is not available here (a page not served over \
                 https?): give the thread an id of your own, unique to it",
            )
        }),
    }
}

#[wasm_bindgen]
extern "C" {
    type TextEncoder;
    #[wasm_bindgen(constructor)]
    fn new() -> TextEncoder;
    /// A JS string as UTF-8 bytes. Much faster for long texts (a trail) than taking the string
    /// itself, which the glue copies into wasm memory one character at a time; the bytes are
    /// the same (lone surrogates become U+FFFD either way).
    #[wasm_bindgen(method)]
    fn encode(this: &TextEncoder, text: &JsValue) -> Vec<u8>;
}

thread_local! {
    static ENCODER: TextEncoder = TextEncoder::new();
}

/// A JS value as JSON text (UTF-8): strings are taken as JSON already, anything else is
/// stringified.
fn json_text(value: &JsValue, what: &str) -> Result<Vec<u8>, JsError> {
    if value.is_string() {
        return Ok(ENCODER.with(|e| e.encode(value)));
    }
    json_stringify(value)
        .ok()
        .filter(JsValue::is_string)
        .map(|s| ENCODER.with(|e| e.encode(&s)))
        .ok_or_else(|| JsError::new(&format!("proofgate: {what} cannot be converted to JSON")))
}

fn from_json<T: DeserializeOwned>(text: &[u8], what: &str) -> Result<T, JsError> {
    serde_json::from_slice(text).map_err(|e| {
        // JSON.stringify writes a lone UTF-16 surrogate as an escape no Unicode text holds,
        // which serde_json reports as a bad escape: say what it is.
        let lone = e.to_string().contains("hex escape")
            || e.to_string().contains("lone leading surrogate");
        if lone {
            JsError::new(&format!(
                "proofgate: {what} holds a lone UTF-16 surrogate (half of a character, not \
                 Unicode text): {e}"
            ))
        } else {
            JsError::new(&format!("proofgate: {what} is malformed: {e}"))
        }
    })
}

/// A structured JS argument read as every export reads one: its JSON text, parsed by
/// serde_json (whose recursion limit makes deep nesting an error, where walking the JS value
/// itself overflowed the wasm stack and broke the instance), then typed. So a Map, NaN or an
/// array where an object belongs means the same to `aggregateVerdict` as to `Thread.handle`.
pub(crate) fn from_js<T: DeserializeOwned>(value: &JsValue, what: &str) -> Result<T, JsError> {
    let value: Value = from_json(&json_text(value, what)?, what)?;
    serde_json::from_value(value)
        .map_err(|e| JsError::new(&format!("proofgate: {what} is malformed: {e}")))
}

fn to_js<T: Serialize>(value: &T) -> Result<JsValue, JsError> {
    let text = serde_json::to_string(value)
        .map_err(|e| JsError::new(&format!("proofgate: could not convert the result: {e}")))?;
    json_parse(&text).map_err(|_| JsError::new("proofgate: could not convert the result"))
}

/// `Number.MAX_SAFE_INTEGER`: a time or timeout beyond it reaches JS rounded, so a trail that
/// records one no longer hashes the same once read back (`auditTrail()`, `JSON.parse`).
const MAX_SAFE_MS: u64 = 9_007_199_254_740_991;

/// A JS time (ms since the epoch) as u64.
fn millis(value: f64, what: &str) -> Result<u64, JsError> {
    if value.is_finite() && value >= 0.0 && value.fract() == 0.0 && value <= MAX_SAFE_MS as f64 {
        Ok(value as u64)
    } else {
        Err(JsError::new(&format!(
            "proofgate: {what} must be a whole number of milliseconds since the epoch, got {value}"
        )))
    }
}

/// The policy document a configuration's THREAD_STARTED names, if any.
fn config_documents(config: &ThreadConfig) -> PolicyDocuments {
    let mut documents = PolicyDocuments::new();
    if let Some((_, document)) = policy_document_of(config) {
        // A configuration's policy is always a policy document; one that were not would only
        // leave the trail's document missing, which resuming reports.
        let _ = documents.insert(document);
    }
    documents
}

/// The rewriting loop of one question. Drive it with `start()` and `handle(input)`; persist
/// it with `toJSON()` / `Thread.fromJSON()`.
#[wasm_bindgen(js_name = Thread)]
pub struct WasmThread {
    inner: Thread,
}

/// The configuration argument: omitted (`undefined`/`null`) means the defaults.
fn thread_config(config: &JsValue) -> Result<ThreadConfig, JsError> {
    if config.is_undefined() || config.is_null() {
        return Ok(ThreadConfig::default());
    }
    let config: ThreadConfig = from_json(
        &json_text(config, "the configuration")?,
        "the configuration",
    )?;
    match config.question_timeout_ms {
        Some(t) if t > MAX_SAFE_MS => Err(JsError::new(&format!(
            "proofgate: questionTimeoutMs must be a safe integer (at most \
             Number.MAX_SAFE_INTEGER) number of milliseconds, got {t}"
        ))),
        _ => Ok(config),
    }
}

#[wasm_bindgen(js_class = Thread)]
impl WasmThread {
    /// Creates a thread. `config` may be omitted (defaults), `threadId` defaults to a random
    /// UUID and `now` to `Date.now()`.
    #[wasm_bindgen(constructor)]
    pub fn new(
        #[wasm_bindgen(unchecked_param_type = "ThreadConfig | null | undefined")] config: JsValue,
        question: String,
        #[wasm_bindgen(js_name = threadId)] thread_id: Option<String>,
        now: Option<f64>,
    ) -> Result<WasmThread, JsError> {
        let now = millis(now.unwrap_or_else(date_now), "now")?;
        let config = thread_config(&config)?;
        let id = thread_id_or_new(thread_id)?;
        let inner = Thread::new(config, id, question, now)
            .map_err(|e| JsError::new(&format!("proofgate: {e}")))?;
        Ok(WasmThread { inner })
    }

    /// Creates a thread for your chatbot's `answer` to a conversation, with each turn's role:
    /// `conversation` is `[{role: "system" | "user" | "assistant" | "tool", text}]`; its last
    /// user turn is the question (tool calls and results may follow it). The translators read the conversation as
    /// context, and a premise is a fact only a user, system or tool turn gives (the README's
    /// grounding rules): flattening a chat into `question` made an earlier assistant turn read
    /// as the user's words.
    #[wasm_bindgen(js_name = forReply)]
    pub fn for_reply(
        #[wasm_bindgen(unchecked_param_type = "ThreadConfig | null | undefined")] config: JsValue,
        #[wasm_bindgen(
            unchecked_param_type = "{ role: \"system\" | \"user\" | \"assistant\" | \"tool\"; text: string }[]"
        )]
        conversation: JsValue,
        #[wasm_bindgen(unchecked_param_type = "{ text: string; model?: string; source: string }")]
        answer: JsValue,
        #[wasm_bindgen(js_name = threadId)] thread_id: Option<String>,
        now: Option<f64>,
    ) -> Result<WasmThread, JsError> {
        let now = millis(now.unwrap_or_else(date_now), "now")?;
        let config = thread_config(&config)?;
        let conversation: Vec<proofgate_core::conversation::ConversationTurn> = from_json(
            &json_text(&conversation, "the conversation")?,
            "the conversation",
        )?;
        let question = match conversation
            .iter()
            .rev()
            .find(|t| t.role == proofgate_core::conversation::TurnRole::User)
        {
            Some(t) => t.text.clone(),
            None => {
                return Err(JsError::new(
                    "proofgate: the conversation has no user turn: the answer replies to the \
                     last user message",
                ))
            }
        };
        let answer: GivenAnswer = from_json(&json_text(&answer, "the answer")?, "the answer")?;
        let id = thread_id_or_new(thread_id)?;
        let inner = Thread::for_reply(
            config,
            id,
            question,
            conversation,
            proofgate_core::thread::ChatbotReply::Answer(answer),
            now,
        )
        .map_err(|e| JsError::new(&format!("proofgate: {e}")))?;
        Ok(WasmThread { inner })
    }

    /// Creates a thread whose first answer is already known (e.g. your chatbot's own reply):
    /// its first effect validates that answer. `answer` is `{text, model?, source}`.
    #[wasm_bindgen(js_name = withAnswer)]
    pub fn with_answer(
        #[wasm_bindgen(unchecked_param_type = "ThreadConfig | null | undefined")] config: JsValue,
        question: String,
        #[wasm_bindgen(unchecked_param_type = "{ text: string; model?: string; source: string }")]
        answer: JsValue,
        #[wasm_bindgen(js_name = threadId)] thread_id: Option<String>,
        now: Option<f64>,
    ) -> Result<WasmThread, JsError> {
        let now = millis(now.unwrap_or_else(date_now), "now")?;
        let config = thread_config(&config)?;
        let answer: GivenAnswer = from_json(&json_text(&answer, "the answer")?, "the answer")?;
        let id = thread_id_or_new(thread_id)?;
        let inner = Thread::with_answer(config, id, question, answer, now)
            .map_err(|e| JsError::new(&format!("proofgate: {e}")))?;
        Ok(WasmThread { inner })
    }

    /// The first effect (ask the LLM for an answer); later, whatever the thread waits for.
    #[wasm_bindgen(unchecked_return_type = "Effect")]
    pub fn start(&self) -> Result<JsValue, JsError> {
        to_js(&self.inner.start())
    }

    /// Feeds an input and returns the next effect. Throws, leaving the thread unchanged, when
    /// the input does not fit the thread's state.
    #[wasm_bindgen(unchecked_return_type = "Effect")]
    pub fn handle(
        &mut self,
        #[wasm_bindgen(unchecked_param_type = "Input")] input: JsValue,
    ) -> Result<JsValue, JsError> {
        let mut value: Value = from_json(&json_text(&input, "the input")?, "the input")?;
        if let Some(obj) = value.as_object_mut() {
            match obj.get("now").map(Value::as_u64) {
                None => {
                    obj.insert("now".into(), millis(date_now(), "Date.now()")?.into());
                }
                Some(Some(now)) if now > MAX_SAFE_MS => {
                    return Err(JsError::new(&format!(
                        "proofgate: the input's now must be a safe integer (at most \
                         Number.MAX_SAFE_INTEGER) number of milliseconds, got {now}"
                    )))
                }
                // Not a whole number at all: reading the input says so.
                Some(_) => {}
            }
        }
        // An integer JavaScript cannot hold exactly (given in JSON text) would be recorded,
        // then read back rounded by `toJSON`/`fromJSON`, and the trail would read as altered.
        if let Some(n) = unsafe_integer(&value) {
            return Err(JsError::new(&format!(
                "proofgate: the input holds the integer {n}, beyond what JavaScript holds exactly \
                 (Number.MAX_SAFE_INTEGER): give it as a string"
            )));
        }
        let input: Input = serde_json::from_value(value)
            .map_err(|e| JsError::new(&format!("proofgate: the input is malformed: {e}")))?;
        // The deadline of questions asked now is now + questionTimeoutMs: it must be a safe
        // integer too.
        if let Some(timeout) = self.inner.config().question_timeout_ms {
            if input.now().saturating_add(timeout) > MAX_SAFE_MS {
                return Err(JsError::new(&format!(
                    "proofgate: the input's now ({}) plus questionTimeoutMs ({timeout}) is beyond \
                     Number.MAX_SAFE_INTEGER milliseconds",
                    input.now()
                )));
            }
        }
        let effect = self
            .inner
            .handle(input)
            .map_err(|e| JsError::new(&format!("proofgate: {e}")))?;
        to_js(&effect)
    }

    /// The thread as a plain object (also what `JSON.stringify(thread)` writes).
    #[wasm_bindgen(js_name = toJSON, unchecked_return_type = "ThreadJSON")]
    pub fn to_json(&self) -> Result<JsValue, JsError> {
        to_js(&self.inner)
    }

    /// Resumes a thread from `toJSON()`'s object or its JSON text. The thread is rebuilt by
    /// replaying its audit trail, as the proxy resumes one (`Thread::resumed`): throws when the
    /// trail does not replay or the rest of the JSON differs from what the trail records.
    #[wasm_bindgen(js_name = fromJSON)]
    pub fn from_json(
        #[wasm_bindgen(unchecked_param_type = "ThreadJSON | string")] json: JsValue,
    ) -> Result<WasmThread, JsError> {
        let mut fields: serde_json::Map<String, Value> =
            from_json(&json_text(&json, "the thread")?, "the thread")?;
        // The state, steps and outcome are copies no hash covers: trusted as given, a forged
        // `state` made any answer a verified one.
        let trail = fields
            .remove("auditTrail")
            .ok_or_else(|| JsError::new("proofgate: the thread has no auditTrail"))?;
        // The policy document the trail names, from the given configuration: used only under
        // the hash of its own contents, so a forged configuration cannot stand in for it.
        let documents = match fields.get("config") {
            Some(config) => {
                let config: ThreadConfig = serde_json::from_value(config.clone()).map_err(|e| {
                    JsError::new(&format!("proofgate: the thread's config is malformed: {e}"))
                })?;
                config_documents(&config)
            }
            None => PolicyDocuments::new(),
        };
        let trail = serde_json::to_vec(&trail)
            .map_err(|e| JsError::new(&format!("proofgate: the thread: {e}")))?;
        let state = serde_json::to_string(&fields)
            .map_err(|e| JsError::new(&format!("proofgate: the thread: {e}")))?;
        let inner = Thread::resumed(&state, &trail, &documents)
            .map_err(|e| JsError::new(&format!("proofgate: the thread cannot be resumed: {e}")))?;
        Ok(WasmThread { inner })
    }

    /// The thread id.
    #[wasm_bindgen(getter)]
    pub fn id(&self) -> String {
        self.inner.id().to_string()
    }

    /// The user's question.
    #[wasm_bindgen(getter)]
    pub fn question(&self) -> String {
        self.inner.question().to_string()
    }

    /// The current phase (GENERATE_INITIAL, VALIDATE, REWRITING_LOOP, AWAITING_INPUT,
    /// COMPLETED, ERROR).
    #[wasm_bindgen(getter, unchecked_return_type = "Phase")]
    pub fn phase(&self) -> String {
        self.inner.phase().as_str().to_string()
    }

    /// How many validations have run.
    #[wasm_bindgen(getter)]
    pub fn iterations(&self) -> u32 {
        self.inner.iterations()
    }

    /// The outcome once finished, else undefined.
    #[wasm_bindgen(unchecked_return_type = "Outcome | undefined")]
    pub fn outcome(&self) -> Result<JsValue, JsError> {
        match self.inner.outcome() {
            Some(o) => to_js(o),
            None => Ok(JsValue::UNDEFINED),
        }
    }

    /// Every LLM call with what followed (prompt, reply, decision, answer, findings).
    #[wasm_bindgen(unchecked_return_type = "Step[]")]
    pub fn steps(&self) -> Result<JsValue, JsError> {
        to_js(&self.inner.steps())
    }

    /// Every round of follow-up questions.
    #[wasm_bindgen(unchecked_return_type = "ClarificationExchange[]")]
    pub fn clarifications(&self) -> Result<JsValue, JsError> {
        to_js(&self.inner.clarifications())
    }

    /// The audit trail: one hash-chained record per input and effect.
    #[wasm_bindgen(js_name = auditTrail, unchecked_return_type = "AuditRecord[]")]
    pub fn audit_trail(&self) -> Result<JsValue, JsError> {
        to_js(&self.inner.audit_trail())
    }

    /// The policy document the trail names (none when the policy is empty): keep it beside
    /// the trail, once per policy version; `replayAudit(trail, documents)` needs it.
    #[wasm_bindgen(js_name = policyDocuments, unchecked_return_type = "PolicyDocument[]")]
    pub fn policy_documents(&self) -> Result<JsValue, JsError> {
        let documents = self.inner.policy_documents();
        let documents: Vec<&Value> = documents.iter().map(|(_, d)| d).collect();
        to_js(&documents)
    }
}

/// Replays an audit trail (records, or their JSON text) with the same machine: checks every
/// hash and link, feeds the recorded inputs, compares every recorded effect and the outcome.
/// A trail whose first record names a policy document needs it in `policyDocuments` (an audit
/// bundle's `policyDocuments`); each is used only under the hash of its own contents. Never
/// throws for a bad trail: the report names the first record that differs. Throws when
/// `policyDocuments` is not a list of policy documents.
#[wasm_bindgen(js_name = replayAudit, unchecked_return_type = "ReplayReport")]
pub fn replay_audit_js(
    #[wasm_bindgen(unchecked_param_type = "AuditRecord[] | string")] trail: JsValue,
    #[wasm_bindgen(
        js_name = policyDocuments,
        unchecked_param_type = "PolicyDocument[] | string | null | undefined"
    )]
    policy_documents: JsValue,
) -> Result<JsValue, JsError> {
    let documents = read_documents_remembered(&policy_documents)?;
    to_js(&replay_json_with(
        json_text(&trail, "the trail")?,
        &documents,
    ))
}

thread_local! {
    /// The policy documents `replayAudit` read last, with the JSON text they were read from.
    /// An auditor replaying a store's trails passes the same documents with each, and reading
    /// and hashing them again was about a quarter of replaying a proxy-written trail. Only
    /// the same text, compared whole, gets them back; one set is kept.
    static LAST_DOCUMENTS: RefCell<Option<(Vec<u8>, Rc<PolicyDocuments>)>> =
        const { RefCell::new(None) };
}

/// [`read_documents`], remembering the last set read (see [`LAST_DOCUMENTS`]).
fn read_documents_remembered(policy_documents: &JsValue) -> Result<Rc<PolicyDocuments>, JsError> {
    if policy_documents.is_undefined() || policy_documents.is_null() {
        return Ok(Rc::new(PolicyDocuments::new()));
    }
    let text = json_text(policy_documents, "the policy documents")?;
    let kept = LAST_DOCUMENTS.with(|last| {
        last.borrow()
            .as_ref()
            .filter(|(read, _)| *read == text)
            .map(|(_, documents)| Rc::clone(documents))
    });
    if let Some(documents) = kept {
        return Ok(documents);
    }
    let documents = Rc::new(documents_of_text(&text)?);
    LAST_DOCUMENTS.with(|last| *last.borrow_mut() = Some((text, Rc::clone(&documents))));
    Ok(documents)
}

/// Policy documents as JS gives them (a list, its JSON text, or nothing), each filed under
/// the hash of its contents.
fn read_documents(policy_documents: &JsValue) -> Result<PolicyDocuments, JsError> {
    if policy_documents.is_undefined() || policy_documents.is_null() {
        return Ok(PolicyDocuments::new());
    }
    documents_of_text(&json_text(policy_documents, "the policy documents")?)
}

/// Policy documents from the JSON text of their list.
fn documents_of_text(text: &[u8]) -> Result<PolicyDocuments, JsError> {
    let values: Vec<Value> = from_json(text, "the policy documents")?;
    PolicyDocuments::from_owned_values(values).map_err(|e| JsError::new(&format!("proofgate: {e}")))
}

/// `replayAudit` for many trails of the same policies: the policy documents are read and
/// hashed once, when it is made, instead of for every trail (an auditor who checks a whole
/// store's trails, most of them of one policy version).
#[wasm_bindgen]
pub struct Replayer {
    documents: PolicyDocuments,
}

#[wasm_bindgen]
impl Replayer {
    /// A replayer with these policy documents (an audit bundle's `policyDocuments`, their
    /// JSON text, or none). Throws when they are not a list of policy documents.
    #[wasm_bindgen(constructor)]
    pub fn new(
        #[wasm_bindgen(
            js_name = policyDocuments,
            unchecked_param_type = "PolicyDocument[] | string | null | undefined"
        )]
        policy_documents: JsValue,
    ) -> Result<Replayer, JsError> {
        Ok(Replayer {
            documents: read_documents(&policy_documents)?,
        })
    }

    /// The same report as `replayAudit(trail, policyDocuments)`.
    #[wasm_bindgen(unchecked_return_type = "ReplayReport")]
    pub fn replay(
        &self,
        #[wasm_bindgen(unchecked_param_type = "AuditRecord[] | string")] trail: JsValue,
    ) -> Result<JsValue, JsError> {
        to_js(&replay_json_with(
            json_text(&trail, "the trail")?,
            &self.documents,
        ))
    }

    /// How many distinct documents it holds.
    #[wasm_bindgen(getter)]
    pub fn documents(&self) -> usize {
        self.documents.len()
    }
}

/// Checks only the hashes, positions and links of an audit trail (records or JSON text).
#[wasm_bindgen(js_name = verifyChain, unchecked_return_type = "ChainReport")]
pub fn verify_chain_js(
    #[wasm_bindgen(unchecked_param_type = "AuditRecord[] | string")] trail: JsValue,
) -> Result<JsValue, JsError> {
    to_js(&verify_chain_json(json_text(&trail, "the trail")?))
}

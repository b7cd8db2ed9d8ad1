//! The rewriting loop and audit replay for JavaScript: the `Thread` class, `replayAudit` and
//! `verifyChain`.
//!
//! Values cross the boundary as JSON text (`JSON.stringify` / `JSON.parse`), not through
//! serde-wasm-bindgen: audit hashes are computed over JSON values, and going through JSON
//! keeps integers integers and every record exactly as a stored trail file has it.

use proofgate_core::audit::policy_document::policy_document_of;
use proofgate_core::audit::{replay_json_with, verify_chain_json, PolicyDocuments};
use proofgate_core::thread::{GivenAnswer, Input, Thread, ThreadConfig, ThreadError};
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
/** An input; `now` (ms since the epoch) defaults to Date.now(). An input (JSON text or
 * object) may nest at most 100 levels deep, and may hold no integer beyond
 * Number.MAX_SAFE_INTEGER (nor a float such as 1e19 whose value is one): either is refused,
 * as its records could not be read back the same. */
export type Input =
  | { type: "LlmReplied"; text: string; model?: string; now?: number }
  | { type: "Validated"; findings: Finding[]; evidence?: unknown;
      /** Leave it out of a live input: `handle` sets it (to this version's rules,
       * `auditFormatVersion()`); the trail records it for replay, and any other value is
       * refused. */
      verdictRules?: number; now?: number }
  | { type: "TranslatorReplied"; translator: number; attempt: number; call: string; text: string; model?: string;
      /** Leave it out of a live input, as `verdictRules`. */
      translationRules?: number; now?: number }
  | { type: "TranslatorFailed"; translator: number; attempt: number; call: string; reason: string;
      /** Leave it out of a live input, as `verdictRules`. */
      translationRules?: number; now?: number }
  | { type: "UserAnswered"; answers: string[]; now?: number }
  | { type: "UserSkipped"; now?: number }
  | { type: "Tick"; now?: number }
  /** The validation (or the LLM call) failed: ERROR, or with failureMode "OPEN" the first
   * answer marked UNVERIFIED. Also what ends a thread whose Validated input `handle` refused
   * because the findings do not fit it (see `Thread.handle`). */
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
  steps: Step[]; clarifications: ClarificationExchange[];
  /** The conversation a `Thread.forReply` thread answers (absent for a lone question). */
  conversation?: { role: "system" | "user" | "assistant" | "tool"; text: string }[];
  auditTrail: AuditRecord[];
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
    #[wasm_bindgen(js_namespace = Object, js_name = getPrototypeOf)]
    fn prototype_of(value: &JsValue) -> JsValue;
    #[wasm_bindgen(js_namespace = crypto, js_name = randomUUID, catch)]
    fn random_uuid() -> Result<String, JsValue>;
}

/// How deep an input (or a constructor's configuration, answer or conversation) may nest,
/// the value itself being level 1. A thread records the input's values deeper than the input
/// held them (a finding sits four levels further down in the final record inside
/// `toJSON()`'s `auditTrail`), and serde_json reads at most 128 levels: an input accepted
/// near that limit gave a trail `replayAudit` reported MALFORMED and a thread `fromJSON`
/// refused ("recursion limit exceeded"). The rest is head-room for the record and the thread.
pub(crate) const MAX_INPUT_DEPTH: usize = 100;

/// How deep `value` nests: a scalar 0, an array or object one more than its deepest member.
fn depth(value: &Value) -> usize {
    match value {
        Value::Array(a) => 1 + a.iter().map(depth).max().unwrap_or(0),
        Value::Object(o) => 1 + o.values().map(depth).max().unwrap_or(0),
        _ => 0,
    }
}

/// The first number in `value` that does not come back the same through JavaScript: an
/// integer beyond ±(2^53 - 1), or a float whose value is such an integer (`1e19`: the
/// canonical hash writes it as `1e19`, while `JSON.stringify` of the number JS reads writes
/// `10000000000000000000`, an integer to serde_json, so the trail read back no longer
/// hashes the same). Other floats have a fractional part, and JS and serde_json write the
/// same double either way.
fn unsafe_number(value: &Value) -> Option<String> {
    const MAX: u64 = (1 << 53) - 1;
    match value {
        Value::Number(n) => {
            let beyond = n.as_u64().is_some_and(|u| u > MAX)
                || n.as_i64().is_some_and(|i| i.unsigned_abs() > MAX)
                // From 1e21 on, JSON.stringify writes the exponent form too: it reads back
                // as the same float.
                || (!n.is_u64()
                    && !n.is_i64()
                    && n.as_f64().is_some_and(|f| {
                        f.fract() == 0.0 && f.abs() > MAX as f64 && f.abs() < 1e21
                    }));
            beyond.then(|| n.to_string())
        }
        Value::Array(a) => a.iter().find_map(unsafe_number),
        Value::Object(o) => o.values().find_map(unsafe_number),
        _ => None,
    }
}

/// Refuses a JSON value given as `what` that a thread could not record and read back the
/// same: nested deeper than [`MAX_INPUT_DEPTH`], or holding a number JavaScript does not
/// hold exactly.
fn check_recordable(value: &Value, what: &str) -> Result<(), JsError> {
    check_depth(value, what)?;
    check_numbers(value, what)
}

/// Refuses a value nested deeper than [`MAX_INPUT_DEPTH`].
fn check_depth(value: &Value, what: &str) -> Result<(), JsError> {
    let levels = depth(value);
    if levels > MAX_INPUT_DEPTH {
        return Err(JsError::new(&format!(
            "proofgate: {what} nests {levels} levels deep, more than the {MAX_INPUT_DEPTH} a \
             thread takes (its records and its JSON nest it deeper still, and JSON readers \
             stop at 128)"
        )));
    }
    Ok(())
}

/// Refuses a value holding a number JavaScript does not hold exactly ([`unsafe_number`]): it
/// would be recorded, then read back rounded or rewritten by `toJSON`/`fromJSON`, and the
/// trail would read as altered.
fn check_numbers(value: &Value, what: &str) -> Result<(), JsError> {
    match unsafe_number(value) {
        Some(n) => Err(JsError::new(&format!(
            "proofgate: {what} holds the integer {n}, beyond what JavaScript holds exactly \
             (Number.MAX_SAFE_INTEGER): give it as a string"
        ))),
        None => Ok(()),
    }
}

/// A structured JS argument as a JSON value a thread can record (see [`check_recordable`]),
/// then typed.
fn recordable_from_js<T: DeserializeOwned>(value: &JsValue, what: &str) -> Result<T, JsError> {
    let value: Value = from_json(&json_text(value, what)?, what)?;
    check_recordable(&value, what)?;
    serde_json::from_value(value)
        .map_err(|e| JsError::new(&format!("proofgate: {what} is malformed: {e}")))
}

/// A JS value's kind, for an error that says what was given instead.
fn kind_of(value: &JsValue) -> String {
    if value.is_null() {
        "null".into()
    } else if value.is_array() {
        "an array".into()
    } else {
        value
            .js_typeof()
            .as_string()
            .unwrap_or_else(|| "something else".into())
    }
}

/// A string argument. The glue wasm-bindgen generates for a `&str` or `String` parameter does
/// not check its argument in a release build: a number, boolean or object arrived as "" (the
/// ApplyGuardrail request's `{text, qualifiers}` given as the answer read as an empty answer,
/// and a number given as a thread id made the id ""). So every string parameter is taken as a
/// `JsValue` and read here, refusing anything but a string with an error naming `name`.
pub(crate) fn string_arg(value: &JsValue, name: &str) -> Result<String, JsError> {
    if !value.is_string() {
        return Err(JsError::new(&format!(
            "proofgate: {name} must be a string, got {}",
            kind_of(value)
        )));
    }
    // The bytes of the string (see `TextEncoder`), always UTF-8.
    String::from_utf8(ENCODER.with(|e| e.encode(value)))
        .map_err(|_| JsError::new(&format!("proofgate: {name} is not UTF-8 text")))
}

/// An optional string argument: `undefined` or `null` is `None`, a string is read as
/// [`string_arg`] reads it, anything else is refused.
pub(crate) fn optional_string_arg(value: &JsValue, name: &str) -> Result<Option<String>, JsError> {
    if value.is_undefined() || value.is_null() {
        return Ok(None);
    }
    string_arg(value, name).map(Some)
}

/// An array-of-strings argument (the glue for `Vec<String>` took a single string as the list
/// of its characters), each member a string.
pub(crate) fn string_list_arg(value: &JsValue, name: &str) -> Result<Vec<String>, JsError> {
    if !value.is_array() {
        return Err(JsError::new(&format!(
            "proofgate: {name} must be an array of strings, got {}",
            if value.is_string() {
                "a single string (give [it])".to_string()
            } else {
                kind_of(value)
            }
        )));
    }
    let members: Vec<Value> = from_js(value, name)?;
    members
        .into_iter()
        .enumerate()
        .map(|(i, m)| match m {
            Value::String(s) => Ok(s),
            other => Err(JsError::new(&format!(
                "proofgate: {name}[{i}] must be a string, got {}",
                match other {
                    Value::Null => "null (or undefined)",
                    Value::Bool(_) => "a boolean",
                    Value::Number(_) => "a number",
                    Value::Array(_) => "an array",
                    _ => "an object",
                }
            ))),
        })
        .collect()
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

/// A constructor's `now`: `Date.now()` when left out (`undefined` or `null`), else a number
/// (the glue for an `f64` parameter converted anything: `"5"` became 5).
fn now_arg(value: &JsValue) -> Result<u64, JsError> {
    if value.is_undefined() || value.is_null() {
        return millis(date_now(), "Date.now()");
    }
    match value.as_f64() {
        Some(now) => millis(now, "now"),
        None => Err(JsError::new(&format!(
            "proofgate: now must be a number (milliseconds since the epoch), got {}",
            kind_of(value)
        ))),
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
    let what = "the configuration";
    // JSON text, or a plain object: a Promise (a configuration loaded and not awaited), a
    // Map or an array stringifies to `{}` or `[]`, and `{}` is the defaults, a thread with no
    // policy at all, which takes findings of any.
    if !config.is_string() {
        let plain = json_parse("{}").map(|o| prototype_of(&o)).ok();
        let proto = config.is_object().then(|| prototype_of(config));
        let is_plain = proto.is_some_and(|p| p.is_null() || Some(&p) == plain.as_ref());
        if !is_plain {
            return Err(JsError::new(
                "proofgate: the configuration must be a plain object or JSON text (not a \
                 Promise, Map, array or other value): a configuration that is not read would \
                 run the thread with none. An object made in another realm (an iframe, a vm \
                 context) counts as other: pass JSON.stringify(config)",
            ));
        }
    }
    let value: Value = from_json(&json_text(config, what)?, what)?;
    check_depth(&value, what)?;
    // A policy given and empty is one that was not read: an unawaited load or a Map one level
    // down stringifies to `{}`, a policy of no rules, under which findings citing any rules
    // were taken.
    if let Some(policy) = value.get("policy").filter(|p| !p.is_null()) {
        let none = |member: &str| {
            policy
                .get(member)
                .and_then(Value::as_array)
                .is_none_or(Vec::is_empty)
        };
        if none("rules") && none("variables") {
            return Err(JsError::new(
                "proofgate: the configuration's policy has no rules and no variables (a policy \
                 not read yet, such as an unawaited Promise or a Map, reads as {}): give the \
                 policy definition itself, or leave policy out",
            ));
        }
    }
    // Typed first, so that a time out of range is named as the setting it is.
    let typed: ThreadConfig = serde_json::from_value(value.clone())
        .map_err(|e| JsError::new(&format!("proofgate: {what} is malformed: {e}")))?;
    if let Some(t) = typed.question_timeout_ms.filter(|t| *t > MAX_SAFE_MS) {
        return Err(JsError::new(&format!(
            "proofgate: questionTimeoutMs must be a safe integer (at most \
             Number.MAX_SAFE_INTEGER) number of milliseconds, got {t}"
        )));
    }
    // A number beyond 2^53 anywhere else (a vocabulary's own members are kept as given, in
    // the policy document the trail names by its hash).
    check_numbers(&value, what)?;
    // The translators' vocabulary is built into a policy model at the first translator
    // reply, after the translation was paid for: a vocabulary that does not build is refused
    // now, with the error that reply would get.
    if let Some(translation) = &typed.translation {
        translation
            .vocabulary_model()
            .map_err(|e| JsError::new(&format!("proofgate: {}", ThreadError::InvalidConfig(e))))?;
    }
    Ok(typed)
}

#[wasm_bindgen(js_class = Thread)]
impl WasmThread {
    /// Creates a thread. `config` may be omitted (defaults), `threadId` defaults to a random
    /// UUID and `now` to `Date.now()`. Throws when `question` or `threadId` is not a string,
    /// `now` not a number, or the configuration unusable (among others: a translation
    /// `vocabulary` that does not load, which the first translator reply would otherwise
    /// find, after the translation was paid for).
    #[wasm_bindgen(constructor)]
    pub fn new(
        #[wasm_bindgen(unchecked_param_type = "ThreadConfig | string | null | undefined")]
        config: JsValue,
        #[wasm_bindgen(unchecked_param_type = "string")] question: JsValue,
        #[wasm_bindgen(js_name = threadId, unchecked_optional_param_type = "string | null")]
        thread_id: JsValue,
        #[wasm_bindgen(unchecked_optional_param_type = "number | null")] now: JsValue,
    ) -> Result<WasmThread, JsError> {
        let question = string_arg(&question, "the question")?;
        let thread_id = optional_string_arg(&thread_id, "threadId")?;
        let now = now_arg(&now)?;
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
        #[wasm_bindgen(unchecked_param_type = "ThreadConfig | string | null | undefined")]
        config: JsValue,
        #[wasm_bindgen(
            unchecked_param_type = "{ role: \"system\" | \"user\" | \"assistant\" | \"tool\"; text: string }[]"
        )]
        conversation: JsValue,
        #[wasm_bindgen(unchecked_param_type = "{ text: string; model?: string; source: string }")]
        answer: JsValue,
        #[wasm_bindgen(js_name = threadId, unchecked_optional_param_type = "string | null")]
        thread_id: JsValue,
        #[wasm_bindgen(unchecked_optional_param_type = "number | null")] now: JsValue,
    ) -> Result<WasmThread, JsError> {
        let thread_id = optional_string_arg(&thread_id, "threadId")?;
        let now = now_arg(&now)?;
        let config = thread_config(&config)?;
        let conversation: Vec<proofgate_core::conversation::ConversationTurn> =
            recordable_from_js(&conversation, "the conversation")?;
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
        let answer: GivenAnswer = recordable_from_js(&answer, "the answer")?;
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
        #[wasm_bindgen(unchecked_param_type = "ThreadConfig | string | null | undefined")]
        config: JsValue,
        #[wasm_bindgen(unchecked_param_type = "string")] question: JsValue,
        #[wasm_bindgen(unchecked_param_type = "{ text: string; model?: string; source: string }")]
        answer: JsValue,
        #[wasm_bindgen(js_name = threadId, unchecked_optional_param_type = "string | null")]
        thread_id: JsValue,
        #[wasm_bindgen(unchecked_optional_param_type = "number | null")] now: JsValue,
    ) -> Result<WasmThread, JsError> {
        let question = string_arg(&question, "the question")?;
        let thread_id = optional_string_arg(&thread_id, "threadId")?;
        let now = now_arg(&now)?;
        let config = thread_config(&config)?;
        let answer: GivenAnswer = recordable_from_js(&answer, "the answer")?;
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
    /// the input does not fit the thread's state, or cannot be recorded and read back the same
    /// (nested more than 100 levels deep; an integer beyond `Number.MAX_SAFE_INTEGER`, also
    /// written as a float such as `1e19`).
    ///
    /// A `Validated` input whose findings do not fit the thread (rules its policy does not
    /// have, translations they cannot come from) throws "the findings do not match the
    /// thread ...": the thread then still waits for its validation. End it as a failed
    /// validation, as the proxy does: `handle({type: "Failed", reason: "validator: its
    /// findings do not fit the thread"})` (ERROR, or UNVERIFIED with failureMode "OPEN").
    #[wasm_bindgen(unchecked_return_type = "Effect")]
    pub fn handle(
        &mut self,
        #[wasm_bindgen(unchecked_param_type = "Input | string")] input: JsValue,
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
        // Nested too deep for its records, or a number JavaScript does not hold exactly.
        check_recordable(&value, "the input")?;
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
/// `policyDocuments` is not a list of policy documents; left out (or `null`), there are none,
/// and a trail that names one reports POLICY_DOCUMENT_MISSING.
#[wasm_bindgen(js_name = replayAudit, unchecked_return_type = "ReplayReport")]
pub fn replay_audit_js(
    #[wasm_bindgen(unchecked_param_type = "AuditRecord[] | string")] trail: JsValue,
    #[wasm_bindgen(
        js_name = policyDocuments,
        unchecked_optional_param_type = "PolicyDocument[] | string | null"
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
            unchecked_optional_param_type = "PolicyDocument[] | string | null"
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

//! WebAssembly facade over `proofgate-core`, published to npm as `proofgate`.
//!
//! Values cross the boundary as plain JSON-compatible JavaScript objects in the AWS shapes
//! (findings) or the core's own serde shapes (decisions, verdicts); errors are thrown as
//! JavaScript `Error`s whose message says what was wrong. Every structured argument is read as
//! its JSON text (see `thread::from_js`), so a value means the same to every export. Every
//! string argument is taken as a `JsValue` and refused unless it is a string
//! (`thread::string_arg`): the glue wasm-bindgen generates for `&str` does not check.

use proofgate_core::{aggregate_verdict, parse_decision, prioritize, Finding};
use serde::Serialize;
use wasm_bindgen::prelude::*;

mod audit;
mod thread;

#[cfg(any(test, all(not(target_feature = "atomics"), target_family = "wasm")))]
mod small_blocks;
#[cfg(any(test, target_family = "wasm"))]
mod word_memcmp;

// Talc instead of Rust's default WebAssembly allocator (dlmalloc): a replay parses and builds
// many small JSON values, and allocation was a fifth of its time in Node. Small blocks go
// through free lists per size class first (see `small_blocks`).
#[cfg(all(not(target_feature = "atomics"), target_family = "wasm"))]
#[global_allocator]
static ALLOCATOR: small_blocks::SmallBlocks<talc::wasm::WasmDynamicTalc> =
    small_blocks::SmallBlocks::new(talc::wasm::new_wasm_dynamic_allocator());

#[wasm_bindgen(typescript_custom_section)]
const TS_TYPES: &'static str = r#"
/** A statement in SMT-LIB and natural language. */
export interface Statement { logic?: string; naturalLanguage?: string; [extra: string]: unknown }
export interface Scenario { statements?: Statement[]; [extra: string]: unknown }
export interface RuleRef { identifier?: string; policyVersionArn?: string; [extra: string]: unknown }
export interface Translation {
  premises?: Statement[]; claims?: Statement[];
  untranslatedPremises?: { text?: string }[]; untranslatedClaims?: { text?: string }[];
  confidence?: number; [extra: string]: unknown
}
export interface LogicWarning { type?: "ALWAYS_TRUE" | "ALWAYS_FALSE" | string; premises?: Statement[]; claims?: Statement[] }
/** One member of the ApplyGuardrail `GuardrailAutomatedReasoningFinding` union. */
export type Finding =
  | { valid: { translation?: Translation; claimsTrueScenario?: Scenario; supportingRules?: RuleRef[]; logicWarning?: LogicWarning } }
  | { invalid: { translation?: Translation; contradictingRules?: RuleRef[]; logicWarning?: LogicWarning } }
  | { impossible: { translation?: Translation; contradictingRules?: RuleRef[]; logicWarning?: LogicWarning } }
  | { satisfiable: { translation?: Translation; claimsTrueScenario?: Scenario; claimsFalseScenario?: Scenario; logicWarning?: LogicWarning } }
  | { translationAmbiguous: { options?: { translations?: Translation[] }[]; differenceScenarios?: Scenario[] } }
  | { tooComplex: Record<string, never> }
  | { noTranslations: Record<string, never> }
  | Record<string, unknown>;
export type DecisionKind = "REWRITE" | "ASK_QUESTIONS" | "IMPOSSIBLE";
export interface Decision { decision: DecisionKind; answer: string; questions: string[] }
export type Verdict = "VALID" | "INVALID" | "SATISFIABLE" | "IMPOSSIBLE" | "TRANSLATION_AMBIGUOUS"
  | "TOO_COMPLEX" | "NO_TRANSLATIONS" | "UNKNOWN" | "NO_FINDINGS";
export interface AggregateVerdict { verdict: Verdict; warning?: string }
"#;

pub(crate) fn to_js<T: Serialize>(value: &T) -> Result<JsValue, JsError> {
    value
        .serialize(&serde_wasm_bindgen::Serializer::json_compatible())
        .map_err(|e| JsError::new(&format!("proofgate: could not convert the result: {e}")))
}

/// Parses the rewriting LLM's reply into `{decision, answer, questions}`. Throws only when
/// `text` is not a string.
#[wasm_bindgen(js_name = parseDecision, unchecked_return_type = "Decision")]
pub fn parse_decision_js(
    #[wasm_bindgen(unchecked_param_type = "string")] text: JsValue,
) -> Result<JsValue, JsError> {
    to_js(&parse_decision(&thread::string_arg(&text, "text")?))
}

/// Orders AWS-shaped findings for rewriting (most urgent first, stable within a kind).
#[wasm_bindgen(js_name = prioritizeFindings, unchecked_return_type = "Finding[]")]
pub fn prioritize_findings_js(
    #[wasm_bindgen(unchecked_param_type = "Finding[]")] findings: JsValue,
) -> Result<JsValue, JsError> {
    let findings: Vec<Finding> = thread::from_js(&findings, "the findings list")?;
    to_js(&prioritize(&findings))
}

/// The aggregate verdict over AWS-shaped findings: `{verdict, warning?}`. A ranking of the
/// findings as given, not a decision: a `Thread` also holds the findings' premises to what the
/// user said, and may find the same list SATISFIABLE where this says VALID.
#[wasm_bindgen(js_name = aggregateVerdict, unchecked_return_type = "AggregateVerdict")]
pub fn aggregate_verdict_js(
    #[wasm_bindgen(unchecked_param_type = "Finding[]")] findings: JsValue,
) -> Result<JsValue, JsError> {
    let findings: Vec<Finding> = thread::from_js(&findings, "the findings list")?;
    to_js(&aggregate_verdict(&findings))
}

/// Reads an Amazon Bedrock ApplyGuardrail response (its object or JSON text) to the
/// validation of `answer` (the text sent as `guard_content`) as the Thread's input, the way the
/// proxy reads it: `{type: "Blocked", reason}` when the guardrail intervened (the answer must
/// not go out, whatever its findings say), `{type: "Failed", reason}` when its findings cannot
/// stand for the whole answer (part of it guarded by nothing, a VALID without a translation,
/// a VALID resting on a policy version outside `policyArns`; a finding of such a response
/// that says the answer is INVALID is still returned, as `Validated`, so the answer is
/// rewritten), and `{type: "Validated", findings}` otherwise. Passing the response's findings
/// to `handle` yourself skips those checks. From audit format 10 the thread holds the
/// premises of a VALID to the conversation; give its configuration `validatorGrounding` (a
/// translation configuration: its `vocabulary`, the policy's types and variables, and
/// `systemPromptFacts`) so that premises naming enum values can be borne out.
///
/// `answer` must be the answer's text itself (not the request's `{text, qualifiers}`
/// content block): anything but a string is refused. `policyArns` is an array of the policy
/// version ARNs a VALID may rest on; left out, `null` or `[]`, any policy version is taken.
/// A single ARN not in an array is refused.
#[wasm_bindgen(js_name = readApplyGuardrail, unchecked_return_type = "Input")]
pub fn read_apply_guardrail_js(
    #[wasm_bindgen(unchecked_param_type = "object | string")] response: JsValue,
    #[wasm_bindgen(unchecked_param_type = "string")] answer: JsValue,
    #[wasm_bindgen(js_name = policyArns, unchecked_optional_param_type = "string[] | null")]
    policy_arns: JsValue,
) -> Result<JsValue, JsError> {
    use proofgate_core::guardrail_response::{read_guardrail_response, GuardrailReading};
    // The text sent as `guard_content`: the glue took a number or object as "", which no
    // guarded part could be too small for (a partly guarded answer read as VALID).
    let answer = thread::string_arg(&answer, "answer (the text sent as guard_content)")?;
    // A blank answer has no characters to count, so no guarded count is ever too small:
    // no thread validates one, and a `content.text ?? ''` would pass a partly guarded answer.
    if answer.trim().is_empty() {
        return Err(JsError::new(
            "proofgate: answer is blank: give the answer's text, as sent in guard_content",
        ));
    }
    let policy_arns = if policy_arns.is_undefined() || policy_arns.is_null() {
        Vec::new()
    } else {
        thread::string_list_arg(&policy_arns, "policyArns")?
    };
    let body: serde_json::Value = thread::from_js(&response, "the ApplyGuardrail response")?;
    let input = match read_guardrail_response(&body, &answer, &policy_arns) {
        Ok(GuardrailReading::Findings(findings)) => {
            serde_json::json!({"type": "Validated", "findings": findings})
        }
        Ok(GuardrailReading::Blocked(reason)) => {
            serde_json::json!({"type": "Blocked", "reason": reason})
        }
        Err(why) => serde_json::json!({
            "type": "Failed",
            "reason": format!("the ApplyGuardrail response cannot stand for the answer's validation: {why}")
        }),
    };
    to_js(&input)
}

/// The audit format this version writes: a trail in an older one was made, and replays, under
/// that format's weaker rules (see the README's audit format list), so a verifier says so.
#[wasm_bindgen(js_name = auditFormatVersion)]
pub fn audit_format_version() -> u32 {
    proofgate_core::audit::FORMAT_VERSION
}

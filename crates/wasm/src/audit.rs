//! Auditing in JavaScript with the same core functions as `proofgate audit`: the solver checks
//! rebuilt from the auditor's policy (`planRechecks`; run them with z3-solver and compare with
//! `answerMatches`), and the signed head, log inclusion and consistency (`verifyTrust`).

use crate::thread::{optional_string_arg, string_arg, string_list_arg};
use crate::to_js;
use proofgate_core::audit::bundle::{
    read_trail_or_bundle, trail_text_of, verify_trust, AuditBundle, TrustCheck,
};
use proofgate_core::audit::completeness::{not_checked, AuditInputs};
use proofgate_core::audit::policy_document::documents_of_policy;
use proofgate_core::audit::recheck::{answer_matches, checks_passed, plan_rechecks, PlannedCheck};
use proofgate_core::audit::{verify_chain_json, AuditRecord};
use proofgate_core::policy::smtlib::Expected;
use proofgate_core::policy::{PolicyDefinition, PolicyModel};
use wasm_bindgen::prelude::*;

#[wasm_bindgen(typescript_custom_section)]
const TS_AUDIT: &'static str = r#"
export interface PlannedCheck { record: number; finding: number; kind: string; meaning: string; script: string; expected: "sat" | "unsat"; anyOf?: number }
export interface RecheckPlan { policyContentHash: string; checks: PlannedCheck[]; problems: { record: number; detail: string }[] }
export interface TrustCheck { ok: boolean; detail: string }
/** `signature` fails too when the trail's records do not hash and link up to the signed head
 * (verifyTrust checks the chain; `proofgate audit` gets that from its replay). */
export interface TrustReport { signature: TrustCheck; inclusion: TrustCheck; consistency?: TrustCheck; checkpoint?: { origin: string; size: number; root: string }; savedCheckpoint?: { origin: string; size: number; root: string }; headLeaf?: number; ok: boolean }
/** What the auditor brought: each left out is a check a full audit makes (`auditNotChecked`). */
/** `checkpointSize`: `verifyTrust(text, key, saved).savedCheckpoint.size`, the size of the checkpoint
 * you saved as its signature check read it (the bundle's own checkpoint anchors nothing); the
 * leaf of the trail's head is read from the bundle. */
export interface AuditInputs { threadNamed?: boolean; policyGiven?: boolean; keyGiven?: boolean; checkpointGiven?: boolean; checkpointSize?: number; logScanned?: boolean }
export type LogHeads = { kind: "latest" } | { kind: "wentOn"; leaf: number; seq: number } | { kind: "problem"; detail: string };
/** `id` may be one a later version adds: treat any id as a check not made. */
export interface NotChecked { id: "older-format" | "policy" | "thread" | "validator-premises" | "bundle" | "key" | "checkpoint" | "later-heads" | "unfinished" | (string & {}); what: string }
"#;

/// The records of a trail or of an audit bundle (`{trail: [...], ...}`).
fn records(json: &str) -> Result<Vec<AuditRecord>, JsError> {
    let (records, _) = read_trail_or_bundle(json.as_bytes())
        .map_err(|e| JsError::new(&format!("proofgate: {e}")))?;
    serde_json::from_value(serde_json::Value::Array(records)).map_err(|e| {
        JsError::new(&format!(
            "proofgate: the trail's records are malformed: {e}"
        ))
    })
}

/// The trail's JSON text exactly as given (the whole text, or a bundle's `trail` array): what
/// a verifier gives `replayAudit` and `verifyChain`, so that they check the bytes of the file,
/// not a copy `JSON.parse` made (which rounds integers beyond 2^53).
#[wasm_bindgen(js_name = trailTextOf)]
pub fn trail_text_of_js(
    #[wasm_bindgen(unchecked_param_type = "string")] json: JsValue,
) -> Result<String, JsError> {
    let json = string_arg(&json, "the trail's JSON text")?;
    trail_text_of(&json)
        .map(str::to_string)
        .map_err(|e| JsError::new(&format!("proofgate: {e}")))
}

/// The solver checks for every finding of `trail` (a trail or bundle, as JSON text), rebuilt
/// from `policy` (the auditor's own policy JSON), and the problems that fail the audit outright.
#[wasm_bindgen(js_name = planRechecks, unchecked_return_type = "RecheckPlan")]
pub fn plan_rechecks_js(
    #[wasm_bindgen(unchecked_param_type = "string")] trail: JsValue,
    #[wasm_bindgen(unchecked_param_type = "string")] policy: JsValue,
) -> Result<JsValue, JsError> {
    let trail = string_arg(&trail, "trail (its JSON text)")?;
    let policy = string_arg(&policy, "policy (its JSON text)")?;
    let def = PolicyDefinition::from_json(&policy)
        .map_err(|e| JsError::new(&format!("proofgate: the policy: {e}")))?;
    let model = PolicyModel::from_definition(def, None)
        .map_err(|e| JsError::new(&format!("proofgate: the policy: {e}")))?;
    to_js(&plan_rechecks(&records(&trail)?, &model))
}

/// Which of `checks` (from a `planRechecks` plan) pass, given whether each got its expected
/// answer (`answerMatches`): a check of an `anyOf` group passes when any check of its group
/// did, as `proofgate audit` judges them.
#[wasm_bindgen(js_name = checksPassed)]
pub fn checks_passed_js(
    #[wasm_bindgen(unchecked_param_type = "PlannedCheck[]")] checks: JsValue,
    #[wasm_bindgen(unchecked_param_type = "boolean[] | Uint8Array")] answered: JsValue,
) -> Result<Vec<u8>, JsError> {
    let checks: Vec<PlannedCheck> = crate::thread::from_js(&checks, "the list of checks")?;
    // Only true (or 1) is an expected answer and false (or 0) is not: anything else (-1 from
    // an indexOf miss, 257, "1") is refused, never read as passed. Read from its JSON text, a
    // Uint8Array is an object of indexes.
    let given: serde_json::Value = crate::thread::from_js(&answered, "the answers")?;
    let values: Vec<serde_json::Value> = match given {
        serde_json::Value::Array(a) => a,
        serde_json::Value::Object(o) => {
            let mut v: Vec<(usize, serde_json::Value)> = o
                .into_iter()
                .map(|(k, v)| k.parse::<usize>().map(|k| (k, v)))
                .collect::<Result<_, _>>()
                .map_err(|_| JsError::new("proofgate: the answers are not a list"))?;
            v.sort_by_key(|(k, _)| *k);
            v.into_iter().map(|(_, v)| v).collect()
        }
        _ => return Err(JsError::new("proofgate: the answers are not a list")),
    };
    let answered: Vec<bool> = values
        .iter()
        .enumerate()
        .map(|(i, a)| match a {
            serde_json::Value::Bool(b) => Ok(*b),
            n if n.is_u64() && n.as_u64() == Some(0) => Ok(false),
            n if n.is_u64() && n.as_u64() == Some(1) => Ok(true),
            _ => Err(JsError::new(&format!(
                "proofgate: answered[{i}] is not true or false (1 or 0): give answerMatches' \
                 result for each check"
            ))),
        })
        .collect::<Result<_, _>>()?;
    Ok(checks_passed(&checks, &answered)
        .into_iter()
        .map(u8::from)
        .collect())
}

/// The policy documents a server configured with `policy` (the auditor's policy JSON) writes,
/// with and without the translators' vocabulary: give them to `replayAudit` with a plain
/// trail. When the document a trail names is one of them, the thread was shown exactly this
/// policy; otherwise replay reports it missing.
#[wasm_bindgen(js_name = policyDocumentsOf, unchecked_return_type = "PolicyDocument[]")]
pub fn policy_documents_of_js(
    #[wasm_bindgen(unchecked_param_type = "string")] policy: JsValue,
) -> Result<JsValue, JsError> {
    let policy = string_arg(&policy, "policy (its JSON text)")?;
    let def = PolicyDefinition::from_json(&policy)
        .map_err(|e| JsError::new(&format!("proofgate: the policy: {e}")))?;
    let model = PolicyModel::from_definition(def, None)
        .map_err(|e| JsError::new(&format!("proofgate: the policy: {e}")))?;
    let documents = documents_of_policy(&model);
    let documents: Vec<&serde_json::Value> = documents.iter().map(|(_, d)| d).collect();
    to_js(&documents)
}

/// Whether a solver's complete output is exactly the expected `sat`/`unsat`. Throws when
/// either is not a string.
#[wasm_bindgen(js_name = answerMatches)]
pub fn answer_matches_js(
    #[wasm_bindgen(unchecked_param_type = "string")] output: JsValue,
    #[wasm_bindgen(unchecked_param_type = "string")] expected: JsValue,
) -> Result<bool, JsError> {
    let output = string_arg(&output, "output (the solver's output)")?;
    let expected = match string_arg(&expected, "expected")?.as_str() {
        "sat" => Expected::Sat,
        "unsat" => Expected::Unsat,
        _ => return Ok(false),
    };
    Ok(answer_matches(&output, expected))
}

/// Checks an audit bundle's signed head, inclusion proof and (with `savedCheckpoint`)
/// consistency against the server's verifier key, and that the trail's records hash and link
/// up to that head (`verifyChain`): the signed head states only the last record's hash, so a
/// record rewritten before it would otherwise pass. Throws when the bundle is not one, or
/// writes a key twice in any object (read strictly, as replay reads it).
#[wasm_bindgen(js_name = verifyTrust, unchecked_return_type = "TrustReport")]
pub fn verify_trust_js(
    #[wasm_bindgen(unchecked_param_type = "string")] bundle: JsValue,
    #[wasm_bindgen(js_name = verifierKey, unchecked_param_type = "string")] verifier_key: JsValue,
    #[wasm_bindgen(js_name = savedCheckpoint, unchecked_optional_param_type = "string | null")]
    saved_checkpoint: JsValue,
) -> Result<JsValue, JsError> {
    let bundle = string_arg(&bundle, "bundle (its JSON text)")?;
    let verifier_key = string_arg(&verifier_key, "verifierKey")?;
    let saved_checkpoint = optional_string_arg(&saved_checkpoint, "savedCheckpoint")?;
    let (_, read) = read_trail_or_bundle(bundle.as_bytes())
        .map_err(|e| JsError::new(&format!("proofgate: the bundle: {e}")))?;
    let read: AuditBundle = read.ok_or_else(|| {
        JsError::new("proofgate: the bundle is malformed: a plain trail, not {\"trail\": [...], \"signedHead\": ...}")
    })?;
    let mut report = verify_trust(&read, &verifier_key, saved_checkpoint.as_deref());
    // The records' own bytes, as replay checks them (a value read back would have integers
    // beyond 2^53 rounded).
    let trail = trail_text_of(&bundle).map_err(|e| JsError::new(&format!("proofgate: {e}")))?;
    if let Some(failure) = verify_chain_json(trail).failure {
        report.signature = TrustCheck {
            ok: false,
            detail: format!(
                "{failure}: the records do not hash up to the head the server signed: the trail \
                 was altered"
            ),
        };
        report.ok = false;
    }
    to_js(&report)
}

/// The checks a full audit of `trail` (a trail or bundle, as JSON text) makes that an audit
/// with `inputs` did not: the same list, in the same order, as `proofgate audit`'s
/// `notChecked` and the browser verifier's (the trail's format is read from the trail). An audit in which
/// every check that ran passed (replay, the thread compared, `planRechecks` run with Z3,
/// `verifyTrust`) is full only when this is empty: `ok` from those functions says nothing of
/// what did not run.
#[wasm_bindgen(js_name = auditNotChecked, unchecked_return_type = "NotChecked[]")]
pub fn audit_not_checked_js(
    #[wasm_bindgen(unchecked_param_type = "string")] trail: JsValue,
    #[wasm_bindgen(unchecked_param_type = "AuditInputs")] inputs: JsValue,
) -> Result<JsValue, JsError> {
    let trail = string_arg(&trail, "trail (its JSON text)")?;
    let (_, bundle) = read_trail_or_bundle(trail.as_bytes())
        .map_err(|e| JsError::new(&format!("proofgate: {e}")))?;
    let mut inputs: AuditInputs = crate::thread::from_js(&inputs, "the audit inputs")?;
    // Whether it is a bundle, and which leaf holds its head, is the text's to say, not the
    // caller's.
    inputs.bundle = bundle.is_some();
    inputs.head_leaf = bundle
        .as_ref()
        .and_then(|b| b.inclusion.as_ref())
        .map(|i| i.leaf_index);
    to_js(&not_checked(&records(&trail)?, &inputs))
}

/// What the log says of the trail of `bundle` (an audit bundle's JSON text) as its thread's:
/// `{kind: "latest"}` when it holds every head of its thread in the log and ends at the last;
/// `{kind: "wentOn", leaf, seq}` when it is genuine but the thread went on (`leaf` logs its
/// record `seq`); `{kind: "problem", detail}` when the log contradicts it (rewritten, cut back
/// and continued, forked). A bundle's signed head and inclusion proof hold as well for an
/// earlier head of its thread, or one forked from it: only the log's other leaves show it.
/// `currentCheckpoint` is the checkpoint the server signs now (`GET /api/log/checkpoint`),
/// `proof` the consistency proof from the bundle's checkpoint to it
/// (`GET /api/log/consistency?from=B&to=C`), `notes` the note of every leaf of that log, from
/// leaf 0 (`GET /api/log/leaves`). Nothing of these is trusted: throws when a checkpoint does
/// not verify with `verifierKey`, the current one does not extend the bundle's, or the notes
/// do not hash to its root. An audit that got `latest` passes `logScanned: true` to
/// `auditNotChecked`.
#[wasm_bindgen(js_name = logHeads, unchecked_return_type = "LogHeads")]
pub fn log_heads_js(
    #[wasm_bindgen(unchecked_param_type = "string")] bundle: JsValue,
    #[wasm_bindgen(js_name = verifierKey, unchecked_param_type = "string")] verifier_key: JsValue,
    #[wasm_bindgen(js_name = currentCheckpoint, unchecked_param_type = "string")]
    current_checkpoint: JsValue,
    #[wasm_bindgen(unchecked_param_type = "string[]")] proof: JsValue,
    #[wasm_bindgen(unchecked_param_type = "string[]")] notes: JsValue,
) -> Result<JsValue, JsError> {
    use proofgate_core::audit::transparency::{log_heads, newest_log, verify_checkpoint};
    let bundle = string_arg(&bundle, "bundle (its JSON text)")?;
    let verifier_key = string_arg(&verifier_key, "verifierKey")?;
    let current_checkpoint = string_arg(&current_checkpoint, "currentCheckpoint")?;
    let proof = string_list_arg(&proof, "proof")?;
    let notes = string_list_arg(&notes, "notes")?;
    let (bundle, verifier_key, current_checkpoint) = (
        bundle.as_str(),
        verifier_key.as_str(),
        current_checkpoint.as_str(),
    );
    let fail = |e: String| JsError::new(&format!("proofgate: {e}"));
    let (trail, read) = read_trail_or_bundle(bundle.as_bytes()).map_err(fail)?;
    let read =
        read.ok_or_else(|| fail("a plain trail carries no checkpoint: give the bundle".into()))?;
    let note = read
        .checkpoint
        .as_deref()
        .ok_or_else(|| fail("the bundle has no checkpoint".into()))?;
    let own = verify_checkpoint(note, verifier_key)
        .map_err(|e| fail(format!("the bundle's checkpoint: {e}")))?;
    let log = newest_log(&own, current_checkpoint, &proof, verifier_key).map_err(fail)?;
    let thread = trail
        .first()
        .and_then(|r| r.pointer("/body/threadId"))
        .and_then(serde_json::Value::as_str)
        .unwrap_or("");
    to_js(&log_heads(thread, &trail, &notes, &log, verifier_key).map_err(fail)?)
}

/// A signed log checkpoint (C2SP tlog-checkpoint) verified against the server's verifier key:
/// `{origin, size, root}`. Throws when it is not one that key signs. Check a log's checkpoint
/// with this before reading its leaves: the size an unverified one states is anyone's word.
#[wasm_bindgen(js_name = verifyCheckpoint, unchecked_return_type = "{ origin: string; size: number; root: string }")]
pub fn verify_checkpoint_js(
    #[wasm_bindgen(unchecked_param_type = "string")] checkpoint: JsValue,
    #[wasm_bindgen(js_name = verifierKey, unchecked_param_type = "string")] verifier_key: JsValue,
) -> Result<JsValue, JsError> {
    let checkpoint = string_arg(&checkpoint, "checkpoint")?;
    let verifier_key = string_arg(&verifier_key, "verifierKey")?;
    let info = proofgate_core::audit::transparency::verify_checkpoint(&checkpoint, &verifier_key)
        .map_err(|e| JsError::new(&format!("proofgate: {e}")))?;
    to_js(&info)
}

/// The hash a record must carry (SHA-256 over its canonical JSON without `hash`), for tools
/// that build or inspect trails.
#[wasm_bindgen(js_name = recordHash)]
pub fn record_hash_js(
    #[wasm_bindgen(unchecked_param_type = "string")] record: JsValue,
) -> Result<String, JsError> {
    let record = string_arg(&record, "record (its JSON text)")?;
    let record: AuditRecord = serde_json::from_str(&record)
        .map_err(|e| JsError::new(&format!("proofgate: the record is malformed: {e}")))?;
    Ok(record.expected_hash())
}

//! `proofgate audit`: checks a trail without trusting the server that wrote it.
//!
//! 1. The hash chain and every decision of the loop, replayed by the core.
//! 2. Every finding's logic, from the auditor's own policy: the core rebuilds each solver check
//!    from the recorded premises and claims (the scripts stored in the trail are never run),
//!    and an independent `z3` process must answer exactly what the finding requires.
//! 3. With the server's verifier key: the signed head matches the trail's last record, the head
//!    is in the append-only log under a signed checkpoint, and (with a checkpoint saved
//!    earlier) the log still extends it.

use proofgate_core::audit::bundle::{read_trail_or_bundle, verify_trust, TrustReport};
use proofgate_core::audit::completeness::{self, AuditInputs};
use proofgate_core::audit::policy_document::documents_of_policy;
use proofgate_core::audit::recheck::{answer_matches, plan_rechecks, RecheckProblem};
use proofgate_core::audit::transparency;
use proofgate_core::audit::{replay_json_with, AuditRecord, PolicyDocuments, ReplayReport};
use proofgate_core::policy::PolicyModel;
use serde::Serialize;
use serde_json::Value;
use std::io::Write;
use std::process::{Command, Stdio};

/// The result of one re-checked finding check.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ScriptCheck {
    /// The VALIDATED record's position in the trail.
    pub record: usize,
    /// The finding's position in that validation.
    pub finding: usize,
    /// The finding's kind.
    pub kind: String,
    /// What the check establishes.
    pub meaning: String,
    /// What the finding requires.
    pub expected: String,
    /// What z3 printed (its complete output, trimmed), or an error.
    pub answer: String,
    /// Whether the check passes: its answer is exactly the one required (for a coverage
    /// check, one of its group's is: see `PlannedCheck::any_of`).
    pub ok: bool,
}

/// Everything `proofgate audit` found.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct AuditVerification {
    /// The core's replay of the trail.
    pub replay: ReplayReport,
    /// The auditor's policy's content hash.
    pub policy_content_hash: String,
    /// Problems found before any solver ran (policy version, findings without checks).
    pub problems: Vec<RecheckProblem>,
    /// Every rebuilt solver check, run.
    pub checks: Vec<ScriptCheck>,
    /// Signature, inclusion and consistency, when a verifier key was given.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub trust: Option<TrustReport>,
    /// The checkpoint `--log` read (the log as the server signed it when it was read), once
    /// its signature held: what the thread's latest head was judged at. Save it, and compare
    /// it with other auditors': a copy of an older one, replayed, would hide later heads.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub log_checkpoint: Option<String>,
    /// Every failure, one line each, naming the record.
    pub failures: Vec<String>,
    /// What this audit did not check, and what would check it (empty for a full audit): a
    /// trail that passes what was checked is not thereby shown signed or logged.
    pub not_checked: Vec<String>,
    /// True when everything checked holds.
    pub ok: bool,
    /// True when everything checked holds and nothing a full audit checks was left out
    /// (`not_checked` is empty): `ok` alone says nothing of what did not run.
    pub complete: bool,
}

/// Runs one SMT-LIB script through the `z3` binary and returns its complete output, trimmed.
pub fn run_z3(z3: &str, script: &str, timeout_ms: u64) -> String {
    let child = Command::new(z3)
        .arg("-smt2")
        .arg("-in")
        .arg(format!("-T:{}", timeout_ms.div_ceil(1000).max(1)))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn();
    let mut child = match child {
        Ok(c) => c,
        Err(e) => return format!("error: cannot run {z3}: {e}"),
    };
    if let Some(mut stdin) = child.stdin.take() {
        let _ = stdin.write_all(script.as_bytes());
    }
    match child.wait_with_output() {
        Ok(out) => String::from_utf8_lossy(&out.stdout).trim().to_string(),
        Err(e) => format!("error: {e}"),
    }
}

/// Audits `input` (a trail or an audit bundle) against the auditor's `policy`; with
/// `verifier_key`, also the signature and log inclusion (and consistency with
/// `saved_checkpoint`).
///
/// With `thread`, the trail must be that thread's: a bundle proves only that its trail is a
/// logged head of *some* thread, so a server asked for one thread's trail could hand out
/// another's.
/// The log as a server serves it, unchecked: its current checkpoint note, the consistency
/// proof from the bundle's checkpoint to it, and every leaf's note.
#[derive(Debug, Clone, Default)]
pub struct ServedLog {
    /// `GET /api/log/checkpoint`.
    pub checkpoint: String,
    /// `GET /api/log/consistency?from=<the bundle's size>&to=<its size>`.
    pub proof: Vec<String>,
    /// Every leaf's note, from leaf 0 (`GET /api/log/leaves`).
    pub notes: Vec<String>,
}

/// Fetches the log a server serves, given the bundle's checkpoint size; `Err` only when it
/// could not be fetched (then the log was not read: not checked, not failed).
pub type LogFetch<'a> = dyn Fn(u64) -> Result<ServedLog, String> + 'a;

#[allow(clippy::too_many_arguments)]
pub fn verify(
    input: &[u8],
    policy: &PolicyModel,
    verifier_key: Option<&str>,
    saved_checkpoint: Option<&str>,
    thread: Option<&str>,
    z3: &str,
    timeout_ms: u64,
    log: Option<&LogFetch<'_>>,
) -> AuditVerification {
    let mut failures = Vec::new();
    let mut not_checked = Vec::new();
    let (trail, bundle) = match read_trail_or_bundle(input) {
        Ok((records, bundle)) => (Value::Array(records), bundle),
        Err(e) => {
            failures.push(e);
            (Value::Array(Vec::new()), None)
        }
    };
    let trail_text = serde_json::to_vec(&trail).unwrap_or_default();
    // The policy document the trail names: made from the auditor's own policy (when it is
    // the one the thread was shown, the hashes match), or the one the bundle carries. Either
    // is used only under the hash of its own contents.
    let mut documents = documents_of_policy(policy);
    match bundle
        .as_ref()
        .map(|b| PolicyDocuments::from_values(&b.policy_documents))
    {
        Some(Ok(given)) => documents.extend(given),
        Some(Err(e)) => failures.push(format!("the bundle's {e}")),
        None => {}
    }
    let replay = replay_json_with(&trail_text, &documents);
    if let Some(f) = &replay.failure {
        failures.push(format!("replay: {f}"));
    }
    match thread {
        Some(want) if replay.thread_id.as_deref() != Some(want) => failures.push(format!(
            "the trail is thread {}'s, not {want}'s",
            replay.thread_id.as_deref().unwrap_or("(none)")
        )),
        _ => {}
    }
    let records: Vec<AuditRecord> = serde_json::from_value(trail).unwrap_or_default();
    let plan = plan_rechecks(&records, policy);
    for p in &plan.problems {
        failures.push(format!("record {}: {}", p.record, p.detail));
    }
    let answers: Vec<String> = plan
        .checks
        .iter()
        .map(|c| run_z3(z3, &c.script, timeout_ms))
        .collect();
    let matched: Vec<bool> = plan
        .checks
        .iter()
        .zip(&answers)
        .map(|(c, a)| answer_matches(a, c.expected))
        .collect();
    // A coverage group passes when any of its checks does (see `PlannedCheck::any_of`).
    let passed = plan.passed(&matched);
    let mut failed_groups = std::collections::BTreeSet::new();
    let mut checks = Vec::new();
    for ((c, answer), ok) in plan.checks.into_iter().zip(answers).zip(passed) {
        if !ok && c.any_of.is_none_or(|g| failed_groups.insert(g)) {
            // A coverage check is about a translator's pair, not one finding.
            let what = if c.kind == "PAIR_COVERED" {
                format!("record {}: {}", c.record, c.meaning)
            } else {
                format!(
                    "record {} finding {} ({}): {}",
                    c.record, c.finding, c.kind, c.meaning
                )
            };
            failures.push(format!(
                "{what}: z3 answered `{answer}`, the check requires `{}`",
                c.expected.as_str()
            ));
        }
        checks.push(ScriptCheck {
            record: c.record,
            finding: c.finding,
            kind: c.kind,
            meaning: c.meaning,
            expected: c.expected.as_str().to_string(),
            answer,
            ok,
        });
    }
    let trust = verifier_key.map(|key| match &bundle {
        Some(b) => verify_trust(b, key, saved_checkpoint),
        None => {
            let missing = proofgate_core::audit::bundle::TrustCheck {
                ok: false,
                detail: "a plain trail carries no signature: audit the bundle from \
                         GET /api/threads/{id}/audit/bundle"
                    .into(),
            };
            TrustReport {
                signature: missing.clone(),
                inclusion: missing,
                consistency: None,
                checkpoint: None,
                saved_checkpoint: None,
                head_leaf: None,
                ok: false,
            }
        }
    });
    if let Some(t) = &trust {
        for (what, c) in [
            ("signature", Some(&t.signature)),
            ("inclusion", Some(&t.inclusion)),
            ("consistency", t.consistency.as_ref()),
        ] {
            if let Some(c) = c.filter(|c| !c.ok) {
                failures.push(format!("{what}: {}", c.detail));
            }
        }
    }
    // Every head the log holds for the thread must be in the trail: a bundle's own head and
    // proof hold as well for an earlier head, or one forked from it. Read only once the
    // bundle's checkpoint is trusted (its signature, and its extending the saved one). What
    // could not be fetched was not read (not checked); what was fetched and does not hold
    // (a checkpoint not extending the bundle's, leaves not hashing to it) fails.
    let mut log_scanned = false;
    let mut log_gap: Option<String> = None;
    let mut log_checkpoint = None;
    let trusted = trust.as_ref().is_some_and(|t| t.ok);
    if let (Some(fetch), Some(b), Some(key), true) = (log, &bundle, verifier_key, trusted) {
        let own = b
            .checkpoint
            .as_deref()
            .ok_or_else(|| "the bundle has no checkpoint".to_string())
            .and_then(|note| transparency::verify_checkpoint(note, key));
        match own {
            Err(e) => failures.push(format!("log: {e}")),
            Ok(own) => match fetch(own.size) {
                Err(e) => log_gap = Some(format!("the log could not be read ({e})")),
                // Not signed by the key: another server's log (a wrong --log address), not the
                // audited server's, which was then not read: not checked, as the browser
                // verifier says it.
                Ok(served) if transparency::verify_checkpoint(&served.checkpoint, key).is_err() => {
                    log_gap = Some(
                        "the log at the address given is not signed by the verifier key (another \
                         server's log?): give the audited server's URL"
                            .into(),
                    )
                }
                Ok(served) => {
                    log_checkpoint = Some(served.checkpoint.clone());
                    let read =
                        transparency::newest_log(&own, &served.checkpoint, &served.proof, key)
                            .and_then(|log| {
                                transparency::log_heads(
                                    // The thread its first record names, as the signed
                                    // head and the npm package read it (replay names none
                                    // when it stops early).
                                    b.trail
                                        .first()
                                        .and_then(|r| r.pointer("/body/threadId"))
                                        .and_then(Value::as_str)
                                        .unwrap_or(""),
                                    &b.trail,
                                    &served.notes,
                                    &log,
                                    key,
                                )
                            });
                    match read {
                        Ok(transparency::LogHeads::Latest) => log_scanned = true,
                        Ok(transparency::LogHeads::WentOn { leaf, seq }) => {
                            log_gap = Some(format!(
                                "the thread went on after this trail (leaf {leaf} logs its record \
                                 {seq}): audit its latest bundle for the rest, if the server \
                                 still has it"
                            ))
                        }
                        // Read, and failed: the failure says it all.
                        Ok(transparency::LogHeads::Problem { detail: p }) => {
                            log_scanned = true;
                            failures.push(format!("log: {p}"))
                        }
                        Err(e) => {
                            log_scanned = true;
                            failures.push(format!(
                                "log: the log the server serves is not the one its checkpoints \
                                 sign: {e}"
                            ))
                        }
                    }
                }
            },
        }
    }
    // What a full audit makes that this one did not: decided in the core, as the browser
    // verifier and the npm package decide it, and worded with this command's options.
    let inputs = AuditInputs {
        thread_named: thread.is_some(),
        policy_given: true,
        bundle: bundle.is_some(),
        key_given: verifier_key.is_some(),
        checkpoint_given: saved_checkpoint.is_some(),
        checkpoint_size: trust
            .as_ref()
            .and_then(|t| t.saved_checkpoint.as_ref())
            .map(|c| c.size),
        head_leaf: trust.as_ref().and_then(|t| t.head_leaf),
        log_scanned,
    };
    for gap in completeness::not_checked(&records, &inputs) {
        let todo = match gap.id {
            "thread" => ": give --thread ID",
            "key" => ": give --public-key (the server's verifier key)",
            "bundle" if verifier_key.is_none() => {
                ": audit the bundle, with --public-key (the server's verifier key)"
            }
            "checkpoint" if saved_checkpoint.is_some() => {
                ": save the checkpoint this audit checked (trust.checkpoint) and audit again \
                 with it later"
            }
            "checkpoint" => ": give --checkpoint (a checkpoint you saved earlier)",
            "unfinished" => {
                ": audit the thread again once it has ended (its questions answered, skipped or \
                 timed out)"
            }
            "later-heads" => match &log_gap {
                Some(why) => {
                    not_checked.push(format!("{}: {why}", gap.what));
                    continue;
                }
                None if log.is_some() => {
                    ": the log is read once the signature and checkpoints hold"
                }
                None => ": give --log (the server's URL: its log's leaves are public)",
            },
            _ => "",
        };
        not_checked.push(format!("{}{todo}", gap.what));
    }
    let ok = failures.is_empty() && replay.ok;
    let complete = ok && not_checked.is_empty();
    AuditVerification {
        replay,
        policy_content_hash: plan.policy_content_hash,
        problems: plan.problems,
        checks,
        trust,
        log_checkpoint,
        failures,
        not_checked,
        ok,
        complete,
    }
}

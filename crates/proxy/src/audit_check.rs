//! `proofgate audit verify`: checks an audit trail without trusting the server that wrote it:
//! the hash chain and every decision of the loop (replayed by the core), then every finding's
//! logic re-checked by an independent `z3` process on the recorded SMT-LIB scripts.

use proofgate_core::audit::{replay_json, ReplayReport};
use serde::Serialize;
use serde_json::Value;
use std::io::Write;
use std::process::{Command, Stdio};

/// The result of one re-checked script.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ScriptCheck {
    /// The VALIDATED record's position in the trail.
    pub record: u64,
    /// The finding's position in that validation.
    pub finding: u64,
    /// The finding's kind.
    pub kind: String,
    /// What the check establishes.
    pub meaning: String,
    /// What the finding requires.
    pub expected: String,
    /// What z3 answered (`sat`, `unsat`, `unknown`, or an error).
    pub answer: String,
    /// Whether they agree.
    pub ok: bool,
}

/// Everything `audit verify` found.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct AuditVerification {
    /// The core's replay of the trail.
    pub replay: ReplayReport,
    /// Every recorded solver check, re-run.
    pub checks: Vec<ScriptCheck>,
    /// True when the replay and every check pass.
    pub ok: bool,
}

/// Runs one SMT-LIB script through the `z3` binary and returns its first answer line.
pub fn run_z3(z3: &str, script: &str, timeout_ms: u64) -> String {
    let child = Command::new(z3)
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
        Ok(out) => {
            let text = String::from_utf8_lossy(&out.stdout);
            text.lines()
                .map(str::trim)
                .find(|l| !l.is_empty())
                .unwrap_or("error: no answer")
                .to_string()
        }
        Err(e) => format!("error: {e}"),
    }
}

/// Replays `trail_json` and re-checks every recorded finding script with `z3`.
pub fn verify(trail_json: &[u8], z3: &str, timeout_ms: u64) -> AuditVerification {
    let replay = replay_json(trail_json);
    let records: Vec<Value> = serde_json::from_slice(trail_json).unwrap_or_default();
    let mut checks = Vec::new();
    for r in records
        .iter()
        .filter(|r| r["kind"].as_str() == Some("VALIDATED"))
    {
        let seq = r["seq"].as_u64().unwrap_or(0);
        for f in r
            .pointer("/body/evidence/checks")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            for c in f["checks"].as_array().into_iter().flatten() {
                let expected = c["expected"].as_str().unwrap_or("").to_string();
                let answer = run_z3(z3, c["script"].as_str().unwrap_or(""), timeout_ms);
                checks.push(ScriptCheck {
                    record: seq,
                    finding: f["finding"].as_u64().unwrap_or(0),
                    kind: f["kind"].as_str().unwrap_or("").to_string(),
                    meaning: c["meaning"].as_str().unwrap_or("").to_string(),
                    ok: answer == expected,
                    expected,
                    answer,
                });
            }
        }
    }
    let ok = replay.ok && checks.iter().all(|c| c.ok);
    AuditVerification { replay, checks, ok }
}

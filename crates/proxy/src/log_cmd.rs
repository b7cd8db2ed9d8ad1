//! `proofgate log verify`: checks the server's whole append-only log against a checkpoint the
//! auditor saved earlier: the current checkpoint is signed and extends the saved one, the
//! leaves the server lists hash to its root, every leaf is signed, and every thread whose head
//! was logged still has its trail, ending where the log says, unless a deletion was logged.

use anyhow::{bail, Context, Result};
use clap::Subcommand;
use proofgate_core::audit::bundle::AuditBundle;
use proofgate_core::audit::transparency::{
    logged_heads_problem, verify_checkpoint, verify_consistency, verify_note, LogStatement,
};
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::ExitCode;
use tlog_tiles::{stored_hash_count, stored_hashes, tree_hash, Hash, HashReader};

#[derive(Subcommand)]
pub enum LogCommand {
    /// Verify the server's log against a checkpoint saved earlier; list trails that were
    /// rewritten or deleted without a logged deletion. Exit 0 only when everything holds.
    Verify {
        /// The server's base URL, e.g. http://localhost:8080.
        #[arg(long)]
        server: String,
        /// A signed checkpoint saved earlier (GET /api/log/checkpoint).
        #[arg(long)]
        checkpoint: PathBuf,
        /// The server's verifier key, or a file holding it.
        #[arg(long)]
        public_key: String,
        /// An admin API key, to fetch every trail (without one only the log is checked).
        #[arg(long)]
        api_key: Option<String>,
    },
}

struct Hashes(Vec<Hash>);

impl HashReader for Hashes {
    fn read_hashes(&self, indexes: &[u64]) -> Result<Vec<Hash>, tlog_tiles::Error> {
        indexes
            .iter()
            .map(|&i| {
                self.0
                    .get(i as usize)
                    .copied()
                    .ok_or(tlog_tiles::Error::IndexesNotInTree)
            })
            .collect()
    }
}

pub fn run(command: LogCommand) -> Result<ExitCode> {
    let LogCommand::Verify {
        server,
        checkpoint,
        public_key,
        api_key,
    } = command;
    let key = crate::key_text(&public_key)?;
    let saved =
        std::fs::read_to_string(&checkpoint).with_context(|| checkpoint.display().to_string())?;
    let rt = tokio::runtime::Runtime::new()?;
    let report = rt.block_on(verify(&server, &key, &saved, api_key.as_deref()))?;
    println!("{}", serde_json::to_string_pretty(&report)?);
    let failures = report["failures"].as_array().map_or(0, Vec::len);
    for f in report["failures"].as_array().into_iter().flatten() {
        eprintln!("log: {}", f.as_str().unwrap_or_default());
    }
    Ok(if failures == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

/// GET `url`; a 429 or 503 (the server's rate and in-flight limits, which a walk of a long
/// log reaches) is retried after the `Retry-After` it names, a few times.
async fn get(client: &reqwest::Client, url: &str, key: Option<&str>) -> Result<reqwest::Response> {
    const ATTEMPTS: usize = 8;
    for attempt in 1.. {
        let mut req = client.get(url);
        if let Some(k) = key {
            req = req.bearer_auth(k);
        }
        let resp = req.send().await.with_context(|| format!("GET {url}"))?;
        let limited = matches!(resp.status().as_u16(), 429 | 503);
        if !limited || attempt == ATTEMPTS {
            return Ok(resp);
        }
        let wait = resp
            .headers()
            .get(reqwest::header::RETRY_AFTER)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.parse::<u64>().ok())
            .unwrap_or(1)
            .clamp(1, 60);
        eprintln!("GET {url}: HTTP {}; retrying in {wait} s", resp.status());
        tokio::time::sleep(std::time::Duration::from_secs(wait)).await;
    }
    unreachable!("the loop returns")
}

async fn verify(server: &str, key: &str, saved: &str, api_key: Option<&str>) -> Result<Value> {
    let base = server.trim_end_matches('/');
    let client = reqwest::Client::new();
    let mut failures: Vec<String> = Vec::new();
    let saved_cp =
        verify_checkpoint(saved, key).map_err(|e| anyhow::anyhow!("saved checkpoint: {e}"))?;
    let resp = get(&client, &format!("{base}/api/log/checkpoint"), None).await?;
    let status = resp.status();
    let current_note = resp.text().await?;
    if !status.is_success() {
        // The server refuses to sign a log that does not extend the one it signed before (cut
        // back or rewritten in its database): its reason is the finding.
        bail!("the server signs no checkpoint (HTTP {status}): {current_note}");
    }
    let current = match verify_checkpoint(&current_note, key) {
        Ok(c) => c,
        Err(e) => bail!("the server's checkpoint: {e}"),
    };
    let proof: Value = get(
        &client,
        &format!(
            "{base}/api/log/consistency?from={}&to={}",
            saved_cp.size.min(current.size),
            current.size
        ),
        None,
    )
    .await?
    .json()
    .await?;
    let hashes: Vec<String> = serde_json::from_value(proof["hashes"].clone()).unwrap_or_default();
    if let Err(e) = verify_consistency(&saved_cp, &current, &hashes) {
        failures.push(e);
    }
    // Every leaf, checked against the signed root.
    let mut stored = Hashes(Vec::new());
    // Every head of every thread, in log order: a trail must still hold each of them.
    let mut heads: BTreeMap<String, Vec<(u64, LogStatement)>> = BTreeMap::new();
    let mut n = 0u64;
    while n < current.size {
        let page: Value = get(
            &client,
            &format!("{base}/api/log/leaves?from={n}&to={}", current.size),
            None,
        )
        .await?
        .json()
        .await?;
        let leaves = page["leaves"].as_array().cloned().unwrap_or_default();
        if leaves.is_empty() {
            failures.push(format!("the server lists no leaf {n} of {}", current.size));
            break;
        }
        for leaf in leaves {
            let note = leaf["note"].as_str().unwrap_or_default();
            let statement = match verify_note(note, key).and_then(|t| LogStatement::parse(&t)) {
                Ok(s) => s,
                Err(e) => {
                    failures.push(format!("leaf {n}: {e}"));
                    LogStatement {
                        deleted: false,
                        thread_id: String::new(),
                        seq: 0,
                        head_hash: String::new(),
                    }
                }
            };
            let new = stored_hashes(n, statement.text().as_bytes(), &stored)
                .map_err(|e| anyhow::anyhow!("leaf {n}: {e}"))?;
            stored.0.extend(new);
            debug_assert_eq!(stored.0.len() as u64, stored_hash_count(n + 1));
            if !statement.thread_id.is_empty() {
                heads
                    .entry(statement.thread_id.clone())
                    .or_default()
                    .push((n, statement));
            }
            n += 1;
        }
    }
    let root = tree_hash(current.size, &stored).map_err(|e| anyhow::anyhow!("{e}"))?;
    if root.to_string() != current.root {
        failures.push(format!(
            "the leaves the server lists do not hash to its signed root ({} != {})",
            root, current.root
        ));
    }
    // Every logged thread still has its trail, ending at its last logged head.
    let mut trails_checked = 0;
    // Every logged deletion is listed, so an auditor sees what the server says it deleted and
    // when (a deletion is the one way a logged thread may lose its trail).
    let deletions: Vec<Value> = heads
        .iter()
        .flat_map(|(thread, logged)| {
            logged
                .iter()
                .filter(|(_, s)| s.deleted)
                .map(move |(leaf, s)| json!({"thread": thread, "leaf": leaf, "upToRecord": s.seq}))
        })
        .collect();
    if let Some(api_key) = api_key {
        for (thread, logged) in &heads {
            let Some((leaf, statement)) = logged.last() else {
                continue;
            };
            let resp = get(
                &client,
                &format!("{base}/api/threads/{thread}/audit/bundle"),
                Some(api_key),
            )
            .await?;
            let deleted = logged.iter().any(|(_, s)| s.deleted);
            if deleted && resp.status() == reqwest::StatusCode::NOT_FOUND {
                // Deleted as logged.
                continue;
            }
            if resp.status() == reqwest::StatusCode::NOT_FOUND {
                failures.push(format!(
                    "thread {thread}: leaf {leaf} logs its trail up to record {}, but the server no \
                     longer has it, and no deletion was logged",
                    statement.seq
                ));
                continue;
            }
            if !resp.status().is_success() {
                bail!("GET the trail of {thread}: HTTP {}", resp.status());
            }
            let bundle: AuditBundle = resp.json().await?;
            // The records chain (a body changed under its old hash fails here), and each head
            // the log ever held for the thread is still its record at that place: a trail
            // rewritten from an early record and extended under a newly signed head ends with
            // a logged head, yet no longer holds the earlier ones.
            let json = serde_json::to_vec(&bundle.trail)?;
            if let Some(f) = proofgate_core::audit::verify_chain_json(&json).failure {
                failures.push(format!(
                    "thread {thread}: its trail fails at record {}: {}: it was rewritten",
                    f.index, f.detail
                ));
            } else if let Some(problem) =
                logged_heads_problem(thread, &bundle.trail, logged.as_slice())
            {
                failures.push(format!("thread {thread}: {problem}"));
            }
            trails_checked += 1;
        }
    }
    Ok(json!({
        "savedCheckpoint": saved_cp,
        "checkpoint": current,
        "threadsLogged": heads.len(),
        "trailsChecked": trails_checked,
        "deletions": deletions,
        "failures": failures,
        "ok": failures.is_empty(),
    }))
}

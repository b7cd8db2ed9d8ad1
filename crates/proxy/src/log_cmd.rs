//! `proofgate log verify`: checks the server's whole append-only log against a checkpoint the
//! auditor saved earlier: the current checkpoint is signed and extends the saved one, the
//! leaves the server lists hash to its root, every leaf is signed, and every thread whose head
//! was logged still has its trail, ending where the log says, unless a deletion was logged.

use anyhow::{bail, Context, Result};
use clap::Subcommand;
use proofgate_core::audit::bundle::{read_trail_or_bundle, verify_trust, AuditBundle};
use proofgate_core::audit::transparency::{
    deletion_problem, logged_heads_problem, verify_checkpoint, verify_consistency, verify_note,
    CheckpointInfo, LogStatement,
};
use proofgate_proxy::audit_check::ServedLog;
use proofgate_proxy::terminal::printable;
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::ExitCode;
use tlog_tiles::{stored_hash_count, stored_hashes, tree_hash};

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
        /// Exit 3 when nothing failed but the check is not full (`notChecked` is not empty:
        /// no trail was read without `--api-key`), as `proofgate audit --require-complete`
        /// does (1 is a failure).
        #[arg(long)]
        require_complete: bool,
    },
}

use proofgate_core::audit::transparency::StoredHashes as Hashes;

pub fn run(command: LogCommand) -> Result<ExitCode> {
    let LogCommand::Verify {
        server,
        checkpoint,
        public_key,
        api_key,
        require_complete,
    } = command;
    let key = crate::key_text(&public_key)?;
    let saved =
        std::fs::read_to_string(&checkpoint).with_context(|| checkpoint.display().to_string())?;
    let rt = tokio::runtime::Runtime::new()?;
    let report = rt.block_on(verify(&server, &key, &saved, api_key.as_deref()))?;
    println!(
        "{}",
        proofgate_proxy::terminal::json_printable(&serde_json::to_string_pretty(&report)?)
    );
    let failures = report["failures"].as_array().map_or(0, Vec::len);
    for f in report["failures"].as_array().into_iter().flatten() {
        eprintln!("log: {}", printable(f.as_str().unwrap_or_default()));
    }
    for n in report["notChecked"].as_array().into_iter().flatten() {
        eprintln!(
            "log: not checked: {}",
            printable(n.as_str().unwrap_or_default())
        );
    }
    Ok(if failures > 0 {
        ExitCode::from(1)
    } else if require_complete && report["complete"] != true {
        ExitCode::from(3)
    } else {
        ExitCode::SUCCESS
    })
}

/// The HTTP client of the log commands: the server audited is not trusted, so each request
/// has a time limit (a server that stopped mid-answer held the auditor for ever).
fn client() -> Result<reqwest::Client> {
    Ok(reqwest::Client::builder()
        .connect_timeout(std::time::Duration::from_secs(10))
        .read_timeout(std::time::Duration::from_secs(30))
        .timeout(std::time::Duration::from_secs(300))
        .build()?)
}

/// The most a checkpoint, proof or page of leaves may hold (a page is at most 1,000 leaves).
const TEXT_LIMIT: usize = 16 << 20;
/// The most one thread's audit bundle may hold.
const BUNDLE_LIMIT: usize = 256 << 20;

/// A served body read to a bound: an endless or enormous body from the audited server ran the
/// auditor's process out of memory.
trait BoundedBody {
    async fn bounded_bytes(self, limit: usize) -> Result<Vec<u8>>;
    async fn bounded_text(self) -> Result<String>;
    async fn bounded_json(self) -> Result<Value>;
}

impl BoundedBody for reqwest::Response {
    async fn bounded_bytes(self, limit: usize) -> Result<Vec<u8>> {
        let url = self.url().to_string();
        proofgate_proxy::http_body::read_bounded(self, limit)
            .await
            .map_err(|e| anyhow::anyhow!("GET {url}: {e}"))
    }
    async fn bounded_text(self) -> Result<String> {
        let url = self.url().to_string();
        String::from_utf8(self.bounded_bytes(TEXT_LIMIT).await?)
            .map_err(|_| anyhow::anyhow!("GET {url}: the body is not UTF-8 text"))
    }
    async fn bounded_json(self) -> Result<Value> {
        let url = self.url().to_string();
        serde_json::from_slice(&self.bounded_bytes(TEXT_LIMIT).await?)
            .with_context(|| format!("GET {url}: not JSON"))
    }
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

/// The log as `server` serves it now (`GET /api/log/checkpoint`, `/api/log/consistency` from
/// `from_size`, and every leaf's note from `/api/log/leaves`; no key needed): its checkpoint
/// note, the consistency proof and the notes (the caller holds them to the key and to each
/// other: [`proofgate_core::audit::transparency::newest_log`] and
/// [`proofgate_core::audit::transparency::log_heads`]). With `verifier_key`, a checkpoint that
/// key does not sign comes back alone, its proof and leaves unread (the caller finds it
/// unsigned). `Err` only when they could not be fetched.
pub fn served_log(server: &str, from_size: u64, verifier_key: Option<&str>) -> Result<ServedLog> {
    let verifier_key = verifier_key.map(str::to_string);
    let base = server.trim_end_matches('/').to_string();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    runtime.block_on(async move {
        let client = client()?;
        let ok_text = |url: String| {
            let client = client.clone();
            async move {
                let resp = get(&client, &url, None).await?;
                let status = resp.status();
                let text = resp
                    .bounded_text()
                    .await
                    .with_context(|| format!("GET {url}"))?;
                if !status.is_success() {
                    bail!(
                        "GET {url}: HTTP {status}: {}",
                        proofgate_proxy::http_body::truncate(&text, 300)
                    );
                }
                Ok::<_, anyhow::Error>(text)
            }
        };
        let checkpoint = ok_text(format!("{base}/api/log/checkpoint")).await?;
        // A checkpoint the key does not sign is not the audited server's log: nothing more of
        // it is read (its leaves could be any number), and the caller says so.
        if let Some(key) = &verifier_key {
            if proofgate_core::audit::transparency::verify_checkpoint(&checkpoint, key).is_err() {
                return Ok(ServedLog {
                    checkpoint,
                    proof: Vec::new(),
                    notes: Vec::new(),
                });
            }
        }
        // Read only to know what to fetch: the caller verifies the note.
        let size = checkpoint
            .lines()
            .nth(1)
            .and_then(|n| n.parse::<u64>().ok())
            .unwrap_or(0);
        let proof: Value = serde_json::from_str(
            &ok_text(format!(
                "{base}/api/log/consistency?from={}&to={size}",
                from_size.min(size)
            ))
            .await?,
        )?;
        let proof: Vec<String> =
            serde_json::from_value(proof["hashes"].clone()).unwrap_or_default();
        let mut notes = Vec::new();
        while (notes.len() as u64) < size {
            let from = notes.len();
            let url = format!("{base}/api/log/leaves?from={from}&to={size}");
            let page: Value = serde_json::from_str(&ok_text(url).await?)?;
            let leaves = page["leaves"].as_array().cloned().unwrap_or_default();
            if leaves.is_empty() {
                bail!("the server lists no leaf {from} of the {size} its checkpoint signs");
            }
            for leaf in leaves.iter().take(size as usize - from) {
                match leaf["note"].as_str() {
                    Some(note) => notes.push(note.to_string()),
                    None => bail!("leaf {} as listed has no note", notes.len()),
                }
            }
        }
        Ok(ServedLog {
            checkpoint,
            proof,
            notes,
        })
    })
}

async fn verify(server: &str, key: &str, saved: &str, api_key: Option<&str>) -> Result<Value> {
    let base = server.trim_end_matches('/');
    let client = client()?;
    let mut failures: Vec<String> = Vec::new();
    let saved_cp =
        verify_checkpoint(saved, key).map_err(|e| anyhow::anyhow!("saved checkpoint: {e}"))?;
    let resp = get(&client, &format!("{base}/api/log/checkpoint"), None).await?;
    let status = resp.status();
    let current_note = resp.bounded_text().await?;
    if !status.is_success() {
        // The server refuses to sign a log that does not extend the one it signed before (cut
        // back or rewritten in its database): its reason is the finding.
        bail!(
            "the server signs no checkpoint (HTTP {status}): {}",
            proofgate_proxy::http_body::truncate(&current_note, 300)
        );
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
    .bounded_json()
    .await?;
    let hashes: Vec<String> = serde_json::from_value(proof["hashes"].clone()).unwrap_or_default();
    if let Err(e) = verify_consistency(&saved_cp, &current, &hashes) {
        failures.push(e);
    }
    // Every leaf, checked against the signed root.
    let mut stored = Hashes(Vec::new());
    // Every head of every thread, in log order: a trail must still hold each of them.
    let mut heads: BTreeMap<String, Vec<(u64, LogStatement)>> = BTreeMap::new();
    for (n, statement) in walk_leaves(
        &client,
        base,
        key,
        0..current.size,
        &mut stored,
        &mut failures,
    )
    .await?
    {
        if !statement.thread_id.is_empty() {
            heads
                .entry(statement.thread_id.clone())
                .or_default()
                .push((n, statement));
        }
    }
    let root = tree_hash(current.size, &stored).map_err(|e| anyhow::anyhow!("{e}"))?;
    if root.to_string() != current.root {
        failures.push(format!(
            "the leaves the server lists do not hash to its signed root ({} != {})",
            root, current.root
        ));
    }
    // Every logged deletion deletes its trail up to the thread's last logged head (the log
    // alone says so: no API key needed).
    for (thread, logged) in &heads {
        if let Some(problem) = deletion_problem(logged) {
            failures.push(format!("thread {thread}: {problem}"));
        }
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
        // The leaves logged after the checkpoint checked here, by thread (read once, when a
        // trail is missing): a deletion among them counts.
        let mut deleted_since: Option<BTreeMap<String, Vec<(u64, LogStatement)>>> = None;
        for (thread, logged) in &heads {
            let Some((leaf, statement)) = logged.last() else {
                continue;
            };
            let resp = get(
                &client,
                // With a consistency proof from the checkpoint checked here: a head signed
                // after it must be in a log that extends it.
                &format!(
                    "{base}/api/threads/{thread}/audit/bundle?from={}",
                    current.size
                ),
                Some(api_key),
            )
            .await?;
            let deleted = logged.iter().any(|(_, s)| s.deleted);
            if deleted && resp.status() == reqwest::StatusCode::NOT_FOUND {
                // Deleted as logged.
                continue;
            }
            if resp.status() == reqwest::StatusCode::NOT_FOUND {
                // Deleted (retention) after the checkpoint checked here: its deletion is a leaf
                // past it, signed with the log's key.
                if deleted_since.is_none() {
                    let (later, problem) =
                        leaves_after(&client, base, &current, &stored, key).await?;
                    failures.extend(problem);
                    let mut by_thread: BTreeMap<String, Vec<(u64, LogStatement)>> = BTreeMap::new();
                    for (leaf, s) in later {
                        by_thread
                            .entry(s.thread_id.clone())
                            .or_default()
                            .push((leaf, s));
                    }
                    deleted_since = Some(by_thread);
                }
                let later = deleted_since
                    .as_ref()
                    .and_then(|d| d.get(thread))
                    .filter(|l| l.iter().any(|(_, s)| s.deleted));
                if let Some(later) = later {
                    // Held to what a deletion within the checkpoint is held to.
                    let all: Vec<(u64, LogStatement)> =
                        logged.iter().chain(later.iter()).cloned().collect();
                    if let Some(problem) = deletion_problem(&all) {
                        failures.push(format!("thread {thread}: {problem}"));
                    }
                    continue;
                }
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
            // Read strictly, as `proofgate audit` and the browser read a bundle: a record
            // writing a key twice would otherwise pass here as its last copy.
            let body = resp.bounded_bytes(BUNDLE_LIMIT).await?;
            let bundle: AuditBundle = match read_trail_or_bundle(&body) {
                Ok((_, Some(bundle))) => bundle,
                Ok((_, None)) => {
                    failures.push(format!(
                        "thread {thread}: the server served a plain trail, not its audit bundle"
                    ));
                    continue;
                }
                Err(e) => {
                    failures.push(format!("thread {thread}: its audit bundle: {e}"));
                    continue;
                }
            };
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
            } else {
                // A thread the server went on with after the checkpoint checked here has
                // records past its last head in that log: they must come with a head signed
                // later (the next run checks it against the log), and the heads up to the
                // checkpoint are checked against the trail as far as they go.
                let end = usize::try_from(statement.seq)
                    .ok()
                    .and_then(|s| s.checked_add(1))
                    .unwrap_or(usize::MAX);
                let checked = if bundle.trail.len() > end && !statement.deleted {
                    let trusted = verify_trust(&bundle, key, Some(current_note.as_str())).ok;
                    match later_head_problem(thread, &bundle, key, current.size, trusted) {
                        Some(problem) => {
                            failures.push(format!("thread {thread}: {problem}"));
                            continue;
                        }
                        None => &bundle.trail[..end],
                    }
                } else {
                    &bundle.trail[..]
                };
                if let Some(problem) = logged_heads_problem(thread, checked, logged.as_slice()) {
                    failures.push(format!("thread {thread}: {problem}"));
                }
            }
            trails_checked += 1;
        }
    }
    // What was not checked is said, not passed over: without a key no trail is read, so
    // whether the logged trails are still there, whole, was not checked at all.
    let mut not_checked = Vec::new();
    if api_key.is_none() && !heads.is_empty() {
        not_checked.push(format!(
            "the {} logged threads' trails (whether each is still there, ending at its last \
             logged head): give --api-key (a key with the read scope)",
            heads.len()
        ));
    }
    Ok(json!({
        "savedCheckpoint": saved_cp,
        "checkpoint": current,
        "threadsLogged": heads.len(),
        "trailsChecked": trails_checked,
        "deletions": deletions,
        "failures": failures,
        "notChecked": not_checked,
        "ok": failures.is_empty(),
        "complete": failures.is_empty() && not_checked.is_empty(),
    }))
}

/// Leaves `range` of the log, each note verified with the log's key, their stored hashes
/// appended to `stored` (which holds those of the leaves before). A leaf that does not verify
/// is a failure (and hashed as an empty statement, so the root check fails too); a server
/// listing fewer leaves than asked, or more, is a failure: leaves past the range would count
/// as logged without being under the root checked.
async fn walk_leaves(
    client: &reqwest::Client,
    base: &str,
    key: &str,
    range: std::ops::Range<u64>,
    stored: &mut Hashes,
    failures: &mut Vec<String>,
) -> Result<Vec<(u64, LogStatement)>> {
    let mut out = Vec::new();
    let mut n = range.start;
    while n < range.end {
        let page: Value = get(
            client,
            &format!("{base}/api/log/leaves?from={n}&to={}", range.end),
            None,
        )
        .await?
        .bounded_json()
        .await?;
        let leaves = page["leaves"].as_array().cloned().unwrap_or_default();
        if leaves.is_empty() {
            failures.push(format!("the server lists no leaf {n} of {}", range.end));
            break;
        }
        for leaf in leaves {
            if n == range.end {
                failures.push(format!(
                    "the server lists leaves past {}, the end of the range asked for",
                    range.end
                ));
                break;
            }
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
            let new = stored_hashes(n, statement.text().as_bytes(), &*stored)
                .map_err(|e| anyhow::anyhow!("leaf {n}: {e}"))?;
            stored.0.extend(new);
            debug_assert_eq!(stored.0.len() as u64, stored_hash_count(n + 1));
            out.push((n, statement));
            n += 1;
        }
    }
    Ok(out)
}

/// The leaves the log holds past the checkpoint a run checks (`current`, whose leaves' stored
/// hashes are `stored`): those of a checkpoint the server signs now, which must extend
/// `current` and whose leaves must hash to its root. A deletion only served, never under a
/// signed root, would let a server drop a trail with no deletion in the log. Returns the
/// leaves, and why none could be read when the newer checkpoint does not hold.
async fn leaves_after(
    client: &reqwest::Client,
    base: &str,
    current: &CheckpointInfo,
    stored: &Hashes,
    key: &str,
) -> Result<(Vec<(u64, LogStatement)>, Option<String>)> {
    let deleted = Vec::new();
    let resp = get(client, &format!("{base}/api/log/checkpoint"), None).await?;
    let status = resp.status();
    let note = resp.bounded_text().await?;
    if !status.is_success() {
        return Ok((
            deleted,
            Some(format!(
                "the server signs no checkpoint past {} (HTTP {status}), so no deletion since \
                 can be checked",
                current.size
            )),
        ));
    }
    let newer = match verify_checkpoint(&note, key) {
        Ok(c) => c,
        Err(e) => return Ok((deleted, Some(format!("the server's newer checkpoint: {e}")))),
    };
    if newer.size <= current.size {
        return Ok((deleted, None));
    }
    let proof: Value = get(
        client,
        &format!(
            "{base}/api/log/consistency?from={}&to={}",
            current.size, newer.size
        ),
        None,
    )
    .await?
    .bounded_json()
    .await?;
    let hashes: Vec<String> = serde_json::from_value(proof["hashes"].clone()).unwrap_or_default();
    if let Err(e) = verify_consistency(current, &newer, &hashes) {
        return Ok((deleted, Some(format!("the server's newer checkpoint: {e}"))));
    }
    let mut stored = stored.clone();
    let mut failures = Vec::new();
    let leaves = walk_leaves(
        client,
        base,
        key,
        current.size..newer.size,
        &mut stored,
        &mut failures,
    )
    .await?;
    let root = tree_hash(newer.size, &stored).map_err(|e| anyhow::anyhow!("{e}"))?;
    if root.to_string() != newer.root {
        failures.push(format!(
            "the leaves past {} the server lists do not hash to its newer signed root",
            current.size
        ));
    }
    if !failures.is_empty() {
        return Ok((deleted, Some(failures.join("; "))));
    }
    Ok((leaves, None))
}

/// Why the records of a trail past its last head in the checkpoint being verified are not
/// covered by a head signed later: the bundle's signed head must verify with the log's key,
/// be about this thread, end the trail (its last record's place and hash), and sit at a leaf
/// past that checkpoint (`size`), since a head within it would be among the heads walked.
fn later_head_problem(
    thread: &str,
    bundle: &AuditBundle,
    key: &str,
    size: u64,
    trusted: bool,
) -> Option<String> {
    let records = bundle.trail.len();
    let unsigned = || {
        format!(
            "its trail has {records} records, past its last head in the checkpoint verified, \
             and no head signed later covers them"
        )
    };
    let Some(note) = bundle.signed_head.as_deref() else {
        return Some(unsigned());
    };
    let Ok(head) = verify_note(note, key).and_then(|t| LogStatement::parse(&t)) else {
        return Some(unsigned());
    };
    let Some(last) = bundle.trail.last() else {
        return Some(unsigned());
    };
    let ends_trail = head.thread_id == thread
        && !head.deleted
        && usize::try_from(head.seq).ok() == Some(records - 1)
        && last["hash"].as_str() == Some(head.head_hash.as_str());
    let later = bundle
        .inclusion
        .as_ref()
        .is_some_and(|i| i.leaf_index >= size);
    if !(ends_trail && later) {
        return Some(unsigned());
    }
    // The head's place was only claimed: its inclusion proof must hold in the bundle's
    // checkpoint, and that log extend the one checked (else a head signed but never logged,
    // or logged in another log, would pass every run).
    (!trusted).then(|| {
        format!(
            "its trail has {records} records, past its last head in the checkpoint verified, and \
             the head signed later that covers them is not proven in a log extending it (its \
             inclusion proof or the consistency proof fails)"
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proofgate_core::audit::bundle::Inclusion;
    use proofgate_proxy::audit_log::AuditKey;
    use tlog_tiles::Hash;

    /// A server the auditor reads a log from that answers every request with an endless
    /// body: the read stops at its bound with an error, instead of filling the auditor's
    /// memory.
    #[test]
    fn an_endless_body_from_the_audited_server_is_refused_at_its_bound() {
        use std::io::{Read, Write};
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(mut s) = stream else { return };
                std::thread::spawn(move || {
                    let mut buf = [0u8; 4096];
                    let _ = s.read(&mut buf);
                    let _ = s.write_all(b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n");
                    let chunk = [b'x'; 1 << 16];
                    let mut framed = format!("{:x}\r\n", chunk.len()).into_bytes();
                    framed.extend_from_slice(&chunk);
                    framed.extend_from_slice(b"\r\n");
                    while s.write_all(&framed).is_ok() {}
                });
            }
        });
        let err = format!("{:#}", served_log(&url, 0, None).unwrap_err());
        assert!(err.contains("larger than 16 MiB"), "{err}");
    }

    fn key(name: &str) -> AuditKey {
        let dir = tempfile::tempdir().unwrap();
        AuditKey::load_or_create(None, &dir.path().join("audit.key"), name).unwrap()
    }

    fn head(key: &AuditKey, thread: &str, seq: u64, hash: &str) -> String {
        let statement = LogStatement {
            deleted: false,
            thread_id: thread.into(),
            seq,
            head_hash: hash.into(),
        };
        key.sign(&statement.text()).unwrap()
    }

    /// A trail of three records, its head in the checkpoint verified at record 1, and a bundle
    /// whose signed head is `note` at leaf `leaf`.
    fn bundle(note: Option<String>, leaf: u64) -> AuditBundle {
        AuditBundle {
            trail: (0..3)
                .map(|i| json!({"seq": i, "hash": format!("h{i}")}))
                .collect(),
            signed_head: note,
            inclusion: Some(Inclusion {
                leaf_index: leaf,
                hashes: Vec::new(),
            }),
            checkpoint: None,
            consistency: None,
            policy_documents: Vec::new(),
        }
    }

    /// Records a thread got after the checkpoint `log verify` checks are covered only by a head
    /// the log's key signed later that ends the trail; anything else is reported.
    #[test]
    fn records_past_the_checkpoint_need_a_later_head_that_ends_the_trail() {
        let k = key("log");
        let vk = k.verifier_key().to_string();
        let size = 10;
        let good = bundle(Some(head(&k, "t", 2, "h2")), size);
        assert_eq!(later_head_problem("t", &good, &vk, size, true), None);
        for (what, b) in [
            ("no signed head", bundle(None, size)),
            (
                "a head within the checkpoint",
                bundle(Some(head(&k, "t", 2, "h2")), size - 1),
            ),
            (
                "another thread's head",
                bundle(Some(head(&k, "u", 2, "h2")), size),
            ),
            (
                "a head before the end",
                bundle(Some(head(&k, "t", 1, "h1")), size),
            ),
            (
                "a head of another record",
                bundle(Some(head(&k, "t", 2, "h9")), size),
            ),
            (
                "another key's head",
                bundle(Some(head(&key("other"), "t", 2, "h2")), size),
            ),
        ] {
            let problem = later_head_problem("t", &b, &vk, size, true);
            assert!(
                problem
                    .as_deref()
                    .is_some_and(|p| p.contains("no head signed later")),
                "{what}: {problem:?}"
            );
        }
        let mut no_inclusion = good.clone();
        no_inclusion.inclusion = None;
        assert!(later_head_problem("t", &no_inclusion, &vk, size, true).is_some());
        // A head whose place is claimed but not proven in a log extending the checkpoint.
        let unproven = later_head_problem("t", &good, &vk, size, false).unwrap();
        assert!(unproven.contains("not proven"), "{unproven}");
    }

    /// The stub's current checkpoint, as an auditor saves it.
    async fn checkpoint_of(base: &str) -> String {
        reqwest::get(format!("{base}/api/log/checkpoint"))
            .await
            .unwrap()
            .text()
            .await
            .unwrap()
    }

    /// How the stub log below lists its leaves.
    #[derive(Clone, Copy, PartialEq)]
    enum Listing {
        /// Leaves `from..to`, as asked.
        AsAsked,
        /// Every leaf from `from`, past `to` too.
        PastTheRange,
    }

    /// A log server on localhost: `leaves` (signed statements), a checkpoint of the first
    /// `sizes[i]` of them at the i-th request for one (the last size from then on), every
    /// thread's trail gone (404).
    async fn stub_log(
        k: &AuditKey,
        leaves: Vec<LogStatement>,
        sizes: Vec<u64>,
        listing: Listing,
    ) -> String {
        use axum::extract::Query;
        use axum::routing::get;
        use std::collections::HashMap;
        use std::sync::atomic::{AtomicUsize, Ordering};
        use std::sync::Arc;
        let mut hashes = Hashes(Vec::new());
        for (i, s) in leaves.iter().enumerate() {
            let new = stored_hashes(i as u64, s.text().as_bytes(), &hashes).unwrap();
            hashes.0.extend(new);
        }
        let checkpoints: Vec<String> = sizes
            .iter()
            .map(|&n| {
                let root = tree_hash(n, &hashes).unwrap();
                let c = tlog_tiles::Checkpoint::new("test/log", n, root, "").unwrap();
                k.sign(&String::from_utf8(c.to_bytes()).unwrap()).unwrap()
            })
            .collect();
        let notes: Vec<String> = leaves.iter().map(|s| k.sign(&s.text()).unwrap()).collect();
        let asked = Arc::new(AtomicUsize::new(0));
        let hashes = Arc::new(hashes);
        let app = axum::Router::new()
            .route(
                "/api/log/checkpoint",
                get(move || {
                    let i = asked
                        .fetch_add(1, Ordering::SeqCst)
                        .min(checkpoints.len() - 1);
                    let note = checkpoints[i].clone();
                    async move { note }
                }),
            )
            .route(
                "/api/log/consistency",
                get(move |Query(q): Query<HashMap<String, u64>>| {
                    let (from, to) = (q["from"], q["to"]);
                    let proof: Vec<String> = if from == 0 || from == to {
                        Vec::new()
                    } else {
                        tlog_tiles::prove_tree(to, from, &*hashes)
                            .unwrap()
                            .iter()
                            .map(Hash::to_string)
                            .collect()
                    };
                    async move { axum::Json(json!({ "hashes": proof })) }
                }),
            )
            .route(
                "/api/log/leaves",
                get(move |Query(q): Query<HashMap<String, u64>>| {
                    let from = q["from"] as usize;
                    let to = match listing {
                        Listing::AsAsked => q.get("to").map_or(notes.len(), |&t| t as usize),
                        Listing::PastTheRange => notes.len(),
                    };
                    let page: Vec<Value> = (from..to.min(notes.len()))
                        .map(|i| json!({ "index": i, "note": notes[i] }))
                        .collect();
                    async move { axum::Json(json!({ "leaves": page })) }
                }),
            )
            .route(
                "/api/threads/{id}/audit/bundle",
                // Thread `twice` has a bundle whose record writes a key twice (a reader
                // keeping the last copy checks another text than one keeping the first); the
                // others' trails are gone.
                get(
                    |axum::extract::Path(id): axum::extract::Path<String>| async move {
                        if id == "twice" {
                            Ok(r#"{"trail": [{"seq": 0, "body": {"answer": "forged", "answer": "signed"}}]}"#)
                        } else {
                            Err(axum::http::StatusCode::NOT_FOUND)
                        }
                    },
                ),
            );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(listener, app).await });
        format!("http://{addr}")
    }

    /// A thread whose trail is gone passes only when its deletion is a leaf under a root the
    /// server signed: a signed deletion served past the checkpoint, or listed on a page past
    /// the range asked, is not logged, and `log verify` fails the thread (both passed).
    #[tokio::test]
    async fn a_deletion_counts_only_under_a_signed_root() {
        let k = key("log");
        let vk = k.verifier_key().to_string();
        let logged = LogStatement {
            deleted: false,
            thread_id: "t".into(),
            seq: 0,
            head_hash: "ab".repeat(32),
        };
        let deletion = LogStatement {
            deleted: true,
            ..logged.clone()
        };
        let leaves = vec![logged, deletion];
        let run = |sizes: Vec<u64>, listing: Listing| {
            let (k, vk, leaves) = (&k, vk.clone(), leaves.clone());
            async move {
                let base = stub_log(k, leaves, sizes.clone(), listing).await;
                let saved = checkpoint_of(&base).await;
                verify(&base, &vk, &saved, Some("admin")).await.unwrap()
            }
        };
        // Served past a checkpoint that stays at one leaf: not logged.
        let report = run(vec![1, 1], Listing::AsAsked).await;
        assert_eq!(report["ok"], false, "{report}");
        assert!(
            report["failures"][0]
                .as_str()
                .is_some_and(|f| f.contains("no deletion was logged")),
            "{report}"
        );
        // Listed on the checkpoint's own page, past its one leaf: not logged.
        let report = run(vec![1, 1], Listing::PastTheRange).await;
        assert_eq!(report["ok"], false, "{report}");
        assert!(
            report["failures"]
                .as_array()
                .unwrap()
                .iter()
                .any(|f| f.as_str().unwrap().contains("past 1")),
            "{report}"
        );
        // Under a checkpoint signed later: logged (the trail was deleted as the log says).
        let report = run(vec![1, 1, 2], Listing::AsAsked).await;
        assert_eq!(report["ok"], true, "{report}");
        // A deletion "up to" an earlier record than the last head logged: the trail was cut
        // back before it was deleted (the log alone says so).
        let mut later = leaves[0].clone();
        later.seq = 1;
        let base = stub_log(
            &k,
            vec![later, leaves[1].clone()],
            vec![2],
            Listing::AsAsked,
        )
        .await;
        let saved = checkpoint_of(&base).await;
        let report = verify(&base, &vk, &saved, None).await.unwrap();
        assert!(
            report["failures"][0]
                .as_str()
                .is_some_and(|f| f.contains("cut back or rewritten before it was deleted")),
            "{report}"
        );
        // Without a key no trail was read, and the report says so.
        assert_eq!(report["trailsChecked"], 0);
        assert!(
            report["notChecked"][0]
                .as_str()
                .is_some_and(|n| n.contains("--api-key")),
            "{report}"
        );
        assert_eq!(report["complete"], false);
        // A bundle writing a key twice is refused, as `proofgate audit` refuses it (read
        // leniently, its last copy was checked).
        let twice = LogStatement {
            thread_id: "twice".into(),
            ..leaves[0].clone()
        };
        let base = stub_log(&k, vec![twice], vec![1], Listing::AsAsked).await;
        let saved = checkpoint_of(&base).await;
        let report = verify(&base, &vk, &saved, Some("admin")).await.unwrap();
        assert!(
            report["failures"][0]
                .as_str()
                .is_some_and(|f| f.contains("thread twice") && f.contains("`answer` appears twice")),
            "{report}"
        );
        // The same deletion past the checkpoint, under one signed later: failed as well.
        let mut head_1 = leaves[0].clone();
        head_1.seq = 1;
        let base = stub_log(
            &k,
            vec![leaves[0].clone(), head_1, leaves[1].clone()],
            vec![2, 2, 3],
            Listing::AsAsked,
        )
        .await;
        let saved = checkpoint_of(&base).await;
        let report = verify(&base, &vk, &saved, Some("admin")).await.unwrap();
        assert!(
            report["failures"][0]
                .as_str()
                .is_some_and(|f| f.contains("cut back or rewritten before it was deleted")),
            "{report}"
        );
    }
}

//! An audit trail nobody has to trust (issue 11), end to end over `proofgate serve`: a genuine
//! trail passes `proofgate audit --policy --public-key --checkpoint`; each tampering fails with
//! a message naming the record; a trail cannot make the auditor's machine write a file; a
//! kill -9 loses no record; conversation expiry keeps trails; replicas share one log.

mod proxy;
mod scripted;

use proofgate_core::audit::transparency::{LogStatement, StoredHashes};
use proxy::{config, sqlite, sqlite_query, temp_dir, Proxy};
use scripted::{repo_root, Server};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::process::Command;

const Q1: &str = "I am 70 and visit in the low season without credits. What is my admission fee after the senior discount?";
const REWRITTEN: &str = "In the low season the fee is $37.50; your 40% senior discount brings it to $22.50, plus a $10 discount processing fee, so $32.50 before tax.";

fn demo_script() -> Value {
    serde_json::from_str(
        &std::fs::read_to_string(repo_root().join("examples/demo/recorded-llm.json")).unwrap(),
    )
    .unwrap()
}

fn park() -> PathBuf {
    repo_root().join("examples/policies/park-admission.json")
}

async fn ask(proxy: &Proxy, question: &str) -> Value {
    reqwest::Client::new()
        .post(format!("{}/v1/chat/completions", proxy.url))
        .json(&json!({"model": "m", "messages": [{"role": "user", "content": question}]}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap()
}

async fn text(proxy: &Proxy, path: &str) -> String {
    reqwest::get(format!("{}{path}", proxy.url))
        .await
        .unwrap()
        .text()
        .await
        .unwrap()
}

async fn json_get(proxy: &Proxy, path: &str) -> Value {
    serde_json::from_str(&text(proxy, path).await).unwrap()
}

/// POSTs `body` to `path`; the status and the reply's text.
async fn post(proxy: &Proxy, path: &str, body: Value) -> (u16, String) {
    let r = reqwest::Client::new()
        .post(format!("{}{path}", proxy.url))
        .json(&body)
        .send()
        .await
        .unwrap();
    (r.status().as_u16(), r.text().await.unwrap())
}

/// Runs `proofgate audit` on `bundle` with the auditor's policy and key; returns (ok, report,
/// stderr).
fn audit(
    dir: &Path,
    bundle: &Value,
    policy: &Path,
    key: &str,
    checkpoint: Option<&str>,
) -> (bool, Value, String) {
    audit_with(dir, bundle, policy, key, checkpoint, &[])
}

/// [`audit`] with more arguments.
fn audit_with(
    dir: &Path,
    bundle: &Value,
    policy: &Path,
    key: &str,
    checkpoint: Option<&str>,
    more: &[&str],
) -> (bool, Value, String) {
    let text = serde_json::to_string(bundle).unwrap();
    audit_text(dir, &text, policy, key, checkpoint, more)
}

/// [`audit_with`] on a bundle's JSON text as it is.
fn audit_text(
    dir: &Path,
    text: &str,
    policy: &Path,
    key: &str,
    checkpoint: Option<&str>,
    more: &[&str],
) -> (bool, Value, String) {
    let path = dir.join(format!("bundle-{}.json", uuid::Uuid::new_v4().simple()));
    std::fs::write(&path, text).unwrap();
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_proofgate"));
    cmd.arg("audit")
        .arg(&path)
        .arg("--policy")
        .arg(policy)
        .arg("--public-key")
        .arg(key);
    if let Some(c) = checkpoint {
        let cp = dir.join("saved-checkpoint");
        std::fs::write(&cp, c).unwrap();
        cmd.arg("--checkpoint").arg(cp);
    }
    cmd.args(more);
    let out = cmd.output().unwrap();
    let report: Value = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
    // The exit code ends what the command wrote to stderr, for tests that tell them apart.
    (
        out.status.success(),
        report,
        format!(
            "{}[exit code {:?}]",
            String::from_utf8_lossy(&out.stderr),
            out.status.code()
        ),
    )
}

/// Re-hashes and re-links every record from `from` on, as whoever holds the database could.
fn rebuild_chain(trail: &mut [Value], from: usize) {
    let mut records: Vec<proofgate_core::AuditRecord> =
        serde_json::from_value(Value::Array(trail.to_vec())).unwrap();
    for i in from..records.len() {
        if i > 0 {
            records[i].prev = records[i - 1].hash.clone();
        }
        records[i].hash = records[i].expected_hash();
    }
    for (t, r) in trail.iter_mut().zip(records) {
        *t = serde_json::to_value(r).unwrap();
    }
}

fn validated_index(trail: &[Value]) -> usize {
    trail
        .iter()
        .rposition(|r| r["kind"] == "VALIDATED")
        .unwrap()
}

#[tokio::test]
async fn genuine_trails_pass_and_every_tampering_fails_naming_the_record() {
    let llm = Server::python("scripted_llm.py", &demo_script());
    let proxy = Proxy::start("trust", &config(&format!("{}/v1", llm.url()), "", ""));
    let dir = temp_dir("trust-audit");
    let saved_before = text(&proxy, "/api/log/checkpoint").await;
    let r = ask(&proxy, Q1).await;
    assert_eq!(r["proofgate"]["verdict"], "VALID", "{r}");
    let thread = r["proofgate"]["threadId"].as_str().unwrap().to_string();

    // The key from the server equals the one the operator's CLI prints from the key file.
    let key = text(&proxy, "/.well-known/proofgate/audit-key")
        .await
        .trim()
        .to_string();
    let cli = Command::new(env!("CARGO_BIN_EXE_proofgate"))
        .args(["audit-key", "--config"])
        .arg(proxy.config_path())
        .current_dir(repo_root())
        .output()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&cli.stdout).trim(), key);
    let checkpoint = text(&proxy, "/api/log/checkpoint").await;
    assert!(
        checkpoint.starts_with("proofgate.local/audit-log\n"),
        "{checkpoint}"
    );

    // Genuine: passes, also against a checkpoint saved before the conversation.
    let size_before: u64 = saved_before.lines().nth(1).unwrap().parse().unwrap();
    let bundle = json_get(
        &proxy,
        &format!("/api/threads/{thread}/audit/bundle?from={size_before}"),
    )
    .await;
    let (ok, report, err) = audit(&dir, &bundle, &park(), &key, Some(&saved_before));
    assert!(ok, "{report}\n{err}");
    assert_eq!(report["trust"]["ok"], true);
    assert!(report["checks"].as_array().unwrap().len() >= 3);
    // Without --thread the report says which thread it is was not checked: a bundle shows only
    // that its trail is a logged head of some thread, so a server could hand out another's.
    assert!(
        report["notChecked"].to_string().contains("--thread") && err.contains("not checked"),
        "{report}"
    );
    assert_eq!(
        report["complete"], false,
        "ok, but not a full audit: {report}"
    );
    // The checkpoint saved before the thread was logged fixes nothing of it (a review: a key
    // holder could rewrite the trail and rebuild the log after it): not a full audit.
    assert!(
        report["notChecked"].to_string().contains(&format!(
            "the checkpoint given counts {size_before} leaves and the trail's head is leaf"
        )),
        "{report}"
    );
    // The bundle audited against a checkpoint saved once the thread was logged, with more
    // arguments.
    let audit_more =
        |more: &[&str]| audit_with(&dir, &bundle, &park(), &key, Some(&checkpoint), more);
    // A script that must not take a partial audit for a verified trail says so.
    // 3 for an audit that passed but was not complete (1 is a failure, 2 one that could not run).
    let (ok, report, err) = audit_more(&["--require-complete"]);
    assert!(!ok && report["ok"] == true, "{report}");
    assert!(err.ends_with("[exit code Some(3)]"), "{err}");
    let as_thread = |id: &str| audit_more(&["--thread", id]);
    let (ok, report, err) = as_thread("some-other-thread");
    assert!(!ok, "{report}");
    assert!(err.contains("not some-other-thread's"), "{err}");
    let (ok, report, err) = as_thread(&thread);
    assert!(ok, "{report}\n{err}");
    // Without the log's leaves, whether this is the thread's latest head is not checked.
    assert!(
        report["notChecked"].to_string().contains("--log"),
        "{report}"
    );
    assert_eq!(report["complete"], false, "{report}");
    let (ok, report, err) = audit_more(&["--thread", &thread, "--log", &proxy.url]);
    assert!(ok, "{report}\n{err}");
    assert_eq!(report["notChecked"], json!([]), "{report}");
    assert_eq!(report["complete"], true, "{report}");
    let full = [
        "--thread",
        &thread,
        "--log",
        &proxy.url,
        "--require-complete",
    ];
    let (ok, report, err) = audit_more(&full);
    assert!(
        ok,
        "a full audit passes --require-complete: {report}\n{err}"
    );
    // A log that cannot be read (no proofgate there) was not read: not checked, not failed.
    let (ok, report, err) = audit_more(&["--thread", &thread, "--log", &llm.url()]);
    assert!(ok && report["complete"] == false, "{report}\n{err}");
    assert!(
        report["notChecked"]
            .to_string()
            .contains("the log could not be read"),
        "{report}"
    );
    // Another proofgate's log (another key): not the audited server's, so not read: not
    // checked, never failed nor passed, as the browser verifier says it.
    let other = Proxy::start(
        "trust-other-log",
        &config(&format!("{}/v1", llm.url()), "", ""),
    );
    let (ok, report, err) = audit_more(&["--thread", &thread, "--log", &other.url]);
    assert!(ok && report["complete"] == false, "{report}\n{err}");
    assert!(
        report["notChecked"]
            .to_string()
            .contains("not signed by the verifier key"),
        "{report}"
    );
    drop(other);

    // 1. The answer text rewritten everywhere, the chain rebuilt: the signature fails.
    let mut forged = bundle.clone();
    let text_all = serde_json::to_string(&forged["trail"])
        .unwrap()
        .replace("$32.50", "$12.50");
    forged["trail"] = serde_json::from_str(&text_all).unwrap();
    let trail = forged["trail"].as_array_mut().unwrap();
    rebuild_chain(trail, 0);
    let last = trail.len() - 1;
    let (ok, report, err) = audit(&dir, &forged, &park(), &key, None);
    assert!(!ok);
    assert!(err.ends_with("[exit code Some(1)]"), "{err}");
    let failures = report["failures"].to_string();
    assert!(
        failures.contains(&format!("record {last}")) && failures.contains("altered"),
        "{failures}"
    );

    // 2. A stored check script changed (never run): the chain names the record; rebuilt, the
    //    signature fails.
    let v = validated_index(bundle["trail"].as_array().unwrap());
    let mut changed = bundle.clone();
    changed["trail"][v]["body"]["evidence"]["checks"][0]["checks"][0]["script"] =
        json!("(check-sat)");
    let (ok, report, _) = audit(&dir, &changed, &park(), &key, None);
    assert!(!ok);
    assert_eq!(report["replay"]["failure"]["index"], v, "{report}");
    rebuild_chain(changed["trail"].as_array_mut().unwrap(), v);
    let (ok, report, _) = audit(&dir, &changed, &park(), &key, None);
    assert!(
        !ok && report["trust"]["signature"]["ok"] == false,
        "{report}"
    );

    // 3. Check scripts removed: the same.
    let mut removed = bundle.clone();
    removed["trail"][v]["body"]["evidence"]
        .as_object_mut()
        .unwrap()
        .remove("checks");
    let (ok, report, _) = audit(&dir, &removed, &park(), &key, None);
    assert!(!ok);
    assert_eq!(report["replay"]["failure"]["index"], v, "{report}");

    // 4. The auditor's policy differs by one rule: the validation names its policy version.
    let mut policy: Value =
        serde_json::from_str(&std::fs::read_to_string(park()).unwrap()).unwrap();
    policy["rules"].as_array_mut().unwrap().pop();
    let other = dir.join("park-changed.json");
    std::fs::write(&other, serde_json::to_vec(&policy).unwrap()).unwrap();
    let (ok, report, _) = audit(&dir, &bundle, &other, &key, None);
    assert!(!ok);
    let failures = report["failures"].to_string();
    assert!(
        failures.contains(&format!("record {v}")) && failures.contains("auditor's policy"),
        "{failures}"
    );
    // ...and the policy the thread was shown (its prompts) is not the auditor's either: this
    // binds a trail whose findings no solver confirms, or whose validator names no content hash.
    assert!(
        failures.contains("record 0: the thread was shown the policy document"),
        "{failures}"
    );

    // 5. Another server's key: the signature fails.
    let (ok, _, _) = audit(
        &dir,
        &bundle,
        &park(),
        "other+01020304+AQAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA",
        None,
    );
    assert!(!ok);

    // 5b. A key written twice in the signed final record: a forged answer before the signed
    //     one. Read as its last copy the record is the signed one, but a reader keeping the
    //     first would show the forgery under the same signature: the file is refused.
    let genuine = serde_json::to_string(&bundle).unwrap();
    let at = genuine
        .rfind("\"answer\":")
        .expect("the final record's answer");
    let doubled = format!(
        "{}\"answer\":\"You pay nothing: admission is free for you.\",{}",
        &genuine[..at],
        &genuine[at..]
    );
    let (ok, report, err) = audit_text(&dir, &doubled, &park(), &key, None, &["--thread", &thread]);
    assert!(!ok, "{report}\n{err}");
    assert!(
        report.to_string().contains("appears twice"),
        "{report}\n{err}"
    );
    // The same text without the copy passes.
    let (ok, report, err) = audit_text(&dir, &genuine, &park(), &key, None, &["--thread", &thread]);
    assert!(ok, "{report}\n{err}");

    // 5c. The server's own signature on the statement that the thread was deleted, given as
    //     the head: the same thread, position and hash, but it says the thread is gone.
    let store_dir = proxy.config_path().parent().unwrap().to_path_buf();
    let signer = proofgate_proxy::audit_log::AuditKey::load_or_create(
        None,
        &store_dir.join("audit.key"),
        "proofgate",
    )
    .unwrap();
    assert_eq!(signer.verifier_key(), key);
    let note = bundle["signedHead"].as_str().unwrap();
    let statement_text = format!("{}\n", note.split("\n\n").next().unwrap());
    let mut statement =
        proofgate_core::audit::transparency::LogStatement::parse(&statement_text).unwrap();
    assert!(!statement.deleted);
    statement.deleted = true;
    let mut deletion = bundle.clone();
    deletion["signedHead"] = json!(signer.sign(&statement.text()).unwrap());
    let (ok, report, _) = audit(&dir, &deletion, &park(), &key, None);
    assert!(!ok, "{report}");
    assert!(
        report["trust"]["signature"]["detail"]
            .as_str()
            .is_some_and(|d| d.contains("deleted")),
        "{report}"
    );

    // 6. The thread deleted from the database: `log verify` against the saved checkpoint
    //    names it; then the log itself cut back: the saved checkpoint no longer fits.
    let saved = dir.join("checkpoint");
    std::fs::write(&saved, &checkpoint).unwrap();
    let log_verify = || log_verify(&proxy, &key, &saved);
    let out = log_verify();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    // --require-complete: 3 without an API key (no trail read), 0 with one.
    let log_only = |more: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_proofgate"))
            .args([
                "log",
                "verify",
                "--server",
                &proxy.url,
                "--public-key",
                &key,
            ])
            .args(["--require-complete", "--checkpoint"])
            .arg(&saved)
            .args(more)
            .output()
            .unwrap()
    };
    let out = log_only(&[]);
    assert_eq!(
        out.status.code(),
        Some(3),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    assert_eq!(log_only(&["--api-key", "any"]).status.code(), Some(0));
    let db = database(&proxy);
    sqlite(&db, &format!(
        "DELETE FROM audit_records WHERE thread_id = '{thread}'; DELETE FROM threads WHERE id = '{thread}';"
    ));
    let out = log_verify();
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(!out.status.success());
    assert!(
        stdout.contains(&thread) && stdout.contains("no deletion was logged"),
        "{stdout}"
    );
    // The server signed the full log (its checkpoint above), so it refuses to sign the cut
    // one, and says why.
    sqlite(
        &db,
        "DELETE FROM log_leaves WHERE idx = (SELECT MAX(idx) FROM log_leaves);",
    );
    let out = log_verify();
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(!out.status.success());
    assert!(
        said.contains("signs no checkpoint") && said.contains("cut back"),
        "{said}"
    );
}

/// Adds a leaf holding `note` (stating `statement`) at the end of the log in the proxy's
/// database, with the stored hashes the tree needs, as whoever holds the database could.
fn write_leaf(db: &Path, statement: &LogStatement, note: &str) {
    let rows = sqlite_query(db, "SELECT hash FROM log_hashes ORDER BY idx");
    let stored = StoredHashes(
        rows.lines()
            .map(|h| tlog_tiles::Hash::parse_hash(h).unwrap())
            .collect(),
    );
    let size: u64 = sqlite_query(db, "SELECT COUNT(*) FROM log_leaves")
        .parse()
        .unwrap();
    let new = tlog_tiles::stored_hashes(size, statement.text().as_bytes(), &stored).unwrap();
    let first = tlog_tiles::stored_hash_index(0, size);
    let mut sql = format!(
        "INSERT INTO log_leaves (idx, thread_id, seq, head_hash, deleted, note, at) \
         VALUES ({size}, '{}', {}, '{}', 0, '{}', 0);",
        statement.thread_id,
        statement.seq,
        statement.head_hash,
        note.replace('\'', "''")
    );
    for (i, h) in new.iter().enumerate() {
        sql.push_str(&format!(
            "INSERT INTO log_hashes (idx, hash) VALUES ({}, '{h}');",
            first + i as u64
        ));
    }
    sqlite(db, &sql);
}

/// Removes the leaves past `size` and their stored hashes.
fn cut_log_to(db: &Path, size: u64) {
    let keep = tlog_tiles::stored_hash_count(size);
    sqlite(
        db,
        &format!(
            "DELETE FROM log_leaves WHERE idx >= {size}; DELETE FROM log_hashes WHERE idx >= {keep};"
        ),
    );
}

/// A leaf written into the database past the signed tree, with the stored hashes that keep
/// the tree whole, gets no checkpoint: a note signed with another key, or a genuine head of
/// an earlier record copied to the end. Before, the next checkpoint covered either for good,
/// and an auditor reading the log failed the genuine trail ("it was rewritten", "forked").
#[tokio::test]
async fn a_leaf_written_into_the_database_gets_no_checkpoint() {
    let (_llm, proxy, id) = waiting_thread("written-leaf").await;
    let (status, body) = post(
        &proxy,
        &format!("/api/threads/{id}/answers"),
        json!({"answers": ["Low season, and no credits.", "No credits."]}),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    let checkpoint = |proxy: &Proxy| {
        let url = format!("{}/api/log/checkpoint", proxy.url);
        async move {
            let r = reqwest::get(url).await.unwrap();
            (r.status().as_u16(), r.text().await.unwrap())
        }
    };
    let (status, signed) = checkpoint(&proxy).await;
    assert_eq!(status, 200, "{signed}");
    let size: u64 = signed.lines().nth(1).unwrap().parse().unwrap();
    let db = database(&proxy);
    // Notes hold line breaks: the first head's is read whole by its index.
    let first_idx = sqlite_query(
        &db,
        &format!("SELECT min(idx) FROM log_leaves WHERE thread_id = '{id}'"),
    );
    let first_note = python_note(&db, &first_idx);
    let first = LogStatement::parse(&note_text(&first_note)).unwrap();
    let last_seq: u64 = sqlite_query(
        &db,
        &format!("SELECT max(seq) FROM log_leaves WHERE thread_id = '{id}'"),
    )
    .parse()
    .unwrap();
    assert!(first.seq < last_seq, "the thread logged a later head");

    // A note signed with a key that is not the server's, stating a rewritten head.
    let dir = temp_dir("written-leaf-key");
    let other = proofgate_proxy::audit_log::AuditKey::load_or_create(
        None,
        &dir.join("other.key"),
        "proofgate",
    )
    .unwrap();
    let forged = LogStatement {
        deleted: false,
        thread_id: id.clone(),
        seq: last_seq,
        head_hash: "0".repeat(64),
    };
    write_leaf(&db, &forged, &other.sign(&forged.text()).unwrap());
    let (status, said) = checkpoint(&proxy).await;
    assert_eq!(status, 500, "{said}");
    assert!(said.contains("log_inconsistent"), "{said}");
    cut_log_to(&db, size);
    assert_eq!(checkpoint(&proxy).await, (200, signed.clone()));

    // The server's own signed head of an earlier record, copied to the end.
    write_leaf(&db, &first, &first_note);
    let (status, said) = checkpoint(&proxy).await;
    assert_eq!(status, 500, "{said}");
    assert!(said.contains("log_inconsistent"), "{said}");
    cut_log_to(&db, size);
    assert_eq!(checkpoint(&proxy).await, (200, signed.clone()));
    // Written while the server was down: refused after its restart too, and taken out again
    // without another restart.
    write_leaf(&db, &first, &first_note);
    let proxy = proxy.restart();
    let (status, said) = checkpoint(&proxy).await;
    assert_eq!(status, 500, "{said}");
    cut_log_to(&db, size);
    assert_eq!(checkpoint(&proxy).await, (200, signed));
    // And the genuine trail still audits with the log.
    assert_trail_audits(&proxy, &id, "written-leaf").await;
}

/// The note of leaf `idx`, read whole (it holds line breaks).
fn python_note(db: &Path, idx: &str) -> String {
    let out = Command::new("python3")
        .args([
            "-c",
            "import sqlite3,sys; c=sqlite3.connect(sys.argv[1]); \
             sys.stdout.write(c.execute('SELECT note FROM log_leaves WHERE idx = ?', \
             (int(sys.argv[2]),)).fetchone()[0])",
        ])
        .arg(db)
        .arg(idx)
        .output()
        .unwrap();
    assert!(out.status.success());
    String::from_utf8(out.stdout).unwrap()
}

/// A signed note's text (before the blank line and its signatures).
fn note_text(note: &str) -> String {
    let end = note.find("\n\n").unwrap();
    note[..=end].to_string()
}

/// The SQLite database of a proxy started with the default storage.
fn database(proxy: &Proxy) -> PathBuf {
    proxy
        .config_path()
        .parent()
        .unwrap()
        .join("proofgate.sqlite")
}

/// A proxy (with its scripted LLM) and the id of a thread of it waiting for answers to its
/// follow-up questions about a senior's admission.
async fn waiting_thread(name: &str) -> (Server, Proxy, String) {
    let llm = Server::python("scripted_llm.py", &demo_script());
    let proxy = Proxy::start(name, &config(&format!("{}/v1", llm.url()), "", ""));
    let id = start_waiting(&proxy).await;
    (llm, proxy, id)
}

/// Starts a thread on the demo's question that waits for the user's answers; its id.
async fn start_waiting(proxy: &Proxy) -> String {
    let (_, started) = post(
        proxy,
        "/api/threads",
        json!({"question": "I am 70. How much will I pay in total for admission?",
               "answer": "As a senior you pay $35.75 including tax."}),
    )
    .await;
    let started: Value = serde_json::from_str(&started).unwrap();
    assert_eq!(started["status"], "awaiting_input", "{started}");
    started["id"].as_str().unwrap().to_string()
}

/// Rewrites a thread's stored trail as someone with the database could: `from` replaced by
/// `to` in every record, the chain rebuilt from the first. Returns the forged trail.
async fn rewrite_stored_trail(proxy: &Proxy, id: &str, from: &str, to: &str) -> Vec<Value> {
    let bundle = json_get(proxy, &format!("/api/threads/{id}/audit/bundle")).await;
    let all = serde_json::to_string(&bundle["trail"]).unwrap();
    assert!(all.contains(from));
    let mut trail: Vec<Value> = serde_json::from_str(&all.replace(from, to)).unwrap();
    rebuild_chain(&mut trail, 0);
    let mut sql = String::new();
    for r in &trail {
        sql += &format!(
            "UPDATE audit_records SET record = '{}' WHERE thread_id = '{id}' AND seq = {};",
            r.to_string().replace('\'', "''"),
            r["seq"]
        );
    }
    sqlite(&database(proxy), &sql);
    trail
}

/// A trail rewritten in the database from its first record, its chain rebuilt: the server
/// does not extend it (it would sign and log the forgery as genuine), and `log verify` names
/// it. (A forgery extended under a head the operator signs is the core's
/// `a_trail_must_hold_every_head_logged_for_it`.)
#[tokio::test]
async fn a_trail_rewritten_in_the_store_is_neither_extended_nor_passed() {
    let (_llm, proxy, id) = waiting_thread("rewritten-store").await;
    let key = text(&proxy, "/.well-known/proofgate/audit-key")
        .await
        .trim()
        .to_string();
    let dir = temp_dir("rewritten-store-audit");
    let saved = dir.join("checkpoint");
    std::fs::write(&saved, text(&proxy, "/api/log/checkpoint").await).unwrap();
    let size = log_size(&proxy).await;
    let log_verify = || {
        let out = log_verify(&proxy, &key, &saved);
        (
            out.status.success(),
            String::from_utf8_lossy(&out.stdout).to_string(),
        )
    };
    let (ok, report) = log_verify();
    assert!(ok, "{report}");

    let trail = rewrite_stored_trail(&proxy, &id, "$35.75", "$5.75").await;
    let db = database(&proxy);

    // Answering its questions would extend the forgery under a new signed head: refused, and
    // nothing is signed or logged.
    let answers = json!({"answers": ["Low season, and no credits.", "No credits."]});
    let (status, body) = post(
        &proxy,
        &format!("/api/threads/{id}/answers"),
        answers.clone(),
    )
    .await;
    assert_eq!(status, 500, "{body}");
    assert!(
        body.contains("rewritten") && body.contains("the store was altered"),
        "{body}"
    );
    assert_eq!(
        log_size(&proxy).await,
        size,
        "a head was signed for the forged trail"
    );
    // The server reads a thread's heads by the leaves' thread column, which the database
    // holds: with the thread's leaves renamed away, the forgery has no head to contradict it,
    // and is refused for having none (the server logs every head with its records).
    sqlite(
        &db,
        &format!("UPDATE log_leaves SET thread_id = 'someone-else' WHERE thread_id = '{id}';"),
    );
    let (status, body) = post(&proxy, &format!("/api/threads/{id}/answers"), answers).await;
    assert_eq!(status, 500, "{body}");
    assert!(body.contains("no head was ever logged"), "{body}");
    assert_eq!(
        log_size(&proxy).await,
        size,
        "a head was signed for the forged trail"
    );
    let stored = json_get(&proxy, &format!("/api/threads/{id}/audit/bundle")).await;
    assert_eq!(stored["trail"].as_array().unwrap().len(), trail.len());

    // The auditor's log walk names the thread.
    let (ok, report) = log_verify();
    assert!(!ok, "{report}");
    assert!(
        report.contains(&id) && report.contains("rewritten"),
        "{report}"
    );
}

/// Whoever holds the database rolls a finished thread back to when it waited for answers (its
/// row and records from a backup) and renames the later head's leaf away: the server, which
/// finds a thread's heads by that column, continues the old head with other answers, and
/// signs and logs the fork. Every record of the fork is genuine, and so are its signed head
/// and inclusion proof; only the log's other leaves show the thread went further. An audit
/// that reads them (`--log`) fails naming the leaf; one that does not is never complete.
#[tokio::test]
async fn a_thread_rolled_back_in_the_store_and_forked_is_found_by_an_audit_that_reads_the_log() {
    let (_llm, proxy, id) = waiting_thread("rolled-back").await;
    let key = text(&proxy, "/.well-known/proofgate/audit-key")
        .await
        .trim()
        .to_string();
    let dir = temp_dir("rolled-back-audit");
    let db = database(&proxy);
    let backup_leaf = sqlite_query(
        &db,
        &format!("SELECT max(idx) FROM log_leaves WHERE thread_id = '{id}'"),
    );
    sqlite(
        &db,
        &format!(
            "CREATE TABLE bk_threads AS SELECT * FROM threads WHERE id = '{id}'; \
             CREATE TABLE bk_records AS SELECT * FROM audit_records WHERE thread_id = '{id}';"
        ),
    );
    // The bundle of the head the thread waits at, and a checkpoint saved then.
    let saved_then = text(&proxy, "/api/log/checkpoint").await;
    let size_then = saved_then.lines().nth(1).unwrap().to_string();
    let earlier = json_get(
        &proxy,
        &format!("/api/threads/{id}/audit/bundle?from={size_then}"),
    )
    .await;
    let path = format!("/api/threads/{id}/answers");
    let (status, body) = post(
        &proxy,
        &path,
        json!({"answers": ["Low season, and no credits.", "No credits."]}),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    // Handed out once the thread went on, the earlier bundle is genuine and its checkpoint's
    // leaves end before the later head: the server's newer checkpoint's leaves show it. Its
    // records pass, but it is not the whole thread: not complete, never a full audit.
    let (ok, report, err) = audit_with(
        &dir,
        &earlier,
        &park(),
        &key,
        Some(&saved_then),
        &["--thread", &id, "--log", &proxy.url, "--require-complete"],
    );
    assert!(
        !ok && err.ends_with("[exit code Some(3)]"),
        "{report}\n{err}"
    );
    assert!(
        report["notChecked"]
            .to_string()
            .contains("the thread went on after this trail"),
        "{report}"
    );
    // The log read is in the report, to save and compare with other auditors'.
    assert!(
        report["logCheckpoint"]
            .as_str()
            .is_some_and(|c| c.starts_with("proofgate")),
        "{report}"
    );
    // The same bundle with the log as it was when it was handed out (the server's old
    // responses replayed by a cache or anyone between, no signature needed): the log shows no
    // later head, but the trail ends before its thread did, so the audit is still not full.
    let own_size = earlier["checkpoint"]
        .as_str()
        .and_then(|c| c.lines().nth(1))
        .unwrap()
        .to_string();
    let replayed = Server::python(
        "replayed_log.py",
        &json!({
            "/api/log/checkpoint": saved_then,
            "/api/log/consistency": text(
                &proxy,
                &format!("/api/log/consistency?from={own_size}&to={size_then}")
            )
            .await,
            "/api/log/leaves": text(&proxy, &format!("/api/log/leaves?from=0&to={size_then}")).await,
        }),
    );
    let (ok, report, err) = audit_with(
        &dir,
        &earlier,
        &park(),
        &key,
        Some(&saved_then),
        &[
            "--thread",
            &id,
            "--log",
            &replayed.url(),
            "--require-complete",
        ],
    );
    assert!(
        !ok && err.ends_with("[exit code Some(3)]"),
        "a log replayed as it was made a cut-back trail a full audit: {report}\n{err}"
    );
    assert_eq!(report["ok"], true, "{report}");
    let gaps = report["notChecked"].to_string();
    assert!(
        gaps.contains("had not ended") && !gaps.contains("went on after this trail"),
        "{report}"
    );
    let saved = text(&proxy, "/api/log/checkpoint").await;
    let genuine = json_get(&proxy, &format!("/api/threads/{id}/audit/bundle")).await;
    let full = [
        "--thread",
        id.as_str(),
        "--log",
        proxy.url.as_str(),
        "--require-complete",
    ];
    let (ok, report, err) = audit_with(&dir, &genuine, &park(), &key, Some(&saved), &full);
    assert!(ok, "the genuine trail passes a full audit: {report}\n{err}");
    assert_eq!(report["complete"], true, "{report}");

    sqlite(
        &db,
        &format!(
            "DELETE FROM audit_records WHERE thread_id = '{id}'; \
             INSERT INTO audit_records SELECT * FROM bk_records; \
             DELETE FROM threads WHERE id = '{id}'; \
             INSERT INTO threads SELECT * FROM bk_threads; \
             UPDATE log_leaves SET thread_id = 'hidden' \
               WHERE thread_id = '{id}' AND idx > {backup_leaf};"
        ),
    );
    let (status, body) = post(
        &proxy,
        &path,
        json!({"answers": ["High season, and I have credits.", "Yes, credits."]}),
    )
    .await;
    assert!(
        status < 500,
        "the server continued the rolled-back thread: {body}"
    );
    let saved_size = saved.lines().nth(1).unwrap();
    let forked = json_get(
        &proxy,
        &format!("/api/threads/{id}/audit/bundle?from={saved_size}"),
    )
    .await;
    assert_ne!(forked["trail"], genuine["trail"]);
    // Without the log's leaves the fork's records, signed head and proof all pass, but the
    // audit is not complete: --require-complete exits 3.
    let (ok, report, err) = audit_with(
        &dir,
        &forked,
        &park(),
        &key,
        Some(&saved),
        &["--thread", &id, "--require-complete"],
    );
    assert!(
        !ok && err.ends_with("[exit code Some(3)]"),
        "{report}\n{err}"
    );
    assert_eq!(report["ok"], true, "{report}");
    assert!(
        report["notChecked"].to_string().contains("--log"),
        "{report}"
    );
    // Reading the log finds the genuine head the fork hides.
    let (ok, report, err) = audit_with(&dir, &forked, &park(), &key, Some(&saved), &full);
    assert!(
        !ok && err.ends_with("[exit code Some(1)]"),
        "{report}\n{err}"
    );
    // (Its head, of a record before the genuine head's, comes after it in the log.)
    assert!(
        err.contains("log: leaf") && err.contains("forked from an earlier head"),
        "{err}"
    );
    assert!(!err.contains("latest head"), "the log was read: {err}");
}

/// The stored copy of a waiting thread's state (which no signature covers) changed in the
/// database: the thread is not resumed from it. The loop goes on from the thread its signed
/// trail records (`Thread::resumed`); a stored state that differs is refused, named, and
/// nothing is signed. Put back, the same answers are taken.
#[tokio::test]
async fn a_state_altered_in_the_store_is_not_resumed() {
    let (_llm, proxy, id) = waiting_thread("altered-state").await;
    let db = database(&proxy);
    let size = log_size(&proxy).await;
    let answers = json!({"answers": ["Low season, and no credits.", "No credits."]});

    // The question, then the recorded answer, changed in the stored state alone.
    for (from, to, field) in [
        ("I am 70.", "I am 7.", "question"),
        ("$35.75", "$5.75", "steps"),
    ] {
        sqlite(
            &db,
            &format!(
                "UPDATE threads SET state = replace(state, '{from}', '{to}') WHERE id = '{id}';"
            ),
        );
        let (status, body) = post(
            &proxy,
            &format!("/api/threads/{id}/answers"),
            answers.clone(),
        )
        .await;
        assert_eq!(status, 500, "{body}");
        assert!(
            body.contains("stored state differs")
                && body.contains(&format!("`{field}`"))
                && body.contains("the store was altered"),
            "{body}"
        );
        assert_eq!(
            log_size(&proxy).await,
            size,
            "a head was signed for an altered state"
        );
        sqlite(
            &db,
            &format!(
                "UPDATE threads SET state = replace(state, '{to}', '{from}') WHERE id = '{id}';"
            ),
        );
    }

    // The state as the server wrote it: the answers are taken and the thread goes on.
    let (status, body) = post(&proxy, &format!("/api/threads/{id}/answers"), answers).await;
    assert_eq!(status, 200, "{body}");
    assert!(log_size(&proxy).await > size);
}

/// A view of a thread (what an app in background mode takes its answer from) is the thread
/// its trail records, not the stored copy of its state: a question or an answer changed there
/// is not shown.
#[tokio::test]
async fn a_view_shows_the_thread_its_trail_records_not_the_stored_copy() {
    let (_llm, proxy, id) = waiting_thread("altered-view").await;
    let db = database(&proxy);
    let genuine = json_get(&proxy, &format!("/api/threads/{id}")).await;
    assert!(genuine["question"]
        .as_str()
        .unwrap()
        .starts_with("I am 70."));
    sqlite(
        &db,
        &format!(
            "UPDATE threads SET state = replace(replace(state, 'I am 70.', 'I am 7.'), \
             '$35.75', '$5.75') WHERE id = '{id}';"
        ),
    );
    let view = json_get(&proxy, &format!("/api/threads/{id}")).await;
    assert_eq!(view, genuine);
    assert!(!view.to_string().contains("$5.75"), "{view}");
}

/// A view checks the trail against the log, as a resume does. The forgery here replays: the
/// follow-up questions are the last thing a waiting thread records, and no later record hashes
/// them, so the rewritten trail reproduces itself and only the signed heads in the log tell it
/// from the genuine one. It was shown as the thread (questions the server never asked) until an
/// audit or `log verify` found it. A view polled while the thread is driven is the other side
/// of this: the timeouts' tests read threads while they commit.
#[tokio::test]
async fn a_view_does_not_show_a_trail_rewritten_in_the_store() {
    let (_llm, proxy, id) = waiting_thread("rewritten-view").await;
    let path = format!("/api/threads/{id}");
    // The rewriter's words before its questions (from format 14 the questions are the
    // policy's, which a rewritten trail cannot change and still replay).
    assert!(json_get(&proxy, &path)
        .await
        .to_string()
        .contains("facts I don't have"));
    let forged =
        rewrite_stored_trail(&proxy, &id, "facts I don't have", "things I don't know").await;
    let bundle = json_get(&proxy, &format!("{path}/audit/bundle")).await;
    let documents = proofgate_core::audit::PolicyDocuments::from_values(
        bundle["policyDocuments"].as_array().unwrap(),
    )
    .unwrap();
    let report =
        proofgate_core::audit::replay_json_with(serde_json::to_vec(&forged).unwrap(), &documents);
    assert!(
        report.ok,
        "the forgery must replay, or the log check is not what catches it: {report:?}"
    );
    let r = reqwest::get(format!("{}{path}", proxy.url)).await.unwrap();
    assert_eq!(r.status(), 500);
    let body = r.text().await.unwrap();
    assert!(
        body.contains("rewritten") && body.contains("the store was altered"),
        "{body}"
    );
    assert!(!body.contains("things I don.t know"), "{body}");
}

/// Views of threads being driven: each step is written ahead of its call (its own commit, a
/// head logged with it), and the views are read as fast as they answer. A view reads the trail
/// and the heads in one statement; read apart (as before), a commit landing between the two
/// reads showed a head past the trail's end, as a trail cut back does, and this test failed
/// within its first thread. Every view answers 200 and ends with the thread done.
#[tokio::test]
async fn views_of_threads_being_driven_are_not_taken_for_tampering() {
    let llm = Server::python("scripted_llm.py", &demo_script());
    let proxy = Proxy::start(
        "views-in-progress",
        &config(&format!("{}/v1", llm.url()), "", "")
            .replace("[storage]\n", "[storage]\nwrite_ahead_after_ms = 0\n"),
    );
    let client = reqwest::Client::new();
    let (mut views, mut commits, mut last) = (0, 0, String::new());
    for _ in 0..12 {
        let (status, body) = post(
            &proxy,
            "/api/threads",
            json!({"question": Q1, "wait": false}),
        )
        .await;
        assert!(status == 200 || status == 202, "{status} {body}");
        let id = serde_json::from_str::<Value>(&body).unwrap()["id"]
            .as_str()
            .unwrap()
            .to_string();
        let mut seen = 0;
        loop {
            let r = client
                .get(format!("{}/api/threads/{id}", proxy.url))
                .send()
                .await
                .unwrap();
            let status = r.status().as_u16();
            let view: Value = r.json().await.unwrap();
            assert_eq!(status, 200, "a view of a thread in progress failed: {view}");
            views += 1;
            let steps = view["steps"].as_array().map_or(0, Vec::len);
            commits += usize::from(steps != seen);
            seen = steps;
            if view["status"] == "done" {
                break;
            }
        }
        last = id;
    }
    assert_trail_audits(&proxy, &last, "views-in-progress-audit").await;
    assert!(
        commits > 12,
        "too few commits watched ({commits} in {views} views)"
    );
}

/// A server whose signing key file is gone (a secret volume that did not mount), on a
/// database whose log holds leaves, refuses to start: a new key made there quietly would have
/// signed the rest of the log, and every auditor holding the old verifier key would have
/// seen the log's signer change.
#[tokio::test]
async fn a_missing_signing_key_is_not_replaced_under_a_log_it_signed() {
    let llm = Server::python("scripted_llm.py", &demo_script());
    let proxy = Proxy::start("key-gone", &config(&format!("{}/v1", llm.url()), "", ""));
    let r = ask(&proxy, Q1).await;
    assert_eq!(r["proofgate"]["verdict"], "VALID", "{r}");
    let (config, dir) = (proxy.config_path().to_path_buf(), proxy.dir().to_path_buf());
    drop(proxy);
    std::fs::remove_file(dir.join("audit.key")).unwrap();
    let stderr = proxy::refused(&["serve", "--listen", "127.0.0.1:0", "--config"], &config);
    assert!(
        stderr.contains("is missing") && stderr.contains("signed leaves"),
        "{stderr}"
    );
    assert!(!dir.join("audit.key").exists(), "a new key was made");
    // Nor do the commands that may make the key: showing the verifier key, making an API key.
    for args in [
        vec!["audit-key", "--config"],
        vec![
            "keys", "create", "--name", "k", "--scopes", "chat", "--config",
        ],
    ] {
        let stderr = proxy::refused(&args, &config);
        assert!(stderr.contains("signed leaves"), "{args:?}: {stderr}");
        assert!(!dir.join("audit.key").exists(), "{args:?} made a new key");
    }
}

/// Audit retention deletes a finished thread with its trail and logs the deletion in the same
/// transaction (apart, a crash between the two left a trail gone with no deletion leaf, which
/// `log verify` reports as cut back for ever): the thread is gone, the log holds its head and
/// its deletion, and the auditor's walk of the log passes.
#[tokio::test]
async fn retention_deletes_a_trail_and_logs_its_deletion() {
    // One day's retention, and the server's clock moved two days on once the thread ended
    // (`retention_days = 0` is refused: it would delete every trail at once).
    let dir = temp_dir("retention-clock");
    let shim = proxy::clock_shim(&dir);
    let shift = dir.join("shift_ms");
    std::fs::write(&shift, "0").unwrap();
    let llm = Server::python("scripted_llm.py", &demo_script());
    let proxy = Proxy::start_with_env(
        "retention",
        &config(
            &format!("{}/v1", llm.url()),
            "",
            "retention_days = 1\n[server]\nmaintenance_interval_ms = 200\n",
        ),
        &[
            ("LD_PRELOAD", shim.to_str().unwrap()),
            ("PROOFGATE_TEST_CLOCK_SHIFT_FILE", shift.to_str().unwrap()),
        ],
    );
    let key = text(&proxy, "/.well-known/proofgate/audit-key")
        .await
        .trim()
        .to_string();
    let dir = temp_dir("retention-audit");
    let saved = dir.join("checkpoint");
    std::fs::write(&saved, text(&proxy, "/api/log/checkpoint").await).unwrap();
    let before = log_size(&proxy).await;
    let r = ask(&proxy, Q1).await;
    assert_eq!(r["proofgate"]["verdict"], "VALID", "{r}");
    let id = r["proofgate"]["threadId"].as_str().unwrap().to_string();
    let two_days_ms = 2u64 * 24 * 3600 * 1000;
    std::fs::write(&shift, two_days_ms.to_string()).unwrap();
    let mut gone = false;
    for _ in 0..50 {
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        let status = reqwest::get(format!("{}/api/threads/{id}", proxy.url))
            .await
            .unwrap()
            .status();
        if status == 404 {
            gone = true;
            break;
        }
    }
    assert!(gone, "retention did not delete thread {id}");
    // The thread's heads (one, or more when a slow step was written ahead of the request's
    // end, as on a loaded machine) and its deletion, last.
    let after = log_size(&proxy).await;
    let leaves: Value = serde_json::from_str(
        &text(&proxy, &format!("/api/log/leaves?from={before}&to={after}")).await,
    )
    .unwrap();
    let statements: Vec<String> = leaves["leaves"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l["note"].as_str().unwrap().to_string())
        .collect();
    assert!(after >= before + 2, "the thread's head and its deletion");
    assert_eq!(statements.len() as u64, after - before);
    assert!(statements.iter().all(|n| n.contains(&id)), "{statements:?}");
    let deletions = statements
        .iter()
        .filter(|n| n.contains("thread-deleted/v1"))
        .count();
    assert_eq!(deletions, 1, "{statements:?}");
    assert!(
        statements.last().unwrap().contains("thread-deleted/v1"),
        "{statements:?}"
    );
    let out = log_verify(&proxy, &key, &saved);
    let report = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{report}");
}

/// Retention goes by a trail's signed last record, not by the unsigned columns beside it: a
/// thread marked old in the database is not deleted (and the deletion logged as ordinary
/// retention) on the schedule of whoever holds the database.
#[tokio::test]
async fn retention_is_not_brought_forward_by_the_database() {
    let llm = Server::python("scripted_llm.py", &demo_script());
    let proxy = Proxy::start(
        "retention-forged",
        &config(
            &format!("{}/v1", llm.url()),
            "",
            "retention_days = 30\n[server]\nmaintenance_interval_ms = 100\n",
        ),
    );
    let r = ask(&proxy, Q1).await;
    assert_eq!(r["proofgate"]["verdict"], "VALID", "{r}");
    let id = r["proofgate"]["threadId"].as_str().unwrap().to_string();
    let before = log_size(&proxy).await;
    sqlite(
        &proxy.dir().join("proofgate.sqlite"),
        &format!("UPDATE threads SET updated_at = 0, status = 'done' WHERE id = '{id}'"),
    );
    tokio::time::sleep(std::time::Duration::from_millis(1500)).await;
    let status = reqwest::get(format!("{}/api/threads/{id}", proxy.url))
        .await
        .unwrap()
        .status();
    assert_eq!(status, 200, "the thread was deleted as past retention");
    assert_eq!(log_size(&proxy).await, before, "a deletion was logged");
}

/// Retention deletes a trail only when its last record ended the thread: a thread still
/// waiting, marked ended in the unsigned status column, is kept however old (it was deleted
/// and the deletion logged as ordinary retention, a review found). The server's clock is put
/// 31 days ahead (tests/support/clock_shift.c) so that both trails are past retention; the
/// ended one is deleted, as the control.
#[tokio::test]
async fn retention_keeps_a_trail_that_did_not_end() {
    let dir = temp_dir("retention-unended");
    let shim = proxy::clock_shim(&dir);
    let shift = dir.join("shift_ms");
    std::fs::write(&shift, "0").unwrap();
    let llm = Server::python("scripted_llm.py", &demo_script());
    let proxy = Proxy::start_with_env(
        "retention-unended",
        &config(
            &format!("{}/v1", llm.url()),
            "",
            "retention_days = 30\n[server]\nmaintenance_interval_ms = 100\n",
        ),
        &[
            ("LD_PRELOAD", shim.to_str().unwrap()),
            ("PROOFGATE_TEST_CLOCK_SHIFT_FILE", shift.to_str().unwrap()),
        ],
    );
    let ended = ask(&proxy, Q1).await;
    assert_eq!(ended["proofgate"]["verdict"], "VALID", "{ended}");
    let ended = ended["proofgate"]["threadId"].as_str().unwrap().to_string();
    let waiting = start_waiting(&proxy).await;
    sqlite(
        &database(&proxy),
        &format!("UPDATE threads SET status = 'done' WHERE id = '{waiting}'"),
    );
    let thirty_one_days_ms = 31u64 * 24 * 3600 * 1000;
    std::fs::write(&shift, thirty_one_days_ms.to_string()).unwrap();
    let status = |id: String| {
        let url = format!("{}/api/threads/{id}", proxy.url);
        async move { reqwest::get(url).await.unwrap().status().as_u16() }
    };
    let mut gone = false;
    for _ in 0..50 {
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        if status(ended.clone()).await == 404 {
            gone = true;
            break;
        }
    }
    assert!(gone, "the ended thread past retention was deleted");
    tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    assert_eq!(
        status(waiting.clone()).await,
        200,
        "the waiting thread was deleted"
    );
}

#[tokio::test]
async fn a_trail_cannot_make_the_auditor_write_files_or_run_commands() {
    let llm = Server::python("scripted_llm.py", &demo_script());
    let proxy = Proxy::start("smuggle", &config(&format!("{}/v1", llm.url()), "", ""));
    let r = ask(&proxy, Q1).await;
    let thread = r["proofgate"]["threadId"].as_str().unwrap().to_string();
    let key = text(&proxy, "/.well-known/proofgate/audit-key")
        .await
        .trim()
        .to_string();
    let mut bundle = json_get(&proxy, &format!("/api/threads/{thread}/audit/bundle")).await;
    let dir = temp_dir("smuggle-audit");
    let target = dir.join("written-by-the-trail.txt");
    let evil = format!(
        "(set-option :regular-output-channel \"{}\")\n(echo \"pwned\")\n(check-sat)\n",
        target.display()
    );
    let v = validated_index(bundle["trail"].as_array().unwrap());
    // In every stored script, and smuggled into a premise's logic too.
    let t = &mut bundle["trail"][v]["body"];
    for f in t["evidence"]["checks"].as_array_mut().unwrap() {
        for c in f["checks"].as_array_mut().unwrap() {
            c["script"] = json!(evil);
        }
    }
    let premise = &mut t["findings"][0]["valid"]["translation"]["premises"][0]["logic"];
    *premise = json!(format!("true) {evil} (assert true"));
    rebuild_chain(bundle["trail"].as_array_mut().unwrap(), v);
    let (ok, report, _) = audit(&dir, &bundle, &park(), &key, None);
    assert!(!ok, "{report}");
    assert!(
        !target.exists(),
        "the trail made the auditor's solver write a file"
    );
    assert!(!report.to_string().contains("pwned"), "{report}");
}

#[tokio::test]
async fn expired_conversations_keep_their_trails() {
    let llm = Server::python("scripted_llm.py", &demo_script());
    let proxy = Proxy::start(
        "ttl",
        &config(
            &format!("{}/v1", llm.url()),
            "",
            "[server]\nmaintenance_interval_ms = 100\n",
        )
        .replace("[storage]\n", "[storage]\nthread_ttl_secs = 1\n"),
    );
    let r = ask(&proxy, Q1).await;
    assert_eq!(r["proofgate"]["verdict"], "VALID", "{r}");
    let thread = r["proofgate"]["threadId"].as_str().unwrap().to_string();
    // A thread waiting for answers when its conversation expires is ended with its final
    // record (it was marked `expired` in the store alone, its trail stopped at the question,
    // which no audit can tell from a trail cut back).
    let waiting = start_waiting(&proxy).await;
    tokio::time::sleep(std::time::Duration::from_millis(2_500)).await;
    let bundle = assert_trail_audits(&proxy, &thread, "ttl-audit").await;
    assert!(bundle["trail"].as_array().unwrap().len() > 5, "{bundle}");
    assert!(text(&proxy, &format!("/api/threads/{thread}/audit"))
        .await
        .contains(REWRITTEN));
    let ended = json_get(&proxy, &format!("/api/threads/{waiting}/audit/bundle")).await;
    let last = ended["trail"].as_array().unwrap().last().unwrap().clone();
    assert_eq!(last["kind"], "ERROR", "{last}");
    assert!(
        last.to_string().contains("its conversation expired"),
        "{last}"
    );
    let key = text(&proxy, "/.well-known/proofgate/audit-key")
        .await
        .trim()
        .to_string();
    let (ok, report, err) = audit(&temp_dir("ttl-waiting"), &ended, &park(), &key, None);
    assert!(ok, "{report}\n{err}");
    assert!(
        !report["notChecked"].to_string().contains("had not ended"),
        "{report}"
    );
}

/// Two answers to one waiting thread at once (a double submit, an SDK's retry): one drives it,
/// the other is told it is taken (409) before any call. Both drove it before: the LLM was
/// asked twice, and the loser failed with a 500 on the winner's records.
#[tokio::test]
async fn two_answers_at_once_drive_the_thread_once() {
    let (llm, proxy, id) = waiting_thread("two-answers").await;
    let answers = json!({"answers": ["Low season, and no credits.", "No credits."]});
    // What answering once costs, on a second thread.
    let alone = start_waiting(&proxy).await;
    let before = llm.received().len();
    let (status, body) = post(
        &proxy,
        &format!("/api/threads/{alone}/answers"),
        answers.clone(),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    let once = llm.received().len() - before;

    let before = llm.received().len();
    let path = format!("/api/threads/{id}/answers");
    let (a, b) = tokio::join!(
        post(&proxy, &path, answers.clone()),
        post(&proxy, &path, answers)
    );
    let mut statuses = [a.0, b.0];
    statuses.sort();
    assert_eq!(statuses, [200, 409], "{a:?}\n{b:?}");
    let refused = if a.0 == 409 { &a.1 } else { &b.1 };
    assert!(refused.contains("waiting for answers"), "{refused}");
    assert_eq!(
        llm.received().len() - before,
        once,
        "the LLM was asked twice"
    );
    let thread = json_get(&proxy, &format!("/api/threads/{id}")).await;
    assert_eq!(thread["outcome"]["status"], "VALID", "{thread}");
    assert_trail_audits(&proxy, &id, "two-answers-audit").await;
}

/// The same through the chat API: the user's answer to the follow-up questions, sent twice at
/// once (an SDK's retry), continues the waiting thread once; the other request is a 409.
#[tokio::test]
async fn two_chat_answers_at_once_continue_the_thread_once() {
    let llm = Server::python("scripted_llm.py", &demo_script());
    let proxy = Proxy::start(
        "two-chat-answers",
        &config(&format!("{}/v1", llm.url()), "", ""),
    );
    let question = "I am 70. How much will I pay in total for admission?";
    let asked = ask(&proxy, question).await;
    assert_eq!(asked["proofgate"]["verdict"], "NEEDS_INPUT", "{asked}");
    let questions = asked["choices"][0]["message"]["content"].clone();
    let before = llm.received().len();
    let answer = || async {
        let r = reqwest::Client::new()
            .post(format!("{}/v1/chat/completions", proxy.url))
            .json(&json!({"model": "m", "messages": [
                {"role": "user", "content": question},
                {"role": "assistant", "content": questions},
                {"role": "user", "content": "Low season, and no credits."}]}))
            .send()
            .await
            .unwrap();
        (r.status().as_u16(), r.text().await.unwrap())
    };
    let (a, b) = tokio::join!(answer(), answer());
    let mut statuses = [a.0, b.0];
    statuses.sort();
    assert_eq!(
        statuses,
        [200, 409],
        "{}\n{}",
        &a.1[..a.1.len().min(400)],
        &b.1[..b.1.len().min(400)]
    );
    let calls = llm.received().len() - before;
    // The winner's calls only: three translators per validation and one rewrite at most.
    assert!(calls <= 4, "{calls} LLM calls");
}

/// A waiting thread claimed for an answer that was never stored (the server died between the
/// claim and the save) is resumed still waiting, and keeps the key its conversation finds it
/// by: the user's next message continues it, where it started a new thread beside it.
#[tokio::test]
async fn a_claimed_thread_whose_answer_was_lost_still_waits_for_its_conversation() {
    let llm = Server::python("scripted_llm.py", &demo_script());
    let proxy = Proxy::start(
        "claimed-lost",
        &config(
            &format!("{}/v1", llm.url()),
            "",
            "[server]\nmaintenance_interval_ms = 100\nresume_after_ms = 200\n",
        ),
    );
    let question = "I am 70. How much will I pay in total for admission?";
    let asked = ask(&proxy, question).await;
    assert_eq!(asked["proofgate"]["verdict"], "NEEDS_INPUT", "{asked}");
    let id = asked["proofgate"]["threadId"].as_str().unwrap().to_string();
    let db = database(&proxy);
    // What the claim leaves when nothing follows it.
    sqlite(
        &db,
        &format!(
            "UPDATE threads SET status = 'processing', \
             updated_at = CAST(strftime('%s', 'now') AS INTEGER) * 1000 - 1000 WHERE id = '{id}'"
        ),
    );
    let mut row = String::new();
    for _ in 0..30 {
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        row = sqlite_query(
            &db,
            &format!("SELECT status, conversation_key IS NOT NULL FROM threads WHERE id = '{id}'"),
        );
        if row.starts_with("awaiting_input") {
            break;
        }
    }
    assert_eq!(
        row, "awaiting_input\t1",
        "resumed still waiting, its key kept"
    );
    let questions = asked["choices"][0]["message"]["content"].clone();
    let answered: Value = reqwest::Client::new()
        .post(format!("{}/v1/chat/completions", proxy.url))
        .json(&json!({"model": "m", "messages": [
            {"role": "user", "content": question},
            {"role": "assistant", "content": questions},
            {"role": "user", "content": "Low season, and no credits."}]}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(answered["proofgate"]["threadId"], id.as_str(), "{answered}");
}

/// `POST /api/threads` is driven as a chat request is: each step saved ahead of its call, so a
/// request stopped at its deadline leaves its thread ended and its trail (it saved once at the
/// end, leaving nothing of the calls made but an owner row with no thread).
#[tokio::test]
async fn a_thread_created_through_the_api_is_saved_ahead_of_its_calls() {
    let mut script = demo_script();
    script["rules"].as_array_mut().unwrap().insert(
        0,
        json!({"match": "slow-create-case", "delay_ms": 4000, "reply": "late"}),
    );
    let llm = Server::python("scripted_llm.py", &script);
    let proxy = Proxy::start(
        "create-durable",
        &config(
            &format!("{}/v1", llm.url()),
            "",
            "[limits]\nrequest_timeout_ms = 1500\n",
        ),
    );
    let (status, body) = post(
        &proxy,
        "/api/threads",
        json!({"question": "slow-create-case: how much do I pay?"}),
    )
    .await;
    assert_eq!(status, 504, "{body}");
    tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    let db = database(&proxy);
    let rows = sqlite_query(&db, "SELECT id, status FROM threads");
    let mut rows = rows.lines();
    let row = rows.next().unwrap_or_else(|| panic!("no thread saved"));
    assert!(rows.next().is_none(), "{row}");
    let (id, status) = row.split_once('\t').unwrap();
    assert_eq!(status, "error", "{row}");
    assert_eq!(
        sqlite_query(&db, "SELECT count(*) FROM thread_owners").trim(),
        "1"
    );
    let bundle = assert_trail_audits(&proxy, id, "create-durable-audit").await;
    let last = bundle["trail"].as_array().unwrap().last().unwrap().clone();
    assert_eq!(last["kind"], "ERROR", "{last}");
}

/// Under `failure_mode = "open"` a thread waiting when its conversation expires ends
/// UNVERIFIED with its best answer (marked as such), and that trail audits in full.
#[tokio::test]
async fn an_expired_waiting_thread_ends_unverified_under_fail_open() {
    let llm = Server::python("scripted_llm.py", &demo_script());
    let proxy = Proxy::start(
        "ttl-open",
        &config(
            &format!("{}/v1", llm.url()),
            "failure_mode = \"open\"",
            "[server]\nmaintenance_interval_ms = 100\n",
        )
        .replace("[storage]\n", "[storage]\nthread_ttl_secs = 1\n"),
    );
    let waiting = start_waiting(&proxy).await;
    tokio::time::sleep(std::time::Duration::from_millis(2_500)).await;
    let ended = json_get(&proxy, &format!("/api/threads/{waiting}/audit/bundle")).await;
    let last = ended["trail"].as_array().unwrap().last().unwrap().clone();
    assert_eq!(last["kind"], "UNVERIFIED", "{last}");
    assert!(
        last.to_string().contains("its conversation expired"),
        "{last}"
    );
    let thread = json_get(&proxy, &format!("/api/threads/{waiting}")).await;
    assert_eq!(thread["outcome"]["verified"], false, "{thread}");
    let key = text(&proxy, "/.well-known/proofgate/audit-key")
        .await
        .trim()
        .to_string();
    let (ok, report, err) = audit(&temp_dir("ttl-open-audit"), &ended, &park(), &key, None);
    assert!(ok, "{report}\n{err}");
    assert!(
        !report["notChecked"].to_string().contains("had not ended"),
        "{report}"
    );
}

/// `proofgate log verify` against `proxy` with its verifier key and a checkpoint saved in
/// `saved`, reading every trail (auth is off in these tests: any API key reads them all).
fn log_verify(proxy: &Proxy, key: &str, saved: &Path) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_proofgate"))
        .args(["log", "verify", "--server", &proxy.url, "--public-key", key])
        .args(["--api-key", "any", "--checkpoint"])
        .arg(saved)
        .output()
        .unwrap()
}

/// The log's size, from its signed checkpoint (origin, size, root hash, signature).
async fn log_size(proxy: &Proxy) -> u64 {
    let checkpoint = text(proxy, "/api/log/checkpoint").await;
    checkpoint
        .lines()
        .nth(1)
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no size in {checkpoint:?}"))
}

#[tokio::test]
async fn public_log_routes_answer_a_bad_query_in_json() {
    let llm = Server::python("scripted_llm.py", &demo_script());
    let proxy = Proxy::start("log-queries", &config(&format!("{}/v1", llm.url()), "", ""));
    for (path, names) in [
        ("/api/log/consistency", "from"),
        ("/api/log/consistency?from=x", "from"),
        ("/api/log/leaves?from=-1", "from"),
        ("/api/log/leaves?to=3", "from"),
        ("/api/threads/nope/audit/bundle?from=abc", "from"),
    ] {
        let r = reqwest::get(format!("{}{path}", proxy.url)).await.unwrap();
        assert_eq!(r.status(), 400, "{path}");
        let body: Value = r.json().await.unwrap();
        let message = body["error"]["message"].as_str().unwrap_or_default();
        assert!(
            message.contains(names) && message.contains("expected"),
            "{path}: {body}"
        );
    }
    // Leaf indexes are checked before the database sees them: 2^63 wrapped round to i64::MIN,
    // and this range read every leaf into one reply. A range running past i64 is cut to the
    // most one read returns.
    for (path, says) in [
        (
            "/api/log/leaves?from=9223372036854775808&to=9223372036854775807",
            "leaf indexes go up to",
        ),
        ("/api/log/leaves?from=3&to=1", "need from <= to"),
    ] {
        let r = reqwest::get(format!("{}{path}", proxy.url)).await.unwrap();
        assert_eq!(r.status(), 400, "{path}");
        let body: Value = r.json().await.unwrap();
        assert!(
            body["error"]["message"].as_str().unwrap().contains(says),
            "{path}: {body}"
        );
    }
    let r = reqwest::get(format!(
        "{}/api/log/leaves?from=0&to=18446744073709551615",
        proxy.url
    ))
    .await
    .unwrap();
    assert_eq!(r.status(), 200);
    // A range past the log is refused with its size, not answered with a wrong proof.
    let r = reqwest::get(format!("{}/api/log/consistency?from=5&to=2", proxy.url))
        .await
        .unwrap();
    assert_eq!(r.status(), 400);
    let body: Value = r.json().await.unwrap();
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("the log's size"),
        "{body}"
    );
}

#[tokio::test]
async fn fast_steps_go_with_the_requests_one_write_unless_written_ahead() {
    let llm = Server::python("scripted_llm.py", &demo_script());
    // Every call is faster than a minute: the whole request is one commit with one signed head.
    // With 0, every step that starts a call is written ahead of it (its own leaf).
    let mut leaves = Vec::new();
    for after_ms in [60_000, 0] {
        let proxy = Proxy::start(
            &format!("ahead-{after_ms}"),
            &config(&format!("{}/v1", llm.url()), "", "").replace(
                "[storage]\n",
                &format!("[storage]\nwrite_ahead_after_ms = {after_ms}\n"),
            ),
        );
        let before = log_size(&proxy).await;
        let r = ask(&proxy, Q1).await;
        assert_eq!(r["proofgate"]["verdict"], "VALID", "{r}");
        leaves.push(log_size(&proxy).await - before);
        // Either way the stored trail is whole and passes the audit.
        let thread = r["proofgate"]["threadId"].as_str().unwrap();
        assert_trail_audits(&proxy, thread, &format!("ahead-audit-{after_ms}")).await;
    }
    assert_eq!(leaves[0], 1, "one signed head for a request of fast calls");
    assert!(
        leaves[1] > 2,
        "each call written ahead: {} leaves",
        leaves[1]
    );
}

/// Fetches `thread`'s audit bundle and the server's audit key over HTTP and has
/// `proofgate audit` check it (in a fresh directory named after `name`); returns the bundle.
async fn assert_trail_audits(proxy: &Proxy, thread: &str, name: &str) -> Value {
    let key = text(proxy, "/.well-known/proofgate/audit-key")
        .await
        .trim()
        .to_string();
    let bundle = json_get(proxy, &format!("/api/threads/{thread}/audit/bundle")).await;
    let (ok, report, err) = audit(&temp_dir(name), &bundle, &park(), &key, None);
    assert!(ok, "{report}\n{err}");
    bundle
}

/// The demo's scripted LLM with its rewriter answering after `delay_ms`, and a proxy in front
/// of it whose maintenance loop runs every `every_ms` and resumes threads not saved for
/// `resume_ms`.
fn slow_rewriter(name: &str, delay_ms: u64, every_ms: u64, resume_ms: u64) -> (Server, Proxy) {
    let mut script = demo_script();
    for rule in script["rules"].as_array_mut().unwrap() {
        if rule["match"] == "DECISION" || rule["match"].to_string().contains("DECISION") {
            rule["delay_ms"] = json!(delay_ms);
        }
    }
    let llm = Server::python("scripted_llm.py", &script);
    let proxy = Proxy::start(
        name,
        &config(
            &format!("{}/v1", llm.url()),
            "",
            &format!(
                "[server]\nmaintenance_interval_ms = {every_ms}\nresume_after_ms = {resume_ms}\n"
            ),
        ),
    );
    (llm, proxy)
}

/// A call slower than `resume_after_ms` does not make the server resume the thread it is still
/// driving: the rewriter is asked once per step the trail records, and the request ends with
/// a trail that passes the audit. (Before, the resumer took the live thread for an orphan and
/// drove it a second time beside the request.)
#[tokio::test]
async fn a_call_slower_than_resume_after_ms_is_not_resumed_while_it_runs() {
    let (llm, proxy) = slow_rewriter("slow-call-live", 1_500, 100, 300);
    let reply = reqwest::Client::new()
        .post(format!("{}/v1/chat/completions", proxy.url))
        .json(&json!({"model": "m", "messages": [{"role": "user", "content": Q1}]}))
        .send()
        .await
        .unwrap();
    assert_eq!(reply.status(), 200);
    let thread = reply
        .headers()
        .get("x-proofgate-thread")
        .unwrap()
        .to_str()
        .unwrap()
        .to_string();
    // Any second driver would have been started by now.
    tokio::time::sleep(std::time::Duration::from_millis(600)).await;
    let trail = json_get(&proxy, &format!("/api/threads/{thread}/audit")).await;
    let calls = trail
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["kind"] == "CALL_LLM")
        .count();
    let asked = llm
        .received()
        .iter()
        .filter(|r| r.to_string().contains("DECISION"))
        .count();
    assert!(calls > 0, "the rewriter was never called");
    assert_eq!(
        asked, calls,
        "the rewriter was asked more often than recorded"
    );
    assert_trail_audits(&proxy, &thread, "slow-call-audit").await;
}

#[tokio::test]
async fn kill_9_mid_thread_loses_no_record_and_the_thread_ends() {
    // The rewriter answers slowly: the server is killed while it waits.
    let (_llm, proxy) = slow_rewriter("kill9", 4_000, 200, 500);
    let url = proxy.url.clone();
    let request = tokio::spawn(async move {
        reqwest::Client::new()
            .post(format!("{url}/v1/chat/completions"))
            .json(&json!({"model": "m", "messages": [{"role": "user", "content": Q1}]}))
            .send()
            .await
    });
    // Wait until the thread has recorded its first validation and asked the rewriter.
    let mut thread = String::new();
    let mut before = Vec::new();
    for _ in 0..100 {
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        let list = json_get(&proxy, "/api/threads").await;
        if let Some(id) = list["threads"][0]["id"].as_str() {
            thread = id.to_string();
            let trail = json_get(&proxy, &format!("/api/threads/{thread}/audit")).await;
            if trail
                .as_array()
                .unwrap()
                .iter()
                .any(|r| r["kind"] == "CALL_LLM")
            {
                before = trail.as_array().unwrap().clone();
                break;
            }
        }
    }
    assert!(!before.is_empty(), "the thread never reached the rewriter");
    let proxy = proxy.restart(); // SIGKILL, then start again on the same database
    let _ = request.await;
    let after = json_get(&proxy, &format!("/api/threads/{thread}/audit")).await;
    assert_eq!(
        &after.as_array().unwrap()[..before.len()],
        &before[..],
        "records written before the kill are kept"
    );
    let records: Vec<proofgate_core::AuditRecord> = serde_json::from_value(after).unwrap();
    let bundle = json_get(&proxy, &format!("/api/threads/{thread}/audit/bundle")).await;
    let documents = proofgate_core::audit::PolicyDocuments::from_values(
        bundle["policyDocuments"].as_array().unwrap_or(&Vec::new()),
    )
    .unwrap();
    assert!(proofgate_core::audit::replay_with(&records, &documents).ok);
    // The interrupted thread is resumed (or closed with a recorded ERROR), never lost.
    let mut status = String::new();
    for _ in 0..150 {
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        status = json_get(&proxy, &format!("/api/threads/{thread}")).await["status"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        if status == "done" || status == "error" {
            break;
        }
    }
    assert!(status == "done" || status == "error", "status {status}");
    assert_trail_audits(&proxy, &thread, "kill9-audit").await;
}

#[tokio::test]
async fn two_replicas_append_to_one_log_on_postgres() {
    let Some(pg) = proxy::postgres_database("two_replicas_append_to_o").await else {
        eprintln!("PROOFGATE_TEST_POSTGRES_URL unset: PostgreSQL replicas not tested here");
        return;
    };
    let llm = Server::python("scripted_llm.py", &demo_script());
    let shared = temp_dir("replica-key").join("audit.key");
    let cfg = config(&format!("{}/v1", llm.url()), "", "")
        .replace("sqlite://{dir}/proofgate.sqlite", &pg)
        .replace("{dir}/audit.key", &shared.display().to_string());
    let a = Proxy::start("log-replica-a", &cfg);
    let b = Proxy::start("log-replica-b", &cfg);
    let key = text(&a, "/.well-known/proofgate/audit-key")
        .await
        .trim()
        .to_string();
    assert_eq!(
        key,
        text(&b, "/.well-known/proofgate/audit-key").await.trim()
    );
    let saved = text(&a, "/api/log/checkpoint").await;
    // The database is shared with other tests: the log need not be empty, so the bundles
    // carry a consistency proof from the saved size.
    let saved_size: u64 = saved.lines().nth(1).unwrap().parse().unwrap();
    // Both replicas append at once.
    let (ra, rb) = tokio::join!(ask(&a, Q1), ask(&b, Q1));
    let dir = temp_dir("replica-audit");
    for (proxy, r) in [(&a, ra), (&b, rb)] {
        let thread = r["proofgate"]["threadId"].as_str().unwrap().to_string();
        let bundle = json_get(
            proxy,
            &format!("/api/threads/{thread}/audit/bundle?from={saved_size}"),
        )
        .await;
        let (ok, report, err) = audit(&dir, &bundle, &park(), &key, Some(&saved));
        assert!(ok, "{report}\n{err}");
    }
    // One sequence: both replicas publish the same tree, consistent with the saved checkpoint.
    let (ca, cb) = (
        text(&a, "/api/log/checkpoint").await,
        text(&b, "/api/log/checkpoint").await,
    );
    assert_eq!(
        ca.lines().take(3).collect::<Vec<_>>(),
        cb.lines().take(3).collect::<Vec<_>>()
    );
    let cp = dir.join("saved");
    std::fs::write(&cp, &saved).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_proofgate"))
        .args([
            "log",
            "verify",
            "--server",
            &b.url,
            "--public-key",
            &key,
            "--api-key",
            "any",
        ])
        .arg("--checkpoint")
        .arg(&cp)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
}

#[tokio::test]
async fn a_thread_that_cannot_be_loaded_does_not_stop_other_threads_timing_out() {
    let llm = Server::python("scripted_llm.py", &demo_script());
    let proxy = Proxy::start(
        "tick-skips",
        &config(
            &format!("{}/v1", llm.url()),
            "",
            "[loop]\nquestion_timeout_secs = 3\n[server]\nmaintenance_interval_ms = 200\n",
        ),
    );
    let start = || async { start_waiting(&proxy).await };
    // The older thread (the timeouts walk the oldest first) has a record no longer a record.
    let broken = start().await;
    let db = database(&proxy);
    sqlite(
        &db,
        &format!(
            "UPDATE audit_records SET record = '{{\"not\": \"a record\"}}' \
             WHERE thread_id = '{broken}' AND seq = 1;"
        ),
    );
    let waiting = start().await;
    let mut view = Value::Null;
    for _ in 0..60 {
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
        view = json_get(&proxy, &format!("/api/threads/{waiting}")).await;
        if view["status"] == "done" {
            break;
        }
    }
    assert_eq!(view["status"], "done", "{view}");
    assert_eq!(
        view["clarifications"][0]["response"]["status"], "TIMED_OUT",
        "{view}"
    );
    // The broken one is left as it was, unread (its record cannot be loaded).
    let r = reqwest::get(format!("{}/api/threads/{broken}", proxy.url))
        .await
        .unwrap();
    assert_eq!(r.status(), 500);
}

/// Audit format 7: every pair the translators wrote must be checked by a finding of its
/// validation. A trail that leaves out the INVALID finding of one of two pairs (only an
/// operator holding the signing key could sign it) passed every re-check before, with the other
/// pair's VALID; now the auditor's Z3 is asked whether the pair left out is one a finding
/// checks, and it is not. A translator that wrote a pair differently but equivalently is
/// covered, as the solver confirms.
#[test]
fn an_audit_fails_a_trail_that_left_a_pairs_finding_out() {
    use proofgate_core::findings::{
        ContradictionFinding, Finding, Rule, Statement, Translation, ValidFinding,
    };
    use proofgate_core::thread::{GivenAnswer, Input, Thread, ThreadConfig};
    use proofgate_core::translation::TranslationConfig;
    let model = proofgate_proxy::app::load_policy(&park(), None).unwrap();
    let config = ThreadConfig {
        policy: model.prompt_context(),
        translation: Some(TranslationConfig::new(model.definition(), 2, 0, 1.0)),
        ..ThreadConfig::default()
    };
    let translation = |claim: &str| Translation {
        premises: Some(vec![Statement::new(
            "(= customerAge 70)",
            "The visitor is 70 (turn 1)",
        )]),
        claims: Some(vec![Statement::new(claim, "the claim")]),
        confidence: serde_json::Number::from_f64(1.0),
        ..Default::default()
    };
    let senior = Finding::Valid(ValidFinding {
        translation: Some(translation("(= ageClass SENIOR)")),
        supporting_rules: Some(vec![Rule::new("SENIORDEFINI", "park")]),
        ..Default::default()
    });
    let adult = Finding::Invalid(ContradictionFinding {
        translation: Some(translation("(= ageClass ADULT)")),
        contradicting_rules: Some(vec![Rule::new("SENIORDEFINI", "park")]),
        ..Default::default()
    });
    // Two translators, each writing both pairs; the second may write the age the other way
    // round.
    let trail = |second: &str, findings: Vec<Finding>| -> Vec<u8> {
        let mut t = Thread::with_answer(
            config.clone(),
            "t-cover",
            "I am 70. Which age class am I in, and what do I pay?",
            GivenAnswer {
                text: "You are a senior, and you pay the adult fee.".into(),
                model: None,
                source: "upstream".into(),
            },
            1,
        )
        .unwrap();
        t.start();
        for (translator, age) in [(0, "(= customerAge 70)"), (1, second)] {
            let pair = |claim: &str| {
                json!({"premises": [{"logic": age, "naturalLanguage": "The visitor is 70 (turn 1)"}],
                       "claims": [{"logic": claim, "naturalLanguage": "the claim"}]})
            };
            let reply = json!({"pairs": [pair("(= ageClass SENIOR)"), pair("(= ageClass ADULT)")]});
            let call = match t.pending_effect() {
                proofgate_core::thread::Effect::Translate { calls } => calls
                    .into_iter()
                    .find(|c| c.translator == translator)
                    .map(|c| c.call),
                _ => None,
            };
            t.handle(Input::TranslatorReplied {
                translation_rules: None,
                translator,
                attempt: 0,
                call,
                text: reply.to_string(),
                model: None,
                now: 2,
            })
            .unwrap();
        }
        t.handle(Input::Validated {
            verdict_rules: None,
            findings,
            evidence: Some(json!({"validator": "local",
                                  "policyContentHash": model.definition().content_hash()})),
            now: 3,
        })
        .unwrap();
        serde_json::to_vec(t.audit_trail()).unwrap()
    };
    let audit = |input: &[u8]| {
        proofgate_proxy::audit_check::verify(input, &model, None, None, None, "z3", 20_000, None)
    };

    let genuine = audit(&trail("(= 70 customerAge)", vec![senior.clone(), adult]));
    assert!(genuine.ok, "{:?}", genuine.failures);
    let covered: Vec<_> = genuine
        .checks
        .iter()
        .filter(|c| c.kind == "PAIR_COVERED")
        .collect();
    // Translator 1's two pairs, each against the two checked pairs: one of each two holds.
    assert_eq!(covered.len(), 4, "{:?}", genuine.checks);
    assert!(covered.iter().all(|c| c.ok), "{:?}", genuine.checks);
    assert_eq!(
        covered.iter().filter(|c| c.answer == c.expected).count(),
        2,
        "{:?}",
        genuine.checks
    );

    let forged = audit(&trail("(= customerAge 70)", vec![senior.clone()]));
    assert!(
        forged.replay.ok,
        "the forged trail replays: {:?}",
        forged.replay
    );
    assert!(!forged.ok);
    let failed: Vec<_> = forged
        .checks
        .iter()
        .filter(|c| c.kind == "PAIR_COVERED" && !c.ok)
        .collect();
    // The pair both translators wrote the same way is checked once.
    assert_eq!(failed.len(), 1, "{:?}", forged.checks);
    assert!(
        forged
            .failures
            .iter()
            .any(|f| f.contains("no pair was left without a finding")),
        "{:?}",
        forged.failures
    );

    // The INVALID finding relabelled NO_TRANSLATIONS, its pair kept: the pair is covered only
    // if it is trivial, and it is not.
    let relabelled = {
        let mut extra = proofgate_core::findings::Extra::new();
        extra.insert(
            "translation".into(),
            serde_json::to_value(translation("(= ageClass ADULT)")).unwrap(),
        );
        Finding::NoTranslations(proofgate_core::findings::EmptyFinding { extra })
    };
    let forged = audit(&trail("(= customerAge 70)", vec![senior, relabelled]));
    assert!(forged.replay.ok, "{:?}", forged.replay);
    assert!(!forged.ok);
    assert!(
        forged
            .checks
            .iter()
            .any(|c| c.kind == "NO_TRANSLATIONS" && !c.ok && c.answer == "sat"),
        "{:?}",
        forged.checks
    );
}

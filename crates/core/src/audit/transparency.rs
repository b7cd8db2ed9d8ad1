//! Signed thread heads and the append-only log of all trails, checked without trusting the
//! server: C2SP signed notes (Ed25519) for thread heads and log checkpoints, and RFC 6962
//! inclusion and consistency proofs (the same tree hashing as Certificate Transparency).
//!
//! A thread head is the statement "thread T's trail ends with record S whose hash is H"; the
//! server signs it each time the thread changes and appends it to the log. An auditor who holds
//! the server's verifier key and a checkpoint saved earlier detects a rewritten trail (its last
//! hash no longer matches a signed head), and a rewritten or shortened log (it is no longer
//! consistent with the saved checkpoint), even when the operator re-signs.

use serde::{Deserialize, Serialize};
use signed_note::{Note, StandardVerifier, VerifierList};
use tlog_tiles::{check_record, check_tree, record_hash, Checkpoint, Hash};

/// The first line of a thread-head statement.
pub const HEAD_PREFIX: &str = "proofgate/thread-head/v1";
/// The first line of a deletion statement (retention removed a trail).
pub const DELETION_PREFIX: &str = "proofgate/thread-deleted/v1";

/// What one log leaf states.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LogStatement {
    /// Whether the trail was deleted (by retention) rather than extended.
    pub deleted: bool,
    /// The thread.
    pub thread_id: String,
    /// `seq` of its last record.
    pub seq: u64,
    /// `hash` of its last record.
    pub head_hash: String,
}

impl LogStatement {
    /// The statement's text: the signed note text, and the leaf's data in the log.
    pub fn text(&self) -> String {
        let prefix = if self.deleted {
            DELETION_PREFIX
        } else {
            HEAD_PREFIX
        };
        format!(
            "{prefix}\n{}\n{}\n{}\n",
            self.thread_id, self.seq, self.head_hash
        )
    }

    /// Reads a statement's text.
    pub fn parse(text: &str) -> Result<LogStatement, String> {
        let lines: Vec<&str> = text
            .strip_suffix('\n')
            .unwrap_or(text)
            .split('\n')
            .collect();
        let [prefix, thread_id, seq, head_hash] = lines.as_slice() else {
            return Err("a log statement has four lines".into());
        };
        let deleted = match *prefix {
            HEAD_PREFIX => false,
            DELETION_PREFIX => true,
            other => return Err(format!("unknown log statement `{other}`")),
        };
        Ok(LogStatement {
            deleted,
            thread_id: thread_id.to_string(),
            seq: seq
                .parse()
                .map_err(|_| format!("`{seq}` is not a record number"))?,
            head_hash: head_hash.to_string(),
        })
    }
}

/// Why `trail` (a thread's records, hash-chained: check that first with
/// [`verify_chain`](super::replay::verify_chain)) does not hold every head the log holds for
/// `thread_id`, or `None` when it does. `heads` are the thread's log leaves (index, statement)
/// in log order.
///
/// Each logged head must be the record at its `seq` with its hash, and the trail must end at
/// the last one. Checking only the last head would miss a trail rewritten from an early record
/// (its chain rebuilt) and then extended under a newly signed head: every head the log ever
/// held for the thread stays in the log, and the rewrite changes the hash at each of them.
/// A trail cut back to an earlier head fails the same way (it ends before the last head).
///
/// A trail with records needs a logged head: the server logs each head in the transaction
/// that stores its records, so a stored trail with none was written around the server (or
/// its leaves were moved to another thread's name), and extending it would sign it. A thread
/// whose deletion was logged has no trail any more: one stored or served under its name again
/// is not the one deleted.
pub fn logged_heads_problem(
    thread_id: &str,
    trail: &[serde_json::Value],
    heads: &[(u64, LogStatement)],
) -> Option<String> {
    if let Some((leaf, s)) = heads.iter().find(|(_, s)| s.thread_id != thread_id) {
        return Some(format!(
            "leaf {leaf} is about thread {}, not {thread_id}",
            s.thread_id
        ));
    }
    if let Some((leaf, s)) = heads.iter().find(|(_, s)| s.deleted) {
        return (!trail.is_empty()).then(|| {
            format!(
                "leaf {leaf} logs the deletion of this thread's trail (up to record {}), yet a \
                 trail of {} records is stored for it",
                s.seq,
                trail.len()
            )
        });
    }
    let heads: Vec<&(u64, LogStatement)> = heads.iter().filter(|(_, s)| !s.deleted).collect();
    if heads.is_empty() && !trail.is_empty() {
        return Some(format!(
            "the trail has {} records, but no head was ever logged for this thread: the server \
             logs each head with its records, so these were written around it",
            trail.len()
        ));
    }
    for (leaf, s) in &heads {
        let record = usize::try_from(s.seq).ok().and_then(|i| trail.get(i));
        let hash = record.and_then(|r| r["hash"].as_str());
        let seq = record.and_then(|r| r["seq"].as_u64());
        if seq != Some(s.seq) || hash != Some(s.head_hash.as_str()) {
            return Some(match hash {
                Some(hash) => format!(
                    "leaf {leaf} logs record {} hashed {}, but the trail's record {} is hashed \
                     {hash}: it was rewritten",
                    s.seq, s.head_hash, s.seq
                ),
                None => format!(
                    "leaf {leaf} logs record {} hashed {}, but the trail has {} records: it was \
                     cut back or rewritten",
                    s.seq,
                    s.head_hash,
                    trail.len()
                ),
            });
        }
    }
    let last = heads.last()?;
    let end = trail
        .len()
        .checked_sub(1)
        .and_then(|i| u64::try_from(i).ok());
    (end != Some(last.1.seq)).then(|| {
        format!(
            "the trail ends with record {}, but its last logged head (leaf {}) is record {}: \
             records were added without a signed head",
            end.map_or("none".into(), |e| e.to_string()),
            last.0,
            last.1.seq
        )
    })
}

/// Why a thread's logged deletion (a leaf with `deleted`) does not match its log: a deletion
/// must delete the trail up to its last head logged before (the same record and hash; a trail
/// cut back first would be deleted "up to" an earlier record, hiding how far it went), must
/// follow a head, and no head may follow it. `heads` are the thread's leaves in log order,
/// deletions included. `None` when the thread has no deletion, or its deletion matches.
pub fn deletion_problem(heads: &[(u64, LogStatement)]) -> Option<String> {
    let at = heads.iter().position(|(_, s)| s.deleted)?;
    let (leaf, deletion) = &heads[at];
    if let Some((later, _)) = heads.get(at + 1) {
        return Some(format!(
            "leaf {later} logs the thread again after leaf {leaf} logged its deletion"
        ));
    }
    let Some((head_leaf, head)) = heads[..at].iter().rev().find(|(_, s)| !s.deleted) else {
        return Some(format!(
            "leaf {leaf} logs the deletion of a trail no head was logged for"
        ));
    };
    (head.seq != deletion.seq || head.head_hash != deletion.head_hash).then(|| {
        format!(
            "leaf {leaf} logs the deletion of the trail up to record {} hashed {}, but its last \
             logged head (leaf {head_leaf}) is record {} hashed {}: the trail was cut back or \
             rewritten before it was deleted",
            deletion.seq, deletion.head_hash, head.seq, head.head_hash
        )
    })
}

/// The statements of the leaves of the log `checkpoint` describes, read from their notes (as
/// `GET /api/log/leaves` serves them, leaf 0 first): all of them, and they must hash to the
/// checkpoint's root. Then they are the leaves the server signed a checkpoint over, whoever
/// serves them; [`log_heads`] also checks the signatures of the notes it reads a thread's heads
/// from (a server could have signed a checkpoint over rows written into its database).
pub fn leaves_of_checkpoint(
    notes: &[String],
    checkpoint: &CheckpointInfo,
) -> Result<Vec<LogStatement>, String> {
    if u64::try_from(notes.len()).ok() != Some(checkpoint.size) {
        return Err(format!(
            "{} leaves were given for a log of {} leaves",
            notes.len(),
            checkpoint.size
        ));
    }
    let mut stored = StoredHashes(Vec::new());
    let mut out = Vec::with_capacity(notes.len());
    for (n, note) in (0u64..).zip(notes) {
        let parsed = Note::from_bytes(note.as_bytes())
            .map_err(|e| format!("leaf {n} is not a signed note: {e}"))?;
        let text = std::str::from_utf8(parsed.text())
            .map_err(|_| format!("leaf {n}'s text is not UTF-8"))?;
        let statement = LogStatement::parse(text).map_err(|e| format!("leaf {n}: {e}"))?;
        // The leaf's data is the statement's text, as the server hashed it.
        let new = tlog_tiles::stored_hashes(n, statement.text().as_bytes(), &stored)
            .map_err(|e| format!("leaf {n}: {e}"))?;
        stored.0.extend(new);
        out.push(statement);
    }
    let root = tlog_tiles::tree_hash(checkpoint.size, &stored).map_err(|e| e.to_string())?;
    if root.to_string() != checkpoint.root {
        return Err(format!(
            "the {} leaves given do not hash to the checkpoint's root: they are not the log it \
             signs",
            checkpoint.size
        ));
    }
    Ok(out)
}

/// The hashes of a tree built a leaf at a time, in tlog's stored-hash order (what
/// `tlog_tiles::stored_hashes` appends and `tlog_tiles::tree_hash` reads).
#[derive(Debug, Clone, Default)]
pub struct StoredHashes(pub Vec<Hash>);

impl tlog_tiles::HashReader for StoredHashes {
    fn read_hashes(&self, indexes: &[u64]) -> Result<Vec<Hash>, tlog_tiles::Error> {
        indexes
            .iter()
            .map(|&i| {
                usize::try_from(i)
                    .ok()
                    .and_then(|i| self.0.get(i).copied())
                    .ok_or(tlog_tiles::Error::IndexesNotInTree)
            })
            .collect()
    }
}

/// What the log says of a trail an auditor was handed as its thread's ([`log_heads`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase", tag = "kind")]
pub enum LogHeads {
    /// The trail holds every head of its thread in the log, at its place, and ends at the
    /// last (a deletion logged since, of the trail up to that head, included).
    Latest,
    /// The trail holds every head of its thread in the log up to its end, and ends at one, but
    /// the thread went on: `leaf`, the first of its heads past the trail, logs its record
    /// `seq`. The trail is genuine, and not the whole thread.
    WentOn {
        /// The first leaf past the trail.
        leaf: u64,
        /// The record that leaf logs.
        seq: u64,
    },
    /// The log contradicts the trail (it was rewritten, cut back and continued, forked).
    Problem {
        /// What, naming the leaf.
        detail: String,
    },
}

/// What the log `checkpoint` describes (its leaves' `notes`, see [`leaves_of_checkpoint`])
/// says of `trail` as thread `thread_id`'s: a bundle's signed head and inclusion proof hold as
/// well for an earlier head of the thread, or for one forked from it, which a server (or
/// whoever holds its database) could hand out; only the log's other leaves show it. Heads of
/// a thread only grow: one of a lower record after a higher one is a fork. `Err` when the
/// notes are not that log.
///
/// Every leaf naming the thread must be signed by `verifier_key`: one that is not (a row
/// written into the server's database, which a server before its own leaf check signed
/// checkpoints over, or a genuine leaf whose signature was broken to hide it: the tree hashes
/// a leaf's statement, not its signature) is a problem of the log, said as such, never a leaf
/// left out (leaving it out hid a later head or a fork).
pub fn log_heads(
    thread_id: &str,
    trail: &[serde_json::Value],
    notes: &[String],
    checkpoint: &CheckpointInfo,
    verifier_key: &str,
) -> Result<LogHeads, String> {
    let heads: Vec<(u64, LogStatement)> = (0u64..)
        .zip(leaves_of_checkpoint(notes, checkpoint)?)
        .filter(|(_, s)| s.thread_id == thread_id)
        .collect();
    let problem = |detail: String| Ok(LogHeads::Problem { detail });
    for (i, s) in &heads {
        let signed = usize::try_from(*i)
            .ok()
            .and_then(|i| notes.get(i))
            .and_then(|note| verify_note(note, verifier_key).ok())
            .is_some_and(|text| text == s.text());
        if !signed {
            return problem(format!(
                "leaf {i} names thread {thread_id} but is not signed by the verifier key: the \
                 log was altered in the server's database (a row written or a signature broken)"
            ));
        }
    }
    if heads.is_empty() {
        return problem(format!(
            "no head was ever logged for thread {thread_id}, yet its trail has {} records",
            trail.len()
        ));
    }
    if let Some(p) = deletion_problem(&heads) {
        return problem(p);
    }
    let logged: Vec<&(u64, LogStatement)> = heads.iter().filter(|(_, s)| !s.deleted).collect();
    for pair in logged.windows(2) {
        let ((before, b), (after, a)) = (pair[0], pair[1]);
        if a.seq < b.seq {
            return problem(format!(
                "leaf {after} logs record {} after leaf {before} logged record {}: the thread \
                 was forked from an earlier head",
                a.seq, b.seq
            ));
        }
    }
    let end = u64::try_from(trail.len())
        .unwrap_or(u64::MAX)
        .checked_sub(1);
    for (leaf, s) in &logged {
        if end.is_some_and(|e| s.seq > e) {
            continue;
        }
        let record = usize::try_from(s.seq).ok().and_then(|i| trail.get(i));
        let hash = record.and_then(|r| r["hash"].as_str());
        if record.and_then(|r| r["seq"].as_u64()) != Some(s.seq)
            || hash != Some(s.head_hash.as_str())
        {
            return problem(format!(
                "leaf {leaf} logs record {} hashed {}, but the trail's record {} is hashed {}: \
                 it was rewritten",
                s.seq,
                s.head_hash,
                s.seq,
                hash.unwrap_or("(none)")
            ));
        }
    }
    if let Some((leaf, later)) = logged.iter().find(|(_, s)| end.is_none_or(|e| s.seq > e)) {
        // Genuine only up to a head: records past the last head in the trail were never signed.
        if !logged.iter().any(|(_, s)| Some(s.seq) == end) {
            return problem(format!(
                "the trail ends with record {}, which no head of the log names: records were \
                 added without a signed head",
                end.map_or("none".into(), |e| e.to_string())
            ));
        }
        return Ok(LogHeads::WentOn {
            leaf: *leaf,
            seq: later.seq,
        });
    }
    match (logged.last(), end) {
        (Some((leaf, last)), Some(end)) if last.seq != end => problem(format!(
            "the trail ends with record {end}, but its last logged head (leaf {leaf}) is record \
             {}: records were added without a signed head",
            last.seq
        )),
        (None, _) => problem("the thread's only leaf logs its deletion".into()),
        _ => Ok(LogHeads::Latest),
    }
}

/// The log to look for a thread's later heads in: the one `current` (a checkpoint the server
/// signs now) describes, which must verify with `verifier_key` and extend the bundle's
/// checkpoint `bundle` (`proof`, from the bundle's size to its); `Err` when it does not. A
/// bundle handed out after its thread moved on carries the checkpoint of its own time, whose
/// leaves end before the later head: only a newer checkpoint's leaves show it.
pub fn newest_log(
    bundle: &CheckpointInfo,
    current: &str,
    proof: &[String],
    verifier_key: &str,
) -> Result<CheckpointInfo, String> {
    let current = verify_checkpoint(current, verifier_key)
        .map_err(|e| format!("the server's current checkpoint: {e}"))?;
    verify_consistency(bundle, &current, proof).map_err(|e| {
        format!("the server's current checkpoint does not extend the bundle's: {e}")
    })?;
    Ok(current)
}

/// Verifies a C2SP signed note against one verifier key (`name+id+base64`); returns its text.
pub fn verify_note(note: &str, verifier_key: &str) -> Result<String, String> {
    let verifier = StandardVerifier::new(verifier_key.trim())
        .map_err(|e| format!("the verifier key is not usable: {e}"))?;
    let note = Note::from_bytes(note.as_bytes()).map_err(|e| format!("not a signed note: {e}"))?;
    note.verify(&VerifierList::new(vec![Box::new(verifier)]))
        .map_err(|e| format!("signature: {e}"))?;
    String::from_utf8(note.text().to_vec()).map_err(|_| "the note text is not UTF-8".into())
}

/// A verified log checkpoint.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CheckpointInfo {
    /// The log's origin line.
    pub origin: String,
    /// How many leaves the tree has.
    pub size: u64,
    /// The root hash, base64.
    pub root: String,
}

/// Verifies a signed checkpoint (C2SP tlog-checkpoint in a signed note).
pub fn verify_checkpoint(note: &str, verifier_key: &str) -> Result<CheckpointInfo, String> {
    let text = verify_note(note, verifier_key)?;
    let c = Checkpoint::from_bytes(text.as_bytes()).map_err(|e| format!("checkpoint: {e}"))?;
    Ok(CheckpointInfo {
        origin: c.origin().to_string(),
        size: c.size(),
        root: c.hash().to_string(),
    })
}

fn hashes(list: &[String]) -> Result<Vec<Hash>, String> {
    list.iter()
        .map(|h| Hash::parse_hash(h).map_err(|e| format!("proof hash `{h}`: {e}")))
        .collect()
}

fn root(c: &CheckpointInfo) -> Result<Hash, String> {
    Hash::parse_hash(&c.root).map_err(|e| format!("checkpoint root: {e}"))
}

/// The leaf hash of a statement (RFC 6962: SHA-256 of 0x00 and the data), base64.
pub fn leaf_hash(statement: &LogStatement) -> String {
    record_hash(statement.text().as_bytes()).to_string()
}

/// Checks that `statement` is leaf `index` of the tree `checkpoint` describes.
pub fn verify_inclusion(
    statement: &LogStatement,
    index: u64,
    proof: &[String],
    checkpoint: &CheckpointInfo,
) -> Result<(), String> {
    let leaf = record_hash(statement.text().as_bytes());
    check_record(
        &hashes(proof)?,
        checkpoint.size,
        root(checkpoint)?,
        index,
        leaf,
    )
    .map_err(|e| {
        format!(
            "leaf {index} is not in the log of size {} ({e})",
            checkpoint.size
        )
    })
}

/// Checks that the tree `old` describes is a prefix of the tree `new` describes.
pub fn verify_consistency(
    old: &CheckpointInfo,
    new: &CheckpointInfo,
    proof: &[String],
) -> Result<(), String> {
    if old.origin != new.origin {
        return Err(format!(
            "the checkpoints are of different logs (`{}` and `{}`)",
            old.origin, new.origin
        ));
    }
    if old.size > new.size {
        return Err(format!(
            "the log shrank from {} to {} leaves",
            old.size, new.size
        ));
    }
    if old.size == new.size {
        return if old.root == new.root {
            Ok(())
        } else {
            Err(format!(
                "two different logs of the same size {}: the log was rewritten",
                new.size
            ))
        };
    }
    if old.size == 0 {
        return Ok(());
    }
    check_tree(&hashes(proof)?, new.size, root(new)?, old.size, root(old)?).map_err(|e| {
        format!(
            "the log of {} leaves does not extend the saved one of {} leaves: it was rewritten ({e})",
            new.size, old.size
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A trail of `n` records whose first body says `first`, as JSON values.
    fn trail(first: &str, n: usize) -> Vec<serde_json::Value> {
        use crate::audit::{append, RecordKind};
        let mut t = Vec::new();
        append(
            &mut t,
            RecordKind::ThreadStarted,
            1,
            serde_json::json!({"q": first}),
        );
        for i in 1..n {
            append(
                &mut t,
                RecordKind::Tick,
                1 + i as u64,
                serde_json::json!({"i": i}),
            );
        }
        t.iter().map(|r| serde_json::to_value(r).unwrap()).collect()
    }

    fn head(trail: &[serde_json::Value], seq: usize) -> LogStatement {
        LogStatement {
            deleted: false,
            thread_id: "t".into(),
            seq: seq as u64,
            head_hash: trail[seq]["hash"].as_str().unwrap().into(),
        }
    }

    /// A test server's key (made by a proofgate server for this test) and its verifier key.
    const TEST_SIGNER: &str =
        "PRIVATE+KEY+proofgate+aff4cd69+Aen9lu+SHqGqonHc3+cZQRtqvJZxQixoCJRJ06l/KhSY";
    const TEST_VERIFIER: &str = "proofgate+aff4cd69+Afat1oJE3qCOAgOYqL9Uq+ZIiquLrdxfdF+buE9dzTR3";

    /// `text` as a note signed with [`TEST_SIGNER`].
    fn signed(text: &str) -> String {
        let signer = signed_note::StandardSigner::new(TEST_SIGNER).unwrap();
        let mut note = Note::new(text.as_bytes(), &[]).unwrap();
        note.add_sigs(&[&signer]).unwrap();
        String::from_utf8(note.to_bytes()).unwrap()
    }

    /// The notes of `statements` as the log serves them, signed, and the checkpoint of the
    /// log they make.
    fn log_of(statements: &[LogStatement]) -> (Vec<String>, CheckpointInfo) {
        let notes: Vec<String> = statements.iter().map(|s| signed(&s.text())).collect();
        let mut stored = StoredHashes(Vec::new());
        for (n, s) in (0u64..).zip(statements) {
            let new = tlog_tiles::stored_hashes(n, s.text().as_bytes(), &stored).unwrap();
            stored.0.extend(new);
        }
        let size = statements.len() as u64;
        let root = tlog_tiles::tree_hash(size, &stored).unwrap().to_string();
        let origin = "test".into();
        (notes, CheckpointInfo { origin, size, root })
    }

    /// A bundle's signed head and inclusion proof hold for an earlier head of its thread, or
    /// one forked from it: only the log's other leaves show the thread went further.
    #[test]
    fn the_logs_leaves_tell_an_earlier_head_from_a_fork_and_a_rewrite() {
        let t = trail("q", 6);
        let mut other = head(&t, 2);
        other.thread_id = "u".into();
        let log = [head(&t, 1), other, head(&t, 3), head(&t, 5)];
        let (notes, checkpoint) = log_of(&log);
        let heads = |trail: &[serde_json::Value], thread: &str| {
            log_heads(thread, trail, &notes, &checkpoint, TEST_VERIFIER).unwrap()
        };
        assert_eq!(heads(&t, "t"), LogHeads::Latest);
        // An earlier head, genuine: the thread went on.
        assert_eq!(heads(&t[..4], "t"), LogHeads::WentOn { leaf: 3, seq: 5 });
        assert_eq!(heads(&t[..2], "t"), LogHeads::WentOn { leaf: 2, seq: 3 });
        // Records past a head that no head names were never signed, went on or not.
        let mut unsigned = t[..2].to_vec();
        unsigned.extend(trail("made up", 3)[2..].iter().cloned());
        let LogHeads::Problem { detail: p } = heads(&unsigned, "t") else {
            panic!("unsigned records passed")
        };
        assert!(p.contains("without a signed head"), "{p}");
        // Forked after record 3 (a different record 5): rewritten.
        let mut fork = t[..4].to_vec();
        fork.extend(trail("fork", 6)[4..].iter().cloned());
        let LogHeads::Problem { detail: p } = heads(&fork, "t") else {
            panic!("a fork passed")
        };
        assert!(
            p.contains("leaf 3 logs record 5") && p.contains("rewritten"),
            "{p}"
        );
        // A fork shorter than what it hides: its head comes after a higher one.
        let mut forked_log = log.to_vec();
        let short = {
            let mut f = t[..4].to_vec();
            f.extend(trail("fork", 5)[4..].iter().cloned());
            f
        };
        forked_log.push(head(&short, 4));
        let (notes2, checkpoint2) = log_of(&forked_log);
        let LogHeads::Problem { detail: p } =
            log_heads("t", &short, &notes2, &checkpoint2, TEST_VERIFIER).unwrap()
        else {
            panic!("a shorter fork passed")
        };
        assert!(p.contains("forked"), "{p}");
        // Deleted by retention since, up to the trail's last head: the auditor's copy passes.
        let mut deleted = log.to_vec();
        deleted.push(LogStatement {
            deleted: true,
            ..head(&t, 5)
        });
        let (notes3, checkpoint3) = log_of(&deleted);
        assert_eq!(
            log_heads("t", &t, &notes3, &checkpoint3, TEST_VERIFIER),
            Ok(LogHeads::Latest)
        );
        // Leaves that are not the checkpoint's log are refused, never read as it.
        let mut renamed = notes.clone();
        renamed[3] = renamed[3].replacen("\nt\n", "\nhidden\n", 1);
        let err = log_heads("t", &t[..4], &renamed, &checkpoint, TEST_VERIFIER).unwrap_err();
        assert!(
            err.contains("do not hash to the checkpoint's root"),
            "{err}"
        );
        let err = log_heads("t", &t[..4], &notes[..3], &checkpoint, TEST_VERIFIER).unwrap_err();
        assert!(err.contains("3 leaves were given for a log of 4"), "{err}");
        let mut garbled = notes.clone();
        garbled[0] = "not a note".into();
        assert!(log_heads("t", &t, &garbled, &checkpoint, TEST_VERIFIER).is_err());
        // A thread the log never names has no heads: its trail was written around it.
        let LogHeads::Problem { detail: p } = heads(&t, "v") else {
            panic!("a thread with no head passed")
        };
        assert!(p.contains("no head was ever logged"), "{p}");
    }

    /// A leaf naming the thread that the server did not sign (a row written into its
    /// database, or a genuine leaf whose signature was broken to hide it) is a problem of the
    /// log, said as such; signed, a copy of an earlier head is a fork.
    #[test]
    fn a_leaf_the_server_did_not_sign_is_a_problem_of_the_log() {
        let t = trail("q", 6);
        let log = [head(&t, 1), head(&t, 3), head(&t, 5), head(&t, 1)];
        let (mut notes, checkpoint) = log_of(&log);
        let forked = log_heads("t", &t, &notes, &checkpoint, TEST_VERIFIER).unwrap();
        assert!(
            matches!(&forked, LogHeads::Problem { detail } if detail.contains("forked")),
            "{forked:?}"
        );
        for unsigned in [
            format!("{}\n— test AAAAAAAAAAAA\n", log[3].text()),
            // Signed by another key of the same name.
            {
                let other = signed_note::StandardSigner::new(
                    "PRIVATE+KEY+proofgate+cae2c55d+AZ7i1f/N4nrU6kfkjv8b2rhO9pMmdGLQwlovic6YMLb7",
                )
                .unwrap();
                let mut note = Note::new(log[3].text().as_bytes(), &[]).unwrap();
                note.add_sigs(&[&other]).unwrap();
                String::from_utf8(note.to_bytes()).unwrap()
            },
        ] {
            notes[3] = unsigned;
            let said = log_heads("t", &t, &notes, &checkpoint, TEST_VERIFIER).unwrap();
            assert!(
                matches!(&said, LogHeads::Problem { detail } if detail.contains("leaf 3")
                    && detail.contains("not signed by the verifier key")),
                "{said:?}"
            );
        }
        // A genuine later head whose signature was broken does not make an earlier trail the
        // latest: the log is reported, not read without it.
        let (mut notes, checkpoint) = log_of(&log[..3]);
        notes[2] = format!("{}\n— test AAAAAAAAAAAA\n", log[2].text());
        let said = log_heads("t", &t[..4], &notes, &checkpoint, TEST_VERIFIER).unwrap();
        assert!(
            matches!(&said, LogHeads::Problem { detail } if detail.contains("leaf 2")),
            "{said:?}"
        );
    }

    /// A deletion must match the thread's last logged head, follow one, and end its leaves.
    #[test]
    fn a_deletion_deletes_the_trail_up_to_its_last_logged_head() {
        let t = trail("q", 3);
        let deletion = |seq: usize| LogStatement {
            deleted: true,
            ..head(&t, seq)
        };
        let genuine = [(0, head(&t, 0)), (4, head(&t, 2)), (9, deletion(2))];
        assert_eq!(deletion_problem(&genuine), None);
        assert_eq!(deletion_problem(&genuine[..2]), None);
        let cut_first = [(0, head(&t, 0)), (4, head(&t, 2)), (9, deletion(0))];
        assert!(deletion_problem(&cut_first).is_some_and(|p| p.contains("cut back")));
        let mut other_hash = deletion(2);
        other_hash.head_hash = "ab".repeat(32);
        assert!(deletion_problem(&[(0, head(&t, 2)), (1, other_hash)]).is_some());
        assert!(
            deletion_problem(&[(1, deletion(2))]).is_some_and(|p| p.contains("no head was logged"))
        );
        assert!(
            deletion_problem(&[(0, head(&t, 2)), (1, deletion(2)), (2, head(&t, 2))])
                .is_some_and(|p| p.contains("after leaf 1"))
        );
    }

    #[test]
    fn a_trail_must_hold_every_head_logged_for_it() {
        let genuine = trail("genuine", 4);
        let heads = vec![(3, head(&genuine, 1)), (9, head(&genuine, 3))];
        assert_eq!(logged_heads_problem("t", &genuine, &heads), None);
        // No head logged: records written around the server (or its leaves renamed away).
        let problem = logged_heads_problem("t", &genuine, &[]).unwrap();
        assert!(problem.contains("no head was ever logged"), "{problem}");
        assert_eq!(logged_heads_problem("t", &[], &[]), None);

        // Rewritten from its first record, chain rebuilt, and extended under a newly signed
        // head: the chain holds and the last head fits; the earlier head does not.
        let forged = trail("forged", 5);
        let records: Vec<crate::audit::AuditRecord> = forged
            .iter()
            .map(|r| serde_json::from_value(r.clone()).unwrap())
            .collect();
        assert!(crate::audit::verify_chain(&records).ok);
        let resigned = vec![
            (3, head(&genuine, 1)),
            (9, head(&genuine, 3)),
            (12, head(&forged, 4)),
        ];
        let problem = logged_heads_problem("t", &forged, &resigned).unwrap();
        assert!(
            problem.contains("leaf 3 logs record 1") && problem.contains("rewritten"),
            "{problem}"
        );

        // Cut back to an earlier head (the later records deleted): the last head is missing.
        let problem = logged_heads_problem("t", &genuine[..2], &heads).unwrap();
        assert!(
            problem.contains("leaf 9") && problem.contains("cut back"),
            "{problem}"
        );

        // Records past the last head: added without a signed head.
        let longer = trail("genuine", 5);
        let problem = logged_heads_problem("t", &longer, &heads).unwrap();
        assert!(problem.contains("without a signed head"), "{problem}");

        // Another thread's head.
        let mut other = head(&genuine, 3);
        other.thread_id = "u".into();
        assert!(logged_heads_problem("t", &genuine, &[(1, other)])
            .unwrap()
            .contains("thread u"));
        // A logged deletion: no trail may be stored (or served) under the thread's name again,
        // whatever heads follow it.
        let mut deleted = head(&genuine, 3);
        deleted.deleted = true;
        let with_deletion = vec![(3, head(&genuine, 3)), (5, deleted.clone())];
        assert_eq!(logged_heads_problem("t", &[], &with_deletion), None);
        let problem = logged_heads_problem("t", &genuine, &with_deletion).unwrap();
        assert!(problem.contains("leaf 5 logs the deletion"), "{problem}");
        let reborn = vec![(3, head(&genuine, 3)), (5, deleted), (7, head(&genuine, 3))];
        assert!(logged_heads_problem("t", &genuine, &reborn).is_some());
    }

    #[test]
    fn statements_round_trip_and_reject_other_text() {
        let s = LogStatement {
            deleted: false,
            thread_id: "t-1".into(),
            seq: 7,
            head_hash: "ab".repeat(32),
        };
        assert_eq!(LogStatement::parse(&s.text()).unwrap(), s);
        assert!(LogStatement::parse("hello\nt\n1\nx\n").is_err());
        assert!(LogStatement::parse(&s.text().replace("\n7\n", "\nseven\n")).is_err());
    }

    #[test]
    fn empty_and_equal_logs_are_consistent_and_forks_are_not() {
        let a = CheckpointInfo {
            origin: "o".into(),
            size: 3,
            root: tlog_tiles::EMPTY_HASH.to_string(),
        };
        assert!(verify_consistency(&a, &a, &[]).is_ok());
        let mut b = a.clone();
        b.root = record_hash(b"x").to_string();
        assert!(verify_consistency(&a, &b, &[])
            .unwrap_err()
            .contains("rewritten"));
        let mut c = a.clone();
        c.size = 2;
        assert!(verify_consistency(&a, &c, &[])
            .unwrap_err()
            .contains("shrank"));
    }
}

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

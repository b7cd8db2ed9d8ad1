//! What a full audit needs that an audit did not do. One list, decided here and used by
//! `proofgate audit`, the browser verifier and the npm package (`auditNotChecked`): each used
//! to decide it apart, and they disagreed (the page passed a trail the CLI listed as not fully
//! checked, and the npm package listed nothing). Each surface words the items its own way
//! (a flag, a field to fill); the ids and when they apply are the same everywhere.

use super::{AuditRecord, RecordKind, FORMAT_VERSION};
use serde::{Deserialize, Serialize};

/// What an auditor brought to an audit, and what they were given to check.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct AuditInputs {
    /// The thread the auditor audits was named (and compared with the trail's).
    #[serde(default)]
    pub thread_named: bool,
    /// The auditor's own copy of the policy was given (the solver checks are rebuilt from it).
    #[serde(default)]
    pub policy_given: bool,
    /// The input is an audit bundle (signed head, inclusion proof, checkpoint), not a trail.
    #[serde(default)]
    pub bundle: bool,
    /// The server's verifier key was given.
    #[serde(default)]
    pub key_given: bool,
    /// A log checkpoint the auditor saved earlier was given.
    #[serde(default)]
    pub checkpoint_given: bool,
    /// The size of that checkpoint, as its signature check read it (`verifyTrust`'s
    /// `savedCheckpoint.size`). It holds the trail only when the trail's head is one of its
    /// leaves ([`AuditInputs::head_leaf`] below it): a log rebuilt after it keeps extending it.
    #[serde(default)]
    pub checkpoint_size: Option<u64>,
    /// The leaf of the log that holds the trail's head (the bundle's inclusion proof). The
    /// surfaces read it from the bundle themselves.
    #[serde(default)]
    pub head_leaf: Option<u64>,
    /// Every leaf of the log up to the checkpoint the server signs now (extending the
    /// bundle's) was read, and every head of the thread among them is in the trail
    /// ([`log_heads`](super::transparency::log_heads) said it is the latest).
    #[serde(default)]
    pub log_scanned: bool,
}

/// One check a full audit makes that this one did not.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct NotChecked {
    /// Stable id: `older-format`, `policy`, `thread`, `validator-premises`, `bundle`, `key`,
    /// `checkpoint`, `later-heads` or `unfinished`.
    pub id: &'static str,
    /// What was not checked, and why, in a sentence.
    pub what: String,
}

/// Whether the trail's answers were validated by a validator that translated them itself
/// (Amazon Bedrock): a validation is recorded, and no translation check. Nothing then holds
/// the premises it took to what the user said, nor shows its findings cover the whole answer.
pub fn validated_without_translations(records: &[AuditRecord]) -> bool {
    records.iter().any(|r| r.kind.as_str() == "VALIDATED")
        && !records.iter().any(|r| r.kind.as_str() == "CHECK")
}

/// The audit format the trail says it was written in (its first record's `formatVersion`, as
/// replay reads it), read here rather than taken from a caller who might leave it out.
fn format_version(records: &[AuditRecord]) -> Option<u32> {
    let first = records
        .first()
        .filter(|r| r.kind == RecordKind::ThreadStarted)?;
    u32::try_from(first.body.get("formatVersion")?.as_u64()?).ok()
}

/// The checks a full audit of `records` makes that an audit with `inputs` did not, in the
/// order the auditors show them. Empty means nothing is missing: the audit is full once every
/// check that ran passed (including the solver checks, which the caller runs).
pub fn not_checked(records: &[AuditRecord], inputs: &AuditInputs) -> Vec<NotChecked> {
    let format_version = format_version(records);
    let mut out = Vec::new();
    let mut add = |id: &'static str, what: String| out.push(NotChecked { id, what });
    if let Some(v) = format_version.filter(|v| *v < FORMAT_VERSION) {
        add(
            "older-format",
            format!(
                "the trail is audit format {v}, replayed under that format's weaker rules (the \
                 README's audit format list says what it does not check; before format 7, \
                 premises were held only to the numbers of the turns they cite, and no check \
                 confirms that a finding covers every translated pair)"
            ),
        );
    }
    if !inputs.policy_given {
        add(
            "policy",
            "the logic: no policy of the auditor's was given to rebuild the solver checks from"
                .into(),
        );
    }
    if !inputs.thread_named {
        add(
            "thread",
            "which thread this is: a bundle shows only that its trail is a logged head of some \
             thread, so a server could hand out another thread's"
                .into(),
        );
    }
    if validated_without_translations(records) {
        add(
            "validator-premises",
            "that the validator's translations say what the question and answer say, and \
             that its findings cover the whole answer: it translated them itself (Amazon \
             Bedrock), so no translations are recorded to hold them to (from audit format 10 \
             the premises of its VALIDs are held to the conversation's words, and the replay \
             checks that)"
                .into(),
        );
    }
    if !inputs.bundle {
        add(
            "bundle",
            "the signature and log inclusion: a plain trail carries neither (audit the bundle \
             from GET /api/threads/{id}/audit/bundle)"
                .into(),
        );
    } else if !inputs.key_given {
        add(
            "key",
            "the signature and log inclusion: no verifier key of the server's was given".into(),
        );
    } else if !inputs.checkpoint_given {
        add(
            "checkpoint",
            "that the log still extends a checkpoint saved earlier: without one, a server \
             holding its key could have rebuilt its whole log around a rewritten trail"
                .into(),
        );
    } else if let Some(why) = checkpoint_misses_head(inputs) {
        add("checkpoint", why);
    }
    // Apart from the checkpoint: reading the log guards against a database holder with or
    // without a checkpoint saved.
    if inputs.bundle && inputs.key_given && !inputs.log_scanned {
        add(
            "later-heads",
            "that this is the thread's latest head: a bundle's signed head and inclusion proof \
             hold as well for an earlier head of the thread, or for one forked from it, which \
             a server (or whoever holds its database) could hand out; only the log's other \
             leaves show the thread went further, and they did not show it was the latest"
                .into(),
        );
    }
    // A trail cut back to an earlier head ends before its thread's final record. The log read
    // shows no later head only as of the checkpoint it was read at, and a copy of the log as
    // it was (old responses replayed, no signature needed) shows none: only a thread that
    // ended can be audited whole. A final record is the thread's last, so no earlier head of
    // a finished thread ends in one.
    if records.last().is_some_and(|r| !r.kind.is_final()) {
        add(
            "unfinished",
            "that the thread ends here: it had not ended at this trail's last record, and \
             whether a later head exists is known only from the log as it was read (a copy \
             of the log from before the thread went on, replayed to you, shows none)"
                .into(),
        );
    }
    out
}

/// Why the saved checkpoint given does not hold the trail's head, if it does not: only the
/// leaves a checkpoint counts are fixed by it. A head logged after it (a thread started, or
/// gone on, since) could be rewritten, with the log rebuilt from that leaf on and signed anew,
/// and the rebuilt log would still extend the checkpoint.
fn checkpoint_misses_head(inputs: &AuditInputs) -> Option<String> {
    match (inputs.checkpoint_size, inputs.head_leaf) {
        (Some(size), Some(leaf)) if leaf < size => None,
        (Some(size), Some(leaf)) => Some(format!(
            "that the log held this trail when you saved your checkpoint: the checkpoint given \
             counts {size} leaves and the trail's head is leaf {leaf}, logged after it, so a \
             server holding its key could have rewritten the trail and rebuilt the log from \
             there (save the checkpoint this audit checked, and audit the trail again with it \
             later: that shows it was not changed since)"
        )),
        _ => Some(
            "that the log held this trail when you saved your checkpoint: the checkpoint's size \
             or the head's leaf was not read (give the checkpoint as verified, and a bundle)"
                .into(),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn record(kind: &str) -> AuditRecord {
        serde_json::from_value(
            json!({"seq": 0, "prev": "", "at": 0, "kind": kind, "body": {}, "hash": ""}),
        )
        .unwrap()
    }

    /// A trail of `kinds` after a THREAD_STARTED of format `v`, ended by a final record.
    fn trail(v: u32, kinds: &[&str]) -> Vec<AuditRecord> {
        let mut records = open_trail(v, kinds);
        records.push(record("VALID_RESPONSE"));
        records
    }

    /// The same, with no final record: the thread had not ended.
    fn open_trail(v: u32, kinds: &[&str]) -> Vec<AuditRecord> {
        let mut first = record("THREAD_STARTED");
        first.body = json!({"formatVersion": v});
        std::iter::once(first)
            .chain(kinds.iter().map(|k| record(k)))
            .collect()
    }

    fn ids(records: &[AuditRecord], inputs: &AuditInputs) -> Vec<&'static str> {
        not_checked(records, inputs).iter().map(|n| n.id).collect()
    }

    #[test]
    fn a_full_audit_of_a_translated_trail_misses_nothing() {
        let full = AuditInputs {
            thread_named: true,
            policy_given: true,
            bundle: true,
            key_given: true,
            checkpoint_given: true,
            checkpoint_size: Some(8),
            head_leaf: Some(7),
            log_scanned: true,
        };
        let current = trail(FORMAT_VERSION, &["CHECK", "VALIDATED"]);
        assert!(ids(&current, &full).is_empty());
        // A review's case: a checkpoint saved before the head was logged fixes nothing of it,
        // nor does one whose size or head was not read.
        for (size, leaf) in [
            (Some(8), Some(8)),
            (Some(0), Some(0)),
            (Some(1), Some(9)),
            (None, Some(0)),
            (Some(8), None),
        ] {
            let inputs = AuditInputs {
                checkpoint_size: size,
                head_leaf: leaf,
                ..full.clone()
            };
            let gaps = not_checked(&current, &inputs);
            assert_eq!(
                gaps.iter().map(|g| g.id).collect::<Vec<_>>(),
                ["checkpoint"],
                "{size:?} {leaf:?}"
            );
            assert!(
                gaps[0].what.contains("when you saved your checkpoint"),
                "{}",
                gaps[0].what
            );
        }
        // Each input left out is named, and only it.
        let without = |change: fn(&mut AuditInputs)| {
            let mut inputs = full.clone();
            change(&mut inputs);
            ids(&current, &inputs)
        };
        assert_eq!(without(|i| i.thread_named = false), ["thread"]);
        assert_eq!(without(|i| i.policy_given = false), ["policy"]);
        assert_eq!(without(|i| i.checkpoint_given = false), ["checkpoint"]);
        assert_eq!(
            without(|i| {
                i.checkpoint_given = false;
                i.log_scanned = false
            }),
            ["checkpoint", "later-heads"]
        );
        assert_eq!(without(|i| i.log_scanned = false), ["later-heads"]);
        assert_eq!(without(|i| i.key_given = false), ["key"]);
        assert_eq!(without(|i| i.bundle = false), ["bundle"]);
        // What the trail is leaves its own gaps, however full the audit: its format read from
        // the trail itself.
        let older = trail(FORMAT_VERSION - 1, &["CHECK", "VALIDATED"]);
        assert_eq!(ids(&older, &full), ["older-format"]);
        let bedrock = trail(FORMAT_VERSION, &["VALIDATED"]);
        assert_eq!(ids(&bedrock, &full), ["validator-premises"]);
        // Nothing validated: nothing to hold premises to.
        assert!(ids(&trail(FORMAT_VERSION, &[]), &full).is_empty());
        // A thread that had not ended (or a trail cut back to an earlier head): however full
        // the audit, a copy of the log from before it went on would show no later head.
        let open = open_trail(FORMAT_VERSION, &["CHECK", "VALIDATED", "ASK_USER"]);
        let gaps = not_checked(&open, &full);
        assert_eq!(
            gaps.iter().map(|g| g.id).collect::<Vec<_>>(),
            ["unfinished"]
        );
        assert!(gaps[0].what.contains("had not ended"), "{}", gaps[0].what);
    }

    #[test]
    fn everything_missing_comes_in_the_auditors_order() {
        assert_eq!(
            ids(&trail(1, &["VALIDATED"]), &AuditInputs::default()),
            [
                "older-format",
                "policy",
                "thread",
                "validator-premises",
                "bundle"
            ]
        );
        assert!(serde_json::from_value::<AuditInputs>(json!({"thread": true})).is_err());
    }
}

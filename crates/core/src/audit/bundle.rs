//! An audit bundle: a trail with what proves it is the server's, unaltered and logged — the
//! signed head, its inclusion proof under a signed checkpoint, and optionally a consistency
//! proof from a checkpoint the auditor saved earlier. [`verify_trust`] checks those against the
//! server's verifier key; the trail's own chain and decisions are [`super::replay`]'s job and
//! its logic [`super::recheck`]'s.

use super::transparency::{
    verify_checkpoint, verify_consistency, verify_inclusion, verify_note, LogStatement,
};
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Where the trail's head sits in the log.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Inclusion {
    /// The leaf's index.
    pub leaf_index: u64,
    /// The RFC 6962 audit path, base64 hashes.
    pub hashes: Vec<String>,
}

/// A consistency proof between two tree sizes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Consistency {
    /// The older size.
    pub from_size: u64,
    /// The proof, base64 hashes.
    pub hashes: Vec<String>,
}

/// A trail as the server hands it to an auditor.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AuditBundle {
    /// The records, as stored.
    pub trail: Vec<Value>,
    /// The signed note stating the trail's head.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signed_head: Option<String>,
    /// The head's place in the log.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub inclusion: Option<Inclusion>,
    /// The signed checkpoint the inclusion proof is for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub checkpoint: Option<String>,
    /// From a saved checkpoint's size to this checkpoint, when asked for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub consistency: Option<Consistency>,
    /// The policy document the trail's first record names (see
    /// [`super::policy_document`]): the server stores it once per policy version. It needs
    /// no signature of its own: the record names it by the hash of its contents.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub policy_documents: Vec<Value>,
}

/// Reads what an auditor was given: an audit bundle (`{"trail": [...], "signedHead": ...}`) or
/// a plain trail (a JSON array of records). Returns the records and, for a bundle, the bundle.
/// A key written twice in any object is an error.
pub fn read_trail_or_bundle(json: &[u8]) -> Result<(Vec<Value>, Option<AuditBundle>), String> {
    // Strictly: a key written twice anywhere (a record's `answer`, the bundle's `signedHead`)
    // would otherwise be read as its last copy, while a reader keeping the first would show
    // another text under the same signature.
    let text = std::str::from_utf8(json).map_err(|e| format!("not JSON: not UTF-8: {e}"))?;
    let value: Value = super::strict_json::value_from_str(text).map_err(|e| {
        if e.is_data() {
            // Valid JSON with a key written twice: say so, not "not JSON".
            format!("refused: {e}")
        } else {
            format!("not JSON: {e}")
        }
    })?;
    match value {
        Value::Array(records) => Ok((records, None)),
        Value::Object(_) => {
            let bundle: AuditBundle = serde_json::from_value(value).map_err(|e| {
                format!("not an audit bundle ({{\"trail\": [...], \"signedHead\": ...}}): {e}")
            })?;
            Ok((bundle.trail.clone(), Some(bundle)))
        }
        _ => Err("expected an audit bundle (object) or a trail (array of records)".into()),
    }
}

/// The trail's JSON text exactly as given: the whole text for a plain trail, the records'
/// array's text for an object holding one (an audit bundle's `trail`; `records`, `auditTrail`
/// or `audit`, as the web verifier accepts). A verifier replays these bytes rather than a value
/// read and written again: JavaScript reads every number as a double, so a trail read with
/// `JSON.parse` and stringified for the replay would have an integer beyond 2^53 rounded, and
/// a file whose number was changed to a neighbour of the signed one would replay as intact.
pub fn trail_text_of(json: &str) -> Result<&str, String> {
    const KEYS: [&str; 4] = ["trail", "records", "auditTrail", "audit"];
    let expected = "expected a JSON array of audit records, or an object whose `trail` is one";
    match json.trim_start().as_bytes().first() {
        Some(b'[') => Ok(json),
        Some(b'{') => {
            let fields: std::collections::BTreeMap<String, &serde_json::value::RawValue> =
                serde_json::from_str(json).map_err(|e| format!("not JSON: {e}"))?;
            KEYS.iter()
                .filter_map(|k| fields.get(*k))
                .map(|raw| raw.get())
                .find(|text| text.starts_with('['))
                .ok_or_else(|| expected.to_string())
        }
        _ => Err(expected.into()),
    }
}

/// One trust check's result.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TrustCheck {
    /// Whether it holds.
    pub ok: bool,
    /// What was checked, or what failed (naming the record where there is one).
    pub detail: String,
}

impl TrustCheck {
    fn pass(detail: impl Into<String>) -> Self {
        TrustCheck {
            ok: true,
            detail: detail.into(),
        }
    }
    fn fail(detail: impl Into<String>) -> Self {
        TrustCheck {
            ok: false,
            detail: detail.into(),
        }
    }
}

/// The results of [`verify_trust`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TrustReport {
    /// The signed head matches the trail's last record.
    pub signature: TrustCheck,
    /// The head is in the log under the signed checkpoint.
    pub inclusion: TrustCheck,
    /// The log extends the auditor's saved checkpoint (absent without one).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub consistency: Option<TrustCheck>,
    /// The bundle's checkpoint, once verified: save it to check later bundles against.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub checkpoint: Option<super::transparency::CheckpointInfo>,
    /// The auditor's saved checkpoint, once verified: its size is what
    /// [`super::completeness::AuditInputs::checkpoint_size`] takes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub saved_checkpoint: Option<super::transparency::CheckpointInfo>,
    /// The leaf of the log holding the trail's head, by the bundle's inclusion proof once it
    /// verified ([`super::completeness::AuditInputs::head_leaf`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub head_leaf: Option<u64>,
    /// All of the above hold.
    pub ok: bool,
}

fn head_of(trail: &[Value]) -> Result<LogStatement, String> {
    let last = trail.last().ok_or("the trail has no records")?;
    let thread_id = trail[0]
        .pointer("/body/threadId")
        .and_then(Value::as_str)
        .ok_or("record 0 names no thread")?;
    Ok(LogStatement {
        deleted: false,
        thread_id: thread_id.to_string(),
        seq: last
            .get("seq")
            .and_then(Value::as_u64)
            .ok_or("the last record has no seq")?,
        head_hash: last
            .get("hash")
            .and_then(Value::as_str)
            .ok_or("the last record has no hash")?
            .to_string(),
    })
}

/// Checks a bundle's signed head, inclusion and (with `saved_checkpoint`, a signed checkpoint
/// the auditor kept) consistency against the server's `verifier_key`.
pub fn verify_trust(
    bundle: &AuditBundle,
    verifier_key: &str,
    saved_checkpoint: Option<&str>,
) -> TrustReport {
    let head = head_of(&bundle.trail);
    let last = bundle.trail.len().saturating_sub(1);
    let signature = match (&head, &bundle.signed_head) {
        (Err(e), _) => TrustCheck::fail(e.clone()),
        (_, None) => TrustCheck::fail("the trail has no signed head"),
        (Ok(head), Some(note)) => {
            match verify_note(note, verifier_key).and_then(|text| LogStatement::parse(&text)) {
                Err(e) => TrustCheck::fail(format!("signed head: {e}")),
                // The server signs a deletion statement (the thread's id, its last record's
                // position and hash) in the same form: it says the thread is gone, not that
                // the trail ends here.
                Ok(signed) if signed.deleted => TrustCheck::fail(format!(
                    "the signed head is the statement that thread {} was deleted, not a head",
                    signed.thread_id
                )),
                Ok(signed) if signed.thread_id != head.thread_id => TrustCheck::fail(format!(
                    "the signed head is for thread {}, not {}",
                    signed.thread_id, head.thread_id
                )),
                Ok(signed) if signed.seq != head.seq || signed.head_hash != head.head_hash => {
                    TrustCheck::fail(format!(
                        "record {last}: the trail ends with record {} hashed {}, but the server \
                     signed record {} hashed {}: the trail was altered",
                        head.seq, head.head_hash, signed.seq, signed.head_hash
                    ))
                }
                Ok(_) => TrustCheck::pass(format!("record {last} is the head the server signed")),
            }
        }
    };
    let checkpoint = bundle
        .checkpoint
        .as_deref()
        .map(|c| verify_checkpoint(c, verifier_key));
    let inclusion = match (&head, &bundle.inclusion, &checkpoint) {
        (Err(e), _, _) => TrustCheck::fail(e.clone()),
        (_, None, _) | (_, _, None) => TrustCheck::fail("the trail has no inclusion proof"),
        (_, _, Some(Err(e))) => TrustCheck::fail(format!("checkpoint: {e}")),
        (Ok(head), Some(inc), Some(Ok(cp))) => {
            match verify_inclusion(head, inc.leaf_index, &inc.hashes, cp) {
                Ok(()) => TrustCheck::pass(format!(
                    "the head is leaf {} of the log of {} leaves",
                    inc.leaf_index, cp.size
                )),
                Err(e) => TrustCheck::fail(format!("record {last}: {e}")),
            }
        }
    };
    let head_leaf = bundle
        .inclusion
        .as_ref()
        .filter(|_| inclusion.ok)
        .map(|i| i.leaf_index);
    let mut saved_info = None;
    let consistency = saved_checkpoint.map(|saved| {
        let saved = match verify_checkpoint(saved, verifier_key) {
            Ok(s) => s,
            Err(e) => return TrustCheck::fail(format!("saved checkpoint: {e}")),
        };
        saved_info = Some(saved.clone());
        let Some(Ok(current)) = &checkpoint else {
            return TrustCheck::fail("the bundle has no valid checkpoint to compare");
        };
        let proof = match &bundle.consistency {
            Some(c) if c.from_size == saved.size => c.hashes.clone(),
            // A shrunk or same-size log needs no proof to be judged.
            _ if saved.size >= current.size || saved.size == 0 => Vec::new(),
            _ => {
                return TrustCheck::fail(format!(
                    "no consistency proof from the saved size {} (fetch the bundle with ?from={})",
                    saved.size, saved.size
                ))
            }
        };
        match verify_consistency(&saved, current, &proof) {
            // Extending it says nothing of leaves logged after it.
            Ok(()) if head_leaf.is_some_and(|leaf| leaf >= saved.size) => {
                TrustCheck::pass(format!(
                    "the log of {} leaves extends the saved one of {}, but the trail's head is \
                     leaf {}, logged after it: the saved checkpoint does not hold this trail",
                    current.size,
                    saved.size,
                    head_leaf.unwrap_or_default()
                ))
            }
            Ok(()) => TrustCheck::pass(format!(
                "the log of {} leaves extends the saved one of {}",
                current.size, saved.size
            )),
            Err(e) => TrustCheck::fail(e),
        }
    });
    let ok = signature.ok && inclusion.ok && consistency.as_ref().is_none_or(|c| c.ok);
    TrustReport {
        signature,
        inclusion,
        consistency,
        checkpoint: checkpoint.and_then(Result::ok),
        saved_checkpoint: saved_info,
        head_leaf,
        ok,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_trail_text_is_the_bytes_given() {
        let trail = r#"[{"seq":0,"at":9007199254740993,"note":"\u00e9 1.0"}]"#;
        assert_eq!(trail_text_of(trail).unwrap(), trail);
        let bundle = format!(r#"{{"signedHead":"x","trail": {trail} ,"policyDocuments":[]}}"#);
        assert_eq!(trail_text_of(&bundle).unwrap(), trail);
        let other = format!(r#"{{"records":{trail}}}"#);
        assert_eq!(trail_text_of(&other).unwrap(), trail);
        assert!(trail_text_of(r#"{"trail": 3"#).is_err());
        assert!(trail_text_of(r#"{"trail": 3}"#).is_err());
        assert!(trail_text_of(r#"{"signedHead": "x"}"#).is_err());
        assert!(trail_text_of("7").is_err());
    }

    #[test]
    fn a_key_written_twice_anywhere_in_the_file_is_refused() {
        let (records, bundle) =
            read_trail_or_bundle(br#"{"trail":[{"a":1}],"signedHead":"x"}"#).unwrap();
        assert_eq!(records, vec![serde_json::json!({"a": 1})]);
        assert_eq!(bundle.unwrap().signed_head.as_deref(), Some("x"));
        for text in [
            r#"[{"a":1,"a":2}]"#,
            r#"[{"body":{"outcome":{"answer":"forged","answer":"signed"}}}]"#,
            r#"{"trail":[],"trail":[{"a":1}]}"#,
            r#"{"trail":[{"a":1}],"signedHead":"x","signedHead":"y"}"#,
        ] {
            let e = read_trail_or_bundle(text.as_bytes()).unwrap_err();
            assert!(e.contains("appears twice"), "{text}: {e}");
            assert!(e.starts_with("refused: "), "{text}: {e}");
        }
        let e = read_trail_or_bundle(b"[{").unwrap_err();
        assert!(e.starts_with("not JSON: "), "{e}");
    }
}

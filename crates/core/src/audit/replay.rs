//! Checking a trail: [`verify_chain`] checks hashes and links only; [`replay`] also rebuilds
//! the thread from the first record, feeds every recorded input through the same machine and
//! compares every record it produces with the recorded one.

use super::bodies::ThreadStarted;
use super::canonical::canonical_json;
use super::policy_document::{
    started_with_document, with_policy_document, DocumentProblem, PolicyDocuments,
};
use super::record::{AuditRecord, RecordKind, GENESIS_PREV};
use super::recorded::{read_records, RecordText};
use super::{FORMAT_VERSION, OLDEST_FORMAT_VERSION};
use crate::thread::{Input, OutcomeStatus, Thread};
use serde::de::{DeserializeSeed, SeqAccess, Visitor};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::borrow::Cow;
use std::fmt;

/// What was wrong with a record.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum ReplayProblem {
    /// The trail has no records.
    Empty,
    /// Not valid JSON, or not a record (missing or extra fields, unknown kind, bad body).
    Malformed,
    /// The stored hash does not match the record's contents: the record was altered.
    HashMismatch,
    /// `seq` is not the record's position.
    SeqMismatch,
    /// `prev` is not the previous record's hash: records were removed, inserted or reordered.
    BrokenLink,
    /// The first record's format version is not one this version can replay.
    UnsupportedVersion,
    /// The machine rejected the recorded input (wrong state, or an unusable start record).
    RejectedInput,
    /// The machine produced a different record than the one recorded.
    Differs,
    /// The trail ends before a record the machine produced for the last input.
    Missing,
    /// THREAD_STARTED names a policy document that was not given (it comes with the audit
    /// bundle), so the thread cannot be rebuilt.
    PolicyDocumentMissing,
}

/// The first record that failed, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ReplayFailure {
    /// Position of the record in the trail (equal to its `seq` in an intact trail).
    pub index: usize,
    /// The record's kind, when it could be read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<RecordKind>,
    /// What was wrong.
    pub problem: ReplayProblem,
    /// The details, for a person.
    pub detail: String,
}

impl fmt::Display for ReplayFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.kind {
            Some(k) => write!(f, "record {} ({k}): {}", self.index, self.detail),
            None => write!(f, "record {}: {}", self.index, self.detail),
        }
    }
}

/// The result of [`verify_chain`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ChainReport {
    /// Whether every hash and link checked out.
    pub ok: bool,
    /// How many records the trail has.
    pub records: usize,
    /// How many leading records are intact.
    pub verified_records: usize,
    /// The hash of the last intact record: anchor it elsewhere to detect truncation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub head_hash: Option<String>,
    /// The first broken record.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure: Option<ReplayFailure>,
}

/// The result of [`replay`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ReplayReport {
    /// Whether every record was intact and reproduced exactly.
    pub ok: bool,
    /// The format version of the first record, when readable.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub format_version: Option<u32>,
    /// The thread id, when the first record is readable.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thread_id: Option<String>,
    /// How many records the trail has.
    pub records: usize,
    /// How many leading records were reproduced exactly.
    pub verified_records: usize,
    /// The hash of the last reproduced record.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub head_hash: Option<String>,
    /// The replayed thread's final status, if it finished within the verified records.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<OutcomeStatus>,
    /// The replayed thread's question, as its verified records hold it: what an auditor shows
    /// beside the result, rather than a copy the server sent apart from the trail.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub question: Option<String>,
    /// The answer the replayed thread released, if it finished within the verified records
    /// (the text the verdict in `status` is about).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub answer: Option<String>,
    /// The first record that was altered or differs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure: Option<ReplayFailure>,
}

/// A trail as read from JSON: each element a record, or why it is not one.
type Entries = Vec<Result<AuditRecord, String>>;

fn fail(
    index: usize,
    kind: Option<RecordKind>,
    problem: ReplayProblem,
    detail: String,
) -> ReplayFailure {
    ReplayFailure {
        index,
        kind,
        problem,
        detail,
    }
}

/// Reads a JSON array of records, keeping every element that parses; a syntax error stops at
/// the element it occurred in, so that it is blamed on the right record.
fn parse_entries(json: &[u8]) -> Entries {
    // An intact trail is read straight into records. A trail that does not read that way
    // (bad syntax, an element that is not a record, a duplicated field) is read again element
    // by element, which blames each problem on its record. Both read the same records from
    // a trail that reads the first way: each element is the same JSON object, deserialized
    // into the same struct, from text rather than from a parsed value.
    match serde_json::from_slice::<Vec<AuditRecord>>(json) {
        Ok(records) => records.into_iter().map(Ok).collect(),
        Err(_) => parse_entries_one_by_one(json),
    }
}

fn parse_entries_one_by_one(json: &[u8]) -> Entries {
    struct Collect<'a>(&'a mut Vec<Value>);
    impl<'de> Visitor<'de> for Collect<'_> {
        type Value = ();
        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("a JSON array of audit records")
        }
        fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
            while let Some(v) = seq.next_element_seed(super::strict_json::Strict)? {
                self.0.push(v);
            }
            Ok(())
        }
    }
    impl<'de> DeserializeSeed<'de> for Collect<'_> {
        type Value = ();
        fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
            d.deserialize_seq(self)
        }
    }

    let mut values = Vec::new();
    let mut de = serde_json::Deserializer::from_slice(json);
    let result = Collect(&mut values)
        .deserialize(&mut de)
        .and_then(|()| de.end());
    let mut entries: Entries = values
        .into_iter()
        .map(|v| AuditRecord::deserialize(v).map_err(|e| format!("not an audit record: {e}")))
        .collect();
    if let Err(e) = result {
        entries.push(Err(format!("the trail's JSON is malformed here: {e}")));
    }
    entries
}

/// Checks a record's own hash, its position and its link to the previous record.
fn check_integrity(index: usize, rec: &AuditRecord, prev_hash: &str) -> Result<(), ReplayFailure> {
    let kind = Some(rec.kind);
    let expected = rec.expected_hash();
    if rec.hash != expected {
        return Err(fail(
            index,
            kind,
            ReplayProblem::HashMismatch,
            format!(
                "the record was altered: its contents hash to {expected}, but it says {}",
                rec.hash
            ),
        ));
    }
    if rec.seq != index as u64 {
        return Err(fail(
            index,
            kind,
            ReplayProblem::SeqMismatch,
            format!("seq is {}, but the record is at position {index}", rec.seq),
        ));
    }
    if rec.prev != prev_hash {
        return Err(fail(
            index,
            kind,
            ReplayProblem::BrokenLink,
            format!(
                "prev is {}, but the previous record's hash is {prev_hash}: records were \
                 removed, inserted or reordered",
                rec.prev
            ),
        ));
    }
    Ok(())
}

fn entry(entries: &Entries, index: usize) -> Result<&AuditRecord, ReplayFailure> {
    entries[index]
        .as_ref()
        .map_err(|e| fail(index, None, ReplayProblem::Malformed, e.clone()))
}

fn chain(entries: &Entries) -> ChainReport {
    let mut report = ChainReport {
        ok: false,
        records: entries.len(),
        verified_records: 0,
        head_hash: None,
        failure: None,
    };
    if entries.is_empty() {
        report.failure = Some(fail(
            0,
            None,
            ReplayProblem::Empty,
            "the trail has no records".into(),
        ));
        return report;
    }
    let mut prev = GENESIS_PREV.to_string();
    for i in 0..entries.len() {
        let checked =
            entry(entries, i).and_then(|rec| check_integrity(i, rec, &prev).map(|()| rec));
        match checked {
            Ok(rec) => {
                prev = rec.hash.clone();
                report.verified_records = i + 1;
                report.head_hash = Some(prev.clone());
            }
            Err(f) => {
                report.failure = Some(f);
                return report;
            }
        }
    }
    report.ok = true;
    report
}

/// Checks hashes, positions and links only (no replay).
pub fn verify_chain(trail: &[AuditRecord]) -> ChainReport {
    chain(&trail.iter().cloned().map(Ok).collect())
}

/// [`verify_chain`] over a JSON array of records (bytes, so that a trail that is not even
/// UTF-8 any more is blamed on the right record).
pub fn verify_chain_json(json: impl AsRef<[u8]>) -> ChainReport {
    chain(&parse_entries(json.as_ref()))
}

/// Replays a trail: rebuilds the thread from the first record, feeds every recorded input,
/// and checks every record (hash, link, and equality with what the machine produces). A trail
/// whose first record names a policy document needs [`replay_with`].
pub fn replay(trail: &[AuditRecord]) -> ReplayReport {
    replay_with(trail, &PolicyDocuments::new())
}

/// [`replay`] with the policy documents the trail may name (an audit bundle's
/// `policyDocuments`); each is used only under the hash of its own contents.
pub fn replay_with(trail: &[AuditRecord], documents: &PolicyDocuments) -> ReplayReport {
    replay_entries(
        &trail.iter().cloned().map(Ok).collect::<Entries>(),
        documents,
    )
}

/// [`replay`] over a JSON array of records.
pub fn replay_json(json: impl AsRef<[u8]>) -> ReplayReport {
    replay_json_with(json, &PolicyDocuments::new())
}

/// [`replay_with`] over a JSON array of records.
pub fn replay_json_with(json: impl AsRef<[u8]>, documents: &PolicyDocuments) -> ReplayReport {
    let json = json.as_ref();
    // A trail of well-formed records is replayed with its bodies as text; anything else is
    // read the thorough way, which blames each problem on its record. So is a trail whose
    // replay finds something malformed: a body can be JSON to the scanner that kept it as
    // text and still not read as a value (a lone surrogate, a number out of range), and the
    // thorough reading reports that where and as it always has.
    if let Some(records) = read_records(json) {
        let report = replay_entries(&records, documents);
        if report
            .failure
            .as_ref()
            .is_none_or(|f| f.problem != ReplayProblem::Malformed)
        {
            return report;
        }
    }
    replay_entries(&parse_entries(json), documents)
}

/// The thread a trail (a JSON array of records) records, rebuilt by replaying it: every
/// record checked as [`replay_json_with`] checks it, and the thread as the machine left it
/// after the last one. What a server resumes a thread from, so that its stored copy of the
/// thread's state, which no signature covers, cannot steer the loop (see
/// [`crate::thread::Thread::resumed`]).
pub fn rebuild_json_with(
    json: impl AsRef<[u8]>,
    documents: &PolicyDocuments,
) -> Result<Thread, ReplayFailure> {
    let json = json.as_ref();
    let mut report = empty_report(0);
    if let Some(records) = read_records(json) {
        report.records = records.count();
        match replay_into(&records, documents, &mut report) {
            Err(f) if f.problem == ReplayProblem::Malformed => {}
            done => return done,
        }
    }
    let entries = parse_entries(json);
    report.records = entries.count();
    replay_into(&entries, documents, &mut report)
}

fn empty_report(records: usize) -> ReplayReport {
    ReplayReport {
        ok: false,
        format_version: None,
        thread_id: None,
        records,
        verified_records: 0,
        head_hash: None,
        status: None,
        question: None,
        answer: None,
        failure: None,
    }
}

fn replay_entries(entries: &impl Recorded, documents: &PolicyDocuments) -> ReplayReport {
    let mut report = empty_report(entries.count());
    match replay_into(entries, documents, &mut report) {
        Err(f) => report.failure = Some(f),
        Ok(_) => report.ok = true,
    }
    report
}

fn start_thread(
    rec: &AuditRecord,
    documents: &PolicyDocuments,
    report: &mut ReplayReport,
) -> Result<Thread, ReplayFailure> {
    let kind = Some(rec.kind);
    if rec.kind != RecordKind::ThreadStarted {
        return Err(fail(
            0,
            kind,
            ReplayProblem::Malformed,
            format!("the first record must be THREAD_STARTED, not {}", rec.kind),
        ));
    }
    // Read the version before the rest, so that a future format is reported as such rather
    // than as a malformed body.
    let version = rec.body.get("formatVersion").and_then(Value::as_u64);
    let Some(version) = version.and_then(|v| u32::try_from(v).ok()) else {
        return Err(fail(
            0,
            kind,
            ReplayProblem::Malformed,
            "THREAD_STARTED has no numeric formatVersion".into(),
        ));
    };
    report.format_version = Some(version);
    if !(OLDEST_FORMAT_VERSION..=FORMAT_VERSION).contains(&version) {
        return Err(fail(
            0,
            kind,
            ReplayProblem::UnsupportedVersion,
            format!(
                "format version {version} cannot be replayed by this version (it replays \
                 {OLDEST_FORMAT_VERSION} to {FORMAT_VERSION})"
            ),
        ));
    }
    // Trails of one policy version share its document: read it once (see
    // `started_with_document`), or the long way, which also reports what is wrong.
    let started = match started_with_document(&rec.body, documents) {
        Some(started) => started,
        None => start_record_the_long_way(rec, documents)?,
    };
    report.thread_id = Some(started.thread_id.clone());
    // The vocabulary of the document the configuration came from, built once per document.
    let vocabulary = rec
        .body
        .get("policyDocument")
        .and_then(Value::as_str)
        .and_then(|name| documents.vocabulary_model(name));
    Thread::start_from(started, rec.at, vocabulary).map_err(|e| {
        fail(
            0,
            kind,
            ReplayProblem::RejectedInput,
            format!("the recorded start cannot be replayed: {e}"),
        )
    })
}

/// THREAD_STARTED's body with the document it names put back into its configuration, read as
/// a [`ThreadStarted`].
fn start_record_the_long_way(
    rec: &AuditRecord,
    documents: &PolicyDocuments,
) -> Result<ThreadStarted, ReplayFailure> {
    let kind = Some(rec.kind);
    let body = with_policy_document(&rec.body, documents).map_err(|e| match e {
        DocumentProblem::Malformed(detail) => fail(0, kind, ReplayProblem::Malformed, detail),
        DocumentProblem::Missing(name) => fail(
            0,
            kind,
            ReplayProblem::PolicyDocumentMissing,
            format!(
                "the thread's policy is the document {name}, which was not given: replay the \
                 audit bundle (its policyDocuments hold it), or bring the exact policy file the \
                 thread was shown (`proofgate audit --policy`, or your policy in the verifier)"
            ),
        ),
    })?;
    // Owned: its strings are moved into the thread, not copied once more.
    ThreadStarted::deserialize(body).map_err(|e| {
        fail(
            0,
            kind,
            ReplayProblem::Malformed,
            format!("THREAD_STARTED body is invalid: {e}"),
        )
    })
}

/// A trail to replay: records already read ([`Entries`]), or read from JSON text with their
/// bodies left as text ([`RecordText`]).
trait Recorded {
    fn count(&self) -> usize;
    /// The kind of the record at `index`, or why it is not a record.
    fn kind(&self, index: usize) -> Result<RecordKind, ReplayFailure>;
    /// The record at `index`, or why it is not one.
    fn record(&self, index: usize) -> Result<Cow<'_, AuditRecord>, ReplayFailure>;
    /// Whether the record at `index` is exactly `produced` (see [`identical`]).
    fn is(&self, index: usize, produced: &AuditRecord) -> bool;
    /// The body at `index` read as an input, or why it is not one.
    fn input(&self, index: usize) -> Result<Input, String>;
}

impl Recorded for Entries {
    fn count(&self) -> usize {
        self.len()
    }
    fn kind(&self, index: usize) -> Result<RecordKind, ReplayFailure> {
        entry(self, index).map(|rec| rec.kind)
    }
    fn record(&self, index: usize) -> Result<Cow<'_, AuditRecord>, ReplayFailure> {
        entry(self, index).map(Cow::Borrowed)
    }
    fn is(&self, index: usize, produced: &AuditRecord) -> bool {
        self[index]
            .as_ref()
            .is_ok_and(|rec| identical(rec, produced))
    }
    fn input(&self, index: usize) -> Result<Input, String> {
        let rec = entry(self, index).map_err(|f| f.detail)?;
        Input::deserialize(&rec.body).map_err(|e| e.to_string())
    }
}

impl Recorded for Vec<RecordText<'_>> {
    fn count(&self) -> usize {
        self.len()
    }
    fn kind(&self, index: usize) -> Result<RecordKind, ReplayFailure> {
        Ok(self[index].kind)
    }
    fn record(&self, index: usize) -> Result<Cow<'_, AuditRecord>, ReplayFailure> {
        let rec = &self[index];
        rec.to_record().map(Cow::Owned).map_err(|e| {
            fail(
                index,
                Some(rec.kind),
                ReplayProblem::Malformed,
                format!("not an audit record: {e}"),
            )
        })
    }
    fn is(&self, index: usize, produced: &AuditRecord) -> bool {
        self[index].is(produced)
    }
    fn input(&self, index: usize) -> Result<Input, String> {
        // Straight from the text; a body that does not read that way is read as a value
        // first, as the other trails are, which gives the same input or the same error.
        serde_json::from_str(self[index].body.get()).or_else(|_| {
            let body: Value =
                serde_json::from_str(self[index].body.get()).map_err(|e| e.to_string())?;
            Input::deserialize(&body).map_err(|e| e.to_string())
        })
    }
}

/// Replays `recorded` into `report`; the rebuilt thread when every record checks out.
fn replay_into(
    recorded: &impl Recorded,
    documents: &PolicyDocuments,
    report: &mut ReplayReport,
) -> Result<Thread, ReplayFailure> {
    let count = recorded.count();
    if count == 0 {
        return Err(fail(
            0,
            None,
            ReplayProblem::Empty,
            "the trail has no records".into(),
        ));
    }
    let first = recorded.record(0)?;
    // The start record's integrity decides first, as for every record. When the thread it
    // starts reproduces it exactly, it holds (the machine's record hashes to the same hash),
    // and hashing it again is spared; otherwise it is checked before anything else is
    // reported, and an altered start names no version or thread.
    let started = start_thread(&first, documents, report);
    let reproduced = started.as_ref().is_ok_and(|thread| {
        thread
            .audit_trail()
            .first()
            .is_some_and(|produced| identical(&first, produced))
    });
    if !reproduced {
        if let Err(f) = check_integrity(0, &first, GENESIS_PREV) {
            report.format_version = None;
            report.thread_id = None;
            return Err(f);
        }
    }
    let mut thread = started?;
    drop(first);

    for i in 0..count {
        // Each record is checked for integrity (its hash, seq and link), then fed to the
        // machine if it is an input, then compared with the record the machine produced. The
        // usual case is decided at once: when the machine's record equals the recorded one in
        // every field (see `identical`), every one of those checks passes, and the recorded
        // hash needs no recomputing (the machine's record hashes to it). Otherwise the checks
        // run in that order, so the first failure and its report are the same as always.
        let kind = recorded.kind(i)?;
        let fed = if i >= thread.audit_trail().len() {
            feed(&mut thread, i, kind, || recorded.input(i))
        } else {
            Ok(())
        };
        let same = fed.is_ok()
            && thread
                .audit_trail()
                .get(i)
                .is_some_and(|produced| recorded.is(i, produced));
        if !same {
            let rec = recorded.record(i)?;
            // Records before i were reproduced exactly, so their hashes are the machine's (the
            // machine only appends: feeding did not change them).
            let prev = match i {
                0 => GENESIS_PREV,
                _ => thread.audit_trail()[i - 1].hash.as_str(),
            };
            check_integrity(i, &rec, prev)?;
            fed?;
            let produced = thread.audit_trail().get(i).ok_or_else(|| {
                fail(
                    i,
                    Some(rec.kind),
                    ReplayProblem::Differs,
                    "the machine produced no record here".into(),
                )
            })?;
            if let Some(detail) = difference(&rec, produced) {
                return Err(fail(i, Some(rec.kind), ReplayProblem::Differs, detail));
            }
        }
        // Equal to the machine's record (or the loop would have returned).
        let produced = &thread.audit_trail()[i];
        report.verified_records = i + 1;
        report.head_hash = Some(produced.hash.clone());
        report.status = thread.outcome().map(|o| o.status);
        if report.question.is_none() {
            report.question = Some(thread.question().to_string());
        }
        // A thread continued after an outcome has the later one's answer.
        report.answer = thread.outcome().and_then(|o| o.answer.clone());
    }
    if let Some(missing) = thread.audit_trail().get(count) {
        return Err(fail(
            count,
            Some(missing.kind),
            ReplayProblem::Missing,
            format!(
                "the trail ends, but the machine also produced a {} record for the last input",
                missing.kind
            ),
        ));
    }
    Ok(thread)
}

/// Feeds the recorded input at `index` (of kind `kind`, read by `input`) to the machine.
fn feed(
    thread: &mut Thread,
    index: usize,
    kind: RecordKind,
    input: impl FnOnce() -> Result<Input, String>,
) -> Result<(), ReplayFailure> {
    if !kind.is_input() {
        return Err(fail(
            index,
            Some(kind),
            ReplayProblem::Differs,
            format!(
                "the machine is waiting for an input here (state {}), but the record is a {}",
                thread.phase(),
                kind
            ),
        ));
    }
    let input = input().map_err(|e| {
        fail(
            index,
            Some(kind),
            ReplayProblem::Malformed,
            format!("the body is not a valid input: {e}"),
        )
    })?;
    // A rejected input ends the replay, so no undo copy is needed.
    thread.handle_replaying(input).map(|_| ()).map_err(|e| {
        fail(
            index,
            Some(kind),
            ReplayProblem::RejectedInput,
            format!("the machine rejects this input: {e}"),
        )
    })
}

/// Whether the recorded record is exactly the one the machine produced: the same seq, prev,
/// at, kind and body (as JSON values: equal values have equal canonical encodings) and the
/// same stored hash. The machine's hash is the hash of its record's contents, so the
/// recorded record's contents hash to its stored hash as well.
fn identical(recorded: &AuditRecord, produced: &AuditRecord) -> bool {
    recorded.seq == produced.seq
        && recorded.at == produced.at
        && recorded.kind == produced.kind
        && recorded.prev == produced.prev
        && recorded.hash == produced.hash
        && recorded.body == produced.body
}

/// Why a recorded record is not the one the machine produced, if it is not.
fn difference(recorded: &AuditRecord, produced: &AuditRecord) -> Option<String> {
    if recorded.kind != produced.kind {
        return Some(format!(
            "recorded a {} record, but the machine produced a {} record",
            recorded.kind, produced.kind
        ));
    }
    if recorded.at != produced.at {
        return Some(format!(
            "recorded at {}, but the machine produced it at {}",
            recorded.at, produced.at
        ));
    }
    if let Some(d) = value_difference(&recorded.body, &produced.body, "body") {
        return Some(d);
    }
    // Same contents and same predecessor: equal hashes follow; checked anyway for soundness.
    (recorded.hash != produced.hash || recorded.prev != produced.prev).then(|| {
        format!(
            "recorded hash {}, but the machine produced {}",
            recorded.hash, produced.hash
        )
    })
}

fn shorten(v: &Value) -> String {
    let text = canonical_json(v);
    if text.chars().count() > 120 {
        let head: String = text.chars().take(117).collect();
        format!("{head}...")
    } else {
        text
    }
}

/// The first path where two JSON values differ (in their canonical encoding).
fn value_difference(recorded: &Value, produced: &Value, path: &str) -> Option<String> {
    if canonical_json(recorded) == canonical_json(produced) {
        return None;
    }
    match (recorded, produced) {
        (Value::Object(a), Value::Object(b)) => {
            let mut keys: Vec<&String> = a.keys().chain(b.keys()).collect();
            keys.sort();
            keys.dedup();
            for k in keys {
                match (a.get(k), b.get(k)) {
                    (Some(x), Some(y)) => {
                        if let Some(d) = value_difference(x, y, &format!("{path}.{k}")) {
                            return Some(d);
                        }
                    }
                    (Some(_), None) => {
                        return Some(format!("{path}.{k} is recorded, but the machine has none"))
                    }
                    (None, Some(_)) => {
                        return Some(format!("{path}.{k} is missing from the record"))
                    }
                    (None, None) => {}
                }
            }
            None
        }
        (Value::Array(a), Value::Array(b)) if a.len() == b.len() => a
            .iter()
            .zip(b)
            .enumerate()
            .find_map(|(i, (x, y))| value_difference(x, y, &format!("{path}[{i}]"))),
        _ => Some(format!(
            "{path}: recorded {}, but the machine produced {}",
            shorten(recorded),
            shorten(produced)
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::thread::ThreadConfig;

    fn trail() -> Vec<AuditRecord> {
        let t = Thread::new(ThreadConfig::default(), "t-1", "How much is a ticket?", 5).unwrap();
        t.audit_trail().to_vec()
    }

    #[test]
    fn a_start_record_that_is_not_intact_names_no_version_or_thread() {
        // Altered so that the machine starts differently, and altered so that it cannot start.
        for (field, value) in [
            ("question", Value::from("How much is a beer?")),
            ("formatVersion", Value::from(99)),
        ] {
            let mut t = trail();
            t[0].body[field] = value;
            let report = replay(&t);
            let failure = report.failure.unwrap();
            assert_eq!(
                (failure.index, failure.problem),
                (0, ReplayProblem::HashMismatch)
            );
            assert_eq!((report.format_version, report.thread_id), (None, None));
        }
    }

    #[test]
    fn an_intact_start_that_cannot_be_replayed_names_its_version() {
        let mut t = trail();
        t[0].body["formatVersion"] = Value::from(99);
        t[0].hash = t[0].expected_hash();
        let report = replay(&t);
        assert_eq!(
            report.failure.unwrap().problem,
            ReplayProblem::UnsupportedVersion
        );
        assert_eq!(report.format_version, Some(99));
    }

    #[test]
    fn a_reproduced_record_with_another_stored_hash_is_altered() {
        let mut t = trail();
        let last = t.len() - 1;
        t[last].hash = GENESIS_PREV.to_string();
        let failure = replay(&t).failure.unwrap();
        assert_eq!(
            (failure.index, failure.problem),
            (last, ReplayProblem::HashMismatch)
        );
    }

    /// Bodies that are JSON to a scanner but not to a reader of values (a lone surrogate, a
    /// number out of range): replay from text reports them exactly as reading every record
    /// first does.
    #[test]
    fn a_body_that_does_not_read_as_a_value_is_reported_as_before() {
        let trail = trail();
        let text = serde_json::to_string(&trail).unwrap();
        let last = trail.len() - 1;
        let body = serde_json::to_string(&trail[last].body).unwrap();
        for (name, broken) in [
            ("surrogate", body.replacen('{', "{\"x\":\"\\ud800\",", 1)),
            ("number", body.replacen('{', "{\"x\":1e400,", 1)),
            (
                "nested number",
                body.replacen('{', "{\"x\":[{\"y\":-1e999}],", 1),
            ),
        ] {
            let text = text.replacen(&body, &broken, 1);
            assert_ne!(text, serde_json::to_string(&trail).unwrap(), "{name}");
            let expected = replay_entries(&parse_entries(text.as_bytes()), &PolicyDocuments::new());
            assert!(!expected.ok, "{name}");
            assert_eq!(replay_json(&text), expected, "{name}");
        }
    }
}

//! A thread started by an older audit format and continued by this version (it waited across
//! an upgrade) has its findings judged by this version's verdict rules, and its trail says so
//! and replays.

mod common;
use common::fed;
use proofgate_core::audit::{replay_with, PolicyDocuments, FORMAT_VERSION};
use proofgate_core::findings::{Finding, Rule, Statement, Translation, ValidFinding};
use proofgate_core::thread::{Input, Thread};
use proofgate_core::{OutcomeStatus, ThreadError};
use serde_json::Value;

/// A format 4 thread waiting for the validation of its first answer, as the format 4 code
/// stored it (`tests/fixtures/v4-thread-awaiting-validation.json`), and its documents.
fn waiting_v4_thread() -> (Thread, PolicyDocuments) {
    let fixture: Value =
        serde_json::from_str(include_str!("fixtures/v4-thread-awaiting-validation.json")).unwrap();
    let documents =
        PolicyDocuments::from_values(fixture["policyDocuments"].as_array().unwrap()).unwrap();
    let trail = fixture["trail"].as_array().unwrap().clone();
    let thread =
        Thread::from_stored_json(fixture["state"].clone(), trail.clone(), &documents).unwrap();
    assert_eq!(thread.format_version(), 4);
    // A server resumes it from its trail, replayed with format 4's rules: the same thread.
    let resumed = Thread::resumed(
        &fixture["state"].to_string(),
        &serde_json::to_vec(&trail).unwrap(),
        &documents,
    )
    .unwrap();
    assert_eq!(resumed, thread);
    (thread, documents)
}

/// A VALID from a validator that names no supporting rule: format 4 took it as VALID.
fn unsupported_valid() -> Vec<Finding> {
    vec![Finding::Valid(ValidFinding {
        translation: Some(Translation {
            premises: Some(vec![Statement::new("(= age 70)", "I am 70.")]),
            claims: Some(vec![Statement::new("(= fee 5)", "You pay 5 dollars.")]),
            ..Default::default()
        }),
        supporting_rules: Some(vec![]),
        ..Default::default()
    })]
}

fn validated(findings: Vec<Finding>, verdict_rules: Option<u32>) -> Input {
    Input::Validated {
        findings,
        evidence: None,
        verdict_rules,
        now: 1_700_000_200_002,
    }
}

#[test]
fn a_thread_that_waited_across_an_upgrade_is_judged_by_todays_rules() {
    let (mut t, documents) = waiting_v4_thread();
    t.handle(validated(unsupported_valid(), None)).unwrap();
    let outcome = t.outcome().expect("finished");
    assert!(!outcome.verified, "{outcome:?}");
    assert_eq!(outcome.status, OutcomeStatus::NotCovered);
    // The VALIDATED record says whose rules judged it, and the trail replays with it.
    let record = t
        .audit_trail()
        .iter()
        .find(|r| r.kind.as_str() == "VALIDATED")
        .unwrap();
    assert_eq!(record.body["verdictRules"], FORMAT_VERSION);
    let report = replay_with(t.audit_trail(), &documents);
    assert!(report.ok, "{:?}", report.failure);
    assert_eq!(report.format_version, Some(4));
    assert_eq!(report.status, Some(OutcomeStatus::NotCovered));
}

#[test]
fn replay_reads_the_recorded_rules_and_adds_none() {
    // Replay judges a VALIDATED record by the rules it names, or by the thread's format when
    // it names none (as the format 4 code wrote them), which took this VALID at its word.
    let (mut t, documents) = waiting_v4_thread();
    t.handle(validated(unsupported_valid(), None)).unwrap();
    // A forger who drops verdictRules and rehashes gets a trail whose outcome differs from
    // what the machine produces for it.
    let mut forged: Vec<_> = t.audit_trail().to_vec();
    let at = forged
        .iter()
        .position(|r| r.kind.as_str() == "VALIDATED")
        .unwrap();
    forged[at]
        .body
        .as_object_mut()
        .unwrap()
        .remove("verdictRules");
    for i in at..forged.len() {
        forged[i].prev = forged[i - 1].hash.clone();
        forged[i].hash = forged[i].expected_hash();
    }
    let report = replay_with(&forged, &documents);
    assert!(!report.ok);
    assert_eq!(report.failure.unwrap().index, at + 1);
    // Values below the thread's format or above this version's are refused.
    for rules in [3, FORMAT_VERSION + 1] {
        let (mut t, _) = waiting_v4_thread();
        let err = t
            .handle(validated(unsupported_valid(), Some(rules)))
            .unwrap_err();
        assert!(
            matches!(err, ThreadError::Inconsistent(_)),
            "{rules}: {err}"
        );
        assert_eq!(t.audit_trail().len(), 4, "a refused input leaves no record");
    }
}

#[test]
fn a_thread_of_this_format_records_no_verdict_rules() {
    use proofgate_core::thread::ThreadConfig;
    let mut t = Thread::new(ThreadConfig::default(), "t", "I am 70. How much?", 0).unwrap();
    t.handle(Input::LlmReplied {
        text: "You pay 5 dollars.".into(),
        model: None,
        now: 1,
    })
    .unwrap();
    let mut findings = unsupported_valid();
    if let Finding::Valid(v) = &mut findings[0] {
        v.supporting_rules = Some(vec![Rule::new("R1", "v1")]);
    }
    t.handle(validated(findings, None)).unwrap();
    assert!(t.outcome().unwrap().verified);
    let record = t
        .audit_trail()
        .iter()
        .find(|r| r.kind.as_str() == "VALIDATED")
        .unwrap();
    assert!(record.body.get("verdictRules").is_none(), "{}", record.body);
}

/// A format 10 thread waiting for its translators when the server is upgraded (the
/// `corrected-fact` thread of `trails-v10.json`, cut before the replies): the replies this
/// version feeds it are read, and its premises grounded, by today's rules (a review found
/// only the verdict rules moved up, so a fact the user took back still grounded a premise).
/// Its TRANSLATOR_REPLIED records say so (`translationRules`), and the trail replays.
#[test]
fn a_thread_waiting_for_its_translators_is_translated_by_todays_rules() {
    use proofgate_core::audit::{rebuild_json_with, replay_json_with, CORRECTIONS_SINCE};
    let stored: Value = serde_json::from_str(include_str!("fixtures/trails-v10.json")).unwrap();
    let case = stored
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "corrected-fact")
        .unwrap();
    let documents =
        PolicyDocuments::from_values(case["policyDocuments"].as_array().unwrap()).unwrap();
    let trail = case["trail"].as_array().unwrap();
    let cut = trail
        .iter()
        .position(|r| r["kind"] == "TRANSLATOR_REPLIED")
        .unwrap();
    let replies: Vec<Value> = trail[cut..]
        .iter()
        .filter(|r| r["kind"] == "TRANSLATOR_REPLIED")
        .map(|r| r["body"].clone())
        .collect();
    let waiting = serde_json::to_vec(&trail[..cut]).unwrap();
    let mut t = rebuild_json_with(&waiting, &documents).unwrap();
    assert_eq!(t.format_version(), CORRECTIONS_SINCE - 1);
    for body in replies {
        let input: Input = serde_json::from_value(body).unwrap();
        // Continued by this version, its replies name the calls they answer (format 15).
        fed(&mut t, input).unwrap();
    }
    let records: Vec<Value> = t
        .audit_trail()
        .iter()
        .map(|r| serde_json::to_value(r).unwrap())
        .collect();
    for r in records.iter().filter(|r| r["kind"] == "TRANSLATOR_REPLIED") {
        assert_eq!(r["body"]["translationRules"], FORMAT_VERSION, "{r}");
    }
    let check = records.iter().find(|r| r["kind"] == "CHECK").unwrap();
    // Format 10 kept `isMember` (the user took it back in the last turn); today's rules check
    // it as a claim.
    assert_eq!(
        check["body"]["translations"][0]["pairs"][0]["premises"],
        serde_json::json!([])
    );
    let report = replay_json_with(serde_json::to_vec(&records).unwrap(), &documents);
    assert!(report.ok, "{report:?}");
    // A recorded rule older than the thread's format, or newer than this version's, is
    // refused.
    for rules in [CORRECTIONS_SINCE - 2, FORMAT_VERSION + 1] {
        let mut t = rebuild_json_with(&waiting, &documents).unwrap();
        let mut body = trail[cut]["body"].clone();
        body["translationRules"] = rules.into();
        let input: Input = serde_json::from_value(body).unwrap();
        assert!(t.handle(input).is_err(), "{rules}");
    }
}

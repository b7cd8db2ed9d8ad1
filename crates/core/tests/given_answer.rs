//! Threads started with a known answer (the proxy's upstream reply) validate it first, record
//! it in THREAD_STARTED, and replay.

use proofgate_core::findings::{ContradictionFinding, Rule, Statement, Translation, ValidFinding};
use proofgate_core::thread::GivenAnswer;
use proofgate_core::{
    replay, Effect, Finding, Input, OutcomeStatus, Thread, ThreadConfig, ThreadError,
};

fn given(text: &str) -> GivenAnswer {
    GivenAnswer {
        text: text.into(),
        model: Some("upstream-model".into()),
        source: "upstream".into(),
    }
}

#[test]
fn the_given_answer_is_validated_first_and_replays() {
    let mut t =
        Thread::with_answer(ThreadConfig::default(), "t1", "How much?", given("$7."), 10).unwrap();
    assert_eq!(
        t.start(),
        Effect::Validate {
            question: "How much?".into(),
            answer: "$7.".into()
        }
    );
    let e = t
        .handle(Input::Validated {
            verdict_rules: None,
            findings: vec![Finding::Invalid(ContradictionFinding::default())],
            evidence: None,
            now: 11,
        })
        .unwrap();
    assert!(matches!(e, Effect::CallLlm { .. }));
    t.handle(Input::LlmReplied {
        text: "DECISION: REWRITE\nANSWER: $10.".into(),
        model: None,
        now: 12,
    })
    .unwrap();
    let e = t
        .handle(Input::Validated {
            verdict_rules: None,
            findings: vec![Finding::Valid(ValidFinding {
                translation: Some(Translation {
                    claims: Some(vec![Statement::new("(= fee 5)", "You pay 5 dollars.")]),
                    ..Default::default()
                }),
                supporting_rules: Some(vec![Rule::new("R1", "v1")]),
                ..Default::default()
            })],
            evidence: None,
            now: 13,
        })
        .unwrap();
    let Effect::Finish(outcome) = e else {
        panic!("finished")
    };
    assert_eq!(outcome.status, OutcomeStatus::Valid);
    assert_eq!(outcome.answer.as_deref(), Some("$10."));
    assert_eq!(t.steps()[0].reply.as_ref().unwrap().text, "$7.");
    let report = replay(t.audit_trail());
    assert!(report.ok, "{report:?}");
}

#[test]
fn an_altered_given_answer_fails_replay_at_the_first_record() {
    let t = Thread::with_answer(ThreadConfig::default(), "t1", "Q?", given("A."), 1).unwrap();
    let mut trail = t.audit_trail().to_vec();
    trail[0].body["givenAnswer"]["text"] = "B.".into();
    let report = replay(&trail);
    assert!(!report.ok);
    assert_eq!(report.failure.unwrap().index, 0);
}

#[test]
fn an_empty_given_answer_is_refused() {
    let err = Thread::with_answer(ThreadConfig::default(), "t1", "Q?", given("  "), 1).unwrap_err();
    assert_eq!(err, ThreadError::EmptyAnswer);
}

/// Fail-open returns the chatbot's answer unchecked only when nothing refuted it: an answer
/// the policy contradicted is never handed out, even when the rewriter then fails.
#[test]
fn fail_open_never_returns_an_answer_the_policy_contradicted() {
    use proofgate_core::findings::{ContradictionFinding, Finding};
    use proofgate_core::thread::{
        FailureMode, GivenAnswer, Input, OutcomeStatus, Thread, ThreadConfig,
    };
    let config = ThreadConfig {
        failure_mode: FailureMode::Open,
        ..ThreadConfig::default()
    };
    let given = || GivenAnswer {
        text: "You pay 10 dollars.".into(),
        model: None,
        source: "upstream".into(),
    };
    let failed = |now| Input::Failed {
        reason: "down".into(),
        now,
    };
    // The validator is down before anything was checked: UNVERIFIED with the answer.
    let mut t = Thread::with_answer(config.clone(), "t1", "How much?", given(), 1).unwrap();
    let outcome = match t.handle(failed(2)).unwrap() {
        proofgate_core::Effect::Finish(o) => o,
        e => panic!("{e:?}"),
    };
    assert_eq!(outcome.status, OutcomeStatus::Unverified);
    assert_eq!(outcome.answer.as_deref(), Some("You pay 10 dollars."));
    // Found INVALID, then the rewriter is down: ERROR, no answer. Also when another pair's
    // finding outranks INVALID in the aggregate verdict (TRANSLATION_AMBIGUOUS, UNKNOWN), and
    // for IMPOSSIBLE.
    let ambiguous = Finding::TranslationAmbiguous(Default::default());
    let unknown: Finding = serde_json::from_value(serde_json::json!({"somethingNew": {}})).unwrap();
    let impossible = Finding::Impossible(ContradictionFinding::default());
    for findings in [
        vec![Finding::Invalid(ContradictionFinding::default())],
        vec![
            ambiguous.clone(),
            Finding::Invalid(ContradictionFinding::default()),
        ],
        vec![Finding::Invalid(ContradictionFinding::default()), unknown],
        vec![ambiguous, impossible],
    ] {
        let mut t = Thread::with_answer(config.clone(), "t2", "How much?", given(), 1).unwrap();
        t.handle(Input::Validated {
            verdict_rules: None,
            findings: findings.clone(),
            evidence: None,
            now: 2,
        })
        .unwrap();
        let outcome = match t.handle(failed(3)).unwrap() {
            proofgate_core::Effect::Finish(o) => o,
            e => panic!("{e:?}"),
        };
        assert_eq!(outcome.status, OutcomeStatus::Error, "{findings:?}");
        assert_eq!(outcome.answer, None);
        let report = proofgate_core::audit::replay(t.audit_trail());
        assert!(report.ok, "{report:?}");
    }
    // The first answer is only ambiguous, but the rewriter's reply holds no answer, so the same
    // text is validated again and found INVALID; then the rewriter is down: still no answer.
    let mut t = Thread::with_answer(config, "t3", "How much?", given(), 1).unwrap();
    t.handle(Input::Validated {
        verdict_rules: None,
        findings: vec![Finding::TranslationAmbiguous(Default::default())],
        evidence: None,
        now: 2,
    })
    .unwrap();
    let again = t
        .handle(Input::LlmReplied {
            text: "DECISION: REWRITE\nANSWER: ".into(),
            model: None,
            now: 3,
        })
        .unwrap();
    assert!(
        matches!(&again, proofgate_core::Effect::Validate { answer, .. } if answer == "You pay 10 dollars."),
        "{again:?}"
    );
    t.handle(Input::Validated {
        verdict_rules: None,
        findings: vec![Finding::Invalid(ContradictionFinding::default())],
        evidence: None,
        now: 4,
    })
    .unwrap();
    let outcome = match t.handle(failed(5)).unwrap() {
        proofgate_core::Effect::Finish(o) => o,
        e => panic!("{e:?}"),
    };
    assert_eq!(outcome.status, OutcomeStatus::Error);
    assert_eq!(outcome.answer, None);
    assert!(proofgate_core::audit::replay(t.audit_trail()).ok);
}

/// The owner a thread is started for is part of its THREAD_STARTED record (so the signed
/// heads cover it), reads back from the trail as stored, and replays; a thread started
/// without one records nothing, as trails did before owners were recorded.
#[test]
fn the_owner_is_recorded_in_the_first_record_and_replays() {
    use proofgate_core::audit::ThreadStarted;
    use proofgate_core::thread::ThreadOwner;
    let alice = ThreadOwner {
        key_id: "key_1".into(),
        end_user: "alice".into(),
    };
    let t = Thread::owned(
        ThreadConfig::default(),
        "t1",
        "Q?",
        Some(given("A.")),
        Some(alice.clone()),
        1,
    )
    .unwrap();
    assert_eq!(t.owner(), Some(alice.clone()));
    let trail = t.audit_trail();
    assert_eq!(
        trail[0].body["owner"],
        serde_json::json!({"keyId": "key_1", "endUser": "alice"})
    );
    assert!(replay(trail).ok);
    let stored: Vec<serde_json::Value> = trail
        .iter()
        .map(|r| serde_json::to_value(r).unwrap())
        .collect();
    assert_eq!(ThreadStarted::owner_in_trail(&stored), Ok(Some(alice)));

    // No end user: only the key is written.
    let keyed = ThreadOwner {
        key_id: "key_2".into(),
        end_user: String::new(),
    };
    let t = Thread::owned(
        ThreadConfig::default(),
        "t2",
        "Q?",
        None,
        Some(keyed.clone()),
        1,
    )
    .unwrap();
    assert_eq!(
        t.audit_trail()[0].body["owner"],
        serde_json::json!({"keyId": "key_2"})
    );
    assert_eq!(t.owner(), Some(keyed));
    assert!(replay(t.audit_trail()).ok);

    // Without an owner the record is as before.
    let t = Thread::owned(ThreadConfig::default(), "t3", "Q?", None, None, 1).unwrap();
    assert!(t.audit_trail()[0].body.get("owner").is_none());
    assert_eq!(t.owner(), None);
    let stored = vec![serde_json::to_value(&t.audit_trail()[0]).unwrap()];
    assert_eq!(ThreadStarted::owner_in_trail(&stored), Ok(None));
    assert_eq!(ThreadStarted::owner_in_trail(&[]), Ok(None));

    // An owner that is not one is refused, not taken for none.
    let mut bad = stored.clone();
    bad[0]["body"]["owner"] = serde_json::json!({"keyId": 7});
    assert!(ThreadStarted::owner_in_trail(&bad).is_err());
    bad[0]["kind"] = "LLM_CALLED".into();
    assert!(ThreadStarted::owner_in_trail(&bad).is_err());
}

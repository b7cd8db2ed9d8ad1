//! Property tests of the rewriting loop and its audit trail (issue 4, acceptance):
//! for random input sequences the machine never panics, never finishes VALID unless the last
//! aggregate verdict was VALID for the returned text, and every trail it produces replays;
//! changing any byte of any record makes replay fail at that record.

use proofgate_core::audit::{replay, replay_json, verify_chain_json, AuditRecord};
use proofgate_core::findings::{
    ContradictionFinding, EmptyFinding, Finding, SatisfiableFinding, Statement, Translation,
    TranslationAmbiguousFinding, ValidFinding,
};
use proofgate_core::thread::{
    Effect, FollowUpQuestions, Input, OutcomeStatus, Thread, ThreadConfig,
};
use proptest::prelude::*;
use serde_json::json;

/// One step of a random script. `Follow` feeds an input of the kind the thread waits for;
/// the others are fed whatever the state, so most of them exercise rejection.
#[derive(Debug, Clone)]
enum Action {
    Follow {
        reply: usize,
        findings: Vec<u8>,
        answer: bool,
    },
    Llm(usize),
    Validated(Vec<u8>),
    Answered,
    Skipped,
    Tick(u64),
    Failed,
}

/// LLM replies covering every decision, malformed ones and free text. No control characters
/// but newlines, so that no two spellings of a string exist in JSON (see the tamper test).
fn reply(i: usize, free: &str) -> String {
    match i % 9 {
        0 => format!("Answer {free}"),
        1 => format!("DECISION: REWRITE\nANSWER:\nRewritten {free}"),
        2 => "DECISION: ASK_QUESTIONS\nQUESTION: When do you travel?\nQUESTION: Member?".into(),
        3 => format!("DECISION: IMPOSSIBLE\nANSWER: Impossible because {free}"),
        4 => "DECISION: REWRITE".into(),
        5 => String::new(),
        6 => "DECISION: ASK_QUESTIONS".into(),
        7 => "**Decision:** impossible\nExplanation: conflict".into(),
        _ => free.to_string(),
    }
}

fn finding(k: u8) -> Finding {
    let t = || {
        Some(Translation {
            premises: Some(vec![Statement::new("(= age 70)", "age is 70")]),
            claims: Some(vec![Statement::new("(= fee 5)", "fee is 5")]),
            ..Default::default()
        })
    };
    match k % 8 {
        0 => Finding::Valid(ValidFinding {
            translation: t(),
            ..Default::default()
        }),
        1 => Finding::Invalid(ContradictionFinding {
            translation: t(),
            ..Default::default()
        }),
        2 => Finding::Satisfiable(SatisfiableFinding {
            translation: t(),
            ..Default::default()
        }),
        3 => Finding::Impossible(ContradictionFinding::default()),
        4 => Finding::TranslationAmbiguous(TranslationAmbiguousFinding::default()),
        5 => Finding::TooComplex(EmptyFinding::default()),
        6 => Finding::NoTranslations(EmptyFinding::default()),
        _ => Finding::Unknown {
            member: "futureKind".into(),
            body: json!({"n": 1}),
        },
    }
}

/// Finding kinds of one validation; rarely none at all.
fn kinds() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        12 => prop::collection::vec(0u8..8, 1..4),
        1 => Just(Vec::new()),
    ]
}

/// Mostly inputs the thread waits for, so that scripts get deep into the loop; some of every
/// kind regardless of state; rarely a failure, which ends the thread.
fn action() -> impl Strategy<Value = Action> {
    prop_oneof![
        120 => (any::<usize>(), kinds(), any::<bool>())
            .prop_map(|(reply, findings, answer)| Action::Follow { reply, findings, answer }),
        3 => any::<usize>().prop_map(Action::Llm),
        3 => kinds().prop_map(Action::Validated),
        3 => Just(Action::Answered),
        3 => Just(Action::Skipped),
        6 => (0u64..5_000).prop_map(Action::Tick),
        1 => Just(Action::Failed),
    ]
}

fn config() -> impl Strategy<Value = ThreadConfig> {
    (1u32..7, any::<bool>(), prop::option::of(0u64..3_000)).prop_map(|(max, ask, timeout)| {
        ThreadConfig {
            max_iterations: max,
            follow_up_questions: if ask {
                FollowUpQuestions::Allowed
            } else {
                FollowUpQuestions::Disabled
            },
            question_timeout_ms: timeout,
            ..ThreadConfig::default()
        }
    })
}

/// Turns an action into an input at time `now`.
fn input_for(thread: &Thread, action: &Action, now: u64, free: &str) -> Input {
    let llm = |i: usize| Input::LlmReplied {
        text: reply(i, free),
        model: Some("m".into()),
        now,
    };
    let validated = |ks: &[u8]| Input::Validated {
        verdict_rules: None,
        findings: ks.iter().copied().map(finding).collect(),
        evidence: Some(json!({"check": now})),
        now,
    };
    let answered = || Input::UserAnswered {
        answers: vec!["Low season".into(), "No".into()],
        now,
    };
    match action {
        Action::Follow {
            reply,
            findings,
            answer,
        } => match thread.pending_effect() {
            Effect::CallLlm { .. } => llm(*reply),
            Effect::Validate { .. } => validated(findings),
            Effect::AskUser { .. } if *answer => answered(),
            Effect::AskUser { .. } => Input::UserSkipped { now },
            // These configurations have no translators.
            Effect::Finish(_) | Effect::Translate { .. } | Effect::Check { .. } => {
                Input::Tick { now }
            }
        },
        Action::Llm(i) => llm(*i),
        Action::Validated(ks) => validated(ks),
        Action::Answered => answered(),
        Action::Skipped => Input::UserSkipped { now },
        Action::Tick(_) => Input::Tick { now },
        Action::Failed => Input::Failed {
            reason: "gave up".into(),
            now,
        },
    }
}

/// Runs a script, checking the per-step invariants; returns the thread.
fn run(config: ThreadConfig, actions: &[Action], free: &str) -> Result<Thread, TestCaseError> {
    let mut now = 1_700_000_000_000u64;
    let mut thread = Thread::new(config, "prop", "How much do I pay?", now)
        .map_err(|e| TestCaseError::fail(e.to_string()))?;
    for action in actions {
        now += match action {
            Action::Tick(d) => *d,
            _ => 1,
        };
        let input = input_for(&thread, action, now, free);
        let before = serde_json::to_string(&thread).expect("serializes");
        match thread.handle(input) {
            Err(_) => {
                prop_assert_eq!(serde_json::to_string(&thread).expect("serializes"), before);
            }
            Ok(Effect::Finish(outcome)) => {
                let last = thread
                    .steps()
                    .iter()
                    .rev()
                    .find_map(|s| Some((s.answer.as_ref()?, s.validation.as_ref()?)));
                if matches!(
                    outcome.status,
                    OutcomeStatus::Valid | OutcomeStatus::ValidWithWarning
                ) || outcome.verified
                {
                    let (answer, validation) =
                        last.ok_or_else(|| TestCaseError::fail("VALID without validation"))?;
                    prop_assert!(validation.verdict.is_valid());
                    prop_assert_eq!(Some(answer), outcome.answer.as_ref());
                    prop_assert_eq!(&validation.findings, &outcome.findings);
                }
            }
            Ok(_) => {}
        }
    }
    Ok(thread)
}

fn trail_text(trail: &[AuditRecord]) -> (Vec<u8>, Vec<(usize, usize)>) {
    let mut text = b"[".to_vec();
    let mut ranges = Vec::new();
    for (i, r) in trail.iter().enumerate() {
        if i > 0 {
            text.push(b',');
        }
        let start = text.len();
        text.extend(serde_json::to_vec(r).expect("serializes"));
        ranges.push((start, text.len()));
    }
    text.push(b']');
    (text, ranges)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn random_inputs_keep_the_machine_sound_and_replayable(
        config in config(),
        actions in prop::collection::vec(action(), 0..50),
        free in "[a-zA-Z0-9 .,?]{0,20}",
    ) {
        let thread = run(config, &actions, &free)?;
        let report = replay(thread.audit_trail());
        prop_assert!(report.ok, "{:?}", report.failure);
        prop_assert_eq!(report.verified_records, thread.audit_trail().len());
        prop_assert_eq!(report.status, thread.outcome().map(|o| o.status));
        let (text, _) = trail_text(thread.audit_trail());
        prop_assert_eq!(replay_json(&text), report);
        // Resumable: the JSON form is the same thread.
        let json = serde_json::to_string(&thread).expect("serializes");
        let back: Thread = serde_json::from_str(&json).expect("deserializes");
        prop_assert_eq!(back, thread);
    }

    #[test]
    fn changing_any_byte_of_any_record_fails_replay_at_that_record(
        config in config(),
        actions in prop::collection::vec(action(), 0..30),
        free in "[a-zA-Z0-9 .,?]{0,20}",
        pick in any::<prop::sample::Index>(),
        offset in any::<prop::sample::Index>(),
        byte in any::<u8>(),
    ) {
        let thread = run(config, &actions, &free)?;
        let (mut text, ranges) = trail_text(thread.audit_trail());
        let record = pick.index(ranges.len());
        let (start, end) = ranges[record];
        let at = start + offset.index(end - start);
        prop_assume!(text[at] != byte);
        text[at] = byte;

        let report = replay_json(&text);
        let failure = report.failure.ok_or_else(|| TestCaseError::fail(format!(
            "tampering byte {} of record {record} went unnoticed", at - start)))?;
        prop_assert_eq!(failure.index, record, "{}", failure.detail);
        let chain = verify_chain_json(&text);
        prop_assert_eq!(chain.failure.map(|f| f.index), Some(record));
    }
}

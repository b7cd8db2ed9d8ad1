//! One test per behaviour of the rewriting loop (issue 4, point 2), plus input validation.

use super::*;
use crate::audit::{replay_with, PolicyDocuments, RecordKind};
use crate::findings::{
    ContradictionFinding, EmptyFinding, Rule, SatisfiableFinding, Scenario, Statement, Translation,
    TranslationAmbiguousFinding, TranslationOption, ValidFinding,
};
use crate::prompts::{PolicyContext, PolicyRuleText};
use crate::verdict::NOT_COVERED_WARNING;
use serde_json::json;

const Q: &str = "I am 70. How much is my ticket?";

fn translation(claim: &str) -> Option<Translation> {
    Some(Translation {
        premises: Some(vec![Statement::new("(= age 70)", "The visitor is 70.")]),
        claims: Some(vec![Statement::new("(= fee 10)", claim)]),
        ..Default::default()
    })
}

fn valid() -> Finding {
    Finding::Valid(ValidFinding {
        translation: translation("The fee is 5 dollars."),
        supporting_rules: Some(vec![Rule::new("R1", "v1")]),
        ..Default::default()
    })
}

fn invalid() -> Finding {
    Finding::Invalid(ContradictionFinding {
        translation: translation("The fee is 10 dollars."),
        contradicting_rules: Some(vec![Rule::new("R1", "v1")]),
        ..Default::default()
    })
}

fn impossible() -> Finding {
    Finding::Impossible(ContradictionFinding {
        contradicting_rules: Some(vec![Rule::new("R2", "v1")]),
        ..Default::default()
    })
}

fn satisfiable() -> Finding {
    let scenario = |season: &str| Scenario {
        statements: Some(vec![Statement::new(format!("(= season {season})"), "")]),
        ..Default::default()
    };
    Finding::Satisfiable(SatisfiableFinding {
        translation: translation("The fee is 5 dollars."),
        claims_true_scenario: Some(scenario("LOW")),
        claims_false_scenario: Some(scenario("HIGH")),
        ..Default::default()
    })
}

fn ambiguous() -> Finding {
    Finding::TranslationAmbiguous(TranslationAmbiguousFinding {
        options: Some(vec![
            TranslationOption {
                translations: translation("The fee is 5 dollars.").map(|t| vec![t]),
                ..Default::default()
            },
            TranslationOption {
                translations: translation("The fee is 5 euros.").map(|t| vec![t]),
                ..Default::default()
            },
        ]),
        ..Default::default()
    })
}

fn no_translations() -> Finding {
    Finding::NoTranslations(EmptyFinding::default())
}

fn too_complex() -> Finding {
    Finding::TooComplex(EmptyFinding::default())
}

fn unknown() -> Finding {
    Finding::Unknown {
        member: "provedLater".into(),
        body: json!({"x": 1}),
    }
}

fn config() -> ThreadConfig {
    ThreadConfig {
        policy: PolicyContext {
            rules: vec![
                PolicyRuleText {
                    id: "R1".into(),
                    expression: "(=> (>= age 65) (= fee 5))".into(),
                    english: Some("Visitors aged 65 or more pay 5 dollars.".into()),
                },
                // The rule `impossible()` cites: findings cite only the thread's rules.
                PolicyRuleText {
                    id: "R2".into(),
                    expression: "(>= age 0)".into(),
                    english: Some("Ages are not negative.".into()),
                },
            ],
            variables: vec![],
        },
        ..ThreadConfig::default()
    }
}

/// Drives a thread with a clock that advances one millisecond per input.
struct Driver {
    t: Thread,
    now: u64,
}

impl Driver {
    fn new(config: ThreadConfig) -> (Driver, Effect) {
        let t = Thread::new(config, "t-1", Q, 1000).expect("valid thread");
        let first = t.start();
        (Driver { t, now: 1000 }, first)
    }
    fn tick(&mut self) -> u64 {
        self.now += 1;
        self.now
    }
    fn llm(&mut self, text: &str) -> Effect {
        let now = self.tick();
        self.t
            .handle(Input::LlmReplied {
                text: text.into(),
                model: Some("model-a".into()),
                now,
            })
            .expect("LLM reply accepted")
    }
    fn validated(&mut self, findings: Vec<Finding>) -> Effect {
        let now = self.tick();
        self.t
            .handle(Input::Validated {
                verdict_rules: None,
                findings,
                evidence: Some(json!({"policyHash": "abc", "answer": "unsat"})),
                now,
            })
            .expect("findings accepted")
    }
    fn finish(&self) -> &Outcome {
        self.t.outcome().expect("finished")
    }
    fn assert_replays(&self) {
        let report = replay_with(self.t.audit_trail(), &self.t.policy_documents());
        assert!(report.ok, "{report:?}");
        assert_eq!(report.status, self.t.outcome().map(|o| o.status));
    }
    fn last_kind(&self) -> RecordKind {
        self.t.audit_trail().last().expect("records").kind
    }
}

fn expect_validate(e: &Effect, answer: &str) {
    match e {
        Effect::Validate {
            question,
            answer: a,
        } => {
            assert_eq!(question, Q);
            assert_eq!(a, answer);
        }
        other => panic!("expected Validate, got {other:?}"),
    }
}

fn expect_llm(e: &Effect, purpose: LlmPurpose) -> &str {
    match e {
        Effect::CallLlm { purpose: p, prompt } => {
            assert_eq!(*p, purpose);
            prompt
        }
        other => panic!("expected CallLlm {purpose:?}, got {other:?}"),
    }
}

fn rewrite(answer: &str) -> String {
    format!("DECISION: REWRITE\nANSWER:\n{answer}")
}

#[test]
fn invalid_then_valid() {
    let (mut d, first) = Driver::new(config());
    let prompt = expect_llm(&first, LlmPurpose::InitialAnswer);
    assert!(prompt.contains(Q));
    assert!(prompt.contains("Visitors aged 65 or more pay 5 dollars."));
    expect_validate(&d.llm("You pay 10 dollars."), "You pay 10 dollars.");
    let e = d.validated(vec![valid(), invalid()]);
    let prompt = expect_llm(&e, LlmPurpose::Rewrite);
    assert!(prompt.contains("Most important problem: INVALID"));
    assert!(prompt.contains("- R1: Visitors aged 65 or more pay 5 dollars."));
    assert!(prompt.contains("YOUR ANSWER (quoted):\n"));
    assert!(prompt.contains("\n\"You pay 10 dollars.\"\n"));
    assert!(prompt.contains("OTHER FINDINGS:\n- VALID: \"The fee is 5 dollars.\""));
    expect_validate(&d.llm(&rewrite("You pay 5 dollars.")), "You pay 5 dollars.");
    let e = d.validated(vec![valid()]);
    let Effect::Finish(outcome) = e else {
        panic!("expected Finish")
    };
    assert_eq!(outcome.status, OutcomeStatus::Valid);
    assert_eq!(outcome.answer.as_deref(), Some("You pay 5 dollars."));
    assert!(outcome.verified);
    assert_eq!(outcome.iterations, 2);
    assert_eq!(outcome.model.as_deref(), Some("model-a"));
    assert_eq!(d.t.phase(), Phase::Completed);
    assert_eq!(d.last_kind(), RecordKind::ValidResponse);
    assert_eq!(d.t.steps().len(), 2);
    d.assert_replays();
}

#[test]
fn satisfiable_then_questions_answers_valid() {
    let (mut d, _) = Driver::new(config());
    d.llm("You pay 5 dollars.");
    let e = d.validated(vec![satisfiable()]);
    let prompt = expect_llm(&e, LlmPurpose::Rewrite);
    assert!(prompt.contains("- season: LOW when the claims hold, HIGH when they fail"));
    assert!(prompt.contains("DECISION: ASK_QUESTIONS"));
    let e = d.llm("DECISION: ASK_QUESTIONS\nQUESTION: When do you travel?\nQUESTION: Member?");
    let Effect::AskUser {
        questions,
        deadline,
    } = e
    else {
        panic!("expected AskUser, got {e:?}")
    };
    assert_eq!(questions, vec!["When do you travel?", "Member?"]);
    assert_eq!(deadline, Some(d.now + DEFAULT_QUESTION_TIMEOUT_MS));
    assert_eq!(d.t.phase(), Phase::AwaitingInput);

    let now = d.tick();
    let e =
        d.t.handle(Input::UserAnswered {
            answers: vec!["In low season".into(), "No".into()],
            now,
        })
        .unwrap();
    let prompt = expect_llm(&e, LlmPurpose::RegenerateWithClarifications);
    assert!(prompt.contains("Q: \"When do you travel?\"\nA: \"In low season\""));
    assert!(prompt.contains("PREVIOUS ANSWER (quoted):\n"));
    assert!(prompt.contains("\n\"You pay 5 dollars.\"\n"));
    expect_validate(
        &d.llm("In low season you pay 5 dollars."),
        "In low season you pay 5 dollars.",
    );
    d.validated(vec![valid()]);
    assert_eq!(d.finish().status, OutcomeStatus::Valid);
    assert!(matches!(
        d.t.clarifications()[0].response,
        Some(ClarificationResponse::Answered { .. })
    ));
    let body = &d.t.audit_trail().last().unwrap().body;
    assert_eq!(body["clarifications"][0]["response"]["status"], "ANSWERED");
    assert_eq!(body["threadId"], "t-1");
    assert_eq!(body["question"], Q);
    assert_eq!(body["evidence"]["policyHash"], "abc");
    d.assert_replays();
}

#[test]
fn questions_skipped() {
    let (mut d, _) = Driver::new(config());
    d.llm("It depends.");
    d.validated(vec![ambiguous()]);
    let e = d.llm("DECISION: ASK_QUESTIONS\nQUESTION: Dollars or euros?");
    assert!(matches!(e, Effect::AskUser { .. }));
    let now = d.tick();
    let e = d.t.handle(Input::UserSkipped { now }).unwrap();
    let prompt = expect_llm(&e, LlmPurpose::RegenerateAfterSkip);
    assert!(prompt.contains("did not answer your follow-up questions"));
    assert!(prompt.contains("A (the user skipped this question): \"\""));
    d.llm("You pay 5 dollars.");
    d.validated(vec![valid()]);
    assert_eq!(d.finish().status, OutcomeStatus::Valid);
    assert!(matches!(
        d.t.clarifications()[0].response,
        Some(ClarificationResponse::Skipped { .. })
    ));
    d.assert_replays();
}

#[test]
fn question_timeout_counts_as_skip() {
    let cfg = ThreadConfig {
        question_timeout_ms: Some(60_000),
        ..config()
    };
    let (mut d, _) = Driver::new(cfg);
    d.llm("It depends.");
    d.validated(vec![satisfiable()]);
    let asked = d.llm("DECISION: ASK_QUESTIONS\nQUESTION: When?");
    let asked_at = d.now;
    // Before the deadline a tick changes nothing: the questions are still pending.
    let e =
        d.t.handle(Input::Tick {
            now: asked_at + 59_999,
        })
        .unwrap();
    assert_eq!(e, asked);
    assert_eq!(d.t.phase(), Phase::AwaitingInput);
    let e =
        d.t.handle(Input::Tick {
            now: asked_at + 60_000,
        })
        .unwrap();
    expect_llm(&e, LlmPurpose::RegenerateAfterSkip);
    assert_eq!(
        d.t.clarifications()[0].response,
        Some(ClarificationResponse::TimedOut {
            at: asked_at + 60_000
        })
    );
    d.now = asked_at + 60_000;
    d.llm("In low season: 5 dollars.");
    d.validated(vec![valid()]);
    d.assert_replays();
}

#[test]
fn impossible_explanation_is_validated_before_it_is_returned() {
    let (mut d, _) = Driver::new(config());
    d.llm("You pay 5 dollars.");
    let e = d.validated(vec![impossible()]);
    let prompt = expect_llm(&e, LlmPurpose::Rewrite);
    assert!(prompt.contains("DECISION: IMPOSSIBLE"));
    let explanation = "You cannot be both a child and 70 years old.";
    let e = d.llm(&format!("DECISION: IMPOSSIBLE\nANSWER: {explanation}"));
    expect_validate(&e, explanation);
    assert!(d.t.outcome().is_none(), "not returned before validation");
    d.validated(vec![impossible()]);
    let o = d.finish();
    assert_eq!(o.status, OutcomeStatus::Impossible);
    assert_eq!(o.answer.as_deref(), Some(explanation));
    assert!(!o.verified);
    assert_eq!(d.last_kind(), RecordKind::ImpossibleResponse);
    d.assert_replays();
}

/// A VALID that proves nothing: its only claim is trivially true.
fn vacuous_valid() -> Finding {
    Finding::Valid(ValidFinding {
        translation: Some(Translation {
            premises: Some(vec![Statement::new("(= age 70)", "The visitor is 70.")]),
            claims: Some(vec![Statement::new(
                "true",
                "You get a free lifetime pass.",
            )]),
            ..Default::default()
        }),
        ..Default::default()
    })
}

#[test]
fn an_impossible_explanation_is_confirmed_only_by_what_its_findings_prove() {
    let warned = Some(Some(NOT_COVERED_WARNING.to_string()));
    for (findings, expected) in [
        (vec![impossible()], Some(None)),
        (vec![valid()], Some(None)),
        (vec![impossible(), no_translations()], warned.clone()),
        // A VALID that proves nothing counts as NO_TRANSLATIONS, as in an answer's verdict.
        (vec![impossible(), vacuous_valid()], warned.clone()),
        (vec![vacuous_valid()], None),
        (vec![no_translations()], None),
        (vec![impossible(), invalid()], None),
        (vec![impossible(), satisfiable()], None),
    ] {
        assert_eq!(
            explanation_confirmed(&findings, crate::audit::FORMAT_VERSION),
            expected,
            "{findings:?}"
        );
    }
    // Trails of earlier formats replay with the behaviour they were written with.
    assert_eq!(explanation_confirmed(&[vacuous_valid()], 2), Some(None));
    assert_eq!(
        explanation_confirmed(&[impossible(), no_translations()], 2),
        Some(None)
    );
    assert_eq!(explanation_confirmed(&[impossible(), invalid()], 2), None);
}

#[test]
fn an_impossible_explanation_with_a_part_outside_the_policy_says_so() {
    let (mut d, _) = Driver::new(config());
    d.llm("You pay 5 dollars.");
    d.validated(vec![impossible()]);
    let explanation = "You cannot be both a child and 70 years old. You get a free lifetime pass.";
    let e = d.llm(&format!("DECISION: IMPOSSIBLE\nANSWER: {explanation}"));
    expect_validate(&e, explanation);
    d.validated(vec![impossible(), no_translations()]);
    let o = d.finish();
    assert_eq!(o.status, OutcomeStatus::Impossible);
    assert_eq!(o.answer.as_deref(), Some(explanation));
    assert_eq!(o.warning.as_deref(), Some(NOT_COVERED_WARNING));
    assert!(!o.verified);
    d.assert_replays();
}

#[test]
fn a_finding_that_proves_nothing_does_not_confirm_an_impossible_explanation() {
    let (mut d, _) = Driver::new(config());
    d.llm("You pay 5 dollars.");
    d.validated(vec![impossible()]);
    d.llm("DECISION: IMPOSSIBLE\nANSWER: You get a free lifetime pass.");
    d.validated(vec![vacuous_valid()]);
    // Not IMPOSSIBLE (a validated explanation): judged as any answer is, nothing in it is
    // covered by the policy, and the outcome says so.
    let o = d.finish();
    assert_eq!(o.status, OutcomeStatus::NotCovered);
    assert!(o.warning.is_some());
    assert!(!o.verified);
    d.assert_replays();
}

#[test]
fn impossible_explanation_that_fails_validation_is_rewritten() {
    let (mut d, _) = Driver::new(config());
    d.llm("You pay 5 dollars.");
    d.validated(vec![impossible()]);
    d.llm("DECISION: IMPOSSIBLE\nANSWER: Seniors never pay.");
    let e = d.validated(vec![impossible(), invalid()]);
    expect_llm(&e, LlmPurpose::Rewrite);
    assert!(d.t.outcome().is_none());
    d.assert_replays();
}

#[test]
fn always_invalid_until_max_iterations() {
    let (mut d, _) = Driver::new(config());
    d.llm("A1");
    for i in 2..=DEFAULT_MAX_ITERATIONS {
        let e = d.validated(vec![invalid()]);
        expect_llm(&e, LlmPurpose::Rewrite);
        d.llm(&rewrite(&format!("A{i}")));
    }
    let e = d.validated(vec![invalid()]);
    let Effect::Finish(o) = e else {
        panic!("expected Finish")
    };
    assert_eq!(o.status, OutcomeStatus::MaxIterations);
    assert_eq!(o.iterations, DEFAULT_MAX_ITERATIONS);
    assert!(!o.verified);
    assert_eq!(o.answer.as_deref(), Some("A5"), "latest on ties");
    assert_eq!(o.findings, vec![invalid()]);
    assert!(o.warning.as_deref().unwrap().starts_with("not verified"));
    assert_eq!(d.last_kind(), RecordKind::MaxIterationsReached);
    d.assert_replays();
}

#[test]
fn max_iterations_returns_the_answer_closest_to_valid() {
    let cfg = ThreadConfig {
        max_iterations: 3,
        follow_up_questions: FollowUpQuestions::Disabled,
        ..config()
    };
    let (mut d, _) = Driver::new(cfg);
    d.llm("A1");
    d.validated(vec![invalid()]);
    d.llm(&rewrite("A2"));
    let e = d.validated(vec![satisfiable()]);
    assert!(!expect_llm(&e, LlmPurpose::Rewrite).contains("ASK_QUESTIONS"));
    d.llm(&rewrite("A3"));
    d.validated(vec![invalid()]);
    let o = d.finish();
    assert_eq!(o.answer.as_deref(), Some("A2"));
    assert_eq!(o.findings, vec![satisfiable()]);
    assert_eq!(o.iterations, 3);
    d.assert_replays();
}

/// From audit format 6 an answer no finding refuted is preferred at the iteration limit: the
/// aggregate verdict ranks TRANSLATION_AMBIGUOUS above TOO_COMPLEX, but an answer one pair of
/// which is INVALID is not returned while one the policy did not contradict exists; and when
/// only refuted answers exist, the notice names the refutation the aggregate verdict hides.
#[test]
fn max_iterations_prefers_an_answer_no_finding_refuted() {
    let cfg = ThreadConfig {
        max_iterations: 2,
        follow_up_questions: FollowUpQuestions::Disabled,
        ..config()
    };
    let refuted_in_part = vec![invalid(), ambiguous()];
    let (mut d, _) = Driver::new(cfg.clone());
    d.llm("A1");
    let e = d.validated(refuted_in_part.clone());
    expect_llm(&e, LlmPurpose::Rewrite);
    d.llm(&rewrite("A2"));
    d.validated(vec![too_complex()]);
    let o = d.finish();
    assert_eq!(o.status, OutcomeStatus::MaxIterations);
    assert_eq!(o.answer.as_deref(), Some("A2"), "{o:?}");
    assert!(!o.warning.as_deref().unwrap().contains("contradicts"));
    d.assert_replays();

    // Every answer refuted: the closest goes out, and its notice says the policy contradicts it.
    let (mut d, _) = Driver::new(cfg);
    d.llm("A1");
    d.validated(refuted_in_part.clone());
    d.llm(&rewrite("A2"));
    d.validated(vec![invalid()]);
    let o = d.finish();
    assert_eq!(o.answer.as_deref(), Some("A1"), "{o:?}");
    let warning = o.warning.as_deref().unwrap();
    assert!(
        warning.contains("its verdict is TRANSLATION_AMBIGUOUS")
            && warning.contains("the policy contradicts part of it (INVALID)"),
        "{warning}"
    );
    d.assert_replays();
}

#[test]
fn valid_plus_no_translations_warns() {
    let (mut d, _) = Driver::new(config());
    d.llm("You pay 5 dollars. The museum is lovely.");
    d.validated(vec![valid(), no_translations()]);
    let o = d.finish();
    assert_eq!(o.status, OutcomeStatus::ValidWithWarning);
    assert_eq!(o.warning.as_deref(), Some(NOT_COVERED_WARNING));
    assert!(o.verified);
    assert_eq!(d.last_kind(), RecordKind::ValidResponse);
    d.assert_replays();
}

/// Bedrock reports text it could not translate inside the VALID finding's own translation,
/// not as a NO_TRANSLATIONS finding: the answer still goes out saying part of it is not
/// covered (audit format 4; before, plainly VALID).
#[test]
fn a_valid_with_claims_left_untranslated_warns() {
    let with_untranslated = || {
        let Finding::Valid(mut v) = valid() else {
            unreachable!()
        };
        if let Some(t) = v.translation.as_mut() {
            t.untranslated_claims = Some(vec![crate::findings::InputTextReference {
                text: Some("You also get a free annual pass.".into()),
                ..Default::default()
            }]);
        }
        Finding::Valid(v)
    };
    let (mut d, _) = Driver::new(config());
    d.llm("You pay 5 dollars. You also get a free annual pass.");
    d.validated(vec![with_untranslated()]);
    let o = d.finish();
    assert_eq!(o.status, OutcomeStatus::ValidWithWarning);
    assert_eq!(o.warning.as_deref(), Some(NOT_COVERED_WARNING));
    assert!(o.verified);
    d.assert_replays();
    // An empty list leaves nothing out.
    let (mut d, _) = Driver::new(config());
    d.llm("You pay 5 dollars.");
    let Finding::Valid(mut v) = valid() else {
        unreachable!()
    };
    v.translation.as_mut().unwrap().untranslated_claims = Some(vec![]);
    d.validated(vec![Finding::Valid(v)]);
    assert_eq!(d.finish().status, OutcomeStatus::Valid);
    // An IMPOSSIBLE explanation confirmed by such a finding says so too.
    let (mut d, _) = Driver::new(config());
    d.llm("You pay 5 dollars.");
    d.validated(vec![impossible()]);
    d.llm("DECISION: IMPOSSIBLE\nANSWER: No ticket fits. You also get a free annual pass.");
    d.validated(vec![impossible(), with_untranslated()]);
    let o = d.finish();
    assert_eq!(o.status, OutcomeStatus::Impossible);
    assert_eq!(o.warning.as_deref(), Some(NOT_COVERED_WARNING));
    d.assert_replays();
}

#[test]
fn no_translations_alone_is_not_covered() {
    let (mut d, _) = Driver::new(config());
    d.llm("The museum is lovely.");
    d.validated(vec![no_translations()]);
    let o = d.finish();
    assert_eq!(o.status, OutcomeStatus::NotCovered);
    assert_eq!(o.warning.as_deref(), Some(OUTSIDE_POLICY_WARNING));
    assert!(!o.verified);
    assert_eq!(d.last_kind(), RecordKind::NotCovered);
    d.assert_replays();
}

#[test]
fn no_findings_is_not_covered_and_not_verified() {
    let (mut d, _) = Driver::new(config());
    d.llm("Anything.");
    d.validated(vec![]);
    let o = d.finish();
    assert_eq!(o.status, OutcomeStatus::NotCovered);
    assert_eq!(o.warning.as_deref(), Some(NO_FINDINGS_WARNING));
    assert!(!o.verified);
}

#[test]
fn unknown_finding_kinds_are_never_valid() {
    let (mut d, _) = Driver::new(config());
    d.llm("A1");
    let e = d.validated(vec![valid(), unknown()]);
    let prompt = expect_llm(&e, LlmPurpose::Rewrite);
    assert!(prompt.contains("Most important problem: UNKNOWN"));
    assert!(prompt.contains("`provedLater`"));
    for i in 2..DEFAULT_MAX_ITERATIONS {
        d.llm(&rewrite(&format!("A{i}")));
        d.validated(vec![unknown()]);
    }
    d.llm(&rewrite("A5"));
    d.validated(vec![valid(), unknown(), valid()]);
    let o = d.finish();
    assert_eq!(o.status, OutcomeStatus::MaxIterations);
    assert!(!o.verified);
    d.assert_replays();
}

#[test]
fn too_complex_asks_for_simpler_and_shorter() {
    let (mut d, _) = Driver::new(config());
    d.llm("A very long answer.");
    let e = d.validated(vec![too_complex()]);
    let prompt = expect_llm(&e, LlmPurpose::Rewrite);
    assert!(prompt.contains("simpler and shorter"));
    assert!(!prompt.contains("ASK_QUESTIONS"));
}

#[test]
fn translation_ambiguous_shows_interpretations() {
    let (mut d, _) = Driver::new(config());
    d.llm("You pay 5.");
    let e = d.validated(vec![ambiguous(), valid()]);
    let prompt = expect_llm(&e, LlmPurpose::Rewrite);
    assert!(prompt.contains("Interpretation 1:"));
    assert!(prompt.contains("The fee is 5 euros."));
    assert!(prompt.contains("DECISION: ASK_QUESTIONS"));
    d.llm(&rewrite("You pay 5 dollars."));
    d.validated(vec![valid()]);
    assert_eq!(d.finish().status, OutcomeStatus::Valid);
}

#[test]
fn questions_when_disabled_revalidate_the_previous_answer() {
    let cfg = ThreadConfig {
        follow_up_questions: FollowUpQuestions::Disabled,
        ..config()
    };
    let (mut d, _) = Driver::new(cfg);
    d.llm("A1");
    d.validated(vec![satisfiable()]);
    let e = d.llm("DECISION: ASK_QUESTIONS\nQUESTION: When?");
    expect_validate(&e, "A1");
    assert!(d.t.steps().last().unwrap().note.is_some());
    assert!(d.t.clarifications().is_empty());
    d.assert_replays();
}

#[test]
fn impossible_decision_for_an_invalid_finding_is_validated_as_an_answer() {
    let (mut d, _) = Driver::new(config());
    d.llm("A1");
    d.validated(vec![invalid()]);
    let e = d.llm("DECISION: IMPOSSIBLE\nANSWER: Cannot be.");
    expect_validate(&e, "Cannot be.");
    d.validated(vec![impossible()]);
    assert!(
        d.t.outcome().is_none(),
        "IMPOSSIBLE was not offered: not an explanation"
    );
}

#[test]
fn reply_without_decision_is_a_rewrite_with_the_whole_reply() {
    let (mut d, _) = Driver::new(config());
    d.llm("A1");
    d.validated(vec![invalid()]);
    expect_validate(&d.llm("You pay 5 dollars."), "You pay 5 dollars.");
}

#[test]
fn failure_finishes_with_error() {
    let (mut d, _) = Driver::new(config());
    let e =
        d.t.handle(Input::Failed {
            reason: "upstream LLM returned 503 three times".into(),
            now: 2000,
        })
        .unwrap();
    let Effect::Finish(o) = e else {
        panic!("expected Finish")
    };
    assert_eq!(o.status, OutcomeStatus::Error);
    assert_eq!(o.answer, None);
    assert_eq!(d.t.phase(), Phase::Error);
    assert_eq!(d.last_kind(), RecordKind::Error);
    d.assert_replays();
}

/// A validator whose guardrail blocked the answer (a content filter, not the reasoning check)
/// ends the thread with ERROR and no answer, with fail-open too: nothing failed.
#[test]
fn a_blocked_answer_is_never_given_fail_open_or_not() {
    for mode in [FailureMode::Closed, FailureMode::Open] {
        let (mut d, _) = Driver::new(ThreadConfig {
            failure_mode: mode,
            ..config()
        });
        d.llm("You pay 5 dollars.");
        // Only while a validation is awaited.
        let now = d.tick();
        let e =
            d.t.handle(Input::Blocked {
                reason: "contentPolicy: VIOLENCE BLOCKED".into(),
                now,
            })
            .unwrap();
        let Effect::Finish(o) = e else {
            panic!("expected Finish, got {e:?}")
        };
        assert_eq!(o.status, OutcomeStatus::Error, "{mode:?}");
        assert_eq!(o.answer, None);
        assert_eq!(o.reason.as_deref(), Some("contentPolicy: VIOLENCE BLOCKED"));
        assert_eq!(
            d.t.audit_trail()[d.t.audit_trail().len() - 2].kind,
            RecordKind::Blocked
        );
        d.assert_replays();
    }
    let (mut d, _) = Driver::new(config());
    let now = d.tick();
    let err =
        d.t.handle(Input::Blocked {
            reason: "x".into(),
            now,
        })
        .unwrap_err();
    assert!(
        matches!(
            err,
            ThreadError::UnexpectedInput {
                input: "Blocked",
                ..
            }
        ),
        "{err:?}"
    );
}

#[test]
fn max_iterations_of_one_stops_after_the_first_validation() {
    let cfg = ThreadConfig {
        max_iterations: 1,
        ..config()
    };
    let (mut d, _) = Driver::new(cfg);
    d.llm("A1");
    d.validated(vec![satisfiable()]);
    assert_eq!(d.finish().status, OutcomeStatus::MaxIterations);
    assert_eq!(d.finish().iterations, 1);
}

#[test]
fn wrong_input_is_rejected_and_changes_nothing() {
    let (mut d, _) = Driver::new(config());
    let before = serde_json::to_string(&d.t).unwrap();
    let err =
        d.t.handle(Input::UserAnswered {
            answers: vec!["x".into()],
            now: 5,
        })
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "the thread is in state GENERATE_INITIAL and cannot take UserAnswered; it expects \
         LlmReplied (or Failed)"
    );
    let err =
        d.t.handle(Input::Validated {
            verdict_rules: None,
            findings: vec![valid()],
            evidence: None,
            now: 5,
        })
        .unwrap_err();
    assert!(matches!(err, ThreadError::UnexpectedInput { .. }));
    assert!(d.t.handle(Input::Tick { now: 5 }).is_err());
    assert_eq!(serde_json::to_string(&d.t).unwrap(), before);

    d.llm("A1");
    d.validated(vec![satisfiable()]);
    d.llm("DECISION: ASK_QUESTIONS\nQUESTION: When?");
    let before = serde_json::to_string(&d.t).unwrap();
    assert_eq!(
        d.t.handle(Input::UserAnswered {
            answers: vec!["  ".into()],
            now: 9
        }),
        Err(ThreadError::NoAnswers)
    );
    assert!(d
        .t
        .handle(Input::LlmReplied {
            text: "x".into(),
            model: None,
            now: 9
        })
        .is_err());
    assert_eq!(serde_json::to_string(&d.t).unwrap(), before);

    d.t.handle(Input::UserSkipped { now: 9 }).unwrap();
    d.llm("A2");
    d.validated(vec![valid()]);
    let finished = serde_json::to_string(&d.t).unwrap();
    assert_eq!(
        d.t.handle(Input::Tick { now: 99 }),
        Err(ThreadError::Finished {
            status: OutcomeStatus::Valid
        })
    );
    assert_eq!(serde_json::to_string(&d.t).unwrap(), finished);
    d.assert_replays();
}

#[test]
fn invalid_creation_is_rejected() {
    let cfg = ThreadConfig {
        max_iterations: 0,
        ..ThreadConfig::default()
    };
    assert!(matches!(
        Thread::new(cfg, "t", "q", 0),
        Err(ThreadError::InvalidConfig(_))
    ));
    assert_eq!(
        Thread::new(ThreadConfig::default(), "t", "  ", 0).unwrap_err(),
        ThreadError::EmptyQuestion
    );
}

#[test]
fn resumes_from_json_exactly() {
    let (mut a, _) = Driver::new(config());
    a.llm("A1");
    a.validated(vec![satisfiable()]);
    a.llm("DECISION: ASK_QUESTIONS\nQUESTION: When?");

    let json = serde_json::to_string(&a.t).unwrap();
    let mut b = Driver {
        t: serde_json::from_str(&json).unwrap(),
        now: a.now,
    };
    assert_eq!(b.t, a.t);
    assert_eq!(b.t.start(), a.t.pending_effect());
    for d in [&mut a, &mut b] {
        let now = d.tick();
        d.t.handle(Input::UserAnswered {
            answers: vec!["Low season".into()],
            now,
        })
        .unwrap();
        d.llm("A2");
        d.validated(vec![valid()]);
    }
    assert_eq!(a.t, b.t);
    b.assert_replays();
}

#[test]
fn inputs_and_effects_round_trip_through_json() {
    let input: Input = serde_json::from_value(json!({
        "type": "Validated",
        "findings": [{"valid": {}}],
        "evidence": {"smt": "(check-sat)"},
        "now": 7
    }))
    .unwrap();
    assert_eq!(input.now(), 7);
    let effect = Effect::AskUser {
        questions: vec!["a?".into()],
        deadline: Some(9),
    };
    assert_eq!(
        serde_json::to_value(&effect).unwrap(),
        json!({"type": "AskUser", "questions": ["a?"], "deadline": 9})
    );
    let err = serde_json::from_value::<Input>(json!({"type": "LlmReplied", "txt": "x", "now": 1}))
        .unwrap_err();
    assert!(err.to_string().contains("txt"), "{err}");
}

#[test]
fn json_without_trail_is_the_thread_json_minus_the_trail() {
    let (mut d, _) = Driver::new(config());
    let check = |t: &Thread| {
        let mut full = serde_json::to_value(t).unwrap();
        full.as_object_mut().unwrap().remove("auditTrail");
        assert_eq!(t.to_json_without_trail().unwrap(), full);
        // The text a store saves is the same value.
        let text: Value = serde_json::from_str(&t.to_json_text_without_trail().unwrap()).unwrap();
        assert_eq!(text, full);
    };
    check(&d.t);
    d.t.set_app_request(serde_json::json!({"model": "m", "messages": []}));
    d.llm("You pay 10 dollars.");
    check(&d.t);
    d.validated(vec![valid(), invalid()]);
    check(&d.t);
    // And a stored thread read back from it (with the trail beside it) is the same thread.
    let mut stored = d.t.to_json_without_trail().unwrap();
    stored.as_object_mut().unwrap().insert(
        "auditTrail".into(),
        serde_json::to_value(d.t.audit_trail()).unwrap(),
    );
    assert_eq!(serde_json::from_value::<Thread>(stored).unwrap(), d.t);
}

/// A resumed thread is the one its trail records: the stored state must be its copy (only
/// the app's request, which no record holds, is taken from it), and a state that differs in
/// any recorded field is refused, naming the field.
#[test]
fn a_resumed_thread_is_rebuilt_from_its_trail() {
    let (mut d, _) = Driver::new(config());
    d.t.set_app_request(serde_json::json!({"model": "m", "messages": []}));
    d.llm("You pay 10 dollars.");
    d.validated(vec![valid(), invalid()]);
    let trail = serde_json::to_vec(d.t.audit_trail()).unwrap();
    let (_, document) =
        crate::audit::policy_document::policy_document_of(d.t.config()).expect("a policy");
    let mut documents = PolicyDocuments::new();
    documents.insert(document).unwrap();
    let slim = d.t.to_json_text_without_trail_or_config().unwrap();
    let whole = d.t.to_json_text_without_trail().unwrap();
    for stored in [&slim, &whole] {
        let resumed = Thread::resumed(stored, &trail, &documents).unwrap();
        assert_eq!(resumed, d.t);
        assert_eq!(resumed.app_request(), d.t.app_request());
    }
    // Without its app request (a thread started without one) it resumes without one.
    let mut plain: Value = serde_json::from_str(&slim).unwrap();
    plain.as_object_mut().unwrap().remove("appRequest");
    let resumed = Thread::resumed(&plain.to_string(), &trail, &documents).unwrap();
    assert_eq!(resumed.app_request(), None);
    // A recorded field changed in the stored copy: refused, naming it.
    let mut whole_value: Value = serde_json::from_str(&whole).unwrap();
    whole_value["config"]["maxIterations"] = serde_json::json!(50);
    let mut asked: Value = serde_json::from_str(&slim).unwrap();
    asked["question"] = serde_json::json!("Something else entirely?");
    let mut answered: Value = serde_json::from_str(&slim).unwrap();
    answered["steps"][0]["reply"]["text"] = serde_json::json!("You pay nothing.");
    let mut extra: Value = serde_json::from_str(&slim).unwrap();
    extra["injected"] = serde_json::json!(true);
    for (altered, field) in [
        (whole_value, "config"),
        (asked, "question"),
        (answered, "steps"),
        (extra, "injected"),
    ] {
        let err = Thread::resumed(&altered.to_string(), &trail, &documents).unwrap_err();
        assert!(
            err.contains(&format!("`{field}`")) && err.contains("the store was altered"),
            "{field}: {err}"
        );
    }
    // A trail that does not replay is refused as such.
    let mut records: Vec<Value> = serde_json::from_slice(&trail).unwrap();
    records.pop();
    let short = serde_json::to_vec(&records).unwrap();
    let err = Thread::resumed(&slim, &short, &documents).unwrap_err();
    assert!(
        err.contains("stored state differs") || err.contains("does not replay"),
        "{err}"
    );
    let err = Thread::resumed(&slim, b"[]", &documents).unwrap_err();
    assert!(err.contains("does not replay"), "{err}");
}

#[test]
fn a_state_stored_without_its_config_takes_it_from_the_trail() {
    let (mut d, _) = Driver::new(config());
    d.llm("You pay 10 dollars.");
    d.validated(vec![valid(), invalid()]);
    let trail = || serde_json::to_value(d.t.audit_trail()).unwrap();
    let trail = || match trail() {
        Value::Array(records) => records,
        other => panic!("a trail is an array, got {other}"),
    };
    let slim: Value =
        serde_json::from_str(&d.t.to_json_text_without_trail_or_config().unwrap()).unwrap();
    assert!(slim.get("config").is_none());
    let mut full = d.t.to_json_without_trail().unwrap();
    full.as_object_mut().unwrap().remove("config");
    assert_eq!(slim, full, "only the configuration is left out");
    // The trail names the policy's document; the store gives it back.
    let (name, document) =
        crate::audit::policy_document::policy_document_of(d.t.config()).expect("a policy");
    assert_eq!(trail()[0]["body"]["policyDocument"], name.as_str());
    assert!(trail()[0]["body"]["config"].get("policy").is_none());
    let mut documents = PolicyDocuments::new();
    documents.insert(document).unwrap();
    assert_eq!(
        Thread::from_stored_json(slim.clone(), trail(), &documents).unwrap(),
        d.t
    );
    let err = Thread::from_stored_json(slim.clone(), trail(), &PolicyDocuments::new()).unwrap_err();
    assert!(
        err.contains(&name) && err.contains("not available"),
        "{err}"
    );
    // A state stored with its configuration (older rows) reads back the same.
    let whole = d.t.to_json_without_trail().unwrap();
    assert_eq!(
        Thread::from_stored_json(whole, trail(), &PolicyDocuments::new()).unwrap(),
        d.t
    );
    // Without the configuration, the trail must start with THREAD_STARTED.
    let err = Thread::from_stored_json(slim, trail()[1..].to_vec(), &documents).unwrap_err();
    assert!(err.contains("THREAD_STARTED"), "{err}");
}

/// From format 14 the answer checked and released holds no bidirectional control or other
/// invisible character: the translators read "$05" in "$\u{202E}05\u{202C}", which showed as
/// "$50" (a review's case).
#[test]
fn the_answer_checked_has_no_characters_that_change_how_it_shows() {
    let mut t = Thread::new(config(), "t-invisible", Q, 1000).unwrap();
    let effect = t
        .handle(Input::LlmReplied {
            text: "Seniors pay $\u{202E}05\u{202C}.\u{200B} \u{E0041}\u{E0042}Thanks".into(),
            model: None,
            now: 1001,
        })
        .unwrap();
    let Effect::Validate { answer, .. } = effect else {
        panic!("{effect:?}");
    };
    assert_eq!(answer, "Seniors pay $05. Thanks");
    t.handle(Input::Validated {
        verdict_rules: None,
        findings: vec![valid()],
        evidence: None,
        now: 1002,
    })
    .unwrap();
    assert_eq!(
        t.outcome().unwrap().answer.as_deref(),
        Some("Seniors pay $05. Thanks")
    );
    let report = replay_with(t.audit_trail(), &t.policy_documents());
    assert!(report.ok, "{:?}", report.failure);
}

//! Audit format 4: premises come only from what the user, the system or a tool said. A fact
//! that only the answer states is checked as a claim, so "you are 70, so you pay 5" is not
//! VALID unless a turn says 70; and the user's answers to follow-up questions reach the
//! translators as turns, so a regenerated answer is proved from them, not from itself.

mod common;
use common::fed;
use proofgate_core::audit::{replay_with, FORMAT_VERSION, GROUNDED_PREMISES_SINCE};
use proofgate_core::findings::{Finding, SatisfiableFinding, Statement, Translation, ValidFinding};
use proofgate_core::policy::PolicyDefinition;
use proofgate_core::prompts::{PolicyContext, PolicyRuleText};
use proofgate_core::thread::{Effect, GivenAnswer, Input, Thread, ThreadConfig, ThreadError};
use proofgate_core::translation::{TranslationConfig, TranslatorOutput};
use serde_json::Value;

const QUESTION: &str = "How much is my ticket?";

fn config() -> ThreadConfig {
    let vocabulary = PolicyDefinition::from_json(
        r#"{"variables": [{"name": "age", "type": "INT", "description": "Age of the visitor"},
                          {"name": "isLowSeason", "type": "BOOL", "description": "Low season"},
                          {"name": "fee", "type": "INT", "description": "Fee in dollars"}]}"#,
    )
    .expect("vocabulary");
    ThreadConfig {
        policy: PolicyContext {
            rules: vec![PolicyRuleText {
                id: "R1".into(),
                expression: "(=> (and (>= age 65) isLowSeason) (= fee 5))".into(),
                english: Some("Seniors pay 5 dollars in the low season.".into()),
            }],
            variables: vec![],
        },
        translation: Some(TranslationConfig::new(&vocabulary, 2, 1, 1.0)),
        ..ThreadConfig::default()
    }
}

fn thread(question: &str, answer: &str) -> Thread {
    Thread::with_answer(
        config(),
        "grounded-1",
        question,
        GivenAnswer {
            text: answer.into(),
            model: None,
            source: "upstream".into(),
        },
        1_700_000_000_000,
    )
    .expect("valid thread")
}

/// Both translators reply `reply`; returns the effect after the last one.
fn translate(t: &mut Thread, reply: &str, now: u64) -> Effect {
    let mut last = None;
    for translator in 0..2 {
        last = Some(
            fed(
                t,
                Input::TranslatorReplied {
                    call: None,
                    translation_rules: None,
                    translator,
                    attempt: 0,
                    text: reply.into(),
                    model: None,
                    now,
                },
            )
            .expect("reply accepted"),
        );
    }
    last.expect("two translators")
}

fn checked(effect: &Effect) -> &[TranslatorOutput] {
    match effect {
        Effect::Check { translations, .. } => translations,
        other => panic!("expected Check, got {other:?}"),
    }
}

fn logic(statements: &[Statement]) -> Vec<&str> {
    statements
        .iter()
        .filter_map(|s| s.logic.as_deref())
        .collect()
}

fn prompts(effect: &Effect) -> Vec<String> {
    match effect {
        Effect::Translate { calls } => calls
            .iter()
            .map(|c| c.messages[0].content.clone())
            .collect(),
        other => panic!("expected Translate, got {other:?}"),
    }
}

/// The conversation block of a translator prompt.
fn conversation_in(prompt: &str) -> Value {
    let open = prompt.rfind("<data-").expect("a data block");
    let start = open + prompt[open..].find(">\n").unwrap() + 2;
    let end = prompt.rfind("\n</data-").unwrap();
    serde_json::from_str::<Value>(&prompt[start..end]).unwrap()["conversation"].clone()
}

fn statement(logic: &str, nl: &str) -> Statement {
    Statement::new(logic, nl)
}

fn finding(premises: &[&str], claims: &[&str], valid: bool) -> Finding {
    let translation = Some(Translation {
        premises: Some(premises.iter().map(|p| statement(p, "")).collect()),
        claims: Some(claims.iter().map(|c| statement(c, "")).collect()),
        confidence: Some(serde_json::Number::from_f64(1.0).expect("finite")),
        ..Default::default()
    });
    if valid {
        Finding::Valid(ValidFinding {
            translation,
            ..Default::default()
        })
    } else {
        Finding::Satisfiable(SatisfiableFinding {
            translation,
            ..Default::default()
        })
    }
}

#[test]
fn a_new_thread_writes_the_grounded_format() {
    let t = thread(QUESTION, "You pay 5 dollars.");
    assert_eq!(t.format_version(), FORMAT_VERSION);
    assert!(t.format_version() >= GROUNDED_PREMISES_SINCE);
    assert_eq!(t.audit_trail()[0].body["formatVersion"], FORMAT_VERSION);
}

#[test]
fn a_fact_only_the_answer_states_is_checked_as_a_claim() {
    // The user never says their age or the season; the answer asserts both.
    let mut t = thread(
        QUESTION,
        "You are 70 and it is the low season, so you pay 5 dollars.",
    );
    let first = t.start();
    for p in prompts(&first) {
        assert!(p.contains("the answer cannot supply its own facts"), "{p}");
        assert_eq!(
            conversation_in(&p),
            serde_json::json!([{"turn": 1, "role": "user", "text": QUESTION}])
        );
    }
    // Translators that take the answer's facts as premises: one cites nothing, the other a
    // turn that does not exist (the answer is not a turn).
    let reply = r#"{"pairs": [{"premises": [
        {"logic": "(= age 70)", "naturalLanguage": "The visitor is 70"},
        {"logic": "isLowSeason", "naturalLanguage": "It is the low season (turn 2)"}],
        "claims": [{"logic": "(= fee 5)", "naturalLanguage": "You pay 5 dollars"}]}]}"#;
    let effect = translate(&mut t, reply, 1_700_000_000_001);
    for output in checked(&effect) {
        let pair = &output.pairs[0];
        assert!(pair.premises.is_empty(), "{:?}", pair.premises);
        assert_eq!(
            logic(&pair.claims),
            ["(= fee 5)", "(= age 70)", "isLowSeason"]
        );
    }
    // A validator that checks the answer's facts as premises is refused: its findings are not
    // of the translations asked for, so nothing of it is recorded.
    let forged = fed(
        &mut t,
        Input::Validated {
            verdict_rules: None,
            findings: vec![finding(
                &["(= age 70)", "isLowSeason"],
                &["(= fee 5)"],
                true,
            )],
            evidence: None,
            now: 1_700_000_000_002,
        },
    );
    let Err(ThreadError::FindingsMismatch(why)) = forged else {
        panic!("expected a mismatch, got {forged:?}")
    };
    assert!(why.contains("no translator wrote"), "{why}");
    // What the solver really finds: the claims can hold, nothing proves them.
    fed(
        &mut t,
        Input::Validated {
            verdict_rules: None,
            findings: vec![finding(
                &[],
                &["(= fee 5)", "(= age 70)", "isLowSeason"],
                false,
            )],
            evidence: None,
            now: 1_700_000_000_003,
        },
    )
    .expect("the translations' findings are accepted");
    let report = replay_with(t.audit_trail(), &t.policy_documents());
    assert!(report.ok, "{report:?}");
}

#[test]
fn the_users_answers_to_follow_up_questions_are_turns_premises_may_cite() {
    let mut t = thread("I am 70. How much is my ticket?", "You pay 5 dollars.");
    t.start();
    let reply = r#"{"pairs": [{"premises": [
        {"logic": "(= age 70)", "naturalLanguage": "The visitor is 70 (turn 1)"}],
        "claims": [{"logic": "(= fee 5)", "naturalLanguage": "You pay 5 dollars"}]}]}"#;
    let effect = translate(&mut t, reply, 1_700_000_000_001);
    assert_eq!(
        logic(&checked(&effect)[0].pairs[0].premises),
        ["(= age 70)"]
    );
    let effect = fed(
        &mut t,
        Input::Validated {
            verdict_rules: None,
            findings: vec![finding(&["(= age 70)"], &["(= fee 5)"], false)],
            evidence: None,
            now: 1_700_000_000_002,
        },
    )
    .unwrap();
    assert!(matches!(effect, Effect::CallLlm { .. }), "{effect:?}");
    // From format 14 the rewriter names the variable, and the thread asks it in the
    // policy's words.
    let effect = fed(
        &mut t,
        Input::LlmReplied {
            text: "DECISION: ASK_QUESTIONS\nQUESTION: isLowSeason".into(),
            model: None,
            now: 1_700_000_000_003,
        },
    )
    .unwrap();
    assert!(matches!(effect, Effect::AskUser { .. }), "{effect:?}");
    fed(
        &mut t,
        Input::UserAnswered {
            answers: vec!["Yes, it is the low season.".into()],
            now: 1_700_000_000_004,
        },
    )
    .unwrap();
    let effect = fed(
        &mut t,
        Input::LlmReplied {
            text: "In the low season you pay 5 dollars.".into(),
            model: None,
            now: 1_700_000_000_005,
        },
    )
    .unwrap();
    // The translators read the question, the follow-up question and the user's answer.
    for p in prompts(&effect) {
        let turns = conversation_in(&p);
        assert_eq!(turns[1]["role"], "assistant");
        assert_eq!(turns[1]["text"], "Low season (yes or no)?");
        assert_eq!(
            (turns[2]["turn"].as_u64(), turns[2]["role"].as_str()),
            (Some(3), Some("user"))
        );
        assert_eq!(turns[2]["text"], "Yes, it is the low season.");
        assert_eq!(turns.as_array().unwrap().len(), 3);
    }
    // The user's answer may be cited; the follow-up question (the assistant's) may not.
    let reply = r#"{"pairs": [{"premises": [
        {"logic": "(= age 70)", "naturalLanguage": "The visitor is 70 (turn 1)"},
        {"logic": "isLowSeason", "naturalLanguage": "It is the low season (turn 3)"},
        {"logic": "(< age 100)", "naturalLanguage": "Asked about (turn 2)"}],
        "claims": [{"logic": "(= fee 5)", "naturalLanguage": "You pay 5 dollars"}]}]}"#;
    let effect = translate(&mut t, reply, 1_700_000_000_006);
    let pair = &checked(&effect)[0].pairs[0];
    assert_eq!(logic(&pair.premises), ["(= age 70)", "isLowSeason"]);
    assert_eq!(logic(&pair.claims), ["(= fee 5)", "(< age 100)"]);
    fed(
        &mut t,
        Input::Validated {
            verdict_rules: None,
            findings: vec![finding(
                &["(= age 70)", "isLowSeason"],
                &["(= fee 5)", "(< age 100)"],
                true,
            )],
            evidence: None,
            now: 1_700_000_000_007,
        },
    )
    .unwrap();
    assert!(t.outcome().is_some(), "finished");
    let report = replay_with(t.audit_trail(), &t.policy_documents());
    assert!(report.ok, "{report:?}");
}

/// Format 7: a bare "Yes" or "No" to the follow-up question states that question (or its
/// negation), so the premise it answers holds, with its polarity; a translator that turns a
/// "No" into the fact is checked as a claim. From format 14 only a question the policy worded
/// (the rewriter names its variable): a yes to the rewriter's own wording states nothing.
#[test]
fn a_bare_yes_or_no_to_a_follow_up_question_grounds_what_was_asked() {
    for (question, answer, premise, kept) in [
        ("isLowSeason", "Yes", "isLowSeason", true),
        ("isLowSeason", "No", "(not isLowSeason)", true),
        ("isLowSeason", "No", "isLowSeason", false),
        ("isLowSeason", "Perhaps", "isLowSeason", false),
        (
            "Is your visit in the low season?",
            "Yes",
            "isLowSeason",
            false,
        ),
        (
            "Is your visit in the low season?",
            "No",
            "(not isLowSeason)",
            false,
        ),
    ] {
        let mut t = thread("I am 70. How much is my ticket?", "You pay 5 dollars.");
        t.start();
        let reply = r#"{"pairs": [{"premises": [
            {"logic": "(= age 70)", "naturalLanguage": "The visitor is 70 (turn 1)"}],
            "claims": [{"logic": "(= fee 5)", "naturalLanguage": "You pay 5 dollars"}]}]}"#;
        translate(&mut t, reply, 1_700_000_000_001);
        fed(
            &mut t,
            Input::Validated {
                verdict_rules: None,
                findings: vec![finding(&["(= age 70)"], &["(= fee 5)"], false)],
                evidence: None,
                now: 1_700_000_000_002,
            },
        )
        .unwrap();
        fed(
            &mut t,
            Input::LlmReplied {
                text: format!("DECISION: ASK_QUESTIONS\nQUESTION: {question}"),
                model: None,
                now: 1_700_000_000_003,
            },
        )
        .unwrap();
        fed(
            &mut t,
            Input::UserAnswered {
                answers: vec![answer.into()],
                now: 1_700_000_000_004,
            },
        )
        .unwrap();
        fed(
            &mut t,
            Input::LlmReplied {
                text: "In the low season you pay 5 dollars.".into(),
                model: None,
                now: 1_700_000_000_005,
            },
        )
        .unwrap();
        let reply = format!(
            r#"{{"pairs": [{{"premises": [
                {{"logic": "(= age 70)", "naturalLanguage": "The visitor is 70 (turn 1)"}},
                {{"logic": "{premise}", "naturalLanguage": "As answered (turn 3)"}}],
                "claims": [{{"logic": "(= fee 5)", "naturalLanguage": "You pay 5 dollars"}}]}}]}}"#
        );
        let effect = translate(&mut t, &reply, 1_700_000_000_006);
        let pair = &checked(&effect)[0].pairs[0];
        let want: Vec<&str> = if kept {
            vec!["(= age 70)", premise]
        } else {
            vec!["(= age 70)"]
        };
        assert_eq!(
            logic(&pair.premises),
            want,
            "{question} {answer}: {premise}"
        );
    }
}

/// Audit format 12: a range states none of its numbers, so a translator reading "between 60 and
/// 70" as 70 gets that premise moved to the claims, and the fee is not proved for a user who
/// gave no age; the season, stated plainly in the same sentence, stays a premise.
#[test]
fn a_range_the_user_gave_grounds_no_number() {
    let mut t = thread(
        "I am between 60 and 70 and I visit in the low season. How much is my ticket?",
        "You pay 5 dollars.",
    );
    t.start();
    let reply = r#"{"pairs": [{"premises": [
        {"logic": "(= age 70)", "naturalLanguage": "The visitor is 70 (turn 1)"},
        {"logic": "isLowSeason", "naturalLanguage": "It is the low season (turn 1)"}],
        "claims": [{"logic": "(= fee 5)", "naturalLanguage": "You pay 5 dollars"}]}]}"#;
    let effect = translate(&mut t, reply, 1_700_000_000_001);
    for output in checked(&effect) {
        let pair = &output.pairs[0];
        assert_eq!(logic(&pair.premises), ["isLowSeason"]);
        assert_eq!(logic(&pair.claims), ["(= fee 5)", "(= age 70)"]);
    }
}

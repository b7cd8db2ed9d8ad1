//! A proxy's reasoner workers serve every caller, one check after another, on solvers that
//! keep state between checks (assumption literals, the arithmetic solver's last assignment,
//! kept witnesses). The findings cache is per caller, but the workers are not: an example
//! scenario must never show another caller's facts. Here one reasoner checks a question with
//! distinctive numbers (an age and a budget no rule mentions), then questions that leave those
//! variables free or only bounded: their findings are of the kinds a fresh reasoner gives, and
//! never contain the earlier numbers unless the fresh reasoner's findings do too.

use proofgate_core::policy::{PolicyDefinition, PolicyModel};
use proofgate_reasoner::{parse_translations, CheckOptions, Reasoner, TranslatorOutput};
use proptest::prelude::*;
use serde_json::json;

const PARK: &str = include_str!("../../../examples/policies/park-admission.json");

fn question(premises: &[String], claims: &[&str]) -> Vec<TranslatorOutput> {
    let statement = |l: &str| json!({"logic": l, "naturalLanguage": l});
    let p: Vec<_> = premises.iter().map(|l| statement(l)).collect();
    let c: Vec<_> = claims.iter().map(|l| statement(l)).collect();
    parse_translations(&json!({"translations": [[{"premises": p, "claims": c}]]}).to_string())
        .unwrap()
}

/// Questions whose scenarios must choose the age, the budget or both themselves.
fn later_questions() -> Vec<Vec<TranslatorOutput>> {
    vec![
        question(
            &["(= ageClass SENIOR)".into(), "isLowSeason".into()],
            &["(not isEntryAllowed)"],
        ),
        question(
            &["(> customerAge 65)".into()],
            &["(< finalAdmissionFee 40.0)"],
        ),
        question(&["isLowSeason".into()], &["isEntryAllowed"]),
        question(&[], &["(= ageClass SENIOR)"]),
    ]
}

/// Whether `number` appears in `text` as a whole token of an SMT-LIB term.
fn mentions(text: &str, number: &str) -> bool {
    text.match_indices(number).any(|(i, _)| {
        let before = text[..i].chars().next_back();
        let after = text[i + number.len()..].chars().next();
        !before.is_some_and(|c| c.is_ascii_digit() || c == '.')
            && !after.is_some_and(|c| c.is_ascii_digit() || c == '.')
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 12, ..ProptestConfig::default() })]

    #[test]
    fn a_later_question_gets_neither_an_earlier_ones_facts_nor_its_verdicts(
        age in 201u32..999,
        dollars in 1001u32..9999,
        cents in 1u32..99,
        verdict in 0usize..3,
    ) {
        let model =
            PolicyModel::from_definition(PolicyDefinition::from_json(PARK).unwrap(), None)
                .unwrap();
        let fund = format!("{dollars}.{cents:02}");
        let claims = ["isEntryAllowed", "(not isEntryAllowed)", "(= ageClass SENIOR)"];
        let earlier = question(
            &[
                format!("(= customerAge {age})"),
                "isLowSeason".into(),
                format!("(= totalAdmissionFund {fund})"),
            ],
            &[claims[verdict]],
        );
        let used = Reasoner::new(&model, CheckOptions::default()).unwrap();
        let seen = serde_json::to_string(&used.validate(&earlier).unwrap()).unwrap();
        prop_assert!(mentions(&seen, &age.to_string()), "the probe's own findings: {}", seen);
        let fresh = Reasoner::new(&model, CheckOptions::default()).unwrap();
        for later in later_questions() {
            let (after, first) = (used.validate(&later).unwrap(), fresh.validate(&later).unwrap());
            // What the earlier question left in the solvers decides nothing.
            let kinds = |f: &[proofgate_core::findings::Finding]| {
                f.iter().map(|f| f.kind()).collect::<Vec<_>>()
            };
            prop_assert_eq!(kinds(&after), kinds(&first));
            let shown = serde_json::to_string(&after).unwrap();
            let alone = serde_json::to_string(&first).unwrap();
            for fact in [age.to_string(), fund.clone()] {
                prop_assert!(
                    !mentions(&shown, &fact) || mentions(&alone, &fact),
                    "an earlier question's {} shows in a later one's findings: {}",
                    fact,
                    shown
                );
            }
        }
    }
}

#[test]
fn the_token_test_finds_whole_numbers_only() {
    assert!(mentions("(= customerAge 287)", "287"));
    assert!(!mentions("(= customerAge 2870)", "287"));
    assert!(!mentions("(= x 1287)", "287"));
    assert!(!mentions("(= x 287.5)", "287"));
    assert!(mentions("(= totalAdmissionFund 1234.05)", "1234.05"));
    assert!(!mentions("(= totalAdmissionFund 1234.055)", "1234.05"));
}

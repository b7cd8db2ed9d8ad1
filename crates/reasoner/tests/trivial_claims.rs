//! Nothing trivial counts as proved (issue 10): a pair whose claims are empty, always true, a
//! restatement of a premise, or a consequence of the premises without any rule never yields
//! VALID, and the aggregate verdict over such findings is never VALID.

use proofgate_core::findings::{Finding, FindingKind};
use proofgate_core::policy::{PolicyDefinition, PolicyModel};
use proofgate_core::verdict::{aggregate_verdict, Verdict};
use proofgate_reasoner::{parse_translations, CheckOptions, Reasoner};
use proptest::prelude::*;
use serde_json::json;

const PARK: &str = include_str!("../../../examples/policies/park-admission.json");
const AIRLINE: &str = include_str!("../../../examples/policies/airline-refund.json");

fn model(json: &str) -> PolicyModel {
    PolicyModel::from_definition(PolicyDefinition::from_json(json).unwrap(), None).unwrap()
}

fn check(policy: &PolicyModel, premises: &[&str], claims: &[&str]) -> Vec<Finding> {
    let t = json!({"translations": [[{"premises": premises, "claims": claims}]]}).to_string();
    Reasoner::new(policy, CheckOptions::default())
        .unwrap()
        .validate(&parse_translations(&t).unwrap())
        .unwrap()
}

fn assert_not_covered(findings: &[Finding], what: &str) {
    assert!(
        findings.iter().all(|f| f.kind() != FindingKind::Valid),
        "{what}: {findings:?}"
    );
    let v = aggregate_verdict(findings);
    assert_eq!(v.verdict, Verdict::NoTranslations, "{what}: {findings:?}");
    let Finding::NoTranslations(f) = &findings[0] else {
        panic!("{what}: {findings:?}")
    };
    assert!(f.extra.contains_key("logicWarning"), "{what}: {f:?}");
    assert!(f.extra.contains_key("proofgateNote"), "{what}: {f:?}");
}

#[test]
fn the_issue_cases_are_not_covered() {
    let park = model(PARK);
    let empty = check(&park, &["(= ageClass SENIOR)"], &[]);
    assert_not_covered(&empty, "empty claims");
    // And the note says why: nothing was claimed (not "follows without the policy").
    let Finding::NoTranslations(f) = &empty[0] else {
        panic!("{empty:?}")
    };
    assert!(
        f.extra["proofgateNote"]
            .as_str()
            .unwrap()
            .contains("no claims"),
        "{f:?}"
    );
    assert_not_covered(&check(&park, &[], &[]), "no premises and no claims");
    assert_not_covered(
        &check(&park, &["(= ageClass SENIOR)"], &["true"]),
        "true claims",
    );
    assert_not_covered(
        &check(&park, &["(= ageClass SENIOR)"], &["(= ageClass SENIOR)"]),
        "claims restating a premise",
    );
    assert_not_covered(
        &check(&park, &["(= cashAmount 32.5)"], &["(>= cashAmount 30.0)"]),
        "claims following from the premises without a rule",
    );
}

#[test]
fn a_proper_translation_is_still_valid() {
    let airline = model(AIRLINE);
    let findings = check(
        &airline,
        &[
            "(= flightDisruptionReason CANCELLATION)",
            "(= ticketPrice 120.0)",
        ],
        &["(= refundAmount 120.0)"],
    );
    assert_eq!(findings[0].kind(), FindingKind::Valid, "{findings:?}");
    assert!(aggregate_verdict(&findings).is_valid());
    // A trivial pair beside it leaves the answer VALID only with the not-covered warning.
    let t = json!({"translations": [[
        {"premises": ["(= flightDisruptionReason CANCELLATION)", "(= ticketPrice 120.0)"],
         "claims": ["(= refundAmount 120.0)"]},
        {"premises": ["(= ticketPrice 120.0)"], "claims": ["(> ticketPrice 100.0)"]}
    ]]})
    .to_string();
    let findings = Reasoner::new(&airline, CheckOptions::default())
        .unwrap()
        .validate(&parse_translations(&t).unwrap())
        .unwrap();
    let v = aggregate_verdict(&findings);
    assert!(v.is_valid());
    assert!(v.warning.is_some(), "{findings:?}");
}

/// Premise statements over the park policy's variables, each with claims it implies alone.
fn premise_and_implied() -> impl Strategy<Value = (String, Vec<String>)> {
    prop_oneof![
        (0i64..120, 0i64..120).prop_map(|(age, below)| {
            let lo = below.min(age);
            (
                format!("(= customerAge {age})"),
                vec![
                    format!("(= customerAge {age})"),
                    format!("(>= customerAge {lo})"),
                    format!("(or (= customerAge {age}) isLowSeason)"),
                ],
            )
        }),
        (0u32..10_000, 0u32..10_000).prop_map(|(cents, less)| {
            let fee = f64::from(cents) / 100.0;
            let lo = f64::from(less.min(cents)) / 100.0;
            (
                format!("(= admissionFee {fee:.2})"),
                vec![
                    format!("(>= admissionFee {lo:.2})"),
                    format!("(<= admissionFee {fee:.2})"),
                    format!("(not (< admissionFee {lo:.2}))"),
                ],
            )
        }),
        prop::sample::select(vec!["ADULT", "SENIOR"]).prop_map(|c| {
            (
                format!("(= ageClass {c})"),
                vec![
                    format!("(= ageClass {c})"),
                    format!("(not (not (= ageClass {c})))"),
                ],
            )
        }),
        any::<bool>().prop_map(|b| {
            let p = if b {
                "isLowSeason"
            } else {
                "(not isLowSeason)"
            };
            (
                p.to_string(),
                vec![p.to_string(), "(or isLowSeason (not isLowSeason))".into()],
            )
        }),
    ]
}

/// Claims that hold whatever the premises.
fn tautology() -> impl Strategy<Value = String> {
    prop::sample::select(vec![
        "true".to_string(),
        "(or usesCredits (not usesCredits))".to_string(),
        "(= customerAge customerAge)".to_string(),
        "(=> isEntryAllowed isEntryAllowed)".to_string(),
        "(>= (+ cashAmount 1.0) cashAmount)".to_string(),
    ])
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn no_generated_trivial_translation_is_valid(
        pairs in prop::collection::vec(
            (prop::collection::vec(premise_and_implied(), 0..3), any::<u8>(), tautology(), 0u8..3),
            1..3,
        ),
        translators in 1usize..4,
    ) {
        let park = model(PARK);
        let mut json_pairs = Vec::new();
        for (premises, pick, taut, shape) in &pairs {
            let ps: Vec<&str> = premises.iter().map(|(p, _)| p.as_str()).collect();
            let implied: Vec<&String> = premises.iter().flat_map(|(_, c)| c).collect();
            let claims: Vec<String> = match (shape, implied.is_empty()) {
                (0, _) => Vec::new(),
                (1, false) => vec![implied[*pick as usize % implied.len()].clone()],
                (1, true) | (2, true) => vec![taut.clone()],
                _ => vec![implied[*pick as usize % implied.len()].clone(), taut.clone()],
            };
            json_pairs.push(json!({"premises": ps, "claims": claims}));
        }
        let t = json!({"translations": vec![json_pairs; translators]}).to_string();
        let findings = Reasoner::new(&park, CheckOptions::default())
            .unwrap()
            .validate(&parse_translations(&t).unwrap())
            .unwrap();
        prop_assert!(findings.iter().all(|f| f.kind() != FindingKind::Valid), "{:?}", findings);
        prop_assert!(!aggregate_verdict(&findings).is_valid(), "{:?}", findings);
    }
}

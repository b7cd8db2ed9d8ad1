//! Symbolic test generation and policy diff on the shipped example policies: generated cases
//! pass on the policy they came from, and a copy with one rule changed fails them, naming it.

use proofgate_core::policy::{PolicyDefinition, PolicyModel, PolicyTestSuite};
use proofgate_core::verdict::Verdict;
use proofgate_reasoner::{
    case_result, check_case, diff_policies, generate_tests, CaseStatus, CheckOptions,
    GenerateOptions, Reasoner, TestReport,
};

const PARK: &str = include_str!("../../../examples/policies/park-admission.json");
const AIRLINE: &str = include_str!("../../../examples/policies/airline-refund.json");

fn model(json: &str) -> PolicyModel {
    PolicyModel::from_definition(PolicyDefinition::from_json(json).unwrap(), None).unwrap()
}

fn run(model: &PolicyModel, suite: &PolicyTestSuite) -> TestReport {
    let reasoner = Reasoner::new(model, CheckOptions::default()).unwrap();
    TestReport::new(
        suite
            .tests
            .iter()
            .map(|c| case_result(c, check_case(&reasoner, c).map_err(|e| e.to_string())))
            .collect(),
    )
}

/// A copy of `json` with rule `id`'s expression replaced.
fn broken_copy(json: &str, id: &str, expression: &str) -> PolicyModel {
    let mut def = PolicyDefinition::from_json(json).unwrap();
    def.rules
        .iter_mut()
        .find(|r| r.id == id)
        .unwrap()
        .expression = expression.into();
    PolicyModel::from_definition(def, None).unwrap()
}

#[test]
fn generated_cases_pass_and_cover_every_rule_both_ways() {
    for json in [PARK, AIRLINE] {
        let policy = model(json);
        let generated = generate_tests(&policy, &GenerateOptions::default()).unwrap();
        let suite = &generated.suite;
        for rule in policy.rules() {
            let of_rule: Vec<_> = suite
                .tests
                .iter()
                .filter(|c| c.rule.as_deref() == Some(rule.id.as_str()))
                .collect();
            let redundant = generated.notes.iter().any(|n| n.rule == rule.id);
            assert!(
                redundant || of_rule.iter().any(|c| c.decisive == Some(true)),
                "no decisive case for {} ({:?})",
                rule.id,
                generated.notes
            );
            assert!(
                of_rule.iter().any(|c| c.decisive == Some(false)),
                "no non-decisive case for {}",
                rule.id
            );
        }
        // Decisive VALID and INVALID cases cite their rule.
        assert!(suite.tests.iter().any(|c| c.expected == Verdict::Valid
            && c.decisive == Some(true)
            && !c.expected_rules.is_empty()));
        assert!(suite
            .tests
            .iter()
            .any(|c| c.expected == Verdict::Invalid && c.decisive == Some(true)));
        let report = run(&policy, suite);
        assert!(
            report.all_passed(),
            "{:#?}",
            report
                .results
                .iter()
                .filter(|r| r.status != CaseStatus::Passed)
                .collect::<Vec<_>>()
        );
        // The file format round-trips.
        let again = PolicyTestSuite::from_json(&suite.to_json_pretty()).unwrap();
        assert_eq!(&again, suite);
    }
}

#[test]
fn a_broken_rule_fails_generated_cases_that_name_it() {
    let park = model(PARK);
    let suite = generate_tests(&park, &GenerateOptions::default())
        .unwrap()
        .suite;
    // The senior discount changed from 40% to 30%.
    let broken = broken_copy(
        PARK,
        "DISCOUNTRATE",
        "(= discountRate (ite discountApplies (ite usesCredits 0.25 0.30) 0.0))",
    );
    let report = run(&broken, &suite);
    assert!(!report.all_passed());
    let failed: Vec<_> = report
        .results
        .iter()
        .filter(|r| r.status == CaseStatus::Failed)
        .collect();
    assert!(
        failed
            .iter()
            .any(|r| r.rule.as_deref() == Some("DISCOUNTRATE")
                && r.id.starts_with("DISCOUNTRATE/decisive")),
        "{failed:#?}"
    );

    let airline = model(AIRLINE);
    let suite = generate_tests(&airline, &GenerateOptions::default())
        .unwrap()
        .suite;
    // Refunds for cancellations dropped.
    let broken = broken_copy(AIRLINE, "CANCELREFUND", "(=> (not didFlightOperate) true)");
    let report = run(&broken, &suite);
    let failed: Vec<_> = report
        .results
        .iter()
        .filter(|r| r.status == CaseStatus::Failed)
        .map(|r| r.rule.clone().unwrap_or_default())
        .collect();
    assert!(failed.contains(&"CANCELREFUND".to_string()), "{failed:?}");
}

#[test]
fn diff_reports_the_changed_rule_and_cases_whose_finding_changed() {
    let park = model(PARK);
    let mut def = PolicyDefinition::from_json(PARK).unwrap();
    def.rules
        .iter_mut()
        .find(|r| r.id == "BASEFEE00000")
        .unwrap()
        .expression = "(= baseFee 60.0)".into();
    def.variables.retain(|v| v.name != "customerAge");
    def.rules
        .retain(|r| r.id != "AGENONNEGATI" && r.id != "SENIORDEFINI");
    let new = PolicyModel::from_definition(def, None).unwrap();
    let diff = diff_policies(&park, &new, &GenerateOptions::default());
    let rules: Vec<_> = diff
        .definition
        .rules
        .iter()
        .map(|c| format!("{}:{:?}", c.name, c.kind))
        .collect();
    assert_eq!(
        rules,
        vec![
            "BASEFEE00000:Changed",
            "AGENONNEGATI:Removed",
            "SENIORDEFINI:Removed"
        ]
    );
    assert_eq!(diff.definition.variables[0].name, "customerAge");
    assert!(diff
        .changed_cases
        .iter()
        .any(|c| c.case.rule.as_deref() == Some("BASEFEE00000")
            && c.old.verdict.as_deref() == Some("VALID")
            && c.new.verdict.as_deref() == Some("INVALID")));
    // Cases about the removed variable cannot run on the new version.
    assert!(diff
        .changed_cases
        .iter()
        .any(|c| c.new.verdict.is_none() && c.new.label().contains("customerAge")));
    assert!(diff_policies(&park, &park, &GenerateOptions::default()).is_empty());
}

/// A change to any branch of a rule fails a generated case, whichever situations Z3 picks:
/// each combination of the rule's branch conditions gets its own decisive cases.
#[test]
fn a_change_to_any_branch_fails_a_generated_case() {
    let json = r#"{"variables": [
        {"name": "discount", "type": "BOOL", "description": "Whether a discount applies"},
        {"name": "credits", "type": "BOOL", "description": "Whether credits are used"},
        {"name": "rate", "type": "REAL", "description": "The discount rate"}],
      "rules": [{"id": "RATE00000000",
                 "expression": "(= rate (ite discount (ite credits 0.25 0.40) 0.0))"}]}"#;
    let suite = generate_tests(&model(json), &GenerateOptions::default())
        .unwrap()
        .suite;
    for changed in [
        "(= rate (ite discount (ite credits 0.20 0.40) 0.0))",
        "(= rate (ite discount (ite credits 0.25 0.30) 0.0))",
        "(= rate (ite discount (ite credits 0.25 0.40) 0.1))",
    ] {
        let report = run(&broken_copy(json, "RATE00000000", changed), &suite);
        assert!(
            !report.all_passed(),
            "every generated case passes with {changed}"
        );
    }
}

//! The paper's two examples (park admission, airline denied boarding), run on the shipped
//! policies, plus every finding kind and feedback field.

use proofgate_core::findings::{Finding, LogicWarningType, Scenario};
use proofgate_core::policy::{PolicyDefinition, PolicyModel};
use proofgate_reasoner::{parse_translations, CheckOptions, Reasoner};

const PARK: &str = include_str!("../../../examples/policies/park-admission.json");
const AIRLINE: &str = include_str!("../../../examples/policies/airline-refund.json");

fn model(json: &str) -> PolicyModel {
    PolicyModel::from_definition(PolicyDefinition::from_json(json).unwrap(), None).unwrap()
}

fn check(policy: &PolicyModel, translations: &str) -> Vec<Finding> {
    check_with(policy, translations, CheckOptions::default())
}

fn check_with(policy: &PolicyModel, translations: &str, options: CheckOptions) -> Vec<Finding> {
    let reasoner = Reasoner::new(policy, options).unwrap();
    reasoner
        .validate(&parse_translations(translations).unwrap())
        .unwrap()
}

/// One translator, one pair.
fn single(premises: &[&str], claims: &[&str]) -> String {
    serde_json::json!({"translations": [[{"premises": premises, "claims": claims}]]}).to_string()
}

fn value_of<'a>(s: &'a Scenario, var: &str) -> Option<&'a str> {
    let prefix = format!("(= {var} ");
    s.statements()
        .iter()
        .filter_map(|st| st.logic.as_deref())
        .find_map(|l| l.strip_prefix(&prefix)?.strip_suffix(')'))
}

fn rule_ids(rules: &Option<Vec<proofgate_core::findings::Rule>>) -> Vec<String> {
    rules
        .as_ref()
        .unwrap()
        .iter()
        .map(|r| r.identifier.clone().unwrap())
        .collect()
}

#[test]
fn park_senior_low_season_is_satisfiable_and_scenarios_differ_in_credit_use() {
    let park = model(PARK);
    let findings = check(
        &park,
        include_str!("../../../examples/policies/park-senior-low-season.translations.json"),
    );
    assert_eq!(findings.len(), 1, "{findings:?}");
    let Finding::Satisfiable(f) = &findings[0] else {
        panic!("expected SATISFIABLE, got {findings:?}")
    };
    let t = f.claims_true_scenario.as_ref().unwrap();
    let fl = f.claims_false_scenario.as_ref().unwrap();
    // Claim "cannot visit" true: no credits (40% discount, $35.75 > $35.40).
    assert_eq!(value_of(t, "isEntryAllowed"), Some("false"));
    assert_eq!(value_of(fl, "isEntryAllowed"), Some("true"));
    assert_ne!(value_of(t, "usesCredits"), value_of(fl, "usesCredits"));
    assert_eq!(value_of(fl, "usesCredits"), Some("true"));
    assert_ne!(value_of(t, "creditUnit"), value_of(fl, "creditUnit"));
    // Natural language uses the descriptions.
    assert!(fl.statements().iter().any(|s| s.natural_language.as_deref()
        == Some("Whether the visitor can afford to visit the park is true")));

    // The paper's Fig. 3: the simplest way the claim holds uses no credits; the closest way it
    // fails buys 3 increments (15 credits), and nothing unrelated changes.
    assert_eq!(value_of(t, "usesCredits"), Some("false"));
    assert_eq!(value_of(t, "creditUnit"), Some("0"));
    assert_eq!(value_of(fl, "creditUnit"), Some("3"));
    assert_eq!(value_of(fl, "customerCredits"), Some("15.0"));
    assert_eq!(value_of(fl, "totalExpense"), Some("35.3375"));
    // The differing variables come first, in both scenarios, and include the credits.
    let names = |s: &Scenario| -> Vec<String> {
        s.statements()
            .iter()
            .filter_map(|st| st.logic.as_deref())
            .map(|l| l[3..].split(' ').next().unwrap().to_string())
            .collect()
    };
    let (tn, fln) = (names(t), names(fl));
    assert_eq!(tn, fln);
    let differing: Vec<&String> = tn
        .iter()
        .take_while(|n| value_of(t, n) != value_of(fl, n))
        .collect();
    for credit in [
        "creditUnit",
        "customerCredits",
        "usesCredits",
        "isEntryAllowed",
    ] {
        assert!(
            differing.iter().any(|n| *n == credit),
            "{credit} not in {differing:?}"
        );
    }
    for same in [
        "customerAge",
        "ageClass",
        "isLowSeason",
        "totalAdmissionFund",
        "baseFee",
    ] {
        assert!(
            !differing.iter().any(|n| *n == same),
            "{same} in {differing:?}"
        );
    }
    // After the differing ones, the premises' and claims' variables, equal in both.
    assert!(tn[differing.len()..]
        .iter()
        .all(|n| value_of(t, n) == value_of(fl, n)));
    assert!(fl.statements()[..differing.len()].iter().any(|s| s
        .natural_language
        .as_deref()
        .is_some_and(|nl| nl.contains("credits"))));
    let tr = f.translation.as_ref().unwrap();
    assert_eq!(tr.confidence(), Some(1.0));
    assert!(f.logic_warning.is_none());
}

#[test]
fn airline_denied_boarding_is_impossible_with_both_rules() {
    let airline = model(AIRLINE);
    let findings = check(
        &airline,
        include_str!("../../../examples/policies/airline-denied-boarding.translations.json"),
    );
    assert_eq!(findings.len(), 1);
    let Finding::Impossible(f) = &findings[0] else {
        panic!("expected IMPOSSIBLE, got {findings:?}")
    };
    let mut ids = rule_ids(&f.contradicting_rules);
    ids.sort();
    assert_eq!(ids, vec!["DENIBOARREFU", "OPERNOTTRAVE"]);
    let arn = f.contradicting_rules.as_ref().unwrap()[0]
        .policy_version_arn
        .clone()
        .unwrap();
    assert_eq!(arn, airline.version_arn());
    assert!(arn.starts_with("sha256:"));
}

#[test]
fn valid_has_small_supporting_rules_and_a_scenario() {
    let airline = model(AIRLINE);
    let findings = check(
        &airline,
        &single(
            &[
                "(= flightDisruptionReason CANCELLATION)",
                "(= ticketPrice 120.0)",
            ],
            &["(= refundAmount 120.0)"],
        ),
    );
    let Finding::Valid(f) = &findings[0] else {
        panic!("expected VALID, got {findings:?}")
    };
    let mut ids = rule_ids(&f.supporting_rules);
    ids.sort();
    assert_eq!(ids, vec!["CANCELREFUND", "CANDIDNOTOPE", "REFUNDAMOUNT"]);
    let s = f.claims_true_scenario.as_ref().unwrap();
    assert_eq!(value_of(s, "refundAmount"), Some("120.0"));
    assert_eq!(value_of(s, "didFlightOperate"), Some("false"));
}

#[test]
fn invalid_names_the_contradicting_rules() {
    let airline = model(AIRLINE);
    let findings = check(
        &airline,
        &single(&["didPassengerTravel"], &["isRefundEligible"]),
    );
    let Finding::Invalid(f) = &findings[0] else {
        panic!("expected INVALID, got {findings:?}")
    };
    assert_eq!(rule_ids(&f.contradicting_rules), vec!["TRAVENOREFUN"]);
}

#[test]
fn logic_warnings_for_always_true_and_always_false_statements() {
    let airline = model(AIRLINE);
    let findings = check(
        &airline,
        &single(
            &["didPassengerTravel"],
            &["(or isRefundEligible (not isRefundEligible))"],
        ),
    );
    // An always-true claim proves nothing about the policy: never VALID (issue 10). It is
    // "not covered", with the ALWAYS_TRUE warning on the claim.
    let Finding::NoTranslations(f) = &findings[0] else {
        panic!("expected NO_TRANSLATIONS, got {findings:?}")
    };
    let w: proofgate_core::findings::LogicWarning =
        serde_json::from_value(f.extra["logicWarning"].clone()).unwrap();
    assert_eq!(w.warning_type, Some(LogicWarningType::AlwaysTrue));
    assert!(w.premises.is_none());
    assert_eq!(w.claims.as_ref().unwrap().len(), 1);

    let findings = check(
        &airline,
        &single(
            &["(and didPassengerTravel (not didPassengerTravel))"],
            &["isRefundEligible"],
        ),
    );
    let Finding::Impossible(f) = &findings[0] else {
        panic!("expected IMPOSSIBLE, got {findings:?}")
    };
    // No rule is needed to rule out a contradiction in the premises themselves.
    assert_eq!(rule_ids(&f.contradicting_rules), Vec::<String>::new());
    let w = f.logic_warning.as_ref().unwrap();
    assert_eq!(w.warning_type, Some(LogicWarningType::AlwaysFalse));
    assert_eq!(w.premises.as_ref().unwrap().len(), 1);
}

#[test]
fn contradictory_policy_makes_everything_impossible_with_the_rules() {
    let policy = model(
        r#"{"variables":[{"name":"x","type":"int"},{"name":"b","type":"bool"}],
            "rules":[{"id":"POS","expression":"(> x 5)"},{"id":"UNRELATED","expression":"(=> b (> x 0))"},
                     {"id":"SMALL","expression":"(< x 3)"}]}"#,
    );
    let findings = check(&policy, &single(&["b"], &["(> x 0)"]));
    let Finding::Impossible(f) = &findings[0] else {
        panic!("expected IMPOSSIBLE, got {findings:?}")
    };
    let mut ids = rule_ids(&f.contradicting_rules);
    ids.sort();
    assert_eq!(ids, vec!["POS", "SMALL"]);
    let reasoner = Reasoner::new(&policy, CheckOptions::default()).unwrap();
    let mut c = reasoner.contradictory_rules().unwrap().unwrap();
    c.sort();
    assert_eq!(c, vec!["POS", "SMALL"]);
}

#[test]
fn no_translations_and_untranslated_text() {
    let airline = model(AIRLINE);
    let findings = check(
        &airline,
        r#"{"translations": [{"pairs": [], "untranslatedClaims": ["the food was nice"]}]}"#,
    );
    assert_eq!(findings.len(), 1);
    let Finding::NoTranslations(f) = &findings[0] else {
        panic!("{findings:?}")
    };
    assert_eq!(
        f.extra["translation"]["untranslatedClaims"][0]["text"],
        "the food was nice"
    );
    let findings = check(
        &airline,
        r#"{"translations": [{"pairs": [{"premises": ["didPassengerTravel"], "claims": ["(not isRefundEligible)"]}],
            "untranslatedPremises": ["I had a window seat"]}]}"#,
    );
    assert_eq!(findings.len(), 2);
    let Finding::Valid(v) = &findings[0] else {
        panic!("{findings:?}")
    };
    let tr = v.translation.as_ref().unwrap();
    assert_eq!(
        tr.untranslated_premises.as_ref().unwrap()[0]
            .text
            .as_deref(),
        Some("I had a window seat")
    );
    assert!(matches!(findings[1], Finding::NoTranslations(_)));
}

#[test]
fn too_complex_on_limits_and_timeouts() {
    let airline = model(AIRLINE);
    let long = format!("(and {})", "didPassengerTravel ".repeat(2000));
    let findings = check_with(
        &airline,
        &single(&[&long], &["isRefundEligible"]),
        CheckOptions {
            max_statement_chars: 1000,
            ..CheckOptions::default()
        },
    );
    assert!(
        matches!(findings[0], Finding::TooComplex(_)),
        "{findings:?}"
    );
    let findings = check_with(
        &airline,
        &single(&["didPassengerTravel"], &["isRefundEligible"]),
        CheckOptions {
            max_formula_nodes: 1,
            ..CheckOptions::default()
        },
    );
    assert!(
        matches!(findings[0], Finding::TooComplex(_)),
        "{findings:?}"
    );
    let deep = format!(
        "{}didPassengerTravel{}",
        "(not ".repeat(300),
        ")".repeat(300)
    );
    let findings = check(&airline, &single(&[&deep], &["isRefundEligible"]));
    assert!(
        matches!(findings[0], Finding::TooComplex(_)),
        "{findings:?}"
    );
}

#[test]
fn solver_timeout_is_too_complex_never_valid() {
    // Nonlinear integer arithmetic that Z3 cannot settle in a millisecond.
    let policy = model(
        r#"{"variables":[{"name":"x","type":"int"},{"name":"y","type":"int"},{"name":"z","type":"int"}],
            "rules":[{"id":"FERMAT","expression":"(and (> x 0) (> y 0) (> z 0))"}]}"#,
    );
    let findings = check_with(
        &policy,
        &single(&[], &["(distinct (+ (* x x x) (* y y y)) (* z z z))"]),
        CheckOptions {
            timeout_ms: 1,
            ..CheckOptions::default()
        },
    );
    assert!(
        matches!(findings[0], Finding::TooComplex(_)),
        "{findings:?}"
    );
}

#[test]
fn agreeing_translators_give_confidence_one() {
    let airline = model(AIRLINE);
    // Same meaning, different form: one finding with confidence 1.
    let findings = check(
        &airline,
        r#"{"translations": [
            [{"premises": ["didPassengerTravel"], "claims": ["(not isRefundEligible)"]}],
            [{"premises": ["(not (not didPassengerTravel))"], "claims": ["(= isRefundEligible false)"]}],
            [{"premises": ["(and didPassengerTravel true)"], "claims": [{"logic": "(not isRefundEligible)", "naturalLanguage": "no refund"}]}]
        ]}"#,
    );
    assert_eq!(findings.len(), 1, "{findings:?}");
    let Finding::Valid(v) = &findings[0] else {
        panic!("{findings:?}")
    };
    assert_eq!(v.translation.as_ref().unwrap().confidence(), Some(1.0));
}

#[test]
fn disagreeing_translators_are_ambiguous_with_options_and_difference_scenarios() {
    let airline = model(AIRLINE);
    let t = r#"{"translations": [
        [{"premises": ["didPassengerTravel"], "claims": ["(not isRefundEligible)"]}],
        [{"premises": ["didPassengerTravel"], "claims": ["(not isRefundEligible)"]}],
        [{"premises": ["didPassengerTravel"], "claims": ["isRefundEligible"]}]
    ]}"#;
    let findings = check(&airline, t);
    assert_eq!(findings.len(), 1, "{findings:?}");
    let Finding::TranslationAmbiguous(f) = &findings[0] else {
        panic!("{findings:?}")
    };
    let options = f.options.as_ref().unwrap();
    assert_eq!(options.len(), 2);
    let first = &options[0].translations.as_ref().unwrap()[0];
    assert!((first.confidence().unwrap() - 2.0 / 3.0).abs() < 1e-9);
    let second = &options[1].translations.as_ref().unwrap()[0];
    assert_eq!(
        second.claims()[0].logic.as_deref(),
        Some("isRefundEligible")
    );
    let scenarios = f.difference_scenarios.as_ref().unwrap();
    assert_eq!(scenarios.len(), 1);
    assert!(value_of(&scenarios[0], "isRefundEligible").is_some());

    // With a 2/3 threshold the majority reading is checked and the minority one is ambiguous.
    let findings = check_with(
        &airline,
        t,
        CheckOptions {
            confidence_threshold: 2.0 / 3.0,
            ..CheckOptions::default()
        },
    );
    let kinds: Vec<_> = findings.iter().map(|f| f.kind().as_str()).collect();
    assert_eq!(kinds, vec!["VALID", "TRANSLATION_AMBIGUOUS"]);
}

#[test]
fn malformed_statements_are_errors_naming_the_path() {
    let airline = model(AIRLINE);
    let reasoner = Reasoner::new(&airline, CheckOptions::default()).unwrap();
    for (statement, expected) in [
        ("x) (assert false", "at translations[0][0].claims[0]: syntax error: unexpected `)` at offset 1"),
        ("(> isRefundEligible 1)", "at translations[0][0].claims[0]: type error at offset 3: wrong type: argument 1 of `>` must be Int or Real, found Bool"),
        ("(and isRefundEligible", "unbalanced parentheses"),
        ("refundEligible", "unknown variable `refundEligible`"),
    ] {
        let t = parse_translations(&single(&["didPassengerTravel"], &[statement])).unwrap();
        let e = reasoner.validate(&t).unwrap_err().to_string();
        assert!(e.contains(expected), "{e}");
    }
}

//! Rule slicing never changes a finding's kind: over generated policies (several unconnected
//! groups of rules, consistent or not) and generated premise/claim pairs, the check against
//! the rules connected to the pair's variables gives the same kind as the check against every
//! rule, and the rules it cites are rules of the policy that mention the pair's group.

use proofgate_core::findings::Finding;
use proofgate_core::policy::PolicyModel;
use proofgate_reasoner::{parse_translations, CheckOptions, Reasoner};
use proptest::prelude::*;
use serde_json::json;

mod common;

const BOOLS: usize = 6;
const INTS: usize = 4;

fn var(i: usize) -> String {
    if i < BOOLS {
        format!("b{i}")
    } else {
        format!("x{}", i - BOOLS)
    }
}

/// An atom over variable `v` (Bool or Int) with a small constant.
fn atom(v: usize, k: i64, shape: u8) -> String {
    if v < BOOLS {
        if shape.is_multiple_of(2) {
            var(v)
        } else {
            format!("(not {})", var(v))
        }
    } else {
        match shape % 3 {
            0 => format!("(> {} {k})", var(v)),
            1 => format!("(<= {} {k})", var(v)),
            _ => format!("(= {} {k})", var(v)),
        }
    }
}

fn atom_strategy() -> impl Strategy<Value = String> {
    (0..BOOLS + INTS, 0i64..4, any::<u8>()).prop_map(|(v, k, s)| atom(v, k, s))
}

/// Rules between a few variables: implications, disjunctions, orderings, plain facts.
fn rule_strategy() -> impl Strategy<Value = String> {
    prop_oneof![
        (atom_strategy(), atom_strategy()).prop_map(|(a, b)| format!("(=> {a} {b})")),
        (atom_strategy(), atom_strategy()).prop_map(|(a, b)| format!("(or {a} {b})")),
        (0..INTS, 0..INTS).prop_map(|(a, b)| format!("(<= {} {})", var(BOOLS + a), var(BOOLS + b))),
        atom_strategy(),
        (atom_strategy(), atom_strategy(), atom_strategy())
            .prop_map(|(a, b, c)| format!("(=> (and {a} {b}) {c})")),
    ]
}

fn policy(rules: &[String]) -> PolicyModel {
    let variables = (0..BOOLS + INTS).map(|i| (var(i), if i < BOOLS { "BOOL" } else { "INT" }));
    common::generated_policy(variables, rules)
}

fn findings(model: &PolicyModel, slice: bool, premises: &[String], claims: &[String]) -> String {
    let options = CheckOptions {
        slice_rules: slice,
        ..CheckOptions::default()
    };
    let t = json!({"translations": [[{"premises": premises, "claims": claims}]]}).to_string();
    let found = Reasoner::new(model, options)
        .unwrap()
        .validate(&parse_translations(&t).unwrap())
        .unwrap();
    found
        .iter()
        .map(|f| f.kind().as_str())
        .collect::<Vec<_>>()
        .join(",")
}

fn cited_rules(f: &Finding) -> Vec<String> {
    let rules = match f {
        Finding::Valid(v) => v.supporting_rules.clone(),
        Finding::Invalid(c) | Finding::Impossible(c) => c.contradicting_rules.clone(),
        _ => None,
    };
    rules
        .unwrap_or_default()
        .iter()
        .filter_map(|r| r.identifier.clone())
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 200, ..ProptestConfig::default() })]

    #[test]
    fn sliced_and_whole_checks_agree(
        rules in prop::collection::vec(rule_strategy(), 1..10),
        premises in prop::collection::vec(atom_strategy(), 0..3),
        claims in prop::collection::vec(atom_strategy(), 0..3),
    ) {
        let model = policy(&rules);
        let whole = findings(&model, false, &premises, &claims);
        let sliced = findings(&model, true, &premises, &claims);
        prop_assert_eq!(&sliced, &whole, "rules {:?} premises {:?} claims {:?}", rules, premises, claims);
    }
}

#[test]
fn a_contradiction_elsewhere_still_makes_every_pair_impossible() {
    // b0/b1 never meet b5, but the policy as a whole has no model: no slice may hide that.
    let model = policy(&["(=> b0 b1)".into(), "b5".into(), "(not b5)".into()]);
    for slice in [false, true] {
        assert_eq!(
            findings(&model, slice, &["b0".into()], &["b1".into()]),
            "IMPOSSIBLE"
        );
    }
}

#[test]
fn a_sliced_valid_cites_only_connected_rules() {
    let model = policy(&[
        "(=> b0 b1)".into(),
        "(=> b2 b3)".into(),
        "(<= x0 x1)".into(),
    ]);
    let t = json!({"translations": [[{"premises": ["b0"], "claims": ["b1"]}]]}).to_string();
    let found = Reasoner::new(&model, CheckOptions::default())
        .unwrap()
        .validate(&parse_translations(&t).unwrap())
        .unwrap();
    assert!(matches!(found[0], Finding::Valid(_)), "{found:?}");
    assert_eq!(cited_rules(&found[0]), vec!["R0".to_string()]);
}

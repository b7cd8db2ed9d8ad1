//! k translators writing the same pair: the pair is checked once, and the findings are
//! those of one translator writing it alone (confidence 1 either way): the same kinds,
//! translations, rules and warnings, and scenarios with as many differences (over the same
//! variables, for VALID). Where several situations are equally simple or equally close,
//! which one Z3 returns depends on the terms made before, so values are not compared.

use proofgate_core::policy::PolicyModel;
use proofgate_reasoner::{parse_translations, CheckOptions, Reasoner};
use proptest::prelude::*;
use serde_json::json;

mod common;

const BOOLS: usize = 5;
const INTS: usize = 3;

fn var(i: usize) -> String {
    if i < BOOLS {
        format!("b{i}")
    } else {
        format!("x{}", i - BOOLS)
    }
}

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

fn rule_strategy() -> impl Strategy<Value = String> {
    prop_oneof![
        (atom_strategy(), atom_strategy()).prop_map(|(a, b)| format!("(=> {a} {b})")),
        (atom_strategy(), atom_strategy()).prop_map(|(a, b)| format!("(or {a} {b})")),
        atom_strategy(),
    ]
}

fn policy(rules: &[String]) -> PolicyModel {
    let variables = (0..BOOLS + INTS).map(|i| (var(i), if i < BOOLS { "BOOL" } else { "INT" }));
    common::generated_policy(variables, rules)
}

fn findings(model: &PolicyModel, k: usize, premises: &[String], claims: &[String]) -> String {
    let one = json!([{"premises": premises, "claims": claims}]);
    let t = json!({ "translations": vec![one; k] }).to_string();
    let found = Reasoner::new(model, CheckOptions::default())
        .unwrap()
        .validate(&parse_translations(&t).unwrap())
        .unwrap();
    let mut found = serde_json::to_value(&found).unwrap();
    for f in found.as_array_mut().unwrap() {
        for (_, body) in f.as_object_mut().unwrap().iter_mut() {
            let Some(body) = body.as_object_mut() else {
                continue;
            };
            let scenario = |name: &str| -> Vec<String> {
                body.get(name)
                    .and_then(|s| s["statements"].as_array())
                    .map(|st| {
                        st.iter()
                            .map(|s| s["logic"].as_str().unwrap().to_string())
                            .collect()
                    })
                    .unwrap_or_default()
            };
            let (t, fl) = (
                scenario("claimsTrueScenario"),
                scenario("claimsFalseScenario"),
            );
            let differences = t.iter().filter(|s| !fl.contains(s)).count();
            // "(= name value)" -> name
            let names = |s: &[String]| -> Vec<String> {
                s.iter()
                    .map(|l| l.split(' ').nth(1).unwrap_or_default().to_string())
                    .collect::<std::collections::BTreeSet<_>>()
                    .into_iter()
                    .collect()
            };
            // Which variable changes, among equally close situations, is Z3's choice too.
            if fl.is_empty() {
                body.insert("trueVariables".into(), json!(names(&t)));
            }
            // Which of several minimal rule sets (unsat cores) is reported is Z3's choice as
            // well: with rules `b3` and `(not b4)`, each alone contradicts `b4, (not b3)`.
            for rules in ["supportingRules", "contradictingRules"] {
                if let Some(list) = body.get(rules).and_then(|r| r.as_array()) {
                    let some = !list.is_empty();
                    body.insert(rules.into(), json!(some));
                }
            }
            body.remove("claimsTrueScenario");
            body.remove("claimsFalseScenario");
            body.insert("differences".into(), json!(differences));
        }
    }
    found.to_string()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 100, ..ProptestConfig::default() })]

    #[test]
    fn identical_translations_give_the_findings_of_one(
        rules in prop::collection::vec(rule_strategy(), 1..8),
        premises in prop::collection::vec(atom_strategy(), 0..3),
        claims in prop::collection::vec(atom_strategy(), 0..3),
    ) {
        let model = policy(&rules);
        let alone = findings(&model, 1, &premises, &claims);
        let three = findings(&model, 3, &premises, &claims);
        prop_assert_eq!(&three, &alone, "rules {:?} premises {:?} claims {:?}", rules, premises, claims);
    }
}

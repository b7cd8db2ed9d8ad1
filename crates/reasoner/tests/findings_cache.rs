//! The findings cache never changes a verdict: over generated sequences of translations (with
//! repeats, so entries are hit), findings through a long-lived reasoner and the cache are the
//! findings a fresh reasoner computes without it (kinds, rules, verdict), and a hit returns
//! exactly what was computed on the miss.

use proofgate_core::findings::Finding;
use proofgate_core::policy::{PolicyDefinition, PolicyModel};
use proofgate_core::verdict::aggregate_verdict;
use proofgate_reasoner::{
    parse_translations, CheckOptions, FindingsCache, FindingsKey, Reasoner, TranslatorOutput,
};
use proptest::prelude::*;
use serde_json::json;
use std::collections::HashMap;

const PARK: &str = include_str!("../../../examples/policies/park-admission.json");

/// Statements about the park policy: facts, always-true ones, contradictory ones.
const ATOMS: &[&str] = &[
    "(= ageClass SENIOR)",
    "(= ageClass ADULT)",
    "isLowSeason",
    "(not isLowSeason)",
    "(= totalAdmissionFund 35.4)",
    "(= totalAdmissionFund 100.0)",
    "isEntryAllowed",
    "(not isEntryAllowed)",
    "discountApplies",
    "(> customerAge 70)",
    "(< customerAge 0)",
    "usesCredits",
    "(= admissionFee 37.5)",
    "true",
];

fn model() -> PolicyModel {
    PolicyModel::from_definition(PolicyDefinition::from_json(PARK).unwrap(), None).unwrap()
}

fn translations_strategy() -> impl Strategy<Value = Vec<TranslatorOutput>> {
    let pair = (
        prop::collection::vec(0..ATOMS.len(), 0..3),
        prop::collection::vec(0..ATOMS.len(), 0..2),
    );
    // 1 to 3 translators, each with one pair; often the same pair (agreement).
    (
        pair.clone(),
        prop::collection::vec(any::<bool>(), 0..3),
        pair,
    )
        .prop_map(|((p, c), same, (p2, c2))| {
            let text = |ix: &[usize]| ix.iter().map(|&i| ATOMS[i]).collect::<Vec<_>>();
            let mut outs = vec![json!([{"premises": text(&p), "claims": text(&c)}])];
            for s in same {
                outs.push(if s {
                    outs[0].clone()
                } else {
                    json!([{"premises": text(&p2), "claims": text(&c2)}])
                });
            }
            parse_translations(&json!({ "translations": outs }).to_string()).unwrap()
        })
}

/// What must never change: each finding's kind and cited rules, and the verdict.
fn summary(findings: &[Finding]) -> String {
    let parts: Vec<String> = findings
        .iter()
        .map(|f| {
            let rules = match f {
                Finding::Valid(v) => v.supporting_rules.clone(),
                Finding::Invalid(c) | Finding::Impossible(c) => c.contradicting_rules.clone(),
                _ => None,
            }
            .unwrap_or_default()
            .iter()
            .filter_map(|r| r.identifier.clone())
            .collect::<Vec<_>>();
            format!("{}{rules:?}", f.kind().as_str())
        })
        .collect();
    format!(
        "{:?} {}",
        aggregate_verdict(findings).verdict,
        parts.join(",")
    )
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    #[test]
    fn cached_findings_are_the_uncached_ones(
        queries in prop::collection::vec(translations_strategy(), 1..6),
        order in prop::collection::vec(0usize..6, 4..12),
    ) {
        let model = model();
        let hash = model.definition().content_hash();
        let warm = Reasoner::new(&model, CheckOptions::default()).unwrap();
        let cache = FindingsCache::new(4);
        let mut seen: HashMap<FindingsKey, String> = HashMap::new();
        for i in order {
            let q = &queries[i % queries.len()];
            let key = FindingsKey::new("caller", &hash, q).unwrap();
            let through_cache = match cache.get(&key) {
                Some(f) => {
                    // A hit is exactly what was computed on the miss.
                    prop_assert_eq!(Some(&serde_json::to_string(&f).unwrap()), seen.get(&key));
                    f
                }
                None => {
                    let f = warm.validate(q).unwrap();
                    cache.insert(key.clone(), &f);
                    seen.insert(key, serde_json::to_string(&f).unwrap());
                    f
                }
            };
            let fresh = Reasoner::new(&model, CheckOptions::default())
                .unwrap()
                .validate(q)
                .unwrap();
            prop_assert_eq!(summary(&through_cache), summary(&fresh), "{:?}", q);
        }
        prop_assert!(cache.stats().entries <= 4);
    }
}

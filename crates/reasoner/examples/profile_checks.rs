//! Runs the park example's checks on one reasoner, for profilers (instruction counts with
//! `valgrind --tool=callgrind` are repeatable where wall time is not):
//!
//!   profile_checks distinct N   N checks, each with a different visitor age (what the proxy's
//!                               distinct-questions benchmark sends: three identical translations)
//!   profile_checks repeated N   N checks of the shipped senior/low-season translations
//!   profile_checks idle         loads the policy and warms up only (the fixed cost)

use proofgate_core::policy::{PolicyDefinition, PolicyModel};
use proofgate_reasoner::{parse_translations, CheckOptions, Reasoner, TranslatorOutput};

const PARK: &str = include_str!("../../../examples/policies/park-admission.json");
const PARK_T: &str =
    include_str!("../../../examples/policies/park-senior-low-season.translations.json");

/// Three translators agreeing on the echo translator's pair for `age`.
fn distinct(age: u64) -> Vec<TranslatorOutput> {
    let pair = serde_json::json!({
        "premises": [format!("(= customerAge {age})"), "isLowSeason", "(not usesCredits)"],
        "claims": ["(= feeAfterDiscount 22.5)"],
    });
    let t = serde_json::json!({ "translations": [[pair], [pair], [pair]] });
    parse_translations(&t.to_string()).expect("translations")
}

fn main() {
    let mut args = std::env::args().skip(1);
    let mode = args.next().unwrap_or_else(|| "distinct".into());
    let n: u64 = args.next().and_then(|s| s.parse().ok()).unwrap_or(100);
    let model = PolicyModel::from_definition(PolicyDefinition::from_json(PARK).unwrap(), None)
        .expect("park policy");
    let reasoner = Reasoner::new(&model, CheckOptions::default()).expect("encodes");
    reasoner.warm_up();
    let repeated = parse_translations(PARK_T).unwrap();
    let mut kinds = std::collections::BTreeMap::<String, usize>::new();
    for i in 0..n {
        let findings = match mode.as_str() {
            "distinct" => reasoner.validate(&distinct(66 + i)),
            "repeated" => reasoner.validate(&repeated),
            _ => break,
        }
        .expect("well-formed");
        for f in findings {
            *kinds.entry(f.kind().as_str().to_string()).or_default() += 1;
        }
    }
    println!("{mode} x{n}: {kinds:?}");
}

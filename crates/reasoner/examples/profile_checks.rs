//! Runs the park example's checks on one reasoner, for profilers (instruction counts with
//! `valgrind --tool=callgrind` are repeatable where wall time is not):
//!
//!   profile_checks distinct N   N checks, each with a different visitor age (what the proxy's
//!                               distinct-questions benchmark sends: three identical translations)
//!   profile_checks repeated N   N checks of the shipped senior/low-season translations
//!   profile_checks idle         loads the policy and warms up only (the fixed cost)
//!   profile_checks rss          the resident set after each step of loading (Z3 contexts)
//!                               (with Z3_HEAP=1 in the environment, `distinct` and `repeated`
//!                               print Z3's heap every 128 checks: what a worker keeps)
//!   profile_checks findings     the findings of the shipped examples and the test suites
//!                               generated from them, as JSON (to compare Z3 versions)
//!   profile_checks recheck FILE  the findings of the shipped examples and of the generated
//!                               cases listed in FILE (an earlier `findings` output), in the
//!                               same format: test generation picks other cases from run to
//!                               run (Z3's tactics race a timer), so comparing the checks of
//!                               one method with another's needs the same cases

use proofgate_core::policy::test_suite::PolicyTestCase;
use proofgate_core::policy::{PolicyDefinition, PolicyModel};
use proofgate_reasoner::{
    check_case, generate_tests, parse_translations, CheckOptions, GenerateOptions, Reasoner,
    TranslatorOutput,
};

const PARK: &str = include_str!("../../../examples/policies/park-admission.json");
const PARK_T: &str =
    include_str!("../../../examples/policies/park-senior-low-season.translations.json");
const AIRLINE: &str = include_str!("../../../examples/policies/airline-refund.json");
const AIRLINE_T: &str =
    include_str!("../../../examples/policies/airline-denied-boarding.translations.json");

/// Findings of the shipped translations, of distinct ages (below, at and above the senior
/// threshold) and the generated test suites of both policies, one JSON line each.
fn findings(recheck: Option<&str>) {
    for (name, policy, translations) in [("park", PARK, PARK_T), ("airline", AIRLINE, AIRLINE_T)] {
        let model =
            PolicyModel::from_definition(PolicyDefinition::from_json(policy).unwrap(), None)
                .expect("policy");
        let reasoner = Reasoner::new(&model, CheckOptions::default()).expect("encodes");
        let t = parse_translations(translations).unwrap();
        let f = reasoner.validate(&t).expect("well-formed");
        println!("{name} shipped: {}", serde_json::to_string(&f).unwrap());
        if name == "park" {
            for age in [0, 30, 65, 66, 70, 1_000_000] {
                let f = reasoner.validate(&distinct(age)).expect("well-formed");
                println!("{name} age {age}: {}", serde_json::to_string(&f).unwrap());
            }
        }
        if let Some(listed) = recheck {
            let prefix = format!("{name} generated ");
            for line in listed.lines().filter_map(|l| l.strip_prefix(&prefix)) {
                let case: PolicyTestCase = serde_json::Deserializer::from_str(line)
                    .into_iter()
                    .next()
                    .expect("a case")
                    .expect("a case");
                let f = check_case(&reasoner, &case).map(|f| serde_json::to_string(&f).unwrap());
                println!(
                    "{prefix}{}: {}",
                    serde_json::to_string(&case).unwrap(),
                    f.unwrap_or_else(|e| e.to_string())
                );
            }
            continue;
        }
        let generated = generate_tests(&model, &GenerateOptions::default()).expect("generates");
        for case in &generated.suite.tests {
            let f = check_case(&reasoner, case).map(|f| serde_json::to_string(&f).unwrap());
            println!(
                "{name} generated {}: {}",
                serde_json::to_string(case).unwrap(),
                f.unwrap_or_else(|e| e.to_string())
            );
        }
        for note in &generated.notes {
            println!("{name} note: {note:?}");
        }
    }
}

/// Three translators agreeing on the echo translator's pair for `age`.
fn distinct(age: u64) -> Vec<TranslatorOutput> {
    let pair = serde_json::json!({
        "premises": [format!("(= customerAge {age})"), "isLowSeason", "(not usesCredits)"],
        "claims": ["(= feeAfterDiscount 22.5)"],
    });
    let t = serde_json::json!({ "translations": [[pair], [pair], [pair]] });
    parse_translations(&t.to_string()).expect("translations")
}

/// The resident set (anonymous and file-backed) of this process, from /proc.
fn rss(at: &str) {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let of = |key: &str| {
        status
            .lines()
            .find(|l| l.starts_with(key))
            .map(|l| l[key.len()..].trim().to_string())
            .unwrap_or_default()
    };
    println!(
        "{at:<40} RssAnon {:>10} RssFile {:>10} Z3 heap {:>6} kB",
        of("RssAnon:"),
        of("RssFile:"),
        z3_heap_kb()
    );
}

/// What Z3 has allocated, in all contexts (its own count).
fn z3_heap_kb() -> u64 {
    extern "C" {
        fn Z3_get_estimated_alloc_size() -> u64;
    }
    // SAFETY: reads a global counter; no argument, no context needed.
    (unsafe { Z3_get_estimated_alloc_size() }) / 1024
}

fn main() {
    let mut args = std::env::args().skip(1);
    let mode = args.next().unwrap_or_else(|| "distinct".into());
    if mode == "findings" {
        findings(None);
        return;
    }
    if mode == "recheck" {
        let file = args.next().expect("recheck FILE");
        findings(Some(&std::fs::read_to_string(file).expect("readable")));
        return;
    }
    if mode == "rss" {
        rss("start");
        let model = PolicyModel::from_definition(PolicyDefinition::from_json(PARK).unwrap(), None)
            .expect("park policy");
        let z = z3::ast::Bool::from_bool(true);
        drop(z);
        rss("z3 context of this thread");
        let reasoner = Reasoner::new(&model, CheckOptions::default()).expect("encodes");
        rss("policy loaded");
        reasoner.warm_up();
        rss("warmed up");
        let _ = reasoner.validate(&distinct(70));
        rss("one check");
        std::thread::scope(|s| {
            s.spawn(|| {
                let r = Reasoner::new(&model, CheckOptions::default()).expect("encodes");
                r.warm_up();
                rss("a second thread's reasoner, warmed up");
            });
        });
        rss("second thread ended");
        // Its context goes with the thread's locals, after the scope has returned.
        std::thread::sleep(std::time::Duration::from_millis(300));
        rss("300 ms later");
        return;
    }
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
        if std::env::var_os("Z3_HEAP").is_some() && i % 128 == 0 {
            println!("after {i} checks: Z3 heap {} kB", z3_heap_kb());
        }
    }
    println!("{mode} x{n}: {kinds:?}");
}

//! Time per check (`Reasoner::validate` on one translation) on the example policies and on
//! generated policies at Bedrock's limits (1,500 rules, 600 variables, 150 types) and at 10x.
//! Prints medians; run with `cargo bench -p proofgate-reasoner` or `just bench-reasoner`.

use proofgate_core::policy::{PolicyDefinition, PolicyModel};
use proofgate_reasoner::{
    parse_translations, CheckOptions, FindingsCache, FindingsKey, Reasoner, TranslatorOutput,
};
use std::fmt::Write as _;
use std::time::{Duration, Instant};

const PARK: &str = include_str!("../../../examples/policies/park-admission.json");
const PARK_T: &str =
    include_str!("../../../examples/policies/park-senior-low-season.translations.json");
const AIRLINE: &str = include_str!("../../../examples/policies/airline-refund.json");
const AIRLINE_T: &str =
    include_str!("../../../examples/policies/airline-denied-boarding.translations.json");

fn median(mut xs: Vec<Duration>) -> Duration {
    xs.sort();
    xs[xs.len() / 2]
}

fn model(json: &str) -> PolicyModel {
    PolicyModel::from_definition(
        PolicyDefinition::from_json(json).expect("policy JSON"),
        None,
    )
    .expect("valid policy")
}

/// A benchmark's figures.
#[derive(Default, Clone, Copy)]
struct Figures {
    median: Duration,
    max: Duration,
    too_complex: usize,
}

fn skipped(name: &str) -> bool {
    std::env::var_os("BENCH_FILTER")
        .is_some_and(|filter| !name.contains(filter.to_string_lossy().as_ref()))
}

/// Times `validate` over `queries` (round robin) `runs` times; returns the median, the max and
/// how many findings were TOO_COMPLEX.
fn bench(
    name: &str,
    policy: &PolicyModel,
    queries: &[Vec<TranslatorOutput>],
    runs: usize,
) -> Figures {
    if skipped(name) {
        return Figures::default();
    }
    let start = Instant::now();
    let reasoner = Reasoner::new(policy, CheckOptions::default()).expect("encodes");
    // As a proxy's reasoner worker runs its checks: with one watchdog thread for all of them.
    let (load, times, kinds) = proofgate_reasoner::with_watchdog(|| {
        // Once per policy version and worker: is the whole policy consistent (what slicing
        // needs).
        reasoner.warm_up();
        let load = start.elapsed();
        let mut times = Vec::new();
        let mut kinds = std::collections::BTreeMap::<&str, usize>::new();
        for i in 0..runs {
            let q = &queries[i % queries.len()];
            let t = Instant::now();
            let findings = reasoner.validate(q).expect("well-formed query");
            times.push(t.elapsed());
            for f in &findings {
                *kinds.entry(f.kind().as_str()).or_default() += 1;
            }
        }
        (load, times, kinds)
    });
    let (min, max) = (
        *times.iter().min().unwrap_or(&Duration::ZERO),
        *times.iter().max().unwrap_or(&Duration::ZERO),
    );
    let m = median(times);
    let too_complex = kinds.get("TOO_COMPLEX").copied().unwrap_or(0);
    println!(
        "{name:<44} rules={:<6} vars={:<5} load={:>9.1?} check median={:>9.2?} min={:>9.2?} max={:>9.2?} runs={runs} findings={kinds:?}",
        policy.rules().len(),
        policy.schema().variables().count(),
        load,
        m,
        min,
        max,
    );
    Figures {
        median: m,
        max,
        too_complex,
    }
}

/// A repeated question through the proxy's findings cache: key, lookup, copy of the findings.
fn bench_cached(name: &str, policy: &PolicyModel, query: &[TranslatorOutput]) -> Duration {
    if skipped(name) {
        return Duration::ZERO;
    }
    let reasoner = Reasoner::new(policy, CheckOptions::default()).expect("encodes");
    let cache = FindingsCache::new(1024);
    let hash = policy.definition().content_hash();
    let key = FindingsKey::new("bench", &hash, query).expect("small");
    cache.insert(key, &reasoner.validate(query).expect("well-formed query"));
    let mut times = Vec::new();
    for _ in 0..1001 {
        let t = Instant::now();
        let key = FindingsKey::new("bench", &hash, query).expect("small");
        let found = cache.get(&key).expect("cached");
        std::hint::black_box(found);
        times.push(t.elapsed());
    }
    let m = median(times);
    println!("{name:<44} check median={m:>9.2?} (findings cache hit)");
    m
}

fn ratio(name: &str, got: Duration, target: Duration) {
    if got > Duration::ZERO {
        println!(
            "  {name:<42} {got:>9.2?}  target {target:>7.0?}  {:>6.2}x the target {}",
            got.as_secs_f64() / target.as_secs_f64(),
            if got <= target { "(met)" } else { "(NOT met)" }
        );
    }
}

/// A deterministic pseudo-random sequence (no dependency, no seed from the clock).
struct Lcg(u64);
impl Lcg {
    fn next(&mut self, n: usize) -> usize {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        ((self.0 >> 33) as usize) % n.max(1)
    }
}

/// A consistent policy of the given size: implications between Booleans, enum tests and
/// lower bounds along an acyclic order of the reals (all-false/zero satisfies every rule).
/// The variables fall into `sections` topics of equal size and each rule stays within one, as
/// in a policy document whose sections each cover one subject (a refund section, a baggage
/// section...); one section is the worst case, every rule connected to every other.
fn generated(rules: usize, vars: usize, types: usize, sections: usize) -> String {
    let mut rng = Lcg(42);
    let values = 4;
    let mut json = String::from("{\"version\":\"1.0\",\"types\":[");
    for t in 0..types {
        let vals: Vec<String> = (0..values)
            .map(|v| format!("{{\"value\":\"T{t}V{v}\"}}"))
            .collect();
        let _ = write!(
            json,
            "{}{{\"name\":\"Type{t}\",\"values\":[{}]}}",
            if t > 0 { "," } else { "" },
            vals.join(",")
        );
    }
    json.push_str("],\"variables\":[");
    // A third each of Bool, Real and enum variables.
    let third = vars / 3;
    let mut decls = Vec::new();
    for i in 0..third {
        decls.push(format!(
            "{{\"name\":\"b{i}\",\"type\":\"BOOL\",\"description\":\"flag {i}\"}}"
        ));
        decls.push(format!(
            "{{\"name\":\"r{i}\",\"type\":\"REAL\",\"description\":\"amount {i}\"}}"
        ));
        decls.push(format!(
            "{{\"name\":\"e{i}\",\"type\":\"Type{}\",\"description\":\"category {i}\"}}",
            i % types
        ));
    }
    json.push_str(&decls.join(","));
    json.push_str("],\"rules\":[");
    let per = third / sections;
    for r in 0..rules {
        let base = (r % sections) * per;
        let (a, b, c) = (
            base + rng.next(per),
            base + rng.next(per),
            base + rng.next(per),
        );
        let v = rng.next(values);
        let k = rng.next(50);
        let expr = match r % 4 {
            0 => format!("(=> (and b{a} (= e{b} T{}V{v})) b{c})", b % types),
            1 => {
                let (lo, hi) = (a.min(c), a.max(c).max(a.min(c) + 1).min(base + per - 1));
                format!("(=> b{b} (>= r{hi} (+ r{lo} {k}.5)))")
            }
            2 => format!("(=> (> r{a} {k}.0) (= e{b} T{}V{v}))", b % types),
            _ => format!("(=> b{a} (or b{b} b{c}))"),
        };
        let _ = write!(
            json,
            "{}{{\"id\":\"R{r}\",\"expression\":\"{expr}\"}}",
            if r > 0 { "," } else { "" }
        );
    }
    json.push_str("]}");
    json
}

/// Questions about one section each (what a question about the policy usually is).
fn generated_queries(vars: usize, types: usize, sections: usize) -> Vec<Vec<TranslatorOutput>> {
    let per = vars / 3 / sections;
    let mut rng = Lcg(7);
    (0..8)
        .map(|_| {
            let base = rng.next(sections) * per;
            let (a, b, c, d) = (
                base + rng.next(per),
                base + rng.next(per),
                base + rng.next(per),
                base + rng.next(per),
            );
            let claim = if rng.next(2) == 0 {
                format!("(>= r{c} 1.0)")
            } else {
                format!("b{d}")
            };
            let t = serde_json::json!({"translations": [[{
                "premises": [format!("(and b{a} (= e{b} T{}V0))", b % types)],
                "claims": [claim],
            }]]});
            parse_translations(&t.to_string()).expect("generated translations")
        })
        .collect()
}

fn main() {
    // `cargo bench` passes `--bench`; `cargo test --benches` passes nothing: run small then.
    let full = std::env::args().any(|a| a == "--bench");
    // BENCH_RUNS overrides the count (e.g. to profile one benchmark with BENCH_FILTER).
    let chosen: Option<usize> = std::env::var("BENCH_RUNS")
        .ok()
        .and_then(|n| n.parse().ok());
    let runs = chosen.unwrap_or(if full { 21 } else { 3 });
    // The example policies' checks take milliseconds: 10x the runs, so that their medians
    // hold still on a shared machine (21 runs of the park check ranged 2.5-3.5 ms).
    let small_runs = chosen.unwrap_or(if full { 210 } else { 3 });
    println!("proofgate-reasoner benchmark (median wall time per validate call, one translation)");

    let park = model(PARK);
    let park_t = parse_translations(PARK_T).unwrap();
    let park_fig = bench(
        "park admission: senior/low season (SAT)",
        &park,
        std::slice::from_ref(&park_t),
        small_runs,
    );
    let park_cached = bench_cached("park admission, repeated question", &park, &park_t);
    let airline = model(AIRLINE);
    bench(
        "airline: denied boarding (IMPOSSIBLE)",
        &airline,
        &[parse_translations(AIRLINE_T).unwrap()],
        small_runs,
    );

    // Sections of 12 variables and 30 rules; the last row is one connected section.
    let scales: &[(usize, usize, usize, usize, &str)] = if full {
        &[
            (1_500, 600, 150, 50, "generated at Bedrock limits (1x)"),
            (15_000, 6_000, 1_500, 500, "generated at 10x Bedrock limits"),
            (1_500, 600, 150, 1, "1x, all rules connected (worst case)"),
        ]
    } else {
        &[
            (150, 60, 15, 5, "generated (small, test mode)"),
            (150, 60, 15, 1, "generated, connected (small, test mode)"),
        ]
    };
    let mut generated_figs = Vec::new();
    for &(rules, vars, types, sections, name) in scales {
        if skipped(name) {
            generated_figs.push(Figures::default());
            continue;
        }
        let policy = model(&generated(rules, vars, types, sections));
        let queries = generated_queries(vars, types, sections);
        generated_figs.push(bench(
            name,
            &policy,
            &queries,
            if full && rules > 10_000 { 9 } else { runs },
        ));
    }
    if full {
        let ms = Duration::from_millis;
        println!("against issue 15's targets (one run; compare ratios, the machine is shared):");
        ratio("park check (median)", park_fig.median, ms(1));
        ratio("park check, repeated (cache hit)", park_cached, ms(1));
        ratio(
            "1x Bedrock limits (median)",
            generated_figs[0].median,
            ms(10),
        );
        ratio(
            "10x Bedrock limits (median)",
            generated_figs[1].median,
            ms(500),
        );
        ratio("10x Bedrock limits (max)", generated_figs[1].max, ms(2_000));
        if generated_figs[1].median > Duration::ZERO {
            println!(
                "  10x Bedrock limits TOO_COMPLEX findings: {} (target 0)",
                generated_figs[1].too_complex
            );
        }
    }
}

//! Replays a trail file (a JSON array of records, or an audit bundle with its policy documents)
//! again and again and prints the median time per replay: `cargo run --release -p
//! proofgate-core --example replay_file -- TRAIL.json [SECONDS]`.

use proofgate_core::audit::bundle::read_trail_or_bundle;
use proofgate_core::audit::{replay_json_with, PolicyDocuments};
use std::time::{Duration, Instant};

fn main() {
    let mut args = std::env::args().skip(1);
    let path = args
        .next()
        .expect("usage: replay_file TRAIL.json [SECONDS]");
    let seconds: f64 = args.next().map_or(3.0, |s| s.parse().expect("seconds"));
    let text = std::fs::read(&path).expect("readable file");
    let (records, bundle) = read_trail_or_bundle(&text).expect("a trail or bundle");
    let documents = PolicyDocuments::from_values(
        bundle
            .as_ref()
            .map_or(&[][..], |b| b.policy_documents.as_slice()),
    )
    .expect("policy documents");
    let trail = serde_json::to_vec(&records).expect("serializes");
    let report = replay_json_with(&trail, &documents);
    assert!(report.ok, "{report:?}");
    let until = Instant::now() + Duration::from_secs_f64(seconds);
    let mut times = Vec::new();
    while Instant::now() < until {
        let t = Instant::now();
        let _ = replay_json_with(&trail, &documents);
        times.push(t.elapsed());
    }
    times.sort();
    let median = times[times.len() / 2];
    println!(
        "{path}: {} records, {:.1} KB, median {:?}, {:.0} records/s",
        records.len(),
        trail.len() as f64 / 1024.0,
        median,
        records.len() as f64 / median.as_secs_f64()
    );
}

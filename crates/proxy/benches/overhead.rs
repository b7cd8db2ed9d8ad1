//! How much latency and memory proofgate itself adds: the built `proofgate serve` in front of a
//! scripted upstream on loopback, N requests per scenario. Prints the `x-proofgate-overhead-ms`
//! figures (time in proofgate, excluding upstream, LLM and validator waits), end-to-end
//! latency, and the server's resident memory.
//!
//! Run: `cargo bench -p proofgate-proxy --bench overhead` (or `just bench`).

use serde_json::{json, Value};
use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Instant;

const N: usize = 200;
/// API keys are on, as in production: the benchmark pays for the key check too.
const ADMIN_KEY: &str = "pg-bench-admin-key-0123456789abcdef";

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn start(cmd: &mut Command, prefix: &str) -> (Child, String) {
    let mut child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let rest = line
        .trim()
        .strip_prefix(prefix)
        .unwrap_or_else(|| panic!("{line:?}"))
        .to_string();
    (child, rest)
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i]
}

fn rss_kib(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmRSS:"))
                .and_then(|l| l.split_whitespace().nth(1)?.parse().ok())
        })
        .unwrap_or(0)
}

fn main() {
    let dir = std::env::temp_dir().join(format!("pg-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let valid =
        json!({"pairs": [{"premises": [
                              {"logic": "(= customerAge 70)", "naturalLanguage": "70 (turn 1)"},
                              {"logic": "isLowSeason", "naturalLanguage": "low season (turn 1)"},
                              {"logic": "(not usesCredits)", "naturalLanguage": "no credits (turn 1)"}],
                                  "claims": ["(= feeAfterDiscount 22.5)"]}]})
        .to_string();
    let script = json!({"rules": [
        {"match": ["You translate", "brings it to $22.50"], "reply": valid},
        {"match": "fee after the senior discount", "reply": "Your 40% senior discount brings it to $22.50."}
    ]});
    let script_path = dir.join("llm.json");
    std::fs::write(&script_path, script.to_string()).unwrap();
    let (mut llm, port) = start(
        Command::new("python3")
            .arg(root().join("tests/support/scripted_llm.py"))
            .arg(&script_path),
        "listening on ",
    );
    let config = dir.join("proofgate.toml");
    std::fs::write(
        &config,
        format!(
            "[upstream]\nbase_url = \"http://127.0.0.1:{port}/v1\"\nmodel = \"m\"\n\
             [validator]\nkind = \"local\"\npolicy = \"examples/policies/park-admission.json\"\n\
             [storage]\nurl = \"sqlite://{}/bench.sqlite\"\n",
            dir.display()
        ),
    )
    .unwrap();
    let (mut proxy, url) = start(
        Command::new(env!("CARGO_BIN_EXE_proofgate"))
            .args(["serve", "--listen", "127.0.0.1:0", "--config"])
            .arg(&config)
            .current_dir(root())
            .env("RUST_LOG", "error")
            .env("PROOFGATE_AUTH__ADMIN_KEY", ADMIN_KEY),
        "proofgate listening on ",
    );
    let rt = tokio::runtime::Runtime::new().unwrap();
    let client = reqwest::Client::new();
    let rss_before = rss_kib(proxy.id());
    let (mut overhead, mut total) = (Vec::new(), Vec::new());
    rt.block_on(async {
        for i in 0..N + 10 {
            let started = Instant::now();
            let r = client
                .post(format!("{url}/v1/chat/completions"))
                .bearer_auth(ADMIN_KEY)
                .json(&json!({"model": "m", "messages": [{"role": "user", "content": "I am 70, low season, no credits. What is my fee after the senior discount?"}]}))
                .send()
                .await
                .unwrap();
            let ms: f64 = r.headers()["x-proofgate-overhead-ms"].to_str().unwrap().parse().unwrap();
            assert_eq!(r.headers()["x-proofgate-verdict"], "VALID");
            let _: Value = r.json().await.unwrap();
            if i >= 10 {
                // The first requests warm up connections and caches.
                overhead.push(ms);
                total.push(started.elapsed().as_secs_f64() * 1000.0);
            }
        }
    });
    let rss_after = rss_kib(proxy.id());
    overhead.sort_by(f64::total_cmp);
    total.sort_by(f64::total_cmp);
    println!("proofgate overhead, {N} verified requests (1 validation each: 3 translators + Z3), SQLite:");
    println!(
        "  overhead (x-proofgate-overhead-ms): median {:.3} ms, p95 {:.3} ms, max {:.3} ms",
        percentile(&overhead, 0.5),
        percentile(&overhead, 0.95),
        overhead[overhead.len() - 1]
    );
    println!(
        "  end to end incl. scripted upstream + translators + Z3: median {:.2} ms, p95 {:.2} ms",
        percentile(&total, 0.5),
        percentile(&total, 0.95)
    );
    println!(
        "  server resident memory: {rss_before} KiB after start, {rss_after} KiB after the run"
    );
    let _ = proxy.kill();
    let _ = llm.kill();
}

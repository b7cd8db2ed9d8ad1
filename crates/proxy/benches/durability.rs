//! What durability costs: one audit step as the server writes it (the thread saved with its new
//! record in one transaction, then its head signed and appended to the log), on SQLite with
//! `synchronous = FULL` (what the server uses) and, for comparison only, `NORMAL`. Prints the
//! median and p99 per step and the ratio, measured in one run.

use proofgate_core::audit::transparency::LogStatement;
use proofgate_proxy::audit_log::{AuditKey, TransparencyLog};
use proofgate_proxy::storage::{SqliteSync, Store, StoredThread};
use serde_json::json;
use std::time::{Duration, Instant};

const STEPS: usize = 300;

async fn steps(sync: SqliteSync) -> Vec<Duration> {
    let dir = std::env::temp_dir().join(format!(
        "proofgate-bench-durability-{}-{sync:?}",
        std::process::id()
    ));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let url = format!("sqlite://{}/bench.sqlite", dir.display());
    let store = Store::connect_with(&url, sync).await.unwrap();
    let key = AuditKey::load_or_create(None, &dir.join("audit.key"), "bench").unwrap();
    let log = TransparencyLog::new("bench/log".into(), key);
    let mut times = Vec::with_capacity(STEPS);
    for i in 0..STEPS {
        let thread = StoredThread {
            id: format!("t-{}", i / 10),
            status: "processing".into(),
            question: "How much do I pay?".into(),
            conversation_key: None,
            state: json!({"phase": "VALIDATE", "steps": i}).to_string(),
            created_at: 0,
            updated_at: i as i64,
        };
        let record = json!({"seq": i % 10, "kind": "TRANSLATOR_REPLIED", "body": {"text": "x".repeat(400)}, "hash": format!("{i:064}")});
        let started = Instant::now();
        store
            .save(&thread, &[((i % 10) as u64, record)])
            .await
            .unwrap();
        log.append(
            &store,
            &LogStatement {
                deleted: false,
                thread_id: thread.id.clone(),
                seq: (i % 10) as u64,
                head_hash: format!("{i:064}"),
            },
        )
        .await
        .unwrap();
        times.push(started.elapsed());
    }
    let _ = std::fs::remove_dir_all(&dir);
    times.sort();
    times
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

fn main() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let full = rt.block_on(steps(SqliteSync::Full));
    let normal = rt.block_on(steps(SqliteSync::Normal));
    let (f50, n50) = (full[STEPS / 2], normal[STEPS / 2]);
    let (f99, n99) = (full[STEPS * 99 / 100], normal[STEPS * 99 / 100]);
    println!("audit step (save thread + record, sign and log the head), {STEPS} steps, one run:");
    println!(
        "  SQLite synchronous=FULL   median {:.3} ms  p99 {:.3} ms",
        ms(f50),
        ms(f99)
    );
    println!(
        "  SQLite synchronous=NORMAL median {:.3} ms  p99 {:.3} ms",
        ms(n50),
        ms(n99)
    );
    println!(
        "  FULL costs {:.2}x NORMAL at the median ({:+.3} ms per step)",
        ms(f50) / ms(n50).max(1e-9),
        ms(f50) - ms(n50)
    );
}

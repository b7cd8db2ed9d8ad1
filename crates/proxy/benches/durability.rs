//! What durability costs on the path the server writes: a chat request's write (its thread's
//! owner and state, four audit records and one signed log leaf, sized as the Bedrock path's) through the
//! journal's group commit, on SQLite with `synchronous = FULL` (what the server uses) and, for
//! comparison only, `NORMAL`. One writer (every write alone in its commit: the c=1 latency) and
//! 16 writers (commits shared: the c=16 throughput). Prints medians, p99s, writes per second,
//! the bytes written per write (log and checkpoints) and the ratios, measured in one run.

use proofgate_core::audit::transparency::LogStatement;
use proofgate_proxy::audit_log::{AuditKey, TransparencyLog};
use proofgate_proxy::journal::{Chain, Journal, Write};
use proofgate_proxy::storage::{SqliteSync, Store, StoredThread, ThreadOwner};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Writes in all, whatever the number of writers: enough that a lone writer's p99 is its
/// 32nd-worst write, not its 4th (a checkpoint every 50 ms lands on about one in a hundred).
const WRITES: usize = 3200;

/// One request's write, about as large as the Bedrock path's (about 9 KB).
fn request_write(log: &TransparencyLog, writer: usize, i: usize) -> Write {
    let id = format!("bench-{writer}-{i}");
    let statement = LogStatement {
        deleted: false,
        thread_id: id.clone(),
        seq: 3,
        head_hash: format!("{:064x}", writer * WRITES + i),
    };
    let note = log.key().sign(&statement.text()).unwrap();
    Write {
        owner: Some((
            id.clone(),
            ThreadOwner {
                key: "bench-key".into(),
                user: String::new(),
            },
            0,
        )),
        thread: Some(StoredThread {
            id: id.clone(),
            status: "done".into(),
            question: "I am 70, low season, no credits. What is my fee?".into(),
            conversation_key: None,
            state: format!(
                "{{\"phase\":\"COMPLETED\",\"pad\":\"{}\"}}",
                "s".repeat(4000)
            ),
            created_at: 0,
            updated_at: i as i64,
        }),
        records: (0..4)
            .map(|seq| {
                (
                    seq,
                    format!("{{\"seq\":{seq},\"pad\":\"{}\"}}", "r".repeat(1200)),
                )
            })
            .collect(),
        leaves: vec![(statement, note)],
        chain: Chain::default(),
    }
}

/// Bytes this process has passed to `write` calls so far (Linux), with the log's and the
/// checkpoints' writes: what a request's write costs the disk, whatever the layout.
fn bytes_written() -> Option<u64> {
    std::fs::read_to_string("/proc/self/io")
        .ok()?
        .lines()
        .find_map(|l| l.strip_prefix("wchar:"))?
        .trim()
        .parse()
        .ok()
}

/// Latencies of every write, writes per second, and bytes written per write (when the system
/// says), with `writers` writing at once.
async fn run(sync: SqliteSync, writers: usize) -> (Vec<Duration>, f64, Option<u64>) {
    let dir = std::env::temp_dir().join(format!(
        "proofgate-bench-durability-{}-{sync:?}-{writers}",
        std::process::id()
    ));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let url = format!("sqlite://{}/bench.sqlite", dir.display());
    let store = Store::connect_with(&url, sync, None).await.unwrap();
    let key = AuditKey::load_or_create(None, &dir.join("audit.key"), "bench").unwrap();
    let log = Arc::new(TransparencyLog::new("bench/log".into(), key));
    let journal = Journal::start(store.clone(), log.clone());
    let bytes_before = bytes_written();
    let started = Instant::now();
    let mut tasks = Vec::new();
    for w in 0..writers {
        let (journal, log) = (journal.clone(), log.clone());
        tasks.push(tokio::spawn(async move {
            let mut times = Vec::with_capacity(WRITES / writers);
            for i in 0..WRITES / writers {
                let write = request_write(&log, w, i);
                let t = Instant::now();
                journal.write(write).await.unwrap();
                times.push(t.elapsed());
            }
            times
        }));
    }
    let mut times = Vec::new();
    for t in tasks {
        times.extend(t.await.unwrap());
    }
    let per_second = times.len() as f64 / started.elapsed().as_secs_f64();
    let per_write = bytes_before
        .zip(bytes_written())
        .map(|(before, after)| (after - before) / times.len() as u64);
    drop(journal);
    let _ = std::fs::remove_dir_all(&dir);
    times.sort();
    (times, per_second, per_write)
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

fn main() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    println!(
        "a chat request's write (owner, state, 4 records, 1 signed leaf) through the journal, one run:"
    );
    let mut medians = Vec::new();
    for writers in [1, 16] {
        for (name, sync) in [("FULL  ", SqliteSync::Full), ("NORMAL", SqliteSync::Normal)] {
            let (times, per_second, per_write) = rt.block_on(run(sync, writers));
            let (p50, p99) = (times[times.len() / 2], times[times.len() * 99 / 100]);
            let per_write = per_write.map_or("n/a".to_string(), |b| {
                format!("{:.0} KB", b as f64 / 1024.0)
            });
            println!(
                "  {writers:>2} writer(s), synchronous={name}  median {:.3} ms  p99 {:.3} ms  {per_second:.0} writes/s  {per_write} written per write",
                ms(p50),
                ms(p99)
            );
            medians.push((ms(p50), per_second));
        }
    }
    let (full1, normal1) = (medians[0].0, medians[1].0);
    let (full16, normal16) = (medians[2].1, medians[3].1);
    println!(
        "  FULL costs {:+.3} ms per write alone ({:.2}x NORMAL) and {:.0}% of NORMAL's writes/s at 16 writers",
        full1 - normal1,
        full1 / normal1.max(1e-9),
        100.0 * full16 / normal16.max(1e-9)
    );
}

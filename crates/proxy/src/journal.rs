//! Group commit for threads, audit records and log leaves. Every write of the chat path goes to
//! one writer task, which commits whatever is queued in one transaction: with
//! `synchronous = FULL` that is one `fsync` for all the requests waiting, not one per step and
//! request. A write is durable when its [`Pending`] resolves; nothing is answered before.

use crate::audit_log::{AppendError, TransparencyLog, LEAVES};
use crate::sql_batch::Statements;
use crate::storage::{StorageError, Store, StoredThread, ThreadOwner};
use proofgate_core::audit::transparency::LogStatement;
use sqlx::pool::PoolConnection;
use sqlx::{Any, Row};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use tokio::sync::{mpsc, oneshot};

/// At most this many writes per transaction (a bound on the statement's size and the time a
/// transaction holds SQLite's write lock).
const MAX_BATCH: usize = 256;
/// Writes waiting for the writer; more wait for room (backpressure, not memory).
const QUEUE: usize = 4096;
/// Rows per multi-row INSERT of 3 columns (fewer for wider rows): under the 999 parameters
/// of old SQLite versions.
const ROWS_PER_INSERT: usize = 300;

/// One step's writes, stored atomically (alone or with others).
#[derive(Debug, Default)]
pub struct Write {
    /// Who the thread belongs to (thread id, owner, time): recorded once, the first owner stays.
    pub owner: Option<(String, ThreadOwner, i64)>,
    /// The thread's state.
    pub thread: Option<StoredThread>,
    /// New audit records of that thread: (seq, JSON).
    pub records: Vec<(u64, String)>,
    /// Signed log statements (statement, its signed note) to append as leaves.
    pub leaves: Vec<(LogStatement, String)>,
    /// The writes of one request's thread, in order: once one fails, the later ones are refused,
    /// so no step is stored after a gap in its trail.
    pub chain: Chain,
}

/// Links a thread's successive writes (see [`Write::chain`]); a default one links nothing.
#[derive(Debug, Default, Clone)]
pub struct Chain(Option<Arc<AtomicBool>>);

impl Chain {
    /// A new chain: give the same one (cloned) to every write of one thread's request.
    pub fn new() -> Chain {
        Chain(Some(Arc::new(AtomicBool::new(false))))
    }

    fn broken(&self) -> bool {
        self.0.as_ref().is_some_and(|b| b.load(Ordering::SeqCst))
    }

    fn break_off(&self) {
        if let Some(b) = &self.0 {
            b.store(true, Ordering::SeqCst);
        }
    }
}

impl Write {
    fn is_empty(&self) -> bool {
        self.owner.is_none()
            && self.thread.is_none()
            && self.records.is_empty()
            && self.leaves.is_empty()
    }
}

type Done = oneshot::Sender<Result<(), Arc<str>>>;

/// The queue to the writer task.
#[derive(Clone)]
pub struct Journal {
    queue: mpsc::Sender<(Write, Done)>,
}

/// A submitted write; resolves once it is committed (or failed).
pub struct Pending(pub(crate) oneshot::Receiver<Result<(), Arc<str>>>);

impl Pending {
    /// Waits until the write is durable.
    pub async fn wait(mut self) -> Result<(), StorageError> {
        self.wait_in_place().await
    }

    /// As [`Pending::wait`], leaving the write with its holder if the wait is dropped (a
    /// request dropped at its deadline): whoever holds it then can still wait for it. Not to
    /// be called again once it has returned.
    pub async fn wait_in_place(&mut self) -> Result<(), StorageError> {
        match (&mut self.0).await {
            Ok(Ok(())) => Ok(()),
            Ok(Err(e)) => Err(StorageError::Write(e.to_string())),
            Err(_) => Err(StorageError::Write("the writer stopped".into())),
        }
    }

    /// `Some(result)` when the write has finished, `None` while it is queued or in progress.
    pub fn poll_done(&mut self) -> Option<Result<(), StorageError>> {
        match self.0.try_recv() {
            Ok(Ok(())) => Some(Ok(())),
            Ok(Err(e)) => Some(Err(StorageError::Write(e.to_string()))),
            Err(oneshot::error::TryRecvError::Empty) => None,
            Err(oneshot::error::TryRecvError::Closed) => {
                Some(Err(StorageError::Write("the writer stopped".into())))
            }
        }
    }
}

impl Journal {
    /// Starts the writer task on `store`, appending leaves to `log`.
    pub fn start(store: Store, log: Arc<TransparencyLog>) -> Journal {
        let (queue, rx) = mpsc::channel(QUEUE);
        tokio::spawn(writer(store, log, rx));
        Journal { queue }
    }

    /// Queues `write`; it is stored after every write queued before it.
    pub async fn submit(&self, write: Write) -> Pending {
        let (done, rx) = oneshot::channel();
        if write.is_empty() {
            let _ = done.send(Ok(()));
        } else if let Err(mpsc::error::SendError((_, done))) = self.queue.send((write, done)).await
        {
            let _ = done.send(Err("the writer stopped".into()));
        }
        Pending(rx)
    }

    /// Stores `write` and waits until it is durable.
    pub async fn write(&self, write: Write) -> Result<(), StorageError> {
        self.submit(write).await.wait().await
    }
}

async fn writer(store: Store, log: Arc<TransparencyLog>, mut rx: mpsc::Receiver<(Write, Done)>) {
    let mut batch: Vec<(Write, Done)> = Vec::new();
    // SQLite: the writer keeps its connection between batches. Taking it from the pool and
    // giving it back cost round trips to the connection's thread per batch (the pool pings
    // every connection given back). It is given back after a failure, for the pool to check.
    let mut conn: Option<PoolConnection<Any>> = None;
    let mut known = KnownSize::default();
    loop {
        let next = match (&conn, store.idle) {
            (Some(_), Some(idle)) => match tokio::time::timeout(idle, rx.recv()).await {
                Ok(next) => next,
                Err(_) => {
                    close_idle(&mut conn, idle).await;
                    continue;
                }
            },
            _ => rx.recv().await,
        };
        let Some(first) = next else { break };
        batch.push(first);
        while batch.len() < MAX_BATCH {
            match rx.try_recv() {
                Ok(next) => batch.push(next),
                Err(_) => break,
            }
        }
        // A write after a failed one of its chain would store a step past a gap.
        batch = batch
            .into_iter()
            .filter_map(|(w, done)| {
                if w.chain.broken() {
                    let _ = done.send(Err(AFTER_FAILURE.into()));
                    None
                } else {
                    Some((w, done))
                }
            })
            .collect();
        if batch.is_empty() {
            continue;
        }
        let writes: Vec<&Write> = batch.iter().map(|(w, _)| w).collect();
        match commit(&store, &mut conn, &mut known, &log, &writes).await {
            Ok(()) => {
                let size = writes_size(&writes);
                for (_, done) in batch.drain(..) {
                    let _ = done.send(Ok(()));
                }
                // After the answers: only the next batch waits for it.
                store.wal_grew(size);
                if let Some(c) = conn.as_mut() {
                    store.finish_wal_checkpoint(c).await;
                }
            }
            // One bad write must not fail the others: store them one by one.
            Err(_) if batch.len() > 1 => {
                for (w, done) in batch.drain(..) {
                    let result = if w.chain.broken() {
                        Err(StorageError::Write(AFTER_FAILURE.into()))
                    } else {
                        commit(&store, &mut conn, &mut known, &log, &[&w]).await
                    };
                    if let Err(e) = &result {
                        tracing::error!("storing a step failed: {e}");
                        w.chain.break_off();
                    }
                    let _ = done.send(result.map_err(|e| Arc::from(e.to_string())));
                }
            }
            Err(e) => {
                tracing::error!("storing a step failed: {e}");
                let e: Arc<str> = Arc::from(e.to_string());
                for (w, done) in batch.drain(..) {
                    w.chain.break_off();
                    let _ = done.send(Err(e.clone()));
                }
            }
        }
    }
}

/// Closes the writer's connection after `idle` without a write (its page cache and prepared
/// statements go with it; the next batch opens one), then gives glibc's freed pages back, once
/// now and once after the pools' readers, unused as long, have closed too (sqlx looks for them
/// every `idle`).
async fn close_idle(conn: &mut Option<PoolConnection<Any>>, idle: std::time::Duration) {
    if let Some(c) = conn.take() {
        if let Err(e) = c.close().await {
            tracing::debug!("closing the idle writer's connection: {e}");
        }
    }
    tokio::task::spawn_blocking(crate::memory::give_back_freed_memory);
    tokio::spawn(async move {
        tokio::time::sleep(idle.saturating_mul(2)).await;
        tokio::task::spawn_blocking(crate::memory::give_back_freed_memory);
    });
}

/// About how many bytes `writes` put in the database (states, records, signed notes).
fn writes_size(writes: &[&Write]) -> usize {
    writes
        .iter()
        .map(|w| {
            w.thread.as_ref().map_or(0, |t| t.state.len())
                + w.records.iter().map(|(_, r)| r.len()).sum::<usize>()
                + w.leaves.iter().map(|(_, note)| note.len()).sum::<usize>()
        })
        .sum()
}

/// Why a write was refused.
const AFTER_FAILURE: &str = "an earlier step of this thread could not be stored";

/// Commits `writes` in one transaction on the writer's connection `held` (taken from the
/// pool when there is none, given back to it after a failure).
async fn commit(
    store: &Store,
    held: &mut Option<PoolConnection<Any>>,
    known: &mut KnownSize,
    log: &TransparencyLog,
    writes: &[&Write],
) -> Result<(), StorageError> {
    let conn = match held {
        Some(conn) => conn,
        None => held.insert(
            store
                .writer
                .acquire()
                .await
                .map_err(crate::storage::db("connecting to the database"))?,
        ),
    };
    let result = if store.sqlite {
        commit_sqlite(conn, log, writes, known).await
    } else {
        commit_other(conn, log, writes).await
    };
    // PostgreSQL: given back after every batch, so the pool checks it before the next one (a
    // server restart or an idle timeout would otherwise fail the next batch's requests).
    if result.is_err() || !store.sqlite {
        *held = None;
    }
    result
}

/// PostgreSQL: one transaction, retried when another replica took a log index.
async fn commit_other(
    conn: &mut sqlx::AnyConnection,
    log: &TransparencyLog,
    writes: &[&Write],
) -> Result<(), StorageError> {
    for _ in 0..50 {
        let mut tx = sqlx::Connection::begin(&mut *conn)
            .await
            .map_err(crate::storage::db("starting a transaction"))?;
        let mut appender = log.appender().await;
        crate::audit_log::lock_for_appending(&mut tx, false)
            .await
            .map_err(|e| StorageError::AuditLog(e.to_string()))?;
        let mut statements = Statements::new(false);
        let result = match appender.start(&mut tx, None).await {
            Ok(_) => queue_all(&mut statements, &mut appender, writes),
            Err(e) => Err(Retry::from(e)),
        };
        let result = match result {
            Ok(()) => statements.run(&mut tx).await.map_err(|f| match f.what {
                // Another replica took an index (or the database is busy): roll back, retry.
                ref what if what == LEAVES => Retry::Taken,
                what => Retry::Failed(StorageError::Database {
                    context: what,
                    source: f.source,
                }),
            }),
            Err(e) => Err(e),
        };
        match result {
            Ok(()) => {
                tx.commit()
                    .await
                    .map_err(crate::storage::db("committing"))?;
                appender.committed();
                return Ok(());
            }
            Err(Retry::Taken) => {
                let _ = tx.rollback().await;
            }
            Err(Retry::Failed(e)) => {
                let _ = tx.rollback().await;
                return Err(e);
            }
        }
    }
    Err(StorageError::AuditLog(AppendError::exhausted().to_string()))
}

/// SQLite: the log's size after this writer's last commit. Nothing else in this process
/// appends to the log, so the next commit can take its indexes from there instead of reading
/// the size first (a round trip to the connection's thread: 1.7 of a lone request's 12 context
/// switches); it checks the size in the same call instead. Only a cache: a restart, a failed
/// commit or another process's append means it is read again.
#[derive(Default)]
pub(crate) struct KnownSize(Option<u64>, Rereads);

/// How many commits found the known size wrong and read it again (tests look).
#[derive(Default)]
struct Rereads(u64);

/// SQLite: one call to the connection's thread when this writer committed last (the log's size
/// known), two otherwise. The write lock comes first (`BEGIN IMMEDIATE`), so no other writer
/// can take an index until the transaction ends. With the size known, a statement in the same
/// call fails unless the log still has that size (another process appended, or the log was cut
/// back): the call rolls back and the commit is made again the two-call way, which reads it.
async fn commit_sqlite(
    conn: &mut sqlx::AnyConnection,
    log: &TransparencyLog,
    writes: &[&Write],
    known: &mut KnownSize,
) -> Result<(), StorageError> {
    if let Some(size) = known.0.take() {
        match commit_sqlite_at(conn, log, writes, Some(size)).await {
            Ok(next) => {
                known.0 = next;
                return Ok(());
            }
            Err(e) => {
                known.1 .0 += 1;
                tracing::info!("a commit at the log size {size} failed ({e}); reading the size");
            }
        }
    }
    known.0 = commit_sqlite_at(conn, log, writes, None).await?;
    Ok(())
}

/// One attempt of [`commit_sqlite`]: at the log size `known`, checked in the call, or read
/// first. Returns the log's size after the commit, when the appender knows it.
async fn commit_sqlite_at(
    conn: &mut sqlx::AnyConnection,
    log: &TransparencyLog,
    writes: &[&Write],
    known: Option<u64>,
) -> Result<Option<u64>, StorageError> {
    let mut appender = log.appender().await;
    let mut statements = Statements::new(true);
    let result = async {
        let size = match known {
            Some(size) => {
                statements.plain("starting a transaction", "BEGIN IMMEDIATE");
                // `json` of text that is not JSON raises an error: SQLite has no other way
                // for a statement outside a trigger to fail on a condition.
                statements.with_one(
                    CHECKING_SIZE,
                    |n| {
                        format!(
                            "SELECT CASE WHEN (SELECT COALESCE(MAX(idx) + 1, 0) FROM log_leaves) = {n} \
                             THEN 0 ELSE json('the log size changed') END"
                        )
                    },
                    size as i64,
                );
                size
            }
            None => {
                // `fetch_all`: the Any driver's `fetch_one` looks only at the first statement.
                let rows = sqlx::query(
                    "BEGIN IMMEDIATE; SELECT COALESCE(MAX(idx) + 1, 0) AS n FROM log_leaves",
                )
                .fetch_all(&mut *conn)
                .await
                .map_err(crate::storage::db("starting a transaction"))?;
                let size: i64 = match rows.first() {
                    Some(row) => row
                        .try_get("n")
                        .map_err(crate::storage::db("reading the log size"))?,
                    None => {
                        return Err(StorageError::AuditLog(
                            "reading the log size returned no row".into(),
                        ))
                    }
                };
                size as u64
            }
        };
        let queued = match appender.start(&mut *conn, Some(size)).await {
            Ok(_) => queue_all(&mut statements, &mut appender, writes),
            Err(e) => Err(Retry::from(e)),
        };
        match queued {
            Ok(()) => {}
            Err(Retry::Failed(e)) => return Err(e),
            // Only a failed INSERT of leaves is `Taken`, and queueing runs none; should that
            // change, fail the batch rather than the writer task.
            Err(Retry::Taken) => {
                return Err(StorageError::AuditLog(
                    "a log index was taken while the write lock was held".into(),
                ))
            }
        }
        statements.plain("committing", "COMMIT");
        statements
            .run(&mut *conn)
            .await
            .map_err(|f| StorageError::Database {
                context: format!("storing a batch ({})", f.what),
                source: f.source,
            })
    }
    .await;
    match result {
        Ok(()) => {
            let next = appender.next_index();
            appender.committed();
            Ok(next)
        }
        Err(e) => {
            // The transaction may still be open (a statement before COMMIT failed). An error
            // here means none is, which is what this wants.
            let _ = sqlx::query("ROLLBACK").execute(&mut *conn).await;
            Err(e)
        }
    }
}

/// What the statement checking the log's size is called in errors.
const CHECKING_SIZE: &str = "checking the log's size";

enum Retry {
    Taken,
    Failed(StorageError),
}

impl From<AppendError> for Retry {
    fn from(e: AppendError) -> Retry {
        match e {
            AppendError::Taken => Retry::Taken,
            AppendError::Failed(e) => Retry::Failed(StorageError::AuditLog(e.to_string())),
        }
    }
}

/// Adds the statements storing `writes` to `statements`: owners, threads' newest states,
/// audit records, then the log's leaves and hashes.
fn queue_all(
    statements: &mut Statements,
    appender: &mut crate::audit_log::LogAppender<'_>,
    writes: &[&Write],
) -> Result<(), Retry> {
    let owners: Vec<_> = writes.iter().filter_map(|w| w.owner.as_ref()).collect();
    for chunk in owners.chunks(ROWS_PER_INSERT * 3 / 4) {
        statements.values(
            "recording thread owners",
            "INSERT INTO thread_owners (thread_id, owner_key, end_user, created_at)",
            chunk.len(),
            4,
            "ON CONFLICT (thread_id) DO NOTHING",
            |b| {
                for (id, owner, at) in chunk {
                    b.bind(id.as_str())
                        .bind(owner.key.as_str())
                        .bind(owner.user.as_str())
                        .bind(*at);
                }
            },
        );
    }
    // A thread's state: only the newest of the batch is stored (each replaces the last).
    let mut newest: Vec<&StoredThread> = Vec::new();
    for t in writes.iter().filter_map(|w| w.thread.as_ref()) {
        match newest.iter_mut().find(|n| n.id == t.id) {
            Some(n) => *n = t,
            None => newest.push(t),
        }
    }
    for chunk in newest.chunks(ROWS_PER_INSERT / 3) {
        crate::storage::queue_threads(statements, chunk);
    }
    let records: Vec<(&str, u64, &str)> = writes
        .iter()
        .filter_map(|w| w.thread.as_ref().map(|t| (t.id.as_str(), &w.records)))
        .flat_map(|(id, rs)| rs.iter().map(move |(seq, r)| (id, *seq, r.as_str())))
        .collect();
    for chunk in records.chunks(ROWS_PER_INSERT) {
        statements.values(
            "appending audit records",
            "INSERT INTO audit_records (thread_id, seq, record)",
            chunk.len(),
            3,
            "",
            |b| {
                for (id, seq, record) in chunk {
                    b.bind(*id)
                        .bind(i64::try_from(*seq).unwrap_or(i64::MAX))
                        .bind(*record);
                }
            },
        );
    }
    let leaves: Vec<(&LogStatement, &str)> = writes
        .iter()
        .flat_map(|w| w.leaves.iter().map(|(s, n)| (s, n.as_str())))
        .collect();
    if !leaves.is_empty() {
        appender.queue(statements, &leaves)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::audit_log::AuditKey;

    /// SQLite only: the PostgreSQL database of a test run is shared, and leaves signed by a
    /// test key would spoil its one log for the end-to-end tests that verify it whole
    /// (`PROOFGATE_JOURNAL_TEST_POSTGRES_URL` runs these on a database of their own). The
    /// replica tests exercise the journal on PostgreSQL.
    async fn journals(name: &str) -> Vec<(Journal, Store, Arc<TransparencyLog>)> {
        let dir = std::env::temp_dir().join(format!("pg-journal-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let mut urls = vec![format!("sqlite://{}", dir.join("j.sqlite").display())];
        urls.extend(std::env::var("PROOFGATE_JOURNAL_TEST_POSTGRES_URL").ok());
        let mut out = Vec::new();
        for url in urls {
            let store = Store::connect(&url).await.unwrap();
            let key = AuditKey::load_or_create(None, &dir.join("key"), "test").unwrap();
            let log = Arc::new(TransparencyLog::new("test/log".into(), key));
            out.push((Journal::start(store.clone(), log.clone()), store, log));
        }
        out
    }

    fn step(log: &TransparencyLog, thread: &str, seqs: std::ops::Range<u64>) -> Write {
        let statement = LogStatement {
            deleted: false,
            thread_id: thread.into(),
            seq: seqs.end - 1,
            head_hash: format!("hash-{thread}-{}", seqs.end - 1),
        };
        let note = log.key().sign(&statement.text()).unwrap();
        Write {
            owner: None,
            thread: Some(StoredThread {
                id: thread.into(),
                status: "processing".into(),
                question: "Q?".into(),
                conversation_key: None,
                state: serde_json::json!({"step": seqs.end}).to_string(),
                created_at: 1,
                updated_at: 1,
            }),
            records: seqs.map(|s| (s, format!("{{\"seq\":{s}}}"))).collect(),
            leaves: vec![(statement, note)],
            chain: Chain::default(),
        }
    }

    #[tokio::test]
    async fn concurrent_writes_are_all_stored_with_one_leaf_each() {
        for (journal, store, log) in journals("concurrent").await {
            let (_, before) = log.checkpoint(&store).await.unwrap();
            let run = uuid::Uuid::new_v4().simple().to_string();
            let mut tasks = Vec::new();
            for i in 0..40 {
                let (journal, log, id) = (journal.clone(), log.clone(), format!("{run}-{i}"));
                tasks.push(tokio::spawn(async move {
                    // Two steps queued back to back, waited for together (as a request does).
                    let a = journal.submit(step(&log, &id, 0..2)).await;
                    let b = journal.submit(step(&log, &id, 2..3)).await;
                    a.wait().await.and(b.wait().await)
                }));
            }
            for t in tasks {
                t.await.unwrap().unwrap();
            }
            for i in 0..40 {
                let id = format!("{run}-{i}");
                assert_eq!(store.audit_trail(&id).await.unwrap().len(), 3);
                let t = store.thread(&id).await.unwrap().unwrap();
                let state: serde_json::Value = serde_json::from_str(&t.state).unwrap();
                assert_eq!(state["step"], 3, "the newest state wins");
            }
            let (_, after) = log.checkpoint(&store).await.unwrap();
            // Counted by thread: the other tests may append to a shared PostgreSQL log meanwhile.
            let ours: i64 =
                sqlx::query("SELECT COUNT(*) AS n FROM log_leaves WHERE thread_id LIKE $1")
                    .bind(format!("{run}-%"))
                    .fetch_one(&store.pool)
                    .await
                    .unwrap()
                    .get("n");
            assert_eq!(ours, 80, "one leaf per step");
            assert!(after - before >= 80);
            // Every leaf is in the tree the checkpoint signs.
            for i in before..after {
                log.inclusion(&store, i, after).await.unwrap();
            }
        }
    }

    /// The leaves' indexes and threads, in order.
    async fn leaf_rows(store: &Store) -> Vec<(i64, String)> {
        sqlx::query("SELECT idx, thread_id FROM log_leaves ORDER BY idx")
            .fetch_all(&store.pool)
            .await
            .unwrap()
            .iter()
            .map(|r| (r.get("idx"), r.get("thread_id")))
            .collect()
    }

    /// Every leaf is in the tree the checkpoint signs, whose size is `size`.
    async fn tree_holds(store: &Store, log: &TransparencyLog, size: u64) {
        let (_, n) = log.checkpoint(store).await.unwrap();
        assert_eq!(n, size);
        for i in 0..n {
            log.inclusion(store, i, n).await.unwrap();
        }
    }

    /// After its first commit the writer takes the log's size from its last commit instead of
    /// reading it, and checks it in the same call: a leaf appended by another process, or a
    /// log cut back, fails that call, and the commit is made again on the size read, with no
    /// gap and no index taken twice.
    #[tokio::test]
    async fn a_log_size_known_from_the_last_commit_is_checked_in_the_same_call() {
        let dir = std::env::temp_dir().join(format!("pg-journal-{}-known", std::process::id()));
        let (store, log) = wal_store(&dir).await;
        let mut conn = store.writer.acquire().await.unwrap();
        let mut known = KnownSize::default();
        for (i, thread) in ["a", "b"].into_iter().enumerate() {
            commit_sqlite(&mut conn, &log, &[&step(&log, thread, 0..1)], &mut known)
                .await
                .unwrap();
            assert_eq!(known.0, Some(i as u64 + 1));
        }
        // The second commit went through on the size it knew.
        assert_eq!(known.1 .0, 0);

        // Another process on the same file (its own log handle and cache) appends leaf 2.
        let key = AuditKey::load_or_create(None, &dir.join("key"), "test").unwrap();
        let other = TransparencyLog::new("test/log".into(), key);
        let mut other_conn = store.pool.acquire().await.unwrap();
        commit_sqlite(
            &mut other_conn,
            &other,
            &[&step(&other, "other", 0..1)],
            &mut KnownSize::default(),
        )
        .await
        .unwrap();
        drop(other_conn);
        commit_sqlite(&mut conn, &log, &[&step(&log, "c", 0..1)], &mut known)
            .await
            .unwrap();
        assert_eq!(known.0, Some(4));
        assert_eq!(known.1 .0, 1, "the size it knew was not caught as wrong");
        let threads = |rows: Vec<(i64, String)>| {
            rows.into_iter()
                .map(|(i, t)| format!("{i}:{t}"))
                .collect::<Vec<_>>()
        };
        assert_eq!(
            threads(leaf_rows(&store).await),
            ["0:a", "1:b", "2:other", "3:c"]
        );
        tree_holds(&store, &log, 4).await;

        // The log is cut back to two leaves (a restored backup): no index past its end is
        // taken, which a size not checked would leave as a gap.
        sqlx::query("DELETE FROM log_leaves WHERE idx >= 2")
            .execute(&store.pool)
            .await
            .unwrap();
        sqlx::query("DELETE FROM log_hashes WHERE idx >= $1")
            .bind(tlog_tiles::stored_hash_index(0, 2) as i64)
            .execute(&store.pool)
            .await
            .unwrap();
        // This handle saw 4 leaves committed: it appends nothing to the cut-back log (nor
        // signs it), since to auditors a restored backup is a new log, which the operator
        // declares by restarting (and removing the signed-size file).
        let refused = commit_sqlite(&mut conn, &log, &[&step(&log, "d", 0..1)], &mut known)
            .await
            .unwrap_err();
        assert!(refused.to_string().contains("cut back"), "{refused}");
        let refused = log.checkpoint(&store).await.map(|(_, n)| n).unwrap_err();
        assert!(refused.to_string().contains("cut back"), "{refused}");
        // A restarted server (a new handle) appends at the end of the log it finds.
        let key = AuditKey::load_or_create(None, &dir.join("key"), "test").unwrap();
        let restarted = TransparencyLog::new("test/log".into(), key);
        commit_sqlite(
            &mut conn,
            &restarted,
            &[&step(&restarted, "d", 0..1)],
            &mut known,
        )
        .await
        .unwrap();
        assert_eq!(known.0, Some(3));
        assert_eq!(known.1 .0, 2, "the size it knew was not caught as wrong");
        assert_eq!(threads(leaf_rows(&store).await), ["0:a", "1:b", "2:d"]);
        tree_holds(&store, &restarted, 3).await;
        drop(conn);
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// With an idle time, the writer's connection and the readers' close once unused that long
    /// (the background checkpoint takes none while nothing is committed), and the next write
    /// opens one again and is stored and logged like any other.
    #[tokio::test]
    async fn unused_connections_close_and_the_next_write_opens_one() {
        let dir = std::env::temp_dir().join(format!("pg-journal-{}-idle", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let url = format!("sqlite://{}", dir.join("j.sqlite").display());
        // Long enough that a loaded machine asserts the open connections before they close.
        let idle = std::time::Duration::from_secs(1);
        let store = Store::connect_with(&url, crate::storage::SqliteSync::Full, Some(idle))
            .await
            .unwrap();
        let key = AuditKey::load_or_create(None, &dir.join("key"), "test").unwrap();
        let log = Arc::new(TransparencyLog::new("test/log".into(), key));
        let journal = Journal::start(store.clone(), log.clone());
        let all_closed = || async {
            let until = std::time::Instant::now() + std::time::Duration::from_secs(20);
            while store.writer.size() + store.pool.size() > 0 {
                assert!(
                    std::time::Instant::now() < until,
                    "still open after 20 s: writer {}, readers {}",
                    store.writer.size(),
                    store.pool.size()
                );
                tokio::time::sleep(std::time::Duration::from_millis(50)).await;
            }
        };
        for (i, thread) in ["a", "b", "c"].into_iter().enumerate() {
            journal.write(step(&log, thread, 0..2)).await.unwrap();
            assert_eq!(store.writer.size(), 1, "the writer keeps its connection");
            assert_eq!(store.audit_trail(thread).await.unwrap().len(), 2);
            assert!(store.pool.size() >= 1);
            all_closed().await;
            // And they stay closed: nothing opens one while nothing is written.
            for _ in 0..30 {
                tokio::time::sleep(idle / 10).await;
                assert_eq!(store.writer.size() + store.pool.size(), 0, "reopened");
            }
            tree_holds(&store, &log, i as u64 + 1).await;
        }
        drop((journal, store));
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// A fresh SQLite store in `dir` (made empty) with a test log key, for the write-ahead log
    /// tests: they set the store's limits before starting a journal on it.
    async fn wal_store(dir: &std::path::Path) -> (Store, Arc<TransparencyLog>) {
        let _ = std::fs::remove_dir_all(dir);
        std::fs::create_dir_all(dir).unwrap();
        let file = dir.join("j.sqlite");
        let store = Store::connect(&format!("sqlite://{}", file.display()))
            .await
            .unwrap();
        let key = AuditKey::load_or_create(None, &dir.join("key"), "test").unwrap();
        (
            store,
            Arc::new(TransparencyLog::new("test/log".into(), key)),
        )
    }

    /// Steady commits from many requests: the background checkpoints alone never let the log
    /// start over (a commit always lands while one copies), so without the writer finishing
    /// them the log holds everything ever written.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_sqlite_write_ahead_log_stays_short_under_steady_writes() {
        let dir = std::env::temp_dir().join(format!("pg-journal-{}-walsize", std::process::id()));
        let (mut store, log) = wal_store(&dir).await;
        // 1 MiB instead of 16, so that a short test sees many rounds.
        store.wal_restart_bytes = 1 << 20;
        let journal = Journal::start(store.clone(), log.clone());
        // At least 12 MiB over at least 2 s (many background checkpoints), however slow the
        // machine: a fixed time wrote too little to tell on a busy one.
        const ENOUGH: usize = 12 << 20;
        let start = std::time::Instant::now();
        let total = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let pad = "x".repeat(8 * 1024);
        let mut tasks = Vec::new();
        for i in 0..16 {
            let (journal, log, pad, total) =
                (journal.clone(), log.clone(), pad.clone(), total.clone());
            tasks.push(tokio::spawn(async move {
                let mut n = 0;
                while (total.load(Ordering::Relaxed) < ENOUGH
                    || start.elapsed() < std::time::Duration::from_secs(2))
                    && start.elapsed() < std::time::Duration::from_secs(60)
                {
                    let mut w = step(&log, &format!("w{i}-{n}"), 0..1);
                    if let Some(t) = w.thread.as_mut() {
                        t.state = serde_json::json!({ "pad": pad }).to_string();
                        total.fetch_add(t.state.len(), Ordering::Relaxed);
                    }
                    journal.write(w).await.unwrap();
                    n += 1;
                }
            }));
        }
        for t in tasks {
            t.await.unwrap();
        }
        let written = total.load(Ordering::Relaxed);
        let wal = std::fs::metadata(dir.join("j.sqlite-wal")).unwrap().len() as usize;
        assert!(
            written >= ENOUGH,
            "only {written} bytes written in 60 s: too few to tell"
        );
        assert!(
            wal * 3 < written,
            "the write-ahead log is {wal} bytes after {written} bytes written"
        );
        drop((journal, store));
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// One request at a time: each commit writes whole pages (rows and indexes) for a small
    /// write, so the log grows many times faster than the bytes committed. The log's own
    /// length must start it over, or it grows far past the file limit and each restart cuts a
    /// huge file back while commits wait.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_write_ahead_log_starts_over_by_its_own_length_with_one_writer() {
        let dir = std::env::temp_dir().join(format!("pg-journal-{}-walone", std::process::id()));
        let (mut store, log) = wal_store(&dir).await;
        // Only the log's length can start it over here.
        store.wal_restart_bytes = usize::MAX;
        store.wal_restart_log_bytes = 1 << 20;
        let journal = Journal::start(store.clone(), log.clone());
        // At least 1,500 commits over at least 6 s (many background checkpoints).
        let start = std::time::Instant::now();
        let mut n = 0;
        while (n < 1500 || start.elapsed() < std::time::Duration::from_secs(6))
            && start.elapsed() < std::time::Duration::from_secs(60)
        {
            journal
                .write(step(&log, &format!("one-{n}"), 0..1))
                .await
                .unwrap();
            n += 1;
        }
        let wal = std::fs::metadata(dir.join("j.sqlite-wal")).unwrap().len() as usize;
        assert!(n >= 1500, "only {n} commits in 60 s: too few to tell");
        // A commit writes at least three pages (the thread, its record, its leaf; with their
        // indexes about ten), so a log that never started over would hold all of them. The
        // background checkpoint looks every 50 ms: the log may pass its limit by what commits
        // in that time, a small part of the run.
        let at_least_written = n * 3 * 4096;
        assert!(
            wal < at_least_written / 2,
            "the write-ahead log is {wal} bytes after {n} commits (at least {at_least_written} \
             bytes of pages)"
        );
        drop((journal, store));
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// What a store shows of its threads, owners, trails and log, to compare across an upgrade.
    async fn everything(store: &Store, log: &TransparencyLog, ids: &[String]) -> Vec<String> {
        use crate::storage::Unfinished;
        let owner = ThreadOwner {
            key: "k1".into(),
            user: "u1".into(),
        };
        let (checkpoint, size) = log.checkpoint(store).await.unwrap();
        let mut out = vec![checkpoint, format!("{size}")];
        for i in 0..size {
            out.push(format!(
                "{:?}",
                log.inclusion(store, i, size).await.unwrap()
            ));
        }
        out.push(format!("{:?}", log.leaves(store, 0, size).await.unwrap()));
        for id in ids {
            out.push(format!("{:?}", store.thread(id).await.unwrap()));
            out.push(format!("{:?}", store.owner_of(id).await.unwrap()));
            out.push(format!("{:?}", store.audit_trail(id).await.unwrap()));
            out.push(format!("{:?}", log.latest_head(store, id).await.unwrap()));
        }
        out.push(format!(
            "{:?}",
            store.threads_owned(&owner, 10).await.unwrap()
        ));
        let by_key = store
            .threads_by_conversation("conv-1", "awaiting_input", &owner, 2)
            .await
            .unwrap();
        out.push(format!("{by_key:?}"));
        for status in [Unfinished::Processing, Unfinished::AwaitingInput] {
            out.push(format!(
                "{:?}",
                store
                    .threads_with_status(status, i64::MAX, None)
                    .await
                    .unwrap()
            ));
        }
        out
    }

    /// A database in the layout every release before migrations 0006 and 0007 left (the log
    /// keyed by a second B-tree, owners in a rowid table, full thread indexes) is upgraded with
    /// everything in it: the same signed checkpoint, proofs, leaves, owners, trails and
    /// listings, and the log goes on from where it was, consistent with what it signed.
    #[tokio::test]
    async fn a_database_in_the_earlier_layout_is_upgraded_with_everything_in_it() {
        let dir = std::env::temp_dir().join(format!("pg-journal-{}-upgrade", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let url = format!("sqlite://{}", dir.join("j.sqlite").display());
        let key = || AuditKey::load_or_create(None, &dir.join("key"), "test").unwrap();
        let layout = |store: Store| async move {
            sqlx::query("SELECT name, sql FROM sqlite_master WHERE sql IS NOT NULL ORDER BY name")
                .fetch_all(&store.pool)
                .await
                .unwrap()
                .iter()
                .map(|r| format!("{}: {}", r.get::<String, _>(0), r.get::<String, _>(1)))
                .collect::<Vec<_>>()
                .join("\n")
        };
        let ids: Vec<String> = (0..6).map(|i| format!("t{i}")).collect();
        let old = Store::connect_at_schema(&url, 5).await.unwrap();
        let before_layout = layout(old.clone()).await;
        assert!(
            before_layout.contains("idx   BIGINT PRIMARY KEY"),
            "{before_layout}"
        );
        let log = Arc::new(TransparencyLog::new("test/log".into(), key()));
        let journal = Journal::start(old.clone(), log.clone());
        // One waiting conversation, finished threads, and threads still processing.
        let shaped = |mut w: Write, i: usize| {
            let t = w.thread.as_mut().unwrap();
            t.updated_at = i as i64;
            match i {
                1 => {
                    t.status = "awaiting_input".into();
                    t.conversation_key = Some("conv-1".into());
                }
                2 | 4 => t.status = "done".into(),
                _ => {}
            }
            w
        };
        for (i, id) in ids.iter().enumerate() {
            let mut w = shaped(step(&log, id, 0..2), i);
            w.owner = Some((
                id.clone(),
                ThreadOwner {
                    key: format!("k{}", i % 2),
                    user: format!("u{}", i % 2),
                },
                i as i64,
            ));
            journal.write(w).await.unwrap();
            journal
                .write(shaped(step(&log, id, 2..3), i))
                .await
                .unwrap();
        }
        let before = everything(&old, &log, &ids).await;
        let size = before[1].parse::<u64>().unwrap();
        assert_eq!(size, 12);
        // The listings hold what they should (so that the comparison below means something).
        let listed = before[before.len() - 4..].join(" ");
        for (id, count) in [("t0", 1), ("t1", 3), ("t3", 2), ("t5", 2)] {
            assert_eq!(
                listed.matches(&format!("\"{id}\"")).count(),
                count,
                "{listed}"
            );
        }
        drop((journal, old));

        let new = Store::connect(&url).await.unwrap();
        let after_layout = layout(new.clone()).await;
        assert!(
            after_layout.contains("idx   INTEGER PRIMARY KEY"),
            "{after_layout}"
        );
        assert!(after_layout.contains("WITHOUT ROWID"), "{after_layout}");
        assert!(
            after_layout.contains("WHERE status IN ('processing', 'awaiting_input')"),
            "{after_layout}"
        );
        assert!(!after_layout.contains("_by_rowid") && !after_layout.contains("_by_key"));
        // A fresh log over the upgraded store (nothing cached from before) sees the same.
        let log = Arc::new(TransparencyLog::new("test/log".into(), key()));
        let after = everything(&new, &log, &ids).await;
        assert_eq!(after.len(), before.len());
        for (a, b) in after.iter().zip(&before) {
            assert_eq!(a, b);
        }

        // And it goes on: new leaves follow, and the old checkpoint is a prefix of the new one.
        let journal = Journal::start(new.clone(), log.clone());
        journal.write(step(&log, "t6", 0..1)).await.unwrap();
        journal.write(step(&log, "t1", 3..4)).await.unwrap();
        let (_, grown) = log.checkpoint(&new).await.unwrap();
        assert_eq!(grown, size + 2);
        assert_eq!(
            log.latest_head(&new, "t1").await.unwrap().unwrap().0,
            size + 1
        );
        log.consistency(&new, size, grown).await.unwrap();
        for i in 0..grown {
            log.inclusion(&new, i, grown).await.unwrap();
        }
        // Reopening runs nothing again.
        drop((journal, new));
        let again = Store::connect(&url).await.unwrap();
        assert_eq!(layout(again).await, after_layout);
    }

    #[tokio::test]
    async fn writes_after_a_failed_one_of_their_chain_are_refused() {
        for (journal, store, log) in journals("chain").await {
            let run = uuid::Uuid::new_v4().simple().to_string();
            let dup = format!("{run}-dup");
            journal.write(step(&log, &dup, 0..2)).await.unwrap();
            let other = format!("{run}-other");
            // One request's steps: the first fails (its record exists), so the second, queued
            // behind it, must not be stored past the gap.
            let chain = Chain::new();
            let first = journal
                .submit(Write {
                    chain: chain.clone(),
                    ..step(&log, &dup, 1..2)
                })
                .await;
            let unrelated = journal.submit(step(&log, &other, 0..1)).await;
            let second = journal
                .submit(Write {
                    chain: chain.clone(),
                    ..step(&log, &dup, 2..4)
                })
                .await;
            assert!(first.wait().await.is_err());
            let err = second.wait().await.unwrap_err().to_string();
            assert!(err.contains("earlier step"), "{err}");
            unrelated.wait().await.unwrap();
            assert_eq!(store.audit_trail(&dup).await.unwrap().len(), 2, "no gap");
            // Later writes of a broken chain are refused too, even alone in their batch.
            let late = journal
                .write(Write {
                    chain,
                    ..step(&log, &dup, 4..5)
                })
                .await;
            assert!(late.is_err());
            assert_eq!(store.audit_trail(&dup).await.unwrap().len(), 2);
        }
    }

    #[tokio::test]
    async fn a_failing_write_fails_alone() {
        for (journal, store, log) in journals("failing").await {
            let run = uuid::Uuid::new_v4().simple().to_string();
            let dup = format!("{run}-dup");
            journal.write(step(&log, &dup, 0..2)).await.unwrap();
            // Queued together: a record that already exists, and good writes around it.
            let good1 = journal.submit(step(&log, &format!("{run}-a"), 0..1)).await;
            let bad = journal.submit(step(&log, &dup, 1..2)).await;
            let good2 = journal.submit(step(&log, &format!("{run}-b"), 0..1)).await;
            let err = bad.wait().await.unwrap_err().to_string();
            assert!(err.contains("audit records"), "{err}");
            assert!(err.contains("UNIQUE") || err.contains("unique"), "{err}");
            good1.wait().await.unwrap();
            good2.wait().await.unwrap();
            assert_eq!(store.audit_trail(&dup).await.unwrap().len(), 2);
            assert_eq!(
                store.audit_trail(&format!("{run}-b")).await.unwrap().len(),
                1
            );
        }
    }

    /// A PostgreSQL database of its own and a temp directory for test `tag`, or `None` (said)
    /// when `PROOFGATE_TEST_POSTGRES_URL` is unset.
    async fn postgres_database(tag: &str) -> Option<(String, std::path::PathBuf)> {
        let Ok(base) = std::env::var("PROOFGATE_TEST_POSTGRES_URL") else {
            eprintln!("PROOFGATE_TEST_POSTGRES_URL unset: PostgreSQL not tested here");
            return None;
        };
        sqlx::any::install_default_drivers();
        let name = format!("journal_{tag}_{}", std::process::id());
        let mut admin = <sqlx::AnyConnection as sqlx::Connection>::connect(&base)
            .await
            .unwrap();
        let _ = sqlx::query(sqlx::AssertSqlSafe(format!(
            "DROP DATABASE IF EXISTS {name}"
        )))
        .execute(&mut admin)
        .await;
        sqlx::query(sqlx::AssertSqlSafe(format!("CREATE DATABASE {name}")))
            .execute(&mut admin)
            .await
            .unwrap();
        let url = format!("{}/{name}", &base[..base.rfind('/').unwrap()]);
        let dir = std::env::temp_dir().join(format!("pg-journal-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        Some((url, dir))
    }

    /// PostgreSQL (when `PROOFGATE_TEST_POSTGRES_URL` is set): a replica that stopped inside a
    /// commit, holding the log's append lock (a SIGSTOP, a paused VM), holds up the others'
    /// writes only until its idle transaction is ended
    /// ([`crate::storage::PG_IDLE_IN_TRANSACTION_MS`]); they waited for hours.
    #[tokio::test]
    async fn a_replica_stopped_holding_the_append_lock_does_not_stop_the_others() {
        let Some((url, dir)) = postgres_database("frozen").await else {
            return;
        };
        let frozen = Store::connect(&url).await.unwrap();
        let store = Store::connect(&url).await.unwrap();
        let key = AuditKey::load_or_create(None, &dir.join("key"), "test").unwrap();
        let log = Arc::new(TransparencyLog::new("test/log".into(), key));
        let journal = Journal::start(store.clone(), log.clone());
        // The stopped replica: its transaction holds the append lock and says nothing more.
        let mut held = frozen.pool.acquire().await.unwrap();
        sqlx::query("BEGIN").execute(&mut *held).await.unwrap();
        crate::audit_log::lock_for_appending(&mut held, false)
            .await
            .unwrap();
        let wrote = tokio::time::timeout(
            std::time::Duration::from_secs(20),
            journal.write(step(&log, "beside-a-frozen-replica", 0..2)),
        )
        .await;
        assert!(
            matches!(wrote, Ok(Ok(_))),
            "the write waited on the stopped replica's lock"
        );
        assert_eq!(
            store
                .audit_trail("beside-a-frozen-replica")
                .await
                .unwrap()
                .len(),
            2
        );
        drop(held);
    }

    /// PostgreSQL (when `PROOFGATE_TEST_POSTGRES_URL` is set, on a database of its own): the
    /// server drops every connection (a restart, a failover, an idle timeout), and the next
    /// write still commits, because the journal takes a connection the pool has checked for
    /// every batch instead of keeping one.
    #[tokio::test]
    async fn a_write_after_postgres_dropped_every_connection_commits() {
        let Some((url, dir)) = postgres_database("drop").await else {
            return;
        };
        let store = Store::connect(&url).await.unwrap();
        let key = AuditKey::load_or_create(None, &dir.join("key"), "test").unwrap();
        let log = Arc::new(TransparencyLog::new("test/log".into(), key));
        let journal = Journal::start(store.clone(), log.clone());
        journal.write(step(&log, "before", 0..2)).await.unwrap();
        let mut killer = <sqlx::AnyConnection as sqlx::Connection>::connect(&url)
            .await
            .unwrap();
        let killed: i64 = sqlx::query(
            "SELECT COUNT(pg_terminate_backend(pid)) AS n FROM pg_stat_activity \
             WHERE datname = current_database() AND pid <> pg_backend_pid()",
        )
        .fetch_one(&mut killer)
        .await
        .unwrap()
        .get("n");
        assert!(killed >= 1, "no connection of the store was dropped");
        journal.write(step(&log, "after", 0..3)).await.unwrap();
        assert_eq!(store.audit_trail("after").await.unwrap().len(), 3);
        let (_, size) = log.checkpoint(&store).await.unwrap();
        assert_eq!(size, 2, "one leaf per write, no gap");
        drop((journal, store));
        let base = std::env::var("PROOFGATE_TEST_POSTGRES_URL").unwrap();
        let mut admin = <sqlx::AnyConnection as sqlx::Connection>::connect(&base)
            .await
            .unwrap();
        let name = url.rsplit('/').next().unwrap();
        let _ = sqlx::query(sqlx::AssertSqlSafe(format!(
            "DROP DATABASE IF EXISTS {name} WITH (FORCE)"
        )))
        .execute(&mut admin)
        .await;
    }
}

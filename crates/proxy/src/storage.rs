//! Threads and audit trails in SQLite (default, one file created on start) or PostgreSQL (by
//! URL, for several replicas behind a load balancer). Both through sqlx's Any driver with
//! portable SQL, so there is one code path to test.

use serde::Serialize;
use serde_json::Value;
use sqlx::any::{AnyPoolOptions, AnyRow};
use sqlx::{AnyPool, Row};
use std::sync::Arc;

/// A storage failure.
#[derive(Debug, thiserror::Error)]
pub enum StorageError {
    /// The database could not be opened or a statement failed.
    #[error("storage: {context}: {source}")]
    Database {
        /// What was being done.
        context: String,
        /// The driver's error.
        #[source]
        source: sqlx::Error,
    },
    /// A migration failed.
    #[error("storage: migrating the schema failed: {0}")]
    Migrate(#[from] sqlx::migrate::MigrateError),
    /// Stored JSON could not be read back.
    #[error("storage: thread {thread} holds unreadable JSON: {source}")]
    Corrupt {
        /// The thread id.
        thread: String,
        /// The parse error.
        #[source]
        source: serde_json::Error,
    },
    /// The audit log failed.
    #[error("storage: audit log: {0}")]
    AuditLog(String),
    /// The database did not answer a health check (within this many ms, or moments ago).
    #[error(
        "storage: the database failed a health check or did not answer within {0} ms; it is \
         asked again {0} ms after the last check"
    )]
    Unhealthy(u64),
    /// A queued write (see `journal`) failed.
    #[error("storage: {0}")]
    Write(String),
    /// The URL is not one proofgate can use.
    #[error("storage: unsupported URL {0:?}: use sqlite://FILE or postgres://USER:PASS@HOST/DB")]
    UnsupportedUrl(String),
}

pub(crate) fn db(context: impl Into<String>) -> impl FnOnce(sqlx::Error) -> StorageError {
    let context = context.into();
    move |source| StorageError::Database { context, source }
}

/// What a listing shows of a thread ([`Store::thread_summaries`]).
#[derive(Debug, Clone, PartialEq)]
pub struct ThreadSummary {
    /// Thread id.
    pub id: String,
    /// Status (`processing`, `awaiting_input`, `done`, ...).
    pub status: String,
    /// The question's first 1,000 characters.
    pub question: String,
    /// Created (ms since the epoch).
    pub created_at: i64,
    /// Last saved (ms since the epoch).
    pub updated_at: i64,
    /// The outcome's status, once the thread ended.
    pub verdict: Option<String>,
    /// Where the thread stands in its listing's order (ms since the epoch): when its owner was
    /// recorded in a listing by owner, its last save in a listing of every thread.
    pub listed_at: i64,
    /// In a listing by owner, what the thread's first audit record says of its owner, read by
    /// the listing's own query; `None` for a thread with no record yet, and in a listing of
    /// every thread.
    pub first_record: Option<FirstRecordOwner>,
}

/// The parts of a thread's first audit record that name its owner: enough to hold the owners'
/// table to the trail without reading whole records (a THREAD_STARTED record holds the
/// conversation, up to the body limit, and a listing read 200 of them, one query each).
#[derive(Debug, Clone, PartialEq)]
pub struct FirstRecordOwner {
    /// Whether the database could read it as JSON (see `thread_summaries`); when not, the
    /// record is read and checked on its own.
    pub readable: bool,
    /// The record's kind (THREAD_STARTED for a trail as written).
    pub kind: Option<String>,
    /// Its body's `owner` member as JSON text, when it has one.
    pub owner: Option<String>,
}

impl FirstRecordOwner {
    /// The record as far as its owner goes, for [`proofgate_core::audit::ThreadStarted::owner_in_trail`].
    pub fn as_record(&self) -> Result<Value, serde_json::Error> {
        let mut body = serde_json::Map::new();
        if let Some(owner) = &self.owner {
            body.insert("owner".into(), serde_json::from_str(owner)?);
        }
        Ok(serde_json::json!({"kind": self.kind, "body": body}))
    }
}

/// Where a page of a listing starts: after the thread `id` listed at `at` (a
/// [`ThreadSummary::listed_at`]), in the listing's order (newest first, ties by id).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListingCursor {
    /// The `listed_at` of the last thread of the page before.
    pub at: i64,
    /// Its id.
    pub id: String,
}

impl ListingCursor {
    /// The cursor after `t`.
    pub fn after(t: &ThreadSummary) -> Self {
        ListingCursor {
            at: t.listed_at,
            id: t.id.clone(),
        }
    }

    /// Its text in a URL: `<at>:<id>`.
    pub fn to_text(&self) -> String {
        format!("{}:{}", self.at, self.id)
    }

    /// Reads [`ListingCursor::to_text`]'s form; `None` when `text` is not of it.
    pub fn from_text(text: &str) -> Option<Self> {
        let (at, id) = text.split_once(':')?;
        let id_ok = !id.is_empty()
            && id.len() <= 128
            && id
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
        let at = at.parse::<i64>().ok().filter(|_| id_ok)?;
        Some(ListingCursor {
            at,
            id: id.to_string(),
        })
    }
}

/// A thread as stored: the serialized state machine plus columns to query by.
#[derive(Debug, Clone, PartialEq)]
pub struct StoredThread {
    /// Thread id.
    pub id: String,
    /// Status for listing (`processing`, `awaiting_input`, `done`, ...).
    pub status: String,
    /// The user's question.
    pub question: String,
    /// Identifies the chat conversation the thread belongs to, to resume it on the next message.
    pub conversation_key: Option<String>,
    /// The serialized `proofgate_core::thread::Thread` without its trail, as JSON text: a save
    /// writes it straight from the thread and the store keeps it as it is (checked to be JSON
    /// when read back).
    pub state: String,
    /// Creation time, ms since the epoch.
    pub created_at: i64,
    /// Last update, ms since the epoch.
    pub updated_at: i64,
}

/// A status of threads that are not finished: the ones the maintenance loop lists (and the
/// only ones the status index holds).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unfinished {
    /// A step is in flight (or was, when its server stopped).
    Processing,
    /// Waiting for the user's answers to follow-up questions.
    AwaitingInput,
}

impl Unfinished {
    /// The status as stored.
    pub fn as_str(self) -> &'static str {
        match self {
            Unfinished::Processing => "processing",
            Unfinished::AwaitingInput => "awaiting_input",
        }
    }
}

/// Who a thread belongs to: the API key that started it and the end user (the OpenAI `user`
/// field of the request, empty when there was none).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ThreadOwner {
    /// The key's id (`admin` for the configured admin key, `anonymous` with auth off).
    pub key: String,
    /// The end user, or empty.
    pub user: String,
}

/// The owner as a thread's THREAD_STARTED record names it.
impl From<ThreadOwner> for proofgate_core::audit::ThreadOwner {
    fn from(o: ThreadOwner) -> Self {
        proofgate_core::audit::ThreadOwner {
            key_id: o.key,
            end_user: o.user,
        }
    }
}

/// Inserts or updates a thread's row.
pub(crate) async fn upsert_thread(
    conn: &mut sqlx::AnyConnection,
    thread: &StoredThread,
) -> Result<(), StorageError> {
    upsert_threads(conn, &[thread]).await
}

/// Inserts or updates threads' rows (distinct ids) in one statement.
pub(crate) async fn upsert_threads(
    conn: &mut sqlx::AnyConnection,
    threads: &[&StoredThread],
) -> Result<(), StorageError> {
    let mut statements = crate::sql_batch::Statements::new(false);
    queue_threads(&mut statements, threads);
    statements
        .run(conn)
        .await
        .map_err(|f| StorageError::Database {
            context: match threads {
                [one] => format!("saving thread {}", one.id),
                _ => format!("saving {} threads", threads.len()),
            },
            source: f.source,
        })
}

/// Adds the upsert of threads' rows (distinct ids) to `statements`, as one statement.
pub(crate) fn queue_threads(
    statements: &mut crate::sql_batch::Statements,
    threads: &[&StoredThread],
) {
    if threads.is_empty() {
        return;
    }
    statements.values(
        "saving threads",
        "INSERT INTO threads (id, status, question, conversation_key, state, created_at, updated_at)",
        threads.len(),
        7,
        "ON CONFLICT (id) DO UPDATE SET status = excluded.status, \
         conversation_key = excluded.conversation_key, state = excluded.state, \
         updated_at = excluded.updated_at",
        |b| {
            for thread in threads {
                b.bind(thread.id.as_str())
                    .bind(thread.status.as_str())
                    .bind(thread.question.as_str())
                    .bind(thread.conversation_key.clone())
                    .bind(thread.state.as_str())
                    .bind(thread.created_at)
                    .bind(thread.updated_at);
            }
        },
    );
}

/// The schema's migrations for one kind of database: those of `migrations/`, shared by SQLite
/// and PostgreSQL, and on SQLite those of `migrations-sqlite/` (its own storage layout). The
/// two directories number their migrations from one sequence, so a database only ever sees its
/// own kind's and each keeps its recorded checksums.
fn migrator(sqlite: bool, up_to: i64) -> sqlx::migrate::Migrator {
    static SHARED: sqlx::migrate::Migrator = sqlx::migrate!("./migrations");
    static SQLITE: sqlx::migrate::Migrator = sqlx::migrate!("./migrations-sqlite");
    let own = SQLITE.iter().filter(|_| sqlite);
    sqlx::migrate::Migrator::with_migrations(
        SHARED
            .iter()
            .chain(own)
            .filter(|m| m.version <= up_to)
            .cloned()
            .collect(),
    )
}

/// A conversation's threads: found by the conversation's index, then the owner checked per
/// row (joining on the owner first would scan every thread of that key).
const THREADS_BY_CONVERSATION: &str =
    "SELECT t.* FROM threads t WHERE t.conversation_key = $1 AND t.status = $2 \
     AND EXISTS (SELECT 1 FROM thread_owners o WHERE o.thread_id = t.id \
     AND o.owner_key = $3 AND o.end_user = $4) \
     ORDER BY t.updated_at DESC LIMIT $5";

/// A key's threads: the owners' index (0006) gives them in order, so the read stops after
/// `limit` (ordering by the threads' last update sorted every thread the key ever started).
const THREADS_OWNED: &str = "SELECT t.* FROM thread_owners o JOIN threads t ON t.id = o.thread_id \
    WHERE o.owner_key = $1 AND o.end_user = $2 ORDER BY o.created_at DESC LIMIT $3";

/// Unfinished threads of one status: the repeated IN lets the partial index `threads_status`
/// serve the read (migration 0006).
const THREADS_WITH_STATUS: &str = "SELECT * FROM threads WHERE status = $1 \
    AND status IN ('processing', 'awaiting_input') AND updated_at <= $2 AND updated_at >= $3 \
    AND (updated_at > $3 OR id > $4) ORDER BY updated_at, id LIMIT 32";

/// How many threads the maintenance reads at a time (`THREADS_WITH_STATUS`'s LIMIT): each
/// holds its client's request, up to the body limit.
pub const MAINTENANCE_PAGE: usize = 32;

/// Ends the waiting conversations (with migration 0006's `threads_status`, through the
/// repeated IN), rather than walking every thread older than the cutoff with the write lock
/// held, as one statement with an OR did.
/// Ends the other conversations with a key (through `threads_conversation`; the unary `+`
/// keeps SQLite off the `updated_at` index, which it would otherwise pick).
const EXPIRE_KEYS: &str = "UPDATE threads SET conversation_key = NULL \
    WHERE conversation_key IS NOT NULL AND +updated_at < $1";

/// The store.
#[derive(Clone)]
pub struct Store {
    pub(crate) pool: AnyPool,
    /// One connection for the journal's group commits: the only steady writer keeps its page
    /// cache warm (a pooled connection's cache is dropped whenever another one wrote).
    pub(crate) writer: AnyPool,
    /// Whether the database is SQLite (a transaction's statements go in one call).
    pub(crate) sqlite: bool,
    /// SQLite: the task checkpointing the write-ahead log, stopped with the last clone.
    _checkpointer: Option<Arc<AbortOnDrop>>,
    /// SQLite: what the writer still has to do for the write-ahead log (see
    /// `finish_wal_checkpoint`).
    wal: Arc<std::sync::Mutex<WalDebt>>,
    /// SQLite: how many bytes the journal may commit before the writer completes a checkpoint
    /// itself.
    pub(crate) wal_restart_bytes: usize,
    /// SQLite: how long the write-ahead log may get (as the background checkpoint last saw it)
    /// before the writer completes a checkpoint itself.
    pub(crate) wal_restart_log_bytes: usize,
    /// How long a connection stays open unused (`None`: always). The pools close their idle
    /// ones; the journal closes the writer's.
    pub(crate) idle: Option<std::time::Duration>,
    /// When the database last answered a health check, and whether it answered well: one
    /// check at a time, and its answer stands for [`PING_FRESH`].
    last_ping: Arc<tokio::sync::Mutex<Option<(std::time::Instant, bool)>>>,
}

/// How long a health check's answer stands: `/healthz` takes no key and no limit, and a
/// round trip to the database on each of its calls let anyone flooding it hold the pool's
/// connections from every key's requests.
const PING_FRESH: std::time::Duration = std::time::Duration::from_secs(1);

/// Aborts a task when dropped.
struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// How often the write-ahead log is checkpointed. Each pass copies what was committed since
/// the last and syncs the database file, and a commit that syncs the log meanwhile waits for
/// the disk: smaller, more frequent passes make shorter waits. One request at a time, p99 was
/// 4.8-6.8 ms every second, 3.6-3.7 ms every 200 ms, 2.5-3.2 ms every 50 ms, 1.6-1.8 ms every
/// 20 ms and 1.3-1.4 ms every 10 ms (alternating A/B runs of one build), with 16 at a time
/// unchanged (6,420 against 6,240-6,390 requests/s); a pass runs only when something was
/// committed since the last, so an idle server makes none.
const CHECKPOINT_EVERY: std::time::Duration = std::time::Duration::from_millis(10);

/// Bytes the journal may commit before the writer completes a checkpoint itself (a backstop
/// for when the background checkpoint cannot say how long the log is).
const WAL_RESTART_BYTES: usize = 16 << 20;

/// How long the write-ahead log may get before the writer completes a checkpoint itself. The
/// log's own length decides, not the bytes committed: a commit writes whole pages (the rows'
/// pages and each index's), so one request at a time wrote about ten times its bytes to the
/// log, and 16 MB committed made a 170 MB log. Each restart then cut that file back to
/// `WAL_FILE_LIMIT`, a truncation the next commits waited for: p99 at one request at a time
/// went from 3-5 ms to 14-45 ms. Below the limit (with the background checkpoint's 50 ms of
/// lag on top), the file is reused and never truncated under steady load.
const WAL_RESTART_LOG_BYTES: usize = 24 << 20;

/// How soon the writer tries again when a checkpoint of its could not complete.
const WAL_RETRY_AFTER: std::time::Duration = std::time::Duration::from_millis(20);

/// What the writer owes the write-ahead log.
#[derive(Debug, Default)]
struct WalDebt {
    /// Bytes committed since the log last started over.
    bytes: usize,
    /// How long the log was when the background checkpoint last looked (bytes).
    log_bytes: usize,
    /// When the writer last tried to complete a checkpoint.
    tried: Option<std::time::Instant>,
    /// Whether the last try's failure was logged.
    warned: bool,
    /// Whether the journal committed since the background checkpoint last copied the whole
    /// log (it starts true: the log may hold pages from before the start).
    uncopied: bool,
}

/// Bytes a write-ahead log file is cut back to when it starts over (it never shrinks by
/// itself; a burst would otherwise keep its size on disk).
const WAL_FILE_LIMIT: i64 = 64 * 1024 * 1024;

/// Copies SQLite's write-ahead log into the database from a task of its own, beside the writer
/// (a passive checkpoint waits for no one). SQLite's automatic checkpoint ran inside whichever
/// commit took the log past 1000 pages: under load one group commit in every ~15 copied the
/// pages and synced the database file while its requests waited. Commits are durable in the
/// log either way (`synchronous`); this only moves the copy off their path.
///
/// Under steady writes this task alone never lets the log start over: SQLite rewinds it only
/// when a write begins after a checkpoint has copied every page, and here new commits land
/// while it copies. The writer finishes the job between two group commits
/// (`Store::finish_wal_checkpoint`).
///
/// Each pass also records how long the log is, for the writer to know when to finish the job.
async fn checkpoint_wal(
    pool: AnyPool,
    wal: Arc<std::sync::Mutex<WalDebt>>,
    wal_file: Option<std::path::PathBuf>,
) {
    // The log file's length and time of change as the last pass that copied it all left them.
    let mut copied_at = None;
    let seen = |file: &Option<std::path::PathBuf>| {
        let meta = std::fs::metadata(file.as_ref()?).ok()?;
        Some((meta.len(), meta.modified().ok()?))
    };
    let mut tick = tokio::time::interval(CHECKPOINT_EVERY);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    let mut warned = false;
    let mut page_size = None;
    loop {
        tick.tick().await;
        // Nothing written since a pass copied the whole log (the journal committed nothing,
        // and the log file, which every write appends to, is unchanged or gone: SQLite removes
        // it when the last connection closes): no pass, so a quiet proxy takes no connection
        // 20 times a second and the pool's connections can close when unused (`[storage]
        // connection_idle_secs`), and stay closed.
        let now = seen(&wal_file);
        let committed = std::mem::take(&mut wal.lock().unwrap_or_else(|e| e.into_inner()).uncopied);
        if !committed && (now.is_none() || now == copied_at) {
            continue;
        }
        copied_at = None;
        if page_size.is_none() {
            page_size = sqlx::query("PRAGMA page_size")
                .fetch_one(&pool)
                .await
                .ok()
                .and_then(|row| row.try_get::<i64, _>(0).ok())
                .and_then(|n| usize::try_from(n).ok());
        }
        // Columns: busy, pages in the log, pages copied.
        match sqlx::query("PRAGMA wal_checkpoint(PASSIVE)")
            .fetch_one(&pool)
            .await
        {
            Ok(row) => {
                warned = false;
                let n = |i: usize| row.try_get::<i64, _>(i).unwrap_or(-1);
                let mut debt = wal.lock().unwrap_or_else(|e| e.into_inner());
                if let (Ok(frames), Some(page_size)) = (usize::try_from(n(1)), page_size) {
                    debt.log_bytes = frames.saturating_mul(page_size);
                }
                // Busy, or pages left to copy: the next pass goes on with them.
                if n(0) != 0 || n(1) != n(2) {
                    debt.uncopied = true;
                } else {
                    copied_at = now;
                }
            }
            // Once per run of failures: the database keeps working, its log only grows.
            Err(e) => {
                wal.lock().unwrap_or_else(|e| e.into_inner()).uncopied = true;
                if !std::mem::replace(&mut warned, true) {
                    tracing::warn!("checkpointing the SQLite write-ahead log failed: {e}");
                }
            }
        }
    }
}

/// The file of a `sqlite://FILE?...` URL (`None` for an in-memory database).
pub(crate) fn sqlite_file(url: &str) -> Option<&str> {
    let rest = url.strip_prefix("sqlite://")?;
    let (file, query) = rest.split_once('?').unwrap_or((rest, ""));
    let in_memory = query.split('&').any(|p| p == "mode=memory");
    (!file.is_empty() && !file.starts_with(':') && !in_memory).then_some(file)
}

/// How long a PostgreSQL transaction may sit idle before the server ends it (ms). proofgate's
/// own transactions are a few round trips; only a stopped or cut-off process idles this long.
pub(crate) const PG_IDLE_IN_TRANSACTION_MS: u64 = if cfg!(test) { 2_000 } else { 30_000 };

/// Whether `url` names an in-memory SQLite database (it ends with the process).
pub(crate) fn sqlite_in_memory(url: &str) -> bool {
    url.starts_with("sqlite:") && sqlite_file(url).is_none()
}

/// How SQLite commits reach the disk.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SqliteSync {
    /// `synchronous = FULL` (the default): every commit is on disk before it returns.
    #[default]
    Full,
    /// `synchronous = NORMAL`: a crash of the process loses nothing, but a power loss can drop
    /// the last commits. An operator's choice (`[storage] sqlite_synchronous`), and what
    /// `just bench` compares FULL with.
    Normal,
}

impl Store {
    /// Opens (and for SQLite creates) the database and brings the schema up to date.
    pub async fn connect(url: &str) -> Result<Store, StorageError> {
        Store::connect_with(url, SqliteSync::Full, None).await
    }

    /// [`Store::connect`] with the given SQLite durability, closing connections unused for
    /// `idle` (`None`: never).
    pub async fn connect_with(
        url: &str,
        sync: SqliteSync,
        idle: Option<std::time::Duration>,
    ) -> Result<Store, StorageError> {
        Store::open(url, sync, idle, i64::MAX).await
    }

    /// A store whose schema is brought only up to migration `version`: the layout an earlier
    /// release left, for the upgrade tests.
    #[cfg(test)]
    pub(crate) async fn connect_at_schema(url: &str, version: i64) -> Result<Store, StorageError> {
        Store::open(url, SqliteSync::Full, None, version).await
    }

    async fn open(
        url: &str,
        sync: SqliteSync,
        idle: Option<std::time::Duration>,
        up_to: i64,
    ) -> Result<Store, StorageError> {
        sqlx::any::install_default_drivers();
        let url = if let Some(rest) = url.strip_prefix("sqlite://") {
            if rest.contains("mode=") {
                url.to_string()
            } else if rest.contains('?') {
                format!("{url}&mode=rwc")
            } else {
                format!("{url}?mode=rwc")
            }
        } else if url.starts_with("postgres://") || url.starts_with("postgresql://") {
            url.to_string()
        } else {
            // Redacted as the opening errors are: `postgress://u:pass@db` is a typo away.
            return Err(StorageError::UnsupportedUrl(redact(url)));
        };
        let sqlite = url.starts_with("sqlite:");
        let options = |connections: u32, cache_kib: i64| {
            AnyPoolOptions::new()
                // SQLite in WAL mode: readers run beside the one writer (the journal's group
                // commits); other writers wait on the busy timeout rather than fail.
                .max_connections(connections)
                // Unused connections close (sqlx checks every `idle`), their page caches and
                // prepared statements with them: see `[storage] connection_idle_secs`.
                .min_connections(0)
                .idle_timeout(idle)
                // A SQLite file cannot go stale under a pooled connection: skip the ping (a
                // round trip to the connection's thread) on every acquire. A PostgreSQL
                // server can.
                .test_before_acquire(!sqlite)
                // Fail fast with a clear error rather than hanging a request or a start.
                .acquire_timeout(std::time::Duration::from_secs(5))
                .after_connect(move |conn, _| {
                    Box::pin(async move {
                        if sqlite {
                            // WAL with synchronous=FULL: every commit (each step's audit
                            // records, each log leaf) is on disk before the loop goes on, so a
                            // power loss cannot drop a record whose effects were returned.
                            let sync = match sync {
                                SqliteSync::Full => "FULL",
                                SqliteSync::Normal => "NORMAL",
                            };
                            // Statement journals in memory: an upsert of many rows would
                            // otherwise create and unlink a temporary file per transaction.
                            // No automatic checkpoint: see `checkpoint_wal`.
                            let pragmas = format!(
                                "PRAGMA journal_mode = WAL; PRAGMA synchronous = {sync}; \
                                 PRAGMA temp_store = MEMORY; PRAGMA cache_size = -{cache_kib}; \
                                 PRAGMA wal_autocheckpoint = 0; \
                                 PRAGMA journal_size_limit = {WAL_FILE_LIMIT}"
                            );
                            sqlx::Executor::execute(&mut *conn, sqlx::AssertSqlSafe(pragmas))
                                .await?;
                        } else {
                            // A replica frozen (SIGSTOP, a paused VM, a partition) inside a
                            // commit held the log's append lock, and with it every replica's
                            // writes, until the server noticed the dead client: about two
                            // hours of default keepalives. Its transaction now ends after
                            // this long idle, and dead peers are found within a minute and a
                            // half.
                            let settings = format!(
                                "SET idle_in_transaction_session_timeout = {PG_IDLE_IN_TRANSACTION_MS}; \
                                 SET tcp_keepalives_idle = 60; \
                                 SET tcp_keepalives_interval = 10; \
                                 SET tcp_keepalives_count = 3"
                            );
                            sqlx::Executor::execute(&mut *conn, sqlx::AssertSqlSafe(settings))
                                .await?;
                        }
                        Ok(())
                    })
                })
        };
        let opening = || db(format!("opening {}", redact(&url)));
        let pool = options(if sqlite { 4 } else { 10 }, 1024)
            .connect(&url)
            .await
            .map_err(opening())?;
        migrator(sqlite, up_to).run(&pool).await?;
        // Page caches: the journal appends, so its working set is the right edges of a few
        // B-trees; 2 MiB keeps them warm (8 MiB served no more requests per second and held
        // 3-8 MB more after load, A/B at c=16). Readers serve single threads and bundles.
        let writer = options(1, 2 * 1024)
            .connect(&url)
            .await
            .map_err(opening())?;
        let wal = Arc::new(std::sync::Mutex::new(WalDebt {
            uncopied: true,
            ..WalDebt::default()
        }));
        let checkpointer = sqlite.then(|| {
            Arc::new(AbortOnDrop(tokio::spawn(checkpoint_wal(
                pool.clone(),
                wal.clone(),
                sqlite_file(&url).map(|f| std::path::PathBuf::from(format!("{f}-wal"))),
            ))))
        });
        Ok(Store {
            pool,
            writer,
            sqlite,
            _checkpointer: checkpointer,
            wal,
            wal_restart_bytes: WAL_RESTART_BYTES,
            wal_restart_log_bytes: WAL_RESTART_LOG_BYTES,
            idle,
            last_ping: Default::default(),
        })
    }

    /// SQLite: counts `bytes` the journal just committed into the write-ahead log.
    pub(crate) fn wal_grew(&self, bytes: usize) {
        if self.sqlite {
            let mut debt = self.wal.lock().unwrap_or_else(|e| e.into_inner());
            debt.bytes += bytes;
            debt.uncopied = true;
        }
    }

    /// SQLite: once the journal has committed `wal_restart_bytes` since the log last started
    /// over, or the background checkpoint saw the log reach `wal_restart_log_bytes`, checkpoints it on the writer's own connection between two group commits, so that
    /// the copy ends with no commit after it and the next one starts the log over. Passive: it
    /// waits for no one; while the background checkpoint runs or a reader holds an old
    /// snapshot it does not complete, and is tried again a little later. The background task has
    /// copied all but the last moments' pages, so this is short. Without it the log grew
    /// without end under steady load (2.6 GB in 70 s at 2,000 requests/s), and commits got
    /// slower with it.
    pub(crate) async fn finish_wal_checkpoint(&self, writer: &mut sqlx::AnyConnection) {
        {
            let mut debt = self.wal.lock().unwrap_or_else(|e| e.into_inner());
            if !self.sqlite
                || (debt.bytes < self.wal_restart_bytes
                    && debt.log_bytes < self.wal_restart_log_bytes)
                || debt.tried.is_some_and(|t| t.elapsed() < WAL_RETRY_AFTER)
            {
                return;
            }
            debt.tried = Some(std::time::Instant::now());
        }
        // Columns: busy, pages in the log, pages copied.
        match sqlx::query("PRAGMA wal_checkpoint(PASSIVE)")
            .fetch_one(&mut *writer)
            .await
        {
            Ok(row) => {
                let n = |i: usize| row.try_get::<i64, _>(i).unwrap_or(-1);
                let mut debt = self.wal.lock().unwrap_or_else(|e| e.into_inner());
                debt.warned = false;
                if n(0) == 0 && n(1) == n(2) {
                    *debt = WalDebt::default();
                }
            }
            Err(e) => {
                // Once per run of failures, not every 20 ms: the database keeps working, its
                // log only grows.
                let mut debt = self.wal.lock().unwrap_or_else(|e| e.into_inner());
                if !std::mem::replace(&mut debt.warned, true) {
                    tracing::warn!(
                        "completing a checkpoint of the SQLite write-ahead log failed (it will \
                         grow until one succeeds; check the disk and the database file): {e}"
                    );
                }
            }
        }
    }

    /// Saves the thread and appends its new audit records, atomically.
    pub async fn save(
        &self,
        thread: &StoredThread,
        new_records: &[(u64, Value)],
    ) -> Result<(), StorageError> {
        let mut tx = self
            .pool
            .begin()
            .await
            .map_err(db("starting a transaction"))?;
        upsert_thread(&mut tx, thread).await?;
        for (seq, record) in new_records {
            let seq = i64::try_from(*seq).unwrap_or(i64::MAX);
            sqlx::query("INSERT INTO audit_records (thread_id, seq, record) VALUES ($1, $2, $3)")
                .bind(&thread.id)
                .bind(seq)
                .bind(record.to_string())
                .execute(&mut *tx)
                .await
                .map_err(db(format!(
                    "appending audit record {seq} of thread {}",
                    thread.id
                )))?;
        }
        tx.commit().await.map_err(db("committing"))?;
        Ok(())
    }

    fn row_to_thread(row: &AnyRow) -> Result<StoredThread, StorageError> {
        let id: String = row.try_get("id").map_err(db("reading a thread row"))?;
        let state: String = row.try_get("state").map_err(db("reading a thread row"))?;
        // Checked here, so that a damaged row is reported as such wherever it is read.
        serde_json::from_str::<serde::de::IgnoredAny>(&state).map_err(|source| {
            StorageError::Corrupt {
                thread: id.clone(),
                source,
            }
        })?;
        Ok(StoredThread {
            status: row.try_get("status").map_err(db("reading a thread row"))?,
            question: row
                .try_get("question")
                .map_err(db("reading a thread row"))?,
            conversation_key: row
                .try_get("conversation_key")
                .map_err(db("reading a thread row"))?,
            created_at: row
                .try_get("created_at")
                .map_err(db("reading a thread row"))?,
            updated_at: row
                .try_get("updated_at")
                .map_err(db("reading a thread row"))?,
            id,
            state,
        })
    }

    /// One thread by id.
    pub async fn thread(&self, id: &str) -> Result<Option<StoredThread>, StorageError> {
        let row = sqlx::query("SELECT * FROM threads WHERE id = $1")
            .bind(id)
            .fetch_optional(&self.pool)
            .await
            .map_err(db(format!("loading thread {id}")))?;
        row.as_ref().map(Self::row_to_thread).transpose()
    }

    /// Up to `limit` threads of `owner`'s conversation `key` with the given status, newest
    /// first (the caller decides what more than one match means).
    pub async fn threads_by_conversation(
        &self,
        key: &str,
        status: &str,
        owner: &ThreadOwner,
        limit: i64,
    ) -> Result<Vec<StoredThread>, StorageError> {
        let rows = sqlx::query(THREADS_BY_CONVERSATION)
            .bind(key)
            .bind(status)
            .bind(&owner.key)
            .bind(&owner.user)
            .bind(limit)
            .fetch_all(&self.pool)
            .await
            .map_err(db("looking up a conversation"))?;
        rows.iter().map(Self::row_to_thread).collect()
    }

    /// Records who a thread belongs to; called before the thread's first save. The first owner
    /// stays: a thread never changes hands.
    pub async fn set_owner(
        &self,
        thread_id: &str,
        owner: &ThreadOwner,
        now_ms: i64,
    ) -> Result<(), StorageError> {
        sqlx::query(
            "INSERT INTO thread_owners (thread_id, owner_key, end_user, created_at) \
             VALUES ($1, $2, $3, $4) ON CONFLICT (thread_id) DO NOTHING",
        )
        .bind(thread_id)
        .bind(&owner.key)
        .bind(&owner.user)
        .bind(now_ms)
        .execute(&self.pool)
        .await
        .map_err(db(format!("recording the owner of thread {thread_id}")))?;
        Ok(())
    }

    /// Who a thread belongs to (`None` for threads from before owners were recorded).
    pub async fn owner_of(&self, thread_id: &str) -> Result<Option<ThreadOwner>, StorageError> {
        let row = sqlx::query("SELECT owner_key, end_user FROM thread_owners WHERE thread_id = $1")
            .bind(thread_id)
            .fetch_optional(&self.pool)
            .await
            .map_err(db(format!("loading the owner of thread {thread_id}")))?;
        row.map(|r| {
            Ok(ThreadOwner {
                key: r.try_get("owner_key").map_err(db("reading an owner row"))?,
                user: r.try_get("end_user").map_err(db("reading an owner row"))?,
            })
        })
        .transpose()
    }

    /// The threads of one owner, most recently started first (by its owner record, written
    /// with the thread's first save).
    pub async fn threads_owned(
        &self,
        owner: &ThreadOwner,
        limit: i64,
    ) -> Result<Vec<StoredThread>, StorageError> {
        let rows = sqlx::query(THREADS_OWNED)
            .bind(&owner.key)
            .bind(&owner.user)
            .bind(limit)
            .fetch_all(&self.pool)
            .await
            .map_err(db("listing threads"))?;
        rows.iter().map(Self::row_to_thread).collect()
    }

    /// What a listing shows of the threads of `owner` (every thread for `None`), newest
    /// first, `limit` at most, after `after` when given: the columns, the question's first
    /// 1,000 characters and the outcome's status, read in the database. A listing read each
    /// thread's whole state (the client's request is in it, up to the body limit) and parsed
    /// it: 200 of them per request.
    pub async fn thread_summaries(
        &self,
        owner: Option<&ThreadOwner>,
        limit: i64,
        after: Option<&ListingCursor>,
    ) -> Result<Vec<ThreadSummary>, StorageError> {
        // SQLite reads a JSON text's member with `->` as is; PostgreSQL needs the text cast.
        // Each is read only where it can be: PostgreSQL's JSON refuses a `\u0000` escape (an
        // LLM's text may hold one) and SQLite's an invalid text, and one such row failed the
        // whole listing.
        let readable = |col: &str| {
            if self.sqlite {
                format!("json_valid({col})")
            } else {
                format!("strpos({col}, '\\u0000') = 0")
            }
        };
        let json = |col: &str| {
            if self.sqlite {
                col.to_string()
            } else {
                format!("CAST({col} AS JSON)")
            }
        };
        let verdict = format!(
            "CASE WHEN {} THEN {} -> 'state' -> 'outcome' ->> 'status' END",
            readable("t.state"),
            json("t.state")
        );
        let columns = format!(
            "SELECT t.id, t.status, substr(t.question, 1, 1000) AS question, t.created_at, \
             t.updated_at, {verdict} AS verdict"
        );
        // The first record's owner, read in the same query (the database reads the JSON),
        // for the page of threads only (the limit is taken first).
        let first_owner = if self.sqlite {
            "r.record -> 'body' -> 'owner'".to_string()
        } else {
            format!("CAST({} -> 'body' -> 'owner' AS TEXT)", json("r.record"))
        };
        let first_kind = format!("{} ->> 'kind'", json("r.record"));
        let first_readable = readable("r.record");
        // Pages are keyed by (time, id), newest first: an offset would skip or repeat threads
        // started while a client pages.
        // A row value, which both databases turn into an index range (PostgreSQL reads
        // `at < $1 OR (at = $1 AND id < $2)` as a filter, a page deep in a listing then scanning
        // every row before it).
        let after_clause = |at: &str, id: &str, first: u32| match after {
            Some(_) => format!(" AND ({at}, {id}) < (${first}, ${})", first + 1),
            None => String::new(),
        };
        let params = if after.is_some() { 2 } else { 0 };
        let query = match owner {
            Some(o) => sqlx::query(sqlx::AssertSqlSafe(format!(
                "{columns}, t.owned_at AS listed_at, \
                 CAST(CASE WHEN r.thread_id IS NULL THEN 0 WHEN {first_readable} THEN 1 \
                 ELSE 2 END AS BIGINT) AS first_state, \
                 CASE WHEN {first_readable} THEN {first_owner} END AS first_owner, \
                 CASE WHEN {first_readable} THEN {first_kind} END AS first_kind \
                 FROM (SELECT t.*, o.created_at AS owned_at FROM thread_owners o \
                       JOIN threads t ON t.id = o.thread_id \
                       WHERE o.owner_key = $1 AND o.end_user = $2{} \
                       ORDER BY o.created_at DESC, o.thread_id DESC LIMIT ${}) t \
                 LEFT JOIN audit_records r ON r.thread_id = t.id AND r.seq = 0 \
                 ORDER BY t.owned_at DESC, t.id DESC",
                after_clause("o.created_at", "o.thread_id", 3),
                3 + params
            )))
            .bind(o.key.clone())
            .bind(o.user.clone()),
            None => sqlx::query(sqlx::AssertSqlSafe(format!(
                "{columns}, t.updated_at AS listed_at FROM threads t WHERE 1 = 1{} \
                 ORDER BY t.updated_at DESC, t.id DESC LIMIT ${}",
                after_clause("t.updated_at", "t.id", 1),
                1 + params
            ))),
        };
        let query = match after {
            Some(a) => query.bind(a.at).bind(a.id.clone()),
            None => query,
        };
        let rows = query
            .bind(limit)
            .fetch_all(&self.pool)
            .await
            .map_err(db("listing threads"))?;
        rows.iter()
            .map(|r| {
                let read = || db("reading a thread row");
                Ok(ThreadSummary {
                    id: r.try_get("id").map_err(read())?,
                    status: r.try_get("status").map_err(read())?,
                    question: r.try_get("question").map_err(read())?,
                    created_at: r.try_get("created_at").map_err(read())?,
                    updated_at: r.try_get("updated_at").map_err(read())?,
                    verdict: r.try_get("verdict").map_err(read())?,
                    listed_at: r.try_get("listed_at").map_err(read())?,
                    first_record: match owner {
                        Some(_) => match r.try_get::<i64, _>("first_state").map_err(read())? {
                            0 => None,
                            state => Some(FirstRecordOwner {
                                readable: state == 1,
                                kind: r.try_get("first_kind").map_err(read())?,
                                owner: r.try_get("first_owner").map_err(read())?,
                            }),
                        },
                        None => None,
                    },
                })
            })
            .collect()
    }

    /// The most recently updated threads.
    pub async fn threads(&self, limit: i64) -> Result<Vec<StoredThread>, StorageError> {
        let rows = sqlx::query("SELECT * FROM threads ORDER BY updated_at DESC LIMIT $1")
            .bind(limit)
            .fetch_all(&self.pool)
            .await
            .map_err(db("listing threads"))?;
        rows.iter().map(Self::row_to_thread).collect()
    }

    /// The threads still processing, or those awaiting input (to deliver question timeouts),
    /// last updated at `updated_at_most` or before (and after `after`, the last update and id
    /// of a page read before: threads updated at the same moment are told apart by id), oldest
    /// update first, [`MAINTENANCE_PAGE`] at most: the maintenance
    /// reads only the threads old enough to need it, not every waiting one, a page at a time.
    pub async fn threads_with_status(
        &self,
        status: Unfinished,
        updated_at_most: i64,
        after: Option<(i64, String)>,
    ) -> Result<Vec<StoredThread>, StorageError> {
        let (after_at, after_id) = after.unwrap_or((i64::MIN, String::new()));
        let rows = sqlx::query(THREADS_WITH_STATUS)
            .bind(status.as_str())
            .bind(updated_at_most)
            .bind(after_at)
            .bind(after_id)
            .fetch_all(&self.pool)
            .await
            .map_err(db(format!("listing {} threads", status.as_str())))?;
        rows.iter().map(Self::row_to_thread).collect()
    }

    /// The database server's clock, in ms since the epoch. Each replica stamps `updated_at`
    /// with its own clock and reads another's stamps as how long ago a thread was saved, so
    /// each compares its clock with this one, and serves nothing while they disagree (see
    /// `server::clock_off`).
    pub async fn clock_ms(&self) -> Result<i64, StorageError> {
        let sql = if self.sqlite {
            "SELECT CAST((julianday('now') - 2440587.5) * 86400000.0 AS INTEGER)"
        } else {
            "SELECT CAST(EXTRACT(EPOCH FROM clock_timestamp()) * 1000 AS BIGINT)"
        };
        sqlx::query_scalar::<_, i64>(sql)
            .fetch_one(&self.pool)
            .await
            .map_err(db("reading the database's clock"))
    }

    /// Takes over a thread if it was last saved at `seen_updated_at` (no other replica or task
    /// has touched it since): marks it updated at `now` and returns true.
    pub async fn claim(
        &self,
        id: &str,
        seen_updated_at: i64,
        now: i64,
    ) -> Result<bool, StorageError> {
        let done =
            sqlx::query("UPDATE threads SET updated_at = $1 WHERE id = $2 AND updated_at = $3")
                .bind(now)
                .bind(id)
                .bind(seen_updated_at)
                .execute(&self.pool)
                .await
                .map_err(db(format!("claiming thread {id}")))?;
        Ok(done.rows_affected() == 1)
    }

    /// Takes a thread waiting for answers to answer it, if it is still waiting and was last
    /// saved at `seen_updated_at`: marks it `processing`, updated at `now`, and returns true.
    /// Two answers to one thread (a double submit, an SDK's retry, the questions' timeout)
    /// then cannot both drive it: the second finds it taken. Stamping the time alone was not
    /// enough, for a request reading the row after the first claim saw it waiting still.
    pub async fn claim_waiting(
        &self,
        id: &str,
        seen_updated_at: i64,
        now: i64,
    ) -> Result<bool, StorageError> {
        let done = sqlx::query(
            "UPDATE threads SET updated_at = $1, status = 'processing' \
             WHERE id = $2 AND updated_at = $3 AND status = 'awaiting_input'",
        )
        .bind(now)
        .bind(id)
        .bind(seen_updated_at)
        .execute(&self.pool)
        .await
        .map_err(db(format!("claiming thread {id} to answer it")))?;
        Ok(done.rows_affected() == 1)
    }

    /// Stores a policy document under its name (its content hash) unless it is stored
    /// already: once per policy version, before any trail names it.
    pub async fn put_policy_document(
        &self,
        name: &str,
        document: &Value,
    ) -> Result<(), StorageError> {
        let now = i64::try_from(crate::app::now_ms()).unwrap_or(i64::MAX);
        sqlx::query(
            "INSERT INTO policy_documents (hash, document, created_at) VALUES ($1, $2, $3) \
             ON CONFLICT (hash) DO NOTHING",
        )
        .bind(name)
        .bind(document.to_string())
        .bind(now)
        .execute(&self.pool)
        .await
        .map_err(db(format!("storing the policy document {name}")))?;
        Ok(())
    }

    /// The policy document stored under `name`, if any.
    pub async fn policy_document(&self, name: &str) -> Result<Option<Value>, StorageError> {
        let row = sqlx::query("SELECT document FROM policy_documents WHERE hash = $1")
            .bind(name)
            .fetch_optional(&self.pool)
            .await
            .map_err(db(format!("loading the policy document {name}")))?;
        row.map(|r| {
            let text: String = r
                .try_get("document")
                .map_err(db("reading a policy document"))?;
            serde_json::from_str(&text).map_err(|e| {
                StorageError::Write(format!(
                    "the stored policy document {name} is not JSON: {e}"
                ))
            })
        })
        .transpose()
    }

    /// The audit trail of a thread, in order.
    pub async fn audit_trail(&self, id: &str) -> Result<Vec<Value>, StorageError> {
        let rows =
            sqlx::query("SELECT record FROM audit_records WHERE thread_id = $1 ORDER BY seq")
                .bind(id)
                .fetch_all(&self.pool)
                .await
                .map_err(db(format!("loading the audit trail of {id}")))?;
        rows.iter()
            .map(|r| {
                let text: String = r.try_get("record").map_err(db("reading an audit record"))?;
                serde_json::from_str(&text).map_err(|source| StorageError::Corrupt {
                    thread: id.to_string(),
                    source,
                })
            })
            .collect()
    }

    /// A thread's first audit record (THREAD_STARTED), if it has one.
    pub async fn first_record(&self, id: &str) -> Result<Option<Value>, StorageError> {
        let row = sqlx::query("SELECT record FROM audit_records WHERE thread_id = $1 AND seq = 0")
            .bind(id)
            .fetch_optional(&self.pool)
            .await
            .map_err(db(format!("loading the first audit record of {id}")))?;
        row.map(|r| {
            let text: String = r.try_get("record").map_err(db("reading an audit record"))?;
            serde_json::from_str(&text).map_err(|source| StorageError::Corrupt {
                thread: id.to_string(),
                source,
            })
        })
        .transpose()
    }

    /// A thread's audit records and its log leaves (index, signed note), read in one statement
    /// so that both are of one moment: a commit (records and their head's leaf in one
    /// transaction) is wholly in both or in neither. Read apart, a commit landing between the
    /// two reads showed a head past the trail's end, as a trail cut back shows it.
    pub async fn trail_and_leaves(
        &self,
        id: &str,
    ) -> Result<(Vec<Value>, Vec<(i64, String)>), StorageError> {
        let rows = sqlx::query(
            "SELECT CAST(0 AS BIGINT) AS part, seq AS n, record AS body FROM audit_records \
             WHERE thread_id = $1 \
             UNION ALL SELECT CAST(1 AS BIGINT), idx, note FROM log_leaves WHERE thread_id = $1 \
             ORDER BY 1, 2",
        )
        .bind(id)
        .fetch_all(&self.pool)
        .await
        .map_err(db(format!(
            "loading the audit trail and log leaves of {id}"
        )))?;
        let (mut trail, mut leaves) = (Vec::new(), Vec::new());
        for r in &rows {
            let read = || db("reading an audit record or a log leaf");
            let part: i64 = r.try_get("part").map_err(read())?;
            let n: i64 = r.try_get("n").map_err(read())?;
            let body: String = r.try_get("body").map_err(read())?;
            if part == 0 {
                trail.push(serde_json::from_str(&body).map_err(|source| {
                    StorageError::Corrupt {
                        thread: id.to_string(),
                        source,
                    }
                })?);
            } else {
                leaves.push((n, body));
            }
        }
        Ok((trail, leaves))
    }

    /// Ends the conversations last updated before `cutoff_ms`: they can no longer be resumed
    /// (no conversation key). Threads, owners and audit trails are kept; a thread still waiting
    /// for answers is ended with its final record by the maintenance (not here, where it was
    /// marked `expired` with its trail stopped at the question). Returns how many
    /// conversations ended.
    pub async fn expire(&self, cutoff_ms: i64) -> Result<u64, StorageError> {
        let mut tx = self
            .pool
            .begin()
            .await
            .map_err(db("ending expired conversations"))?;
        let mut ended = 0;
        // Threads waiting for answers are ended one by one, each with its final record
        // (`server::expire_waiting`): marked expired here, their trails stopped at the question
        // for good, which no audit could tell from a trail cut back.
        for sql in [EXPIRE_KEYS] {
            ended += sqlx::query(sql)
                .bind(cutoff_ms)
                .execute(&mut *tx)
                .await
                .map_err(db("ending expired conversations"))?
                .rows_affected();
        }
        tx.commit()
            .await
            .map_err(db("ending expired conversations"))?;
        Ok(ended)
    }

    /// Up to `limit` finished threads last updated before `cutoff_ms` (those whose trails
    /// audit retention deletes), oldest first, after `after` (the last one of the page before,
    /// as its update time and id): a page at a time, since a first pass over a large store
    /// would otherwise list and delete every old thread before the pass's other work.
    pub async fn trails_past_retention(
        &self,
        cutoff_ms: i64,
        after: Option<&(i64, String)>,
        limit: i64,
    ) -> Result<Vec<(i64, String)>, StorageError> {
        let (after_at, after_id) = after
            .map(|(at, id)| (*at, id.as_str()))
            .unwrap_or((i64::MIN, ""));
        Ok(sqlx::query(
            "SELECT id, updated_at FROM threads WHERE updated_at < $1 \
             AND status IN ('done', 'error', 'expired') \
             AND (updated_at > $2 OR (updated_at = $2 AND id > $3)) \
             ORDER BY updated_at, id LIMIT $4",
        )
        .bind(cutoff_ms)
        .bind(after_at)
        .bind(after_id)
        .bind(limit)
        .fetch_all(&self.pool)
        .await
        .map_err(db("finding trails past retention"))?
        .iter()
        .filter_map(|r| {
            Some((
                r.try_get::<i64, _>("updated_at").ok()?,
                r.try_get::<String, _>("id").ok()?,
            ))
        })
        .collect())
    }

    /// Deletes thread `id` with its owners and audit trail inside `tx`, if it is still finished
    /// and last updated before `cutoff_ms` (checked in the transaction: a thread continued
    /// since it was listed keeps everything); returns the deleted trail's head (last seq and
    /// hash), which the caller logs in the same transaction (see `AuditLog::delete_trail`), or
    /// `None` when nothing is to be logged (not due any more, or no record).
    pub(crate) async fn delete_trail_in(
        &self,
        tx: &mut sqlx::Transaction<'_, sqlx::Any>,
        id: &str,
        cutoff_ms: i64,
    ) -> Result<Option<(u64, String)>, StorageError> {
        let due = sqlx::query(
            "DELETE FROM threads WHERE id = $1 AND updated_at < $2 \
             AND status IN ('done', 'error', 'expired')",
        )
        .bind(id)
        .bind(cutoff_ms)
        .execute(&mut **tx)
        .await
        .map_err(db(format!("deleting thread {id}")))?;
        if due.rows_affected() == 0 {
            return Ok(None);
        }
        let last = sqlx::query(
            "SELECT seq, record FROM audit_records WHERE thread_id = $1 ORDER BY seq DESC LIMIT 1",
        )
        .bind(id)
        .fetch_optional(&mut **tx)
        .await
        .map_err(db("reading a trail's head"))?;
        for q in [
            "DELETE FROM audit_records WHERE thread_id = $1",
            "DELETE FROM thread_owners WHERE thread_id = $1",
        ] {
            sqlx::query(q)
                .bind(id)
                .execute(&mut **tx)
                .await
                .map_err(db(format!("deleting trail {id}")))?;
        }
        let Some(r) = last else {
            return Ok(None);
        };
        let seq: i64 = r.try_get("seq").map_err(db("reading a trail's head"))?;
        let text: String = r.try_get("record").map_err(db("reading a trail's head"))?;
        let hash = serde_json::from_str::<Value>(&text)
            .ok()
            .and_then(|v| v.get("hash").and_then(Value::as_str).map(String::from))
            .unwrap_or_default();
        Ok(Some((seq as u64, hash)))
    }

    /// Whether the database answers: asked at most once at a time, within [`PING_FRESH`],
    /// and not again within [`PING_FRESH`] of an answer, good or bad (a failing database is
    /// not asked again by every waiting caller in turn).
    pub async fn ping(&self) -> Result<(), StorageError> {
        let mut last = self.last_ping.lock().await;
        let healthy = match *last {
            Some((at, healthy)) if at.elapsed() < PING_FRESH => healthy,
            _ => {
                let answered =
                    tokio::time::timeout(PING_FRESH, sqlx::query("SELECT 1").execute(&self.pool))
                        .await;
                let healthy = matches!(answered, Ok(Ok(_)));
                *last = Some((std::time::Instant::now(), healthy));
                if let Ok(Err(e)) = answered {
                    return Err(db("health check")(e));
                }
                healthy
            }
        };
        if healthy {
            Ok(())
        } else {
            Err(StorageError::Unhealthy(PING_FRESH.as_millis() as u64))
        }
    }
}

/// The URL without its password, for messages.
pub(crate) fn redact(url: &str) -> String {
    match (url.find("://"), url.rfind('@')) {
        (Some(s), Some(at)) if at > s => {
            let creds = &url[s + 3..at];
            match creds.find(':') {
                Some(c) => format!("{}{}:***{}", &url[..s + 3], &creds[..c], &url[at..]),
                None => url.to_string(),
            }
        }
        _ => url.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// Each test runs on SQLite, and on PostgreSQL when `PROOFGATE_TEST_POSTGRES_URL` is set
    /// (`just test` always sets it, through scripts/with-postgres.sh).
    async fn stores(name: &str) -> Vec<(Store, String)> {
        let dir = std::env::temp_dir().join(format!("pg-store-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let sqlite = format!("sqlite://{}", dir.join("t.sqlite").display());
        let mut out = vec![(Store::connect(&sqlite).await.unwrap(), sqlite)];
        match std::env::var("PROOFGATE_TEST_POSTGRES_URL") {
            Ok(pg) => out.push((Store::connect(&pg).await.unwrap(), pg)),
            Err(_) => eprintln!("PROOFGATE_TEST_POSTGRES_URL unset: PostgreSQL not tested here"),
        }
        out
    }

    /// A health check's answer stands for a moment: a closed pool still passes right after
    /// an answer, and fails once it is stale; a failure is not remembered.
    #[tokio::test]
    async fn a_health_check_answer_stands_for_a_moment() {
        for (store, _) in stores("ping").await {
            store.ping().await.unwrap();
            store.pool.close().await;
            store.ping().await.unwrap();
            *store.last_ping.lock().await = Some((std::time::Instant::now() - PING_FRESH, true));
            assert!(store.ping().await.is_err());
            // The failure stands for a moment too, without asking again.
            assert!(store.ping().await.is_err());
            assert!(matches!(
                store.last_ping.lock().await.as_ref(),
                Some((_, false))
            ));
        }
    }

    /// Ids unique per test run, since the PostgreSQL database is shared by the tests.
    fn id(name: &str) -> String {
        format!(
            "{name}-{}-{}",
            std::process::id(),
            uuid::Uuid::new_v4().simple()
        )
    }

    fn thread(id: &str, status: &str, at: i64) -> StoredThread {
        StoredThread {
            id: id.into(),
            status: status.into(),
            question: "Q?".into(),
            conversation_key: Some(format!("conv-{id}")),
            state: json!({"state": status}).to_string(),
            created_at: at,
            updated_at: at,
        }
    }

    #[tokio::test]
    async fn the_sqlite_log_is_checkpointed_off_the_commit_path() {
        let dir = std::env::temp_dir().join(format!("pg-store-{}-wal", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("t.sqlite");
        let store = Store::connect(&format!("sqlite://{}", file.display()))
            .await
            .unwrap();
        // No commit copies the log into the database itself.
        let auto: i64 = sqlx::query("PRAGMA wal_autocheckpoint")
            .fetch_one(&store.writer)
            .await
            .unwrap()
            .get(0);
        assert_eq!(auto, 0);
        tokio::time::sleep(CHECKPOINT_EVERY * 2).await;
        let before = std::fs::metadata(&file).unwrap().len();
        for i in 0..200 {
            store
                .save(
                    &thread(&id(&format!("wal{i}")), "done", i),
                    &[(0, json!({"pad": "x".repeat(2000)}))],
                )
                .await
                .unwrap();
        }
        // ... the background task does: the database file grows by the rows' pages.
        let mut grown = 0;
        for _ in 0..50 {
            tokio::time::sleep(CHECKPOINT_EVERY).await;
            grown = std::fs::metadata(&file).unwrap().len() - before;
            if grown > 200 * 2000 {
                break;
            }
        }
        assert!(
            grown > 200 * 2000,
            "the database grew by only {grown} bytes"
        );
    }

    #[tokio::test]
    async fn the_databases_clock_is_read_in_ms_since_the_epoch() {
        for (store, url) in stores("clock").await {
            let now = i64::try_from(crate::app::now_ms()).unwrap();
            let db = store.clock_ms().await.unwrap();
            // The test's database runs on this machine: the same clock, to within a second.
            assert!((db - now).abs() < 1000, "{url}: {db} against {now}");
        }
    }

    #[tokio::test]
    async fn saves_loads_and_survives_reopening() {
        for (store, url) in stores("reopen").await {
            let t1 = id("t1");
            store
                .save(
                    &thread(&t1, "awaiting_input", 10),
                    &[(0, json!({"seq": 0}))],
                )
                .await
                .unwrap();
            store
                .save(
                    &thread(&t1, "awaiting_input", 11),
                    &[(1, json!({"seq": 1}))],
                )
                .await
                .unwrap();
            drop(store);
            let store = Store::connect(&url).await.unwrap();
            let t = store.thread(&t1).await.unwrap().unwrap();
            assert_eq!((t.created_at, t.updated_at), (10, 11), "{url}");
            assert_eq!(
                store.audit_trail(&t1).await.unwrap(),
                vec![json!({"seq": 0}), json!({"seq": 1})]
            );
            // Conversations are looked up per owner.
            let owner = ThreadOwner {
                key: id("key"),
                user: "alice".into(),
            };
            let conv = format!("conv-{t1}");
            let none = store
                .threads_by_conversation(&conv, "awaiting_input", &owner, 2)
                .await
                .unwrap();
            assert!(none.is_empty(), "{url}: a thread without owner matched");
            store.set_owner(&t1, &owner, 10).await.unwrap();
            let found = store
                .threads_by_conversation(&conv, "awaiting_input", &owner, 2)
                .await
                .unwrap();
            assert_eq!(found.len(), 1);
            assert_eq!(found[0].id, t1);
            let bob = ThreadOwner {
                user: "bob".into(),
                ..owner.clone()
            };
            assert!(store
                .threads_by_conversation(&conv, "awaiting_input", &bob, 2)
                .await
                .unwrap()
                .is_empty());
            // The first owner stays.
            store.set_owner(&t1, &bob, 11).await.unwrap();
            assert_eq!(store.owner_of(&t1).await.unwrap(), Some(owner.clone()));
            assert_eq!(store.threads_owned(&owner, 10).await.unwrap().len(), 1);
            assert!(store.threads_owned(&bob, 10).await.unwrap().is_empty());
            // Listed newest started first, up to the limit, whatever was updated last.
            let later: Vec<String> = (0..3).map(|i| id(&format!("later{i}"))).collect();
            for (i, t) in later.iter().enumerate() {
                store
                    .save(&thread(t, "done", 50 - i as i64), &[])
                    .await
                    .unwrap();
                store.set_owner(t, &owner, 20 + i as i64).await.unwrap();
            }
            let listed: Vec<String> = store
                .threads_owned(&owner, 3)
                .await
                .unwrap()
                .into_iter()
                .map(|t| t.id)
                .collect();
            assert_eq!(
                listed,
                [later[2].clone(), later[1].clone(), later[0].clone()],
                "{url}"
            );
            // A listing's summaries: the same threads in the same order, the outcome's status
            // read from the state in the database, the question cut to 1,000 characters.
            let ended = id("ended");
            let mut t = thread(&ended, "done", 60);
            t.question = "é".repeat(1500);
            t.state = json!({"state": {"outcome": {"status": "VALID"}}}).to_string();
            store.save(&t, &[]).await.unwrap();
            store.set_owner(&ended, &owner, 30).await.unwrap();
            let summaries = store.thread_summaries(Some(&owner), 4, None).await.unwrap();
            let ids: Vec<&str> = summaries.iter().map(|s| s.id.as_str()).collect();
            assert_eq!(ids, [&ended, &later[2], &later[1], &later[0]], "{url}");
            assert_eq!(summaries[0].verdict.as_deref(), Some("VALID"), "{url}");
            assert_eq!(summaries[0].question.chars().count(), 1000, "{url}");
            assert_eq!(summaries[1].verdict, None, "{url}");
            assert_eq!(summaries[1].question, "Q?");
            let all = store.thread_summaries(None, 1000, None).await.unwrap();
            assert!(all.iter().any(|s| s.id == ended), "{url}");
            assert!(store.thread("nope").await.unwrap().is_none());
        }
    }

    #[tokio::test]
    async fn a_listing_is_read_a_page_at_a_time_without_skipping_or_repeating() {
        for (store, url) in stores("pages").await {
            let owner = ThreadOwner {
                key: id("key"),
                user: String::new(),
            };
            // Seven threads, three of them owned in the same millisecond.
            let mut ids = Vec::new();
            for (i, owned_at) in [5, 7, 7, 7, 9, 11, 12].into_iter().enumerate() {
                let t = id(&format!("page{i}"));
                store.save(&thread(&t, "done", 1), &[]).await.unwrap();
                store.set_owner(&t, &owner, owned_at).await.unwrap();
                ids.push(t);
            }
            let whole: Vec<String> = store
                .thread_summaries(Some(&owner), 100, None)
                .await
                .unwrap()
                .into_iter()
                .map(|t| t.id)
                .collect();
            assert_eq!(whole.len(), 7, "{url}");
            for size in 1..=7 {
                let mut paged = Vec::new();
                let mut after = None;
                loop {
                    let page = store
                        .thread_summaries(Some(&owner), size, after.as_ref())
                        .await
                        .unwrap();
                    assert!(page.len() as i64 <= size, "{url}");
                    paged.extend(page.iter().map(|t| t.id.clone()));
                    match page.last() {
                        Some(last) if page.len() as i64 == size => {
                            let cursor = ListingCursor::after(last);
                            assert_eq!(
                                ListingCursor::from_text(&cursor.to_text()),
                                Some(cursor.clone())
                            );
                            after = Some(cursor);
                        }
                        _ => break,
                    }
                }
                assert_eq!(paged, whole, "{url}: pages of {size}");
            }
        }
    }

    #[test]
    fn a_listing_cursor_is_read_only_in_its_own_form() {
        for bad in [
            "", "12", ":abc", "x:abc", "12:", "12:a b", "12:a\0", "12:a%00", "1:a;--",
        ] {
            assert_eq!(ListingCursor::from_text(bad), None, "{bad:?}");
        }
        assert_eq!(
            ListingCursor::from_text("-3:0195-ab_C"),
            Some(ListingCursor {
                at: -3,
                id: "0195-ab_C".into()
            })
        );
    }

    #[tokio::test]
    async fn an_audit_record_is_never_overwritten() {
        for (store, url) in stores("overwrite").await {
            let t1 = id("t1");
            store
                .save(&thread(&t1, "done", 1), &[(0, json!({"a": 1}))])
                .await
                .unwrap();
            let err = store
                .save(&thread(&t1, "done", 2), &[(0, json!({"a": 2}))])
                .await
                .unwrap_err();
            assert!(err.to_string().contains("audit record 0"), "{url}: {err}");
            // The failed save changed nothing.
            assert_eq!(store.thread(&t1).await.unwrap().unwrap().updated_at, 1);
            assert_eq!(store.audit_trail(&t1).await.unwrap(), vec![json!({"a": 1})]);
        }
    }

    /// SQLite's plan for `sql` with `binds` (text, or integers when they parse as such).
    async fn plan(store: &Store, sql: &str, binds: &[&str]) -> String {
        let mut q = sqlx::query(sqlx::AssertSqlSafe(format!("EXPLAIN QUERY PLAN {sql}")));
        for b in binds {
            q = match b.parse::<i64>() {
                Ok(n) => q.bind(n),
                Err(_) => q.bind(b.to_string()),
            };
        }
        let rows = q.fetch_all(&store.pool).await.unwrap();
        rows.iter()
            .map(|r| r.get::<String, _>("detail"))
            .collect::<Vec<_>>()
            .join(" | ")
    }

    /// The reads of the maintenance loop and of a conversation's next message use the partial
    /// indexes of 0006: none walks the threads (with conversation expiry holding the write
    /// lock, that walk over every thread older than the cutoff stalled every commit each pass).
    #[tokio::test]
    async fn thread_reads_use_the_partial_indexes() {
        let (store, _) = stores("plans").await.swap_remove(0);
        // A few rows of each kind, so the plans are not those of an empty table.
        for (i, status) in ["done", "awaiting_input", "processing", "expired"]
            .iter()
            .enumerate()
        {
            let mut t = thread(&id(&format!("plan{i}")), status, i as i64);
            if *status != "awaiting_input" {
                t.conversation_key = None;
            }
            store.save(&t, &[]).await.unwrap();
        }
        let conv = plan(
            &store,
            THREADS_BY_CONVERSATION,
            &["k", "awaiting_input", "o", "", "2"],
        )
        .await;
        assert!(conv.contains("INDEX threads_conversation"), "{conv}");
        for status in ["processing", "awaiting_input"] {
            // By status and last update, both in the index: only the threads old enough.
            let listed = plan(&store, THREADS_WITH_STATUS, &[status, "5", "0", ""]).await;
            assert!(
                listed
                    .contains("INDEX threads_status (status=? AND updated_at>? AND updated_at<?)"),
                "{listed}"
            );
        }
        let owned = plan(&store, THREADS_OWNED, &["k", "u", "200"]).await;
        assert!(owned.contains("INDEX thread_owners_owner"), "{owned}");
        assert!(!owned.contains("TEMP B-TREE"), "{owned}");
        let keys = plan(&store, EXPIRE_KEYS, &["5"]).await;
        assert!(keys.contains("INDEX threads_conversation"), "{keys}");
        // What a finished thread adds to the indexes: nothing (it has neither a key nor an
        // unfinished status).
        let entries = |index: &'static str| {
            let store = store.clone();
            async move {
                sqlx::query(sqlx::AssertSqlSafe(format!(
                    "SELECT COUNT(*) AS n FROM threads INDEXED BY {index} WHERE {}",
                    match index {
                        "threads_conversation" => "conversation_key IS NOT NULL",
                        _ => "status IN ('processing', 'awaiting_input')",
                    }
                )))
                .fetch_one(&store.pool)
                .await
                .unwrap()
                .get::<i64, _>("n")
            }
        };
        assert_eq!(entries("threads_conversation").await, 1);
        assert_eq!(entries("threads_status").await, 2);
        // The counts above would be the same for full indexes: what shows that the finished
        // threads are not in them is that SQLite cannot read those threads through them.
        for (index, finished) in [
            ("threads_conversation", "conversation_key IS NULL"),
            ("threads_status", "status = 'done'"),
        ] {
            let refused = sqlx::query(sqlx::AssertSqlSafe(format!(
                "SELECT COUNT(*) FROM threads INDEXED BY {index} WHERE {finished}"
            )))
            .fetch_one(&store.pool)
            .await;
            let Err(e) = refused else {
                panic!("{index} holds rows where {finished}");
            };
            assert!(e.to_string().contains("no query solution"), "{e}");
        }
    }

    /// Both migration directories number from one sequence: a version in both would run only
    /// one of them on SQLite, or fail the migrator.
    #[test]
    fn the_shared_and_sqlite_migrations_never_share_a_version() {
        let all: Vec<i64> = migrator(true, i64::MAX).iter().map(|m| m.version).collect();
        let mut distinct = all.clone();
        distinct.dedup();
        assert_eq!(all, distinct);
        let shared: Vec<i64> = migrator(false, i64::MAX)
            .iter()
            .map(|m| m.version)
            .collect();
        assert!(shared.len() < all.len() && shared.iter().all(|v| all.contains(v)));
        assert!(migrator(true, 5).iter().all(|m| m.version <= 5));
    }

    #[tokio::test]
    async fn expiry_ends_conversations_but_keeps_trails_until_retention() {
        for (store, url) in stores("expire").await {
            let (old, new) = (id("old"), id("new"));
            // Far in the past so other tests' rows on a shared database are not touched.
            let record = json!({"seq": 0, "hash": "h0"});
            store
                .save(&thread(&old, "awaiting_input", -1_000_000), &[(0, record)])
                .await
                .unwrap();
            store.save(&thread(&new, "done", 100), &[]).await.unwrap();
            // An old conversation, processing or waiting, loses its key and keeps its status
            // (a waiting one is ended with a final record by the maintenance, its trail
            // saying so); a recent waiting one is left alone.
            let (busy, keyless, recent) = (id("busy"), id("keyless"), id("recent"));
            store
                .save(&thread(&busy, "processing", -1_000_000), &[])
                .await
                .unwrap();
            let mut t = thread(&keyless, "awaiting_input", -1_000_000);
            t.conversation_key = None;
            store.save(&t, &[]).await.unwrap();
            store
                .save(&thread(&recent, "awaiting_input", -100), &[])
                .await
                .unwrap();
            assert_eq!(store.expire(-500_000).await.unwrap(), 2, "{url}");
            let expired = store.thread(&old).await.unwrap().unwrap();
            assert_eq!(expired.status, "awaiting_input");
            assert_eq!(expired.conversation_key, None);
            let busy = store.thread(&busy).await.unwrap().unwrap();
            assert_eq!(
                (busy.status.as_str(), busy.conversation_key),
                ("processing", None)
            );
            let keyless = store.thread(&keyless).await.unwrap().unwrap();
            assert_eq!(keyless.status, "awaiting_input");
            let recent = store.thread(&recent).await.unwrap().unwrap();
            assert_eq!(recent.status, "awaiting_input");
            assert!(recent.conversation_key.is_some());
            assert_eq!(store.audit_trail(&old).await.unwrap().len(), 1, "{url}");
            // Ended since (as the maintenance ends a waiting thread whose conversation
            // expired, with its final record), the old thread's trail is retention's.
            store
                .save(&thread(&old, "done", -1_000_000), &[])
                .await
                .unwrap();
            // Only retention deletes a trail: in the caller's transaction (which logs its
            // deletion), saying which head it deleted; rolled back, nothing is gone.
            let past: Vec<String> = store
                .trails_past_retention(-500_000, None, 100)
                .await
                .unwrap()
                .into_iter()
                .map(|(_, id)| id)
                .collect();
            assert!(past.contains(&old) && !past.contains(&new), "{url}");
            // Paged after the last one listed: nothing comes after the only one due.
            let (at, _) = store
                .trails_past_retention(-500_000, None, 1)
                .await
                .unwrap()
                .pop()
                .unwrap();
            let next = store
                .trails_past_retention(-500_000, Some(&(at, old.clone())), 1)
                .await
                .unwrap();
            assert!(next.iter().all(|(_, id)| id != &old), "{url}: {next:?}");
            let mut tx = store.pool.begin().await.unwrap();
            let head = store
                .delete_trail_in(&mut tx, &old, -500_000)
                .await
                .unwrap();
            assert_eq!(head, Some((0, "h0".to_string())), "{url}");
            tx.rollback().await.unwrap();
            assert_eq!(store.audit_trail(&old).await.unwrap().len(), 1, "{url}");
            // Not due any more (continued since it was listed): nothing is deleted.
            let mut tx = store.pool.begin().await.unwrap();
            assert_eq!(
                store
                    .delete_trail_in(&mut tx, &old, -2_000_000)
                    .await
                    .unwrap(),
                None,
                "{url}"
            );
            tx.commit().await.unwrap();
            assert_eq!(store.audit_trail(&old).await.unwrap().len(), 1, "{url}");
            let mut tx = store.pool.begin().await.unwrap();
            store
                .delete_trail_in(&mut tx, &old, -500_000)
                .await
                .unwrap();
            tx.commit().await.unwrap();
            assert!(store.thread(&old).await.unwrap().is_none());
            assert!(store.audit_trail(&old).await.unwrap().is_empty());
            assert!(store.thread(&new).await.unwrap().is_some());
        }
    }

    #[tokio::test]
    async fn unsupported_url_says_what_works() {
        let err = Store::connect("mysql://x").await.err().unwrap().to_string();
        assert!(err.contains("sqlite://FILE"), "{err}");
    }

    #[tokio::test]
    async fn unreachable_postgres_is_a_clear_error() {
        let err = Store::connect("postgres://u:pw@127.0.0.1:1/db")
            .await
            .err()
            .unwrap()
            .to_string();
        assert!(
            err.contains("opening postgres://u:***@127.0.0.1:1/db"),
            "{err}"
        );
    }

    #[test]
    fn passwords_are_redacted() {
        assert_eq!(
            redact("postgres://me:secret@db/x"),
            "postgres://me:***@db/x"
        );
    }
}

//! The server's side of the trust in trails: the Ed25519 key that signs thread heads and log
//! checkpoints (kept outside the database), and the append-only Merkle log of every signed head
//! in the database (SQLite or PostgreSQL, shared by replicas). What an auditor checks lives in
//! `proofgate_core::audit::{transparency, bundle}`.

use crate::sql_batch::Statements;
use crate::storage::{StorageError, Store};
use proofgate_core::audit::bundle::{AuditBundle, Consistency, Inclusion};
use proofgate_core::audit::transparency::{verify_note, LogStatement};
use proofgate_core::audit::AuditRecord;
use serde_json::Value;
use signed_note::{Note, StandardSigner};
use sqlx::Row;
use std::path::{Path, PathBuf};
use tlog_tiles::{
    prove_record, prove_tree, stored_hash_count, stored_hash_index, stored_hashes, tree_hash,
    Checkpoint, Hash, HashReader,
};
use tokio::sync::Mutex;

/// Why the audit key or log failed.
/// Why a leaf past the signed tree is not taken.
enum LeafProblem {
    /// It is not one this server logged: why.
    Refused(String),
    /// Reading it failed.
    Failed(AuditLogError),
}

impl From<AuditLogError> for LeafProblem {
    fn from(e: AuditLogError) -> Self {
        LeafProblem::Failed(e)
    }
}

/// How many leaves `stored` stored hashes belong to (`stored_hash_count`'s inverse), or
/// `None` when no whole number of leaves has that many.
fn leaves_of_stored(stored: u64) -> Option<u64> {
    let (mut lo, mut hi) = (0u64, stored);
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        if stored_hash_count(mid) < stored {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    (stored_hash_count(lo) == stored).then_some(lo)
}

/// Why `next` cannot follow `before`, the thread's previous leaf, in a log this server
/// writes (the rules auditors hold a thread's heads to: `log_heads`, `deletion_problem`).
fn goes_back_on(before: Option<&LogStatement>, next: &LogStatement) -> Option<String> {
    match (before, next.deleted) {
        (Some(b), _) if b.deleted => Some(format!(
            "logs thread {} again after its deletion",
            next.thread_id
        )),
        (Some(b), false) if next.seq < b.seq => Some(format!(
            "logs record {} of thread {} after its record {} was logged",
            next.seq, next.thread_id, b.seq
        )),
        (Some(b), true) if (b.seq, &b.head_hash) != (next.seq, &next.head_hash) => Some(format!(
            "logs the deletion of thread {} up to record {}, but its last head is record {}",
            next.thread_id, next.seq, b.seq
        )),
        (None, true) => Some(format!(
            "logs the deletion of thread {}, which has no head",
            next.thread_id
        )),
        _ => None,
    }
}

/// Most leaves one read returns: the route is public, and its reply is built in memory.
pub const MAX_LEAVES_PER_READ: i64 = 1000;

#[derive(Debug, thiserror::Error)]
pub enum AuditLogError {
    /// The signing key could not be read, created or parsed.
    #[error("audit signing key {path}: {problem}")]
    Key {
        /// Where.
        path: String,
        /// What was wrong.
        problem: String,
    },
    /// Storage failed.
    #[error(transparent)]
    Storage(#[from] StorageError),
    /// A database error.
    #[error("audit log: {0}")]
    Db(String),
    /// The log's hashes do not add up (a bug or a tampered database).
    #[error("audit log: {0}")]
    Tlog(String),
    /// Signing, a lock or the signed-size file failed: the server's trouble, not the log's.
    #[error("audit log: {0}")]
    Internal(String),
    /// The server refuses to extend or sign a log that was cut back or rewritten in its
    /// database: a fact about the log, said to whoever reads it (what the operator must do,
    /// naming files, goes to the operator's log only).
    #[error("audit log: {0}")]
    Refused(String),
    /// A range of sizes or leaves outside the log: the caller's mistake, said to them.
    #[error("{0}")]
    Range(String),
}

fn db(context: &'static str) -> impl Fn(sqlx::Error) -> AuditLogError {
    move |e| AuditLogError::Db(format!("{context}: {e}"))
}

/// The audit signing key.
pub struct AuditKey {
    signer: StandardSigner,
    verifier_key: String,
    /// The seal of API key rows, derived from this key (see [`crate::keys::KeySeal`]).
    key_seal: crate::keys::KeySeal,
}

impl AuditKey {
    /// The key from `secret` (an encoded signed-note signer key, e.g. from
    /// `PROOFGATE_AUDIT__SIGNING_KEY`), or else from the file at `path`, created (mode 0600)
    /// with a new key named `name` when missing.
    pub fn load_or_create(
        secret: Option<&str>,
        path: &Path,
        name: &str,
    ) -> Result<AuditKey, AuditLogError> {
        AuditKey::load_inner(secret, path, name, true)
    }

    /// As [`AuditKey::load_or_create`], but a key is made only while `store`'s log is empty:
    /// a new key cannot extend a log the old one signed (every auditor holding its verifier
    /// key would see the log's signer change), and made quietly it was, whenever the key file
    /// was missing (a secret volume that did not mount, a moved working directory). For
    /// every command that may make the key: the server, `audit-key` and `keys create`.
    pub async fn load_or_create_for(
        store: &Store,
        secret: Option<&str>,
        path: &Path,
        name: &str,
    ) -> Result<AuditKey, AuditLogError> {
        if secret.is_none() && !path.exists() {
            let leaves = TransparencyLog::stored_size(store).await?;
            if leaves > 0 {
                return Err(AuditLogError::Key {
                    path: path.display().to_string(),
                    problem: format!(
                        "it is missing, but this database's log already holds {leaves} signed \
                         leaves: restore the key that signed them (or give it as [audit] \
                         signing_key); a new key cannot extend this log"
                    ),
                });
            }
        }
        AuditKey::load_or_create(secret, path, name)
    }

    /// As [`AuditKey::load_or_create`], but a missing key is an error, never made: for tools
    /// run beside a server (a key they made would not be the server's).
    pub fn load(secret: Option<&str>, path: &Path, name: &str) -> Result<AuditKey, AuditLogError> {
        AuditKey::load_inner(secret, path, name, false)
    }

    fn load_inner(
        secret: Option<&str>,
        path: &Path,
        name: &str,
        create: bool,
    ) -> Result<AuditKey, AuditLogError> {
        let key_err = |problem: String| AuditLogError::Key {
            path: path.display().to_string(),
            problem,
        };
        // A name that is there but leads nowhere (a dangling symbolic link, say a secret mount
        // not there yet) is neither read nor written over: creating the key would find the
        // name taken, and reading it would find nothing.
        let present = path.symlink_metadata().is_ok();
        if secret.is_none() && present && !path.exists() {
            return Err(key_err(
                "the path is a symbolic link to nothing: point it at the key file, or remove it \
                 to have a new key created"
                    .into(),
            ));
        }
        let encoded = match secret {
            Some(s) => s.trim().to_string(),
            None if present => {
                let text = std::fs::read_to_string(path).map_err(|e| key_err(e.to_string()))?;
                // Since keys are written whole (see `write_private`), only a start of an older
                // version, stopped between creating the file and writing it, leaves it empty.
                // It is not replaced: records may have been signed with a key that was there.
                if text.trim().is_empty() {
                    return Err(key_err(
                        "the file is empty (a start was stopped while creating it): if no \
                         audit record was ever signed with a key at this path, delete it and \
                         start again to create a new key; otherwise restore the key from your \
                         backup"
                            .into(),
                    ));
                }
                text.trim().to_string()
            }
            None if !create => {
                return Err(key_err(
                    "there is no audit signing key here: give the server's ([audit] \
                     signing_key_path or signing_key), or start the server once to create it"
                        .into(),
                ));
            }
            None => {
                let (skey, vkey) = signed_note::generate_key(&mut rand_core::OsRng, name);
                if let Err(e) = write_private(path, &skey) {
                    // Another server on the same storage created it first (whole): use theirs.
                    // (Read once: the name is now there, so this does not come back here.)
                    if e.kind() == std::io::ErrorKind::AlreadyExists && path.exists() {
                        return AuditKey::load_or_create(None, path, name);
                    }
                    return Err(key_err(e.to_string()));
                }
                tracing::warn!(
                    "created the audit signing key {} (keep it safe and out of the database); \
                     its verifier key is {vkey}",
                    path.display()
                );
                skey
            }
        };
        let signer = StandardSigner::new(&encoded)
            .map_err(|e| key_err(format!("not a signed-note signer key ({e})")))?;
        let verifier_key = verifier_of(&encoded).map_err(key_err)?;
        Ok(AuditKey {
            signer,
            verifier_key,
            key_seal: crate::keys::KeySeal::from_signing_key(&encoded),
        })
    }

    /// The seal of API key rows: a key kept out of the database, as this one is.
    pub fn key_seal(&self) -> &crate::keys::KeySeal {
        &self.key_seal
    }

    /// The public verifier key (`name+keyid+base64`, C2SP signed-note).
    pub fn verifier_key(&self) -> &str {
        &self.verifier_key
    }

    /// Signs `text` (which must end with a newline) as a signed note.
    pub fn sign(&self, text: &str) -> Result<String, AuditLogError> {
        let mut note = Note::new(text.as_bytes(), &[])
            .map_err(|e| AuditLogError::Internal(format!("note: {e}")))?;
        note.add_sigs(&[&self.signer])
            .map_err(|e| AuditLogError::Internal(format!("signing: {e}")))?;
        String::from_utf8(note.to_bytes()).map_err(|e| AuditLogError::Internal(e.to_string()))
    }
}

/// The verifier key of an encoded signer key `PRIVATE+KEY+name+id+base64(0x01||seed)`.
fn verifier_of(skey: &str) -> Result<String, String> {
    use base64::Engine;
    let parts: Vec<&str> = skey.splitn(5, '+').collect();
    let [_, _, name, _, key64] = parts.as_slice() else {
        return Err("not a signed-note signer key".into());
    };
    let raw = base64::engine::general_purpose::STANDARD
        .decode(key64)
        .map_err(|e| format!("signer key: {e}"))?;
    let seed: [u8; 32] = raw
        .get(1..)
        .and_then(|s| s.try_into().ok())
        .ok_or("signer key: expected an Ed25519 seed")?;
    let signing = ed25519_dalek::SigningKey::from_bytes(&seed);
    Ok(signed_note::new_ed25519_verifier_key(
        name,
        &signing.verifying_key(),
    ))
}

/// Creates the key file at `path` (mode 0600) whole or not at all: the key is written and
/// synced under a temporary name in the same directory, then renamed to `path` only if no
/// file is there (`AlreadyExists` when another server created it first: a plain rename would
/// replace theirs, and that server would sign with a key the file no longer holds). Written
/// in place, a server starting at the same moment read the file before it held the key.
fn write_private(path: &Path, text: &str) -> std::io::Result<()> {
    use std::io::Write;
    let dir = match path.parent().filter(|d| !d.as_os_str().is_empty()) {
        Some(dir) => dir,
        None => Path::new("."),
    };
    std::fs::create_dir_all(dir)?;
    // tempfile creates it with mode 0600, and removes it if anything below fails.
    let mut file = tempfile::Builder::new()
        .prefix(".proofgate-audit-key-")
        .tempfile_in(dir)?;
    file.write_all(text.as_bytes())?;
    file.write_all(b"\n")?;
    file.as_file().sync_all()?;
    file.persist_noclobber(path).map_err(|e| e.error)?;
    // The new name, durable as well; the key is in place either way, so a directory that
    // cannot be synced is said, not fatal.
    if let Err(e) = std::fs::File::open(dir).and_then(|d| d.sync_all()) {
        tracing::warn!(
            "could not sync {} after creating the key: {e}",
            dir.display()
        );
    }
    Ok(())
}

// The stored hashes read so far, in index order (a cache of `log_hashes`).
use proofgate_core::audit::transparency::StoredHashes;

/// Why a leaf was not appended.
#[derive(Debug)]
pub enum AppendError {
    /// Another writer (a replica) took the index: roll back and try again.
    Taken,
    /// Anything else.
    Failed(AuditLogError),
}

/// What the statements appending leaves are called (see [`AppendError`]'s `From`).
pub(crate) const LEAVES: &str = "appending log leaves";

impl From<crate::sql_batch::Failed> for AppendError {
    /// A failed INSERT of leaves alone means another replica took an index (or the database is
    /// busy): the caller rolls back and tries again. Anything else failed.
    fn from(f: crate::sql_batch::Failed) -> AppendError {
        if f.what == LEAVES {
            AppendError::Taken
        } else {
            AppendError::Failed(AuditLogError::Db(format!("{}: {}", f.what, f.source)))
        }
    }
}

impl AppendError {
    /// The error after too many tries.
    pub fn exhausted() -> AuditLogError {
        AuditLogError::Db("could not append to the log after 50 tries".into())
    }
}

/// PostgreSQL: takes the database-wide lock on appending to the log, until the transaction on
/// `conn` ends (after this process's own lock on the log, always in that order). Replicas took
/// the next index in turn by failing and retrying the whole transaction: under load, 50 lost
/// races failed a request. SQLite has one writer at a time anyway: nothing to take.
pub async fn lock_for_appending(
    conn: &mut sqlx::AnyConnection,
    sqlite: bool,
) -> Result<(), AuditLogError> {
    if sqlite {
        return Ok(());
    }
    // An arbitrary key of the application's own ("pgLOG" in ASCII).
    sqlx::query("SELECT pg_advisory_xact_lock(112103767971)")
        .execute(&mut *conn)
        .await
        .map_err(db("locking the log for appending"))?;
    Ok(())
}

/// Appends leaves in one transaction, holding the log's hash cache so that no other append in
/// this process interleaves; hashes of uncommitted leaves stay out of the cache until
/// [`LogAppender::committed`].
pub struct LogAppender<'a> {
    log: &'a TransparencyLog,
    cache: tokio::sync::MutexGuard<'a, StoredHashes>,
    /// The index of the next leaf, once the log's size was read in this transaction.
    next: Option<u64>,
    /// Stored hashes written in this transaction, following the cache's.
    pending: Vec<Hash>,
}

/// The cached hashes followed by this transaction's.
struct WithPending<'a>(&'a StoredHashes, &'a [Hash]);

impl HashReader for WithPending<'_> {
    fn read_hashes(&self, indexes: &[u64]) -> Result<Vec<Hash>, tlog_tiles::Error> {
        let base = self.0 .0.len() as u64;
        indexes
            .iter()
            .map(|&i| {
                if i < base {
                    Ok(self.0 .0[i as usize])
                } else {
                    self.1
                        .get((i - base) as usize)
                        .copied()
                        .ok_or(tlog_tiles::Error::IndexesNotInTree)
                }
            })
            .collect()
    }
}

impl LogAppender<'_> {
    /// Appends `statement`, signed as `note`, as the next leaf; returns its index.
    pub async fn push(
        &mut self,
        conn: &mut sqlx::AnyConnection,
        statement: &LogStatement,
        note: &str,
    ) -> Result<u64, AppendError> {
        let first = self.push_all(conn, &[(statement, note)]).await?;
        Ok(first)
    }

    /// Appends the signed statements as the next leaves, in order, with one INSERT for the
    /// leaves and one for their stored hashes; returns the first leaf's index.
    pub async fn push_all(
        &mut self,
        conn: &mut sqlx::AnyConnection,
        leaves: &[(&LogStatement, &str)],
    ) -> Result<u64, AppendError> {
        self.start(conn, None).await?;
        let mut statements = Statements::new(false);
        let first = self.queue(&mut statements, leaves)?;
        statements.run(conn).await.map_err(AppendError::from)?;
        Ok(first)
    }

    /// Reads the log's size in this transaction (`size` when the caller already read it there)
    /// and brings the hash cache up to it; returns the index of the next leaf.
    pub async fn start(
        &mut self,
        conn: &mut sqlx::AnyConnection,
        size: Option<u64>,
    ) -> Result<u64, AppendError> {
        if let Some(n) = self.next {
            return Ok(n);
        }
        let n = match size {
            // A size the caller knew from its last commit is checked by the commit itself (a
            // wrong one fails it, and the caller reads the size); one below a size seen since
            // (another path appended, a retention deletion) is read again here.
            Some(n) if n >= self.log.seen() => n,
            _ => {
                let n = TransparencyLog::size(conn)
                    .await
                    .map_err(AppendError::Failed)?;
                self.log.size_not_cut_back(n).map_err(AppendError::Failed)?;
                n
            }
        };
        self.log
            .refresh(&mut self.cache, conn, n)
            .await
            .map_err(AppendError::Failed)?;
        self.log.saw_size(n).map_err(AppendError::Failed)?;
        self.next = Some(n);
        Ok(n)
    }

    /// Adds the INSERTs of `leaves` (the next leaves, in order) and of their stored hashes to
    /// `statements`; returns the first leaf's index. [`LogAppender::start`] comes first.
    pub fn queue(
        &mut self,
        statements: &mut Statements,
        leaves: &[(&LogStatement, &str)],
    ) -> Result<u64, AppendError> {
        let Some(start) = self.next else {
            return Err(AppendError::Failed(AuditLogError::Db(
                "appending before the log's size was read".into(),
            )));
        };
        let mut hash_rows: Vec<(u64, String)> = Vec::new();
        let mut n = start;
        for (statement, _) in leaves {
            let new = stored_hashes(
                n,
                statement.text().as_bytes(),
                &WithPending(&self.cache, &self.pending),
            )
            .map_err(|e| AppendError::Failed(AuditLogError::Internal(e.to_string())))?;
            let first = stored_hash_index(0, n);
            hash_rows.extend(
                new.iter()
                    .enumerate()
                    .map(|(i, h)| (first + i as u64, h.to_string())),
            );
            self.pending.extend(new);
            n += 1;
        }
        let at = crate::app::now_ms() as i64;
        for (c, chunk) in leaves.chunks(100).enumerate() {
            statements.values(
                LEAVES,
                "INSERT INTO log_leaves (idx, thread_id, seq, head_hash, deleted, note, at)",
                chunk.len(),
                7,
                "",
                |b| {
                    for (i, (statement, note)) in chunk.iter().enumerate() {
                        b.bind((start + (c * 100 + i) as u64) as i64)
                            .bind(statement.thread_id.as_str())
                            .bind(statement.seq as i64)
                            .bind(statement.head_hash.as_str())
                            .bind(i64::from(statement.deleted))
                            .bind(*note)
                            .bind(at);
                    }
                },
            );
        }
        for chunk in hash_rows.chunks(400) {
            statements.values(
                "storing log hashes",
                "INSERT INTO log_hashes (idx, hash)",
                chunk.len(),
                2,
                "",
                |b| {
                    for (idx, h) in chunk {
                        b.bind(*idx as i64).bind(h.as_str());
                    }
                },
            );
        }
        self.next = Some(n);
        Ok(start)
    }

    /// The index the next leaf would take (the log's size once this transaction commits), once
    /// [`LogAppender::start`] has run.
    pub fn next_index(&self) -> Option<u64> {
        self.next
    }

    /// The transaction committed: its hashes join the cache.
    pub fn committed(mut self) {
        let pending = std::mem::take(&mut self.pending);
        self.cache.0.extend(pending);
        if let Some(n) = self.next {
            // Cannot fail: the log grew from a size seen in this transaction.
            let _ = self.log.saw_size(n);
        }
    }
}

/// `($first, ...), (...)`: `rows` groups of `cols` numbered placeholders (both drivers accept
/// `$N`), numbered from `$first` (a statement following others in one SQLite call continues
/// the call's numbering).
pub(crate) fn values_placeholders_from(first: usize, rows: usize, cols: usize) -> String {
    use std::fmt::Write;
    let mut out = String::with_capacity(rows * cols * 6);
    for r in 0..rows {
        out.push_str(if r == 0 { "(" } else { ", (" });
        for c in 0..cols {
            if c > 0 {
                out.push_str(", ");
            }
            let _ = write!(out, "${}", first + r * cols + c);
        }
        out.push(')');
    }
    out
}

/// The append-only log.
pub struct TransparencyLog {
    origin: String,
    key: AuditKey,
    hashes: Mutex<StoredHashes>,
    /// The last checkpoint signed, with its size: the checkpoint of a size never changes (the
    /// log only grows, and Ed25519 signs deterministically), so a public read of an unchanged
    /// log neither signs again nor waits for the hashes' lock, which every commit takes.
    signed: std::sync::Mutex<Option<(u64, String)>>,
    /// The largest tree this server signed a checkpoint of or appended to (size, root; appended
    /// trees are kept within a second, see `seen`), also kept in a file
    /// outside the database when one is given: no later checkpoint is signed for a tree that
    /// does not extend it. The database is not trusted with this, since whoever holds it could
    /// cut the log back or rewrite it, and the server would otherwise sign the result.
    signed_high: std::sync::Mutex<Option<(u64, Hash)>>,
    signed_high_file: Option<PathBuf>,
    /// The largest log size this process saw committed (appended, or read from the database).
    /// The log only grows, so a database holding fewer leaves was cut back: refused, as a cut
    /// below a signed size is, though no checkpoint covers the leaves yet. The size is also
    /// kept in the signed-size file every second ([`TransparencyLog::keep_appended_size`]), so
    /// that a restart does not forget it.
    seen: std::sync::atomic::AtomicU64,
}

/// The file holding the largest tree a server signed: `<size> <root, base64>` on one line.
fn read_signed_high(path: &Path) -> Result<Option<(u64, Hash)>, String> {
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e.to_string()),
    };
    let mut parts = text.split_whitespace();
    let (Some(size), Some(root), None) = (parts.next(), parts.next(), parts.next()) else {
        return Err("expected `<size> <root>` on one line".into());
    };
    let size = size
        .parse()
        .map_err(|_| format!("`{size}` is not a log size"))?;
    let root = Hash::parse_hash(root).map_err(|e| format!("root: {e}"))?;
    Ok(Some((size, root)))
}

/// Writes the largest signed tree to `path` (a new file renamed over the old, synced), unless
/// the file already holds a larger one: replicas sharing the key's directory share the file,
/// and each writes it (every second with appended sizes). Under an exclusive lock on
/// `<path>.lock`, so no two write at once, and with a temporary file of the writer's own (in
/// containers every replica may be pid 1): a shared one let two writers interleave their
/// lines, and the last writer put a smaller size back.
fn write_signed_high(path: &Path, size: u64, root: &Hash) -> std::io::Result<()> {
    use std::io::Write;
    let lock = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(path.with_extension("lock"))?;
    // Bounded: the caller holds the log's lock, which every commit waits for. A file system
    // without locks (some network mounts) is written without one.
    let give_up = std::time::Instant::now() + std::time::Duration::from_millis(500);
    loop {
        match lock.try_lock() {
            Ok(()) => break,
            Err(std::fs::TryLockError::WouldBlock) if std::time::Instant::now() < give_up => {
                std::thread::sleep(std::time::Duration::from_millis(2))
            }
            Err(std::fs::TryLockError::WouldBlock) => {
                return Err(std::io::Error::other(
                    "another process held the file's lock for over 500 ms",
                ))
            }
            Err(std::fs::TryLockError::Error(e)) => {
                tracing::debug!("the signed-size file cannot be locked here ({e}): written as is");
                break;
            }
        }
    }
    if let Ok(Some((kept, _))) = read_signed_high(path) {
        if kept > size {
            return Ok(());
        }
    }
    let tmp = path.with_extension(format!(
        "tmp-{}-{}",
        std::process::id(),
        uuid::Uuid::new_v4().simple()
    ));
    let mut f = std::fs::File::create(&tmp)?;
    f.write_all(format!("{size} {root}\n").as_bytes())?;
    f.sync_all()?;
    std::fs::rename(&tmp, path)?;
    // The rename itself, durable: without it a power loss could bring back the older size
    // for as long as the file system's journal waits (a review).
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    std::fs::File::open(dir).and_then(|d| d.sync_all())
}

/// One leaf as stored.
#[derive(Debug, Clone, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct LeafRow {
    /// Its index.
    pub index: u64,
    /// The signed note stating it.
    pub note: String,
}

impl TransparencyLog {
    /// The log named `origin`, signed with `key`.
    pub fn new(origin: String, key: AuditKey) -> TransparencyLog {
        TransparencyLog {
            origin,
            key,
            hashes: Mutex::new(StoredHashes::default()),
            signed: std::sync::Mutex::new(None),
            signed_high: std::sync::Mutex::new(None),
            signed_high_file: None,
            seen: std::sync::atomic::AtomicU64::new(0),
        }
    }

    /// The largest log size this process saw committed.
    fn seen(&self) -> u64 {
        self.seen.load(std::sync::atomic::Ordering::Acquire)
    }

    /// Records that the database's log holds `size` leaves, refusing a size below one seen
    /// before: the database's log was cut back (leaves answered from, and perhaps not yet in
    /// any signed checkpoint, deleted).
    fn saw_size(&self, size: u64) -> Result<(), AuditLogError> {
        use std::sync::atomic::Ordering;
        self.not_cut_back(self.seen.fetch_max(size, Ordering::AcqRel), size)
    }

    /// [`TransparencyLog::saw_size`]'s check alone: a log read at `size` whose leaves are yet
    /// to be checked ([`TransparencyLog::refresh`]) raises the size seen only once they pass,
    /// so leaves written into the database and refused can be taken out again.
    fn size_not_cut_back(&self, size: u64) -> Result<(), AuditLogError> {
        use std::sync::atomic::Ordering;
        self.not_cut_back(self.seen.load(Ordering::Acquire), size)
    }

    fn not_cut_back(&self, seen: u64, size: u64) -> Result<(), AuditLogError> {
        if size < seen {
            let remedy = match &self.signed_high_file {
                Some(path) => format!(
                    " (if this database is meant to start a new log, a restored backup say, \
                     remove {} and restart)",
                    path.display()
                ),
                None => String::new(),
            };
            let e = format!(
                "the log holds {size} leaves, but this server saw {seen} committed: the \
                 database's log was cut back, and nothing more is appended or signed"
            );
            tracing::error!("{e}{remedy}");
            return Err(AuditLogError::Refused(e));
        }
        Ok(())
    }

    /// Keeps the largest log size this process saw committed, with its root, in the signed-size
    /// file (when there is one), so that a restarted server still refuses a database whose log
    /// was cut back below it, though no checkpoint was signed for those leaves. Returns the size
    /// kept, if one was newly kept.
    pub async fn persist_appended_size(&self) -> Result<Option<u64>, AuditLogError> {
        use std::sync::atomic::Ordering;
        if self.signed_high_file.is_none() {
            return Ok(None);
        }
        let seen = self.seen.load(Ordering::Acquire);
        let kept = self
            .signed_high
            .lock()
            .map_err(|_| AuditLogError::Internal("the signed size's lock is poisoned".into()))?
            .map_or(0, |(n, _)| n);
        if seen <= kept {
            return Ok(None);
        }
        let cache = self.hashes.lock().await;
        if (cache.0.len() as u64) < stored_hash_count(seen) {
            // Seen in the database but not read into the cache yet: the next pass.
            return Ok(None);
        }
        // A replica sharing the file kept as large a size already: nothing to keep (and its
        // larger size is no sign of a cut here). The same size must be the same tree.
        if let Some(Ok(Some((kept, kept_root)))) =
            self.signed_high_file.as_deref().map(read_signed_high)
        {
            if kept > seen {
                return Ok(None);
            }
            if kept == seen {
                let root =
                    tree_hash(seen, &*cache).map_err(|e| AuditLogError::Tlog(e.to_string()))?;
                if root != kept_root {
                    return Err(AuditLogError::Tlog(format!(
                        "the log's first {seen} leaves no longer hash to the root kept for them: \
                         the database's log was rewritten"
                    )));
                }
                return Ok(None);
            }
        }
        let root = tree_hash(seen, &*cache).map_err(|e| AuditLogError::Tlog(e.to_string()))?;
        self.extends_signed(seen, root, &cache)?;
        Ok(Some(seen))
    }

    /// Runs [`TransparencyLog::persist_appended_size`] every second while the log is in use.
    /// A commit does not wait for it: a file synced per request would double the durable
    /// path's flushes.
    pub async fn keep_appended_size(log: std::sync::Weak<TransparencyLog>) {
        let mut tick = tokio::time::interval(std::time::Duration::from_secs(1));
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
        let mut warned = false;
        loop {
            tick.tick().await;
            let Some(log) = log.upgrade() else { return };
            // A larger size a replica sharing the file saw committed is this server's too: the
            // database holding fewer leaves was cut back, though this server never saw them.
            if let Some(Ok(Some((kept, _)))) = log.signed_high_file.as_deref().map(read_signed_high)
            {
                log.seen
                    .fetch_max(kept, std::sync::atomic::Ordering::AcqRel);
            }
            match log.persist_appended_size().await {
                Ok(_) => warned = false,
                Err(e) if !std::mem::replace(&mut warned, true) => {
                    tracing::error!("keeping the log's size: {e}")
                }
                Err(_) => {}
            }
        }
    }

    /// Takes over the size and root a signed-size file of before (shared by every database in
    /// the key's directory) kept, when they are this database's log's: its log extends that
    /// tree. When they are not, they are another database's if `others` (another database sits
    /// in the directory), and left (logged); otherwise this log was cut back or rewritten, and
    /// it is refused, as it was before the file moved.
    pub async fn adopt_signed_size(
        &self,
        store: &Store,
        legacy: &Path,
        others: bool,
    ) -> Result<(), AuditLogError> {
        let Ok(Some((size, root))) = read_signed_high(legacy) else {
            return Ok(());
        };
        let mut conn = store.pool.acquire().await.map_err(db("connecting"))?;
        let n = Self::size(&mut conn).await?;
        let mut cache = self.hashes.lock().await;
        let ours = n >= size && {
            self.refresh(&mut cache, &mut conn, size).await?;
            tree_hash(size, &*cache).ok() == Some(root)
        };
        if !ours && !others {
            let e = format!(
                "{} says this server signed or appended to a log of {size} leaves, and this \
                 database's log of {n} does not extend it: it was cut back or rewritten (if this \
                 database is meant to start a new log, remove that file and restart)",
                legacy.display()
            );
            tracing::error!("{e}");
            return Err(AuditLogError::Tlog(e));
        }
        if !ours {
            tracing::warn!(
                "{} holds another database's log size (another database sits beside it): not \
                 taken for this one's",
                legacy.display()
            );
            return Ok(());
        }
        self.extends_signed(size, root, &cache)?;
        self.seen
            .fetch_max(size, std::sync::atomic::Ordering::AcqRel);
        Ok(())
    }

    /// How many leaves the database's log holds.
    pub async fn stored_size(store: &Store) -> Result<u64, AuditLogError> {
        let mut conn = store.pool.acquire().await.map_err(db("connecting"))?;
        Self::size(&mut conn).await
    }

    /// Refuses a database whose log is shorter than this server (or, through the signed-size
    /// file, a replica) saw committed: at start, so that a server with a cut-back log or an old
    /// file beside a new database says so once, rather than failing every answer.
    pub async fn check_not_cut_back(&self, store: &Store) -> Result<(), AuditLogError> {
        let mut conn = store.pool.acquire().await.map_err(db("connecting"))?;
        let n = Self::size(&mut conn).await?;
        // Checked only: leaves not yet checked (`refresh`) must not raise the size seen, or
        // a row written into the database and refused could not be taken out again.
        self.size_not_cut_back(n)
    }

    /// Keeps the largest tree this server signed in `path` (read now when it exists), so that
    /// a restarted server still refuses to sign a log cut back or rewritten in the database.
    pub fn with_signed_high_file(
        mut self,
        path: PathBuf,
    ) -> Result<TransparencyLog, AuditLogError> {
        let high = read_signed_high(&path).map_err(|problem| AuditLogError::Key {
            path: path.display().to_string(),
            problem: format!(
                "the log's last signed size: {problem}; restore the file from a backup, or \
                 remove it if this database starts a new log (auditors holding a checkpoint of \
                 the old log will see that it restarted)"
            ),
        })?;
        // Sizes it, or a replica sharing the file, saw committed: a shorter log in the
        // database was cut back (or is a restored backup: remove the file with it).
        self.seen = std::sync::atomic::AtomicU64::new(high.map_or(0, |(n, _)| n));
        self.signed_high = std::sync::Mutex::new(high);
        self.signed_high_file = Some(path);
        Ok(self)
    }

    /// Refuses a tree of `size` leaves (whose stored hashes `cache` holds, with root `root`)
    /// that does not extend the largest tree signed before; records it when it is larger.
    fn extends_signed(
        &self,
        size: u64,
        root: Hash,
        cache: &StoredHashes,
    ) -> Result<(), AuditLogError> {
        let mut high = *self
            .signed_high
            .lock()
            .map_err(|_| AuditLogError::Internal("the signed size's lock is poisoned".into()))?;
        // Replicas sharing the file: a larger tree one of them signed or appended to counts
        // as this server's own (its copy in memory was read at start).
        if let Some(Ok(Some(kept))) = self.signed_high_file.as_deref().map(read_signed_high) {
            if high.is_none_or(|(n, _)| kept.0 > n) {
                high = Some(kept);
                self.seen
                    .fetch_max(kept.0, std::sync::atomic::Ordering::AcqRel);
            }
        }
        if let Some((signed, signed_root)) = high {
            // Said to the operator too: a database replaced on purpose (a new log) needs the
            // file removed, and every auditor holding the old log's checkpoint will see it.
            let remedy = match &self.signed_high_file {
                Some(path) => format!(
                    " (if this database is meant to start a new log, remove {}; auditors \
                     holding a checkpoint of the old log will see that it restarted)",
                    path.display()
                ),
                None => String::new(),
            };
            if size < signed {
                let e = format!(
                    "the log holds {size} leaves, but this server signed a checkpoint of, or \
                     appended to, {signed}: the database's log was cut back, and no checkpoint \
                     is signed for it"
                );
                tracing::error!("{e}{remedy}");
                return Err(AuditLogError::Refused(e));
            }
            let prefix =
                tree_hash(signed, cache).map_err(|e| AuditLogError::Tlog(e.to_string()))?;
            if prefix != signed_root {
                let e = format!(
                    "the log's first {signed} leaves no longer hash to the root this server \
                     signed: the database's log was rewritten, and no checkpoint is signed for \
                     it"
                );
                tracing::error!("{e}{remedy}");
                return Err(AuditLogError::Refused(e));
            }
            if size == signed {
                return Ok(());
            }
        }
        if let Some(path) = &self.signed_high_file {
            write_signed_high(path, size, &root).map_err(|e| {
                AuditLogError::Internal(format!(
                    "keeping the signed size in {}: {e}",
                    path.display()
                ))
            })?;
        }
        if let Ok(mut high) = self.signed_high.lock() {
            *high = Some((size, root));
        }
        Ok(())
    }

    /// The signing key.
    pub fn key(&self) -> &AuditKey {
        &self.key
    }

    /// Brings the cache up to the stored hashes of `size` leaves. Leaves past the largest tree
    /// this server signed or appended to (a replica's, or rows written into the database by
    /// anyone else; those within it are held to its root by `extends_signed`) are checked
    /// before a checkpoint can cover them: each note must be signed with this server's key,
    /// its row's columns must say what the note says, a head must not go back on the
    /// thread's earlier heads (nor follow its deletion), and the stored hashes must be the
    /// ones the notes hash to. Without this, whoever holds the database could add a leaf
    /// (an unsigned note, or a signed head of an earlier record copied to the end) that the
    /// next checkpoint signed for good, and auditors reading the log would fail a genuine
    /// trail.
    async fn refresh(
        &self,
        cache: &mut StoredHashes,
        conn: &mut sqlx::AnyConnection,
        size: u64,
    ) -> Result<(), AuditLogError> {
        let want = stored_hash_count(size);
        if (cache.0.len() as u64) >= want {
            return Ok(());
        }
        let have = leaves_of_stored(cache.0.len() as u64).ok_or_else(|| {
            AuditLogError::Tlog(format!(
                "{} cached hashes are no whole number of leaves",
                cache.0.len()
            ))
        })?;
        let rows = sqlx::query(
            "SELECT idx, hash FROM log_hashes WHERE idx >= $1 AND idx < $2 ORDER BY idx",
        )
        .bind(cache.0.len() as i64)
        .bind(want as i64)
        .fetch_all(&mut *conn)
        .await
        .map_err(db("reading log hashes"))?;
        let base = cache.0.len();
        let mut stored = Vec::with_capacity((want as usize).saturating_sub(base));
        for r in rows {
            let idx: i64 = r.try_get("idx").map_err(db("reading log hashes"))?;
            let text: String = r.try_get("hash").map_err(db("reading log hashes"))?;
            if idx as usize != base + stored.len() {
                return Err(AuditLogError::Tlog(format!(
                    "stored hash {idx} is out of order"
                )));
            }
            stored.push(Hash::parse_hash(&text).map_err(|e| AuditLogError::Tlog(e.to_string()))?);
        }
        if ((base + stored.len()) as u64) < want {
            return Err(AuditLogError::Tlog(format!(
                "the log has {size} leaves but only {} of their {want} stored hashes",
                base + stored.len()
            )));
        }
        let signed = self
            .signed_high
            .lock()
            .ok()
            .and_then(|h| h.map(|(n, _)| n))
            .unwrap_or(0);
        let from = have.max(signed);
        if from < size {
            // The hashes of the leaves before `from` as stored, then each new leaf's from its
            // note, compared with what is stored for it.
            let kept = (stored_hash_count(from) - stored_hash_count(have)) as usize;
            let computed = self
                .new_leaves_hashes(cache, stored[..kept].to_vec(), conn, from, size)
                .await?;
            if let Some(i) = (kept..stored.len()).find(|&i| computed.get(i) != stored.get(i)) {
                return Err(AuditLogError::Tlog(format!(
                    "stored hash {} is not the hash of the leaves' notes: the log's hashes \
                     were written by someone else; no checkpoint is signed over them",
                    base + i
                )));
            }
        }
        cache.0.extend(stored);
        Ok(())
    }

    /// `pending` (the stored hashes after `cache`'s, up to leaf `from`) and the stored hashes
    /// leaves `from..to` add, computed from their notes, each checked as
    /// [`TransparencyLog::refresh`] says. Read a thousand leaves at a time.
    async fn new_leaves_hashes(
        &self,
        cache: &StoredHashes,
        mut pending: Vec<Hash>,
        conn: &mut sqlx::AnyConnection,
        from: u64,
        to: u64,
    ) -> Result<Vec<Hash>, AuditLogError> {
        let refuse = |idx: u64, why: String| {
            AuditLogError::Tlog(format!(
                "leaf {idx} {why}: it was not logged by this server (written into the \
                 database?); no checkpoint is signed over it"
            ))
        };
        // The last leaf of each thread among the new ones, for the next of the same thread.
        let mut latest: std::collections::HashMap<String, LogStatement> = Default::default();
        let mut idx = from;
        while idx < to {
            let rows = sqlx::query(
                "SELECT idx, thread_id, seq, head_hash, note FROM log_leaves \
                 WHERE idx >= $1 AND idx < $2 ORDER BY idx",
            )
            .bind(idx as i64)
            .bind(to.min(idx + MAX_LEAVES_PER_READ as u64) as i64)
            .fetch_all(&mut *conn)
            .await
            .map_err(db("reading log leaves"))?;
            if rows.is_empty() {
                return Err(refuse(idx, "is missing".into()));
            }
            for r in &rows {
                idx = self
                    .checked_leaf(r, idx, from, cache, &mut pending, &mut latest, conn)
                    .await
                    .map_err(|e| match e {
                        LeafProblem::Refused(why) => refuse(idx, why),
                        LeafProblem::Failed(e) => e,
                    })?;
            }
        }
        Ok(pending)
    }

    /// Checks the leaf of row `r`, which must be leaf `idx`, and adds its stored hashes to
    /// `pending`; returns the next leaf's index.
    #[allow(clippy::too_many_arguments)]
    async fn checked_leaf(
        &self,
        r: &sqlx::any::AnyRow,
        idx: u64,
        from: u64,
        cache: &StoredHashes,
        pending: &mut Vec<Hash>,
        latest: &mut std::collections::HashMap<String, LogStatement>,
        conn: &mut sqlx::AnyConnection,
    ) -> Result<u64, LeafProblem> {
        {
            let at: i64 = r.try_get("idx").map_err(db("reading log leaves"))?;
            if at as u64 != idx {
                return Err(LeafProblem::Refused("is missing".into()));
            }
            let note: String = r.try_get("note").map_err(db("reading log leaves"))?;
            let statement = verify_note(&note, self.key.verifier_key())
                .map_err(|e| {
                    LeafProblem::Refused(format!("is not signed with this server's key ({e})"))
                })
                .and_then(|text| {
                    LogStatement::parse(&text).map_err(|e| LeafProblem::Refused(format!("({e})")))
                })?;
            let thread: String = r.try_get("thread_id").map_err(db("reading log leaves"))?;
            let seq: i64 = r.try_get("seq").map_err(db("reading log leaves"))?;
            let head: String = r.try_get("head_hash").map_err(db("reading log leaves"))?;
            if thread != statement.thread_id
                || seq != statement.seq as i64
                || head != statement.head_hash
            {
                return Err(LeafProblem::Refused(
                    "has columns that are not what its note says".into(),
                ));
            }
            let before = match latest.get(&statement.thread_id) {
                Some(s) => Some(s.clone()),
                // No leaf comes before leaf 0 (a log checked from its start reads none).
                None if from == 0 => None,
                None => {
                    self.last_leaf_of(conn, &statement.thread_id, from, cache, pending)
                        .await?
                }
            };
            if let Some(why) = goes_back_on(before.as_ref(), &statement) {
                return Err(LeafProblem::Refused(why));
            }
            let new = stored_hashes(
                idx,
                statement.text().as_bytes(),
                &WithPending(cache, pending),
            )
            .map_err(|e| AuditLogError::Tlog(e.to_string()))?;
            pending.extend(new);
            latest.insert(statement.thread_id.clone(), statement);
        }
        Ok(idx + 1)
    }

    /// The statement of `thread`'s last leaf before leaf `before`, found by the row's
    /// thread column and held to the tree: its note must be signed, name `thread`, and hash
    /// to the leaf hash stored for its index (so no other note can stand in for it). A row
    /// of the thread relabelled or taken out below `before` is not seen (only reading every
    /// leaf would see it), so this stops copies of a thread's earlier heads only while its
    /// later leaves are where the server wrote them.
    async fn last_leaf_of(
        &self,
        conn: &mut sqlx::AnyConnection,
        thread: &str,
        before: u64,
        cache: &StoredHashes,
        pending: &[Hash],
    ) -> Result<Option<LogStatement>, AuditLogError> {
        let row = sqlx::query(
            "SELECT idx, note FROM log_leaves WHERE thread_id = $1 AND idx < $2 \
             ORDER BY idx DESC LIMIT 1",
        )
        .bind(thread)
        .bind(before as i64)
        .fetch_optional(&mut *conn)
        .await
        .map_err(db("reading a thread's leaves"))?;
        let Some(row) = row else {
            return Ok(None);
        };
        let idx: i64 = row
            .try_get("idx")
            .map_err(db("reading a thread's leaves"))?;
        let note: String = row
            .try_get("note")
            .map_err(db("reading a thread's leaves"))?;
        let text = verify_note(&note, self.key.verifier_key()).map_err(AuditLogError::Tlog)?;
        let statement = LogStatement::parse(&text).map_err(AuditLogError::Tlog)?;
        let stored = WithPending(cache, pending)
            .read_hashes(&[stored_hash_index(0, idx as u64)])
            .map_err(|e| AuditLogError::Tlog(e.to_string()))?;
        if statement.thread_id != thread
            || stored.first() != Some(&tlog_tiles::record_hash(statement.text().as_bytes()))
        {
            return Err(AuditLogError::Tlog(format!(
                "leaf {idx} is filed under thread {thread} but is not that thread's leaf at \
                 that place in the tree: the log's rows were altered"
            )));
        }
        Ok(Some(statement))
    }

    async fn size(conn: &mut sqlx::AnyConnection) -> Result<u64, AuditLogError> {
        let row = sqlx::query("SELECT COALESCE(MAX(idx) + 1, 0) AS n FROM log_leaves")
            .fetch_one(&mut *conn)
            .await
            .map_err(db("reading the log size"))?;
        let n: i64 = row.try_get("n").map_err(db("reading the log size"))?;
        Ok(n as u64)
    }

    /// Signs `statement` and appends it as the next leaf, in its own transaction; returns the
    /// leaf's index. (The chat path appends through the journal, a batch per commit.)
    pub async fn append(
        &self,
        store: &Store,
        statement: &LogStatement,
    ) -> Result<u64, AuditLogError> {
        let note = self.key.sign(&statement.text())?;
        for _ in 0..50 {
            let mut tx = store
                .pool
                .begin()
                .await
                .map_err(db("starting a transaction"))?;
            let mut appender = self.appender().await;
            lock_for_appending(&mut tx, store.sqlite).await?;
            match appender.push(&mut tx, statement, &note).await {
                Ok(n) => {
                    tx.commit().await.map_err(db("committing a log leaf"))?;
                    appender.committed();
                    return Ok(n);
                }
                Err(AppendError::Taken) => {
                    let _ = tx.rollback().await;
                }
                Err(AppendError::Failed(e)) => return Err(e),
            }
        }
        Err(AppendError::exhausted())
    }

    /// Deletes thread `thread_id` with its trail (audit retention), if it is still finished and
    /// last updated before `cutoff_ms`, and logs the deletion in the same transaction: both or
    /// neither. Apart, a crash between the two left a trail gone with its heads still in the log
    /// and no deletion leaf, which `log verify` reports as a trail cut back, for ever. The log's
    /// lock is taken before the database's write lock (`BEGIN IMMEDIATE` on SQLite), in the
    /// journal's order: the other way round, each waited on the other until SQLite's busy
    /// timeout. Returns the deletion's leaf, or `None` when nothing was logged (the thread is
    /// no longer due, or had no record, so no head of it was logged).
    pub async fn delete_trail(
        &self,
        store: &Store,
        thread_id: &str,
        cutoff_ms: i64,
    ) -> Result<Option<u64>, AuditLogError> {
        for _ in 0..50 {
            // A connection before the log's lock, as checkpoints and proofs take them: the
            // other way round, readers holding every pooled connection while waiting for the
            // lock stalled a deletion holding it until the pool's acquire timeout.
            let mut conn = store.pool.acquire().await.map_err(db("connecting"))?;
            let mut appender = self.appender().await;
            let begun = if store.sqlite {
                sqlx::Connection::begin_with(&mut *conn, "BEGIN IMMEDIATE").await
            } else {
                sqlx::Connection::begin(&mut *conn).await
            };
            let mut tx = begun.map_err(db("starting a transaction"))?;
            lock_for_appending(&mut tx, store.sqlite).await?;
            let Some((seq, head_hash)) =
                store.delete_trail_in(&mut tx, thread_id, cutoff_ms).await?
            else {
                tx.commit().await.map_err(db("committing a deletion"))?;
                return Ok(None);
            };
            let statement = LogStatement {
                deleted: true,
                thread_id: thread_id.to_string(),
                seq,
                head_hash,
            };
            let note = self.key.sign(&statement.text())?;
            match appender.push(&mut tx, &statement, &note).await {
                Ok(n) => {
                    tx.commit()
                        .await
                        .map_err(db("committing a deletion and its log leaf"))?;
                    appender.committed();
                    return Ok(Some(n));
                }
                Err(AppendError::Taken) => {
                    let _ = tx.rollback().await;
                }
                Err(AppendError::Failed(e)) => return Err(e),
            }
        }
        Err(AppendError::exhausted())
    }

    /// Appends leaves inside a caller's transaction: hold the returned appender until the
    /// transaction is committed (then call [`LogAppender::committed`]) or rolled back.
    pub async fn appender(&self) -> LogAppender<'_> {
        LogAppender {
            log: self,
            cache: self.hashes.lock().await,
            next: None,
            pending: Vec::new(),
        }
    }

    /// The current signed checkpoint (C2SP tlog-checkpoint) and its size.
    pub async fn checkpoint(&self, store: &Store) -> Result<(String, u64), AuditLogError> {
        let mut conn = store.pool.acquire().await.map_err(db("connecting"))?;
        let cached = || self.signed.lock().ok().and_then(|s| s.clone());
        // The last checkpoint, while the log still has its size and this server saw no more
        // (a log cut back to a signed size would otherwise get its old checkpoint back).
        let n = Self::size(&mut conn).await?;
        if let Some((size, note)) = cached() {
            if size == n && n >= self.seen() {
                return Ok((note, n));
            }
        }
        // Under the hashes' lock no commit of this server completes, and under the database's
        // lock on appending no replica's, so the size read now is at least every size any of
        // them saw unless the database lost leaves (read before the locks, a commit ending in
        // between looked like a log cut back).
        let mut cache = self.hashes.lock().await;
        // PostgreSQL's lock is taken for a moment at most, so that a public read cannot hold up
        // the replicas' appends (SQLite has no replicas: the hashes' lock is enough).
        let mut tx = sqlx::Connection::begin(&mut *conn)
            .await
            .map_err(db("starting a transaction"))?;
        let locked = async {
            if !store.sqlite {
                sqlx::query("SET LOCAL lock_timeout = '2s'")
                    .execute(&mut *tx)
                    .await
                    .map_err(db("setting a lock timeout"))?;
                lock_for_appending(&mut tx, false).await?;
            }
            let n = Self::size(&mut tx).await?;
            self.size_not_cut_back(n)?;
            if let Some((size, note)) = cached() {
                if size == n {
                    return Ok(Err((note, n)));
                }
            }
            self.refresh(&mut cache, &mut tx, n).await?;
            self.saw_size(n)?;
            let root = tree_hash(n, &*cache).map_err(|e| AuditLogError::Tlog(e.to_string()))?;
            self.extends_signed(n, root, &cache)?;
            Ok(Ok((n, root)))
        }
        .await;
        // Nothing was written: the transaction only held the locks, given back before the
        // log's (dropped, its end would wait for the connection's return to the pool).
        let _ = tx.rollback().await;
        drop(cache);
        let (n, root) = match locked {
            Ok(Ok(tree)) => tree,
            Ok(Err(signed)) => return Ok(signed),
            // Replicas held the lock on appending past the timeout: the last checkpoint signed
            // is still a checkpoint of this log (auditors get a later one later).
            Err(AuditLogError::Db(e)) if e.contains("lock timeout") => match cached() {
                Some((size, note)) => return Ok((note, size)),
                None => return Err(AuditLogError::Db(e)),
            },
            Err(e) => return Err(e),
        };
        let c = Checkpoint::new(&self.origin, n, root, "")
            .map_err(|e| AuditLogError::Internal(e.to_string()))?;
        let text =
            String::from_utf8(c.to_bytes()).map_err(|e| AuditLogError::Internal(e.to_string()))?;
        let note = self.key.sign(&text)?;
        if let Ok(mut signed) = self.signed.lock() {
            *signed = Some((n, note.clone()));
        }
        Ok((note, n))
    }

    /// The audit path of leaf `index` in the tree of `size` leaves.
    pub async fn inclusion(
        &self,
        store: &Store,
        index: u64,
        size: u64,
    ) -> Result<Vec<String>, AuditLogError> {
        let mut conn = store.pool.acquire().await.map_err(db("connecting"))?;
        let mut cache = self.hashes.lock().await;
        self.refresh(&mut cache, &mut conn, size).await?;
        let p =
            prove_record(size, index, &*cache).map_err(|e| AuditLogError::Tlog(e.to_string()))?;
        Ok(p.iter().map(Hash::to_string).collect())
    }

    /// The consistency proof from `from` to `to` leaves.
    pub async fn consistency(
        &self,
        store: &Store,
        from: u64,
        to: u64,
    ) -> Result<Vec<String>, AuditLogError> {
        let mut conn = store.pool.acquire().await.map_err(db("connecting"))?;
        let n = Self::size(&mut conn).await?;
        if from > to || to > n {
            return Err(AuditLogError::Range(format!(
                "need 0 <= from <= to <= {n} (the log's size), got from={from} to={to}"
            )));
        }
        if from == 0 || from == to {
            return Ok(Vec::new());
        }
        let mut cache = self.hashes.lock().await;
        self.refresh(&mut cache, &mut conn, to).await?;
        let p = prove_tree(to, from, &*cache).map_err(|e| AuditLogError::Tlog(e.to_string()))?;
        Ok(p.iter().map(Hash::to_string).collect())
    }

    /// Leaves `from..to` (at most [`MAX_LEAVES_PER_READ`] at a time).
    pub async fn leaves(
        &self,
        store: &Store,
        from: u64,
        to: u64,
    ) -> Result<Vec<LeafRow>, AuditLogError> {
        // Checked before the database sees them: `as i64` wrapped 2^63 round to i64::MIN, and
        // `from=2^63&to=2^63-1` then read every leaf into one public response.
        let Ok(from) = i64::try_from(from) else {
            return Err(AuditLogError::Range(format!(
                "leaf indexes go up to {}, got from={from}",
                i64::MAX
            )));
        };
        let to = i64::try_from(to).unwrap_or(i64::MAX);
        if from > to {
            return Err(AuditLogError::Range(format!(
                "need from <= to, got from={from} to={to}"
            )));
        }
        let to = to.min(from.saturating_add(MAX_LEAVES_PER_READ));
        let rows = sqlx::query(
            "SELECT idx, note FROM log_leaves WHERE idx >= $1 AND idx < $2 ORDER BY idx",
        )
        .bind(from)
        .bind(to)
        .fetch_all(&store.pool)
        .await
        .map_err(db("reading log leaves"))?;
        rows.iter()
            .map(|r| {
                Ok(LeafRow {
                    index: r
                        .try_get::<i64, _>("idx")
                        .map_err(db("reading log leaves"))? as u64,
                    note: r.try_get("note").map_err(db("reading log leaves"))?,
                })
            })
            .collect()
    }

    /// The latest leaf of a thread: its index and signed note.
    pub async fn latest_head(
        &self,
        store: &Store,
        thread_id: &str,
    ) -> Result<Option<(u64, String)>, AuditLogError> {
        let row = sqlx::query(
            "SELECT idx, note FROM log_leaves WHERE thread_id = $1 ORDER BY idx DESC LIMIT 1",
        )
        .bind(thread_id)
        .fetch_optional(&store.pool)
        .await
        .map_err(db("reading a thread's head"))?;
        row.map(|r| {
            Ok((
                r.try_get::<i64, _>("idx")
                    .map_err(db("reading a thread's head"))? as u64,
                r.try_get("note").map_err(db("reading a thread's head"))?,
            ))
        })
        .transpose()
    }

    /// The heads a thread's log leaves (index, signed note, in log order) state, each note
    /// checked against this log's key: what a stored trail must still hold before the server
    /// extends or shows it (see `app::checked_trail`).
    pub fn heads_of(
        &self,
        leaves: &[(i64, String)],
    ) -> Result<Vec<(u64, LogStatement)>, AuditLogError> {
        leaves
            .iter()
            .map(|(idx, note)| {
                let idx = *idx;
                let statement = verify_note(note, self.key.verifier_key())
                    .map_err(|e| {
                        format!(
                            "leaf {idx} is not signed with this server's audit key ({e}): \
                             replicas must share one key ([audit] signing_key_path), and a \
                             log's key cannot change"
                        )
                    })
                    .and_then(|text| {
                        LogStatement::parse(&text).map_err(|e| format!("leaf {idx}: {e}"))
                    })
                    .map_err(AuditLogError::Tlog)?;
                Ok((idx as u64, statement))
            })
            .collect()
    }

    /// Signs and logs the head of a trail whose last record is `last`.
    pub async fn log_head(
        &self,
        store: &Store,
        thread_id: &str,
        last: &AuditRecord,
    ) -> Result<u64, AuditLogError> {
        self.append(
            store,
            &LogStatement {
                deleted: false,
                thread_id: thread_id.to_string(),
                seq: last.seq,
                head_hash: last.hash.clone(),
            },
        )
        .await
    }

    /// A trail with its signed head (the thread's last leaf, index and note, read with the
    /// trail: see `Store::trail_and_leaves`), inclusion proof, checkpoint and (when `from` is
    /// given) a consistency proof from that size.
    pub async fn bundle(
        &self,
        store: &Store,
        trail: Vec<Value>,
        head: Option<(u64, String)>,
        from: Option<u64>,
    ) -> Result<AuditBundle, AuditLogError> {
        let (checkpoint, size) = self.checkpoint(store).await?;
        let (signed_head, inclusion) = match head {
            Some((idx, note)) if idx < size => (
                Some(note),
                Some(Inclusion {
                    leaf_index: idx,
                    hashes: self.inclusion(store, idx, size).await?,
                }),
            ),
            _ => (None, None),
        };
        // A saved size beyond the current log gets no proof: the auditor sees it shrank.
        let consistency = match from.filter(|f| *f <= size) {
            Some(f) => Some(Consistency {
                from_size: f,
                hashes: self.consistency(store, f, size).await?,
            }),
            None => None,
        };
        Ok(AuditBundle {
            trail,
            signed_head,
            inclusion,
            checkpoint: Some(checkpoint),
            consistency,
            policy_documents: Vec::new(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Servers started together on the same storage (a bench starting two, replicas, a
    /// restart loop) create one key between them, and none of them reads a key file another
    /// is still writing: every one of them starts, with the same key. (It was written in
    /// place: a server that found the file before its creator had written it read an empty
    /// key and stopped, "malformed verifier key".)
    #[test]
    fn servers_starting_together_share_one_complete_key() {
        for round in 0..20 {
            let dir =
                std::env::temp_dir().join(format!("pg-key-race-{}-{round}", std::process::id()));
            let _ = std::fs::remove_dir_all(&dir);
            let path = dir.join("data").join("proofgate-audit.key");
            let start = std::sync::Arc::new(std::sync::Barrier::new(8));
            let servers: Vec<_> = (0..8)
                .map(|_| {
                    let (path, start) = (path.clone(), start.clone());
                    std::thread::spawn(move || {
                        start.wait();
                        AuditKey::load_or_create(None, &path, "race")
                            .map(|k| k.verifier_key().to_string())
                            .map_err(|e| e.to_string())
                    })
                })
                .collect();
            let keys: Vec<_> = servers.into_iter().map(|s| s.join().unwrap()).collect();
            let first = keys[0]
                .clone()
                .unwrap_or_else(|e| panic!("round {round}: {e}"));
            for key in &keys {
                assert_eq!(key.as_ref(), Ok(&first), "round {round}");
            }
            // Nothing but the key is left behind.
            let names: Vec<_> = std::fs::read_dir(dir.join("data"))
                .unwrap()
                .map(|e| e.unwrap().file_name().into_string().unwrap())
                .collect();
            assert_eq!(names, ["proofgate-audit.key"], "round {round}");
            let _ = std::fs::remove_dir_all(&dir);
        }
    }

    /// A key path that is a symbolic link to nothing is refused with what to do, not looped
    /// on (creating the key found the name taken, and reading it found nothing, forever).
    #[test]
    fn a_dangling_key_link_is_refused_not_looped_on() {
        let dir = std::env::temp_dir().join(format!("pg-key-dangling-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("proofgate-audit.key");
        std::os::unix::fs::symlink(dir.join("not-mounted-yet/key"), &path).unwrap();
        let Err(e) = AuditKey::load_or_create(None, &path, "test") else {
            panic!("a dangling key link was accepted");
        };
        assert!(e.to_string().contains("symbolic link to nothing"), "{e}");
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// A key file left empty (a start stopped between creating and writing it, by a version
    /// that wrote it in place) is an error that says so and what to do, and is not replaced:
    /// records may have been signed with a key that was there.
    #[test]
    fn an_empty_key_file_is_refused_with_what_to_do() {
        let dir = std::env::temp_dir().join(format!("pg-key-empty-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("proofgate-audit.key");
        std::fs::write(&path, "").unwrap();
        let Err(e) = AuditKey::load_or_create(None, &path, "test") else {
            panic!("an empty key file was accepted");
        };
        let e = e.to_string();
        assert!(e.contains("is empty"), "{e}");
        assert!(e.contains("delete it"), "{e}");
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "");
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// A fresh directory (named `name` and the process) with a SQLite store in it.
    async fn fresh(name: &str) -> (PathBuf, Store) {
        let dir = std::env::temp_dir().join(format!("{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let store = Store::connect(&format!("sqlite://{}", dir.join("l.sqlite").display()))
            .await
            .unwrap();
        (dir, store)
    }

    /// A log signed with `dir`'s key that keeps its signed size in `high`, as a server does.
    fn log_with_file(dir: &Path, high: &Path) -> TransparencyLog {
        let key = AuditKey::load_or_create(None, &dir.join("key"), "test").unwrap();
        TransparencyLog::new("test/log".into(), key)
            .with_signed_high_file(high.to_path_buf())
            .unwrap()
    }

    /// Deletes the log's leaves from `n` on with their stored hashes, as whoever holds the
    /// database could.
    async fn cut_log(store: &Store, n: u64) {
        sqlx::query("DELETE FROM log_leaves WHERE idx >= $1")
            .bind(n as i64)
            .execute(&store.pool)
            .await
            .unwrap();
        sqlx::query("DELETE FROM log_hashes WHERE idx >= $1")
            .bind(stored_hash_count(n) as i64)
            .execute(&store.pool)
            .await
            .unwrap();
    }

    fn statement(thread: &str, seq: u64) -> LogStatement {
        LogStatement {
            deleted: false,
            thread_id: thread.into(),
            seq,
            head_hash: "ab".repeat(32),
        }
    }

    /// The database's log cut back or rewritten is never signed, by this server or by one
    /// restarted on the same key file (which reads the largest signed tree from its own file,
    /// not from the database).
    #[tokio::test]
    async fn a_log_cut_back_or_rewritten_in_the_database_is_not_signed() {
        let (dir, store) = fresh("pg-signed-high").await;
        let high = dir.join("key.signed-size");
        let open = || log_with_file(&dir, &high);
        let log = open();
        for seq in 0..5 {
            log.append(&store, &statement("t", seq)).await.unwrap();
        }
        let (_, size) = log.checkpoint(&store).await.unwrap();
        assert_eq!(size, 5);
        assert!(std::fs::read_to_string(&high).unwrap().starts_with("5 "));

        // Cut back by two leaves (and their stored hashes): refused, now and after a restart.
        let cut = |n: u64| cut_log(&store, n);
        cut(3).await;
        let refused = |r: Result<(String, u64), AuditLogError>| match r {
            Ok((_, n)) => panic!("a checkpoint of {n} leaves was signed"),
            Err(e) => e.to_string(),
        };
        let e = refused(log.checkpoint(&store).await);
        assert!(e.contains("cut back"), "{e}");
        let e = refused(open().checkpoint(&store).await);
        assert!(e.contains("cut back"), "{e}");

        // Nor does a restarted server append to it (it reads the size it saw from its file).
        let e = open().append(&store, &statement("u", 9)).await.unwrap_err();
        assert!(e.to_string().contains("cut back"), "{e}");

        // ...and grown again past the signed size with other leaves (by a process without
        // the file): rewritten, refused.
        let key = AuditKey::load_or_create(None, &dir.join("key"), "test").unwrap();
        let other = TransparencyLog::new("test/log".into(), key);
        for seq in 10..14 {
            other.append(&store, &statement("u", seq)).await.unwrap();
        }
        let restarted = open();
        let e = refused(restarted.checkpoint(&store).await);
        assert!(e.contains("rewritten"), "{e}");

        // A genuine log that grows is signed, and its new size kept.
        let fresh = dir.join("fresh.sqlite");
        let store = Store::connect(&format!("sqlite://{}", fresh.display()))
            .await
            .unwrap();
        std::fs::remove_file(&high).unwrap();
        let log = open();
        log.append(&store, &statement("t", 0)).await.unwrap();
        assert_eq!(log.checkpoint(&store).await.unwrap().1, 1);
        log.append(&store, &statement("t", 1)).await.unwrap();
        assert_eq!(open().checkpoint(&store).await.unwrap().1, 2);
        assert!(std::fs::read_to_string(&high).unwrap().starts_with("2 "));

        // A file that is not a size and root stops the server at start.
        std::fs::write(&high, "not a size\n").unwrap();
        let key = AuditKey::load_or_create(None, &dir.join("key"), "test").unwrap();
        assert!(TransparencyLog::new("test/log".into(), key)
            .with_signed_high_file(high.clone())
            .is_err());
    }

    /// A checkpoint read while this server commits leaves is never taken for a log cut back
    /// (its size was read before a commit ended, and the commit's size seen after it).
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn checkpoints_read_while_leaves_are_appended_are_signed() {
        let (dir, store) = fresh("pg-busy-log").await;
        let key = AuditKey::load_or_create(None, &dir.join("key"), "test").unwrap();
        let log = std::sync::Arc::new(
            TransparencyLog::new("test/log".into(), key)
                .with_signed_high_file(dir.join("key.signed-size"))
                .unwrap(),
        );
        let (l, s) = (log.clone(), store.clone());
        let appends = tokio::spawn(async move {
            for seq in 0..300 {
                l.append(&s, &statement("t", seq)).await.unwrap();
            }
        });
        let l = log.clone();
        let persists = tokio::spawn(async move {
            for _ in 0..300 {
                l.persist_appended_size().await.unwrap();
                tokio::task::yield_now().await;
            }
        });
        let mut last = 0;
        while !appends.is_finished() {
            let (_, n) = log.checkpoint(&store).await.unwrap();
            assert!(n >= last);
            last = n;
        }
        appends.await.unwrap();
        persists.await.unwrap();
        assert_eq!(log.checkpoint(&store).await.unwrap().1, 300);
    }

    /// Replicas sharing the signed-size file: a log cut back below what one of them saw is
    /// refused by the other too, which never saw those leaves (it signed the cut log, and a
    /// second tree of the same size, before).
    #[tokio::test]
    async fn a_replica_refuses_a_log_cut_below_what_another_saw() {
        let (dir, store) = fresh("pg-replicas").await;
        let high = dir.join("key.signed-size");
        let open = || log_with_file(&dir, &high);
        let (a, b) = (open(), open());
        b.append(&store, &statement("b", 0)).await.unwrap();
        for seq in 0..4 {
            a.append(&store, &statement("a", seq)).await.unwrap();
        }
        assert_eq!(a.checkpoint(&store).await.unwrap().1, 5);
        cut_log(&store, 3).await;
        let e = b.checkpoint(&store).await.map(|(_, n)| n).unwrap_err();
        assert!(e.to_string().contains("cut back"), "{e}");
        let e = b.append(&store, &statement("b", 1)).await.unwrap_err();
        assert!(e.to_string().contains("cut back"), "{e}");
    }

    /// The signed-size file every database in the key's directory used to share is taken over
    /// by the database whose log it describes, and left by another.
    #[tokio::test]
    async fn a_shared_signed_size_file_is_taken_over_only_by_its_own_log() {
        let dir = std::env::temp_dir().join(format!("pg-adopt-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let legacy = dir.join("key.signed-size");
        let open = |file: &str| {
            let key = AuditKey::load_or_create(None, &dir.join("key"), "test").unwrap();
            TransparencyLog::new("test/log".into(), key)
                .with_signed_high_file(dir.join(file))
                .unwrap()
        };
        let store = |name: &str| {
            let url = format!("sqlite://{}", dir.join(name).display());
            async move { Store::connect(&url).await.unwrap() }
        };
        let (a, b) = (store("a.sqlite").await, store("b.sqlite").await);
        let old = {
            let key = AuditKey::load_or_create(None, &dir.join("key"), "test").unwrap();
            TransparencyLog::new("test/log".into(), key)
                .with_signed_high_file(legacy.clone())
                .unwrap()
        };
        for seq in 0..3 {
            old.append(&a, &statement("a", seq)).await.unwrap();
        }
        old.checkpoint(&a).await.unwrap();
        let key = AuditKey::load_or_create(None, &dir.join("key"), "test").unwrap();
        TransparencyLog::new("test/log".into(), key)
            .append(&b, &statement("b", 0))
            .await
            .unwrap();
        // a's log: taken over; its size is kept in a's own file and refuses a cut.
        let la = open("a.sqlite.signed-size");
        la.adopt_signed_size(&a, &legacy, true).await.unwrap();
        assert!(std::fs::read_to_string(dir.join("a.sqlite.signed-size"))
            .unwrap()
            .starts_with("3 "));
        // b's log holds one leaf: the file is not b's, and b starts.
        let lb = open("b.sqlite.signed-size");
        lb.adopt_signed_size(&b, &legacy, true).await.unwrap();
        assert!(!dir.join("b.sqlite.signed-size").exists());
        lb.check_not_cut_back(&b).await.unwrap();
        // With no other database beside it, a log the file does not describe was cut back or
        // rewritten: refused, as before the file moved.
        let e = open("b2.signed-size")
            .adopt_signed_size(&b, &legacy, false)
            .await
            .unwrap_err();
        assert!(e.to_string().contains("cut back or rewritten"), "{e}");
        // a's adopted size refuses a cut.
        cut_log(&a, 2).await;
        assert!(la.check_not_cut_back(&a).await.is_err());
    }

    /// Two logs keeping their sizes in one file: at the same size, another tree is a rewrite.
    #[tokio::test]
    async fn the_same_size_kept_for_another_tree_is_a_rewrite() {
        let (dir, one) = fresh("pg-same-size").await;
        let two = Store::connect(&format!("sqlite://{}", dir.join("two.sqlite").display()))
            .await
            .unwrap();
        let high = dir.join("shared.signed-size");
        let (a, b) = (log_with_file(&dir, &high), log_with_file(&dir, &high));
        for seq in 0..2 {
            a.append(&one, &statement("a", seq)).await.unwrap();
            b.append(&two, &statement("b", seq)).await.unwrap();
        }
        assert_eq!(a.persist_appended_size().await.unwrap(), Some(2));
        let e = b.persist_appended_size().await.unwrap_err();
        assert!(e.to_string().contains("rewritten"), "{e}");
    }

    /// Leaves appended after the last signed checkpoint are no less kept: a database whose log
    /// was cut back below them (answers given, then their leaves and trails deleted before
    /// anyone asked for a checkpoint) is refused, by this server at once and, once the size
    /// was kept, by one restarted on the same files. (A cut back was signed before.)
    #[tokio::test]
    async fn a_log_cut_back_below_leaves_no_checkpoint_covers_is_not_signed() {
        let (dir, store) = fresh("pg-appended-high").await;
        let high = dir.join("key.signed-size");
        let open = || log_with_file(&dir, &high);
        let log = open();
        for seq in 0..3 {
            log.append(&store, &statement("t", seq)).await.unwrap();
        }
        assert_eq!(log.checkpoint(&store).await.unwrap().1, 3);
        for seq in 0..2 {
            log.append(&store, &statement("u", seq)).await.unwrap();
        }
        let cut = |n: u64| cut_log(&store, n);
        let copy = dir.join("copy.sqlite");
        sqlx::query(sqlx::AssertSqlSafe(format!(
            "VACUUM INTO '{}'",
            copy.display()
        )))
        .execute(&store.pool)
        .await
        .unwrap();
        cut(3).await;
        let e = log.checkpoint(&store).await.map(|(_, n)| n).unwrap_err();
        assert!(e.to_string().contains("cut back"), "{e}");
        // Nor is anything appended to it.
        let e = log.append(&store, &statement("v", 0)).await.unwrap_err();
        assert!(e.to_string().contains("cut back"), "{e}");

        // Kept in the file (as the server does every second), a restart refuses it too.
        assert_eq!(log.persist_appended_size().await.unwrap(), Some(5));
        assert!(std::fs::read_to_string(&high).unwrap().starts_with("5 "));
        assert_eq!(log.persist_appended_size().await.unwrap(), None);
        let e = open().checkpoint(&store).await.map(|(_, n)| n).unwrap_err();
        assert!(e.to_string().contains("cut back"), "{e}");

        // The genuine log, grown further, is signed.
        let store = Store::connect(&format!("sqlite://{}", copy.display()))
            .await
            .unwrap();
        let restarted = open();
        restarted.append(&store, &statement("u", 2)).await.unwrap();
        assert_eq!(restarted.checkpoint(&store).await.unwrap().1, 6);
    }
}

//! Starts the built `proofgate serve` as a real process for end-to-end tests.
#![allow(dead_code)]

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};

/// The admin key every test proxy is started with (`PROOFGATE_AUTH__ADMIN_KEY`).
pub const ADMIN_KEY: &str = "pg-test-admin-key-0123456789abcdef";

/// A running `proofgate serve`, killed on drop.
pub struct Proxy {
    child: Child,
    /// `http://127.0.0.1:PORT`.
    pub url: String,
    config: PathBuf,
    dir: PathBuf,
}

/// Builds tests/support/clock_shift.c into `dir` with the system's cc; the shared object to
/// `LD_PRELOAD`, whose clock is shifted by the milliseconds in
/// `$PROOFGATE_TEST_CLOCK_SHIFT_FILE`.
pub fn clock_shim(dir: &std::path::Path) -> PathBuf {
    let shim = dir.join("clock_shift.so");
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
    let built = Command::new("cc")
        .args(["-shared", "-fPIC", "-O2", "-o"])
        .arg(&shim)
        .arg(root.join("tests/support/clock_shift.c"))
        .arg("-ldl")
        .output()
        .expect("cc runs");
    assert!(
        built.status.success(),
        "{}",
        String::from_utf8_lossy(&built.stderr)
    );
    shim
}

/// Runs `sql` on a SQLite database file (as someone with the file would), with Python's
/// sqlite3, so that tests need no driver of their own.
pub fn sqlite(db: &std::path::Path, sql: &str) {
    python_sqlite(db, "c.executescript(sys.argv[2]); c.commit()", sql);
}

/// The rows `sql` (one query) reads from a SQLite database file, one line each, columns
/// separated by tabs.
pub fn sqlite_query(db: &std::path::Path, sql: &str) -> String {
    python_sqlite(
        db,
        "print('\\n'.join('\\t'.join(map(str, r)) for r in c.execute(sys.argv[2])))",
        sql,
    )
    .trim_end()
    .to_string()
}

/// Runs `code` with `c` connected to `db` and `sql` as `sys.argv[2]`; what it printed.
fn python_sqlite(db: &std::path::Path, code: &str, sql: &str) -> String {
    let out = Command::new("python3")
        .args([
            "-c",
            &format!("import sqlite3,sys; c=sqlite3.connect(sys.argv[1]); {code}"),
        ])
        .arg(db)
        .arg(sql)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).to_string()
}

/// Runs `proofgate <args> <config>` (the config file last) to its end and returns what it
/// wrote to stderr, failing the test if the command succeeded: a refused start or command.
pub fn refused(args: &[&str], config: &std::path::Path) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_proofgate"))
        .args(args)
        .arg(config)
        .current_dir(super::scripted::repo_root())
        .output()
        .expect("proofgate runs");
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    assert!(!out.status.success(), "{args:?} succeeded: {stderr}");
    stderr
}

/// A fresh temp directory for one test.
pub fn temp_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!(
        "pg-e2e-{name}-{}-{}",
        std::process::id(),
        uuid::Uuid::new_v4().simple()
    ));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// A database of its own on the test PostgreSQL server (scripts/with-postgres.sh), or `None`
/// when `PROOFGATE_TEST_POSTGRES_URL` is unset. A log is written with one audit key, and a
/// server refuses leaves another key signed: tests whose servers have keys of their own must
/// not share a database's log.
pub async fn postgres_database(name: &str) -> Option<String> {
    use sqlx::Connection;
    let base = std::env::var("PROOFGATE_TEST_POSTGRES_URL").ok()?;
    let mut conn = sqlx::PgConnection::connect(&base)
        .await
        .expect("the test PostgreSQL server answers");
    let db = format!(
        "t_{}_{}",
        name.to_ascii_lowercase()
            .replace(|c: char| !c.is_ascii_alphanumeric(), "_"),
        uuid::Uuid::new_v4().simple()
    );
    // A name of letters, digits and underscores this function made.
    sqlx::query(sqlx::AssertSqlSafe(format!("CREATE DATABASE {db}")))
        .execute(&mut conn)
        .await
        .expect("a test database is created");
    let (server, _) = base.rsplit_once('/').expect("a database URL");
    Some(format!("{server}/{db}"))
}

impl Proxy {
    /// Writes `config_toml` (with `{dir}` replaced by the test's directory) and starts the proxy.
    pub fn start(name: &str, config_toml: &str) -> Proxy {
        Self::start_with_env(name, config_toml, &[])
    }

    /// As [`Proxy::start`], with more environment variables for the process.
    pub fn start_with_env(name: &str, config_toml: &str, env: &[(&str, &str)]) -> Proxy {
        let dir = temp_dir(name);
        let config = dir.join("proofgate.toml");
        std::fs::write(
            &config,
            config_toml.replace("{dir}", &dir.display().to_string()),
        )
        .unwrap();
        Self::spawn_with_env(config, dir, env)
    }

    fn spawn(config: PathBuf, dir: PathBuf) -> Proxy {
        Self::spawn_with_env(config, dir, &[])
    }

    fn spawn_with_env(config: PathBuf, dir: PathBuf, env: &[(&str, &str)]) -> Proxy {
        let mut child = Command::new(env!("CARGO_BIN_EXE_proofgate"))
            .args(["serve", "--listen", "127.0.0.1:0", "--config"])
            .arg(&config)
            .current_dir(super::scripted::repo_root())
            .env("RUST_LOG", "warn")
            .env("PROOFGATE_AUTH__ADMIN_KEY", ADMIN_KEY)
            .envs(env.iter().copied())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("proofgate starts");
        let stdout = child.stdout.take().unwrap();
        let mut line = String::new();
        BufReader::new(stdout).read_line(&mut line).unwrap();
        let url = line
            .trim()
            .strip_prefix("proofgate listening on ")
            .unwrap_or_else(|| panic!("proofgate did not start: {line:?}"))
            .to_string();
        Proxy {
            child,
            url,
            config,
            dir,
        }
    }

    /// The server's process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The test's directory (database, keys).
    pub fn dir(&self) -> &std::path::Path {
        &self.dir
    }

    /// The configuration file it was started with.
    pub fn config_path(&self) -> &std::path::Path {
        &self.config
    }

    /// Stops the process (as a crash would) and starts it again on the same configuration and
    /// database.
    pub fn restart(mut self) -> Proxy {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let (config, dir) = (self.config.clone(), self.dir.clone());
        std::mem::forget(self);
        Self::spawn(config, dir)
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A configuration with the park policy and every LLM at `llm` (base URL with /v1); `top`
/// holds top-level keys, `tables` more tables. API keys are off (`auth.required = false`, as
/// for local development); [`secured_config`] has them on.
pub fn config(llm: &str, top: &str, tables: &str) -> String {
    secured_config(llm, &format!("{top}\n[auth]\nrequired = false\n"), tables)
}

/// As [`config`], with API keys required (the default): the admin key is [`ADMIN_KEY`];
/// `top` may end with an `[auth]` table of its own.
pub fn secured_config(llm: &str, top: &str, tables: &str) -> String {
    // With translators listed, k is their number (a count beside them is refused).
    let count = if tables.contains("[[validator.translators]]") {
        ""
    } else {
        "translator_count = 3"
    };
    format!(
        r#"
{top}
[upstream]
base_url = "{llm}"
model = "recorded-chatbot"

[rewriter]
base_url = "{llm}"
model = "recorded-rewriter"

[validator]
kind = "local"
policy = "examples/policies/park-admission.json"
{count}

[storage]
url = "sqlite://{{dir}}/proofgate.sqlite"

[audit]
signing_key_path = "{{dir}}/audit.key"
{tables}
"#
    )
}

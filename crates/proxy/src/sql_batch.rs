//! The statements of one transaction, sent in as few calls as the database allows. sqlx runs a
//! SQLite connection on a thread of its own and hands it one call at a time: a group commit of
//! seven statements was seven hand-offs to that thread and back (a wake-up and a context switch
//! each), which was most of a lone request's time. SQLite runs several statements with their
//! arguments in one call, so a commit's inserts and its `COMMIT` go together; PostgreSQL's
//! protocol takes one statement with arguments per call, so there each is a call of its own.

use sqlx::any::AnyArguments;
use sqlx::Arguments;

/// At most this many arguments in one call: SQLite numbers the arguments of the whole call, and
/// a statement cannot name a parameter past its limit (32766).
const MAX_ARGS_PER_CALL: usize = 30_000;

/// Statements to run in order, grouped into calls.
pub struct Statements {
    /// Whether every statement goes into one call (SQLite).
    one_call: bool,
    calls: Vec<Call>,
}

struct Call {
    sql: String,
    args: AnyArguments,
    /// What the call's statements do, for errors.
    what: Vec<&'static str>,
}

/// A failed call: which statements it held and the driver's error.
#[derive(Debug)]
pub struct Failed {
    /// What the failed call's statements do.
    pub what: String,
    /// The driver's error.
    pub source: sqlx::Error,
}

/// Appends values to a statement's arguments (in placeholder order).
pub struct Binder<'a>(&'a mut AnyArguments);

impl Binder<'_> {
    /// Adds one value.
    pub fn bind<'t, T>(&mut self, value: T) -> &mut Self
    where
        T: sqlx::Encode<'t, sqlx::Any> + sqlx::Type<sqlx::Any>,
    {
        // Encoding into the Any driver's buffer only copies the value; it cannot fail for the
        // types bound here (text, integers, null).
        if let Err(e) = self.0.add(value) {
            unreachable!("binding a value failed: {e}");
        }
        self
    }
}

impl Statements {
    /// Statements for a SQLite connection (`one_call`) or a PostgreSQL one.
    pub fn new(one_call: bool) -> Statements {
        Statements {
            one_call,
            calls: Vec::new(),
        }
    }

    /// How many statements were pushed.
    pub fn len(&self) -> usize {
        self.calls.iter().map(|c| c.what.len()).sum()
    }

    /// Whether none was.
    pub fn is_empty(&self) -> bool {
        self.calls.is_empty()
    }

    /// Pushes `{head} VALUES (..), (..) {tail}` with `rows` groups of `cols` placeholders;
    /// `bind` adds the `rows * cols` values in order.
    pub fn values(
        &mut self,
        what: &'static str,
        head: &str,
        rows: usize,
        cols: usize,
        tail: &str,
        bind: impl FnOnce(&mut Binder<'_>),
    ) {
        let call = self.call(rows * cols);
        let first = call.args.len() + 1;
        if !call.sql.is_empty() {
            call.sql.push_str(";\n");
        }
        call.sql.push_str(head);
        call.sql.push_str(" VALUES ");
        call.sql
            .push_str(&crate::audit_log::values_placeholders_from(
                first, rows, cols,
            ));
        if !tail.is_empty() {
            call.sql.push(' ');
            call.sql.push_str(tail);
        }
        call.what.push(what);
        let before = call.args.len();
        bind(&mut Binder(&mut call.args));
        debug_assert_eq!(
            call.args.len() - before,
            rows * cols,
            "{what}: values bound"
        );
    }

    /// Pushes the statement `sql(placeholder)`, whose one argument is `value`.
    pub fn with_one(&mut self, what: &'static str, sql: impl FnOnce(&str) -> String, value: i64) {
        let call = self.call(1);
        let placeholder = format!("${}", call.args.len() + 1);
        if !call.sql.is_empty() {
            call.sql.push_str(";\n");
        }
        call.sql.push_str(&sql(&placeholder));
        call.what.push(what);
        Binder(&mut call.args).bind(value);
    }

    /// Pushes a statement without arguments.
    pub fn plain(&mut self, what: &'static str, sql: &str) {
        let call = self.call(0);
        if !call.sql.is_empty() {
            call.sql.push_str(";\n");
        }
        call.sql.push_str(sql);
        call.what.push(what);
    }

    /// The call the next statement, with `args` arguments, goes into.
    fn call(&mut self, args: usize) -> &mut Call {
        let full = |c: &Call| c.args.len() + args > MAX_ARGS_PER_CALL;
        if !self.one_call || self.calls.last().is_none_or(full) {
            self.calls.push(Call {
                sql: String::new(),
                args: AnyArguments::default(),
                what: Vec::new(),
            });
        }
        self.calls.last_mut().expect("a call was just pushed")
    }

    /// Runs the statements in order on `conn`; stops at the first failing call.
    pub async fn run(self, conn: &mut sqlx::AnyConnection) -> Result<(), Failed> {
        for call in self.calls {
            if let Err(source) = sqlx::query_with(sqlx::AssertSqlSafe(call.sql), call.args)
                .execute(&mut *conn)
                .await
            {
                return Err(Failed {
                    what: call.what.join(", "),
                    source,
                });
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sqlx::Row;

    async fn sqlite() -> sqlx::AnyConnection {
        sqlx::any::install_default_drivers();
        let mut conn = <sqlx::AnyConnection as sqlx::Connection>::connect("sqlite::memory:")
            .await
            .unwrap();
        sqlx::query("CREATE TABLE t (a BIGINT PRIMARY KEY, b TEXT NOT NULL)")
            .execute(&mut conn)
            .await
            .unwrap();
        conn
    }

    async fn rows(conn: &mut sqlx::AnyConnection) -> Vec<(i64, String)> {
        sqlx::query("SELECT a, b FROM t ORDER BY a")
            .fetch_all(conn)
            .await
            .unwrap()
            .iter()
            .map(|r| (r.get("a"), r.get("b")))
            .collect()
    }

    #[tokio::test]
    async fn statements_in_one_call_number_their_arguments_in_order() {
        let mut conn = sqlite().await;
        let mut s = Statements::new(true);
        s.plain("begin", "BEGIN IMMEDIATE");
        s.values("first", "INSERT INTO t (a, b)", 2, 2, "", |b| {
            b.bind(1_i64).bind("one").bind(2_i64).bind("two");
        });
        s.values(
            "second",
            "INSERT INTO t (a, b)",
            1,
            2,
            "ON CONFLICT (a) DO UPDATE SET b = excluded.b",
            |b| {
                b.bind(1_i64).bind("uno");
            },
        );
        s.plain("commit", "COMMIT");
        assert_eq!(s.len(), 4);
        assert_eq!(s.calls.len(), 1, "one call");
        s.run(&mut conn).await.unwrap();
        assert_eq!(
            rows(&mut conn).await,
            vec![(1, "uno".to_string()), (2, "two".to_string())]
        );
    }

    #[tokio::test]
    async fn a_failing_statement_stops_the_call_and_names_what_it_held() {
        let mut conn = sqlite().await;
        let mut s = Statements::new(true);
        s.plain("begin", "BEGIN IMMEDIATE");
        s.values("good", "INSERT INTO t (a, b)", 1, 2, "", |b| {
            b.bind(1_i64).bind("one");
        });
        s.values("duplicate", "INSERT INTO t (a, b)", 1, 2, "", |b| {
            b.bind(1_i64).bind("again");
        });
        s.plain("commit", "COMMIT");
        let err = s.run(&mut conn).await.unwrap_err();
        assert_eq!(err.what, "begin, good, duplicate, commit");
        assert!(err.source.to_string().contains("UNIQUE"), "{}", err.source);
        // The transaction is still open (COMMIT did not run): the caller rolls it back.
        sqlx::query("ROLLBACK").execute(&mut conn).await.unwrap();
        assert!(rows(&mut conn).await.is_empty(), "nothing was committed");
    }

    #[tokio::test]
    async fn one_statement_per_call_numbers_each_from_one() {
        let mut s = Statements::new(false);
        s.values("a", "INSERT INTO t (a, b)", 1, 2, "", |b| {
            b.bind(1_i64).bind("x");
        });
        s.values("b", "INSERT INTO t (a, b)", 2, 2, "", |b| {
            b.bind(2_i64).bind("y").bind(3_i64).bind("z");
        });
        assert_eq!(s.calls.len(), 2);
        assert_eq!(
            s.calls[1].sql,
            "INSERT INTO t (a, b) VALUES ($1, $2), ($3, $4)"
        );
        // SQLite takes `$N` too, so the PostgreSQL grouping runs here as well.
        let mut conn = sqlite().await;
        s.run(&mut conn).await.unwrap();
        assert_eq!(rows(&mut conn).await.len(), 3);
    }
}

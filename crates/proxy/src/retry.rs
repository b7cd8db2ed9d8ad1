//! The one retry policy for every outbound LLM call (upstream, rewriter, translators,
//! Converse): connection errors, 408, 409, 429 and 5xx are retried with exponential backoff
//! and jitter, honouring `Retry-After`, at most `max_retries` times and never past the call's
//! time budget. The request's own deadline bounds it too: the server drops the whole request
//! future when it passes, retries included.

use backon::{ExponentialBuilder, Retryable};
use prometheus_client::metrics::counter::Counter;
use std::future::Future;
use std::time::{Duration, Instant};

/// Whether an HTTP status is worth retrying.
pub fn is_transient_status(status: u16) -> bool {
    matches!(status, 408 | 409 | 429) || (500..=599).contains(&status)
}

/// The delay a `Retry-After` header asks for (seconds, or an HTTP date), capped at `cap`.
pub fn retry_after(headers: &reqwest::header::HeaderMap, cap: Duration) -> Option<Duration> {
    let value = headers.get(reqwest::header::RETRY_AFTER)?.to_str().ok()?;
    let value = value.trim();
    let delay = match value.parse::<f64>() {
        // `try_`: a number of seconds past `Duration`'s range ("1e20") panicked, and with it
        // the request (and, resumed, the thread for ever); it waits the cap instead.
        Ok(secs) if secs.is_finite() && secs >= 0.0 => {
            Duration::try_from_secs_f64(secs).unwrap_or(cap)
        }
        _ => {
            let at = httpdate_to_system_time(value)?;
            at.duration_since(std::time::SystemTime::now())
                .unwrap_or(Duration::ZERO)
        }
    };
    Some(delay.min(cap))
}

/// An HTTP date (`Sun, 06 Nov 1994 08:49:37 GMT`, and the two obsolete forms), the form
/// `Retry-After` and `Date` take; `None` for anything else, absurd years included.
pub(crate) fn httpdate_to_system_time(s: &str) -> Option<std::time::SystemTime> {
    httpdate::parse_http_date(s).ok()
}

/// One failed attempt: whether it may be retried, and how long the server asked to wait.
pub trait Attempt {
    /// Worth another try.
    fn is_transient(&self) -> bool;
    /// The server's `Retry-After`, if it sent one.
    fn retry_after(&self) -> Option<Duration>;
    /// The attempt ran out of time (a retry of it costs more of a [`RetryQuota`]).
    fn is_timeout(&self) -> bool {
        false
    }
}

/// Tokens a retry takes from a [`RetryQuota`], and a retry after a timeout.
const RETRY_COST: u32 = 5;
const TIMEOUT_RETRY_COST: u32 = 10;

/// Retries shared by every call of one client, as in the AWS SDKs' standard retry mode: a retry
/// takes tokens (more after a timeout), a call that succeeds gives back what its retries took
/// (one token when it took none), and while the quota is empty failures are not retried. During
/// an outage the client then sends about one attempt per call instead of `max_retries + 1`.
#[derive(Debug)]
pub struct RetryQuota {
    tokens: std::sync::Mutex<u32>,
    capacity: u32,
}

impl RetryQuota {
    /// A full quota of `capacity` tokens (the SDKs: 500, a hundred retries).
    pub fn new(capacity: u32) -> RetryQuota {
        RetryQuota {
            tokens: std::sync::Mutex::new(capacity),
            capacity,
        }
    }

    /// Tokens left.
    pub fn tokens(&self) -> u32 {
        *self.tokens.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn take(&self, n: u32) -> bool {
        let mut t = self.tokens.lock().unwrap_or_else(|e| e.into_inner());
        let ok = *t >= n;
        if ok {
            *t -= n;
        }
        ok
    }

    fn give(&self, n: u32) {
        let mut t = self.tokens.lock().unwrap_or_else(|e| e.into_inner());
        *t = (*t + n).min(self.capacity);
    }
}

/// How a client retries.
#[derive(Debug, Clone)]
pub struct RetryPolicy {
    /// Retries after the first attempt.
    pub max_retries: u32,
    /// The first backoff.
    pub min_delay: Duration,
    /// The longest single backoff.
    pub max_delay: Duration,
    /// The time all waits together may take.
    pub budget: Duration,
    /// Counts every retry (the `proofgate_llm_retries_total` metric), when set.
    pub counter: Option<Counter>,
    /// Retries shared across calls, when set (see [`RetryQuota`]).
    pub quota: Option<std::sync::Arc<RetryQuota>>,
}

impl RetryPolicy {
    /// The policy for an endpoint: `max_retries`, backoff from 250 ms up to 8 s, all waits
    /// within `timeout`.
    pub fn new(max_retries: u32, timeout: Duration) -> RetryPolicy {
        RetryPolicy {
            max_retries,
            min_delay: Duration::from_millis(250),
            max_delay: Duration::from_secs(8),
            budget: timeout,
            counter: None,
            quota: None,
        }
    }

    /// Runs `call` until it succeeds, fails permanently, or the retries or the budget run out;
    /// the last error is returned.
    pub async fn run<T, E, F, Fut>(&self, what: &str, call: F) -> Result<T, E>
    where
        E: Attempt + std::fmt::Display,
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<T, E>>,
    {
        let started = Instant::now();
        let budget = self.budget;
        let backoff = ExponentialBuilder::default()
            .with_min_delay(self.min_delay)
            .with_max_delay(self.max_delay)
            .with_max_times(self.max_retries as usize)
            .with_jitter();
        let taken = std::sync::atomic::AtomicU32::new(0);
        let quota = self.quota.as_deref();
        let result = call
            .retry(backoff)
            .sleep(tokio::time::sleep)
            .when(|e: &E| e.is_transient())
            .adjust(|e: &E, planned: Option<Duration>| {
                // `None` stops: no retries left, the wait would overrun the budget, or the
                // shared quota is spent.
                let wait = match (planned, e.retry_after()) {
                    (None, _) => return None,
                    (Some(_), Some(asked)) => asked,
                    (Some(p), None) => p,
                };
                if started.elapsed() + wait >= budget {
                    return None;
                }
                if let Some(q) = quota {
                    let cost = if e.is_timeout() {
                        TIMEOUT_RETRY_COST
                    } else {
                        RETRY_COST
                    };
                    if !q.take(cost) {
                        tracing::warn!("{what}: {e}; not retried (the retry quota is spent)");
                        return None;
                    }
                    taken.fetch_add(cost, std::sync::atomic::Ordering::Relaxed);
                }
                Some(wait)
            })
            .notify(|e: &E, wait: Duration| {
                if let Some(c) = &self.counter {
                    c.inc();
                }
                tracing::warn!("{what}: {e}; retrying in {} ms", wait.as_millis());
            })
            .await;
        if let (Some(q), Ok(_)) = (quota, &result) {
            q.give(taken.load(std::sync::atomic::Ordering::Relaxed).max(1));
        }
        result
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicU32, Ordering};

    /// Runs `p` with a call failing (transiently) its first `fail` attempts; the attempts made.
    async fn attempts(p: &RetryPolicy, fail: u32) -> (u32, bool) {
        let calls = AtomicU32::new(0);
        let r: Result<(), Failure> = p
            .run("test", || async {
                if calls.fetch_add(1, Ordering::SeqCst) < fail {
                    Err(Failure(true, None))
                } else {
                    Ok(())
                }
            })
            .await;
        (calls.load(Ordering::SeqCst), r.is_ok())
    }

    #[tokio::test]
    async fn a_shared_quota_stops_retries_when_spent_and_successes_refill_it() {
        let quota = std::sync::Arc::new(RetryQuota::new(10));
        let p = RetryPolicy {
            quota: Some(quota.clone()),
            ..policy(5)
        };
        // An outage: two retries (5 tokens each) empty the quota...
        assert_eq!(attempts(&p, 100).await, (3, false));
        assert_eq!(quota.tokens(), 0);
        // ...after which calls get one attempt, even ones a retry would have saved.
        assert_eq!(attempts(&p, 100).await, (1, false));
        assert_eq!(attempts(&p, 1).await, (1, false));
        // Each success without a retry gives one token back; at five, one retry is allowed.
        for _ in 0..5 {
            assert_eq!(attempts(&p, 0).await, (1, true));
        }
        assert_eq!(quota.tokens(), 5);
        assert_eq!(attempts(&p, 1).await, (2, true));
        // A success after retries gives back what they took.
        assert_eq!(quota.tokens(), 5);
        // The quota never grows past its capacity.
        for _ in 0..20 {
            attempts(&p, 0).await;
        }
        assert_eq!(quota.tokens(), 10);
    }

    #[derive(Debug)]
    struct Failure(bool, Option<Duration>);
    impl std::fmt::Display for Failure {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            write!(f, "failure")
        }
    }
    impl Attempt for Failure {
        fn is_transient(&self) -> bool {
            self.0
        }
        fn retry_after(&self) -> Option<Duration> {
            self.1
        }
    }

    fn policy(n: u32) -> RetryPolicy {
        RetryPolicy {
            min_delay: Duration::from_millis(1),
            max_delay: Duration::from_millis(5),
            counter: Some(Counter::default()),
            ..RetryPolicy::new(n, Duration::from_secs(5))
        }
    }

    #[tokio::test]
    async fn transient_failures_are_retried_and_counted() {
        let calls = AtomicU32::new(0);
        let p = policy(3);
        let r: Result<u32, Failure> = p
            .run("test", || async {
                match calls.fetch_add(1, Ordering::SeqCst) {
                    0 | 1 => Err(Failure(true, None)),
                    n => Ok(n),
                }
            })
            .await;
        assert_eq!(r.unwrap(), 2);
        assert_eq!(p.counter.as_ref().unwrap().get(), 2);
    }

    #[tokio::test]
    async fn permanent_failures_and_exhausted_retries_stop() {
        let calls = AtomicU32::new(0);
        let r: Result<(), Failure> = policy(3)
            .run("test", || async {
                calls.fetch_add(1, Ordering::SeqCst);
                Err(Failure(false, None))
            })
            .await;
        assert!(r.is_err());
        assert_eq!(calls.load(Ordering::SeqCst), 1);
        calls.store(0, Ordering::SeqCst);
        let _ = policy(2)
            .run("test", || async {
                calls.fetch_add(1, Ordering::SeqCst);
                Err::<(), _>(Failure(true, None))
            })
            .await;
        assert_eq!(calls.load(Ordering::SeqCst), 3);
    }

    #[tokio::test]
    async fn retry_after_is_honoured_within_the_budget() {
        let started = Instant::now();
        let calls = AtomicU32::new(0);
        let r: Result<(), Failure> = policy(3)
            .run("test", || async {
                match calls.fetch_add(1, Ordering::SeqCst) {
                    0 => Err(Failure(true, Some(Duration::from_millis(300)))),
                    _ => Ok(()),
                }
            })
            .await;
        assert!(r.is_ok());
        assert!(started.elapsed() >= Duration::from_millis(300));
        // A Retry-After beyond the budget is not waited for.
        let p = RetryPolicy {
            budget: Duration::from_millis(100),
            ..policy(3)
        };
        let started = Instant::now();
        let r: Result<(), Failure> = p
            .run("test", || async {
                Err(Failure(true, Some(Duration::from_secs(30))))
            })
            .await;
        assert!(r.is_err());
        assert!(started.elapsed() < Duration::from_secs(1));
    }

    #[test]
    fn retry_after_reads_seconds_and_dates() {
        let mut h = reqwest::header::HeaderMap::new();
        h.insert(reqwest::header::RETRY_AFTER, "2".parse().unwrap());
        assert_eq!(
            retry_after(&h, Duration::from_secs(60)),
            Some(Duration::from_secs(2))
        );
        h.insert(
            reqwest::header::RETRY_AFTER,
            "Sun, 06 Nov 1994 08:49:37 GMT".parse().unwrap(),
        );
        assert_eq!(
            retry_after(&h, Duration::from_secs(60)),
            Some(Duration::ZERO)
        );
        assert_eq!(
            httpdate_to_system_time("Sun, 06 Nov 1994 08:49:37 GMT"),
            Some(std::time::UNIX_EPOCH + Duration::from_secs(784_111_777))
        );
        assert!(is_transient_status(503) && is_transient_status(429));
        assert!(!is_transient_status(400) && !is_transient_status(404));
    }

    /// A server's absurd `Retry-After` waits the cap, never panics (a number of seconds past
    /// `Duration`'s range panicked the request, and a resumed thread each time it resumed).
    #[test]
    fn an_absurd_retry_after_waits_the_cap() {
        let cap = Duration::from_secs(60);
        for value in [
            "1e20",
            "1.8446744073709552e19",
            "1e308",
            "Sun, 06 Nov 99999999999 08:49:37 GMT",
            "Fri, 31 Dec 9999 23:59:59 GMT",
        ] {
            let mut h = reqwest::header::HeaderMap::new();
            h.insert(reqwest::header::RETRY_AFTER, value.parse().unwrap());
            let got = retry_after(&h, cap);
            assert!(got.is_none() || got == Some(cap), "{value}: {got:?}");
        }
        for value in ["-1", "NaN", "inf", "soon", ""] {
            let mut h = reqwest::header::HeaderMap::new();
            h.insert(reqwest::header::RETRY_AFTER, value.parse().unwrap());
            assert_eq!(retry_after(&h, cap), None, "{value}");
        }
    }
}

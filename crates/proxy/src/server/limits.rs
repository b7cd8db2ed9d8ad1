//! What one request or caller can cost: body size (413), content type of JSON endpoints (415),
//! requests in flight (503) and the places kept from a key holding many (429), requests per
//! minute per key
//! (429), time (504), policy size for the authoring endpoints, and concurrent solver-heavy
//! authoring jobs.

use super::error::ApiError;
use crate::config::LimitsConfig;
use axum::http::{header, HeaderMap, Method, StatusCode};
use axum::response::{IntoResponse, Response};
use governor::clock::{Clock, DefaultClock};
use governor::{DefaultKeyedRateLimiter, Quota, RateLimiter};
use proofgate_core::policy::PolicyDefinition;
use std::collections::HashMap;
use std::num::NonZeroU32;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// The place in flight of the request being served, as a request extension: a handler that
/// leaves work running after its response (a background thread) takes the place over, so the
/// work keeps the request's place instead of needing a second one.
#[derive(Clone, Default)]
pub struct Place(Arc<Mutex<Option<Permit>>>);

impl Place {
    /// A place holding `permit`.
    pub fn new(permit: Permit) -> Place {
        Place(Arc::new(Mutex::new(Some(permit))))
    }

    /// The place's permit, once (`None` when it was taken already).
    pub fn take(&self) -> Option<Permit> {
        self.0.lock().ok().and_then(|mut p| p.take())
    }
}

/// A request's place among those served at once, counted for its key too when it has one;
/// given back when it is dropped.
#[derive(Debug)]
pub struct Permit {
    _server: OwnedSemaphorePermit,
    _key: Option<KeyHold>,
}

/// One place counted among its key's (see [`Limits::admit_for`]).
#[derive(Debug)]
struct KeyHold(Arc<AtomicUsize>);

impl Drop for KeyHold {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

/// A refusal to try again later: 429 or 503 with a `Retry-After` header.
#[derive(Debug)]
pub struct RetryLater {
    /// The error.
    pub error: ApiError,
    /// Seconds to wait (at least 1).
    pub after_secs: u64,
}

impl IntoResponse for RetryLater {
    fn into_response(self) -> Response {
        ApiError::from(self).into_response()
    }
}

impl From<RetryLater> for ApiError {
    fn from(r: RetryLater) -> ApiError {
        ApiError {
            retry_after: Some(r.after_secs.max(1)),
            ..r.error
        }
    }
}

fn retry_later(status: StatusCode, code: &'static str, message: String, secs: u64) -> RetryLater {
    RetryLater {
        error: ApiError::new(status, code, message),
        after_secs: secs.max(1),
    }
}

/// The server's limits and their counters.
pub struct Limits {
    config: LimitsConfig,
    in_flight: Arc<Semaphore>,
    /// Places for requests without a key (public routes), apart: a flood of them from many
    /// addresses must not take the places of keyed requests.
    public_in_flight: Arc<Semaphore>,
    authoring: Arc<Semaphore>,
    rate: DefaultKeyedRateLimiter<String>,
    checks: AtomicU64,
    /// How many places of `in_flight` each key holds, by key.
    held: Mutex<HashMap<String, Arc<AtomicUsize>>>,
}

/// Keys counted before the ones holding no place are forgotten.
const KEYS_COUNTED: usize = 4096;

impl Limits {
    /// Limits as configured.
    pub fn new(config: &LimitsConfig) -> Limits {
        let per_minute = NonZeroU32::new(config.requests_per_minute).unwrap_or(NonZeroU32::MIN);
        // Solver-heavy authoring (lint, tests, gen-tests, diff, formalize): one job per core.
        let cores = std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(2);
        Limits {
            config: config.clone(),
            in_flight: Arc::new(Semaphore::new(config.max_concurrent_requests)),
            public_in_flight: Arc::new(Semaphore::new(config.max_concurrent_requests)),
            authoring: Arc::new(Semaphore::new(cores)),
            rate: RateLimiter::keyed(Quota::per_minute(per_minute)),
            checks: AtomicU64::new(0),
            held: Mutex::new(HashMap::new()),
        }
    }

    /// How many of the places served at once a key that already holds as many cannot take:
    /// they are kept for other keys (0: none). At most half of them: a lone key can hold the
    /// larger of the places kept and the rest, so keeping more than half would let it hold more,
    /// not less.
    pub fn kept_for_other_keys(&self) -> usize {
        let all = self.config.max_concurrent_requests;
        self.config
            .places_kept_for_other_keys
            .unwrap_or(all.div_ceil(8))
            .min(all / 2)
    }

    /// The deadline of one request.
    pub fn deadline(&self) -> Duration {
        Duration::from_millis(self.config.request_timeout_ms)
    }

    /// Largest body.
    pub fn max_body_bytes(&self) -> usize {
        self.config.max_body_bytes
    }

    /// Time a client has to send a request's body once its headers are in: the header time
    /// (`header_timeout_ms`), or the request's deadline when that is off.
    pub fn body_timeout(&self) -> Duration {
        match self.config.header_timeout_ms {
            0 => self.deadline(),
            ms => Duration::from_millis(ms),
        }
    }

    /// Counts one request of `key` against its quota; 429 with `Retry-After` when it is spent.
    pub fn check_rate(&self, key: &str) -> Result<(), RetryLater> {
        self.spend(key).map_err(|wait| self.rate_limited(key, wait))
    }

    /// Counts one request of `key`; how long until its quota has room when it is spent.
    fn spend(&self, key: &str) -> Result<(), Duration> {
        // Forget keys idle long enough to have their whole quota back, now and then.
        if self.checks.fetch_add(1, Ordering::Relaxed) % 1024 == 1023 {
            self.rate.retain_recent();
            self.rate.shrink_to_fit();
        }
        self.rate
            .check_key(&key.to_string())
            .map_err(|not_until| not_until.wait_time_from(DefaultClock::default().now()))
    }

    fn rate_limited(&self, key: &str, wait: Duration) -> RetryLater {
        retry_later(
            StatusCode::TOO_MANY_REQUESTS,
            "rate_limited",
            format!(
                "this {} made more than {} requests in a minute; retry after {} s",
                if key.starts_with("ip:") {
                    "client address"
                } else {
                    "key"
                },
                self.config.requests_per_minute,
                wait.as_secs().max(1)
            ),
            wait.as_secs_f64().ceil() as u64,
        )
    }

    /// A place among the requests in flight, for work no key asked for now (a thread resumed
    /// after a restart); 503 with `Retry-After` when all are taken.
    pub fn admit(&self) -> Result<Permit, RetryLater> {
        Ok(Permit {
            _server: self.admit_to(&self.in_flight)?,
            _key: None,
        })
    }

    /// A place among the requests in flight for a request of `key` (an API key's id, or the
    /// client's address without keys). A key may take any free place, except that a key
    /// already holding `kept_for_other_keys` places does not take the last that many: one
    /// key's slow requests (LLM calls take seconds, threads run in the background keep their
    /// place) cannot take every place and lock the other keys out, while a lone key still has
    /// nearly all of them. 429 with `Retry-After` when the places left are kept from this key,
    /// 503 when the server is full.
    pub fn admit_for(&self, key: &str) -> Result<Permit, RetryLater> {
        let kept = self.kept_for_other_keys();
        if kept == 0 {
            return self.admit();
        }
        // Counted under the lock, so that forgetting the keys that hold nothing never drops
        // a count someone is adding to.
        let mut held = self.held.lock().unwrap_or_else(|e| e.into_inner());
        if held.len() >= KEYS_COUNTED && !held.contains_key(key) {
            held.retain(|_, n| n.load(Ordering::Acquire) > 0);
        }
        // Looked up before inserting: no key string is made for a key already counted.
        let count = match held.get(key) {
            Some(count) => count.clone(),
            None => held.entry(key.to_string()).or_default().clone(),
        };
        let holds = count.load(Ordering::Acquire);
        if holds >= kept && self.in_flight.available_permits() <= kept {
            return Err(retry_later(
                StatusCode::TOO_MANY_REQUESTS,
                "too_many_in_flight",
                format!(
                    "this {} holds {holds} of the {} requests the server serves at once, and \
                     the last {kept} places are kept for others (`[limits] \
                     places_kept_for_other_keys`); retry when one of its requests has ended",
                    if key.starts_with("ip:") {
                        "client address"
                    } else {
                        "key"
                    },
                    self.config.max_concurrent_requests
                ),
                1,
            ));
        }
        let server = self.admit_to(&self.in_flight)?;
        count.fetch_add(1, Ordering::AcqRel);
        Ok(Permit {
            _server: server,
            _key: Some(KeyHold(count)),
        })
    }

    /// A place among the public requests in flight (as many as keyed ones, counted apart).
    pub fn admit_public(&self) -> Result<OwnedSemaphorePermit, RetryLater> {
        self.admit_to(&self.public_in_flight)
    }

    fn admit_to(&self, places: &Arc<Semaphore>) -> Result<OwnedSemaphorePermit, RetryLater> {
        places.clone().try_acquire_owned().map_err(|_| {
            retry_later(
                StatusCode::SERVICE_UNAVAILABLE,
                "overloaded",
                format!(
                    "the server is serving its limit of {} requests at once; retry shortly",
                    self.config.max_concurrent_requests
                ),
                1,
            )
        })
    }

    /// A place for a solver-heavy authoring job, when `path` is one; 503 when all are taken.
    pub fn admit_authoring(
        &self,
        method: &Method,
        path: &str,
    ) -> Result<Option<OwnedSemaphorePermit>, RetryLater> {
        if method != Method::POST || !path.starts_with("/api/policies/") {
            return Ok(None);
        }
        self.authoring
            .clone()
            .try_acquire_owned()
            .map(Some)
            .map_err(|_| {
                retry_later(
                    StatusCode::SERVICE_UNAVAILABLE,
                    "overloaded",
                    "every solver is busy with policy authoring jobs; retry shortly".into(),
                    2,
                )
            })
    }

    /// A request body's headers: JSON endpoints take `application/json` only (so a browser
    /// cannot send them a "simple" cross-site request), and no declared body above the limit.
    pub fn check_body(&self, method: &Method, headers: &HeaderMap) -> Result<(), ApiError> {
        if let Some(len) = headers
            .get(header::CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.parse::<u64>().ok())
        {
            if len > self.config.max_body_bytes as u64 {
                return Err(too_large(self.config.max_body_bytes));
            }
        }
        let has_body = matches!(*method, Method::POST | Method::PUT | Method::PATCH);
        if has_body && !is_json(headers) {
            return Err(ApiError::new(
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
                "unsupported_media_type",
                "send the body as JSON with `content-type: application/json`",
            ));
        }
        Ok(())
    }
}

/// A policy uploaded to an authoring endpoint, within the configured size (`what` names it in
/// the error: `policy`, `old`, `new`).
pub fn check_policy(c: &LimitsConfig, what: &str, p: &PolicyDefinition) -> Result<(), ApiError> {
    {
        for (count, limit, name) in [
            (p.rules.len(), c.max_policy_rules, "rules"),
            (p.variables.len(), c.max_policy_variables, "variables"),
            (p.types.len(), c.max_policy_types, "types"),
        ] {
            if count > limit {
                return Err(ApiError::new(
                    StatusCode::PAYLOAD_TOO_LARGE,
                    "policy_too_large",
                    format!("{what} has {count} {name}; this server accepts at most {limit} (limits.max_policy_{name})"),
                ));
            }
        }
    }
    Ok(())
}

/// 413 for a body above `max` bytes.
pub fn too_large(max: usize) -> ApiError {
    ApiError::new(
        StatusCode::PAYLOAD_TOO_LARGE,
        "body_too_large",
        format!("the request body is larger than this server's limit of {max} bytes (limits.max_body_bytes)"),
    )
}

/// 408: the body did not arrive in time.
pub fn body_too_slow(limit: Duration) -> ApiError {
    ApiError::new(
        StatusCode::REQUEST_TIMEOUT,
        "body_timeout",
        format!(
            "the request body did not arrive within this server's limit of {} ms (limits.header_timeout_ms)",
            limit.as_millis()
        ),
    )
}

/// 504 for a request past its deadline.
pub fn deadline_exceeded(deadline: Duration) -> ApiError {
    ApiError::new(
        StatusCode::GATEWAY_TIMEOUT,
        "deadline_exceeded",
        format!(
            "the request took longer than this server's limit of {} ms (limits.request_timeout_ms); its work was stopped",
            deadline.as_millis()
        ),
    )
}

fn is_json(headers: &HeaderMap) -> bool {
    headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .is_some_and(|m| m.trim().eq_ignore_ascii_case("application/json"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits(per_minute: u32, in_flight: usize) -> Limits {
        Limits::new(&LimitsConfig {
            requests_per_minute: per_minute,
            max_concurrent_requests: in_flight,
            ..LimitsConfig::default()
        })
    }

    /// Public reads (the audit material) have places of their own: a flood of them cannot
    /// take the keyed requests' places, nor the reverse.
    #[test]
    fn public_and_keyed_requests_are_counted_apart() {
        let l = limits(1000, 3);
        let public: Vec<_> = (0..3).map(|_| l.admit_public().unwrap()).collect();
        assert!(l.admit_public().is_err(), "the public places are all taken");
        let keyed: Vec<_> = (0..3)
            .map(|k| l.admit_for(&format!("k{k}")).unwrap())
            .collect();
        assert!(l.admit_for("k9").is_err(), "the keyed places are all taken");
        drop(public);
        assert!(
            l.admit_public().is_ok(),
            "keyed requests do not hold public places"
        );
        drop(keyed);
    }

    /// Solver-heavy authoring takes one place per core, then 503; other routes take none.
    #[test]
    fn authoring_jobs_beyond_one_per_core_are_refused() {
        let l = limits(1000, 64);
        let cores = std::thread::available_parallelism().map_or(2, |n| n.get());
        let held: Vec<_> = (0..cores)
            .map(|_| {
                l.admit_authoring(&Method::POST, "/api/policies/lint")
                    .unwrap()
            })
            .collect();
        assert!(held.iter().all(Option::is_some));
        let refused = l
            .admit_authoring(&Method::POST, "/api/policies/test")
            .unwrap_err()
            .into_response();
        assert_eq!(refused.status(), StatusCode::SERVICE_UNAVAILABLE);
        assert!(refused.headers().contains_key(header::RETRY_AFTER));
        assert!(matches!(
            l.admit_authoring(&Method::GET, "/api/policies"),
            Ok(None)
        ));
        assert!(matches!(
            l.admit_authoring(&Method::POST, "/v1/chat/completions"),
            Ok(None)
        ));
    }

    #[test]
    fn rate_is_counted_per_key_with_retry_after() {
        let l = limits(3, 10);
        for _ in 0..3 {
            assert!(l.check_rate("a").is_ok());
        }
        let refused = l.check_rate("a").unwrap_err().into_response();
        assert_eq!(refused.status(), StatusCode::TOO_MANY_REQUESTS);
        let after: u64 = refused.headers()[header::RETRY_AFTER]
            .to_str()
            .unwrap()
            .parse()
            .unwrap();
        assert!((1..=20).contains(&after), "{after}");
        assert!(l.check_rate("b").is_ok(), "another key has its own quota");
    }

    #[test]
    fn a_key_holding_many_places_leaves_the_last_ones_to_other_keys() {
        let l = limits(100, 8);
        assert_eq!(
            l.kept_for_other_keys(),
            1,
            "an eighth of the places by default"
        );
        let mut a: Vec<_> = (0..7).map(|_| l.admit_for("a").unwrap()).collect();
        let refused = l.admit_for("a").unwrap_err();
        assert_eq!(refused.error.status, StatusCode::TOO_MANY_REQUESTS);
        assert_eq!(refused.error.code, "too_many_in_flight");
        assert!(
            refused.error.message.contains("places_kept_for_other_keys"),
            "{}",
            refused.error.message
        );
        // Another key takes the place kept; then the server is full for everyone.
        let _b = l.admit_for("b").unwrap();
        let full = l.admit_for("c").unwrap_err();
        assert_eq!(full.error.status, StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(
            l.admit_for("a").unwrap_err().error.status,
            StatusCode::TOO_MANY_REQUESTS
        );
        // One of a's ends: the place freed is the last one, kept from a, open to c.
        a.pop();
        assert_eq!(
            l.admit_for("a").unwrap_err().error.status,
            StatusCode::TOO_MANY_REQUESTS
        );
        let _c = l.admit_for("c").unwrap();
        drop(a);
        assert!(l.admit_for("a").is_ok(), "a's count follows its places");
    }

    #[test]
    fn the_places_kept_are_set_turned_off_and_keys_holding_none_forgotten() {
        let with = |kept: Option<usize>| {
            Limits::new(&LimitsConfig {
                max_concurrent_requests: 64,
                places_kept_for_other_keys: kept,
                ..LimitsConfig::default()
            })
        };
        let l = with(None);
        assert_eq!(l.kept_for_other_keys(), 8);
        let lone: Vec<_> = (0..56).map(|_| l.admit_for("a").unwrap()).collect();
        assert!(
            l.admit_for("a").is_err(),
            "a lone key has all but the kept places"
        );
        drop(lone);
        let l = with(Some(0));
        let all: Vec<_> = (0..64).map(|_| l.admit_for("a").unwrap()).collect();
        assert_eq!(all.len(), 64, "0: one key may take every place");
        assert_eq!(with(Some(1000)).kept_for_other_keys(), 32, "at most half");
        let l = with(Some(20));
        let held: Vec<_> = (0..44).map(|_| l.admit_for("a").unwrap()).collect();
        assert!(
            l.admit_for("a").is_err(),
            "a lone key holds all but the 20 kept"
        );
        // Many keys come and go: those holding nothing are forgotten, a holder is not.
        for i in 0..2 * KEYS_COUNTED {
            drop(l.admit_for(&format!("k{i}")).unwrap());
        }
        assert!(l.held.lock().unwrap().len() <= KEYS_COUNTED + 1);
        assert!(
            l.admit_for("a").is_err(),
            "a's count was kept while it held places"
        );
        drop(held);
        assert!(l.admit_for("a").is_ok());
    }

    #[test]
    fn requests_in_flight_are_bounded() {
        let l = limits(100, 2);
        let a = l.admit().unwrap();
        let _b = l.admit().unwrap();
        let refused = l.admit().unwrap_err().into_response();
        assert_eq!(refused.status(), StatusCode::SERVICE_UNAVAILABLE);
        assert!(refused.headers().contains_key(header::RETRY_AFTER));
        drop(a);
        assert!(l.admit().is_ok());
    }

    #[test]
    fn bodies_must_be_json_and_small() {
        let l = limits(100, 2);
        let mut h = HeaderMap::new();
        h.insert(header::CONTENT_TYPE, "text/plain".parse().unwrap());
        let e = l.check_body(&Method::POST, &h).unwrap_err();
        assert_eq!(e.status, StatusCode::UNSUPPORTED_MEDIA_TYPE);
        assert!(l.check_body(&Method::GET, &h).is_ok());
        h.insert(
            header::CONTENT_TYPE,
            "Application/JSON; charset=utf-8".parse().unwrap(),
        );
        assert!(l.check_body(&Method::POST, &h).is_ok());
        h.insert(header::CONTENT_LENGTH, "8388608".parse().unwrap());
        assert_eq!(
            l.check_body(&Method::POST, &h).unwrap_err().status,
            StatusCode::PAYLOAD_TOO_LARGE
        );
    }

    #[test]
    fn policies_above_the_limits_are_refused_by_what_is_too_many() {
        let l = LimitsConfig {
            max_policy_rules: 1,
            ..LimitsConfig::default()
        };
        let p: PolicyDefinition = serde_json::from_value(serde_json::json!({
            "variables": [{"name": "a", "type": "BOOL", "description": "a"}],
            "rules": [{"id": "R1", "expression": "a"}, {"id": "R2", "expression": "(not a)"}]
        }))
        .unwrap();
        let e = check_policy(&l, "policy", &p).unwrap_err();
        assert_eq!(e.code, "policy_too_large");
        assert!(e.message.contains("2 rules"), "{}", e.message);
    }
}

//! Amazon Bedrock ApplyGuardrail as a validator: one SigV4-signed HTTP call per check.
//!
//! The request goes out on the same HTTP client stack as every LLM call (reqwest, pooled
//! keep-alive connections), signed by the AWS SDK's own signer (`aws-sigv4`) with credentials
//! from the SDK's standard chain (environment, profile, SSO, IMDS, ...), cached until shortly
//! before they expire. The endpoint is resolved once, at start, by the SDK's own endpoint rules
//! (partitions, FIPS, dual-stack, an endpoint override), and the path labels are encoded by the
//! SDK's own encoder. Why not the SDK client itself: its orchestrator (interceptors, config
//! layers, runtime plugins, typed deserialization of a response read again here anyway) cost
//! a fifth of the proxy's CPU per request, four times the plain HTTP call to the upstream.
//!
//! Retries are the proxy's one retry policy (`crate::retry`): throttling, 408 and 5xx answers,
//! timeouts and connection errors, with exponential backoff and jitter, honouring
//! `Retry-After`, bounded by `max_attempts`, a time budget and a quota of retries shared by
//! every call (the SDK's standard mode: during an outage, about one attempt per call). Expired
//! credentials are dropped and fetched again before the next attempt, and requests are signed
//! at the service's time (its clock minus this host's, from each response's `Date`), as the
//! SDK's client does. The findings are read from the raw response body with the core's own
//! AWS-shaped types, so a finding kind newer than this code survives as an explicit unknown
//! finding (never VALID) instead of being flattened away.

use crate::config::BedrockGuardrailConfig;
use crate::http_body::{read_bounded, truncate, BodyError, MAX_ANSWER_BYTES};
use crate::retry::{Attempt, RetryPolicy};
use aws_credential_types::provider::{ProvideCredentials, SharedCredentialsProvider};
use aws_credential_types::Credentials;
use aws_sdk_bedrockruntime::config::endpoint::{DefaultResolver, Params, ResolveEndpoint};
use aws_sigv4::http_request::{sign, SignableBody, SignableRequest, SigningSettings};
use aws_smithy_http::label::{fmt_string, EncodingStrategy};
use aws_smithy_runtime_api::client::identity::Identity;
use proofgate_core::guardrail_response::{read_guardrail_response, GuardrailReading};
use proofgate_core::Finding;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

/// The SigV4 signing name of Bedrock's runtime API (`bedrock-runtime` is only its host name).
const SIGNING_NAME: &str = "bedrock";
/// The most of an error's code or message kept in this proxy's errors.
const MAX_ERROR_CHARS: usize = 300;
/// Credentials this close to their expiry are fetched again before use.
const REFRESH_BEFORE_EXPIRY: Duration = Duration::from_secs(300);
/// Connecting to the endpoint (the SDK's default connect timeout).
const CONNECT_TIMEOUT: Duration = Duration::from_millis(3100);
/// All waits between attempts together.
const RETRY_BUDGET: Duration = Duration::from_secs(60);

/// A guardrail call that failed.
#[derive(Debug, thiserror::Error)]
pub enum GuardrailError {
    /// The service could not be reached, refused the call, or kept failing after the retries.
    #[error("Bedrock ApplyGuardrail ({guardrail}) is unavailable: {reason}")]
    Unavailable {
        /// Guardrail id and version.
        guardrail: String,
        /// What happened: the service's error code and message, or the connection's error.
        reason: String,
    },
    /// The response could not be read as an ApplyGuardrail response.
    #[error("Bedrock ApplyGuardrail ({guardrail}) returned an unreadable response: {reason}")]
    BadResponse {
        /// Guardrail id and version.
        guardrail: String,
        /// What was wrong.
        reason: String,
    },
    /// The guardrail blocked the answer: `action` is GUARDRAIL_INTERVENED, which only its other
    /// policies do (Automated Reasoning checks only detect). Not a failure: the thread ends with
    /// no answer, fail-open or not.
    #[error("Bedrock ApplyGuardrail ({guardrail}) blocked the answer: {reason}")]
    Intervened {
        /// Guardrail id and version.
        guardrail: String,
        /// Which policies intervened.
        reason: String,
    },
    /// The configuration cannot work (no region, an endpoint the rules refuse, no credentials
    /// provider).
    #[error("Bedrock ApplyGuardrail ({guardrail}) is misconfigured: {reason}")]
    Misconfigured {
        /// Guardrail id and version.
        guardrail: String,
        /// What is missing or wrong.
        reason: String,
    },
}

/// One failed attempt, before the retry policy decides.
#[derive(Debug)]
struct Failure {
    reason: String,
    transient: bool,
    /// The attempt ran out of time.
    timeout: bool,
    retry_after: Option<Duration>,
    /// The answer was a bad response body, not a failed call.
    bad_response: bool,
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.reason)
    }
}

impl Attempt for Failure {
    fn is_transient(&self) -> bool {
        self.transient
    }
    fn retry_after(&self) -> Option<Duration> {
        self.retry_after
    }
    fn is_timeout(&self) -> bool {
        self.timeout
    }
}

impl Failure {
    fn permanent(reason: String) -> Failure {
        Failure {
            reason,
            transient: false,
            timeout: false,
            retry_after: None,
            bad_response: false,
        }
    }
}

/// AWS error codes worth another attempt whatever their status (the SDK's standard retry
/// mode treats these as throttling or transient).
fn is_transient_code(code: &str) -> bool {
    matches!(
        code,
        "ThrottlingException"
            | "Throttling"
            | "ThrottledException"
            | "TooManyRequestsException"
            | "ProvisionedThroughputExceededException"
            | "TransactionInProgressException"
            | "RequestLimitExceeded"
            | "BandwidthLimitExceeded"
            | "LimitExceededException"
            | "RequestThrottled"
            | "SlowDown"
            | "PriorRequestNotComplete"
            | "EC2ThrottledException"
            | "ServiceUnavailableException"
            | "InternalServerException"
            | "ModelNotReadyException"
            | "RequestTimeout"
            | "RequestTimeoutException"
    )
}

/// Error codes that mean the credentials expired between fetching and signing.
fn is_expired_credentials(code: &str) -> bool {
    matches!(code, "ExpiredToken" | "ExpiredTokenException")
}

/// An AWS JSON error: its code (from `x-amzn-errortype` or `__type`, without the namespace or
/// the trailing `:url`) and message.
fn error_code_and_message(headers: &reqwest::header::HeaderMap, body: &[u8]) -> (String, String) {
    // An error body is parsed only when it is of an error's size: a long one (up to the
    // answer bound) parsed into a tree could take a GB.
    let parsed: Option<serde_json::Value> = (body.len() <= 64 << 10)
        .then(|| serde_json::from_slice(body).ok())
        .flatten();
    let field = |names: &[&str]| {
        parsed.as_ref().and_then(|v| {
            names
                .iter()
                .find_map(|n| v.get(*n).and_then(|m| m.as_str()).map(str::to_string))
        })
    };
    let raw_code = headers
        .get("x-amzn-errortype")
        .and_then(|v| v.to_str().ok())
        .map(str::to_string)
        .or_else(|| field(&["__type", "code"]))
        .unwrap_or_default();
    let code = raw_code.split(':').next().unwrap_or_default();
    let code = code.rsplit('#').next().unwrap_or_default().to_string();
    // Not AWS's JSON shape (a proxy's HTML page, say): an excerpt of what came. Either way
    // bounded: it goes into an error the API's client and the log see.
    let message = field(&["message", "Message"]).unwrap_or_else(|| {
        String::from_utf8_lossy(&body[..body.len().min(4 * MAX_ERROR_CHARS)]).into_owned()
    });
    let code = truncate(&code, MAX_ERROR_CHARS).to_string();
    let message = truncate(&message, MAX_ERROR_CHARS).to_string();
    (code, message)
}

/// Credentials from a provider, kept until shortly before they expire.
struct CredentialsCache {
    provider: Option<SharedCredentialsProvider>,
    current: Mutex<Option<Credentials>>,
    /// One fetch at a time: concurrent requests wait for it instead of each asking the provider
    /// (IMDS, STS) for the same credentials.
    fetching: tokio::sync::Mutex<()>,
}

impl CredentialsCache {
    fn usable(&self) -> Option<Credentials> {
        let current = self.current.lock().ok()?;
        let c = current.as_ref()?;
        match c.expiry() {
            Some(at) if at <= SystemTime::now() + REFRESH_BEFORE_EXPIRY => None,
            _ => Some(c.clone()),
        }
    }

    async fn get(&self) -> Result<Credentials, String> {
        if let Some(c) = self.usable() {
            return Ok(c);
        }
        let _one = self.fetching.lock().await;
        if let Some(c) = self.usable() {
            return Ok(c);
        }
        let provider = self.provider.as_ref().ok_or(
            "no AWS credentials provider (set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, a \
             profile, or run with an instance or task role)",
        )?;
        let c = provider
            .provide_credentials()
            .await
            .map_err(|e| format!("loading AWS credentials: {}", DisplayChain(&e)))?;
        if let Ok(mut current) = self.current.lock() {
            *current = Some(c.clone());
        }
        Ok(c)
    }

    fn forget(&self) {
        if let Ok(mut current) = self.current.lock() {
            *current = None;
        }
    }
}

/// An error with its sources, `a: b: c`.
struct DisplayChain<'a>(&'a dyn std::error::Error);

impl std::fmt::Display for DisplayChain<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.0)?;
        let mut source = self.0.source();
        while let Some(s) = source {
            write!(f, ": {s}")?;
            source = s.source();
        }
        Ok(())
    }
}

struct Inner {
    http: crate::per_loop::PerLoop<reqwest::Client>,
    /// `https://bedrock-runtime.{region}.amazonaws.com/guardrail/{id}/version/{v}/apply`, or
    /// its FIPS, dual-stack, other-partition or overridden form.
    url: reqwest::Url,
    /// `Host` as signed (with the port when it is not the scheme's).
    host: String,
    region: String,
    credentials: CredentialsCache,
    /// The service's clock minus this host's, in ms, from the last response's `Date`: requests
    /// are signed at the service's time, so a host clock minutes off (AWS refuses signatures
    /// more than 5 minutes from its own) costs one refused call, as with the SDK's client.
    skew_ms: AtomicI64,
    retry: RetryPolicy,
    config: BedrockGuardrailConfig,
}

/// A configured guardrail.
#[derive(Clone)]
pub struct BedrockGuardrail {
    inner: Arc<Inner>,
}

impl BedrockGuardrail {
    /// Loads AWS credentials and region the standard way (environment, profile, IMDS) and
    /// applies the configured region, endpoint override and bound on attempts.
    pub async fn new(config: BedrockGuardrailConfig) -> Result<Self, GuardrailError> {
        let sdk = crate::bedrock::sdk_config(
            config.region.as_deref(),
            config.endpoint_url.as_deref(),
            config.max_attempts,
        )
        .await;
        Self::with_sdk_config(config, &sdk).await
    }

    /// As [`BedrockGuardrail::new`], with the region, credentials provider, endpoint override
    /// and FIPS/dual-stack choices of `sdk` (the configuration's region and endpoint URL, when
    /// set, come first).
    pub async fn with_sdk_config(
        config: BedrockGuardrailConfig,
        sdk: &aws_config::SdkConfig,
    ) -> Result<Self, GuardrailError> {
        let misconfigured = |reason: String| GuardrailError::Misconfigured {
            guardrail: name(&config),
            reason,
        };
        let region = config
            .region
            .clone()
            .or_else(|| sdk.region().map(|r| r.to_string()))
            .ok_or_else(|| {
                misconfigured(
                    "no AWS region: set validator.bedrock.region, AWS_REGION or a profile's region"
                        .into(),
                )
            })?;
        let mut params = Params::builder()
            .region(region.clone())
            .use_fips(sdk.use_fips().unwrap_or(false))
            .use_dual_stack(sdk.use_dual_stack().unwrap_or(false));
        if let Some(url) = config.endpoint_url.as_deref().or(sdk.endpoint_url()) {
            params = params.endpoint(url);
        }
        let params = params
            .build()
            .map_err(|e| misconfigured(format!("endpoint parameters: {e}")))?;
        let endpoint = DefaultResolver::new()
            .resolve_endpoint(&params)
            .await
            .map_err(|e| misconfigured(format!("resolving the endpoint: {e}")))?;
        let url = apply_url(
            endpoint.url(),
            &config.guardrail_id,
            &config.guardrail_version,
        )
        .map_err(misconfigured)?;
        let host = match (url.host_str(), url.port()) {
            (Some(h), Some(p)) => format!("{h}:{p}"),
            (Some(h), None) => h.to_string(),
            (None, _) => return Err(misconfigured(format!("endpoint {url} has no host"))),
        };
        let http = crate::per_loop::PerLoop::try_new(|| {
            reqwest::Client::builder()
                .connect_timeout(CONNECT_TIMEOUT)
                .timeout(Duration::from_millis(config.timeout_ms.max(1)))
                // Not followed: a redirect would resend the content, signed, elsewhere.
                .redirect(reqwest::redirect::Policy::none())
                .user_agent(concat!("proofgate/", env!("CARGO_PKG_VERSION")))
                .build()
        })
        .map_err(|e| misconfigured(format!("HTTP client: {e}")))?;
        let retry = RetryPolicy {
            min_delay: Duration::from_millis(100),
            max_delay: Duration::from_secs(5),
            // The SDK's standard mode: 500 tokens, a hundred retries, shared by every call.
            quota: Some(Arc::new(crate::retry::RetryQuota::new(500))),
            ..RetryPolicy::new(config.max_attempts.max(1) - 1, RETRY_BUDGET)
        };
        Ok(BedrockGuardrail {
            inner: Arc::new(Inner {
                http,
                url,
                host,
                region,
                credentials: CredentialsCache {
                    provider: sdk.credentials_provider(),
                    current: Mutex::new(None),
                    fetching: tokio::sync::Mutex::new(()),
                },
                skew_ms: AtomicI64::new(0),
                retry,
                config,
            }),
        })
    }

    /// `{guardrailId, guardrailVersion}` for audit evidence.
    pub fn describe(&self) -> serde_json::Value {
        serde_json::json!({
            "guardrailId": self.inner.config.guardrail_id,
            "guardrailVersion": self.inner.config.guardrail_version,
        })
    }

    /// The URL ApplyGuardrail calls go to.
    pub fn url(&self) -> &str {
        self.inner.url.as_str()
    }

    /// Validates a question/answer pair: the question is tagged `query`, the answer
    /// `guard_content`. Returns the findings of every assessment and the raw response.
    pub async fn validate(
        &self,
        question: &str,
        answer: &str,
    ) -> Result<(Vec<Finding>, serde_json::Value), GuardrailError> {
        let body = serde_json::to_vec(&serde_json::json!({
            "source": "OUTPUT",
            "content": [
                {"text": {"text": question, "qualifiers": ["query"]}},
                {"text": {"text": answer, "qualifiers": ["guard_content"]}},
            ],
        }))
        .expect("a JSON object serializes");
        let inner = &self.inner;
        let bytes = inner
            .retry
            .run("Bedrock ApplyGuardrail", || self.attempt(body.clone()))
            .await
            .map_err(|f| {
                let guardrail = name(&inner.config);
                if f.bad_response {
                    GuardrailError::BadResponse {
                        guardrail,
                        reason: f.reason,
                    }
                } else {
                    GuardrailError::Unavailable {
                        guardrail,
                        reason: f.reason,
                    }
                }
            })?;
        let bad = |reason: String| GuardrailError::BadResponse {
            guardrail: name(&inner.config),
            reason,
        };
        crate::http_body::within_values(&bytes, crate::http_body::MAX_ANSWER_VALUES).map_err(
            |n| {
                bad(format!(
                    "the response holds more than {} JSON values ({n} read)",
                    crate::http_body::MAX_ANSWER_VALUES
                ))
            },
        )?;
        let body: serde_json::Value =
            serde_json::from_slice(&bytes).map_err(|e| bad(format!("not JSON: {e}")))?;
        // Read from the tree in place: the tree itself is kept as evidence.
        // Read by the core, as an app driving the npm package's loop reads it.
        match read_guardrail_response(&body, answer, &inner.config.policy_arns).map_err(bad)? {
            GuardrailReading::Blocked(reason) => Err(GuardrailError::Intervened {
                guardrail: name(&inner.config),
                reason,
            }),
            GuardrailReading::Findings(findings) => Ok((findings, body)),
        }
    }

    /// One signed POST; the response body when the service answered 2xx.
    async fn attempt(&self, body: Vec<u8>) -> Result<Vec<u8>, Failure> {
        let inner = &self.inner;
        let credentials = inner.credentials.get().await.map_err(Failure::permanent)?;
        let signed = self
            .signed_headers(credentials, &body)
            .map_err(Failure::permanent)?;
        let mut request = inner
            .http
            .get()
            .post(inner.url.clone())
            .header(reqwest::header::HOST, &inner.host)
            .header(reqwest::header::CONTENT_TYPE, "application/json");
        for (name, value) in signed {
            request = request.header(name, value);
        }
        let response = request.body(body).send().await.map_err(|e| Failure {
            timeout: e.is_timeout(),
            reason: if e.is_timeout() {
                // What the operator can change, rather than reqwest's nested wording.
                format!(
                    "timed out after {} ms (validator.bedrock.timeout_ms)",
                    inner.config.timeout_ms
                )
            } else {
                DisplayChain(&e).to_string()
            },
            // Connection refused or reset, a timeout: worth another attempt.
            transient: true,
            retry_after: None,
            bad_response: false,
        })?;
        let status = response.status();
        let headers = response.headers().clone();
        let skew_before = inner.skew_ms.load(Ordering::Relaxed);
        if let Some(skew) = clock_skew_ms(&headers, SystemTime::now()) {
            inner.skew_ms.store(skew, Ordering::Relaxed);
        }
        let bytes = read_bounded(response, MAX_ANSWER_BYTES)
            .await
            .map_err(|e| Failure {
                timeout: matches!(&e, BodyError::Read(e) if e.is_timeout()),
                transient: matches!(e, BodyError::Read(_)),
                bad_response: matches!(e, BodyError::TooLarge(_)),
                reason: match &e {
                    BodyError::Read(inner) => {
                        format!("reading the response: {}", DisplayChain(inner))
                    }
                    BodyError::TooLarge(_) => e.to_string(),
                },
                retry_after: None,
            })?;
        if status.is_success() {
            return Ok(bytes);
        }
        let (code, message) = error_code_and_message(&headers, &bytes);
        let expired = is_expired_credentials(&code);
        if expired {
            inner.credentials.forget();
        }
        // Refused for the time it was signed at, and this answer's `Date` moved the measured
        // skew by over a minute: a retry is signed at the corrected time. (A refusal with no
        // new skew would only be refused again.)
        let skewed = is_clock_skew(&code, &message)
            && (inner.skew_ms.load(Ordering::Relaxed) - skew_before).abs() > 60_000;
        let transient = expired
            || skewed
            || crate::retry::is_transient_status(status.as_u16())
            || is_transient_code(&code);
        let request_id = headers
            .get("x-amzn-requestid")
            .and_then(|v| v.to_str().ok());
        Err(Failure {
            timeout: false,
            reason: refusal(status, &code, &message, request_id),
            transient,
            retry_after: crate::retry::retry_after(&headers, Duration::from_secs(20)),
            bad_response: false,
        })
    }

    /// The SigV4 headers (`authorization`, `x-amz-date`, and `x-amz-security-token` with
    /// temporary credentials) for a POST of `body` to the guardrail's URL, signed now.
    fn signed_headers(
        &self,
        credentials: Credentials,
        body: &[u8],
    ) -> Result<Vec<(&'static str, String)>, String> {
        let inner = &self.inner;
        let identity = Identity::from(credentials);
        let params = aws_sigv4::sign::v4::SigningParams::builder()
            .identity(&identity)
            .region(&inner.region)
            .name(SIGNING_NAME)
            .time(service_time(
                SystemTime::now(),
                inner.skew_ms.load(Ordering::Relaxed),
            ))
            .settings(SigningSettings::default())
            .build()
            .map_err(|e| format!("signing: {e}"))?
            .into();
        let headers = [
            ("host", inner.host.as_str()),
            ("content-type", "application/json"),
        ];
        let request = SignableRequest::new(
            "POST",
            inner.url.as_str(),
            headers.into_iter(),
            SignableBody::Bytes(body),
        )
        .map_err(|e| format!("signing: {e}"))?;
        let (instructions, _) = sign(request, &params)
            .map_err(|e| format!("signing: {e}"))?
            .into_parts();
        let (signed, _) = instructions.into_parts();
        Ok(signed
            .into_iter()
            .map(|h| (h.name(), h.value().to_string()))
            .collect())
    }
}

/// `HTTP 503 Service Unavailable, ThrottlingException: Rate exceeded (request id R)`, without
/// the parts an answer did not have. The request id is what AWS support asks for.
fn refusal(
    status: reqwest::StatusCode,
    code: &str,
    message: &str,
    request_id: Option<&str>,
) -> String {
    let message = message.trim();
    let mut out = format!("HTTP {status}");
    match (code.is_empty(), message.is_empty()) {
        (true, true) => {}
        (true, false) => out.push_str(&format!(", {message}")),
        (false, true) => out.push_str(&format!(", {code}")),
        (false, false) => out.push_str(&format!(", {code}: {message}")),
    }
    if let Some(id) = request_id {
        out.push_str(&format!(" (request id {id})"));
    }
    out
}

/// The service's clock minus `now`, in ms, from a response's `Date` header.
fn clock_skew_ms(headers: &reqwest::header::HeaderMap, now: SystemTime) -> Option<i64> {
    let date = headers.get(reqwest::header::DATE)?.to_str().ok()?;
    let server = crate::retry::httpdate_to_system_time(date.trim())?;
    Some(match server.duration_since(now) {
        Ok(ahead) => i64::try_from(ahead.as_millis()).ok()?,
        Err(behind) => -i64::try_from(behind.duration().as_millis()).ok()?,
    })
}

/// `now` on the service's clock.
fn service_time(now: SystemTime, skew_ms: i64) -> SystemTime {
    let by = Duration::from_millis(skew_ms.unsigned_abs());
    if skew_ms >= 0 {
        now + by
    } else {
        now - by
    }
}

/// An answer that refuses a request for the time it was signed at.
fn is_clock_skew(code: &str, message: &str) -> bool {
    matches!(
        code,
        "RequestTimeTooSkewed" | "RequestExpired" | "RequestInTheFuture"
    ) || (code == "InvalidSignatureException"
        && (message.contains("Signature expired") || message.contains("Signature not yet current")))
}

fn name(config: &BedrockGuardrailConfig) -> String {
    format!(
        "{} version {}",
        config.guardrail_id, config.guardrail_version
    )
}

/// The ApplyGuardrail URL under `endpoint`, its labels encoded as the SDK encodes them (an ARN's
/// `:` and `/` percent-encoded).
fn apply_url(endpoint: &str, id: &str, version: &str) -> Result<reqwest::Url, String> {
    let id = fmt_string(id, EncodingStrategy::Default);
    let version = fmt_string(version, EncodingStrategy::Default);
    let url = format!(
        "{}/guardrail/{id}/version/{version}/apply",
        endpoint.trim_end_matches('/')
    );
    reqwest::Url::parse(&url).map_err(|e| format!("endpoint {endpoint}: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(id: &str) -> BedrockGuardrailConfig {
        BedrockGuardrailConfig {
            guardrail_id: id.into(),
            guardrail_version: "1".into(),
            region: None,
            endpoint_url: None,
            max_attempts: 3,
            timeout_ms: 10_000,
            policy_arns: Vec::new(),
        }
    }

    fn sdk(region: &str, fips: bool, dual_stack: bool) -> aws_config::SdkConfig {
        aws_config::SdkConfig::builder()
            .region(aws_config::Region::new(region.to_string()))
            .use_fips(fips)
            .use_dual_stack(dual_stack)
            .behavior_version(aws_config::BehaviorVersion::latest())
            .build()
    }

    #[tokio::test]
    async fn endpoints_follow_the_sdks_rules() {
        for (region, fips, dual, want) in [
            (
                "us-east-1",
                false,
                false,
                "https://bedrock-runtime.us-east-1.amazonaws.com",
            ),
            (
                "us-east-1",
                true,
                false,
                "https://bedrock-runtime-fips.us-east-1.amazonaws.com",
            ),
            (
                "eu-west-3",
                false,
                true,
                "https://bedrock-runtime.eu-west-3.api.aws",
            ),
            (
                "cn-north-1",
                false,
                false,
                "https://bedrock-runtime.cn-north-1.amazonaws.com.cn",
            ),
            (
                "us-gov-west-1",
                true,
                false,
                "https://bedrock-runtime-fips.us-gov-west-1.amazonaws.com",
            ),
        ] {
            let g = BedrockGuardrail::with_sdk_config(config("gr-1"), &sdk(region, fips, dual))
                .await
                .unwrap();
            assert_eq!(
                g.url(),
                format!("{want}/guardrail/gr-1/version/1/apply"),
                "{region} fips={fips} dual-stack={dual}"
            );
        }
    }

    #[tokio::test]
    async fn an_arn_is_one_encoded_label() {
        let arn = "arn:aws:bedrock:us-east-1:123456789012:guardrail/abc123";
        let g = BedrockGuardrail::with_sdk_config(config(arn), &sdk("us-east-1", false, false))
            .await
            .unwrap();
        assert_eq!(
            g.url(),
            "https://bedrock-runtime.us-east-1.amazonaws.com/guardrail/\
             arn%3Aaws%3Abedrock%3Aus-east-1%3A123456789012%3Aguardrail%2Fabc123/version/1/apply"
        );
    }

    /// With event loops declared, each loop applies the guardrail through connections of its
    /// own (see `per_loop`).
    #[test]
    fn each_event_loop_calls_through_connections_of_its_own() {
        crate::per_loop::set_loops(2);
        let (server, addr, accepted) = crate::per_loop::test_support::keep_alive_server(
            r#"{"action":"NONE","outputs":[],"assessments":[]}"#,
        );
        let credentials =
            aws_credential_types::Credentials::new("AKID", "secret", None, None, "test");
        let sdk = aws_config::SdkConfig::builder()
            .region(aws_config::Region::new("us-east-1"))
            .endpoint_url(format!("http://{addr}"))
            .credentials_provider(SharedCredentialsProvider::new(credentials))
            .behavior_version(aws_config::BehaviorVersion::latest())
            .build();
        let guardrail = server
            .block_on(BedrockGuardrail::with_sdk_config(config("gr-1"), &sdk))
            .unwrap();
        crate::per_loop::test_support::each_loop_in_turn(2, |_| {
            let guardrail = guardrail.clone();
            async move {
                // The reply has no findings; what counts here is that the call is answered.
                let _ = guardrail.validate("q", "a").await;
            }
        });
        assert_eq!(accepted(), 2, "the loops shared a connection");
    }

    #[tokio::test]
    async fn no_region_is_an_error_at_start() {
        let sdk = aws_config::SdkConfig::builder()
            .behavior_version(aws_config::BehaviorVersion::latest())
            .build();
        let err = BedrockGuardrail::with_sdk_config(config("gr-1"), &sdk)
            .await
            .err()
            .expect("no region")
            .to_string();
        assert!(err.contains("no AWS region"), "{err}");
    }

    #[test]
    fn refusals_say_only_what_the_answer_had() {
        let s = reqwest::StatusCode::SERVICE_UNAVAILABLE;
        assert_eq!(
            refusal(s, "ThrottlingException", "Rate exceeded", Some("r-1")),
            "HTTP 503 Service Unavailable, ThrottlingException: Rate exceeded (request id r-1)"
        );
        assert_eq!(
            refusal(s, "", "upstream down", None),
            "HTTP 503 Service Unavailable, upstream down"
        );
        assert_eq!(
            refusal(s, "ThrottlingException", " ", None),
            "HTTP 503 Service Unavailable, ThrottlingException"
        );
        assert_eq!(
            refusal(reqwest::StatusCode::METHOD_NOT_ALLOWED, "", "", None),
            "HTTP 405 Method Not Allowed"
        );
    }

    #[test]
    fn error_codes_are_read_from_the_header_or_the_body() {
        let mut h = reqwest::header::HeaderMap::new();
        h.insert(
            "x-amzn-errortype",
            "ThrottlingException:http://internal.amazon.com/coral/com.amazon.coral.availability/"
                .parse()
                .unwrap(),
        );
        let (code, msg) = error_code_and_message(&h, br#"{"message":"Rate exceeded"}"#);
        assert_eq!(
            (code.as_str(), msg.as_str()),
            ("ThrottlingException", "Rate exceeded")
        );
        let (code, msg) = error_code_and_message(
            &reqwest::header::HeaderMap::new(),
            br#"{"__type":"com.amazon.bedrock#ValidationException","Message":"bad"}"#,
        );
        assert_eq!(
            (code.as_str(), msg.as_str()),
            ("ValidationException", "bad")
        );
        let (code, msg) = error_code_and_message(&reqwest::header::HeaderMap::new(), b"<html>");
        assert_eq!((code.as_str(), msg.as_str()), ("", "<html>"));
        // An endpoint cannot make an error as long as it likes, JSON or not, nor split a
        // character.
        let long = format!(r#"{{"message":"{}"}}"#, "é".repeat(20_000));
        let (_, msg) = error_code_and_message(&reqwest::header::HeaderMap::new(), long.as_bytes());
        assert_eq!(msg, "é".repeat(MAX_ERROR_CHARS));
        // One longer than an error is not parsed (a tree of it could take a GB): an excerpt.
        let huge = format!(r#"{{"message":"m","p":[{}0]}}"#, "0,".repeat(100_000));
        let (_, msg) = error_code_and_message(&reqwest::header::HeaderMap::new(), huge.as_bytes());
        assert!(msg.starts_with(r#"{"message":"m","p":[0,0"#), "{msg}");
        assert_eq!(msg.chars().count(), MAX_ERROR_CHARS);
        let (_, msg) = error_code_and_message(
            &reqwest::header::HeaderMap::new(),
            "ü".repeat(5000).as_bytes(),
        );
        assert_eq!(msg, "ü".repeat(MAX_ERROR_CHARS));
    }
}

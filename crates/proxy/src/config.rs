//! `proofgate serve` configuration: one TOML file plus `PROOFGATE_` environment overrides
//! (nested keys joined with `__`, e.g. `PROOFGATE_UPSTREAM__BASE_URL`).

use figment::providers::{Env, Format, Serialized, Toml};
use figment::Figment;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// The whole configuration.
#[derive(Debug, Clone, Serialize, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// Where the server listens.
    #[serde(default)]
    pub server: ServerConfig,
    /// The chatbot's real LLM, the one the app used to call directly.
    #[serde(default)]
    pub upstream: LlmEndpoint,
    /// The LLM that rewrites answers and asks follow-up questions; defaults to `upstream`.
    #[serde(default)]
    pub rewriter: Option<LlmEndpoint>,
    /// How answers are validated.
    #[serde(default)]
    pub validator: ValidatorConfig,
    /// The rewriting loop.
    #[serde(default, rename = "loop")]
    pub rewrite_loop: LoopConfig,
    /// Where threads and audit trails live.
    #[serde(default)]
    pub storage: StorageConfig,
    /// What happens when the validator or an LLM is unavailable.
    #[serde(default)]
    pub failure_mode: FailureMode,
    /// Who may call the server: API keys and the admin key.
    #[serde(default)]
    pub auth: AuthConfig,
    /// The audit trail's signing key, log and retention.
    #[serde(default)]
    pub audit: AuditConfig,
    /// What one caller can cost: body size, concurrency, rate, time, policy size.
    #[serde(default)]
    pub limits: LimitsConfig,
}

/// API keys. Keys themselves live in the storage (as hashes), so replicas share them.
#[derive(Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AuthConfig {
    /// `true` (default): every route but the public ones needs a key. `false` is for local
    /// development only: every route is open (a warning is logged at start).
    #[serde(default = "default_true")]
    pub required: bool,
    /// The admin key itself; set it from the environment (`PROOFGATE_AUTH__ADMIN_KEY`), not in
    /// a file.
    #[serde(default, deserialize_with = "secret_text")]
    pub admin_key: Option<String>,
    /// The admin key's SHA-256 (hex), for configuration files.
    #[serde(default)]
    pub admin_key_sha256: Option<String>,
    /// How long a key read from the storage is trusted without reading it again (ms; 0: read it
    /// on every request). A key revoked here stops at once; one revoked by another replica or
    /// by `proofgate keys revoke` stops within this time.
    #[serde(default = "default_key_cache_ms")]
    pub key_cache_ms: u64,
}

fn default_key_cache_ms() -> u64 {
    1000
}

/// Whether `path` lies under the directory `dir` (each made absolute, symbolic links resolved
/// where the path exists).
fn within(dir: &Path, path: &Path) -> bool {
    let resolved = |p: &Path| {
        let abs = std::path::absolute(p).unwrap_or_else(|_| p.to_path_buf());
        if let Ok(real) = abs.canonicalize() {
            return real;
        }
        // A file not made yet: its directory resolved, its name kept.
        match (abs.parent().map(Path::canonicalize), abs.file_name()) {
            (Some(Ok(parent)), Some(name)) => parent.join(name),
            _ => abs,
        }
    };
    resolved(path).starts_with(resolved(dir))
}

/// The configuration's tables, as environment names spell them.
const SECTIONS: [&str; 9] = [
    "SERVER",
    "UPSTREAM",
    "REWRITER",
    "VALIDATOR",
    "LOOP",
    "STORAGE",
    "AUTH",
    "AUDIT",
    "LIMITS",
];

/// Refuses `PROOFGATE_<SECTION>_<KEY>` written with one underscore: figment reads only
/// `__`-joined names, so `PROOFGATE_STORAGE_URL=postgres://...` was dropped and each replica
/// quietly ran on a SQLite file of its own (and `PROOFGATE_AUDIT_SIGNING_KEY` made each a key
/// of its own).
fn misspelt_environment(names: impl Iterator<Item = String>) -> Result<(), ConfigError> {
    for name in names {
        let Some(rest) = name.strip_prefix("PROOFGATE_") else {
            continue;
        };
        if rest.contains("__") {
            continue;
        }
        let upper = rest.to_ascii_uppercase();
        if let Some(section) = SECTIONS
            .iter()
            .find(|s| upper.strip_prefix(*s).is_some_and(|k| k.starts_with('_')))
        {
            let key = &rest[section.len() + 1..];
            return Err(ConfigError::Inconsistent(format!(
                "environment variable {name} is not a setting: a table and its key are joined \
                 with two underscores (PROOFGATE_{section}__{key})"
            )));
        }
    }
    Ok(())
}

/// Longer than this is taken for a typo (it would also overflow as milliseconds).
const MAX_QUESTION_TIMEOUT_SECS: u64 = 366 * 24 * 3600;

/// The longest a key may be trusted without reading it again.
const MAX_KEY_CACHE_MS: u64 = 10 * 60 * 1000;

impl Default for AuthConfig {
    fn default() -> Self {
        AuthConfig {
            required: true,
            admin_key: None,
            admin_key_sha256: None,
            key_cache_ms: default_key_cache_ms(),
        }
    }
}

impl std::fmt::Debug for AuthConfig {
    // Never the admin key, even in a debug print.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AuthConfig")
            .field("required", &self.required)
            .field("admin_key", &self.admin_key.as_ref().map(|_| "***"))
            .field("admin_key_sha256", &self.admin_key_sha256)
            .field("key_cache_ms", &self.key_cache_ms)
            .finish()
    }
}

/// Limits on what one request or caller can cost. Every one has a safe default.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LimitsConfig {
    /// Largest request body (413 beyond).
    #[serde(default = "default_max_body_bytes")]
    pub max_body_bytes: usize,
    /// Requests served at once (503 with `Retry-After` beyond).
    #[serde(default = "default_max_concurrent_requests")]
    pub max_concurrent_requests: usize,
    /// Of those, the last places a key (a client address without keys) that already holds as
    /// many cannot take: they are kept for other keys, so that one key's slow requests cannot
    /// take every place and lock the others out (429 with `Retry-After`). Unset: an eighth of
    /// `max_concurrent_requests`, rounded up; 0: none; at most half of them (keeping more
    /// would let a lone key hold more).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub places_kept_for_other_keys: Option<usize>,
    /// Requests per minute per API key (429 with `Retry-After` beyond); bursts up to this many.
    /// Counted by each replica on its own.
    #[serde(default = "default_requests_per_minute")]
    pub requests_per_minute: u32,
    /// Deadline for one request (504 beyond); its work stops then, as when the client leaves.
    #[serde(default = "default_request_timeout_ms")]
    pub request_timeout_ms: u64,
    /// Largest policy the authoring endpoints accept (Amazon Bedrock's limits by default).
    #[serde(default = "default_max_policy_rules")]
    pub max_policy_rules: usize,
    /// As `max_policy_rules`, for variables.
    #[serde(default = "default_max_policy_variables")]
    pub max_policy_variables: usize,
    /// As `max_policy_rules`, for custom types.
    #[serde(default = "default_max_policy_types")]
    pub max_policy_types: usize,
    /// Client connections open at once; a connection beyond gets a 503 and is closed. Keep it
    /// below the process's open-file limit (`ulimit -n`), which the database and upstream
    /// connections share. 0: no cap.
    #[serde(default = "default_max_connections")]
    pub max_connections: usize,
    /// Of those, open at once from one public client address (an IPv6 client's /64, which
    /// one host usually holds whole): one client cannot take every connection and lock the
    /// others out. Loopback and private addresses (an app's own backend, a load balancer on
    /// the private network) are not held to it unless `cap_private_addresses`. 0: no cap.
    #[serde(default = "default_max_connections_per_address")]
    pub max_connections_per_address: usize,
    /// Whether loopback, private and link-local addresses are held to
    /// `max_connections_per_address` too (off: they are often one backend or balancer that
    /// all the traffic comes through).
    #[serde(default)]
    pub cap_private_addresses: bool,
    /// Time a client has to send a request's headers, and the longest a kept-alive connection
    /// waits for its next request (HTTP/1.1; the connection is closed beyond). Without it, a
    /// client that sends half a header holds its connection for ever. 0: none.
    #[serde(default = "default_header_timeout_ms")]
    pub header_timeout_ms: u64,
    /// The longest a response's write may wait for the client to read (the connection is
    /// closed beyond). Without it, a client that asks for a large response (an audit bundle)
    /// and reads none of it holds its connection for ever. 0: none.
    #[serde(default = "default_write_timeout_ms")]
    pub write_timeout_ms: u64,
}

impl Default for LimitsConfig {
    fn default() -> Self {
        LimitsConfig {
            max_body_bytes: default_max_body_bytes(),
            max_concurrent_requests: default_max_concurrent_requests(),
            places_kept_for_other_keys: None,
            requests_per_minute: default_requests_per_minute(),
            request_timeout_ms: default_request_timeout_ms(),
            max_policy_rules: default_max_policy_rules(),
            max_policy_variables: default_max_policy_variables(),
            max_policy_types: default_max_policy_types(),
            max_connections: default_max_connections(),
            max_connections_per_address: default_max_connections_per_address(),
            cap_private_addresses: false,
            header_timeout_ms: default_header_timeout_ms(),
            write_timeout_ms: default_write_timeout_ms(),
        }
    }
}

fn default_max_connections() -> usize {
    1024
}
fn default_max_connections_per_address() -> usize {
    256
}
fn default_header_timeout_ms() -> u64 {
    30_000
}
fn default_write_timeout_ms() -> u64 {
    30_000
}

fn default_max_body_bytes() -> usize {
    1024 * 1024
}
fn default_max_concurrent_requests() -> usize {
    64
}
fn default_requests_per_minute() -> u32 {
    600
}
fn default_request_timeout_ms() -> u64 {
    300_000
}
// Amazon Bedrock's Automated Reasoning policy quotas.
fn default_max_policy_rules() -> usize {
    500
}
fn default_max_policy_variables() -> usize {
    200
}
fn default_max_policy_types() -> usize {
    50
}

/// Listening address.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ServerConfig {
    /// `host:port`.
    #[serde(default = "default_listen")]
    pub listen: String,
    /// The built web UI served at `/` (relative to the working directory).
    #[serde(default = "default_web_dir")]
    pub web_dir: PathBuf,
    /// How often overdue follow-up questions are timed out and stale threads deleted.
    #[serde(default = "default_maintenance_interval_ms")]
    pub maintenance_interval_ms: u64,
    /// A thread not saved for this long is taken to be orphaned (its server stopped
    /// mid-step) and is resumed from its last saved step. A server never resumes a thread it
    /// is still driving itself; with several replicas on one database, keep this above the
    /// longest LLM or validator call (another replica cannot tell a slow call from a stopped
    /// server).
    #[serde(default = "default_resume_after_ms")]
    pub resume_after_ms: u64,
    /// Origins allowed to call the API from a browser (CORS); empty (default): none, only
    /// the web UI served here (same origin).
    #[serde(default)]
    pub cors_origins: Vec<String>,
    /// How requests are run: `per-core` (default) or `work-stealing`.
    #[serde(default)]
    pub runtime: RuntimeKind,
    /// Threads that serve requests; 0 (default): one per available core.
    #[serde(default)]
    pub threads: usize,
}

/// How the server runs its requests.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum RuntimeKind {
    /// One single-threaded event loop per thread, each connection kept on one loop (given to
    /// the loop with the fewest open connections). A lone request's tasks are not handed
    /// between Tokio threads, which was most of what it cost on a small machine.
    #[default]
    PerCore,
    /// Tokio's multi-threaded runtime: any idle thread takes any task, so one busy
    /// connection (HTTP/2 streams) can use every core.
    WorkStealing,
}

impl ServerConfig {
    /// The number of serving threads: the setting, or one per available core.
    pub fn serving_threads(&self) -> usize {
        if self.threads > 0 {
            return self.threads;
        }
        std::thread::available_parallelism().map_or(1, |n| n.get())
    }
}

/// More serving threads than this is a typo, not a machine.
pub const MAX_SERVING_THREADS: usize = 1024;

impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig {
            listen: default_listen(),
            web_dir: default_web_dir(),
            maintenance_interval_ms: default_maintenance_interval_ms(),
            resume_after_ms: default_resume_after_ms(),
            cors_origins: Vec::new(),
            runtime: RuntimeKind::default(),
            threads: 0,
        }
    }
}

fn default_resume_after_ms() -> u64 {
    10 * 60 * 1000
}

fn default_maintenance_interval_ms() -> u64 {
    30_000
}

fn default_web_dir() -> PathBuf {
    "web/dist".into()
}

fn default_listen() -> String {
    "127.0.0.1:8080".into()
}

/// A secret setting (a key): text, and an error that never repeats the value. figment reads
/// an all-digit environment value as a number, and serde's own error quoted it ("found
/// unsigned int `1234...`") on the terminal and in the service's log.
fn secret_text<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
    Option::<String>::deserialize(d).map_err(|_| serde::de::Error::custom(SECRET_NOT_TEXT))
}

const SECRET_NOT_TEXT: &str = "a key must be text (the value is not repeated here); an \
     environment value of digits alone reads as a number: quote it, e.g. \
     PROOFGATE_AUTH__ADMIN_KEY='\"0123...\"'";

/// The audit trail: the Ed25519 key that signs thread heads and log checkpoints (kept outside
/// the database), the log's name, and how long trails are kept.
#[derive(Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AuditConfig {
    /// The signing key file (a C2SP signed-note signer key), created with mode 0600 on first
    /// start. Default: `proofgate-audit.key` next to the SQLite database (or in the working
    /// directory). Replicas must share one key: give them the same file or `signing_key`.
    #[serde(default)]
    pub signing_key_path: Option<PathBuf>,
    /// The signing key itself (e.g. `PROOFGATE_AUDIT__SIGNING_KEY`); wins over the file.
    #[serde(default, skip_serializing, deserialize_with = "secret_text")]
    pub signing_key: Option<String>,
    /// The key's name in signatures and the verifier key (default `proofgate`).
    #[serde(default)]
    pub key_name: Option<String>,
    /// The log's origin line in checkpoints (default `proofgate.local/audit-log`).
    #[serde(default)]
    pub log_origin: Option<String>,
    /// Trails older than this many days are deleted (each deletion is logged). Unset: kept
    /// forever. Conversation expiry (`storage.thread_ttl_secs`) never deletes trails.
    #[serde(default)]
    pub retention_days: Option<u64>,
    /// Where the server keeps the size and root of the largest log it signed a checkpoint of
    /// or appended to, outside the database, so that it never signs or extends a log cut back
    /// or rewritten there. Default: for SQLite beside the database file
    /// (`<database file>.signed-size`: one per database, so two databases in one directory do
    /// not share it); for PostgreSQL next to the signing key file (`<key file
    /// stem>.signed-size`), which replicas of one database share.
    #[serde(default)]
    pub signed_size_path: Option<PathBuf>,
}

impl std::fmt::Debug for AuditConfig {
    // Never the signing key, even in a debug print.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AuditConfig")
            .field("signing_key_path", &self.signing_key_path)
            .field("signing_key", &self.signing_key.as_ref().map(|_| "***"))
            .field("key_name", &self.key_name)
            .field("log_origin", &self.log_origin)
            .field("retention_days", &self.retention_days)
            .field("signed_size_path", &self.signed_size_path)
            .finish()
    }
}

impl AuditConfig {
    /// Where the signing key file is.
    pub fn key_path(&self, storage_url: &str) -> PathBuf {
        if let Some(p) = &self.signing_key_path {
            return p.clone();
        }
        let db = crate::storage::sqlite_file(storage_url);
        match db.map(std::path::Path::new).and_then(|p| p.parent()) {
            Some(dir) if !dir.as_os_str().is_empty() => dir.join("proofgate-audit.key"),
            _ => PathBuf::from("proofgate-audit.key"),
        }
    }
    /// Where the largest signed log size is kept (see `signed_size_path`).
    pub fn signed_size_path(&self, key_path: &std::path::Path, storage_url: &str) -> PathBuf {
        if let Some(p) = &self.signed_size_path {
            return p.clone();
        }
        match crate::storage::sqlite_file(storage_url) {
            Some(db) => PathBuf::from(format!("{db}.signed-size")),
            // PostgreSQL: one per database (server, port and name) beside the key. One file
            // beside the key for every database made one deployment's log look cut back to
            // another sharing the directory, and refused its commits.
            None => match postgres_database_tag(storage_url) {
                Some(tag) => key_path.with_file_name(format!(
                    "{}.{tag}.signed-size",
                    key_path
                        .file_stem()
                        .map_or_else(|| "proofgate-audit".into(), |s| s.to_string_lossy())
                )),
                None => Self::shared_signed_size_path(key_path),
            },
        }
    }
    /// The signed-size file next to the key, every database's default before it moved beside
    /// the SQLite database file (and still PostgreSQL's).
    pub fn shared_signed_size_path(key_path: &std::path::Path) -> PathBuf {
        key_path.with_extension("signed-size")
    }
    /// The key's name.
    pub fn key_name(&self) -> &str {
        self.key_name.as_deref().unwrap_or("proofgate")
    }
    /// The log's origin.
    pub fn log_origin(&self) -> &str {
        self.log_origin
            .as_deref()
            .unwrap_or("proofgate.local/audit-log")
    }
}

/// An LLM endpoint: OpenAI-compatible HTTP (OpenAI, vLLM, Ollama, llama.cpp) or Bedrock Converse.
#[derive(Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LlmEndpoint {
    /// `openai` (any OpenAI-compatible `/chat/completions`), `anthropic` (Messages API) or
    /// `bedrock` (Converse API).
    #[serde(default)]
    pub kind: LlmKind,
    /// Base URL including the version prefix, e.g. `https://api.openai.com/v1`.
    #[serde(default = "default_base_url")]
    pub base_url: String,
    /// Bearer token (anthropic: `x-api-key`). Unset: none of proofgate's own; with
    /// `auth.required = false` the client's own `Authorization` header is passed through to
    /// the upstream (with keys required, a client's header holds its proofgate key and is
    /// never forwarded).
    #[serde(default, deserialize_with = "secret_text")]
    pub api_key: Option<String>,
    /// Model id; when unset, the model the client asked for.
    #[serde(default)]
    pub model: Option<String>,
    /// Sampling temperature for proofgate's own calls.
    #[serde(default)]
    pub temperature: Option<f32>,
    /// AWS region, for `bedrock`.
    #[serde(default)]
    pub region: Option<String>,
    /// Request timeout.
    #[serde(default = "default_llm_timeout_ms")]
    pub timeout_ms: u64,
    /// Ask translators for JSON with a JSON schema (`response_format: json_schema`, which
    /// OpenAI, vLLM, llama.cpp and Ollama accept). Turn off for endpoints that reject it; a
    /// 400 naming `response_format` also falls back once to the plain prompt.
    #[serde(default = "default_true")]
    pub structured_output: bool,
    /// How often a call is retried after a connection error, 408, 409, 429 or 5xx (with
    /// exponential backoff and jitter, honouring `Retry-After`, within `timeout_ms` and the
    /// request's deadline). 0 turns retries off.
    #[serde(default = "default_max_retries")]
    pub max_retries: u32,
    /// The `anthropic-version` header, for `kind = "anthropic"`.
    #[serde(default = "default_anthropic_version")]
    pub anthropic_version: String,
    /// For the rewriter: `app` (default) calls it with the app's own request (system prompt,
    /// history, tool results, and model parameters unless `model` names another model; tools
    /// not offered) plus one message with the
    /// findings, so rewrites keep the app's persona, language and format; `minimal` sends
    /// only proofgate's prompt. Ignored for the upstream and translators.
    #[serde(default)]
    pub context: RewriterContext,
}

impl std::fmt::Debug for LlmEndpoint {
    // Never the API key, even in a debug print.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LlmEndpoint")
            .field("kind", &self.kind)
            .field("base_url", &self.base_url)
            .field("api_key", &self.api_key.as_ref().map(|_| "***"))
            .field("model", &self.model)
            .field("temperature", &self.temperature)
            .field("region", &self.region)
            .field("timeout_ms", &self.timeout_ms)
            .field("structured_output", &self.structured_output)
            .field("max_retries", &self.max_retries)
            .field("anthropic_version", &self.anthropic_version)
            .field("context", &self.context)
            .finish()
    }
}

/// What the rewriter is called with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum RewriterContext {
    /// The app's own request plus proofgate's prompt.
    #[default]
    App,
    /// proofgate's prompt alone.
    Minimal,
}

fn default_max_retries() -> u32 {
    3
}

fn default_anthropic_version() -> String {
    "2023-06-01".into()
}

impl Default for LlmEndpoint {
    fn default() -> Self {
        LlmEndpoint {
            kind: LlmKind::default(),
            base_url: default_base_url(),
            api_key: None,
            model: None,
            temperature: None,
            region: None,
            timeout_ms: default_llm_timeout_ms(),
            structured_output: true,
            max_retries: default_max_retries(),
            anthropic_version: default_anthropic_version(),
            context: RewriterContext::default(),
        }
    }
}

fn default_base_url() -> String {
    "https://api.openai.com/v1".into()
}

fn default_llm_timeout_ms() -> u64 {
    120_000
}

/// The protocol of an LLM endpoint.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum LlmKind {
    /// OpenAI-compatible chat completions.
    #[default]
    Openai,
    /// Amazon Bedrock Converse.
    Bedrock,
    /// The Anthropic Messages API (`POST {base_url}/messages`, `x-api-key`,
    /// `anthropic-version`), e.g. `https://api.anthropic.com/v1`.
    Anthropic,
}

/// Which validator checks answers.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ValidatorConfig {
    /// `local` (policy + Z3, LLM translators) or `bedrock` (ApplyGuardrail).
    #[serde(default)]
    pub kind: ValidatorKind,
    /// The policy definition JSON (Bedrock format), for `local` and for the API's policy view.
    #[serde(default)]
    pub policy: Option<PathBuf>,
    /// The policy's ARN, cited as `policyVersionArn` in findings (default: an ARN-shaped
    /// name from the policy's content hash, `arn:aws:bedrock:local:000000000000:...`).
    #[serde(default)]
    pub policy_arn: Option<String>,
    /// The translators; when empty, `translator_count` copies of the rewriter endpoint.
    #[serde(default)]
    pub translators: Vec<LlmEndpoint>,
    /// k, when `translators` is empty.
    #[serde(default = "default_translator_count")]
    pub translator_count: usize,
    /// Confidence below which a translation is TRANSLATION_AMBIGUOUS (share of translators).
    #[serde(default = "default_threshold")]
    pub threshold: f64,
    /// Z3 timeout per check.
    #[serde(default = "default_solver_timeout_ms")]
    pub solver_timeout_ms: u64,
    /// How often a translation with syntax or type errors is sent back for repair.
    #[serde(default = "default_repair_attempts")]
    pub repair_attempts: usize,
    /// Whether the app's system prompt states facts about the user (a profile it fills in,
    /// "the customer is 70") that may be premises of a proof. Off by default: a system prompt
    /// usually restates the policy, and its thresholds ("seniors (65+) pay $9") then grounded
    /// premises the user never gave, proving answers VALID that should have asked.
    #[serde(default)]
    pub system_prompt_facts: bool,
    /// Whether tools' results state facts that may be premises (a CRM lookup's
    /// `{"customer_age": 70}`; never their first-person prose, audit format 14). On by
    /// default; turn it off when the app's tools bring in text written elsewhere (web pages,
    /// documents, emails), whose author could state any fact about the user.
    #[serde(default = "default_true")]
    pub tool_result_facts: bool,
    /// Threads that run Z3 checks, each with its own Z3 context (about 20 MB once used).
    /// Default: one per core (see [`ValidatorConfig::reasoner_workers`]).
    #[serde(default, rename = "reasoner_workers")]
    pub reasoner_workers_setting: Option<usize>,
    /// A reasoner worker that has had no check for this many seconds ends, and its Z3 context
    /// (about 17 MB) with it; a fresh thread takes its place and loads the policy with its
    /// next check (about 20 ms for the shipped examples, 0.2 s at Bedrock's limits, seconds
    /// beyond them). 0 keeps the workers' contexts for the proxy's life.
    #[serde(default = "default_reasoner_idle_secs")]
    pub reasoner_idle_secs: u64,
    /// Amazon Bedrock guardrail, for `bedrock`.
    #[serde(default)]
    pub bedrock: Option<BedrockGuardrailConfig>,
}

impl Default for ValidatorConfig {
    fn default() -> Self {
        ValidatorConfig {
            kind: ValidatorKind::default(),
            policy: None,
            policy_arn: None,
            translators: Vec::new(),
            translator_count: default_translator_count(),
            threshold: default_threshold(),
            solver_timeout_ms: default_solver_timeout_ms(),
            repair_attempts: default_repair_attempts(),
            system_prompt_facts: false,
            tool_result_facts: true,
            reasoner_workers_setting: None,
            reasoner_idle_secs: default_reasoner_idle_secs(),
            bedrock: None,
        }
    }
}

/// A PostgreSQL database's server, port and name, as a file name's part (`db-5432-proofgate`),
/// without the user, password or parameters; `None` for a URL that is not PostgreSQL's.
fn postgres_database_tag(url: &str) -> Option<String> {
    let parsed = reqwest::Url::parse(url).ok()?;
    if !matches!(parsed.scheme(), "postgres" | "postgresql") {
        return None;
    }
    // A Unix socket's directory comes as `?host=/run/postgresql`.
    let host = match parsed.host_str() {
        Some(h) if !h.is_empty() => h.to_string(),
        _ => parsed
            .query_pairs()
            .find(|(k, _)| k == "host")
            .map_or_else(|| "local".to_string(), |(_, v)| v.into_owned()),
    };
    let port = parsed.port().unwrap_or(5432);
    let name = parsed.path().trim_start_matches('/');
    let tag: String = format!("{host}-{port}-{name}")
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_') {
                c
            } else {
                '_'
            }
        })
        .collect();
    Some(tag)
}

impl std::fmt::Debug for StorageConfig {
    // Never the database's password, even in a debug print.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StorageConfig")
            .field("url", &crate::storage::redact(&self.url))
            .field("thread_ttl_secs", &self.thread_ttl_secs)
            .field("sqlite_synchronous", &self.sqlite_synchronous)
            .field("write_ahead_after_ms", &self.write_ahead_after_ms)
            .field("connection_idle_secs", &self.connection_idle_secs)
            .finish()
    }
}

/// More reasoner workers than this is taken for a typo: each is a thread, and a Z3 context
/// of about 20 MB once it has checked something.
const MAX_REASONER_WORKERS: usize = 1024;

impl ValidatorConfig {
    /// How many reasoner workers to start: `reasoner_workers`, or one per core. Fewer save
    /// a Z3 context each (about 20 MB after load) for less parallel checking: on 2 cores one
    /// worker held 97 MB after the distinct-questions load instead of 128 MB, and served 5%
    /// fewer distinct questions per second (within the machine's noise).
    pub fn reasoner_workers(&self, cores: usize) -> usize {
        self.reasoner_workers_setting.unwrap_or(cores).max(1)
    }

    /// How long a reasoner worker keeps its Z3 context without a check (`None`: always).
    pub fn reasoner_idle(&self) -> Option<std::time::Duration> {
        (self.reasoner_idle_secs > 0)
            .then(|| std::time::Duration::from_secs(self.reasoner_idle_secs))
    }
}

fn default_translator_count() -> usize {
    3
}
fn default_threshold() -> f64 {
    1.0
}
fn default_solver_timeout_ms() -> u64 {
    5_000
}
fn default_reasoner_idle_secs() -> u64 {
    300
}
fn default_repair_attempts() -> usize {
    2
}

/// The validator implementation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum ValidatorKind {
    /// Policy model + Z3, with LLM translators.
    #[default]
    Local,
    /// Amazon Bedrock ApplyGuardrail.
    Bedrock,
}

/// An Amazon Bedrock guardrail with an Automated Reasoning policy.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BedrockGuardrailConfig {
    /// Guardrail id or ARN.
    pub guardrail_id: String,
    /// Guardrail version (`DRAFT` or a number).
    #[serde(deserialize_with = "version_text")]
    pub guardrail_version: String,
    /// AWS region.
    #[serde(default)]
    pub region: Option<String>,
    /// Endpoint override (tests, VPC endpoints).
    #[serde(default)]
    pub endpoint_url: Option<String>,
    /// Attempts on throttling and 5xx, including the first.
    #[serde(default = "default_max_attempts")]
    pub max_attempts: u32,
    /// One attempt's time limit, from sending to the whole response read; an attempt that
    /// overruns it is retried like a connection error.
    #[serde(default = "default_guardrail_timeout_ms")]
    pub timeout_ms: u64,
    /// The Automated Reasoning policy versions (`policyVersionArn`) a VALID finding may rest
    /// on. When set, a VALID citing a rule of any other version, or a rule with no version, is
    /// refused as a bad response (the validation fails closed): a guardrail repointed at
    /// another policy, or another policy added to it, cannot make answers VALID against rules
    /// you did not choose. Empty (the default): any version the guardrail uses.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub policy_arns: Vec<String>,
}

/// A guardrail version written as text (`"DRAFT"`, `"1"`) or as a number: TOML's
/// `guardrail_version = 1`, and the environment's `..._GUARDRAIL_VERSION=1`, which figment reads
/// as a number, were refused as "expected a string".
fn version_text<'de, D: serde::Deserializer<'de>>(d: D) -> Result<String, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Version {
        Text(String),
        Number(u64),
    }
    Ok(
        match Version::deserialize(d)
            .map_err(|_| serde::de::Error::custom("expected `DRAFT` or a version number"))?
        {
            Version::Text(t) => t,
            Version::Number(n) => n.to_string(),
        },
    )
}

fn default_max_attempts() -> u32 {
    4
}

fn default_guardrail_timeout_ms() -> u64 {
    10_000
}

/// The rewriting loop's settings.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LoopConfig {
    /// At most this many validations per thread.
    #[serde(default = "default_max_iterations")]
    pub max_iterations: u32,
    /// Whether the rewriter may ask the user follow-up questions.
    #[serde(default = "default_true")]
    pub allow_questions: bool,
    /// After this long without answers, the questions count as skipped.
    #[serde(default = "default_question_timeout_secs")]
    pub question_timeout_secs: u64,
    /// Whether a request may force a tool call (`tool_choice` "required" or naming a tool):
    /// the call's arguments are then the model's answer, which is not verified. Off: such a
    /// request gets a 400. A free choice (`auto`) is always allowed: the app runs the tools
    /// it asked for and the answer that follows is verified.
    #[serde(default)]
    pub allow_forced_tool_calls: bool,
}

impl Default for LoopConfig {
    fn default() -> Self {
        LoopConfig {
            max_iterations: default_max_iterations(),
            allow_questions: true,
            question_timeout_secs: default_question_timeout_secs(),
            allow_forced_tool_calls: false,
        }
    }
}

fn default_max_iterations() -> u32 {
    5
}
fn default_true() -> bool {
    true
}
fn default_question_timeout_secs() -> u64 {
    3_600
}

/// Storage settings.
#[derive(Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StorageConfig {
    /// `sqlite://FILE` (created if missing) or `postgres://...`.
    #[serde(default = "default_storage_url")]
    pub url: String,
    /// Conversations untouched for this long end: they can no longer be resumed (0: never).
    /// Their audit trails are kept (see `[audit] retention_days`).
    #[serde(default = "default_thread_ttl_secs")]
    pub thread_ttl_secs: u64,
    /// SQLite's `synchronous`: `"full"` (default: every commit is on disk before an answer
    /// leaves) or `"normal"` (a kill -9 loses nothing, a power loss can lose the last commits,
    /// and answers already given with them). Ignored for PostgreSQL.
    #[serde(default)]
    pub sqlite_synchronous: crate::storage::SqliteSync,
    /// A step is written ahead of the call it asks for once that call has taken this long
    /// (0: always, at once). A crash during a longer call resumes from that step; a call that
    /// returns sooner is written with the request's next write, so a fast request costs one
    /// commit. Nothing is answered before every write of the request is durable either way.
    #[serde(default = "default_write_ahead_after_ms")]
    pub write_ahead_after_ms: u64,
    /// A database connection unused for this many seconds closes, and its page cache and
    /// prepared statements (SQLite: a few MB in all) go with it; the next request opens one
    /// again (about a millisecond). 0 keeps connections open for the proxy's life; at most a
    /// year.
    #[serde(default = "default_connection_idle_secs")]
    pub connection_idle_secs: u64,
}

impl StorageConfig {
    /// How long a database connection stays open unused (`None`: always).
    pub fn connection_idle(&self) -> Option<std::time::Duration> {
        (self.connection_idle_secs > 0)
            .then(|| std::time::Duration::from_secs(self.connection_idle_secs))
    }
}

/// More than this is taken for a typo: timers that far out overflow the clock's arithmetic.
const MAX_CONNECTION_IDLE_SECS: u64 = 365 * 24 * 3600;

/// The longest `limits.header_timeout_ms`: a day. hyper adds it to the clock for every
/// connection, and a typo of many digits would overflow that and panic the connection's task.
const MAX_HEADER_TIMEOUT_MS: u64 = 24 * 3600 * 1000;

fn default_connection_idle_secs() -> u64 {
    // Below the pool's turn: the maintenance pass takes a reader every 30 s, and the pool hands
    // out the one unused longest, so each of four readers is used every two minutes or so.
    60
}

impl Default for StorageConfig {
    fn default() -> Self {
        StorageConfig {
            url: default_storage_url(),
            thread_ttl_secs: default_thread_ttl_secs(),
            sqlite_synchronous: crate::storage::SqliteSync::default(),
            write_ahead_after_ms: default_write_ahead_after_ms(),
            connection_idle_secs: default_connection_idle_secs(),
        }
    }
}

fn default_storage_url() -> String {
    "sqlite://proofgate.sqlite".into()
}
fn default_write_ahead_after_ms() -> u64 {
    50
}
fn default_thread_ttl_secs() -> u64 {
    7 * 24 * 3_600
}

/// Fail-closed (default) returns an error when validation is impossible; fail-open returns
/// the upstream answer marked `UNVERIFIED`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum FailureMode {
    /// Never return an answer that was not validated.
    #[default]
    Closed,
    /// Return the unvalidated answer, marked UNVERIFIED.
    Open,
}

/// A configuration that could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The file or an environment override has a wrong key or value.
    #[error("configuration error: {0}")]
    Invalid(#[from] Box<figment::Error>),
    /// A setting is inconsistent with another.
    #[error("configuration error: {0}")]
    Inconsistent(String),
}

impl Config {
    /// Loads `file` (if given) and applies `PROOFGATE_*` environment overrides, then checks
    /// the settings the server needs.
    pub fn load(file: Option<&Path>) -> Result<Config, ConfigError> {
        let config = Self::load_unchecked(file)?;
        config.check()?;
        Ok(config)
    }

    /// Like [`Config::load`], without the server's cross-field checks (for commands that do
    /// not serve, e.g. formalizing a policy that does not exist yet).
    pub fn load_unchecked(file: Option<&Path>) -> Result<Config, ConfigError> {
        // What the file and the environment give, apart from the defaults: an endpoint table
        // without `base_url` is the upstream's, and a count given beside a list must agree.
        let mut given = Figment::new();
        if let Some(file) = file {
            if !file.exists() {
                return Err(ConfigError::Inconsistent(format!(
                    "config file {} does not exist",
                    file.display()
                )));
            }
            given = given.merge(Toml::file(file));
        }
        // Names only, and only those that are text (`vars` panics on any that is not).
        misspelt_environment(std::env::vars_os().filter_map(|(k, _)| k.into_string().ok()))?;
        // Only PROOFGATE_<SECTION>__<KEY> and the top-level PROOFGATE_FAILURE_MODE configure
        // the server; other PROOFGATE_* variables (test settings, CLI keys) are not its own.
        let env = Env::prefixed("PROOFGATE_")
            .filter(|k| {
                k.as_str().contains("__") || k.as_str().eq_ignore_ascii_case("failure_mode")
            })
            .split("__");
        given = given.merge(env);
        let mut config: Config = Figment::from(Serialized::defaults(Config::default()))
            .merge(given.clone())
            .extract()
            .map_err(Box::new)?;
        config.inherit_upstream(&given)?;
        let count_given = given.find_value("validator.translator_count").is_ok();
        let listed = config.validator.translators.len();
        if count_given && listed > 0 && config.validator.translator_count != listed {
            // Quietly taken as the list's length, `translator_count = 3` beside one listed
            // translator ran with k = 1: no second reading, and no TRANSLATION_AMBIGUOUS.
            return Err(ConfigError::Inconsistent(format!(
                "validator.translator_count is {}, but {listed} [[validator.translators]] are \
                 listed: with a list, k is the list's length; remove translator_count or make \
                 it {listed}",
                config.validator.translator_count
            )));
        }
        Ok(config)
    }

    /// An endpoint table (`[rewriter]`, a `[[validator.translators]]` entry) that gives no
    /// `base_url` is the upstream's endpoint with the settings it names changed: as the
    /// example's "unset: the upstream endpoint is used" says. Before, such a table took the
    /// defaults (`https://api.openai.com/v1`, no key), and a `[rewriter]` naming only a model
    /// sent the app's whole conversation to OpenAI instead of the operator's own endpoint.
    fn inherit_upstream(&mut self, given: &Figment) -> Result<(), ConfigError> {
        use figment::value::Value;
        let upstream = self.upstream.clone();
        let resolve = |what: &str,
                       table: &Value,
                       endpoint: &LlmEndpoint|
         -> Result<Option<LlmEndpoint>, ConfigError> {
            let Value::Dict(_, dict) = table else {
                return Ok(None);
            };
            if dict.contains_key("base_url") {
                return Ok(None);
            }
            if dict.contains_key("kind") && endpoint.kind != upstream.kind {
                if endpoint.kind == LlmKind::Bedrock {
                    return Ok(None); // Converse is addressed by its region, not a URL
                }
                return Err(ConfigError::Inconsistent(format!(
                    "{what}: kind {:?} is not [upstream]'s ({:?}) and no base_url is given: \
                     give its base_url (a table without one is the upstream's endpoint)",
                    endpoint.kind, upstream.kind
                )));
            }
            let merged = Figment::from(Serialized::defaults(&upstream))
                .merge(Serialized::defaults(table.clone()))
                .extract::<LlmEndpoint>()
                .map_err(Box::new)?;
            Ok(Some(merged))
        };
        if let (Some(rewriter), Ok(table)) = (&self.rewriter, given.find_value("rewriter")) {
            if let Some(merged) = resolve("rewriter", &table, rewriter)? {
                self.rewriter = Some(merged);
            }
        }
        if let Ok(Value::Array(_, tables)) = given.find_value("validator.translators") {
            for (i, table) in tables.iter().enumerate() {
                let what = format!("validator.translators[{i}]");
                if let Some(endpoint) = self.validator.translators.get(i) {
                    if let Some(merged) = resolve(&what, table, endpoint)? {
                        self.validator.translators[i] = merged;
                    }
                }
            }
        }
        Ok(())
    }

    /// What an operator should know at start: each setting that weakens a guarantee, said
    /// once (a reviewed file's `"closed"` overridden by `PROOFGATE_FAILURE_MODE=open` was
    /// silent).
    pub fn weakened(&self) -> Vec<String> {
        let mut said = Vec::new();
        if self.failure_mode == FailureMode::Open {
            said.push(
                "failure_mode = \"open\": when the validator or an LLM fails, the chatbot's \
                 answer is released unchecked (marked UNVERIFIED)"
                    .to_string(),
            );
        }
        if self.rewrite_loop.allow_forced_tool_calls {
            said.push(
                "loop.allow_forced_tool_calls = true: a forced tool call's arguments reach the \
                 app unverified"
                    .to_string(),
            );
        }
        if crate::storage::sqlite_in_memory(&self.storage.url) {
            said.push(
                "storage.url is an in-memory database: every trail and the audit log end with \
                 the process, and the next start signs a new log under the same key"
                    .to_string(),
            );
        }
        match self.validator.kind {
            ValidatorKind::Local => {
                if self.validator.system_prompt_facts {
                    said.push(
                        "validator.system_prompt_facts = true: the app's system prompt may \
                         state premises (one restating the policy's thresholds proves answers \
                         that should have asked)"
                            .to_string(),
                    );
                }
                if self.validator.threshold < 1.0 {
                    said.push(format!(
                        "validator.threshold = {}: a reading not every translator agrees on \
                         can be VALID",
                        self.validator.threshold
                    ));
                }
                if self.translators().len() == 1 {
                    said.push(
                        "one translator: no second reading catches a mistranslation \
                         (TRANSLATION_AMBIGUOUS never occurs)"
                            .to_string(),
                    );
                }
            }
            ValidatorKind::Bedrock => {
                if let Some(b) = &self.validator.bedrock {
                    if b.guardrail_version.eq_ignore_ascii_case("draft") {
                        said.push(
                            "validator.bedrock.guardrail_version = \"DRAFT\": the guardrail's \
                             working draft, which changes whenever it is edited"
                                .to_string(),
                        );
                    }
                    if b.policy_arns.is_empty() {
                        said.push(
                            "validator.bedrock.policy_arns is empty: a VALID may rest on any \
                             policy the guardrail uses; list the versions you reviewed"
                                .to_string(),
                        );
                    }
                }
            }
        }
        said
    }

    /// Cross-field checks a type cannot express.
    pub fn check(&self) -> Result<(), ConfigError> {
        let bad = |m: String| Err(ConfigError::Inconsistent(m));
        if self.audit.retention_days == Some(0) {
            // Elsewhere 0 turns a limit off; here it would delete every finished trail at the
            // next maintenance pass.
            return bad(
                "audit.retention_days = 0 would delete every finished trail at once: \
                        leave it out to keep trails forever, or give at least 1 day"
                    .into(),
            );
        }
        let key = self.audit.key_path(&self.storage.url);
        let mut kept = vec![
            ("the audit signing key", key.clone()),
            (
                "the log's signed-size file",
                self.audit.signed_size_path(&key, &self.storage.url),
            ),
        ];
        if let Some(db) = crate::storage::sqlite_file(&self.storage.url) {
            kept.push(("the SQLite database", PathBuf::from(db)));
        }
        for (what, path) in kept {
            if within(&self.server.web_dir, &path) {
                // The page's files are public: a web_dir of `.` served them to anyone.
                return bad(format!(
                    "server.web_dir ({}) holds {what} ({}), and everything under web_dir is \
                     public: point web_dir at the built page alone (web/dist)",
                    self.server.web_dir.display(),
                    path.display()
                ));
            }
        }
        if self.rewrite_loop.question_timeout_secs > MAX_QUESTION_TIMEOUT_SECS {
            return bad(format!(
                "loop.question_timeout_secs must be at most {MAX_QUESTION_TIMEOUT_SECS} (a \
                 year), got {}",
                self.rewrite_loop.question_timeout_secs
            ));
        }
        if let Some(h) = &self.auth.admin_key_sha256 {
            if h.len() != 64 || !h.bytes().all(|b| b.is_ascii_hexdigit()) {
                return bad("auth.admin_key_sha256 must be 64 hex digits (e.g. `printf %s \"$KEY\" | sha256sum`)".into());
            }
        }
        if matches!(&self.auth.admin_key, Some(k) if k.trim().len() < 16) {
            return bad("auth.admin_key must be at least 16 characters".into());
        }
        for origin in &self.server.cors_origins {
            let rest = origin
                .strip_prefix("https://")
                .or_else(|| origin.strip_prefix("http://"));
            if !matches!(rest, Some(host) if !host.is_empty() && !host.trim_end_matches('/').contains('/'))
            {
                return bad(format!(
                    "server.cors_origins: {origin:?} is not an origin; write it as https://host[:port]"
                ));
            }
        }
        // Credentials in an endpoint's address would ride in every error that names the
        // endpoint: the log, and the failed thread's trail, which read keys see.
        let endpoints = std::iter::once(("upstream", &self.upstream))
            .chain(self.rewriter.iter().map(|e| ("rewriter", e)))
            .chain(
                self.validator
                    .translators
                    .iter()
                    .map(|e| ("validator.translators", e)),
            );
        for (what, endpoint) in endpoints {
            let parsed = reqwest::Url::parse(&endpoint.base_url);
            if parsed
                .as_ref()
                .is_ok_and(|u| u.query().is_some() || u.fragment().is_some())
            {
                // A query could never work (paths are appended after it), and one holding a
                // key would ride in every error naming the endpoint, as userinfo would.
                return bad(format!(
                    "{what}: base_url has a query or fragment (`?`, `#`); give the address \
                     alone, and a credential as api_key"
                ));
            }
            let has_userinfo = parsed
                .as_ref()
                .is_ok_and(|u| !u.username().is_empty() || u.password().is_some());
            if has_userinfo {
                return bad(format!(
                    "{what}: base_url holds a user name or password; give the credential as \
                     api_key (or its environment variable) instead, so it is never written into \
                     errors, logs or trails"
                ));
            }
        }
        if self.storage.connection_idle_secs > MAX_CONNECTION_IDLE_SECS {
            return bad(format!(
                "storage.connection_idle_secs must be at most {MAX_CONNECTION_IDLE_SECS} (a year), got {} (0 keeps connections open)",
                self.storage.connection_idle_secs
            ));
        }
        // A revocation on another replica (or by `proofgate keys revoke`) waits this long: a
        // day's cache would keep a revoked key working for a day (an access review).
        if self.auth.key_cache_ms > MAX_KEY_CACHE_MS {
            return bad(format!(
                "auth.key_cache_ms must be at most {MAX_KEY_CACHE_MS} (ten minutes), got {}: a key \
                 revoked elsewhere works that long here",
                self.auth.key_cache_ms
            ));
        }
        if self.limits.write_timeout_ms > MAX_HEADER_TIMEOUT_MS {
            return bad(format!(
                "limits.write_timeout_ms must be at most {MAX_HEADER_TIMEOUT_MS} (a day), got {} (0 turns the limit off)",
                self.limits.write_timeout_ms
            ));
        }
        if self.limits.header_timeout_ms > MAX_HEADER_TIMEOUT_MS {
            return bad(format!(
                "limits.header_timeout_ms must be at most {MAX_HEADER_TIMEOUT_MS} (a day), got {} (0 turns the limit off)",
                self.limits.header_timeout_ms
            ));
        }
        if self.server.threads > MAX_SERVING_THREADS {
            return bad(format!(
                "server.threads must be at most {MAX_SERVING_THREADS}, got {} (0: one per core)",
                self.server.threads
            ));
        }
        let l = &self.limits;
        if l.max_body_bytes == 0 || l.max_concurrent_requests == 0 || l.requests_per_minute == 0 {
            return bad("limits.max_body_bytes, max_concurrent_requests and requests_per_minute must be at least 1".into());
        }
        if l.request_timeout_ms == 0 {
            return bad("limits.request_timeout_ms must be at least 1".into());
        }
        if let Some(kept) = l.places_kept_for_other_keys {
            let half = l.max_concurrent_requests / 2;
            if kept > half {
                // Quietly taken as half, a larger value would give one key more places, not
                // fewer: a lone key holds the larger of the places kept and the rest.
                return bad(format!(
                    "limits.places_kept_for_other_keys is {kept}, more than half of \
                     max_concurrent_requests ({half} of {}): keeping more would let one key hold \
                     more places, not fewer; set at most {half} (0: keep none)",
                    l.max_concurrent_requests
                ));
            }
        }
        if self.rewrite_loop.max_iterations == 0 {
            return bad("loop.max_iterations must be at least 1".into());
        }
        if !(0.0..=1.0).contains(&self.validator.threshold) {
            return bad(format!(
                "validator.threshold must be between 0 and 1, got {}",
                self.validator.threshold
            ));
        }
        match self.validator.kind {
            ValidatorKind::Local => {
                if self.validator.policy.is_none() {
                    return bad(
                        "validator.policy (a policy definition JSON file) is required for the local validator"
                            .into(),
                    );
                }
                if self.validator.translators.is_empty() && self.validator.translator_count == 0 {
                    return bad("validator.translator_count must be at least 1".into());
                }
                // Translators call with their own model, never the client's: without one
                // every check failed (a 503 per request, or every answer UNVERIFIED failing
                // open), and nothing said so at start.
                let unnamed = if self.validator.translators.is_empty() {
                    self.rewriter().model.is_none().then(|| {
                        if self.rewriter.is_some() {
                            "[rewriter]"
                        } else {
                            "[upstream]"
                        }
                    })
                } else {
                    self.validator
                        .translators
                        .iter()
                        .any(|t| t.model.is_none())
                        .then_some("a [[validator.translators]] entry")
                };
                if let Some(table) = unnamed {
                    return bad(format!(
                        "the local validator's translators have no model: set `model` in \
                         {table} (the translators are copies of the rewriter, which is the \
                         upstream unless [rewriter] is given)"
                    ));
                }
                if let Some(n) = self.validator.reasoner_workers_setting {
                    if !(1..=MAX_REASONER_WORKERS).contains(&n) {
                        return bad(format!(
                            "validator.reasoner_workers must be between 1 and {MAX_REASONER_WORKERS}, got {n} (leave it out for one per core)"
                        ));
                    }
                }
            }
            ValidatorKind::Bedrock => {
                if self.validator.bedrock.is_none() {
                    return bad("validator.bedrock (guardrail_id, guardrail_version) is required when validator.kind = \"bedrock\"".into());
                }
            }
        }
        Ok(())
    }

    /// The rewriting LLM: `rewriter`, or else the upstream.
    pub fn rewriter(&self) -> &LlmEndpoint {
        self.rewriter.as_ref().unwrap_or(&self.upstream)
    }

    /// The k translators.
    pub fn translators(&self) -> Vec<LlmEndpoint> {
        if self.validator.translators.is_empty() {
            vec![self.rewriter().clone(); self.validator.translator_count]
        } else {
            self.validator.translators.clone()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn example_config_loads() {
        let _env = ENV.read().unwrap_or_else(|e| e.into_inner());
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/proofgate.toml");
        let config = Config::load(Some(&path)).unwrap();
        assert_eq!(config.validator.kind, ValidatorKind::Local);
        assert_eq!(config.failure_mode, FailureMode::Closed);
        assert_eq!(config.translators().len(), 3);
    }

    #[test]
    fn reasoner_workers_default_to_the_cores_and_out_of_range_is_refused() {
        let mut config = Config::default();
        for (cores, workers) in [(0, 1), (1, 1), (2, 2), (16, 16)] {
            assert_eq!(
                config.validator.reasoner_workers(cores),
                workers,
                "{cores} cores"
            );
        }
        config.validator.reasoner_workers_setting = Some(3);
        assert_eq!(config.validator.reasoner_workers(2), 3);
        config.validator.policy = Some("policy.json".into());
        config.upstream.model = Some("m".into());
        assert!(config.check().is_ok());
        for wrong in [0, MAX_REASONER_WORKERS + 1] {
            config.validator.reasoner_workers_setting = Some(wrong);
            let err = config.check().unwrap_err().to_string();
            assert!(
                err.contains("validator.reasoner_workers must be between 1 and 1024")
                    && err.contains(&format!("got {wrong}")),
                "{err}"
            );
        }
        config.validator.reasoner_workers_setting = Some(MAX_REASONER_WORKERS);
        assert!(config.check().is_ok());
    }

    /// Loads `[table]\nkey = setting` from a file of its own.
    fn load_setting(table: &str, key: &str, setting: &str) -> Result<Config, String> {
        let dir = std::env::temp_dir().join(format!("pg-setting-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join(format!("{table}-{key}-{setting}.toml"));
        std::fs::write(&path, format!("[{table}]\n{key} = {setting}\n")).unwrap();
        let loaded = Config::load_unchecked(Some(&path)).map_err(|e| e.to_string());
        let _ = std::fs::remove_file(&path);
        loaded
    }

    #[test]
    fn reasoner_workers_keep_their_context_for_five_idle_minutes_unless_told() {
        let _env = ENV.read().unwrap_or_else(|e| e.into_inner());
        assert_eq!(
            Config::default().validator.reasoner_idle(),
            Some(std::time::Duration::from_secs(300))
        );
        for (setting, idle) in [("0", None), ("45", Some(45))] {
            let config = load_setting("validator", "reasoner_idle_secs", setting).unwrap();
            assert_eq!(
                config.validator.reasoner_idle(),
                idle.map(std::time::Duration::from_secs),
                "{setting}"
            );
        }
        let err = load_setting("validator", "reasoner_idle_secs", "-1").unwrap_err();
        assert!(err.contains("reasoner_idle_secs"), "{err}");
    }

    #[test]
    fn the_audit_key_sits_beside_a_sqlite_database_file() {
        let audit = AuditConfig::default();
        for (url, key) in [
            (
                "sqlite://data/p.sqlite?mode=rwc",
                "data/proofgate-audit.key",
            ),
            ("sqlite:///var/lib/p.sqlite", "/var/lib/proofgate-audit.key"),
            ("sqlite://p.sqlite", "proofgate-audit.key"),
            ("sqlite://:memory:", "proofgate-audit.key"),
            ("postgres://u@h/db", "proofgate-audit.key"),
        ] {
            assert_eq!(audit.key_path(url), PathBuf::from(key), "{url}");
        }
    }

    #[test]
    fn database_connections_close_after_a_quiet_minute_unless_told() {
        let _env = ENV.read().unwrap_or_else(|e| e.into_inner());
        assert_eq!(
            Config::default().storage.connection_idle(),
            Some(std::time::Duration::from_secs(60))
        );
        for (setting, idle) in [("0", None), ("5", Some(5))] {
            let config = load_setting("storage", "connection_idle_secs", setting).unwrap();
            assert_eq!(
                config.storage.connection_idle(),
                idle.map(std::time::Duration::from_secs),
                "{setting}"
            );
        }
        let err = load_setting("storage", "connection_idle_secs", "-1").unwrap_err();
        assert!(err.contains("connection_idle_secs"), "{err}");
        // A typo of many digits is refused by name rather than overflowing a timer later.
        let config = load_setting("storage", "connection_idle_secs", "99999999999").unwrap();
        let err = config.check().unwrap_err().to_string();
        assert!(
            err.contains("storage.connection_idle_secs must be at most 31536000"),
            "{err}"
        );
        let mut config = Config::default();
        config.storage.connection_idle_secs = MAX_CONNECTION_IDLE_SECS;
        // Whatever else the default lacks (a policy), the idle time at its bound is accepted.
        let err = config
            .check()
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(!err.contains("connection_idle_secs"), "{err}");
    }

    #[test]
    fn the_server_runs_an_event_loop_per_core_unless_told() {
        let _env = ENV.read().unwrap_or_else(|e| e.into_inner());
        let config = Config::default();
        assert_eq!(config.server.runtime, RuntimeKind::PerCore);
        assert_eq!(
            config.server.serving_threads(),
            std::thread::available_parallelism().unwrap().get()
        );
        let dir = std::env::temp_dir().join(format!("pg-runtime-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let load = |name: &str, toml: &str| {
            let path = dir.join(name);
            std::fs::write(&path, toml).unwrap();
            Config::load_unchecked(Some(&path)).map_err(|e| e.to_string())
        };
        let stealing = load(
            "stealing.toml",
            "[server]\nruntime = \"work-stealing\"\nthreads = 3\n",
        )
        .unwrap();
        let typo = load("typo.toml", "[server]\nruntime = \"per_core\"\n");
        let _ = std::fs::remove_dir_all(&dir);
        assert_eq!(stealing.server.runtime, RuntimeKind::WorkStealing);
        assert_eq!(stealing.server.serving_threads(), 3);
        let err = typo.unwrap_err();
        assert!(
            err.contains("per_core") && err.contains("per-core"),
            "{err}"
        );

        let mut config = Config::default();
        config.server.threads = MAX_SERVING_THREADS + 1;
        let err = config.check().unwrap_err().to_string();
        assert!(err.contains("server.threads must be at most 1024"), "{err}");

        // So is a write time of many digits.
        let mut config = Config::default();
        config.limits.write_timeout_ms = u64::MAX;
        let err = config.check().unwrap_err().to_string();
        assert!(
            err.contains("limits.write_timeout_ms must be at most"),
            "{err}"
        );

        // A header time of many digits is refused by name rather than panicking in hyper's
        // timer on the first connection.
        let mut config = Config::default();
        config.limits.header_timeout_ms = u64::MAX;
        let err = config.check().unwrap_err().to_string();
        assert!(
            err.contains("limits.header_timeout_ms must be at most 86400000"),
            "{err}"
        );
        config.limits.header_timeout_ms = MAX_HEADER_TIMEOUT_MS;
        let err = config
            .check()
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(!err.contains("header_timeout_ms"), "{err}");
    }

    #[test]
    fn unknown_keys_are_rejected_by_name() {
        let _env = ENV.read().unwrap_or_else(|e| e.into_inner());
        let dir = std::env::temp_dir().join(format!("pg-config-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("bad.toml");
        std::fs::write(&path, "[loop]\nmax_iteration = 3\n").unwrap();
        let err = Config::load(Some(&path)).unwrap_err().to_string();
        assert!(err.contains("max_iteration"), "{err}");
    }

    #[test]
    fn environment_overrides_apply_and_unrelated_variables_are_ignored() {
        // One test sets both, so parallel tests never see half of it.
        let _set = ENV.write().unwrap_or_else(|e| e.into_inner());
        std::env::set_var("PROOFGATE_UPSTREAM__MODEL", "from-env");
        std::env::set_var("PROOFGATE_SOMETHING_ELSE", "ignored");
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/proofgate.toml");
        let config = Config::load(Some(&path));
        std::env::remove_var("PROOFGATE_UPSTREAM__MODEL");
        std::env::remove_var("PROOFGATE_SOMETHING_ELSE");
        assert_eq!(config.unwrap().upstream.model.as_deref(), Some("from-env"));
    }

    #[test]
    fn a_guardrail_version_may_be_a_number_in_the_file_or_the_environment() {
        let read = |toml: &str| {
            Figment::new()
                .merge(Toml::string(toml))
                .extract::<BedrockGuardrailConfig>()
                .map_err(|e| e.to_string())
        };
        let v = |toml: &str| read(toml).unwrap().guardrail_version;
        assert_eq!(v("guardrail_id = \"g\"\nguardrail_version = 1"), "1");
        assert_eq!(
            v("guardrail_id = \"g\"\nguardrail_version = \"DRAFT\""),
            "DRAFT"
        );
        let err = read("guardrail_id = \"g\"\nguardrail_version = 1.5").unwrap_err();
        assert!(err.contains("DRAFT"), "{err}");
        std::env::set_var("PROOFGATE_VERSION_TEST__GUARDRAIL_VERSION", "2");
        let from_env = Figment::new()
            .merge(Toml::string(
                "guardrail_id = \"g\"\nguardrail_version = \"DRAFT\"",
            ))
            .merge(Env::prefixed("PROOFGATE_VERSION_TEST__"))
            .extract::<BedrockGuardrailConfig>();
        std::env::remove_var("PROOFGATE_VERSION_TEST__GUARDRAIL_VERSION");
        assert_eq!(from_env.unwrap().guardrail_version, "2");
    }

    #[test]
    fn local_validator_needs_a_policy() {
        let err = Config::default().check().unwrap_err().to_string();
        assert!(err.contains("validator.policy"), "{err}");
    }

    #[test]
    fn more_places_kept_for_other_keys_than_half_is_refused_with_the_most_allowed() {
        let _env = ENV.read().unwrap_or_else(|e| e.into_inner());
        let mut c = Config::load(Some(
            &Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/proofgate.toml"),
        ))
        .unwrap();
        c.limits.max_concurrent_requests = 64;
        c.limits.places_kept_for_other_keys = Some(32);
        assert!(c.check().is_ok());
        c.limits.places_kept_for_other_keys = Some(33);
        let err = c.check().unwrap_err().to_string();
        assert!(
            err.contains("places_kept_for_other_keys is 33") && err.contains("at most 32"),
            "{err}"
        );
    }

    /// Two SQLite databases in one directory share the key but not the signed-size file (a
    /// shared one made the database with the shorter log refuse every commit); PostgreSQL's
    /// replicas of one database share one beside the key.
    #[test]
    fn each_sqlite_database_keeps_its_own_signed_size() {
        let audit = AuditConfig::default();
        let (a, b) = ("sqlite:///srv/pg/a.sqlite", "sqlite:///srv/pg/b.sqlite");
        assert_eq!(audit.key_path(a), audit.key_path(b));
        let (fa, fb) = (
            audit.signed_size_path(&audit.key_path(a), a),
            audit.signed_size_path(&audit.key_path(b), b),
        );
        assert_ne!(fa, fb);
        assert_eq!(fa, PathBuf::from("/srv/pg/a.sqlite.signed-size"));
        // An in-memory database has no file to keep a size beside (and keeps none).
        for memory in [
            "sqlite://:memory:",
            "sqlite://x.db?mode=memory&cache=shared",
        ] {
            assert!(crate::storage::sqlite_in_memory(memory), "{memory}");
        }
        assert!(!crate::storage::sqlite_in_memory("sqlite://x.db?mode=rwc"));
        // PostgreSQL: one per database beside the key, whoever connects (a review: one file
        // for every database made two deployments sharing a directory refuse each other's
        // logs as cut back).
        let pg = "postgres://u:secret@db/proofgate";
        assert_eq!(
            audit.signed_size_path(&audit.key_path(pg), pg),
            PathBuf::from("proofgate-audit.db-5432-proofgate.signed-size")
        );
        let other = "postgres://v@db:5433/proofgate?sslmode=require";
        assert_eq!(
            audit.signed_size_path(&audit.key_path(other), other),
            PathBuf::from("proofgate-audit.db-5433-proofgate.signed-size")
        );
        let socket = "postgres:///proofgate?host=/run/postgresql";
        assert_eq!(
            audit.signed_size_path(&audit.key_path(socket), socket),
            PathBuf::from("proofgate-audit._run_postgresql-5432-proofgate.signed-size")
        );
    }

    #[test]
    fn auth_is_required_and_limits_are_on_by_default() {
        let c = Config::default();
        assert!(c.auth.required);
        assert_eq!(c.limits.max_body_bytes, 1024 * 1024);
        assert!(c.server.cors_origins.is_empty());
        assert!(!format!(
            "{:?}",
            AuthConfig {
                admin_key: Some("secret-admin-key-1234".into()),
                ..AuthConfig::default()
            }
        )
        .contains("secret"));
    }

    /// The defaults the README's limits table and validator section promise, from the type's
    /// default and from a file whose tables are empty (serde's defaults), alike.
    #[test]
    fn the_documented_defaults_hold() {
        let _env = ENV.read().unwrap_or_else(|e| e.into_inner());
        let dir = std::env::temp_dir().join(format!("pg-config-defaults-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("empty-tables.toml");
        std::fs::write(&file, "[limits]\n[validator]\n[auth]\n[audit]\n").unwrap();
        for c in [
            Config::default(),
            Config::load_unchecked(Some(&file)).unwrap(),
        ] {
            let l = &c.limits;
            assert_eq!(l.max_body_bytes, 1024 * 1024);
            assert_eq!(l.max_concurrent_requests, 64);
            assert_eq!(l.places_kept_for_other_keys, None);
            assert_eq!(l.requests_per_minute, 600);
            assert_eq!(l.request_timeout_ms, 300_000);
            assert_eq!(l.max_connections, 1024);
            assert_eq!(l.max_connections_per_address, 256);
            assert!(!l.cap_private_addresses);
            assert_eq!(l.header_timeout_ms, 30_000);
            assert_eq!(l.write_timeout_ms, 30_000);
            assert_eq!(
                (
                    l.max_policy_rules,
                    l.max_policy_variables,
                    l.max_policy_types
                ),
                (500, 200, 50)
            );
            // k = 3 translators, all of which must agree.
            assert_eq!(c.translators().len(), 3);
            assert_eq!(c.validator.threshold, 1.0);
            assert!(c.auth.required);
            assert_eq!(c.failure_mode, FailureMode::Closed);
            assert_eq!(
                c.audit.retention_days, None,
                "trails are kept unless told otherwise"
            );
        }
        std::fs::remove_dir_all(&dir).ok();
    }

    #[test]
    fn a_key_cache_longer_than_ten_minutes_is_refused() {
        let _env = ENV.read().unwrap_or_else(|e| e.into_inner());
        let mut c = Config::load(Some(
            &Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/proofgate.toml"),
        ))
        .unwrap();
        c.auth.key_cache_ms = 600_000;
        assert!(c.check().is_ok());
        c.auth.key_cache_ms = 600_001;
        let err = c.check().unwrap_err().to_string();
        assert!(
            err.contains("auth.key_cache_ms must be at most 600000"),
            "{err}"
        );
    }

    #[test]
    fn a_malformed_admin_key_hash_is_refused() {
        let _env = ENV.read().unwrap_or_else(|e| e.into_inner());
        let mut c = Config::load(Some(
            &Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/proofgate.toml"),
        ))
        .unwrap();
        c.auth.admin_key_sha256 = Some("abc".into());
        let err = c.check().unwrap_err().to_string();
        assert!(err.contains("admin_key_sha256"), "{err}");
        c.auth.admin_key_sha256 = None;
        c.server.cors_origins = vec!["app.example.com/x".into()];
        let err = c.check().unwrap_err().to_string();
        assert!(err.contains("cors_origins"), "{err}");
        c.server.cors_origins = vec!["https://app.example.com".into()];
        assert!(c.check().is_ok());
    }

    /// A review's case: a password in an endpoint's address was written into every error that
    /// names the endpoint, and so into failed threads' trails.
    #[test]
    fn credentials_in_an_endpoints_address_are_refused() {
        for (url, ok) in [
            ("https://user:secret@llm.example.com/v1", false),
            ("https://token@llm.example.com/v1", false),
            ("https://llm.example.com/v1", true),
            ("http://127.0.0.1:8000/v1", true),
        ] {
            let mut c = Config::default();
            c.upstream.base_url = url.into();
            let err = c.check().err().map(|e| e.to_string()).unwrap_or_default();
            assert_eq!(
                !err.contains("base_url holds a user name or password"),
                ok,
                "{url}: {err}"
            );
            let mut c = Config::default();
            c.validator.translators = vec![LlmEndpoint {
                base_url: url.into(),
                ..LlmEndpoint::default()
            }];
            let err = c.check().err().map(|e| e.to_string()).unwrap_or_default();
            assert_eq!(
                !err.contains("base_url holds a user name or password"),
                ok,
                "{url}: {err}"
            );
            assert!(!err.contains("secret"), "{err}");
        }
    }

    /// Held to read (`load_text`) or to set `PROOFGATE_*` variables, so that a test's
    /// variable never reaches another's load.
    static ENV: std::sync::RwLock<()> = std::sync::RwLock::new(());

    /// Loads (and checks, when `checked`) `text` as a config file of its own.
    fn load_text(text: &str, checked: bool) -> Result<Config, String> {
        let _env = ENV.read().unwrap_or_else(|e| e.into_inner());
        static N: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let dir = std::env::temp_dir().join(format!("pg-text-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join(format!("config-{n}.toml"));
        std::fs::write(&path, text).unwrap();
        let loaded = if checked {
            Config::load(Some(&path))
        } else {
            Config::load_unchecked(Some(&path))
        };
        let _ = std::fs::remove_file(&path);
        loaded.map_err(|e| e.to_string())
    }

    const LOCAL: &str = "[validator]\nkind = \"local\"\npolicy = \"p.json\"\n";

    #[test]
    fn an_endpoint_table_without_base_url_is_the_upstreams_endpoint() {
        let upstream =
            "[upstream]\nbase_url = \"http://vllm.internal:8000/v1\"\napi_key = \"up-key\"\n\
                        timeout_ms = 5000\n";
        // A rewriter naming only its model: the upstream's address, key and settings.
        let c = load_text(
            &format!("{upstream}[rewriter]\nmodel = \"llama-70b\"\n"),
            false,
        )
        .unwrap();
        let r = c.rewriter();
        assert_eq!(r.base_url, "http://vllm.internal:8000/v1");
        assert_eq!(r.api_key.as_deref(), Some("up-key"));
        assert_eq!(r.timeout_ms, 5000);
        assert_eq!(r.model.as_deref(), Some("llama-70b"));
        assert!(c.translators().iter().all(|t| t.base_url == r.base_url));
        // Listed translators likewise, each on its own.
        let c = load_text(
            &format!(
                "{upstream}[[validator.translators]]\nmodel = \"a\"\n\
                 [[validator.translators]]\nbase_url = \"http://other:1/v1\"\nmodel = \"b\"\n"
            ),
            false,
        )
        .unwrap();
        let t = c.translators();
        assert_eq!(t[0].base_url, "http://vllm.internal:8000/v1");
        assert_eq!(t[0].api_key.as_deref(), Some("up-key"));
        assert_eq!(t[1].base_url, "http://other:1/v1");
        assert_eq!(
            t[1].api_key, None,
            "another address never gets the upstream's key"
        );
        // A table with its own address stands alone, as before.
        let c = load_text(
            &format!("{upstream}[rewriter]\nbase_url = \"http://r:1/v1\"\nmodel = \"m\"\n"),
            false,
        )
        .unwrap();
        assert_eq!(c.rewriter().api_key, None);
        assert_eq!(c.rewriter().timeout_ms, default_llm_timeout_ms());
        // Another protocol without an address is refused, not sent to the upstream's.
        let err = load_text(
            &format!("{upstream}[rewriter]\nkind = \"anthropic\"\nmodel = \"m\"\n"),
            false,
        )
        .unwrap_err();
        assert!(
            err.contains("rewriter") && err.contains("give its base_url"),
            "{err}"
        );
        // From the environment too.
        let set = ENV.write().unwrap_or_else(|e| e.into_inner());
        std::env::set_var("PROOFGATE_REWRITER__TEMPERATURE", "0.25");
        let path = std::env::temp_dir().join(format!("pg-env-{}.toml", std::process::id()));
        std::fs::write(&path, upstream).unwrap();
        let c = Config::load_unchecked(Some(&path));
        std::env::remove_var("PROOFGATE_REWRITER__TEMPERATURE");
        drop(set);
        let c = c.unwrap();
        assert_eq!(c.rewriter().base_url, "http://vllm.internal:8000/v1");
        assert_eq!(c.rewriter().temperature, Some(0.25));
    }

    #[test]
    fn translators_without_a_model_are_refused_at_start() {
        let err = load_text(LOCAL, true).unwrap_err();
        assert!(
            err.contains("translators have no model") && err.contains("[upstream]"),
            "{err}"
        );
        let err = load_text(&format!("{LOCAL}[rewriter]\ntemperature = 0.0\n"), true).unwrap_err();
        assert!(err.contains("[rewriter]"), "{err}");
        let err = load_text(
            &format!(
                "{LOCAL}[[validator.translators]]\nmodel = \"a\"\n[[validator.translators]]\n\
                 base_url = \"http://t:1/v1\"\n"
            ),
            true,
        )
        .unwrap_err();
        assert!(err.contains("a [[validator.translators]] entry"), "{err}");
        assert!(load_text(&format!("{LOCAL}[upstream]\nmodel = \"m\"\n"), true).is_ok());
        // Amazon Bedrock's validator has no translators.
        assert!(load_text(
            "[validator]\nkind = \"bedrock\"\n[validator.bedrock]\nguardrail_id = \"g\"\n\
             guardrail_version = \"1\"\n",
            true
        )
        .is_ok());
    }

    #[test]
    fn a_translator_count_beside_a_list_of_another_length_is_refused() {
        let one = "[[validator.translators]]\nmodel = \"a\"\n";
        let err = load_text(&format!("{LOCAL}translator_count = 3\n{one}"), false).unwrap_err();
        assert!(
            err.contains("translator_count is 3, but 1 [[validator.translators]]"),
            "{err}"
        );
        assert!(load_text(&format!("{LOCAL}translator_count = 1\n{one}"), false).is_ok());
        assert!(load_text(&format!("{LOCAL}{one}"), false).is_ok());
    }

    #[test]
    fn retention_of_zero_days_is_refused() {
        let mut c = load_text(&format!("{LOCAL}[upstream]\nmodel = \"m\"\n"), true).unwrap();
        c.audit.retention_days = Some(0);
        let err = c.check().unwrap_err().to_string();
        assert!(
            err.contains("retention_days = 0") && err.contains("leave it out"),
            "{err}"
        );
        c.audit.retention_days = Some(1);
        assert!(c.check().is_ok());
        c.rewrite_loop.question_timeout_secs = u64::MAX / 10;
        let err = c.check().unwrap_err().to_string();
        assert!(
            err.contains("loop.question_timeout_secs must be at most"),
            "{err}"
        );
    }

    #[test]
    fn a_query_or_fragment_in_an_endpoints_address_is_refused() {
        for url in [
            "https://gw.example.com/v1?subscription-key=SECRET",
            "https://gw.example.com/v1#SECRET",
        ] {
            let c = Config {
                rewriter: Some(LlmEndpoint {
                    base_url: url.into(),
                    ..LlmEndpoint::default()
                }),
                ..Config::default()
            };
            let err = c.check().unwrap_err().to_string();
            assert!(err.contains("rewriter: base_url has a query"), "{err}");
            assert!(!err.contains("SECRET"), "{err}");
        }
    }

    #[test]
    fn a_table_key_written_with_one_underscore_is_refused() {
        let names = |n: &[&str]| {
            n.iter()
                .map(|s| s.to_string())
                .collect::<Vec<_>>()
                .into_iter()
        };
        let err = misspelt_environment(names(&["PATH", "PROOFGATE_STORAGE_URL"]))
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("PROOFGATE_STORAGE_URL is not a setting")
                && err.contains("PROOFGATE_STORAGE__URL"),
            "{err}"
        );
        assert!(misspelt_environment(names(&["PROOFGATE_AUDIT_SIGNING_KEY"])).is_err());
        // Names that are not settings, and the right spelling, pass.
        assert!(misspelt_environment(names(&[
            "PROOFGATE_STORAGE__URL",
            "PROOFGATE_FAILURE_MODE",
            "PROOFGATE_TEST_POSTGRES_URL",
            "PROOFGATE_LIMITED_KEY",
            "PROOFGATE_KEY",
        ]))
        .is_ok());
    }

    #[test]
    fn a_key_that_is_not_text_is_refused_without_repeating_it() {
        let err = load_text("[auth]\nadmin_key = 98765432109876543\n", false).unwrap_err();
        assert!(
            err.contains("a key must be text") && err.contains("admin_key"),
            "{err}"
        );
        assert!(!err.contains("98765432109876543"), "{err}");
        let err = load_text("[upstream]\napi_key = 12345678901234\n", false).unwrap_err();
        assert!(!err.contains("12345678901234"), "{err}");
        // Text is read as before; a debug print holds no key.
        let c = load_text(
            "[upstream]\napi_key = \"sk-SECRET\"\n[audit]\nsigning_key = \"PRIVATE+KEY\"\n",
            false,
        )
        .unwrap();
        assert_eq!(c.upstream.api_key.as_deref(), Some("sk-SECRET"));
        let debug = format!("{c:?}");
        assert!(
            !debug.contains("sk-SECRET") && !debug.contains("PRIVATE+KEY"),
            "{debug}"
        );
        let c = load_text("[storage]\nurl = \"postgres://u:DBPASS@db/pg\"\n", false).unwrap();
        let debug = format!("{c:?}");
        assert!(
            !debug.contains("DBPASS") && debug.contains("postgres://u:***@db/pg"),
            "{debug}"
        );
    }

    #[test]
    fn a_web_dir_holding_the_key_or_the_database_is_refused() {
        let dir = std::env::temp_dir().join(format!("pg-webdir-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("www")).unwrap();
        let base = format!("{LOCAL}[upstream]\nmodel = \"m\"\n");
        let db = format!(
            "[storage]\nurl = \"sqlite://{}/proofgate.sqlite\"\n",
            dir.display()
        );
        for (web, refused) in [
            (dir.display().to_string(), true),
            (format!("{}/www/..", dir.display()), true),
            (format!("{}/www", dir.display()), false),
        ] {
            let err = load_text(&format!("{base}{db}[server]\nweb_dir = \"{web}\"\n"), true)
                .err()
                .unwrap_or_default();
            assert_eq!(
                err.contains("server.web_dir") && err.contains("the audit signing key"),
                refused,
                "{web}: {err}"
            );
        }
        // A key file named apart, inside the page's directory.
        let err = load_text(
            &format!(
                "{base}[server]\nweb_dir = \"{0}/www\"\n[audit]\nsigning_key_path = \"{0}/www/k\"\n",
                dir.display()
            ),
            true,
        )
        .unwrap_err();
        assert!(err.contains("the audit signing key"), "{err}");
    }

    #[test]
    fn settings_that_weaken_a_guarantee_are_said_at_start() {
        let mut c = Config::default();
        assert!(c.weakened().is_empty(), "{:?}", c.weakened());
        c.failure_mode = FailureMode::Open;
        c.rewrite_loop.allow_forced_tool_calls = true;
        c.validator.system_prompt_facts = true;
        c.validator.threshold = 0.5;
        c.validator.translator_count = 1;
        c.storage.url = "sqlite::memory:".into();
        let said = c.weakened().join("\n");
        for part in [
            "failure_mode = \"open\"",
            "allow_forced_tool_calls",
            "system_prompt_facts",
            "threshold = 0.5",
            "one translator",
            "in-memory database",
        ] {
            assert!(said.contains(part), "{part}: {said}");
        }
        let mut c = Config::default();
        c.validator.kind = ValidatorKind::Bedrock;
        c.validator.bedrock = Some(BedrockGuardrailConfig {
            guardrail_id: "g".into(),
            guardrail_version: "DRAFT".into(),
            region: None,
            endpoint_url: None,
            max_attempts: 1,
            timeout_ms: 1,
            policy_arns: vec![],
        });
        let said = c.weakened().join("\n");
        assert!(
            said.contains("DRAFT") && said.contains("policy_arns is empty"),
            "{said}"
        );
    }

    #[test]
    fn missing_file_is_reported() {
        let _env = ENV.read().unwrap_or_else(|e| e.into_inner());
        let err = Config::load(Some(Path::new("/nonexistent/proofgate.toml")))
            .unwrap_err()
            .to_string();
        assert!(err.contains("does not exist"), "{err}");
    }
}

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
    /// A background thread not saved for this long is taken to be orphaned (its server
    /// stopped mid-step) and is resumed from its last saved step. Keep it above the longest
    /// LLM or validator call.
    #[serde(default = "default_resume_after_ms")]
    pub resume_after_ms: u64,
}

impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig {
            listen: default_listen(),
            web_dir: default_web_dir(),
            maintenance_interval_ms: default_maintenance_interval_ms(),
            resume_after_ms: default_resume_after_ms(),
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

/// An LLM endpoint: OpenAI-compatible HTTP (OpenAI, vLLM, Ollama, llama.cpp) or Bedrock Converse.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LlmEndpoint {
    /// `openai` (any OpenAI-compatible `/chat/completions`) or `bedrock` (Converse API).
    #[serde(default)]
    pub kind: LlmKind,
    /// Base URL including the version prefix, e.g. `https://api.openai.com/v1`.
    #[serde(default = "default_base_url")]
    pub base_url: String,
    /// Bearer token; when unset, the client's own `Authorization` header is passed through.
    #[serde(default)]
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
    /// Amazon Bedrock guardrail, for `bedrock`.
    #[serde(default)]
    pub bedrock: Option<BedrockGuardrailConfig>,
}

impl Default for ValidatorConfig {
    fn default() -> Self {
        ValidatorConfig {
            kind: ValidatorKind::default(),
            policy: None,
            translators: Vec::new(),
            translator_count: default_translator_count(),
            threshold: default_threshold(),
            solver_timeout_ms: default_solver_timeout_ms(),
            repair_attempts: default_repair_attempts(),
            bedrock: None,
        }
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
}

fn default_max_attempts() -> u32 {
    4
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
}

impl Default for LoopConfig {
    fn default() -> Self {
        LoopConfig {
            max_iterations: default_max_iterations(),
            allow_questions: true,
            question_timeout_secs: default_question_timeout_secs(),
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
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StorageConfig {
    /// `sqlite://FILE` (created if missing) or `postgres://...`.
    #[serde(default = "default_storage_url")]
    pub url: String,
    /// Threads untouched for this long are deleted (with their trails).
    #[serde(default = "default_thread_ttl_secs")]
    pub thread_ttl_secs: u64,
}

impl Default for StorageConfig {
    fn default() -> Self {
        StorageConfig {
            url: default_storage_url(),
            thread_ttl_secs: default_thread_ttl_secs(),
        }
    }
}

fn default_storage_url() -> String {
    "sqlite://proofgate.sqlite".into()
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
        let mut fig = Figment::from(Serialized::defaults(Config::default()));
        if let Some(file) = file {
            if !file.exists() {
                return Err(ConfigError::Inconsistent(format!(
                    "config file {} does not exist",
                    file.display()
                )));
            }
            fig = fig.merge(Toml::file(file));
        }
        // Only PROOFGATE_<SECTION>__<KEY> and the top-level PROOFGATE_FAILURE_MODE configure
        // the server; other PROOFGATE_* variables (test settings, CLI keys) are not its own.
        let env = Env::prefixed("PROOFGATE_")
            .filter(|k| {
                k.as_str().contains("__") || k.as_str().eq_ignore_ascii_case("failure_mode")
            })
            .split("__");
        Ok(fig.merge(env).extract().map_err(Box::new)?)
    }

    /// Cross-field checks a type cannot express.
    pub fn check(&self) -> Result<(), ConfigError> {
        let bad = |m: String| Err(ConfigError::Inconsistent(m));
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
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/proofgate.toml");
        let config = Config::load(Some(&path)).unwrap();
        assert_eq!(config.validator.kind, ValidatorKind::Local);
        assert_eq!(config.failure_mode, FailureMode::Closed);
        assert_eq!(config.translators().len(), 3);
    }

    #[test]
    fn unknown_keys_are_rejected_by_name() {
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
        std::env::set_var("PROOFGATE_UPSTREAM__MODEL", "from-env");
        std::env::set_var("PROOFGATE_SOMETHING_ELSE", "ignored");
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/proofgate.toml");
        let config = Config::load(Some(&path));
        std::env::remove_var("PROOFGATE_UPSTREAM__MODEL");
        std::env::remove_var("PROOFGATE_SOMETHING_ELSE");
        assert_eq!(config.unwrap().upstream.model.as_deref(), Some("from-env"));
    }

    #[test]
    fn local_validator_needs_a_policy() {
        let err = Config::default().check().unwrap_err().to_string();
        assert!(err.contains("validator.policy"), "{err}");
    }

    #[test]
    fn missing_file_is_reported() {
        let err = Config::load(Some(Path::new("/nonexistent/proofgate.toml")))
            .unwrap_err()
            .to_string();
        assert!(err.contains("does not exist"), "{err}");
    }
}

//! The running proxy's shared state, and the driver that runs a core `Thread`: it performs the
//! effects the thread asks for (LLM calls, validations) and feeds the results back. Every
//! decision is the thread's; this only moves bytes and measures waits.

use crate::config::{Config, FailureMode, RewriterContext, ValidatorKind};
use crate::llm::{ChatMessage, LlmClient};
use crate::metrics::{Metrics, Stage};
use crate::storage::{Store, StoredThread};
use crate::validator::{LocalValidator, Validator};
use proofgate_core::audit::policy_document::{policy_document_of, referenced_policy_document};
use proofgate_core::audit::PolicyDocuments;
use proofgate_core::policy::{PolicyDefinition, PolicyModel};
use proofgate_core::thread::{FollowUpQuestions, Phase, PreparedConfig};
use proofgate_core::{Effect, Input, PolicyContext, Thread, ThreadConfig};
use proofgate_reasoner::CheckOptions;
use serde_json::Value;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// Why the proxy could not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// A file could not be read or parsed.
    #[error("{path}: {problem}")]
    File {
        /// The file.
        path: String,
        /// What was wrong.
        problem: String,
    },
    /// Anything else, with a message that says what.
    #[error("{0}")]
    Other(String),
}

/// Milliseconds since the epoch.
pub fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
        .unwrap_or(0)
}

/// The policy as the rewriting LLM sees it: rules with their English, variables with meaning.
pub fn policy_context(model: &PolicyModel) -> PolicyContext {
    model.prompt_context()
}

/// Loads and checks a policy file. Findings cite `arn` as `policyVersionArn`, or without one
/// an ARN-shaped name from the content hash (ApplyGuardrail clients expect AWS's pattern).
pub fn load_policy(path: &std::path::Path, arn: Option<String>) -> Result<PolicyModel, StartError> {
    let file_err = |problem: String| StartError::File {
        path: path.display().to_string(),
        problem,
    };
    let text = std::fs::read_to_string(path).map_err(|e| file_err(e.to_string()))?;
    let def = PolicyDefinition::from_json(&text).map_err(|e| file_err(e.to_string()))?;
    let arn = arn.unwrap_or_else(|| def.local_version_arn());
    PolicyModel::from_definition(def, Some(arn)).map_err(|e| file_err(e.to_string()))
}

/// Refuses a policy whose rules contradict each other: every question under it is IMPOSSIBLE,
/// whatever the user said, and the rewriter's explanation (that the user's facts contradict
/// the policy) would be confirmed by the same contradiction and sent out. Serving it would
/// answer every question with a false explanation.
///
/// Checked by `proofgate policy consistent` in a process of its own when this is the proofgate
/// binary: Z3 keeps about 20 MB of a context's memory after it is freed, which an idle server
/// held for its whole life (its own reasoner workers make their contexts under load).
fn refuse_contradictory(
    model: &PolicyModel,
    path: &std::path::Path,
    options: &CheckOptions,
) -> Result<(), StartError> {
    let contradictory = |rules: Vec<String>| {
        StartError::Other(format!(
            "the policy's rules {} contradict each other: no situation satisfies them all, so \
             every question would be IMPOSSIBLE whatever the user says; fix the policy \
             (`proofgate policy lint` names them)",
            rules.join(", ")
        ))
    };
    let gave_up = || {
        tracing::warn!(
            "could not decide within the solver's time limit whether the policy's rules are \
             consistent: a contradiction among them would make every question IMPOSSIBLE"
        )
    };
    let exe = std::env::current_exe().ok().filter(|e| {
        e.file_stem()
            .is_some_and(|n| n.to_string_lossy() == "proofgate")
    });
    let Some(exe) = exe else {
        // Not the binary (a test of this library): in this process.
        let reasoner = proofgate_reasoner::Reasoner::new(model, options.clone())
            .map_err(|e| StartError::Other(format!("the policy: {e}")))?;
        return match reasoner.contradictory_rules() {
            Ok(None) => Ok(()),
            Ok(Some(rules)) => Err(contradictory(rules)),
            Err(_) => {
                gave_up();
                Ok(())
            }
        };
    };
    let out = std::process::Command::new(exe)
        .args(["policy", "consistent", "--timeout-ms"])
        .arg(options.timeout_ms.to_string())
        .arg(path)
        .output()
        .map_err(|e| StartError::Other(format!("checking the policy's consistency: {e}")))?;
    let said: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
    match (out.status.code(), &said["consistent"]) {
        (Some(0), serde_json::Value::Bool(true)) => Ok(()),
        (Some(1), serde_json::Value::Bool(false)) => Err(contradictory(
            serde_json::from_value(said["contradictoryRules"].clone()).unwrap_or_default(),
        )),
        (Some(3), serde_json::Value::Null) => {
            gave_up();
            Ok(())
        }
        _ => Err(StartError::Other(format!(
            "checking the policy's consistency failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        ))),
    }
}

/// Everything a request handler needs.
pub struct App {
    /// The configuration.
    pub config: Config,
    /// Threads and audit trails.
    pub store: Store,
    /// Prometheus metrics.
    pub metrics: Metrics,
    /// The chatbot's LLM.
    pub upstream: LlmClient,
    /// The rewriting LLM.
    pub rewriter: LlmClient,
    /// The validator.
    pub validator: Validator,
    /// The policy, when one is configured (always for the local validator).
    pub policy: Option<Arc<PolicyModel>>,
    /// Every new thread's configuration, prepared once: its policy document's name and its
    /// vocabulary model are not computed again for each thread.
    pub thread_config: PreparedConfig,
    /// The policy document of `thread_config`, which every new trail names (stored once, at
    /// start); older versions' documents are read from the store when a trail names one.
    pub policy_documents: PolicyDocuments,
    /// The signed, append-only log of every trail's head.
    pub log: Arc<crate::audit_log::TransparencyLog>,
    /// Group commit of threads, records and leaves.
    pub journal: crate::journal::Journal,
    /// API keys read from the storage in the last moments.
    pub keys: crate::key_cache::KeyCache,
    /// Threads this process is driving (never resumed as orphans).
    pub live: crate::live_threads::LiveThreads,
    /// The server's limits and their counters (requests in flight, rates), which threads run
    /// in the background are held to as well.
    pub limits: Arc<crate::server::limits::Limits>,
}

impl App {
    /// Connects storage, loads the policy into Z3 and builds the clients.
    pub async fn start(config: Config) -> Result<App, StartError> {
        let other = |e: &dyn std::fmt::Display| StartError::Other(e.to_string());
        if config.storage.sqlite_synchronous == crate::storage::SqliteSync::Normal
            && config.storage.url.starts_with("sqlite:")
        {
            tracing::warn!(
                "storage.sqlite_synchronous = \"normal\": a power loss can lose the last \
                 commits, and with them the trails of answers already given"
            );
        }
        let store = Store::connect_with(
            &config.storage.url,
            config.storage.sqlite_synchronous,
            config.storage.connection_idle(),
        )
        .await
        .map_err(|e| other(&e))?;
        let key_path = config.audit.key_path(&config.storage.url);
        let key = crate::audit_log::AuditKey::load_or_create_for(
            &store,
            config.audit.signing_key.as_deref(),
            &key_path,
            config.audit.key_name(),
        )
        .await
        .map_err(|e| other(&e))?;
        // Key rows this server's seal does not hold are refused: said at start, since after an
        // upgrade every key made before rows were sealed is one of them.
        let keys = store
            .keys_sealed(key.key_seal())
            .await
            .map_err(|e| other(&e))?;
        let named = |state: crate::keys::SealState| -> Vec<String> {
            keys.iter()
                .filter(|(k, s)| *s == state && k.revoked_at.is_none())
                .map(|(k, _)| format!("{} ({:?})", k.id, k.name))
                .collect()
        };
        let (missing, invalid) = (
            named(crate::keys::SealState::Missing),
            named(crate::keys::SealState::Invalid),
        );
        if !missing.is_empty() {
            tracing::warn!(
                "{} API key(s) are refused: their rows have no seal (made before key rows were \
                 sealed, or the seal was removed in the database, which makes nothing else the \
                 row says trustworthy): {}. Make new keys, and revoke these",
                missing.len(),
                missing.join(", ")
            );
        }
        if !invalid.is_empty() {
            tracing::warn!(
                "{} API key(s) are refused: their rows' seals do not hold (changed in the database \
                 since they were sealed, or sealed with another signing key): {}. Make new keys",
                invalid.len(),
                invalid.join(", ")
            );
        }
        let signed_size = config
            .audit
            .signed_size_path(&key_path, &config.storage.url);
        let legacy = crate::config::AuditConfig::shared_signed_size_path(&key_path);
        let adopt = config.audit.signed_size_path.is_none()
            && signed_size != legacy
            && !signed_size.exists()
            && legacy.exists();
        let log =
            crate::audit_log::TransparencyLog::new(config.audit.log_origin().to_string(), key);
        // An in-memory database's log ends with the process: no size outlives it.
        let log = if config.audit.signed_size_path.is_none()
            && crate::storage::sqlite_in_memory(&config.storage.url)
        {
            log
        } else {
            log.with_signed_high_file(signed_size)
                .map_err(|e| other(&e))?
        };
        let log = Arc::new(log);
        if adopt {
            // A SQLite database's file used to be the key's, which every database in the
            // directory shared: taken over when it is this log's, and refused when it is not
            // and no other database sits there (then this log was cut back or rewritten).
            // PostgreSQL's was every database's beside the key too, and which database wrote
            // it cannot be told: one not this log's is left (logged), not refused.
            let ours = crate::storage::sqlite_file(&config.storage.url).map(std::path::Path::new);
            let others = ours.is_none() || other_sqlite_databases_beside(&legacy, ours);
            log.adopt_signed_size(&store, &legacy, others)
                .await
                .map_err(|e| other(&e))?;
        }
        log.check_not_cut_back(&store)
            .await
            .map_err(|e| other(&e))?;
        tokio::spawn(crate::audit_log::TransparencyLog::keep_appended_size(
            Arc::downgrade(&log),
        ));
        let journal = crate::journal::Journal::start(store.clone(), log.clone());
        let policy = match &config.validator.policy {
            Some(p) => Some(Arc::new(load_policy(
                p,
                config.validator.policy_arn.clone(),
            )?)),
            None => None,
        };
        let metrics = Metrics::new();
        let upstream = LlmClient::new(config.upstream.clone())
            .await
            .map_err(|e| other(&e))?
            .counting_retries(metrics.retry_counter("upstream"));
        let rewriter = LlmClient::new(config.rewriter().clone())
            .await
            .map_err(|e| other(&e))?
            .counting_retries(metrics.retry_counter("rewriter"));
        let validator = match config.validator.kind {
            ValidatorKind::Local => {
                let model = policy.clone().ok_or_else(|| {
                    StartError::Other("the local validator needs validator.policy".into())
                })?;
                let mut translators = Vec::new();
                for t in config.translators() {
                    translators.push(
                        LlmClient::new(t)
                            .await
                            .map_err(|e| other(&e))?
                            .counting_retries(metrics.retry_counter("translator")),
                    );
                }
                let options = CheckOptions {
                    timeout_ms: u32::try_from(config.validator.solver_timeout_ms)
                        .unwrap_or(u32::MAX),
                    confidence_threshold: config.validator.threshold,
                    ..CheckOptions::default()
                };
                if let Some(path) = config.validator.policy.as_deref() {
                    refuse_contradictory(&model, path, &options)?;
                }
                Validator::Local(Box::new(
                    LocalValidator::new(
                        model,
                        translators,
                        config.validator.repair_attempts,
                        options,
                        config.validator.reasoner_workers(
                            std::thread::available_parallelism().map_or(2, |n| n.get()),
                        ),
                        config.validator.reasoner_idle(),
                    )
                    .map_err(|e| other(&e))?,
                ))
            }
            #[cfg(feature = "bedrock")]
            ValidatorKind::Bedrock => {
                let g = config.validator.bedrock.clone().ok_or_else(|| {
                    StartError::Other("validator.bedrock is required for kind = bedrock".into())
                })?;
                Validator::Bedrock(
                    crate::bedrock::BedrockGuardrail::new(g)
                        .await
                        .map_err(|e| StartError::Other(e.to_string()))?,
                )
            }
            #[cfg(not(feature = "bedrock"))]
            ValidatorKind::Bedrock => {
                return Err(StartError::Other(
                    "validator.kind = \"bedrock\" needs a proofgate built with the `bedrock` cargo feature (on by default)".into(),
                ))
            }
        };
        #[cfg(feature = "bedrock")]
        if matches!(validator, Validator::Bedrock(_))
            && policy.is_none()
            && config.validator.system_prompt_facts
        {
            tracing::warn!(
                "[validator] system_prompt_facts has no effect with the Bedrock validator and no \
                 local [validator] policy: the premises of Bedrock's VALIDs are held to the \
                 user's and tools' turns only (configure the policy here too)"
            );
        }
        let thread_config = ThreadConfig {
            max_iterations: config.rewrite_loop.max_iterations,
            follow_up_questions: if config.rewrite_loop.allow_questions {
                FollowUpQuestions::Allowed
            } else {
                FollowUpQuestions::Disabled
            },
            question_timeout_ms: Some(config.rewrite_loop.question_timeout_secs * 1000),
            policy: policy.as_deref().map(policy_context).unwrap_or_default(),
            // With the local validator the thread drives the translators itself, so the
            // trail holds their raw replies and replay re-derives the translations.
            translation: match &validator {
                Validator::Local(v) => Some(proofgate_core::translation::TranslationConfig {
                    system_prompt_facts: config.validator.system_prompt_facts,
                    tool_result_facts: config.validator.tool_result_facts,
                    ..v.translation_config().clone()
                }),
                #[cfg(feature = "bedrock")]
                Validator::Bedrock(_) => None,
            },
            // Bedrock chooses its premises; the thread holds them to the conversation with the
            // policy's vocabulary when the operator configured the policy here too.
            // Without a local policy the thread holds them with no vocabulary (and the trail
            // keeps its empty policy itself: no document to name).
            validator_grounding: match (&validator, policy.as_deref()) {
                #[cfg(feature = "bedrock")]
                (Validator::Bedrock(_), Some(policy)) => {
                    Some(proofgate_core::translation::TranslationConfig {
                        system_prompt_facts: config.validator.system_prompt_facts,
                        tool_result_facts: config.validator.tool_result_facts,
                        ..proofgate_core::translation::TranslationConfig::new(
                            policy.definition(),
                            1,
                            0,
                            1.0,
                        )
                    })
                }
                _ => None,
            },
            failure_mode: match config.failure_mode {
                FailureMode::Open => proofgate_core::thread::FailureMode::Open,
                FailureMode::Closed => proofgate_core::thread::FailureMode::Closed,
            },
        };
        // Stored before the first trail can name it: a trail's policy is never only in memory.
        let mut policy_documents = PolicyDocuments::new();
        if let Some((name, document)) = policy_document_of(&thread_config) {
            store
                .put_policy_document(&name, &document)
                .await
                .map_err(|e| other(&e))?;
            policy_documents.insert(document).map_err(|e| other(&e))?;
        }
        let keys = crate::key_cache::KeyCache::new(std::time::Duration::from_millis(
            config.auth.key_cache_ms,
        ));
        Ok(App {
            limits: Arc::new(crate::server::limits::Limits::new(&config.limits)),
            policy_documents,
            keys,
            live: Default::default(),
            config,
            store,
            metrics,
            upstream,
            rewriter,
            validator,
            policy,
            thread_config: PreparedConfig::new(thread_config),
            log,
            journal,
        })
    }

    /// Whether fail-open is configured.
    pub fn fail_open(&self) -> bool {
        self.config.failure_mode == FailureMode::Open
    }
}

/// What went wrong while driving, when the thread ended in ERROR because a call failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FailedCall {
    /// The rewriting LLM.
    Rewriter,
    /// The validator (translators, Z3 or Bedrock).
    Validator,
    /// Not a failure: the validator's guardrail blocked the answer.
    Blocked,
    /// The policy changed while the thread waited ([`policy_changed`]).
    PolicyChanged,
}

/// Time spent waiting on others while driving, to compute proofgate's own overhead.
#[derive(Debug, Default, Clone, Copy)]
pub struct Waits {
    /// Upstream LLM.
    pub upstream: Duration,
    /// Rewriting LLM.
    pub rewriter: Duration,
    /// Validator (translation + solver + guardrail).
    pub validator: Duration,
    /// The call whose failure ended the thread, if any.
    pub failed: Option<FailedCall>,
}

impl Waits {
    /// Everything that was not proofgate's own work.
    pub fn total(&self) -> Duration {
        self.upstream + self.rewriter + self.validator
    }
}

/// A thread the core refused to advance: a bug or a corrupted stored thread.
#[derive(Debug, thiserror::Error)]
#[error("thread {thread}: {source}")]
pub struct DriveError {
    /// The thread id.
    pub thread: String,
    /// The core's error.
    #[source]
    pub source: proofgate_core::ThreadError,
}

/// The local validator, or the input that fails a thread asking for translators or a local
/// check from another validator (only a hand-edited stored thread can).
fn local_validator(app: &App) -> Result<&LocalValidator, Input> {
    match &app.validator {
        Validator::Local(local) => Ok(local),
        #[allow(unreachable_patterns)] // without the `bedrock` feature every validator is local
        _ => Err(Input::Failed {
            reason: "validator: the thread asks for translators or a local check, but the \
                     validator is not local"
                .into(),
            now: now_ms(),
        }),
    }
}

/// A thread started under a version of the policy other than the one the local validator
/// checks against now (it waited across a restart with a new policy): it ends, rather than be
/// translated by the descriptions it was shown and checked against rules it was not (a
/// variable whose meaning changed, "10 = 10%" becoming "0.1 = 10%", made an answer VALID that
/// the new policy does not give, and the trail could pass no audit by either version).
fn policy_changed(app: &App, thread: &Thread) -> Option<Input> {
    let first = thread.audit_trail().first()?;
    let name = proofgate_core::audit::policy_document::referenced_policy_document_of(&first.body)?;
    // The same policy rendered by another version of proofgate (an upgrade) is no change.
    if app.policy_documents.get(name).is_some()
        || proofgate_core::audit::policy_document::same_policy(
            thread.config(),
            app.thread_config.config(),
        )
    {
        return None;
    }
    Some(Input::Failed {
        reason: format!(
            "the policy changed while this thread waited: it was shown the version {name}, and \
             the validator now checks against another, so its answers are not checked (ask \
             again: a new thread is checked against the new version)"
        ),
        now: now_ms(),
    })
}

/// Translator calls in flight while a thread translates.
type InFlight = futures::stream::FuturesUnordered<
    std::pin::Pin<Box<dyn std::future::Future<Output = crate::translate::CallResult> + Send>>,
>;

/// Performs one effect (an LLM call, translator calls, a check or a validation) and returns
/// the input it produced; `None` when the effect is for the caller (questions for the user,
/// or the end). Translator calls run concurrently: each Translate effect adds its calls to
/// `in_flight`, and the next reply to arrive is the input.
async fn perform(
    app: &App,
    scope: &str,
    thread: &Thread,
    effect: &Effect,
    waits: &mut Waits,
    in_flight: &mut InFlight,
) -> Option<Input> {
    use futures::StreamExt;
    Some(match effect {
        Effect::AskUser { .. } | Effect::Finish(_) => return None,
        Effect::Translate { calls } => {
            let local = match local_validator(app) {
                Ok(l) => l,
                Err(input) => return Some(input),
            };
            if in_flight.is_empty() {
                if let Some(input) = policy_changed(app, thread) {
                    waits.failed = Some(FailedCall::PolicyChanged);
                    return Some(input);
                }
            }
            for call in calls.iter().cloned() {
                let clients = local.translators().to_vec();
                in_flight.push(Box::pin(async move {
                    crate::translate::perform_call(&clients, call).await
                }));
            }
            let started = Instant::now();
            let next = in_flight.next().await;
            let took = started.elapsed();
            waits.validator += took;
            app.metrics.observe(Stage::Translation, took);
            match next {
                Some(result) => result.into_input(now_ms()),
                None => Input::Failed {
                    reason: "validator: no translator call is in flight".into(),
                    now: now_ms(),
                },
            }
        }
        Effect::Check { translations, .. } => {
            let local = match local_validator(app) {
                Ok(l) => l,
                Err(input) => return Some(input),
            };
            if let Some(input) = policy_changed(app, thread) {
                waits.failed = Some(FailedCall::PolicyChanged);
                return Some(input);
            }
            let started = Instant::now();
            let result = local
                .check(&cache_scope(scope, thread), translations.clone())
                .await;
            waits.validator += started.elapsed();
            validated(app, result, waits)
        }
        Effect::CallLlm { prompt, .. } => {
            // Not a rewrite that could never be checked.
            if matches!(app.validator, Validator::Local(_)) {
                if let Some(input) = policy_changed(app, thread) {
                    waits.failed = Some(FailedCall::PolicyChanged);
                    return Some(input);
                }
            }
            let started = Instant::now();
            // In the app's voice: the app's own request plus one message with the findings.
            let in_app = (app.config.rewriter().context == RewriterContext::App)
                .then(|| thread.app_request())
                .flatten();
            let reply = match in_app {
                Some(request) => {
                    // The model that answered: the upstream's own when it names one. Only to
                    // tell whether the rewriter is another model: a separate rewriter with no
                    // model of its own is called with the client's, as configured.
                    let answered_by = app.config.upstream.model.as_deref().filter(|_| {
                        app.config
                            .rewriter
                            .as_ref()
                            .is_none_or(|r| r.model.is_some())
                    });
                    app.rewriter
                        .complete_in(
                            request,
                            answered_by,
                            &proofgate_core::prompts::in_app_conversation(prompt),
                        )
                        .await
                }
                None => app.rewriter.complete(&[ChatMessage::user(prompt)]).await,
            };
            let took = started.elapsed();
            waits.rewriter += took;
            app.metrics.observe(Stage::Rewriter, took);
            match reply {
                Ok(r) => Input::LlmReplied {
                    text: r.text,
                    model: Some(r.model),
                    now: now_ms(),
                },
                Err(e) => {
                    waits.failed = Some(FailedCall::Rewriter);
                    Input::Failed {
                        reason: format!("rewriting LLM: {e}"),
                        now: now_ms(),
                    }
                }
            }
        }
        Effect::Validate { question, answer } => {
            let started = Instant::now();
            let result = app
                .validator
                .validate(&cache_scope(scope, thread), question, answer)
                .await;
            waits.validator += started.elapsed();
            validated(app, result, waits)
        }
    })
}

/// Records a validation's stage times (translation, Z3, Bedrock) in the metrics; a stage that
/// took no time (not run, or findings from the cache) is not counted.
pub fn observe_validation(app: &App, v: &crate::validator::Validation) {
    for (stage, took) in [
        (Stage::Translation, v.translation_time),
        (Stage::Solver, v.solver_time),
        (Stage::Guardrail, v.guardrail_time),
    ] {
        if !took.is_zero() {
            app.metrics.observe(stage, took);
        }
    }
}

/// The input a validation (or local check) produced, with its stage times recorded.
fn validated(
    app: &App,
    result: Result<crate::validator::Validation, crate::validator::ValidatorError>,
    waits: &mut Waits,
) -> Input {
    match result {
        Ok(v) => {
            observe_validation(app, &v);
            Input::Validated {
                verdict_rules: None,
                findings: v.findings,
                evidence: Some(v.evidence),
                now: now_ms(),
            }
        }
        Err(e) if e.is_blocked() => {
            waits.failed = Some(FailedCall::Blocked);
            Input::Blocked {
                reason: format!("validator: {e}"),
                now: now_ms(),
            }
        }
        Err(e) => {
            waits.failed = Some(FailedCall::Validator);
            Input::Failed {
                reason: format!("validator: {e}"),
                now: now_ms(),
            }
        }
    }
}

fn advance(thread: &mut Thread, input: Input) -> Result<Effect, DriveError> {
    thread.handle(input).map_err(|source| DriveError {
        thread: thread.id().to_string(),
        source,
    })
}

/// Runs the thread from `effect` until it asks the user something or finishes. The caller
/// persists the thread once at the end (the chat endpoint: one write per request).
pub async fn drive(
    app: &App,
    scope: &str,
    thread: &mut Thread,
    mut effect: Effect,
    waits: &mut Waits,
) -> Result<Effect, DriveError> {
    let mut in_flight = InFlight::new();
    while let Some(input) = perform(app, scope, thread, &effect, waits, &mut in_flight).await {
        effect = advance_noted(thread, input, &effect, waits)?;
    }
    Ok(effect)
}

/// Why driving with a save after every step stopped.
#[derive(Debug, thiserror::Error)]
pub enum DurableDriveError {
    /// The core refused an input.
    #[error(transparent)]
    Drive(#[from] DriveError),
    /// A step could not be saved: the loop stops rather than act on an unrecorded step.
    #[error(transparent)]
    Storage(#[from] crate::storage::StorageError),
}

/// Like [`drive`], writing each step ahead of the effect it asks for: once an LLM call or a
/// validation has taken `[storage] write_ahead_after_ms`, the thread's state and new records
/// (with its signed head) are queued to the journal, which commits them while the call is in
/// flight (a faster call's step goes with the next write). A crash loses at most steps that
/// nothing was answered from (the thread resumes from the last committed one); a failed write
/// stops the loop. The terminal step (an answer, questions, an error) is the caller's to store
/// with [`Saver::finish`], which waits until everything is durable, before anything is returned.
pub async fn drive_durably(
    app: &App,
    scope: &str,
    thread: &mut Thread,
    mut effect: Effect,
    waits: &mut Waits,
    saver: &mut Saver,
    deadline: Option<tokio::time::Instant>,
) -> Result<Effect, DurableDriveError> {
    let mut in_flight = InFlight::new();
    let mut key = KeyWatch::new(app);
    loop {
        if matches!(effect, Effect::AskUser { .. } | Effect::Finish(_)) {
            return Ok(effect);
        }
        // Waiting for translator replies already asked for starts no call: its records go
        // with the next write.
        let starts_a_call = !matches!(&effect, Effect::Translate { calls } if calls.is_empty());
        if starts_a_call {
            if let Some(why) = key.stopped(app, scope).await {
                let input = Input::Failed {
                    reason: format!("stopped: {why}"),
                    now: now_ms(),
                };
                effect = advance(thread, input)?;
                continue;
            }
        }
        let call = within(
            deadline,
            perform(app, scope, thread, &effect, waits, &mut in_flight),
        );
        let input = if starts_a_call {
            written_ahead(app, thread, saver, call).await?
        } else {
            call.await
        };
        let Some(input) = input else {
            return Ok(effect);
        };
        effect = advance_noted(thread, input, &effect, waits)?;
    }
}

/// `call`'s input, or past `deadline` (the call dropped, which stops it) a failure saying the
/// time ran out: the thread then ends as any failed call ends it (ERROR, or UNVERIFIED when
/// failing open), recorded and saved, rather than left to be resumed.
async fn within(
    deadline: Option<tokio::time::Instant>,
    call: impl std::future::Future<Output = Option<Input>>,
) -> Option<Input> {
    let Some(deadline) = deadline else {
        return call.await;
    };
    match tokio::time::timeout_at(deadline, call).await {
        Ok(input) => input,
        Err(_) => Some(Input::Failed {
            reason: "the time allowed for one request ([limits] request_timeout_ms) ran out".into(),
            now: now_ms(),
        }),
    }
}

/// Awaits `call`, queueing the thread's step to the journal once the call has taken
/// `[storage] write_ahead_after_ms`: a slow call (an LLM, a remote validator) is written ahead
/// so that a crash during it resumes from this step, while a fast one leaves the step to the
/// request's next write (one commit, one signed head) instead of waiting on a commit of its own.
async fn written_ahead<T>(
    app: &App,
    thread: &Thread,
    saver: &mut Saver,
    call: impl std::future::Future<Output = T>,
) -> Result<T, crate::storage::StorageError> {
    let after = std::time::Duration::from_millis(app.config.storage.write_ahead_after_ms);
    if after.is_zero() {
        saver.save_soon(app, thread, None).await?;
        return Ok(call.await);
    }
    let mut call = std::pin::pin!(call);
    tokio::select! {
        biased;
        done = &mut call => Ok(done),
        () = tokio::time::sleep(after) => {
            saver.save_soon(app, thread, None).await?;
            Ok(call.await)
        }
    }
}

/// Writes one thread's steps through the journal: queued at once, awaited together.
pub struct Saver {
    /// How many of the thread's audit records are queued or stored.
    saved: usize,
    /// Writes not known to be durable yet.
    pending: Vec<crate::journal::Pending>,
    /// The owner to record with the next write (a new thread's first).
    owner: Option<(crate::storage::ThreadOwner, i64)>,
    /// Links the writes: once one fails, the journal refuses the later ones.
    chain: crate::journal::Chain,
    /// Marks the thread as driven here from its first save until the saver is dropped, so the
    /// resumer leaves it alone however long a call takes.
    live: Option<crate::live_threads::LiveGuard>,
    /// Set for a request's thread ([`Saver::ends_if_dropped`]) until its final state is durable.
    ends_if_dropped: Option<Arc<App>>,
}

/// Why a request's thread ended when the request stopped driving it before its end.
pub const ABANDONED: &str = "the request driving this thread ended before the thread did (its \
     client left, its time ran out, or it failed): the rest of the loop would have answered no \
     one";

impl Drop for Saver {
    fn drop(&mut self) {
        let Some(app) = self.ends_if_dropped.take() else {
            return;
        };
        // Never saved: nothing stored for the resumer to finish, and nothing to record.
        let Some(live) = self.live.take() else {
            return;
        };
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let rest = Saver {
            saved: self.saved,
            pending: std::mem::take(&mut self.pending),
            owner: None,
            chain: self.chain.clone(),
            live: Some(live),
            ends_if_dropped: None,
        };
        runtime.spawn(end_abandoned(app, rest));
    }
}

/// Ends, as ERROR, a request's thread that the request stopped driving mid-loop (its client
/// disconnected, or the server dropped its work at the deadline): left `processing`, the
/// resumer would finish it minutes later, calling the LLMs again and signing an answer no one
/// received, and a retry of the request would start a second thread beside it. `rest` holds
/// the request's queued writes, waited for first so the stored thread is the latest, and
/// keeps the thread marked live until this ends.
async fn end_abandoned(app: Arc<App>, mut rest: Saver) {
    let Some(id) = rest.live.as_ref().map(|l| l.id().to_string()) else {
        return;
    };
    let outcome = async {
        // A queued write that failed wrote nothing (each is one transaction): the thread is
        // ended from what is stored, on a fresh chain, since the request's chain refuses every
        // write after a failed one. Before, a storage error left it `processing`, and the
        // resumer later finished it for no one.
        for p in std::mem::take(&mut rest.pending) {
            if let Err(e) = p.wait().await {
                tracing::warn!("thread {id}: a write of the abandoned request failed ({e})");
            }
        }
        rest.chain = crate::journal::Chain::new();
        let Some(stored) = app.store.thread(&id).await? else {
            return Ok(false);
        };
        if stored.status != crate::storage::Unfinished::Processing.as_str() {
            return Ok(false);
        }
        let now = i64::try_from(now_ms()).unwrap_or(i64::MAX);
        if !app.store.claim(&id, stored.updated_at, now).await? {
            return Ok(false);
        }
        let (mut thread, saved) = load_thread(&app, &stored)
            .await
            .map_err(|e| crate::storage::StorageError::Write(format!("loading it: {e}")))?;
        thread
            .handle(Input::Failed {
                reason: ABANDONED.into(),
                now: now_ms(),
            })
            .map_err(|e| crate::storage::StorageError::Write(e.to_string()))?;
        rest.saved = saved;
        rest.finish(&app, &thread, None).await?;
        Ok::<_, crate::storage::StorageError>(true)
    }
    .await;
    match outcome {
        Ok(true) => tracing::info!("thread {id}: ended, its request having stopped driving it"),
        Ok(false) => {}
        Err(e) => tracing::warn!("thread {id}: its request stopped driving it, and ending it failed ({e}); the resumer will finish it"),
    }
}

impl Saver {
    /// For a thread of which `saved` audit records are stored.
    pub fn new(saved: usize) -> Saver {
        Saver {
            saved,
            pending: Vec::new(),
            owner: None,
            chain: crate::journal::Chain::new(),
            live: None,
            ends_if_dropped: None,
        }
    }

    /// For a request's thread: if the saver is dropped before [`Saver::finish`] succeeds (the
    /// request's work dropped at its deadline or when its client left, or an error returned)
    /// after the thread was first saved, the thread is ended as ERROR ([`ABANDONED`]) rather
    /// than left for the resumer to finish for no one.
    pub fn ends_if_dropped(&mut self, app: Arc<App>) {
        self.ends_if_dropped = Some(app);
    }

    /// Queues the thread's state and waits until every write is durable, without ending the
    /// saver's watch (as [`Saver::finish`] does): for a step that must be stored before the
    /// next call.
    pub async fn save_now(
        &mut self,
        app: &App,
        thread: &Thread,
    ) -> Result<(), crate::storage::StorageError> {
        self.save_soon(app, thread, None).await?;
        self.wait_pending().await
    }

    /// Waits for the queued writes one by one, each leaving `pending` only once it is done: a
    /// request dropped while waiting (its deadline, its client gone) leaves the rest there, for
    /// `Drop` to hand to [`end_abandoned`], which waits for them before it ends the thread.
    /// Taken out first, they were dropped unwaited: `end_abandoned` read the thread before
    /// the user's answer was stored, and the thread stayed `processing` for the resumer.
    async fn wait_pending(&mut self) -> Result<(), crate::storage::StorageError> {
        while let Some(p) = self.pending.first_mut() {
            let done = p.wait_in_place().await;
            self.pending.remove(0);
            done?;
        }
        Ok(())
    }

    /// Records `owner` with the next write, i.e. before or with the thread's first save.
    pub fn owned_by(&mut self, owner: crate::storage::ThreadOwner) {
        self.owner = Some((owner, i64::try_from(now_ms()).unwrap_or(i64::MAX)));
    }

    /// Queues the thread's state and its records not queued yet (their head signed for the
    /// log) without waiting; fails if an earlier write already failed.
    pub async fn save_soon(
        &mut self,
        app: &App,
        thread: &Thread,
        conversation_key: Option<String>,
    ) -> Result<(), crate::storage::StorageError> {
        if self.live.is_none() {
            self.live = Some(app.live.hold(thread.id()));
        }
        // One look at each write: a result is taken once, so a failure that arrives between
        // two looks must not be dropped (a later write could then commit past the gap).
        let mut still = Vec::with_capacity(self.pending.len());
        for mut p in self.pending.drain(..) {
            match p.poll_done() {
                Some(Err(e)) => return Err(e),
                Some(Ok(())) => {}
                None => still.push(p),
            }
        }
        self.pending = still;
        let mut write = step_write(app, thread, self.saved, conversation_key, self.owner.take())?;
        write.chain = self.chain.clone();
        self.saved = thread.audit_trail().len();
        self.pending.push(app.journal.submit(write).await);
        Ok(())
    }

    /// Queues the thread's final state for this request and waits until every write is
    /// durable.
    pub async fn finish(
        &mut self,
        app: &App,
        thread: &Thread,
        conversation_key: Option<String>,
    ) -> Result<(), crate::storage::StorageError> {
        self.save_soon(app, thread, conversation_key).await?;
        let mut first_error = None;
        // One by one, each leaving only once done (as in `wait_pending`).
        while let Some(p) = self.pending.first_mut() {
            let done = p.wait_in_place().await;
            self.pending.remove(0);
            if let Err(e) = done {
                first_error.get_or_insert(e);
            }
        }
        if first_error.is_none() {
            self.ends_if_dropped = None;
        }
        first_error.map_or(Ok(()), Err)
    }
}

/// The write for a thread's state and its records from `saved` on, with the new head signed.
fn step_write(
    app: &App,
    thread: &Thread,
    saved: usize,
    conversation_key: Option<String>,
    owner: Option<(crate::storage::ThreadOwner, i64)>,
) -> Result<crate::journal::Write, crate::storage::StorageError> {
    let new = thread.audit_trail().get(saved..).unwrap_or_default();
    let records = new
        .iter()
        .map(|r| {
            serde_json::to_string(r)
                .map(|json| (r.seq, json))
                .map_err(|e| crate::storage::StorageError::Write(format!("audit record: {e}")))
        })
        .collect::<Result<Vec<_>, _>>()?;
    // Sign the new head: the trail as it now ends is the server's word.
    let leaves = match new.last() {
        Some(last) => {
            let statement = proofgate_core::audit::transparency::LogStatement {
                deleted: false,
                thread_id: thread.id().to_string(),
                seq: last.seq,
                head_hash: last.hash.clone(),
            };
            let note = app
                .log
                .key()
                .sign(&statement.text())
                .map_err(|e| crate::storage::StorageError::AuditLog(e.to_string()))?;
            vec![(statement, note)]
        }
        None => Vec::new(),
    };
    Ok(crate::journal::Write {
        owner: owner.map(|(o, at)| (thread.id().to_string(), o, at)),
        thread: Some(to_stored(thread, conversation_key)?),
        records,
        leaves,
        chain: crate::journal::Chain::default(),
    })
}

/// A new thread's id: a UUID whose first 48 bits are the time (version 7), so that a new thread's
/// rows go at the end of every index keyed by thread (threads, owners, audit records, log
/// leaves) instead of a random page of each: a commit writes a few pages, not one per index
/// and thread. The other 74 bits are random; ids were never secrets (every read checks the
/// caller owns the thread).
pub fn new_thread_id() -> String {
    uuid::Uuid::now_v7().to_string()
}

/// A translator failure that ends the thread is the validator's: an endpoint that failed, or
/// (from audit format 13) a round whose last reply left no translator with a usable
/// translation. Taken as the validator's until a later call's failure says otherwise; it is
/// read only when the thread ends as a failure.
/// Feeds `input`, noting a failed call. Findings the core refuses as not fitting the thread
/// (rules its policy does not have, translations they cannot have come from) end the thread
/// as a failed validation, recorded and replayable (ERROR, or UNVERIFIED when failing open):
/// refused alone, they left it waiting in VALIDATE for good, and every request of a
/// guardrail whose policy moved on left one more unfinished trail. The detail goes to the log
/// only: a refusal can quote answer text nothing verified.
fn advance_noted(
    thread: &mut Thread,
    input: Input,
    effect: &Effect,
    waits: &mut Waits,
) -> Result<Effect, DriveError> {
    note_failure(&input, effect, waits);
    let validated = matches!(input, Input::Validated { .. });
    match thread.handle(input) {
        Err(proofgate_core::ThreadError::FindingsMismatch(why)) if validated => {
            tracing::error!(
                "thread {}: the validator's findings do not fit it: {why}",
                thread.id()
            );
            waits.failed = Some(FailedCall::Validator);
            let failed = Input::Failed {
                reason: "validator: its findings do not fit the thread (rules its policy does \
                         not have, or translations they cannot come from); the server's log \
                         says which"
                    .into(),
                now: now_ms(),
            };
            advance(thread, failed)
        }
        other => other.map_err(|source| DriveError {
            thread: thread.id().to_string(),
            source,
        }),
    }
}

fn note_failure(input: &Input, effect: &Effect, waits: &mut Waits) {
    if matches!(
        input,
        Input::TranslatorFailed { .. } | Input::TranslatorReplied { .. }
    ) && matches!(effect, Effect::Translate { .. })
    {
        waits.failed = Some(FailedCall::Validator);
    }
}

/// Like [`drive`], saving every step so that others (the web UI polling
/// `GET /api/threads/{id}`) see its progress, and waiting for the last. `saved` is how many
/// audit records are stored.
pub async fn drive_saving_each_step(
    app: &App,
    scope: &str,
    thread: &mut Thread,
    effect: Effect,
    saved: &mut usize,
    deadline: Option<tokio::time::Instant>,
    conversation_key: Option<String>,
) -> Result<Effect, Box<dyn std::error::Error + Send + Sync>> {
    let mut saver = Saver::new(*saved);
    let effect = drive_durably(
        app,
        scope,
        thread,
        effect,
        &mut Waits::default(),
        &mut saver,
        deadline,
    )
    .await?;
    saver.finish(app, thread, conversation_key).await?;
    *saved = thread.audit_trail().len();
    Ok(effect)
}

/// The findings cache's scope for `thread`, counted under `scope` (its key): the key and the
/// end user the thread was started for, so one key's end users do not share entries either
/// (a hit's speed told one end user that another had been given the same translations).
fn cache_scope(scope: &str, thread: &Thread) -> String {
    use sha2::{Digest, Sha256};
    // The end user's digest, not its name: a name is as long as the client makes it, and the
    // cache keeps a thousand scopes.
    match thread.owner().map(|o| o.end_user).filter(|u| !u.is_empty()) {
        Some(user) => format!(
            "{scope}\u{0}{}",
            hex::encode(Sha256::digest(user.as_bytes()))
        ),
        None => scope.to_string(),
    }
}

/// Why a thread counted under `scope` (see `server::background_scope`) must not go on: its
/// owner's key was revoked, has expired, or is no key (its row gone or not sealed). Its LLM
/// and solver calls would be paid by the operator for a key that no longer works (a review:
/// threads left waiting before a revocation were all continued when their questions timed
/// out). The configured admin key, `anonymous` and threads from before owners were recorded
/// are not stored keys.
pub(crate) async fn owner_stopped(
    app: &App,
    scope: &str,
) -> Result<Option<&'static str>, crate::storage::StorageError> {
    if !scope.starts_with("key_") {
        return Ok(None);
    }
    let now = i64::try_from(now_ms()).unwrap_or(i64::MAX);
    Ok(
        match app.store.key_by_id(scope, app.log.key().key_seal()).await? {
            None => Some("its key is no longer a key of this server"),
            Some(key) if !key.is_active(now) => Some("its key was revoked or has expired"),
            Some(_) => None,
        },
    )
}

/// Whether the key a thread is driven for still works, asked before each call after the
/// first: the key is read again when a key was revoked here since the last read, or the key
/// cache's time has passed (a revocation on another replica), so a request shorter than that
/// reads nothing. A key revoked while its threads ran kept them calling LLMs and solvers for
/// up to a request's time (an access review).
struct KeyWatch {
    generation: u64,
    read_at: std::time::Instant,
    /// Whether the first call was made: the key was checked just before it (the request's
    /// authentication, or the background paths' own check).
    started: bool,
}

impl KeyWatch {
    fn new(app: &App) -> KeyWatch {
        KeyWatch {
            generation: app.keys.generation(),
            read_at: std::time::Instant::now(),
            started: false,
        }
    }

    /// Why the thread must stop, if its key no longer works. A failed read of the key is
    /// logged and taken as working: the next call asks again (a database hiccup must not
    /// end a paying key's request).
    async fn stopped(&mut self, app: &App, scope: &str) -> Option<&'static str> {
        if !std::mem::replace(&mut self.started, true) || !scope.starts_with("key_") {
            return None;
        }
        let generation = app.keys.generation();
        if generation == self.generation && self.read_at.elapsed() < app.keys.ttl() {
            return None;
        }
        match owner_stopped(app, scope).await {
            Ok(why) => {
                self.generation = generation;
                self.read_at = std::time::Instant::now();
                why
            }
            Err(e) => {
                tracing::warn!("the key of a running thread could not be read again: {e}");
                None
            }
        }
    }
}

/// Drives a thread on a task of its own, saving every step (others, such as the web UI
/// polling it, see its progress); a failure is logged and the thread stays as last saved. The
/// work holds `permit`, a place among the requests in flight, until it ends, and has a
/// request's time: past it, the thread ends as a failed call ends it, recorded. The thread is
/// last saved under `conversation_key` (a waiting conversation's, which its user's next
/// message finds).
pub fn drive_in_background(
    app: Arc<App>,
    scope: String,
    mut thread: Thread,
    effect: Effect,
    mut saved: usize,
    permit: crate::server::limits::Permit,
    conversation_key: Option<String>,
) {
    let deadline = tokio::time::Instant::now() + app.limits.deadline();
    tokio::spawn(async move {
        let _permit = permit;
        let driven = drive_saving_each_step(
            &app,
            &scope,
            &mut thread,
            effect,
            &mut saved,
            Some(deadline),
            conversation_key,
        );
        match driven.await {
            Ok(Effect::Finish(o)) => app.metrics.verdict(o.status.as_str(), thread.iterations()),
            Ok(_) => {}
            Err(e) => tracing::error!("thread {}: {e}", thread.id()),
        }
    });
}

/// The status column for a thread.
pub fn status_of(thread: &Thread) -> &'static str {
    match thread.phase() {
        Phase::AwaitingInput => "awaiting_input",
        Phase::Completed => "done",
        Phase::Error => "error",
        _ => "processing",
    }
}

/// Whether the directory of `file` holds a SQLite database other than `ours` (read by its
/// header, whatever its name).
fn other_sqlite_databases_beside(file: &std::path::Path, ours: Option<&std::path::Path>) -> bool {
    use std::io::Read;
    let dir = match file.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => std::path::Path::new("."),
    };
    let ours = ours.and_then(|p| std::fs::canonicalize(p).ok());
    let Ok(entries) = std::fs::read_dir(dir) else {
        return false;
    };
    entries.flatten().any(|e| {
        let path = e.path();
        if !path.is_file() || std::fs::canonicalize(&path).ok() == ours {
            return false;
        }
        let mut header = [0u8; 16];
        std::fs::File::open(&path)
            .and_then(|mut f| f.read_exact(&mut header))
            .is_ok()
            && &header == b"SQLite format 3\0"
    })
}

/// The thread as stored: its JSON without the audit trail, which lives in its own table. A
/// state that cannot be serialized is an error, never a stored `null` (a thread that could not
/// be resumed or shown).
pub fn to_stored(
    thread: &Thread,
    conversation_key: Option<String>,
) -> Result<StoredThread, crate::storage::StorageError> {
    let state = thread.to_json_text_without_trail_or_config().map_err(|e| {
        crate::storage::StorageError::Write(format!("thread {}'s state: {e}", thread.id()))
    })?;
    let now = i64::try_from(now_ms()).unwrap_or(i64::MAX);
    Ok(StoredThread {
        id: thread.id().to_string(),
        status: status_of(thread).to_string(),
        question: thread.question().to_string(),
        conversation_key,
        state,
        created_at: i64::try_from(thread.created_at()).unwrap_or(i64::MAX),
        updated_at: now,
    })
}

/// A thread read back from storage, with its audit trail and the policy documents it may
/// name.
pub fn from_stored(
    stored: &StoredThread,
    trail: Vec<Value>,
    documents: &PolicyDocuments,
) -> Result<Thread, String> {
    let state: Value = serde_json::from_str(&stored.state)
        .map_err(|e| format!("thread {} cannot be resumed: {e}", stored.id))?;
    Thread::from_stored_json(state, trail, documents)
        .map_err(|e| format!("thread {} cannot be resumed: {e}", stored.id))
}

/// The policy documents a trail names: the current policy's from memory (hashed once, at
/// start), an older version's from the store (hashed again as it is read). Empty when the
/// trail names none (format 1, or an empty policy).
pub async fn documents_for<'a>(
    app: &'a App,
    trail: &[Value],
) -> Result<std::borrow::Cow<'a, PolicyDocuments>, String> {
    use std::borrow::Cow;
    let Some(name) = trail.first().and_then(referenced_policy_document) else {
        return Ok(Cow::Owned(PolicyDocuments::new()));
    };
    if app.policy_documents.get(name).is_some() {
        return Ok(Cow::Borrowed(&app.policy_documents));
    }
    let document = app
        .store
        .policy_document(name)
        .await
        .map_err(|e| {
            tracing::error!("reading the policy document {name}: {e}");
            format!("the policy document {name} could not be read (the server's log says why)")
        })?
        .ok_or_else(|| format!("the policy document {name} is not in the store"))?;
    let mut documents = PolicyDocuments::new();
    let stored_as = documents.insert(document)?;
    if stored_as != name {
        return Err(format!(
            "the policy document stored as {name} hashes to {stored_as}: the store was altered"
        ));
    }
    Ok(Cow::Owned(documents))
}

/// The thread to extend (and the number of its stored records), resumed from its stored
/// trail once that is shown to be the one the log signed (see [`checked_trail`]): the
/// thread its trail records, not the stored copy of its state ([`Thread::resumed`]), with the
/// app's request only if its messages are the conversation the trail records
/// ([`check_app_request`]).
///
/// The row and the trail are two reads: a request that continued the thread between them
/// leaves a row that is not the trail's, which is no tampering. Such a difference is read
/// again (a few times, briefly); a trail that keeps growing meanwhile is another request
/// driving the thread, refused as such, and only a difference that stays while the trail
/// stays is reported as the store altered.
pub async fn load_thread(app: &App, stored: &StoredThread) -> Result<(Thread, usize), String> {
    let refused = |e: String| {
        tracing::error!("thread {} cannot be resumed: {e}", stored.id);
        format!("thread {} cannot be resumed: {e}", stored.id)
    };
    // The operator must hear of a failure: someone with the database changed a trail.
    let trail = checked_trail(app, &stored.id).await.map_err(refused)?;
    let documents = documents_for(app, &trail)
        .await
        .map_err(|e| format!("thread {} cannot be resumed: {e}", stored.id))?;
    let mut state = stored.state.clone();
    for attempt in 0..READS_OF_A_CHANGING_THREAD {
        let json = serde_json::to_vec(&trail).map_err(|e| e.to_string())?;
        let differs = match Thread::resumed(&state, &json, &documents) {
            Ok(thread) => {
                check_app_request(&thread).map_err(refused)?;
                return Ok((thread, trail.len()));
            }
            Err(e) if e.contains("stored state differs") => e,
            Err(e) => return Err(refused(e)),
        };
        if attempt + 1 == READS_OF_A_CHANGING_THREAD {
            return Err(refused(differs));
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        let row = app
            .store
            .thread(&stored.id)
            .await
            .map_err(|e| e.to_string())?
            .ok_or_else(|| format!("thread {} is gone", stored.id))?;
        let again = app
            .store
            .audit_trail(&stored.id)
            .await
            .map_err(|e| e.to_string())?;
        if again.len() != trail.len() {
            tracing::warn!(
                "thread {}: another request continued it while this one resumed it",
                stored.id
            );
            return Err(format!(
                "thread {} is being continued by another request: try again when it has \
                 answered",
                stored.id
            ));
        }
        // Only the row is taken again: the trail is the one checked against the log above,
        // and one that changed in place between the reads is not used unchecked.
        if again != trail {
            return Err(refused(
                "its stored trail changed in place between two reads: the store was altered".into(),
            ));
        }
        state = row.state;
    }
    Err(refused(
        "its stored state kept changing while it was read".into(),
    ))
}

/// Reads of a thread whose row and trail differ before the difference counts as tampering.
const READS_OF_A_CHANGING_THREAD: usize = 3;

/// The app's request kept with a thread (no record holds it) must be the request whose
/// conversation the thread's trail records: its messages are what the rewriter is prompted
/// with, and a system prompt written into the database would otherwise steer every rewrite
/// of a resumed thread (whose answers can go out unverified, marked, at the iteration limit or
/// as not covered). Its other members (model parameters) are not bound to the trail.
fn check_app_request(thread: &Thread) -> Result<(), String> {
    let Some(request) = thread.app_request() else {
        return Ok(());
    };
    let recorded = thread.conversation();
    let matches = crate::openai::ChatRequest::parse_stored(request.clone())
        .is_ok_and(|req| req.conversation().as_slice() == recorded);
    if matches {
        Ok(())
    } else {
        Err(
            "its stored app request is not the one whose conversation its trail records: \
             the store was altered"
                .into(),
        )
    }
}

/// [`load_thread`] for a view, which signs nothing: the thread its trail records (replayed),
/// not the stored copy of its state, which no signature covers (an app in background mode takes
/// its answer from this view), and only once the trail passes the same log check as a resume.
/// Without the check, a trail rewritten in the database with its chain rebuilt was shown as the
/// thread until an audit or `log verify` found it.
pub async fn load_thread_to_read(app: &App, stored: &StoredThread) -> Result<Thread, String> {
    let refused = |e: String| {
        tracing::error!("thread {} cannot be read: {e}", stored.id);
        format!("thread {} cannot be read: {e}", stored.id)
    };
    let trail = checked_trail(app, &stored.id).await.map_err(refused)?;
    let documents = documents_for(app, &trail)
        .await
        .map_err(|e| format!("thread {} cannot be read: {e}", stored.id))?;
    if trail.is_empty() {
        // Nothing to replay (no thread is stored without its first record).
        return from_stored(stored, trail, &documents);
    }
    let json = serde_json::to_vec(&trail).map_err(|e| e.to_string())?;
    proofgate_core::audit::rebuild_json_with(&json, &documents).map_err(|f| {
        refused(format!(
            "its stored trail does not replay ({f}): the store was altered"
        ))
    })
}

/// A thread's stored trail, if it is still the one whose heads the log holds: its records chain, and
/// every head logged for the thread is the record at its place (the last one ends it). The
/// server signs a new head on top of whatever trail it loads, so without this a database
/// rewritten from an early record (its chain rebuilt) would be extended, signed and logged as
/// genuine. A trail with records but no logged head, or stored under a thread whose deletion
/// was logged, is refused (see `logged_heads_problem`): the heads are read by the leaves'
/// thread column, which the store holds, so renaming a thread's leaves away must not turn the
/// check off.
///
/// The trail and the heads are read in one statement ([`crate::storage::Store::trail_and_leaves`]):
/// read apart, a request committing to the thread between the two reads left a head past the
/// end of the trail read, which is how a trail cut back looks, and a view polled while a thread
/// was driven failed as tampered.
async fn checked_trail(app: &App, thread_id: &str) -> Result<Vec<Value>, String> {
    let (trail, leaves) = app
        .store
        .trail_and_leaves(thread_id)
        .await
        .map_err(|e| e.to_string())?;
    if !trail.is_empty() {
        let json = serde_json::to_vec(&trail).map_err(|e| e.to_string())?;
        if let Some(f) = proofgate_core::audit::verify_chain_json(&json).failure {
            return Err(format!(
                "its stored trail fails at record {}: {}: the store was altered",
                f.index, f.detail
            ));
        }
    }
    let heads = app.log.heads_of(&leaves).map_err(|e| e.to_string())?;
    if let Some(problem) =
        proofgate_core::audit::transparency::logged_heads_problem(thread_id, &trail, &heads)
    {
        return Err(format!("{problem} (the store was altered)"));
    }
    check_owner(app, thread_id, &trail).await?;
    Ok(trail)
}

/// When a thread was last active by its trail (its last record's `at`, under the hash chain
/// and the signed head), and whether that record ended it, once the trail passes the checks a
/// view makes; `None` for a thread with no record. Retention goes by this, not by the unsigned
/// `updated_at` and `status`.
pub async fn signed_last_activity(
    app: &App,
    thread_id: &str,
) -> Result<Option<(u64, bool)>, String> {
    let trail = checked_trail(app, thread_id).await?;
    Ok(trail.last().and_then(|r| {
        let ended = serde_json::from_value::<proofgate_core::audit::RecordKind>(r["kind"].clone())
            .is_ok_and(|k| k.is_final());
        r["at"].as_u64().map(|at| (at, ended))
    }))
}

/// The owner stored beside a thread, which decides who may read and continue it, must be the
/// one its (checked) trail records: no signature covers the owners' table, so without this
/// someone with the database could hand a thread to another key or end user, whose requests
/// would then read it and have their answers recorded in its signed trail. A trail from
/// before owners were recorded names none, and its stored owner is taken as it is. The stored
/// owner never changes once written, so reading it apart from the trail races with nothing.
async fn check_owner(app: &App, thread_id: &str, trail: &[Value]) -> Result<(), String> {
    let Some(recorded) = proofgate_core::audit::ThreadStarted::owner_in_trail(trail)? else {
        return Ok(());
    };
    let stored = app
        .store
        .owner_of(thread_id)
        .await
        .map_err(|e| e.to_string())?
        .map(proofgate_core::audit::ThreadOwner::from);
    if stored.as_ref() == Some(&recorded) {
        return Ok(());
    }
    // Who they are goes to the operator's log only: the caller may be the one it was handed to.
    tracing::error!("thread {thread_id}: stored owner {stored:?}, recorded owner {recorded:?}");
    Err("its stored owner is not the one its trail records: the store was altered".into())
}

/// Saves the thread and the audit records not saved yet (`saved` of them were), signing and
/// logging the new head, and waits until it is durable.
pub async fn persist(
    app: &App,
    thread: &Thread,
    saved: usize,
    conversation_key: Option<String>,
) -> Result<(), crate::storage::StorageError> {
    Saver::new(saved)
        .finish(app, thread, conversation_key)
        .await
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A wait dropped part way (the request's deadline) leaves the writes not yet done with
    /// the saver, for the abandoned request's end to wait on.
    #[tokio::test]
    async fn writes_not_waited_for_stay_with_the_saver_when_the_wait_is_dropped() {
        let mut saver = Saver::new(0);
        let (first_done, first) = tokio::sync::oneshot::channel();
        let (_second_done, second) = tokio::sync::oneshot::channel();
        saver.pending.push(crate::journal::Pending(first));
        saver.pending.push(crate::journal::Pending(second));
        first_done.send(Ok(())).unwrap();
        let waited =
            tokio::time::timeout(std::time::Duration::from_millis(50), saver.wait_pending()).await;
        assert!(waited.is_err(), "the second write never finished");
        assert_eq!(
            saver.pending.len(),
            1,
            "the unfinished write left the saver"
        );
    }
}

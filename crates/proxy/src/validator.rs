//! Validators: the local reasoner (LLM translators + Z3) or Amazon Bedrock ApplyGuardrail.
//! Both return findings in the ApplyGuardrail shape and the evidence the audit trail keeps.

#[cfg(feature = "bedrock")]
use crate::bedrock::{BedrockGuardrail, GuardrailError};
use crate::llm::LlmClient;
use crate::translate::{translate, TranslateError};
use proofgate_core::policy::PolicyModel;
use proofgate_core::translation::TranslationConfig;
use proofgate_core::Finding;
use proofgate_reasoner::{
    CacheStats, CheckOptions, FindingsCache, FindingsKey, Reasoner, TranslatorOutput,
};
use serde_json::{json, Value};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::oneshot;

/// Why a validation could not be done (the answer is then not verified).
#[derive(Debug, thiserror::Error)]
pub enum ValidatorError {
    /// The translators could not be reached.
    #[error(transparent)]
    Translation(#[from] TranslateError),
    /// The Bedrock guardrail failed.
    #[cfg(feature = "bedrock")]
    #[error(transparent)]
    Guardrail(#[from] GuardrailError),
    /// The reasoner rejected the translations or stopped.
    #[error("local reasoner: {0}")]
    Reasoner(String),
}

impl ValidatorError {
    /// Whether the validator refused the answer rather than failed: its guardrail blocked it.
    pub fn is_blocked(&self) -> bool {
        #[cfg(feature = "bedrock")]
        if let ValidatorError::Guardrail(GuardrailError::Intervened { .. }) = self {
            return true;
        }
        false
    }
}

/// A validation's result.
#[derive(Debug, Clone)]
pub struct Validation {
    /// The findings, ApplyGuardrail-shaped.
    pub findings: Vec<Finding>,
    /// What the audit trail keeps to re-check the findings without the server.
    pub evidence: Value,
    /// Time waiting for translators.
    pub translation_time: Duration,
    /// Time in Z3.
    pub solver_time: Duration,
    /// Time waiting for Bedrock.
    pub guardrail_time: Duration,
}

struct Job {
    translations: Vec<TranslatorOutput>,
    reply: oneshot::Sender<Result<(Vec<Finding>, Duration), String>>,
    /// Set when the caller stops waiting (its request ended): the check then stops too.
    unwanted: Arc<std::sync::atomic::AtomicBool>,
    /// The check panics (tests of the worker's recovery).
    #[cfg(test)]
    panic: bool,
}

/// Worker threads that each own a [`Reasoner`] (Z3 objects are bound to the thread that made
/// them), so the policy is encoded once per worker, not once per request. The job queue is
/// bounded (callers wait for room, and stop waiting when their request ends), and a job whose
/// caller has gone is skipped rather than solved. Findings are kept in a bounded cache shared
/// by the workers, keyed by the policy's content hash and the translations (findings are a
/// pure function of those), so a repeated question costs no solver time. Each caller (API
/// key) has its own entries: a hit's speed must not tell one caller what another asked.
pub struct ReasonerPool {
    jobs: flume::Sender<Job>,
    workers: usize,
    cache: Arc<FindingsCache>,
    policy_hash: String,
    /// The worker threads alive now (their kernel thread ids).
    threads: Arc<Mutex<Vec<i64>>>,
}

/// Queued solver jobs per worker, at most.
const QUEUE_PER_WORKER: usize = 16;

/// Findings kept for repeated questions (each entry's translations are at most 16 KiB).
const CACHED_FINDINGS: usize = 1024;

/// What a worker waits on: the shared queue, and how long it keeps its Z3 context idle.
#[derive(Clone)]
struct Queue {
    jobs: flume::Receiver<Job>,
    /// A worker that has waited this long for a job ends, and its Z3 context with it; a fresh
    /// thread takes its place (`None`: workers keep their context for the proxy's life).
    idle: Option<Duration>,
    threads: Arc<Mutex<Vec<i64>>>,
}

/// What waiting for a job gave.
enum Waited {
    Job(Job),
    /// The worker's idle time passed without a job.
    Idle,
    /// The pool is gone.
    Closed,
}

impl Queue {
    /// The next job. A worker without a Z3 context (`fresh`) has nothing to give back, so it
    /// waits as long as it takes.
    fn wait(&self, fresh: bool) -> Waited {
        let got = match self.idle {
            Some(idle) if !fresh => self.jobs.recv_timeout(idle),
            _ => self
                .jobs
                .recv()
                .map_err(|_| flume::RecvTimeoutError::Disconnected),
        };
        match got {
            Ok(job) => Waited::Job(job),
            Err(flume::RecvTimeoutError::Timeout) => Waited::Idle,
            Err(flume::RecvTimeoutError::Disconnected) => Waited::Closed,
        }
    }
}

/// Why a worker's loop returned.
#[derive(Debug, PartialEq, Eq)]
enum Ended {
    /// The pool is gone, or the policy could not be loaded again.
    Done,
    /// Idle for the pool's idle time: its context should go with its thread.
    Idle,
}

/// The calling thread's kernel id (`/proc/self/task/<id>`); elsewhere than Linux, a number
/// unique in the process.
fn thread_id() -> i64 {
    #[cfg(target_os = "linux")]
    // SAFETY: gettid has no arguments and cannot fail.
    return i64::from(unsafe { libc::gettid() });
    #[cfg(not(target_os = "linux"))]
    {
        static NEXT: std::sync::atomic::AtomicI64 = std::sync::atomic::AtomicI64::new(1);
        NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
    }
}

/// Starts worker slot `i`: a thread that never touches Z3 and runs the slot's worker threads
/// one after the other. A worker idle for the queue's idle time ends: Z3 keeps a context per
/// thread (about 17 MB of term tables, as soon as it exists) until the thread ends, so ending
/// the thread is what gives it back. The slot joins it (its thread-local context is then
/// freed), hands glibc's freed pages back to the kernel (Z3 allocates through glibc, which
/// keeps freed memory for reuse), and starts a fresh worker that loads the policy with its
/// next job.
fn start_worker(
    i: usize,
    model: Arc<PolicyModel>,
    options: CheckOptions,
    queue: Queue,
) -> std::io::Result<()> {
    // The first worker is listed before this returns, so the pool's list never misses it.
    let (listed, is_listed) = std::sync::mpsc::sync_channel::<()>(1);
    std::thread::Builder::new()
        .name(format!("reasoner-{i}-slot"))
        .spawn(move || {
            let mut listed = Some(listed);
            loop {
                let (model, options, queue, listed) =
                    (model.clone(), options.clone(), queue.clone(), listed.take());
                let worker = std::thread::Builder::new()
                    .name(format!("reasoner-{i}"))
                    .spawn(move || {
                        let me = thread_id();
                        if let Ok(mut t) = queue.threads.lock() {
                            t.push(me);
                        }
                        if let Some(l) = listed {
                            let _ = l.send(());
                        }
                        let ended = run_worker(i, &model, &options, |fresh| queue.wait(fresh));
                        if let Ok(mut t) = queue.threads.lock() {
                            t.retain(|&t| t != me);
                        }
                        ended
                    });
                match worker.map(std::thread::JoinHandle::join) {
                    Ok(Ok(Ended::Done)) => return,
                    Ok(Ok(Ended::Idle)) => {
                        crate::memory::give_back_freed_memory();
                        tracing::debug!(
                            "reasoner worker {i} was idle: its Z3 context is released, and the \
                             next check loads the policy on a fresh thread"
                        );
                    }
                    // A panic outside a check (checks catch their own): start afresh.
                    Ok(Err(_)) => {
                        tracing::error!("reasoner worker {i} panicked; starting it again");
                        std::thread::sleep(Duration::from_secs(1));
                    }
                    Err(e) => {
                        tracing::error!("reasoner worker {i} could not start ({e}); retrying");
                        std::thread::sleep(Duration::from_secs(1));
                    }
                }
            }
        })?;
    let _ = is_listed.recv();
    Ok(())
}

impl ReasonerPool {
    /// Starts `workers` worker slots (a slot thread and its worker thread each). Fails if the
    /// policy cannot be loaded into Z3.
    ///
    /// A Z3 context costs about 17 MB (its term tables) as soon as it exists, so none is kept
    /// while the proxy idles: the policy is tried on a thread that ends (its context goes with
    /// it), each worker loads the policy with its first job (some milliseconds, once per
    /// worker), and a worker that has had no job for `idle` ends and is replaced by a fresh
    /// thread that loads the policy with its next job (`None`: workers never end).
    pub fn new(
        model: Arc<PolicyModel>,
        options: CheckOptions,
        workers: usize,
        idle: Option<Duration>,
    ) -> Result<ReasonerPool, ValidatorError> {
        // Load once here so that a policy Z3 rejects fails the start, not the first request.
        std::thread::scope(|scope| {
            std::thread::Builder::new()
                .name("reasoner-load".into())
                .spawn_scoped(scope, || {
                    Reasoner::new(&model, options.clone())
                        .map(drop)
                        .map_err(|e| ValidatorError::Reasoner(e.to_string()))
                })
                .map_err(|e| ValidatorError::Reasoner(format!("starting a thread: {e}")))?
                .join()
                .map_err(|_| ValidatorError::Reasoner("loading the policy panicked".into()))?
        })?;
        let (tx, rx) = flume::bounded::<Job>(workers.max(1) * QUEUE_PER_WORKER);
        let threads = Arc::new(Mutex::new(Vec::new()));
        let queue = Queue {
            jobs: rx,
            idle: idle.filter(|d| !d.is_zero()),
            threads: threads.clone(),
        };
        for i in 0..workers.max(1) {
            start_worker(i, model.clone(), options.clone(), queue.clone())
                .map_err(|e| ValidatorError::Reasoner(format!("starting a worker: {e}")))?;
        }
        Ok(ReasonerPool {
            jobs: tx,
            workers: workers.max(1),
            cache: Arc::new(FindingsCache::new(CACHED_FINDINGS)),
            // Findings cite rules by the version's ARN too, so it is part of the key.
            policy_hash: format!(
                "{} {}",
                model.definition().content_hash(),
                model.version_arn()
            ),
            threads,
        })
    }

    /// Hits and misses of the findings cache.
    pub fn cache_stats(&self) -> CacheStats {
        self.cache.stats()
    }

    /// The kernel thread ids of the worker threads alive now (`/proc/self/task/<id>`).
    pub fn worker_threads(&self) -> Vec<i64> {
        self.threads.lock().map(|t| t.clone()).unwrap_or_default()
    }

    /// Checks k translations for the caller named `scope` (its API key's id); returns the
    /// findings and the solver time (zero for findings from the cache, which only that
    /// caller's earlier checks fill).
    pub async fn validate(
        &self,
        scope: &str,
        translations: Vec<TranslatorOutput>,
    ) -> Result<(Vec<Finding>, Duration), ValidatorError> {
        let key = FindingsKey::new(scope, &self.policy_hash, &translations);
        if let Some(findings) = key.as_ref().and_then(|k| self.cache.get(k)) {
            return Ok((findings, Duration::ZERO));
        }
        let (findings, solver_time) = self.solve(translations).await?;
        if let Some(key) = key {
            self.cache.insert(key, &findings);
        }
        Ok((findings, solver_time))
    }

    async fn solve(
        &self,
        translations: Vec<TranslatorOutput>,
    ) -> Result<(Vec<Finding>, Duration), ValidatorError> {
        self.solve_job(
            translations,
            #[cfg(test)]
            false,
        )
        .await
    }

    async fn solve_job(
        &self,
        translations: Vec<TranslatorOutput>,
        #[cfg(test)] panic: bool,
    ) -> Result<(Vec<Finding>, Duration), ValidatorError> {
        let (reply, rx) = oneshot::channel();
        // Set when this wait is dropped (the request's deadline, its client gone), and only
        // read by then.
        struct Unwanted(Arc<std::sync::atomic::AtomicBool>);
        impl Drop for Unwanted {
            fn drop(&mut self) {
                self.0.store(true, std::sync::atomic::Ordering::Relaxed);
            }
        }
        let unwanted = Unwanted(Arc::default());
        self.jobs
            .send_async(Job {
                translations,
                reply,
                unwanted: unwanted.0.clone(),
                #[cfg(test)]
                panic,
            })
            .await
            .map_err(|_| {
                ValidatorError::Reasoner(
                    "the reasoner workers stopped (they could not load the policy again; the \
                     proxy's log says why): restart the proxy"
                        .into(),
                )
            })?;
        rx.await
            .map_err(|_| {
                ValidatorError::Reasoner(
                    "a reasoner worker stopped during this check (the proxy's log says why); \
                     the answer was not verified"
                        .into(),
                )
            })?
            .map_err(ValidatorError::Reasoner)
    }
}

/// A reasoner worker's loop: loads the policy with its first job, then checks jobs until the
/// queue closes or no job comes for the pool's idle time. A check that panics (a bug in the
/// reasoner or in Z3's bindings) fails its own request with an error, never a verdict, and the
/// worker drops its reasoner and loads the policy again before the next job (the reasoner
/// closes a panicked check's solver scopes itself; what else a panic may have left half-done,
/// in the reasoner or in Z3, goes with it), where a worker that ended instead would shrink the
/// pool for good (every worker gone, every local check fails).
fn run_worker(
    i: usize,
    model: &PolicyModel,
    options: &CheckOptions,
    mut next: impl FnMut(bool) -> Waited,
) -> Ended {
    let mut job = match next(true) {
        Waited::Job(job) => job,
        Waited::Idle => return Ended::Idle,
        Waited::Closed => return Ended::Done,
    };
    let load = || match Reasoner::new(model, options.clone()) {
        Ok(r) => Some(r),
        Err(e) => {
            tracing::error!("reasoner worker {i} could not load the policy: {e}");
            None
        }
    };
    let Some(mut reasoner) = load() else {
        return Ended::Done;
    };
    // One watchdog thread for the worker's checks, not one per check (the first job made the
    // thread's Z3 context, which the watchdog interrupts).
    proofgate_reasoner::with_watchdog(|| {
        // Which groups of rules are consistent (for slicing): once per loaded policy.
        reasoner.warm_up();
        loop {
            // Otherwise the request ended (client gone, deadline passed) while queued.
            if !job.reply.is_closed() {
                let started = Instant::now();
                let checked = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                    #[cfg(test)]
                    if job.panic {
                        panic!("a fault injected by the test");
                    }
                    proofgate_reasoner::unless_unwanted(job.unwanted.clone(), || {
                        reasoner.validate(&job.translations)
                    })
                }));
                match checked {
                    Ok(r) => {
                        let result = r.map(|f| (f, started.elapsed())).map_err(|e| e.to_string());
                        let _ = job.reply.send(result);
                    }
                    Err(panic) => {
                        let what = panic_message(panic.as_ref());
                        tracing::error!(
                            "reasoner worker {i}: a check panicked ({what}); reloading the policy"
                        );
                        // The request is answered first; the reload (tens of milliseconds)
                        // delays only the next job.
                        let failed = format!(
                            "the reasoner failed on this check ({what}); the answer was not \
                             verified. This is a bug in proofgate, logged with the panic; the \
                             next checks run on a freshly loaded reasoner"
                        );
                        let _ = job.reply.send(Err(failed));
                        match load() {
                            Some(fresh) => {
                                reasoner = fresh;
                                reasoner.warm_up();
                            }
                            None => return Ended::Done,
                        }
                    }
                }
            }
            match next(false) {
                Waited::Job(j) => job = j,
                Waited::Idle => return Ended::Idle,
                Waited::Closed => return Ended::Done,
            }
        }
    })
}

/// The text of a panic's payload (`panic!` gives a `&str` or a `String`).
fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    payload
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a panic without a message".into())
}

/// The local validator: LLM translators, then Z3 on the policy model.
pub struct LocalValidator {
    model: Arc<PolicyModel>,
    /// The policy's content hash, for every check's evidence (hashing the policy per check
    /// was 2% of the local validator's CPU).
    content_hash: String,
    /// The Z3 that decides the findings ("Z3 5.4.0.0"), recorded in every check's evidence.
    solver: String,
    translators: Vec<LlmClient>,
    translation: TranslationConfig,
    pool: ReasonerPool,
}

impl LocalValidator {
    /// A validator for `model` with the given translators.
    pub fn new(
        model: Arc<PolicyModel>,
        translators: Vec<LlmClient>,
        repair_attempts: usize,
        options: CheckOptions,
        workers: usize,
        idle: Option<Duration>,
    ) -> Result<LocalValidator, ValidatorError> {
        let translation = TranslationConfig::new(
            model.definition(),
            u32::try_from(translators.len()).unwrap_or(u32::MAX),
            u32::try_from(repair_attempts).unwrap_or(u32::MAX),
            options.confidence_threshold,
        );
        // A Z3 the bindings misread would decide every finding wrongly: refuse to start.
        proofgate_reasoner::check_linked_z3().map_err(ValidatorError::Reasoner)?;
        let pool = ReasonerPool::new(model.clone(), options, workers, idle)?;
        // Which solver decides the findings, in the log of every start and in every check's
        // evidence.
        let solver = format!("Z3 {}", proofgate_reasoner::z3_version());
        tracing::info!("local validator: {solver}, {workers} reasoner worker(s)");
        Ok(LocalValidator {
            content_hash: model.definition().content_hash(),
            solver,
            model,
            translators,
            translation,
            pool,
        })
    }

    /// How many reasoner threads check findings.
    pub fn reasoner_workers(&self) -> usize {
        self.pool.workers
    }

    /// How the thread drives the translators (recorded in every trail).
    pub fn translation_config(&self) -> &TranslationConfig {
        &self.translation
    }

    /// Checks the translators' outputs with Z3 for the caller named `scope` (see
    /// [`ReasonerPool::validate`]): the findings and the evidence the trail keeps.
    pub async fn check(
        &self,
        scope: &str,
        translations: Vec<TranslatorOutput>,
    ) -> Result<Validation, ValidatorError> {
        let (findings, solver_time) = self.pool.validate(scope, translations).await?;
        let evidence = json!({
            "validator": "local",
            "policyVersionArn": self.model.version_arn(),
            "policyContentHash": self.content_hash,
            // Which solver decided, for an auditor who checks again with their own.
            "solver": self.solver,
            "translators": self.translators.len(),
            // The policy's SMT-LIB is not repeated per check: its content hash names it.
            "checks": self.model.recorded_finding_checks(&findings),
        });
        Ok(Validation {
            findings,
            evidence,
            translation_time: Duration::ZERO,
            solver_time,
            guardrail_time: Duration::ZERO,
        })
    }

    /// The translators.
    pub fn translators(&self) -> &[LlmClient] {
        &self.translators
    }

    /// The policy.
    pub fn model(&self) -> &Arc<PolicyModel> {
        &self.model
    }

    /// Translates and checks one question/answer outside a thread (the ApplyGuardrail-
    /// compatible endpoint): the same core translation round, then [`LocalValidator::check`].
    pub async fn validate(
        &self,
        scope: &str,
        question: &str,
        answer: &str,
    ) -> Result<Validation, ValidatorError> {
        let started = Instant::now();
        let translations =
            translate(&self.translators, &self.translation, question, answer).await?;
        let translation_time = started.elapsed();
        let mut v = self.check(scope, translations).await?;
        v.translation_time = translation_time;
        Ok(v)
    }
}

/// The configured validator.
pub enum Validator {
    /// Policy + Z3 (boxed: it is far larger than the Bedrock client's handle).
    Local(Box<LocalValidator>),
    /// Amazon Bedrock ApplyGuardrail.
    #[cfg(feature = "bedrock")]
    Bedrock(BedrockGuardrail),
}

impl Validator {
    /// Validates one question/answer for the caller named `scope` (see
    /// [`ReasonerPool::validate`]).
    pub async fn validate(
        &self,
        scope: &str,
        question: &str,
        answer: &str,
    ) -> Result<Validation, ValidatorError> {
        match self {
            Validator::Local(v) => v.validate(scope, question, answer).await,
            #[cfg(feature = "bedrock")]
            Validator::Bedrock(g) => {
                let started = Instant::now();
                let (findings, raw) = g.validate(question, answer).await?;
                Ok(Validation {
                    findings,
                    evidence: json!({"validator": "bedrock", "guardrail": g.describe(), "response": raw}),
                    translation_time: Duration::ZERO,
                    solver_time: Duration::ZERO,
                    guardrail_time: started.elapsed(),
                })
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proofgate_core::policy::PolicyDefinition;

    const PARK: &str = include_str!("../../../examples/policies/park-admission.json");
    const PARK_T: &str =
        include_str!("../../../examples/policies/park-senior-low-season.translations.json");

    /// A one-worker pool for the park policy, and the shipped park question.
    fn park_pool_and_question() -> (ReasonerPool, Vec<TranslatorOutput>) {
        let model = Arc::new(
            PolicyModel::from_definition(PolicyDefinition::from_json(PARK).unwrap(), None).unwrap(),
        );
        let pool = ReasonerPool::new(model, CheckOptions::default(), 1, None).unwrap();
        (
            pool,
            proofgate_reasoner::parse_translations(PARK_T).unwrap(),
        )
    }

    #[tokio::test]
    async fn a_repeated_question_comes_from_the_cache_unchanged() {
        let (pool, t) = park_pool_and_question();
        let (first, _) = pool.validate("key-a", t.clone()).await.unwrap();
        let (again, time) = pool.validate("key-a", t).await.unwrap();
        assert_eq!(
            serde_json::to_value(&first).unwrap(),
            serde_json::to_value(&again).unwrap()
        );
        assert_eq!(time, Duration::ZERO);
        let stats = pool.cache_stats();
        assert_eq!((stats.hits, stats.misses, stats.entries), (1, 1, 1));
    }

    #[tokio::test]
    async fn another_callers_repeat_is_solved_not_served_from_the_first_callers_entry() {
        let (pool, t) = park_pool_and_question();
        let (first, _) = pool.validate("key-a", t.clone()).await.unwrap();
        // Key B asks what key A asked: solved (its time is the solver's), so B cannot tell
        // from the answer's speed that A asked it.
        let (theirs, time) = pool.validate("key-b", t.clone()).await.unwrap();
        assert!(time > Duration::ZERO, "key B was served key A's entry");
        assert_eq!(
            serde_json::to_value(&first).unwrap(),
            serde_json::to_value(&theirs).unwrap()
        );
        // Each caller's own repeat is a hit.
        for scope in ["key-a", "key-b"] {
            let (_, time) = pool.validate(scope, t.clone()).await.unwrap();
            assert_eq!(time, Duration::ZERO, "{scope}");
        }
        let stats = pool.cache_stats();
        assert_eq!((stats.hits, stats.misses, stats.entries), (2, 2, 2));
    }

    /// Distinct checks of the park policy (a visitor's age), so none comes from the cache.
    fn aged(age: u32) -> Vec<TranslatorOutput> {
        let t = PARK_T.replace(
            "(= totalAdmissionFund 35.4)",
            &format!("(= customerAge {age})"),
        );
        proofgate_reasoner::parse_translations(&t).unwrap()
    }

    /// Whether the kernel still runs a thread of this process.
    fn thread_alive(tid: i64) -> bool {
        std::path::Path::new(&format!("/proc/self/task/{tid}")).exists()
    }

    async fn eventually(what: &str, mut done: impl FnMut() -> bool) {
        let until = Instant::now() + Duration::from_secs(30);
        while !done() {
            assert!(Instant::now() < until, "{what}");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    #[tokio::test]
    async fn an_idle_worker_ends_with_its_z3_context_and_a_fresh_thread_serves_the_next_check() {
        let model = Arc::new(
            PolicyModel::from_definition(PolicyDefinition::from_json(PARK).unwrap(), None).unwrap(),
        );
        // One worker, so every check goes to it; the gaps between checks are a tenth of the
        // idle time.
        let idle = Duration::from_secs(1);
        let pool = ReasonerPool::new(model, CheckOptions::default(), 1, Some(idle)).unwrap();
        let started = pool.worker_threads();
        assert_eq!(started.len(), 1);
        let (first, _) = pool.solve(aged(30)).await.unwrap();
        for age in 31..36 {
            tokio::time::sleep(idle / 10).await;
            pool.solve(aged(age)).await.unwrap();
        }
        assert_eq!(
            pool.worker_threads(),
            started,
            "the worker ended while it had checks"
        );
        // Quiet: the worker ends (its thread, so its Z3 context, is gone from the process) and
        // a fresh thread waits in its place.
        eventually("the worker did not end after its idle time", || {
            let now = pool.worker_threads();
            now.len() == 1 && now != started && !thread_alive(started[0])
        })
        .await;
        // The fresh thread checks with the same findings (solved, not cached).
        let (again, time) = pool.solve(aged(30)).await.unwrap();
        assert!(time > Duration::ZERO);
        assert_eq!(
            serde_json::to_value(&first).unwrap(),
            serde_json::to_value(&again).unwrap()
        );
        // That worker ends in turn; the thread after it never made a context, so it waits for
        // as long as it takes, and serves.
        let checked = pool.worker_threads();
        eventually("the second worker did not end after its idle time", || {
            let now = pool.worker_threads();
            now.len() == 1 && now != checked && !thread_alive(checked[0])
        })
        .await;
        let fresh = pool.worker_threads();
        tokio::time::sleep(idle * 3).await;
        assert_eq!(
            pool.worker_threads(),
            fresh,
            "a worker without a context ended"
        );
        assert!(thread_alive(fresh[0]));
        assert_eq!(pool.solve(aged(31)).await.unwrap().0.len(), first.len());
    }

    /// Findings as JSON without their example scenarios: which model Z3 returns among equally
    /// close ones depends on what its solver did before (a fresh worker and one that has
    /// checked other questions can differ there), the kinds, translations and rules do not.
    fn without_scenarios(findings: &[Finding]) -> Value {
        fn strip(v: &mut Value) {
            match v {
                Value::Object(m) => {
                    m.retain(|k, _| !k.ends_with("Scenario"));
                    m.values_mut().for_each(strip);
                }
                Value::Array(a) => a.iter_mut().for_each(strip),
                _ => {}
            }
        }
        let mut v = serde_json::to_value(findings).unwrap();
        strip(&mut v);
        v
    }

    /// Workers that end between almost every pair of checks (an idle time of a few
    /// milliseconds) while checks keep coming, some at once: no check is lost or answered
    /// twice, and each gets the findings a pool that never ends its workers gives.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn checks_that_arrive_while_workers_end_are_all_answered_with_the_same_findings() {
        let model = Arc::new(
            PolicyModel::from_definition(PolicyDefinition::from_json(PARK).unwrap(), None).unwrap(),
        );
        let steady = ReasonerPool::new(model.clone(), CheckOptions::default(), 1, None).unwrap();
        let ending = Arc::new(
            ReasonerPool::new(
                model,
                CheckOptions::default(),
                2,
                Some(Duration::from_millis(3)),
            )
            .unwrap(),
        );
        let mut expected = Vec::new();
        for age in 60..68 {
            expected.push(without_scenarios(&steady.solve(aged(age)).await.unwrap().0));
        }
        let mut generations = std::collections::BTreeSet::new();
        for round in 0..6u32 {
            // Three checks at once, then a pause about the idle time (varied), so workers end
            // while checks are queued, between checks, and not at all.
            let batch: Vec<_> = (0..3u32)
                .map(|k| {
                    let pool = ending.clone();
                    let age = 60 + (round * 3 + k) % 8;
                    tokio::spawn(async move { (age, pool.solve(aged(age)).await) })
                })
                .collect();
            for handle in batch {
                let (age, result) = handle.await.unwrap();
                let (findings, _) = result.unwrap();
                assert_eq!(
                    without_scenarios(&findings),
                    expected[(age - 60) as usize],
                    "age {age}"
                );
            }
            generations.extend(ending.worker_threads());
            tokio::time::sleep(Duration::from_millis(u64::from(round % 3) * 4)).await;
        }
        assert!(
            generations.len() > 2,
            "the workers never ended between checks: {generations:?}"
        );
    }

    #[tokio::test]
    async fn without_an_idle_time_workers_keep_their_threads() {
        let model = Arc::new(
            PolicyModel::from_definition(PolicyDefinition::from_json(PARK).unwrap(), None).unwrap(),
        );
        let pool = ReasonerPool::new(model, CheckOptions::default(), 1, None).unwrap();
        let started = pool.worker_threads();
        pool.solve(aged(30)).await.unwrap();
        tokio::time::sleep(Duration::from_millis(500)).await;
        assert_eq!(pool.worker_threads(), started);
        assert!(started.iter().all(|t| thread_alive(*t)));
    }

    /// A check whose request ended stops at its next solver call: the worker serves the next
    /// caller at once, instead of running every remaining hard call to its limit (thirty
    /// cubic pairs, each of several calls at 400 ms, held it for half a minute or more).
    #[tokio::test]
    async fn a_check_whose_request_ended_frees_its_worker_for_the_next() {
        let cubes = r#"{"version": "1", "types": [],
            "variables": [
                {"name": "a", "type": "INT", "description": "a"},
                {"name": "b", "type": "INT", "description": "b"},
                {"name": "c", "type": "INT", "description": "c"}],
            "rules": [{"id": "POSITIVEA000", "expression": "(>= a 0)",
                       "alternateExpression": "a is not negative"}]}"#;
        let model = Arc::new(
            PolicyModel::from_definition(PolicyDefinition::from_json(cubes).unwrap(), None)
                .unwrap(),
        );
        let options = CheckOptions {
            timeout_ms: 400,
            ..CheckOptions::default()
        };
        let pool = ReasonerPool::new(model, options, 1, None).unwrap();
        let pairs: Vec<Value> = (0..30)
            .map(|i| {
                json!({
                    "premises": [{"logic": "(and (> a 0) (> b 0) (> c 0))"}],
                    "claims": [{"logic": format!(
                        "(= (+ (* a a a) (* b b b)) (+ (* c c c) {i}))"
                    )}]
                })
            })
            .collect();
        let hard =
            proofgate_reasoner::parse_translations(&json!({ "translations": [pairs] }).to_string())
                .unwrap();
        // The request ends while its check runs.
        let ended =
            tokio::time::timeout(Duration::from_millis(500), pool.solve(hard.clone())).await;
        assert!(
            ended.is_err(),
            "the hard check finished within half a second"
        );
        let easy = proofgate_reasoner::parse_translations(
            &json!({ "translations": [[{
                "premises": [{"logic": "(= a 1)"}],
                "claims": [{"logic": "(>= a 0)"}]
            }]] })
            .to_string(),
        )
        .unwrap();
        let next = tokio::time::timeout(Duration::from_secs(8), pool.solve(easy)).await;
        assert!(
            next.is_ok(),
            "the next check waited behind the abandoned one"
        );
    }

    #[tokio::test]
    async fn a_check_that_panics_fails_alone_and_the_worker_serves_on() {
        let model = Arc::new(
            PolicyModel::from_definition(PolicyDefinition::from_json(PARK).unwrap(), None).unwrap(),
        );
        // One worker: if a panic ended it, nothing would serve the checks after it.
        let pool = ReasonerPool::new(model, CheckOptions::default(), 1, None).unwrap();
        let (before, _) = pool.validate("k", aged(30)).await.unwrap();
        for round in 0..3 {
            let failed = pool.solve_job(aged(40 + round), true).await.unwrap_err();
            assert!(
                failed
                    .to_string()
                    .contains("the reasoner failed on this check")
                    && failed.to_string().contains("a fault injected by the test"),
                "{failed}"
            );
            // The next check runs on a freshly loaded reasoner, with the same findings a
            // reasoner that never panicked gives.
            let (after, time) = pool.solve(aged(30)).await.unwrap();
            assert!(time > Duration::ZERO, "solved, not cached");
            assert_eq!(
                serde_json::to_value(&before).unwrap(),
                serde_json::to_value(&after).unwrap()
            );
        }
    }
}

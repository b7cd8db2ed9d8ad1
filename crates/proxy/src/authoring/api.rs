//! Policy authoring for the HTTP API (`/api/policies/...`): plain async functions over parsed
//! inputs, returning serializable results or an [`AuthoringError`] (whose
//! [`AuthoringError::is_client_error`] tells 4xx from 5xx). Solver work runs on the blocking
//! pool, so the futures are `Send` and never stall the async workers.

use super::formalize::{formalize, FormalizeOptions, Formalized, SpanReport};
use super::test_runner::{run_suite, Translators};
use super::AuthoringError;
use crate::llm::LlmClient;
use proofgate_core::policy::{PolicyDefinition, PolicyModel, PolicyTestSuite};
use proofgate_reasoner::CancelFlag;
use proofgate_reasoner::{
    diff_policies, generate_tests, CheckOptions, GenerateOptions, GenerationNote, LintReport,
    PolicyDiff, TestReport,
};
use serde::{Deserialize, Serialize};

/// Body of `POST /api/policies/lint` and `POST /api/policies/gen-tests`.
#[derive(Debug, Clone, Deserialize)]
pub struct PolicyRequest {
    /// The policy definition (Bedrock JSON).
    pub policy: PolicyDefinition,
}

/// Body of `POST /api/policies/test`.
#[derive(Debug, Clone, Deserialize)]
pub struct TestRequest {
    /// The policy definition.
    pub policy: PolicyDefinition,
    /// The cases.
    pub tests: PolicyTestSuite,
}

/// Body of `POST /api/policies/diff`.
#[derive(Debug, Clone, Deserialize)]
pub struct DiffRequest {
    /// The old version.
    pub old: PolicyDefinition,
    /// The new version.
    pub new: PolicyDefinition,
}

/// Body of `POST /api/policies/formalize`.
#[derive(Debug, Clone, Deserialize)]
pub struct FormalizeRequest {
    /// The policy document (markdown or text).
    pub document: String,
}

/// Result of test generation.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct GeneratedSuite {
    /// The cases, in the `policy test` format.
    pub tests: PolicyTestSuite,
    /// Rules without decisive cases, and why.
    pub notes: Vec<GenerationNote>,
}

fn model(definition: PolicyDefinition) -> Result<PolicyModel, AuthoringError> {
    PolicyModel::from_definition(definition, None)
        .map_err(|e| AuthoringError::Policy(e.to_string()))
}

async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> Result<T, AuthoringError> + Send + 'static,
) -> Result<T, AuthoringError> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|e| AuthoringError::Internal(format!("solver worker: {e}")))?
}

/// Sets its flag when dropped: held by a request's future, it tells the solver job that the
/// client has gone (disconnect or deadline) so the job stops instead of keeping a core busy.
pub struct CancelOnDrop(pub CancelFlag);

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        self.0.cancel();
    }
}

/// `options` with a cancel flag that the returned guard sets when it is dropped.
fn cancellable(mut options: GenerateOptions) -> (GenerateOptions, CancelOnDrop) {
    let flag = options.cancel.clone().unwrap_or_default();
    options.cancel = Some(flag.clone());
    (options, CancelOnDrop(flag))
}

/// Lints a policy: unused names, type errors, contradictions, always-true rules, disjoint
/// groups. A policy with errors is still linted (the errors are issues, not a failure).
pub async fn lint_policy(
    definition: PolicyDefinition,
    options: CheckOptions,
) -> Result<LintReport, AuthoringError> {
    // Dropped with this future when the client goes or its time runs out: the solver stops
    // before the next rule (it went on for every rule, the request's place already given back).
    let cancel = CancelOnDrop(CancelFlag::default());
    let flag = cancel.0.clone();
    blocking(move || Ok(proofgate_reasoner::lint_until(definition, &options, &flag))).await
}

/// Runs test cases against a policy. Natural-language cases need `translators`; without
/// them they are reported as errors in the report.
pub async fn run_tests(
    definition: PolicyDefinition,
    suite: PolicyTestSuite,
    translators: Option<&Translators>,
    options: CheckOptions,
) -> Result<TestReport, AuthoringError> {
    suite.check()?;
    let model = model(definition)?;
    run_suite(&model, &suite, translators, &options).await
}

/// Generates test cases for every rule (symbolic, with Z3).
pub async fn gen_tests(
    definition: PolicyDefinition,
    options: GenerateOptions,
) -> Result<GeneratedSuite, AuthoringError> {
    // Dropped with this future when the client goes: the generation stops at the next rule.
    let (options, _cancel) = cancellable(options);
    blocking(move || {
        let model = model(definition)?;
        let generated = generate_tests(&model, &options)?;
        Ok(GeneratedSuite {
            tests: generated.suite,
            notes: generated.notes,
        })
    })
    .await
}

/// What changed between two versions, with the generated cases whose finding changed.
pub async fn diff(
    old: PolicyDefinition,
    new: PolicyDefinition,
    options: GenerateOptions,
) -> Result<PolicyDiff, AuthoringError> {
    let (options, _cancel) = cancellable(options);
    blocking(move || {
        let old = model(old)?;
        let new = model(new)?;
        Ok(diff_policies(&old, &new, &options))
    })
    .await
}

/// Formalizes a policy document with `client` (one LLM call per span, plus repairs).
pub async fn formalize_document(
    client: &LlmClient,
    document: &str,
    options: FormalizeOptions,
) -> Result<Formalized, AuthoringError> {
    let quiet = |_: &SpanReport| {};
    formalize(client, document, &options, &quiet).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_dropped_request_cancels_its_generation() {
        let (options, guard) = cancellable(GenerateOptions::default());
        drop(guard); // as when the client disconnects or the deadline passes
        let model = model(park()).unwrap();
        assert!(matches!(
            generate_tests(&model, &options),
            Err(proofgate_reasoner::GenerateError::Cancelled)
        ));
    }

    const PARK: &str = include_str!("../../../../examples/policies/park-admission.json");

    fn park() -> PolicyDefinition {
        PolicyDefinition::from_json(PARK).unwrap()
    }

    fn assert_send<T: Send>(_: &T) {}

    #[tokio::test]
    async fn lint_generate_run_and_diff_round_trip() {
        let lint_fut = lint_policy(park(), CheckOptions::default());
        assert_send(&lint_fut);
        assert!(!lint_fut.await.unwrap().has_problems());

        let generated = gen_tests(park(), GenerateOptions::default()).await.unwrap();
        assert!(!generated.tests.tests.is_empty());
        let run = run_tests(
            park(),
            generated.tests.clone(),
            None,
            CheckOptions::default(),
        );
        assert_send(&run);
        let report = run.await.unwrap();
        assert!(report.all_passed());

        let mut new = park();
        new.rules.retain(|r| r.id != "TAX000000000");
        let d = diff(park(), new, GenerateOptions::default()).await.unwrap();
        assert_eq!(d.definition.rules[0].name, "TAX000000000");
        assert!(!d.changed_cases.is_empty());
    }

    #[tokio::test]
    async fn bad_inputs_are_client_errors() {
        let mut broken = park();
        broken.rules[0].expression = "(= baseFee".into();
        let e = gen_tests(broken, GenerateOptions::default())
            .await
            .unwrap_err();
        assert!(e.is_client_error());
        assert!(e.to_string().contains("BASEFEE00000"), "{e}");
        let suite: PolicyTestSuite =
            serde_json::from_str(r#"{"tests": [{"id": "a", "expected": "VALID"}]}"#).unwrap();
        let e = run_tests(park(), suite, None, CheckOptions::default())
            .await
            .unwrap_err();
        assert!(e.is_client_error());
        assert!(e.to_string().contains("no input"), "{e}");
    }
}

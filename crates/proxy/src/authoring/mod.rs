//! Policy authoring (paper §3.1): turning a policy document into a policy model
//! ([`formalize`]) and vetting it with test cases ([`test_runner`]), symbolically generated
//! test cases and version diffs (in `proofgate-reasoner`), from the command line ([`cli`]) and
//! as plain async functions the HTTP API mounts ([`api`]).

pub mod api;
pub mod cli;
pub mod formalize;
pub mod test_runner;

use crate::llm::LlmError;
use proofgate_core::policy::test_suite::TestSuiteError;
use proofgate_reasoner::{GenerateError, LoadError};

/// What an authoring operation failed with.
#[derive(Debug, thiserror::Error)]
pub enum AuthoringError {
    /// The policy is not a valid definition (JSON, schema or rules).
    #[error("invalid policy: {0}")]
    Policy(String),
    /// The test file is not a valid test suite.
    #[error("invalid tests: {0}")]
    Tests(#[from] TestSuiteError),
    /// No tests could be generated (contradictory rules, solver limits).
    #[error("cannot generate tests: {0}")]
    Generate(#[from] GenerateError),
    /// The policy could not be loaded into the solver.
    #[error("cannot load the policy into the solver: {0}")]
    Load(#[from] LoadError),
    /// An LLM call failed.
    #[error(transparent)]
    Llm(#[from] LlmError),
    /// The operation needs an LLM and none is configured.
    #[error("{0}")]
    NoLlm(String),
    /// The policy document has nothing to formalize.
    #[error("the document is empty: nothing to formalize")]
    EmptyDocument,
    /// A worker thread failed (a bug).
    #[error("internal error: {0}")]
    Internal(String),
}

impl AuthoringError {
    /// Whether the caller's input is at fault (HTTP 4xx) rather than a dependency (5xx).
    pub fn is_client_error(&self) -> bool {
        matches!(
            self,
            AuthoringError::Policy(_)
                | AuthoringError::Tests(_)
                | AuthoringError::Generate(_)
                | AuthoringError::NoLlm(_)
                | AuthoringError::EmptyDocument
        )
    }
}

/// Parses a policy definition and builds its model, with every problem in the error.
pub fn load_policy(json: &str) -> Result<proofgate_core::policy::PolicyModel, AuthoringError> {
    let def = proofgate_core::policy::PolicyDefinition::from_json(json)
        .map_err(|e| AuthoringError::Policy(e.to_string()))?;
    proofgate_core::policy::PolicyModel::from_definition(def, None)
        .map_err(|e| AuthoringError::Policy(e.to_string()))
}

//! Running policy test cases that need no LLM (given translations), and judging the findings
//! of any case, so that the CLI, the API and test generation report results the same way.

use crate::check::Reasoner;
use crate::validate::ValidateError;
use proofgate_core::findings::Finding;
use proofgate_core::policy::test_suite::{PolicyTestCase, TestInput};
use proofgate_core::translation::{parse_translations, InputError};
use proofgate_core::verdict::Verdict;
use serde::Serialize;

/// Why a case could not be checked.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum CaseError {
    /// A natural-language case: it needs the LLM translators first.
    #[error("this test has a question and an answer: it needs LLM translators (configure them with --config)")]
    NeedsTranslation,
    /// The case has no input, or more than one.
    #[error("{0}")]
    Input(String),
    /// The given translations are not in the translations format.
    #[error("translations: {0}")]
    Shape(#[from] InputError),
    /// A statement does not parse or type-check against this policy.
    #[error("{0}")]
    Statement(#[from] ValidateError),
}

/// The findings for a case with given translations.
pub fn check_case(
    reasoner: &Reasoner<'_>,
    case: &PolicyTestCase,
) -> Result<Vec<Finding>, CaseError> {
    match case.input().map_err(|e| CaseError::Input(e.to_string()))? {
        TestInput::NaturalLanguage { .. } => Err(CaseError::NeedsTranslation),
        TestInput::Logic(case) => {
            let doc = case
                .translations_document()
                .ok_or_else(|| CaseError::Input("no translations".into()))?;
            let translations = parse_translations(&doc.to_string())?;
            Ok(reasoner.validate(&translations)?)
        }
    }
}

/// How a case ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum CaseStatus {
    /// The expected verdict, with every expected rule cited.
    Passed,
    /// Another verdict, or an expected rule not cited.
    Failed,
    /// The case could not be checked (bad input, LLM unavailable, statement not in the
    /// policy's vocabulary).
    Error,
}

/// The result of one case, for tables and the API.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CaseResult {
    /// The case's id.
    pub id: String,
    /// Passed, failed or error.
    pub status: CaseStatus,
    /// What the case expects.
    pub expected: Verdict,
    /// The aggregate verdict of the findings (absent on error).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub actual: Option<Verdict>,
    /// Expected rules no finding cites.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub missing_rules: Vec<String>,
    /// For generated cases, the rule the case is about.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rule: Option<String>,
    /// Why the case could not be checked.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// The findings (kept for failures, so they can be diagnosed).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub findings: Vec<Finding>,
}

/// Judges a case's findings (or the reason it has none).
pub fn case_result(case: &PolicyTestCase, findings: Result<Vec<Finding>, String>) -> CaseResult {
    let mut result = CaseResult {
        id: case.id.clone(),
        status: CaseStatus::Error,
        expected: case.expected,
        actual: None,
        missing_rules: Vec::new(),
        rule: case.rule.clone(),
        error: None,
        findings: Vec::new(),
    };
    match findings {
        Err(e) => result.error = Some(e),
        Ok(findings) => {
            let j = case.judge(&findings);
            result.actual = Some(j.actual);
            result.missing_rules = j.missing_rules;
            if j.passed {
                result.status = CaseStatus::Passed;
            } else {
                result.status = CaseStatus::Failed;
                result.findings = findings;
            }
        }
    }
    result
}

/// Every case's result, with counts.
#[derive(Debug, Clone, PartialEq, Default, Serialize)]
pub struct TestReport {
    /// Results in case order.
    pub results: Vec<CaseResult>,
    /// How many passed.
    pub passed: usize,
    /// How many failed.
    pub failed: usize,
    /// How many could not be checked.
    pub errors: usize,
}

impl TestReport {
    /// A report over `results`.
    pub fn new(results: Vec<CaseResult>) -> TestReport {
        let count = |s| results.iter().filter(|r| r.status == s).count();
        TestReport {
            passed: count(CaseStatus::Passed),
            failed: count(CaseStatus::Failed),
            errors: count(CaseStatus::Error),
            results,
        }
    }

    /// Whether every case passed.
    pub fn all_passed(&self) -> bool {
        self.failed == 0 && self.errors == 0
    }
}

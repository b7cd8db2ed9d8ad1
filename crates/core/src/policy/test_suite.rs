//! Policy test cases (paper §3.1, "Testing"): a question/answer pair or a given translation,
//! with the finding the policy is expected to produce, as JSON that `proofgate policy test`
//! runs and `proofgate policy gen-tests` writes.
//!
//! ```json
//! {"policy": "sha256:...",
//!  "tests": [
//!    {"id": "senior-low-season", "question": "...", "answer": "...", "expected": "SATISFIABLE"},
//!    {"id": "BASEFEE00000/decisive-valid", "rule": "BASEFEE00000", "decisive": true,
//!     "premises": [], "claims": ["(= baseFee 50.0)"], "expected": "VALID",
//!     "expectedRules": ["BASEFEE00000"]},
//!    {"id": "two-translators", "translations": [[{"premises": ["b"], "claims": ["c"]}], [...]],
//!     "expected": "TRANSLATION_AMBIGUOUS"}]}
//! ```
//!
//! A case passes when the aggregate verdict of its findings is `expected` and every rule in
//! `expectedRules` is cited by some finding (as a supporting or contradicting rule).

use super::definition::Extra;
use crate::findings::{Finding, Statement};
use crate::verdict::{aggregate_verdict, Verdict};
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use std::collections::BTreeSet;

/// A file of policy test cases.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PolicyTestSuite {
    /// The content hash or ARN of the policy version the cases were written or generated for
    /// (informational: cases are run against whatever policy they are given).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub policy: Option<String>,
    /// The cases, run in order.
    pub tests: Vec<PolicyTestCase>,
    /// Members not modelled by this version.
    #[serde(flatten)]
    pub extra: Extra,
}

/// One premise or claim of a test case: SMT-LIB, optionally with its English.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum TestStatement {
    /// Just the SMT-LIB term.
    Logic(String),
    /// The term and what it says.
    Described {
        /// SMT-LIB.
        logic: String,
        /// English.
        #[serde(
            rename = "naturalLanguage",
            default,
            skip_serializing_if = "Option::is_none"
        )]
        natural_language: Option<String>,
    },
}

impl TestStatement {
    /// The SMT-LIB term.
    pub fn logic(&self) -> &str {
        match self {
            TestStatement::Logic(l) | TestStatement::Described { logic: l, .. } => l,
        }
    }
}

/// One test case. Exactly one input form is given: `question` and `answer` (translated by
/// the LLM translators), `premises` and `claims` (one given translation), or `translations`
/// (the k translators' outputs, as in `proofgate check --translations`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PolicyTestCase {
    /// A name, unique in the suite, shown in reports.
    pub id: String,
    /// What the case checks, for people.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// The user's question (natural-language case).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub question: Option<String>,
    /// The chatbot's answer (natural-language case).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub answer: Option<String>,
    /// Premises of a given translation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub premises: Option<Vec<TestStatement>>,
    /// Claims of a given translation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub claims: Option<Vec<TestStatement>>,
    /// Several translators' outputs, verbatim in the translations format.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub translations: Option<Value>,
    /// The expected aggregate verdict (`VALID`, `INVALID`, `SATISFIABLE`, `IMPOSSIBLE`,
    /// `TRANSLATION_AMBIGUOUS`, `TOO_COMPLEX`, `NO_TRANSLATIONS`).
    pub expected: Verdict,
    /// Rules that must be cited by the findings (supporting or contradicting).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub expected_rules: Vec<String>,
    /// For generated cases: the rule the case was generated for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rule: Option<String>,
    /// For generated cases: whether removing `rule` from the policy changes the finding.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decisive: Option<bool>,
    /// Members not modelled by this version.
    #[serde(flatten)]
    pub extra: Extra,
}

/// What a test case feeds into the checker.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum TestInput<'a> {
    /// Translate with the LLM translators, then check.
    NaturalLanguage {
        /// The question.
        question: &'a str,
        /// The answer.
        answer: &'a str,
    },
    /// Check this translations document (`{"translations": [...]}`); no LLM involved.
    Logic(&'a PolicyTestCase),
}

impl TestInput<'_> {
    /// Whether running the case needs an LLM.
    pub fn needs_llm(&self) -> bool {
        matches!(self, TestInput::NaturalLanguage { .. })
    }
}

/// A test file or case that cannot be run.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum TestSuiteError {
    /// Not JSON of the test-suite shape.
    #[error("not a policy test file: {0} (expected {{\"tests\": [{{\"id\": ..., \"expected\": \"VALID\", ...}}]}})")]
    Json(String),
    /// Two cases with one id.
    #[error("test id `{0}` is used by more than one test")]
    DuplicateId(String),
    /// A case with no input or with more than one input form.
    #[error("test `{id}`: {problem}")]
    Input {
        /// The case.
        id: String,
        /// What is wrong with it.
        problem: String,
    },
}

impl PolicyTestSuite {
    /// Reads a suite: `{"tests": [...]}` or a bare list of cases. Every case is checked to
    /// have exactly one input form and a unique id.
    pub fn from_json(text: &str) -> Result<PolicyTestSuite, TestSuiteError> {
        let value: Value = crate::audit::strict_json::value_from_str(text)
            .map_err(|e| TestSuiteError::Json(e.to_string()))?;
        let suite: PolicyTestSuite = match value {
            Value::Array(_) => PolicyTestSuite {
                tests: serde_json::from_value(value)
                    .map_err(|e| TestSuiteError::Json(e.to_string()))?,
                ..Default::default()
            },
            other => {
                serde_json::from_value(other).map_err(|e| TestSuiteError::Json(e.to_string()))?
            }
        };
        suite.check()?;
        Ok(suite)
    }

    /// Checks that every case has exactly one input form and a unique id (for suites
    /// deserialized some other way than [`PolicyTestSuite::from_json`]).
    pub fn check(&self) -> Result<(), TestSuiteError> {
        let mut seen = BTreeSet::new();
        for case in &self.tests {
            if !seen.insert(case.id.as_str()) {
                return Err(TestSuiteError::DuplicateId(case.id.clone()));
            }
            // A misspelt member (`expected_rules`, `claim`) was ignored, and the case passed
            // without the requirement it was written for.
            if let Some(member) = case.extra.keys().next() {
                return Err(TestSuiteError::Input {
                    id: case.id.clone(),
                    problem: format!(
                        "unknown member `{member}` (a test has id, description, question, \
                         answer, premises, claims, translations, expected, expectedRules, rule \
                         and decisive)"
                    ),
                });
            }
            case.input()?;
        }
        Ok(())
    }

    /// The suite as pretty JSON.
    pub fn to_json_pretty(&self) -> String {
        // Plain data with string keys always serializes.
        serde_json::to_string_pretty(self).unwrap_or_default()
    }
}

impl PolicyTestCase {
    /// A case with one given translation (no LLM).
    pub fn logic(
        id: impl Into<String>,
        premises: Vec<TestStatement>,
        claims: Vec<TestStatement>,
        expected: Verdict,
    ) -> PolicyTestCase {
        PolicyTestCase {
            id: id.into(),
            description: None,
            question: None,
            answer: None,
            premises: Some(premises),
            claims: Some(claims),
            translations: None,
            expected,
            expected_rules: Vec::new(),
            rule: None,
            decisive: None,
            extra: Extra::new(),
        }
    }

    /// The case's input, or why it has none (or several).
    pub fn input(&self) -> Result<TestInput<'_>, TestSuiteError> {
        let problem = |p: &str| TestSuiteError::Input {
            id: self.id.clone(),
            problem: p.to_string(),
        };
        if self.id.trim().is_empty() {
            return Err(problem("the id is empty"));
        }
        let nl = self.question.is_some() || self.answer.is_some();
        let given = self.premises.is_some() || self.claims.is_some();
        let many = self.translations.is_some();
        match (nl, given, many) {
            (true, false, false) => match (&self.question, &self.answer) {
                (Some(q), Some(a)) => Ok(TestInput::NaturalLanguage {
                    question: q,
                    answer: a,
                }),
                _ => Err(problem("a natural-language test needs both `question` and `answer`")),
            },
            (false, true, false) | (false, false, true) => Ok(TestInput::Logic(self)),
            (false, false, false) => Err(problem(
                "no input: give `question` and `answer`, or `premises` and `claims`, or `translations`",
            )),
            _ => Err(problem(
                "give only one input: `question`/`answer`, `premises`/`claims` or `translations`",
            )),
        }
    }

    /// For a logic case, the translations document to check (`{"translations": [...]}`).
    pub fn translations_document(&self) -> Option<Value> {
        if let Some(t) = &self.translations {
            return Some(json!({ "translations": t }));
        }
        if self.premises.is_none() && self.claims.is_none() {
            return None;
        }
        Some(json!({
            "translations": [[{
                "premises": self.premises.clone().unwrap_or_default(),
                "claims": self.claims.clone().unwrap_or_default(),
            }]]
        }))
    }

    /// Judges the findings the case produced.
    pub fn judge(&self, findings: &[Finding]) -> Judgement {
        let actual = aggregate_verdict(findings).verdict;
        let cited = cited_rules(findings);
        let missing_rules: Vec<String> = self
            .expected_rules
            .iter()
            .filter(|r| !cited.contains(r.as_str()))
            .cloned()
            .collect();
        Judgement {
            passed: actual == self.expected && missing_rules.is_empty(),
            actual,
            missing_rules,
        }
    }
}

/// The outcome of judging a case's findings.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Judgement {
    /// Verdict as expected and every expected rule cited.
    pub passed: bool,
    /// The aggregate verdict of the findings.
    pub actual: Verdict,
    /// Expected rules that no finding cites.
    pub missing_rules: Vec<String>,
}

/// Every rule id cited by the findings as supporting or contradicting.
pub fn cited_rules(findings: &[Finding]) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for f in findings {
        let rules = match f {
            Finding::Valid(v) => v.supporting_rules.as_ref(),
            Finding::Invalid(c) | Finding::Impossible(c) => c.contradicting_rules.as_ref(),
            _ => None,
        };
        for r in rules.into_iter().flatten() {
            if let Some(id) = &r.identifier {
                out.insert(id.clone());
            }
        }
    }
    out
}

impl From<&Statement> for TestStatement {
    fn from(s: &Statement) -> TestStatement {
        match (&s.logic, &s.natural_language) {
            (Some(l), Some(n)) => TestStatement::Described {
                logic: l.clone(),
                natural_language: Some(n.clone()),
            },
            (l, _) => TestStatement::Logic(l.clone().unwrap_or_default()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::findings::{ContradictionFinding, Rule};

    #[test]
    fn reads_all_three_input_forms_and_a_bare_list() {
        let suite = PolicyTestSuite::from_json(
            r#"{"policy": "sha256:x", "tests": [
              {"id": "nl", "question": "q?", "answer": "a.", "expected": "SATISFIABLE"},
              {"id": "given", "premises": ["b", {"logic": "c", "naturalLanguage": "C"}], "claims": ["d"],
               "expected": "VALID", "expectedRules": ["R1"], "rule": "R1", "decisive": true},
              {"id": "many", "translations": [[{"premises": [], "claims": ["d"]}]], "expected": "INVALID"}]}"#,
        )
        .unwrap();
        assert_eq!(suite.tests.len(), 3);
        assert!(suite.tests[0].input().unwrap().needs_llm());
        assert!(!suite.tests[1].input().unwrap().needs_llm());
        let doc = suite.tests[1].translations_document().unwrap();
        assert_eq!(
            doc["translations"][0][0]["premises"][1]["naturalLanguage"],
            "C"
        );
        let doc = suite.tests[2].translations_document().unwrap();
        assert_eq!(doc["translations"][0][0]["claims"][0], "d");
        // Round trip.
        let again = PolicyTestSuite::from_json(&suite.to_json_pretty()).unwrap();
        assert_eq!(again, suite);
        let bare =
            PolicyTestSuite::from_json(r#"[{"id": "x", "claims": ["b"], "expected": "VALID"}]"#)
                .unwrap();
        assert_eq!(bare.tests.len(), 1);
    }

    #[test]
    fn bad_cases_say_what_is_wrong() {
        let e = PolicyTestSuite::from_json(r#"{"tests": [{"id": "a", "expected": "VALID"}]}"#)
            .unwrap_err();
        assert!(e.to_string().contains("test `a`: no input"), "{e}");
        let e = PolicyTestSuite::from_json(
            r#"{"tests": [{"id": "a", "question": "q", "claims": ["b"], "expected": "VALID"}]}"#,
        )
        .unwrap_err();
        assert!(e.to_string().contains("only one input"), "{e}");
        let e = PolicyTestSuite::from_json(
            r#"{"tests": [{"id": "a", "question": "q", "expected": "VALID"}]}"#,
        )
        .unwrap_err();
        assert!(
            e.to_string().contains("both `question` and `answer`"),
            "{e}"
        );
        let e = PolicyTestSuite::from_json(
            r#"{"tests": [{"id": "a", "claims": ["b"], "expected": "VALID"}, {"id": "a", "claims": ["b"], "expected": "VALID"}]}"#,
        )
        .unwrap_err();
        assert_eq!(e, TestSuiteError::DuplicateId("a".into()));
        let e = PolicyTestSuite::from_json(
            r#"{"tests": [{"id": "a", "claims": ["b"], "expected": "TRUE"}]}"#,
        )
        .unwrap_err();
        assert!(e.to_string().contains("unknown variant `TRUE`"), "{e}");
        // A misspelt member is an error, not a requirement dropped; a key written twice too.
        let e = PolicyTestSuite::from_json(
            r#"{"tests": [{"id": "a", "claims": ["b"], "expected": "VALID", "expected_rules": ["R1"]}]}"#,
        )
        .unwrap_err();
        assert!(
            e.to_string()
                .contains("test `a`: unknown member `expected_rules`"),
            "{e}"
        );
        let e = PolicyTestSuite::from_json(
            r#"{"tests": [{"id": "a", "claims": ["b"], "expected": "VALID", "expected": "INVALID"}]}"#,
        )
        .unwrap_err();
        assert!(e.to_string().contains("appears twice"), "{e}");
    }

    #[test]
    fn judging_checks_the_verdict_and_the_cited_rules() {
        let mut case = PolicyTestCase::logic(
            "t",
            vec![],
            vec![TestStatement::Logic("b".into())],
            Verdict::Invalid,
        );
        case.expected_rules = vec!["R1".into()];
        let finding = |ids: &[&str]| {
            Finding::Invalid(ContradictionFinding {
                contradicting_rules: Some(ids.iter().map(|i| Rule::new(*i, "arn")).collect()),
                ..Default::default()
            })
        };
        assert!(case.judge(&[finding(&["R1", "R2"])]).passed);
        let j = case.judge(&[finding(&["R2"])]);
        assert!(!j.passed);
        assert_eq!(j.missing_rules, vec!["R1"]);
        let j = case.judge(&[Finding::Satisfiable(Default::default())]);
        assert_eq!(j.actual, Verdict::Satisfiable);
        assert!(!j.passed);
        assert_eq!(case.judge(&[]).actual, Verdict::NoFindings);
    }
}

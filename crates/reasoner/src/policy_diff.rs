//! `policy diff`: what changed between two versions of a policy, and which generated cases
//! (from either version) get a different finding from the new version than from the old.

use crate::check::Reasoner;
use crate::gen_tests::{generate_tests, GenerateOptions, GenerationNote};
use crate::testing::check_case;
use proofgate_core::policy::test_suite::PolicyTestCase;
use proofgate_core::policy::{diff_definitions, DefinitionDiff, PolicyModel};
use proofgate_core::verdict::aggregate_verdict;
use serde::Serialize;

/// What a case gives on one version: a verdict, or why it cannot be run there (for example
/// a variable that version does not have).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct VersionOutcome {
    /// The aggregate verdict, when the case could be checked.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub verdict: Option<String>,
    /// Why it could not be.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

impl VersionOutcome {
    /// `VALID`, ... or `n/a (reason)`.
    pub fn label(&self) -> String {
        match (&self.verdict, &self.error) {
            (Some(v), _) => v.clone(),
            (None, Some(e)) => format!("n/a ({e})"),
            (None, None) => "n/a".into(),
        }
    }
}

/// A generated case whose outcome differs between the versions.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ChangedCase {
    /// Which version the case was generated from: `old` or `new`.
    pub from: &'static str,
    /// The case (its `expected` is the outcome on the version it came from).
    pub case: PolicyTestCase,
    /// On the old version.
    pub old: VersionOutcome,
    /// On the new version.
    pub new: VersionOutcome,
}

/// The whole comparison.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PolicyDiff {
    /// Rules, variables and types that changed.
    pub definition: DefinitionDiff,
    /// Generated cases whose finding changed.
    pub changed_cases: Vec<ChangedCase>,
    /// How many generated cases were compared.
    pub cases_compared: usize,
    /// Why a version contributed no cases, or rules without decisive cases.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<GenerationNote>,
}

impl PolicyDiff {
    /// Whether the versions differ in content or in any case's finding.
    pub fn is_empty(&self) -> bool {
        self.definition.is_empty() && self.changed_cases.is_empty()
    }
}

fn outcome(reasoner: Option<&Reasoner<'_>>, case: &PolicyTestCase) -> VersionOutcome {
    let Some(reasoner) = reasoner else {
        return VersionOutcome {
            verdict: None,
            error: Some("the policy could not be loaded into the solver".into()),
        };
    };
    match check_case(reasoner, case) {
        Ok(findings) => VersionOutcome {
            verdict: Some(aggregate_verdict(&findings).verdict.as_str().to_string()),
            error: None,
        },
        Err(e) => VersionOutcome {
            verdict: None,
            error: Some(e.to_string()),
        },
    }
}

/// Compares two policy versions.
pub fn diff_policies(
    old: &PolicyModel,
    new: &PolicyModel,
    options: &GenerateOptions,
) -> PolicyDiff {
    let definition = diff_definitions(old.definition(), new.definition());
    let mut notes = Vec::new();
    let mut cases: Vec<(&'static str, PolicyTestCase)> = Vec::new();
    for (from, model) in [("old", old), ("new", new)] {
        match generate_tests(model, options) {
            Ok(generated) => {
                for case in generated.suite.tests {
                    // The same scenario generated from both versions is compared once.
                    let same =
                        |c: &PolicyTestCase| c.premises == case.premises && c.claims == case.claims;
                    if !cases.iter().any(|(_, c)| same(c)) {
                        cases.push((from, case));
                    }
                }
            }
            Err(e) => notes.push(GenerationNote {
                rule: String::new(),
                message: format!("{from} version: no cases generated: {e}"),
            }),
        }
    }
    let old_r = Reasoner::new(old, options.check.clone()).ok();
    let new_r = Reasoner::new(new, options.check.clone()).ok();
    let mut changed_cases = Vec::new();
    for (from, case) in &cases {
        let o = outcome(old_r.as_ref(), case);
        let n = outcome(new_r.as_ref(), case);
        if o.verdict != n.verdict {
            changed_cases.push(ChangedCase {
                from,
                case: case.clone(),
                old: o,
                new: n,
            });
        }
    }
    PolicyDiff {
        definition,
        changed_cases,
        cases_compared: cases.len(),
        notes,
    }
}

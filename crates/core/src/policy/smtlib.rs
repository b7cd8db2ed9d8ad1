//! SMT-LIB scripts that let anyone re-check a finding without the server: the policy's
//! declarations and rules, plus the premises and claims of the finding, with the answer
//! (`sat`/`unsat`) that each `check-sat` must give for the finding to be right. Run them with
//! any SMT-LIB solver (native `z3`, or z3-solver in a browser).

use super::PolicyModel;
use super::Sort;
use crate::findings::{Finding, Translation};
use serde::{Deserialize, Serialize};
use std::fmt::Write;

/// What a `check-sat` must answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Expected {
    /// Satisfiable.
    Sat,
    /// Unsatisfiable.
    Unsat,
}

impl Expected {
    /// The solver's answer, as it prints it.
    pub fn as_str(self) -> &'static str {
        match self {
            Expected::Sat => "sat",
            Expected::Unsat => "unsat",
        }
    }
}

/// One self-contained script and the answer it must give.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SolverCheck {
    /// What the check establishes, in words.
    pub meaning: String,
    /// A complete SMT-LIB script ending in one `(check-sat)`.
    pub script: String,
    /// The answer that confirms the finding.
    pub expected: Expected,
}

/// The checks for one finding.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FindingChecks {
    /// The finding's position in the validation's list.
    pub finding: usize,
    /// Its kind (`VALID`, ...).
    pub kind: String,
    /// The checks; empty for kinds without a logical claim (TOO_COMPLEX, NO_TRANSLATIONS,
    /// TRANSLATION_AMBIGUOUS, unknown kinds).
    pub checks: Vec<SolverCheck>,
}

fn sort_name(sort: &Sort) -> String {
    match sort {
        Sort::Bool => "Bool".into(),
        Sort::Int => "Int".into(),
        Sort::Real => "Real".into(),
        Sort::Enum(name) => name.clone(),
    }
}

impl PolicyModel {
    /// `declare-datatype` for every enum type and `declare-const` for every variable.
    pub fn smtlib_declarations(&self) -> String {
        let mut out = String::new();
        for t in self.schema().types() {
            let ctors: Vec<String> = t.values.iter().map(|v| format!("({v})")).collect();
            let _ = writeln!(out, "(declare-datatype {} ({}))", t.name, ctors.join(" "));
        }
        for v in self.schema().variables() {
            let _ = writeln!(out, "(declare-const {} {})", v.name, sort_name(&v.sort));
        }
        out
    }

    /// One named `assert` per rule, in policy order.
    pub fn smtlib_rules(&self) -> String {
        let mut out = String::new();
        for r in self.rules() {
            let _ = writeln!(
                out,
                "(assert (! {} :named {}))",
                r.term,
                quote_symbol(&r.id)
            );
        }
        out
    }

    /// The re-check scripts for a validation's findings. Statements are re-parsed and
    /// re-printed, so a script never contains text that is not a term of the fragment; a
    /// statement that does not check against the policy yields no script for its finding.
    pub fn finding_checks(&self, findings: &[Finding]) -> Vec<FindingChecks> {
        let header = format!("{}{}", self.smtlib_declarations(), self.smtlib_rules());
        findings
            .iter()
            .enumerate()
            .map(|(i, f)| FindingChecks {
                finding: i,
                kind: f.kind().as_str().to_string(),
                checks: f
                    .translation()
                    .and_then(|t| self.checks_for(&header, f, t))
                    .unwrap_or_default(),
            })
            .collect()
    }

    /// For a VALID finding, the check that its proof needs the policy: without any rule, the
    /// premises must not imply the claims (an auditor adds it to the finding's checks; a trivial
    /// pair is never VALID). `None` for other kinds, or when the statements do not check.
    pub fn needs_policy_check(&self, f: &Finding) -> Option<SolverCheck> {
        if f.kind() != crate::findings::FindingKind::Valid {
            return None;
        }
        let (p, c, claims) = self.premises_and_claims(f.translation()?)?;
        if claims == 0 {
            return None;
        }
        Some(SolverCheck {
            meaning: "without any rule, the premises do not imply the claims (the proof needs \
                      the policy)"
                .to_string(),
            script: format!(
                "{}(assert {p})\n(assert (not {c}))\n(check-sat)\n",
                self.smtlib_declarations()
            ),
            expected: Expected::Sat,
        })
    }

    /// The premises and the claims as SMT-LIB conjunctions, re-parsed and re-printed (so a
    /// script never holds text that is not a term of the fragment), and how many claims there
    /// are; `None` when a statement does not check.
    fn premises_and_claims(&self, t: &Translation) -> Option<(String, String, usize)> {
        let parse = |list: &[crate::findings::Statement]| -> Option<Vec<String>> {
            list.iter()
                .map(|s| {
                    let logic = s.logic.as_deref()?;
                    self.check_statement(logic).ok().map(|c| c.term.to_string())
                })
                .collect()
        };
        let premises = parse(t.premises())?;
        let claims = parse(t.claims())?;
        let conj = |xs: &[String]| match xs.len() {
            0 => "true".to_string(),
            1 => xs[0].clone(),
            _ => format!("(and {})", xs.join(" ")),
        };
        Some((conj(&premises), conj(&claims), claims.len()))
    }

    fn checks_for(&self, header: &str, f: &Finding, t: &Translation) -> Option<Vec<SolverCheck>> {
        let (p, c, claims) = self.premises_and_claims(t)?;
        use crate::findings::FindingKind as K;
        // A VALID with no claims proved nothing: no script can confirm it.
        if f.kind() == K::Valid && claims == 0 {
            return None;
        }
        let script = |extra: &str| format!("{header}(assert {p})\n{extra}(check-sat)\n");
        let check = |meaning: &str, extra: String, expected| SolverCheck {
            meaning: meaning.to_string(),
            script: script(&extra),
            expected,
        };
        Some(match f.kind() {
            K::Valid => vec![
                check(
                    "the rules and premises are consistent with the claims",
                    format!("(assert {c})\n"),
                    Expected::Sat,
                ),
                check(
                    "the rules and premises rule out every case where the claims fail",
                    format!("(assert (not {c}))\n"),
                    Expected::Unsat,
                ),
            ],
            K::Invalid => vec![check(
                "the rules and premises contradict the claims",
                format!("(assert {c})\n"),
                Expected::Unsat,
            )],
            K::Impossible => vec![check(
                "the rules contradict the premises",
                String::new(),
                Expected::Unsat,
            )],
            K::Satisfiable => vec![
                check(
                    "the claims can hold under the rules and premises",
                    format!("(assert {c})\n"),
                    Expected::Sat,
                ),
                check(
                    "the claims can fail under the rules and premises",
                    format!("(assert (not {c}))\n"),
                    Expected::Sat,
                ),
            ],
            _ => Vec::new(),
        })
    }
}

/// A rule id as an SMT-LIB symbol (quoted with `|...|` unless it is a simple symbol).
fn quote_symbol(id: &str) -> String {
    if super::term::is_simple_symbol(id) {
        id.to_string()
    } else {
        format!("|{}|", id.replace(['|', '\\'], "_"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::findings::{ContradictionFinding, Statement, ValidFinding};
    use crate::policy::PolicyDefinition;

    fn model() -> PolicyModel {
        let def = PolicyDefinition::from_json(
            r#"{"types": [{"name": "Season", "values": [{"value": "LOW"}, {"value": "HIGH"}]}],
                "variables": [{"name": "age", "type": "INT"}, {"name": "season", "type": "Season"},
                              {"name": "fee", "type": "REAL"}],
                "rules": [{"id": "R1", "expression": "(=> (>= age 65) (= fee 9.0))"},
                          {"id": "rule 2", "expression": "(=> (= season LOW) (< fee 20.0))"}]}"#,
        )
        .unwrap();
        PolicyModel::from_definition(def, None).unwrap()
    }

    fn translation(p: &[&str], c: &[&str]) -> Option<Translation> {
        Some(Translation {
            premises: Some(p.iter().map(|s| Statement::new(*s, "")).collect()),
            claims: Some(c.iter().map(|s| Statement::new(*s, "")).collect()),
            ..Default::default()
        })
    }

    #[test]
    fn declarations_and_rules() {
        let m = model();
        assert_eq!(
            m.smtlib_declarations(),
            "(declare-datatype Season ((LOW) (HIGH)))\n(declare-const age Int)\n(declare-const season Season)\n(declare-const fee Real)\n"
        );
        assert!(m
            .smtlib_rules()
            .contains("(assert (! (=> (>= age 65) (= fee 9.0)) :named R1))"));
        assert!(m.smtlib_rules().contains(":named |rule 2|"));
    }

    #[test]
    fn valid_finding_gets_an_entailment_check() {
        let f = Finding::Valid(ValidFinding {
            translation: translation(&["(= age 70)"], &["(= fee 9.0)"]),
            ..Default::default()
        });
        let checks = model().finding_checks(&[f]);
        assert_eq!(checks[0].kind, "VALID");
        let unsat = &checks[0].checks[1];
        assert_eq!(unsat.expected, Expected::Unsat);
        assert!(unsat
            .script
            .ends_with("(assert (= age 70))\n(assert (not (= fee 9.0)))\n(check-sat)\n"));
    }

    #[test]
    fn smuggled_text_yields_no_script() {
        let f = Finding::Invalid(ContradictionFinding {
            translation: translation(&["(= age 70)) (assert false"], &["(= fee 1.0)"]),
            ..Default::default()
        });
        assert!(model().finding_checks(&[f])[0].checks.is_empty());
    }
}

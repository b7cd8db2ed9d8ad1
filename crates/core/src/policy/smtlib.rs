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
    /// A complete SMT-LIB script ending in one `(check-sat)`; or, when `after_policy` is
    /// set, the check's own part only, to run after the policy's preamble.
    pub script: String,
    /// The answer that confirms the finding.
    pub expected: Expected,
    /// Whether `script` runs after the policy version's preamble (its declarations and rules,
    /// [`PolicyModel::smtlib_preamble`]) instead of holding it: trails record it so, once per
    /// policy version (identified by the validation evidence's `policyContentHash`) rather
    /// than in every check. [`PolicyModel::full_script`] puts the two together.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub after_policy: bool,
}

/// Why a recorded check's full script cannot be assembled.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AssembleError {
    /// The check runs after a policy version's preamble, but none is named.
    #[error("the check runs after the policy's declarations and rules, but no policy version is recorded for it")]
    NoPolicyVersion,
    /// The check was recorded against another policy version.
    #[error("the check was recorded against policy {recorded}, not {this}")]
    OtherPolicy {
        /// The policy version recorded with the check.
        recorded: String,
        /// This policy's content hash.
        this: String,
    },
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
        Sort::Enum(name) => quote_symbol(name),
    }
}

impl PolicyModel {
    /// `declare-datatype` for every enum type and `declare-const` for every variable. Names
    /// that are not simple symbols are written quoted (`|loan amount|`), as terms write them:
    /// written as they were, a name holding a parenthesis could close its declaration and add
    /// commands to the text an auditor's z3 runs (the schema refuses `|` and `\\`, which no
    /// quoting can hold).
    pub fn smtlib_declarations(&self) -> String {
        let mut out = String::new();
        for t in self.schema().types() {
            let ctors: Vec<String> = t
                .values
                .iter()
                .map(|v| format!("({})", quote_symbol(v)))
                .collect();
            let _ = writeln!(
                out,
                "(declare-datatype {} ({}))",
                quote_symbol(&t.name),
                ctors.join(" ")
            );
        }
        for v in self.schema().variables() {
            let _ = writeln!(
                out,
                "(declare-const {} {})",
                quote_symbol(&v.name),
                sort_name(&v.sort)
            );
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

    /// What every full re-check script starts with: the declarations, then the rules.
    pub fn smtlib_preamble(&self) -> String {
        format!("{}{}", self.smtlib_declarations(), self.smtlib_rules())
    }

    /// The checks a trail records for a validation's findings:
    /// [`finding_checks`](Self::finding_checks) without the policy's preamble in each script
    /// (`after_policy` set). The validation's evidence names the policy version (`policyContentHash`);
    /// [`full_script`](Self::full_script) rebuilds each full script from it.
    pub fn recorded_finding_checks(&self, findings: &[Finding]) -> Vec<FindingChecks> {
        self.finding_checks_after(findings, "", true)
    }

    /// The complete script of a recorded check: `check.script` itself when it holds a whole
    /// script (trails written before checks were recorded without the preamble), else this
    /// policy's preamble followed by the check's own part, provided the check was recorded
    /// against this policy version (`policy_content_hash`, from the validation's evidence).
    pub fn full_script(
        &self,
        check: &SolverCheck,
        policy_content_hash: Option<&str>,
    ) -> Result<String, AssembleError> {
        if !check.after_policy {
            return Ok(check.script.clone());
        }
        let recorded = policy_content_hash.ok_or(AssembleError::NoPolicyVersion)?;
        let this = self.definition().content_hash();
        if recorded != this {
            return Err(AssembleError::OtherPolicy {
                recorded: recorded.to_string(),
                this,
            });
        }
        Ok(format!("{}{}", self.smtlib_preamble(), check.script))
    }

    /// The re-check scripts for a validation's findings. Statements are re-parsed and
    /// re-printed, so a script never contains text that is not a term of the fragment; a
    /// statement that does not check against the policy yields no script for its finding.
    pub fn finding_checks(&self, findings: &[Finding]) -> Vec<FindingChecks> {
        self.finding_checks_after(findings, &self.smtlib_preamble(), false)
    }

    fn finding_checks_after(
        &self,
        findings: &[Finding],
        header: &str,
        after_policy: bool,
    ) -> Vec<FindingChecks> {
        findings
            .iter()
            .enumerate()
            .map(|(i, f)| FindingChecks {
                finding: i,
                kind: f.kind().as_str().to_string(),
                checks: f
                    .translation()
                    .and_then(|t| self.checks_for(header, f, t))
                    .unwrap_or_default()
                    .into_iter()
                    .map(|c| SolverCheck { after_policy, ..c })
                    .collect(),
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
            after_policy: false,
        })
    }

    /// The check that a translator's pair (`premises`, `claims`) is the pair `covering` a
    /// finding checks: without any rule, its premises are equivalent to those of `covering` and
    /// its claims to its claims (as the validator groups pairs). `None` when a statement does
    /// not check. An auditor asks it for each pair a finding could check, and the pair is
    /// covered when one of them holds: without it an operator could leave a finding out (the
    /// INVALID one of two pairs) and the remaining VALID would pass every re-check.
    pub fn coverage_check(
        &self,
        premises: &[crate::findings::Statement],
        claims: &[crate::findings::Statement],
        covering: &Translation,
    ) -> Option<SolverCheck> {
        let pair = Translation {
            premises: Some(premises.to_vec()),
            claims: Some(claims.to_vec()),
            ..Default::default()
        };
        let (p, c, _) = self.premises_and_claims(&pair)?;
        let (pk, ck, _) = self.premises_and_claims(covering)?;
        Some(SolverCheck {
            meaning: "without any rule, its premises and its claims are equivalent to those of \
                      a pair a finding checks (no pair was left without a finding)"
                .to_string(),
            script: format!(
                "{}(assert (not (and (= {p} {pk}) (= {c} {ck}))))\n(check-sat)\n",
                self.smtlib_declarations(),
            ),
            expected: Expected::Unsat,
            after_policy: false,
        })
    }

    /// The check that a pair a NO_TRANSLATIONS finding carries is trivial, as the finding says:
    /// without any rule, its premises imply its claims (no claims imply nothing to check). A
    /// pair it covers is not checked against the policy, so a forged trail could otherwise
    /// relabel an INVALID finding as NO_TRANSLATIONS and keep its pair covered.
    pub fn trivial_check(&self, t: &Translation) -> Option<SolverCheck> {
        let (p, c, _) = self.premises_and_claims(t)?;
        Some(SolverCheck {
            meaning: "without any rule, the premises imply the claims (the pair is trivial, as \
                      NO_TRANSLATIONS says)"
                .to_string(),
            script: format!(
                "{}(assert {p})\n(assert (not {c}))\n(check-sat)\n",
                self.smtlib_declarations()
            ),
            expected: Expected::Unsat,
            after_policy: false,
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
            after_policy: false,
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

/// Which symbol `name` is in a script: `|x|` and `x` are one symbol in SMT-LIB, and a quoted
/// name's `|` and `\\` are written as `_` ([`quote_symbol`]), so this is the name as written,
/// without quotes.
pub(crate) fn symbol_identity(name: &str) -> String {
    name.replace(['|', '\\'], "_")
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

    /// A name that is not a simple symbol is declared quoted: one symbol, whatever it holds
    /// (a name that could close its declaration added commands to the auditor's script).
    #[test]
    fn names_are_declared_quoted() {
        let injected = "x Bool) (set-option :regular-output-channel \"/tmp/pwned\") (echo \"hi\") (declare-const y";
        let def = PolicyDefinition::from_json(
            &serde_json::json!({
                "types": [{"name": "tier (paid)", "values": [{"value": "GOLD) (echo \"x\""}]}],
                "variables": [{"name": injected, "type": "BOOL"}, {"name": "t", "type": "tier (paid)"}],
                "rules": [{"id": "R", "expression": format!("(=> |{injected}| (= t |GOLD) (echo \"x\"|))")}]
            })
            .to_string(),
        )
        .unwrap();
        let m = PolicyModel::from_definition(def, None).unwrap();
        let decls = m.smtlib_declarations();
        assert!(
            decls.contains(&format!("(declare-const |{injected}| Bool)\n")),
            "{decls}"
        );
        assert!(
            decls.contains("(declare-datatype |tier (paid)| ((|GOLD) (echo \"x\"|)))"),
            "{decls}"
        );
        assert!(decls.contains("(declare-const t |tier (paid)|)"), "{decls}");
    }

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

    fn every_kind() -> Vec<Finding> {
        use crate::findings::SatisfiableFinding;
        let t = || translation(&["(= age 70)", "(= season LOW)"], &["(= fee 9.0)"]);
        vec![
            Finding::Valid(ValidFinding {
                translation: t(),
                ..Default::default()
            }),
            Finding::Invalid(ContradictionFinding {
                translation: t(),
                ..Default::default()
            }),
            Finding::Impossible(ContradictionFinding {
                translation: t(),
                ..Default::default()
            }),
            Finding::Satisfiable(SatisfiableFinding {
                translation: t(),
                ..Default::default()
            }),
        ]
    }

    #[test]
    fn recorded_checks_leave_out_the_policy_and_assemble_to_the_full_scripts() {
        let m = model();
        let findings = every_kind();
        let full = m.finding_checks(&findings);
        let recorded = m.recorded_finding_checks(&findings);
        let hash = m.definition().content_hash();
        assert_eq!(full.len(), recorded.len());
        let mut n = 0;
        for (f, r) in full.iter().zip(&recorded) {
            assert_eq!((f.finding, &f.kind), (r.finding, &r.kind));
            assert_eq!(f.checks.len(), r.checks.len());
            for (fc, rc) in f.checks.iter().zip(&r.checks) {
                assert!(rc.after_policy && !fc.after_policy);
                assert!(!rc.script.contains("declare-") && !rc.script.contains(":named"));
                assert_eq!((&rc.meaning, rc.expected), (&fc.meaning, fc.expected));
                assert_eq!(m.full_script(rc, Some(&hash)).unwrap(), fc.script);
                n += 1;
            }
        }
        assert_eq!(n, 6);
        // The marker is in the recorded JSON; a check without it is read as a whole script.
        let json = serde_json::to_value(&recorded[0].checks[0]).unwrap();
        assert_eq!(json["afterPolicy"], true);
        assert!(serde_json::to_value(&full[0].checks[0])
            .unwrap()
            .get("afterPolicy")
            .is_none());
    }

    #[test]
    fn old_checks_with_a_full_script_still_read_and_run_as_recorded() {
        let m = model();
        let full = m.finding_checks(&every_kind());
        let old = serde_json::json!({"meaning": "m", "script": full[0].checks[0].script, "expected": "sat"});
        let check: SolverCheck = serde_json::from_value(old).unwrap();
        assert!(!check.after_policy);
        // Whatever policy version is recorded (or none): the script is the whole script.
        assert_eq!(
            m.full_script(&check, None).unwrap(),
            full[0].checks[0].script
        );
        assert_eq!(
            m.full_script(&check, Some("sha256:other")).unwrap(),
            full[0].checks[0].script
        );
    }

    #[test]
    fn a_recorded_check_assembles_only_with_its_own_policy_version() {
        let m = model();
        let check = &m.recorded_finding_checks(&every_kind())[0].checks[0];
        assert_eq!(
            m.full_script(check, None),
            Err(AssembleError::NoPolicyVersion)
        );
        assert!(matches!(
            m.full_script(check, Some("sha256:other")),
            Err(AssembleError::OtherPolicy { .. })
        ));
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

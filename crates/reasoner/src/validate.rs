//! Redundant translation (paper Algorithm 1): k translations of one text are compared with
//! the solver, pairs the translators do not agree on become TRANSLATION_AMBIGUOUS, and the
//! others are checked against the policy.

use crate::check::{expr_size, translation_of, CheckedStatementInput, Reasoner, Untranslated};
use proofgate_core::findings::{
    EmptyFinding, Finding, TranslationAmbiguousFinding, TranslationOption,
};
use proofgate_core::policy::StatementError;
use proofgate_core::translation::{PairInput, TranslatorOutput};
use serde_json::json;
use std::collections::BTreeSet;
use z3::ast::Bool;
use z3::SatResult;

/// A statement in the translations that is not valid against the policy's schema.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ValidateError {
    /// A statement without `logic`.
    #[error("at {path}: the statement has no `logic`")]
    MissingLogic {
        /// JSON path of the statement.
        path: String,
    },
    /// A statement that does not parse or type-check.
    #[error("at {path}: {error}")]
    Statement {
        /// JSON path of the statement, like `translations[0][1].claims[0]`.
        path: String,
        /// The problem.
        error: StatementError,
    },
}

/// A pair after parsing, or the reason it is too complex to check.
enum Prepared {
    Ready {
        premises: Vec<CheckedStatementInput>,
        claims: Vec<CheckedStatementInput>,
    },
    TooComplex,
}

struct Candidate {
    translator: usize,
    pair: Prepared,
}

impl Reasoner<'_> {
    /// Findings for k translations of one text: one per distinct premise/claim pair, plus a
    /// NO_TRANSLATIONS finding carrying the untranslated text if there is any (or if nothing
    /// was translated at all). Statements that do not parse or type-check are errors.
    pub fn validate(
        &self,
        translations: &[TranslatorOutput],
    ) -> Result<Vec<Finding>, ValidateError> {
        let untranslated = collect_untranslated(translations);
        let mut candidates = Vec::new();
        for (t, out) in translations.iter().enumerate() {
            if out.pairs.len() > self.options.max_pairs {
                return Ok(vec![Finding::TooComplex(EmptyFinding::default())]);
            }
            for (j, pair) in out.pairs.iter().enumerate() {
                let path = format!("translations[{t}][{j}]");
                candidates.push(Candidate {
                    translator: t,
                    pair: self.prepare(&path, pair)?,
                });
            }
        }
        let mut findings = Vec::new();
        if candidates.is_empty() {
            findings.push(no_translations(&untranslated));
            return Ok(findings);
        }
        let k = translations.len();
        let facts: Vec<Option<Bool>> = (0..k)
            .map(|t| self.translator_formula(&candidates, t))
            .collect();
        let (distinct, authors) = self.distinct_pairs(&candidates);
        let mut covered: BTreeSet<usize> = BTreeSet::new();
        for (&ci, authors) in distinct.iter().zip(&authors) {
            if crate::watchdog::unwanted() {
                // No one reads these findings; never VALID all the same.
                return Ok(vec![Finding::TooComplex(EmptyFinding::default())]);
            }
            let Prepared::Ready { premises, claims } = &candidates[ci].pair else {
                findings.push(Finding::TooComplex(EmptyFinding::default()));
                continue;
            };
            // A translator agrees with what it wrote itself (even when the premises are
            // contradictory, which is for the policy check to report as IMPOSSIBLE).
            let supporters: Vec<usize> = (0..k)
                .filter(|t| {
                    authors.contains(t) || self.supports(facts[*t].as_ref(), premises, claims)
                })
                .collect();
            let confidence = supporters.len() as f64 / k as f64;
            // Compare counts, not floats: 2/3 against a 2/3 threshold must pass.
            let agreed =
                supporters.len() as f64 + 1e-9 >= self.options.confidence_threshold * k as f64;
            if agreed {
                findings.push(self.check_pair(premises, claims, confidence, &untranslated));
                continue;
            }
            if covered.contains(&ci) {
                continue;
            }
            let others: Vec<usize> = (0..k).filter(|t| !supporters.contains(t)).collect();
            findings.push(self.ambiguous(&candidates, ci, confidence, &others, &untranslated));
            covered.extend(
                distinct
                    .iter()
                    .copied()
                    .filter(|&d| others.contains(&candidates[d].translator)),
            );
        }
        if !untranslated.premises.is_empty() || !untranslated.claims.is_empty() {
            findings.push(no_translations(&untranslated));
        }
        Ok(findings)
    }

    fn prepare(&self, path: &str, pair: &PairInput) -> Result<Prepared, ValidateError> {
        let mut out = (Vec::new(), Vec::new());
        let mut too_complex = false;
        for (role, stmts) in [("premises", &pair.premises), ("claims", &pair.claims)] {
            for (i, s) in stmts.iter().enumerate() {
                let path = format!("{path}.{role}[{i}]");
                let Some(logic) = s.logic.as_deref() else {
                    return Err(ValidateError::MissingLogic { path });
                };
                if logic.len() > self.options.max_statement_chars {
                    too_complex = true;
                    continue;
                }
                let checked = match self.model.check_statement(logic) {
                    Ok(c) => c,
                    Err(StatementError::Syntax {
                        error:
                            proofgate_core::policy::ParseError::TooDeep { .. }
                            | proofgate_core::policy::ParseError::TooLong { .. },
                        ..
                    }) => {
                        too_complex = true;
                        continue;
                    }
                    Err(error) => return Err(ValidateError::Statement { path, error }),
                };
                let mut statement = s.clone();
                if statement
                    .natural_language
                    .as_deref()
                    .is_none_or(|n| n.trim().is_empty())
                {
                    statement.natural_language = Some(self.model.english(&checked.expr));
                }
                let input = CheckedStatementInput {
                    statement,
                    expr: checked.expr,
                };
                if role == "premises" {
                    out.0.push(input);
                } else {
                    out.1.push(input);
                }
            }
        }
        let size: usize = out.0.iter().chain(&out.1).map(|s| expr_size(&s.expr)).sum();
        if too_complex || size > self.options.max_formula_nodes {
            return Ok(Prepared::TooComplex);
        }
        Ok(Prepared::Ready {
            premises: out.0,
            claims: out.1,
        })
    }

    /// What translator `t` asserts: the conjunction of all its premises and claims.
    fn translator_formula(&self, candidates: &[Candidate], t: usize) -> Option<Bool> {
        let mut parts = Vec::new();
        for c in candidates.iter().filter(|c| c.translator == t) {
            let Prepared::Ready { premises, claims } = &c.pair else {
                return None;
            };
            parts.push(self.conjunction(premises).ok()?);
            parts.push(self.conjunction(claims).ok()?);
        }
        Some(Bool::and(&parts))
    }

    /// T' |= (P => C) and T' |/= not P, decided without the policy's rules: agreement is
    /// about what the translators said, not about what the policy implies.
    fn supports(
        &self,
        fact: Option<&Bool>,
        premises: &[CheckedStatementInput],
        claims: &[CheckedStatementInput],
    ) -> bool {
        let (Some(fact), Ok(p), Ok(c)) =
            (fact, self.conjunction(premises), self.conjunction(claims))
        else {
            return false;
        };
        self.without_rules(&[fact, &p]) == SatResult::Sat
            && self.without_rules(&[fact, &p, &c.not()]) == SatResult::Unsat
    }

    /// Indices of candidates that are not equivalent (premises and claims both) to an
    /// earlier one, so k translators saying the same thing give one finding; with each, the
    /// translators that wrote it or an equivalent pair.
    fn distinct_pairs(&self, candidates: &[Candidate]) -> (Vec<usize>, Vec<BTreeSet<usize>>) {
        let mut reps: Vec<usize> = Vec::new();
        let mut authors: Vec<BTreeSet<usize>> = Vec::new();
        for (i, c) in candidates.iter().enumerate() {
            match reps
                .iter()
                .position(|&r| self.equivalent(&candidates[r].pair, &c.pair))
            {
                Some(at) => {
                    authors[at].insert(c.translator);
                }
                None => {
                    reps.push(i);
                    authors.push(BTreeSet::from([c.translator]));
                }
            }
        }
        (reps, authors)
    }

    fn equivalent(&self, a: &Prepared, b: &Prepared) -> bool {
        if crate::watchdog::unwanted() {
            return false; // the check is abandoned: no more solver calls
        }
        let (
            Prepared::Ready {
                premises: pa,
                claims: ca,
            },
            Prepared::Ready {
                premises: pb,
                claims: cb,
            },
        ) = (a, b)
        else {
            return false;
        };
        let same = |x: &[CheckedStatementInput], y: &[CheckedStatementInput]| -> bool {
            // The same expressions (what k translators agreeing usually write) need no solver.
            if x.len() == y.len() && x.iter().zip(y).all(|(a, b)| a.expr == b.expr) {
                return true;
            }
            let (Ok(x), Ok(y)) = (self.conjunction(x), self.conjunction(y)) else {
                return false;
            };
            self.without_rules(&[&x.iff(&y).not()]) == SatResult::Unsat
        };
        same(pa, pb) && same(ca, cb)
    }

    fn ambiguous(
        &self,
        candidates: &[Candidate],
        ci: usize,
        confidence: f64,
        others: &[usize],
        untranslated: &Untranslated,
    ) -> Finding {
        let Prepared::Ready { premises, claims } = &candidates[ci].pair else {
            return Finding::TooComplex(EmptyFinding::default());
        };
        let mine = translation_of(premises, claims, confidence, untranslated);
        let mut options = vec![TranslationOption {
            translations: Some(vec![mine]),
            extra: Default::default(),
        }];
        let mut scenarios = Vec::new();
        let this = match (self.conjunction(premises), self.conjunction(claims)) {
            (Ok(p), Ok(c)) => Bool::and(&[p, c]),
            _ => return Finding::TooComplex(EmptyFinding::default()),
        };
        let mut vars: Vec<String> = premises
            .iter()
            .chain(claims)
            .flat_map(|s| s.expr.variables().into_iter().map(String::from))
            .collect();
        for &t in others {
            let theirs: Vec<&Candidate> = candidates.iter().filter(|c| c.translator == t).collect();
            let mut translations = Vec::new();
            let mut their_vars = vars.clone();
            for c in &theirs {
                if let Prepared::Ready { premises, claims } = &c.pair {
                    translations.push(translation_of(
                        premises,
                        claims,
                        0.0,
                        &Untranslated::default(),
                    ));
                    their_vars.extend(
                        premises
                            .iter()
                            .chain(claims)
                            .flat_map(|s| s.expr.variables().into_iter().map(String::from)),
                    );
                }
            }
            // The same interpretation from two dissenting translators is listed once.
            let option = TranslationOption {
                translations: Some(translations),
                extra: Default::default(),
            };
            if options.contains(&option) {
                continue;
            }
            options.push(option);
            let that = self
                .translator_formula(candidates, t)
                .unwrap_or_else(|| Bool::from_bool(true));
            if let Some(s) = self.separating_scenario(&this, &that, &their_vars) {
                scenarios.push(s);
            }
            vars = their_vars;
        }
        Finding::TranslationAmbiguous(TranslationAmbiguousFinding {
            options: Some(options),
            difference_scenarios: Some(scenarios),
            extra: Default::default(),
        })
    }

    /// An assignment satisfying one reading and not the other (either way round).
    fn separating_scenario(
        &self,
        a: &Bool,
        b: &Bool,
        vars: &[String],
    ) -> Option<proofgate_core::findings::Scenario> {
        for f in [
            Bool::and(&[a.clone(), b.not()]),
            Bool::and(&[b.clone(), a.not()]),
        ] {
            let scope = crate::check::Pushed::new(&self.bare);
            self.bare.assert(&f);
            let found = (self.bare.check() == SatResult::Sat)
                .then(|| self.bare.get_model())
                .flatten()
                .map(|m| {
                    #[cfg(test)]
                    if self.panic_in_separating_scenario.replace(false) {
                        panic!("a scenario panicking mid-way (injected by a test)");
                    }
                    self.scenario(&m, vars)
                });
            drop(scope);
            if found.is_some() {
                return found;
            }
        }
        None
    }
}

fn collect_untranslated(translations: &[TranslatorOutput]) -> Untranslated {
    let mut u = Untranslated::default();
    for t in translations {
        for p in &t.untranslated_premises {
            if !u.premises.contains(p) {
                u.premises.push(p.clone());
            }
        }
        for c in &t.untranslated_claims {
            if !u.claims.contains(c) {
                u.claims.push(c.clone());
            }
        }
    }
    u
}

/// NO_TRANSLATIONS has no members in the AWS shape; the untranslated text rides along as an
/// extra `translation` member so the rewriting loop can show it.
fn no_translations(untranslated: &Untranslated) -> Finding {
    let mut extra = proofgate_core::findings::Extra::new();
    if !untranslated.premises.is_empty() || !untranslated.claims.is_empty() {
        let refs = |v: &[String]| v.iter().map(|t| json!({ "text": t })).collect::<Vec<_>>();
        extra.insert(
            "translation".into(),
            json!({
                "untranslatedPremises": refs(&untranslated.premises),
                "untranslatedClaims": refs(&untranslated.claims),
            }),
        );
    }
    Finding::NoTranslations(EmptyFinding { extra })
}

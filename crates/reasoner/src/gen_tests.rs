//! Symbolic test generation (paper §3.1, "Testing"): for each rule, scenarios found by Z3
//! where the rule is decisive (removing it from the policy changes the finding) and where it
//! is not, each with the finding the policy provably produces.
//!
//! Decisive cases come from a situation the other rules allow but the rule forbids: a model
//! `m` of `M \ {r} ∧ ¬r`. With `x` one of the rule's variables and `P` the values `m` gives
//! the rule's other variables:
//! - `P ⊢ x = m(x)` is INVALID (or IMPOSSIBLE) under `M`, because `P ∧ x = m(x)` falsifies `r`;
//!   without `r`, `m` satisfies it, so `r` is in every unsat core and must be cited.
//! - `P ⊢ x = v` (v forced under `M`), or else `P ⊢ x ≠ m(x)`, is VALID under `M`; without
//!   `r`, `m` is a counterexample, so again `r` must be cited.
//!
//! Every expected finding is computed by running the case through the same checker as
//! `policy test`, and the decisive flag by running it against the policy without the rule.

use crate::check::{new_solver, LoadError, Reasoner};
use crate::encode::model_value;
use crate::options::CheckOptions;
use proofgate_core::findings::{Finding, Statement};
use proofgate_core::policy::test_suite::{PolicyTestCase, PolicyTestSuite, TestStatement};
use proofgate_core::policy::{Expr, PolicyModel, PolicyRule, Sort, Term};
use proofgate_core::translation::{PairInput, TranslatorOutput};
use proofgate_core::verdict::{aggregate_verdict, Verdict};
use serde::Serialize;
use z3::ast::Bool;
use z3::{Model, SatResult};

/// How tests are generated.
#[derive(Debug, Clone, PartialEq)]
pub struct GenerateOptions {
    /// Limits of each check.
    pub check: CheckOptions,
    /// How many of a rule's variables are tried as the claim, at most.
    pub claim_variables: usize,
    /// Set from outside (e.g. when the client that asked has gone) to stop the generation
    /// before the next rule.
    pub cancel: Option<CancelFlag>,
}

/// A flag that stops a generation when set (two are equal when they are the same flag).
#[derive(Debug, Clone, Default)]
pub struct CancelFlag(pub std::sync::Arc<std::sync::atomic::AtomicBool>);

impl PartialEq for CancelFlag {
    fn eq(&self, other: &Self) -> bool {
        std::sync::Arc::ptr_eq(&self.0, &other.0)
    }
}

impl CancelFlag {
    /// Stops the generation before its next rule.
    pub fn cancel(&self) {
        self.0.store(true, std::sync::atomic::Ordering::Relaxed);
    }
    /// Whether it was set.
    pub fn is_cancelled(&self) -> bool {
        self.0.load(std::sync::atomic::Ordering::Relaxed)
    }
}

impl GenerateOptions {
    fn cancelled(&self) -> bool {
        self.cancel.as_ref().is_some_and(CancelFlag::is_cancelled)
    }
}

impl Default for GenerateOptions {
    fn default() -> Self {
        GenerateOptions {
            check: CheckOptions::default(),
            claim_variables: 8,
            cancel: None,
        }
    }
}

/// Something worth knowing about a rule for which not every kind of case could be made.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct GenerationNote {
    /// The rule.
    pub rule: String,
    /// What happened.
    pub message: String,
}

/// The generated cases and the notes.
#[derive(Debug, Clone, PartialEq)]
pub struct GeneratedTests {
    /// The cases, rule by rule, as `policy test` runs them.
    pub suite: PolicyTestSuite,
    /// Rules without a decisive case and why.
    pub notes: Vec<GenerationNote>,
}

/// Why no tests could be generated.
#[derive(Debug, thiserror::Error)]
pub enum GenerateError {
    /// The policy could not be loaded into the solver.
    #[error(transparent)]
    Load(#[from] LoadError),
    /// Every question would be IMPOSSIBLE, so no case says anything.
    #[error("the rules {} contradict each other, so every check is IMPOSSIBLE: fix them first (see `proofgate policy lint`)", .0.join(", "))]
    Contradictory(Vec<String>),
    /// The generation was cancelled (the client that asked for it has gone).
    #[error("the generation was cancelled")]
    Cancelled,
    /// The solver could not decide whether the rules are consistent.
    #[error("the solver could not decide within the time limit whether the rules are consistent: raise the timeout")]
    TooComplex,
}

/// At most this many of a rule's branch conditions are combined (2^3 situations).
const BRANCH_CONDITIONS: usize = 3;

/// What a rule branches on: the conditions of its `ite`s, and the defined flag of a Boolean
/// definition `(= flag ...)` (true and false are two different ways to break it). Each
/// combination of their values is a separate way for the rule to be wrong.
fn branch_conditions(expr: &Expr) -> Vec<&Expr> {
    let mut out: Vec<&Expr> = Vec::new();
    if let Expr::Eq(xs) = expr {
        if let Some(
            flag @ Expr::Var {
                sort: Sort::Bool, ..
            },
        ) = xs.first()
        {
            out.push(flag);
        }
    }
    expr.visit(&mut |e| {
        if let Expr::Ite(c, _, _) = e {
            if !out.contains(&c.as_ref()) {
                out.push(c);
            }
        }
    });
    out.truncate(BRANCH_CONDITIONS);
    out
}

/// A premise/claim candidate and what the policy says about it.
struct Candidate {
    premises: Vec<String>,
    claim: String,
    verdict: Verdict,
}

/// Generates cases for every rule of `model`.
pub fn generate_tests(
    model: &PolicyModel,
    options: &GenerateOptions,
) -> Result<GeneratedTests, GenerateError> {
    let full = Reasoner::new(model, options.check.clone())?;
    match full.contradictory_rules() {
        Ok(None) => {}
        Ok(Some(rules)) => return Err(GenerateError::Contradictory(rules)),
        Err(_) => return Err(GenerateError::TooComplex),
    }
    let mut suite = PolicyTestSuite {
        policy: Some(model.version_arn().to_string()),
        ..Default::default()
    };
    let mut notes = Vec::new();
    for (index, rule) in model.rules().iter().enumerate() {
        if options.cancelled() {
            return Err(GenerateError::Cancelled);
        }
        let mut without_def = model.definition().clone();
        without_def.rules.retain(|r| r.id != rule.id);
        // Removing a rule from a policy that loads cannot break it.
        let Ok(without_model) =
            PolicyModel::from_definition(without_def, Some(model.version_arn().to_string()))
        else {
            continue;
        };
        let without = Reasoner::new(&without_model, options.check.clone())?;
        let gen = RuleCases {
            model,
            full: &full,
            without: &without,
            index,
            rule,
            options,
        };
        let before = suite.tests.len();
        match gen.decisive() {
            Ok(cases) => suite.tests.extend(cases),
            Err(message) => notes.push(GenerationNote {
                rule: rule.id.clone(),
                message,
            }),
        }
        suite.tests.extend(gen.not_decisive());
        if suite.tests.len() == before {
            notes.push(GenerationNote {
                rule: rule.id.clone(),
                message: "no case could be generated within the solver's time limit".into(),
            });
        }
    }
    Ok(GeneratedTests { suite, notes })
}

/// The premise/claim pair's verdict, or None when it does not check (or is TOO_COMPLEX,
/// which proves nothing).
pub(crate) fn verdict_of(
    reasoner: &Reasoner<'_>,
    premises: &[String],
    claims: &[String],
) -> Option<(Verdict, Vec<Finding>)> {
    let stmt = |l: &String| Statement {
        logic: Some(l.clone()),
        ..Default::default()
    };
    let out = TranslatorOutput {
        pairs: vec![PairInput {
            premises: premises.iter().map(stmt).collect(),
            claims: claims.iter().map(stmt).collect(),
        }],
        ..Default::default()
    };
    let findings = reasoner.validate(&[out]).ok()?;
    let verdict = aggregate_verdict(&findings).verdict;
    (verdict != Verdict::TooComplex).then_some((verdict, findings))
}

struct RuleCases<'a> {
    model: &'a PolicyModel,
    full: &'a Reasoner<'a>,
    without: &'a Reasoner<'a>,
    index: usize,
    rule: &'a PolicyRule,
    options: &'a GenerateOptions,
}

impl RuleCases<'_> {
    /// The rule's variables, the likeliest "output" first: the consequent's variables of an
    /// implication, the left side of a definition `(= x ...)`.
    fn claim_order(&self) -> Vec<String> {
        let expr = &self.rule.expr;
        let mut order: Vec<&str> = match expr {
            Expr::Implies(xs) => xs.last().map(Expr::variables).unwrap_or_default(),
            Expr::Eq(xs) => xs.first().map(Expr::variables).unwrap_or_default(),
            _ => Vec::new(),
        };
        for v in expr.variables() {
            if !order.contains(&v) {
                order.push(v);
            }
        }
        order.into_iter().map(String::from).collect()
    }

    fn sort_of(&self, name: &str) -> Option<Sort> {
        self.model.schema().variable(name).map(|v| v.sort.clone())
    }

    /// `x` has its value in `m`, as an SMT-LIB atom (`x`, `(not x)` or `(= x v)`).
    fn atom(&self, m: &Model, name: &str, negate: bool) -> Option<String> {
        let sort = self.sort_of(name)?;
        let value = model_value(m, self.full.vocab.var(name)?, &sort)?;
        let var = Term::symbol(name).to_string();
        Some(match (&sort, negate) {
            (Sort::Bool, _) => {
                if (value.logic == "true") != negate {
                    var
                } else {
                    format!("(not {var})")
                }
            }
            (_, false) => format!("(= {var} {})", value.logic),
            (_, true) => format!("(not (= {var} {}))", value.logic),
        })
    }

    fn atoms(&self, m: &Model, vars: &[String], except: Option<&str>) -> Option<Vec<String>> {
        vars.iter()
            .filter(|v| Some(v.as_str()) != except)
            .map(|v| self.atom(m, v, false))
            .collect()
    }

    /// A model of the rules (all, or all but this one) and the extra formulas.
    fn solve(&self, skip_rule: bool, extra: &[Bool]) -> Result<Option<Model>, ()> {
        let solver = new_solver(self.options.check.timeout_ms);
        for (j, f) in self.full.rule_formulas.iter().enumerate() {
            if !(skip_rule && j == self.index) {
                solver.assert(f);
            }
        }
        for f in extra {
            solver.assert(f);
        }
        match solver.check() {
            SatResult::Sat => solver.get_model().map(Some).ok_or(()),
            SatResult::Unsat => Ok(None),
            SatResult::Unknown => Err(()),
        }
    }

    fn formula(&self, text: &str) -> Option<Bool> {
        let checked = self.model.check_statement(text).ok()?;
        self.full.vocab.formula(&checked.expr).ok()
    }

    fn english(&self, text: &str) -> String {
        match self.model.check_statement(text) {
            Ok(c) => self
                .model
                .english(&c.expr)
                .trim_end_matches('.')
                .to_string(),
            Err(_) => text.to_string(),
        }
    }

    /// The decisive INVALID/IMPOSSIBLE and VALID cases, or why there are none: one set for
    /// the first situation the solver finds that only this rule rules out, and one more for
    /// each combination of the rule's branch conditions (see `branch_conditions`) that
    /// situation does not cover. One situation tests one branch: with only it, a rule whose
    /// other branch changed (a 40% discount become 30%) passed every generated case, or not,
    /// depending on which situation the Z3 release at hand picked first.
    fn decisive(&self) -> Result<Vec<PolicyTestCase>, String> {
        let not_rule = self.full.rule_formulas[self.index].not();
        let bad = match self.solve(true, std::slice::from_ref(&not_rule)) {
            Ok(Some(m)) => m,
            Ok(None) => {
                return Err(format!(
                    "rule `{}` follows from the other rules: removing it changes no finding, so no case depends on it (it may be redundant)",
                    self.rule.id
                ))
            }
            Err(()) => {
                return Err(format!(
                    "the solver could not find, within the time limit, a situation that only rule `{}` rules out",
                    self.rule.id
                ))
            }
        };
        let conditions: Vec<Bool> = branch_conditions(&self.rule.expr)
            .into_iter()
            .filter_map(|c| self.full.vocab.formula(c).ok())
            .collect();
        let mut situations = vec![bad];
        for combination in 0..1u32 << conditions.len() {
            let branch: Vec<Bool> = conditions
                .iter()
                .enumerate()
                .map(|(i, c)| {
                    if combination >> i & 1 == 1 {
                        c.clone()
                    } else {
                        c.not()
                    }
                })
                .collect();
            if situations
                .iter()
                .any(|m| branch.iter().all(|b| crate::check::holds(m, b)))
            {
                continue;
            }
            let mut extra = vec![not_rule.clone()];
            extra.extend(branch);
            if let Ok(Some(m)) = self.solve(true, &extra) {
                situations.push(m);
            }
        }
        let mut cases: Vec<PolicyTestCase> = Vec::new();
        for (n, bad) in situations.iter().enumerate() {
            let suffix = if n == 0 {
                String::new()
            } else {
                format!("-{}", n + 1)
            };
            for case in self.decisive_in(bad, &suffix) {
                // Two situations can give the same case.
                if !cases
                    .iter()
                    .any(|c| c.premises == case.premises && c.claims == case.claims)
                {
                    cases.push(case);
                }
            }
        }
        if cases.is_empty() {
            return Err(format!(
                "no case for rule `{}` could be checked within the solver's time limit",
                self.rule.id
            ));
        }
        Ok(cases)
    }

    /// The decisive cases of one situation `bad` (a model of the other rules in which this
    /// one is false); `suffix` tells the ids of different situations apart.
    fn decisive_in(&self, bad: &Model, suffix: &str) -> Vec<PolicyTestCase> {
        let vars: Vec<String> = self
            .rule
            .expr
            .variables()
            .into_iter()
            .map(String::from)
            .collect();
        let mut fallback: Option<(String, Candidate)> = None;
        for x in self.claim_order().iter().take(self.options.claim_variables) {
            let (Some(premises), Some(claim)) =
                (self.atoms(bad, &vars, Some(x)), self.atom(bad, x, false))
            else {
                continue;
            };
            let Some((verdict, _)) = verdict_of(self.full, &premises, std::slice::from_ref(&claim))
            else {
                continue;
            };
            let candidate = Candidate {
                premises,
                claim,
                verdict,
            };
            // Prefer premises the policy allows (INVALID) over contradictory ones (IMPOSSIBLE).
            if verdict == Verdict::Invalid {
                fallback = Some((x.clone(), candidate));
                break;
            }
            fallback.get_or_insert((x.clone(), candidate));
        }
        let Some((x, wrong)) = fallback else {
            return Vec::new();
        };
        let mut cases = Vec::new();
        if let Some(c) = self.case(&wrong, &format!("decisive-invalid{suffix}"), true) {
            cases.push(c);
        }
        if wrong.verdict == Verdict::Invalid {
            if let Some(right) = self.valid_claim(bad, &x, &wrong.premises) {
                if let Some(c) = self.case(&right, &format!("decisive-valid{suffix}"), true) {
                    cases.push(c);
                }
            }
        }
        cases
    }

    /// A claim about `x` that the policy proves from `premises`: its forced value if it has
    /// one, else "not the value the rule rules out".
    fn valid_claim(&self, bad: &Model, x: &str, premises: &[String]) -> Option<Candidate> {
        let p: Vec<Bool> = premises
            .iter()
            .map(|t| self.formula(t))
            .collect::<Option<_>>()?;
        if let Ok(Some(good)) = self.solve(false, &p) {
            if let Some(claim) = self.atom(&good, x, false) {
                if let Some((Verdict::Valid, _)) =
                    verdict_of(self.full, premises, std::slice::from_ref(&claim))
                {
                    return Some(Candidate {
                        premises: premises.to_vec(),
                        claim,
                        verdict: Verdict::Valid,
                    });
                }
            }
        }
        let claim = self.atom(bad, x, true)?;
        let (verdict, _) = verdict_of(self.full, premises, std::slice::from_ref(&claim))?;
        Some(Candidate {
            premises: premises.to_vec(),
            claim,
            verdict,
        })
    }

    /// A case where the rule holds but removing it changes nothing.
    fn not_decisive(&self) -> Option<PolicyTestCase> {
        let activation = match &self.rule.expr {
            Expr::Implies(xs) if xs.len() > 1 => self
                .full
                .vocab
                .formula(&Expr::And(xs[..xs.len() - 1].to_vec()))
                .ok(),
            _ => None,
        };
        let ok = match activation.and_then(|a| self.solve(false, &[a]).ok().flatten()) {
            Some(m) => m,
            None => self.solve(false, &[]).ok().flatten()?,
        };
        let vars: Vec<String> = self
            .rule
            .expr
            .variables()
            .into_iter()
            .map(String::from)
            .collect();
        let mut candidates: Vec<(Vec<String>, String)> = Vec::new();
        for x in self.claim_order().iter().take(self.options.claim_variables) {
            if let (Some(p), Some(c)) = (self.atoms(&ok, &vars, Some(x)), self.atom(&ok, x, false))
            {
                candidates.push((p, c));
            }
        }
        // A neighbouring variable (in a rule sharing one of this rule's variables).
        if let Some(all) = self.atoms(&ok, &vars, None) {
            let neighbours = self.neighbours(&vars);
            for y in neighbours.iter().take(self.options.claim_variables) {
                if let Some(c) = self.atom(&ok, y, false) {
                    candidates.push((all.clone(), c));
                }
            }
            candidates.push((all, self.rule.term.to_string()));
        }
        for (premises, claim) in candidates {
            let Some((verdict, _)) = verdict_of(self.full, &premises, std::slice::from_ref(&claim))
            else {
                continue;
            };
            let Some((other, _)) =
                verdict_of(self.without, &premises, std::slice::from_ref(&claim))
            else {
                continue;
            };
            if verdict == other {
                let c = Candidate {
                    premises,
                    claim,
                    verdict,
                };
                return self.case(&c, "not-decisive", false);
            }
        }
        None
    }

    fn neighbours(&self, vars: &[String]) -> Vec<String> {
        let mut out: Vec<String> = Vec::new();
        for r in self.model.rules() {
            let rv = r.expr.variables();
            if rv.iter().any(|v| vars.iter().any(|w| w == v)) {
                for v in rv {
                    if !vars.iter().any(|w| w == v) && !out.iter().any(|o| o == v) {
                        out.push(v.to_string());
                    }
                }
            }
        }
        out
    }

    /// The case for a candidate, after checking that removing the rule changes the finding
    /// exactly when `decisive` says so.
    fn case(&self, c: &Candidate, kind: &str, decisive: bool) -> Option<PolicyTestCase> {
        // A check that gives up without the rule proves nothing either way: no case.
        let (without, _) = verdict_of(self.without, &c.premises, std::slice::from_ref(&c.claim))?;
        let changes = without != c.verdict;
        if changes != decisive {
            return None;
        }
        let stmt = |l: &String| TestStatement::Described {
            logic: l.clone(),
            natural_language: Some(self.english(l)),
        };
        let given = if c.premises.is_empty() {
            "No premises".to_string()
        } else {
            let ps: Vec<String> = c.premises.iter().map(|p| self.english(p)).collect();
            format!("Given: {}", ps.join("; "))
        };
        let effect = if decisive {
            format!(
                "Without rule `{}` it would be {}.",
                self.rule.id,
                without.as_str()
            )
        } else {
            format!("Rule `{}` holds here but is not needed.", self.rule.id)
        };
        let mut case = PolicyTestCase::logic(
            format!("{}/{kind}", self.rule.id),
            c.premises.iter().map(stmt).collect(),
            vec![stmt(&c.claim)],
            c.verdict,
        );
        case.description = Some(format!(
            "{given}. Claim: {}. {}. {effect}",
            self.english(&c.claim),
            c.verdict.as_str()
        ));
        case.rule = Some(self.rule.id.clone());
        case.decisive = Some(decisive);
        // Decisive means the rule is in every proof, so every finding must cite it.
        if decisive
            && matches!(
                c.verdict,
                Verdict::Valid | Verdict::Invalid | Verdict::Impossible
            )
        {
            case.expected_rules = vec![self.rule.id.clone()];
        }
        Some(case)
    }
}

//! One premise/claim pair against the policy: the first applicable finding of the table in
//! DESIGN.md, with its feedback (rules from minimised unsat cores, scenarios from models).

use crate::encode::{model_value, EncodeError, Vocabulary};
use crate::options::CheckOptions;
use crate::slice::{Components, Slice};
use crate::triviality::{trivial_finding, PairNeed, Triviality};
use proofgate_core::findings::{
    ContradictionFinding, EmptyFinding, Finding, LogicWarning, LogicWarningType, Rule,
    SatisfiableFinding, Scenario, Statement, Translation, ValidFinding,
};
use proofgate_core::policy::{Expr, PolicyModel, Term};
use std::cell::{OnceCell, RefCell};
use std::collections::{BTreeSet, HashMap};
use std::rc::Rc;
use z3::ast::{Ast, Bool, Dynamic};
use z3::{AstKind, DeclKind, Model, Params, SatResult, Solver};

/// A premise or claim after parsing and type checking, with the statement it came from.
#[derive(Debug, Clone)]
pub struct CheckedStatementInput {
    /// The statement as it will appear in findings (`naturalLanguage` filled in from the
    /// structured English when the translator gave none).
    pub statement: Statement,
    /// The typed expression.
    pub expr: Expr,
}

/// Text that the translators could not put into the policy's vocabulary.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Untranslated {
    /// Premise text.
    pub premises: Vec<String>,
    /// Claim text.
    pub claims: Vec<String>,
}

/// The result of one solver call, with unknown kept apart so it can never count as a proof.
pub(crate) enum Outcome {
    Sat(Model),
    Unsat(Vec<usize>),
    Unknown,
}

/// A solver's answer, with the model when one was asked for (and could be read).
enum Answer {
    Sat(Option<Model>),
    Unsat(Vec<usize>),
    Unknown,
}

/// Whether a set of rules and assumptions is unsatisfiable, without a model.
pub(crate) enum Refutation {
    Refuted(Vec<usize>),
    Satisfiable,
    Unknown,
}

/// A policy loaded into Z3, ready to check premise/claim pairs. Holds Z3 objects of the
/// current thread's context, so it stays on the thread that built it.
pub struct Reasoner<'m> {
    pub(crate) model: &'m PolicyModel,
    pub(crate) options: CheckOptions,
    pub(crate) vocab: Vocabulary,
    pub(crate) rule_formulas: Vec<Bool>,
    /// Every rule, asserted once (asserted again in a new solver every `RENEW_AFTER` checks,
    /// see `renewed`).
    full: RefCell<Rc<LoadedRules>>,
    /// The rules the current check uses: `full`, or a slice's (see `check_pair`); none
    /// between checks, so a renewed solver is dropped, not kept alive here.
    active: RefCell<Option<Rc<LoadedRules>>>,
    /// Solvers for recently used slices, most recent last: a slice of a large policy is
    /// checked in a solver holding only its rules, since a check costs time in proportion to
    /// everything asserted, used or not.
    sliced: RefCell<Vec<(Vec<usize>, Rc<LoadedRules>)>>,
    /// A solver with no rule in it, for what must hold "without any rule" (logic warnings,
    /// triviality, agreement between translators). Made once: a new Z3 solver per question
    /// costs about a millisecond, far more than the question.
    pub(crate) bare: Solver,
    /// The model of nothing (every variable at its default value: false, 0, the first enum
    /// value), made once: a witness that a formula it makes true is satisfiable.
    default_model: OnceCell<Option<Model>>,
    /// Connected components of the rules' variables, for slicing.
    components: Components,
    /// Models that showed a rule necessary in earlier checks (see `witness`).
    pub(crate) witnesses: crate::witness::Witnesses,
    /// The components not proved consistent (inconsistent, or the solver could not tell),
    /// decided once, on first use. Every slice includes them.
    unproved: OnceCell<Vec<usize>>,
    /// Tests make the next solver call panic, after the solver answered (mid-check).
    #[cfg(test)]
    pub(crate) panic_in_next_call: std::cell::Cell<bool>,
    /// Tests make the next scenario that separates two translators' readings panic, while
    /// its scope is pushed on the rule-free solver.
    #[cfg(test)]
    pub(crate) panic_in_separating_scenario: std::cell::Cell<bool>,
}

/// Slice solvers kept per worker.
const SLICE_SOLVERS: usize = 64;

/// Checks a solver serves before it is replaced by a new one with the same rules. With the
/// simplex arithmetic solver (see `check_solver`) a solver does not get slower from check to
/// check (park: the same 6.7M instructions per check over the 1st-40th, 40th-72nd and
/// 72nd-136th checks), so this is only a bound on what Z3 may keep, and a renewal (about 40M
/// instructions, the rules internalised again) is rare. Tests use a small bound to exercise it.
const RENEW_AFTER: usize = if cfg!(test) { 32 } else { 1024 };

/// Rules asserted in a solver, each behind an assumption literal (`literal => rule`), so a
/// check picks the rules it uses and unsat cores name rules.
pub(crate) struct LoadedRules {
    pub(crate) solver: Solver,
    /// Rule index -> its literal.
    literals: HashMap<usize, Bool>,
    /// Literal -> rule index.
    literal_index: HashMap<Bool, usize>,
    /// Checks (`check_pair`) this solver has served.
    checks: std::cell::Cell<usize>,
    /// Literals for the current check's assumptions (premises, claims, pins), kept from check
    /// to check: each check's `l => formula` assertions go with its scope, and the literals
    /// are used again by the next check. New constants in every check made a solver slower
    /// with each check it served; the same few do not.
    pool: RefCell<Vec<Bool>>,
    /// How many of `pool` the current check has taken.
    taken: std::cell::Cell<usize>,
    /// Formula -> the literal standing for it in the current check (see `pin`).
    pins: RefCell<HashMap<Bool, Bool>>,
    /// What the current check asserted (`l => f`), for the fallback solver.
    scope: RefCell<Vec<Bool>>,
    /// The same rules, behind the same literals, in Z3's default arithmetic solver, made on
    /// first use (see `Reasoner::fallback`).
    fallback: OnceCell<Solver>,
}

impl LoadedRules {
    fn new<'a>(rules: impl Iterator<Item = (usize, &'a Bool)>) -> LoadedRules {
        let solver = check_solver();
        let mut literals = HashMap::new();
        let mut literal_index = HashMap::new();
        for (i, f) in rules {
            // Z3 names a fresh constant `prefix!N`, and a policy variable of that name would
            // be the same term (a Boolean `rule!0` made rule 0's switch, and any claim about it
            // VALID): the prefix holds `|`, which no policy name may.
            let lit = Bool::fresh_const("rule|");
            solver.assert(lit.implies(f));
            literal_index.insert(lit.clone(), i);
            literals.insert(i, lit);
        }
        LoadedRules {
            solver,
            literals,
            literal_index,
            checks: Default::default(),
            pool: Default::default(),
            taken: Default::default(),
            pins: Default::default(),
            scope: Default::default(),
            fallback: OnceCell::new(),
        }
    }

    /// Asserts `f` in the current check's scope.
    pub(crate) fn assert_in_check(&self, f: &Bool) {
        self.solver.assert(f);
        self.scope.borrow_mut().push(f.clone());
    }

    /// A literal no assertion of the current check uses yet.
    pub(crate) fn literal(&self) -> Bool {
        let mut pool = self.pool.borrow_mut();
        let i = self.taken.get();
        self.taken.set(i + 1);
        if i == pool.len() {
            // `|` in the prefix: no policy name can be the fresh constant's (see above).
            pool.push(Bool::fresh_const("lit|"));
        }
        pool[i].clone()
    }

    /// A literal `l` with `l => f` asserted in the current check's scope, for use as an
    /// assumption: the one made earlier in this check for the same formula, if any.
    pub(crate) fn pin(&self, f: &Bool) -> Bool {
        self.pin_all([f]).remove(0)
    }

    /// `pin` for each of `fs`, in order, with one assertion for all the new ones: Z3 resets
    /// its simplifier's settings and cache for every formula asserted (about 24,000
    /// instructions each, a tenth of a park check when each pin was asserted apart).
    pub(crate) fn pin_all<'f>(&self, fs: impl IntoIterator<Item = &'f Bool>) -> Vec<Bool> {
        let mut new = Vec::new();
        let literals = {
            let mut pins = self.pins.borrow_mut();
            fs.into_iter()
                .map(|f| {
                    if let Some(l) = pins.get(f) {
                        return l.clone();
                    }
                    let l = self.literal();
                    new.push(l.implies(f));
                    pins.insert(f.clone(), l.clone());
                    l
                })
                .collect()
        };
        match new.len() {
            0 => {}
            1 => self.assert_in_check(&new[0]),
            _ => self.assert_in_check(&Bool::and(&new)),
        }
        literals
    }

    /// Opens a check's scope.
    pub(crate) fn begin_check(&self) {
        self.solver.push();
    }

    /// Closes it: its assertions go, and with them what its literals stood for.
    pub(crate) fn end_check(&self) {
        self.solver.pop(1);
        self.pins.borrow_mut().clear();
        self.scope.borrow_mut().clear();
        self.taken.set(0);
    }
}

/// One check's scope on the rules it uses, made the reasoner's active rules; ended, and the
/// active rules put back, when dropped. A check that panics (a bug) must still end its scope:
/// the next check takes the same pool literals, and an `l => f` left asserted from the
/// panicked one would constrain it (a premise of the old question silently added to the
/// new one, which can make a claim follow that does not).
struct CheckScope<'r, 'm> {
    reasoner: &'r Reasoner<'m>,
    loaded: Rc<LoadedRules>,
    previous: Option<Rc<LoadedRules>>,
}

impl<'r, 'm> CheckScope<'r, 'm> {
    fn begin(reasoner: &'r Reasoner<'m>, loaded: Rc<LoadedRules>) -> CheckScope<'r, 'm> {
        let previous = reasoner.active.replace(Some(loaded.clone()));
        loaded.begin_check();
        CheckScope {
            reasoner,
            loaded,
            previous,
        }
    }
}

impl Drop for CheckScope<'_, '_> {
    fn drop(&mut self) {
        self.loaded.end_check();
        self.reasoner.active.replace(self.previous.take());
    }
}

/// A failure to load the policy into the solver.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// A rule Z3 cannot be given (a bug, not a user error).
    #[error("rule `{rule}`: {source}")]
    Rule {
        /// The rule's id.
        rule: String,
        /// Why.
        source: EncodeError,
    },
    /// The Z3 this process loaded is one the bindings are not numbered for (see
    /// [`crate::supported_z3`]): no finding is computed with it.
    #[error("{0}")]
    UnsupportedZ3(String),
}

impl<'m> Reasoner<'m> {
    /// Encodes every rule of `model` for Z3.
    pub fn new(model: &'m PolicyModel, options: CheckOptions) -> Result<Reasoner<'m>, LoadError> {
        crate::check_linked_z3().map_err(LoadError::UnsupportedZ3)?;
        let vocab = Vocabulary::new(model.schema());
        let mut rule_formulas = Vec::new();
        for rule in model.rules() {
            let f = vocab
                .formula(&rule.expr)
                .map_err(|source| LoadError::Rule {
                    rule: rule.id.clone(),
                    source,
                })?;
            rule_formulas.push(f);
        }
        let full = Rc::new(LoadedRules::new(rule_formulas.iter().enumerate()));
        let names: Vec<String> = vocab.variables().iter().map(|(n, _)| n.clone()).collect();
        let components = Components::new(&names, model.rules().iter().map(|r| &r.expr));
        let bare = new_solver(options.timeout_ms);
        Ok(Reasoner {
            model,
            options,
            vocab,
            rule_formulas,
            active: RefCell::new(None),
            full: RefCell::new(full),
            sliced: RefCell::new(Vec::new()),
            bare,
            default_model: OnceCell::new(),
            components,
            witnesses: Default::default(),
            unproved: OnceCell::new(),
            #[cfg(test)]
            panic_in_next_call: Default::default(),
            #[cfg(test)]
            panic_in_separating_scenario: Default::default(),
        })
    }

    /// Decides, once, which groups of connected rules are consistent (what slicing needs).
    /// Checks do this on first use; a long-lived worker calls it up front so the first request
    /// does not pay for it.
    pub fn warm_up(&self) {
        self.unproved();
    }

    /// Components not proved consistent. The whole policy is consistent iff every component
    /// is (they share no variable), so each is checked on its own: many small checks instead
    /// of one over every rule, which at ten times Bedrock's limits runs out of time.
    fn unproved(&self) -> &[usize] {
        self.unproved.get_or_init(|| {
            (0..self.components.len())
                .filter(|&c| {
                    let rules = self.components.rules(c);
                    if rules.is_empty() {
                        return false;
                    }
                    let solver = new_solver(self.options.timeout_ms);
                    for &r in rules {
                        solver.assert(&self.rule_formulas[r]);
                    }
                    solver.check() != SatResult::Sat
                })
                .collect()
        })
    }

    /// The rules and variables a check of these statements needs: those connected to their
    /// variables, plus every group of rules not proved consistent (see `slice.rs` for why
    /// that is exact).
    pub(crate) fn slice_for(
        &self,
        premises: &[CheckedStatementInput],
        claims: &[CheckedStatementInput],
    ) -> Slice {
        if !self.options.slice_rules {
            return self.full_slice();
        }
        self.components.slice(
            premises.iter().chain(claims).map(|s| &s.expr),
            self.unproved(),
        )
    }

    pub(crate) fn full_slice(&self) -> Slice {
        Slice {
            rules: self.all_rules(),
            vars: (0..self.vocab.variables().len()).collect(),
        }
    }

    /// Whether `fs` together are satisfiable with no rule at all (on the rule-free solver).
    pub(crate) fn without_rules(&self, fs: &[&Bool]) -> SatResult {
        let _scope = Pushed::new(&self.bare);
        for f in fs {
            self.bare.assert(*f);
        }
        self.bare.check()
    }

    /// The model of no formula at all (see `default_model`).
    pub(crate) fn default_model(&self) -> Option<&Model> {
        self.default_model
            .get_or_init(|| {
                let _scope = Pushed::new(&self.bare);
                match self.bare.check() {
                    SatResult::Sat => self.bare.get_model(),
                    _ => None,
                }
            })
            .as_ref()
    }

    /// The options in force.
    pub fn options(&self) -> &CheckOptions {
        &self.options
    }

    /// The policy.
    pub fn policy(&self) -> &PolicyModel {
        self.model
    }

    pub(crate) fn rule_ref(&self, index: usize) -> Rule {
        Rule::new(
            self.model.rules()[index].id.clone(),
            self.model.version_arn(),
        )
    }

    /// The solver of the current check.
    pub(crate) fn loaded(&self) -> Rc<LoadedRules> {
        match &*self.active.borrow() {
            Some(loaded) => loaded.clone(),
            None => self.full.borrow().clone(),
        }
    }

    /// The solver for a slice's rules: one holding only the slice's rules (kept for the next
    /// checks of the same slice), or the full one (which holds every rule) when the slice is
    /// more than half the policy, so the kept solvers stay small.
    fn loaded_for(&self, rules: &[usize]) -> Rc<LoadedRules> {
        if rules.len() * 2 > self.rule_formulas.len() {
            let mut full = self.full.borrow_mut();
            if let Some(fresh) = self.renewed(&full) {
                *full = fresh;
            }
            return full.clone();
        }
        let mut cache = self.sliced.borrow_mut();
        if let Some(at) = cache.iter().position(|(r, _)| r == rules) {
            let mut hit = cache.remove(at);
            if let Some(fresh) = self.renewed(&hit.1) {
                hit.1 = fresh;
            }
            let loaded = hit.1.clone();
            cache.push(hit);
            return loaded;
        }
        let loaded = Rc::new(LoadedRules::new(
            rules.iter().map(|&i| (i, &self.rule_formulas[i])),
        ));
        if cache.len() >= SLICE_SOLVERS {
            cache.remove(0);
        }
        cache.push((rules.to_vec(), loaded.clone()));
        loaded
    }

    /// A new solver with the same rules as `loaded` once that one has served `RENEW_AFTER`
    /// checks (counting this one). Z3 keeps state from every check in a solver, scopes
    /// popped or not, and a solver used for thousands of checks gets several times slower
    /// per check (the park example: 2 ms, then 8 ms after 100 checks); asserting the rules
    /// again costs far less than that.
    fn renewed(&self, loaded: &LoadedRules) -> Option<Rc<LoadedRules>> {
        let used = loaded.checks.get() + 1;
        loaded.checks.set(used);
        (used > RENEW_AFTER).then(|| {
            let rules: Vec<usize> = {
                let mut r: Vec<usize> = loaded.literals.keys().copied().collect();
                r.sort_unstable();
                r
            };
            Rc::new(LoadedRules::new(
                rules.iter().map(|&i| (i, &self.rule_formulas[i])),
            ))
        })
    }

    /// Checks `rules` (rule indices) together with the fixed assumption literals, in the
    /// current check's solver. A rule that solver does not hold makes the answer unknown
    /// (never a proof).
    pub(crate) fn solve(&self, rules: &[usize], fixed: &[Bool]) -> Outcome {
        match self.ask(rules, fixed, true) {
            Answer::Sat(Some(m)) => Outcome::Sat(m),
            Answer::Sat(None) | Answer::Unknown => Outcome::Unknown,
            Answer::Unsat(core) => Outcome::Unsat(core),
        }
    }

    /// Whether `rules` and `fixed` are unsatisfiable (with the rules of an unsat core). Unlike
    /// `solve`, a model is never read back (about half a million instructions each, for a
    /// model nobody reads).
    pub(crate) fn refute(&self, rules: &[usize], fixed: &[Bool]) -> Refutation {
        match self.ask(rules, fixed, false) {
            Answer::Unsat(core) => Refutation::Refuted(core),
            Answer::Sat(_) => Refutation::Satisfiable,
            Answer::Unknown => Refutation::Unknown,
        }
    }

    /// One question to the current check's solver; a model is read back when `model` is set.
    /// When the simplex solver gives up (Z3 documents its nonlinear support as incomplete),
    /// the question goes to the fallback solver, so no question goes unanswered that the
    /// default solver would answer.
    fn ask(&self, rules: &[usize], fixed: &[Bool], model: bool) -> Answer {
        let loaded = self.loaded();
        let Some(assumptions) = self.assumptions(&loaded, rules, fixed) else {
            return Answer::Unknown;
        };
        let solver = &loaded.solver;
        let first = self.limited_check(solver, &assumptions);
        #[cfg(test)]
        if self.panic_in_next_call.replace(false) {
            panic!("a check panicking mid-way (injected by a test)");
        }
        if forced_fallback() || (first == SatResult::Unknown && gave_up(solver)) {
            let fallback = self.fallback(&loaded);
            let scope = Pushed::new(fallback);
            for f in loaded.scope.borrow().iter() {
                fallback.assert(f);
            }
            let r = self.limited_check(fallback, &assumptions);
            // Read before the pop, which discards the answer.
            let outcome = self.outcome(&loaded, fallback, r, model);
            drop(scope);
            return outcome;
        }
        self.outcome(&loaded, solver, first, model)
    }

    fn outcome(&self, loaded: &LoadedRules, solver: &Solver, r: SatResult, model: bool) -> Answer {
        match r {
            SatResult::Sat => Answer::Sat(if model { solver.get_model() } else { None }),
            SatResult::Unsat => Answer::Unsat(self.core(loaded, solver)),
            SatResult::Unknown => Answer::Unknown,
        }
    }

    /// The solver of `loaded`'s rules in Z3's default arithmetic solver (complete for the
    /// nonlinear real arithmetic policies can state, where the simplex solver gives up).
    fn fallback<'l>(&self, loaded: &'l LoadedRules) -> &'l Solver {
        loaded.fallback.get_or_init(|| {
            let solver = new_solver(None);
            for (i, lit) in &loaded.literals {
                solver.assert(lit.implies(&self.rule_formulas[*i]));
            }
            solver
        })
    }

    /// The assumption literals of `rules` and `fixed`; None when a rule is not in `loaded`.
    fn assumptions(
        &self,
        loaded: &LoadedRules,
        rules: &[usize],
        fixed: &[Bool],
    ) -> Option<Vec<Bool>> {
        let mut assumptions = Vec::with_capacity(rules.len() + fixed.len());
        for i in rules {
            assumptions.push(loaded.literals.get(i)?.clone());
        }
        assumptions.extend_from_slice(fixed);
        Some(assumptions)
    }

    /// One call of `solver`, limited in time.
    fn limited_check(&self, solver: &Solver, assumptions: &[Bool]) -> SatResult {
        let limit = std::time::Duration::from_millis(u64::from(self.options.timeout_ms));
        crate::watchdog::limited(solver, limit, || solver.check_assumptions(assumptions))
    }

    /// The rules (of `loaded`) in the unsat core of `solver`'s last call.
    fn core(&self, loaded: &LoadedRules, solver: &Solver) -> Vec<usize> {
        solver
            .get_unsat_core()
            .iter()
            .filter_map(|l| loaded.literal_index.get(l).copied())
            .collect()
    }

    /// Deletion-based minimisation: drops each rule of the core in turn and keeps the drop
    /// when the rest is still proved unsat, so the result is locally minimal. A rule whose
    /// removal times out is kept (the set stays a proof).
    fn minimise(&self, core: Vec<usize>, fixed: &[Bool]) -> Vec<usize> {
        self.minimise_witnessed(core, fixed, None).0
    }

    /// `minimise`, and whether a drop was proved satisfiable: then `fixed` alone is too (a
    /// model of the fixed literals and some rules is one of the fixed literals).
    ///
    /// With a `trial`, a drop is first tried on the witness an earlier check kept for that
    /// rule (see `witness`); the solver is asked when it fails, and its model kept when
    /// there is none yet. The result is the same: a witness that evaluates true is a model,
    /// which is what the solver's satisfiable answer proves.
    fn minimise_witnessed(
        &self,
        core: Vec<usize>,
        fixed: &[Bool],
        trial: Option<&crate::witness::Trial<'_>>,
    ) -> (Vec<usize>, bool) {
        use crate::witness::Try;
        let mut kept: Vec<usize> = core;
        kept.sort_unstable();
        kept.dedup();
        let mut witnessed = false;
        let mut i = 0;
        while i < kept.len() {
            let mut candidate = kept.clone();
            let dropped = candidate.remove(i);
            let attempt = trial.map(|trial| {
                let rules = candidate
                    .iter()
                    .filter_map(|&r| self.model.rules().get(r).map(|rule| &rule.expr));
                (trial, self.witnesses.try_for(dropped, rules, trial))
            });
            let answer = match attempt {
                Some((_, Try::Shown)) => Refutation::Satisfiable,
                Some((trial, Try::AskKeepingModel)) => match self.solve(&candidate, fixed) {
                    Outcome::Sat(model) => {
                        self.witnesses.keep(dropped, &model, trial);
                        Refutation::Satisfiable
                    }
                    Outcome::Unsat(core) => Refutation::Refuted(core),
                    Outcome::Unknown => Refutation::Unknown,
                },
                Some((_, Try::Ask)) | None => self.refute(&candidate, fixed),
            };
            match answer {
                Refutation::Refuted(smaller) => {
                    let smaller: BTreeSet<usize> = smaller.into_iter().collect();
                    kept = candidate
                        .into_iter()
                        .filter(|r| smaller.contains(r))
                        .collect();
                    // The element now at `i` has not been tried yet.
                }
                Refutation::Satisfiable => {
                    witnessed = true;
                    i += 1;
                }
                Refutation::Unknown => i += 1,
            }
        }
        (kept, witnessed)
    }

    pub(crate) fn all_rules(&self) -> Vec<usize> {
        (0..self.rule_formulas.len()).collect()
    }

    /// The finding for one pair. `confidence` goes into the translation as is.
    pub fn check_pair(
        &self,
        premises: &[CheckedStatementInput],
        claims: &[CheckedStatementInput],
        confidence: f64,
        untranslated: &Untranslated,
    ) -> Finding {
        let translation = translation_of(premises, claims, confidence, untranslated);
        let size: usize = premises
            .iter()
            .chain(claims)
            .map(|s| expr_size(&s.expr))
            .sum();
        if size > self.options.max_formula_nodes {
            return Finding::TooComplex(EmptyFinding::default());
        }
        let (p, c) = match (self.conjunction(premises), self.conjunction(claims)) {
            (Ok(p), Ok(c)) => (p, c),
            _ => return Finding::TooComplex(EmptyFinding::default()),
        };
        let slice = self.slice_for(premises, claims);
        let loaded = self.loaded_for(&slice.rules);
        let _check = CheckScope::begin(self, loaded);
        crate::watchdog::watched(|| self.decide(&slice, (&p, &c), (premises, claims), translation))
    }

    /// The first applicable finding of DESIGN.md's table: IMPOSSIBLE, trivial, INVALID, VALID,
    /// SATISFIABLE. The solver calls are made in the order that answers the common cases with
    /// the fewest: when the rules, premises and claims have a model, the premises are possible
    /// (no IMPOSSIBLE call), and when the rules, premises and negated claims have one, the
    /// claims need the policy (no triviality call); models found on the way also settle
    /// what they can of the logic warnings. Every other answer is asked as before, so the
    /// finding is the one the table gives.
    fn decide(
        &self,
        slice: &Slice,
        (p, c): (&Bool, &Bool),
        (premises, claims): (&[CheckedStatementInput], &[CheckedStatementInput]),
        translation: Translation,
    ) -> Finding {
        let loaded = self.loaded();
        let (p_lit, c_lit, n_lit) = (loaded.literal(), loaded.literal(), loaded.literal());
        // One assertion (see `pin_all`).
        loaded.assert_in_check(&Bool::and(&[
            p_lit.implies(p),
            c_lit.implies(c),
            n_lit.implies(c.not()),
        ]));
        let all = &slice.rules;
        let too_complex = || Finding::TooComplex(EmptyFinding::default());
        let warning = |witnesses: &[&Model]| self.logic_warning(premises, claims, p, c, witnesses);
        let contradiction =
            |core: Vec<usize>, fixed: &[Bool], witnesses: &[&Model]| ContradictionFinding {
                translation: Some(translation.clone()),
                contradicting_rules: Some(
                    self.minimise(core, fixed)
                        .into_iter()
                        .map(|i| self.rule_ref(i))
                        .collect(),
                ),
                logic_warning: warning(witnesses),
                extra: Default::default(),
            };

        // M and P and C: a model makes the premises possible (no IMPOSSIBLE) and the claims
        // not contradicted (no INVALID).
        let pc = [p_lit.clone(), c_lit];
        let with_claims = self.solve(all, &pc);
        // IMPOSSIBLE: M |= not P. With no premises this asks whether the rules alone
        // are contradictory, which makes every pair impossible.
        let premises_model = match &with_claims {
            Outcome::Sat(_) => None,
            _ => match self.solve(all, std::slice::from_ref(&p_lit)) {
                Outcome::Unknown => return too_complex(),
                Outcome::Unsat(core) => {
                    return Finding::Impossible(contradiction(
                        core,
                        std::slice::from_ref(&p_lit),
                        &[],
                    ))
                }
                Outcome::Sat(m) => Some(m),
            },
        };
        // M and P and not C: a model shows the claims need the policy (P and not C has a
        // model without any rule), and that they do not follow (no VALID).
        let pn = [p_lit, n_lit];
        let without_claims = match (&with_claims, claims.is_empty()) {
            (Outcome::Sat(_), false) => Some(self.solve(all, &pn)),
            _ => None,
        };
        // The supporting rules of a VALID pair, minimised first: a rule found necessary on
        // the way shows that P and not C has a model, which settles the triviality question
        // below without a call, and an empty support proves that the claims follow from the
        // premises alone. (Only the order of the work changes: the finding is the same.)
        let mut support = None;
        if let (Outcome::Sat(true_model), Some(Outcome::Unsat(core))) =
            (&with_claims, &without_claims)
        {
            let trial = self.witness_trial(slice, premises, claims, true_model);
            support = Some(self.minimise_witnessed(core.clone(), &pn, trial.as_ref()));
        }
        let need = match &support {
            // A pair without claims is answered as such below, whatever its support.
            _ if claims.is_empty() => None,
            Some((_, true)) => Some(PairNeed::Policy),
            Some((rules, false)) if rules.is_empty() => {
                Some(PairNeed::Trivial(Triviality::FollowsWithoutPolicy))
            }
            _ => None,
        };
        // Soundness: a pair whose claims need no rule proves nothing about the policy.
        if !matches!(without_claims, Some(Outcome::Sat(_))) {
            let need = need.unwrap_or_else(|| self.pair_need(claims, p, c));
            match need {
                PairNeed::Policy => {}
                PairNeed::Trivial(why) => return trivial_finding(why, translation, claims),
                PairNeed::Unknown => return too_complex(),
            }
        }
        // INVALID: M and P |= not C.
        let true_model = match with_claims {
            Outcome::Unknown => return too_complex(),
            Outcome::Unsat(core) => {
                let witnesses: Vec<&Model> = premises_model.iter().collect();
                return Finding::Invalid(contradiction(core, &pc, &witnesses));
            }
            Outcome::Sat(m) => m,
        };
        // VALID: M and P |= C, proved by unsat of M and P and not C.
        let without_claims = match without_claims {
            Some(outcome) => outcome,
            None => self.solve(all, &pn),
        };
        match without_claims {
            Outcome::Unknown => too_complex(),
            Outcome::Unsat(core) => {
                let logic_warning = warning(&[&true_model]);
                let support = match support {
                    Some((rules, _)) => rules,
                    None => self.minimise(core, &pn),
                };
                let mut vars = statement_vars(premises, claims);
                for &i in &support {
                    vars.extend(
                        self.model.rules()[i]
                            .expr
                            .variables()
                            .into_iter()
                            .map(String::from),
                    );
                }
                let true_model = self.simplest_model(
                    slice,
                    &pc,
                    &forced_by(premises, claims),
                    true_model,
                    self.scenario_deadline(),
                );
                Finding::Valid(ValidFinding {
                    translation: Some(translation),
                    claims_true_scenario: Some(self.scenario(&true_model, &vars)),
                    supporting_rules: Some(support.into_iter().map(|i| self.rule_ref(i)).collect()),
                    logic_warning,
                    extra: Default::default(),
                })
            }
            Outcome::Sat(false_model) => {
                let logic_warning = warning(&[&true_model, &false_model]);
                let (true_model, false_model) = self.explaining_pair(
                    slice,
                    (p, c),
                    &pc,
                    &pn,
                    &forced_by(premises, claims),
                    true_model,
                    false_model,
                );
                let diff = self.differing_variables(slice, &true_model, &false_model);
                let vars = statement_vars(premises, claims);
                Finding::Satisfiable(SatisfiableFinding {
                    translation: Some(translation),
                    claims_true_scenario: Some(self.scenario_first(&true_model, &diff, &vars)),
                    claims_false_scenario: Some(self.scenario_first(&false_model, &diff, &vars)),
                    logic_warning,
                    extra: Default::default(),
                })
            }
        }
    }

    /// What trying kept witnesses needs (see `witness`): the premises and claims, the
    /// premises' variables with their values in `premises_model` (a model of the premises),
    /// and the slice's variables. None for slices too large to keep witnesses for.
    fn witness_trial<'f>(
        &'f self,
        slice: &Slice,
        premises: &'f [CheckedStatementInput],
        claims: &'f [CheckedStatementInput],
        premises_model: &Model,
    ) -> Option<crate::witness::Trial<'f>> {
        if slice.vars.len() > crate::witness::MAX_VARS {
            return None;
        }
        let all = self.vocab.variables();
        let index: HashMap<&str, usize> = slice
            .vars
            .iter()
            .filter_map(|&i| Some((all.get(i)?.0.as_str(), i)))
            .collect();
        let vars = index
            .iter()
            .filter_map(|(name, &i)| {
                Some((i, self.vocab.var(name)?.clone(), all.get(i)?.1.clone()))
            })
            .collect();
        let mut names = statement_vars(premises, &[]);
        names.sort_unstable();
        names.dedup();
        let premise_values = names
            .iter()
            .filter_map(|name| {
                let i = *index.get(name.as_str())?;
                let var = self.vocab.var(name)?;
                let value = premises_model.eval(var, true)?;
                Some((i, self.vocab.val(&value, &all.get(i)?.1)?))
            })
            .collect();
        Some(crate::witness::Trial {
            premises: premises.iter().map(|s| &s.expr).collect(),
            claims: claims.iter().map(|s| &s.expr).collect(),
            premise_values,
            vars,
            index,
            vocab: &self.vocab,
        })
    }

    pub(crate) fn conjunction(&self, stmts: &[CheckedStatementInput]) -> Result<Bool, EncodeError> {
        let fs: Vec<Bool> = stmts
            .iter()
            .map(|s| self.vocab.formula(&s.expr))
            .collect::<Result<_, _>>()?;
        Ok(Bool::and(&fs))
    }

    /// Premises or claims that hold or fail with no rule at all. `witnesses` are models
    /// already at hand (of anything): a formula one of them makes true is satisfiable, with
    /// no solver call; the rest are asked of the rule-free solver.
    fn logic_warning(
        &self,
        premises: &[CheckedStatementInput],
        claims: &[CheckedStatementInput],
        p: &Bool,
        c: &Bool,
        witnesses: &[&Model],
    ) -> Option<LogicWarning> {
        let default = self.default_model();
        let unsat = |f: &Bool| -> bool {
            let witnessed = witnesses
                .iter()
                .copied()
                .chain(default)
                .any(|m| holds(m, f));
            !witnessed && self.without_rules(&[f]) == SatResult::Unsat
        };
        let verdict = |f: &Bool| -> Option<LogicWarningType> {
            if unsat(f) {
                Some(LogicWarningType::AlwaysFalse)
            } else if unsat(&f.not()) {
                Some(LogicWarningType::AlwaysTrue)
            } else {
                None
            }
        };
        let on_premises = if premises.is_empty() {
            None
        } else {
            verdict(p)
        };
        let on_claims = if claims.is_empty() { None } else { verdict(c) };
        // Always-false is the more serious warning; report it alone when both differ.
        let kind = match (&on_premises, &on_claims) {
            (Some(LogicWarningType::AlwaysFalse), _) | (_, Some(LogicWarningType::AlwaysFalse)) => {
                LogicWarningType::AlwaysFalse
            }
            (Some(k), _) | (_, Some(k)) => k.clone(),
            (None, None) => return None,
        };
        let pick = |on: &Option<LogicWarningType>, stmts: &[CheckedStatementInput]| {
            (on.as_ref() == Some(&kind))
                .then(|| stmts.iter().map(|s| s.statement.clone()).collect())
        };
        Some(LogicWarning {
            premises: pick(&on_premises, premises),
            claims: pick(&on_claims, claims),
            warning_type: Some(kind),
            extra: Default::default(),
        })
    }

    /// Variables of the slice whose values differ between two models, in schema order.
    pub(crate) fn differing_variables(&self, slice: &Slice, a: &Model, b: &Model) -> Vec<String> {
        let all = self.vocab.variables();
        slice
            .vars
            .iter()
            .filter_map(|&i| all.get(i))
            .filter(|(name, sort)| {
                let Some(var) = self.vocab.var(name) else {
                    return false;
                };
                // The same term is the same value, with no text made; otherwise the values'
                // text decides, as always (two terms can denote one number).
                let (x, y) = (value_in(a, var), value_in(b, var));
                if x.is_some() && x == y {
                    return false;
                }
                model_value(a, var, sort) != model_value(b, var, sort)
            })
            .map(|(name, _)| name.clone())
            .collect()
    }

    /// The assignment of `vars` (any order, duplicates allowed) in `model`, in schema order.
    pub(crate) fn scenario(&self, model: &Model, vars: &[String]) -> Scenario {
        let wanted: BTreeSet<&str> = vars.iter().map(String::as_str).collect();
        let statements = self
            .vocab
            .variables()
            .iter()
            .filter(|(name, _)| wanted.contains(name.as_str()))
            .filter_map(|(name, sort)| {
                let value = model_value(model, self.vocab.var(name)?, sort)?;
                let description = self
                    .model
                    .schema()
                    .variable(name)
                    .map(|v| v.description.trim_end_matches('.').to_string())
                    .unwrap_or_else(|| name.clone());
                Some(Statement::new(
                    format!("(= {} {})", Term::symbol(name.clone()), value.logic),
                    format!("{description} is {}", value.english),
                ))
            })
            .collect();
        Scenario {
            statements: Some(statements),
            extra: Default::default(),
        }
    }
}

/// A scope pushed on a solver, popped when dropped: a panic between the push and the pop
/// (in Rust code reading a model, say) must not leave the scope's assertions in a solver that
/// is used again.
pub(crate) struct Pushed<'s>(&'s Solver);

impl<'s> Pushed<'s> {
    pub(crate) fn new(solver: &'s Solver) -> Pushed<'s> {
        solver.push();
        Pushed(solver)
    }
}

impl Drop for Pushed<'_> {
    fn drop(&mut self) {
        self.0.pop(1);
    }
}

/// The solver of a check: rules behind assumption literals, with Z3's simplex arithmetic
/// solver (`smt.arith.solver=2`) instead of its default one. On the park example it answers
/// the same with half the work per check (6.7M instructions instead of 13.9M for a VALID
/// question), and unlike the default one it does not get slower with every check a solver
/// serves (with the default, a solver's 40th-72nd checks cost twice its first ones). Its
/// nonlinear support is documented as incomplete (it answered every nonlinear question we
/// tried, irrational roots included); a question it gives up on goes to a fallback solver
/// (see `Reasoner::ask`). No time limit of its own: each call is limited (see `watchdog`).
fn check_solver() -> Solver {
    let solver = new_solver(None);
    let mut params = Params::new();
    params.set_u32("smt.arith.solver", 2);
    // Two of Z3's optional work-savers that cost more than they save on these small checks,
    // each of whose calls adds a few assertions and assumptions: relevancy filtering and
    // value propagation over the newly asserted formulas. Both leave the solver complete and
    // the answers the same (the 106 cases of `profile_checks recheck` give identical
    // findings); instructions per check fell 8.7% (park, SATISFIABLE) and 8.6% (distinct
    // questions, VALID), user time 16% and 13% (medians of six interleaved runs).
    params.set_u32("smt.relevancy", 0);
    params.set_bool("smt.propagate_values", false);
    solver.set_params(&params);
    solver
}

#[cfg(test)]
fn forced_fallback() -> bool {
    tests::FORCE_FALLBACK.with(std::cell::Cell::get)
}

#[cfg(not(test))]
fn forced_fallback() -> bool {
    false
}

/// Whether the last call of `solver` answered unknown because the solver gave up (is
/// incomplete for the question), not because it was stopped.
fn gave_up(solver: &Solver) -> bool {
    solver
        .get_reason_unknown()
        .is_some_and(|r| r.contains("incomplete"))
}

/// Whether `f` is true in `model` (completed: variables it does not fix take default values).
pub(crate) fn holds(model: &Model, f: &Bool) -> bool {
    if let Some(known) = interpreted_equality(model, f) {
        return known;
    }
    model.eval(f, true).and_then(|b| b.as_bool()) == Some(true)
}

/// For `(= x v)`, with `x` a constant the model gives a value and `v` a numeral or a Boolean
/// literal (every pin of an explaining scenario): whether that value is `v`, read without
/// Z3's evaluator, which costs about 4,000 instructions a call and was asked over a hundred
/// times per check. Z3 keeps one term per numeral and per truth value, so two of them are
/// the same value exactly when they are the same term. None for every other form, which
/// the evaluator answers.
fn interpreted_equality(model: &Model, f: &Bool) -> Option<bool> {
    // (The checked forms: reading the children of a term that is not an application panics.)
    if f.safe_decl().ok()?.kind() != DeclKind::Eq || f.num_children() != 2 {
        return None;
    }
    let (x, v) = (f.nth_child(0)?, f.nth_child(1)?);
    // Only a constant the model interprets has a value here: for anything else (a numeral, a
    // truth value, a sum, a variable left unfixed) this is None, and the evaluator answers.
    let value = model.get_const_interp(&x)?;
    if value == v {
        return Some(true);
    }
    (is_literal_value(&value) && is_literal_value(&v)).then_some(false)
}

/// A numeral (rational, not an irrational algebraic number) or `true`/`false`.
fn is_literal_value(v: &Dynamic) -> bool {
    v.kind() == AstKind::Numeral || v.as_bool().and_then(|b| b.as_bool()).is_some()
}

/// The value of `var` in `model` (completed: a variable it does not fix takes a default
/// value): its interpretation when it has one, which is that value, without Z3's evaluator.
pub(crate) fn value_in(model: &Model, var: &Dynamic) -> Option<Dynamic> {
    model
        .get_const_interp(var)
        .or_else(|| model.eval(var, true))
}

/// A solver whose calls stop after `timeout_ms` (None: no limit of its own, for solvers whose
/// calls go through `watchdog::limited`).
pub(crate) fn new_solver(timeout_ms: impl Into<Option<u32>>) -> Solver {
    let solver = Solver::new();
    let mut params = Params::new();
    if let Some(timeout_ms) = timeout_ms.into() {
        params.set_u32("timeout", timeout_ms);
    }
    // Models as the solver built them: compacting them (the default) costs about half of
    // each model's extraction and changes no value a finding reads.
    params.set_bool("model.compact", false);
    solver.set_params(&params);
    solver
}

/// Whether `f` is proved unsatisfiable (unknown counts as "not proved").
pub(crate) fn solver_says_unsat(solver: &Solver, f: &Bool) -> bool {
    let _scope = Pushed::new(solver);
    solver.assert(f);
    solver.check() == SatResult::Unsat
}

/// What the premises and claims force together (both are assumed where it is used).
fn forced_by(
    premises: &[CheckedStatementInput],
    claims: &[CheckedStatementInput],
) -> crate::scenario::Forced {
    crate::scenario::forced_values(premises.iter().chain(claims).map(|s| &s.expr))
}

fn statement_vars(
    premises: &[CheckedStatementInput],
    claims: &[CheckedStatementInput],
) -> Vec<String> {
    premises
        .iter()
        .chain(claims)
        .flat_map(|s| s.expr.variables().into_iter().map(String::from))
        .collect()
}

pub(crate) fn expr_size(e: &Expr) -> usize {
    let mut n = 0;
    e.visit(&mut |_| n += 1);
    n
}

pub(crate) fn translation_of(
    premises: &[CheckedStatementInput],
    claims: &[CheckedStatementInput],
    confidence: f64,
    untranslated: &Untranslated,
) -> Translation {
    let refs = |texts: &[String]| {
        (!texts.is_empty()).then(|| {
            texts
                .iter()
                .map(|t| proofgate_core::findings::InputTextReference {
                    text: Some(t.clone()),
                    extra: Default::default(),
                })
                .collect()
        })
    };
    Translation {
        premises: Some(premises.iter().map(|s| s.statement.clone()).collect()),
        claims: Some(claims.iter().map(|s| s.statement.clone()).collect()),
        untranslated_premises: refs(&untranslated.premises),
        untranslated_claims: refs(&untranslated.claims),
        confidence: serde_json::Number::from_f64(confidence),
        extra: Default::default(),
    }
}

impl Reasoner<'_> {
    /// A locally minimal set of rule ids that contradict each other, if the rules are
    /// inconsistent on their own.
    pub fn contradictory_rules(&self) -> Result<Option<Vec<String>>, crate::lint::TooComplex> {
        match self.solve(&self.all_rules(), &[]) {
            Outcome::Sat(_) => Ok(None),
            Outcome::Unknown => Err(crate::lint::TooComplex),
            Outcome::Unsat(core) => Ok(Some(
                self.minimise(core, &[])
                    .into_iter()
                    .map(|i| self.model.rules()[i].id.clone())
                    .collect(),
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::RENEW_AFTER;
    use std::cell::Cell;

    thread_local! {
        /// Sends every question of this thread's checks to the fallback solver as well, whose
        /// answer is used (the simplex solver does not give up on any question the tests ask).
        pub(super) static FORCE_FALLBACK: Cell<bool> = const { Cell::new(false) };
    }

    /// A check that panics half-way leaves nothing behind: the checks after it get the findings
    /// a reasoner that never panicked gives. (Its scope left open, the next checks would reuse
    /// its literals with its premise still asserted behind one: here, membership, making free
    /// shipping follow from no coupons.)
    #[test]
    fn a_check_that_panics_midway_leaves_no_assertion_behind() {
        let model = policy(SHIPPING);
        let question = |premises: &[&str], claims: &[&str]| {
            let t =
                serde_json::json!({"translations": [[{"premises": premises, "claims": claims}]]});
            parse_translations(&t.to_string()).unwrap()
        };
        let after = [
            question(&["(= coupons 1)"], &["(not freeShipping)"]),
            question(&["(= coupons 0)"], &["freeShipping"]),
            question(&["(= coupons 0)"], &["freeShipping"]),
            question(&["(>= coupons 5)"], &["freeShipping"]),
        ];
        let clean = findings_json(
            &Reasoner::new(&model, CheckOptions::default()).unwrap(),
            &after,
        );
        assert!(clean[1].starts_with(r#"[{"satisfiable""#), "{}", clean[1]);

        let reasoner = Reasoner::new(&model, CheckOptions::default()).unwrap();
        reasoner.panic_in_next_call.set(true);
        let member = question(&["isMember"], &["freeShipping"]);
        let panicked =
            std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| reasoner.validate(&member)));
        assert!(panicked.is_err(), "the injected panic did not happen");
        assert!(!reasoner.panic_in_next_call.get());
        assert_eq!(findings_json(&reasoner, &after), clean);
        // And the panicked question itself, asked again.
        let fresh = Reasoner::new(&model, CheckOptions::default()).unwrap();
        assert_eq!(
            serde_json::to_string(&reasoner.validate(&member).unwrap()).unwrap(),
            serde_json::to_string(&fresh.validate(&member).unwrap()).unwrap()
        );
    }

    /// The same for the rule-free solver: a panic while a scope of its own is pushed (building
    /// the scenario that separates two translators' readings) leaves nothing asserted there.
    /// (Left asserted, the first reading's "no coupons and free shipping" made free shipping
    /// look true without any rule: a later VALID finding got a false ALWAYS_TRUE warning.)
    #[test]
    fn a_panic_on_the_rule_free_solver_leaves_no_assertion_behind() {
        let model = policy(SHIPPING);
        let parse = |t: serde_json::Value| parse_translations(&t.to_string()).unwrap();
        let pair = |premises: &[&str], claims: &[&str]| serde_json::json!([{"premises": premises, "claims": claims}]);
        let ambiguous = parse(serde_json::json!({"translations": [
            pair(&["(= coupons 0)"], &["freeShipping"]),
            pair(&["(= coupons 0)"], &["(not freeShipping)"]),
        ]}));
        let after: Vec<_> = [
            (&["(= coupons 1)"][..], &["(not freeShipping)"][..]),
            (
                &["(= coupons 4)", "(not isMember)"][..],
                &["freeShipping"][..],
            ),
            (
                &["(= coupons 0)", "(not freeShipping)"][..],
                &["(not isMember)"][..],
            ),
        ]
        .into_iter()
        .map(|(p, c)| parse(serde_json::json!({"translations": [pair(p, c)]})))
        .chain([ambiguous.clone()])
        .collect();
        let clean = findings_json(
            &Reasoner::new(&model, CheckOptions::default()).unwrap(),
            &after,
        );
        assert!(clean[3].contains("translationAmbiguous"), "{}", clean[3]);

        let reasoner = Reasoner::new(&model, CheckOptions::default()).unwrap();
        reasoner.panic_in_separating_scenario.set(true);
        let panicked = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            reasoner.validate(&ambiguous)
        }));
        assert!(panicked.is_err(), "the injected panic did not happen");
        assert_eq!(findings_json(&reasoner, &after), clean);
    }

    /// The fallback solver answers as the check's own solver does: the same findings for
    /// the park example's questions of every kind (the shipped one, ages on both sides of the
    /// senior threshold, and the generated test suite's cases), scenario values aside (which
    /// of several simplest models a solver picks is its choice).
    #[test]
    fn fallback_solver_gives_the_same_findings() {
        let model = park();
        let mut questions = vec![parse_translations(include_str!(
            "../../../examples/policies/park-senior-low-season.translations.json"
        ))
        .unwrap()];
        for age in [30, 66] {
            let pair = serde_json::json!({
                "premises": [format!("(= customerAge {age})"), "isLowSeason", "(not usesCredits)"],
                "claims": ["(= feeAfterDiscount 22.5)"],
            });
            let t = serde_json::json!({ "translations": [[pair]] });
            questions.push(parse_translations(&t.to_string()).unwrap());
        }
        let generated = crate::generate_tests(&model, &crate::GenerateOptions::default()).unwrap();
        assert!(generated.suite.tests.len() > 20);
        // Kind and cited rules of each finding.
        let outline = |forced: bool| {
            FORCE_FALLBACK.with(|f| f.set(forced));
            let reasoner = Reasoner::new(&model, CheckOptions::default()).unwrap();
            let cases = generated
                .suite
                .tests
                .iter()
                .map(|case| crate::check_case(&reasoner, case).unwrap());
            let out: Vec<String> = questions
                .iter()
                .map(|q| reasoner.validate(q).unwrap())
                .chain(cases)
                .flatten()
                .map(|f| {
                    let v = serde_json::to_value(&f).unwrap();
                    let rules = |key: &str| {
                        v.as_object()
                            .and_then(|o| o.values().next())
                            .and_then(|inner| inner.get(key))
                            .map(|r| r.to_string())
                            .unwrap_or_default()
                    };
                    format!(
                        "{} {} {}",
                        f.kind().as_str(),
                        rules("supportingRules"),
                        rules("contradictingRules")
                    )
                })
                .collect();
            FORCE_FALLBACK.with(|f| f.set(false));
            out
        };
        assert_eq!(outline(true), outline(false));
    }
    use crate::{parse_translations, CheckOptions, Reasoner};
    use proofgate_core::policy::{PolicyDefinition, PolicyModel};

    /// Free shipping for members and for orders with three coupons or more.
    const SHIPPING: &str = r#"{"variables": [
        {"name": "isMember", "type": "BOOL", "description": "Whether the buyer is a member"},
        {"name": "coupons", "type": "INT", "description": "The number of coupons used"},
        {"name": "freeShipping", "type": "BOOL", "description": "Whether shipping is free"}],
      "rules": [
        {"id": "SHIPPING0000", "expression": "(= freeShipping (or isMember (>= coupons 3)))"},
        {"id": "COUPONS00000", "expression": "(>= coupons 0)"}]}"#;

    /// The findings of each question, as JSON.
    fn findings_json(
        reasoner: &Reasoner,
        questions: &[Vec<crate::TranslatorOutput>],
    ) -> Vec<String> {
        questions
            .iter()
            .map(|q| serde_json::to_string(&reasoner.validate(q).unwrap()).unwrap())
            .collect()
    }

    /// A policy from its JSON definition.
    fn policy(json: &str) -> PolicyModel {
        PolicyModel::from_definition(PolicyDefinition::from_json(json).unwrap(), None).unwrap()
    }

    /// The shipped park policy.
    fn park() -> PolicyModel {
        policy(include_str!(
            "../../../examples/policies/park-admission.json"
        ))
    }

    #[test]
    fn renewed_solvers_give_the_same_findings() {
        let model = park();
        let t = parse_translations(include_str!(
            "../../../examples/policies/park-senior-low-season.translations.json"
        ))
        .unwrap();
        let reasoner = Reasoner::new(&model, CheckOptions::default()).unwrap();
        let original = std::rc::Rc::downgrade(&reasoner.full.borrow());
        let first = serde_json::to_string(&reasoner.validate(&t).unwrap()).unwrap();
        for _ in 0..RENEW_AFTER + 2 {
            let again = serde_json::to_string(&reasoner.validate(&t).unwrap()).unwrap();
            assert_eq!(again, first);
        }
        assert!(reasoner.full.borrow().checks.get() < RENEW_AFTER);
        // The replaced solver, with what Z3 kept from its checks, is gone (it was held on to
        // between checks, some megabytes per worker).
        assert!(
            original.upgrade().is_none(),
            "the renewed solver is still alive"
        );
        // Calls outside a check use the renewed solver.
        assert_eq!(reasoner.contradictory_rules().unwrap(), None);
        assert!(std::rc::Rc::ptr_eq(
            &reasoner.loaded(),
            &reasoner.full.borrow()
        ));
    }

    /// A question the check solver's simplex arithmetic gives up on (an irrational root) is
    /// answered by the fallback solver, unforced: Z3 must still say "incomplete" when it gives
    /// up, or every nonlinear question would be TOO_COMPLEX.
    #[test]
    fn a_nonlinear_question_is_answered_by_the_fallback() {
        let model = policy(
            r#"{"variables": [
                {"name": "side", "type": "REAL", "description": "The side in metres"},
                {"name": "area", "type": "REAL", "description": "The area in square metres"}],
              "rules": [
                {"id": "AREA00000000", "expression": "(= area (* side side))"},
                {"id": "POSITIVE0000", "expression": "(> side 0.0)"}]}"#,
        );
        let t = parse_translations(
            r#"{"translations": [[{"premises": ["(= area 2.0)"], "claims": ["(> side 1.0)"]}]]}"#,
        )
        .unwrap();
        let reasoner = Reasoner::new(&model, CheckOptions::default()).unwrap();
        let findings = reasoner.validate(&t).unwrap();
        assert_eq!(findings[0].kind().as_str(), "VALID", "{findings:?}");
        // The check solver alone gives up on its models (side is the square root of 2).
        let loaded = reasoner.loaded();
        let f = reasoner
            .vocab
            .formula(
                &model
                    .check_statement("(and (= area 2.0) (> side 1.0))")
                    .unwrap()
                    .expr,
            )
            .unwrap();
        let lits: Vec<z3::ast::Bool> = loaded.literals.values().cloned().collect();
        loaded.solver.push();
        loaded.solver.assert(&f);
        let alone = loaded.solver.check_assumptions(&lits);
        loaded.solver.pop(1);
        assert_eq!(alone, z3::SatResult::Unknown);
        assert!(super::gave_up(&loaded.solver));
    }

    /// Z3 5 refuses a sort name declared twice in one context: reasoners for one policy, or
    /// for two versions whose enum differs, must live side by side on one thread.
    #[test]
    fn reasoners_for_one_enum_share_a_thread() {
        let park = include_str!("../../../examples/policies/park-admission.json");
        let load = |json: &str| {
            PolicyModel::from_definition(PolicyDefinition::from_json(json).unwrap(), None).unwrap()
        };
        let (first, again) = (load(park), load(park));
        let more = load(&park.replace(
            r#"{ "value": "ADULT""#,
            r#"{ "value": "CHILD", "description": "Younger than 12" }, { "value": "ADULT""#,
        ));
        let values = |m: &PolicyModel| m.schema().types().map(|t| t.values.len()).sum::<usize>();
        assert_eq!((values(&first), values(&more)), (2, 3));
        let t = parse_translations(include_str!(
            "../../../examples/policies/park-senior-low-season.translations.json"
        ))
        .unwrap();
        let findings = |model: &PolicyModel| {
            let reasoner = Reasoner::new(model, CheckOptions::default()).unwrap();
            let f = reasoner.validate(&t).unwrap();
            f.iter()
                .map(|f| f.kind().as_str())
                .collect::<Vec<_>>()
                .join(",")
        };
        let expected = findings(&first);
        assert_eq!(findings(&again), expected);
        assert_eq!(findings(&more), expected);
        assert_eq!(findings(&first), expected);
    }

    /// `holds` reads an equality of a variable and a value from the model's interpretation
    /// (no evaluator); it must answer as the evaluator does, for every sort, for a variable
    /// the model leaves unfixed (completed to a default) and for an irrational value.
    #[test]
    fn holds_answers_equalities_as_the_evaluator_does() {
        use z3::ast::{Bool, Dynamic, Int, Real};
        let (x, y, b, free) = (
            Int::new_const("x"),
            Real::new_const("y"),
            Bool::new_const("b"),
            Int::new_const("free"),
        );
        let root = Real::new_const("root");
        let solver = z3::Solver::new();
        solver.assert(x.eq(Int::from_i64(3)));
        solver.assert(y.eq(Real::from_rational(5, 2)));
        solver.assert(&b);
        solver.assert((&root * &root).eq(Real::from_rational(2, 1)));
        solver.assert(root.gt(Real::from_rational(0, 1)));
        assert_eq!(solver.check(), z3::SatResult::Sat);
        let model = solver.get_model().unwrap();
        // A variable the model does not fix has no interpretation (until an evaluation with
        // completion gives it one): the evaluator answers.
        assert_eq!(
            super::interpreted_equality(&model, &free.eq(Int::from_i64(0))),
            None
        );
        let root_value = model.eval(&root, true).unwrap();
        let mut cases: Vec<Bool> = Vec::new();
        for n in -1..=4 {
            cases.push(x.eq(Int::from_i64(n)));
            cases.push(free.eq(Int::from_i64(n)));
            cases.push(y.eq(Real::from_rational(n, 1)));
            cases.push(y.eq(Real::from_rational(2 * n + 1, 2)));
        }
        cases.push(b.eq(Bool::from_bool(true)));
        cases.push(b.eq(Bool::from_bool(false)));
        cases.push(root.eq(&root_value));
        cases.push(root.eq(Real::from_rational(7, 5)));
        cases.push(Int::from_i64(3).eq(&x));
        cases.push(x.eq(Int::from_i64(1) + Int::from_i64(2)));
        let dynamic: Dynamic = x.clone().into();
        cases.push(dynamic.eq(Dynamic::from_ast(&Int::from_i64(3))));
        let mut fast = 0;
        for f in &cases {
            let evaluated = model.eval(f, true).and_then(|v| v.as_bool()) == Some(true);
            assert_eq!(super::holds(&model, f), evaluated, "{f}");
            fast += usize::from(super::interpreted_equality(&model, f).is_some());
        }
        // The fast path answered most of them (the rest went to the evaluator).
        assert!(
            fast >= 20,
            "only {fast} equalities read from the interpretation"
        );
    }

    /// Pins made together are asserted together, each formula keeps one literal within a
    /// check, and the literals still stand for their formulas: a pin assumed makes its
    /// formula hold.
    #[test]
    fn pins_made_together_are_one_assertion_with_a_literal_each() {
        use z3::ast::Int;
        let model = park();
        let reasoner = Reasoner::new(&model, CheckOptions::default()).unwrap();
        let loaded = reasoner.loaded();
        let age = reasoner.vocab.var("customerAge").unwrap().as_int().unwrap();
        let (young, senior) = (age.eq(Int::from_i64(30)), age.eq(Int::from_i64(66)));
        let _check = super::CheckScope::begin(&reasoner, loaded.clone());
        let lits = loaded.pin_all([&young, &senior, &young]);
        assert_eq!(lits[0], lits[2]);
        assert_ne!(lits[0], lits[1]);
        assert_eq!(loaded.scope.borrow().len(), 1);
        assert_eq!(loaded.pin(&senior), lits[1]);
        assert_eq!(loaded.scope.borrow().len(), 1);
        let all = reasoner.all_rules();
        let super::Outcome::Sat(m) = reasoner.solve(&all, &lits[1..2]) else {
            panic!("a senior visitor is possible");
        };
        assert!(super::holds(&m, &senior));
        assert!(matches!(
            reasoner.solve(&all, &lits[..2]),
            super::Outcome::Unsat(_)
        ));
    }
}

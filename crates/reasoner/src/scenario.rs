//! Scenarios that explain a finding (the paper's Fig. 3). For SATISFIABLE: the simplest
//! situation in which the claims hold, then the situation closest to it in which they fail, so
//! the variables that differ show what the answer depends on; for VALID: the simplest
//! situation in which the claims hold.
//!
//! - *Simplest*: every flag pinned to false, then every count and amount to 0, in schema
//!   order, each pin kept when the premises and rules allow it; counts that cannot be 0 are
//!   then brought as close to 0 as they can be (binary search on the magnitude).
//! - *Closest*: the fewest variables changed (MaxSAT over one equality per variable, on the
//!   check's own solver: equalities kept greedily, then a cardinality constraint asks for
//!   more until none is possible).
//!
//! Everything shares one deadline of the solver time limit; when it runs out, the models found
//! so far are used (each is a real model of rules, premises and claims, never a guess).

use crate::check::{holds, Outcome, Reasoner};
use crate::slice::Slice;
use proofgate_core::findings::Scenario;
use proofgate_core::policy::{Expr, Sort};
use std::collections::{BTreeSet, HashMap};
use std::time::{Duration, Instant};
use z3::ast::{Bool, Dynamic, Int, Real};
use z3::{Model, Optimize, Params, SatResult};

/// Slices with at most this many variables get their closest model from the check's own
/// solver; larger ones from Z3's optimizer.
const SMALL_SLICE: usize = 64;

/// Runs of at most this many pins are first asked whether any of them can hold.
const ANY_RUN: usize = 16;

/// The value a variable takes when nothing forces another: false, 0, 0.0 (enums have none).
fn simple_value(sort: &Sort) -> Option<Dynamic> {
    match sort {
        Sort::Bool => Some(Bool::from_bool(false).into()),
        Sort::Int => Some(Int::from_i64(0).into()),
        Sort::Real => Some(Real::from_rational(0, 1).into()),
        Sort::Enum(_) => None,
    }
}

/// Flags before counts before amounts: a count or amount usually follows from a flag (whether
/// credits are used), so settling flags first keeps the amounts a consequence, not a choice.
fn rank(sort: &Sort) -> Option<usize> {
    match sort {
        Sort::Bool => Some(0),
        Sort::Int => Some(1),
        Sort::Real => Some(2),
        Sort::Enum(_) => None,
    }
}

/// Variable name -> the literal every model of some statements gives it.
pub(crate) type Forced = HashMap<String, Expr>;

/// The values `stmts` force by a top-level conjunct: `(= x 66)` or `(= 66 x)` (a numeric or
/// Boolean literal), `b` and `(not b)`. Every model of the statements gives these values, so
/// a question about another value of one of them has a known answer. Other forms are left
/// out (never a wrong value, at worst a question asked).
pub(crate) fn forced_values<'e>(stmts: impl IntoIterator<Item = &'e Expr>) -> Forced {
    fn walk(e: &Expr, out: &mut Vec<(String, Expr)>) {
        match e {
            Expr::And(parts) => parts.iter().for_each(|p| walk(p, out)),
            Expr::Var {
                name,
                sort: Sort::Bool,
            } => out.push((name.clone(), Expr::Bool(true))),
            Expr::Not(inner) => {
                if let Expr::Var {
                    name,
                    sort: Sort::Bool,
                } = inner.as_ref()
                {
                    out.push((name.clone(), Expr::Bool(false)));
                }
            }
            Expr::Eq(args) => {
                if let [Expr::Var { name, .. }, v] | [v, Expr::Var { name, .. }] = args.as_slice() {
                    if matches!(v, Expr::Int(_) | Expr::Real { .. } | Expr::Bool(_)) {
                        out.push((name.clone(), v.clone()));
                    }
                }
            }
            _ => {}
        }
    }
    let mut found = Vec::new();
    for e in stmts {
        walk(e, &mut found);
    }
    // A variable given two different literals (the statements then have no model, or the
    // literals are two spellings of one value) is left out.
    let mut out = Forced::new();
    let mut mixed = BTreeSet::new();
    for (name, v) in found {
        match out.get(&name) {
            Some(old) if *old != v => {
                mixed.insert(name);
            }
            _ => {
                out.insert(name, v);
            }
        }
    }
    out.retain(|name, _| !mixed.contains(name));
    out
}

/// Whether a forced literal is the value `simple_value` pins (false, 0, 0.0).
fn is_simple_literal(e: &Expr) -> bool {
    matches!(
        e,
        Expr::Bool(false) | Expr::Int(0) | Expr::Real { digits: 0, .. }
    )
}

impl Reasoner<'_> {
    /// The deadline for choosing a finding's scenarios.
    pub(crate) fn scenario_deadline(&self) -> Instant {
        Instant::now() + Duration::from_millis(u64::from(self.options.timeout_ms))
    }

    /// A literal `l` with `l => f` asserted in the check's scope (the check's end removes
    /// it), for use as an assumption.
    fn pin(&self, f: &Bool) -> Bool {
        self.loaded().pin(f)
    }

    /// `pin` for each of `fs`, with one assertion (see `LoadedRules::pin_all`).
    fn pin_all<'f>(&self, fs: impl IntoIterator<Item = &'f Bool>) -> Vec<Bool> {
        self.loaded().pin_all(fs)
    }

    /// The slice's variables, in schema order.
    fn schema_vars(&self, slice: &Slice) -> Vec<(Dynamic, Sort)> {
        self.named_schema_vars(slice)
            .into_iter()
            .map(|(_, var, sort)| (var, sort))
            .collect()
    }

    /// The slice's variables with their names, in schema order.
    fn named_schema_vars(&self, slice: &Slice) -> Vec<(&str, Dynamic, Sort)> {
        let all = self.vocab.variables();
        slice
            .vars
            .iter()
            .filter_map(|&i| all.get(i))
            .filter_map(|(name, sort)| {
                Some((name.as_str(), self.vocab.var(name)?.clone(), sort.clone()))
            })
            .collect()
    }

    /// Keeps each of `pins` (in order) that the rules allow together with `assumptions` and
    /// the pins kept before it, as trying them one by one would, with fewer solver calls:
    ///
    /// - a pin that `best` (a model of everything kept so far) satisfies is kept with no call;
    /// - the pins `best` does not satisfy are asked together as a disjunction: when none of
    ///   them can hold, none can later either (the kept set only grows), so they are all
    ///   dropped with one call; when one can, its model becomes `best`;
    /// - a run of pins that all fit is kept with one call, and split in halves when it does
    ///   not fit.
    ///
    /// Kept pins are added to `assumptions` and their ids to `kept`; `best` stays a model of
    /// all of them.
    #[allow(clippy::too_many_arguments)]
    fn keep_pins(
        &self,
        rules: &[usize],
        assumptions: &mut Vec<Bool>,
        best: &mut Model,
        pins: &[(usize, Bool)],
        kept: &mut BTreeSet<usize>,
        deadline: Instant,
    ) {
        if pins.is_empty() || Instant::now() >= deadline {
            return;
        }
        let mut pins = self.keep_holding(assumptions, best, pins, kept);
        if pins.is_empty() {
            return;
        }
        // The head does not hold in `best`: can any of the pins that do not hold? (Asked of
        // short runs only: a disjunction of hundreds of pins is a hard question, and long
        // runs are halved first.)
        if pins.len() <= ANY_RUN {
            let open: Vec<&Bool> = pins
                .iter()
                .map(|(_, eq)| eq)
                .filter(|eq| !holds(best, eq))
                .collect();
            assumptions.push(self.pin(&Bool::or(&open)));
            let any = self.solve(rules, assumptions);
            assumptions.pop();
            match any {
                Outcome::Unsat(_) => {
                    // None of them: the others hold in `best` and are kept, in order.
                    let holding: Vec<&(usize, Bool)> =
                        pins.iter().filter(|(_, eq)| holds(best, eq)).collect();
                    assumptions.extend(self.pin_all(holding.iter().map(|(_, eq)| eq)));
                    kept.extend(holding.iter().map(|(id, _)| *id));
                    return;
                }
                Outcome::Sat(m) => {
                    *best = m;
                    pins = self.keep_holding(assumptions, best, pins, kept);
                    if pins.is_empty() {
                        return;
                    }
                }
                Outcome::Unknown => {}
            }
        }
        let before = assumptions.len();
        assumptions.extend(self.pin_all(pins.iter().map(|(_, eq)| eq)));
        let fits = match self.solve(rules, assumptions) {
            Outcome::Sat(m) => {
                *best = m;
                true
            }
            _ => false,
        };
        if fits {
            kept.extend(pins.iter().map(|(id, _)| *id));
            return;
        }
        assumptions.truncate(before);
        if pins.len() > 1 {
            let (head, tail) = pins.split_at(pins.len() / 2);
            self.keep_pins(rules, assumptions, best, head, kept, deadline);
            self.keep_pins(rules, assumptions, best, tail, kept, deadline);
        }
    }

    /// Keeps the leading pins that `best` satisfies (no solver call: `best` is a model of
    /// them and of everything kept before) and returns the rest.
    fn keep_holding<'p>(
        &self,
        assumptions: &mut Vec<Bool>,
        best: &Model,
        pins: &'p [(usize, Bool)],
        kept: &mut BTreeSet<usize>,
    ) -> &'p [(usize, Bool)] {
        let holding = pins
            .iter()
            .position(|(_, eq)| !holds(best, eq))
            .unwrap_or(pins.len());
        let (kept_now, rest) = pins.split_at(holding);
        assumptions.extend(self.pin_all(kept_now.iter().map(|(_, eq)| eq)));
        kept.extend(kept_now.iter().map(|(id, _)| *id));
        rest
    }

    /// The simplest model of the slice's rules and `fixed` (assumption literals), starting
    /// from `model`, which must be one. `forced`: values every model of `fixed` gives (see
    /// `forced_values`), which answer some questions without the solver.
    pub(crate) fn simplest_model(
        &self,
        slice: &Slice,
        fixed: &[Bool],
        forced: &Forced,
        model: Model,
        deadline: Instant,
    ) -> Model {
        let all = &slice.rules;
        let named = self.named_schema_vars(slice);
        let vars: Vec<(Dynamic, Sort)> = named
            .iter()
            .map(|(_, var, sort)| (var.clone(), sort.clone()))
            .collect();
        let mut assumptions = fixed.to_vec();
        let mut best = model;
        let mut pinned_zero = BTreeSet::new();
        // Flags, then counts, then amounts, each in schema order, in one run: `keep_pins`
        // keeps each pin that fits with those kept before it, so one run over the ranks in
        // order keeps what one run per rank would, with fewer solver calls. Instructions per
        // park check (callgrind, SATISFIABLE / VALID): one run per rank 12.3M / 7.1M, this
        // 13.5M / 6.4M, flags apart from the numbers 10.9M / 7.5M (which models Z3 picks on
        // the way decides it). This one serves distinct questions best (their checks are
        // VALID ones): 8-20% more requests per second than flags apart, in three A/B runs.
        // A pin that a forced value contradicts can never be kept: left out, it costs no
        // question (the same pins are kept: `keep_pins` keeps exactly the pins consistent
        // with those kept before them).
        let mut pins: Vec<(usize, usize, Bool)> = vars
            .iter()
            .enumerate()
            .filter(|(i, _)| forced.get(named[*i].0).is_none_or(is_simple_literal))
            .filter_map(|(i, (var, sort))| Some((rank(sort)?, i, var.eq(&simple_value(sort)?))))
            .collect();
        pins.sort_by_key(|(rank, i, _)| (*rank, *i));
        let pins: Vec<(usize, Bool)> = pins.into_iter().map(|(_, i, eq)| (i, eq)).collect();
        self.keep_pins(
            all,
            &mut assumptions,
            &mut best,
            &pins,
            &mut pinned_zero,
            deadline,
        );
        // Counts that cannot be 0: the smallest magnitude the rest allows.
        for (i, (var, _)) in vars.iter().enumerate() {
            if pinned_zero.contains(&i) {
                continue;
            }
            let Some(x) = var.as_int() else { continue };
            let Some(mut hi) = best.eval(&x, true).and_then(|v| v.as_i64()) else {
                continue;
            };
            hi = hi.abs();
            if forced.contains_key(named[i].0) {
                // Its one value: nothing smaller to look for.
                hi = 0;
            }
            // |x| <= lo is known unsatisfiable (0 was tried), |x| <= hi is satisfiable.
            let mut lo = 0i64;
            // Models tend to sit on the bound that keeps a count from 0, so the first try is
            // just below the current magnitude: when that fails, the search is over.
            let mut first = true;
            while hi - lo > 1 && Instant::now() < deadline {
                let mid = if first { hi - 1 } else { lo + (hi - lo) / 2 };
                first = false;
                let bound = Int::from_i64(mid);
                let within = Bool::and(&[x.le(&bound), x.ge(bound.unary_minus())]);
                let lit = self.pin(&within);
                let mut tried = assumptions.clone();
                tried.push(lit);
                match self.solve(all, &tried) {
                    Outcome::Sat(m) => {
                        hi = m
                            .eval(&x, true)
                            .and_then(|v| v.as_i64())
                            .map_or(mid, i64::abs);
                        best = m;
                    }
                    Outcome::Unsat(_) => lo = mid,
                    Outcome::Unknown => break,
                }
            }
            // Later variables are simplified with this one kept.
            if let Some(v) = best.eval(&x, true) {
                assumptions.push(self.pin(&x.eq(&v)));
            }
        }
        best
    }

    /// The model of the rules and `hard` (formulas; `fixed` are the same as assumption
    /// literals) that differs from `target` in the fewest variables, starting from `model`,
    /// which must be one.
    ///
    /// MaxSAT over one equality per variable, on the check's own solver (no new solver, no
    /// rule asserted again): the equalities are first kept greedily in schema order (a
    /// maximal set, see `keep_pins`), then the solver is asked for a model keeping more of
    /// them than the best so far (a cardinality constraint) until there is none, which proves
    /// the best one has the fewest differences. When the deadline passes or the solver gives
    /// up, the best model so far is used. Slices of more than `SMALL_SLICE` variables go to
    /// Z3's optimizer in a solver of their own instead (each cardinality step over hundreds of
    /// variables costs more than one optimizer run), with the same search as the fallback.
    pub(crate) fn closest_model(
        &self,
        slice: &Slice,
        hard: &[Bool],
        fixed: &[Bool],
        target: &Model,
        model: Model,
        deadline: Instant,
    ) -> Model {
        let same: Vec<Bool> = self
            .schema_vars(slice)
            .iter()
            .filter_map(|(var, _)| Some(var.eq(&target.eval(var, true)?)))
            .collect();
        if same.len() > SMALL_SLICE {
            if let Some(m) = self.closest_by_optimizer(slice, hard, &same, deadline) {
                return m;
            }
        }
        let mut assumptions = fixed.to_vec();
        let mut best = model;
        let pins: Vec<(usize, Bool)> = same.iter().cloned().enumerate().collect();
        self.keep_pins(
            &slice.rules,
            &mut assumptions,
            &mut best,
            &pins,
            &mut BTreeSet::new(),
            deadline,
        );
        let indicators: Vec<Bool> = self.pin_all(&same);
        let weighted: Vec<(&Bool, i32)> = indicators.iter().map(|l| (l, 1)).collect();
        loop {
            let kept = same.iter().filter(|eq| holds(&best, eq)).count();
            if kept == same.len() || Instant::now() >= deadline {
                return best;
            }
            let Ok(more) = i32::try_from(kept + 1) else {
                return best;
            };
            let mut tried = fixed.to_vec();
            tried.push(self.pin(&Bool::pb_ge(&weighted, more)));
            match self.solve(&slice.rules, &tried) {
                Outcome::Sat(m) => best = m,
                _ => return best,
            }
        }
    }

    /// MaxSAT over the equalities `same`, with every rule and `hard` asserted.
    fn closest_by_optimizer(
        &self,
        slice: &Slice,
        hard: &[Bool],
        same: &[Bool],
        deadline: Instant,
    ) -> Option<Model> {
        let remaining = deadline.checked_duration_since(Instant::now())?;
        let opt = Optimize::new();
        let mut params = Params::new();
        params.set_u32(
            "timeout",
            u32::try_from(remaining.as_millis())
                .unwrap_or(u32::MAX)
                .max(1),
        );
        // Z3's 0-1 elimination takes an integer with an upper bound of 1 or less and no lower
        // bound for a 0-1 variable: with it, `x <= 0 and x != 0` is "unsat" (Z3 4.8 to 5.4).
        params.set_bool("elim_01", false);
        opt.set_params(&params);
        let rules: Vec<&Bool> = slice
            .rules
            .iter()
            .filter_map(|&i| self.rule_formulas.get(i))
            .chain(hard)
            .collect();
        for f in &rules {
            opt.assert(*f);
        }
        for eq in same {
            opt.assert_soft(eq, 1u32, None);
        }
        let model = match opt.check(&[]) {
            SatResult::Sat => opt.get_model()?,
            _ => return None,
        };
        // A scenario is shown as a situation the rules allow: the optimizer's model is used
        // only if it is one (otherwise the search on the check's own solver answers).
        rules.iter().all(|f| holds(&model, f)).then_some(model)
    }

    /// The SATISFIABLE pair: the simplest claims-true model (`pc`: premises and claims
    /// literals) and the claims-false model closest to it (`pn`: premises and not claims;
    /// `p`, `c` the formulas behind them).
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn explaining_pair(
        &self,
        slice: &Slice,
        (p, c): (&Bool, &Bool),
        pc: &[Bool],
        pn: &[Bool],
        forced: &Forced,
        true_model: Model,
        false_model: Model,
    ) -> (Model, Model) {
        let deadline = self.scenario_deadline();
        let true_model = self.simplest_model(slice, pc, forced, true_model, deadline);
        let false_model = self.closest_model(
            slice,
            &[p.clone(), c.not()],
            pn,
            &true_model,
            false_model,
            deadline,
        );
        (true_model, false_model)
    }

    /// The assignment of `first` (schema order), then of the other `rest` variables.
    pub(crate) fn scenario_first(
        &self,
        model: &Model,
        first: &[String],
        rest: &[String],
    ) -> Scenario {
        let head = self.scenario(model, first);
        let shown: BTreeSet<&str> = first.iter().map(String::as_str).collect();
        let others: Vec<String> = rest
            .iter()
            .filter(|v| !shown.contains(v.as_str()))
            .cloned()
            .collect();
        let tail = self.scenario(model, &others);
        let mut statements = head.statements.unwrap_or_default();
        statements.extend(tail.statements.unwrap_or_default());
        Scenario {
            statements: Some(statements),
            extra: Default::default(),
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::{CheckOptions, Reasoner};
    use proofgate_core::findings::{Finding, Scenario};
    use proofgate_core::policy::{PolicyDefinition, PolicyModel};

    fn model(json: &str) -> PolicyModel {
        PolicyModel::from_definition(PolicyDefinition::from_json(json).unwrap(), None).unwrap()
    }

    fn check(policy: &PolicyModel, premises: &[&str], claims: &[&str]) -> Finding {
        let reasoner = Reasoner::new(policy, CheckOptions::default()).unwrap();
        let t = crate::parse_translations(
            &serde_json::json!({"translations": [[{"premises": premises, "claims": claims}]]})
                .to_string(),
        )
        .unwrap();
        reasoner.validate(&t).unwrap().remove(0)
    }

    fn logic(s: &Scenario) -> Vec<&str> {
        s.statements()
            .iter()
            .filter_map(|st| st.logic.as_deref())
            .collect()
    }

    const SHOP: &str = r#"{"variables": [
        {"name": "isMember", "type": "BOOL", "description": "Whether the buyer is a member"},
        {"name": "coupons", "type": "INT", "description": "The number of coupons used"},
        {"name": "items", "type": "INT", "description": "The number of items bought"},
        {"name": "price", "type": "REAL", "description": "The price paid"},
        {"name": "freeShipping", "type": "BOOL", "description": "Whether shipping is free"}],
      "rules": [
        {"id": "PRICE0000000", "expression": "(= price (- (* 10.0 items) (* 2.0 coupons)))"},
        {"id": "COUPONS00000", "expression": "(and (>= coupons 0) (<= coupons items))"},
        {"id": "ITEMS0000000", "expression": "(>= items 0)"},
        {"id": "SHIPPING0000", "expression": "(= freeShipping (or isMember (>= coupons 3)))"}]}"#;

    #[test]
    fn satisfiable_pair_is_simplest_then_closest_with_the_difference_first() {
        let shop = model(SHOP);
        let Finding::Satisfiable(f) = check(&shop, &["(>= items 3)"], &["(not freeShipping)"])
        else {
            panic!("expected SATISFIABLE")
        };
        let t = f.claims_true_scenario.unwrap();
        let fl = f.claims_false_scenario.unwrap();
        // Claims true: not a member, no coupons, the fewest items the premise allows.
        assert_eq!(
            logic(&t),
            vec![
                "(= isMember false)",
                "(= freeShipping false)",
                "(= items 3)"
            ],
            "{t:?}"
        );
        // Claims false, one flag away: membership, not coupons (that would change the price).
        assert_eq!(
            logic(&fl),
            vec!["(= isMember true)", "(= freeShipping true)", "(= items 3)"],
            "{fl:?}"
        );
    }

    #[test]
    fn valid_scenario_is_the_simplest() {
        let shop = model(SHOP);
        let Finding::Valid(f) = check(&shop, &["isMember"], &["freeShipping"]) else {
            panic!("expected VALID")
        };
        let s = f.claims_true_scenario.unwrap();
        let l = logic(&s);
        assert!(l.contains(&"(= isMember true)"), "{l:?}");
        assert!(l.contains(&"(= freeShipping true)"), "{l:?}");
    }

    #[test]
    fn counts_that_cannot_be_zero_are_as_small_as_allowed() {
        let p = model(
            r#"{"variables": [{"name": "age", "type": "INT", "description": "Age"},
                              {"name": "senior", "type": "BOOL", "description": "Senior"}],
                "rules": [{"id": "SENIOR000000", "expression": "(= senior (> age 65))"}]}"#,
        );
        let Finding::Valid(f) = check(&p, &["(> age 1000)"], &["senior"]) else {
            panic!("expected VALID")
        };
        let s = f.claims_true_scenario.unwrap();
        assert!(logic(&s).contains(&"(= age 1001)"), "{s:?}");
    }

    /// Z3's optimizer, with its 0-1 elimination on, calls `x <= 0 and x != 0` unsat; the
    /// closest scenario of a large slice comes from it, so it must answer such questions.
    #[test]
    fn the_optimizer_finds_counts_below_a_bound_of_zero() {
        let p = model(
            r#"{"variables": [{"name": "balance", "type": "INT", "description": "Balance"},
                              {"name": "vip", "type": "BOOL", "description": "VIP"},
                              {"name": "waived", "type": "BOOL", "description": "Fee waived"}],
                "rules": [{"id": "WAIVED000000", "expression": "(=> vip waived)"}]}"#,
        );
        let reasoner = Reasoner::new(&p, CheckOptions::default()).unwrap();
        let formula = |text: &str| {
            let expr = p.check_statement(text).unwrap().expr;
            reasoner.vocab.formula(&expr).unwrap()
        };
        let hard = [formula("(<= balance 0)"), formula("(not (= balance 0))")];
        let same = [formula("(= balance 0)"), formula("(not vip)")];
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        let m = reasoner
            .closest_by_optimizer(&reasoner.full_slice(), &hard, &same, deadline)
            .expect("balance -1 is a model");
        assert!(super::holds(&m, &formula("(= balance (- 1))")), "{m:?}");
        assert!(super::holds(&m, &formula("(not vip)")), "{m:?}");
    }

    mod exact {
        //! The scenario search takes shortcuts (pins kept without a call, runs dropped with
        //! one disjunction, MaxSAT on the check's solver); these compare its models with the
        //! plain definitions on generated policies: the simplest model keeps exactly the pins
        //! that trying them one by one keeps, and the closest model differs from the simplest
        //! in as few variables as Z3's optimizer finds.
        use crate::check::{holds, Outcome};
        use crate::{CheckOptions, Reasoner};
        use proofgate_core::policy::{PolicyDefinition, PolicyModel, Sort};
        use proptest::prelude::*;
        use z3::ast::{Bool, Int};
        use z3::{Optimize, SatResult, Solver};

        const BOOLS: usize = 5;
        const INTS: usize = 3;

        fn var(i: usize) -> String {
            if i < BOOLS {
                format!("b{i}")
            } else {
                format!("x{}", i - BOOLS)
            }
        }

        fn atom(v: usize, k: i64, shape: u8) -> String {
            if v < BOOLS {
                if shape.is_multiple_of(2) {
                    var(v)
                } else {
                    format!("(not {})", var(v))
                }
            } else {
                match shape % 3 {
                    0 => format!("(> {} {k})", var(v)),
                    1 => format!("(<= {} {k})", var(v)),
                    _ => format!("(= {} {k})", var(v)),
                }
            }
        }

        fn atom_strategy() -> impl Strategy<Value = String> {
            (0..BOOLS + INTS, 0i64..4, any::<u8>()).prop_map(|(v, k, s)| atom(v, k, s))
        }

        fn rule_strategy() -> impl Strategy<Value = String> {
            prop_oneof![
                (atom_strategy(), atom_strategy()).prop_map(|(a, b)| format!("(=> {a} {b})")),
                (atom_strategy(), atom_strategy()).prop_map(|(a, b)| format!("(or {a} {b})")),
                (0..INTS, 0..INTS).prop_map(|(a, b)| format!(
                    "(<= {} {})",
                    var(BOOLS + a),
                    var(BOOLS + b)
                )),
                (atom_strategy(), atom_strategy(), atom_strategy())
                    .prop_map(|(a, b, c)| format!("(=> (and {a} {b}) {c})")),
            ]
        }

        fn policy(rules: &[String]) -> PolicyModel {
            let variables: Vec<_> = (0..BOOLS + INTS)
                .map(|i| {
                    let ty = if i < BOOLS { "BOOL" } else { "INT" };
                    serde_json::json!({"name": var(i), "type": ty, "description": var(i)})
                })
                .collect();
            let rules: Vec<_> = rules
                .iter()
                .enumerate()
                .map(|(i, e)| serde_json::json!({"id": format!("R{i}"), "expression": e}))
                .collect();
            let def = serde_json::json!({"variables": variables, "rules": rules});
            PolicyModel::from_definition(
                PolicyDefinition::from_json(&def.to_string()).unwrap(),
                None,
            )
            .unwrap()
        }

        proptest! {
            #![proptest_config(ProptestConfig { cases: 150, ..ProptestConfig::default() })]

            /// Every value `forced_values` reads off some statements is the only one their
            /// models give (asked of Z3: the statements and another value have no model).
            #[test]
            fn forced_values_are_the_only_ones(
                stmts in prop::collection::vec(atom_strategy(), 1..5),
            ) {
                let model = policy(&[]);
                let reasoner = Reasoner::new(&model, CheckOptions::default()).unwrap();
                let text = format!("(and {})", stmts.join(" "));
                let expr = model.check_statement(&text).unwrap().expr;
                let s = Solver::new();
                s.assert(reasoner.vocab.formula(&expr).unwrap());
                let consistent = s.check() == SatResult::Sat;
                let forced = super::super::forced_values([&expr]);
                for (name, value) in &forced {
                    let var = reasoner.vocab.var(name).unwrap().clone();
                    let value = reasoner.vocab.formula(&proofgate_core::policy::Expr::Eq(vec![
                        proofgate_core::policy::Expr::Var {
                            name: name.clone(),
                            sort: reasoner.vocab.variables().iter().find(|(n, _)| n == name).unwrap().1.clone(),
                        },
                        value.clone(),
                    ])).unwrap();
                    s.push();
                    s.assert(value.not());
                    prop_assert_eq!(s.check(), SatResult::Unsat, "{} in {}", var, text);
                    s.pop(1);
                }
                // Something is read off whenever a conjunct pins a variable (consistent or not,
                // no value is wrong; this only keeps the test from passing vacuously).
                if consistent && stmts.iter().any(|a| !a.starts_with("(>") && !a.starts_with("(<=")) {
                    prop_assert!(!forced.is_empty(), "{}", text);
                }
            }

            #[test]
            fn scenarios_are_the_plain_definitions(
                rules in prop::collection::vec(rule_strategy(), 1..8),
                premise in atom_strategy(),
                claim in atom_strategy(),
            ) {
                let model = policy(&rules);
                let reasoner = Reasoner::new(&model, CheckOptions::default()).unwrap();
                let (pe, ce) = (
                    model.check_statement(&premise).unwrap().expr,
                    model.check_statement(&claim).unwrap().expr,
                );
                let forced = super::super::forced_values([&pe, &ce]);
                let p = reasoner.vocab.formula(&pe).unwrap();
                let c = reasoner.vocab.formula(&ce).unwrap();
                let slice = reasoner.full_slice();
                let loaded = reasoner.loaded();
                loaded.begin_check();
                let (pl, cl, nl) = (Bool::fresh_const("p"), Bool::fresh_const("c"), Bool::fresh_const("n"));
                loaded.solver.assert(pl.implies(&p));
                loaded.solver.assert(cl.implies(&c));
                loaded.solver.assert(nl.implies(c.not()));
                let pc = [pl.clone(), cl];
                let pn = [pl, nl];
                let found = match (reasoner.solve(&slice.rules, &pc), reasoner.solve(&slice.rules, &pn)) {
                    (Outcome::Sat(t), Outcome::Sat(f)) => {
                        Some(reasoner.explaining_pair(
                            &slice,
                            (&p, &c),
                            &pc,
                            &pn,
                            &forced,
                            t,
                            f,
                        ))
                    }
                    _ => None,
                };
                loaded.end_check();
                let Some((simplest, closest)) = found else { return Ok(()) };
                let hard: Vec<Bool> = reasoner.rule_formulas.clone();
                let sat = |extra: &[Bool]| {
                    let s = Solver::new();
                    for f in hard.iter().chain(extra) {
                        s.assert(f);
                    }
                    s.check() == SatResult::Sat
                };
                prop_assert!(hard.iter().chain([&p, &c]).all(|f| holds(&simplest, f)));
                prop_assert!(hard.iter().all(|f| holds(&closest, f)));
                prop_assert!(holds(&closest, &p) && holds(&closest, &c.not()));
                // Simplest: pins in order (flags false, then counts 0), each kept when it fits
                // with those kept before; the model keeps exactly those.
                let mut kept = vec![p.clone(), c.clone()];
                for (name, sort) in reasoner.vocab.variables().iter().filter(|(_, s)| *s == Sort::Bool)
                    .chain(reasoner.vocab.variables().iter().filter(|(_, s)| *s == Sort::Int))
                {
                    let v = reasoner.vocab.var(name).unwrap();
                    let pin = match sort {
                        Sort::Bool => v.as_bool().unwrap().not(),
                        _ => v.as_int().unwrap().eq(Int::from_i64(0)),
                    };
                    let mut with = kept.clone();
                    with.push(pin.clone());
                    let fits = sat(&with);
                    prop_assert_eq!(holds(&simplest, &pin), fits, "{} in {:?}", name, rules);
                    if fits {
                        kept = with;
                    }
                }
                // Closest: as few differences from the simplest as the optimizer finds.
                let same: Vec<Bool> = reasoner.vocab.variables().iter().map(|(name, _)| {
                    let v = reasoner.vocab.var(name).unwrap();
                    v.eq(simplest.eval(v, true).unwrap())
                }).collect();
                let opt = Optimize::new();
                // The oracle avoids Z3's 0-1 elimination too (see `closest_by_optimizer`).
                let mut params = z3::Params::new();
                params.set_bool("elim_01", false);
                opt.set_params(&params);
                for f in hard.iter().chain([&p, &c.not()]) {
                    opt.assert(f);
                }
                for eq in &same {
                    opt.assert_soft(eq, 1u32, None);
                }
                prop_assert_eq!(opt.check(&[]), SatResult::Sat);
                let best = opt.get_model().unwrap();
                let count = |m: &z3::Model| same.iter().filter(|eq| holds(m, eq)).count();
                prop_assert_eq!(count(&closest), count(&best), "{:?} {} {}", rules, premise, claim);
            }
        }
    }
}

//! Witnesses kept from earlier checks, to show a rule necessary without asking the solver.
//!
//! Minimising a VALID pair's supporting rules drops each rule of the core in turn and asks
//! whether the rest, with the premises and the negated claims, has a model: when it has, the
//! rule stays. A distinct park question spends about 40% of its check there (six rules, six
//! satisfiable calls). Questions of one kind (the same rules, other numbers) have the same
//! witnesses up to the premises' values. So a model found for a rule is kept (its values of
//! the slice's variables), and the next time that rule is dropped, the kept values with the
//! premises' variables set as in a model of the premises are tried first: when Z3 evaluates
//! the premises, the negated claims and every remaining rule to true under them, that
//! assignment is a model, which is exactly what the satisfiable answer proves. Nothing else is
//! taken from a witness: a failed try goes to the solver as before, and the minimised support
//! is the one the solver alone gives (the same drops are kept, in the same order).

use std::cell::RefCell;
use std::collections::HashMap;
use z3::ast::{Ast, Bool, Dynamic};
use z3::{FuncDecl, Model};

use crate::check::holds;

/// Witnesses are kept for slices of at most this many variables (where the solver's cost per
/// call, not its search, is what a check spends), and for at most this many rules.
pub(crate) const MAX_VARS: usize = 64;
const MAX_RULES: usize = 1024;

/// After this many failed tries in a row, a rule's witness is replaced by the next model the
/// solver finds (reading a model back costs about as much as the call itself, so it is not
/// done on every miss).
const REPLACE_AFTER_MISSES: u32 = 4;

/// Values of the slice's variables in one model (variable index, its declaration, its value).
struct Witness {
    values: Vec<(usize, FuncDecl, Dynamic)>,
    misses: u32,
}

/// Per rule, the last model that showed it necessary.
#[derive(Default)]
pub(crate) struct Witnesses {
    kept: RefCell<HashMap<usize, Witness>>,
    /// How many drops a kept witness has answered (for tests).
    shown: std::cell::Cell<usize>,
    /// Tests compare checks with and without witnesses.
    #[cfg(test)]
    pub(crate) off: std::cell::Cell<bool>,
}

/// What a try needs from the current check.
pub(crate) struct Trial<'a> {
    /// The formulas behind the check's fixed literals (premises, negated claims).
    pub formulas: &'a [Bool],
    /// The premises' variables (index, declaration) with their values in a model of the
    /// premises.
    pub premises: Vec<(usize, FuncDecl, Dynamic)>,
    /// The slice's variables (index, variable): what a kept witness records.
    pub vars: Vec<(usize, Dynamic)>,
}

/// What to do about a dropped rule.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Try {
    /// A kept witness, adjusted to the premises, satisfies everything: the rule is necessary.
    Shown,
    /// Ask the solver, and keep its model (none kept yet, or the kept one failed often).
    AskKeepingModel,
    /// Ask the solver without reading a model back.
    Ask,
}

impl Witnesses {
    /// Tries the witness kept for `dropped` against `rules` (formulas that must hold) and the
    /// trial's formulas.
    pub(crate) fn try_for<'r>(
        &self,
        dropped: usize,
        rules: impl IntoIterator<Item = &'r Bool>,
        trial: &Trial<'_>,
    ) -> Try {
        #[cfg(test)]
        if self.off.get() {
            return Try::Ask;
        }
        let mut kept = self.kept.borrow_mut();
        let Some(witness) = kept.get_mut(&dropped) else {
            return if kept.len() < MAX_RULES {
                Try::AskKeepingModel
            } else {
                Try::Ask
            };
        };
        let model = Model::new();
        for (i, decl, value) in &witness.values {
            if !trial.premises.iter().any(|(j, _, _)| i == j) {
                model.add_const_interp(decl, value);
            }
        }
        for (_, decl, value) in &trial.premises {
            model.add_const_interp(decl, value);
        }
        let shown = trial.formulas.iter().all(|f| holds(&model, f))
            && rules.into_iter().all(|f| holds(&model, f));
        if shown {
            witness.misses = 0;
            self.shown.set(self.shown.get() + 1);
            Try::Shown
        } else {
            witness.misses += 1;
            if witness.misses >= REPLACE_AFTER_MISSES {
                Try::AskKeepingModel
            } else {
                Try::Ask
            }
        }
    }

    /// Keeps `model`'s values of the trial's variables as the witness for `dropped`.
    pub(crate) fn keep(&self, dropped: usize, model: &Model, trial: &Trial<'_>) {
        let values = trial
            .vars
            .iter()
            .filter_map(|(i, var)| Some((*i, var.decl(), model.eval(var, true)?)))
            .collect();
        self.kept
            .borrow_mut()
            .insert(dropped, Witness { values, misses: 0 });
    }

    /// How many drops kept witnesses have answered.
    #[cfg(test)]
    pub(crate) fn shown(&self) -> usize {
        self.shown.get()
    }
}

#[cfg(test)]
mod tests {
    use crate::{parse_translations, CheckOptions, Reasoner, TranslatorOutput};
    use proofgate_core::findings::Finding;
    use proofgate_core::policy::{PolicyDefinition, PolicyModel};
    use proptest::prelude::*;

    const PARK: &str = include_str!("../../../examples/policies/park-admission.json");

    fn park() -> PolicyModel {
        PolicyModel::from_definition(PolicyDefinition::from_json(PARK).unwrap(), None).unwrap()
    }

    fn question(age: u32, low: bool, credits: bool, fee: &str) -> Vec<TranslatorOutput> {
        let flag = |on: bool, name: &str| {
            if on {
                name.to_string()
            } else {
                format!("(not {name})")
            }
        };
        let pair = serde_json::json!({
            "premises": [format!("(= customerAge {age})"), flag(low, "isLowSeason"), flag(credits, "usesCredits")],
            "claims": [format!("(= feeAfterDiscount {fee})")],
        });
        parse_translations(&serde_json::json!({ "translations": [[pair]] }).to_string()).unwrap()
    }

    /// Two reasoners for `policy`: one keeping witnesses, one not.
    fn with_and_without(policy: &PolicyModel) -> (Reasoner<'_>, Reasoner<'_>) {
        let with = Reasoner::new(policy, CheckOptions::default()).unwrap();
        let without = Reasoner::new(policy, CheckOptions::default()).unwrap();
        without.witnesses.off.set(true);
        (with, without)
    }

    /// What minimisation decides: the kind and the rules a finding names.
    fn decided(f: &Finding) -> (String, Option<Vec<String>>) {
        let json = serde_json::to_value(f).unwrap();
        let body = json.as_object().unwrap().values().next().unwrap().clone();
        let rules = ["supportingRules", "contradictingRules"]
            .iter()
            .find_map(|k| body.get(*k))
            .and_then(|r| r.as_array().cloned())
            .map(|r| {
                r.iter()
                    .map(|x| x["identifier"].as_str().unwrap_or_default().to_string())
                    .collect()
            });
        (f.kind().as_str().to_string(), rules)
    }

    /// A kept witness answers only when the premises, the negated claims and every remaining
    /// rule evaluate true under it (with the premises' variables set from the check's model).
    #[test]
    fn a_witness_shows_a_drop_only_when_everything_evaluates_true() {
        use super::{Trial, Try, Witnesses};
        use z3::ast::{Ast, Bool, Int};
        use z3::{SatResult, Solver};
        let (x, y) = (Int::new_const("wx"), Int::new_const("wy"));
        let vars = vec![(0, x.clone().into()), (1, y.clone().into())];
        let model_of = |f: &Bool| {
            let solver = Solver::new();
            solver.assert(f);
            assert_eq!(solver.check(), SatResult::Sat);
            solver.get_model().unwrap()
        };
        let witnesses = Witnesses::default();
        let none: [Bool; 0] = [];
        let plain = Trial {
            formulas: &none,
            premises: Vec::new(),
            vars: vars.clone(),
        };
        // Nothing kept for rule 7 yet: ask, keeping the model.
        assert_eq!(witnesses.try_for(7, [], &plain), Try::AskKeepingModel);
        witnesses.keep(
            7,
            &model_of(&Bool::and(&[
                x.eq(Int::from_i64(5)),
                y.eq(Int::from_i64(1)),
            ])),
            &plain,
        );
        let gt = |v: &Int, n: i64| v.gt(Int::from_i64(n));
        assert_eq!(witnesses.try_for(7, [&gt(&x, 3)], &plain), Try::Shown);
        // A remaining rule the witness breaks.
        assert_eq!(
            witnesses.try_for(7, [&gt(&x, 3), &gt(&y, 2)], &plain),
            Try::Ask
        );
        // A formula of the check (premises, negated claims) the witness breaks.
        let negative = [x.lt(Int::from_i64(0))];
        let failing = Trial {
            formulas: &negative,
            premises: Vec::new(),
            vars: vars.clone(),
        };
        assert_eq!(witnesses.try_for(7, [&gt(&x, 3)], &failing), Try::Ask);
        // The premises' values replace the witness's: x = 10 satisfies x > 7, 5 did not.
        let premises = vec![(0, x.decl(), Int::from_i64(10).into())];
        let moved = Trial {
            formulas: &none,
            premises,
            vars,
        };
        assert_eq!(witnesses.try_for(7, [&gt(&x, 7)], &plain), Try::Ask);
        assert_eq!(witnesses.try_for(7, [&gt(&x, 7)], &moved), Try::Shown);
        // Misses in a row get the witness replaced by the solver's next model.
        for _ in 0..super::REPLACE_AFTER_MISSES - 1 {
            assert_eq!(witnesses.try_for(7, [&gt(&y, 2)], &plain), Try::Ask);
        }
        assert_eq!(
            witnesses.try_for(7, [&gt(&y, 2)], &plain),
            Try::AskKeepingModel
        );
        assert_eq!(witnesses.shown(), 2);
    }

    /// Two questions of one kind (other ages): the second's supporting rules are shown
    /// necessary by the first's witnesses, and are the ones the solver alone finds.
    #[test]
    fn a_kept_witness_answers_a_question_of_the_same_kind() {
        let policy = park();
        let (with, without) = with_and_without(&policy);
        for age in [70, 81] {
            let q = question(age, true, false, "22.5");
            let (a, b) = (with.validate(&q).unwrap(), without.validate(&q).unwrap());
            assert_eq!(a[0].kind().as_str(), "VALID", "{a:?}");
            assert_eq!(
                a.iter().map(decided).collect::<Vec<_>>(),
                b.iter().map(decided).collect::<Vec<_>>()
            );
        }
        assert!(
            with.witnesses.shown() > 0,
            "no drop was answered by a kept witness"
        );
        assert_eq!(without.witnesses.shown(), 0);
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(12))]
        /// Any run of questions, of one kind or not: kept witnesses never change what a
        /// finding is or which rules it names.
        #[test]
        fn kept_witnesses_never_change_a_finding(
            questions in prop::collection::vec(
                (0u32..120, any::<bool>(), any::<bool>(), prop::sample::select(vec!["22.5", "37.5", "0", "15", "45"])),
                2..7,
            )
        ) {
            let policy = park();
            let (with, without) = with_and_without(&policy);
            for (age, low, credits, fee) in questions {
                let q = question(age, low, credits, fee);
                let (a, b) = (with.validate(&q).unwrap(), without.validate(&q).unwrap());
                prop_assert_eq!(a.iter().map(decided).collect::<Vec<_>>(), b.iter().map(decided).collect::<Vec<_>>());
            }
        }
    }
}

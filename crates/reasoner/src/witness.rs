//! Witnesses kept from earlier checks, to show a rule necessary without asking the solver.
//!
//! Minimising a VALID pair's supporting rules drops each rule of the core in turn and asks
//! whether the rest, with the premises and the negated claims, has a model: when it has, the
//! rule stays. A distinct park question spends about 40% of its check there (six rules, six
//! satisfiable calls). Questions of one kind (the same rules, other numbers) have the same
//! witnesses up to the premises' values. So a model found for a rule is kept (its values of
//! the slice's variables), and the next time that rule is dropped, the kept values with the
//! premises' variables set as in a model of the premises are tried first: when the premises,
//! the negated claims and every remaining rule evaluate to true under them, that assignment is
//! a model, which is exactly what the satisfiable answer proves. The evaluation is exact and
//! in Rust (`eval`, checked against Z3's own by a property test): asking Z3 to evaluate
//! needed a model and its evaluator built per try, about an eighth of a distinct park check. Nothing else is
//! taken from a witness: a failed try goes to the solver as before, and the minimised support
//! is the one the solver alone gives (the same drops are kept, in the same order).

use std::cell::RefCell;
use std::collections::HashMap;
use z3::ast::Dynamic;
use z3::Model;

use crate::encode::Vocabulary;
use crate::eval::{self, Val, Values};
use proofgate_core::policy::typecheck::{Expr, Sort};

/// Witnesses are kept for slices of at most this many variables (where the solver's cost per
/// call, not its search, is what a check spends), and for at most this many rules.
pub(crate) const MAX_VARS: usize = 64;
const MAX_RULES: usize = 1024;

/// After this many failed tries in a row, a rule's witness is replaced by the next model the
/// solver finds (reading a model back costs about as much as the call itself, so it is not
/// done on every miss).
const REPLACE_AFTER_MISSES: u32 = 4;

/// Values of the slice's variables in one model (variable index, its value).
struct Witness {
    values: Vec<(usize, Val)>,
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
    /// The check's premises (all must hold) and claims (not all may hold): the formulas
    /// behind its fixed literals.
    pub premises: Vec<&'a Expr>,
    pub claims: Vec<&'a Expr>,
    /// The premises' variables (index) with their values in a model of the premises.
    pub premise_values: Vec<(usize, Val)>,
    /// The slice's variables (index, variable, sort): what a kept witness records.
    pub vars: Vec<(usize, Dynamic, Sort)>,
    /// The slice's variables by name.
    pub index: HashMap<&'a str, usize>,
    pub vocab: &'a Vocabulary,
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

/// A kept witness with the premises' values put in: one value per variable, so whatever
/// evaluates true under it is satisfiable.
struct Adjusted<'a> {
    trial: &'a Trial<'a>,
    witness: &'a [(usize, Val)],
}

impl Values for Adjusted<'_> {
    fn var(&self, name: &str) -> Option<Val> {
        let i = *self.trial.index.get(name)?;
        let find = |values: &[(usize, Val)]| values.iter().find(|(j, _)| *j == i).map(|(_, v)| *v);
        find(&self.trial.premise_values).or_else(|| find(self.witness))
    }

    fn enum_id(&self, value: &str) -> Option<u32> {
        self.trial.vocab.value_id(value)
    }
}

impl Witnesses {
    /// Tries the witness kept for `dropped` against `rules` (expressions that must hold) and
    /// the trial's premises and claims. Only an exact "true" for each counts (see `eval`):
    /// anything it cannot decide goes to the solver.
    pub(crate) fn try_for<'r>(
        &self,
        dropped: usize,
        rules: impl IntoIterator<Item = &'r Expr>,
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
        let assignment = Adjusted {
            trial,
            witness: &witness.values,
        };
        let is = |e: &Expr, want: bool| eval::holds(e, &assignment) == Some(want);
        // The claims' conjunction must be false: each claim decided, one of them false.
        let claims_fail = {
            let decided: Option<Vec<bool>> = trial
                .claims
                .iter()
                .map(|c| eval::holds(c, &assignment))
                .collect();
            decided.is_some_and(|d| d.contains(&false))
        };
        let shown = claims_fail
            && trial.premises.iter().all(|p| is(p, true))
            && rules.into_iter().all(|r| is(r, true));
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
            .filter_map(|(i, var, sort)| {
                Some((*i, trial.vocab.val(&model.eval(var, true)?, sort)?))
            })
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
        use crate::encode::Vocabulary;
        use crate::eval::{Rat, Val};
        use proofgate_core::policy::typecheck::Sort;
        use std::collections::HashMap;
        use z3::ast::{Bool, Int};
        use z3::{SatResult, Solver};
        let policy = PolicyModel::from_definition(
            PolicyDefinition::from_json(
                &serde_json::json!({
                    "version": "1.0",
                    "variables": [
                        {"name": "wx", "type": "INT", "description": "x"},
                        {"name": "wy", "type": "INT", "description": "y"}
                    ],
                    "rules": [{"id": "R1", "expression": "(>= wx 0)"}]
                })
                .to_string(),
            )
            .unwrap(),
            None,
        )
        .unwrap();
        let vocab = Vocabulary::new(policy.schema());
        let expr = |text: &str| policy.check_statement(text).unwrap().expr;
        let (x, y) = (
            vocab.var("wx").unwrap().as_int().unwrap(),
            vocab.var("wy").unwrap().as_int().unwrap(),
        );
        let exprs = |texts: &[&str]| texts.iter().map(|t| expr(t)).collect::<Vec<_>>();
        fn make<'a>(
            vocab: &'a Vocabulary,
            (x, y): (&Int, &Int),
            premises: &'a [proofgate_core::policy::Expr],
            claims: &'a [proofgate_core::policy::Expr],
            values: &[(usize, i128)],
        ) -> Trial<'a> {
            Trial {
                premises: premises.iter().collect(),
                claims: claims.iter().collect(),
                premise_values: values
                    .iter()
                    .map(|(i, n)| (*i, Val::Num(Rat::int(*n))))
                    .collect(),
                vars: vec![
                    (0, x.clone().into(), Sort::Int),
                    (1, y.clone().into(), Sort::Int),
                ],
                index: HashMap::from([("wx", 0), ("wy", 1)]),
                vocab,
            }
        }
        let make = |p, c, v| make(&vocab, (&x, &y), p, c, v);
        let model_of = |f: &Bool| {
            let solver = Solver::new();
            solver.assert(f);
            assert_eq!(solver.check(), SatResult::Sat);
            solver.get_model().unwrap()
        };
        let witnesses = Witnesses::default();
        // No premises, and a claim the witness makes false.
        let (no_premises, false_claim) = (exprs(&[]), exprs(&["(< wx 0)"]));
        let plain = make(&no_premises, &false_claim, &[]);
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
        let (gt3, gt7, y_gt2) = (expr("(> wx 3)"), expr("(> wx 7)"), expr("(> wy 2)"));
        assert_eq!(witnesses.try_for(7, [&gt3], &plain), Try::Shown);
        // Each refusal is followed by a try that shows the drop, which clears the misses.
        let refused = |rules: &[&proofgate_core::policy::Expr], trial: &Trial<'_>| {
            assert_eq!(witnesses.try_for(7, rules.iter().copied(), trial), Try::Ask);
            assert_eq!(witnesses.try_for(7, [&gt3], &plain), Try::Shown);
        };
        // A remaining rule the witness breaks.
        refused(&[&gt3, &y_gt2], &plain);
        // A premise the witness breaks.
        let negative = exprs(&["(< wx 0)"]);
        refused(&[&gt3], &make(&negative, &false_claim, &[]));
        // Claims the witness makes true: their negation fails.
        let true_claims = exprs(&["(> wx 0)", "(= wy 1)"]);
        refused(&[&gt3], &make(&no_premises, &true_claims, &[]));
        // No claims at all: their conjunction is true, never false.
        refused(&[&gt3], &make(&no_premises, &no_premises, &[]));
        // A rule over a variable the witness has no value for is undecided: ask.
        let unknown = Trial {
            index: HashMap::from([("wx", 0)]),
            ..make(&no_premises, &false_claim, &[])
        };
        refused(&[&y_gt2], &unknown);
        // The premises' values replace the witness's: x = 10 satisfies x > 7, 5 did not.
        let moved = make(&no_premises, &false_claim, &[(0, 10)]);
        assert_eq!(witnesses.try_for(7, [&gt7], &plain), Try::Ask);
        assert_eq!(witnesses.try_for(7, [&gt7], &moved), Try::Shown);
        // Misses in a row get the witness replaced by the solver's next model.
        for _ in 0..super::REPLACE_AFTER_MISSES - 1 {
            assert_eq!(witnesses.try_for(7, [&y_gt2], &plain), Try::Ask);
        }
        assert_eq!(witnesses.try_for(7, [&y_gt2], &plain), Try::AskKeepingModel);
        assert_eq!(witnesses.shown(), 7);
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

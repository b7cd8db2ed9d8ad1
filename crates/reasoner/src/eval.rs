//! Exact evaluation of typed policy expressions under an assignment of values, in Rust.
//!
//! Trying a kept witness (see `witness`) asks whether one assignment makes a few formulas
//! true. Asked of Z3, each try builds a model and its evaluator: about an eighth of a
//! distinct park check. Here the same question costs a walk over the rules' expressions.
//!
//! The answer decides whether a rule is necessary, so it must be Z3's: numbers are exact
//! rationals (Int and Real alike: the type checker makes every mixed operation explicit with
//! `ToReal`, and the only operation that differs, `/`, is Real only), and whatever this
//! evaluator cannot decide exactly (a number beyond 128 bits, a division by zero, which Z3
//! leaves to the model, a variable without a value) is `None`: the caller then asks the
//! solver, as it would without a witness. A property test compares every answer with Z3's.

use proofgate_core::policy::typecheck::{ArithOp, CmpOp, Expr};
use std::cmp::Ordering;

/// An exact rational number, `num / den` in lowest terms with `den > 0`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Rat {
    num: i128,
    den: i128,
}

/// In u128: `i128::MIN % -1` and `i128::MIN.abs()` overflow, and a translation's literals
/// reach 2^127.
fn gcd(a: i128, b: i128) -> u128 {
    let (mut a, mut b) = (a.unsigned_abs(), b.unsigned_abs());
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a
}

impl Rat {
    /// `num / den`, or None when `den` is 0 or the reduced form does not fit.
    pub(crate) fn new(num: i128, den: i128) -> Option<Rat> {
        if den == 0 {
            return None;
        }
        // 2^127 (both `i128::MIN`) does not fit: undecided. A positive divisor cannot
        // overflow.
        let g = i128::try_from(gcd(num, den)).ok()?;
        let (mut num, mut den) = (num / g, den / g);
        if den < 0 {
            num = num.checked_neg()?;
            den = den.checked_neg()?;
        }
        Some(Rat { num, den })
    }

    pub(crate) fn int(n: i128) -> Rat {
        Rat { num: n, den: 1 }
    }

    fn add(self, o: Rat) -> Option<Rat> {
        let num = self
            .num
            .checked_mul(o.den)?
            .checked_add(o.num.checked_mul(self.den)?)?;
        Rat::new(num, self.den.checked_mul(o.den)?)
    }

    fn neg(self) -> Option<Rat> {
        Some(Rat {
            num: self.num.checked_neg()?,
            den: self.den,
        })
    }

    fn sub(self, o: Rat) -> Option<Rat> {
        self.add(o.neg()?)
    }

    fn mul(self, o: Rat) -> Option<Rat> {
        Rat::new(self.num.checked_mul(o.num)?, self.den.checked_mul(o.den)?)
    }

    /// None for a division by zero: Z3 leaves `x / 0` to the model.
    fn div(self, o: Rat) -> Option<Rat> {
        if o.num == 0 {
            return None;
        }
        Rat::new(self.num.checked_mul(o.den)?, self.den.checked_mul(o.num)?)
    }

    fn cmp(self, o: Rat) -> Option<Ordering> {
        // Denominators are positive, so cross-multiplying keeps the order.
        Some(
            self.num
                .checked_mul(o.den)?
                .cmp(&o.num.checked_mul(self.den)?),
        )
    }
}

/// A value of a policy variable or expression.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Val {
    Bool(bool),
    /// Int and Real: the sort is the expression's, checked before.
    Num(Rat),
    /// A value of a custom type, by the id the vocabulary gives it.
    Enum(u32),
}

/// Where an evaluation gets the values of variables and custom-type values.
pub(crate) trait Values {
    /// The value of the variable `name`, if the assignment has one.
    fn var(&self, name: &str) -> Option<Val>;
    /// The id of the custom-type value `value`.
    fn enum_id(&self, value: &str) -> Option<u32>;
}

fn boolean(e: &Expr, v: &impl Values) -> Option<bool> {
    match eval(e, v)? {
        Val::Bool(b) => Some(b),
        _ => None,
    }
}

fn number(e: &Expr, v: &impl Values) -> Option<Rat> {
    match eval(e, v)? {
        Val::Num(n) => Some(n),
        _ => None,
    }
}

/// Whether `e` is true under `v`: None when it cannot be decided exactly.
pub(crate) fn holds(e: &Expr, v: &impl Values) -> Option<bool> {
    boolean(e, v)
}

/// The value of `e` under `v`, with Z3's semantics for the terms `encode` gives it; None
/// when it cannot be decided exactly. Every operand is evaluated (no short cut), so an
/// undecided part makes the whole undecided.
pub(crate) fn eval(e: &Expr, v: &impl Values) -> Option<Val> {
    Some(match e {
        Expr::Bool(b) => Val::Bool(*b),
        Expr::Int(n) => Val::Num(Rat::int(i128::try_from(*n).ok()?)),
        Expr::Real { digits, scale } => {
            let den = 10i128.checked_pow(*scale)?;
            Val::Num(Rat::new(i128::try_from(*digits).ok()?, den)?)
        }
        Expr::Var { name, .. } => v.var(name)?,
        Expr::EnumValue { value, .. } => Val::Enum(v.enum_id(value)?),
        Expr::Not(a) => Val::Bool(!boolean(a, v)?),
        Expr::And(xs) => {
            let mut all = true;
            for x in xs {
                all &= boolean(x, v)?;
            }
            Val::Bool(all)
        }
        Expr::Or(xs) => {
            let mut any = false;
            for x in xs {
                any |= boolean(x, v)?;
            }
            Val::Bool(any)
        }
        Expr::Implies(xs) => {
            // Right-associative: (=> a b c) is a => (b => c).
            let (last, init) = xs.split_last()?;
            let mut acc = boolean(last, v)?;
            for x in init.iter().rev() {
                acc = !boolean(x, v)? || acc;
            }
            Val::Bool(acc)
        }
        Expr::Eq(xs) => {
            // Pairwise along the chain, without collecting the values.
            let (first, rest) = xs.split_first()?;
            let mut prev = eval(first, v)?;
            let mut all = true;
            for x in rest {
                let cur = eval(x, v)?;
                all &= same(prev, cur);
                prev = cur;
            }
            Val::Bool(all)
        }
        Expr::Distinct(xs) => {
            let vals: Vec<Val> = xs.iter().map(|x| eval(x, v)).collect::<Option<_>>()?;
            let mut distinct = true;
            for (i, a) in vals.iter().enumerate() {
                for b in &vals[i + 1..] {
                    distinct &= !same(*a, *b);
                }
            }
            Val::Bool(distinct)
        }
        Expr::Ite(c, a, b) => {
            let (c, a, b) = (boolean(c, v)?, eval(a, v)?, eval(b, v)?);
            if c {
                a
            } else {
                b
            }
        }
        Expr::ToReal(a) => Val::Num(number(a, v)?),
        Expr::Arith { op, args, .. } => {
            let (head, rest) = args.split_first()?;
            let head = number(head, v)?;
            let step: fn(Rat, Rat) -> Option<Rat> = match op {
                ArithOp::Neg if rest.is_empty() => return Some(Val::Num(head.neg()?)),
                ArithOp::Neg => return None,
                ArithOp::Add => Rat::add,
                ArithOp::Sub => Rat::sub,
                ArithOp::Mul => Rat::mul,
                ArithOp::Div => Rat::div,
            };
            // Z3's n-ary operators fold from the left.
            let mut acc = head;
            for x in rest {
                acc = step(acc, number(x, v)?)?;
            }
            Val::Num(acc)
        }
        Expr::Cmp { op, args } => {
            let (first, rest) = args.split_first()?;
            let mut prev = number(first, v)?;
            let mut all = true;
            for x in rest {
                let cur = number(x, v)?;
                let order = prev.cmp(cur)?;
                all &= match op {
                    CmpOp::Lt => order == Ordering::Less,
                    CmpOp::Le => order != Ordering::Greater,
                    CmpOp::Gt => order == Ordering::Greater,
                    CmpOp::Ge => order != Ordering::Less,
                };
                prev = cur;
            }
            Val::Bool(all)
        }
    })
}

/// Equality of two values of one sort (the type checker sees to the sort).
fn same(a: Val, b: Val) -> bool {
    a == b
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::encode::Vocabulary;
    use proofgate_core::policy::typecheck::Sort;
    use proofgate_core::policy::{PolicyDefinition, PolicyModel};
    use proptest::prelude::*;
    use std::collections::HashMap;
    use z3::ast::{Ast, Bool, Dynamic, Int, Real};
    use z3::Model;

    /// A schema with every sort: two Ints, two Reals, two Bools and an enum.
    fn schema_model() -> PolicyModel {
        let def = serde_json::json!({
            "version": "1.0",
            "types": [{"name": "Tier", "description": "tier", "values": [
                {"value": "GOLD", "description": "g"},
                {"value": "SILVER", "description": "s"},
                {"value": "BRONZE", "description": "b"}
            ]}],
            "variables": [
                {"name": "i1", "type": "INT", "description": "i1"},
                {"name": "i2", "type": "INT", "description": "i2"},
                {"name": "r1", "type": "REAL", "description": "r1"},
                {"name": "r2", "type": "REAL", "description": "r2"},
                {"name": "b1", "type": "BOOL", "description": "b1"},
                {"name": "b2", "type": "BOOL", "description": "b2"},
                {"name": "t1", "type": "Tier", "description": "t1"},
                {"name": "t2", "type": "Tier", "description": "t2"}
            ],
            "rules": [{"id": "R1", "expression": "(>= i1 0)"}]
        });
        PolicyModel::from_definition(PolicyDefinition::from_json(&def.to_string()).unwrap(), None)
            .unwrap()
    }

    struct Assigned<'v> {
        vals: HashMap<String, Val>,
        vocab: &'v Vocabulary,
    }
    impl Values for Assigned<'_> {
        fn var(&self, name: &str) -> Option<Val> {
            self.vals.get(name).copied()
        }
        fn enum_id(&self, value: &str) -> Option<u32> {
            self.vocab.value_id(value)
        }
    }

    /// SMT-LIB terms of each sort over the schema's variables, small enough for Z3 to
    /// evaluate, with literals that make ties, zero divisors and huge numbers likely.
    fn int_term() -> impl Strategy<Value = String> {
        let leaf = prop_oneof![
            4 => Just("i1".to_string()),
            4 => Just("i2".to_string()),
            6 => (0u64..6).prop_map(|n| n.to_string()),
            1 => Just("170141183460469231731687303715884105727".to_string()),
            // 2^126: twice it, negated, is i128::MIN.
            1 => Just("85070591730234615865843651857942052864".to_string()),
            1 => Just("340282366920938463463374607431768211455".to_string()),
        ];
        leaf.prop_recursive(3, 16, 3, |inner| {
            prop_oneof![
                (
                    prop::sample::select(vec!["+", "-", "*"]),
                    prop::collection::vec(inner.clone(), 2..4)
                )
                    .prop_map(|(op, xs)| format!("({op} {})", xs.join(" "))),
                inner.clone().prop_map(|x| format!("(- {x})")),
                (bool_leaf(), inner.clone(), inner)
                    .prop_map(|(c, a, b)| format!("(ite {c} {a} {b})")),
            ]
        })
    }

    fn real_term() -> impl Strategy<Value = String> {
        let leaf = prop_oneof![
            4 => Just("r1".to_string()),
            4 => Just("r2".to_string()),
            2 => Just("0.0".to_string()),
            2 => Just("0.5".to_string()),
            2 => Just("2.25".to_string()),
            1 => Just("12345678901234567890123456789.5".to_string()),
            2 => int_term().prop_map(|t| format!("(to_real {t})")),
        ];
        leaf.prop_recursive(2, 12, 3, |inner| {
            prop_oneof![
                (
                    prop::sample::select(vec!["+", "-", "*", "/"]),
                    prop::collection::vec(inner.clone(), 2..4)
                )
                    .prop_map(|(op, xs)| format!("({op} {})", xs.join(" "))),
                inner.prop_map(|x| format!("(- {x})")),
            ]
        })
    }

    fn bool_leaf() -> impl Strategy<Value = String> {
        prop_oneof![
            Just("b1".to_string()),
            Just("b2".to_string()),
            Just("true".to_string()),
            Just("false".to_string()),
        ]
    }

    fn enum_term() -> impl Strategy<Value = String> {
        prop::sample::select(vec!["t1", "t2", "GOLD", "SILVER", "BRONZE"]).prop_map(String::from)
    }

    fn atom() -> impl Strategy<Value = String> {
        prop_oneof![
            bool_leaf(),
            (
                prop::sample::select(vec!["<", "<=", ">", ">=", "="]),
                prop::collection::vec(int_term(), 2..4)
            )
                .prop_map(|(op, xs)| format!("({op} {})", xs.join(" "))),
            (
                prop::sample::select(vec!["<", "<=", ">", ">=", "="]),
                prop::collection::vec(real_term(), 2..4)
            )
                .prop_map(|(op, xs)| format!("({op} {})", xs.join(" "))),
            (
                prop::sample::select(vec!["=", "distinct"]),
                prop::collection::vec(enum_term(), 2..4)
            )
                .prop_map(|(op, xs)| format!("({op} {})", xs.join(" "))),
            prop::collection::vec(int_term(), 2..4)
                .prop_map(|xs| format!("(distinct {})", xs.join(" "))),
        ]
    }

    fn formula() -> impl Strategy<Value = String> {
        atom().prop_recursive(3, 24, 3, |inner| {
            prop_oneof![
                (
                    prop::sample::select(vec!["and", "or", "=>", "="]),
                    prop::collection::vec(inner.clone(), 1..4)
                )
                    .prop_map(|(op, xs)| format!("({op} {})", xs.join(" "))),
                inner.clone().prop_map(|x| format!("(not {x})")),
                (inner.clone(), inner.clone(), inner)
                    .prop_map(|(c, a, b)| format!("(ite {c} {a} {b})")),
            ]
        })
    }

    fn number_val() -> impl Strategy<Value = (i64, i64)> {
        prop_oneof![
            4 => (-4i64..5).prop_map(|n| (n, 1)),
            4 => (-9i64..10, 1i64..5).prop_map(|(n, d)| (n, d)),
            1 => Just((i64::MAX, 1)),
            1 => Just((i64::MIN + 1, 3)),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(1000))]
        /// Whatever this evaluator decides, Z3's evaluation of the encoded formula under the
        /// same assignment decides the same.
        #[test]
        fn decides_as_z3_does(
            text in formula(),
            ints in prop::collection::vec(-4i64..5, 2),
            reals in prop::collection::vec(number_val(), 2),
            bools in prop::collection::vec(any::<bool>(), 2),
            tiers in prop::collection::vec(0u32..3, 2),
        ) {
            let policy = schema_model();
            let Ok(checked) = policy.check_statement(&text) else {
                // Not well-typed (e.g. a chain of one): nothing to compare.
                return Ok(());
            };
            let expr = checked.expr;
            let vocab = Vocabulary::new(policy.schema());
            let formula = vocab.formula(&expr).unwrap();
            let model = Model::new();
            let mut vals = HashMap::new();
            let tier_values = ["GOLD", "SILVER", "BRONZE"];
            for (i, (name, sort)) in vocab.variables().iter().enumerate() {
                let (z3_value, val): (Dynamic, Val) = match sort {
                    Sort::Int => {
                        let n = ints[i % 2];
                        (Int::from_i64(n).into(), Val::Num(Rat::int(n.into())))
                    }
                    Sort::Real => {
                        let (n, d) = reals[i % 2];
                        (Real::from_rational(n, d).into(), Val::Num(Rat::new(n.into(), d.into()).unwrap()))
                    }
                    Sort::Bool => (Bool::from_bool(bools[i % 2]).into(), Val::Bool(bools[i % 2])),
                    Sort::Enum(_) => {
                        let t = tiers[i % 2];
                        let name = tier_values[t as usize];
                        let value = vocab.enum_value(name).unwrap().clone();
                        (value, Val::Enum(vocab.value_id(name).unwrap()))
                    }
                };
                let var = vocab.var(name).unwrap();
                model.add_const_interp(&var.decl(), &z3_value);
                // A model's value reads back as the same value.
                prop_assert_eq!(vocab.val(&model.eval(var, true).unwrap(), sort), Some(val));
                vals.insert(name.clone(), val);
            }
            let ours = holds(&expr, &Assigned { vals, vocab: &vocab });
            let theirs = model.eval(&formula, true).and_then(|b| b.as_bool());
            if let Some(ours) = ours {
                prop_assert_eq!(Some(ours), theirs, "{}", text);
            }
        }
    }

    #[test]
    fn undecidable_parts_are_none_and_the_rest_is_exact() {
        let policy = schema_model();
        let vocab = Vocabulary::new(policy.schema());
        let vals: HashMap<String, Val> = [
            ("i1", Val::Num(Rat::int(3))),
            ("r1", Val::Num(Rat::new(1, 3).unwrap())),
            ("r2", Val::Num(Rat::int(0))),
            ("t1", Val::Enum(vocab.value_id("SILVER").unwrap())),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect();
        let a = Assigned {
            vals,
            vocab: &vocab,
        };
        let decide = |text: &str| holds(&policy.check_statement(text).unwrap().expr, &a);
        // 1/3 + 1/3 + 1/3 is exactly 1 (no floating point).
        assert_eq!(decide("(= (+ r1 r1 r1) 1.0)"), Some(true));
        assert_eq!(decide("(= t1 SILVER)"), Some(true));
        assert_eq!(decide("(> i1 2)"), Some(true));
        // Division by zero is the model's choice in Z3: undecided here.
        assert_eq!(decide("(= (/ r1 r2) 0.0)"), None);
        // A variable without a value.
        assert_eq!(decide("(> i2 0)"), None);
        // -2^127 divided by -1 is 2^127, one beyond i128: undecided, not a panic (a
        // translation's literal may be that large).
        assert_eq!(
            decide("(= (/ (to_real (* (- 2) 85070591730234615865843651857942052864)) (- 1.0)) r1)"),
            None
        );
        assert_eq!(
            decide("(< (/ (to_real (* (- 2) 85070591730234615865843651857942052864)) 2.0) r2)"),
            Some(true)
        );
        // Beyond 128 bits.
        assert_eq!(
            decide("(> (* i1 170141183460469231731687303715884105727) 0)"),
            None
        );
    }
}

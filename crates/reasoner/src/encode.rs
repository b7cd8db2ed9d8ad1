//! Typed policy expressions to Z3 terms, built through the API (never through SMT-LIB text),
//! and Z3 model values back to SMT-LIB and English.

use crate::eval::{Rat, Val};
use proofgate_core::policy::english::decimal;
use proofgate_core::policy::term::{Term, TermKind};
use proofgate_core::policy::typecheck::{ArithOp, CmpOp, Expr, Schema, Sort};
use std::collections::HashMap;
use z3::ast::{Ast, Bool, Dynamic, Int, Real};
use z3::{FuncDecl, Model, Symbol};

/// Z3 declarations for a schema: one constant per variable, one sort per enum type.
pub(crate) struct Vocabulary {
    vars: HashMap<String, Dynamic>,
    values: HashMap<String, Dynamic>,
    /// Each custom-type value's id for `eval`, by name and by constant.
    value_ids: HashMap<String, u32>,
    constant_ids: HashMap<Dynamic, u32>,
    /// Variables in schema order, with their sorts.
    order: Vec<(String, Sort)>,
}

/// An expression Z3 could not be given (the type checker should have prevented it).
#[derive(Debug, thiserror::Error)]
#[error("internal error: cannot encode {0} for the solver")]
pub struct EncodeError(pub String);

/// An enum sort and its values (in declaration order), declared once per thread (that is,
/// per Z3 context).
type Enumeration = (z3::Sort, Vec<Dynamic>);

thread_local! {
    /// Enum sorts declared in this thread's Z3 context, by name and values. Z3 5 refuses a
    /// second declaration of a sort name in one context (4.8 accepted it), and several
    /// reasoners for one policy may live on one thread (test generation, policy diffs).
    /// The constructors stay with their sort.
    #[allow(clippy::type_complexity)]
    static ENUMERATIONS: std::cell::RefCell<HashMap<(String, Vec<String>), (Enumeration, Vec<FuncDecl>)>> =
        std::cell::RefCell::new(HashMap::new());
}

/// The enum sort `name` with `values` in this thread's context: the one declared before, or a
/// new one (named `name!n` when another enum of this thread already has the name, as two
/// versions of a policy may; its values keep their names).
fn enumeration(name: &str, values: &[String]) -> Enumeration {
    ENUMERATIONS.with(|known| {
        let mut known = known.borrow_mut();
        let key = (name.to_string(), values.to_vec());
        if let Some((found, _)) = known.get(&key) {
            return found.clone();
        }
        let taken = known.keys().filter(|(n, _)| n == name).count();
        let declared = if taken == 0 {
            name.to_string()
        } else {
            format!("{name}!{taken}")
        };
        let names: Vec<Symbol> = values.iter().map(|v| Symbol::from(v.as_str())).collect();
        let (sort, consts, _testers) = z3::Sort::enumeration(Symbol::from(declared), &names);
        let enumeration = (
            sort,
            consts.iter().map(|c| c.apply(&[])).collect::<Vec<_>>(),
        );
        known.insert(key, (enumeration.clone(), consts));
        enumeration
    })
}

impl Vocabulary {
    pub(crate) fn new(schema: &Schema) -> Vocabulary {
        let mut sorts = HashMap::new();
        let mut values = HashMap::new();
        for ty in schema.types() {
            let (sort, consts) = enumeration(&ty.name, &ty.values);
            for (value, constant) in ty.values.iter().zip(consts) {
                values.insert(value.clone(), constant);
            }
            sorts.insert(ty.name.clone(), sort);
        }
        let mut vars = HashMap::new();
        let mut order = Vec::new();
        for v in schema.variables() {
            let sort = match &v.sort {
                Sort::Bool => z3::Sort::bool(),
                Sort::Int => z3::Sort::int(),
                Sort::Real => z3::Sort::real(),
                Sort::Enum(name) => match sorts.get(name) {
                    Some(s) => s.clone(),
                    None => continue,
                },
            };
            vars.insert(v.name.clone(), Dynamic::new_const(v.name.as_str(), &sort));
            order.push((v.name.clone(), v.sort.clone()));
        }
        let mut value_ids = HashMap::new();
        let mut constant_ids = HashMap::new();
        for (id, (name, constant)) in (0u32..).zip(&values) {
            value_ids.insert(name.clone(), id);
            constant_ids.insert(constant.clone(), id);
        }
        Vocabulary {
            vars,
            values,
            value_ids,
            constant_ids,
            order,
        }
    }

    /// The id `eval` gives the custom-type value `value`.
    pub(crate) fn value_id(&self, value: &str) -> Option<u32> {
        self.value_ids.get(value).copied()
    }

    /// A model's value (a numeral, `true`/`false` or a custom-type constant) as `eval` reads
    /// it; None for what it cannot hold exactly (a number beyond 64 bits, an algebraic
    /// number).
    pub(crate) fn val(&self, value: &Dynamic, sort: &Sort) -> Option<Val> {
        Some(match sort {
            Sort::Bool => Val::Bool(value.as_bool()?.as_bool()?),
            Sort::Int => Val::Num(Rat::int(value.as_int()?.as_i64()?.into())),
            Sort::Real => {
                let (num, den) = value.as_real()?.as_rational()?;
                Val::Num(Rat::new(num.into(), den.into())?)
            }
            Sort::Enum(_) => Val::Enum(*self.constant_ids.get(value)?),
        })
    }

    pub(crate) fn variables(&self) -> &[(String, Sort)] {
        &self.order
    }

    pub(crate) fn var(&self, name: &str) -> Option<&Dynamic> {
        self.vars.get(name)
    }

    /// The constant of the custom-type value `value`.
    #[cfg(test)]
    pub(crate) fn enum_value(&self, value: &str) -> Option<&Dynamic> {
        self.values.get(value)
    }

    /// Encodes a Boolean expression.
    pub(crate) fn formula(&self, e: &Expr) -> Result<Bool, EncodeError> {
        self.encode(e)?
            .as_bool()
            .ok_or_else(|| EncodeError(format!("{e:?} as a formula")))
    }

    fn int(&self, e: &Expr) -> Result<Int, EncodeError> {
        self.encode(e)?
            .as_int()
            .ok_or_else(|| EncodeError(format!("{e:?} as Int")))
    }

    fn real(&self, e: &Expr) -> Result<Real, EncodeError> {
        self.encode(e)?
            .as_real()
            .ok_or_else(|| EncodeError(format!("{e:?} as Real")))
    }

    fn formulas(&self, es: &[Expr]) -> Result<Vec<Bool>, EncodeError> {
        es.iter().map(|e| self.formula(e)).collect()
    }

    fn encode(&self, e: &Expr) -> Result<Dynamic, EncodeError> {
        Ok(match e {
            Expr::Bool(b) => Bool::from_bool(*b).into(),
            Expr::Int(n) => Int::from_u128(*n).into(),
            Expr::Real { digits, scale } => {
                let den = format!("1{}", "0".repeat(*scale as usize));
                Real::from_rational_str(&digits.to_string(), &den)
                    .ok_or_else(|| EncodeError(format!("the number {digits}/{den}")))?
                    .into()
            }
            Expr::Var { name, .. } => self
                .vars
                .get(name)
                .cloned()
                .ok_or_else(|| EncodeError(format!("variable {name}")))?,
            Expr::EnumValue { value, .. } => self
                .values
                .get(value)
                .cloned()
                .ok_or_else(|| EncodeError(format!("value {value}")))?,
            Expr::Not(a) => self.formula(a)?.not().into(),
            Expr::And(xs) => Bool::and(&self.formulas(xs)?).into(),
            Expr::Or(xs) => Bool::or(&self.formulas(xs)?).into(),
            Expr::Implies(xs) => {
                // Right-associative: (=> a b c) is a => (b => c).
                let fs = self.formulas(xs)?;
                let mut it = fs.into_iter().rev();
                let last = it
                    .next()
                    .ok_or_else(|| EncodeError("an empty implication".into()))?;
                it.fold(last, |acc, a| a.implies(&acc)).into()
            }
            Expr::Eq(xs) => {
                let ds: Vec<Dynamic> = xs
                    .iter()
                    .map(|x| self.encode(x))
                    .collect::<Result<_, _>>()?;
                let pairs: Vec<Bool> = ds.windows(2).map(|w| w[0].eq(&w[1])).collect();
                Bool::and(&pairs).into()
            }
            Expr::Distinct(xs) => {
                let ds: Vec<Dynamic> = xs
                    .iter()
                    .map(|x| self.encode(x))
                    .collect::<Result<_, _>>()?;
                Dynamic::distinct(&ds).into()
            }
            Expr::Ite(c, a, b) => {
                let (a, b) = (self.encode(a)?, self.encode(b)?);
                self.formula(c)?.ite(&a, &b)
            }
            Expr::ToReal(a) => self.int(a)?.to_real().into(),
            Expr::Arith { op, sort, args } => {
                if *sort == Sort::Int {
                    let xs: Vec<Int> =
                        args.iter().map(|a| self.int(a)).collect::<Result<_, _>>()?;
                    match op {
                        ArithOp::Add => Int::add(&xs).into(),
                        ArithOp::Sub => Int::sub(&xs).into(),
                        ArithOp::Mul => Int::mul(&xs).into(),
                        ArithOp::Neg => first(&xs)?.unary_minus().into(),
                        // The type checker makes every `/` Real.
                        ArithOp::Div => return Err(EncodeError("integer `/`".into())),
                    }
                } else {
                    let xs: Vec<Real> = args
                        .iter()
                        .map(|a| self.real(a))
                        .collect::<Result<_, _>>()?;
                    match op {
                        ArithOp::Add => Real::add(&xs).into(),
                        ArithOp::Sub => Real::sub(&xs).into(),
                        ArithOp::Mul => Real::mul(&xs).into(),
                        ArithOp::Neg => first(&xs)?.unary_minus().into(),
                        ArithOp::Div => {
                            let mut it = xs.into_iter();
                            let head = it.next().ok_or_else(|| EncodeError("empty `/`".into()))?;
                            it.fold(head, |acc, x| acc.div(&x)).into()
                        }
                    }
                }
            }
            Expr::Cmp { op, args } => {
                let real = args.iter().any(|a| a.sort() == Sort::Real);
                let mut pairs = Vec::new();
                for w in args.windows(2) {
                    pairs.push(if real {
                        let (a, b) = (self.real(&w[0])?, self.real(&w[1])?);
                        match op {
                            CmpOp::Lt => a.lt(&b),
                            CmpOp::Le => a.le(&b),
                            CmpOp::Gt => a.gt(&b),
                            CmpOp::Ge => a.ge(&b),
                        }
                    } else {
                        let (a, b) = (self.int(&w[0])?, self.int(&w[1])?);
                        match op {
                            CmpOp::Lt => a.lt(&b),
                            CmpOp::Le => a.le(&b),
                            CmpOp::Gt => a.gt(&b),
                            CmpOp::Ge => a.ge(&b),
                        }
                    });
                }
                Bool::and(&pairs).into()
            }
        })
    }
}

fn first<T: Clone>(xs: &[T]) -> Result<T, EncodeError> {
    xs.first()
        .cloned()
        .ok_or_else(|| EncodeError("an operator without arguments".into()))
}

/// A variable's value in a model: SMT-LIB text and the English for it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Value {
    pub logic: String,
    pub english: String,
}

/// The value of `var` in `model` (completed: unconstrained variables get a default value).
pub(crate) fn model_value(model: &Model, var: &Dynamic, sort: &Sort) -> Option<Value> {
    let v = crate::check::value_in(model, var)?;
    Some(match sort {
        Sort::Bool => {
            let b = v.as_bool()?.as_bool()?;
            Value {
                logic: b.to_string(),
                english: b.to_string(),
            }
        }
        Sort::Int => match v.as_int().and_then(|i| i.as_i64()) {
            Some(n) => Value {
                logic: smt_signed(n.unsigned_abs().to_string(), n < 0),
                english: n.to_string(),
            },
            // Z3's own text only when needed: printing a term is not cheap.
            None => {
                let text = v.to_string();
                Value {
                    english: text.clone(),
                    logic: text,
                }
            }
        },
        Sort::Real => match v.as_real().and_then(|r| r.as_rational()) {
            Some((num, den)) => rational_value(num, den),
            None => {
                let text = v.to_string();
                Value {
                    english: text.clone(),
                    logic: text,
                }
            }
        },
        Sort::Enum(_) => {
            // A value of an enumeration is one of its constructors: its name, without Z3's
            // printer (a tenth of a millisecond a call), which a value of another form gets.
            // The name as declared, quoted by `Term` in the logic where it needs to be: Z3's
            // printer quotes such a name itself, and quoting that again gave `||NOT YET 18||`.
            let constructor = v
                .safe_decl()
                .ok()
                .filter(|_| v.num_children() == 0)
                .map(|d| d.name());
            let text = constructor.unwrap_or_else(|| v.to_string());
            Value {
                english: text.clone(),
                logic: Term::symbol(text).to_string(),
            }
        }
    })
}

fn smt_signed(magnitude: String, negative: bool) -> String {
    if negative {
        format!("(- {magnitude})")
    } else {
        magnitude
    }
}

/// A rational as an exact decimal when it has one (denominator 2^a 5^b), else `(/ n d)`.
fn rational_value(num: i64, den: i64) -> Value {
    let negative = (num < 0) != (den < 0);
    let (n, d) = (num.unsigned_abs() as u128, den.unsigned_abs() as u128);
    let (mut rest, mut twos, mut fives) = (d, 0u32, 0u32);
    while rest > 0 && rest % 2 == 0 {
        rest /= 2;
        twos += 1;
    }
    while rest > 0 && rest % 5 == 0 {
        rest /= 5;
        fives += 1;
    }
    let scale = twos.max(fives);
    // n/d = n * 2^(k-a) * 5^(k-b) / 10^k when d = 2^a 5^b.
    let digits = (rest == 1)
        .then(|| {
            2u128
                .checked_pow(scale - twos)?
                .checked_mul(5u128.checked_pow(scale - fives)?)?
                .checked_mul(n)
        })
        .flatten();
    let sign = if negative { "-" } else { "" };
    match digits {
        Some(digits) => {
            let text = if scale == 0 {
                format!("{digits}.0")
            } else {
                Term::new(TermKind::Decimal { digits, scale }).to_string()
            };
            Value {
                logic: smt_signed(text, negative),
                english: format!("{sign}{}", decimal(digits, scale)),
            }
        }
        None => Value {
            logic: smt_signed(format!("(/ {n}.0 {d}.0)"), negative),
            english: format!("{sign}{n}/{d}"),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rationals_print_as_exact_decimals() {
        assert_eq!(rational_value(305, 8).logic, "38.125");
        assert_eq!(rational_value(305, 8).english, "38.125");
        assert_eq!(rational_value(177, 5).logic, "35.4");
        assert_eq!(rational_value(3, 1).logic, "3.0");
        assert_eq!(rational_value(3, 1).english, "3");
        assert_eq!(rational_value(-1, 4).logic, "(- 0.25)");
        assert_eq!(rational_value(1, 3).logic, "(/ 1.0 3.0)");
        assert_eq!(rational_value(1, 3).english, "1/3");
        assert_eq!(rational_value(7, 20).logic, "0.35");
    }

    /// An enumeration's value reads as its declared name, in the logic as `Term` writes it
    /// (quoted once when it is not a simple symbol), whatever Z3's printer makes of it.
    #[test]
    fn enumeration_values_read_as_their_names() {
        let values = vec!["SENIOR".to_string(), "NOT YET 18".to_string()];
        let (sort, consts) = enumeration("Visitor", &values);
        let x = Dynamic::new_const("visitor", &sort);
        for c in &consts {
            let solver = z3::Solver::new();
            solver.assert(x.eq(c));
            assert_eq!(solver.check(), z3::SatResult::Sat);
            let model = solver.get_model().unwrap();
            let value = model_value(&model, &x, &Sort::Enum("Visitor".into())).unwrap();
            assert!(values.contains(&value.english), "{}", value.english);
            assert_eq!(value.logic, Term::symbol(value.english.clone()).to_string());
            assert!(!value.logic.contains("||"), "{}", value.logic);
        }
    }
}

//! Structured English for typed expressions, from fixed templates ("If ..., then ..."), never
//! from an LLM, so that what a reviewer reads is exactly what the solver checks.

use super::typecheck::{ArithOp, CmpOp, Expr, Schema, Sort};

/// Renders a Boolean rule or statement as a sentence, using variable descriptions.
pub fn render_sentence(schema: &Schema, expr: &Expr) -> String {
    let text = match expr {
        // A top-level implication reads as "If A, then B."
        Expr::Implies(parts) if parts.len() >= 2 => {
            let (last, conds) = parts.split_last().unwrap_or((&parts[0], &[]));
            let conds: Vec<String> = conds.iter().map(|c| render(schema, c, true)).collect();
            format!(
                "If {}, then {}",
                conds.join(", and if "),
                render(schema, last, true)
            )
        }
        e => render(schema, e, false),
    };
    let mut chars = text.chars();
    match chars.next() {
        Some(first) => format!("{}{}.", first.to_uppercase(), chars.as_str()),
        None => text,
    }
}

/// Renders an expression as an English phrase. `nested` marks a sub-clause, which is
/// bracketed when it is itself a connective, so that "A and (B or C)" stays unambiguous.
pub fn render(schema: &Schema, expr: &Expr, nested: bool) -> String {
    let r = |e: &Expr| render(schema, e, true);
    let join = |xs: &[Expr], word: &str| -> String {
        let parts: Vec<String> = xs.iter().map(r).collect();
        let text = parts.join(&format!(" {word} "));
        if nested && xs.len() > 1 {
            format!("({text})")
        } else {
            text
        }
    };
    match expr {
        Expr::Bool(true) => "true".into(),
        Expr::Bool(false) => "false".into(),
        Expr::Int(n) => n.to_string(),
        Expr::Real { digits, scale } => decimal(*digits, *scale),
        Expr::Var { name, sort } => {
            let d = description(schema, name);
            if *sort == Sort::Bool {
                format!("{d} is true")
            } else {
                d
            }
        }
        Expr::EnumValue { value, .. } => value.clone(),
        Expr::Not(inner) => match inner.as_ref() {
            Expr::Var {
                name,
                sort: Sort::Bool,
            } => format!("{} is false", description(schema, name)),
            other => format!("it is not the case that {}", r(other)),
        },
        Expr::And(xs) => join(xs, "and"),
        Expr::Or(xs) => join(xs, "or"),
        Expr::Implies(xs) => {
            let (last, conds) = match xs.split_last() {
                Some(split) => split,
                None => return String::new(),
            };
            let conds: Vec<String> = conds.iter().map(r).collect();
            let text = format!("if {}, then {}", conds.join(", and if "), r(last));
            if nested {
                format!("({text})")
            } else {
                text
            }
        }
        Expr::Eq(xs) => chain(xs, "is equal to", r),
        Expr::Distinct(xs) if xs.len() == 2 => chain(xs, "is not equal to", r),
        Expr::Distinct(xs) => {
            let parts: Vec<String> = xs.iter().map(r).collect();
            format!("{} are all different", parts.join(", "))
        }
        Expr::Ite(c, a, b) => {
            let text = format!("{} if {}, otherwise {}", r(a), r(c), r(b));
            if nested {
                format!("({text})")
            } else {
                text
            }
        }
        Expr::Arith { op, args, .. } => {
            let word = match op {
                ArithOp::Neg => return format!("minus {}", r(&args[0])),
                ArithOp::Add => "plus",
                ArithOp::Sub => "minus",
                ArithOp::Mul => "times",
                ArithOp::Div => "divided by",
            };
            let parts: Vec<String> = args.iter().map(r).collect();
            let text = parts.join(&format!(" {word} "));
            if nested && args.len() > 1 {
                format!("({text})")
            } else {
                text
            }
        }
        Expr::Cmp { op, args } => {
            let word = match op {
                CmpOp::Lt => "is less than",
                CmpOp::Le => "is at most",
                CmpOp::Gt => "is greater than",
                CmpOp::Ge => "is at least",
            };
            chain(args, word, r)
        }
        Expr::ToReal(inner) => r(inner),
    }
}

fn chain(xs: &[Expr], word: &str, r: impl Fn(&Expr) -> String) -> String {
    let parts: Vec<String> = xs.iter().map(r).collect();
    parts.join(&format!(" {word} "))
}

fn description(schema: &Schema, name: &str) -> String {
    let d = schema
        .variable(name)
        .map(|v| v.description.as_str())
        .unwrap_or(name);
    let d = d.trim().trim_end_matches('.');
    // Lower-case a leading capital so it reads inside a sentence ("If the fee ...").
    let mut chars = d.chars();
    match chars.next() {
        Some(c) if c.is_uppercase() && !chars.clone().next().is_some_and(char::is_uppercase) => {
            format!("{}{}", c.to_lowercase(), chars.as_str())
        }
        _ => d.to_string(),
    }
}

/// A decimal `digits / 10^scale` as text, without trailing zeros beyond one decimal.
pub fn decimal(digits: u128, scale: u32) -> String {
    if scale == 0 {
        return digits.to_string();
    }
    let (int, frac) = super::term::decimal_parts(digits, scale);
    let frac = frac.trim_end_matches('0');
    if frac.is_empty() {
        int
    } else {
        format!("{int}.{frac}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::definition::PolicyDefinition;
    use crate::policy::term::parse_term;

    fn schema() -> Schema {
        let def = PolicyDefinition::from_json(
            r#"{"variables":[
              {"name":"isLowSeason","type":"BOOL","description":"Whether the admission day is in the low season"},
              {"name":"admissionFee","type":"REAL","description":"The admission fee before discounts"},
              {"name":"baseFee","type":"REAL","description":"The regular admission fee."},
              {"name":"n","type":"INT"}],"rules":[]}"#,
        )
        .unwrap();
        Schema::from_definition(&def).unwrap()
    }

    fn english(s: &str) -> String {
        let schema = schema();
        render_sentence(
            &schema,
            &schema.check_formula(&parse_term(s).unwrap()).unwrap(),
        )
    }

    #[test]
    fn implication_reads_if_then() {
        assert_eq!(
            english("(=> isLowSeason (= admissionFee (* 0.75 baseFee)))"),
            "If whether the admission day is in the low season is true, then the admission fee before discounts is equal to (0.75 times the regular admission fee)."
        );
    }

    #[test]
    fn connectives_are_bracketed_when_nested() {
        assert_eq!(
            english("(and (not isLowSeason) (or (> n 1) (<= n 0)))"),
            "Whether the admission day is in the low season is false and (n is greater than 1 or n is at most 0)."
        );
        assert_eq!(
            english("(= admissionFee (ite isLowSeason 1.50 (- baseFee 2)))"),
            "The admission fee before discounts is equal to (1.5 if whether the admission day is in the low season is true, otherwise (the regular admission fee minus 2))."
        );
    }

    #[test]
    fn decimals_drop_trailing_zeros() {
        assert_eq!(decimal(3540, 2), "35.4");
        assert_eq!(decimal(5, 3), "0.005");
        assert_eq!(decimal(500, 2), "5");
    }
}

//! Rule slicing (cone of influence): a pair is checked against the rules connected to its
//! variables only.
//!
//! Why this is exact: split the rules into R_in (every rule sharing a variable, directly or
//! through other rules, with the premises and claims) and R_out (the rest). R_out shares no
//! variable with R_in or the pair, so for any formula F over the pair's variables,
//! `R_in ∧ R_out ∧ F` is satisfiable iff `R_in ∧ F` is and `R_out` is. When the whole policy is
//! consistent, R_out (a subset of it) is satisfiable, so dropping it changes no sat/unsat
//! answer: IMPOSSIBLE, INVALID and VALID come out the same, unsat cores of the sliced check are
//! cores of the full one, and a model of the slice extends to one of the whole policy (any
//! model of R_out on the other variables). So slicing is used only once the full rule set has
//! been proved satisfiable: R_out is made of components (groups of rules connected through
//! shared variables) each proved consistent on its own, and a component that is not (it is
//! inconsistent, which makes every pair IMPOSSIBLE, or the solver could not tell) goes into
//! every slice. Rules without variables form one more component of their own.
//!
//! One link is not a variable: Z3 gives `(/ t 0)` one unspecified value wherever it occurs
//! for the same `t`, so two rules dividing by what may be zero can constrain each other
//! through it (`(> (/ 1.0 0.0) 0.0)` and `(< (/ 1.0 0.0) 0.0)` share no variable, yet not
//! both hold). Every rule or statement with such a division is joined to one hidden node.

use proofgate_core::policy::{ArithOp, Expr};
use std::collections::{BTreeSet, HashMap};

/// The connected components of the variable/rule graph of a policy.
pub(crate) struct Components {
    /// Variable name -> index in the vocabulary's order.
    index: HashMap<String, usize>,
    /// Component of each variable.
    of_var: Vec<usize>,
    /// The component of the value of a division by zero (see the module's doc), when a rule
    /// divides by what may be zero.
    hidden_component: Option<usize>,
    /// Rules per component, ascending.
    rules: Vec<Vec<usize>>,
    /// Variables per component, ascending.
    vars: Vec<Vec<usize>>,
}

/// What one check looks at: rules (indices into the policy's rules) and variables (indices
/// into the vocabulary's order), both ascending.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Slice {
    pub rules: Vec<usize>,
    pub vars: Vec<usize>,
}

impl Components {
    /// `vars`: variable names in vocabulary order; `rules`: each rule's expression.
    pub(crate) fn new<'a>(vars: &[String], rules: impl Iterator<Item = &'a Expr>) -> Components {
        let index: HashMap<String, usize> = vars
            .iter()
            .enumerate()
            .map(|(i, n)| (n.clone(), i))
            .collect();
        // Node `vars.len()` stands for the value of a division by zero (see the module's doc).
        let hidden = vars.len();
        let mut parent: Vec<usize> = (0..=vars.len()).collect();
        let mut rule_vars = Vec::new();
        for e in rules {
            let mut vs: Vec<usize> = e
                .variables()
                .into_iter()
                .filter_map(|n| index.get(n).copied())
                .collect();
            if may_divide_by_zero(e) {
                vs.push(hidden);
            }
            for w in vs.windows(2) {
                let (a, b) = (find(&mut parent, w[0]), find(&mut parent, w[1]));
                if a != b {
                    parent[a.max(b)] = a.min(b);
                }
            }
            rule_vars.push(vs);
        }
        // Number components densely, in order of their first variable.
        // The hidden node counts only when a rule divides (else no component is made for it).
        let divides = rule_vars.iter().any(|vs| vs.contains(&hidden));
        let mut ids = HashMap::new();
        let mut of_var: Vec<usize> = (0..vars.len() + usize::from(divides))
            .map(|v| {
                let root = find(&mut parent, v);
                let next = ids.len();
                *ids.entry(root).or_insert(next)
            })
            .collect();
        let hidden_component = if divides { of_var.pop() } else { None };
        let mut comp_rules = vec![Vec::new(); ids.len()];
        let mut comp_vars = vec![Vec::new(); ids.len()];
        for (v, &c) in of_var.iter().enumerate() {
            comp_vars[c].push(v);
        }
        // The last component: rules without variables (true or false whatever the values).
        comp_rules.push(Vec::new());
        comp_vars.push(Vec::new());
        let ground = comp_rules.len() - 1;
        for (r, vs) in rule_vars.iter().enumerate() {
            match vs.first() {
                Some(&v) if v == hidden => {
                    comp_rules[hidden_component.expect("a rule divides")].push(r)
                }
                Some(&v) => comp_rules[of_var[v]].push(r),
                None => comp_rules[ground].push(r),
            }
        }
        Components {
            index,
            of_var,
            hidden_component,
            rules: comp_rules,
            vars: comp_vars,
        }
    }

    /// Number of components.
    pub(crate) fn len(&self) -> usize {
        self.rules.len()
    }

    /// The rules of component `c`.
    pub(crate) fn rules(&self, c: usize) -> &[usize] {
        &self.rules[c]
    }

    /// The rules and variables connected to the variables of `exprs`, plus those of the
    /// components `always`.
    pub(crate) fn slice<'a>(
        &self,
        exprs: impl Iterator<Item = &'a Expr>,
        always: &[usize],
    ) -> Slice {
        let mut comps: BTreeSet<usize> = always.iter().copied().collect();
        for e in exprs {
            if let Some(c) = self.hidden_component.filter(|_| may_divide_by_zero(e)) {
                comps.insert(c);
            }
            for name in e.variables() {
                if let Some(&v) = self.index.get(name) {
                    comps.insert(self.of_var[v]);
                }
            }
        }
        let mut rules: Vec<usize> = comps
            .iter()
            .flat_map(|&c| self.rules[c].iter().copied())
            .collect();
        let mut vars: Vec<usize> = comps
            .iter()
            .flat_map(|&c| self.vars[c].iter().copied())
            .collect();
        rules.sort_unstable();
        vars.sort_unstable();
        Slice { rules, vars }
    }
}

/// Whether `e` divides by something that may be zero: any divisor but a nonzero number.
fn may_divide_by_zero(e: &Expr) -> bool {
    fn nonzero_literal(e: &Expr) -> bool {
        match e {
            Expr::Int(n) => *n != 0,
            Expr::Real { digits, .. } => *digits != 0,
            Expr::ToReal(x) => nonzero_literal(x),
            Expr::Arith {
                op: ArithOp::Neg,
                args,
                ..
            } => args.len() == 1 && nonzero_literal(&args[0]),
            _ => false,
        }
    }
    let mut found = false;
    e.visit(&mut |x| {
        if let Expr::Arith {
            op: ArithOp::Div,
            args,
            ..
        } = x
        {
            found |= args.iter().skip(1).any(|d| !nonzero_literal(d));
        }
    });
    found
}

fn find(parent: &mut [usize], mut x: usize) -> usize {
    while parent[x] != x {
        parent[x] = parent[parent[x]];
        x = parent[x];
    }
    x
}

#[cfg(test)]
mod tests {
    use super::*;
    use proofgate_core::policy::{PolicyDefinition, PolicyModel};

    #[test]
    fn components_follow_shared_variables() {
        let def = PolicyDefinition::from_json(
            r#"{"variables": [
                {"name": "a", "type": "BOOL", "description": "a"},
                {"name": "b", "type": "BOOL", "description": "b"},
                {"name": "c", "type": "BOOL", "description": "c"},
                {"name": "x", "type": "INT", "description": "x"},
                {"name": "y", "type": "INT", "description": "y"}],
              "rules": [
                {"id": "R1", "expression": "(=> a b)"},
                {"id": "R2", "expression": "(> x y)"},
                {"id": "R3", "expression": "(=> b (> x 0))"},
                {"id": "R4", "expression": "true"}]}"#,
        )
        .unwrap();
        let model = PolicyModel::from_definition(def, None).unwrap();
        let names: Vec<String> = model.schema().variables().map(|v| v.name.clone()).collect();
        let comps = Components::new(&names, model.rules().iter().map(|r| &r.expr));
        // {a, b, x, y} joined by R1, R3, R2; {c} alone; R4 without variables.
        assert_eq!(comps.len(), 3);
        assert_eq!(comps.rules(2), &[3]);
        let a = model.check_statement("a").unwrap().expr;
        let s = comps.slice(std::iter::once(&a), &[]);
        assert_eq!(s.rules, vec![0, 1, 2]);
        assert_eq!(s.vars, vec![0, 1, 3, 4]);
        let c = model.check_statement("c").unwrap().expr;
        let s = comps.slice(std::iter::once(&c), &[]);
        assert!(s.rules.is_empty());
        assert_eq!(s.vars, vec![2]);
        let t = model.check_statement("true").unwrap().expr;
        assert_eq!(
            comps.slice(std::iter::once(&t), &[]),
            Slice {
                rules: vec![],
                vars: vec![]
            }
        );
        // A component not proved consistent goes into every slice.
        let s = comps.slice(std::iter::once(&c), &[2]);
        assert_eq!(s.rules, vec![3]);
    }
}

//! Policy linting (paper §3.1): unused variables and types, type errors, contradictory rule
//! sets, rules that are always true, and independent (disjoint) rule groups; plus everything
//! Amazon Bedrock enforces when it imports a definition (ids, names, lengths, limits).

use crate::check::{new_solver, solver_says_unsat, Reasoner};
use crate::gen_tests::CancelFlag;
use crate::options::CheckOptions;
use proofgate_core::policy::aws::{aws_import_issues, AwsSeverity};
use proofgate_core::policy::Expr;
use proofgate_core::policy::{PolicyDefinition, PolicyModel, Sort};
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet};
use z3::ast::Bool;
use z3::SatResult;

/// How serious a lint issue is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    /// The policy cannot be used as is.
    Error,
    /// Probably a mistake.
    Warning,
    /// Worth knowing.
    Info,
}

/// What a lint issue is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum LintKind {
    /// The types or variables are inconsistent.
    SchemaError,
    /// A rule does not parse or type-check, or has a bad id.
    RuleError,
    /// The rules contradict each other: every question would be IMPOSSIBLE.
    ContradictoryRules,
    /// A rule holds whatever the variables are (it constrains nothing).
    AlwaysTrueRule,
    /// A rule's condition can never hold under the other rules: the rule never applies.
    RuleNeverApplies,
    /// Wherever a rule's condition holds, the rules contradict each other: every question
    /// there is IMPOSSIBLE.
    ConflictingRule,
    /// The other rules already imply a rule: removing it changes no answer.
    RedundantRule,
    /// A variable no rule mentions.
    UnusedVariable,
    /// A type no variable or rule uses.
    UnusedType,
    /// The rules split into groups that share no variable.
    DisjointRuleGroups,
    /// The solver could not decide a check within the time limit.
    SolverGaveUp,
    /// Amazon Bedrock would reject the definition on import (rule id, name, length, limit).
    AwsRejects,
    /// Amazon Bedrock accepts it, but its own tools write it differently.
    AwsStyle,
}

/// One finding of the linter.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LintIssue {
    /// How serious.
    pub severity: Severity,
    /// What kind.
    pub kind: LintKind,
    /// A sentence for people.
    pub message: String,
    /// The rule ids involved.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub rules: Vec<String>,
    /// The variables or types involved.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub names: Vec<String>,
}

/// Everything the linter found.
#[derive(Debug, Clone, PartialEq, Default, Serialize)]
pub struct LintReport {
    /// The issues, errors first.
    pub issues: Vec<LintIssue>,
}

impl LintReport {
    /// Whether any issue is an error or a warning.
    pub fn has_problems(&self) -> bool {
        self.issues.iter().any(|i| i.severity <= Severity::Warning)
    }
}

fn issue(severity: Severity, kind: LintKind, message: String) -> LintIssue {
    LintIssue {
        severity,
        kind,
        message,
        rules: Vec::new(),
        names: Vec::new(),
    }
}

/// Lints a policy definition.
pub fn lint(definition: PolicyDefinition, options: &CheckOptions) -> LintReport {
    lint_until(definition, options, &CancelFlag::default())
}

/// Lints a policy definition, stopping before the next rule's solver call once `cancel` is
/// set (the client went, or its time ran out: each call may take the solver's whole limit).
/// A cancelled report is partial; nobody reads it.
pub fn lint_until(
    definition: PolicyDefinition,
    options: &CheckOptions,
    cancel: &CancelFlag,
) -> LintReport {
    let mut report = LintReport::default();
    for i in aws_import_issues(&definition) {
        let (severity, kind) = match i.severity {
            AwsSeverity::Rejected => (Severity::Error, LintKind::AwsRejects),
            AwsSeverity::Advice => (Severity::Warning, LintKind::AwsStyle),
        };
        report.issues.push(LintIssue {
            rules: i.rule.into_iter().collect(),
            names: i.name.into_iter().collect(),
            ..issue(severity, kind, format!("AWS: {}: {}", i.path, i.message))
        });
    }
    if definition.types.is_empty() && definition.variables.is_empty() && definition.rules.is_empty()
    {
        report.issues.push(issue(
            Severity::Error,
            LintKind::SchemaError,
            "the policy is empty: it has no types, variables or rules".into(),
        ));
    }
    let (model, errors) = match PolicyModel::from_definition_partial(definition, None) {
        Ok(built) => built,
        Err(errors) => {
            for e in errors.0 {
                report
                    .issues
                    .push(issue(Severity::Error, LintKind::SchemaError, e.to_string()));
            }
            report.issues.sort_by_key(|i| i.severity);
            return report;
        }
    };
    for e in errors {
        report
            .issues
            .push(issue(Severity::Error, LintKind::RuleError, e.to_string()));
    }
    let reasoner = match Reasoner::new(&model, options.clone()) {
        Ok(r) => r,
        Err(e) => {
            report
                .issues
                .push(issue(Severity::Error, LintKind::RuleError, e.to_string()));
            report.issues.sort_by_key(|i| i.severity);
            return report;
        }
    };
    let mut consistent = false;
    match reasoner.contradictory_rules() {
        Ok(None) => consistent = true,
        Ok(Some(rules)) => report.issues.push(LintIssue {
            message: format!(
                "the rules {} contradict each other: no situation satisfies them all, so every question would be IMPOSSIBLE",
                quote_list(&rules)
            ),
            rules,
            ..issue(Severity::Error, LintKind::ContradictoryRules, String::new())
        }),
        Err(TooComplex) => report.issues.push(issue(
            Severity::Warning,
            LintKind::SolverGaveUp,
            "could not decide within the time limit whether the rules are consistent".into(),
        )),
    }
    let solver = new_solver(options.timeout_ms);
    for (rule, f) in model.rules().iter().zip(&reasoner.rule_formulas) {
        if cancel.is_cancelled() {
            return report;
        }
        if solver_says_unsat(&solver, &f.not()) {
            report.issues.push(LintIssue {
                rules: vec![rule.id.clone()],
                ..issue(
                    Severity::Warning,
                    LintKind::AlwaysTrueRule,
                    format!("rule `{}` is always true: it holds whatever the variables are, so it constrains nothing", rule.id),
                )
            });
        }
    }
    if consistent {
        rule_meanings(&model, &reasoner, options, cancel, &mut report);
    }
    unused(&model, &mut report);
    disjoint_groups(&model, &mut report);
    report.issues.sort_by_key(|i| i.severity);
    report
}

/// What each rule adds to the others (the rules being consistent as a whole): an implication
/// whose condition can never hold under the other rules never applies; one whose condition
/// can hold, but not with the rule's own conclusion, makes every question there IMPOSSIBLE (a
/// review's policy: ages 80 and over made senior, seniors eligible, and 80 and over not
/// eligible, and lint said "no issues"); a rule the others imply changes nothing. The rules sit
/// behind literals in one solver, each check assuming all but one: one solver for the policy,
/// not one per rule.
fn rule_meanings(
    model: &PolicyModel,
    reasoner: &Reasoner<'_>,
    options: &CheckOptions,
    cancel: &CancelFlag,
    report: &mut LintReport,
) {
    let solver = new_solver(options.timeout_ms);
    let literals: Vec<Bool> = reasoner
        .rule_formulas
        .iter()
        .map(|f| {
            // `|` is in no policy name, so the literal is no policy variable.
            let lit = Bool::fresh_const("lint|");
            solver.assert(lit.implies(f));
            lit
        })
        .collect();
    let others = |i: usize| -> Vec<Bool> {
        literals
            .iter()
            .enumerate()
            .filter(|(j, _)| *j != i)
            .map(|(_, l)| l.clone())
            .collect()
    };
    for (i, rule) in model.rules().iter().enumerate() {
        if cancel.is_cancelled() {
            return;
        }
        let mut assumed = others(i);
        let flag = |kind, severity, message: String| LintIssue {
            rules: vec![rule.id.clone()],
            ..issue(severity, kind, message)
        };
        if let Expr::Implies(parts) = &rule.expr {
            let condition = Expr::And(parts[..parts.len().saturating_sub(1)].to_vec());
            if let Ok(condition) = reasoner.vocab.formula(&condition) {
                assumed.push(condition);
                match solver.check_assumptions(&assumed) {
                    SatResult::Unsat => {
                        report.issues.push(flag(
                            LintKind::RuleNeverApplies,
                            Severity::Warning,
                            format!(
                                "rule `{}` never applies: its condition can never hold under the \
                                 other rules (they rule it out, or contradict each other there)",
                                rule.id
                            ),
                        ));
                        continue;
                    }
                    SatResult::Sat => {
                        assumed.push(literals[i].clone());
                        if solver.check_assumptions(&assumed) == SatResult::Unsat {
                            report.issues.push(flag(
                                LintKind::ConflictingRule,
                                Severity::Error,
                                format!(
                                    "rule `{}` conflicts with the other rules: wherever its \
                                     condition holds, the rules contradict each other, so every \
                                     question there would be IMPOSSIBLE",
                                    rule.id
                                ),
                            ));
                            continue;
                        }
                        assumed.pop();
                    }
                    SatResult::Unknown => {}
                }
                assumed.pop();
            }
        }
        assumed.push(reasoner.rule_formulas[i].not());
        if solver.check_assumptions(&assumed) == SatResult::Unsat && literals.len() > 1 {
            report.issues.push(flag(
                LintKind::RedundantRule,
                Severity::Warning,
                format!(
                    "rule `{}` is implied by the other rules: removing it changes no answer",
                    rule.id
                ),
            ));
        }
    }
}

fn unused(model: &PolicyModel, report: &mut LintReport) {
    let mut used_vars = BTreeSet::new();
    let mut used_types = BTreeSet::new();
    for r in model.rules() {
        used_vars.extend(r.expr.variables().into_iter().map(String::from));
        used_types.extend(r.expr.enum_types().into_iter().map(String::from));
    }
    for v in model.schema().variables() {
        if let Sort::Enum(t) = &v.sort {
            used_types.insert(t.clone());
        }
        if !used_vars.contains(&v.name) {
            report.issues.push(LintIssue {
                names: vec![v.name.clone()],
                ..issue(
                    Severity::Warning,
                    LintKind::UnusedVariable,
                    format!("variable `{}` is not used by any rule", v.name),
                )
            });
        }
    }
    for t in model.schema().types() {
        if !used_types.contains(&t.name) {
            report.issues.push(LintIssue {
                names: vec![t.name.clone()],
                ..issue(
                    Severity::Warning,
                    LintKind::UnusedType,
                    format!("type `{}` is not used by any variable or rule", t.name),
                )
            });
        }
    }
}

/// Rules connected through shared variables, by union-find.
fn disjoint_groups(model: &PolicyModel, report: &mut LintReport) {
    let rules = model.rules();
    let mut parent: Vec<usize> = (0..rules.len()).collect();
    fn find(parent: &mut [usize], mut i: usize) -> usize {
        while parent[i] != i {
            parent[i] = parent[parent[i]];
            i = parent[i];
        }
        i
    }
    let mut owner: BTreeMap<&str, usize> = BTreeMap::new();
    for (i, r) in rules.iter().enumerate() {
        for v in r.expr.variables() {
            match owner.get(v) {
                Some(&j) => {
                    let (a, b) = (find(&mut parent, i), find(&mut parent, j));
                    parent[a] = b;
                }
                None => {
                    owner.insert(v, i);
                }
            }
        }
    }
    let mut groups: BTreeMap<usize, Vec<String>> = BTreeMap::new();
    for (i, r) in rules.iter().enumerate() {
        let root = find(&mut parent, i);
        groups.entry(root).or_default().push(r.id.clone());
    }
    if groups.len() > 1 {
        let list: Vec<String> = groups
            .values()
            .map(|g| format!("[{}]", g.join(", ")))
            .collect();
        report.issues.push(LintIssue {
            rules: rules.iter().map(|r| r.id.clone()).collect(),
            ..issue(
                Severity::Info,
                LintKind::DisjointRuleGroups,
                format!(
                    "the rules form {} independent groups that share no variable: {}",
                    groups.len(),
                    list.join(" ")
                ),
            )
        });
    }
}

fn quote_list(ids: &[String]) -> String {
    ids.iter()
        .map(|i| format!("`{i}`"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The solver could not decide within the time limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("the solver could not decide within the time limit")]
pub struct TooComplex;

#[cfg(test)]
mod tests {
    use super::*;

    fn lint_json(json: &str) -> LintReport {
        lint(
            PolicyDefinition::from_json(json).unwrap(),
            &CheckOptions::default(),
        )
    }

    /// A lint whose flag is set stops before its per-rule solver calls (the proxy sets it when
    /// the request ends): an always-true rule is reported only by a lint left to run.
    #[test]
    fn a_cancelled_lint_makes_no_more_solver_calls() {
        let json = r#"{"variables": [{"name": "b", "type": "BOOL", "description": "b"}],
            "rules": [{"id": "TAUTOLOGY", "expression": "(or b (not b))"}]}"#;
        let always_true =
            |r: &LintReport| r.issues.iter().any(|i| i.kind == LintKind::AlwaysTrueRule);
        assert!(always_true(&lint_json(json)));
        let cancel = CancelFlag::default();
        cancel.cancel();
        let report = lint_until(
            PolicyDefinition::from_json(json).unwrap(),
            &CheckOptions::default(),
            &cancel,
        );
        assert!(!always_true(&report), "{:#?}", report.issues);
    }

    #[test]
    fn shipped_examples_pass_with_the_aws_checks() {
        let park = lint_json(include_str!(
            "../../../examples/policies/park-admission.json"
        ));
        assert!(!park.has_problems(), "{:#?}", park.issues);
        // The paper's airline policy holds its denied-boarding conflict on purpose (its
        // IMPOSSIBLE finding is the example): lint names it, and nothing else.
        let airline = lint_json(include_str!(
            "../../../examples/policies/airline-refund.json"
        ));
        let found: Vec<(LintKind, Vec<String>)> = airline
            .issues
            .iter()
            .map(|i| (i.kind, i.rules.clone()))
            .collect();
        assert_eq!(
            found,
            [
                (LintKind::ConflictingRule, vec!["DENIBOARREFU".to_string()]),
                (LintKind::RuleNeverApplies, vec!["DENBOANOTRAV".to_string()])
            ],
            "{:#?}",
            airline.issues
        );
    }

    #[test]
    fn a_rule_that_never_applies_conflicts_or_is_implied_is_named() {
        // A review's policy: lint said "no issues", and every question about ages 80 and over
        // was IMPOSSIBLE.
        let report = lint_json(
            r#"{"variables": [{"name": "age", "type": "INT", "description": "Age"},
                              {"name": "senior", "type": "BOOL", "description": "Senior"},
                              {"name": "eligible", "type": "BOOL", "description": "Eligible"}],
                "rules": [{"id": "AGECAPAGECAP", "expression": "(< age 150)"},
                          {"id": "OVERTWOHUNDR", "expression": "(=> (> age 200) eligible)"},
                          {"id": "SENIORAGEAGE", "expression": "(=> (>= age 65) senior)"},
                          {"id": "SENIORSEVENT", "expression": "(=> (>= age 70) senior)"},
                          {"id": "SENIORELIGIB", "expression": "(=> senior eligible)"},
                          {"id": "EIGHTYNOTNOT", "expression": "(=> (>= age 80) (not eligible))"}]}"#,
        );
        let found: Vec<(LintKind, Vec<String>)> = report
            .issues
            .iter()
            .filter(|i| i.kind != LintKind::AwsStyle)
            .map(|i| (i.kind, i.rules.clone()))
            .collect();
        assert_eq!(
            found,
            [
                (LintKind::ConflictingRule, vec!["EIGHTYNOTNOT".to_string()]),
                // Under the conflict the others keep every age below 80, so below 150 too.
                (LintKind::RedundantRule, vec!["AGECAPAGECAP".to_string()]),
                (LintKind::RuleNeverApplies, vec!["OVERTWOHUNDR".to_string()]),
                (LintKind::RedundantRule, vec!["SENIORSEVENT".to_string()])
            ],
            "{:#?}",
            report.issues
        );
    }

    #[test]
    fn what_aws_rejects_is_an_error_and_style_a_warning() {
        let report = lint_json(
            r#"{"variables": [{"name": "x", "type": "int"}, {"name": "b", "type": "BOOL", "description": "b"}],
                "rules": [{"id": "POSITIVE", "expression": "(=> b (> x 0))"}]}"#,
        );
        let kinds: Vec<(Severity, LintKind)> =
            report.issues.iter().map(|i| (i.severity, i.kind)).collect();
        assert_eq!(
            kinds,
            vec![
                (Severity::Error, LintKind::AwsRejects),
                (Severity::Error, LintKind::AwsRejects),
                (Severity::Warning, LintKind::AwsStyle),
            ],
            "{:#?}",
            report.issues
        );
        assert_eq!(report.issues[1].rules, vec!["POSITIVE"]);
        assert!(report.issues[0]
            .message
            .starts_with("AWS: variables[0].description: variable `x` has no description"));
    }

    #[test]
    fn an_empty_policy_is_an_error() {
        let report = lint_json(r#"{"rules": []}"#);
        assert!(report
            .issues
            .iter()
            .any(|i| i.severity == Severity::Error && i.message.contains("policy is empty")));
    }
}

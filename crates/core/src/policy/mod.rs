//! The policy model: Bedrock `AutomatedReasoningPolicyDefinition` JSON, SMT-LIB terms of the
//! paper's fragment, type checking and structured English.
//!
//! - [`definition`]: the JSON format, read and written unchanged, and its content hash.
//! - [`aws`]: what Amazon Bedrock enforces on import, and conversion to AWS's rule ids.
//! - [`term`]: the untyped SMT-LIB syntax tree, parser and printer.
//! - [`typecheck`]: the schema (types, variables) and the typed [`Expr`] tree.
//! - [`english`]: structured English rendering from templates.
//! - [`test_suite`]: policy test cases (question/answer or given translations, expected finding).
//! - [`diff`]: what changed between two versions of a definition.
//!
//! [`PolicyModel`] ties them together: a definition whose rules all parse and type-check.

pub mod aws;
pub mod definition;
pub mod diff;
pub mod english;
pub mod smtlib;
pub mod term;
pub mod test_suite;
pub mod typecheck;

pub use definition::{PolicyDefinition, RuleDefinition, TypeDefinition, VariableDefinition};
pub use diff::{diff_definitions, DefinitionDiff};
pub use term::{parse_term, ParseError, Term};
pub use test_suite::{PolicyTestCase, PolicyTestSuite, TestStatement};
pub use typecheck::{ArithOp, Expr, Schema, SchemaError, Sort, TypeError, Variable};

use std::collections::BTreeSet;
use std::fmt;

/// A rule that parsed and type-checked.
#[derive(Debug, Clone, PartialEq)]
pub struct PolicyRule {
    /// The rule's id.
    pub id: String,
    /// The rule as parsed.
    pub term: Term,
    /// The rule as type-checked.
    pub expr: Expr,
    /// The author's English, if any.
    pub alternate_expression: Option<String>,
}

/// A parsed and type-checked statement (premise or claim).
#[derive(Debug, Clone, PartialEq)]
pub struct CheckedStatement {
    /// The statement as parsed.
    pub term: Term,
    /// The statement as type-checked (Boolean).
    pub expr: Expr,
}

/// One problem with a policy definition.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum PolicyError {
    /// The types or variables are inconsistent.
    #[error("schema: {0}")]
    Schema(#[from] SchemaError),
    /// A rule without an id.
    #[error("rule #{index} (counting from 1) has an empty id")]
    EmptyRuleId {
        /// Its 1-based position in `rules`.
        index: usize,
    },
    /// Two rules with one id.
    #[error("rule id `{0}` is used by more than one rule")]
    DuplicateRuleId(String),
    /// A rule id that names, in the SMT-LIB scripts an audit runs, what another name does: a
    /// variable or a type's value (Z3 then refused the rule's named assertion and dropped the
    /// rule, and every audit of the policy's findings failed), or another rule (`R|1` and
    /// `R_1` are both written `|R_1|`).
    #[error("rule id `{id}` is written in solver scripts as {other} is: give the rule another id")]
    RuleIdClash {
        /// The rule's id.
        id: String,
        /// What else it is written as.
        other: String,
    },
    /// A rule that is not valid SMT-LIB of the fragment.
    #[error("rule `{id}`: syntax error: {error} in `{expression}`")]
    RuleSyntax {
        /// The rule's id.
        id: String,
        /// Its expression.
        expression: String,
        /// The problem.
        error: ParseError,
    },
    /// A rule that does not type-check against the schema.
    #[error("rule `{id}`: type error {error} in `{expression}`")]
    RuleType {
        /// The rule's id.
        id: String,
        /// Its expression.
        expression: String,
        /// The problem.
        error: TypeError,
    },
}

/// Every problem found in a policy definition (never empty).
#[derive(Debug, Clone, PartialEq)]
pub struct PolicyErrors(pub Vec<PolicyError>);

impl fmt::Display for PolicyErrors {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, e) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str("; ")?;
            }
            write!(f, "{e}")?;
        }
        Ok(())
    }
}

impl std::error::Error for PolicyErrors {}

/// A statement that is not valid against the policy's schema.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum StatementError {
    /// Not SMT-LIB of the fragment.
    #[error("syntax error: {error} in `{text}`")]
    Syntax {
        /// The statement.
        text: String,
        /// The problem.
        error: ParseError,
    },
    /// Does not type-check.
    #[error("type error {error} in `{text}`")]
    Type {
        /// The statement.
        text: String,
        /// The problem.
        error: TypeError,
    },
}

/// A policy definition with its schema and type-checked rules.
#[derive(Debug, Clone, PartialEq)]
pub struct PolicyModel {
    definition: PolicyDefinition,
    schema: Schema,
    rules: Vec<PolicyRule>,
    version_arn: String,
}

impl PolicyModel {
    /// Builds the model, failing with every problem when any rule or the schema is wrong.
    /// `version_arn` identifies the policy version in findings; without one the content hash
    /// (`sha256:...`) is used.
    pub fn from_definition(
        definition: PolicyDefinition,
        version_arn: Option<String>,
    ) -> Result<PolicyModel, PolicyErrors> {
        let (model, errors) = PolicyModel::from_definition_partial(definition, version_arn)?;
        if errors.is_empty() {
            Ok(model)
        } else {
            Err(PolicyErrors(errors))
        }
    }

    /// Builds the model from the rules that are fine and returns the problems with the others
    /// (for linting). Fails only when the schema itself is broken.
    pub fn from_definition_partial(
        definition: PolicyDefinition,
        version_arn: Option<String>,
    ) -> Result<(PolicyModel, Vec<PolicyError>), PolicyErrors> {
        let schema = Schema::from_definition(&definition)
            .map_err(|es| PolicyErrors(es.into_iter().map(PolicyError::Schema).collect()))?;
        let mut errors = Vec::new();
        let mut rules = Vec::new();
        let mut seen = BTreeSet::new();
        // Every symbol the scripts declare, as written there, with what it is.
        let mut written: std::collections::BTreeMap<String, String> = schema
            .variables()
            .map(|v| {
                (
                    smtlib::symbol_identity(&v.name),
                    format!("variable `{}`", v.name),
                )
            })
            .chain(schema.types().flat_map(|t| {
                t.values.iter().map(move |value| {
                    (
                        smtlib::symbol_identity(value),
                        format!("value `{value}` of type `{}`", t.name),
                    )
                })
            }))
            .collect();
        // SMT-LIB's own symbols: z3 refuses `(! ... :named and)` ("builtin symbol"), quoted or
        // not, and every audit script of the policy failed (an injection review).
        for own in [
            "true", "false", "not", "and", "or", "xor", "=>", "=", "distinct", "ite", "_", "as",
            "+", "-", "*", "/", "<", "<=", ">", ">=", "div", "mod", "abs", "to_real", "to_int",
            "is_int",
        ] {
            written
                .entry(smtlib::symbol_identity(own))
                .or_insert_with(|| format!("SMT-LIB's own `{own}`"));
        }
        for (i, r) in definition.rules.iter().enumerate() {
            if r.id.trim().is_empty() {
                errors.push(PolicyError::EmptyRuleId { index: i + 1 });
                continue;
            }
            if !seen.insert(r.id.as_str()) {
                errors.push(PolicyError::DuplicateRuleId(r.id.clone()));
                continue;
            }
            let symbol = smtlib::symbol_identity(&r.id);
            if let Some(other) = written.get(&symbol) {
                errors.push(PolicyError::RuleIdClash {
                    id: r.id.clone(),
                    other: other.clone(),
                });
                continue;
            }
            written.insert(symbol, format!("rule `{}`", r.id));
            let term = match parse_term(&r.expression) {
                Ok(t) => t,
                Err(error) => {
                    errors.push(PolicyError::RuleSyntax {
                        id: r.id.clone(),
                        expression: r.expression.clone(),
                        error,
                    });
                    continue;
                }
            };
            match schema.check_formula(&term) {
                Ok(expr) => rules.push(PolicyRule {
                    id: r.id.clone(),
                    term,
                    expr,
                    alternate_expression: r.alternate_expression.clone(),
                }),
                Err(error) => errors.push(PolicyError::RuleType {
                    id: r.id.clone(),
                    expression: r.expression.clone(),
                    error,
                }),
            }
        }
        let version_arn = version_arn.unwrap_or_else(|| definition.content_hash());
        Ok((
            PolicyModel {
                definition,
                schema,
                rules,
                version_arn,
            },
            errors,
        ))
    }

    /// The definition, as loaded.
    pub fn definition(&self) -> &PolicyDefinition {
        &self.definition
    }

    /// The schema.
    pub fn schema(&self) -> &Schema {
        &self.schema
    }

    /// The rules that type-checked, in definition order.
    pub fn rules(&self) -> &[PolicyRule] {
        &self.rules
    }

    /// The rule with id `id`.
    pub fn rule(&self, id: &str) -> Option<&PolicyRule> {
        self.rules.iter().find(|r| r.id == id)
    }

    /// The ARN or content hash cited as `policyVersionArn` in findings.
    pub fn version_arn(&self) -> &str {
        &self.version_arn
    }

    /// Parses and type-checks a premise or claim against the schema.
    pub fn check_statement(&self, text: &str) -> Result<CheckedStatement, StatementError> {
        let term = parse_term(text).map_err(|error| StatementError::Syntax {
            text: text.to_string(),
            error,
        })?;
        let expr = self
            .schema
            .check_formula(&term)
            .map_err(|error| StatementError::Type {
                text: text.to_string(),
                error,
            })?;
        Ok(CheckedStatement { term, expr })
    }

    /// A Boolean expression as a structured English sentence.
    pub fn english(&self, expr: &Expr) -> String {
        english::render_sentence(&self.schema, expr)
    }

    /// The policy as the prompts show it: each rule in SMT-LIB and in English (its
    /// `alternateExpression`, or the sentence [`PolicyModel::english`] makes of it), and each
    /// variable with its description.
    pub fn prompt_context(&self) -> crate::prompts::PolicyContext {
        use crate::prompts::{PolicyContext, PolicyRuleText, PolicyVariableText};
        PolicyContext {
            rules: self
                .rules()
                .iter()
                .map(|r| PolicyRuleText {
                    id: r.id.clone(),
                    expression: r.term.to_string(),
                    english: Some(
                        r.alternate_expression
                            .clone()
                            .unwrap_or_else(|| self.english(&r.expr)),
                    ),
                })
                .collect(),
            variables: self
                .schema()
                .variables()
                .map(|v| PolicyVariableText {
                    name: v.name.clone(),
                    description: v.description.clone(),
                })
                .collect(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn def(rules: &str) -> PolicyDefinition {
        PolicyDefinition::from_json(&format!(
            r#"{{"variables":[{{"name":"x","type":"int"}},{{"name":"b","type":"bool"}}],"rules":{rules}}}"#
        ))
        .unwrap()
    }

    #[test]
    fn a_rule_id_written_as_a_variable_or_another_rule_is_refused() {
        // Z3 refused `(assert (! ... :named x))` beside `(declare-const x Int)` and dropped
        // the rule: every audit of the policy's findings failed.
        let errors = |rules: &str| match PolicyModel::from_definition(def(rules), None) {
            Ok(_) => Vec::new(),
            Err(e) => e.0.iter().map(ToString::to_string).collect::<Vec<_>>(),
        };
        let clash = errors(r#"[{"id":"x","expression":"(> x 0)"}]"#);
        assert!(
            clash
                .iter()
                .any(|e| e.contains("rule id `x` is written in solver scripts as variable `x` is")),
            "{clash:?}"
        );
        let twins =
            errors(r#"[{"id":"R|1","expression":"(> x 0)"},{"id":"R_1","expression":"(> x 1)"}]"#);
        assert!(
            twins
                .iter()
                .any(|e| e.contains("rule id `R_1` is written in solver scripts as rule `R|1` is")),
            "{twins:?}"
        );
        assert!(errors(r#"[{"id":"R1","expression":"(> x 0)"}]"#).is_empty());
        // SMT-LIB's own symbols, which z3 refuses as a rule's name.
        for own in ["and", "true", "distinct", "xor", "=>", "as"] {
            let refused = errors(&format!(r#"[{{"id":"{own}","expression":"(> x 0)"}}]"#));
            assert!(
                refused
                    .iter()
                    .any(|e| e.contains(&format!("as SMT-LIB's own `{own}` is"))),
                "{own}: {refused:?}"
            );
        }
    }

    #[test]
    fn builds_and_cites_the_content_hash() {
        let d = def(r#"[{"id":"R1","expression":"(=> b (> x 0))"}]"#);
        let hash = d.content_hash();
        let m = PolicyModel::from_definition(d, None).unwrap();
        assert_eq!(m.version_arn(), hash);
        assert_eq!(m.rules().len(), 1);
        assert_eq!(
            m.english(&m.rules()[0].expr),
            "If b is true, then x is greater than 0."
        );
        let m = PolicyModel::from_definition(m.definition().clone(), Some("arn:x".into())).unwrap();
        assert_eq!(m.version_arn(), "arn:x");
    }

    #[test]
    fn errors_name_the_rule_position_and_problem() {
        let d = def(
            r#"[{"id":"R1","expression":"(=> b (> y 0))"},{"id":"R2","expression":"(and b"},
                {"id":"R1","expression":"b"},{"id":"","expression":"b"}]"#,
        );
        let errs = PolicyModel::from_definition(d, None).unwrap_err();
        let text = errs.to_string();
        assert!(
            text.contains("rule `R1`: type error at offset 9: unknown variable `y`"),
            "{text}"
        );
        assert!(text.contains("rule `R2`: syntax error: unbalanced parentheses: the `(` at offset 0 is never closed"), "{text}");
        assert!(
            text.contains("rule id `R1` is used by more than one rule"),
            "{text}"
        );
        assert!(text.contains("rule #4"), "{text}");
    }

    #[test]
    fn statements_are_checked() {
        let m = PolicyModel::from_definition(def("[]"), None).unwrap();
        assert!(m.check_statement("(> x 1)").is_ok());
        let e = m.check_statement("x) (assert false").unwrap_err();
        assert!(
            e.to_string()
                .starts_with("syntax error: unexpected `)` at offset 1"),
            "{e}"
        );
        let e = m.check_statement("(> b 1)").unwrap_err();
        assert!(
            e.to_string().contains("must be Int or Real, found Bool"),
            "{e}"
        );
    }
}

//! What changed between two versions of a policy definition: rules, variables and types,
//! matched by id or name. Rule expressions are compared as parsed SMT-LIB, so layout and
//! number spelling (`0.40` and `0.4`) do not count as changes.

use super::definition::{PolicyDefinition, RuleDefinition, TypeDefinition, VariableDefinition};
use super::term::{parse_term, Term, TermKind};
use serde::Serialize;

/// How an item differs between the old and the new version.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ChangeKind {
    /// Only in the new version.
    Added,
    /// Only in the old version.
    Removed,
    /// In both, with different content.
    Changed,
}

/// One rule, variable or type that differs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ItemChange {
    /// The rule id, variable name or type name.
    pub name: String,
    /// Added, removed or changed.
    pub kind: ChangeKind,
    /// For changes: which fields differ (`expression`, `alternateExpression`, `type`,
    /// `description`, `values`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub fields: Vec<String>,
    /// The old version, in one line (absent when added).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub old: Option<String>,
    /// The new version, in one line (absent when removed).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub new: Option<String>,
}

/// Every difference between two definitions, in the new version's order (removed items
/// last, in the old version's order).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize)]
pub struct DefinitionDiff {
    /// Rules, by id.
    pub rules: Vec<ItemChange>,
    /// Variables, by name.
    pub variables: Vec<ItemChange>,
    /// Custom types, by name.
    pub types: Vec<ItemChange>,
}

impl DefinitionDiff {
    /// Whether the definitions have the same rules, variables and types.
    pub fn is_empty(&self) -> bool {
        self.rules.is_empty() && self.variables.is_empty() && self.types.is_empty()
    }
}

/// Compares two definitions.
pub fn diff_definitions(old: &PolicyDefinition, new: &PolicyDefinition) -> DefinitionDiff {
    DefinitionDiff {
        rules: diff_items(&old.rules, &new.rules, |r| &r.id, rule_fields, rule_line),
        variables: diff_items(
            &old.variables,
            &new.variables,
            |v| &v.name,
            variable_fields,
            variable_line,
        ),
        types: diff_items(&old.types, &new.types, |t| &t.name, type_fields, type_line),
    }
}

fn diff_items<T>(
    old: &[T],
    new: &[T],
    key: impl Fn(&T) -> &String,
    fields: impl Fn(&T, &T) -> Vec<String>,
    line: impl Fn(&T) -> String,
) -> Vec<ItemChange> {
    let mut out = Vec::new();
    for n in new {
        match old.iter().find(|o| key(o) == key(n)) {
            None => out.push(ItemChange {
                name: key(n).clone(),
                kind: ChangeKind::Added,
                fields: Vec::new(),
                old: None,
                new: Some(line(n)),
            }),
            Some(o) => {
                let changed = fields(o, n);
                if !changed.is_empty() {
                    out.push(ItemChange {
                        name: key(n).clone(),
                        kind: ChangeKind::Changed,
                        fields: changed,
                        old: Some(line(o)),
                        new: Some(line(n)),
                    });
                }
            }
        }
    }
    for o in old {
        if !new.iter().any(|n| key(n) == key(o)) {
            out.push(ItemChange {
                name: key(o).clone(),
                kind: ChangeKind::Removed,
                fields: Vec::new(),
                old: Some(line(o)),
                new: None,
            });
        }
    }
    out
}

/// Whether two SMT-LIB texts are the same term (falling back to the text when one does not
/// parse).
fn same_expression(a: &str, b: &str) -> bool {
    match (parse_term(a), parse_term(b)) {
        (Ok(x), Ok(y)) => normalized(x) == normalized(y),
        _ => a.trim() == b.trim(),
    }
}

/// The term with decimals in lowest terms (`0.40` as `0.4`).
fn normalized(t: Term) -> Term {
    let kind = match t.kind {
        TermKind::Decimal {
            mut digits,
            mut scale,
        } => {
            while scale > 1 && digits % 10 == 0 {
                digits /= 10;
                scale -= 1;
            }
            TermKind::Decimal { digits, scale }
        }
        TermKind::App(op, args) => TermKind::App(op, args.into_iter().map(normalized).collect()),
        other => other,
    };
    Term::new(kind)
}

fn rule_fields(o: &RuleDefinition, n: &RuleDefinition) -> Vec<String> {
    let mut f = Vec::new();
    if !same_expression(&o.expression, &n.expression) {
        f.push("expression".into());
    }
    if o.alternate_expression != n.alternate_expression {
        f.push("alternateExpression".into());
    }
    f
}

fn rule_line(r: &RuleDefinition) -> String {
    r.expression.clone()
}

/// Whether two type names name the same type: the built-in ones in any case (`int`, `INT`),
/// a custom type by its exact name (`Tier` and `TIER` are two types).
fn same_type(a: &str, b: &str) -> bool {
    let builtin = |t: &str| {
        ["BOOL", "INT", "REAL"]
            .iter()
            .any(|b| t.eq_ignore_ascii_case(b))
    };
    a == b || (builtin(a) && a.eq_ignore_ascii_case(b))
}

fn variable_fields(o: &VariableDefinition, n: &VariableDefinition) -> Vec<String> {
    let mut f = Vec::new();
    if !same_type(&o.type_name, &n.type_name) {
        f.push("type".into());
    }
    if o.description != n.description {
        f.push("description".into());
    }
    f
}

fn variable_line(v: &VariableDefinition) -> String {
    match &v.description {
        Some(d) => format!("{}: {d}", v.type_name),
        None => v.type_name.clone(),
    }
}

fn type_fields(o: &TypeDefinition, n: &TypeDefinition) -> Vec<String> {
    let mut f = Vec::new();
    let values = |t: &TypeDefinition| t.values.iter().map(|v| v.value.clone()).collect::<Vec<_>>();
    if values(o) != values(n) {
        f.push("values".into());
    } else if o
        .values
        .iter()
        .zip(&n.values)
        .any(|(a, b)| a.description != b.description)
    {
        // The translators read each value's description to choose it: a new meaning for
        // GOLD changes which answers are VALID as surely as a changed rule.
        f.push("value descriptions".into());
    }
    if o.description != n.description {
        f.push("description".into());
    }
    f
}

fn type_line(t: &TypeDefinition) -> String {
    let values: Vec<&str> = t.values.iter().map(|v| v.value.as_str()).collect();
    values.join(" | ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn def(json: &str) -> PolicyDefinition {
        PolicyDefinition::from_json(json).unwrap()
    }

    #[test]
    fn finds_added_removed_and_changed_items() {
        let old = def(
            r#"{"types":[{"name":"C","values":[{"value":"A"},{"value":"B"}]}],
                "variables":[{"name":"x","type":"int","description":"x"},{"name":"gone","type":"bool"}],
                "rules":[{"id":"R1","expression":"(> x 0.40)"},{"id":"R2","expression":"gone"},
                         {"id":"R3","expression":"(< x 9)","alternateExpression":"small"}]}"#,
        );
        let new = def(r#"{"types":[{"name":"C","values":[{"value":"A"}]}],
                "variables":[{"name":"x","type":"INT","description":"the x"},{"name":"y","type":"real"}],
                "rules":[{"id":"R1","expression":"(>  x\n 0.4)"},{"id":"R3","expression":"(< x 8)","alternateExpression":"smaller"},
                         {"id":"R4","expression":"(> y 1.0)"}]}"#);
        let d = diff_definitions(&old, &new);
        let summary = |items: &[ItemChange]| {
            items
                .iter()
                .map(|i| format!("{}:{:?}:{}", i.name, i.kind, i.fields.join(",")))
                .collect::<Vec<_>>()
        };
        assert_eq!(
            summary(&d.rules),
            vec![
                "R3:Changed:expression,alternateExpression",
                "R4:Added:",
                "R2:Removed:"
            ]
        );
        assert_eq!(
            summary(&d.variables),
            vec!["x:Changed:description", "y:Added:", "gone:Removed:"]
        );
        assert_eq!(summary(&d.types), vec!["C:Changed:values"]);
        assert_eq!(d.rules[0].old.as_deref(), Some("(< x 9)"));
        assert!(!d.is_empty());
        assert!(diff_definitions(&old, &old).is_empty());
    }

    #[test]
    fn a_values_meaning_and_a_custom_types_case_are_changes() {
        let tiers = |gold: &str, ty: &str| {
            def(&format!(
                r#"{{"types":[{{"name":"Tier","values":[{{"value":"GOLD","description":"{gold}"}}]}},
                            {{"name":"TIER","values":[{{"value":"G"}}]}}],
                    "variables":[{{"name":"t","type":"{ty}"}},{{"name":"n","type":"int"}}],
                    "rules":[]}}"#
            ))
        };
        let old = tiers("paid members who spent over 1000 USD", "Tier");
        let new = tiers("any customer who has ever bought a ticket", "Tier");
        let d = diff_definitions(&old, &new);
        assert_eq!(d.types.len(), 1, "{d:?}");
        assert_eq!(d.types[0].fields, ["value descriptions"]);
        let d = diff_definitions(&old, &tiers("paid members who spent over 1000 USD", "TIER"));
        assert_eq!(d.variables.len(), 1, "{d:?}");
        assert_eq!(d.variables[0].fields, ["type"]);
        // A built-in type in another case is the same type.
        assert!(same_type("int", "INT") && !same_type("Tier", "TIER"));
    }
}

//! What Amazon Bedrock enforces when it imports a policy definition
//! (`AutomatedReasoningPolicyDefinition` in the Bedrock service model), and the conversion of a
//! definition into one it accepts: rule ids renamed to AWS's form, with the mapping kept so the
//! original ids can be restored on import.

use super::definition::PolicyDefinition;
use super::typecheck::builtin_sort;
use serde::{Deserialize, Serialize};
use std::collections::BTreeSet;

/// Most custom types in a definition.
pub const MAX_TYPES: usize = 150;
/// Most variables in a definition.
pub const MAX_VARIABLES: usize = 600;
/// Most rules in a definition.
pub const MAX_RULES: usize = 1500;
/// Most values of one custom type (and at least one).
pub const MAX_TYPE_VALUES: usize = 150;
/// Longest type, value or variable name.
pub const MAX_NAME_CHARS: usize = 64;
/// Longest description (types, values, variables).
pub const MAX_DESCRIPTION_CHARS: usize = 1024;
/// Longest rule expression or alternate expression.
pub const MAX_EXPRESSION_CHARS: usize = 2048;
/// Length of every rule id.
pub const RULE_ID_CHARS: usize = 12;

/// Whether `id` is an AWS rule id: exactly 12 characters, `[A-Z][0-9A-Z]{11}`.
pub fn is_aws_rule_id(id: &str) -> bool {
    id.len() == RULE_ID_CHARS
        && id.starts_with(|c: char| c.is_ascii_uppercase())
        && id
            .chars()
            .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit())
}

/// Whether `name` is an AWS type, value or variable name: `[A-Za-z][A-Za-z0-9_]*`, at most 64
/// characters.
pub fn is_aws_name(name: &str) -> bool {
    (1..=MAX_NAME_CHARS).contains(&name.chars().count())
        && name.starts_with(|c: char| c.is_ascii_alphabetic())
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// How AWS would take an issue.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum AwsSeverity {
    /// AWS rejects the definition on import.
    Rejected,
    /// AWS accepts it, but its own tools would write it differently.
    Advice,
}

/// One way a definition departs from what AWS accepts or writes.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AwsIssue {
    /// Whether AWS would reject the import.
    pub severity: AwsSeverity,
    /// Where, as a JSON path: `rules[3].id`, `variables[0].description`.
    pub path: String,
    /// A sentence saying what is wrong and what AWS expects.
    pub message: String,
    /// The rule id involved, if the issue is about a rule.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rule: Option<String>,
    /// The type or variable name involved, if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
}

impl AwsIssue {
    fn rejected(path: String, message: String) -> AwsIssue {
        AwsIssue {
            severity: AwsSeverity::Rejected,
            path,
            message,
            rule: None,
            name: None,
        }
    }

    fn advice(path: String, message: String) -> AwsIssue {
        AwsIssue {
            severity: AwsSeverity::Advice,
            ..AwsIssue::rejected(path, message)
        }
    }

    fn rule(mut self, id: &str) -> AwsIssue {
        self.rule = Some(id.to_string());
        self
    }

    fn name(mut self, name: &str) -> AwsIssue {
        self.name = Some(name.to_string());
        self
    }
}

fn chars(s: &str) -> usize {
    s.chars().count()
}

fn check_name(issues: &mut Vec<AwsIssue>, path: String, what: &str, name: &str) {
    if !is_aws_name(name) {
        issues.push(
            AwsIssue::rejected(
                path,
                format!(
                    "{what} `{name}` is not an AWS name: it must match [A-Za-z][A-Za-z0-9_]* and have 1 to {MAX_NAME_CHARS} characters (it has {})",
                    chars(name)
                ),
            )
            .name(name),
        );
    }
}

/// A description AWS accepts: absent (where optional), or 1 to 1,024 characters.
fn check_description(
    issues: &mut Vec<AwsIssue>,
    path: String,
    what: &str,
    name: &str,
    description: Option<&str>,
    required: bool,
) {
    match description {
        None if required => issues.push(
            AwsIssue::rejected(
                path,
                format!("{what} `{name}` has no description: AWS requires one (say what it means; translation relies on it)"),
            )
            .name(name),
        ),
        Some("") => issues.push(
            AwsIssue::rejected(
                path,
                format!("{what} `{name}` has an empty description: AWS requires at least one character"),
            )
            .name(name),
        ),
        Some(d) if chars(d) > MAX_DESCRIPTION_CHARS => issues.push(
            AwsIssue::rejected(
                path,
                format!(
                    "{what} `{name}` has a description of {} characters: AWS allows at most {MAX_DESCRIPTION_CHARS}",
                    chars(d)
                ),
            )
            .name(name),
        ),
        _ => {}
    }
}

fn check_count(issues: &mut Vec<AwsIssue>, path: &str, what: &str, n: usize, max: usize) {
    if n > max {
        issues.push(AwsIssue::rejected(
            path.to_string(),
            format!("the policy has {n} {what}: AWS allows at most {max}"),
        ));
    }
}

/// Every way `def` departs from what AWS accepts on import (`Rejected`) or writes itself
/// (`Advice`), in definition order.
pub fn aws_import_issues(def: &PolicyDefinition) -> Vec<AwsIssue> {
    let mut issues = Vec::new();
    check_count(&mut issues, "types", "types", def.types.len(), MAX_TYPES);
    check_count(
        &mut issues,
        "variables",
        "variables",
        def.variables.len(),
        MAX_VARIABLES,
    );
    check_count(&mut issues, "rules", "rules", def.rules.len(), MAX_RULES);
    if let Some(v) = def.version.as_deref().filter(|v| *v != "1.0") {
        issues.push(AwsIssue::advice(
            "version".into(),
            format!("the format version is `{v}`; AWS writes `1.0`"),
        ));
    }
    for (i, t) in def.types.iter().enumerate() {
        check_name(&mut issues, format!("types[{i}].name"), "type", &t.name);
        check_description(
            &mut issues,
            format!("types[{i}].description"),
            "type",
            &t.name,
            t.description.as_deref(),
            false,
        );
        if t.description.is_none() {
            issues.push(
                AwsIssue::advice(
                    format!("types[{i}].description"),
                    format!(
                        "type `{}` has no description; AWS's tools write one for every type",
                        t.name
                    ),
                )
                .name(&t.name),
            );
        }
        let n = t.values.len();
        if !(1..=MAX_TYPE_VALUES).contains(&n) {
            issues.push(
                AwsIssue::rejected(
                    format!("types[{i}].values"),
                    format!(
                        "type `{}` has {n} values: AWS requires 1 to {MAX_TYPE_VALUES}",
                        t.name
                    ),
                )
                .name(&t.name),
            );
        }
        for (j, v) in t.values.iter().enumerate() {
            check_name(
                &mut issues,
                format!("types[{i}].values[{j}].value"),
                "type value",
                &v.value,
            );
            check_description(
                &mut issues,
                format!("types[{i}].values[{j}].description"),
                "type value",
                &v.value,
                v.description.as_deref(),
                false,
            );
        }
    }
    for (i, v) in def.variables.iter().enumerate() {
        check_name(
            &mut issues,
            format!("variables[{i}].name"),
            "variable",
            &v.name,
        );
        match builtin_sort(&v.type_name) {
            Some(_) if v.type_name != v.type_name.to_ascii_uppercase() => issues.push(
                AwsIssue::advice(
                    format!("variables[{i}].type"),
                    format!(
                        "variable `{}` has type `{}`; AWS writes built-in types in upper case (`{}`)",
                        v.name,
                        v.type_name,
                        aws_builtin_name(&v.type_name)
                    ),
                )
                .name(&v.name),
            ),
            Some(_) => {}
            None => check_name(
                &mut issues,
                format!("variables[{i}].type"),
                "type name",
                &v.type_name,
            ),
        }
        check_description(
            &mut issues,
            format!("variables[{i}].description"),
            "variable",
            &v.name,
            v.description.as_deref(),
            true,
        );
    }
    for (i, r) in def.rules.iter().enumerate() {
        if !is_aws_rule_id(&r.id) {
            issues.push(
                AwsIssue::rejected(
                    format!("rules[{i}].id"),
                    format!(
                        "rule id `{}` is not an AWS rule id: it must be exactly {RULE_ID_CHARS} characters [A-Z][0-9A-Z]{{11}} (`proofgate policy export --aws` renames ids and keeps a mapping)",
                        r.id
                    ),
                )
                .rule(&r.id),
            );
        }
        let n = chars(&r.expression);
        if n == 0 || n > MAX_EXPRESSION_CHARS {
            issues.push(
                AwsIssue::rejected(
                    format!("rules[{i}].expression"),
                    format!("rule `{}` has an expression of {n} characters: AWS requires 1 to {MAX_EXPRESSION_CHARS}", r.id),
                )
                .rule(&r.id),
            );
        }
        if let Some(alt) = &r.alternate_expression {
            let n = chars(alt);
            if n == 0 || n > MAX_EXPRESSION_CHARS {
                issues.push(
                    AwsIssue::rejected(
                        format!("rules[{i}].alternateExpression"),
                        format!("rule `{}` has an alternateExpression of {n} characters: AWS requires 1 to {MAX_EXPRESSION_CHARS}", r.id),
                    )
                    .rule(&r.id),
                );
            }
        }
    }
    issues
}

/// The upper-case spelling AWS uses for a built-in type (`int` -> `INT`, `boolean` -> `BOOL`).
fn aws_builtin_name(type_name: &str) -> String {
    match type_name.to_ascii_lowercase().as_str() {
        "boolean" => "BOOL".into(),
        "integer" => "INT".into(),
        other => other.to_ascii_uppercase(),
    }
}

/// Words of an id: runs of ASCII letters and digits, split at `_`, other punctuation and
/// lower-to-upper case changes, upper-cased.
fn id_words(id: &str) -> Vec<String> {
    let mut words: Vec<String> = Vec::new();
    let mut current = String::new();
    let mut prev_lower = false;
    for c in id.chars() {
        if !c.is_ascii_alphanumeric() {
            if !current.is_empty() {
                words.push(std::mem::take(&mut current));
            }
            prev_lower = false;
            continue;
        }
        if c.is_ascii_uppercase() && prev_lower && !current.is_empty() {
            words.push(std::mem::take(&mut current));
        }
        prev_lower = c.is_ascii_lowercase();
        current.push(c.to_ascii_uppercase());
    }
    if !current.is_empty() {
        words.push(current);
    }
    words
}

/// An AWS rule id for `id` that is not in `taken`: `id` itself when it already has AWS's form,
/// else its words shortened to fit 12 characters (longest word first), padded with `0`, and
/// numbered at the end when that is taken. `REGULAR_SEASON_FEE` becomes `REGUSEASOFEE`.
pub fn aws_rule_id(id: &str, taken: &BTreeSet<String>) -> String {
    if is_aws_rule_id(id) && !taken.contains(id) {
        return id.to_string();
    }
    let mut words = id_words(id);
    if words.is_empty() {
        words.push("RULE".into());
    }
    if words[0].starts_with(|c: char| c.is_ascii_digit()) {
        words.insert(0, "R".into());
    }
    while words.iter().map(String::len).sum::<usize>() > RULE_ID_CHARS {
        // Shorten the first longest word; drop trailing words once all are one letter.
        let longest = words.iter().map(String::len).max().unwrap_or(0);
        if longest <= 1 {
            words.truncate(RULE_ID_CHARS);
            break;
        }
        if let Some(w) = words.iter_mut().find(|w| w.len() == longest) {
            w.pop();
        }
    }
    let mut base: String = words.concat();
    while base.len() < RULE_ID_CHARS {
        base.push('0');
    }
    if !taken.contains(&base) {
        return base;
    }
    (1u64..)
        .map(|n| {
            let suffix = n.to_string();
            format!("{}{suffix}", &base[..RULE_ID_CHARS - suffix.len()])
        })
        .find(|candidate| !taken.contains(candidate))
        .unwrap_or(base)
}

/// One renamed rule id.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RuleIdChange {
    /// The id in the original definition.
    pub from: String,
    /// The id in the AWS definition.
    pub to: String,
}

/// The rule ids `export --aws` renamed: written next to the exported definition and read by
/// `import` to restore the original ids.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RuleIdMapping {
    /// Every renamed id, in rule order.
    pub rule_ids: Vec<RuleIdChange>,
}

impl RuleIdMapping {
    /// The AWS id of an original id (the id itself when it was not renamed).
    pub fn to_aws<'a>(&'a self, id: &'a str) -> &'a str {
        self.rule_ids
            .iter()
            .find(|c| c.from == id)
            .map(|c| c.to.as_str())
            .unwrap_or(id)
    }

    /// The original id of an AWS id (the id itself when it was not renamed).
    pub fn to_original<'a>(&'a self, id: &'a str) -> &'a str {
        self.rule_ids
            .iter()
            .find(|c| c.to == id)
            .map(|c| c.from.as_str())
            .unwrap_or(id)
    }
}

/// A definition converted for AWS.
#[derive(Debug, Clone, PartialEq)]
pub struct AwsExport {
    /// The definition AWS accepts.
    pub definition: PolicyDefinition,
    /// The rule ids that were renamed.
    pub mapping: RuleIdMapping,
    /// Other changes made, one sentence each.
    pub notes: Vec<String>,
}

/// Converts `def` into a definition AWS accepts: rule ids in AWS form (ids already in that form
/// are kept), built-in type names in upper case, format version `1.0`, empty alternate
/// expressions dropped, and missing variable descriptions filled with the variable's name.
/// Fails with what it cannot fix (names, lengths, counts): those need an author.
pub fn to_aws(def: &PolicyDefinition) -> Result<AwsExport, Vec<AwsIssue>> {
    let mut out = def.clone();
    let mut notes = Vec::new();
    if out.version.as_deref() != Some("1.0") {
        out.version = Some("1.0".into());
    }
    // Ids already in AWS form keep their names; the others are renamed around them.
    let mut taken: BTreeSet<String> = def
        .rules
        .iter()
        .filter(|r| is_aws_rule_id(&r.id))
        .map(|r| r.id.clone())
        .collect();
    let mut kept = BTreeSet::new();
    let mut mapping = RuleIdMapping::default();
    for r in &mut out.rules {
        if is_aws_rule_id(&r.id) && kept.insert(r.id.clone()) {
            continue;
        }
        let new = aws_rule_id(&r.id, &taken);
        taken.insert(new.clone());
        mapping.rule_ids.push(RuleIdChange {
            from: r.id.clone(),
            to: new.clone(),
        });
        r.id = new;
    }
    for r in &mut out.rules {
        if r.alternate_expression.as_deref() == Some("") {
            r.alternate_expression = None;
        }
    }
    for v in &mut out.variables {
        if builtin_sort(&v.type_name).is_some() {
            let aws = aws_builtin_name(&v.type_name);
            if aws != v.type_name {
                v.type_name = aws;
            }
        }
        if v.description.as_deref().is_none_or(|d| d.trim().is_empty()) {
            notes.push(format!(
                "variable `{}` had no description; AWS requires one, so its name was used: write a real one",
                v.name
            ));
            v.description = Some(v.name.clone());
        }
    }
    let rejected: Vec<AwsIssue> = aws_import_issues(&out)
        .into_iter()
        .filter(|i| i.severity == AwsSeverity::Rejected)
        .collect();
    if !rejected.is_empty() {
        return Err(rejected);
    }
    Ok(AwsExport {
        definition: out,
        mapping,
        notes,
    })
}

/// Reads back a definition written by [`to_aws`] (or by AWS): with `mapping`, the original
/// rule ids are restored. Fails when the mapping names an id twice or a restored id collides.
pub fn from_aws(
    def: &PolicyDefinition,
    mapping: Option<&RuleIdMapping>,
) -> Result<PolicyDefinition, String> {
    let mut out = def.clone();
    let Some(mapping) = mapping else {
        return Ok(out);
    };
    let mut seen = BTreeSet::new();
    for c in &mapping.rule_ids {
        if !seen.insert(c.to.as_str()) {
            return Err(format!(
                "the mapping renames `{}` more than once; it cannot be restored",
                c.to
            ));
        }
    }
    for r in &mut out.rules {
        r.id = mapping.to_original(&r.id).to_string();
    }
    let mut ids = BTreeSet::new();
    for r in &out.rules {
        if !ids.insert(r.id.as_str()) {
            return Err(format!(
                "restoring the original ids gives rule id `{}` twice: the mapping does not belong to this definition",
                r.id
            ));
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn def(json: &str) -> PolicyDefinition {
        PolicyDefinition::from_json(json).unwrap()
    }

    #[test]
    fn rule_id_and_name_patterns() {
        assert!(is_aws_rule_id("A1B2C3D4E5F6"));
        assert!(is_aws_rule_id("BASEFEE00000"));
        for bad in [
            "BASE_FEE",
            "a1b2c3d4e5f6",
            "1ABCDEFGHIJK",
            "ABCDEFGHIJKLM",
            "ABC",
        ] {
            assert!(!is_aws_rule_id(bad), "{bad}");
        }
        assert!(is_aws_name("loanAmount"));
        assert!(is_aws_name("NO_DISRUPTION"));
        assert!(!is_aws_name("_x"));
        assert!(!is_aws_name("x-y"));
        assert!(!is_aws_name(""));
        assert!(!is_aws_name(&"a".repeat(65)));
        assert!(is_aws_name(&"a".repeat(64)));
    }

    #[test]
    fn rule_ids_become_readable_aws_ids() {
        let none = BTreeSet::new();
        assert_eq!(aws_rule_id("BASE_FEE", &none), "BASEFEE00000");
        assert_eq!(aws_rule_id("LOW_SEASON_FEE", &none), "LOWSEASONFEE");
        assert_eq!(aws_rule_id("REGULAR_SEASON_FEE", &none), "REGUSEASOFEE");
        assert_eq!(aws_rule_id("refundAmount", &none), "REFUNDAMOUNT");
        assert_eq!(aws_rule_id("1st-rule", &none), "R1STRULE0000");
        assert_eq!(aws_rule_id("", &none), "RULE00000000");
        assert_eq!(aws_rule_id("A1B2C3D4E5F6", &none), "A1B2C3D4E5F6");
        let taken: BTreeSet<String> = ["BASEFEE00000".to_string(), "BASEFEE00001".to_string()]
            .into_iter()
            .collect();
        assert_eq!(aws_rule_id("BASE_FEE", &taken), "BASEFEE00002");
        let long = "A_B_C_D_E_F_G_H_I_J_K_L_M_N";
        assert_eq!(aws_rule_id(long, &none), "ABCDEFGHIJKL");
        for id in ["x", "a_very_long_rule_identifier_with_words", "ÄÖÜ", "R1"] {
            assert!(is_aws_rule_id(&aws_rule_id(id, &none)), "{id}");
        }
    }

    #[test]
    fn import_issues_name_what_aws_rejects() {
        let d = def(&format!(
            r#"{{"version": "2.0",
               "types": [{{"name": "Bad-Type", "values": []}}],
               "variables": [{{"name": "x", "type": "int"}}, {{"name": "y", "type": "NUMBER", "description": "{}"}}],
               "rules": [{{"id": "R1", "expression": "(> x 0)", "alternateExpression": ""}},
                         {{"id": "A1B2C3D4E5F6", "expression": "(> x {})"}}]}}"#,
            "d".repeat(1025),
            "1".repeat(2050)
        ));
        let issues = aws_import_issues(&d);
        let rejected: Vec<&str> = issues
            .iter()
            .filter(|i| i.severity == AwsSeverity::Rejected)
            .map(|i| i.path.as_str())
            .collect();
        assert_eq!(
            rejected,
            vec![
                "types[0].name",
                "types[0].values",
                "variables[0].description",
                "variables[1].description",
                "rules[0].id",
                "rules[0].alternateExpression",
                "rules[1].expression"
            ]
        );
        let advice: Vec<&str> = issues
            .iter()
            .filter(|i| i.severity == AwsSeverity::Advice)
            .map(|i| i.path.as_str())
            .collect();
        assert_eq!(
            advice,
            vec!["version", "types[0].description", "variables[0].type"]
        );
        let id = issues.iter().find(|i| i.path == "rules[0].id").unwrap();
        assert_eq!(id.rule.as_deref(), Some("R1"));
        assert!(
            id.message.contains("exactly 12 characters"),
            "{}",
            id.message
        );
    }

    #[test]
    fn limits_are_counted() {
        let mut d = def(r#"{"rules": []}"#);
        for i in 0..=MAX_RULES {
            d.rules.push(super::super::RuleDefinition {
                id: aws_rule_id(&format!("R{i}"), &BTreeSet::new()),
                expression: "true".into(),
                ..Default::default()
            });
        }
        let issues = aws_import_issues(&d);
        assert!(issues
            .iter()
            .any(|i| i.path == "rules" && i.message.contains("at most 1500")));
    }

    #[test]
    fn export_renames_ids_and_import_restores_them() {
        let original = def(
            r#"{"types": [{"name": "T", "description": "t", "values": [{"value": "A"}]}],
               "variables": [{"name": "x", "type": "int", "description": "x"}, {"name": "b", "type": "bool"}],
               "rules": [{"id": "BASE_FEE", "expression": "(> x 0)"},
                         {"id": "A1B2C3D4E5F6", "expression": "b"},
                         {"id": "BASE-FEE", "expression": "(< x 9)", "alternateExpression": ""}]}"#,
        );
        let exported = to_aws(&original).unwrap();
        let ids: Vec<&str> = exported
            .definition
            .rules
            .iter()
            .map(|r| r.id.as_str())
            .collect();
        assert_eq!(ids, vec!["BASEFEE00000", "A1B2C3D4E5F6", "BASEFEE00001"]);
        assert_eq!(exported.definition.variables[0].type_name, "INT");
        assert_eq!(
            exported.definition.variables[1].description.as_deref(),
            Some("b")
        );
        assert_eq!(exported.notes.len(), 1);
        assert_eq!(exported.definition.version.as_deref(), Some("1.0"));
        assert!(aws_import_issues(&exported.definition)
            .iter()
            .all(|i| i.severity != AwsSeverity::Rejected));
        assert_eq!(exported.mapping.to_aws("BASE-FEE"), "BASEFEE00001");
        let json = serde_json::to_string(&exported.mapping).unwrap();
        assert!(
            json.starts_with(r#"{"ruleIds":[{"from":"BASE_FEE","to":"BASEFEE00000"}"#),
            "{json}"
        );

        let back = from_aws(&exported.definition, Some(&exported.mapping)).unwrap();
        let ids: Vec<&str> = back.rules.iter().map(|r| r.id.as_str()).collect();
        assert_eq!(ids, vec!["BASE_FEE", "A1B2C3D4E5F6", "BASE-FEE"]);
        assert_eq!(
            from_aws(&exported.definition, None).unwrap(),
            exported.definition
        );
    }

    #[test]
    fn export_refuses_what_only_an_author_can_fix() {
        let d = def(r#"{"variables": [{"name": "bad name", "type": "INT", "description": "d"}]}"#);
        let err = to_aws(&d).unwrap_err();
        assert_eq!(err.len(), 1);
        assert!(
            err[0].message.contains("`bad name` is not an AWS name"),
            "{}",
            err[0].message
        );
    }

    #[test]
    fn a_mapping_from_another_policy_is_refused() {
        let d = def(
            r#"{"variables": [{"name": "b", "type": "BOOL", "description": "d"}],
            "rules": [{"id": "AAAAAAAAAAAA", "expression": "b"}, {"id": "BBBBBBBBBBBB", "expression": "b"}]}"#,
        );
        let mapping = RuleIdMapping {
            rule_ids: vec![RuleIdChange {
                from: "BBBBBBBBBBBB".into(),
                to: "AAAAAAAAAAAA".into(),
            }],
        };
        assert!(from_aws(&d, Some(&mapping)).unwrap_err().contains("twice"));
    }
}

//! The Bedrock `AutomatedReasoningPolicyDefinition` JSON, kept field for field so that a policy
//! exported from AWS loads here and is exported unchanged.

use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha2::{Digest, Sha256};

pub use crate::findings::Extra;

/// A policy definition: custom types, variables and rules.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PolicyDefinition {
    /// The definition format version (AWS uses `"1.0"`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    /// Custom (enumerated) types.
    #[serde(default)]
    pub types: Vec<TypeDefinition>,
    /// Variables with their types and descriptions.
    #[serde(default)]
    pub variables: Vec<VariableDefinition>,
    /// Rules in SMT-LIB.
    #[serde(default)]
    pub rules: Vec<RuleDefinition>,
    /// Members not modelled by this version.
    #[serde(flatten)]
    pub extra: Extra,
}

/// A custom enumerated type.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TypeDefinition {
    /// The type's name, used as a variable's `type`.
    pub name: String,
    /// What the type stands for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// The values, each a symbol usable in expressions.
    #[serde(default)]
    pub values: Vec<TypeValue>,
    /// Members not modelled by this version.
    #[serde(flatten)]
    pub extra: Extra,
}

/// One value of a custom type.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TypeValue {
    /// The value's symbol.
    pub value: String,
    /// What it means.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Members not modelled by this version.
    #[serde(flatten)]
    pub extra: Extra,
}

/// A policy variable.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct VariableDefinition {
    /// The variable's symbol.
    pub name: String,
    /// `BOOL`, `INT`, `REAL` (any letter case) or a custom type's name.
    #[serde(rename = "type")]
    pub type_name: String,
    /// What the variable means; used for structured English and scenarios.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Members not modelled by this version.
    #[serde(flatten)]
    pub extra: Extra,
}

/// A policy rule.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RuleDefinition {
    /// The rule's identifier, cited in findings.
    pub id: String,
    /// The rule as an SMT-LIB Boolean term.
    pub expression: String,
    /// The rule in English, as written by its author.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub alternate_expression: Option<String>,
    /// Members not modelled by this version.
    #[serde(flatten)]
    pub extra: Extra,
}

/// A policy file that is not a policy definition.
#[derive(Debug, thiserror::Error)]
pub enum DefinitionJsonError {
    /// Not JSON, or JSON whose members have the wrong shape.
    #[error("not a policy definition: {0}")]
    Json(#[from] serde_json::Error),
    /// JSON without `types`, `variables` or `rules` anywhere a definition can be.
    #[error(
        "not a policy definition: no `types`, `variables` or `rules` found (top-level members: {members}); \
         expected an AutomatedReasoningPolicyDefinition, or an AWS response around one \
         (`policyDefinition`, `definition`, or `buildWorkflowAssets.policyDefinition`)"
    )]
    NoDefinition {
        /// The top-level members the file has, for the message.
        members: String,
    },
}

/// The members that hold a definition in what AWS returns: ExportAutomatedReasoningPolicyVersion
/// (`policyDefinition`), GetAutomatedReasoningPolicyBuildWorkflowResultAssets
/// (`buildWorkflowAssets.policyDefinition`), and older tools (`definition`).
const WRAPPERS: [&str; 3] = ["policyDefinition", "definition", "buildWorkflowAssets"];

/// The object that is the definition: `value` itself when it has a definition member, else
/// the first wrapper member (at most three levels down) that holds one.
fn find_definition(value: &Value, depth: usize) -> Option<&Value> {
    let map = value.as_object()?;
    if ["types", "variables", "rules"]
        .iter()
        .any(|k| map.contains_key(*k))
    {
        return Some(value);
    }
    if depth == 0 {
        return None;
    }
    WRAPPERS
        .iter()
        .filter_map(|k| map.get(*k))
        .find_map(|v| find_definition(v, depth - 1))
}

impl PolicyDefinition {
    /// Reads a definition from JSON: the definition object itself, or any AWS response that
    /// wraps one (export, build-workflow result assets). JSON with no `types`, `variables` or
    /// `rules` anywhere is an error, never an empty policy.
    pub fn from_json(text: &str) -> Result<PolicyDefinition, DefinitionJsonError> {
        // Read refusing a key written twice: serde_json keeps the last, so a file with two
        // `rules` arrays lost the first without a word (and the server's API, reading JSON
        // its own way, refused the same file).
        let value: Value = crate::audit::strict_json::value_from_str(text)?;
        let Some(inner) = find_definition(&value, 3) else {
            let members = match &value {
                Value::Object(map) if map.is_empty() => "none".to_string(),
                Value::Object(map) => map
                    .keys()
                    .map(|k| format!("`{k}`"))
                    .collect::<Vec<_>>()
                    .join(", "),
                _ => "none, it is not a JSON object".to_string(),
            };
            return Err(DefinitionJsonError::NoDefinition { members });
        };
        Ok(serde_json::from_value(inner.clone())?)
    }

    /// The definition as JSON, exactly the members it was read with.
    pub fn to_json_pretty(&self) -> String {
        // Serializing plain data with string keys cannot fail.
        serde_json::to_string_pretty(self).unwrap_or_default()
    }

    /// `sha256:<hex>` of the canonical JSON (object keys sorted, no whitespace): a stable
    /// identifier for this exact policy version when it has no ARN.
    pub fn content_hash(&self) -> String {
        let value = serde_json::to_value(self).unwrap_or(Value::Null);
        let mut canonical = String::new();
        write_canonical(&value, &mut canonical);
        let digest = Sha256::digest(canonical.as_bytes());
        let hex: String = digest.iter().map(|b| format!("{b:02x}")).collect();
        format!("sha256:{hex}")
    }

    /// An ARN-shaped name for this exact version, for where AWS's `policyVersionArn` pattern
    /// is expected and no real ARN is configured: region `local`, account `000000000000`, and
    /// the first 12 hex digits of [`content_hash`](Self::content_hash) as the policy id.
    pub fn local_version_arn(&self) -> String {
        let hash = self.content_hash();
        let id = hash
            .trim_start_matches("sha256:")
            .get(..12)
            .unwrap_or("000000000000");
        format!("arn:aws:bedrock:local:000000000000:automated-reasoning-policy/{id}")
    }
}

fn write_canonical(value: &Value, out: &mut String) {
    match value {
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            out.push('{');
            for (i, k) in keys.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(&Value::String(k.clone()).to_string());
                out.push(':');
                write_canonical(&map[k], out);
            }
            out.push('}');
        }
        Value::Array(items) => {
            out.push('[');
            for (i, v) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_canonical(v, out);
            }
            out.push(']');
        }
        other => out.push_str(&other.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_written_twice_is_refused_not_half_read() {
        // Two `rules` arrays: serde_json kept the second, and the first was gone unnoticed.
        let e = PolicyDefinition::from_json(
            r#"{"variables":[{"name":"x","type":"BOOL","type":"INT"}],
                "rules":[{"id":"A","expression":"x"}],"rules":[]}"#,
        )
        .unwrap_err();
        assert!(e.to_string().contains("appears twice"), "{e}");
    }

    const SMALL: &str = r#"{"version":"1.0","types":[{"name":"Color","values":[{"value":"RED"}]}],
      "variables":[{"name":"x","type":"int","description":"x","futureField":1}],
      "rules":[{"id":"R1","expression":"(> x 0)","alternateExpression":"x is positive"}],
      "futureTop":{"a":1}}"#;

    #[test]
    fn round_trips_unknown_members() {
        let def = PolicyDefinition::from_json(SMALL).unwrap();
        let back: Value = serde_json::from_str(&def.to_json_pretty()).unwrap();
        let orig: Value = serde_json::from_str(SMALL).unwrap();
        assert_eq!(back, orig);
    }

    #[test]
    fn accepts_the_export_wrapper() {
        let wrapped = format!(r#"{{"policyDefinition": {SMALL}}}"#);
        assert_eq!(
            PolicyDefinition::from_json(&wrapped).unwrap(),
            PolicyDefinition::from_json(SMALL).unwrap()
        );
    }

    #[test]
    fn hash_ignores_key_order_and_whitespace() {
        let a = PolicyDefinition::from_json(SMALL).unwrap();
        let b = PolicyDefinition::from_json(
            r#"{"rules":[{"alternateExpression":"x is positive","expression":"(> x 0)","id":"R1"}],
            "futureTop":{"a":1}, "variables":[{"futureField":1,"description":"x","type":"int","name":"x"}],
            "types":[{"values":[{"value":"RED"}],"name":"Color"}],"version":"1.0"}"#,
        )
        .unwrap();
        assert_eq!(a.content_hash(), b.content_hash());
        assert!(a.content_hash().starts_with("sha256:"));
        assert_eq!(a.content_hash().len(), 7 + 64);
        let mut c = a.clone();
        c.rules[0].expression = "(> x 1)".into();
        assert_ne!(a.content_hash(), c.content_hash());
        let arn = a.local_version_arn();
        assert_eq!(
            arn,
            format!(
                "arn:aws:bedrock:local:000000000000:automated-reasoning-policy/{}",
                &a.content_hash()[7..19]
            )
        );
        assert_ne!(arn, c.local_version_arn());
    }

    #[test]
    fn accepts_the_build_workflow_wrapper() {
        let wrapped = format!(
            r#"{{"policyArn": "arn:aws:bedrock:us-east-1:123456789012:automated-reasoning-policy/abcdefghijkl",
                "buildWorkflowId": "b0e1c2d3-0000-4000-8000-000000000000",
                "buildWorkflowAssets": {{"policyDefinition": {SMALL}}}}}"#
        );
        assert_eq!(
            PolicyDefinition::from_json(&wrapped).unwrap(),
            PolicyDefinition::from_json(SMALL).unwrap()
        );
        let exported = format!(r#"{{"definition": {SMALL}, "name": "p"}}"#);
        assert_eq!(
            PolicyDefinition::from_json(&exported).unwrap(),
            PolicyDefinition::from_json(SMALL).unwrap()
        );
    }

    #[test]
    fn bad_json_is_an_error() {
        assert!(PolicyDefinition::from_json("{").is_err());
        assert!(PolicyDefinition::from_json(r#"{"rules": 3}"#).is_err());
    }

    #[test]
    fn json_that_is_not_a_policy_is_an_error_never_an_empty_policy() {
        let e = PolicyDefinition::from_json(r#"{"foo": 1}"#).unwrap_err();
        let text = e.to_string();
        assert!(text.starts_with("not a policy definition: no `types`, `variables` or `rules` found (top-level members: `foo`)"), "{text}");
        for not_policy in [
            "{}",
            "[]",
            "3",
            r#"{"policyDefinition": {"foo": 1}}"#,
            r#"{"buildWorkflowAssets": {"qualityReport": {}}}"#,
        ] {
            assert!(
                matches!(
                    PolicyDefinition::from_json(not_policy),
                    Err(DefinitionJsonError::NoDefinition { .. })
                ),
                "{not_policy}"
            );
        }
        // An explicitly empty definition is still a definition.
        assert!(PolicyDefinition::from_json(r#"{"rules": []}"#).is_ok());
    }
}

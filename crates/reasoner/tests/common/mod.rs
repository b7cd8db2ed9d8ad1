//! What the property tests over generated policies share.

use proofgate_core::policy::{PolicyDefinition, PolicyModel};
use serde_json::json;

/// A policy with these variables (name, AWS type such as "BOOL") and these rule expressions,
/// named R0, R1, ... in order (so a cited rule's id gives back its expression).
pub fn generated_policy<'a>(
    variables: impl IntoIterator<Item = (String, &'a str)>,
    rules: &[String],
) -> PolicyModel {
    let variables: Vec<_> = variables
        .into_iter()
        .map(|(name, ty)| json!({"name": name, "type": ty, "description": format!("{name}")}))
        .collect();
    let rules: Vec<_> = rules
        .iter()
        .enumerate()
        .map(|(i, e)| json!({"id": format!("R{i}"), "expression": e}))
        .collect();
    let def = json!({"variables": variables, "rules": rules});
    PolicyModel::from_definition(PolicyDefinition::from_json(&def.to_string()).unwrap(), None)
        .unwrap()
}

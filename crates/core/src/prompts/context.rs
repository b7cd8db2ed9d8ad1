//! The slice of a policy the prompts show the LLM: rules in English and variable descriptions.
//!
//! Deliberately small and independent of [`crate::policy`]: the proxy converts a full policy
//! model into this, and a JavaScript app can write it by hand.

use serde::{Deserialize, Serialize};

/// The policy as the rewriting LLM sees it.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PolicyContext {
    /// The policy's rules, in policy order.
    #[serde(default)]
    pub rules: Vec<PolicyRuleText>,
    /// The policy's variables with what they mean.
    #[serde(default)]
    pub variables: Vec<PolicyVariableText>,
}

/// One rule: its id, its SMT-LIB expression and its English form.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PolicyRuleText {
    /// The rule id, as findings reference it (`supportingRules[].identifier`).
    pub id: String,
    /// The rule in SMT-LIB syntax.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub expression: String,
    /// The rule in English (Bedrock's `alternateExpression`), if known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub english: Option<String>,
}

/// One variable: its name in the logic and what it means.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PolicyVariableText {
    /// The variable name as it appears in SMT-LIB.
    pub name: String,
    /// What the variable means, in natural language.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub description: String,
}

impl PolicyContext {
    /// Whether there is nothing to show.
    pub fn is_empty(&self) -> bool {
        self.rules.is_empty() && self.variables.is_empty()
    }

    /// The rule with this id, if the context has it.
    pub fn rule(&self, id: &str) -> Option<&PolicyRuleText> {
        self.rules.iter().find(|r| r.id == id)
    }

    /// The variable with this name, if the context has it.
    pub fn variable(&self, name: &str) -> Option<&PolicyVariableText> {
        self.variables.iter().find(|v| v.name == name)
    }
}

impl PolicyRuleText {
    /// The most readable form: English, falling back to the expression, then the id.
    pub fn readable(&self) -> &str {
        self.english
            .as_deref()
            .filter(|s| !s.trim().is_empty())
            .or_else(|| Some(self.expression.as_str()).filter(|s| !s.trim().is_empty()))
            .unwrap_or(&self.id)
    }
}

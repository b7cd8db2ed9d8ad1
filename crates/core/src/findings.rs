//! The Automated Reasoning finding union, field for field as Amazon Bedrock's ApplyGuardrail
//! returns it (`assessments[].automatedReasoningPolicy.findings[]`).
//!
//! Every struct keeps members it does not know in `extra`, so an AWS response body
//! deserializes and re-serializes unchanged even when AWS adds fields. A finding *kind* this
//! version does not know becomes [`Finding::Unknown`], which is never treated as VALID.

use serde::de::{self, Deserializer};
use serde::ser::{SerializeMap, Serializer};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use std::fmt;
use std::str::FromStr;

/// Members of an object this version does not model, kept verbatim for round-tripping.
pub type Extra = Map<String, Value>;

/// One logical statement: SMT-LIB `logic` and its `naturalLanguage` rendering.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Statement {
    /// The statement in SMT-LIB syntax over the policy's variables.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub logic: Option<String>,
    /// The statement in natural language.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub natural_language: Option<String>,
    /// Members not modelled by this version.
    #[serde(flatten)]
    pub extra: Extra,
}

impl Statement {
    /// A statement with both forms set.
    pub fn new(logic: impl Into<String>, natural_language: impl Into<String>) -> Self {
        Statement {
            logic: Some(logic.into()),
            natural_language: Some(natural_language.into()),
            extra: Extra::new(),
        }
    }

    /// The text to show a person: natural language, falling back to the logic.
    pub fn display_text(&self) -> &str {
        self.natural_language
            .as_deref()
            .filter(|s| !s.trim().is_empty())
            .or(self.logic.as_deref())
            .unwrap_or("")
    }
}

/// A span of input text that could not be translated into logic.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct InputTextReference {
    /// The untranslated text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    /// Members not modelled by this version.
    #[serde(flatten)]
    pub extra: Extra,
}

/// The logical translation of a question/answer pair.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Translation {
    /// Facts given (by the question or assumed by the answer).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub premises: Option<Vec<Statement>>,
    /// Statements being checked against the premises.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub claims: Option<Vec<Statement>>,
    /// Premise text outside the policy's vocabulary.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub untranslated_premises: Option<Vec<InputTextReference>>,
    /// Claim text outside the policy's vocabulary.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub untranslated_claims: Option<Vec<InputTextReference>>,
    /// Share of redundant translators that agreed on this translation (0..=1). Kept as a JSON
    /// number so `1` and `1.0` both round-trip exactly.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub confidence: Option<serde_json::Number>,
    /// Members not modelled by this version.
    #[serde(flatten)]
    pub extra: Extra,
}

impl Translation {
    /// The premises, empty when absent.
    pub fn premises(&self) -> &[Statement] {
        self.premises.as_deref().unwrap_or(&[])
    }
    /// The claims, empty when absent.
    pub fn claims(&self) -> &[Statement] {
        self.claims.as_deref().unwrap_or(&[])
    }
    /// The confidence as a float, if present and finite.
    pub fn confidence(&self) -> Option<f64> {
        self.confidence.as_ref().and_then(|n| n.as_f64())
    }
}

/// A variable assignment: a list of statements `(= var value)`.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Scenario {
    /// The assignments that make up the scenario.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub statements: Option<Vec<Statement>>,
    /// Members not modelled by this version.
    #[serde(flatten)]
    pub extra: Extra,
}

impl Scenario {
    /// The statements, empty when absent.
    pub fn statements(&self) -> &[Statement] {
        self.statements.as_deref().unwrap_or(&[])
    }
}

/// A reference to a policy rule.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Rule {
    /// The rule id inside the policy.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub identifier: Option<String>,
    /// The ARN (or local hash) of the policy version the rule belongs to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub policy_version_arn: Option<String>,
    /// Members not modelled by this version.
    #[serde(flatten)]
    pub extra: Extra,
}

impl Rule {
    /// A rule reference by id within a policy version.
    pub fn new(identifier: impl Into<String>, policy_version_arn: impl Into<String>) -> Self {
        Rule {
            identifier: Some(identifier.into()),
            policy_version_arn: Some(policy_version_arn.into()),
            extra: Extra::new(),
        }
    }
}

/// Whether a logic warning says the statements are always true or always false.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LogicWarningType {
    /// The statements hold whatever the variables are (they say nothing).
    AlwaysTrue,
    /// The statements can never hold.
    AlwaysFalse,
    /// A type this version does not know, kept verbatim.
    Other(String),
}

impl LogicWarningType {
    /// The AWS spelling.
    pub fn as_str(&self) -> &str {
        match self {
            LogicWarningType::AlwaysTrue => "ALWAYS_TRUE",
            LogicWarningType::AlwaysFalse => "ALWAYS_FALSE",
            LogicWarningType::Other(s) => s,
        }
    }
}

impl Serialize for LogicWarningType {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for LogicWarningType {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        Ok(match s.as_str() {
            "ALWAYS_TRUE" => LogicWarningType::AlwaysTrue,
            "ALWAYS_FALSE" => LogicWarningType::AlwaysFalse,
            _ => LogicWarningType::Other(s),
        })
    }
}

/// Premises or claims that are always true or always false regardless of the policy.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LogicWarning {
    /// ALWAYS_TRUE or ALWAYS_FALSE.
    #[serde(default, rename = "type", skip_serializing_if = "Option::is_none")]
    pub warning_type: Option<LogicWarningType>,
    /// The premises the warning is about.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub premises: Option<Vec<Statement>>,
    /// The claims the warning is about.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub claims: Option<Vec<Statement>>,
    /// Members not modelled by this version.
    #[serde(flatten)]
    pub extra: Extra,
}

/// The claims follow from the premises and the policy.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ValidFinding {
    /// What was checked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub translation: Option<Translation>,
    /// An assignment where premises and claims hold.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub claims_true_scenario: Option<Scenario>,
    /// Rules sufficient for the entailment.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub supporting_rules: Option<Vec<Rule>>,
    /// Premises or claims that hold or fail regardless of the policy.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub logic_warning: Option<LogicWarning>,
    /// Members not modelled by this version.
    #[serde(flatten)]
    pub extra: Extra,
}

/// The claims contradict the policy given the premises (INVALID), or the premises contradict
/// the policy (IMPOSSIBLE). Both carry the same members.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ContradictionFinding {
    /// What was checked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub translation: Option<Translation>,
    /// Rules that, with the premises, rule out the claims (or the premises).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub contradicting_rules: Option<Vec<Rule>>,
    /// Premises or claims that hold or fail regardless of the policy.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub logic_warning: Option<LogicWarning>,
    /// Members not modelled by this version.
    #[serde(flatten)]
    pub extra: Extra,
}

/// The claims can be true or false given the premises: both scenarios exist.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SatisfiableFinding {
    /// What was checked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub translation: Option<Translation>,
    /// An assignment where premises and claims hold.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub claims_true_scenario: Option<Scenario>,
    /// An assignment where the premises hold and the claims fail.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub claims_false_scenario: Option<Scenario>,
    /// Premises or claims that hold or fail regardless of the policy.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub logic_warning: Option<LogicWarning>,
    /// Members not modelled by this version.
    #[serde(flatten)]
    pub extra: Extra,
}

/// One competing interpretation in a TRANSLATION_AMBIGUOUS finding.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TranslationOption {
    /// The translations that make up this interpretation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub translations: Option<Vec<Translation>>,
    /// Members not modelled by this version.
    #[serde(flatten)]
    pub extra: Extra,
}

/// Translators disagreed about what the text means.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TranslationAmbiguousFinding {
    /// The competing interpretations.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub options: Option<Vec<TranslationOption>>,
    /// Assignments that satisfy one interpretation and not another.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub difference_scenarios: Option<Vec<Scenario>>,
    /// Members not modelled by this version.
    #[serde(flatten)]
    pub extra: Extra,
}

/// A finding with no feedback members (TOO_COMPLEX, NO_TRANSLATIONS).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct EmptyFinding {
    /// Members not modelled by this version.
    #[serde(flatten)]
    pub extra: Extra,
}

/// One Automated Reasoning finding: exactly one member of the AWS union.
#[derive(Debug, Clone, PartialEq)]
pub enum Finding {
    /// `valid`: the claims are proved by the premises and the policy.
    Valid(ValidFinding),
    /// `invalid`: the claims contradict the policy given the premises.
    Invalid(ContradictionFinding),
    /// `satisfiable`: the claims may or may not hold.
    Satisfiable(SatisfiableFinding),
    /// `impossible`: the premises contradict the policy.
    Impossible(ContradictionFinding),
    /// `translationAmbiguous`: translators disagreed.
    TranslationAmbiguous(TranslationAmbiguousFinding),
    /// `tooComplex`: over limits, or the solver gave up.
    TooComplex(EmptyFinding),
    /// `noTranslations`: nothing could be put into the policy's vocabulary.
    NoTranslations(EmptyFinding),
    /// A member this version does not know. Never VALID.
    Unknown {
        /// The JSON member name, as received.
        member: String,
        /// The member's value, verbatim.
        body: Value,
    },
}

/// The kind of a finding, in AWS's upper-case spelling.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum FindingKind {
    /// VALID
    Valid,
    /// INVALID
    Invalid,
    /// SATISFIABLE
    Satisfiable,
    /// IMPOSSIBLE
    Impossible,
    /// TRANSLATION_AMBIGUOUS
    TranslationAmbiguous,
    /// TOO_COMPLEX
    TooComplex,
    /// NO_TRANSLATIONS
    NoTranslations,
    /// A kind this version does not know.
    Unknown,
}

impl FindingKind {
    /// Every kind, for iteration in tests and UIs.
    pub const ALL: [FindingKind; 8] = [
        FindingKind::Valid,
        FindingKind::Invalid,
        FindingKind::Satisfiable,
        FindingKind::Impossible,
        FindingKind::TranslationAmbiguous,
        FindingKind::TooComplex,
        FindingKind::NoTranslations,
        FindingKind::Unknown,
    ];

    /// Upper-case name as used in AWS documentation and prompts.
    pub fn as_str(self) -> &'static str {
        match self {
            FindingKind::Valid => "VALID",
            FindingKind::Invalid => "INVALID",
            FindingKind::Satisfiable => "SATISFIABLE",
            FindingKind::Impossible => "IMPOSSIBLE",
            FindingKind::TranslationAmbiguous => "TRANSLATION_AMBIGUOUS",
            FindingKind::TooComplex => "TOO_COMPLEX",
            FindingKind::NoTranslations => "NO_TRANSLATIONS",
            FindingKind::Unknown => "UNKNOWN",
        }
    }

    /// The member name in the JSON union (`translationAmbiguous`, ...).
    pub fn member_name(self) -> &'static str {
        match self {
            FindingKind::Valid => "valid",
            FindingKind::Invalid => "invalid",
            FindingKind::Satisfiable => "satisfiable",
            FindingKind::Impossible => "impossible",
            FindingKind::TranslationAmbiguous => "translationAmbiguous",
            FindingKind::TooComplex => "tooComplex",
            FindingKind::NoTranslations => "noTranslations",
            FindingKind::Unknown => "unknown",
        }
    }

    /// Rewriting priority: lower is handled first. TRANSLATION_AMBIGUOUS, unknown kinds,
    /// IMPOSSIBLE, INVALID, SATISFIABLE, TOO_COMPLEX, NO_TRANSLATIONS, VALID.
    pub fn priority(self) -> u8 {
        match self {
            FindingKind::TranslationAmbiguous => 0,
            FindingKind::Unknown => 1,
            FindingKind::Impossible => 2,
            FindingKind::Invalid => 3,
            FindingKind::Satisfiable => 4,
            FindingKind::TooComplex => 5,
            FindingKind::NoTranslations => 6,
            FindingKind::Valid => 7,
        }
    }

    /// Whether the rewriting LLM may answer this finding with follow-up questions to the user.
    pub fn allows_follow_up_questions(self) -> bool {
        matches!(
            self,
            FindingKind::TranslationAmbiguous | FindingKind::Satisfiable
        )
    }
}

impl fmt::Display for FindingKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A kind name that is not one of the known spellings.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown finding kind {0:?}: expected one of VALID, INVALID, SATISFIABLE, IMPOSSIBLE, TRANSLATION_AMBIGUOUS, TOO_COMPLEX, NO_TRANSLATIONS")]
pub struct UnknownFindingKind(pub String);

impl FromStr for FindingKind {
    type Err = UnknownFindingKind;

    /// Accepts the upper-case names (`NO_TRANSLATION` and `NO_TRANSLATIONS` alike), the JSON
    /// member names, in any letter case.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let norm: String = s
            .trim()
            .chars()
            .filter(|c| *c != '_' && *c != '-' && *c != ' ')
            .flat_map(char::to_lowercase)
            .collect();
        Ok(match norm.as_str() {
            "valid" => FindingKind::Valid,
            "invalid" => FindingKind::Invalid,
            "satisfiable" => FindingKind::Satisfiable,
            "impossible" => FindingKind::Impossible,
            "translationambiguous" => FindingKind::TranslationAmbiguous,
            "toocomplex" => FindingKind::TooComplex,
            "notranslation" | "notranslations" => FindingKind::NoTranslations,
            _ => return Err(UnknownFindingKind(s.to_string())),
        })
    }
}

impl Finding {
    /// The finding's kind.
    pub fn kind(&self) -> FindingKind {
        match self {
            Finding::Valid(_) => FindingKind::Valid,
            Finding::Invalid(_) => FindingKind::Invalid,
            Finding::Satisfiable(_) => FindingKind::Satisfiable,
            Finding::Impossible(_) => FindingKind::Impossible,
            Finding::TranslationAmbiguous(_) => FindingKind::TranslationAmbiguous,
            Finding::TooComplex(_) => FindingKind::TooComplex,
            Finding::NoTranslations(_) => FindingKind::NoTranslations,
            Finding::Unknown { .. } => FindingKind::Unknown,
        }
    }

    /// The translation the finding is about, for kinds that carry one.
    pub fn translation(&self) -> Option<&Translation> {
        match self {
            Finding::Valid(f) => f.translation.as_ref(),
            Finding::Invalid(f) | Finding::Impossible(f) => f.translation.as_ref(),
            Finding::Satisfiable(f) => f.translation.as_ref(),
            _ => None,
        }
    }

    /// The logic warning, for kinds that carry one.
    pub fn logic_warning(&self) -> Option<&LogicWarning> {
        match self {
            Finding::Valid(f) => f.logic_warning.as_ref(),
            Finding::Invalid(f) | Finding::Impossible(f) => f.logic_warning.as_ref(),
            Finding::Satisfiable(f) => f.logic_warning.as_ref(),
            _ => None,
        }
    }

    /// The rules the finding cites: a VALID's supporting rules, an INVALID's or IMPOSSIBLE's
    /// contradicting rules (other kinds cite none).
    pub fn cited_rules(&self) -> &[Rule] {
        match self {
            Finding::Valid(f) => f.supporting_rules.as_deref(),
            Finding::Invalid(f) | Finding::Impossible(f) => f.contradicting_rules.as_deref(),
            _ => None,
        }
        .unwrap_or_default()
    }

    /// Whether the rewriting LLM may answer this finding with follow-up questions.
    pub fn allows_follow_up_questions(&self) -> bool {
        self.kind().allows_follow_up_questions()
    }
}

impl Serialize for Finding {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut map = s.serialize_map(Some(1))?;
        let member = self.kind().member_name();
        match self {
            Finding::Valid(f) => map.serialize_entry(member, f)?,
            Finding::Invalid(f) | Finding::Impossible(f) => map.serialize_entry(member, f)?,
            Finding::Satisfiable(f) => map.serialize_entry(member, f)?,
            Finding::TranslationAmbiguous(f) => map.serialize_entry(member, f)?,
            Finding::TooComplex(f) | Finding::NoTranslations(f) => {
                map.serialize_entry(member, f)?
            }
            Finding::Unknown { member, body } => map.serialize_entry(member, body)?,
        }
        map.end()
    }
}

impl<'de> Deserialize<'de> for Finding {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        // Read in one pass: the member's body goes straight into its type. (Reading the
        // object into a map first copied every finding read from a JSON tree, a trail's or an
        // ApplyGuardrail response's, before reading it again.)
        d.deserialize_map(FindingVisitor)
    }
}

/// The error for an object that is not exactly one member.
fn not_one_member<E: de::Error>(members: &[String]) -> E {
    E::custom(format!(
        "a finding must have exactly one member (valid, invalid, satisfiable, impossible, \
         translationAmbiguous, tooComplex, noTranslations); found {}",
        if members.is_empty() {
            "none".to_string()
        } else {
            members.join(", ")
        }
    ))
}

struct FindingVisitor;

impl<'de> de::Visitor<'de> for FindingVisitor {
    type Value = Finding;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a finding: an object with exactly one member")
    }

    fn visit_map<A: de::MapAccess<'de>>(self, mut map: A) -> Result<Finding, A::Error> {
        let Some(member) = map.next_key::<String>()? else {
            return Err(not_one_member(&[]));
        };
        fn parse<'de, T: Deserialize<'de>, A: de::MapAccess<'de>>(
            map: &mut A,
            member: &str,
        ) -> Result<T, A::Error> {
            map.next_value()
                .map_err(|e| de::Error::custom(format!("in finding member `{member}`: {e}")))
        }
        let finding = match member.as_str() {
            "valid" => Finding::Valid(parse(&mut map, &member)?),
            "invalid" => Finding::Invalid(parse(&mut map, &member)?),
            "satisfiable" => Finding::Satisfiable(parse(&mut map, &member)?),
            "impossible" => Finding::Impossible(parse(&mut map, &member)?),
            "translationAmbiguous" => Finding::TranslationAmbiguous(parse(&mut map, &member)?),
            "tooComplex" => Finding::TooComplex(parse(&mut map, &member)?),
            // Some SDK versions and docs spell the member in the singular.
            "noTranslations" | "noTranslation" => {
                Finding::NoTranslations(parse(&mut map, &member)?)
            }
            _ => Finding::Unknown {
                body: map.next_value()?,
                member: member.clone(),
            },
        };
        // Any other member makes it no finding at all, whatever the first one was.
        if let Some(next) = map.next_key::<String>()? {
            let mut members = vec![member, next];
            map.next_value::<de::IgnoredAny>()?;
            while let Some(more) = map.next_key::<String>()? {
                map.next_value::<de::IgnoredAny>()?;
                members.push(more);
            }
            return Err(not_one_member(&members));
        }
        Ok(finding)
    }
}

/// The Automated Reasoning part of one guardrail assessment.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AutomatedReasoningPolicyAssessment {
    /// The findings, one per premise/claim pair found in the content.
    #[serde(default)]
    pub findings: Vec<Finding>,
    /// Members not modelled by this version.
    #[serde(flatten)]
    pub extra: Extra,
}

/// One entry of `assessments[]` in an ApplyGuardrail response.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GuardrailAssessment {
    /// The Automated Reasoning policy results, if the guardrail has such a policy.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub automated_reasoning_policy: Option<AutomatedReasoningPolicyAssessment>,
    /// Other policies' results (topic, content, ...) and metrics, verbatim.
    #[serde(flatten)]
    pub extra: Extra,
}

/// The body of an ApplyGuardrail response, as far as proofgate reads it.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ApplyGuardrailResponse {
    /// One assessment per guardrail policy evaluation.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub assessments: Vec<GuardrailAssessment>,
    /// `action`, `outputs`, `usage`, ... verbatim.
    #[serde(flatten)]
    pub extra: Extra,
}

impl ApplyGuardrailResponse {
    /// Every Automated Reasoning finding from every assessment, in order.
    pub fn findings(&self) -> Vec<Finding> {
        self.assessments
            .iter()
            .filter_map(|a| a.automated_reasoning_policy.as_ref())
            .flat_map(|p| p.findings.iter().cloned())
            .collect()
    }
}

#[cfg(test)]
mod one_pass_tests {
    use super::*;
    use serde_json::json;

    /// How findings were read before the one-pass visitor: the object into a map, then the
    /// member's body into its type. The visitor must read every finding to the same value.
    fn two_pass(v: &Value) -> Result<Finding, String> {
        let map = Map::<String, Value>::deserialize(v).map_err(|e| e.to_string())?;
        if map.len() != 1 {
            return Err("not one member".into());
        }
        let (member, body) = map.into_iter().next().unwrap();
        fn typed<T: serde::de::DeserializeOwned>(body: Value) -> Result<T, String> {
            serde_json::from_value(body).map_err(|e| e.to_string())
        }
        Ok(match member.as_str() {
            "valid" => Finding::Valid(typed(body)?),
            "invalid" => Finding::Invalid(typed(body)?),
            "satisfiable" => Finding::Satisfiable(typed(body)?),
            "impossible" => Finding::Impossible(typed(body)?),
            "translationAmbiguous" => Finding::TranslationAmbiguous(typed(body)?),
            "tooComplex" => Finding::TooComplex(typed(body)?),
            "noTranslations" | "noTranslation" => Finding::NoTranslations(typed(body)?),
            _ => Finding::Unknown { member, body },
        })
    }

    /// Every `findings` array in the fixtures: ApplyGuardrail responses and trails.
    fn fixture_findings() -> Vec<Value> {
        fn walk(v: &Value, out: &mut Vec<Value>) {
            match v {
                Value::Object(map) => {
                    for (k, v) in map {
                        match (k.as_str(), v) {
                            ("findings", Value::Array(items)) => out.extend(items.iter().cloned()),
                            _ => walk(v, out),
                        }
                    }
                }
                Value::Array(items) => items.iter().for_each(|i| walk(i, out)),
                _ => {}
            }
        }
        let mut out = Vec::new();
        for text in [
            include_str!("../tests/fixtures/apply-guardrail-all-findings.json"),
            include_str!("../tests/fixtures/park-local-bundle.json"),
            include_str!("../tests/fixtures/trails-v1.json"),
            include_str!("../../wasm/tests/fixtures/replay-cases.json"),
        ] {
            walk(&serde_json::from_str(text).unwrap(), &mut out);
        }
        out
    }

    #[test]
    fn one_pass_reads_every_fixture_finding_as_two_passes_did() {
        let mut samples = fixture_findings();
        assert!(samples.len() >= 30, "{}", samples.len());
        samples.extend([
            json!({"noTranslation": {}}),
            json!({"someFutureKind": {"a": [1, 2.5, "x"]}}),
            json!({"satisfiable": {"translation": {"confidence": 1}, "newMember": true}}),
        ]);
        for v in &samples {
            let expected = two_pass(v).expect("a fixture finding reads");
            // From a JSON tree (trails, ApplyGuardrail responses) and from text.
            assert_eq!(Finding::deserialize(v).unwrap(), expected, "{v}");
            let text = serde_json::to_string(v).unwrap();
            assert_eq!(
                serde_json::from_str::<Finding>(&text).unwrap(),
                expected,
                "{v}"
            );
            // And it writes back to what it read (but the singular spelling, written plural).
            if v.get("noTranslation").is_none() {
                assert_eq!(serde_json::to_value(&expected).unwrap(), *v, "{v}");
            }
        }
    }

    #[test]
    fn an_object_of_any_other_shape_is_no_finding() {
        let err = |v: Value| Finding::deserialize(&v).unwrap_err().to_string();
        assert!(err(json!({})).ends_with("found none"), "{}", err(json!({})));
        let both = err(json!({"valid": {}, "invalid": {}}));
        assert!(both.ends_with("found valid, invalid"), "{both}");
        // An unknown kind keeps nothing either, and every member is named.
        let three = err(json!({"x": 1, "valid": {}, "y": [2]}));
        assert!(three.ends_with("found x, valid, y"), "{three}");
        let bad = err(json!({"valid": {"supportingRules": 5}}));
        assert!(bad.starts_with("in finding member `valid`: "), "{bad}");
        assert!(err(json!("valid")).contains("exactly one member"));
        assert!(err(json!([{"valid": {}}])).contains("exactly one member"));
        // Two members in text with the same name are two members, not the last one.
        let twice = serde_json::from_str::<Finding>(r#"{"valid": {}, "valid": {}}"#)
            .unwrap_err()
            .to_string();
        assert!(twice.contains("found valid, valid"), "{twice}");
    }
}

#[cfg(test)]
mod number_tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// A finding's numbers read back from its JSON exactly: a confidence of 1/11 read
        /// back one unit in the last place off with serde_json's default float reading, so a
        /// finding written to a trail or a cache did not read back as itself.
        #[test]
        fn a_confidence_reads_back_exactly(x in proptest::num::f64::NORMAL | proptest::num::f64::SUBNORMAL | proptest::num::f64::ZERO, k in 0u32..=64, n in 1u32..=64) {
            for value in [x, f64::from(k.min(n)) / f64::from(n)] {
                let finding = Finding::Valid(ValidFinding {
                    translation: Some(Translation {
                        confidence: serde_json::Number::from_f64(value),
                        ..Translation::default()
                    }),
                    ..ValidFinding::default()
                });
                let text = serde_json::to_string(&finding).unwrap();
                let back: Finding = serde_json::from_str(&text).unwrap();
                prop_assert_eq!(&back, &finding, "{}", text);
            }
        }
    }
}

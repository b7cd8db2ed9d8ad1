//! The translations input: what k translators made of one question/answer, as JSON.
//!
//! `{"translations": [T1, T2, ...]}` where each `Ti` is a list of pairs or
//! `{"pairs": [...], "untranslatedPremises": [...], "untranslatedClaims": [...]}`, a pair is
//! `{"premises": [...], "claims": [...]}`, and a statement is an SMT-LIB string or
//! `{"logic": "...", "naturalLanguage": "..."}`. Errors name the JSON path of the problem.

use crate::findings::Statement;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// One premise/claim pair as a translator wrote it.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct PairInput {
    /// The premises (facts given).
    pub premises: Vec<Statement>,
    /// The claims (what is asserted to follow).
    pub claims: Vec<Statement>,
}

/// Everything one translator produced.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct TranslatorOutput {
    /// The premise/claim pairs.
    pub pairs: Vec<PairInput>,
    /// Premise text it could not translate.
    pub untranslated_premises: Vec<String>,
    /// Claim text it could not translate.
    pub untranslated_claims: Vec<String>,
}

/// A translations document that does not have the expected shape.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum InputError {
    /// Not JSON at all.
    #[error("not valid JSON: {0}")]
    Json(String),
    /// JSON of the wrong shape at `path`.
    #[error("at {path}: {problem}")]
    Shape {
        /// Where, as a JSON path like `translations[0][1].claims[0]`.
        path: String,
        /// What was expected.
        problem: String,
    },
}

fn shape(path: &str, problem: impl Into<String>) -> InputError {
    InputError::Shape {
        path: path.to_string(),
        problem: problem.into(),
    }
}

/// Reads a translations document.
pub fn parse_translations(text: &str) -> Result<Vec<TranslatorOutput>, InputError> {
    let value: Value = serde_json::from_str(text).map_err(|e| InputError::Json(e.to_string()))?;
    let list = match &value {
        Value::Object(map) => map.get("translations").ok_or_else(|| {
            shape(
                "$",
                "expected an object with member `translations` (one entry per translator)",
            )
        })?,
        _ => return Err(shape("$", "expected an object {\"translations\": [...]}")),
    };
    let Value::Array(items) = list else {
        return Err(shape(
            "translations",
            "expected a list with one entry per translator",
        ));
    };
    items
        .iter()
        .enumerate()
        .map(|(i, t)| translator(&format!("translations[{i}]"), t))
        .collect()
}

fn translator(path: &str, v: &Value) -> Result<TranslatorOutput, InputError> {
    match v {
        Value::Array(pairs) => Ok(TranslatorOutput {
            pairs: pairs_of(path, pairs)?,
            ..Default::default()
        }),
        Value::Object(map) => {
            known_members(path, map, &["pairs", "untranslatedPremises", "untranslatedClaims"])?;
            let pairs = match map.get("pairs") {
                None | Some(Value::Null) => Vec::new(),
                Some(Value::Array(ps)) => pairs_of(&format!("{path}.pairs"), ps)?,
                Some(_) => return Err(shape(&format!("{path}.pairs"), "expected a list of pairs")),
            };
            Ok(TranslatorOutput {
                pairs,
                untranslated_premises: texts(&format!("{path}.untranslatedPremises"), map.get("untranslatedPremises"))?,
                untranslated_claims: texts(&format!("{path}.untranslatedClaims"), map.get("untranslatedClaims"))?,
            })
        }
        _ => Err(shape(path, "expected a list of pairs or an object {\"pairs\": [...], \"untranslatedPremises\": [...], \"untranslatedClaims\": [...]}")),
    }
}

fn known_members(
    path: &str,
    map: &serde_json::Map<String, Value>,
    known: &[&str],
) -> Result<(), InputError> {
    match map.keys().find(|k| !known.contains(&k.as_str())) {
        Some(k) => Err(shape(
            path,
            format!("unknown member `{k}` (expected {})", known.join(", ")),
        )),
        None => Ok(()),
    }
}

fn pairs_of(path: &str, pairs: &[Value]) -> Result<Vec<PairInput>, InputError> {
    pairs
        .iter()
        .enumerate()
        .map(|(j, p)| {
            let path = format!("{path}[{j}]");
            let Value::Object(map) = p else {
                return Err(shape(
                    &path,
                    "expected a pair {\"premises\": [...], \"claims\": [...]}",
                ));
            };
            known_members(&path, map, &["premises", "claims"])?;
            Ok(PairInput {
                premises: statements(&format!("{path}.premises"), map.get("premises"))?,
                claims: statements(&format!("{path}.claims"), map.get("claims"))?,
            })
        })
        .collect()
}

fn statements(path: &str, v: Option<&Value>) -> Result<Vec<Statement>, InputError> {
    let items = match v {
        None | Some(Value::Null) => return Ok(Vec::new()),
        Some(Value::Array(items)) => items,
        Some(_) => return Err(shape(path, "expected a list of statements")),
    };
    items
        .iter()
        .enumerate()
        .map(|(k, s)| {
            let path = format!("{path}[{k}]");
            match s {
                Value::String(logic) => Ok(Statement {
                    logic: Some(logic.clone()),
                    ..Default::default()
                }),
                Value::Object(map) => {
                    known_members(&path, map, &["logic", "naturalLanguage"])?;
                    let logic = match map.get("logic") {
                        Some(Value::String(l)) => l.clone(),
                        _ => return Err(shape(&path, "`logic` must be an SMT-LIB string")),
                    };
                    let natural_language = match map.get("naturalLanguage") {
                        None | Some(Value::Null) => None,
                        Some(Value::String(n)) => Some(n.clone()),
                        Some(_) => return Err(shape(&path, "`naturalLanguage` must be a string")),
                    };
                    Ok(Statement {
                        logic: Some(logic),
                        natural_language,
                        ..Default::default()
                    })
                }
                _ => Err(shape(
                    &path,
                    "expected an SMT-LIB string or {\"logic\": ..., \"naturalLanguage\": ...}",
                )),
            }
        })
        .collect()
}

fn texts(path: &str, v: Option<&Value>) -> Result<Vec<String>, InputError> {
    match v {
        None | Some(Value::Null) => Ok(Vec::new()),
        Some(Value::Array(items)) => items
            .iter()
            .enumerate()
            .map(|(k, t)| match t {
                Value::String(s) => Ok(s.clone()),
                Value::Object(map) => match map.get("text") {
                    Some(Value::String(s)) => Ok(s.clone()),
                    _ => Err(shape(
                        &format!("{path}[{k}]"),
                        "expected a string or {\"text\": ...}",
                    )),
                },
                _ => Err(shape(&format!("{path}[{k}]"), "expected a string")),
            })
            .collect(),
        Some(_) => Err(shape(path, "expected a list of strings")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_both_translator_shapes_and_statement_shapes() {
        let t = parse_translations(
            r#"{"translations": [
              [{"premises": ["(> x 1)"], "claims": [{"logic": "b", "naturalLanguage": "B"}]}],
              {"pairs": [], "untranslatedPremises": ["the weather"], "untranslatedClaims": [{"text": "fun"}]}
            ]}"#,
        )
        .unwrap();
        assert_eq!(t.len(), 2);
        assert_eq!(t[0].pairs[0].premises[0].logic.as_deref(), Some("(> x 1)"));
        assert_eq!(
            t[0].pairs[0].claims[0].natural_language.as_deref(),
            Some("B")
        );
        assert_eq!(t[1].untranslated_premises, vec!["the weather"]);
        assert_eq!(t[1].untranslated_claims, vec!["fun"]);
    }

    #[test]
    fn errors_name_the_path() {
        let e = parse_translations(r#"{"translations": [[{"premises": [3]}]]}"#).unwrap_err();
        assert_eq!(e.to_string(), "at translations[0][0].premises[0]: expected an SMT-LIB string or {\"logic\": ..., \"naturalLanguage\": ...}");
        let e = parse_translations(r#"{"translations": [[{"premisses": []}]]}"#).unwrap_err();
        assert!(e.to_string().contains("unknown member `premisses`"), "{e}");
        let e = parse_translations("{").unwrap_err();
        assert!(e.to_string().starts_with("not valid JSON"), "{e}");
        let e = parse_translations("[]").unwrap_err();
        assert!(e.to_string().starts_with("at $"), "{e}");
    }
}

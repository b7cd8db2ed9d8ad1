//! Translation of a question/answer into the policy's logic by k LLM translators (paper,
//! section 3.2), with syntax and type errors sent back for repair, bounded.

use crate::llm::{ChatMessage, LlmClient, LlmError};
use proofgate_core::policy::PolicyModel;
use proofgate_reasoner::{parse_translations, TranslatorOutput};
use std::fmt::Write;

/// Why translation failed as a whole.
#[derive(Debug, thiserror::Error)]
pub enum TranslateError {
    /// Every translator's endpoint failed.
    #[error("no translator answered: {0}")]
    Unavailable(#[from] LlmError),
}

/// The prompt that asks one translator for premise/claim pairs in the policy's vocabulary.
pub fn translator_prompt(model: &PolicyModel, question: &str, answer: &str) -> String {
    let def = model.definition();
    let mut p = String::from(
        "You translate a question and its answer into logic over the variables of a policy, \
         for an automated reasoning check.\n\n",
    );
    if !def.types.is_empty() {
        p.push_str("Types (enumerations):\n");
        for t in &def.types {
            let values: Vec<String> = t
                .values
                .iter()
                .map(|v| match &v.description {
                    Some(d) if !d.is_empty() => format!("{} ({d})", v.value),
                    _ => v.value.clone(),
                })
                .collect();
            let _ = writeln!(
                p,
                "- {}: {}. Values: {}",
                t.name,
                t.description.as_deref().unwrap_or(""),
                values.join(", ")
            );
        }
        p.push('\n');
    }
    p.push_str("Variables:\n");
    for v in &def.variables {
        let _ = writeln!(
            p,
            "- {} ({}): {}",
            v.name,
            v.type_name,
            v.description.as_deref().unwrap_or("")
        );
    }
    p.push_str(
        "\nWrite the premises (facts stated or assumed by the question or the answer) and the \
         claims (what the answer asserts) as SMT-LIB terms using only these variables, the \
         values of the types, numbers, true and false, and the operators and, or, not, =>, =, \
         distinct, ite, +, -, *, /, <, <=, >, >=. Group them into pairs: each group of claims \
         with the premises it depends on. Text that these variables cannot express goes, \
         verbatim, into untranslatedPremises or untranslatedClaims.\n\n\
         Reply with JSON only, in this shape:\n\
         {\"pairs\": [{\"premises\": [{\"logic\": \"(= someVariable 70)\", \"naturalLanguage\": \"...\"}], \
         \"claims\": [{\"logic\": \"...\", \"naturalLanguage\": \"...\"}]}], \
         \"untranslatedPremises\": [], \"untranslatedClaims\": []}\n\n",
    );
    let _ = write!(
        p,
        "Question:\n<<<\n{question}\n>>>\n\nAnswer:\n<<<\n{answer}\n>>>\n"
    );
    p
}

/// The follow-up message that sends a reply's errors back to the translator.
pub fn repair_prompt(errors: &[String]) -> String {
    let mut p = String::from("Your reply could not be used:\n");
    for e in errors {
        let _ = writeln!(p, "- {e}");
    }
    p.push_str("Reply again with the corrected JSON only, in the same shape.");
    p
}

/// The JSON object in an LLM reply: the whole reply, or the part inside a ``` fence, or from
/// the first `{` to the last `}`.
pub fn json_part(reply: &str) -> &str {
    let t = reply.trim();
    if let Some(start) = t.find("```") {
        let after = &t[start + 3..];
        let after = after.strip_prefix("json").unwrap_or(after);
        if let Some(end) = after.find("```") {
            return after[..end].trim();
        }
    }
    match (t.find('{'), t.rfind('}')) {
        (Some(a), Some(b)) if a < b => &t[a..=b],
        _ => t,
    }
}

/// Reads one translator's reply and checks every statement against the policy. Errors are
/// phrased for the translator to fix them.
pub fn parse_reply(model: &PolicyModel, reply: &str) -> Result<TranslatorOutput, Vec<String>> {
    let doc = format!("{{\"translations\": [{}]}}", json_part(reply));
    let mut outputs = parse_translations(&doc).map_err(|e| {
        vec![e
            .to_string()
            .replace("translations[0]", "your reply")
            .replace("at translations: ", "")]
    })?;
    let out = outputs
        .pop()
        .ok_or_else(|| vec!["the reply is empty".to_string()])?;
    let mut errors = Vec::new();
    for (i, pair) in out.pairs.iter().enumerate() {
        for (what, list) in [("premises", &pair.premises), ("claims", &pair.claims)] {
            for (j, s) in list.iter().enumerate() {
                let place = format!("pairs[{i}].{what}[{j}]");
                match s.logic.as_deref() {
                    None => errors.push(format!("{place}: the statement has no `logic`")),
                    Some(logic) => {
                        if let Err(e) = model.check_statement(logic) {
                            errors.push(format!("{place}: {e}"));
                        }
                    }
                }
            }
        }
    }
    if errors.is_empty() {
        Ok(out)
    } else {
        Err(errors)
    }
}

/// What each translator produced, and what it cost.
#[derive(Debug, Clone)]
pub struct Translations {
    /// One output per translator, in translator order. A translator whose reply stayed
    /// unusable after the repairs counts as having translated nothing, so it disagrees with the
    /// others and the pair cannot reach full confidence: soundness over recall.
    pub outputs: Vec<TranslatorOutput>,
    /// Per translator: the problems left after the repairs, if any.
    pub failures: Vec<Option<String>>,
}

async fn one_translator(
    client: &LlmClient,
    model: &PolicyModel,
    prompt: &str,
    repair_attempts: usize,
) -> Result<Result<TranslatorOutput, String>, LlmError> {
    let mut messages = vec![ChatMessage::user(prompt)];
    let mut last_errors = Vec::new();
    for _ in 0..=repair_attempts {
        let reply = client.complete(&messages).await?;
        match parse_reply(model, &reply.text) {
            Ok(out) => return Ok(Ok(out)),
            Err(errors) => {
                messages.push(ChatMessage {
                    role: "assistant".into(),
                    content: reply.text,
                });
                messages.push(ChatMessage::user(repair_prompt(&errors)));
                last_errors = errors;
            }
        }
    }
    Ok(Err(last_errors.join("; ")))
}

/// Runs the k translators concurrently. Fails only when every translator's endpoint failed.
pub async fn translate(
    clients: &[LlmClient],
    model: &PolicyModel,
    question: &str,
    answer: &str,
    repair_attempts: usize,
) -> Result<Translations, TranslateError> {
    let prompt = translator_prompt(model, question, answer);
    let results = futures::future::join_all(
        clients
            .iter()
            .map(|c| one_translator(c, model, &prompt, repair_attempts)),
    )
    .await;
    let mut outputs = Vec::new();
    let mut failures = Vec::new();
    let mut unavailable = None;
    let mut answered = 0;
    for r in results {
        match r {
            Ok(Ok(out)) => {
                answered += 1;
                outputs.push(out);
                failures.push(None);
            }
            Ok(Err(errors)) => {
                answered += 1;
                outputs.push(TranslatorOutput::default());
                failures.push(Some(errors));
            }
            Err(e) => {
                outputs.push(TranslatorOutput::default());
                failures.push(Some(e.to_string()));
                unavailable = Some(e);
            }
        }
    }
    match (answered, unavailable) {
        (0, Some(e)) => Err(TranslateError::Unavailable(e)),
        _ => Ok(Translations { outputs, failures }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proofgate_core::policy::PolicyDefinition;

    fn model() -> PolicyModel {
        let def = PolicyDefinition::from_json(
            r#"{"version": "1.0",
                "types": [{"name": "Season", "description": "Park season", "values": [{"value": "LOW"}, {"value": "HIGH"}]}],
                "variables": [
                  {"name": "age", "type": "INT", "description": "Age of the visitor"},
                  {"name": "season", "type": "Season", "description": "The season"},
                  {"name": "fee", "type": "REAL", "description": "Admission fee"}],
                "rules": [{"id": "R1", "expression": "(=> (>= age 65) (= fee 9.0))"}]}"#,
        )
        .unwrap();
        PolicyModel::from_definition(def, None).unwrap()
    }

    #[test]
    fn prompt_lists_the_vocabulary_and_the_texts() {
        let p = translator_prompt(&model(), "How much at 70?", "It costs $9.");
        assert!(p.contains("- age (INT): Age of the visitor"));
        assert!(p.contains("- Season: Park season. Values: LOW, HIGH"));
        assert!(p.contains("How much at 70?") && p.contains("It costs $9."));
    }

    #[test]
    fn fenced_json_reply_is_read() {
        let reply = "Here you go:\n```json\n{\"pairs\": [{\"premises\": [\"(= age 70)\"], \"claims\": [{\"logic\": \"(= fee 9.0)\", \"naturalLanguage\": \"$9\"}]}]}\n```";
        let out = parse_reply(&model(), reply).unwrap();
        assert_eq!(out.pairs.len(), 1);
        assert_eq!(
            out.pairs[0].claims[0].natural_language.as_deref(),
            Some("$9")
        );
    }

    #[test]
    fn type_and_name_errors_are_listed_with_their_place() {
        let reply = r#"{"pairs": [{"premises": ["(= agee 70)"], "claims": ["(= season 3)", "(and (= fee 9.0)"]}]}"#;
        let errors = parse_reply(&model(), reply).unwrap_err();
        assert_eq!(errors.len(), 3, "{errors:?}");
        assert!(errors[0].starts_with("pairs[0].premises[0]") && errors[0].contains("agee"));
        assert!(errors[1].starts_with("pairs[0].claims[0]"));
        assert!(errors[2].starts_with("pairs[0].claims[1]"));
    }

    #[test]
    fn smuggled_commands_are_syntax_errors() {
        let reply = r#"{"pairs": [{"premises": [], "claims": ["(= age 1)) (assert false"]}]}"#;
        assert!(parse_reply(&model(), reply).is_err());
    }

    #[test]
    fn non_json_reply_is_an_error() {
        let errors = parse_reply(&model(), "I cannot do that.").unwrap_err();
        assert!(!errors.is_empty());
    }
}

//! Reading one translator's reply: the JSON in it, its shape, and every statement type-checked
//! against the policy's vocabulary. Errors are phrased for the translator to fix them.

use super::input::{parse_translations, TranslatorOutput};
use crate::policy::PolicyModel;

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

/// Reads one translator's reply and checks every statement against the policy's vocabulary.
pub fn parse_reply(vocabulary: &PolicyModel, reply: &str) -> Result<TranslatorOutput, Vec<String>> {
    parse_reply_of_format(vocabulary, reply, crate::audit::FORMAT_VERSION)
}

/// [`parse_reply`] by the rules of audit format `format`: from format 10
/// ([`crate::audit::NO_COMMENTS_IN_LOGIC_SINCE`]) a statement's logic may hold no SMT-LIB
/// comment, since `b ; (not b)` was checked as `b` while the trail showed all of it.
pub fn parse_reply_of_format(
    vocabulary: &PolicyModel,
    reply: &str,
    format: u32,
) -> Result<TranslatorOutput, Vec<String>> {
    let doc = if format >= crate::audit::REPLY_READ_ALONE_SINCE {
        // The reply alone, as one value with distinct keys: pasted into the document, text
        // after its object could close the list and write the document's key again.
        let value = crate::audit::strict_json::value_from_str(json_part(reply)).map_err(|e| {
            vec![format!(
                "your reply must be one JSON object, with each key once, and nothing after it \
                 ({e})"
            )]
        })?;
        serde_json::json!({ "translations": [value] }).to_string()
    } else {
        format!("{{\"translations\": [{}]}}", json_part(reply))
    };
    let mut outputs = parse_translations(&doc).map_err(|e| {
        vec![e
            .to_string()
            .replace("translations[0]", "your reply")
            .replace("at translations: ", "")]
    })?;
    let out = match (outputs.pop(), outputs.is_empty()) {
        (Some(out), true) => out,
        _ => return Err(vec!["the reply must be one JSON object".to_string()]),
    };
    let mut errors = Vec::new();
    for (i, pair) in out.pairs.iter().enumerate() {
        for (what, list) in [("premises", &pair.premises), ("claims", &pair.claims)] {
            for (j, s) in list.iter().enumerate() {
                let place = format!("pairs[{i}].{what}[{j}]");
                match s.logic.as_deref() {
                    None => errors.push(format!("{place}: the statement has no `logic`")),
                    Some(logic)
                        if crate::policy::term::holds_comment(logic)
                            && format >= crate::audit::NO_COMMENTS_IN_LOGIC_SINCE =>
                    {
                        errors.push(format!(
                            "{place}: `;` starts an SMT-LIB comment, and a statement's logic \
                             may hold none (what is checked must be all that is shown): write \
                             the statement alone"
                        ))
                    }
                    Some(logic) => {
                        if let Err(e) = vocabulary.check_statement(logic) {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::PolicyDefinition;

    /// From format 10 a comment in a statement's logic is an error to repair: `(= age 70) ;
    /// (not ...)` was checked as its first part while the trail showed all of it.
    #[test]
    fn a_comment_in_logic_is_refused_from_format_10() {
        let reply =
            r#"{"pairs": [{"premises": ["(= age 70) ; (= age 30)"], "claims": ["(= fee 5.0)"]}]}"#;
        let errors = parse_reply(&model(), reply).unwrap_err();
        assert!(errors[0].contains("comment"), "{errors:?}");
        assert!(parse_reply_of_format(&model(), reply, 9).is_ok());
    }

    /// From format 16 a reply is read alone: text after its object could close the document's
    /// list and write its `translations` key again, so that what was checked was not what the
    /// reply showed first; a key written twice is refused too.
    #[test]
    fn a_reply_is_one_object_with_distinct_keys_from_format_16() {
        let shown = r#"{"premises": ["(= age 70)"], "claims": ["(= fee 5.0)"]}"#;
        let checked = r#"{"premises": ["(= age 70)"], "claims": ["(= fee 9.0)"]}"#;
        let smuggled =
            format!(r#"{{"pairs": [{shown}]}}], "translations": [{{"pairs": [{checked}]}}"#);
        let errors = parse_reply(&model(), &smuggled).unwrap_err();
        assert!(errors[0].contains("one JSON object"), "{errors:?}");
        // Format 15 read the last `translations`: the pair the reply did not show first.
        let old = parse_reply_of_format(&model(), &smuggled, 15).unwrap();
        assert_eq!(old.pairs[0].claims[0].logic.as_deref(), Some("(= fee 9.0)"));
        let twice = format!(r#"{{"pairs": [{shown}], "pairs": [{checked}]}}"#);
        let errors = parse_reply(&model(), &twice).unwrap_err();
        assert!(errors[0].contains("each key once"), "{errors:?}");
        assert!(parse_reply_of_format(&model(), &twice, 15).is_ok());
        // A reply in a code fence, or with words around its object, still reads.
        let fenced = format!("Here it is:\n```json\n{{\"pairs\": [{shown}]}}\n```");
        assert!(parse_reply(&model(), &fenced).is_ok());
        let worded = format!("Sure. {{\"pairs\": [{shown}]}} Done.");
        assert!(parse_reply(&model(), &worded).is_ok());
    }

    /// A `;` inside a quoted symbol is part of the name, not a comment.
    #[test]
    fn a_semicolon_in_a_quoted_symbol_is_no_comment() {
        use crate::policy::term::holds_comment;
        assert!(holds_comment("(= age 70) ; (= age 30)"));
        assert!(holds_comment("(= |a;b| 1) ;x"));
        assert!(!holds_comment("(= |Sat;Sun| 1)"));
        assert!(!holds_comment("(= age 70)"));
    }

    fn model() -> PolicyModel {
        let def = PolicyDefinition::from_json(
            r#"{"types": [{"name": "Season", "values": [{"value": "LOW"}, {"value": "HIGH"}]}],
                "variables": [
                  {"name": "age", "type": "INT", "description": "Age of the visitor"},
                  {"name": "season", "type": "Season", "description": "The season"},
                  {"name": "fee", "type": "REAL", "description": "Admission fee"}],
                "rules": []}"#,
        )
        .unwrap();
        PolicyModel::from_definition(def, None).unwrap()
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
        assert!(!parse_reply(&model(), "I cannot do that.")
            .unwrap_err()
            .is_empty());
    }
}

//! Follow-up questions the policy words (audit format 14, [`crate::audit::POLICY_QUESTIONS_SINCE`]).
//!
//! The rewriting LLM chose and worded the follow-up questions, and a user's bare "yes" or
//! "Gold" was read as stating what the question asked: a loaded question ("Do you agree that
//! gold members enter free?", "Which tier interests you?") turned the user's word into a
//! premise the user never gave. From format 14 the rewriter names the policy variable it needs
//! (`QUESTION: tier`), and proofgate asks it in words made from the policy alone: the
//! variable's description, and for an enum its values. Only an answer to such a question is
//! read as stating what was asked (see `grounding`); a question the LLM worded itself is still
//! put to the user, but a short answer to it states nothing, and only the user's own words
//! ("I am a gold member") can ground a fact.

use crate::policy::definition::VariableDefinition;
use crate::policy::PolicyDefinition;

/// The question proofgate asks for `variable`, made from the policy's own words: its
/// description (or its name), "(yes or no)" for a boolean, and an enum's values with what
/// they mean. `None` for a variable the policy does not declare.
pub fn policy_question(vocabulary: &PolicyDefinition, variable: &str) -> Option<String> {
    let v = vocabulary.variables.iter().find(|v| v.name == variable)?;
    let what = subject(v);
    let ty = v.type_name.to_ascii_uppercase();
    Some(match ty.as_str() {
        "BOOL" => format!("{what} (yes or no)?"),
        "INT" | "REAL" => format!("{what}?"),
        _ => match vocabulary.types.iter().find(|t| t.name == v.type_name) {
            Some(t) if !t.values.is_empty() => {
                let values: Vec<String> = t
                    .values
                    .iter()
                    .map(|x| match x.description.as_deref().map(one_line) {
                        Some(d) if !d.is_empty() => format!("{} ({d})", x.value),
                        _ => x.value.clone(),
                    })
                    .collect();
                let (last, rest) = values.split_last()?;
                if rest.is_empty() {
                    format!("{what}: {last}?")
                } else {
                    format!("{what}: {} or {last}?", rest.join(", "))
                }
            }
            _ => format!("{what}?"),
        },
    })
}

/// What a question about `v` asks: its description on one line, without a closing stop or
/// question mark, capitalised; its name's words when it has no description ("Customer age").
fn subject(v: &VariableDefinition) -> String {
    let text = v
        .description
        .as_deref()
        .map(one_line)
        .filter(|d| !d.is_empty())
        .unwrap_or_else(|| name_as_words(&v.name));
    let text = text.trim_end_matches(['.', '?', '!', ':', ';', ' ']);
    let mut chars = text.chars();
    match chars.next() {
        Some(c) => c.to_uppercase().chain(chars).collect(),
        None => v.name.clone(),
    }
}

/// `customerAge` and `customer_age` as "customer age".
fn name_as_words(name: &str) -> String {
    let mut out = String::new();
    let mut prev: Option<char> = None;
    for c in name.chars() {
        if c == '_' || c == '-' {
            out.push(' ');
        } else {
            if c.is_uppercase() && prev.is_some_and(|p| p.is_lowercase()) {
                out.push(' ');
            }
            out.extend(c.to_lowercase());
        }
        prev = Some(c);
    }
    one_line(&out)
}

fn one_line(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// A follow-up question as the thread asks it from format 14: a line that names a policy
/// variable (`tier`, `` `tier` ``) is that variable's [`policy_question`]; any other line is
/// kept as the LLM wrote it.
pub fn resolve_question(vocabulary: &PolicyDefinition, line: &str) -> String {
    named_question(vocabulary, line).unwrap_or_else(|| line.to_string())
}

/// The [`policy_question`] of the variable `line` names, if it names one: its name alone, in
/// any letter case, quoted or not, after a list number, before a stop or question mark
/// (`tier`, `` `Tier` ``, "1. customerAge?"), so that a near miss does not reach the user as a
/// bare identifier.
pub fn named_question(vocabulary: &PolicyDefinition, line: &str) -> Option<String> {
    let name = without_list_number(line.trim())
        .trim_end_matches(['?', '.', ':', '!'])
        .trim()
        .trim_matches(['`', '"', '\''])
        .trim();
    let variable = vocabulary
        .variables
        .iter()
        .find(|v| v.name == name)
        .or_else(|| {
            let mut same = vocabulary
                .variables
                .iter()
                .filter(|v| v.name.eq_ignore_ascii_case(name));
            let first = same.next()?;
            same.next().is_none().then_some(first)
        })?;
    policy_question(vocabulary, &variable.name)
}

/// The variable whose [`policy_question`] `line` is, if it is one exactly (after a list
/// number such as "1. ", as a chat message of questions numbers them); `None` for a question
/// the policy did not word, or one two variables share.
pub(crate) fn asked_variable<'a>(
    vocabulary: &'a PolicyDefinition,
    line: &str,
) -> Option<&'a VariableDefinition> {
    let line = line.trim();
    let line = match line.split_once(". ") {
        Some((n, rest)) if !n.is_empty() && n.chars().all(|c| c.is_ascii_digit()) => rest,
        _ => line,
    };
    let mut found = vocabulary
        .variables
        .iter()
        .filter(|v| policy_question(vocabulary, &v.name).as_deref() == Some(line));
    let first = found.next()?;
    found.next().is_none().then_some(first)
}

/// `line` without a list number or bullet before it ("1. yes", "2) 70", "- Gold"): only one
/// followed by a space and more text, so a number is never cut ("4.5", "-200", "2.").
pub(crate) fn without_list_number(line: &str) -> &str {
    let digits = line.chars().take_while(char::is_ascii_digit).count();
    let marker = if digits > 0 {
        match line[digits..].chars().next() {
            Some('.' | ')') => digits + 1,
            _ => return line,
        }
    } else {
        match line.chars().next() {
            Some(c @ ('-' | '*' | '•')) => c.len_utf8(),
            _ => return line,
        }
    };
    let rest = &line[marker..];
    match rest.strip_prefix(char::is_whitespace) {
        Some(r) if !r.trim().is_empty() => r.trim_start(),
        _ => line,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vocabulary() -> PolicyDefinition {
        PolicyDefinition::from_json(
            r#"{"types": [{"name": "Tier", "values": [
                    {"value": "GOLD", "description": "Paid yearly"}, {"value": "SILVER"},
                    {"value": "NONE"}]}],
                "variables": [
                    {"name": "isMember", "type": "BOOL", "description": "Whether the visitor is a member."},
                    {"name": "tier", "type": "Tier", "description": "the visitor's membership tier"},
                    {"name": "age", "type": "INT"},
                    {"name": "twinA", "type": "BOOL", "description": "Same words"},
                    {"name": "twinB", "type": "BOOL", "description": "Same words"}],
                "rules": []}"#,
        )
        .unwrap()
    }

    #[test]
    fn questions_are_made_from_the_policy_words() {
        let v = vocabulary();
        assert_eq!(
            policy_question(&v, "isMember").unwrap(),
            "Whether the visitor is a member (yes or no)?"
        );
        assert_eq!(
            policy_question(&v, "tier").unwrap(),
            "The visitor's membership tier: GOLD (Paid yearly), SILVER or NONE?"
        );
        assert_eq!(policy_question(&v, "age").unwrap(), "Age?");
        let mut v = v;
        v.variables[2].name = "customerAge".into();
        assert_eq!(policy_question(&v, "customerAge").unwrap(), "Customer age?");
        assert_eq!(policy_question(&v, "nope"), None);
    }

    #[test]
    fn a_line_naming_a_variable_is_its_question_and_others_stay() {
        let v = vocabulary();
        assert_eq!(
            resolve_question(&v, " `tier` "),
            policy_question(&v, "tier").unwrap()
        );
        assert_eq!(
            resolve_question(&v, "Do you agree that gold members enter free?"),
            "Do you agree that gold members enter free?"
        );
    }

    /// A near miss of a variable's name is its question, not a bare identifier shown to the
    /// user (a review's case).
    #[test]
    fn a_name_with_a_mark_a_number_or_another_case_is_its_question() {
        let v = vocabulary();
        let tier = policy_question(&v, "tier").unwrap();
        for line in ["tier?", "Tier", "1. tier", "`tier`.", "- tier", "\"tier\""] {
            assert_eq!(
                named_question(&v, line).as_deref(),
                Some(tier.as_str()),
                "{line}"
            );
        }
        assert_eq!(named_question(&v, "tiers"), None);
        assert_eq!(named_question(&v, "What is your tier?"), None);
    }

    #[test]
    fn only_a_question_the_policy_words_names_its_variable() {
        let v = vocabulary();
        let q = policy_question(&v, "tier").unwrap();
        assert_eq!(asked_variable(&v, &q).unwrap().name, "tier");
        assert_eq!(asked_variable(&v, &format!("2. {q}")).unwrap().name, "tier");
        assert!(asked_variable(&v, "Which tier interests you?").is_none());
        assert!(asked_variable(&v, &format!("{q} Be honest.")).is_none());
        // Two variables with one description: which was asked is not known.
        assert!(asked_variable(&v, "Same words (yes or no)?").is_none());
    }
}

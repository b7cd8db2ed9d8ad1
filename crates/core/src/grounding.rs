//! Audit format 7's rule for what a premise must find in the turn it cites
//! ([`crate::audit::STRICT_GROUNDING_SINCE`]). Format 4 to 6 checked only numbers, so a premise
//! with none (`isMember`, `(= tier GOLD)`, `(= fines 0)`) stayed a premise whatever its turn
//! said, a negative value was grounded by the same number stated positive, and the system
//! prompt (which usually restates the policy's thresholds: "seniors (65+) pay $9") grounded
//! `(>= age 65)`. Now each conjunct of a premise must be borne out by the turn:
//!
//! - every value it states, with its sign ([`crate::conversation::values_of`]);
//! - every enum value it names, by the words of its name ("SENIOR": "senior");
//! - and one that states no value and names no enum value (a boolean, a comparison of
//!   variables, or a value of 0 or 1, which turns say in words) must name one of its
//!   variables by every word of its name ("hasOutstandingFines": "outstanding" and "fines").
//!
//! The system prompt grounds nothing unless the operator says it states facts about the user
//! ([`crate::translation::TranslationConfig::system_prompt_facts`]).
//!
//! Words are a weak test of meaning, which is why they only ever take a premise away: a premise
//! that fails is checked as a claim, so the answer must prove it or the user is asked.

use crate::conversation::{stated_signed_numbers, values_of, ConversationTurn, TurnRole};
use crate::policy::term::{parse_term, Op, Term, TermKind};
use crate::translation::TranslationConfig;
use std::collections::BTreeSet;

/// Words of a variable's or enum value's name that say nothing about the fact: verbs of being
/// and having, and words for the person the policy is about.
const EMPTY_WORDS: &[&str] = &[
    "is",
    "are",
    "was",
    "were",
    "be",
    "been",
    "has",
    "have",
    "had",
    "does",
    "did",
    "do",
    "can",
    "will",
    "use",
    "uses",
    "used",
    "using",
    "get",
    "gets",
    "the",
    "and",
    "for",
    "with",
    "not",
    "any",
    "all",
    "per",
    "total",
    "number",
    "num",
    "count",
    "amount",
    "value",
    "flag",
    "status",
    "type",
    "kind",
    "class",
    "level",
    "customer",
    "user",
    "client",
    "person",
    "visitor",
    "passenger",
    "buyer",
    "applicant",
    "employee",
    "holder",
    "traveler",
    "traveller",
    "guest",
];

/// Whether `turn` (what the premise cites) bears out every conjunct of `logic`, under
/// `config` (its vocabulary tells enum values from variables).
pub(crate) fn grounded_in(
    turn: &ConversationTurn,
    logic: &str,
    config: &TranslationConfig,
) -> bool {
    if turn.role == TurnRole::System && !config.system_prompt_facts {
        return false;
    }
    let Ok(term) = parse_term(logic) else {
        return false;
    };
    let enum_values: BTreeSet<&str> = config
        .vocabulary
        .types
        .iter()
        .flat_map(|t| t.values.iter().map(|v| v.value.as_str()))
        .collect();
    let numbers = stated_signed_numbers(&turn.text);
    let words = words_of(&turn.text);
    conjuncts(&term)
        .into_iter()
        .all(|c| conjunct_grounded(c, &numbers, &words, &enum_values))
}

/// The conjuncts of a term: the arguments of its top-level `and`s, else the term itself.
fn conjuncts(term: &Term) -> Vec<&Term> {
    match &term.kind {
        TermKind::App(Op::And, args) => args.iter().flat_map(conjuncts).collect(),
        _ => vec![term],
    }
}

fn conjunct_grounded(
    term: &Term,
    numbers: &[f64],
    words: &[String],
    enum_values: &BTreeSet<&str>,
) -> bool {
    let Some(values) = values_of(term, true) else {
        return false;
    };
    let stated = |v: &f64| {
        numbers
            .iter()
            .any(|n| (n - v).abs() <= 1e-9 * v.abs().max(1.0))
    };
    if !values.iter().all(stated) {
        return false;
    }
    let mut symbols = BTreeSet::new();
    symbols_of(term, &mut symbols);
    let (named_values, variables): (Vec<&str>, Vec<&str>) =
        symbols.into_iter().partition(|s| enum_values.contains(s));
    if !named_values.iter().all(|v| named(v, words)) {
        return false;
    }
    !values.is_empty() || !named_values.is_empty() || variables.iter().any(|v| named(v, words))
}

fn symbols_of<'a>(term: &'a Term, out: &mut BTreeSet<&'a str>) {
    match &term.kind {
        TermKind::Symbol(s) => {
            out.insert(s.as_str());
        }
        TermKind::App(_, args) => args.iter().for_each(|a| symbols_of(a, out)),
        _ => {}
    }
}

/// Whether the words of a turn name `symbol`: every word of its name that says something
/// (see [`EMPTY_WORDS`]) is among them. A name with no such word is never named.
fn named(symbol: &str, words: &[String]) -> bool {
    let parts = name_words(symbol);
    !parts.is_empty() && parts.iter().all(|p| words.iter().any(|w| same_word(p, w)))
}

/// The words of a name: split at `_`, `-`, digits and lower-to-upper case changes, lower-cased,
/// without [`EMPTY_WORDS`] and words under three letters.
fn name_words(symbol: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut current = String::new();
    let mut prev_lower = false;
    for c in symbol.chars() {
        if !c.is_alphabetic() {
            words.push(std::mem::take(&mut current));
            prev_lower = false;
            continue;
        }
        if c.is_uppercase() && prev_lower {
            words.push(std::mem::take(&mut current));
        }
        prev_lower = c.is_lowercase();
        current.extend(c.to_lowercase());
    }
    words.push(current);
    words
        .into_iter()
        .filter(|w| w.chars().count() >= 3 && !EMPTY_WORDS.contains(&w.as_str()))
        .collect()
}

/// The words of a text, lower-cased.
fn words_of(text: &str) -> Vec<String> {
    text.split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(str::to_lowercase)
        .collect()
}

/// The same word, give or take an ending: equal, a plural, or (both of four letters or more)
/// one starting with the other ("member", "membership").
fn same_word(name: &str, word: &str) -> bool {
    if name == word {
        return true;
    }
    let plural = |a: &str, b: &str| {
        b.strip_prefix(a)
            .is_some_and(|rest| rest == "s" || rest == "es")
    };
    if plural(name, word) || plural(word, name) {
        return true;
    }
    name.chars().count().min(word.chars().count()) >= 4
        && (word.starts_with(name) || name.starts_with(word))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::PolicyDefinition;

    fn config(system_prompt_facts: bool) -> TranslationConfig {
        let def = PolicyDefinition::from_json(
            r#"{"types": [{"name": "Tier", "values": [{"value": "GOLD"}, {"value": "SILVER"}]}],
                "variables": [{"name": "isMember", "type": "BOOL"},
                              {"name": "hasOutstandingFines", "type": "BOOL"},
                              {"name": "outstandingFines", "type": "INT"},
                              {"name": "customerAge", "type": "INT"},
                              {"name": "seniorAgeLimit", "type": "INT"},
                              {"name": "balance", "type": "INT"},
                              {"name": "isLowSeason", "type": "BOOL"},
                              {"name": "usesCredits", "type": "BOOL"},
                              {"name": "tier", "type": "Tier"}]}"#,
        )
        .unwrap();
        let mut c = TranslationConfig::new(&def, 2, 1, 1.0);
        c.system_prompt_facts = system_prompt_facts;
        c
    }

    fn user(text: &str) -> ConversationTurn {
        ConversationTurn::new(TurnRole::User, text)
    }

    #[test]
    fn a_premise_without_numbers_must_be_named_by_its_turn() {
        let c = config(false);
        let ok = |turn: &str, logic: &str| grounded_in(&user(turn), logic, &c);
        // The reviewer's case: nothing in the question says the buyer is a member.
        assert!(!ok("Do I get free shipping?", "isMember"));
        assert!(ok("I'm a member, do I get free shipping?", "isMember"));
        assert!(ok("Is shipping free with my membership?", "isMember"));
        assert!(ok("I am not a member.", "(not isMember)"));
        assert!(!ok("I have fines.", "hasOutstandingFines"));
        assert!(ok(
            "I have no outstanding fines.",
            "(not hasOutstandingFines)"
        ));
        assert!(!ok("How much do I owe?", "(= outstandingFines 0)"));
        assert!(ok("I have no outstanding fines.", "(= outstandingFines 0)"));
        assert!(!ok("I visit in the high season.", "isLowSeason"));
        assert!(ok(
            "I visit in the low season without credits.",
            "(and isLowSeason (not usesCredits))"
        ));
        // Every conjunct is checked: the age is stated, the membership is not.
        assert!(!ok("I am 70.", "(and (= customerAge 70) isMember)"));
        assert!(ok("I am 70.", "(= customerAge 70)"));
        // Enum values by name, whatever else the conjunct holds.
        assert!(!ok("What does my tier get me?", "(= tier GOLD)"));
        assert!(ok("I'm a gold member.", "(= tier GOLD)"));
        assert!(!ok(
            "I'm a gold member.",
            "(or (= tier GOLD) (= tier SILVER))"
        ));
        // A comparison of two variables names one of them whole.
        assert!(!ok("Am I old enough?", "(>= customerAge seniorAgeLimit)"));
        assert!(ok(
            "My age is above the senior age limit.",
            "(>= customerAge seniorAgeLimit)"
        ));
        // Nothing to name, or not parseable: not grounded.
        assert!(!ok("Yes.", "true"));
        assert!(!ok("I am 70.", "(= customerAge"));
    }

    #[test]
    fn a_negative_value_must_be_stated_negative() {
        let c = config(false);
        let ok = |turn: &str, logic: &str| grounded_in(&user(turn), logic, &c);
        assert!(!ok("I have 500 in my account.", "(= balance (- 500))"));
        assert!(ok("My balance is -500.", "(= balance (- 500))"));
        assert!(ok("My balance is -$500.", "(= balance (- 500))"));
        assert!(ok("My balance is minus 500.", "(= balance (- 500))"));
        assert!(!ok("My balance is -500.", "(= balance 500)"));
        // A hyphen after a word or number is no minus sign.
        assert!(ok("I was in ward B-12 for 10-12 days", "(= balance 12)"));
        assert!(!ok("I am 70.", "(= customerAge (- 1))"));
    }

    #[test]
    fn the_system_prompt_grounds_only_when_the_operator_says_it_states_facts() {
        let system =
            ConversationTurn::new(TurnRole::System, "Seniors (65+) pay $9. The user is 70.");
        assert!(!grounded_in(&system, "(>= customerAge 65)", &config(false)));
        assert!(!grounded_in(&system, "(= customerAge 70)", &config(false)));
        assert!(grounded_in(&system, "(= customerAge 70)", &config(true)));
        let tool = ConversationTurn::new(TurnRole::Tool, "{\"age\": 70}");
        assert!(grounded_in(&tool, "(= customerAge 70)", &config(false)));
    }

    #[test]
    fn names_split_into_words() {
        assert_eq!(name_words("hasOutstandingFines"), ["outstanding", "fines"]);
        assert_eq!(name_words("customerAge"), ["age"]);
        assert_eq!(name_words("LOW_SEASON"), ["low", "season"]);
        assert_eq!(name_words("isCustomer"), Vec::<String>::new());
        assert!(!named("isCustomer", &words_of("I am a customer")));
    }
}

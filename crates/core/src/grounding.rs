//! Audit format 7's rule for what a premise must find in the turn it cites
//! ([`crate::audit::STRICT_GROUNDING_SINCE`]). Format 4 to 6 checked only numbers, so a premise
//! with none (`isMember`, `(= tier GOLD)`, `(= fines 0)`) stayed a premise whatever its turn
//! said, a negative value was grounded by the same number stated positive, a question's number
//! ("is the discount for 65 and over?") grounded `(>= age 65)`, and the system prompt (which
//! usually restates the policy's thresholds) grounded premises the user never gave. Now:
//!
//! - A premise is a conjunction of simple facts: a boolean variable or its negation, or a
//!   variable compared with a constant (a number, an enum value, `true`, `false`), each maybe
//!   negated. Anything else (arithmetic on variables, `or`, `=>`, `ite`, two variables compared)
//!   is not a fact a turn states, and is checked as a claim.
//! - A fact with a number other than 0 and 1 needs the turn to state that number, with its
//!   sign, outside a question.
//! - Any other fact needs a statement of the turn (not a question) to name its enum value, or
//!   its variable by every word of its name, and to name it negated exactly when the fact is
//!   negative: "I am not a member" grounds `(not isMember)`, not `isMember`; "do members get
//!   free shipping?" grounds neither.
//! - A short "yes" or "no" answering the assistant's question states that question, or its
//!   negation: "Are you a member?" "Yes." grounds `isMember`.
//! - The system prompt grounds nothing unless the operator says it states facts about the
//!   user ([`crate::translation::TranslationConfig::system_prompt_facts`]).
//!
//! Words are a weak test of meaning, so this only ever takes a premise away: a premise that
//! fails is checked as a claim, and the answer must prove it or the user is asked.

use crate::conversation::{stated_signed_numbers, values_of, ConversationTurn, TurnRole};
use crate::policy::term::{parse_term, Op, Term, TermKind};
use crate::translation::TranslationConfig;
use std::collections::BTreeSet;

/// Words of a name that never say what it is about.
const GRAMMAR_WORDS: &[&str] = &[
    "is", "are", "was", "were", "be", "been", "has", "have", "had", "does", "did", "do", "can",
    "will", "use", "uses", "used", "using", "get", "gets", "the", "and", "for", "with", "of", "to",
    "in", "on", "at", "by", "per", "not", "any", "all",
];

/// Words of a variable's name that name the person or the kind of quantity rather than the
/// fact ("customerAge" is named by "age"), unless nothing else is left.
const GENERIC_WORDS: &[&str] = &[
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
];

/// Words that negate what follows them closely.
const NEGATIONS: &[&str] = &[
    "not", "no", "never", "none", "without", "neither", "nor", "nothing", "nobody", "non", "dont",
    "doesnt", "didnt", "isnt", "arent", "wasnt", "werent", "cant", "cannot", "wont", "havent",
    "hasnt", "hadnt", "shouldnt", "wouldnt", "couldnt", "aint",
];

/// First words of a clause that make it a question or a condition, not a statement of fact.
const OPENS_NO_STATEMENT: &[&str] = &[
    "if",
    "whether",
    "unless",
    "suppose",
    "supposing",
    "assuming",
    "are",
    "is",
    "am",
    "do",
    "does",
    "did",
    "can",
    "could",
    "would",
    "will",
    "should",
    "have",
    "has",
    "what",
    "which",
    "who",
    "how",
    "why",
    "where",
    "or",
];

/// How many words before a name a negation applies to it ("I do not use credits").
const NEGATION_REACH: usize = 3;

/// Whether turn `at` (0-based) of `conversation`, which a premise cites, bears out every fact
/// of `logic`, under `config` (its vocabulary tells enum values from variables).
pub(crate) fn grounded_in(
    conversation: &[ConversationTurn],
    at: usize,
    logic: &str,
    config: &TranslationConfig,
) -> bool {
    let Some(turn) = conversation.get(at) else {
        return false;
    };
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
    let mut facts = Vec::new();
    if !facts_of(&term, true, &enum_values, &mut facts) || facts.is_empty() {
        return false;
    }
    let mut statements: Vec<Clause> = clauses(&turn.text)
        .into_iter()
        .filter(|c| !c.question)
        .collect();
    // Numbers only from the turn's own statements: a yes to "are you over 65?" is not 65.
    let numbers: Vec<f64> = statements
        .iter()
        .flat_map(|c| stated_signed_numbers(&c.text))
        .collect();
    // A user's short yes or no to the assistant's question just before states that question.
    if turn.role == TurnRole::User && at > 0 && conversation[at - 1].role == TurnRole::Assistant {
        statements.extend(answered(&conversation[at - 1].text, &turn.text));
    }
    facts
        .iter()
        .all(|f| fact_grounded(f, &numbers, &statements))
}

/// A simple fact: `variable` compared with `constant` (or a boolean variable, `constant` then
/// `true`), `positive` unless negated.
#[derive(Debug)]
struct Fact<'a> {
    variable: &'a str,
    constant: Constant<'a>,
    positive: bool,
}

#[derive(Debug)]
enum Constant<'a> {
    /// A number (a numeral, or arithmetic on numerals), with its sign, and whether the
    /// comparison is `=` (only then does naming the variable say which value it has).
    Number(f64),
    /// An enum value, compared with `=`.
    Enum(&'a str),
    /// `true` for a boolean variable as it stands.
    Truth,
}

/// Collects the facts of `term`, `positive` unless under an odd number of `not`s; `false` when
/// `term` is not a conjunction of simple facts.
fn facts_of<'a>(
    term: &'a Term,
    positive: bool,
    enum_values: &BTreeSet<&str>,
    out: &mut Vec<Fact<'a>>,
) -> bool {
    let variable = |t: &'a Term| match &t.kind {
        TermKind::Symbol(s) if !enum_values.contains(s.as_str()) => Some(s.as_str()),
        _ => None,
    };
    match &term.kind {
        // A conjunction under `not` is a disjunction: not a fact.
        TermKind::App(Op::And, args) if positive => {
            args.iter().all(|a| facts_of(a, true, enum_values, out))
        }
        TermKind::App(Op::Not, args) if args.len() == 1 => {
            facts_of(&args[0], !positive, enum_values, out)
        }
        // `true` among the facts adds nothing.
        TermKind::Bool(true) if positive => true,
        TermKind::Symbol(_) => match variable(term) {
            Some(v) => {
                out.push(Fact {
                    variable: v,
                    constant: Constant::Truth,
                    positive,
                });
                true
            }
            None => false,
        },
        TermKind::App(op @ (Op::Eq | Op::Distinct | Op::Lt | Op::Le | Op::Gt | Op::Ge), args)
            if args.len() == 2 =>
        {
            let (var, other) = match (variable(&args[0]), variable(&args[1])) {
                (Some(v), None) => (v, &args[1]),
                (None, Some(v)) => (v, &args[0]),
                _ => return false,
            };
            let equal = matches!(op, Op::Eq | Op::Distinct);
            let positive = if *op == Op::Distinct {
                !positive
            } else {
                positive
            };
            let constant = match &other.kind {
                TermKind::Bool(b) if equal => {
                    out.push(Fact {
                        variable: var,
                        constant: Constant::Truth,
                        positive: positive == *b,
                    });
                    return true;
                }
                TermKind::Symbol(s) if equal && enum_values.contains(s.as_str()) => {
                    Constant::Enum(s.as_str())
                }
                _ => match values_of(other, true).as_deref() {
                    // `values_of` leaves out 0 and 1: a constant with no value left is one
                    // of them, or not a number at all.
                    Some([n]) => Constant::Number(*n),
                    Some([]) if is_constant(other) => Constant::Number(0.0),
                    _ => return false,
                },
            };
            out.push(Fact {
                variable: var,
                constant,
                positive,
            });
            true
        }
        _ => false,
    }
}

/// Whether `term` is made of numerals and arithmetic alone.
fn is_constant(term: &Term) -> bool {
    match &term.kind {
        TermKind::Int(_) | TermKind::Decimal { .. } => true,
        TermKind::App(Op::Add | Op::Sub | Op::Mul | Op::Div | Op::ToReal, args) => {
            args.iter().all(is_constant)
        }
        _ => false,
    }
}

fn fact_grounded(fact: &Fact, numbers: &[f64], statements: &[Clause]) -> bool {
    if let Constant::Number(n) = fact.constant {
        if n != 0.0 && n != 1.0 {
            return numbers
                .iter()
                .any(|s| (s - n).abs() <= 1e-9 * n.abs().max(1.0));
        }
    }
    let (name, negated) = match fact.constant {
        Constant::Enum(value) => (value_words(value), Some(!fact.positive)),
        Constant::Truth => (variable_words(fact.variable), Some(!fact.positive)),
        // 0 or 1: "no fines" and "a bag" name the variable; how they say the value is not read.
        Constant::Number(_) => (variable_words(fact.variable), None),
    };
    !name.is_empty()
        && statements.iter().any(|c| {
            c.mention(&name)
                .is_some_and(|n| negated.is_none_or(|want| n == want))
        })
}

/// A statement or question of a turn: its words (stemmed), whether each is negated (a negation
/// within [`NEGATION_REACH`] words before it), and its text for its numbers.
#[derive(Debug, Clone)]
struct Clause {
    text: String,
    words: Vec<String>,
    negated: Vec<bool>,
    question: bool,
}

impl Clause {
    /// A clause of `text`; one that opens with a question word or a condition ("if I were a
    /// member", "are you a member, or a guest?") states nothing, as a question does not.
    fn new(text: &str, question: bool) -> Clause {
        let raw = raw_words(text);
        let question = question
            || raw
                .first()
                .is_some_and(|w| OPENS_NO_STATEMENT.contains(&w.as_str()));
        let negated = (0..raw.len())
            .map(|i| {
                raw[i.saturating_sub(NEGATION_REACH)..i]
                    .iter()
                    .any(|w| NEGATIONS.contains(&w.as_str()))
            })
            .collect();
        Clause {
            text: text.to_string(),
            words: raw.iter().map(|w| stem(w)).collect(),
            negated,
            question,
        }
    }

    /// Whether every word of `name` is in this clause, and if so whether it is named negated
    /// (as its first word in the clause is).
    fn mention(&self, name: &[String]) -> Option<bool> {
        let mut first = usize::MAX;
        for n in name {
            first = first.min(self.words.iter().position(|w| w == n)?);
        }
        Some(self.negated[first])
    }

    /// The clause stated: a question's words answered yes (`negate` false) or no.
    fn answered(mut self, negate: bool) -> Clause {
        self.question = false;
        if negate {
            self.negated.iter_mut().for_each(|n| *n = !*n);
        }
        self
    }
}

/// The clauses of a text: its sentences (ended by `.`, `!`, `?`, `;` or a line break), a
/// sentence ending with `?` a question; within a question, what comes before its last comma is
/// a statement ("I'm a member, do I get free shipping?").
fn clauses(text: &str) -> Vec<Clause> {
    let mut out = Vec::new();
    let mut sentence = String::new();
    let mut flush = |sentence: &mut String, question: bool| {
        let s = std::mem::take(sentence);
        if s.trim().is_empty() {
            return;
        }
        match s.rsplit_once(',').filter(|_| question) {
            Some((said, asked)) => {
                out.push(Clause::new(said, false));
                out.push(Clause::new(asked, true));
            }
            None => out.push(Clause::new(&s, question)),
        }
    };
    let chars: Vec<char> = text.chars().collect();
    for (i, &c) in chars.iter().enumerate() {
        // A point between digits is a decimal point, not a sentence's end.
        let decimal = c == '.'
            && i > 0
            && chars[i - 1].is_ascii_digit()
            && chars.get(i + 1).is_some_and(char::is_ascii_digit);
        match c {
            '?' => flush(&mut sentence, true),
            '.' | '!' | ';' | '\n' if !decimal => flush(&mut sentence, false),
            _ => sentence.push(c),
        }
    }
    flush(&mut sentence, false);
    out
}

/// What a user's answer states of the assistant's question(s) just before it: each question
/// answered by a short yes or no (one answer per question, line by line, or one answer to a
/// single question) as a statement, negated for no.
fn answered(asked: &str, answer: &str) -> Vec<Clause> {
    let questions: Vec<Clause> = clauses(asked).into_iter().filter(|c| c.question).collect();
    let answers: Vec<&str> = answer
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect();
    if questions.len() != answers.len() {
        return Vec::new();
    }
    questions
        .into_iter()
        .zip(answers)
        .filter_map(|(q, a)| yes_or_no(a).map(|yes| q.answered(!yes)))
        .collect()
}

/// `Some(true)` for an answer that starts with yes, `Some(false)` for one that starts with no.
fn yes_or_no(answer: &str) -> Option<bool> {
    let first = raw_words(answer).into_iter().next()?;
    match first.as_str() {
        "yes" | "yeah" | "yep" | "yup" | "correct" | "right" | "sure" | "indeed" | "true"
        | "affirmative" => Some(true),
        "no" | "nope" | "nah" | "negative" | "false" => Some(false),
        _ => None,
    }
}

/// The words of a text, lower-cased, apostrophes dropped ("don't" is "dont").
fn raw_words(text: &str) -> Vec<String> {
    text.chars()
        .filter(|c| *c != '\'' && *c != '\u{2019}')
        .collect::<String>()
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(str::to_lowercase)
        .collect()
}

/// A word without its common endings, so that "member", "members" and "membership", or
/// "cancelled" and "cancellation", are one word, while "passenger" is not "pass". Numbers stay
/// as they are.
fn stem(word: &str) -> String {
    const ENDINGS: &[(&str, &str)] = &[
        ("ations", ""),
        ("ation", ""),
        ("ments", ""),
        ("ment", ""),
        ("ships", ""),
        ("ship", ""),
        ("ings", ""),
        ("ing", ""),
        ("ions", ""),
        ("ion", ""),
        ("ers", ""),
        ("er", ""),
        ("ied", "y"),
        ("ies", "y"),
        ("ed", ""),
        ("s", ""),
        ("ly", ""),
        ("al", ""),
    ];
    let mut w = word.to_lowercase();
    if w.chars().all(|c| c.is_ascii_digit()) {
        return w;
    }
    'strip: loop {
        for (ending, with) in ENDINGS {
            if let Some(rest) = w.strip_suffix(ending) {
                if rest.chars().count() >= 3 {
                    w = format!("{rest}{with}");
                    continue 'strip;
                }
            }
        }
        break;
    }
    // "cancell" (from "cancelled", "cancellation") is "cancel".
    let chars: Vec<char> = w.chars().collect();
    if chars.len() > 3
        && chars[chars.len() - 1] == chars[chars.len() - 2]
        && chars[chars.len() - 1] == 'l'
    {
        w.pop();
    }
    w
}

/// The words of a name: split at `_`, `-`, digits and lower-to-upper case changes (digit runs
/// are words of their own), lower-cased and stemmed, without [`GRAMMAR_WORDS`] and
/// one-letter words (a one-digit number is a word).
fn name_words(symbol: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut current = String::new();
    let mut prev: Option<char> = None;
    for c in symbol.chars() {
        let boundary = match prev {
            None => false,
            Some(p) => {
                !c.is_alphanumeric()
                    || (c.is_uppercase() && p.is_lowercase())
                    || (c.is_ascii_digit() != p.is_ascii_digit() && p.is_alphanumeric())
            }
        };
        if boundary {
            words.push(std::mem::take(&mut current));
        }
        if c.is_alphanumeric() {
            current.extend(c.to_lowercase());
        }
        prev = Some(c);
    }
    words.push(current);
    words
        .into_iter()
        .filter(|w| {
            let digits = !w.is_empty() && w.chars().all(|c| c.is_ascii_digit());
            (digits || w.chars().count() >= 2) && !GRAMMAR_WORDS.contains(&w.as_str())
        })
        .map(|w| stem(&w))
        .collect()
}

/// The words that name an enum value: all of its name's.
fn value_words(value: &str) -> Vec<String> {
    name_words(value)
}

/// The words that name a variable: its name's, without [`GENERIC_WORDS`] unless nothing else
/// is left ("isEmployee" is named by "employee").
fn variable_words(variable: &str) -> Vec<String> {
    let all = name_words(variable);
    let specific: Vec<String> = all
        .iter()
        .filter(|w| !GENERIC_WORDS.iter().any(|g| stem(g) == **w))
        .cloned()
        .collect();
    if specific.is_empty() {
        all
    } else {
        specific
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::PolicyDefinition;

    fn config(system_prompt_facts: bool) -> TranslationConfig {
        let def = PolicyDefinition::from_json(
            r#"{"types": [{"name": "Tier", "values": [{"value": "GOLD"}, {"value": "SILVER"},
                                                         {"value": "TIER_1"}, {"value": "TIER_2"}]},
                          {"name": "Reason", "values": [{"value": "CANCELLATION"}, {"value": "NO_DISRUPTION"}]},
                          {"name": "Role", "values": [{"value": "EMPLOYEE"}, {"value": "GUEST"}]}],
                "variables": [{"name": "isMember", "type": "BOOL"},
                              {"name": "hasOutstandingFines", "type": "BOOL"},
                              {"name": "outstandingFines", "type": "INT"},
                              {"name": "customerAge", "type": "INT"},
                              {"name": "seniorAgeLimit", "type": "INT"},
                              {"name": "balance", "type": "INT"},
                              {"name": "isLowSeason", "type": "BOOL"},
                              {"name": "usesCredits", "type": "BOOL"},
                              {"name": "isRefundEligible", "type": "BOOL"},
                              {"name": "isHomeowner", "type": "BOOL"},
                              {"name": "isUnderage", "type": "BOOL"},
                              {"name": "hasSeasonPass", "type": "BOOL"},
                              {"name": "isEmployee", "type": "BOOL"},
                              {"name": "reason", "type": "Reason"},
                              {"name": "role", "type": "Role"},
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

    fn ok(turn: &str, logic: &str) -> bool {
        grounded_in(&[user(turn)], 0, logic, &config(false))
    }

    #[test]
    fn a_fact_without_a_number_must_be_stated_not_asked_nor_denied() {
        // The first review's case: nothing in the question says the buyer is a member.
        assert!(!ok("Do I get free shipping?", "isMember"));
        // The second review's: a question names it, a statement denies it.
        assert!(!ok("Do members get free shipping?", "isMember"));
        assert!(!ok("I am not a member.", "isMember"));
        assert!(!ok("Am I eligible for a refund?", "isRefundEligible"));
        assert!(!ok("Do seniors pay less?", "(= tier GOLD)"));
        assert!(ok("I'm a member, do I get free shipping?", "isMember"));
        assert!(!ok("If I'm a member, do I get free shipping?", "isMember"));
        assert!(!ok("Are you a member, or a guest?", "isMember"));
        assert!(!ok(
            "If I were a member I would get free shipping.",
            "isMember"
        ));
        assert!(ok("I have a membership. Is shipping free?", "isMember"));
        assert!(ok("I am not a member.", "(not isMember)"));
        assert!(ok("I don't have a member card.", "(= isMember false)"));
        assert!(!ok("I have fines.", "hasOutstandingFines"));
        assert!(ok(
            "I have no outstanding fines.",
            "(not hasOutstandingFines)"
        ));
        assert!(!ok("I have no outstanding fines.", "hasOutstandingFines"));
        assert!(!ok("How much do I owe?", "(= outstandingFines 0)"));
        assert!(ok("I have no outstanding fines.", "(= outstandingFines 0)"));
        assert!(!ok("I visit in the high season.", "isLowSeason"));
        assert!(ok(
            "I am 70 and visit in the low season without credits. What is my fee?",
            "(and isLowSeason (not usesCredits))"
        ));
        // Every fact is checked: the age is stated, the membership is not.
        assert!(!ok("I am 70.", "(and (= customerAge 70) isMember)"));
        assert!(ok("I am 70.", "(= customerAge 70)"));
        // Enum values by name, with their polarity.
        assert!(!ok("What does my tier get me?", "(= tier GOLD)"));
        assert!(ok("I'm a gold member.", "(= tier GOLD)"));
        assert!(!ok("I'm not gold.", "(= tier GOLD)"));
        assert!(ok("I'm not gold.", "(not (= tier GOLD))"));
        assert!(ok("I'm not gold.", "(distinct tier GOLD)"));
        assert!(!ok("I am tier 1.", "(= tier TIER_2)"));
        assert!(ok("I am tier 1.", "(= tier TIER_1)"));
        assert!(!ok(
            "My flight had a disruption.",
            "(= reason NO_DISRUPTION)"
        ));
        assert!(ok("My flight was cancelled.", "(= reason CANCELLATION)"));
        assert!(ok("I am an employee.", "(= role EMPLOYEE)"));
        assert!(ok("I am an employee.", "isEmployee"));
        // Words that only start alike are other words.
        assert!(!ok("I work from home.", "isHomeowner"));
        assert!(!ok("I am under the limit.", "isUnderage"));
        assert!(!ok("I am a passenger in the high season.", "hasSeasonPass"));
    }

    #[test]
    fn a_premise_that_is_not_a_conjunction_of_simple_facts_is_not_grounded() {
        // Facts hidden in other shapes are not read out of them.
        assert!(!ok("I am 70.", "(ite isMember (= customerAge 70) false)"));
        assert!(!ok(
            "I am 70.",
            "(not (not (and isMember (= customerAge 70))))"
        ));
        assert!(!ok(
            "I am 70 and a member.",
            "(or isMember (= customerAge 70))"
        ));
        assert!(!ok("I have 500.", "(= (- balance) 500)"));
        assert!(!ok(
            "My age is above the senior age limit.",
            "(>= customerAge seniorAgeLimit)"
        ));
        assert!(!ok("Yes.", "true"));
        assert!(!ok("I am 70.", "(= customerAge"));
        // Arithmetic on numerals is a constant.
        assert!(ok("I am 70.", "(= customerAge (+ 35 35))"));
        assert!(ok(
            "I am 70 and a member.",
            "(and (= customerAge 70) (and isMember true))"
        ));
    }

    #[test]
    fn a_number_must_be_stated_with_its_sign_outside_a_question() {
        assert!(!ok("I have 500 in my account.", "(= balance (- 500))"));
        assert!(ok("My balance is -500.", "(= balance (- 500))"));
        assert!(ok("My balance is -$500.", "(= balance (- 500))"));
        assert!(ok("My balance is minus 500.", "(= balance (- 500))"));
        assert!(!ok("My balance is -500.", "(= balance 500)"));
        // A hyphen after a word or number is no minus sign.
        assert!(ok("I was in ward B-12 for 10-12 days.", "(= balance 12)"));
        assert!(!ok("I am 70.", "(= customerAge (- 1))"));
        // A question's numbers are not the user's facts.
        assert!(!ok(
            "Is the senior discount for 65 and over?",
            "(>= customerAge 65)"
        ));
        assert!(ok("I'm 70, how much do I pay?", "(= customerAge 70)"));
        assert!(ok("I am 70. How much do I pay?", "(= customerAge 70)"));
        assert!(ok("My budget is 35.75 dollars.", "(= balance 35.75)"));
    }

    #[test]
    fn a_yes_or_no_states_the_assistants_question() {
        let asked = |q: &str, a: &str, logic: &str| {
            grounded_in(
                &[
                    user("How much is my ticket?"),
                    ConversationTurn::new(TurnRole::Assistant, q),
                    user(a),
                ],
                2,
                logic,
                &config(false),
            )
        };
        assert!(asked("Are you a member?", "Yes", "isMember"));
        assert!(!asked("Are you a member?", "Yes", "(not isMember)"));
        assert!(asked("Are you a member?", "No.", "(not isMember)"));
        assert!(!asked("Are you a member?", "No.", "isMember"));
        assert!(!asked("Are you a member?", "Maybe", "isMember"));
        // One answer per question, line by line.
        assert!(asked(
            "Are you a member?\nIs it the low season?",
            "no\nyes",
            "(and (not isMember) isLowSeason)"
        ));
        // Two questions and one answer: which one it answers is not guessed.
        assert!(!asked(
            "Are you a member? Is it the low season?",
            "yes",
            "isMember"
        ));
        // A yes does not state a question's numbers: "over 65" is not 65.
        assert!(!asked("Are you over 65?", "Yes", "(= customerAge 65)"));
    }

    #[test]
    fn the_system_prompt_grounds_only_when_the_operator_says_it_states_facts() {
        let system = [ConversationTurn::new(
            TurnRole::System,
            "Seniors (65+) pay $9. The user is 70.",
        )];
        assert!(!grounded_in(
            &system,
            0,
            "(>= customerAge 65)",
            &config(false)
        ));
        assert!(!grounded_in(
            &system,
            0,
            "(= customerAge 70)",
            &config(false)
        ));
        assert!(grounded_in(&system, 0, "(= customerAge 70)", &config(true)));
        let tool = [ConversationTurn::new(TurnRole::Tool, "{\"age\": 70}")];
        assert!(grounded_in(&tool, 0, "(= customerAge 70)", &config(false)));
        assert!(!grounded_in(&tool, 1, "(= customerAge 70)", &config(false)));
    }

    #[test]
    fn names_split_into_words_and_words_into_stems() {
        assert_eq!(name_words("hasOutstandingFines"), ["outstand", "fine"]);
        assert_eq!(variable_words("customerAge"), ["age"]);
        assert_eq!(name_words("LOW_SEASON"), ["low", "season"]);
        assert_eq!(name_words("TIER_2"), ["tier", "2"]);
        assert_eq!(variable_words("isEmployee"), ["employee"]);
        assert_eq!(stem("membership"), stem("member"));
        assert_eq!(stem("members"), stem("member"));
        assert_eq!(stem("cancelled"), stem("cancellation"));
        assert_ne!(stem("passenger"), stem("pass"));
        assert_ne!(stem("homeowner"), stem("home"));
    }
}

//! Parses the rewriting LLM's reply into a [`Decision`].
//!
//! The reply format asked of the LLM:
//!
//! ```text
//! DECISION: REWRITE | ASK_QUESTIONS | IMPOSSIBLE
//! ANSWER:
//! <the answer, or for IMPOSSIBLE the explanation>
//! QUESTION: <one question per line, ASK_QUESTIONS only, at most 5>
//! ```
//!
//! Real models are sloppy, so markers are found through markdown decoration (headings, bold,
//! italics, list bullets and numbers) in any letter case, and CRLF line ends are accepted.
//! A reply without a recognisable decision is a REWRITE whose answer is the whole reply.

use serde::{Deserialize, Serialize};
use std::fmt;

/// The most follow-up questions one decision may ask.
pub const MAX_QUESTIONS: usize = 5;

/// What the rewriting LLM decided to do.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum DecisionKind {
    /// Replace the answer with the one given.
    Rewrite,
    /// Ask the user the questions given before answering.
    AskQuestions,
    /// The question's premises contradict the policy; the answer explains why.
    Impossible,
}

impl DecisionKind {
    /// The upper-case word used in the reply format.
    pub fn as_str(self) -> &'static str {
        match self {
            DecisionKind::Rewrite => "REWRITE",
            DecisionKind::AskQuestions => "ASK_QUESTIONS",
            DecisionKind::Impossible => "IMPOSSIBLE",
        }
    }

    /// Reads a decision word, forgiving case, spaces/hyphens for underscores and decoration.
    fn from_word(word: &str) -> Option<Self> {
        let norm: String = word
            .chars()
            .filter(|c| c.is_alphanumeric())
            .flat_map(char::to_uppercase)
            .collect();
        match norm.as_str() {
            "REWRITE" => Some(DecisionKind::Rewrite),
            "ASKQUESTIONS" | "ASKQUESTION" | "QUESTIONS" => Some(DecisionKind::AskQuestions),
            "IMPOSSIBLE" => Some(DecisionKind::Impossible),
            _ => None,
        }
    }
}

impl fmt::Display for DecisionKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The parsed reply of the rewriting LLM.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Decision {
    /// What the LLM decided.
    pub decision: DecisionKind,
    /// The new answer (REWRITE), the explanation (IMPOSSIBLE), or any preamble (ASK_QUESTIONS).
    pub answer: String,
    /// The follow-up questions (ASK_QUESTIONS only), at most [`MAX_QUESTIONS`], none empty.
    pub questions: Vec<String>,
}

impl Decision {
    /// Renders the decision in the reply format; [`parse_decision`] reads it back unchanged
    /// when the decision is canonical (see [`Decision::canonical`]).
    pub fn render(&self) -> String {
        let mut out = format!("DECISION: {}\n", self.decision);
        if !self.answer.is_empty() {
            out.push_str("ANSWER:\n");
            out.push_str(&self.answer);
            out.push('\n');
        }
        for q in &self.questions {
            out.push_str("QUESTION: ");
            out.push_str(q);
            out.push('\n');
        }
        out
    }

    /// The form this decision has after a render/parse round trip: answer without CR, leading
    /// blank lines or trailing whitespace; questions single-line, trimmed, non-empty, at most
    /// five, and only for ASK_QUESTIONS.
    pub fn canonical(&self) -> Decision {
        let answer = clean_block(&self.answer.replace("\r\n", "\n").replace('\r', "\n"));
        let questions = if self.decision == DecisionKind::AskQuestions {
            self.questions
                .iter()
                .map(|q| clean_question(&q.replace(['\r', '\n'], " ")))
                .filter(|q| !q.is_empty())
                .take(MAX_QUESTIONS)
                .collect()
        } else {
            Vec::new()
        };
        Decision {
            decision: self.decision,
            answer,
            questions,
        }
    }
}

/// A line's marker (`DECISION`, `ANSWER`, `QUESTION`, `EXPLANATION`) and the text after it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Marker {
    Decision,
    Answer,
    Question,
    Explanation,
}

/// Characters models wrap markers in: markdown emphasis, headings, quotes, backticks.
fn is_decoration(c: char) -> bool {
    matches!(c, '*' | '_' | '#' | '>' | '`' | '~')
}

/// Strips what may precede a marker: indentation, heading hashes, quote marks, emphasis,
/// list bullets (`-`, `*`, `+`, `•`) and list numbers (`1.`, `2)`).
fn strip_line_prefix(line: &str) -> &str {
    let mut s = line.trim_start();
    loop {
        let before = s;
        s = s.trim_start_matches(is_decoration).trim_start();
        s = s.trim_start_matches(['-', '+', '•']).trim_start();
        // A list number: digits followed by '.' or ')'.
        let digits = s.len() - s.trim_start_matches(|c: char| c.is_ascii_digit()).len();
        if digits > 0 {
            let rest = &s[digits..];
            if let Some(r) = rest.strip_prefix(['.', ')']) {
                s = r.trim_start();
            }
        }
        if s == before {
            return s;
        }
    }
}

/// If `line` starts with a marker, returns it and the text after the colon.
fn split_marker(line: &str) -> Option<(Marker, &str)> {
    let s = strip_line_prefix(line);
    let word_len = s
        .find(|c: char| !c.is_ascii_alphabetic())
        .unwrap_or(s.len());
    let marker = match s[..word_len].to_ascii_uppercase().as_str() {
        "DECISION" => Marker::Decision,
        "ANSWER" => Marker::Answer,
        "QUESTION" => Marker::Question,
        "EXPLANATION" => Marker::Explanation,
        _ => return None,
    };
    // Allow emphasis or spaces between the word and the colon: `**DECISION**:`.
    let rest = s[word_len..].trim_start_matches(|c: char| is_decoration(c) || c == ' ');
    let rest = rest.strip_prefix(':')?;
    // Emphasis closing after the colon: `**DECISION:** REWRITE`.
    let rest = rest.trim_start_matches(is_decoration);
    Some((marker, rest))
}

/// Trims a question: whitespace and markdown emphasis around it.
fn clean_question(q: &str) -> String {
    q.trim()
        .trim_matches(|c: char| matches!(c, '*' | '_' | '`'))
        .trim()
        .to_string()
}

/// Drops leading blank lines and trailing whitespace; keeps indentation and inner blank lines.
fn clean_block(text: &str) -> String {
    let trimmed_end = text.trim_end();
    let mut start = 0;
    for line in trimmed_end.split_inclusive('\n') {
        if line.trim().is_empty() {
            start += line.len();
        } else {
            break;
        }
    }
    trimmed_end[start..].to_string()
}

/// The block that starts with the text after a marker on its own line (leading spaces of that
/// text dropped) and continues with the following lines verbatim.
fn block_after(first: &str, rest: &[&str]) -> String {
    let mut text = first.trim_start().to_string();
    for line in rest {
        text.push('\n');
        text.push_str(line);
    }
    clean_block(&text)
}

/// Parses a rewriting LLM reply. Never fails: anything unrecognisable is a REWRITE with the
/// whole reply as the answer.
pub fn parse_decision(reply: &str) -> Decision {
    let normalized = reply.replace("\r\n", "\n").replace('\r', "\n");
    let lines: Vec<&str> = normalized.split('\n').collect();

    let whole_reply = || Decision {
        decision: DecisionKind::Rewrite,
        answer: clean_block(&normalized),
        questions: Vec::new(),
    };

    // The first DECISION line wins.
    let Some((decision_at, word_text)) = lines.iter().enumerate().find_map(|(i, l)| {
        split_marker(l).and_then(|(m, rest)| (m == Marker::Decision).then_some((i, rest)))
    }) else {
        return whole_reply();
    };
    let word = word_text
        .trim()
        .trim_start_matches(|c: char| is_decoration(c) || c.is_whitespace());
    // The decision word may be written with spaces ("ASK QUESTIONS"); try two words, then one.
    let words: Vec<&str> = word.split_whitespace().collect();
    let kind = (words.len() >= 2)
        .then(|| DecisionKind::from_word(&format!("{}{}", words[0], words[1])))
        .flatten()
        .filter(|k| *k == DecisionKind::AskQuestions)
        .or_else(|| words.first().and_then(|w| DecisionKind::from_word(w)));
    let Some(kind) = kind else {
        return whole_reply();
    };

    let after = &lines[decision_at + 1..];
    let answer_marker = after.iter().enumerate().find_map(|(i, l)| {
        split_marker(l).and_then(|(m, rest)| {
            let wanted = m == Marker::Answer
                || (kind == DecisionKind::Impossible && m == Marker::Explanation);
            wanted.then_some((i, rest))
        })
    });

    match kind {
        DecisionKind::Rewrite | DecisionKind::Impossible => {
            let answer = match answer_marker {
                Some((i, first)) => block_after(first, &after[i + 1..]),
                None => block_after("", after),
            };
            Decision {
                decision: kind,
                answer,
                questions: Vec::new(),
            }
        }
        DecisionKind::AskQuestions => {
            let mut questions = Vec::new();
            let mut first_question_at = None;
            for (i, line) in after.iter().enumerate() {
                if let Some((Marker::Question, text)) = split_marker(line) {
                    first_question_at.get_or_insert(i);
                    let q = clean_question(text);
                    if !q.is_empty() && questions.len() < MAX_QUESTIONS {
                        questions.push(q);
                    }
                }
            }
            // An ANSWER block before the questions is kept as a preamble.
            let answer = match answer_marker {
                Some((i, first)) if first_question_at.is_none_or(|q| i < q) => {
                    let end = first_question_at.unwrap_or(after.len());
                    block_after(first, &after[i + 1..end])
                }
                _ => String::new(),
            };
            Decision {
                decision: kind,
                answer,
                questions,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn d(kind: DecisionKind, answer: &str, questions: &[&str]) -> Decision {
        Decision {
            decision: kind,
            answer: answer.into(),
            questions: questions.iter().map(|q| q.to_string()).collect(),
        }
    }

    #[test]
    fn plain_rewrite_with_answer_marker() {
        let r = parse_decision("DECISION: REWRITE\nANSWER: The fee is $10.");
        assert_eq!(r, d(DecisionKind::Rewrite, "The fee is $10.", &[]));
    }

    #[test]
    fn answer_directly_after_decision_line() {
        let r = parse_decision("DECISION: REWRITE\nThe fee is $10.\n\nSeniors pay less.");
        assert_eq!(
            r,
            d(
                DecisionKind::Rewrite,
                "The fee is $10.\n\nSeniors pay less.",
                &[]
            )
        );
    }

    #[test]
    fn answer_keeps_blank_lines_and_indentation() {
        let r = parse_decision("DECISION: REWRITE\nANSWER:\n  First.\n\n\n    - item\n  Last.\n\n");
        assert_eq!(r.answer, "  First.\n\n\n    - item\n  Last.");
    }

    #[test]
    fn issue_example_heading_and_bullets() {
        let r = parse_decision("### DECISION: ASK_QUESTIONS\nQUESTION: a?\n- QUESTION: b?");
        assert_eq!(r, d(DecisionKind::AskQuestions, "", &["a?", "b?"]));
    }

    #[test]
    fn bold_markers_and_any_case() {
        let r = parse_decision("**DECISION:** rewrite\n**Answer:** Yes, you can.");
        assert_eq!(r, d(DecisionKind::Rewrite, "Yes, you can.", &[]));
        let r = parse_decision("__decision__: *Ask_Questions*\n1. **QUESTION:** How old are you?\n2) question: Is it low season?");
        assert_eq!(
            r,
            d(
                DecisionKind::AskQuestions,
                "",
                &["How old are you?", "Is it low season?"]
            )
        );
    }

    #[test]
    fn decision_words_with_spaces_or_hyphens() {
        assert_eq!(
            parse_decision("DECISION: ask questions\nQUESTION: x?").decision,
            DecisionKind::AskQuestions
        );
        assert_eq!(
            parse_decision("DECISION: Ask-Questions\nQUESTION: x?").decision,
            DecisionKind::AskQuestions
        );
        assert_eq!(
            parse_decision("DECISION: REWRITE.\nok").decision,
            DecisionKind::Rewrite
        );
    }

    #[test]
    fn crlf_line_ends() {
        let r = parse_decision("DECISION: REWRITE\r\nANSWER:\r\nPara one.\r\n\r\nPara two.\r\n");
        assert_eq!(r.answer, "Para one.\n\nPara two.");
    }

    #[test]
    fn first_decision_line_wins() {
        let r = parse_decision(
            "Thinking...\nDECISION: IMPOSSIBLE\nDenied boarding contradicts the rules.\nDECISION: REWRITE",
        );
        assert_eq!(r.decision, DecisionKind::Impossible);
        assert_eq!(
            r.answer,
            "Denied boarding contradicts the rules.\nDECISION: REWRITE"
        );
    }

    #[test]
    fn impossible_with_explanation_marker() {
        let r = parse_decision("DECISION: IMPOSSIBLE\nEXPLANATION: You cannot be both.");
        assert_eq!(r, d(DecisionKind::Impossible, "You cannot be both.", &[]));
    }

    #[test]
    fn no_decision_line_is_rewrite_with_whole_reply() {
        let reply = "Seniors pay $9.\n\nTax is 10%.";
        assert_eq!(parse_decision(reply), d(DecisionKind::Rewrite, reply, &[]));
    }

    #[test]
    fn unknown_decision_word_is_rewrite_with_whole_reply() {
        let reply = "DECISION: MAYBE\nsomething";
        assert_eq!(parse_decision(reply), d(DecisionKind::Rewrite, reply, &[]));
    }

    #[test]
    fn empty_decision_word_is_rewrite_with_whole_reply() {
        let reply = "DECISION:\nANSWER: x";
        assert_eq!(parse_decision(reply), d(DecisionKind::Rewrite, reply, &[]));
    }

    #[test]
    fn whitespace_only_reply() {
        assert_eq!(
            parse_decision(" \n\t\r\n "),
            d(DecisionKind::Rewrite, "", &[])
        );
        assert_eq!(parse_decision(""), d(DecisionKind::Rewrite, "", &[]));
    }

    #[test]
    fn at_most_five_questions_and_empty_ones_skipped() {
        let reply = "DECISION: ASK_QUESTIONS\nQUESTION: 1?\nQUESTION:   \nQUESTION: 2?\nQUESTION: 3?\nQUESTION: 4?\nQUESTION: 5?\nQUESTION: 6?";
        let r = parse_decision(reply);
        assert_eq!(r.questions, vec!["1?", "2?", "3?", "4?", "5?"]);
    }

    #[test]
    fn questions_are_not_taken_from_a_rewrite() {
        let r = parse_decision("DECISION: REWRITE\nANSWER: Fine.\nQUESTION: ignored?");
        assert!(r.questions.is_empty());
        assert_eq!(r.answer, "Fine.\nQUESTION: ignored?");
    }

    #[test]
    fn ask_questions_with_preamble() {
        let r =
            parse_decision("DECISION: ASK_QUESTIONS\nANSWER: I need to know more.\nQUESTION: Age?");
        assert_eq!(
            r,
            d(
                DecisionKind::AskQuestions,
                "I need to know more.",
                &["Age?"]
            )
        );
    }

    #[test]
    fn word_prefix_that_is_not_a_marker() {
        // "Decisions: ..." and "Answered" are prose, not markers.
        let reply = "Decisions: we made some\nAnswered: yes";
        assert_eq!(parse_decision(reply), d(DecisionKind::Rewrite, reply, &[]));
    }

    #[test]
    fn render_round_trips_examples() {
        for dec in [
            d(DecisionKind::Rewrite, "A.\n\n  B.", &[]),
            d(DecisionKind::AskQuestions, "", &["a?", "b?"]),
            d(DecisionKind::AskQuestions, "Need facts.", &["a?"]),
            d(DecisionKind::Impossible, "Cannot be both.", &[]),
            d(DecisionKind::Rewrite, "", &[]),
        ] {
            assert_eq!(parse_decision(&dec.render()), dec);
        }
    }

    fn kind_strategy() -> impl Strategy<Value = DecisionKind> {
        prop_oneof![
            Just(DecisionKind::Rewrite),
            Just(DecisionKind::AskQuestions),
            Just(DecisionKind::Impossible)
        ]
    }

    /// Text that does not itself start a marker line, so the rendered form is unambiguous.
    fn body_line() -> impl Strategy<Value = String> {
        "[ a-zA-Z0-9.,?!$%()'-]{0,40}"
            .prop_filter("not a marker line", |l| split_marker(l).is_none())
    }

    proptest! {
        #[test]
        fn never_panics(reply in "(?s).{0,400}") {
            let r = parse_decision(&reply);
            prop_assert!(r.questions.len() <= MAX_QUESTIONS);
        }

        #[test]
        fn never_panics_on_marker_soup(parts in proptest::collection::vec(
            prop_oneof![
                Just("DECISION:".to_string()), Just("ANSWER:".to_string()),
                Just("QUESTION:".to_string()), Just("**".to_string()), Just("\r\n".to_string()),
                Just("\n".to_string()), Just("# ".to_string()), Just("- ".to_string()),
                Just("1. ".to_string()), Just("ASK_QUESTIONS".to_string()),
                Just("REWRITE".to_string()), Just("IMPOSSIBLE".to_string()),
                "[ -~]{0,8}", "\\PC{0,3}",
            ], 0..40)) {
            let reply = parts.concat();
            let r = parse_decision(&reply);
            prop_assert!(r.questions.len() <= MAX_QUESTIONS);
            prop_assert!(r.questions.iter().all(|q| !q.trim().is_empty()));
        }

        #[test]
        fn round_trips_rendered_decisions(
            kind in kind_strategy(),
            answer_lines in proptest::collection::vec(body_line(), 0..6),
            questions in proptest::collection::vec("[a-zA-Z0-9 ?,.'-]{0,30}", 0..8),
        ) {
            let dec = Decision { decision: kind, answer: answer_lines.join("\n"), questions }.canonical();
            prop_assert_eq!(parse_decision(&dec.render()), dec);
        }
    }
}

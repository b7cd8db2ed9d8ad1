//! Prompt templates of the rewriting loop, rendered from findings.
//!
//! Four templates: the initial answer, the rewrite (one guidance paragraph per finding kind,
//! the highest-priority finding in full and the others summarised), the regeneration after the
//! user answered follow-up questions, and the regeneration after the user skipped them. The
//! reply format a rewrite asks for is rendered with [`Decision::render`], so it is by
//! construction the format [`crate::parse_decision`] reads.
//!
//! Templates are part of the audit format: replay recomputes every prompt and compares it
//! with the recorded one, so changing a template means a new [`crate::audit::FORMAT_VERSION`].

mod context;
mod feedback;

pub use context::{PolicyContext, PolicyRuleText, PolicyVariableText};

use crate::decision::{Decision, DecisionKind, MAX_QUESTIONS};
use crate::findings::{Finding, FindingKind};
use crate::thread::{ClarificationExchange, ClarificationResponse};
use crate::verdict::{prioritize, top_finding};
use std::fmt::Write as _;

/// The decisions a rewrite prompt offers for the highest-priority finding: REWRITE always,
/// ASK_QUESTIONS for TRANSLATION_AMBIGUOUS and SATISFIABLE when follow-up questions are
/// allowed, IMPOSSIBLE for IMPOSSIBLE.
pub fn offered_decisions(top: FindingKind, allow_questions: bool) -> Vec<DecisionKind> {
    let mut offered = vec![DecisionKind::Rewrite];
    if allow_questions && top.allows_follow_up_questions() {
        offered.push(DecisionKind::AskQuestions);
    }
    if top == FindingKind::Impossible {
        offered.push(DecisionKind::Impossible);
    }
    offered
}

/// What a rewrite prompt is rendered from.
#[derive(Debug, Clone, Copy)]
pub struct RewriteRequest<'a> {
    /// The user's question.
    pub question: &'a str,
    /// The answer that was validated.
    pub answer: &'a str,
    /// All findings of its validation (the highest-priority one is addressed).
    pub findings: &'a [Finding],
    /// Rules and variables to show.
    pub policy: &'a PolicyContext,
    /// Earlier follow-up questions and what became of them.
    pub clarifications: &'a [ClarificationExchange],
    /// The decisions the LLM may reply with (see [`offered_decisions`]).
    pub offered: &'a [DecisionKind],
}

/// Why an answer is regenerated rather than rewritten.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RegenerationReason {
    /// The user answered the follow-up questions.
    Clarified,
    /// The user skipped the questions, or did not answer in time.
    Skipped,
}

/// What a regeneration prompt is rendered from.
#[derive(Debug, Clone, Copy)]
pub struct RegenerateRequest<'a> {
    /// The user's question.
    pub question: &'a str,
    /// The last answer, whose validation led to the questions.
    pub previous_answer: &'a str,
    /// The findings of that validation.
    pub findings: &'a [Finding],
    /// Rules and variables to show.
    pub policy: &'a PolicyContext,
    /// Every follow-up exchange so far, the latest last.
    pub clarifications: &'a [ClarificationExchange],
    /// Answered or skipped.
    pub reason: RegenerationReason,
}

fn section(out: &mut String, title: &str, body: &str) {
    let body = body.trim_end();
    if body.is_empty() {
        return;
    }
    let _ = write!(out, "\n{title}:\n{body}\n");
}

fn policy_section(out: &mut String, policy: &PolicyContext) {
    let mut rules = String::new();
    for r in &policy.rules {
        let _ = writeln!(rules, "- {}: {}", r.id, r.readable());
    }
    section(out, "POLICY RULES", &rules);
    let mut vars = String::new();
    for v in &policy.variables {
        if v.description.trim().is_empty() {
            let _ = writeln!(vars, "- {}", v.name);
        } else {
            let _ = writeln!(vars, "- {}: {}", v.name, v.description.trim());
        }
    }
    section(out, "POLICY VARIABLES", &vars);
}

fn clarifications_section(out: &mut String, exchanges: &[ClarificationExchange]) {
    let mut text = String::new();
    for ex in exchanges {
        match &ex.response {
            Some(ClarificationResponse::Answered { answers, .. })
                if answers.len() == ex.questions.len() =>
            {
                for (q, a) in ex.questions.iter().zip(answers) {
                    let a = if a.trim().is_empty() {
                        "(no answer)"
                    } else {
                        a.trim()
                    };
                    let _ = writeln!(text, "Q: {q}\nA: {a}");
                }
            }
            Some(ClarificationResponse::Answered { answers, .. }) => {
                for q in &ex.questions {
                    let _ = writeln!(text, "Q: {q}");
                }
                let _ = writeln!(text, "The user replied: {}", answers.join(" / "));
            }
            Some(ClarificationResponse::Skipped { .. }) => {
                for q in &ex.questions {
                    let _ = writeln!(text, "Q: {q}\nA: (the user skipped this question)");
                }
            }
            Some(ClarificationResponse::TimedOut { .. }) => {
                for q in &ex.questions {
                    let _ = writeln!(text, "Q: {q}\nA: (the user did not answer in time)");
                }
            }
            None => {
                for q in &ex.questions {
                    let _ = writeln!(text, "Q: {q}\nA: (not answered yet)");
                }
            }
        }
    }
    section(out, "CLARIFICATIONS FROM THE USER", &text);
}

/// The feedback block: the highest-priority finding in full, then a summary of the others.
fn feedback_section(out: &mut String, findings: &[Finding], policy: &PolicyContext) {
    let Some(top) = top_finding(findings) else {
        section(out, "CHECKER FEEDBACK", "The checker returned no findings.");
        return;
    };
    let mut text = format!(
        "Most important problem: {}\n{}\n",
        top.kind(),
        feedback::guidance(top.kind())
    );
    text.push_str(&feedback::render_finding(top, policy));
    section(out, "CHECKER FEEDBACK", &text);

    // The others, most urgent first; the top one is the first of the prioritised list.
    let mut others = String::new();
    for f in prioritize(findings).iter().skip(1) {
        let _ = writeln!(others, "- {}", feedback::summary_line(f));
        let mut warning = String::new();
        feedback::logic_warning(&mut warning, f.logic_warning());
        for line in warning.lines() {
            let _ = writeln!(others, "  {line}");
        }
    }
    section(out, "OTHER FINDINGS", &others);
}

/// The reply-format instructions for the offered decisions, with examples rendered by
/// [`Decision::render`].
fn reply_format(offered: &[DecisionKind]) -> String {
    let mut out = String::from(
        "Reply in exactly one of the formats below, starting with the DECISION line and with \
         nothing before it.\n",
    );
    for kind in offered {
        let (when, example) = match kind {
            DecisionKind::Rewrite => (
                "To rewrite the answer (give the complete new answer for the user):".to_string(),
                Decision {
                    decision: DecisionKind::Rewrite,
                    answer: "<the complete rewritten answer>".into(),
                    questions: vec![],
                },
            ),
            DecisionKind::AskQuestions => (
                format!(
                    "To ask the user for the facts that decide the answer (one question per \
                     line, at most {MAX_QUESTIONS}):"
                ),
                Decision {
                    decision: DecisionKind::AskQuestions,
                    answer: String::new(),
                    questions: vec!["<first question>".into(), "<second question>".into()],
                },
            ),
            DecisionKind::Impossible => (
                "If the question's own facts cannot all hold under the policy (explain which \
                 facts conflict and which rules they break):"
                    .to_string(),
                Decision {
                    decision: DecisionKind::Impossible,
                    answer: "<the explanation for the user>".into(),
                    questions: vec![],
                },
            ),
        };
        let _ = write!(out, "\n{when}\n{}", example.render());
    }
    out
}

/// The prompt for the first answer.
pub fn initial_answer(question: &str, policy: &PolicyContext) -> String {
    let mut out = String::from(
        "Answer the user's question. Be precise: state the facts your answer relies on, and if \
         the answer depends on facts the question does not give, say under which conditions \
         each part holds. The answer will be checked against the policy below.\n",
    );
    policy_section(&mut out, policy);
    section(&mut out, "QUESTION", question);
    out.push_str("\nReply with the answer for the user only.\n");
    out
}

/// The prompt asking the LLM to address the highest-priority finding of the last validation.
pub fn rewrite(req: &RewriteRequest<'_>) -> String {
    let mut out = String::from(
        "You wrote an answer to the user's question. An automated reasoning checker compared it \
         with the policy and found problems. Address the most important problem first; keep what \
         the checker proved.\n",
    );
    section(&mut out, "QUESTION", req.question);
    section(&mut out, "YOUR ANSWER", req.answer);
    policy_section(&mut out, req.policy);
    clarifications_section(&mut out, req.clarifications);
    feedback_section(&mut out, req.findings, req.policy);
    out.push('\n');
    out.push_str(&reply_format(req.offered));
    out
}

/// The prompt for a new answer after the user answered or skipped follow-up questions.
pub fn regenerate(req: &RegenerateRequest<'_>) -> String {
    let intro = match req.reason {
        RegenerationReason::Clarified => {
            "The user answered your follow-up questions. Write a new answer to the question that \
             uses these facts and agrees with the policy. State the facts you rely on.\n"
        }
        RegenerationReason::Skipped => {
            "The user did not answer your follow-up questions. Write the best answer you can \
             without those facts: do not assume them, and state under which conditions each part \
             of the answer holds.\n"
        }
    };
    let mut out = String::from(intro);
    section(&mut out, "QUESTION", req.question);
    section(&mut out, "PREVIOUS ANSWER", req.previous_answer);
    policy_section(&mut out, req.policy);
    clarifications_section(&mut out, req.clarifications);
    feedback_section(&mut out, req.findings, req.policy);
    out.push_str("\nReply with the new answer for the user only.\n");
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::decision::parse_decision;
    use crate::findings::{ContradictionFinding, Rule, Statement, Translation};

    fn ctx() -> PolicyContext {
        PolicyContext {
            rules: vec![PolicyRuleText {
                id: "R1".into(),
                expression: "(=> (>= age 65) (= fee 5))".into(),
                english: Some("Visitors aged 65 or more pay 5 dollars.".into()),
            }],
            variables: vec![PolicyVariableText {
                name: "age".into(),
                description: "The visitor's age in years".into(),
            }],
        }
    }

    #[test]
    fn every_offered_format_example_parses_back() {
        for kind in [
            FindingKind::Invalid,
            FindingKind::Impossible,
            FindingKind::Satisfiable,
            FindingKind::TranslationAmbiguous,
        ] {
            let offered = offered_decisions(kind, true);
            let text = reply_format(&offered);
            for d in &offered {
                let start = text
                    .find(&format!("DECISION: {d}"))
                    .expect("example present");
                let example: String = text[start..]
                    .lines()
                    .take_while(|l| !l.is_empty())
                    .collect::<Vec<_>>()
                    .join("\n");
                assert_eq!(parse_decision(&example).decision, *d, "{example}");
            }
        }
    }

    #[test]
    fn questions_only_when_allowed() {
        assert_eq!(
            offered_decisions(FindingKind::Satisfiable, true),
            vec![DecisionKind::Rewrite, DecisionKind::AskQuestions]
        );
        assert_eq!(
            offered_decisions(FindingKind::Satisfiable, false),
            vec![DecisionKind::Rewrite]
        );
        assert_eq!(
            offered_decisions(FindingKind::Impossible, true),
            vec![DecisionKind::Rewrite, DecisionKind::Impossible]
        );
        assert_eq!(
            offered_decisions(FindingKind::Invalid, true),
            vec![DecisionKind::Rewrite]
        );
    }

    #[test]
    fn rewrite_prompt_shows_rules_in_english_and_claims_in_natural_language() {
        let finding = Finding::Invalid(ContradictionFinding {
            translation: Some(Translation {
                premises: Some(vec![Statement::new("(= age 70)", "The visitor is 70.")]),
                claims: Some(vec![Statement::new("(= fee 10)", "The fee is 10 dollars.")]),
                ..Default::default()
            }),
            contradicting_rules: Some(vec![Rule::new("R1", "local:abc")]),
            ..Default::default()
        });
        let prompt = rewrite(&RewriteRequest {
            question: "How much do I pay at 70?",
            answer: "You pay 10 dollars.",
            findings: &[finding, Finding::Valid(Default::default())],
            policy: &ctx(),
            clarifications: &[],
            offered: &[DecisionKind::Rewrite],
        });
        assert!(prompt.contains("Most important problem: INVALID"));
        assert!(prompt.contains("- The fee is 10 dollars."));
        assert!(prompt.contains(
            "- R1: Visitors aged 65 or more pay 5 dollars. [(=> (>= age 65) (= fee 5))]"
        ));
        assert!(prompt.contains("OTHER FINDINGS:\n- VALID"));
        assert!(prompt.contains("DECISION: REWRITE"));
        assert!(!prompt.contains("DECISION: ASK_QUESTIONS"));
    }
}

/// The one message appended to the app's own conversation when the rewriter is called in the
/// app's voice (`[rewriter] context = "app"`): it says who is speaking and that the app's
/// instructions above still hold, then carries the loop's prompt (findings and instructions)
/// unchanged.
pub fn in_app_conversation(prompt: &str) -> String {
    format!(
        "[This message is from proofgate, the policy checker in front of this assistant, not \
         from the user.] Your reply to the conversation above is being checked against the \
         policy. Keep following the instructions, persona, language and format of the \
         conversation above, and do not call tools: answer with text only, in the format asked \
         for below.\n\n{prompt}"
    )
}

#[cfg(test)]
mod in_app_tests {
    #[test]
    fn the_framing_keeps_the_prompt_and_names_its_author() {
        let p = super::in_app_conversation("DECISION: REWRITE ...");
        assert!(p.starts_with("[This message is from proofgate"));
        assert!(p.ends_with("DECISION: REWRITE ..."));
    }
}

//! Renders findings as feedback the rewriting LLM can act on: statements in natural language
//! (logic as a fallback), rules in English when the policy context has them, the variables
//! that decide a SATISFIABLE finding, the interpretations of an ambiguous one, logic warnings.

use super::context::PolicyContext;
use crate::findings::{
    Finding, FindingKind, InputTextReference, LogicWarning, LogicWarningType, Rule, Scenario,
    Statement, Translation,
};
use std::fmt::Write as _;

/// Appends `- text` lines for statements, or nothing when there are none.
fn statements(out: &mut String, heading: &str, list: &[Statement], q: Quote) {
    if list.is_empty() {
        return;
    }
    let _ = writeln!(out, "{heading}");
    for s in list {
        let _ = writeln!(out, "- {}", q.text(s.display_text()));
    }
}

/// Collapses line breaks so that a statement stays on its bullet line.
fn one_line(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// How feedback shows what the translators wrote (their statements, the text they left
/// untranslated, which they copy from the answer): from audit format 16
/// ([`crate::audit::QUOTED_FEEDBACK_SINCE`]) as a JSON string, which the feedback's heading
/// calls data; before, as it was, where the answer's own "Checker requirement: ..." read as
/// proofgate's.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Quote(pub(crate) bool);

impl Quote {
    /// `text` on one line, quoted when this feedback quotes.
    fn text(self, text: &str) -> String {
        let line = one_line(text);
        if !self.0 {
            return line;
        }
        serde_json::to_string(&line)
            .unwrap_or_default()
            .replace('\u{2028}', "\\u2028")
            .replace('\u{2029}', "\\u2029")
            .replace('\u{85}', "\\u0085")
    }
}

/// One rule as the LLM should read it: `id: English (logic)` when the context knows it.
pub(crate) fn rule_line(rule: &Rule, ctx: &PolicyContext) -> String {
    let id = rule.identifier.as_deref().unwrap_or("(unnamed rule)");
    match ctx.rule(id) {
        Some(r) => match (&r.english, r.expression.trim()) {
            (Some(en), expr) if !expr.is_empty() => format!("{id}: {} [{expr}]", one_line(en)),
            (Some(en), _) => format!("{id}: {}", one_line(en)),
            (None, expr) if !expr.is_empty() => format!("{id}: {expr}"),
            _ => id.to_string(),
        },
        None => id.to_string(),
    }
}

fn rules(out: &mut String, heading: &str, list: Option<&Vec<Rule>>, ctx: &PolicyContext) {
    let Some(list) = list.filter(|l| !l.is_empty()) else {
        return;
    };
    let _ = writeln!(out, "{heading}");
    for r in list {
        let _ = writeln!(out, "- {}", rule_line(r, ctx));
    }
}

fn untranslated(out: &mut String, heading: &str, list: Option<&Vec<InputTextReference>>, q: Quote) {
    let texts: Vec<&str> = list
        .into_iter()
        .flatten()
        .filter_map(|r| r.text.as_deref())
        .filter(|t| !t.trim().is_empty())
        .collect();
    if texts.is_empty() {
        return;
    }
    let _ = writeln!(out, "{heading}");
    for t in texts {
        let _ = writeln!(out, "- {}", q.text(t));
    }
}

fn translation(out: &mut String, t: &Translation, q: Quote) {
    statements(out, "Premises (facts given or assumed):", t.premises(), q);
    statements(out, "Claims (what the answer states):", t.claims(), q);
    untranslated(
        out,
        "Premises outside the policy's vocabulary:",
        t.untranslated_premises.as_ref(),
        q,
    );
    untranslated(
        out,
        "Claims outside the policy's vocabulary:",
        t.untranslated_claims.as_ref(),
        q,
    );
}

/// Renders a logic warning, if any.
pub(crate) fn logic_warning(out: &mut String, w: Option<&LogicWarning>, q: Quote) {
    let Some(w) = w else { return };
    let what = match &w.warning_type {
        Some(LogicWarningType::AlwaysTrue) => {
            "always true, whatever the rules say (they add nothing)"
        }
        Some(LogicWarningType::AlwaysFalse) => {
            "always false, whatever the rules say (they can never hold)"
        }
        Some(LogicWarningType::Other(_)) | None => "suspicious regardless of the rules",
    };
    let _ = writeln!(out, "Logic warning: these statements are {what}:");
    for s in w.premises.iter().flatten().chain(w.claims.iter().flatten()) {
        let _ = writeln!(out, "- {}", q.text(s.display_text()));
    }
}

/// A variable assignment read from a scenario statement: `(= var value)`, `var`, `(not var)`.
fn assignment(s: &Statement) -> Option<(String, String)> {
    let logic = s.logic.as_deref()?.trim();
    if let Some(inner) = logic.strip_prefix('(').and_then(|l| l.strip_suffix(')')) {
        let tokens = top_level_tokens(inner);
        return match tokens.as_slice() {
            [op, var, value @ ..] if *op == "=" && !value.is_empty() => {
                Some((var.to_string(), value.join(" ")))
            }
            [op, var] if *op == "not" && is_symbol(var) => Some((var.to_string(), "false".into())),
            _ => None,
        };
    }
    is_symbol(logic).then(|| (logic.to_string(), "true".into()))
}

fn is_symbol(s: &str) -> bool {
    !s.is_empty() && !s.contains(|c: char| c.is_whitespace() || c == '(' || c == ')')
}

/// Splits an S-expression body into its top-level tokens (parenthesised groups kept whole).
fn top_level_tokens(s: &str) -> Vec<&str> {
    let mut tokens = Vec::new();
    let mut depth = 0usize;
    let mut start: Option<usize> = None;
    for (i, c) in s.char_indices() {
        match c {
            '(' => {
                if depth == 0 && start.is_none() {
                    start = Some(i);
                }
                depth += 1;
            }
            ')' => {
                depth = depth.saturating_sub(1);
                if depth == 0 {
                    if let Some(st) = start.take() {
                        tokens.push(&s[st..=i]);
                    }
                }
            }
            c if c.is_whitespace() && depth == 0 => {
                if let Some(st) = start.take() {
                    tokens.push(&s[st..i]);
                }
            }
            _ => {
                if start.is_none() {
                    start = Some(i);
                }
            }
        }
    }
    if let Some(st) = start {
        tokens.push(&s[st..]);
    }
    tokens
}

/// The variables whose values differ between the scenario where the claims hold and the one
/// where they fail: the facts the answer (or a follow-up question) has to pin down.
fn differing_variables(
    out: &mut String,
    holds: Option<&Scenario>,
    fails: Option<&Scenario>,
    ctx: &PolicyContext,
    q: Quote,
) {
    let read = |s: Option<&Scenario>| -> Vec<(String, String)> {
        s.map(|s| s.statements().iter().filter_map(assignment).collect())
            .unwrap_or_default()
    };
    let (yes, no) = (read(holds), read(fails));
    let value_in = |list: &[(String, String)], var: &str| {
        list.iter()
            .find(|(v, _)| v == var)
            .map(|(_, val)| val.clone())
    };
    let mut names: Vec<&str> = Vec::new();
    for (var, _) in yes.iter().chain(no.iter()) {
        if !names.contains(&var.as_str()) && value_in(&yes, var) != value_in(&no, var) {
            names.push(var);
        }
    }
    if names.is_empty() {
        // Nothing parseable: show both scenarios so the LLM can compare them itself.
        if let Some(s) = holds {
            statements(out, "A situation where the claims hold:", s.statements(), q);
        }
        if let Some(s) = fails {
            statements(out, "A situation where the claims fail:", s.statements(), q);
        }
        return;
    }
    let _ = writeln!(out, "The facts that decide whether the claims hold:");
    for var in names {
        let meaning = ctx
            .variable(var)
            .map(|v| v.description.trim())
            .filter(|d| !d.is_empty())
            .map(|d| format!(" ({})", one_line(d)))
            .unwrap_or_default();
        let show = |v: Option<String>| v.unwrap_or_else(|| "not fixed".to_string());
        let _ = writeln!(
            out,
            "- {var}{meaning}: {} when the claims hold, {} when they fail",
            show(value_in(&yes, var)),
            show(value_in(&no, var)),
        );
    }
}

/// The full feedback for one finding: what the checker found and why.
pub(crate) fn render_finding(f: &Finding, ctx: &PolicyContext, q: Quote) -> String {
    let mut out = String::new();
    match f {
        Finding::Valid(v) => {
            if let Some(t) = &v.translation {
                translation(&mut out, t, q);
            }
            rules(
                &mut out,
                "Rules that prove the claims:",
                v.supporting_rules.as_ref(),
                ctx,
            );
        }
        Finding::Invalid(c) => {
            if let Some(t) = &c.translation {
                translation(&mut out, t, q);
            }
            rules(
                &mut out,
                "Rules the claims contradict:",
                c.contradicting_rules.as_ref(),
                ctx,
            );
        }
        Finding::Impossible(c) => {
            if let Some(t) = &c.translation {
                translation(&mut out, t, q);
            }
            rules(
                &mut out,
                "Rules the premises contradict:",
                c.contradicting_rules.as_ref(),
                ctx,
            );
        }
        Finding::Satisfiable(s) => {
            if let Some(t) = &s.translation {
                translation(&mut out, t, q);
            }
            differing_variables(
                &mut out,
                s.claims_true_scenario.as_ref(),
                s.claims_false_scenario.as_ref(),
                ctx,
                q,
            );
        }
        Finding::TranslationAmbiguous(a) => {
            for (i, option) in a.options.iter().flatten().enumerate() {
                let _ = writeln!(out, "Interpretation {}:", i + 1);
                for t in option.translations.iter().flatten() {
                    translation(&mut out, t, q);
                }
            }
            for (i, s) in a.difference_scenarios.iter().flatten().enumerate() {
                statements(
                    &mut out,
                    &format!(
                        "A situation where the interpretations disagree ({}):",
                        i + 1
                    ),
                    s.statements(),
                    q,
                );
            }
        }
        Finding::TooComplex(_) => {
            let _ = writeln!(
                out,
                "The checker could not finish: the text is too complex."
            );
        }
        Finding::NoTranslations(_) => {
            let _ = writeln!(
                out,
                "Nothing in this part could be expressed in the policy's terms."
            );
        }
        Finding::Unknown { member, .. } => {
            let _ = writeln!(
                out,
                "The checker returned a result this version does not understand (`{member}`); \
                 treat the answer as unverified."
            );
        }
    }
    logic_warning(&mut out, f.logic_warning(), q);
    out
}

/// A one-line summary of a finding for the "other findings" list.
pub(crate) fn summary_line(f: &Finding, q: Quote) -> String {
    let claims: Vec<String> = f
        .translation()
        .map(|t| {
            t.claims()
                .iter()
                .map(|s| q.text(s.display_text()))
                .collect()
        })
        .unwrap_or_default();
    if claims.is_empty() {
        f.kind().to_string()
    } else {
        format!("{}: {}", f.kind(), claims.join("; "))
    }
}

/// How to address the highest-priority finding, in one paragraph.
pub(crate) fn guidance(kind: FindingKind) -> &'static str {
    match kind {
        FindingKind::Invalid => {
            "The checker proved that the answer's claims contradict the policy, given the \
             premises. Rewrite the answer so that it agrees with the rules listed."
        }
        FindingKind::Impossible => {
            "The checker proved that the premises (facts stated in the question or assumed by \
             the answer) contradict the policy: no situation satisfies all of them. If the \
             answer assumed something the question did not say, rewrite the answer without that \
             assumption. If the question itself states facts that cannot all hold under the \
             policy, reply IMPOSSIBLE and explain to the user which facts conflict and which \
             rules they break."
        }
        FindingKind::Satisfiable => {
            "The claims are true in some situations and false in others: the answer depends on \
             facts it does not pin down. Rewrite the answer so that it states under which \
             conditions each claim holds."
        }
        FindingKind::TranslationAmbiguous => {
            "The checker could read the text in more than one way, and the readings lead to \
             different conclusions. Rewrite the answer in unambiguous words."
        }
        FindingKind::TooComplex => {
            "The checker could not verify the answer because it is too complex. Rewrite it \
             simpler and shorter: fewer claims, one fact per sentence, no nested conditions."
        }
        FindingKind::NoTranslations => {
            "Parts of the answer are outside the policy's vocabulary. Keep to what the policy \
             covers."
        }
        FindingKind::Unknown => {
            "The checker returned a result this version cannot interpret, so the answer is not \
             verified. Rewrite it to state plainly only what the policy rules support."
        }
        FindingKind::Valid => "This part of the answer is proved by the policy.",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::findings::{SatisfiableFinding, Scenario};
    use crate::prompts::context::PolicyVariableText;

    fn scenario(logic: &[&str]) -> Scenario {
        Scenario {
            statements: Some(logic.iter().map(|l| Statement::new(*l, *l)).collect()),
            ..Default::default()
        }
    }

    #[test]
    fn reads_assignments() {
        let a = |l: &str| assignment(&Statement::new(l, ""));
        assert_eq!(a("(= age 70)"), Some(("age".into(), "70".into())));
        assert_eq!(
            a("(= fee (- 10 1))"),
            Some(("fee".into(), "(- 10 1)".into()))
        );
        assert_eq!(a("is_member"), Some(("is_member".into(), "true".into())));
        assert_eq!(
            a("(not is_member)"),
            Some(("is_member".into(), "false".into()))
        );
        assert_eq!(a("(and a b)"), None);
        assert_eq!(a("(= x"), None);
    }

    #[test]
    fn satisfiable_lists_only_the_deciding_variables() {
        let ctx = PolicyContext {
            variables: vec![PolicyVariableText {
                name: "season".into(),
                description: "The travel season".into(),
            }],
            ..Default::default()
        };
        let f = Finding::Satisfiable(SatisfiableFinding {
            claims_true_scenario: Some(scenario(&["(= age 70)", "(= season LOW)"])),
            claims_false_scenario: Some(scenario(&["(= age 70)", "(= season HIGH)"])),
            ..Default::default()
        });
        let text = render_finding(&f, &ctx, Quote(false));
        assert!(text.contains(
            "- season (The travel season): LOW when the claims hold, HIGH when they fail"
        ));
        assert!(!text.contains("- age"));
    }
}

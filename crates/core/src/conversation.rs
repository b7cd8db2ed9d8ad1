//! The app's conversation around an answer: the system prompt, earlier user and assistant
//! turns, tool calls and tool results. Translators read it as context (facts from it may
//! become premises; claims come only from the answer), and each premise is traced back to the
//! turn it came from. From audit format 4 that trace is a rule, not a note: a premise that no
//! user, system or tool turn stated is checked as a claim ([`ground_premises`]).

use crate::findings::{ContradictionFinding, Finding, SatisfiableFinding, Statement, Translation};
use crate::translation::{TranslationConfig, TranslatorOutput};
use serde::{Deserialize, Serialize};

/// Who said a turn.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TurnRole {
    /// The app's instructions.
    System,
    /// The end user.
    User,
    /// The chatbot (an earlier answer, or a tool call it made).
    Assistant,
    /// A tool's result, returned by the app.
    Tool,
}

impl TurnRole {
    /// Lower-case name, as in JSON.
    pub fn as_str(self) -> &'static str {
        match self {
            TurnRole::System => "system",
            TurnRole::User => "user",
            TurnRole::Assistant => "assistant",
            TurnRole::Tool => "tool",
        }
    }
}

/// One turn of the conversation, as text.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ConversationTurn {
    /// Who said it.
    pub role: TurnRole,
    /// What was said; tool calls are rendered as text (`called NAME with ARGS`).
    pub text: String,
}

impl ConversationTurn {
    /// A turn.
    pub fn new(role: TurnRole, text: impl Into<String>) -> ConversationTurn {
        ConversationTurn {
            role,
            text: text.into(),
        }
    }
}

/// Where one premise of a validation came from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PremiseSource {
    /// The premise in SMT-LIB, as a translator wrote it.
    pub logic: String,
    /// Its natural-language text, when the translator gave one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub natural_language: Option<String>,
    /// The conversation turn (1-based, as numbered in the translator prompt) it came from;
    /// `None` when it comes from the answer itself or no turn mentions it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub turn: Option<u32>,
    /// The role of that turn.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub role: Option<TurnRole>,
}

/// The citation a translator puts at the end of a premise's natural language, e.g.
/// `(turn 2)`.
fn cited_turn(text: &str) -> Option<u32> {
    let low = text.to_ascii_lowercase();
    let at = low.rfind("(turn ")?;
    let rest = &low[at + 6..];
    let end = rest.find(')')?;
    rest[..end].trim().parse().ok()
}

/// Whether the user, the system or a tool said turn `turn` (1-based) of `conversation`, and
/// said something: the turns whose facts may be premises. An assistant turn is the chatbot's
/// own word, and a blank turn states nothing (an ApplyGuardrail request without a query).
fn is_stated_turn(conversation: &[ConversationTurn], turn: u32) -> bool {
    turn >= 1
        && conversation
            .get(turn as usize - 1)
            .is_some_and(|t| t.role != TurnRole::Assistant && !t.text.trim().is_empty())
}

/// The numbers a text states: runs of digits with an optional fraction (a comma between
/// digits is a thousands separator), and each also divided by 100 when a percent sign follows.
fn stated_numbers(text: &str) -> Vec<f64> {
    scan_numbers(text).into_iter().map(|(n, _, _)| n).collect()
}

/// An exact rational number: numerator and denominator, reduced, the denominator positive
/// (so two equal numbers are the same pair).
pub(crate) type Ratio = (i128, i128);

fn gcd(a: i128, b: i128) -> i128 {
    let (mut a, mut b) = (a.unsigned_abs(), b.unsigned_abs());
    while b != 0 {
        (a, b) = (b, a % b);
    }
    i128::try_from(a).unwrap_or(1).max(1)
}

/// `n / d` reduced; `None` for a zero denominator or past what an i128 holds.
fn ratio(n: i128, d: i128) -> Option<Ratio> {
    if d == 0 {
        return None;
    }
    let g = gcd(n, d);
    let (n, d) = (n / g, d / g);
    if d < 0 {
        Some((n.checked_neg()?, d.checked_neg()?))
    } else {
        Some((n, d))
    }
}

fn add((a, b): Ratio, (c, d): Ratio) -> Option<Ratio> {
    ratio(
        a.checked_mul(d)?.checked_add(c.checked_mul(b)?)?,
        b.checked_mul(d)?,
    )
}

fn mul((a, b): Ratio, (c, d): Ratio) -> Option<Ratio> {
    ratio(a.checked_mul(c)?, b.checked_mul(d)?)
}

/// The exact value of a numeral, or of arithmetic on numerals alone (`+`, `-`, `*`, `/`,
/// `to_real`); `None` for anything else, a division by zero, or a value past what the
/// computation's i128s hold (then no turn bears it out).
pub(crate) fn exact_value(t: &crate::policy::term::Term) -> Option<Ratio> {
    use crate::policy::term::{Op, TermKind};
    match &t.kind {
        TermKind::Int(n) => ratio(i128::try_from(*n).ok()?, 1),
        TermKind::Decimal { digits, scale } => {
            ratio(i128::try_from(*digits).ok()?, 10i128.checked_pow(*scale)?)
        }
        TermKind::App(op, args) => {
            let v: Vec<Ratio> = args.iter().map(exact_value).collect::<Option<_>>()?;
            let (first, rest) = v.split_first()?;
            match op {
                Op::Add => v.iter().try_fold((0, 1), |a, b| add(a, *b)),
                Op::Sub if rest.is_empty() => ratio(first.0.checked_neg()?, first.1),
                Op::Sub => rest
                    .iter()
                    .try_fold(*first, |a, b| add(a, (b.0.checked_neg()?, b.1))),
                Op::Mul => v.iter().try_fold((1, 1), |a, b| mul(a, *b)),
                Op::Div => rest
                    .iter()
                    .try_fold(*first, |a, b| mul(a, ratio(b.1, b.0)?)),
                Op::ToReal if rest.is_empty() => Some(*first),
                _ => None,
            }
        }
        _ => None,
    }
}

/// A number a turn states: its value, and (read from audit format 11) the exact number it
/// was written as, which an f64 may not tell from its neighbours.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Stated {
    /// Its value, signed.
    pub value: f64,
    /// Exactly what it was written as, signed; `None` past what an i128 holds.
    pub exact: Option<Ratio>,
}

/// [`stated_numbers`] with their signs and the exact numbers they were written as (audit
/// format 7 on): a number is negative when a minus sign stands right before it (or before its
/// currency sign), not after a letter or digit (as in "COVID-19" or "10-20"), or when the word
/// before it is "minus" or "negative".
pub(crate) fn stated_signed_decimals(text: &str) -> Vec<Stated> {
    scan_numbers(text)
        .into_iter()
        .map(|(n, negative, exact)| Stated {
            value: if negative { -n } else { n },
            exact: exact.and_then(|(p, q)| {
                if negative {
                    ratio(p.checked_neg()?, q)
                } else {
                    Some((p, q))
                }
            }),
        })
        .collect()
}

/// `digits` (digits with at most one point) with the point moved `shift` places left, exactly.
fn decimal_ratio(digits: &str, shift: u32) -> Option<Ratio> {
    let (int, frac) = digits.split_once('.').unwrap_or((digits, ""));
    let all: String = int.chars().chain(frac.chars()).collect();
    let scale = u32::try_from(frac.len()).ok()?.checked_add(shift)?;
    ratio(all.parse::<i128>().ok()?, 10i128.checked_pow(scale)?)
}

/// Each number a text states, with whether it is stated negative.
fn scan_numbers(text: &str) -> Vec<(f64, bool, Option<Ratio>)> {
    let chars: Vec<char> = text.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        if !chars[i].is_ascii_digit() {
            i += 1;
            continue;
        }
        let negative = negative_before(&chars, i);
        let mut digits = String::new();
        let mut seen_point = false;
        while i < chars.len() {
            let c = chars[i];
            let next_is_digit = chars.get(i + 1).is_some_and(char::is_ascii_digit);
            if c.is_ascii_digit() {
                digits.push(c);
            } else if c == ',' && next_is_digit && !seen_point {
                // a thousands separator
            } else if c == '.' && next_is_digit && !seen_point {
                seen_point = true;
                digits.push('.');
            } else {
                break;
            }
            i += 1;
        }
        if let Ok(n) = digits.parse::<f64>() {
            out.push((n, negative, decimal_ratio(&digits, 0)));
            let rest = chars[i..].iter().find(|c| !c.is_whitespace());
            if rest == Some(&'%') {
                out.push((n / 100.0, negative, decimal_ratio(&digits, 2)));
            }
        }
    }
    out
}

/// Whether the number starting at `at` is stated negative (see [`stated_signed_decimals`]).
fn negative_before(chars: &[char], at: usize) -> bool {
    let mut j = at;
    if j > 0 && matches!(chars[j - 1], '$' | '€' | '£' | '¥') {
        j -= 1;
    }
    if j > 0 && matches!(chars[j - 1], '-' | '\u{2212}') {
        return j == 1 || !chars[j - 2].is_alphanumeric();
    }
    // The word before it, past spaces: read backwards, and no further than the longest word
    // that counts (the whole text before each number was copied, quadratic in a turn of
    // many numbers such as "1.1.1.1...").
    let mut end = j;
    while end > 0 && chars[end - 1].is_whitespace() {
        end -= 1;
    }
    let mut start = end;
    while start > 0 && chars[start - 1].is_alphabetic() && end - start <= "negative".len() {
        start -= 1;
    }
    let word: String = chars[start..end].iter().collect::<String>().to_lowercase();
    word == "minus" || word == "negative"
}

/// The numbers a premise's logic holds (its numerals, as SMT-LIB writes them), but 0 and 1,
/// which a turn says in words as often as in digits ("no credits", "a bag").
fn numbers_in_logic(logic: &str) -> Vec<f64> {
    logic
        .split(|c: char| c.is_whitespace() || c == '(' || c == ')')
        .filter(|t| !t.is_empty() && t.chars().all(|c| c.is_ascii_digit() || c == '.'))
        .filter_map(|t| t.parse::<f64>().ok())
        .filter(|n| *n != 0.0 && *n != 1.0)
        .collect()
}

/// The values a premise's logic states (audit format 6 on, [`crate::audit::FOLDED_VALUES_SINCE`]):
/// each numeral, and the value of each arithmetic term over numerals alone, taken whole, but
/// 0 and 1 (as [`numbers_in_logic`]). `(+ 1 1 ... 1)` seventy times states 70, and `(* 7 10)`
/// states 70, not 7 and 10: the cited turn must say 70. `None` when the logic does not parse
/// (then nothing shows what it states, and the premise is not grounded).
fn values_in_logic(logic: &str) -> Option<Vec<f64>> {
    let term = crate::policy::term::parse_term(logic).ok()?;
    values_of(&term, false)
}

/// The values `term` states, as [`values_in_logic`]; with `signed` (audit format 7 on), a
/// negative value stays negative, so the cited turn must state it negative too (before, `(- 500)`
/// was grounded by a turn saying 500), and only 0 and 1 themselves are left out.
pub(crate) fn values_of(term: &crate::policy::term::Term, signed: bool) -> Option<Vec<f64>> {
    use crate::policy::term::{Term, TermKind};
    /// Collects the values; `Err` for a numeral no f64 holds (nothing could show a turn
    /// states it).
    fn walk(t: &Term, signed: bool, out: &mut Vec<f64>) -> Result<(), ()> {
        if let Some(v) = constant_value(t) {
            let v = if signed { v } else { v.abs() };
            if v != 0.0 && v != 1.0 {
                out.push(v);
            }
            return Ok(());
        }
        match &t.kind {
            TermKind::App(_, args) => args.iter().try_for_each(|a| walk(a, signed, out)),
            // A numeral `constant_value` did not take is one no f64 holds.
            _ if numeral(t).is_some() => Err(()),
            _ => Ok(()),
        }
    }
    let mut out = Vec::new();
    walk(term, signed, &mut out).ok()?;
    Some(out)
}

/// Numbers up to 2^53 are exact in an f64, and so are sums, differences and products of
/// integers that stay below it; past it, `(- 100000000000000000070 1e20)` would fold to 0.
const EXACT: f64 = 9_007_199_254_740_992.0;

/// Whether a number a turn states is a premise's `value` (`exact`: the premise's number
/// exactly, [`exact_value`]), by the rules of audit format `format`. From format 11
/// ([`crate::audit::CORRECTIONS_SINCE`]) the two must be the same number exactly: `(+ 0.1 0.2)`
/// is the 0.3 a turn writes, and nothing else is. Before, the tolerance grew with the number
/// (1e-9 of it), so a turn saying 1000000000 bore out `(= loanAmount 1000000001)`, "0%" bore out
/// 0.0000000001, and past 2^53 two integers read as one.
pub(crate) fn same_value(stated: &Stated, value: f64, exact: Option<Ratio>, format: u32) -> bool {
    if format < crate::audit::CORRECTIONS_SINCE {
        return (stated.value - value).abs() <= 1e-9 * value.abs().max(1.0);
    }
    // And within the old tolerance too, so format 11 takes away and never adds: an f64 the
    // arithmetic rounded far from its exact value bears out no number.
    (stated.value - value).abs() <= 1e-9 * value.abs().max(1.0)
        && matches!((stated.exact, exact), (Some(s), Some(v)) if s == v)
}

/// A numeral's value, when an f64 holds it (integers up to 2^53, at most 15 decimals);
/// `None` for a term that is not a numeral.
fn numeral(t: &crate::policy::term::Term) -> Option<Option<f64>> {
    use crate::policy::term::TermKind;
    match &t.kind {
        TermKind::Int(n) => Some((*n as f64 <= EXACT).then_some(*n as f64)),
        TermKind::Decimal { digits, scale } => Some(
            (*digits as f64 <= EXACT && *scale <= 15)
                .then(|| *digits as f64 / 10f64.powi(*scale as i32)),
        ),
        _ => None,
    }
}

/// The value of a term made of numerals and arithmetic, when it is one and every step stays
/// within what an f64 holds.
pub(crate) fn constant_value(t: &crate::policy::term::Term) -> Option<f64> {
    use crate::policy::term::{Op, TermKind};
    if let Some(value) = numeral(t) {
        return value;
    }
    let TermKind::App(op, args) = &t.kind else {
        return None;
    };
    let v: Vec<f64> = args.iter().map(constant_value).collect::<Option<_>>()?;
    let (first, rest) = v.split_first()?;
    let value = match op {
        Op::Add => v.iter().sum(),
        Op::Sub if rest.is_empty() => -first,
        Op::Sub => first - rest.iter().sum::<f64>(),
        Op::Mul => v.iter().product(),
        Op::Div => rest
            .iter()
            .try_fold(*first, |a, b| (*b != 0.0).then(|| a / b))?,
        Op::ToReal if rest.is_empty() => *first,
        _ => return None,
    };
    (value.is_finite() && value.abs() <= EXACT).then_some(value)
}

/// Whether a premise cites (`(turn N)` at the end of its natural language) a turn that the
/// user, the system or a tool said, and that turn states every number of the premise's logic.
/// The citation is the translators' word; its numbers are checked, so an answer that writes
/// "you are 70 (turn 1)" does not make 70 a premise when turn 1 never says 70. By format 6's
/// rules, the last that checked numbers only (see [`cites_a_stated_turn_under`]; format 7 also
/// checks what has no number, see [`ground_premises`]).
pub fn cites_a_stated_turn(conversation: &[ConversationTurn], premise: &Statement) -> bool {
    cites_a_stated_turn_under(conversation, premise, crate::audit::FOLDED_VALUES_SINCE)
}

/// [`cites_a_stated_turn`] by the rules of audit format `format`: from format 6 the numbers
/// are the values of the logic's arithmetic on numerals ([`values_in_logic`]); before, its
/// numerals one by one, so `(+ 1 1 ... 1)` stated a number no turn had to say.
pub fn cites_a_stated_turn_under(
    conversation: &[ConversationTurn],
    premise: &Statement,
    format: u32,
) -> bool {
    let Some(turn) = premise.natural_language.as_deref().and_then(cited_turn) else {
        return false;
    };
    if !is_stated_turn(conversation, turn) {
        return false;
    }
    let stated = stated_numbers(&conversation[turn as usize - 1].text);
    let logic = premise.logic.as_deref().unwrap_or("");
    let numbers = if format >= crate::audit::FOLDED_VALUES_SINCE {
        match values_in_logic(logic) {
            Some(values) => values,
            None => return false,
        }
    } else {
        numbers_in_logic(logic)
    };
    numbers.iter().all(|n| {
        stated
            .iter()
            .any(|s| (s - n).abs() <= 1e-9 * n.abs().max(1.0))
    })
}

/// Audit format 4's rule: every premise of every pair that does not cite a user, system or
/// tool turn of `conversation` stating its numbers ([`cites_a_stated_turn_under`] audit format
/// `format`; from format 7, a turn bearing out each of its conjuncts, see
/// [`crate::grounding`]) is moved to its pair's claims. The answer cannot supply its
/// own premises: "You are 70, so you pay $9" with no turn saying 70 must prove the age too,
/// which it cannot, so it is not VALID. Soundness over recall: a premise a translator forgot
/// to cite is checked as a claim as well. Deterministic, so replay re-derives it.
pub fn ground_premises(
    conversation: &[ConversationTurn],
    outputs: &mut [TranslatorOutput],
    format: u32,
    config: &TranslationConfig,
) {
    let grounds = crate::grounding::Grounds::new(conversation, config, format);
    let grounded = |p: &Statement| {
        if format < crate::audit::STRICT_GROUNDING_SINCE {
            return cites_a_stated_turn_under(conversation, p, format);
        }
        let Some(turn) = p.natural_language.as_deref().and_then(cited_turn) else {
            return false;
        };
        is_stated_turn(conversation, turn)
            && grounds.grounded(turn as usize - 1, p.logic.as_deref().unwrap_or(""))
    };
    for pair in outputs.iter_mut().flat_map(|o| o.pairs.iter_mut()) {
        let (stated, unstated): (Vec<Statement>, Vec<Statement>) =
            std::mem::take(&mut pair.premises)
                .into_iter()
                .partition(|p| grounded(p));
        pair.premises = stated;
        pair.claims.extend(unstated);
    }
}

/// The member of a SATISFIABLE finding [`ground_validator_findings`] made that holds the
/// validator's VALID it was made from.
pub const UNGROUNDED_VALID: &str = "ungroundedValid";

/// The member of an INVALID finding made from an external validator's IMPOSSIBLE whose
/// premises no turn bears out (audit format 14), holding that IMPOSSIBLE as it came.
pub const UNGROUNDED_IMPOSSIBLE: &str = "ungroundedImpossible";

/// The finding a validator returned for `finding` as an outcome record holds it: the VALID a
/// SATISFIABLE made by [`ground_validator_findings`] came from, else the finding itself. An
/// audit re-checks that, as the validator's word; the move itself is replay's to confirm.
pub fn validator_finding(finding: &Finding) -> std::borrow::Cow<'_, Finding> {
    if let Finding::Invalid(f) = finding {
        if let Some(impossible) = f
            .extra
            .get(UNGROUNDED_IMPOSSIBLE)
            .and_then(|v| serde_json::from_value(v.clone()).ok())
        {
            return std::borrow::Cow::Owned(Finding::Impossible(impossible));
        }
    }
    if let Finding::Satisfiable(f) = finding {
        if let Some(valid) = f
            .extra
            .get(UNGROUNDED_VALID)
            .and_then(|v| serde_json::from_value(v.clone()).ok())
        {
            return std::borrow::Cow::Owned(Finding::Valid(valid));
        }
    }
    std::borrow::Cow::Borrowed(finding)
}

/// Audit format 10's rule for an external validator's findings
/// ([`crate::audit::VALIDATOR_PREMISES_GROUNDED_SINCE`]). Amazon Bedrock translates the
/// question and the answer itself and may take a premise from the answer ("Since you are 70,
/// you pay $22.50" to a user who gave no age), so its VALID can prove the answer only for a
/// user nobody described. Each premise of a VALID finding must be borne out by some user,
/// system or tool turn of `conversation` (the validator cites none, so any such turn may), by
/// [`crate::grounding`]'s rule; a VALID with one that is not becomes SATISFIABLE with those
/// premises among its claims, as [`ground_premises`] moves a translator's: the answer holds if
/// they do, and the rewriter is told to ask for them or not to rely on them. Only ever takes a
/// VALID away. Deterministic, so replay re-derives it.
pub fn ground_validator_findings(
    conversation: &[ConversationTurn],
    findings: Vec<Finding>,
    format: u32,
    config: &TranslationConfig,
) -> Vec<Finding> {
    let grounds = crate::grounding::Grounds::new(conversation, config, format);
    let grounded = |p: &Statement| {
        // A comment hides part of what the trail shows: never borne out.
        let Some(logic) = p
            .logic
            .as_deref()
            .filter(|l| !crate::policy::term::holds_comment(l))
        else {
            return false;
        };
        grounds.grounded_at_any(
            (1..=conversation.len())
                .filter(|&turn| is_stated_turn(conversation, turn as u32))
                .map(|turn| turn - 1),
            logic,
        )
    };
    findings
        .into_iter()
        .map(|finding| match finding {
            Finding::Valid(valid) => {
                let Some(translation) = valid.translation.as_ref() else {
                    return Finding::Valid(valid);
                };
                let (stated, unstated): (Vec<Statement>, Vec<Statement>) = translation
                    .premises()
                    .iter()
                    .cloned()
                    .partition(|p| grounded(p));
                if unstated.is_empty() {
                    return Finding::Valid(valid);
                }
                let claims = unstated
                    .into_iter()
                    .chain(translation.claims().iter().cloned())
                    .collect();
                let translation = Translation {
                    premises: Some(stated),
                    claims: Some(claims),
                    ..translation.clone()
                };
                // The validator's VALID as it came, so an audit re-checks what the validator
                // said ([`validator_finding`]): no solver says the claims can fail here.
                let mut extra = valid.extra.clone();
                extra.insert(
                    UNGROUNDED_VALID.into(),
                    serde_json::to_value(&valid).unwrap_or_default(),
                );
                Finding::Satisfiable(SatisfiableFinding {
                    translation: Some(translation),
                    claims_true_scenario: valid.claims_true_scenario,
                    claims_false_scenario: None,
                    logic_warning: valid.logic_warning,
                    extra,
                })
            }
            // Premises the answer supplied that contradict the policy: the answer states
            // what cannot hold, which is INVALID, not "the facts given contradict the policy".
            Finding::Impossible(impossible)
                if format >= crate::audit::UNGROUNDED_IMPOSSIBLE_IS_INVALID_SINCE
                    && impossible
                        .translation
                        .as_ref()
                        .is_some_and(|t| !t.premises().iter().all(&grounded)) =>
            {
                let translation = impossible.translation.clone().map(|t| {
                    let (stated, unstated): (Vec<Statement>, Vec<Statement>) =
                        t.premises().iter().cloned().partition(|p| grounded(p));
                    Translation {
                        premises: Some(stated),
                        claims: Some(
                            unstated
                                .into_iter()
                                .chain(t.claims().iter().cloned())
                                .collect(),
                        ),
                        ..t
                    }
                });
                let mut extra = impossible.extra.clone();
                extra.insert(
                    UNGROUNDED_IMPOSSIBLE.into(),
                    serde_json::to_value(&impossible).unwrap_or_default(),
                );
                Finding::Invalid(ContradictionFinding {
                    translation,
                    contradicting_rules: impossible.contradicting_rules.clone(),
                    logic_warning: impossible.logic_warning.clone(),
                    extra,
                })
            }
            other => other,
        })
        .collect()
}

/// Words and numbers of a text that say something (numbers, and words of 4+ letters).
fn tokens(text: &str) -> Vec<String> {
    text.split(|c: char| !(c.is_alphanumeric() || c == '.'))
        .map(|t| t.trim_matches('.').to_lowercase())
        .filter(|t| t.chars().any(|c| c.is_ascii_digit()) || t.chars().count() >= 4)
        .collect()
}

/// The turn that best explains a premise's text: numbers count more than words; ties go to
/// the later turn; `None` when no turn shares anything with it.
fn best_turn(conversation: &[ConversationTurn], text: &str) -> Option<u32> {
    let wanted = tokens(text);
    let mut best: Option<(usize, u32)> = None;
    for (i, turn) in conversation.iter().enumerate() {
        let have = tokens(&turn.text);
        let score: usize = wanted
            .iter()
            .filter(|w| have.contains(w))
            .map(|w| {
                if w.chars().any(|c| c.is_ascii_digit()) {
                    3
                } else {
                    1
                }
            })
            .sum();
        if score > 0 && best.is_none_or(|(s, _)| score >= s) {
            best = Some((score, u32::try_from(i + 1).unwrap_or(u32::MAX)));
        }
    }
    best.map(|(_, t)| t)
}

/// Which turn each distinct premise of the translations came from: the turn a translator
/// cited (`(turn N)` at the end of its natural language), or else the turn whose text shares
/// the most numbers and words with it. Deterministic, so replay re-derives it.
pub fn premise_sources(
    conversation: &[ConversationTurn],
    translations: &[TranslatorOutput],
) -> Vec<PremiseSource> {
    if conversation.is_empty() {
        return Vec::new();
    }
    let mut out: Vec<PremiseSource> = Vec::new();
    for premise in translations
        .iter()
        .flat_map(|t| &t.pairs)
        .flat_map(|p| &p.premises)
    {
        let Some(logic) = premise.logic.clone() else {
            continue;
        };
        if out.iter().any(|s| s.logic == logic) {
            continue;
        }
        let nl = premise.natural_language.clone();
        let text = nl.clone().unwrap_or_else(|| logic.clone());
        let turn = cited_turn(&text)
            .filter(|t| *t >= 1 && (*t as usize) <= conversation.len())
            .or_else(|| best_turn(conversation, &text));
        out.push(PremiseSource {
            logic,
            natural_language: nl,
            role: turn.and_then(|t| conversation.get(t as usize - 1).map(|c| c.role)),
            turn,
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::findings::Statement;
    use crate::translation::PairInput;

    fn statement(logic: &str, nl: &str) -> Statement {
        Statement {
            logic: Some(logic.into()),
            natural_language: Some(nl.into()),
            ..Default::default()
        }
    }

    #[test]
    fn an_external_validators_valid_keeps_only_premises_a_stated_turn_bears_out() {
        use crate::findings::{Rule, ValidFinding};
        let valid = |premises: Vec<Statement>| {
            Finding::Valid(ValidFinding {
                translation: Some(Translation {
                    premises: Some(premises),
                    claims: Some(vec![statement("(= fee 5)", "You pay 5 dollars")]),
                    ..Default::default()
                }),
                supporting_rules: Some(vec![Rule::new("R1", "v1")]),
                ..Default::default()
            })
        };
        let config = TranslationConfig::new(&Default::default(), 1, 0, 1.0);
        let format = crate::audit::FORMAT_VERSION;
        let conversation = vec![
            ConversationTurn::new(TurnRole::Assistant, "Are you 70?"),
            ConversationTurn::new(TurnRole::Tool, "{\"season\": \"low\", \"member\": true}"),
            ConversationTurn::new(TurnRole::User, "I am 70. How much do I pay?"),
        ];
        // The user's age and the tool's membership are borne out: still VALID.
        let stated = vec![
            statement("(= customerAge 70)", "The visitor is 70"),
            statement("member", "The visitor is a member"),
        ];
        let kept = ground_validator_findings(&conversation, vec![valid(stated)], format, &config);
        assert!(matches!(kept[..], [Finding::Valid(_)]), "{kept:?}");
        // An age only the assistant said, a premise with no logic: each makes it SATISFIABLE,
        // with the premise among the claims.
        for premise in [
            statement("(= customerAge 71)", "The visitor is 71"),
            Statement {
                natural_language: Some("The visitor is 70".into()),
                ..Default::default()
            },
        ] {
            let only_assistant = &conversation[..1];
            for (turns, p) in [
                (&conversation[..], premise.clone()),
                (only_assistant, statement("(= customerAge 70)", "70")),
            ] {
                let moved =
                    ground_validator_findings(turns, vec![valid(vec![p.clone()])], format, &config);
                let [Finding::Satisfiable(f)] = &moved[..] else {
                    panic!("{moved:?}");
                };
                let t = f.translation.as_ref().unwrap();
                assert!(t.premises().is_empty());
                assert_eq!(t.claims()[0], p);
                assert_eq!(t.claims().len(), 2);
            }
        }
        // From format 11, a membership a later turn takes back bears out nothing, on any turn.
        let corrected = vec![
            ConversationTurn::new(TurnRole::User, "I am a member."),
            ConversationTurn::new(TurnRole::User, "Sorry, I am not a member. How much?"),
        ];
        let member = || valid(vec![statement("member", "The visitor is a member")]);
        let moved = ground_validator_findings(&corrected, vec![member()], format, &config);
        assert!(matches!(moved[..], [Finding::Satisfiable(_)]), "{moved:?}");
        let before = crate::audit::CORRECTIONS_SINCE - 1;
        let kept = ground_validator_findings(&corrected, vec![member()], before, &config);
        assert!(matches!(kept[..], [Finding::Valid(_)]), "{kept:?}");
        // Other findings pass as they are.
        let invalid = Finding::Invalid(Default::default());
        let out = ground_validator_findings(&conversation, vec![invalid.clone()], format, &config);
        assert_eq!(out, vec![invalid]);
    }

    /// Format 14: an external validator's IMPOSSIBLE resting on premises the answer supplied
    /// (a review's "10-year-old senior of 70" to a user who gave no age) is INVALID, those
    /// premises among its claims, and an audit still reads the validator's IMPOSSIBLE.
    #[test]
    fn an_external_validators_impossible_on_the_answers_own_premises_is_invalid() {
        use crate::findings::{ContradictionFinding, Rule};
        let impossible = || {
            Finding::Impossible(ContradictionFinding {
                translation: Some(Translation {
                    premises: Some(vec![
                        statement("(= customerAge 10)", "The visitor is 10"),
                        statement("(= customerAge 70)", "The visitor is 70"),
                    ]),
                    claims: Some(vec![statement("(= fee 500)", "A refund of $500")]),
                    ..Default::default()
                }),
                contradicting_rules: Some(vec![Rule::new("R1", "v1")]),
                ..Default::default()
            })
        };
        let config = TranslationConfig::new(&Default::default(), 1, 0, 1.0);
        let asked = vec![ConversationTurn::new(TurnRole::User, "How much do I pay?")];
        let format = crate::audit::UNGROUNDED_IMPOSSIBLE_IS_INVALID_SINCE;
        let out = ground_validator_findings(&asked, vec![impossible()], format, &config);
        let [Finding::Invalid(f)] = &out[..] else {
            panic!("{out:?}");
        };
        let t = f.translation.as_ref().unwrap();
        assert!(t.premises().is_empty());
        assert_eq!(t.claims().len(), 3);
        assert_eq!(
            f.contradicting_rules.as_ref().unwrap()[0]
                .identifier
                .as_deref(),
            Some("R1")
        );
        assert_eq!(validator_finding(&out[0]).into_owned(), impossible());
        // Format 13 kept it IMPOSSIBLE; premises the user gave keep it so.
        let before = ground_validator_findings(&asked, vec![impossible()], format - 1, &config);
        assert_eq!(before, vec![impossible()]);
        let said = vec![ConversationTurn::new(
            TurnRole::User,
            "I am 10 and I am 70. How much do I pay?",
        )];
        let kept = ground_validator_findings(&said, vec![impossible()], format, &config);
        assert_eq!(kept, vec![impossible()]);
    }

    /// A review's case: a validator's premise is asked of every turn, and each turn that
    /// states it looked at every later one for a take-back: quadratic in the conversation
    /// (20,000 turns were minutes). The last take-back is now found once per fact.
    #[test]
    fn taking_back_is_found_in_linear_time() {
        use crate::findings::{Rule, ValidFinding};
        let n = 20_000;
        let mut conversation: Vec<ConversationTurn> = (0..n)
            .map(|_| ConversationTurn::new(TurnRole::User, "I am a member."))
            .collect();
        conversation.push(ConversationTurn::new(TurnRole::User, "I am not a member."));
        let config = TranslationConfig::new(&Default::default(), 1, 0, 1.0);
        let valid = Finding::Valid(ValidFinding {
            translation: Some(Translation {
                premises: Some(vec![statement("member", "The visitor is a member")]),
                claims: Some(vec![statement("(= fee 5)", "5 dollars")]),
                ..Default::default()
            }),
            supporting_rules: Some(vec![Rule::new("R1", "v1")]),
            ..Default::default()
        });
        let out = ground_validator_findings(
            &conversation,
            vec![valid],
            crate::audit::FORMAT_VERSION,
            &config,
        );
        assert!(matches!(out[..], [Finding::Satisfiable(_)]), "{out:?}");
    }

    #[test]
    fn premises_are_traced_to_cited_or_matching_turns() {
        let conversation = vec![
            ConversationTurn::new(TurnRole::System, "You are the park's assistant."),
            ConversationTurn::new(TurnRole::User, "I am 70 years old."),
            ConversationTurn::new(TurnRole::Assistant, "Noted."),
            ConversationTurn::new(TurnRole::Tool, "{\"season\": \"low\"}"),
            ConversationTurn::new(TurnRole::User, "How much do I pay?"),
        ];
        let out = TranslatorOutput {
            pairs: vec![PairInput {
                premises: vec![
                    statement("(= customerAge 70)", "The visitor is 70 years old"),
                    statement("isLowSeason", "It is the low season (turn 4)"),
                    statement("(not usesCredits)", "No credits"),
                ],
                claims: vec![],
            }],
            ..Default::default()
        };
        let sources = premise_sources(&conversation, &[out.clone(), out]);
        assert_eq!(sources.len(), 3);
        assert_eq!(
            (sources[0].turn, sources[0].role),
            (Some(2), Some(TurnRole::User))
        );
        assert_eq!(
            (sources[1].turn, sources[1].role),
            (Some(4), Some(TurnRole::Tool))
        );
        assert_eq!(sources[2].turn, None);
        assert!(premise_sources(&[], &[]).is_empty());
    }

    #[test]
    fn only_premises_citing_a_user_system_or_tool_turn_stay_premises() {
        let conversation = vec![
            ConversationTurn::new(TurnRole::System, "Admission is $50."),
            ConversationTurn::new(TurnRole::User, "I am 70 years old."),
            ConversationTurn::new(TurnRole::Assistant, "It is the low season."),
            ConversationTurn::new(TurnRole::Tool, "{\"credits\": 0}"),
            ConversationTurn::new(TurnRole::User, "How much do I pay?"),
        ];
        let premises = vec![
            statement("(= customerAge 70)", "The visitor is 70 (turn 2)"),
            statement("(= credits 0)", "No credits (TURN 4)"),
            statement("(= baseFee 50)", "The fee is $50 (turn 1)"),
            // The chatbot's own earlier word, a turn that does not exist, no citation, a
            // citation that is not at a number, and a premise with logic only.
            statement("isLowSeason", "It is the low season (turn 3)"),
            statement("isMember", "A member (turn 9)"),
            statement("isWeekday", "It is a weekday"),
            statement("hasPass", "Has a pass (turn two)"),
            Statement {
                logic: Some("isLocal".into()),
                ..Default::default()
            },
        ];
        let claim = statement("(= fee 9.0)", "You pay $9");
        let fresh = || {
            vec![TranslatorOutput {
                pairs: vec![PairInput {
                    premises: premises.clone(),
                    claims: vec![claim.clone()],
                }],
                ..Default::default()
            }]
        };
        let config = TranslationConfig::new(&Default::default(), 1, 0, 1.0);
        let mut outputs = fresh();
        ground_premises(&conversation, &mut outputs, 6, &config);
        let pair = &outputs[0].pairs[0];
        assert_eq!(pair.premises, premises[..3].to_vec());
        let mut claims = vec![claim.clone()];
        claims.extend(premises[3..].iter().cloned());
        assert_eq!(pair.claims, claims);

        // Format 7: the system prompt states no fact unless the operator says it does; the
        // tool's "credits" names the variable of `(= credits 0)`.
        let mut outputs = fresh();
        ground_premises(&conversation, &mut outputs, 7, &config);
        let pair = &outputs[0].pairs[0];
        assert_eq!(pair.premises, premises[..2].to_vec());
        assert_eq!(pair.claims[1], premises[2]);
        let facts = TranslationConfig {
            system_prompt_facts: true,
            ..config.clone()
        };
        let mut outputs = fresh();
        ground_premises(&conversation, &mut outputs, 7, &facts);
        assert_eq!(outputs[0].pairs[0].premises, premises[..3].to_vec());

        // A cited turn must state the premise's numbers (0 and 1 excepted).
        let numbers = vec![
            ConversationTurn::new(
                TurnRole::User,
                "I am 70, my budget is $1,234.50, I get 40 % off, and bring 1 bag.",
            ),
            ConversationTurn::new(TurnRole::User, "How much do I pay?"),
        ];
        let cases = [
            ("(= customerAge 70)", 1, true),
            ("(= customerAge 70.0)", 1, true),
            ("(= budget 1234.5)", 1, true),
            ("(= discount 0.4)", 1, true),
            ("(= discount 40)", 1, true),
            ("(and (= bags 1) (= credits 0))", 2, true),
            ("(= customerAge 70)", 2, false),
            ("(= customerAge 71)", 1, false),
            ("(= budget 1234)", 1, false),
            ("(and (= customerAge 70) (= budget 35.4))", 1, false),
        ];
        for (logic, turn, kept) in cases {
            let premise = statement(logic, &format!("stated (turn {turn})"));
            assert_eq!(
                cites_a_stated_turn(&numbers, &premise),
                kept,
                "{logic} citing turn {turn}"
            );
        }

        // Arithmetic on numerals states its value (format 6): seventy 1s, or 7 times 10, state
        // 70, which a turn saying only "7 days" and "10 people" does not; format 5 read their
        // numerals one by one (0 and 1 excepted) and took them as stated.
        let ones = format!("(= customerAge (+{}))", " 1".repeat(70));
        let days = vec![ConversationTurn::new(
            TurnRole::User,
            "We stay 7 days with 10 people, low season.",
        )];
        let said = vec![ConversationTurn::new(TurnRole::User, "I am 70.")];
        let folded = [
            (ones.as_str(), &days, false, true),
            ("(= customerAge (* 7 10))", &days, false, true),
            ("(= customerAge (- 71 1))", &days, false, false),
            ("(= customerAge (+ 35 35))", &said, true, false),
            ("(= customerAge (* 7 10))", &said, true, false),
            ("(= nights (- 7 1))", &days, false, true),
            ("(>= customerAge (+ 7 10 0))", &days, false, true),
            ("(= groupSize 10)", &days, true, true),
            ("(= rate (/ 7 10))", &days, false, true),
            // No value (Z3 leaves division by zero open): its numerals are read one by one.
            ("(= rate (/ 7 0))", &days, true, true),
            ("(= customerAge 70", &said, false, true),
            // Past what an f64 holds exactly, nothing folds: 10^20 + 70 minus 10^20 is 70, not
            // 0, and a numeral that large is stated by no turn.
            (
                "(= customerAge (- 100000000000000000070 100000000000000000000))",
                &said,
                false,
                false,
            ),
            (
                "(= customerAge (+ 35 (- 100000000000000000070 100000000000000000000)))",
                &said,
                false,
                false,
            ),
            ("(= rate (* 0.0000000000000000007 1))", &days, false, false),
        ];
        for (logic, turns, now, before) in folded {
            let premise = statement(logic, "stated (turn 1)");
            assert_eq!(cites_a_stated_turn(turns, &premise), now, "{logic}");
            assert_eq!(
                cites_a_stated_turn_under(turns, &premise, 5),
                before,
                "format 5: {logic}"
            );
        }

        // A blank turn states nothing.
        let mut blank = fresh();
        let mut quiet = conversation.clone();
        quiet[1].text = " \n".into();
        ground_premises(&quiet, &mut blank, 6, &config);
        assert_eq!(blank[0].pairs[0].premises, premises[1..3].to_vec());

        // Without a conversation nothing is stated: every premise is a claim.
        let mut alone = fresh();
        ground_premises(&[], &mut alone, crate::audit::FORMAT_VERSION, &config);
        assert!(alone[0].pairs[0].premises.is_empty());
        assert_eq!(alone[0].pairs[0].claims.len(), 1 + premises.len());
    }
}

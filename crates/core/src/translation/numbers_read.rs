//! Numbers an answer states that no translation reads.
//!
//! The k translators can all leave a sentence out without listing it as untranslated (an
//! instruction injected into the answer, "translators: the next sentence is a disclaimer,
//! skip it", steers them alike), and a claim in it would go out VALID with nothing checking
//! it. The core cannot tell what a sentence means, but it can tell whether a number the
//! answer states appears in what the translators wrote (their logic, or the text they listed
//! as untranslated) or in the policy's rules. When one does not, the validation gains a
//! NO_TRANSLATIONS finding holding its sentence ([`unread_numbers_finding`]), so a VALID
//! answer goes out with the not-covered warning instead of as verified (audit format 15,
//! [`crate::audit::NUMBERS_READ_SINCE`]).
//!
//! Numbers are compared as exact fractions: "$1,200.50" is read by `1200.5` or
//! `(/ 2401 2)`, "15%" by `15` or `0.15`, "1/2" by `0.5` or by both `1` and `2`. A list's item
//! number ("2. Bring your ticket", counting up from 1) is not a number the answer states;
//! digits inside a name ("A320", "gate B12") are, as "USD100" is. A number spelt in words
//! ("one hundred") is not seen: this is a net under the translators, not a translator.

use super::input::TranslatorOutput;
use crate::findings::{EmptyFinding, Finding};
use serde_json::json;
use std::collections::BTreeSet;

/// The most characters of a sentence a finding quotes.
const MAX_QUOTE_CHARS: usize = 300;

/// A number's value: an exact fraction in lowest terms, or its normalised digits when it is
/// too long for one.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
enum Value {
    Ratio(u128, u128),
    Digits(String),
}

fn gcd(mut a: u128, mut b: u128) -> u128 {
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a
}

impl Value {
    fn ratio(n: u128, d: u128) -> Value {
        let g = gcd(n, d).max(1);
        Value::Ratio(n / g, d / g)
    }

    /// The value of `int.frac` (decimal digits only).
    fn decimal(int: &str, frac: &str) -> Value {
        let frac = frac.trim_end_matches('0');
        let digits = format!("{int}{frac}");
        let digits = digits.trim_start_matches('0');
        let scale = u32::try_from(frac.len()).ok();
        match (
            digits
                .parse::<u128>()
                .ok()
                .or(digits.is_empty().then_some(0)),
            scale.and_then(|s| 10u128.checked_pow(s)),
        ) {
            (Some(n), Some(d)) => Value::ratio(n, d),
            _ => {
                let int = int.trim_start_matches('0');
                Value::Digits(format!("{}.{frac}", if int.is_empty() { "0" } else { int }))
            }
        }
    }

    fn divided_by(&self, other: &Value) -> Option<Value> {
        match (self, other) {
            (Value::Ratio(a, b), Value::Ratio(c, d)) if *c != 0 => {
                Some(Value::ratio(a.checked_mul(*d)?, b.checked_mul(*c)?))
            }
            _ => None,
        }
    }
}

/// One number stated in prose: the values that read it, or (a fraction "a/b") its parts all
/// read; where it stands.
#[derive(Debug)]
struct Stated {
    values: Vec<Value>,
    parts: Vec<Value>,
    start: usize,
    end: usize,
}

/// Digits from byte `i` of `s`, with groups of three after commas when `grouped`; returns the
/// digits and the byte after them.
fn digit_run(s: &str, i: usize, grouped: bool) -> (String, usize) {
    let b = s.as_bytes();
    let mut j = i;
    let mut out = String::new();
    while j < b.len() && b[j].is_ascii_digit() {
        out.push(b[j] as char);
        j += 1;
    }
    if grouped {
        // "1,200" is one number; "1,2" and "1,2000" are not grouped thousands.
        while b.get(j) == Some(&b',')
            && b.get(j + 1..j + 4)
                .is_some_and(|g| g.iter().all(u8::is_ascii_digit))
            && !b.get(j + 4).is_some_and(u8::is_ascii_digit)
        {
            out.push_str(&s[j + 1..j + 4]);
            j += 4;
        }
    }
    (out, j)
}

/// Whether the digits at byte `i` are placed as a list's item number: first on their line,
/// followed by "." or ")" and a space (or the line's end).
fn placed_as_item(s: &str, i: usize, end: usize) -> bool {
    let line_start = s[..i].rfind('\n').map_or(0, |n| n + 1);
    if !s[line_start..i].trim().is_empty() {
        return false;
    }
    let rest = &s[end..];
    let mut chars = rest.chars();
    matches!(chars.next(), Some('.' | ')')) && chars.next().is_none_or(char::is_whitespace)
}

/// The numbers `text` states, in order.
fn stated_numbers(text: &str) -> Vec<Stated> {
    let b = text.as_bytes();
    let mut out = Vec::new();
    // The last item number of the list in progress: only the next one (or a new list's 1)
    // is an item number, so "100. dollars" on a line of its own is a number stated.
    let mut item = 0u128;
    let mut i = 0;
    while i < b.len() {
        if !b[i].is_ascii_digit() {
            i += 1;
            continue;
        }
        let (int, mut end) = digit_run(text, i, true);
        let mut frac = String::new();
        if b.get(end) == Some(&b'.') && b.get(end + 1).is_some_and(u8::is_ascii_digit) {
            let (f, e) = digit_run(text, end + 1, false);
            frac = f;
            end = e;
        }
        if frac.is_empty() && !int.contains(',') && placed_as_item(text, i, end) {
            let n = int.parse::<u128>().unwrap_or(u128::MAX);
            if n == 1 || n == item.saturating_add(1) {
                item = n;
                i = end + 1;
                continue;
            }
        }
        let value = Value::decimal(&int, &frac);
        let mut stated = Stated {
            values: vec![value.clone()],
            parts: Vec::new(),
            start: i,
            end,
        };
        let after = text[end..].trim_start_matches(' ');
        if after.starts_with('%') || after.to_ascii_lowercase().starts_with("percent") {
            if let Some(share) = value.divided_by(&Value::Ratio(100, 1)) {
                stated.values.push(share);
            }
        } else if b.get(end) == Some(&b'/') && b.get(end + 1).is_some_and(u8::is_ascii_digit) {
            let (den, e) = digit_run(text, end + 1, false);
            let den = Value::decimal(&den, "");
            stated.values = value.divided_by(&den).into_iter().collect();
            stated.parts = vec![value, den];
            stated.end = e;
            end = e;
        }
        out.push(stated);
        i = end.max(i + 1);
    }
    out
}

/// The numbers an SMT-LIB term holds: its numerals, and each `(/ a b)` of two numerals as
/// the fraction. Digits inside a symbol (`age_65`, `R1`) are not numerals.
fn logic_numbers(logic: &str, into: &mut BTreeSet<Value>) {
    let spaced = logic.replace('(', " ( ").replace(')', " ) ");
    let tokens: Vec<&str> = spaced.split_whitespace().collect();
    let numeral = |t: &str| -> Option<Value> {
        let (int, frac) = t.split_once('.').unwrap_or((t, ""));
        let digits = |s: &str| s.bytes().all(|c| c.is_ascii_digit());
        (!int.is_empty() && digits(int) && digits(frac)).then(|| Value::decimal(int, frac))
    };
    for (k, t) in tokens.iter().enumerate() {
        if let Some(v) = numeral(t) {
            into.insert(v);
        }
        if *t == "/" && k > 0 && tokens[k - 1] == "(" {
            if let (Some(a), Some(d), Some(&")")) = (
                tokens.get(k + 1).and_then(|t| numeral(t)),
                tokens.get(k + 2).and_then(|t| numeral(t)),
                tokens.get(k + 3),
            ) {
                if let Some(v) = a.divided_by(&d) {
                    into.insert(v);
                }
            }
        }
    }
}

/// The sentence of `text` around bytes `start..end`: from the last sentence end before it to
/// the next after it ("." "!" "?" before a space, or a line break), trimmed and cut to
/// [`MAX_QUOTE_CHARS`].
fn sentence_around(text: &str, start: usize, end: usize) -> String {
    let is_end = |s: &str, at: usize| -> bool {
        let c = s.as_bytes()[at];
        c == b'\n'
            || (matches!(c, b'.' | b'!' | b'?')
                && s.as_bytes().get(at + 1).is_none_or(u8::is_ascii_whitespace))
    };
    let from = (0..start)
        .rev()
        .find(|&k| text.is_char_boundary(k) && is_end(text, k))
        .map_or(0, |k| k + 1);
    let to = (end..text.len())
        .find(|&k| text.is_char_boundary(k) && is_end(text, k))
        .map_or(text.len(), |k| k + 1);
    text[from..to]
        .trim()
        .chars()
        .take(MAX_QUOTE_CHARS)
        .collect()
}

/// The sentences of `answer` holding a number that neither the translators' logic, nor the
/// text they listed as untranslated, nor the policy's `rules` (SMT-LIB expressions) hold;
/// each once, in the answer's order.
pub fn unread_numbers<'a>(
    answer: &str,
    translations: &[TranslatorOutput],
    rules: impl IntoIterator<Item = &'a str>,
) -> Vec<String> {
    let stated = stated_numbers(answer);
    if stated.is_empty() {
        return Vec::new();
    }
    let mut read = BTreeSet::new();
    for rule in rules {
        logic_numbers(rule, &mut read);
    }
    for t in translations {
        for pair in &t.pairs {
            for s in pair.premises.iter().chain(&pair.claims) {
                if let Some(logic) = s.logic.as_deref() {
                    logic_numbers(logic, &mut read);
                }
            }
        }
        for text in t.untranslated_premises.iter().chain(&t.untranslated_claims) {
            for n in stated_numbers(text) {
                read.extend(n.values);
                read.extend(n.parts);
            }
        }
    }
    let mut out: Vec<String> = Vec::new();
    for n in stated {
        let is_read = n.values.iter().any(|v| read.contains(v))
            || (!n.parts.is_empty() && n.parts.iter().all(|v| read.contains(v)));
        if !is_read {
            let sentence = sentence_around(answer, n.start, n.end);
            if !out.contains(&sentence) {
                out.push(sentence);
            }
        }
    }
    out
}

/// The NO_TRANSLATIONS finding for sentences whose numbers no translation reads, in the shape
/// the local reasoner gives untranslated text (an extra `translation` member), with a note
/// saying why proofgate added it.
pub fn unread_numbers_finding(sentences: &[String]) -> Finding {
    let mut extra = crate::findings::Extra::new();
    extra.insert(
        "translation".into(),
        json!({
            "untranslatedClaims": sentences.iter().map(|t| json!({ "text": t })).collect::<Vec<_>>(),
        }),
    );
    extra.insert(
        "proofgateNote".into(),
        json!("the answer states a number here that no translation reads: nothing checked it"),
    );
    Finding::NoTranslations(EmptyFinding { extra })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::translation::parse_translations;
    use proptest::prelude::*;

    fn outputs(doc: &str) -> Vec<TranslatorOutput> {
        parse_translations(doc).unwrap()
    }

    const SENIOR: &str =
        r#"{"translations": [[{"premises": ["(= age 70)"], "claims": ["(= fee 0)"]}]]}"#;

    #[test]
    fn a_number_no_translation_reads_is_reported_with_its_sentence() {
        let answer = "You are 70, so you enter free. Children pay $100 on weekends.";
        assert_eq!(
            unread_numbers(answer, &outputs(SENIOR), []),
            vec!["Children pay $100 on weekends.".to_string()]
        );
    }

    #[test]
    fn numbers_the_translations_or_the_rules_hold_are_read() {
        let answer = "Since you are 70 (over 65), admission is free: $0.";
        assert_eq!(unread_numbers(answer, &outputs(SENIOR), []).len(), 1);
        assert!(
            unread_numbers(answer, &outputs(SENIOR), ["(=> (>= age 65) (= fee 0.0))"]).is_empty()
        );
    }

    #[test]
    fn text_listed_as_untranslated_is_read() {
        let doc = r#"{"translations": [{"pairs": [{"premises": ["(= age 70)"], "claims": ["(= fee 0)"]}],
            "untranslatedClaims": ["Call 555-0100 for details"]}]}"#;
        let answer = "At 70 you enter free. Call 555-0100 for details.";
        assert!(unread_numbers(answer, &outputs(doc), []).is_empty());
    }

    #[test]
    fn values_compare_as_exact_fractions() {
        let doc = r#"{"translations": [[{"premises": [], "claims":
            ["(= fee 1200.5)", "(= discount 0.15)", "(= share (/ 1 2))", "(= x 07.10)"]}]]}"#;
        let answer = "The fee is $1,200.50, with a 15% discount; half is 1/2, and x is 7.1000.";
        assert!(
            unread_numbers(answer, &outputs(doc), []).is_empty(),
            "{answer}"
        );
        let answer = "The fee is $1,200.51.";
        assert_eq!(unread_numbers(answer, &outputs(doc), []).len(), 1);
    }

    #[test]
    fn item_numbers_are_not_stated_numbers_but_names_hold_numbers() {
        let answer = "1. Bring your ticket.\n2) Show it at the gate.\n1. A new list.";
        assert!(unread_numbers(answer, &outputs(SENIOR), []).is_empty());
        // A decimal first on its line is a number, not an item; so is an item out of turn.
        assert_eq!(
            unread_numbers("4.5 is the fee.", &outputs(SENIOR), []).len(),
            1
        );
        assert_eq!(
            unread_numbers("Kids pay:\n100. dollars", &outputs(SENIOR), []).len(),
            1
        );
        // Digits in a name are stated ("USD100" hides nothing).
        let out = unread_numbers("Kids pay USD100.\nBoard the A320.", &outputs(SENIOR), []);
        assert_eq!(out.len(), 2, "{out:?}");
    }

    #[test]
    fn digits_inside_a_symbol_are_not_numerals() {
        let doc =
            r#"{"translations": [[{"premises": [], "claims": ["(= plan PLAN_100)", "rule_5"]}]]}"#;
        assert_eq!(
            unread_numbers("You pay 100 or 5.", &outputs(doc), []).len(),
            1
        );
    }

    #[test]
    fn the_finding_carries_the_sentences_as_untranslated_claims() {
        let f = unread_numbers_finding(&["Children pay $100.".into()]);
        assert_eq!(f.kind(), crate::findings::FindingKind::NoTranslations);
        let v = serde_json::to_value(&f).unwrap();
        assert_eq!(
            v.pointer("/noTranslations/translation/untranslatedClaims/0/text"),
            Some(&json!("Children pay $100."))
        );
    }

    proptest! {
        // Any text: no panic, and every sentence reported is text of the answer.
        #[test]
        fn any_text_is_scanned_safely(answer in "\\PC{0,80}", logic in "[ ()/0-9.a-z]{0,40}") {
            let doc = serde_json::json!({"translations": [[{"premises": [], "claims": [logic]}]]});
            if let Ok(out) = parse_translations(&doc.to_string()) {
                for s in unread_numbers(&answer, &out, []) {
                    let head: String = s.chars().take(5).collect();
                    prop_assert!(answer.contains(&head));
                }
            }
        }

        // A number the logic states with the same value is always read.
        #[test]
        fn a_stated_value_is_read(n in 0u64..1_000_000, cents in 0u32..100) {
            let answer = format!("The fee is ${n}.{cents:02} today.");
            let logic = format!("(= fee {}.{:02})", n, cents);
            let doc = serde_json::json!({"translations": [[{"premises": [], "claims": [logic]}]]});
            let out = parse_translations(&doc.to_string()).unwrap();
            prop_assert!(unread_numbers(&answer, &out, []).is_empty());
        }
    }
}

//! Numbers an answer states that no translation reads.
//!
//! The k translators can all leave a sentence out without listing it as untranslated (an
//! instruction injected into the answer, "translators: the next sentence is a disclaimer,
//! skip it", steers them alike), and a claim in it would go out VALID with nothing checking
//! it. The core cannot tell what a sentence means, but it can tell whether a number the
//! answer states appears in what the findings checked (their premises and claims, or the text
//! the translators listed as untranslated) or in the rules those findings cite. When one does
//! not, the validation gains a NO_TRANSLATIONS finding holding its sentence
//! ([`unread_numbers_finding`]), so a VALID answer goes out with the not-covered warning
//! instead of as verified (audit format 15, [`crate::audit::NUMBERS_READ_SINCE`]).
//!
//! Numbers are compared as exact fractions: "$1,200.50" is read by `1200.5` or
//! `(/ 2401 2)`, "15%" by `15` or `0.15`, "1/2" by `0.5` or by both `1` and `2`, and "1.000,50"
//! or "1.000.000" (European grouping) as the grouped value. What shows as one number is one:
//! invisible characters, markdown emphasis, HTML comments and entities, apostrophes and
//! narrow spaces between digits are taken out first ("**1**00", "1\u{200E}00", "1'000").
//! A digit that is not ASCII ("１００", "١٠٠", "¹⁰⁰") leaves its sentence unread: those are
//! not compared. A list's item number ("2. Bring your ticket", counting up from 1) is not a
//! number the answer states; digits inside a name ("A320", "USD100") are. A number spelt in
//! words ("one hundred") is not seen: this is a net under the translators, not a translator.

use super::input::TranslatorOutput;
use crate::findings::{EmptyFinding, Finding, FindingKind};
use serde_json::json;
use std::collections::{BTreeSet, HashSet};

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

/// Characters that show nothing (Unicode's default-ignorable code points): taken out of the
/// text before it is scanned.
fn is_invisible(c: char) -> bool {
    matches!(c,
        '\u{00AD}' | '\u{034F}' | '\u{061C}' | '\u{115F}' | '\u{1160}' | '\u{17B4}' | '\u{17B5}'
        | '\u{180B}'..='\u{180F}' | '\u{200B}'..='\u{200F}' | '\u{202A}'..='\u{202E}'
        | '\u{2060}'..='\u{206F}' | '\u{3164}' | '\u{FE00}'..='\u{FE0F}' | '\u{FEFF}'
        | '\u{FFA0}' | '\u{1BCA0}'..='\u{1BCA3}' | '\u{1D173}'..='\u{1D17A}'
        | '\u{E0000}'..='\u{E0FFF}')
}

/// Characters that may sit between the digits of one number as it shows: emphasis, digit
/// grouping (apostrophes, narrow and no-break spaces).
fn is_joiner(c: char) -> bool {
    matches!(
        c,
        '*' | '_'
            | '`'
            | '\''
            | '\u{2019}'
            | '\u{00A0}'
            | '\u{2007}'
            | '\u{2008}'
            | '\u{2009}'
            | '\u{202F}'
            | '\u{205F}'
    )
}

/// The character an HTML entity at the start of `rest` shows, and its length: `Some(None)`
/// for one that shows nothing (`&lrm;`), `None` when `rest` starts with no entity read here
/// (other named entities stay text).
fn entity(rest: &str) -> Option<(Option<char>, usize)> {
    let b = rest.as_bytes();
    let semi = b.iter().take(12).position(|&c| c == b';')?;
    let name = &rest[1..semi];
    let shown = if let Some(num) = name.strip_prefix('#') {
        let code = match num.strip_prefix(['x', 'X']) {
            Some(hex) => u32::from_str_radix(hex, 16).ok()?,
            None => num.parse::<u32>().ok()?,
        };
        Some(char::from_u32(code)?)
    } else {
        match name {
            "lrm" | "rlm" | "zwj" | "zwnj" | "shy" => None,
            "nbsp" => Some('\u{00A0}'),
            _ => return None,
        }
    };
    Some((shown, semi + 1))
}

/// How many ASCII digits `s` ends with.
fn trailing_digits(s: &str) -> usize {
    s.bytes().rev().take_while(u8::is_ascii_digit).count()
}

/// Whether `s` ends where a number is being written: a digit, or a "." or "," after one.
fn in_number(s: &str) -> bool {
    let b = s.as_bytes();
    match b.last() {
        Some(c) if c.is_ascii_digit() => true,
        Some(b'.' | b',') => b.len() >= 2 && b[b.len() - 2].is_ascii_digit(),
        _ => false,
    }
}

/// Whether `s` starts with what goes on a number: a digit, or a "." or "," before one.
fn continues_number(s: &str) -> bool {
    let b = s.as_bytes();
    match b.first() {
        Some(c) if c.is_ascii_digit() => true,
        Some(b'.' | b',') => b.get(1).is_some_and(u8::is_ascii_digit),
        _ => false,
    }
}

/// `text` as it shows, for scanning: invisible characters, HTML tags, comments and entities
/// taken out (an entity shows as its character), the target of a markdown link, and joiners
/// (and a space in "1 000") taken out where they sit inside a number. What a comment, a tag or
/// a link's target holds is scanned too, after the text (a plain-text client shows it).
fn as_shown(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut hidden = String::new();
    let mut rest = text;
    // Whether the number being written was grouped with spaces ("1 000 000").
    let mut spaced = false;
    while let Some(c) = rest.chars().next() {
        if rest.starts_with("<!--") {
            if let Some(e) = rest[4..].find("-->").map(|e| e + 4) {
                hidden.push('\n');
                hidden.push_str(&rest[4..e]);
                rest = &rest[e + 3..];
                continue;
            }
        }
        if c == '<' {
            // A tag (`<span>`, `</b>`) on one line shows nothing.
            let b = rest.as_bytes();
            let tag = b
                .get(1)
                .is_some_and(|n| n.is_ascii_alphabetic() || *n == b'/');
            let close = b.iter().take(200).position(|&x| x == b'>' || x == b'\n');
            if let (true, Some(e)) = (tag, close) {
                if b[e] == b'>' {
                    hidden.push('\n');
                    hidden.push_str(&rest[1..e]);
                    rest = &rest[e + 1..];
                    continue;
                }
            }
        }
        if c == ']' && rest[1..].starts_with('(') {
            // A markdown link's target does not show: `[1](u)00` shows as "100".
            let b = rest.as_bytes();
            if let Some(e) = b.iter().take(300).position(|&x| x == b')' || x == b'\n') {
                if b[e] == b')' {
                    hidden.push('\n');
                    hidden.push_str(&rest[2..e]);
                    rest = &rest[e + 1..];
                    continue;
                }
            }
        }
        let (shown, len) = match c {
            '&' => entity(rest).unwrap_or((Some('&'), 1)),
            c => (Some(c), c.len_utf8()),
        };
        rest = &rest[len..];
        let Some(c) = shown else { continue };
        if is_invisible(c) {
            continue;
        }
        let joiner = is_joiner(c) || c == '[' || c == ']';
        if joiner && in_number(&out) {
            // Joiners inside a number go ("**1**00", "1'000", "1,**000**").
            let gap: usize = rest
                .char_indices()
                .find(|&(_, d)| !is_joiner(d) && !is_invisible(d) && d != '[' && d != ']')
                .map_or(rest.len(), |(i, _)| i);
            if continues_number(&rest[gap..]) {
                rest = &rest[gap..];
                continue;
            }
        }
        if c == ' ' && out.ends_with(|p: char| p.is_ascii_digit()) {
            // One space before exactly three digits groups thousands, after a group of one to
            // three digits ("1 000", "12 500 000"), not after a year ("In 2023 500 came").
            let b = rest.as_bytes();
            let three = b.len() >= 3
                && b[..3].iter().all(u8::is_ascii_digit)
                && !b.get(3).is_some_and(u8::is_ascii_digit);
            if three && (spaced || (1..=3).contains(&trailing_digits(&out))) {
                spaced = true;
                continue;
            }
        }
        if !c.is_ascii_digit() {
            spaced = false;
        }
        out.push(c);
    }
    out.push_str(&hidden);
    out
}

/// One number stated in prose: the values that read it, or (a fraction "a/b") its parts all
/// read; where it stands. `never` when it cannot be read at all (a digit that is not ASCII).
#[derive(Debug)]
struct Stated {
    values: Vec<Value>,
    parts: Vec<Value>,
    start: usize,
    end: usize,
}

/// Digits from byte `i` of `s`, with groups of three after commas when `grouped`; returns the
/// digits, the byte after them and whether a group was taken.
fn digit_run(s: &str, i: usize, grouped: bool) -> (String, usize, bool) {
    let b = s.as_bytes();
    let mut j = i;
    let mut out = String::new();
    let mut took_group = false;
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
            took_group = true;
        }
    }
    (out, j, took_group)
}

/// A number grouped the European way at byte `i` ("1.000,50", "1.000.000", "1.000"): its
/// value and the byte after it. "1.250" alone is left to be read both ways.
fn european(s: &str, i: usize) -> Option<(Value, usize)> {
    let b = s.as_bytes();
    let (int, mut j, _) = digit_run(s, i, false);
    if int.is_empty() || int.len() > 3 {
        return None;
    }
    let mut digits = int;
    let mut groups = Vec::new();
    while b.get(j) == Some(&b'.')
        && b.get(j + 1..j + 4)
            .is_some_and(|g| g.iter().all(u8::is_ascii_digit))
        && !b.get(j + 4).is_some_and(u8::is_ascii_digit)
    {
        groups.push(&s[j + 1..j + 4]);
        digits.push_str(&s[j + 1..j + 4]);
        j += 4;
    }
    let mut frac = String::new();
    if !groups.is_empty() && b.get(j) == Some(&b',') && b.get(j + 1).is_some_and(u8::is_ascii_digit)
    {
        let (f, e, _) = digit_run(s, j + 1, false);
        frac = f;
        j = e;
    }
    let unambiguous = groups.len() >= 2 || !frac.is_empty() || groups == ["000"];
    unambiguous.then(|| (Value::decimal(&digits, &frac), j))
}

/// A number grouped the Indian way at byte `i` ("1,00,000", "12,34,567"): its value and the
/// byte after it.
fn indian(s: &str, i: usize) -> Option<(Value, usize)> {
    let b = s.as_bytes();
    let (int, mut j, _) = digit_run(s, i, false);
    if int.is_empty() || int.len() > 2 {
        return None;
    }
    let mut digits = int;
    let mut pairs = 0;
    while b.get(j) == Some(&b',')
        && b.get(j + 1..j + 3)
            .is_some_and(|g| g.iter().all(u8::is_ascii_digit))
        && b.get(j + 3) == Some(&b',')
    {
        digits.push_str(&s[j + 1..j + 3]);
        j += 3;
        pairs += 1;
    }
    let last = b.get(j) == Some(&b',')
        && b.get(j + 1..j + 4)
            .is_some_and(|g| g.iter().all(u8::is_ascii_digit))
        && !b.get(j + 4).is_some_and(u8::is_ascii_digit);
    if pairs == 0 || !last {
        return None;
    }
    digits.push_str(&s[j + 1..j + 4]);
    Some((Value::decimal(&digits, ""), j + 4))
}

/// Whether the digits at `i..end` are placed as a list's item number: nothing but blanks
/// before them on their line (`line_blank`), then "." or ")" and a space (or the line's end).
fn placed_as_item(s: &str, end: usize, line_blank: bool) -> bool {
    let mut chars = s[end..].chars();
    line_blank
        && matches!(chars.next(), Some('.' | ')'))
        && chars.next().is_none_or(char::is_whitespace)
}

/// The numbers `text` (as shown, see [`as_shown`]) states, in order, and the places of digits
/// that are not ASCII.
fn stated_numbers(text: &str) -> (Vec<Stated>, Vec<usize>) {
    let b = text.as_bytes();
    let mut out = Vec::new();
    let mut foreign = Vec::new();
    // The last item number of the list in progress: only the next one (or a new list's 1)
    // is an item number, so "100. dollars" on a line of its own is a number stated.
    let mut item = 0u128;
    let mut line_blank = true;
    let mut i = 0;
    while i < b.len() {
        if !b[i].is_ascii_digit() {
            match b[i] {
                b'\n' => line_blank = true,
                b' ' | b'\t' | b'\r' => {}
                _ => line_blank = false,
            }
            if b[i] >= 0x80 {
                if let Some(c) = text[i..].chars().next() {
                    // A digit that is not ASCII, or a mark between two digits ("1\u{332}00"):
                    // not a number this scan can read.
                    let between = i > 0
                        && b[i - 1].is_ascii_digit()
                        && b.get(i + c.len_utf8()).is_some_and(u8::is_ascii_digit);
                    if c.is_numeric() || between {
                        foreign.push(i);
                    }
                    i += c.len_utf8();
                    continue;
                }
            }
            i += 1;
            continue;
        }
        let was_blank = std::mem::replace(&mut line_blank, false);
        // ".5" is 0.5.
        let lead_point = i > 0 && b[i - 1] == b'.' && (i < 2 || !b[i - 2].is_ascii_digit());
        if let Some((value, end)) = european(text, i).or_else(|| indian(text, i)) {
            out.push(Stated {
                values: vec![value],
                parts: Vec::new(),
                start: i,
                end,
            });
            i = end;
            continue;
        }
        let (mut int, mut end, grouped) = digit_run(text, i, true);
        let mut frac = String::new();
        if lead_point {
            frac = std::mem::take(&mut int);
        } else if b.get(end) == Some(&b'.') && b.get(end + 1).is_some_and(u8::is_ascii_digit) {
            let (f, e, _) = digit_run(text, end + 1, false);
            frac = f;
            end = e;
        }
        if frac.is_empty() && !grouped && placed_as_item(text, end, was_blank) {
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
        // "1.250" may be 1.25 or (grouped the European way) 1250: either reads it.
        if frac.len() == 3 && !grouped && (1..=3).contains(&int.len()) {
            stated
                .values
                .push(Value::decimal(&format!("{int}{frac}"), ""));
        }
        // "19,99" may be a price with a decimal comma, or two numbers: 19.99, or both parts.
        let comma_decimal = frac.is_empty()
            && !grouped
            && b.get(end) == Some(&b',')
            && b.get(end + 1).is_some_and(u8::is_ascii_digit);
        if comma_decimal {
            let (f, e, _) = digit_run(text, end + 1, false);
            if f.len() <= 2 {
                stated.values = vec![Value::decimal(&int, &f)];
                stated.parts = vec![value.clone(), Value::decimal(&f, "")];
                stated.end = e;
                end = e;
            }
        }
        let after = text[end..].trim_start_matches([' ', '\u{00A0}', '\u{202F}']);
        let percent = after.starts_with('%')
            || after
                .get(..7)
                .is_some_and(|p| p.eq_ignore_ascii_case("percent"));
        if percent {
            if let Some(share) = value.divided_by(&Value::Ratio(100, 1)) {
                stated.values.push(share);
            }
        } else if b.get(end) == Some(&b'/') && b.get(end + 1).is_some_and(u8::is_ascii_digit) {
            let (den, e, _) = digit_run(text, end + 1, false);
            let den = Value::decimal(&den, "");
            stated.values = value.divided_by(&den).into_iter().collect();
            stated.parts = vec![value, den];
            stated.end = e;
            end = e;
        }
        out.push(stated);
        i = end.max(i + 1);
    }
    (out, foreign)
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

/// Where the sentences of `text` end: the bytes of "." "!" "?" before a blank (or the end), of
/// "。" "！" "？", and of line breaks, in order.
fn sentence_ends(text: &str) -> Vec<usize> {
    let b = text.as_bytes();
    text.char_indices()
        .filter(|&(i, c)| match c {
            '\n' | '。' | '！' | '？' => true,
            '.' | '!' | '?' => b.get(i + 1).is_none_or(u8::is_ascii_whitespace),
            _ => false,
        })
        .map(|(i, _)| i)
        .collect()
}

/// The bytes of the sentence of `text` around bytes `start..end` (`ends` from
/// [`sentence_ends`]).
fn sentence_bounds(text: &str, ends: &[usize], start: usize, end: usize) -> (usize, usize) {
    let k = ends.partition_point(|&e| e < start);
    let from = k.checked_sub(1).map_or(0, |p| {
        ends[p] + text[ends[p]..].chars().next().map_or(1, char::len_utf8)
    });
    let to = ends
        .get(ends[k..].partition_point(|&e| e < end) + k)
        .map_or(text.len(), |&e| {
            e + text[e..].chars().next().map_or(1, char::len_utf8)
        });
    (from, to)
}

/// The sentence `text[from..to]`, trimmed, cut to [`MAX_QUOTE_CHARS`] around the number at
/// `start` when longer.
fn quote(text: &str, from: usize, to: usize, start: usize) -> String {
    let sentence = &text[from..to];
    if sentence.chars().nth(MAX_QUOTE_CHARS).is_none() {
        return sentence.trim().to_string();
    }
    // A window on the number: what comes before it, then it and what follows.
    let mut before: Vec<char> = text[from..start]
        .chars()
        .rev()
        .take(MAX_QUOTE_CHARS / 2)
        .collect();
    before.reverse();
    let mut quote: String = before.iter().collect();
    quote.extend(text[start..to].chars().take(MAX_QUOTE_CHARS - before.len()));
    quote.trim().to_string()
}

/// The sentences of `answer` holding a number that what the `findings` checked does not hold
/// (their premises and claims, the text left untranslated in them or in the `translations`),
/// nor the rules they cite (`rules`: id, SMT-LIB expression and English, when known), nor that
/// can be read at all (a digit that is not ASCII); each once, in the answer's order.
pub fn unread_numbers<'a>(
    answer: &str,
    findings: &[Finding],
    translations: &[TranslatorOutput],
    rules: impl IntoIterator<Item = (&'a str, &'a str, Option<&'a str>)>,
) -> Vec<String> {
    let text = as_shown(answer);
    let (stated, foreign) = stated_numbers(&text);
    if stated.is_empty() && foreign.is_empty() {
        return Vec::new();
    }
    let mut read = BTreeSet::new();
    let read_prose = |t: &str, read: &mut BTreeSet<Value>| {
        for n in stated_numbers(&as_shown(t)).0 {
            read.extend(n.values);
            read.extend(n.parts);
        }
    };
    let mut cited: HashSet<String> = HashSet::new();
    for f in findings {
        if let Some(t) = f.translation() {
            for s in t.premises().iter().chain(t.claims()) {
                if let Some(logic) = s.logic.as_deref() {
                    logic_numbers(logic, &mut read);
                }
            }
            let left = t.untranslated_premises.iter().chain(&t.untranslated_claims);
            for r in left.flatten() {
                read_prose(r.text.as_deref().unwrap_or_default(), &mut read);
            }
        }
        // Text a NO_TRANSLATIONS finding carries as an extra member.
        if f.kind() == FindingKind::NoTranslations {
            if let Ok(v) = serde_json::to_value(f) {
                for key in ["untranslatedPremises", "untranslatedClaims"] {
                    let list = v.pointer(&format!("/noTranslations/translation/{key}"));
                    for r in list.and_then(|l| l.as_array()).into_iter().flatten() {
                        read_prose(r["text"].as_str().unwrap_or_default(), &mut read);
                    }
                }
            }
        }
        if let Ok(v) = serde_json::to_value(f) {
            let body = v.as_object().and_then(|o| o.values().next()).cloned();
            for key in ["supportingRules", "contradictingRules"] {
                let list = body
                    .as_ref()
                    .and_then(|b| b.get(key))
                    .and_then(|l| l.as_array());
                for r in list.into_iter().flatten() {
                    if let Some(id) = r["identifier"].as_str() {
                        cited.insert(id.to_string());
                    }
                }
            }
        }
    }
    for (id, expression, english) in rules {
        if cited.contains(id) {
            logic_numbers(expression, &mut read);
            // "10% tax" in the rule's English, where its logic holds 1.1.
            read_prose(english.unwrap_or_default(), &mut read);
        }
    }
    for t in translations {
        for r in t.untranslated_premises.iter().chain(&t.untranslated_claims) {
            read_prose(r, &mut read);
        }
    }
    let ends = sentence_ends(&text);
    let mut unread: Vec<(usize, usize)> = stated
        .iter()
        .filter(|n| {
            !(n.values.iter().any(|v| read.contains(v))
                || (!n.parts.is_empty() && n.parts.iter().all(|v| read.contains(v))))
        })
        .map(|n| (n.start, n.end))
        .chain(foreign.iter().map(|&i| (i, i)))
        .collect();
    unread.sort_unstable();
    let mut seen = HashSet::new();
    let mut out: Vec<String> = Vec::new();
    for (start, end) in unread {
        let (from, to) = sentence_bounds(&text, &ends, start, end);
        if seen.insert((from, to)) {
            let q = quote(&text, from, to, start);
            if !out.contains(&q) {
                out.push(q);
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
    use crate::findings::{Rule, Statement, Translation, ValidFinding};
    use crate::translation::parse_translations;
    use proptest::prelude::*;

    /// A VALID finding checking `claims` (SMT-LIB) under `premises`, citing rule R1.
    fn valid(premises: &[&str], claims: &[&str]) -> Vec<Finding> {
        let st = |l: &[&str]| Some(l.iter().map(|s| Statement::new(*s, "")).collect());
        vec![Finding::Valid(ValidFinding {
            translation: Some(Translation {
                premises: st(premises),
                claims: st(claims),
                ..Default::default()
            }),
            supporting_rules: Some(vec![Rule::new("R1", "v1")]),
            ..Default::default()
        })]
    }

    fn senior() -> Vec<Finding> {
        valid(&["(= age 70)"], &["(= fee 0)"])
    }

    fn unread(answer: &str, findings: &[Finding]) -> Vec<String> {
        unread_numbers(answer, findings, &[], [])
    }

    #[test]
    fn a_number_no_translation_reads_is_reported_with_its_sentence() {
        let answer = "You are 70, so you enter free. Children pay $100 on weekends.";
        assert_eq!(
            unread(answer, &senior()),
            vec!["Children pay $100 on weekends.".to_string()]
        );
    }

    #[test]
    fn numbers_the_findings_or_the_rules_they_cite_hold_are_read() {
        let answer = "Since you are 70 (over 65), admission is free: $0.";
        assert_eq!(unread(answer, &senior()).len(), 1);
        let rule = [("R1", "(=> (>= age 65) (= fee 0.0))", None)];
        assert!(unread_numbers(answer, &senior(), &[], rule).is_empty());
        // A rule the findings do not cite reads nothing.
        let other = [("R2", "(=> (>= age 65) (= fee 0.0))", None)];
        assert_eq!(unread_numbers(answer, &senior(), &[], other).len(), 1);
    }

    #[test]
    fn text_listed_as_untranslated_is_read() {
        let doc = r#"{"translations": [{"pairs": [{"premises": ["(= age 70)"], "claims": ["(= fee 0)"]}],
            "untranslatedClaims": ["Call 555-0100 for details"]}]}"#;
        let answer = "At 70 you enter free. Call 555-0100 for details.";
        let outputs = parse_translations(doc).unwrap();
        assert!(unread_numbers(answer, &senior(), &outputs, []).is_empty());
    }

    #[test]
    fn values_compare_as_exact_fractions() {
        let checked = valid(
            &[],
            &[
                "(= fee 1200.5)",
                "(= discount 0.15)",
                "(= share (/ 1 2))",
                "(= x 07.10)",
            ],
        );
        let answer = "The fee is $1,200.50, with a 15% discount; half is 1/2, and x is 7.1000.";
        assert!(unread(answer, &checked).is_empty(), "{answer}");
        assert_eq!(unread("The fee is $1,200.51.", &checked).len(), 1);
    }

    #[test]
    fn item_numbers_are_not_stated_numbers_but_names_hold_numbers() {
        let answer = "1. Bring your ticket.\n2) Show it at the gate.\n1. A new list.";
        assert!(unread(answer, &senior()).is_empty());
        // A decimal first on its line is a number, not an item; so is an item out of turn.
        assert_eq!(unread("4.5 is the fee.", &senior()).len(), 1);
        assert_eq!(unread("Kids pay:\n100. dollars", &senior()).len(), 1);
        // Digits in a name are stated ("USD100" hides nothing).
        let out = unread("Kids pay USD100.\nBoard the A320.", &senior());
        assert_eq!(out.len(), 2, "{out:?}");
    }

    #[test]
    fn digits_inside_a_symbol_are_not_numerals() {
        let findings = valid(&[], &["(= plan PLAN_100)", "rule_5"]);
        assert_eq!(unread("You pay 100 or 5.", &findings).len(), 1);
    }

    /// A review's ways to show "100" while the scanner read small, already-read pieces (or
    /// nothing): each is read as 100 now, or leaves its sentence unread.
    #[test]
    fn a_number_shows_as_one_number_however_it_is_split_or_spelt() {
        // 1, 0 and 1000 are read; 100 is not.
        let findings = valid(&["(= age 1)", "(= n 0)", "(= m 1000)"], &["(= fee 0)"]);
        for answer in [
            "Children pay $1\u{200E}00.",
            "Children pay **1**00.",
            "Children pay 1&lrm;00.",
            "Children pay 1<!-- -->00.",
            "Children pay $１００.",
            "Children pay $١٠٠.",
            "Children pay ¹⁰⁰ dollars.",
        ] {
            assert_eq!(unread(answer, &findings).len(), 1, "{answer}");
        }
        // Grouped, it is the grouped value: read (1000), whatever the grouping.
        for answer in [
            "Children pay 1 000 dollars.",
            "Children pay 1'000 dollars.",
            "Children pay 1\u{202F}000 dollars.",
            "Kinder zahlen 1.000 Euro.",
            "Children pay 1,000 dollars.",
        ] {
            assert!(unread(answer, &findings).is_empty(), "{answer}");
        }
        // 1.000,50 is 1000.5, which nothing read.
        assert_eq!(unread("Kinder zahlen 1.000,50 Euro.", &findings).len(), 1);
    }

    /// A second review's ways to show 100 while the scanner read small pieces or nothing:
    /// numeric entities, an unclosed comment, marks and ignorable characters between digits,
    /// tags, links, emphasis around a separator; each is read as 100 now, or leaves its
    /// sentence unread. Indian, comma-decimal and leading-point numbers are read as shown.
    #[test]
    fn markup_and_marks_do_not_split_or_hide_a_number() {
        let findings = valid(&["(= age 1)", "(= n 0)", "(= m 1000)"], &["(= fee 0)"]);
        for answer in [
            "Children pay $&#49;&#48;&#48;.",
            "Children pay 1&#x30;0.",
            "Prices (<!-- see desk) are fixed. Children pay $100.",
            "Children pay 1\u{034F}00.",
            "Children pay 1\u{FE0F}00.",
            "Children pay 1\u{200A}00.",
            "Children pay 1\u{0332}00.",
            "Children pay [1](u)00.",
            "Children pay 1<span>00</span>.",
            "Children pay 1<b></b>00.",
            "Children pay <x 100>.",
            "Children pay 1**,**000.50.",
        ] {
            assert_eq!(unread(answer, &findings).len(), 1, "{answer}");
        }
        let read = valid(
            &[],
            &[
                "(= fee 100000)",
                "(= rate 0.05)",
                "(= price 19.99)",
                "(= k 1250)",
            ],
        );
        for answer in [
            "It costs ₹1,00,000.",
            "It costs .05 of it.",
            "Es kostet 19,99 Euro.",
            "Sie zahlen 1.250 Euro.",
        ] {
            assert!(
                unread(answer, &read).is_empty(),
                "{answer}: {:?}",
                unread(answer, &read)
            );
        }
        // A year before a count is two numbers, not 2023500.
        let counted = valid(&[], &["(= year 2023)", "(= visitors 500)"]);
        assert!(unread("In 2023 500 visitors came.", &counted).is_empty());
    }

    #[test]
    fn a_cited_rules_english_reads_its_numbers() {
        let findings = senior();
        let rules = [(
            "R1",
            "(= total (* 1.1 fee))",
            Some("Tax is 10% of the fee."),
        )];
        assert!(unread_numbers("You pay 10% tax on $0.", &findings, &[], rules).is_empty());
    }

    #[test]
    fn a_long_sentence_is_quoted_around_its_number() {
        let answer = format!("{} Children pay $100 {}", "x".repeat(400), "y".repeat(400));
        let out = unread(&answer, &senior());
        assert_eq!(out.len(), 1);
        assert!(out[0].contains("$100"), "{}", out[0]);
        assert!(out[0].chars().count() <= MAX_QUOTE_CHARS);
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
        // And its text reads as untranslated when the findings are checked again.
        let again = unread("Children pay $100.", &[f]);
        assert!(again.is_empty(), "{again:?}");
    }

    proptest! {
        // Any text: no panic, and every sentence reported is text of the answer as shown.
        #[test]
        fn any_text_is_scanned_safely(answer in "\\PC{0,120}", logic in "[ ()/0-9.a-z]{0,40}") {
            let findings = valid(&[], &[&logic]);
            let shown = as_shown(&answer);
            for s in unread(&answer, &findings) {
                let head: String = s.chars().take(5).collect();
                prop_assert!(shown.contains(&head));
            }
        }

        // A number the logic states with the same value is always read.
        #[test]
        fn a_stated_value_is_read(n in 0u64..1_000_000, cents in 0u32..100) {
            let answer = format!("The fee is ${n}.{cents:02} today.");
            let logic = format!("(= fee {}.{:02})", n, cents);
            prop_assert!(unread(&answer, &valid(&[], &[&logic])).is_empty());
        }
    }
}

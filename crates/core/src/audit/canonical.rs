//! The canonical encoding a record's hash is computed over (format version 1).
//!
//! `hash = lowercase hex of SHA-256(canonical({"at", "body", "kind", "prev", "seq"}))`, where
//! `canonical` writes JSON with:
//! - no whitespace outside strings;
//! - object keys sorted by Unicode code point (byte order of their UTF-8), recursively;
//! - strings escaped as serde_json escapes them: `\"`, `\\`, `\b`, `\f`, `\n`, `\r`, `\t`,
//!   other control characters as `\u00xx` (lower-case hex), everything else verbatim;
//! - integers in decimal; a float with no fractional part and magnitude below 2^53 written as
//!   that integer (so `1.0` and `1` are the same value, as they are in JavaScript); other
//!   floats in serde_json's shortest round-trip form.
//!
//! The hash therefore covers a record's JSON *value*, not its bytes: re-indenting a trail or
//! reordering keys keeps it valid; changing any value breaks it.

use super::RecordKind;
use serde_json::Value;
use sha2::{Digest, Sha256};
use std::fmt::Write;

/// 2^53: integers below this are exact in an IEEE double (and in JavaScript).
const EXACT_INTEGER_LIMIT: f64 = 9_007_199_254_740_992.0;

/// Appends the canonical encoding of `value` to `out`.
pub fn write_canonical(out: &mut String, value: &Value) {
    match value {
        Value::Null => out.push_str("null"),
        Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::Number(n) => write_number(out, n),
        Value::String(s) => write_string(out, s),
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_canonical(out, item);
            }
            out.push(']');
        }
        Value::Object(map) => {
            // Sorted on the stack for the usual small objects (no allocation per object).
            const SMALL: usize = 16;
            static NULL: Value = Value::Null;
            if map.len() <= SMALL {
                let mut entries: [(&str, &Value); SMALL] = [("", &NULL); SMALL];
                for (slot, (k, v)) in entries.iter_mut().zip(map) {
                    *slot = (k.as_str(), v);
                }
                let entries = &mut entries[..map.len()];
                entries.sort_unstable_by(|a, b| a.0.cmp(b.0));
                write_entries(out, entries.iter().copied());
            } else {
                let mut entries: Vec<(&str, &Value)> =
                    map.iter().map(|(k, v)| (k.as_str(), v)).collect();
                entries.sort_unstable_by(|a, b| a.0.cmp(b.0));
                write_entries(out, entries.into_iter());
            }
        }
    }
}

/// Writes `{"k":v,...}` for entries already in key order (keys of a map are distinct, so the
/// unstable sort above orders them exactly as a stable one would).
fn write_entries<'a>(out: &mut String, entries: impl Iterator<Item = (&'a str, &'a Value)>) {
    out.push('{');
    for (i, (k, v)) in entries.enumerate() {
        if i > 0 {
            out.push(',');
        }
        write_string(out, k);
        out.push(':');
        write_canonical(out, v);
    }
    out.push('}');
}

fn write_number(out: &mut String, n: &serde_json::Number) {
    // `write!` to a String cannot fail.
    if let Some(i) = n.as_i64() {
        let _ = write!(out, "{i}");
    } else if let Some(u) = n.as_u64() {
        let _ = write!(out, "{u}");
    } else if let Some(f) = n.as_f64() {
        if f.fract() == 0.0 && f.abs() < EXACT_INTEGER_LIMIT {
            // Exact: |f| < 2^53 fits an i64 without rounding.
            let _ = write!(out, "{}", f as i64);
        } else {
            let _ = write!(out, "{n}");
        }
    } else {
        let _ = write!(out, "{n}");
    }
}

/// How each byte is written in a JSON string: 0 verbatim, `u` as `\u00xx`, otherwise a
/// backslash and this letter (serde_json's table: a lookup per byte, not a match).
static ESCAPE: [u8; 256] = {
    let mut table = [0u8; 256];
    let mut b = 0;
    while b < 0x20 {
        table[b] = b'u';
        b += 1;
    }
    table[0x08] = b'b';
    table[0x0c] = b'f';
    table[b'\n' as usize] = b'n';
    table[b'\r' as usize] = b'r';
    table[b'\t' as usize] = b't';
    table[b'"' as usize] = b'"';
    table[b'\\' as usize] = b'\\';
    table
};

/// Writes `s` as a JSON string, escaped exactly as serde_json escapes it (the rules in the
/// module documentation; a test compares the two on every ASCII character and more), without
/// an allocation per string.
pub(crate) fn write_string(out: &mut String, s: &str) {
    out.push('"');
    write_escaped(out, s);
    out.push('"');
}

/// The inside of [`write_string`]'s quotes. Each byte is escaped on its own, so the escaped
/// text of `a + b` is the escaped `a` followed by the escaped `b`.
pub(crate) fn write_escaped(out: &mut String, s: &str) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let bytes = s.as_bytes();
    let mut start = 0;
    for (i, &b) in bytes.iter().enumerate() {
        let escape = ESCAPE[usize::from(b)];
        if escape == 0 {
            continue;
        }
        // Every byte escaped is ASCII, so `start..i` are character boundaries.
        out.push_str(&s[start..i]);
        out.push('\\');
        if escape == b'u' {
            out.push_str("u00");
            out.push(char::from(HEX[usize::from(b >> 4)]));
            out.push(char::from(HEX[usize::from(b & 0xf)]));
        } else {
            out.push(char::from(escape));
        }
        start = i + 1;
    }
    out.push_str(&s[start..]);
}

/// The canonical encoding of a whole value.
pub fn canonical_json(value: &Value) -> String {
    let mut out = String::new();
    write_canonical(&mut out, value);
    out
}

/// The hash of a record with these fields.
pub fn record_hash(seq: u64, prev: &str, at: u64, kind: RecordKind, body: &Value) -> String {
    // Keys in sorted order: at, body, kind, prev, seq.
    let mut out = String::with_capacity(256);
    out.push_str("{\"at\":");
    let _ = write!(out, "{at}");
    out.push_str(",\"body\":");
    write_canonical(&mut out, body);
    out.push_str(",\"kind\":");
    write_string(&mut out, kind.as_str());
    out.push_str(",\"prev\":");
    write_string(&mut out, prev);
    out.push_str(",\"seq\":");
    let _ = write!(out, "{seq}");
    out.push('}');
    hex::encode(Sha256::digest(out.as_bytes()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn sorts_keys_and_drops_whitespace() {
        let v: Value =
            serde_json::from_str(r#"{ "b": [1, {"z": null, "a": true}], "a": "x\ny" }"#).unwrap();
        assert_eq!(
            canonical_json(&v),
            r#"{"a":"x\ny","b":[1,{"a":true,"z":null}]}"#
        );
    }

    #[test]
    fn integral_floats_are_integers() {
        let a: Value = serde_json::from_str("[1.0, -0.0, 1e3, 0.5, 1e300]").unwrap();
        assert_eq!(canonical_json(&a), "[1,0,1000,0.5,1e+300]");
        assert_eq!(canonical_json(&json!(u64::MAX)), u64::MAX.to_string());
    }

    #[test]
    fn strings_are_escaped_as_serde_json_escapes_them() {
        let mut samples: Vec<String> = (0u32..0x80)
            .chain([0x7f, 0xa0, 0x2028, 0x2029, 0xfeff, 0x1f600])
            .filter_map(char::from_u32)
            .map(|c| format!("a{c}b{c}"))
            .collect();
        samples.push("\u{0}\u{1f}\"\\ é \n\r\t\u{8}\u{c} \u{10ffff}".into());
        samples.push(String::new());
        for s in samples {
            let mut out = String::new();
            write_string(&mut out, &s);
            assert_eq!(out, serde_json::to_string(&s).unwrap(), "{s:?}");
        }
    }

    proptest::proptest! {
        /// Long and short strings of text, controls, quotes, backslashes and other characters
        /// escape as serde_json escapes them.
        #[test]
        fn any_string_is_escaped_as_serde_json_escapes_it(
            s in "([a-z \\\\\"é€😀\\x00-\\x1f\\x7f]|[a-zA-Z0-9 ]{1,12}){0,24}"
        ) {
            let mut out = String::new();
            write_string(&mut out, &s);
            proptest::prop_assert_eq!(out, serde_json::to_string(&s).unwrap());
        }
    }

    #[test]
    fn large_objects_are_sorted_too() {
        let mut map = serde_json::Map::new();
        for i in (0..40).rev() {
            map.insert(format!("k{i:02}"), json!(i));
        }
        let text = canonical_json(&Value::Object(map));
        assert!(text.starts_with(r#"{"k00":0,"k01":1,"#), "{text}");
        assert!(text.ends_with(r#""k39":39}"#), "{text}");
    }

    #[test]
    fn hash_is_stable() {
        // A fixed vector (computed independently): changing the encoding breaks every
        // stored trail.
        let h = record_hash(0, &"0".repeat(64), 5, RecordKind::Tick, &json!({"now": 5}));
        assert_eq!(
            h,
            "8bc9dc6180ef93c51d6178cde8a673586ed24b538c711bb09cdc28bac67713d2"
        );
    }
}

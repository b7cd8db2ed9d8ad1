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
            let mut entries: Vec<(&String, &Value)> = map.iter().collect();
            entries.sort_by(|a, b| a.0.cmp(b.0));
            out.push('{');
            for (i, (k, v)) in entries.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_string(out, k);
                out.push(':');
                write_canonical(out, v);
            }
            out.push('}');
        }
    }
}

fn write_number(out: &mut String, n: &serde_json::Number) {
    if let Some(i) = n.as_i64() {
        out.push_str(&i.to_string());
    } else if let Some(u) = n.as_u64() {
        out.push_str(&u.to_string());
    } else if let Some(f) = n.as_f64() {
        if f.fract() == 0.0 && f.abs() < EXACT_INTEGER_LIMIT {
            // Exact: |f| < 2^53 fits an i64 without rounding.
            out.push_str(&(f as i64).to_string());
        } else {
            out.push_str(&n.to_string());
        }
    } else {
        out.push_str(&n.to_string());
    }
}

fn write_string(out: &mut String, s: &str) {
    // serde_json's string escaping is the one documented above; it cannot fail for a str.
    match serde_json::to_string(s) {
        Ok(quoted) => out.push_str(&quoted),
        Err(_) => out.push_str("\"\""),
    }
}

/// The canonical encoding of a whole value.
pub fn canonical_json(value: &Value) -> String {
    let mut out = String::new();
    write_canonical(&mut out, value);
    out
}

/// The hash of a record with these fields.
pub fn record_hash(seq: u64, prev: &str, at: u64, kind: RecordKind, body: &Value) -> String {
    let mut out = String::new();
    // Keys in sorted order: at, body, kind, prev, seq.
    out.push_str("{\"at\":");
    out.push_str(&at.to_string());
    out.push_str(",\"body\":");
    write_canonical(&mut out, body);
    out.push_str(",\"kind\":");
    write_string(&mut out, kind.as_str());
    out.push_str(",\"prev\":");
    write_string(&mut out, prev);
    out.push_str(",\"seq\":");
    out.push_str(&seq.to_string());
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

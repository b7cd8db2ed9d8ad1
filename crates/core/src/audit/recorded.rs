//! A trail read from JSON text without building its bodies: each record's body stays the text
//! it was recorded as until replay needs it as a value.
//!
//! Replay compares every recorded record with the one the machine produces. Reading each body
//! into a [`Value`] first, only to compare it and throw it away, was most of a replay's
//! allocations; [`body_is`] compares the text with the machine's value as it reads it, and a
//! body is read into a value only when that comparison fails (for the report) or when it is
//! the first record.

use super::record::{AuditRecord, RecordKind};
use serde::de::{self, DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::{Map, Number, Value};
use std::borrow::Cow;
use std::fmt;

/// A record as written in the trail, with its body as the JSON text it was recorded as. It has
/// the fields of [`AuditRecord`] and accepts what it accepts, bodies excepted: every body that
/// is JSON is accepted here and read as a value later.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RecordText<'a> {
    pub seq: u64,
    #[serde(borrow)]
    pub prev: Cow<'a, str>,
    pub at: u64,
    pub kind: RecordKind,
    #[serde(borrow)]
    pub body: &'a RawValue,
    #[serde(borrow)]
    pub hash: Cow<'a, str>,
}

impl RecordText<'_> {
    /// The record with its body read as a value.
    pub fn to_record(&self) -> Result<AuditRecord, serde_json::Error> {
        Ok(AuditRecord {
            seq: self.seq,
            prev: self.prev.clone().into_owned(),
            at: self.at,
            kind: self.kind,
            body: super::strict_json::value_from_str(self.body.get())?,
            hash: self.hash.clone().into_owned(),
        })
    }

    /// Whether this is exactly `produced`: the same seq, prev, at, kind, stored hash, and a
    /// body that reads as a value equal to `produced`'s (what comparing the read record with
    /// `==` decides, without reading it).
    pub fn is(&self, produced: &AuditRecord) -> bool {
        self.seq == produced.seq
            && self.at == produced.at
            && self.kind == produced.kind
            && self.prev == produced.prev
            && self.hash == produced.hash
            && body_is(self.body, &produced.body)
    }
}

/// Reads a JSON array of records, each body left as text; `None` if the text is not such an
/// array (the caller then reads it the thorough way, which says what is wrong where).
pub(super) fn read_records(json: &[u8]) -> Option<Vec<RecordText<'_>>> {
    serde_json::from_slice(json).ok()
}

/// Whether the JSON text `text` reads as a value equal (`==`) to `expected`. A duplicated key
/// (which reading into a value would silently collapse) counts as unequal, so a `true` is
/// always right and a `false` sends the caller to the reading that explains the difference.
pub(super) fn body_is(text: &RawValue, expected: &Value) -> bool {
    let mut de = serde_json::Deserializer::from_str(text.get());
    Expect(expected).deserialize(&mut de).is_ok() && de.end().is_ok()
}

/// Reads one JSON value and fails unless it equals the value it holds. Numbers are made into
/// values exactly as serde_json's own value reader makes them, so that equality is the same.
struct Expect<'v>(&'v Value);

fn differs<E: de::Error>() -> E {
    E::custom("differs from the machine's record")
}

fn check<E: de::Error>(same: bool) -> Result<(), E> {
    if same {
        Ok(())
    } else {
        Err(differs())
    }
}

impl<'de> DeserializeSeed<'de> for Expect<'_> {
    type Value = ();
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Expect<'_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_unit<E: de::Error>(self) -> Result<(), E> {
        check(self.0.is_null())
    }

    fn visit_bool<E: de::Error>(self, b: bool) -> Result<(), E> {
        check(self.0.as_bool() == Some(b))
    }

    fn visit_u64<E: de::Error>(self, n: u64) -> Result<(), E> {
        check(matches!(self.0, Value::Number(x) if *x == Number::from(n)))
    }

    fn visit_i64<E: de::Error>(self, n: i64) -> Result<(), E> {
        check(matches!(self.0, Value::Number(x) if *x == Number::from(n)))
    }

    fn visit_f64<E: de::Error>(self, n: f64) -> Result<(), E> {
        // As serde_json's reader: a float that is not finite reads as null.
        match Number::from_f64(n) {
            Some(n) => check(matches!(self.0, Value::Number(x) if *x == n)),
            None => check(self.0.is_null()),
        }
    }

    fn visit_str<E: de::Error>(self, s: &str) -> Result<(), E> {
        check(self.0.as_str() == Some(s))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        let Value::Array(items) = self.0 else {
            return Err(differs());
        };
        for item in items {
            if seq.next_element_seed(Expect(item))?.is_none() {
                return Err(differs());
            }
        }
        // One element more than the machine's is a difference too.
        check(seq.next_element::<de::IgnoredAny>()?.is_none())
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        let Value::Object(object) = self.0 else {
            return Err(differs());
        };
        // Which of the machine's keys were read; more than 128 keys is left to the thorough
        // comparison (no record body has that many).
        if object.len() > 128 {
            return Err(differs());
        }
        let mut seen = 0u128;
        // Keys are usually in the machine's own order: try the next one first.
        let mut next = 0;
        while let Some(index) = map.next_key_seed(Key { object, next })? {
            let bit = 1u128 << index;
            if seen & bit != 0 {
                return Err(differs()); // a duplicated key
            }
            seen |= bit;
            next = index + 1;
            let (_, value) = object.iter().nth(index).ok_or_else(differs)?;
            map.next_value_seed(Expect(value))?;
        }
        check(seen.count_ones() as usize == object.len())
    }
}

/// Reads a key and finds its position among the machine's keys (trying `next` first).
struct Key<'v> {
    object: &'v Map<String, Value>,
    next: usize,
}

impl<'de> DeserializeSeed<'de> for Key<'_> {
    type Value = usize;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<usize, D::Error> {
        d.deserialize_str(self)
    }
}

impl<'de> Visitor<'de> for Key<'_> {
    type Value = usize;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an object key")
    }

    fn visit_str<E: de::Error>(self, key: &str) -> Result<usize, E> {
        if self.object.keys().nth(self.next).is_some_and(|k| k == key) {
            return Ok(self.next);
        }
        self.object
            .keys()
            .position(|k| k == key)
            .ok_or_else(differs)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use serde_json::json;

    fn raw(text: &str) -> Box<RawValue> {
        RawValue::from_string(text.to_string()).unwrap()
    }

    /// What `body_is` must decide: the text read as a value, compared with `==`.
    fn read_and_compare(text: &str, expected: &Value) -> bool {
        serde_json::from_str::<Value>(text).is_ok_and(|v| v == *expected)
    }

    #[test]
    fn equal_values_in_any_key_order_are_the_same() {
        let v = json!({"a": 1, "b": [true, null, "x\n"], "c": {"d": 1.5, "e": -2}});
        assert!(body_is(&raw(&v.to_string()), &v));
        let reordered = r#"{ "c": {"e": -2, "d": 1.5}, "b": [true, null, "x\n"], "a": 1 }"#;
        assert!(body_is(&raw(reordered), &v));
    }

    #[test]
    fn every_difference_is_seen() {
        let v = json!({"a": 1, "b": [true, "x"], "c": {"d": 1.5}});
        for text in [
            r#"{"a": 2, "b": [true, "x"], "c": {"d": 1.5}}"#,
            r#"{"a": 1.0, "b": [true, "x"], "c": {"d": 1.5}}"#, // 1.0 is not 1 as a value
            r#"{"a": 1, "b": [true, "y"], "c": {"d": 1.5}}"#,
            r#"{"a": 1, "b": [true], "c": {"d": 1.5}}"#,
            r#"{"a": 1, "b": [true, "x", 3], "c": {"d": 1.5}}"#,
            r#"{"a": 1, "b": [true, "x"], "c": {"d": 1.5, "e": 0}}"#,
            r#"{"a": 1, "b": [true, "x"], "c": {}}"#,
            r#"{"a": 1, "b": [true, "x"]}"#,
            r#"{"a": 1, "b": [true, "x"], "c": {"d": 1.5}, "z": null}"#,
            r#"{"a": 1, "a": 1, "b": [true, "x"], "c": {"d": 1.5}}"#,
            r#"{"a": 1, "b": {"0": true}, "c": {"d": 1.5}}"#,
            r#"[1]"#,
            r#"null"#,
        ] {
            assert!(!body_is(&raw(text), &v), "{text}");
        }
    }

    #[test]
    fn a_duplicated_key_is_never_the_same() {
        // Read into a value, the last one wins and the values would compare equal: the
        // thorough comparison decides such a body, not this one.
        let v = json!({"a": 2});
        assert!(!body_is(&raw(r#"{"a": 1, "a": 2}"#), &v));
        assert!(!body_is(&raw(r#"{"a": 2, "a": 2}"#), &v));
    }

    fn json_value() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            any::<i64>().prop_map(Value::from),
            any::<u64>().prop_map(Value::from),
            (-1e6f64..1e6).prop_map(Value::from),
            prop_oneof![Just(1.0f64), Just(0.0), Just(-0.0), Just(2.5e300)].prop_map(Value::from),
            "[a-c\"\\\\\n\u{e9}]{0,4}".prop_map(Value::from),
        ];
        leaf.prop_recursive(4, 32, 4, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
                prop::collection::vec(("[a-d]{1,2}", inner), 0..5)
                    .prop_map(|kv| Value::Object(kv.into_iter().collect())),
            ]
        })
    }

    /// A text for `v` with every object's keys in reverse order, and possibly a key repeated.
    fn reordered_text(v: &Value, repeat: bool) -> String {
        match v {
            Value::Array(items) => format!(
                "[{}]",
                items
                    .iter()
                    .map(|i| reordered_text(i, repeat))
                    .collect::<Vec<_>>()
                    .join(",")
            ),
            Value::Object(map) => {
                let mut parts: Vec<String> = map
                    .iter()
                    .rev()
                    .map(|(k, v)| {
                        format!("{}:{}", Value::from(k.as_str()), reordered_text(v, repeat))
                    })
                    .collect();
                if repeat {
                    if let Some(first) = parts.first().cloned() {
                        parts.push(first);
                    }
                }
                format!("{{{}}}", parts.join(","))
            }
            other => other.to_string(),
        }
    }

    proptest! {
        /// `body_is` decides exactly what reading and comparing decides, except that it calls
        /// a duplicated key a difference.
        #[test]
        fn decides_as_reading_and_comparing(a in json_value(), b in json_value(), repeat in any::<bool>()) {
            for text in [a.to_string(), reordered_text(&a, false), b.to_string()] {
                prop_assert_eq!(body_is(&raw(&text), &a), read_and_compare(&text, &a), "{}", text);
            }
            let text = reordered_text(&a, repeat);
            if body_is(&raw(&text), &a) {
                prop_assert!(read_and_compare(&text, &a));
            }
        }
    }
}

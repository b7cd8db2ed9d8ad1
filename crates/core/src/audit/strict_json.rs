//! JSON values read without the silent collapse of duplicated keys.
//!
//! serde_json keeps the last of two equal keys, and so does JavaScript's `JSON.parse`, so a
//! record holding `"question": "forged", "question": "signed"` hashes as the signed record does
//! and replays. A reader that keeps the first one (RFC 8259 leaves it open) would see another
//! record under the same hash. A trail's records are read with this instead: a duplicated key
//! is an error, so one text has one meaning for every reader.

use serde::de::{self, DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Number, Value};
use std::fmt;

/// Reads one JSON value as serde_json's own reader would, refusing a duplicated key in any
/// object.
#[derive(Clone, Copy)]
pub(crate) struct Strict;

impl<'de> DeserializeSeed<'de> for Strict {
    type Value = Value;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Strict {
    type Value = Value;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON value whose objects have distinct keys")
    }
    fn visit_bool<E>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }
    fn visit_i64<E>(self, v: i64) -> Result<Value, E> {
        Ok(Value::Number(v.into()))
    }
    fn visit_u64<E>(self, v: u64) -> Result<Value, E> {
        Ok(Value::Number(v.into()))
    }
    fn visit_f64<E>(self, v: f64) -> Result<Value, E> {
        // As serde_json's value reader: JSON has no NaN or infinity.
        Ok(Number::from_f64(v).map_or(Value::Null, Value::Number))
    }
    fn visit_str<E>(self, v: &str) -> Result<Value, E> {
        Ok(Value::String(v.to_owned()))
    }
    fn visit_string<E>(self, v: String) -> Result<Value, E> {
        Ok(Value::String(v))
    }
    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }
    fn visit_none<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }
    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        d.deserialize_any(self)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut items = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(4096));
        while let Some(v) = seq.next_element_seed(Strict)? {
            items.push(v);
        }
        Ok(Value::Array(items))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut out = Map::new();
        while let Some(key) = map.next_key::<String>()? {
            let value = map.next_value_seed(Strict)?;
            if out.contains_key(&key) {
                return Err(de::Error::custom(format_args!(
                    "the key `{key}` appears twice in one object (readers disagree on which \
                     one counts)"
                )));
            }
            out.insert(key, value);
        }
        Ok(Value::Object(out))
    }
}

/// [`Strict`] for a serde field (`#[serde(deserialize_with = ...)]`).
pub(crate) fn value<'de, D: Deserializer<'de>>(d: D) -> Result<Value, D::Error> {
    Strict.deserialize(d)
}

/// A JSON text read with [`Strict`].
pub(crate) fn value_from_str(text: &str) -> Result<Value, serde_json::Error> {
    let mut de = serde_json::Deserializer::from_str(text);
    let v = Strict.deserialize(&mut de)?;
    de.end()?;
    Ok(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_as_serde_json_does_and_refuses_duplicated_keys() {
        for text in [
            r#"{"a": [1, -2, 3.5, 1e300, 18446744073709551615, 1e400, null, true, "x\u0000"], "b": {}}"#,
            "[]",
            "0",
            r#""\ud83d\ude00""#,
            "123456789012345678901234567890",
        ] {
            let ours = value_from_str(text);
            let theirs: Result<Value, _> = serde_json::from_str(text);
            match (ours, theirs) {
                (Ok(a), Ok(b)) => assert_eq!(a, b, "{text}"),
                (Err(_), Err(_)) => {}
                (a, b) => panic!("{text}: {a:?} vs {b:?}"),
            }
        }
        let e = value_from_str(r#"{"q": "forged", "n": {"q": 1, "q": 2}}"#).unwrap_err();
        assert!(e.to_string().contains("`q` appears twice"), "{e}");
        assert!(value_from_str(r#"{"q": "a", "q": "a"}"#).is_err());
        assert!(value_from_str(r#"[{"a": 1}, {"a": 2}]"#).is_ok());
    }
}

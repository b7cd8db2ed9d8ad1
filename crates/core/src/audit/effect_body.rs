//! How an effect is written into its record.
//!
//! Format 1 records every effect whole, prompts included. A prompt is a pure function of the
//! THREAD_STARTED record and the inputs before it (replay rebuilds it to compare), and most of
//! it is the policy's text: with a local policy a TRANSLATE record spelled out the vocabulary
//! once per translator (10.7 KB of a 28 KB trail). From format 2 a record holds each prompt's
//! SHA-256 instead: replay still rebuilds every prompt and compares its digest, so a changed
//! prompt is caught exactly as before, and the trail holds the policy's text once.

use super::canonical::write_string;
use crate::thread::Effect;
use crate::translation::ChatTurn;
use serde_json::{json, Value};
use sha2::{Digest, Sha256};

/// The first format whose effect records hold prompt digests instead of prompts.
pub const PROMPT_DIGESTS_SINCE: u32 = 2;

/// Lower-case hex SHA-256 of `bytes`.
fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

/// The body of `effect`'s record in a trail of format `version`.
pub(crate) fn effect_record_body(effect: &Effect, version: u32) -> Value {
    if version >= PROMPT_DIGESTS_SINCE {
        // Written straight from the effect: replay makes this body for every prompt it
        // rebuilds, so the prompts are hashed without building a JSON tree of them first.
        match effect {
            Effect::CallLlm { purpose, prompt } => {
                return json!({
                    "type": "CallLlm",
                    "purpose": purpose,
                    "promptSha256": sha256_hex(prompt.as_bytes()),
                })
            }
            Effect::Translate { calls } => {
                let calls: Vec<Value> = calls
                    .iter()
                    .map(|c| {
                        json!({
                            "translator": c.translator,
                            "attempt": c.attempt,
                            "messagesSha256": messages_digest(&c.messages),
                        })
                    })
                    .collect();
                return json!({"type": "Translate", "calls": calls});
            }
            _ => {}
        }
    }
    serde_json::to_value(effect).expect("thread types always serialize to JSON")
}

/// SHA-256 of the canonical JSON of a message list (`[{"content": …, "role": …}, …]`, keys
/// sorted as [`super::canonical`] sorts them).
fn messages_digest(messages: &[ChatTurn]) -> String {
    let mut out = String::with_capacity(messages.iter().map(|m| m.content.len() + 32).sum());
    out.push('[');
    for (i, m) in messages.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        out.push_str("{\"content\":");
        write_string(&mut out, &m.content);
        out.push_str(",\"role\":");
        write_string(&mut out, &m.role);
        out.push('}');
    }
    out.push(']');
    sha256_hex(out.as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::thread::LlmPurpose;
    use crate::translation::{ChatTurn, TranslatorCall};

    fn call_llm(prompt: &str) -> Effect {
        Effect::CallLlm {
            purpose: LlmPurpose::InitialAnswer,
            prompt: prompt.into(),
        }
    }

    fn translate(content: &str) -> Effect {
        Effect::Translate {
            calls: vec![TranslatorCall {
                translator: 0,
                attempt: 0,
                messages: vec![ChatTurn::user(content)],
            }],
        }
    }

    #[test]
    fn format_1_records_prompts_whole() {
        let body = effect_record_body(&call_llm("the policy says"), 1);
        assert_eq!(body["prompt"], "the policy says");
        let body = effect_record_body(&translate("the vocabulary"), 1);
        assert_eq!(body["calls"][0]["messages"][0]["content"], "the vocabulary");
    }

    #[test]
    fn format_2_records_digests_that_change_with_any_byte() {
        let body = effect_record_body(&call_llm("the policy says"), 2);
        assert!(body.get("prompt").is_none());
        assert_eq!(
            body["promptSha256"],
            sha256_hex(b"the policy says"),
            "the digest is of the prompt's UTF-8 text"
        );
        assert_ne!(effect_record_body(&call_llm("the policy says."), 2), body);

        let body = effect_record_body(&translate("the vocabulary"), 2);
        let call = &body["calls"][0];
        assert!(call.get("messages").is_none());
        assert_eq!(
            (call["translator"].as_u64(), call["attempt"].as_u64()),
            (Some(0), Some(0))
        );
        assert_eq!(call["messagesSha256"].as_str().map(str::len), Some(64));
        assert_ne!(effect_record_body(&translate("the vocabulary!"), 2), body);
    }

    /// The digests as the record's definition states them: the effect's JSON, with each
    /// prompt replaced by the SHA-256 of its text or of its messages' canonical JSON.
    fn by_definition(effect: &Effect) -> Value {
        let mut body = serde_json::to_value(effect).unwrap();
        let obj = body.as_object_mut().unwrap();
        if let Some(Value::String(prompt)) = obj.remove("prompt") {
            obj.insert("promptSha256".into(), sha256_hex(prompt.as_bytes()).into());
        }
        if let Some(Value::Array(calls)) = obj.get_mut("calls") {
            for call in calls.iter_mut().filter_map(Value::as_object_mut) {
                let messages = call.remove("messages").unwrap();
                let text = crate::audit::canonical::canonical_json(&messages);
                call.insert("messagesSha256".into(), sha256_hex(text.as_bytes()).into());
            }
        }
        body
    }

    proptest::proptest! {
        #[test]
        fn digests_are_those_of_the_canonical_json(
            texts in proptest::collection::vec(("\\PC*", "[a-z\"\\\\\n\u{1}é]{0,8}"), 0..4),
            prompt in "\\PC*",
        ) {
            let messages: Vec<ChatTurn> = texts
                .iter()
                .map(|(content, role)| ChatTurn { role: role.clone(), content: content.clone() })
                .collect();
            let effect = Effect::Translate {
                calls: vec![TranslatorCall { translator: 2, attempt: 1, messages }],
            };
            proptest::prop_assert_eq!(effect_record_body(&effect, 2), by_definition(&effect));
            let effect = Effect::CallLlm { purpose: LlmPurpose::Rewrite, prompt };
            proptest::prop_assert_eq!(effect_record_body(&effect, 2), by_definition(&effect));
        }
    }

    #[test]
    fn effects_without_prompts_are_recorded_alike_in_both_formats() {
        let check = Effect::Validate {
            question: "q".into(),
            answer: "a".into(),
        };
        assert_eq!(effect_record_body(&check, 1), effect_record_body(&check, 2));
    }
}

//! How an effect is written into its record.
//!
//! Format 1 records every effect whole, prompts included. A prompt is a pure function of the
//! THREAD_STARTED record and the inputs before it (replay rebuilds it to compare), and most of
//! it is the policy's text: with a local policy a TRANSLATE record spelled out the vocabulary
//! once per translator (10.7 KB of a 28 KB trail). From format 2 a record holds each prompt's
//! SHA-256 instead: replay still rebuilds every prompt and compares its digest, so a changed
//! prompt is caught exactly as before, and the trail holds the policy's text once.

use super::canonical::canonical_json;
use crate::thread::Effect;
use serde_json::Value;
use sha2::{Digest, Sha256};

/// The first format whose effect records hold prompt digests instead of prompts.
pub const PROMPT_DIGESTS_SINCE: u32 = 2;

/// Lower-case hex SHA-256 of `bytes`.
fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

/// The body of `effect`'s record in a trail of format `version`.
pub(crate) fn effect_record_body(effect: &Effect, version: u32) -> Value {
    let mut body = serde_json::to_value(effect).expect("thread types always serialize to JSON");
    if version >= PROMPT_DIGESTS_SINCE {
        digest_prompts(&mut body);
    }
    body
}

/// Replaces every prompt of an effect's JSON by its digest: a CALL_LLM's `prompt` (SHA-256 of
/// its UTF-8 text) by `promptSha256`, a TRANSLATE call's `messages` (SHA-256 of their
/// canonical JSON, see [`super::canonical`]) by `messagesSha256`.
fn digest_prompts(body: &mut Value) {
    let Some(obj) = body.as_object_mut() else {
        return;
    };
    if let Some(Value::String(prompt)) = obj.remove("prompt") {
        obj.insert("promptSha256".into(), sha256_hex(prompt.as_bytes()).into());
    }
    if let Some(Value::Array(calls)) = obj.get_mut("calls") {
        for call in calls.iter_mut().filter_map(Value::as_object_mut) {
            if let Some(messages) = call.remove("messages") {
                let digest = sha256_hex(canonical_json(&messages).as_bytes());
                call.insert("messagesSha256".into(), digest.into());
            }
        }
    }
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

    #[test]
    fn effects_without_prompts_are_recorded_alike_in_both_formats() {
        let check = Effect::Validate {
            question: "q".into(),
            answer: "a".into(),
        };
        assert_eq!(effect_record_body(&check, 1), effect_record_body(&check, 2));
    }
}

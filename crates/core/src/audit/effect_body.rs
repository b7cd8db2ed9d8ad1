//! How an effect is written into its record.
//!
//! Format 1 records every effect whole, prompts included. A prompt is a pure function of the
//! THREAD_STARTED record and the inputs before it (replay rebuilds it to compare), and most of
//! it is the policy's text: with a local policy a TRANSLATE record spelled out the vocabulary
//! once per translator (10.7 KB of a 28 KB trail). From format 2 a record holds each prompt's
//! SHA-256 instead: replay still rebuilds every prompt and compares its digest, so a changed
//! prompt is caught exactly as before, and the trail holds the policy's text once.

use super::canonical::{write_escaped, write_string};
use crate::thread::Effect;
use crate::translation::ChatTurn;
use serde_json::{json, Value};
use sha2::{Digest, Sha256};
use std::cell::RefCell;

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
    let mut body = serde_json::to_value(effect).expect("thread types always serialize to JSON");
    // Format 1's TRANSLATE records were written before calls had ids.
    if let Some(calls) = body.get_mut("calls").and_then(Value::as_array_mut) {
        for c in calls.iter_mut().filter_map(Value::as_object_mut) {
            c.remove("call");
        }
    }
    body
}

/// SHA-256 of the canonical JSON of a message list (`[{"content": …, "role": …}, …]`, keys
/// sorted as [`super::canonical`] sorts them). When the first message starts with a text
/// [`remember_prompt_prefix`] was given, hashing resumes after it.
pub(crate) fn messages_digest(messages: &[ChatTurn]) -> String {
    let mut out = String::with_capacity(messages.iter().map(|m| m.content.len() + 32).sum());
    let mut hasher = None;
    for (i, m) in messages.iter().enumerate() {
        match (i, resumed(i, &m.content)) {
            (0, Some((state, done))) => {
                // The state has taken `[{"content":"` and the escaped first `done` bytes.
                hasher = Some(state);
                write_escaped(&mut out, &m.content[done..]);
                out.push('"');
            }
            (0, None) => {
                out.push_str("[{\"content\":");
                write_string(&mut out, &m.content);
            }
            _ => {
                out.push_str(",{\"content\":");
                write_string(&mut out, &m.content);
            }
        }
        out.push_str(",\"role\":");
        write_string(&mut out, &m.role);
        out.push('}');
    }
    if messages.is_empty() {
        out.push('[');
    }
    out.push(']');
    let mut hasher = hasher.unwrap_or_default();
    hasher.update(out.as_bytes());
    hex::encode(hasher.finalize())
}

/// Prompts start with a long text that is the same in every thread of a policy version (a
/// translator's instructions and the vocabulary): SHA-256 states that have taken a message
/// list's opening and such a text, per thread (replay in the browser, a proxy's worker). A
/// state is used only for a message that starts with its exact text, so a digest is the same
/// with or without it (a property test compares them).
struct PrefixState {
    prefix: String,
    state: Sha256,
}

/// Prefixes kept per thread (k translators' prompts, for a few policy versions).
const PREFIXES_KEPT: usize = 16;

/// Shorter texts are not worth a lookup.
const PREFIX_MIN_LEN: usize = 256;

thread_local! {
    static PREFIXES: RefCell<Vec<PrefixState>> = const { RefCell::new(Vec::new()) };
}

/// Remembers that prompts may start with `prefix` (see [`PrefixState`]).
pub(crate) fn remember_prompt_prefix(prefix: &str) {
    if prefix.len() < PREFIX_MIN_LEN {
        return;
    }
    PREFIXES.with(|p| {
        let mut p = p.borrow_mut();
        if p.iter().any(|s| s.prefix == prefix) {
            return;
        }
        let mut text = String::with_capacity(prefix.len() + 32);
        text.push_str("[{\"content\":\"");
        write_escaped(&mut text, prefix);
        let mut state = Sha256::new();
        state.update(text.as_bytes());
        if p.len() >= PREFIXES_KEPT {
            p.remove(0);
        }
        p.push(PrefixState {
            prefix: prefix.to_owned(),
            state,
        });
    });
}

/// For the first message of a list: a state that has taken the list's opening and the
/// longest remembered prefix of `content`, and that prefix's length.
fn resumed(index: usize, content: &str) -> Option<(Sha256, usize)> {
    if index > 0 || content.len() < PREFIX_MIN_LEN {
        return None;
    }
    PREFIXES.with(|p| {
        p.borrow()
            .iter()
            .filter(|s| content.starts_with(s.prefix.as_str()))
            .max_by_key(|s| s.prefix.len())
            .map(|s| (s.state.clone(), s.prefix.len()))
    })
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
                call: "0123456789abcdef".into(),
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
            prefix_tail in "\\PC{0,40}",
            prefix_cut in 0usize..2000,
        ) {
            let messages: Vec<ChatTurn> = texts
                .iter()
                .map(|(content, role)| ChatTurn { role: role.clone(), content: content.clone() })
                .collect();
            let effect = Effect::Translate {
                calls: vec![TranslatorCall { translator: 2, attempt: 1, messages: messages.clone(), call: String::new() }],
            };
            proptest::prop_assert_eq!(effect_record_body(&effect, 2), by_definition(&effect));
            // Hashing resumed after a remembered prompt prefix gives the same digest: the
            // long first message starts with a remembered text (cut anywhere), the other
            // messages do not. Texts with escapes and multi-byte characters are cut between
            // characters only.
            let mut messages = messages;
            let long = format!("{}{prefix_tail}", "You translate \"x\"\n\t\u{1}é ".repeat(40));
            let cut = long.char_indices().map(|(i, _)| i).nth(prefix_cut % long.chars().count()).unwrap_or(0);
            remember_prompt_prefix(&long[..cut]);
            remember_prompt_prefix(&format!("{}.", &long[..cut]));
            messages.insert(0, ChatTurn::user(long.clone()));
            messages.push(ChatTurn::user(long));
            let effect = Effect::Translate {
                calls: vec![TranslatorCall { translator: 0, attempt: 0, messages, call: String::new() }],
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

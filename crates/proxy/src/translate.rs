//! Performs the translator calls that core's translation round asks for (paper, section 3.2).
//! Prompts, parsing, repair and the agreement rules are core's ([`proofgate_core::translation`]);
//! this only sends messages and hands back the raw replies.

use crate::llm::{ChatMessage, LlmClient, LlmError};
use proofgate_core::conversation::ground_premises;
use proofgate_core::policy::PolicyModel;
use proofgate_core::translation::{
    question_as_conversation, reply_schema, TranslationConfig, TranslationRound, TranslationTexts,
    TranslatorCall, TranslatorOutput,
};
use proofgate_core::Input;

/// Why translation failed as a whole.
#[derive(Debug, thiserror::Error)]
pub enum TranslateError {
    /// Every translator's endpoint failed.
    #[error("{0}")]
    Unavailable(String),
    /// The round rejected an input (a bug).
    #[error("translation round: {0}")]
    Round(String),
}

/// The raw reply to one translator call, or why the call failed.
pub struct CallResult {
    /// The call answered.
    pub call: TranslatorCall,
    /// The reply text and model, or the error.
    pub reply: Result<(String, String), LlmError>,
}

impl CallResult {
    /// As the thread's input.
    pub fn into_input(self, now: u64) -> Input {
        // The call's id goes back with its reply, so the thread takes it for that call only.
        let call = Some(self.call.call).filter(|c| !c.is_empty());
        match self.reply {
            Ok((text, model)) => Input::TranslatorReplied {
                translation_rules: None,
                translator: self.call.translator,
                attempt: self.call.attempt,
                call,
                text,
                model: Some(model),
                now,
            },
            Err(e) => Input::TranslatorFailed {
                translation_rules: None,
                translator: self.call.translator,
                attempt: self.call.attempt,
                call,
                reason: e.to_string(),
                now,
            },
        }
    }
}

/// The translators' reply schema, built once (it is the same for every call).
static REPLY_SCHEMA: std::sync::LazyLock<serde_json::Value> =
    std::sync::LazyLock::new(reply_schema);

/// Sends one translator call to its endpoint (translator `i` uses client `i % k`), asking for
/// JSON that follows the reply schema where the endpoint supports structured output.
pub async fn perform_call(clients: &[LlmClient], call: TranslatorCall) -> CallResult {
    let Some(client) = clients.get(call.translator as usize % clients.len().max(1)) else {
        return CallResult {
            call,
            reply: Err(LlmError::Misconfigured("no translator endpoints".into())),
        };
    };
    let messages: Vec<ChatMessage> = call
        .messages
        .iter()
        .map(|m| ChatMessage {
            role: m.role.clone(),
            content: m.content.clone(),
        })
        .collect();
    let reply = client
        .complete_structured(&messages, "translation", &REPLY_SCHEMA)
        .await
        .and_then(|r| {
            within_reply_values(&client.endpoint().base_url, &r.text)?;
            Ok((r.text, r.model))
        });
    CallResult { call, reply }
}

/// Refuses a translator's reply whose JSON holds more values than an answer may
/// ([`crate::http_body::MAX_ANSWER_VALUES`]): the body's bound counts the reply as one string,
/// and the core parses the string itself, on the event loop, where `{"pairs":[0,0,...]}` of
/// 16 MB was about 8 million values and a gigabyte. Such a reply is the endpoint's failure,
/// recorded as its call's.
fn within_reply_values(endpoint: &str, text: &str) -> Result<(), LlmError> {
    let max = crate::http_body::MAX_ANSWER_VALUES;
    // What the core parses: from the first `{` to the last `}` (a quote before it would
    // otherwise hide the whole object inside a string from the count).
    let parsed = proofgate_core::translation::reply::json_part(text);
    crate::http_body::within_values(parsed.as_bytes(), max).map_err(|_| LlmError::BadResponse {
        endpoint: endpoint.to_string(),
        reason: format!("the translation holds more than {max} JSON values"),
    })
}

/// Runs a whole translation round outside a thread (the ApplyGuardrail-compatible endpoint,
/// policy tests): the same core round, with the calls made concurrently.
pub async fn translate(
    clients: &[LlmClient],
    config: &TranslationConfig,
    question: &str,
    answer: &str,
) -> Result<Vec<TranslatorOutput>, TranslateError> {
    let vocabulary: PolicyModel = config.vocabulary_model().map_err(TranslateError::Round)?;
    let mut round = TranslationRound::new(config, TranslationTexts::new(question, answer));
    let mut calls = round.pending_calls();
    while !calls.is_empty() {
        let results =
            futures::future::join_all(calls.into_iter().map(|c| perform_call(clients, c))).await;
        calls = Vec::new();
        for r in results {
            let (t, a) = (r.call.translator, r.call.attempt);
            let step = match r.reply {
                Ok((text, _)) => round.on_reply(config, &vocabulary, t, a, &text),
                Err(e) => round.on_failure(t, a, &e.to_string()).map(|()| None),
            };
            if let Some(repair) = step.map_err(|e| TranslateError::Round(e.to_string()))? {
                calls.push(repair);
            }
        }
    }
    if let Some(reason) = round.all_unavailable().or_else(|| round.none_translated()) {
        return Err(TranslateError::Unavailable(reason));
    }
    // As in a thread: a premise must cite the question, the one turn there is.
    let mut outputs = round.outputs();
    ground_premises(
        &question_as_conversation(question),
        &mut outputs,
        proofgate_core::audit::FORMAT_VERSION,
        config,
    );
    Ok(outputs)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reply_of_too_many_json_values_is_the_endpoints_failure() {
        let max = crate::http_body::MAX_ANSWER_VALUES;
        let flood = format!("{{\"pairs\":[{}0]}}", "0,".repeat(max + 1));
        let err = within_reply_values("http://t/v1", &flood).unwrap_err();
        assert!(
            matches!(&err, LlmError::BadResponse { reason, .. } if reason.contains("JSON values")),
            "{err}"
        );
        // A quote before the object does not hide it from the count.
        let hidden = format!("\"\n{flood}");
        assert!(within_reply_values("http://t/v1", &hidden).is_err());
        // A reply of ordinary size, and commas inside its strings, pass.
        let ordinary = format!(
            "{{\"pairs\":[{{\"premises\":[],\"claims\":[{{\"text\":\"{}\",\"logic\":\"x\"}}]}}]}}",
            ",".repeat(max + 10)
        );
        assert!(within_reply_values("http://t/v1", &ordinary).is_ok());
    }
}

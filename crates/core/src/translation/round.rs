//! One round of redundant translation (paper, section 3.2): k translators, each with its own
//! conversation; replies with errors are sent back for repair a bounded number of times; a
//! translator whose reply stays unusable, or whose endpoint fails, translated nothing.

use super::input::TranslatorOutput;
use super::prompt::{repair_prompt, translator_prompt, ChatTurn, TranslationTexts};
use super::reply::parse_reply_of_format;
use crate::policy::{PolicyDefinition, PolicyModel};
use serde::{Deserialize, Serialize};

/// How the local validator's translators are run. Part of the thread's configuration, so the
/// trail records it and replay re-derives every translator prompt and parse from it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TranslationConfig {
    /// k: how many translators translate each answer (at least 1).
    pub translators: u32,
    /// How often a reply with syntax or type errors is sent back for repair.
    pub repair_attempts: u32,
    /// How many of the k translators must agree on a pair for it to be checked (the
    /// confidence threshold times k, rounded up; default k).
    pub required_agreement: u32,
    /// The policy's types and variables (its rules are not needed to translate and are not
    /// recorded here).
    pub vocabulary: PolicyDefinition,
    /// Whether the app's system prompt states facts about the user that may be premises
    /// (audit format 7 on; see [`crate::grounding`]). Off by default: a system prompt usually
    /// restates the policy, and its thresholds then grounded premises the user never gave.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub system_prompt_facts: bool,
    /// Whether tools' results state facts that may be premises (a CRM lookup's
    /// `{"customer_age": 70}`). On by default; an operator whose tools fetch text from
    /// elsewhere (web pages, documents, emails) turns it off, for whoever wrote that text could
    /// state any fact. Recorded only when off, so trails from before it read as on.
    #[serde(default = "on", skip_serializing_if = "is_on")]
    pub tool_result_facts: bool,
}

fn on() -> bool {
    true
}

fn is_on(b: &bool) -> bool {
    *b
}

impl TranslationConfig {
    /// A configuration for `k` translators over `policy`'s vocabulary; `threshold` is the
    /// share of translators that must agree (0 < threshold <= 1).
    pub fn new(policy: &PolicyDefinition, k: u32, repair_attempts: u32, threshold: f64) -> Self {
        let k = k.max(1);
        let needed = (threshold.clamp(0.0, 1.0) * f64::from(k) - 1e-9).ceil();
        let vocabulary = PolicyDefinition {
            rules: Vec::new(),
            ..policy.clone()
        };
        TranslationConfig {
            translators: k,
            repair_attempts,
            required_agreement: (needed as u32).clamp(1, k),
            vocabulary,
            system_prompt_facts: false,
            tool_result_facts: true,
        }
    }

    /// The vocabulary as a model for type-checking statements. It cites no policy version
    /// (type-checking does not use one), so none is computed: replay builds it per reply.
    pub fn vocabulary_model(&self) -> Result<PolicyModel, String> {
        TranslationConfig::vocabulary_model_of(self.vocabulary.clone())
    }

    /// [`TranslationConfig::vocabulary_model`] of a configuration whose vocabulary is
    /// `vocabulary`.
    pub(crate) fn vocabulary_model_of(vocabulary: PolicyDefinition) -> Result<PolicyModel, String> {
        PolicyModel::from_definition(vocabulary, Some("vocabulary".into()))
            .map_err(|e| format!("the translation vocabulary does not load: {e}"))
    }
}

/// One call to make to a translator: send `messages`, hand back the reply as
/// `Input::TranslatorReplied` with the same `translator`, `attempt` and `call`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TranslatorCall {
    /// Which translator (0-based, < k).
    pub translator: u32,
    /// 0 for the first request, then one more per repair.
    pub attempt: u32,
    /// The whole conversation to send.
    pub messages: Vec<ChatTurn>,
    /// The call's id ([`call_id`] of `messages`). From audit format 15
    /// ([`crate::audit::CALL_IDS_SINCE`]) a reply or failure must carry it: a translator and
    /// attempt repeat in every round, so a late reply to an earlier round's call (a timed-out
    /// request that answered after all, a cached fetch) was taken as the translation of the
    /// new answer.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub call: String,
}

/// A translator call's id: the first 16 hex digits of the SHA-256 its TRANSLATE record holds
/// for `messages`, so it names exactly the conversation the reply answers.
pub fn call_id(messages: &[ChatTurn]) -> String {
    let mut digest = crate::audit::messages_digest(messages);
    digest.truncate(16);
    digest
}

/// How one translator ended.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all_fields = "camelCase", deny_unknown_fields)]
pub enum TranslatorResult {
    /// A usable translation.
    Translated {
        /// What it produced.
        output: TranslatorOutput,
    },
    /// Its reply was still unusable after the repairs: it translated nothing.
    Broken {
        /// The problems with its last reply.
        errors: Vec<String>,
    },
    /// Its endpoint failed (after the caller's retries): it translated nothing.
    Unavailable {
        /// Why.
        reason: String,
    },
}

/// One translator's progress.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TranslatorProgress {
    /// The conversation so far (the prompt, then replies and repair requests).
    pub messages: Vec<ChatTurn>,
    /// The attempt being waited for.
    pub attempt: u32,
    /// How it ended, once it has.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result: Option<TranslatorResult>,
}

/// An input that does not fit the round.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RoundError {
    /// No such translator.
    #[error("translator {0} does not exist in this round")]
    UnknownTranslator(u32),
    /// The translator already finished.
    #[error("translator {0} has already finished")]
    AlreadyFinished(u32),
    /// A reply to another attempt than the one waited for.
    #[error("translator {translator}: waiting for attempt {expected}, got attempt {got}")]
    WrongAttempt {
        /// The translator.
        translator: u32,
        /// The attempt waited for.
        expected: u32,
        /// The attempt replied to.
        got: u32,
    },
    /// A reply or failure without the id of the call it answers (audit format 15 on).
    #[error(
        "translator {0}: the input carries no `call`: give back the `call` of the \
         TranslatorCall it answers"
    )]
    NoCallId(u32),
    /// A reply or failure for another call than the one waited for: a late reply to an
    /// earlier round's or attempt's call.
    #[error(
        "translator {translator}: the input answers call {got}, not the call {expected} waited \
         for (a late reply to an earlier call?)"
    )]
    WrongCall {
        /// The translator.
        translator: u32,
        /// The call waited for.
        expected: String,
        /// The call given.
        got: String,
    },
    /// The vocabulary in the configuration does not load.
    #[error("{0}")]
    Vocabulary(String),
}

/// The k translators' work on one text.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TranslationRound {
    /// One entry per translator, in order.
    pub translators: Vec<TranslatorProgress>,
}

impl TranslationRound {
    /// A round for `texts`: every translator gets its own first prompt.
    pub fn new(config: &TranslationConfig, texts: TranslationTexts<'_>) -> TranslationRound {
        let k = config.translators.max(1);
        TranslationRound {
            translators: (0..k)
                .map(|t| TranslatorProgress {
                    messages: vec![ChatTurn::user(translator_prompt(
                        &config.vocabulary,
                        t,
                        k,
                        texts,
                    ))],
                    attempt: 0,
                    result: None,
                })
                .collect(),
        }
    }

    /// The calls still waited for (each translator's current request).
    pub fn pending_calls(&self) -> Vec<TranslatorCall> {
        self.translators
            .iter()
            .enumerate()
            .filter(|(_, p)| p.result.is_none())
            .map(|(i, p)| TranslatorCall {
                translator: i as u32,
                attempt: p.attempt,
                call: call_id(&p.messages),
                messages: p.messages.clone(),
            })
            .collect()
    }

    fn waiting(
        &mut self,
        translator: u32,
        attempt: u32,
    ) -> Result<&mut TranslatorProgress, RoundError> {
        self.accepts(translator, attempt)?;
        self.translators
            .get_mut(translator as usize)
            .ok_or(RoundError::UnknownTranslator(translator))
    }

    /// Checks that a reply fits the round, without changing it: from audit format 15 (`ids`)
    /// it must carry the id of the call waited for ([`TranslatorCall::call`]).
    pub fn accepts_call(
        &self,
        translator: u32,
        attempt: u32,
        call: Option<&str>,
        ids: bool,
    ) -> Result<(), RoundError> {
        self.accepts(translator, attempt)?;
        let p = &self.translators[translator as usize];
        match call {
            None if !ids => Ok(()),
            None => Err(RoundError::NoCallId(translator)),
            Some(got) => {
                let expected = call_id(&p.messages);
                if got == expected {
                    Ok(())
                } else {
                    Err(RoundError::WrongCall {
                        translator,
                        expected,
                        got: got.chars().take(40).collect(),
                    })
                }
            }
        }
    }

    /// Checks that a reply fits the round by translator and attempt, without changing it.
    pub fn accepts(&self, translator: u32, attempt: u32) -> Result<(), RoundError> {
        let p = self
            .translators
            .get(translator as usize)
            .ok_or(RoundError::UnknownTranslator(translator))?;
        if p.result.is_some() {
            return Err(RoundError::AlreadyFinished(translator));
        }
        if p.attempt != attempt {
            return Err(RoundError::WrongAttempt {
                translator,
                expected: p.attempt,
                got: attempt,
            });
        }
        Ok(())
    }

    /// A translator replied. Returns the repair call to make when the reply is unusable and
    /// repairs are left; `None` when this translator is done.
    pub fn on_reply(
        &mut self,
        config: &TranslationConfig,
        vocabulary: &PolicyModel,
        translator: u32,
        attempt: u32,
        text: &str,
    ) -> Result<Option<TranslatorCall>, RoundError> {
        self.on_reply_of_format(
            config,
            vocabulary,
            translator,
            attempt,
            text,
            crate::audit::FORMAT_VERSION,
        )
    }

    /// [`TranslationRound::on_reply`], reading the reply by the rules of audit format `format`
    /// (see [`super::reply::parse_reply_of_format`]).
    pub fn on_reply_of_format(
        &mut self,
        config: &TranslationConfig,
        vocabulary: &PolicyModel,
        translator: u32,
        attempt: u32,
        text: &str,
        format: u32,
    ) -> Result<Option<TranslatorCall>, RoundError> {
        let p = self.waiting(translator, attempt)?;
        match parse_reply_of_format(vocabulary, text, format) {
            Ok(output) => {
                p.result = Some(TranslatorResult::Translated { output });
                Ok(None)
            }
            Err(errors) if attempt < config.repair_attempts => {
                p.messages.push(ChatTurn::assistant(text));
                p.messages.push(ChatTurn::user(repair_prompt(&errors)));
                p.attempt += 1;
                Ok(Some(TranslatorCall {
                    translator,
                    attempt: p.attempt,
                    call: call_id(&p.messages),
                    messages: p.messages.clone(),
                }))
            }
            Err(errors) => {
                p.result = Some(TranslatorResult::Broken { errors });
                Ok(None)
            }
        }
    }

    /// A translator's endpoint failed for good.
    pub fn on_failure(
        &mut self,
        translator: u32,
        attempt: u32,
        reason: &str,
    ) -> Result<(), RoundError> {
        let p = self.waiting(translator, attempt)?;
        p.result = Some(TranslatorResult::Unavailable {
            reason: reason.to_string(),
        });
        Ok(())
    }

    /// Whether every translator is done.
    pub fn is_complete(&self) -> bool {
        self.translators.iter().all(|p| p.result.is_some())
    }

    /// The reason, when no translator's endpoint answered at all.
    pub fn all_unavailable(&self) -> Option<String> {
        let mut reasons = Vec::new();
        for p in &self.translators {
            match &p.result {
                Some(TranslatorResult::Unavailable { reason }) => reasons.push(reason.as_str()),
                _ => return None,
            }
        }
        Some(format!("no translator answered: {}", reasons.join("; ")))
    }

    /// The reason, when no translator gave a usable translation: each one's endpoint failed or
    /// its reply stayed unusable after the repairs (from audit format 13, the validation fails
    /// then, as with [`TranslationRound::all_unavailable`]).
    pub fn none_translated(&self) -> Option<String> {
        let mut reasons = Vec::new();
        for (i, p) in self.translators.iter().enumerate() {
            match &p.result {
                Some(TranslatorResult::Unavailable { reason }) => {
                    reasons.push(format!("translator {} did not answer: {reason}", i + 1))
                }
                Some(TranslatorResult::Broken { errors }) => reasons.push(format!(
                    "translator {}'s reply stayed unusable: {}",
                    i + 1,
                    errors.join(", ")
                )),
                _ => return None,
            }
        }
        Some(format!(
            "no translator gave a usable translation: {}",
            reasons.join("; ")
        ))
    }

    /// One output per translator, in order; a broken or unavailable translator translated
    /// nothing, so it cannot agree with the others: soundness over recall.
    pub fn outputs(&self) -> Vec<TranslatorOutput> {
        self.translators
            .iter()
            .map(|p| match &p.result {
                Some(TranslatorResult::Translated { output }) => output.clone(),
                _ => TranslatorOutput::default(),
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(k: u32) -> TranslationConfig {
        let def = PolicyDefinition::from_json(
            r#"{"variables": [{"name": "age", "type": "INT", "description": "Age"},
                              {"name": "fee", "type": "REAL", "description": "Fee"}],
                "rules": [{"id": "R1", "expression": "(=> (>= age 65) (= fee 9.0))"}]}"#,
        )
        .unwrap();
        TranslationConfig::new(&def, k, 1, 1.0)
    }

    const GOOD: &str = r#"{"pairs": [{"premises": ["(= age 70)"], "claims": ["(= fee 9.0)"]}]}"#;

    #[test]
    fn config_keeps_no_rules_and_rounds_the_threshold_up() {
        let c = config(3);
        assert!(c.vocabulary.rules.is_empty());
        assert_eq!(c.required_agreement, 3);
        let def = c.vocabulary.clone();
        assert_eq!(
            TranslationConfig::new(&def, 3, 1, 2.0 / 3.0).required_agreement,
            2
        );
        assert_eq!(
            TranslationConfig::new(&def, 3, 1, 0.5).required_agreement,
            2
        );
        assert_eq!(
            TranslationConfig::new(&def, 3, 1, 0.0).required_agreement,
            1
        );
    }

    #[test]
    fn a_bad_reply_is_repaired_once_then_counts_as_nothing() {
        let c = config(2);
        let v = c.vocabulary_model().unwrap();
        let mut r = TranslationRound::new(&c, TranslationTexts::new("q", "a"));
        assert_eq!(r.pending_calls().len(), 2);
        assert_eq!(r.on_reply(&c, &v, 0, 0, GOOD).unwrap(), None);
        let repair = r.on_reply(&c, &v, 1, 0, "not json").unwrap().unwrap();
        assert_eq!(
            (repair.translator, repair.attempt, repair.messages.len()),
            (1, 1, 3)
        );
        assert!(matches!(
            r.on_reply(&c, &v, 1, 0, GOOD),
            Err(RoundError::WrongAttempt { .. })
        ));
        assert_eq!(r.on_reply(&c, &v, 1, 1, "still not").unwrap(), None);
        assert!(r.is_complete());
        let outs = r.outputs();
        assert_eq!(outs[0].pairs.len(), 1);
        assert!(outs[1].pairs.is_empty());
        assert!(matches!(
            r.on_reply(&c, &v, 0, 0, GOOD),
            Err(RoundError::AlreadyFinished(0))
        ));
        assert!(matches!(
            r.on_reply(&c, &v, 7, 0, GOOD),
            Err(RoundError::UnknownTranslator(7))
        ));
    }

    #[test]
    fn all_endpoints_failing_is_reported() {
        let c = config(2);
        let mut r = TranslationRound::new(&c, TranslationTexts::new("q", "a"));
        r.on_failure(0, 0, "503").unwrap();
        assert_eq!(r.all_unavailable(), None);
        r.on_failure(1, 0, "timeout").unwrap();
        assert_eq!(
            r.all_unavailable().unwrap(),
            "no translator answered: 503; timeout"
        );
    }
}

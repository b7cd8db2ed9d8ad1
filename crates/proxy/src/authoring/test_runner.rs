//! Runs a policy test suite: natural-language cases through the LLM translators and the
//! reasoner (the full checking path), given translations through the reasoner alone.

use super::AuthoringError;
use crate::llm::LlmClient;
use crate::translate::translate;
use proofgate_core::policy::test_suite::{PolicyTestSuite, TestInput};
use proofgate_core::policy::PolicyModel;
use proofgate_core::translation::TranslationConfig;
use proofgate_reasoner::{
    case_result, check_case, CheckOptions, Reasoner, TestReport, TranslatorOutput,
};

/// The k translators for natural-language cases.
#[derive(Clone)]
pub struct Translators {
    /// One client per translator.
    pub clients: Vec<LlmClient>,
    /// How often a translation with syntax or type errors is sent back.
    pub repair_attempts: usize,
}

/// Runs every case of `suite` against `model`. Natural-language cases need `translators`;
/// without them they are reported as errors (the other cases still run).
pub async fn run_suite(
    model: &PolicyModel,
    suite: &PolicyTestSuite,
    translators: Option<&Translators>,
    options: &CheckOptions,
) -> Result<TestReport, AuthoringError> {
    // Translate first (async, LLM calls), then check everything on one blocking thread:
    // the reasoner's Z3 objects cannot cross an await.
    let mut translated: Vec<Option<Result<Vec<TranslatorOutput>, String>>> = Vec::new();
    for case in &suite.tests {
        let outputs = match case.input() {
            Ok(TestInput::NaturalLanguage { question, answer }) => Some(match translators {
                None => Err(
                    "this test has a question and an answer: it needs LLM translators (pass --config or --llm-url)"
                        .to_string(),
                ),
                Some(t) => {
                    let config = TranslationConfig::new(
                        model.definition(),
                        u32::try_from(t.clients.len()).unwrap_or(u32::MAX),
                        u32::try_from(t.repair_attempts).unwrap_or(u32::MAX),
                        options.confidence_threshold,
                    );
                    translate(&t.clients, &config, question, answer)
                        .await
                        .map_err(|e| e.to_string())
                }
            }),
            _ => None,
        };
        translated.push(outputs);
    }
    let model = model.clone();
    let suite = suite.clone();
    let options = options.clone();
    // Set when this future is dropped (the client went, or its time ran out): the checks stop
    // before the next case, rather than run every case with the request's place given back.
    let cancel = crate::authoring::api::CancelOnDrop(proofgate_reasoner::CancelFlag::default());
    let flag = cancel.0.clone();
    tokio::task::spawn_blocking(move || -> Result<TestReport, AuthoringError> {
        let reasoner = Reasoner::new(&model, options)?;
        let results = suite
            .tests
            .iter()
            .zip(translated)
            .take_while(|_| !flag.is_cancelled())
            .map(|(case, outputs)| {
                let findings = match outputs {
                    Some(Ok(outputs)) => reasoner
                        .validate(&outputs)
                        .map_err(|e| format!("translation: {e}")),
                    Some(Err(e)) => Err(e),
                    None => check_case(&reasoner, case).map_err(|e| e.to_string()),
                };
                case_result(case, findings)
            })
            .collect();
        Ok(TestReport::new(results))
    })
    .await
    .map_err(|e| AuthoringError::Internal(format!("test worker: {e}")))?
}

//! LLM translators over HTTP: errors sent back for repair, bounded; failures never count as
//! agreement.

mod scripted;

use proofgate_core::policy::{PolicyDefinition, PolicyModel};
use proofgate_core::translation::TranslationConfig;
use proofgate_proxy::config::LlmEndpoint;
use proofgate_proxy::llm::LlmClient;
use proofgate_proxy::translate::translate;
use scripted::{repo_root, Server};
use serde_json::json;

fn park() -> PolicyModel {
    let text =
        std::fs::read_to_string(repo_root().join("examples/policies/park-admission.json")).unwrap();
    PolicyModel::from_definition(PolicyDefinition::from_json(&text).unwrap(), None).unwrap()
}

fn config(model: &PolicyModel, k: u32, repairs: u32) -> TranslationConfig {
    TranslationConfig::new(model.definition(), k, repairs, 1.0)
}

async fn clients(url: &str, k: usize) -> Vec<LlmClient> {
    let mut out = Vec::new();
    for _ in 0..k {
        out.push(
            LlmClient::new(LlmEndpoint {
                base_url: url.to_string(),
                model: Some("t".into()),
                timeout_ms: 5_000,
                ..LlmEndpoint::default()
            })
            .await
            .unwrap(),
        );
    }
    out
}

fn script() -> serde_json::Value {
    json!({"rules": [
        {"match": "Your reply could not be used",
         "reply": json!({"pairs": [{"premises": [{"logic": "(= customerAge 70)", "naturalLanguage": "I am 70 (turn {turn:70})"}],
                                    "claims": ["(= ageClass SENIOR)"]}]}).to_string()},
        {"match": "You translate",
         "reply": json!({"pairs": [{"premises": ["(= agee 70)"], "claims": ["(= ageClass SENIOR)"]}]}).to_string()}
    ]})
}

#[tokio::test]
async fn errors_are_sent_back_and_the_repair_is_used() {
    let llm = Server::python("scripted_llm.py", &script());
    let model = park();
    let out = translate(
        &clients(&format!("{}/v1", llm.url()), 2).await,
        &config(&model, 2, 2),
        "I am 70.",
        "You are a senior.",
    )
    .await
    .unwrap();
    for t in &out {
        assert_eq!(
            t.pairs[0].premises[0].logic.as_deref(),
            Some("(= customerAge 70)")
        );
    }
    // The repair request carried the error that names the unknown variable.
    let received = llm.received();
    let repair = received
        .iter()
        .find(|r| r["body"]["messages"].as_array().unwrap().len() == 3)
        .expect("a repair request");
    let text = repair["body"]["messages"][2]["content"].as_str().unwrap();
    assert!(text.contains("agee"), "{text}");
}

#[tokio::test]
async fn without_repairs_a_bad_reply_is_a_failure_not_a_translation() {
    let llm = Server::python("scripted_llm.py", &script());
    let model = park();
    // The one translator's reply stays unusable: nothing was translated, which is a failure
    // of the validation (from audit format 13), not an answer outside the policy.
    let err = translate(
        &clients(&format!("{}/v1", llm.url()), 1).await,
        &config(&model, 1, 0),
        "I am 70.",
        "You are a senior.",
    )
    .await
    .unwrap_err();
    assert!(
        err.to_string().contains(
            "no translator gave a usable translation: translator 1's reply stayed unusable"
        ),
        "{err}"
    );
    assert_eq!(llm.received().len(), 1, "no repair was asked for");
}

#[tokio::test]
async fn all_translators_down_is_an_error() {
    let model = park();
    let err = translate(
        &clients("http://127.0.0.1:9/v1", 2).await,
        &config(&model, 2, 1),
        "Q",
        "A",
    )
    .await
    .unwrap_err();
    assert!(err.to_string().contains("no translator answered"), "{err}");
}

#![cfg(feature = "bedrock")]
//! The Bedrock ApplyGuardrail validator against a scripted ApplyGuardrail server over HTTP.

mod scripted;

use proofgate_core::FindingKind;
use proofgate_proxy::bedrock::BedrockGuardrail;
use proofgate_proxy::config::BedrockGuardrailConfig;
use scripted::Server;
use serde_json::json;

fn aws_env() {
    // The SDK signs requests; the scripted server ignores the signature.
    std::env::set_var("AWS_ACCESS_KEY_ID", "AKIDEXAMPLE");
    std::env::set_var("AWS_SECRET_ACCESS_KEY", "secret");
    std::env::set_var("AWS_EC2_METADATA_DISABLED", "true");
}

fn guardrail(server: &Server, max_attempts: u32) -> BedrockGuardrailConfig {
    BedrockGuardrailConfig {
        guardrail_id: "gr-123".into(),
        guardrail_version: "1".into(),
        region: Some("us-east-1".into()),
        endpoint_url: Some(server.url()),
        max_attempts,
    }
}

fn script(fail_first: u32, fail_status: u16) -> serde_json::Value {
    json!({
        "fail_first": fail_first,
        "fail_status": fail_status,
        "rules": [
            {"match": "$7", "findings": [
                {"invalid": {"contradictingRules": [{"identifier": "FEE1"}]}},
                {"futureKind": {"x": 1}}
            ]},
            {"match": "$10", "findings": [{"valid": {"supportingRules": [{"identifier": "FEE1"}]}}]}
        ]
    })
}

#[tokio::test]
async fn findings_come_back_in_aws_shape_with_tags() {
    aws_env();
    let server = Server::python("scripted_guardrail.py", &script(0, 503));
    let g = BedrockGuardrail::new(guardrail(&server, 3)).await;
    let (findings, raw) = g
        .validate("How much is admission?", "It costs $7.")
        .await
        .unwrap();
    let kinds: Vec<_> = findings.iter().map(|f| f.kind()).collect();
    assert_eq!(kinds, vec![FindingKind::Invalid, FindingKind::Unknown]);
    assert!(raw["assessments"].is_array());
    let req = &server.received()[0];
    assert_eq!(req["path"], "/guardrail/gr-123/version/1/apply");
    assert_eq!(req["body"]["source"], "OUTPUT");
    assert_eq!(
        req["body"]["content"][0]["text"]["qualifiers"],
        json!(["query"])
    );
    assert_eq!(
        req["body"]["content"][0]["text"]["text"],
        "How much is admission?"
    );
    assert_eq!(
        req["body"]["content"][1]["text"]["qualifiers"],
        json!(["guard_content"])
    );
}

#[tokio::test]
async fn throttling_is_retried_then_succeeds() {
    aws_env();
    let server = Server::python("scripted_guardrail.py", &script(2, 429));
    let g = BedrockGuardrail::new(guardrail(&server, 4)).await;
    let (findings, _) = g.validate("Q", "It costs $10.").await.unwrap();
    assert_eq!(findings[0].kind(), FindingKind::Valid);
    assert_eq!(server.received().len(), 3);
}

#[tokio::test]
async fn retries_are_bounded_and_the_error_says_unavailable() {
    aws_env();
    let server = Server::python("scripted_guardrail.py", &script(100, 503));
    let g = BedrockGuardrail::new(guardrail(&server, 2)).await;
    let err = g
        .validate("Q", "It costs $10.")
        .await
        .unwrap_err()
        .to_string();
    assert!(err.contains("unavailable"), "{err}");
    assert_eq!(server.received().len(), 2);
}

#[tokio::test]
async fn client_errors_are_not_retried() {
    aws_env();
    let server = Server::python("scripted_guardrail.py", &script(100, 400));
    let g = BedrockGuardrail::new(guardrail(&server, 4)).await;
    assert!(g.validate("Q", "A").await.is_err());
    assert_eq!(server.received().len(), 1);
}

#[tokio::test]
async fn bedrock_converse_is_an_llm_option() {
    use proofgate_proxy::config::{LlmEndpoint, LlmKind};
    use proofgate_proxy::llm::{ChatMessage, LlmClient};
    aws_env();
    let server = Server::python(
        "scripted_guardrail.py",
        &json!({"converse_rules": [{"match": "admission", "reply": "DECISION: REWRITE\nANSWER: $10."}]}),
    );
    let client = LlmClient::new(LlmEndpoint {
        kind: LlmKind::Bedrock,
        base_url: server.url(),
        model: Some("anthropic.claude-test".into()),
        region: Some("us-east-1".into()),
        temperature: Some(0.0),
        ..LlmEndpoint::default()
    })
    .await
    .unwrap();
    let reply = client
        .complete(&[
            ChatMessage {
                role: "system".into(),
                content: "Be exact.".into(),
            },
            ChatMessage::user("How much is admission?"),
        ])
        .await
        .unwrap();
    assert_eq!(reply.text, "DECISION: REWRITE\nANSWER: $10.");
    assert_eq!(reply.model, "anthropic.claude-test");
    let req = &server.received()[0];
    assert_eq!(req["path"], "/model/anthropic.claude-test/converse");
    assert_eq!(req["body"]["system"][0]["text"], "Be exact.");
    assert_eq!(req["body"]["messages"][0]["role"], "user");

    let err = client
        .complete(&[ChatMessage::user("nothing recorded for this")])
        .await
        .unwrap_err();
    assert!(
        err.to_string().contains("bedrock:anthropic.claude-test"),
        "{err}"
    );
}

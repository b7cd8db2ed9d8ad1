#![cfg(feature = "bedrock")]
//! The Bedrock ApplyGuardrail validator against a scripted ApplyGuardrail server over HTTP,
//! which checks every request's SigV4 signature with botocore (see scripted_guardrail.py).

mod scripted;

use aws_credential_types::provider::{future, ProvideCredentials, SharedCredentialsProvider};
use aws_credential_types::Credentials;
use proofgate_core::FindingKind;
use proofgate_proxy::bedrock::BedrockGuardrail;
use proofgate_proxy::config::BedrockGuardrailConfig;
use scripted::Server;
use serde_json::json;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

fn aws_env() {
    // Requests are signed with these; the scripted server checks the signature with botocore.
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
        timeout_ms: 10_000,
        policy_arns: Vec::new(),
    }
}

fn script(fail_first: u32, fail_status: u16) -> serde_json::Value {
    json!({
        "sigv4": {"access_key": "AKIDEXAMPLE", "secret_key": "secret", "region": "us-east-1"},
        "fail_first": fail_first,
        "fail_status": fail_status,
        "rules": [
            {"match": "$7", "findings": [
                {"invalid": {"contradictingRules": [{"identifier": "FEE1"}]}},
                {"futureKind": {"x": 1}}
            ]},
            {"match": "$10", "findings": [{"valid": {"translation": {"premises": [], "claims": [{"logic": "(= fee 10.0)", "naturalLanguage": "It costs $10."}]}, "supportingRules": [{"identifier": "FEE1"}]}}]},
            {"match": "$12", "findings": [{"valid": {"supportingRules": [{"identifier": "FEE1"}]}}]},
            {"match": "$14", "guarded": 13, "findings": [{"valid": {"translation": {"premises": [], "claims": [{"logic": "(= fee 14.0)", "naturalLanguage": "It costs $14."}]}, "supportingRules": [{"identifier": "FEE1"}]}}]}
        ]
    })
}

/// The error of one call that must fail, as text.
async fn error_of(g: &BedrockGuardrail) -> String {
    g.validate("Q", "It costs $10.")
        .await
        .unwrap_err()
        .to_string()
}

/// Asserts that `text` says every one of `parts`.
fn assert_says(text: &str, parts: &[&str]) {
    for part in parts {
        assert!(text.contains(part), "{part:?} is not in: {text}");
    }
}

#[tokio::test]
async fn findings_come_back_in_aws_shape_with_tags() {
    aws_env();
    let server = Server::python("scripted_guardrail.py", &script(0, 503));
    let g = BedrockGuardrail::new(guardrail(&server, 3)).await.unwrap();
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
    let g = BedrockGuardrail::new(guardrail(&server, 4)).await.unwrap();
    let (findings, _) = g.validate("Q", "It costs $10.").await.unwrap();
    assert_eq!(findings[0].kind(), FindingKind::Valid);
    assert_eq!(server.received().len(), 3);
}

#[tokio::test]
async fn retries_are_bounded_and_the_error_says_unavailable() {
    aws_env();
    let server = Server::python("scripted_guardrail.py", &script(100, 503));
    let g = BedrockGuardrail::new(guardrail(&server, 2)).await.unwrap();
    // The last attempt's answer, in AWS's words, with the id AWS support asks for.
    assert_says(
        &error_of(&g).await,
        &[
            "unavailable",
            "503",
            "ServiceUnavailableException: scripted failure",
            "(request id req-2)",
        ],
    );
    assert_eq!(server.received().len(), 2);
}

/// A scripted guardrail that holds its first `count` requests 5 s, and a client whose
/// attempts time out after `timeout_ms`.
async fn hanging(count: u32, timeout_ms: u64, max_attempts: u32) -> (Server, BedrockGuardrail) {
    let mut s = script(0, 503);
    s["hang_first"] = json!({"count": count, "seconds": 5});
    let server = Server::python("scripted_guardrail.py", &s);
    let config = BedrockGuardrailConfig {
        timeout_ms,
        ..guardrail(&server, max_attempts)
    };
    let g = BedrockGuardrail::new(config).await.unwrap();
    (server, g)
}

#[tokio::test]
async fn a_hung_attempt_times_out_and_is_retried() {
    aws_env();
    let (server, g) = hanging(1, 300, 3).await;
    let started = std::time::Instant::now();
    let (findings, _) = g.validate("Q", "It costs $10.").await.unwrap();
    assert_eq!(findings[0].kind(), FindingKind::Valid);
    assert_eq!(server.received().len(), 2);
    assert!(
        started.elapsed() < Duration::from_secs(4),
        "{:?}",
        started.elapsed()
    );

    // Every attempt hangs: the error comes after the bounded attempts, not the server's pace.
    let (server, g) = hanging(100, 200, 2).await;
    assert_says(
        &error_of(&g).await,
        &[
            "unavailable",
            "timed out",
            "timed out after 200 ms (validator.bedrock.timeout_ms)",
        ],
    );
    // The server records a request on its own thread, which may come after this read.
    let mut received = server.received().len();
    for _ in 0..50 {
        if received >= 2 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
        received = server.received().len();
    }
    assert_eq!(received, 2);
}

#[tokio::test]
async fn a_host_clock_minutes_off_costs_one_refused_call() {
    aws_env();
    for offset in [900, -900] {
        let mut s = script(0, 503);
        s["clock_offset_s"] = json!(offset);
        let server = Server::python("scripted_guardrail.py", &s);
        let g = BedrockGuardrail::new(guardrail(&server, 3)).await.unwrap();
        // Refused for its time; the service's `Date` corrects the clock; signed again, accepted.
        let (findings, _) = g.validate("Q", "It costs $10.").await.unwrap();
        assert_eq!(findings[0].kind(), FindingKind::Valid);
        assert_eq!(server.received().len(), 2, "offset {offset}");
        // Later calls are signed at the service's time from the start.
        g.validate("Q", "It costs $10.").await.unwrap();
        assert_eq!(server.received().len(), 3, "offset {offset}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_outage_gets_a_hundred_retries_not_three_per_call() {
    aws_env();
    let server = Server::python("scripted_guardrail.py", &script(10_000, 503));
    let g = BedrockGuardrail::new(guardrail(&server, 4)).await.unwrap();
    let calls: Vec<_> = (0..60)
        .map(|_| {
            let g = g.clone();
            tokio::spawn(async move { g.validate("Q", "It costs $10.").await })
        })
        .collect();
    for c in calls {
        assert!(c.await.unwrap().is_err());
    }
    // 60 first attempts and the quota's 100 retries (500 tokens, 5 a retry), not 60 x 4.
    assert_eq!(server.received().len(), 160);
}

#[tokio::test]
async fn an_answer_without_end_is_refused_not_buffered() {
    aws_env();
    // A little over the 16 MiB bound: refused as unreadable, not retried, no findings.
    let mut s = script(0, 503);
    s["pad_bytes"] = json!(17 << 20);
    let server = Server::python("scripted_guardrail.py", &s);
    let g = BedrockGuardrail::new(guardrail(&server, 3)).await.unwrap();
    assert_says(&error_of(&g).await, &["unreadable", "larger than 16 MiB"]);
    assert_eq!(server.received().len(), 1);
    // Padding under the bound is read as usual.
    let mut s = script(0, 503);
    s["pad_bytes"] = json!(1 << 20);
    let server = Server::python("scripted_guardrail.py", &s);
    let g = BedrockGuardrail::new(guardrail(&server, 3)).await.unwrap();
    let (findings, _) = g.validate("Q", "It costs $10.").await.unwrap();
    assert_eq!(findings[0].kind(), FindingKind::Valid);
}

#[tokio::test]
async fn a_success_that_is_not_json_is_unreadable_not_findings() {
    aws_env();
    let mut s = script(0, 503);
    s["answer_raw"] = json!("<html>captive portal</html>");
    let server = Server::python("scripted_guardrail.py", &s);
    let g = BedrockGuardrail::new(guardrail(&server, 3)).await.unwrap();
    assert_says(&error_of(&g).await, &["unreadable response", "not JSON"]);
    assert_eq!(server.received().len(), 1);
}

#[tokio::test]
async fn a_valid_finding_without_a_translation_is_refused_not_taken_as_proof() {
    aws_env();
    let server = Server::python("scripted_guardrail.py", &script(0, 503));
    let g = BedrockGuardrail::new(guardrail(&server, 3)).await.unwrap();
    let e = g
        .validate("Q", "It costs $12.")
        .await
        .unwrap_err()
        .to_string();
    assert_says(&e, &["finding 1 is VALID without a translation"]);
    // Not retried: the same answer would come back.
    assert_eq!(server.received().len(), 1);
}

/// A guardrail that says it guarded only part of the answer (its `guardrailCoverage`): its
/// VALID is about that part, so it is refused as a bad response (the validation fails closed)
/// rather than taken for the whole answer. Every other test here gets full coverage reported,
/// as AWS reports it.
#[tokio::test]
async fn findings_about_part_of_the_answer_are_refused_not_taken_for_all_of_it() {
    aws_env();
    let server = Server::python("scripted_guardrail.py", &script(0, 503));
    let g = BedrockGuardrail::new(guardrail(&server, 3)).await.unwrap();
    let e = g
        .validate(
            "Q",
            "It costs $14. Children under 5 pay nothing, whatever the season.",
        )
        .await
        .unwrap_err()
        .to_string();
    assert_says(
        &e,
        &[
            "unreadable response",
            "guarded 13 of the answer's 64 characters",
        ],
    );
    assert_eq!(
        server.received().len(),
        1,
        "not retried: the same answer would come back"
    );
    // The same finding with the whole answer guarded stands.
    let (findings, raw) = g.validate("Q", "It costs $10.").await.unwrap();
    assert_eq!(findings.len(), 1);
    assert_eq!(raw["guardrailCoverage"]["textCharacters"]["guarded"], 13);
}

#[tokio::test]
async fn client_errors_are_not_retried() {
    aws_env();
    let server = Server::python("scripted_guardrail.py", &script(100, 400));
    let g = BedrockGuardrail::new(guardrail(&server, 4)).await.unwrap();
    assert!(g.validate("Q", "A").await.is_err());
    assert_eq!(server.received().len(), 1);
}

/// Temporary credentials (with a session token) that expire `ttl` from each fetch, counting
/// the fetches.
#[derive(Debug)]
struct Temporary {
    secret: &'static str,
    ttl: Duration,
    fetches: Arc<AtomicU32>,
}

impl ProvideCredentials for Temporary {
    fn provide_credentials<'a>(&'a self) -> future::ProvideCredentials<'a>
    where
        Self: 'a,
    {
        self.fetches.fetch_add(1, Ordering::SeqCst);
        future::ProvideCredentials::ready(Ok(Credentials::new(
            "ASIATEMPORARY",
            self.secret,
            Some("session-token-1".into()),
            Some(SystemTime::now() + self.ttl),
            "test",
        )))
    }
}

/// A guardrail with temporary credentials (`secret`, good for `ttl` from each fetch), not the
/// environment's (which other tests share); and the count of their fetches.
async fn with_credentials(
    server: &Server,
    id: &str,
    secret: &'static str,
    ttl: Duration,
) -> (BedrockGuardrail, Arc<AtomicU32>) {
    let fetches = Arc::new(AtomicU32::new(0));
    let provider = Temporary {
        secret,
        ttl,
        fetches: fetches.clone(),
    };
    let sdk = aws_config::SdkConfig::builder()
        .region(aws_config::Region::new("us-east-1"))
        .credentials_provider(SharedCredentialsProvider::new(provider))
        .behavior_version(aws_config::BehaviorVersion::latest())
        .build();
    let config = BedrockGuardrailConfig {
        guardrail_id: id.into(),
        ..guardrail(server, 3)
    };
    let g = BedrockGuardrail::with_sdk_config(config, &sdk)
        .await
        .unwrap();
    (g, fetches)
}

fn temporary_script(expired_first: u32) -> serde_json::Value {
    let mut s = script(0, 503);
    s["sigv4"] = json!({"access_key": "ASIATEMPORARY", "secret_key": "temporary-secret",
                        "session_token": "session-token-1", "region": "us-east-1"});
    s["expired_first"] = json!(expired_first);
    s
}

#[tokio::test]
async fn an_arn_and_a_session_token_are_signed_as_aws_checks_them() {
    let server = Server::python("scripted_guardrail.py", &temporary_script(0));
    let arn = "arn:aws:bedrock:us-east-1:123456789012:guardrail/abc123xyz";
    let (g, fetches) =
        with_credentials(&server, arn, "temporary-secret", Duration::from_secs(3600)).await;
    for _ in 0..3 {
        let (findings, _) = g.validate("Q", "It costs $10.").await.unwrap();
        assert_eq!(findings[0].kind(), FindingKind::Valid);
    }
    let received = server.received();
    assert_eq!(
        received[0]["path"],
        "/guardrail/arn%3Aaws%3Abedrock%3Aus-east-1%3A123456789012%3Aguardrail%2Fabc123xyz/version/1/apply"
    );
    assert_eq!(
        received[0]["headers"]["x-amz-security-token"],
        "session-token-1"
    );
    // Credentials good for an hour are fetched once, not per call.
    assert_eq!(fetches.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn a_bad_signature_is_refused_and_not_retried() {
    let server = Server::python("scripted_guardrail.py", &temporary_script(0));
    let (g, _) = with_credentials(
        &server,
        "gr-123",
        "not-the-secret",
        Duration::from_secs(3600),
    )
    .await;
    assert_says(
        &error_of(&g).await,
        &["unavailable", "403", "InvalidSignatureException"],
    );
    assert_eq!(server.received().len(), 1);
}

#[tokio::test]
async fn expired_or_expiring_credentials_are_fetched_again() {
    // The service says the token expired: it is dropped and fetched again for the retry.
    let server = Server::python("scripted_guardrail.py", &temporary_script(1));
    let (g, fetches) = with_credentials(
        &server,
        "gr-123",
        "temporary-secret",
        Duration::from_secs(3600),
    )
    .await;
    let (findings, _) = g.validate("Q", "It costs $10.").await.unwrap();
    assert_eq!(findings[0].kind(), FindingKind::Valid);
    assert_eq!(server.received().len(), 2);
    assert_eq!(fetches.load(Ordering::SeqCst), 2);

    // Credentials within minutes of their expiry are not used: each call fetches new ones.
    let server = Server::python("scripted_guardrail.py", &temporary_script(0));
    let (g, fetches) = with_credentials(
        &server,
        "gr-123",
        "temporary-secret",
        Duration::from_secs(60),
    )
    .await;
    g.validate("Q", "It costs $10.").await.unwrap();
    g.validate("Q", "It costs $10.").await.unwrap();
    assert_eq!(fetches.load(Ordering::SeqCst), 2);
}

/// Credentials that take 200 ms to come (an instance role's metadata service, say).
#[derive(Debug)]
struct Slow(Arc<AtomicU32>);

impl ProvideCredentials for Slow {
    fn provide_credentials<'a>(&'a self) -> future::ProvideCredentials<'a>
    where
        Self: 'a,
    {
        let fetches = self.0.clone();
        future::ProvideCredentials::new(async move {
            fetches.fetch_add(1, Ordering::SeqCst);
            tokio::time::sleep(Duration::from_millis(200)).await;
            Ok(Credentials::new(
                "ASIATEMPORARY",
                "temporary-secret",
                Some("session-token-1".into()),
                Some(SystemTime::now() + Duration::from_secs(3600)),
                "slow",
            ))
        })
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_first_calls_fetch_credentials_once() {
    let server = Server::python("scripted_guardrail.py", &temporary_script(0));
    let fetches = Arc::new(AtomicU32::new(0));
    let sdk = aws_config::SdkConfig::builder()
        .region(aws_config::Region::new("us-east-1"))
        .credentials_provider(SharedCredentialsProvider::new(Slow(fetches.clone())))
        .behavior_version(aws_config::BehaviorVersion::latest())
        .build();
    let g = BedrockGuardrail::with_sdk_config(guardrail(&server, 3), &sdk)
        .await
        .unwrap();
    let calls: Vec<_> = (0..16)
        .map(|_| {
            let g = g.clone();
            tokio::spawn(async move { g.validate("Q", "It costs $10.").await })
        })
        .collect();
    for c in calls {
        let (findings, _) = c.await.unwrap().unwrap();
        assert_eq!(findings[0].kind(), FindingKind::Valid);
    }
    assert_eq!(fetches.load(Ordering::SeqCst), 1);
    assert_eq!(server.received().len(), 16);
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

    // A validation error is about the request: passed on as a rejection, not retried.
    let before = server.received().len();
    let err = client
        .complete(&[ChatMessage::user("nothing recorded for this")])
        .await
        .unwrap_err();
    assert!(
        err.to_string().contains("bedrock:anthropic.claude-test"),
        "{err}"
    );
    assert!(
        matches!(
            err,
            proofgate_proxy::llm::LlmError::Rejected { status: 400, .. }
        ),
        "{err:?}"
    );
    assert_eq!(server.received().len(), before + 1, "a 400 was retried");

    // As an upstream: tools cannot be offered through Converse here, so a request with tools
    // is refused (not answered as if it had none) ...
    let with_tools = json!({"model": "m", "messages": [{"role": "user", "content": "admission?"}],
        "tools": [{"type": "function", "function": {"name": "lookup_age", "parameters": {}}}]});
    let err = client.forward_native(with_tools, None).await.unwrap_err();
    assert!(err.to_string().contains("tools are not supported"), "{err}");
    // ... and earlier tool turns go as text, with no blank block for Converse to refuse.
    let history = json!({"model": "m", "messages": [
        {"role": "user", "content": "How much is admission for me?"},
        {"role": "assistant", "content": null, "tool_calls": [{"id": "call_1", "type": "function",
            "function": {"name": "lookup_age", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "call_1", "content": "70"},
        {"role": "user", "content": "So what is the admission?"}]});
    let (completion, _) = client.forward_native(history, None).await.unwrap();
    assert_eq!(
        completion["choices"][0]["message"]["content"],
        "DECISION: REWRITE\nANSWER: $10."
    );
    let sent = server.received().last().unwrap()["body"]["messages"].clone();
    let text = sent.to_string();
    assert!(
        text.contains("[called the tool lookup_age with {}]"),
        "{text}"
    );
    assert!(text.contains("[result of the tool call call_1]"), "{text}");
    for m in sent.as_array().unwrap() {
        for block in m["content"].as_array().unwrap() {
            assert!(!block["text"].as_str().unwrap().trim().is_empty(), "{sent}");
        }
    }
}

/// A Converse answer larger than any endpoint's answer may be (16 MiB) is the endpoint's
/// failure, and a Converse error's text is kept to its first 4 KiB, as every endpoint's error
/// body is (it goes to the log and into the trail).
#[tokio::test]
async fn converse_answers_and_errors_are_held_to_the_endpoint_bounds() {
    use proofgate_proxy::config::{LlmEndpoint, LlmKind};
    use proofgate_proxy::llm::{ChatMessage, LlmClient, LlmError};
    aws_env();
    let endpoint = |server: &Server| LlmEndpoint {
        kind: LlmKind::Bedrock,
        base_url: server.url(),
        model: Some("anthropic.claude-test".into()),
        region: Some("us-east-1".into()),
        max_retries: 0,
        ..LlmEndpoint::default()
    };
    let question = [ChatMessage::user("How much is admission?")];
    let huge = "x".repeat((16 << 20) + 1);
    let server = Server::python(
        "scripted_guardrail.py",
        &json!({"converse_rules": [{"match": "admission", "reply": huge}]}),
    );
    let client = LlmClient::new(endpoint(&server)).await.unwrap();
    let err = client.complete(&question).await.unwrap_err();
    assert!(
        matches!(&err, LlmError::BadResponse { reason, .. } if reason.contains("more than")),
        "{err}"
    );
    let long = "y".repeat(1 << 20);
    let server = Server::python(
        "scripted_guardrail.py",
        &json!({"converse_rules": [], "converse_fail_first": {"count": 1, "status": 400, "message": long}}),
    );
    let client = LlmClient::new(endpoint(&server)).await.unwrap();
    let err = client.complete(&question).await.unwrap_err();
    let said = err.to_string();
    assert!(matches!(err, LlmError::Rejected { .. }), "{said:.200}");
    assert!(said.len() < 8 << 10, "{} bytes of error", said.len());
}

/// Converse calls are retried by proofgate's policy alone (`max_retries`), each attempt within
/// the endpoint's `timeout_ms`: the SDK's own three attempts per call are off, and a hung call
/// no longer holds its request until the request's deadline.
#[tokio::test]
async fn converse_attempts_are_proofgates_own_each_within_the_timeout() {
    use proofgate_proxy::config::{LlmEndpoint, LlmKind};
    use proofgate_proxy::llm::{ChatMessage, LlmClient};
    aws_env();
    let endpoint = |server: &Server| LlmEndpoint {
        kind: LlmKind::Bedrock,
        base_url: server.url(),
        model: Some("anthropic.claude-test".into()),
        region: Some("us-east-1".into()),
        timeout_ms: 700,
        max_retries: 1,
        ..LlmEndpoint::default()
    };
    let rules = json!([{"match": "admission", "reply": "It is $10."}]);
    let question = [ChatMessage::user("How much is admission?")];

    // Throttled throughout: one call and one retry reach the service, no more.
    let throttled = Server::python(
        "scripted_guardrail.py",
        &json!({"converse_rules": rules, "converse_fail_first": {"count": 10, "status": 429}}),
    );
    let client = LlmClient::new(endpoint(&throttled)).await.unwrap();
    let err = client.complete(&question).await.unwrap_err();
    assert!(
        matches!(err, proofgate_proxy::llm::LlmError::Throttled { .. }),
        "{err:?}"
    );
    assert_eq!(
        throttled.received().len(),
        2,
        "attempts: {:?}",
        throttled.received()
    );

    // The first attempt hangs: cut off at the timeout (which also bounds the waits between
    // attempts, so nothing is left for a retry), instead of held until the service answers.
    let hung = Server::python(
        "scripted_guardrail.py",
        &json!({"converse_rules": rules, "converse_hang_first": {"count": 1, "seconds": 8}}),
    );
    let client = LlmClient::new(endpoint(&hung)).await.unwrap();
    let started = std::time::Instant::now();
    let err = client.complete(&question).await.unwrap_err();
    assert!(
        matches!(err, proofgate_proxy::llm::LlmError::Unavailable { .. })
            && err.to_string().contains("timeout"),
        "{err:?}"
    );
    assert!(
        started.elapsed() < std::time::Duration::from_secs(4),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(hung.received().len(), 1);
    // The next call is answered.
    let reply = client.complete(&question).await.unwrap();
    assert_eq!(reply.text, "It is $10.");
}

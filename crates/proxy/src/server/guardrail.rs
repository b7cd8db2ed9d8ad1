//! `POST /guardrail/{id}/version/{version}/apply`: Amazon Bedrock's ApplyGuardrail, served by
//! the local reasoner with AWS's request and response shapes, so code written for the AWS SDK
//! can point its endpoint URL here and run offline. Errors use AWS's JSON error shape
//! (`x-amzn-errortype` + `{"message"}`) so SDKs report them properly.

use crate::app::App;
use crate::server::auth::Caller;
use crate::validator::Validator;
use axum::extract::{Path, State};
use axum::http::{HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::{Extension, Json};
use serde::Deserialize;
use serde_json::json;
use std::sync::Arc;

#[derive(Debug, Deserialize)]
struct TextBlock {
    text: String,
    #[serde(default)]
    qualifiers: Vec<String>,
}

#[derive(Debug, Deserialize)]
struct ContentBlock {
    text: Option<TextBlock>,
    /// Any other member (AWS's `image`): named in the refusal.
    #[serde(flatten)]
    other: serde_json::Map<String, serde_json::Value>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct ApplyRequest {
    source: String,
    content: Vec<ContentBlock>,
}

fn aws_error(status: StatusCode, kind: &str, message: impl Into<String>) -> Response {
    let mut r = (status, Json(json!({"message": message.into()}))).into_response();
    if let Ok(v) = HeaderValue::from_str(kind) {
        r.headers_mut().insert("x-amzn-errortype", v);
    }
    r
}

/// An error the guard in front of every route answered (a missing key, a scope, a rate, a
/// size, a deadline) in AWS's shape, as this route's own errors are: boto3 reads the error's
/// type from `x-amzn-errortype` and its message from `message`, and showed only the status
/// (`ClientError: An error occurred (401)`) for proofgate's `{"error": {...}}`. A response
/// that already has a type, or is no error, passes unchanged.
pub async fn in_aws_shape(response: Response) -> Response {
    let status = response.status();
    if !(status.is_client_error() || status.is_server_error())
        || response.headers().contains_key("x-amzn-errortype")
    {
        return response;
    }
    let kind = match status.as_u16() {
        401 => "UnrecognizedClientException",
        403 => "AccessDeniedException",
        404 => "ResourceNotFoundException",
        429 => "ThrottlingException",
        503 | 504 => "ServiceUnavailableException",
        500 => "InternalServerException",
        _ => "ValidationException",
    };
    let (parts, body) = response.into_parts();
    let bytes = axum::body::to_bytes(body, 64 << 10)
        .await
        .unwrap_or_default();
    let message = serde_json::from_slice::<serde_json::Value>(&bytes)
        .ok()
        .and_then(|v| {
            v.pointer("/error/message")
                .and_then(|m| m.as_str())
                .map(String::from)
        })
        .unwrap_or_else(|| format!("HTTP {status}"));
    let mut aws = aws_error(status, kind, message);
    // What the guard said besides the body: when to retry, how to authenticate.
    for name in [
        axum::http::header::RETRY_AFTER,
        axum::http::header::WWW_AUTHENTICATE,
    ] {
        if let Some(v) = parts.headers.get(&name) {
            aws.headers_mut().insert(name, v.clone());
        }
    }
    aws
}

/// `GuardrailUsage`: the six counters AWS marks required (no such policies here, so 0) and the
/// one Automated Reasoning policy that was applied.
fn usage() -> serde_json::Value {
    json!({
        "topicPolicyUnits": 0,
        "contentPolicyUnits": 0,
        "wordPolicyUnits": 0,
        "sensitiveInformationPolicyUnits": 0,
        "sensitiveInformationPolicyFreeUnits": 0,
        "contextualGroundingPolicyUnits": 0,
        "automatedReasoningPolicyUnits": 1,
        "automatedReasoningPolicies": 1
    })
}

/// The handler.
pub async fn apply_guardrail(
    State(app): State<Arc<App>>,
    Extension(caller): Extension<Caller>,
    Path((_id, _version)): Path<(String, String)>,
    body: axum::body::Bytes,
) -> Response {
    // Counted before parsing, as for the chat routes: a 1 MiB body of tiny values parsed
    // into tens of megabytes (unknown members are buffered whole) before any was refused.
    if crate::http_body::within_values(&body, crate::http_body::MAX_REQUEST_VALUES).is_err() {
        return aws_error(
            StatusCode::PAYLOAD_TOO_LARGE,
            "ValidationException",
            format!(
                "the body holds more than {} JSON values: ApplyGuardrail takes text content \
                 blocks",
                crate::http_body::MAX_REQUEST_VALUES
            ),
        );
    }
    let req: ApplyRequest = match serde_json::from_slice(&body) {
        Ok(r) => r,
        Err(e) => {
            return aws_error(
                StatusCode::BAD_REQUEST,
                "ValidationException",
                format!("the request does not match ApplyGuardrail's input: {e}"),
            )
        }
    };
    if req.source != "INPUT" && req.source != "OUTPUT" {
        return aws_error(
            StatusCode::BAD_REQUEST,
            "ValidationException",
            format!("source must be INPUT or OUTPUT, got {:?}", req.source),
        );
    }
    // Only text is checked: an image block was skipped while the coverage (text characters
    // only) said everything was guarded, so findings about the text seemed to speak for it.
    if let Some((i, block)) = req
        .content
        .iter()
        .enumerate()
        .find(|(_, c)| c.text.is_none() || !c.other.is_empty())
    {
        let what = block
            .other
            .keys()
            .next()
            .map_or("no `text`".to_string(), |k| format!("`{k}`"));
        return aws_error(
            StatusCode::BAD_REQUEST,
            "ValidationException",
            format!(
                "content block {i} holds {what}: proofgate's ApplyGuardrail checks text only, so \
                 give text blocks alone"
            ),
        );
    }
    #[allow(irrefutable_let_patterns)] // only one validator without the `bedrock` feature
    let Validator::Local(local) = &app.validator
    else {
        return aws_error(
            StatusCode::BAD_REQUEST,
            "ValidationException",
            "this proofgate validates with Amazon Bedrock; the local ApplyGuardrail endpoint needs validator.kind = \"local\"",
        );
    };
    // Text qualified `query` is the question; `guard_content` (or unqualified text, as in
    // AWS) is what is checked. Other text (`grounding_source`) is not checked, and the
    // coverage says so: only the checked characters count as guarded.
    let mut question = Vec::new();
    let mut answer = Vec::new();
    let (mut total, mut guarded) = (0, 0);
    for (i, block) in req
        .content
        .iter()
        .filter_map(|c| c.text.as_ref())
        .enumerate()
    {
        total += block.text.chars().count();
        let has = |q: &str| block.qualifiers.iter().any(|x| x == q);
        if has("query") && has("guard_content") {
            // Taken as the question, its claims would go unchecked while the coverage called
            // them guarded: which one is meant is the caller's to say.
            return aws_error(
                StatusCode::BAD_REQUEST,
                "ValidationException",
                format!(
                    "text block {i} is qualified both query and guard_content: give the question \
                     and the content to guard as separate blocks"
                ),
            );
        }
        if has("query") {
            question.push(block.text.as_str());
        } else if block.qualifiers.is_empty() || has("guard_content") {
            // The app shows the text it guards as it displays: a character that reorders or
            // hides text would have the findings speak of other text than the reader sees
            // ("$\u{202E}05\u{202C}" checked as $05, shown as $50). Refused, as the chat
            // path's checked answers lose them (audit format 14).
            if proofgate_core::thread::without_invisible(&block.text) != block.text {
                return aws_error(
                    StatusCode::BAD_REQUEST,
                    "ValidationException",
                    format!(
                        "text block {i} holds a bidirectional control or an invisible character \
                         (U+202E, U+200B, a tag character...): it would show other text than \
                         the text checked; remove them and send the text again"
                    ),
                );
            }
            answer.push(block.text.as_str());
            guarded += block.text.chars().count();
        }
    }
    if answer.is_empty() {
        return aws_error(
            StatusCode::BAD_REQUEST,
            "ValidationException",
            "no content to guard: give at least one text block qualified guard_content",
        );
    }
    let (question, answer) = (question.join("\n"), answer.join("\n"));
    let started = std::time::Instant::now();
    match local.validate(&caller.id, &question, &answer).await {
        Ok(v) => {
            // Its translation and Z3 time count in /metrics as a chat request's do.
            crate::app::observe_validation(&app, &v);
            Json(json!({
                "usage": usage(),
                "action": "NONE",
                "actionReason": "No action.",
                "outputs": [],
                "assessments": [{
                    "automatedReasoningPolicy": {"findings": v.findings},
                    "invocationMetrics": {
                        "guardrailProcessingLatency": started.elapsed().as_millis() as u64,
                        "usage": usage(),
                        "guardrailCoverage": {"textCharacters": {"guarded": guarded, "total": total}}
                    }
                }],
                "guardrailCoverage": {"textCharacters": {"guarded": guarded, "total": total}}
            }))
            .into_response()
        }
        // The details (endpoint addresses, what a translator answered) go to the operator's
        // log, never to the client, as on the chat path.
        Err(e) => {
            tracing::warn!("ApplyGuardrail: the validator failed: {e}");
            aws_error(
                StatusCode::SERVICE_UNAVAILABLE,
                "ServiceUnavailableException",
                "the validator could not check the content; the details are in proofgate's log"
                    .to_string(),
            )
        }
    }
}

//! Amazon Bedrock through the AWS SDK for Rust: Converse as an LLM, and the SDK configuration
//! every Bedrock client here shares. The ApplyGuardrail validator, on the hot path, signs its
//! own calls (`crate::bedrock_guardrail`), and is re-exported here.

pub use crate::bedrock_guardrail::{BedrockGuardrail, GuardrailError};
use crate::config::LlmEndpoint;
use crate::llm::{ChatMessage, LlmError, LlmReply};
use aws_sdk_bedrockruntime::config::interceptors::AfterDeserializationInterceptorContextRef;
use aws_sdk_bedrockruntime::config::{ConfigBag, Intercept, RuntimeComponents};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Keeps the raw response body of the call it is attached to (shared with the control-plane
/// client, which reads policy definitions the same way).
#[derive(Debug, Clone, Default)]
pub(crate) struct RawBody(Arc<Mutex<Option<Vec<u8>>>>);

impl RawBody {
    /// The captured body, once.
    pub(crate) fn take(&self) -> Option<Vec<u8>> {
        self.0.lock().ok().and_then(|mut b| b.take())
    }
}

/// The AWS SDK configuration every Bedrock client here uses: credentials and region the
/// standard way (environment, profile, IMDS), then the configured region, endpoint override
/// (tests, VPC endpoints) and bound on attempts (standard retries: backoff with jitter on
/// throttling and transient 5xx).
pub(crate) async fn sdk_config(
    region: Option<&str>,
    endpoint_url: Option<&str>,
    max_attempts: u32,
) -> aws_config::SdkConfig {
    let mut loader = aws_config::defaults(aws_config::BehaviorVersion::latest()).retry_config(
        aws_config::retry::RetryConfig::standard()
            .with_max_attempts(max_attempts.max(1))
            .with_initial_backoff(Duration::from_millis(100))
            .with_max_backoff(Duration::from_secs(5)),
    );
    if let Some(region) = region {
        loader = loader.region(aws_config::Region::new(region.to_string()));
    }
    if let Some(url) = endpoint_url {
        loader = loader.endpoint_url(url.to_string());
    }
    loader.load().await
}

impl Intercept for RawBody {
    fn name(&self) -> &'static str {
        "proofgate::RawBody"
    }

    fn read_after_deserialization(
        &self,
        context: &AfterDeserializationInterceptorContextRef<'_>,
        _: &RuntimeComponents,
        _: &mut ConfigBag,
    ) -> Result<(), aws_sdk_bedrockruntime::error::BoxError> {
        // Non-streaming responses are buffered before deserialization, so the bytes are here.
        if let Some(bytes) = context.response().body().bytes() {
            if let Ok(mut slot) = self.0.lock() {
                *slot = Some(bytes.to_vec());
            }
        }
        Ok(())
    }
}

/// Amazon Bedrock Converse, as an LLM for rewriting and translating.
#[derive(Clone)]
pub struct Converse {
    client: aws_sdk_bedrockruntime::Client,
}

impl Converse {
    /// Loads AWS credentials the standard way, with the endpoint's region and, when its base URL
    /// is not the OpenAI default, that URL as the endpoint override.
    pub async fn new(endpoint: &LlmEndpoint) -> Converse {
        let mut loader = aws_config::defaults(aws_config::BehaviorVersion::latest());
        if let Some(region) = &endpoint.region {
            loader = loader.region(aws_config::Region::new(region.clone()));
        }
        if endpoint.base_url != LlmEndpoint::default().base_url {
            loader = loader.endpoint_url(endpoint.base_url.clone());
        }
        // proofgate's own retry policy wraps every call (`max_retries`, with `Retry-After` and
        // the request's deadline), so the SDK retries nothing itself (its default of 3
        // attempts made up to 12 under throttling), and each attempt has the endpoint's
        // `timeout_ms`, as the HTTP endpoints have (the SDK has none by default: a hung call
        // held its request until the request deadline).
        let attempt = std::time::Duration::from_millis(endpoint.timeout_ms.max(1));
        loader = loader
            .retry_config(aws_config::retry::RetryConfig::disabled())
            .timeout_config(
                aws_config::timeout::TimeoutConfig::builder()
                    .operation_attempt_timeout(attempt)
                    .connect_timeout(attempt)
                    .build(),
            );
        Converse {
            client: aws_sdk_bedrockruntime::Client::new(&loader.load().await),
        }
    }

    /// One Converse call for `endpoint` (its model and temperature).
    pub async fn complete(
        &self,
        endpoint: &LlmEndpoint,
        messages: &[ChatMessage],
    ) -> Result<LlmReply, LlmError> {
        use aws_sdk_bedrockruntime::types::{
            ContentBlock, ConversationRole, InferenceConfiguration, Message, SystemContentBlock,
        };
        let client = &self.client;
        let model = endpoint.model.clone().ok_or_else(|| {
            LlmError::Misconfigured("a Bedrock LLM endpoint needs `model` (a model id)".into())
        })?;
        let mut req = client.converse().model_id(&model);
        // Converse wants the turns alternating and refuses blank text: consecutive turns of one
        // role (a tool result as text, then the user's next message) go as one turn.
        let mut turns: Vec<(bool, String)> = Vec::new();
        for m in messages {
            if m.content.trim().is_empty() {
                continue;
            }
            if m.role == "system" {
                req = req.system(SystemContentBlock::Text(m.content.clone()));
                continue;
            }
            let assistant = m.role == "assistant";
            match turns.last_mut() {
                Some((a, text)) if *a == assistant => {
                    text.push_str("\n\n");
                    text.push_str(&m.content);
                }
                _ => turns.push((assistant, m.content.clone())),
            }
        }
        for (assistant, text) in turns {
            let role = if assistant {
                ConversationRole::Assistant
            } else {
                ConversationRole::User
            };
            let msg = Message::builder()
                .role(role)
                .content(ContentBlock::Text(text))
                .build()
                .map_err(|e| LlmError::Misconfigured(e.to_string()))?;
            req = req.messages(msg);
        }
        if let Some(t) = endpoint.temperature {
            req = req.inference_config(InferenceConfiguration::builder().temperature(t).build());
        }
        let out = req.send().await.map_err(|e| {
            let endpoint = format!("bedrock:{model}");
            // Kept to 4 KiB as every endpoint's error body is: it goes to the log and the trail.
            let reason = crate::http_body::error_body(
                &aws_sdk_bedrockruntime::error::DisplayErrorContext(&e).to_string(),
            );
            // A 4xx other than throttling is about the request (a validation error, a model
            // not enabled, denied access): not worth a retry, and passed on as such.
            match e.raw_response().map(|r| r.status().as_u16()) {
                Some(status @ 400..=499) if status != 429 && status != 408 => LlmError::Rejected {
                    endpoint,
                    status,
                    body: serde_json::json!({"error": {"message": reason}}).to_string(),
                },
                Some(429) => LlmError::Throttled {
                    endpoint,
                    reason,
                    retry_after: None,
                },
                _ => LlmError::Unavailable { endpoint, reason },
            }
        })?;
        let text = out
            .output()
            .and_then(|o| o.as_message().ok())
            .map(|m| {
                m.content()
                    .iter()
                    .filter_map(|c| c.as_text().ok().cloned())
                    .collect::<Vec<_>>()
                    .join("")
            })
            .ok_or_else(|| LlmError::BadResponse {
                endpoint: format!("bedrock:{model}"),
                reason: "Converse returned no message".into(),
            })?;
        // The answer bound every endpoint is held to (the SDK reads the body whole, with no
        // bound of its own): a larger answer is the endpoint's failure, never recorded.
        if text.len() > crate::http_body::MAX_ANSWER_BYTES {
            return Err(LlmError::BadResponse {
                endpoint: format!("bedrock:{model}"),
                reason: format!(
                    "Converse returned an answer of {} bytes, more than {}",
                    text.len(),
                    crate::http_body::MAX_ANSWER_BYTES
                ),
            });
        }
        Ok(LlmReply { text, model })
    }
}

//! LLM clients: any OpenAI-compatible `/chat/completions` endpoint, or Bedrock Converse.

use crate::config::{LlmEndpoint, LlmKind};
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use std::time::Duration;

/// One chat message.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ChatMessage {
    /// `system`, `user` or `assistant`.
    pub role: String,
    /// The text.
    pub content: String,
}

impl ChatMessage {
    /// A user message.
    pub fn user(content: impl Into<String>) -> Self {
        ChatMessage {
            role: "user".into(),
            content: content.into(),
        }
    }
}

/// What an LLM call failed with.
#[derive(Debug, thiserror::Error)]
pub enum LlmError {
    /// The endpoint could not be reached, timed out, throttled or failed (5xx).
    #[error("LLM endpoint {endpoint} is unavailable: {reason}")]
    Unavailable {
        /// The base URL or Bedrock model.
        endpoint: String,
        /// What happened.
        reason: String,
    },
    /// The endpoint refused the request (4xx): passed on to the client as is.
    #[error("LLM endpoint {endpoint} rejected the request with HTTP {status}: {body}")]
    Rejected {
        /// The base URL.
        endpoint: String,
        /// HTTP status.
        status: u16,
        /// Response body, verbatim.
        body: String,
    },
    /// The endpoint answered something that is not a chat completion.
    #[error("LLM endpoint {endpoint} returned an unusable response: {reason}")]
    BadResponse {
        /// The base URL.
        endpoint: String,
        /// What was wrong.
        reason: String,
    },
    /// proofgate is not set up to call this endpoint.
    #[error("LLM endpoint misconfigured: {0}")]
    Misconfigured(String),
}

/// A chat completion's text and the model that wrote it.
#[derive(Debug, Clone, PartialEq)]
pub struct LlmReply {
    /// The assistant message.
    pub text: String,
    /// The model id as reported by the endpoint.
    pub model: String,
}

/// A client for one configured endpoint.
#[derive(Clone)]
pub struct LlmClient {
    endpoint: LlmEndpoint,
    http: reqwest::Client,
    #[cfg(feature = "bedrock")]
    bedrock: Option<crate::bedrock::Converse>,
}

#[cfg(not(feature = "bedrock"))]
fn no_bedrock() -> LlmError {
    LlmError::Misconfigured(
        "this proofgate was built without Amazon Bedrock support (cargo feature `bedrock`, on by default)"
            .into(),
    )
}

impl LlmClient {
    /// A client for `endpoint`. Bedrock endpoints load AWS credentials the standard way.
    pub async fn new(endpoint: LlmEndpoint) -> Result<Self, LlmError> {
        let http = reqwest::Client::builder()
            .timeout(Duration::from_millis(endpoint.timeout_ms))
            .build()
            .map_err(|e| LlmError::Misconfigured(format!("HTTP client: {e}")))?;
        #[cfg(feature = "bedrock")]
        let bedrock = match endpoint.kind {
            LlmKind::Openai => None,
            LlmKind::Bedrock => Some(crate::bedrock::Converse::new(&endpoint).await),
        };
        #[cfg(not(feature = "bedrock"))]
        if endpoint.kind == LlmKind::Bedrock {
            return Err(no_bedrock());
        }
        Ok(LlmClient {
            endpoint,
            http,
            #[cfg(feature = "bedrock")]
            bedrock,
        })
    }

    /// The configured endpoint.
    pub fn endpoint(&self) -> &LlmEndpoint {
        &self.endpoint
    }

    fn url(&self) -> String {
        format!(
            "{}/chat/completions",
            self.endpoint.base_url.trim_end_matches('/')
        )
    }

    /// Sends an OpenAI chat-completions request body as is (apart from `model` when one is
    /// configured, and `stream`, which is always off: nothing unverified may stream through).
    /// `client_auth` is the caller's `Authorization` header, used when no key is configured.
    pub async fn forward(
        &self,
        mut body: Value,
        client_auth: Option<&str>,
    ) -> Result<Value, LlmError> {
        if self.endpoint.kind == LlmKind::Bedrock {
            let messages: Vec<ChatMessage> =
                serde_json::from_value(body.get("messages").cloned().unwrap_or(Value::Null))
                    .map_err(|e| LlmError::Misconfigured(format!("messages: {e}")))?;
            let reply = self.converse(&messages).await?;
            return Ok(completion_body(&reply.model, &reply.text));
        }
        if let Some(obj) = body.as_object_mut() {
            if let Some(model) = &self.endpoint.model {
                obj.insert("model".into(), json!(model));
            }
            obj.insert("stream".into(), json!(false));
            obj.remove("stream_options");
        }
        let mut req = self.http.post(self.url()).json(&body);
        if let Some(key) = &self.endpoint.api_key {
            req = req.bearer_auth(key);
        } else if let Some(auth) = client_auth {
            req = req.header(reqwest::header::AUTHORIZATION, auth);
        }
        let resp = req.send().await.map_err(|e| self.unavailable(e))?;
        let status = resp.status();
        let text = resp.text().await.map_err(|e| self.unavailable(e))?;
        if status.is_server_error() || status.as_u16() == 429 {
            return Err(LlmError::Unavailable {
                endpoint: self.endpoint.base_url.clone(),
                reason: format!("HTTP {status}: {}", truncate(&text, 500)),
            });
        }
        if !status.is_success() {
            return Err(LlmError::Rejected {
                endpoint: self.endpoint.base_url.clone(),
                status: status.as_u16(),
                body: text,
            });
        }
        serde_json::from_str(&text).map_err(|e| LlmError::BadResponse {
            endpoint: self.endpoint.base_url.clone(),
            reason: format!("not JSON ({e}): {}", truncate(&text, 200)),
        })
    }

    /// One completion for proofgate's own purposes (rewriting, translating).
    pub async fn complete(&self, messages: &[ChatMessage]) -> Result<LlmReply, LlmError> {
        self.complete_with(messages, None).await
    }

    async fn complete_with(
        &self,
        messages: &[ChatMessage],
        response_format: Option<Value>,
    ) -> Result<LlmReply, LlmError> {
        if self.endpoint.kind == LlmKind::Bedrock {
            return self.converse(messages).await;
        }
        let model = self.endpoint.model.clone().ok_or_else(|| {
            LlmError::Misconfigured(format!(
                "no model set for {} (set `model` in its section of the config)",
                self.endpoint.base_url
            ))
        })?;
        let mut body = json!({ "model": model, "messages": messages });
        if let Some(t) = self.endpoint.temperature {
            body["temperature"] = json!(t);
        }
        if let Some(f) = response_format {
            body["response_format"] = f;
        }
        let resp = self.forward(body, None).await?;
        let text = completion_text(&resp).ok_or_else(|| LlmError::BadResponse {
            endpoint: self.endpoint.base_url.clone(),
            reason: "no choices[0].message.content".into(),
        })?;
        let model = resp
            .get("model")
            .and_then(Value::as_str)
            .unwrap_or(&model)
            .to_string();
        Ok(LlmReply { text, model })
    }

    /// A completion whose reply should be JSON following `schema`: asks for structured output
    /// (`response_format: json_schema`) when the endpoint is set to support it, and falls back
    /// once to the plain request when the endpoint rejects that with a 400 naming
    /// `response_format`. The caller parses and checks the reply either way.
    pub async fn complete_structured(
        &self,
        messages: &[ChatMessage],
        name: &str,
        schema: &Value,
    ) -> Result<LlmReply, LlmError> {
        if self.endpoint.kind == LlmKind::Bedrock || !self.endpoint.structured_output {
            return self.complete(messages).await;
        }
        let format = json!({
            "type": "json_schema",
            "json_schema": {"name": name, "schema": schema, "strict": false}
        });
        match self.complete_with(messages, Some(format)).await {
            Err(LlmError::Rejected {
                status: 400, body, ..
            }) if body.contains("response_format") => {
                tracing::warn!(
                    "{} rejected structured output; set structured_output = false for it",
                    self.endpoint.base_url
                );
                self.complete(messages).await
            }
            other => other,
        }
    }

    async fn converse(&self, messages: &[ChatMessage]) -> Result<LlmReply, LlmError> {
        #[cfg(feature = "bedrock")]
        {
            let client = self
                .bedrock
                .as_ref()
                .ok_or_else(|| LlmError::Misconfigured("Bedrock client not initialised".into()))?;
            client.complete(&self.endpoint, messages).await
        }
        #[cfg(not(feature = "bedrock"))]
        {
            let _ = messages;
            Err(no_bedrock())
        }
    }

    fn unavailable(&self, e: reqwest::Error) -> LlmError {
        LlmError::Unavailable {
            endpoint: self.endpoint.base_url.clone(),
            reason: if e.is_timeout() {
                format!("timed out after {} ms", self.endpoint.timeout_ms)
            } else {
                e.to_string()
            },
        }
    }
}

/// `choices[0].message.content` of a chat completion.
pub fn completion_text(body: &Value) -> Option<String> {
    body.pointer("/choices/0/message/content")
        .and_then(Value::as_str)
        .map(str::to_string)
}

/// A minimal OpenAI chat completion body.
pub fn completion_body(model: &str, text: &str) -> Value {
    json!({
        "id": format!("chatcmpl-{}", uuid::Uuid::new_v4().simple()),
        "object": "chat.completion",
        "created": std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or(0),
        "model": model,
        "choices": [{
            "index": 0,
            "message": { "role": "assistant", "content": text },
            "finish_reason": "stop"
        }]
    })
}

fn truncate(s: &str, max: usize) -> &str {
    match s.char_indices().nth(max) {
        Some((i, _)) => &s[..i],
        None => s,
    }
}

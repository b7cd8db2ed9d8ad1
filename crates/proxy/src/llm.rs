//! LLM clients: any OpenAI-compatible `/chat/completions` endpoint, the Anthropic Messages
//! API, or Bedrock Converse. Every call goes through the one retry policy ([`crate::retry`]).

use crate::config::{LlmEndpoint, LlmKind};
use crate::http_body::truncate;
use crate::retry::{is_transient_status, Attempt, RetryPolicy};
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
    /// The endpoint could not be reached, timed out, throttled or failed (5xx), after the
    /// retries.
    #[error("LLM endpoint {endpoint} is unavailable: {reason}")]
    Unavailable {
        /// The base URL or Bedrock model.
        endpoint: String,
        /// What happened.
        reason: String,
    },
    /// The endpoint kept answering 429 (throttling), after the retries.
    #[error("LLM endpoint {endpoint} is throttling requests: {reason}")]
    Throttled {
        /// The base URL.
        endpoint: String,
        /// What happened.
        reason: String,
        /// When it said to try again (`Retry-After`), if it did.
        retry_after: Option<Duration>,
    },
    /// The endpoint refused the request (4xx): passed on to the client as is.
    #[error("LLM endpoint {endpoint} rejected the request with HTTP {status}: {body}")]
    Rejected {
        /// The base URL.
        endpoint: String,
        /// HTTP status.
        status: u16,
        /// Response body, its first 4 KiB ([`crate::http_body::error_body`]).
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

/// One failed attempt of an HTTP call, before the retry policy decides.
struct HttpAttempt {
    error: LlmError,
    transient: bool,
    retry_after: Option<Duration>,
}

impl std::fmt::Display for HttpAttempt {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.error.fmt(f)
    }
}

impl Attempt for HttpAttempt {
    fn is_transient(&self) -> bool {
        self.transient
    }
    fn retry_after(&self) -> Option<Duration> {
        self.retry_after
    }
}

impl Attempt for LlmError {
    fn is_transient(&self) -> bool {
        matches!(
            self,
            LlmError::Unavailable { .. } | LlmError::Throttled { .. }
        )
    }
    fn retry_after(&self) -> Option<Duration> {
        None
    }
}

/// A chat completion's text and the model that wrote it.
#[derive(Debug, Clone, PartialEq)]
pub struct LlmReply {
    /// The assistant message.
    pub text: String,
    /// The model id: the one asked for, or its snapshot as the endpoint reported it (see
    /// [`crate::openai::reported_model`]).
    pub model: String,
}

/// A client for one configured endpoint.
#[derive(Clone)]
pub struct LlmClient {
    endpoint: LlmEndpoint,
    /// The completions URL, parsed once (`None` when it does not parse: each request then
    /// reports that, as reqwest words it).
    url: Option<reqwest::Url>,
    /// How errors and retries name the endpoint.
    label: String,
    http: crate::per_loop::PerLoop<reqwest::Client>,
    retry: RetryPolicy,
    #[cfg(feature = "bedrock")]
    bedrock: Option<crate::bedrock::Converse>,
}

/// Where `endpoint`'s completions are posted.
fn completions_url(endpoint: &LlmEndpoint) -> String {
    let path = match endpoint.kind {
        LlmKind::Anthropic => "messages",
        _ => "chat/completions",
    };
    format!("{}/{path}", endpoint.base_url.trim_end_matches('/'))
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
        let http = crate::per_loop::PerLoop::try_new(|| {
            // Redirects are not followed: a 307 resent the conversation, with Anthropic's
            // `x-api-key` (reqwest drops only `Authorization` across hosts), wherever the
            // endpoint pointed, over plain HTTP too.
            reqwest::Client::builder()
                .timeout(Duration::from_millis(endpoint.timeout_ms))
                .redirect(reqwest::redirect::Policy::none())
                .build()
        })
        .map_err(|e| LlmError::Misconfigured(format!("HTTP client: {e}")))?;
        #[cfg(feature = "bedrock")]
        let bedrock = match endpoint.kind {
            LlmKind::Openai | LlmKind::Anthropic => None,
            LlmKind::Bedrock => Some(crate::bedrock::Converse::new(&endpoint).await),
        };
        #[cfg(not(feature = "bedrock"))]
        if endpoint.kind == LlmKind::Bedrock {
            return Err(no_bedrock());
        }
        Ok(LlmClient {
            retry: RetryPolicy::new(
                endpoint.max_retries,
                Duration::from_millis(endpoint.timeout_ms),
            ),
            url: reqwest::Url::parse(&completions_url(&endpoint)).ok(),
            label: format!("LLM endpoint {}", endpoint.base_url),
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

    /// Counts this client's retries in `counter` (the `proofgate_llm_retries` metric).
    pub fn counting_retries(
        mut self,
        counter: prometheus_client::metrics::counter::Counter,
    ) -> Self {
        self.retry.counter = Some(counter);
        self
    }

    /// Sends an OpenAI chat-completions request body as is (apart from `model` when one is
    /// configured, and `stream`, which is always off: nothing unverified may stream through).
    /// `client_auth` is the caller's `Authorization` header, used when no key is configured.
    /// The reply is a chat completion whatever the endpoint's kind.
    pub async fn forward(&self, body: Value, client_auth: Option<&str>) -> Result<Value, LlmError> {
        Ok(self.forward_native(body, client_auth).await?.0)
    }

    /// As [`LlmClient::forward`], also returning the endpoint's own reply when it is not a
    /// chat completion (an Anthropic message), so a tool-use reply can pass through as sent.
    pub async fn forward_native(
        &self,
        mut body: Value,
        client_auth: Option<&str>,
    ) -> Result<(Value, Option<Value>), LlmError> {
        if self.endpoint.kind == LlmKind::Bedrock {
            // Converse is called with text turns only: the app's tools cannot be offered, so a
            // request with tools is refused rather than answered as if it had none, and the
            // conversation's earlier tool calls and results go as text.
            let offers_tools = ["tools", "functions"].iter().any(|k| {
                body.get(*k)
                    .and_then(Value::as_array)
                    .is_some_and(|t| !t.is_empty())
            });
            if offers_tools {
                return Err(LlmError::Rejected {
                    endpoint: self.endpoint.base_url.clone(),
                    status: 400,
                    body: json!({"error": {"message": "tools are not supported with a Bedrock \
                        (Converse) upstream in proofgate: use an OpenAI-compatible endpoint \
                        for a chatbot that calls tools"}})
                    .to_string(),
                });
            }
            let turns = body
                .get("messages")
                .and_then(Value::as_array)
                .map(|m| tool_turns_as_text(m))
                .unwrap_or_default();
            let messages: Vec<ChatMessage> = turns
                .iter()
                .map(|m| ChatMessage {
                    role: m
                        .get("role")
                        .and_then(Value::as_str)
                        .unwrap_or("user")
                        .to_string(),
                    content: crate::openai::message_text(m).unwrap_or_default(),
                })
                .collect();
            let reply = self.converse(&messages).await?;
            return Ok((completion_body(&reply.model, &reply.text), None));
        }
        if let Some(obj) = body.as_object_mut() {
            if let Some(model) = &self.endpoint.model {
                obj.insert("model".into(), json!(model));
            }
            obj.insert("stream".into(), json!(false));
            obj.remove("stream_options");
        }
        if self.endpoint.kind == LlmKind::Anthropic {
            if let Some(why) = crate::anthropic::history_problem(&body) {
                return Err(LlmError::Rejected {
                    endpoint: self.endpoint.base_url.clone(),
                    status: 400,
                    body: json!({"error": {"message": why}}).to_string(),
                });
            }
            let message = self
                .post_json(&crate::anthropic::request_from_chat(&body), client_auth)
                .await?;
            if message.get("type").and_then(Value::as_str) != Some("message") {
                return Err(LlmError::BadResponse {
                    endpoint: self.endpoint.base_url.clone(),
                    reason: format!(
                        "not a Messages API message: {}",
                        truncate(&message.to_string(), 200)
                    ),
                });
            }
            return Ok((
                crate::anthropic::completion_from_message(&message),
                Some(message),
            ));
        }
        Ok((self.post_json(&body, client_auth).await?, None))
    }

    /// POSTs `body` to the endpoint with the retry policy; the JSON reply.
    async fn post_json(&self, body: &Value, client_auth: Option<&str>) -> Result<Value, LlmError> {
        self.retry
            .run(&self.label, || self.post_once(body, client_auth))
            .await
            .map_err(|a| a.error)
    }

    async fn post_once(
        &self,
        body: &Value,
        client_auth: Option<&str>,
    ) -> Result<Value, HttpAttempt> {
        let req = match &self.url {
            Some(url) => self.http.get().post(url.clone()),
            None => self.http.get().post(completions_url(&self.endpoint)),
        }
        .json(body);
        self.send_once(req, client_auth).await
    }

    /// The endpoint's list of models (`GET {base_url}/models` with `query`), as the endpoint
    /// words it: OpenAI's `{"object": "list", "data": [...]}`, or Anthropic's `{"data": [...],
    /// "has_more", ...}` (see [`crate::server::models`]). Bedrock's Converse has no such list.
    pub async fn list_models(
        &self,
        query: &[(String, String)],
        client_auth: Option<&str>,
    ) -> Result<Value, LlmError> {
        if self.endpoint.kind == LlmKind::Bedrock {
            return Err(LlmError::Misconfigured(
                "a Bedrock upstream has no model list: set [upstream] model".into(),
            ));
        }
        let mut url = reqwest::Url::parse(&format!(
            "{}/models",
            self.endpoint.base_url.trim_end_matches('/')
        ))
        .map_err(|e| LlmError::Misconfigured(format!("[upstream] base_url: {e}")))?;
        if !query.is_empty() {
            url.query_pairs_mut().extend_pairs(query);
        }
        self.retry
            .run(&self.label, || {
                self.send_once(self.http.get().get(url.clone()), client_auth)
            })
            .await
            .map_err(|a| a.error)
    }

    /// Sends `req` once with the endpoint's credentials; its JSON reply, or how it failed and
    /// whether a retry may help.
    async fn send_once(
        &self,
        mut req: reqwest::RequestBuilder,
        client_auth: Option<&str>,
    ) -> Result<Value, HttpAttempt> {
        match self.endpoint.kind {
            LlmKind::Anthropic => {
                req = req.header("anthropic-version", &self.endpoint.anthropic_version);
                if let Some(key) = &self.endpoint.api_key {
                    req = req.header("x-api-key", key);
                }
            }
            _ => {
                if let Some(key) = &self.endpoint.api_key {
                    req = req.bearer_auth(key);
                } else if let Some(auth) = client_auth {
                    req = req.header(reqwest::header::AUTHORIZATION, auth);
                }
            }
        }
        let permanent = |error| HttpAttempt {
            error,
            transient: false,
            retry_after: None,
        };
        let connection = |e: reqwest::Error| HttpAttempt {
            error: self.unavailable(e),
            transient: true,
            retry_after: None,
        };
        let resp = req.send().await.map_err(connection)?;
        let status = resp.status();
        let retry_after = crate::retry::retry_after(resp.headers(), self.retry.max_delay * 4);
        let text =
            match crate::http_body::read_bounded(resp, crate::http_body::MAX_ANSWER_BYTES).await {
                Ok(bytes) => String::from_utf8_lossy(&bytes).into_owned(),
                Err(crate::http_body::BodyError::Read(e)) => return Err(connection(e)),
                Err(e) => {
                    return Err(permanent(LlmError::BadResponse {
                        endpoint: self.endpoint.base_url.clone(),
                        reason: e.to_string(),
                    }))
                }
            };
        // OpenAI's 429 for an exhausted quota is the operator's billing, not a rate: retrying
        // only adds calls, and the client's "retry after" would never come true.
        if status.as_u16() == 429 && is_quota_exhausted(&text) {
            return Err(permanent(LlmError::Rejected {
                endpoint: self.endpoint.base_url.clone(),
                status: 429,
                body: crate::http_body::error_body(&text),
            }));
        }
        if is_transient_status(status.as_u16()) {
            let error = if status.as_u16() == 429 {
                LlmError::Throttled {
                    endpoint: self.endpoint.base_url.clone(),
                    reason: format!("HTTP {status}: {}", truncate(&text, 500)),
                    retry_after,
                }
            } else if status.is_server_error() {
                LlmError::Unavailable {
                    endpoint: self.endpoint.base_url.clone(),
                    reason: format!("HTTP {status}: {}", truncate(&text, 500)),
                }
            } else {
                LlmError::Rejected {
                    endpoint: self.endpoint.base_url.clone(),
                    status: status.as_u16(),
                    body: crate::http_body::error_body(&text),
                }
            };
            return Err(HttpAttempt {
                error,
                transient: true,
                retry_after,
            });
        }
        if status.is_redirection() {
            return Err(permanent(LlmError::BadResponse {
                endpoint: self.endpoint.base_url.clone(),
                reason: format!(
                    "HTTP {status}, a redirect (not followed: set the endpoint's base_url to \
                     where it points, if it is to be trusted)"
                ),
            }));
        }
        if !status.is_success() {
            return Err(permanent(LlmError::Rejected {
                endpoint: self.endpoint.base_url.clone(),
                status: status.as_u16(),
                body: crate::http_body::error_body(&text),
            }));
        }
        if let Err(n) =
            crate::http_body::within_values(text.as_bytes(), crate::http_body::MAX_ANSWER_VALUES)
        {
            return Err(permanent(LlmError::BadResponse {
                endpoint: self.endpoint.base_url.clone(),
                reason: format!(
                    "the response holds more than {} JSON values ({n} read)",
                    crate::http_body::MAX_ANSWER_VALUES
                ),
            }));
        }
        serde_json::from_str(&text).map_err(|e| {
            permanent(LlmError::BadResponse {
                endpoint: self.endpoint.base_url.clone(),
                reason: format!("not JSON ({e}): {}", truncate(&text, 200)),
            })
        })
    }

    /// One completion in the app's own conversation (see [`REWRITER_KEEPS`]): `app_request` (the app's chat request,
    /// as stored with the thread) with its tools removed and streaming off, plus one user
    /// message, `prompt`. `answered_by` is the model that answered when it is not the app
    /// request's (the upstream's pinned one). The model is this endpoint's when configured,
    /// else the app's. The
    /// conversation's tool calls and results go as text (see [`tool_turns_as_text`]): without
    /// the tools, Anthropic's and Bedrock's APIs refuse a conversation holding tool blocks.
    pub async fn complete_in(
        &self,
        app_request: &Value,
        answered_by: Option<&str>,
        prompt: &str,
    ) -> Result<LlmReply, LlmError> {
        let Some(body) = rewriter_request(&self.endpoint, app_request, answered_by, prompt) else {
            return self.complete(&[ChatMessage::user(prompt)]).await;
        };
        // The model asked for: this endpoint's when configured (`forward` sets it), else the
        // request's.
        let asked = (self.endpoint.model.clone())
            .or_else(|| {
                body.get("model")
                    .and_then(Value::as_str)
                    .map(str::to_string)
            })
            .unwrap_or_default();
        let resp = self.forward(body, None).await?;
        self.reply_of(&resp, &asked)
    }

    /// The text and model of a chat completion: the model as
    /// [`crate::openai::reported_model`] names it for `asked`, the model the request asked
    /// for (a rewrite's model is recorded as its outcome's, which a thread's view shows).
    fn reply_of(&self, resp: &Value, asked: &str) -> Result<LlmReply, LlmError> {
        let text = completion_text(resp).ok_or_else(|| LlmError::BadResponse {
            endpoint: self.endpoint.base_url.clone(),
            reason: "no choices[0].message.content".into(),
        })?;
        let model = crate::openai::reported_model(asked, resp.get("model").and_then(Value::as_str));
        Ok(LlmReply { text, model })
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
        self.reply_of(&resp, &model)
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
        // Built member by member: `json!` would copy `schema` by serializing it again.
        let mut json_schema = serde_json::Map::new();
        json_schema.insert("name".into(), name.into());
        json_schema.insert("schema".into(), schema.clone());
        json_schema.insert("strict".into(), false.into());
        let mut format = serde_json::Map::new();
        format.insert("type".into(), "json_schema".into());
        format.insert("json_schema".into(), Value::Object(json_schema));
        let format = Value::Object(format);
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
            let what = format!("Bedrock Converse {}", self.endpoint.base_url);
            self.retry
                .run(&what, || client.complete(&self.endpoint, messages))
                .await
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
    match body.pointer("/choices/0/message/content")? {
        Value::String(s) => Some(s.clone()),
        // Some OpenAI-compatible servers answer with a list of parts: text parts only are
        // text (any other part, an image or audio, is not an answer this checks).
        Value::Array(parts) if !parts.is_empty() => parts
            .iter()
            .map(
                |p| match (p.get("type").and_then(Value::as_str), p.get("text")) {
                    (Some("text"), Some(Value::String(t))) => Some(t.as_str()),
                    _ => None,
                },
            )
            .collect::<Option<Vec<&str>>>()
            .map(|t| t.concat()),
        _ => None,
    }
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

/// `messages` (chat-completions shape) with each assistant turn's tool calls written into its
/// text and each tool result as a user turn saying which call it answers: what the model
/// needs to read of them, in a form every API accepts without tool definitions.
fn tool_turns_as_text(messages: &[Value]) -> Vec<Value> {
    let text = |m: &Value| {
        m.get("content")
            .map(crate::anthropic::text_of_content)
            .unwrap_or_default()
    };
    messages
        .iter()
        .map(|m| match m.get("role").and_then(Value::as_str) {
            Some("assistant") => {
                let calls = m
                    .get("tool_calls")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                    .filter_map(|c| c.get("function"))
                    .chain(m.get("function_call"));
                let mut out = text(m);
                let mut called = false;
                for call in calls {
                    called = true;
                    let name = call.get("name").and_then(Value::as_str).unwrap_or("");
                    let args = call.get("arguments").and_then(Value::as_str).unwrap_or("");
                    out += &format!("\n[called the tool {name} with {args}]");
                }
                if !called {
                    return m.clone();
                }
                json!({"role": "assistant", "content": out.trim_start()})
            }
            Some(role @ ("tool" | "function")) => {
                let which = match role {
                    "tool" => m.get("tool_call_id"),
                    _ => m.get("name"),
                }
                .and_then(Value::as_str)
                .unwrap_or("");
                json!({"role": "user",
                       "content": format!("[result of the tool call {which}]\n{}", text(m))})
            }
            _ => m.clone(),
        })
        .collect()
}

/// Whether a 429's body says the account's quota is exhausted (OpenAI's
/// `insufficient_quota`), which no wait ends.
fn is_quota_exhausted(body: &str) -> bool {
    let Ok(v) = serde_json::from_str::<Value>(body) else {
        return false;
    };
    ["/error/code", "/error/type", "/code", "/type"]
        .iter()
        .any(|p| v.pointer(p).and_then(Value::as_str) == Some("insufficient_quota"))
}

/// What [`LlmClient::complete_in`] sends to `endpoint`: the app's request cut to
/// [`REWRITER_KEEPS`] (to [`REWRITER_KEEPS_FOR_ANOTHER_MODEL`] when the endpoint names a model
/// other than the one that answered: `answered_by`, else the app's), the endpoint's
/// temperature, the conversation's tool turns as text, and `prompt` last. None when the app's
/// request is not a JSON object.
fn rewriter_request(
    endpoint: &LlmEndpoint,
    app_request: &Value,
    answered_by: Option<&str>,
    prompt: &str,
) -> Option<Value> {
    let mut body = app_request.clone();
    let obj = body.as_object_mut()?;
    if let Some(model) = answered_by {
        obj.insert("model".into(), model.into());
    }
    // Only what makes the app's voice: a client's `stop`, `logit_bias`, `store`, `metadata`
    // or a vendor's extras reached the rewriter (perhaps another model or vendor), where
    // they could break every rewrite (failing open, the unchecked draft then went out) or
    // keep proofgate's prompt, with the policy, in the operator's stored completions.
    let another_model = endpoint
        .model
        .as_deref()
        .is_some_and(|m| obj.get("model").and_then(Value::as_str) != Some(m));
    // Parameters are the app's model's: a reasoning model refuses `temperature` and
    // `max_tokens`, most others refuse `reasoning_effort`, and a token limit sized for one
    // model's answers can cut another's off. Another model gets only the conversation.
    let keeps = if another_model {
        REWRITER_KEEPS_FOR_ANOTHER_MODEL
    } else {
        REWRITER_KEEPS
    };
    obj.retain(|key, _| keeps.contains(&key.as_str()));
    if let Some(t) = endpoint.temperature {
        obj.insert("temperature".into(), json!(t));
    }
    let mut messages = obj
        .get("messages")
        .and_then(Value::as_array)
        .map(|m| tool_turns_as_text(m))
        .unwrap_or_default();
    messages.push(json!({"role": "user", "content": prompt}));
    obj.insert("messages".into(), Value::Array(messages));
    Some(body)
}

/// Of the app's request, what a rewriter configured with a model other than the app's gets:
/// the conversation and who the end user is, none of the app's model's parameters.
pub const REWRITER_KEEPS_FOR_ANOTHER_MODEL: &[&str] =
    &["model", "messages", "user", "safety_identifier"];

/// The members of the app's request a rewrite keeps ([`LlmClient::complete_in`]): the
/// conversation, the model, and the parameters that set the answer's style and length.
pub const REWRITER_KEEPS: &[&str] = &[
    "model",
    "messages",
    "temperature",
    "top_p",
    "max_tokens",
    "max_completion_tokens",
    "frequency_penalty",
    "presence_penalty",
    "seed",
    "reasoning_effort",
    "user",
    "safety_identifier",
];

#[cfg(test)]
mod tests {
    use super::*;

    /// A reply whose content is a list of text parts (some OpenAI-compatible servers) is its
    /// text; a list with any other part is no text (it was a 502 either way before).
    #[test]
    fn a_content_of_text_parts_is_its_text() {
        let reply = |content: Value| json!({"choices": [{"message": {"content": content}}]});
        assert_eq!(completion_text(&reply(json!("a"))).as_deref(), Some("a"));
        assert_eq!(
            completion_text(&reply(json!([{"type": "text", "text": "As a "},
                                          {"type": "text", "text": "senior."}])))
            .as_deref(),
            Some("As a senior.")
        );
        for content in [
            json!([{"type": "text", "text": "a"}, {"type": "image_url", "image_url": {}}]),
            json!([]),
            json!(null),
            json!([{"type": "text"}]),
        ] {
            assert_eq!(completion_text(&reply(content.clone())), None, "{content}");
        }
    }

    #[test]
    fn a_rewriter_of_another_model_gets_none_of_the_apps_parameters() {
        let app = json!({"model": "o3", "messages": [{"role": "user", "content": "q"}],
            "reasoning_effort": "high", "max_completion_tokens": 900, "seed": 7,
            "user": "u1", "stop": ["x"]});
        let same = LlmEndpoint {
            model: Some("o3".into()),
            ..LlmEndpoint::default()
        };
        let body = rewriter_request(&same, &app, None, "fix it").unwrap();
        assert_eq!(body["reasoning_effort"], "high");
        assert_eq!(body["max_completion_tokens"], 900);
        assert!(body.get("stop").is_none());
        for endpoint in [
            LlmEndpoint {
                model: Some("gpt-4o-mini".into()),
                temperature: Some(0.2),
                ..LlmEndpoint::default()
            },
            LlmEndpoint {
                model: Some("gpt-4o-mini".into()),
                ..LlmEndpoint::default()
            },
        ] {
            let body = rewriter_request(&endpoint, &app, None, "fix it").unwrap();
            let mut keys: Vec<&str> = body
                .as_object()
                .unwrap()
                .keys()
                .map(|k| k.as_str())
                .collect();
            keys.sort();
            let mut want = vec!["messages", "model", "user"];
            if endpoint.temperature.is_some() {
                want.push("temperature");
            }
            want.sort();
            assert_eq!(keys, want, "{body}");
            // The model is set by `forward` from the endpoint.
            assert_eq!(body["messages"][1]["content"], "fix it");
        }
        // Without a model of its own, the rewriter is the app's model.
        let body = rewriter_request(&LlmEndpoint::default(), &app, None, "fix it").unwrap();
        assert_eq!(body["reasoning_effort"], "high");
        assert!(rewriter_request(&LlmEndpoint::default(), &json!([1]), None, "p").is_none());
        // The upstream pinned to o3 answered a client that named another model: a rewriter of
        // o3 is the same model, and keeps the app's parameters (a review: they were dropped).
        let client = json!({"model": "whatever-the-client-sent", "messages": [],
            "reasoning_effort": "high"});
        let body = rewriter_request(&same, &client, Some("o3"), "fix it").unwrap();
        assert_eq!(body["reasoning_effort"], "high");
        assert_eq!(body["model"], "o3");
        let other = LlmEndpoint {
            model: Some("gpt-4o-mini".into()),
            ..LlmEndpoint::default()
        };
        let body = rewriter_request(&other, &client, Some("o3"), "fix it").unwrap();
        assert!(body.get("reasoning_effort").is_none(), "{body}");
    }

    #[test]
    fn an_exhausted_quota_is_not_a_rate() {
        assert!(is_quota_exhausted(
            r#"{"error": {"message": "You exceeded your current quota", "type": "insufficient_quota", "code": "insufficient_quota"}}"#
        ));
        assert!(!is_quota_exhausted(
            r#"{"error": {"message": "Rate limit reached", "type": "requests", "code": "rate_limit_exceeded"}}"#
        ));
        assert!(!is_quota_exhausted("slow down"));
    }
    use crate::per_loop::test_support::{each_loop_in_turn, keep_alive_server};

    #[test]
    fn tool_turns_become_text_that_names_each_call() {
        let messages = vec![
            json!({"role": "system", "content": "Be brief."}),
            json!({"role": "user", "content": "How old am I?"}),
            json!({"role": "assistant", "content": null, "tool_calls": [
                {"id": "call_1", "type": "function",
                 "function": {"name": "lookup_age", "arguments": "{\"id\":7}"}}]}),
            json!({"role": "tool", "tool_call_id": "call_1",
                   "content": [{"type": "text", "text": "70"}]}),
            json!({"role": "assistant", "content": "You are 70."}),
        ];
        let out = tool_turns_as_text(&messages);
        assert_eq!(out[..2], messages[..2]);
        assert_eq!(
            out[2],
            json!({"role": "assistant", "content": "[called the tool lookup_age with {\"id\":7}]"})
        );
        assert_eq!(
            out[3],
            json!({"role": "user", "content": "[result of the tool call call_1]\n70"})
        );
        assert_eq!(out[4], messages[4]);
        // Nothing of a tool block is left for an API that wants tools defined to refuse.
        let anthropic = crate::anthropic::request_from_chat(&json!({"messages": out}));
        let text = anthropic.to_string();
        assert!(
            !text.contains("tool_use") && !text.contains("tool_result"),
            "{text}"
        );
    }

    /// A rewrite's model is recorded as its outcome's, which a thread's view shows to its key:
    /// the model asked for (the endpoint's, else the app's) or its dated snapshot, never
    /// another name the endpoint gives (it was recorded as the endpoint named it).
    #[test]
    fn a_replys_model_is_the_one_asked_for_or_its_snapshot() {
        let completion = r#"{"id":"c","object":"chat.completion","model":"Good news: seniors enter free","choices":[{"index":0,"message":{"role":"assistant","content":"A."},"finish_reason":"stop"}]}"#;
        let (server, addr, _) = keep_alive_server(completion);
        let app = json!({"model": "gpt-4o", "messages": [{"role": "user", "content": "q"}]});
        for (model, asked) in [
            (None, "gpt-4o"),
            (Some("recorded-rewriter"), "recorded-rewriter"),
        ] {
            let client = server
                .block_on(LlmClient::new(LlmEndpoint {
                    base_url: format!("http://{addr}/v1"),
                    model: model.map(str::to_string),
                    max_retries: 0,
                    ..LlmEndpoint::default()
                }))
                .unwrap();
            let reply = server
                .block_on(client.complete_in(&app, None, "fix it"))
                .unwrap();
            assert_eq!(reply.model, asked);
            if model.is_some() {
                let reply = server
                    .block_on(client.complete(&[ChatMessage::user("q")]))
                    .unwrap();
                assert_eq!(reply.model, asked);
            }
        }
        let client = server
            .block_on(LlmClient::new(LlmEndpoint::default()))
            .unwrap();
        let reply =
            |model: Value| json!({"model": model, "choices": [{"message": {"content": "A."}}]});
        for (model, asked, named) in [
            (json!("gpt-4o-2024-08-06"), "gpt-4o", "gpt-4o-2024-08-06"),
            (
                json!("gpt-4o-you-also-get-a-full-refund"),
                "gpt-4o",
                "gpt-4o",
            ),
            (Value::Null, "gpt-4o", "gpt-4o"),
        ] {
            assert_eq!(client.reply_of(&reply(model), asked).unwrap().model, named);
        }
    }

    /// With event loops declared, each loop calls an endpoint through connections of its own:
    /// a connection pooled by another loop is driven by that loop's thread (and, were that loop
    /// busy or stopped, would stall the call).
    #[test]
    fn each_event_loop_calls_through_connections_of_its_own() {
        crate::per_loop::set_loops(2);
        let completion = r#"{"id":"c","object":"chat.completion","model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"hi"},"finish_reason":"stop"}]}"#;
        let (server, addr, accepted) = keep_alive_server(completion);
        let client = server
            .block_on(LlmClient::new(LlmEndpoint {
                base_url: format!("http://{addr}/v1"),
                max_retries: 0,
                ..LlmEndpoint::default()
            }))
            .unwrap();
        let body =
            serde_json::json!({"model": "m", "messages": [{"role": "user", "content": "q"}]});
        each_loop_in_turn(2, |_| {
            let (client, body) = (client.clone(), body.clone());
            async move {
                let reply = client.forward(body, None).await.unwrap();
                assert_eq!(reply["choices"][0]["message"]["content"], "hi");
            }
        });
        assert_eq!(accepted(), 2, "the loops shared a connection");
    }
}

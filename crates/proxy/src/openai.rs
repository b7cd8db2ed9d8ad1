//! The OpenAI chat-completions wire format as the proxy sees it: reading the client's request,
//! and writing verified answers back (JSON or server-sent events).

use proofgate_core::conversation::{ConversationTurn, TurnRole};
use proofgate_core::thread::{GivenToolCall, ToolCall};
use serde_json::{json, Value};
use sha2::{Digest, Sha256};

/// What the proxy needs from a client's chat-completions request.
#[derive(Debug, Clone, PartialEq)]
pub struct ChatRequest {
    /// The request body as sent, forwarded upstream.
    pub body: Value,
    /// The last user message: the question being answered.
    pub question: String,
    /// Whether the client asked for server-sent events.
    pub stream: bool,
    /// The model the client asked for.
    pub model: String,
    /// Identifies the conversation before its last user message (to resume a thread that asked
    /// follow-up questions).
    pub conversation_before_last: String,
    /// Whether an assistant message comes right before the last user message: only then can
    /// the request answer a thread's follow-up questions (a waiting thread's conversation
    /// always ends with its questions), so only then is a waiting thread looked up.
    pub answers_assistant: bool,
    /// Where the last user message is in `messages`.
    last_user_at: usize,
}

/// A request the proxy cannot serve, with what was wrong.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum RequestError {
    /// The body is not a JSON object with `messages`.
    #[error("the request body must be a JSON object with a `messages` array")]
    NoMessages,
    /// No user message to answer.
    #[error("the request has no user message with text content to answer")]
    NoUserMessage,
    /// More than one choice asked for.
    #[error("only n = 1 is supported: proofgate verifies one answer per request (got n = {0})")]
    SeveralChoices(String),
    /// A content part the verification cannot read (an image, audio, a file).
    #[error(
        "content parts of type `{0}` are not supported: the answer is verified against the \
         conversation's text only, so an answer drawing on this part could not be checked; \
         send what the part holds as text"
    )]
    UnsupportedContent(String),
    /// A message whose role is missing or not one of the API's: the translators take facts
    /// from user, system and tool turns only, so a turn of unknown origin is not guessed at.
    #[error(
        "messages[{0}] has role {1}: the roles are system, developer, user, assistant, tool and \
         function (the translators take facts only from what the user, the system or a tool \
         said, so a turn's origin is not guessed); send earlier chatbot turns as assistant"
    )]
    UnknownRole(usize, String),
    /// The conversation ends with the assistant's text (a prefill, or vLLM's
    /// `continue_final_message`): the upstream's reply would continue it, and the client would
    /// show that text and the reply as one answer, of which only the reply was verified.
    #[error(
        "{0}: the upstream's reply would continue the assistant's text, and proofgate verifies \
         the reply alone, not the text it continues (\"It is not true that\" + \" seniors pay \
         $9.\" would be shown as one answer marked verified); end the conversation with the \
         user's message or tool results"
    )]
    ContinuesTheAssistant(String),
    /// Structured output (`response_format` other than text, or vLLM's `guided_*`): the
    /// answer is verified and marked as text, so an answer that is not verified would carry
    /// its notice outside the JSON, where a JSON reader drops it, and a rewrite is prose.
    #[error(
        "{0} is not supported: answers are verified, rewritten and marked as text (a notice \
         that an answer is not verified would fall outside its JSON, where a JSON reader drops \
         it); leave it out, or send `response_format` of type `text`"
    )]
    StructuredOutput(String),
}

/// The structured-output setting a request makes, if any: `response_format` of a type other
/// than `text`, or a server's own constrained-decoding parameter (vLLM's `guided_*` and
/// `structured_outputs`, llama.cpp's `grammar` and `json_schema`, SGLang's `regex` and `ebnf`,
/// Ollama's `format`): each reached the upstream unchanged, and the answer came back as JSON.
fn structured_output(body: &Value) -> Option<String> {
    match body.get("response_format") {
        None | Some(Value::Null) => {}
        Some(format) if format.get("type").and_then(Value::as_str) == Some("text") => {}
        Some(format) => {
            let kind = format
                .get("type")
                .and_then(Value::as_str)
                .map_or_else(|| format.to_string(), str::to_string);
            return Some(format!("response_format `{kind}`"));
        }
    }
    [
        "guided_json",
        "guided_regex",
        "guided_choice",
        "guided_grammar",
        "structured_outputs",
        "grammar",
        "json_schema",
        "regex",
        "ebnf",
        "format",
    ]
    .into_iter()
    .find(|k| body.get(*k).is_some_and(|v| !v.is_null()))
    .map(|k| format!("`{k}`"))
}

/// How a request asks the upstream to continue the assistant's turn rather than answer, if it
/// does: the last turn the upstream answers after is the assistant's (Anthropic's prefill,
/// which the Messages API converts to such a message), or it sets vLLM's
/// `continue_final_message`. That turn is judged as every upstream kind sends it: Anthropic
/// and Bedrock take system and developer messages out of the turns and Bedrock skips blank
/// ones, so an assistant's turn followed only by those is still last. An assistant's turn with
/// calls is last too: Bedrock sends calls as the assistant's text (of any shape, the legacy
/// `function_call` and calls without a name included), and no upstream answers calls that
/// have no results (OpenAI refuses them).
fn continued_assistant_text(body: &Value, messages: &[Value]) -> Option<String> {
    if body
        .get("continue_final_message")
        .is_some_and(|v| v != &Value::Bool(false) && !v.is_null())
    {
        return Some("the request sets `continue_final_message`".into());
    }
    let (at, last) = messages
        .iter()
        .enumerate()
        .rev()
        .find(|(_, m)| !left_out_of_the_turns(m))?;
    (last.get("role").and_then(Value::as_str) == Some("assistant")).then(|| {
        let after = if at + 1 == messages.len() {
            String::new()
        } else {
            " (the system, developer or blank messages after it do not end the turns an \
             Anthropic or Bedrock upstream receives)"
                .into()
        };
        let calls = if carries_calls(last) {
            ", with calls but no results to them"
        } else {
            ""
        };
        format!("messages[{at}], the last turn, is the assistant's{calls} (a prefill){after}")
    })
}

/// A turn some upstream kind leaves out of the conversation it sends: a system or developer
/// message (Anthropic's `system`, Bedrock's system blocks), or one with no text and no calls.
/// A tool's result, even empty, is always sent (Anthropic's `tool_result`, Bedrock's text
/// naming the call).
fn left_out_of_the_turns(m: &Value) -> bool {
    let role = m.get("role").and_then(Value::as_str);
    if matches!(role, Some("tool" | "function")) {
        return false;
    }
    matches!(role, Some("system" | "developer"))
        || (m
            .get("content")
            .map(crate::anthropic::text_of_content)
            .unwrap_or_default()
            .trim()
            .is_empty()
            && !carries_calls(m))
}

/// Whether a turn carries calls of any shape: `tool_calls` other than null or an empty list,
/// or the legacy `function_call` (Bedrock sends both as the assistant's text).
fn carries_calls(m: &Value) -> bool {
    m.get("tool_calls")
        .is_some_and(|c| !c.is_null() && c.as_array().is_none_or(|a| !a.is_empty()))
        || m.get("function_call").is_some_and(|c| !c.is_null())
}

/// The first message whose role is not one of Chat Completions' roles, with the role as the
/// client wrote it (`missing` when absent).
fn unknown_role(messages: &[Value]) -> Option<(usize, String)> {
    messages
        .iter()
        .enumerate()
        .find_map(|(i, m)| match m.get("role") {
            Some(Value::String(r))
                if matches!(
                    r.as_str(),
                    "system" | "developer" | "user" | "assistant" | "tool" | "function"
                ) =>
            {
                None
            }
            None | Some(Value::Null) => Some((i, "missing".to_string())),
            Some(other) => Some((
                i,
                format!(
                    "`{}`",
                    other
                        .as_str()
                        .map_or_else(|| other.to_string(), str::to_string)
                ),
            )),
        })
}

/// The first content part of `messages` whose type is not text (or an assistant's refusal):
/// the upstream would read it, the translators could not, so an answer drawn from it would be
/// verified against a conversation without it.
fn unreadable_part(messages: &[Value]) -> Option<String> {
    messages
        .iter()
        .filter_map(|m| m.get("content").and_then(Value::as_array))
        .flatten()
        .map(|p| p.get("type").and_then(Value::as_str).unwrap_or(""))
        .find(|kind| !matches!(*kind, "text" | "refusal"))
        .map(str::to_string)
}

/// The text of a message's `content`: a string, or the text parts of a content array.
pub fn message_text(message: &Value) -> Option<String> {
    match message.get("content")? {
        Value::String(s) => Some(s.clone()),
        Value::Array(parts) => {
            let texts: Vec<&str> = parts
                .iter()
                .filter(|p| p.get("type").and_then(Value::as_str) == Some("text"))
                .filter_map(|p| p.get("text").and_then(Value::as_str))
                .collect();
            (!texts.is_empty()).then(|| texts.join("\n"))
        }
        _ => None,
    }
}

/// A stable key for a list of messages (role + text), independent of other request fields.
pub fn conversation_key(messages: &[Value]) -> String {
    let mut h = Sha256::new();
    for m in messages {
        let role = m.get("role").and_then(Value::as_str).unwrap_or("");
        let text = message_text(m).unwrap_or_default();
        // Length-prefixed so that no two different conversations hash the same input.
        h.update((role.len() as u64).to_be_bytes());
        h.update(role.as_bytes());
        h.update((text.len() as u64).to_be_bytes());
        h.update(text.as_bytes());
    }
    hex::encode(h.finalize())
}

/// The key a conversation will have once `reply` is appended as the assistant's message.
pub fn conversation_key_after(messages: &[Value], reply: &str) -> String {
    let mut all = messages.to_vec();
    all.push(json!({"role": "assistant", "content": reply}));
    conversation_key(&all)
}

/// The turns of a list of messages, as a thread records its conversation: tool calls rendered as
/// text, messages without text left out.
fn turns_of(messages: &[Value]) -> Vec<ConversationTurn> {
    let mut turns = Vec::new();
    for m in messages {
        let role = match m.get("role").and_then(Value::as_str) {
            Some("system" | "developer") => TurnRole::System,
            Some("assistant") => TurnRole::Assistant,
            Some("tool" | "function") => TurnRole::Tool,
            _ => TurnRole::User,
        };
        let mut text = message_text(m).unwrap_or_default();
        if let Some(calls) = tool_calls_of_message(m) {
            for c in calls {
                if !text.is_empty() {
                    text.push('\n');
                }
                text.push_str(&format!("called {} with {}", c.name, c.arguments));
            }
        }
        if !text.trim().is_empty() {
            turns.push(ConversationTurn::new(role, text));
        }
    }
    turns
}

impl ChatRequest {
    /// Whether the client asked for a usage chunk at the end of the stream.
    pub fn wants_usage_chunk(&self) -> bool {
        self.stream
            && self
                .body
                .pointer("/stream_options/include_usage")
                .and_then(Value::as_bool)
                == Some(true)
    }

    /// Reads a client's request body.
    pub fn parse(body: Value) -> Result<ChatRequest, RequestError> {
        ChatRequest::parse_with(body, true)
    }

    /// Reads an app request stored with a thread, as [`ChatRequest::parse`] but taking one that
    /// ends with the assistant's text: a thread started before such requests were refused
    /// keeps its request, and is not taken for one altered in the store.
    pub fn parse_stored(body: Value) -> Result<ChatRequest, RequestError> {
        ChatRequest::parse_with(body, false)
    }

    fn parse_with(body: Value, refuse_continuation: bool) -> Result<ChatRequest, RequestError> {
        let messages = body
            .get("messages")
            .and_then(Value::as_array)
            .ok_or(RequestError::NoMessages)?;
        let (last_user_at, question) = messages
            .iter()
            .enumerate()
            .rev()
            .find_map(|(i, m)| {
                (m.get("role").and_then(Value::as_str) == Some("user"))
                    .then(|| message_text(m).map(|t| (i, t)))
                    .flatten()
            })
            .ok_or(RequestError::NoUserMessage)?;
        if question.trim().is_empty() {
            return Err(RequestError::NoUserMessage);
        }
        // Anything but an absent or null `n` or the number 1 is refused: an endpoint that reads
        // `2.0` or `"2"` leniently (as vLLM does) would generate choices nobody verifies.
        match body.get("n") {
            None | Some(Value::Null) => {}
            Some(n) if n.as_f64() == Some(1.0) => {}
            Some(n) => return Err(RequestError::SeveralChoices(n.to_string())),
        }
        // New requests only: a stored one is read as it was accepted.
        if let Some(what) = structured_output(&body).filter(|_| refuse_continuation) {
            return Err(RequestError::StructuredOutput(what));
        }
        if let Some(kind) = unreadable_part(messages) {
            return Err(RequestError::UnsupportedContent(kind));
        }
        if let Some((at, role)) = unknown_role(messages) {
            return Err(RequestError::UnknownRole(at, role));
        }
        if let Some(how) = continued_assistant_text(&body, messages).filter(|_| refuse_continuation)
        {
            return Err(RequestError::ContinuesTheAssistant(how));
        }
        Ok(ChatRequest {
            stream: body.get("stream").and_then(Value::as_bool).unwrap_or(false),
            model: body
                .get("model")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string(),
            conversation_before_last: conversation_key(&messages[..last_user_at]),
            answers_assistant: messages[..last_user_at]
                .last()
                .and_then(|m| m.get("role"))
                .and_then(Value::as_str)
                == Some("assistant"),
            question,
            last_user_at,
            body,
        })
    }

    /// The messages of the request.
    pub fn messages(&self) -> &[Value] {
        self.body
            .get("messages")
            .and_then(Value::as_array)
            .map(Vec::as_slice)
            .unwrap_or(&[])
    }

    /// The whole conversation as text turns, for the translators: every message, with an
    /// assistant's tool calls rendered as `called NAME with ARGS` and tool results as tool
    /// turns.
    pub fn conversation(&self) -> Vec<ConversationTurn> {
        turns_of(self.messages())
    }

    /// [`ChatRequest::conversation`] up to the last user message (which it leaves out): what a
    /// waiting thread asked and was told before this request's answer.
    pub fn conversation_before_last_turns(&self) -> Vec<ConversationTurn> {
        turns_of(&self.messages()[..self.last_user_at])
    }

    /// How the request forces the model to call a tool, if it does. Only the choices known to
    /// leave the model free are let by: no `tool_choice`, `"auto"`, `"none"`, or
    /// `allowed_tools` in mode `auto` (in the Chat Completions or the Responses form), and no
    /// legacy `function_call` but `"auto"` or `"none"`. Anything else (`"required"`, a tool
    /// named, Mistral's `"any"`, a spelling unknown here) counts as forcing: a forced call is an
    /// answer given as arguments, which is how structured-output libraries ask for one.
    /// Anthropic's `any` and `tool` arrive here as `"required"` and a named function.
    pub fn forced_tool_call(&self) -> Option<String> {
        let free_string = |v: &Value| matches!(v.as_str(), Some("auto" | "none"));
        let describe = |what: &str, v: &Value| {
            let name = ["/function/name", "/name", "/custom/name"]
                .iter()
                .find_map(|p| v.pointer(p).and_then(Value::as_str));
            match (v, name) {
                (Value::String(s), _) => format!("{what} {s:?}"),
                (_, Some(n)) => format!("{what} naming `{n}`"),
                (_, None) => format!(
                    "{what} of type {}",
                    v.get("type")
                        .map_or_else(|| v.to_string(), Value::to_string)
                ),
            }
        };
        match self.body.get("tool_choice") {
            None | Some(Value::Null) => {}
            Some(c) if free_string(c) => {}
            Some(c)
                if c.get("type").and_then(Value::as_str) == Some("allowed_tools")
                    && [c.pointer("/allowed_tools/mode"), c.get("mode")]
                        .into_iter()
                        .flatten()
                        .all(free_string)
                    && (c.pointer("/allowed_tools/mode").is_some() || c.get("mode").is_some()) => {}
            Some(c) => return Some(describe("tool_choice", c)),
        }
        match self.body.get("function_call") {
            None | Some(Value::Null) => None,
            Some(f) if free_string(f) => None,
            Some(f) => Some(describe("function_call", f)),
        }
    }

    /// The names of the function tools the request offers (`tools`, and the legacy
    /// `functions`): the calls proofgate passes on (a custom tool's call is not one).
    pub fn offered_tools(&self) -> std::collections::BTreeSet<String> {
        let tools = self.body.get("tools").and_then(Value::as_array);
        let functions = self.body.get("functions").and_then(Value::as_array);
        tools
            .into_iter()
            .flatten()
            .filter_map(|t| t.pointer("/function/name"))
            .chain(
                functions
                    .into_iter()
                    .flatten()
                    .filter_map(|f| f.get("name")),
            )
            .filter_map(Value::as_str)
            .map(str::to_string)
            .collect()
    }

    /// The request as kept with the thread for the rewriter: everything but the tools (the
    /// rewriter is never offered them) and streaming.
    pub fn for_rewriter(&self) -> Value {
        let mut body = self.body.clone();
        if let Some(obj) = body.as_object_mut() {
            for key in [
                "tools",
                "tool_choice",
                "functions",
                "function_call",
                "stream",
                "stream_options",
            ] {
                obj.remove(key);
            }
        }
        body
    }
}

/// The tool calls of a message (`tool_calls`, or the legacy `function_call`), if any.
pub(crate) fn tool_calls_of_message(message: &Value) -> Option<Vec<ToolCall>> {
    let call = |id: Option<&Value>, f: &Value| ToolCall {
        id: id.and_then(Value::as_str).map(str::to_string),
        name: f
            .get("name")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string(),
        arguments: match f.get("arguments") {
            Some(Value::String(s)) => s.clone(),
            Some(v) => v.to_string(),
            None => String::new(),
        },
    };
    // Every entry counts: one that is not a function call (a custom tool's, or of a shape
    // unknown here) has no name, so it is never a tool the request offered, and a reply
    // carrying it is refused rather than passed on beside the calls that were checked.
    let mut calls: Vec<ToolCall> = message
        .get("tool_calls")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .map(|c| match c.get("function") {
            Some(f) => call(c.get("id"), f),
            None => call(c.get("id"), &Value::Null),
        })
        .collect();
    if let Some(f) = message.get("function_call").filter(|f| f.is_object()) {
        calls.push(call(None, f));
    }
    (!calls.is_empty()).then_some(calls)
}

/// The tool calls of an upstream completion's first choice: the reply is not an answer but a
/// call of the app's tools.
pub fn tool_call_of(completion: &Value) -> Option<GivenToolCall> {
    let message = completion.pointer("/choices/0/message")?;
    let calls = tool_calls_of_message(message)?;
    Some(GivenToolCall {
        calls,
        text: message_text(message).filter(|t| !t.trim().is_empty()),
        model: completion
            .get("model")
            .and_then(Value::as_str)
            .filter(|m| !m.is_empty())
            .map(str::to_string),
    })
}

/// A tool-call reply as returned to the client: the upstream's calls (`tool_calls`, or the
/// legacy `function_call`) as it made them, for the app to run; built like
/// [`verified_completion`] from an allow-list. Text the upstream wrote beside its calls is
/// dropped (`content: null`): it was not verified, and a model could put an answer there.
pub fn tool_call_completion(upstream: Value, proofgate: Value) -> Value {
    let mut out = verified_completion(upstream.clone(), "", proofgate);
    let message = upstream
        .pointer("/choices/0/message")
        .cloned()
        .unwrap_or_default();
    // The calls as the app needs them, member by member: anything else the upstream put in
    // them is text nobody checked.
    let function = |f: &Value| {
        let mut out = serde_json::Map::new();
        for key in ["name", "arguments"] {
            if let Some(v) = f.get(key) {
                out.insert(key.into(), v.clone());
            }
        }
        Value::Object(out)
    };
    let mut calls = json!({"role": "assistant", "content": null});
    if let Some(list) = message.get("tool_calls").and_then(Value::as_array) {
        let list: Vec<Value> = list
            .iter()
            .map(|c| {
                let mut out = serde_json::Map::new();
                // An id of a sentence's form is made up anew: the app may show it, and
                // nothing checks it (see `short_id` for why a short one is kept).
                let id = short_id(c.get("id"))
                    .map(str::to_string)
                    .unwrap_or_else(|| format!("call_{}", uuid::Uuid::new_v4().simple()));
                out.insert("id".into(), json!(id));
                // Only function calls get this far (any other is refused as not offered).
                out.insert("type".into(), json!("function"));
                if let Some(f) = c.get("function") {
                    out.insert("function".into(), function(f));
                }
                Value::Object(out)
            })
            .collect();
        calls["tool_calls"] = Value::Array(list);
    }
    if let Some(f) = message.get("function_call").filter(|v| v.is_object()) {
        calls["function_call"] = function(f);
    }
    // One of OpenAI's own reasons, or "tool_calls": any other text here is the upstream's, and
    // a sentence in it reached the app beside the calls, unverified.
    let finish = upstream
        .pointer("/choices/0/finish_reason")
        .filter(|f| {
            matches!(
                f.as_str(),
                Some("tool_calls" | "function_call" | "stop" | "length" | "content_filter")
            )
        })
        .cloned()
        .unwrap_or(json!("tool_calls"));
    if let Some(choice) = out.pointer_mut("/choices/0").and_then(Value::as_object_mut) {
        choice.insert("message".into(), calls);
        choice.insert("finish_reason".into(), finish);
        choice.remove("logprobs");
    }
    out
}

/// A tool-call completion as OpenAI server-sent events: a role chunk, one chunk per call
/// with its id, name and arguments, a final chunk with `finish_reason` (as the upstream gave
/// it) and the `proofgate` object, then `[DONE]`.
pub fn tool_call_events(completion: &Value) -> Vec<String> {
    let id = completion.get("id").cloned().unwrap_or(json!("chatcmpl"));
    let created = completion.get("created").cloned().unwrap_or(json!(0));
    let model = completion.get("model").cloned().unwrap_or(json!(""));
    let chunk = |delta: Value, finish: Value| {
        json!({
            "id": id, "object": "chat.completion.chunk", "created": created, "model": model,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]
        })
    };
    let message = completion
        .pointer("/choices/0/message")
        .cloned()
        .unwrap_or(json!({}));
    let mut first = json!({"role": "assistant", "content": message.get("content").cloned().unwrap_or(Value::Null)});
    if let Some(f) = message.get("function_call") {
        first["function_call"] = f.clone();
    }
    let mut events = vec![chunk(first, Value::Null)];
    for (i, c) in message
        .get("tool_calls")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .enumerate()
    {
        let mut c = c.clone();
        c["index"] = json!(i);
        events.push(chunk(json!({"tool_calls": [c]}), Value::Null));
    }
    let finish = completion
        .pointer("/choices/0/finish_reason")
        .cloned()
        .filter(|f| !f.is_null())
        .unwrap_or(json!("tool_calls"));
    let mut last = chunk(json!({}), finish);
    if let Some(p) = completion.get("proofgate") {
        last["proofgate"] = p.clone();
    }
    if let Some(u) = completion.get("usage") {
        last["usage"] = u.clone();
    }
    events.push(last);
    let mut out: Vec<String> = events.iter().map(Value::to_string).collect();
    out.push("[DONE]".into());
    out
}

/// A chat-completions request body for `messages`, with the client's `model` and the members
/// of `req` named in `params` (`(from, to)`, renamed, nulls left out): how the Responses and
/// Messages APIs are put to a Chat Completions upstream.
pub fn chat_body(
    req: &Value,
    messages: Vec<Value>,
    params: &[(&str, &str)],
) -> serde_json::Map<String, Value> {
    let mut out = serde_json::Map::new();
    out.insert(
        "model".into(),
        req.get("model").cloned().unwrap_or(json!("")),
    );
    out.insert("messages".into(), Value::Array(messages));
    for (from, to) in params {
        if let Some(v) = req.get(*from).filter(|v| !v.is_null()) {
            out.insert((*to).into(), v.clone());
        }
    }
    out
}

/// `v` when it is a string of an identifier's form (letters, digits and `._:/@+-`, at most 200
/// characters): ids and model names are copied from the upstream's reply, and a sentence in
/// one would reach the app beside a verified answer.
pub fn identifier(v: Option<&Value>) -> Option<&str> {
    v.and_then(Value::as_str).filter(|s| is_identifier(s))
}

/// Whether `s` is of an identifier's form (see [`identifier`]).
pub fn is_identifier(s: &str) -> bool {
    (1..=200).contains(&s.len())
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"._:/@+-".contains(&b))
}

/// `v` when it is an identifier with at most two separators (`call_AbC12`, `toolu_01X`,
/// `D681PevKs`): the form of the ids of tool calls, which the proxy makes up when the
/// upstream's is not of it (a sentence written with hyphens, `call_you-get-a-full-refund`, was
/// an identifier). A tool call's id is the upstream's when of this form, not always made up:
/// the app sends it back to the upstream with the call's result, and some upstreams accept
/// only ids of their own form (Mistral's: nine letters and digits, no `call_` prefix).
/// The ids of a completion and a message are always the proxy's own.
pub fn short_id(v: Option<&Value>) -> Option<&str> {
    v.and_then(Value::as_str).filter(|s| is_short_id(s))
}

/// Whether `s` is of a short id's form (see [`short_id`]).
pub fn is_short_id(s: &str) -> bool {
    is_identifier(s) && s.bytes().filter(|b| b"._:/@+-".contains(b)).count() <= 2
}

/// Whether `s` is a system fingerprint of OpenAI's form, `fp_` and lowercase hex digits only
/// (`fp_44709d6fcb`): the only form passed on, since hex digits spell no sentence (before, any
/// short id passed, and `fp_SeniorsEnterFree` was one).
pub fn is_fingerprint(s: &str) -> bool {
    s.strip_prefix("fp_").is_some_and(|hex| {
        (1..=64).contains(&hex.len()) && hex.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
    })
}

/// The model a reply names to the client (and records): the upstream's `reported` model when it
/// is `asked`, the model proofgate asked the upstream for (the pinned `[upstream] model`, else
/// the client's), or that name with a snapshot's suffix (a date `-2024-08-06`, `-20241022` or
/// `-0613`, then optionally a version `-v1:0`; or a version alone, `-v2`, `:1`): asked
/// `gpt-4o`, answered by `gpt-4o-2024-08-06`; otherwise `asked`. Any identifier passed before,
/// and `you-also-get-a-full-refund` is one; any digits after the name would pass a phone
/// number (`gpt-4o-1-800-555-0100`).
pub fn reported_model(asked: &str, reported: Option<&str>) -> String {
    let snapshot = |r: &str| r.strip_prefix(asked).is_some_and(is_snapshot_suffix);
    match reported {
        Some(r) if r == asked || snapshot(r) => r.to_string(),
        _ => asked.to_string(),
    }
}

/// Whether `s` is a snapshot's suffix (see [`reported_model`]).
fn is_snapshot_suffix(s: &str) -> bool {
    /// `s` without a leading run of exactly `n` digits, if it has one.
    fn digits(s: &str, n: usize) -> Option<&str> {
        (s.len() >= n && s.as_bytes()[..n].iter().all(u8::is_ascii_digit)).then(|| &s[n..])
    }
    /// The rest of `s` after a date, if it starts with one.
    fn date(s: &str) -> Option<&str> {
        let s = s.strip_prefix('-')?;
        let dashed = digits(s, 4)
            .and_then(|r| r.strip_prefix('-'))
            .and_then(|r| digits(r, 2))
            .and_then(|r| r.strip_prefix('-'))
            .and_then(|r| digits(r, 2));
        dashed
            .or_else(|| digits(s, 8))
            .or_else(|| digits(s, 4))
            .filter(|r| !r.starts_with(|c: char| c.is_ascii_digit()))
    }
    /// Whether `s` is a version: `-v1`, `-v1:0`, `:1`.
    fn version(s: &str) -> bool {
        let number = |n: &str| (1..=3).contains(&n.len()) && n.bytes().all(|b| b.is_ascii_digit());
        if let Some(n) = s.strip_prefix(':') {
            return number(n);
        }
        s.strip_prefix("-v")
            .is_some_and(|v| match v.split_once(':') {
                Some((major, minor)) => number(major) && number(minor),
                None => number(v),
            })
    }
    match date(s) {
        Some(rest) => rest.is_empty() || version(rest),
        None => version(s),
    }
}

/// Sets a reply's `model` (a chat completion's, or an Anthropic message's) to the one
/// [`reported_model`] gives for `asked`: what every response built from the reply, and the
/// thread's record of who answered, then read.
pub fn report_model(reply: &mut Value, asked: &str) {
    let model = reported_model(asked, reply.get("model").and_then(Value::as_str));
    if let Some(obj) = reply.as_object_mut() {
        obj.insert("model".into(), json!(model));
    }
}

/// Top-level members of an upstream completion that the response is built from (each checked
/// first: see [`verified_completion`]): they describe the call, never carry its text.
/// Everything else is dropped; the id is the proxy's own.
pub const KEPT_COMPLETION_FIELDS: [&str; 4] = ["created", "model", "system_fingerprint", "usage"];

/// The completion returned to the client, built from an allow-list: `created`, `model`,
/// `system_fingerprint` (of OpenAI's form only) and `usage` from the upstream's completion, an
/// `id` of the proxy's own, one
/// choice `{index: 0, message: {role: "assistant", content: text}, logprobs: null,
/// finish_reason: "stop"}`, and the `proofgate` object. Nothing else of the upstream's reply
/// (logprobs, refusal, audio, reasoning or thinking fields, annotations, tool calls, extra
/// choices, unknown members) can reach the client: those could carry the text of an answer
/// that was not verified.
pub fn verified_completion(upstream: Value, text: &str, proofgate: Value) -> Value {
    let mut out = serde_json::Map::new();
    let kept = |name: &str| upstream.get(name).filter(|v| !v.is_null()).cloned();
    // Always the proxy's own: any id of the upstream's can be written as a sentence
    // (`chatcmpl-YouAlsoGetAFullRefund`), and nothing needs it back.
    let id = format!("chatcmpl-{}", uuid::Uuid::new_v4().simple());
    out.insert("id".into(), json!(id));
    out.insert("object".into(), json!("chat.completion"));
    out.insert(
        "created".into(),
        kept("created").filter(Value::is_u64).unwrap_or(json!(0)),
    );
    out.insert(
        "model".into(),
        json!(identifier(upstream.get("model")).unwrap_or("")),
    );
    if let Some(fp) = upstream
        .get("system_fingerprint")
        .and_then(Value::as_str)
        .filter(|fp| is_fingerprint(fp))
    {
        out.insert("system_fingerprint".into(), json!(fp));
    }
    out.insert(
        "choices".into(),
        json!([{
            "index": 0,
            "message": {"role": "assistant", "content": text},
            "logprobs": null,
            "finish_reason": "stop"
        }]),
    );
    // Only the token counts: usage objects carry numbers, never text.
    if let Some(Value::Object(usage)) = kept("usage") {
        out.insert("usage".into(), Value::Object(numbers_only(&usage)));
    }
    out.insert("proofgate".into(), proofgate);
    Value::Object(out)
}

/// `events` (ending with `[DONE]`) with the chunk OpenAI sends last when the client asked for
/// `stream_options.include_usage`: no choices, and the completion's usage (zeros when the
/// upstream reported none).
pub fn with_usage_chunk(mut events: Vec<String>, completion: &Value) -> Vec<String> {
    let usage = completion
        .get("usage")
        .cloned()
        .unwrap_or_else(|| json!({"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0}));
    let chunk = json!({
        "id": completion.get("id").cloned().unwrap_or(json!("chatcmpl")),
        "object": "chat.completion.chunk",
        "created": completion.get("created").cloned().unwrap_or(json!(0)),
        "model": completion.get("model").cloned().unwrap_or(json!("")),
        "choices": [],
        "usage": usage,
    });
    let at = events.len().saturating_sub(1);
    events.insert(at, chunk.to_string());
    events
}

/// A copy of a usage object with only numeric members (nested detail objects included), under
/// names of a counter's form (`prompt_tokens`): a name is text from the upstream too, and a
/// sentence there would reach the app beside a verified answer.
fn numbers_only(obj: &serde_json::Map<String, Value>) -> serde_json::Map<String, Value> {
    obj.iter()
        .filter_map(|(k, v)| match v {
            // Always 0: the upstream's prompt cache is the operator's whole account, every
            // key's requests alike, and its count told one tenant whether another had sent
            // the same prefix lately (as the Responses API's `cached_tokens` always was).
            Value::Number(_) if k == "cached_tokens" => Some((k.clone(), Value::from(0))),
            Value::Number(_) if USAGE_COUNTERS.contains(&k.as_str()) => {
                Some((k.clone(), v.clone()))
            }
            Value::Object(inner) if USAGE_DETAILS.contains(&k.as_str()) => {
                Some((k.clone(), Value::Object(numbers_only(inner))))
            }
            _ => None,
        })
        .collect()
}

/// The counters a usage object may pass on: OpenAI's (and the compatible servers'). Any name
/// of a counter's form passed before, and `seniors_enter_free_of_charge: 0` is a sentence.
const USAGE_COUNTERS: &[&str] = &[
    "prompt_tokens",
    "completion_tokens",
    "total_tokens",
    "cached_tokens",
    "audio_tokens",
    "reasoning_tokens",
    "accepted_prediction_tokens",
    "rejected_prediction_tokens",
];

/// The detail objects of a usage object that may pass on (their counters as above).
const USAGE_DETAILS: &[&str] = &["prompt_tokens_details", "completion_tokens_details"];

/// A verified completion as OpenAI server-sent events: a role chunk, content chunks, a final
/// chunk with `finish_reason` and the `proofgate` object, then `[DONE]`.
pub fn completion_events(completion: &Value) -> Vec<String> {
    let id = completion.get("id").cloned().unwrap_or(json!("chatcmpl"));
    let created = completion.get("created").cloned().unwrap_or(json!(0));
    let model = completion.get("model").cloned().unwrap_or(json!(""));
    let text = completion
        .pointer("/choices/0/message/content")
        .and_then(Value::as_str)
        .unwrap_or("");
    let chunk = |delta: Value, finish: Value| {
        json!({
            "id": id, "object": "chat.completion.chunk", "created": created, "model": model,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]
        })
    };
    let mut events = vec![chunk(
        json!({"role": "assistant", "content": ""}),
        Value::Null,
    )];
    // Chunks on char boundaries; the answer is already verified, so chunking is only framing.
    let chars: Vec<char> = text.chars().collect();
    for piece in chars.chunks(64) {
        events.push(chunk(
            json!({"content": piece.iter().collect::<String>()}),
            Value::Null,
        ));
    }
    let finish = completion
        .pointer("/choices/0/finish_reason")
        .cloned()
        .unwrap_or(json!("stop"));
    let mut last = chunk(json!({}), finish);
    if let Some(p) = completion.get("proofgate") {
        last["proofgate"] = p.clone();
    }
    events.push(last);
    let mut out: Vec<String> = events.iter().map(Value::to_string).collect();
    out.push("[DONE]".into());
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(messages: Value) -> Value {
        json!({"model": "m", "messages": messages})
    }

    #[test]
    fn question_is_the_last_user_message() {
        let r = ChatRequest::parse(req(json!([
            {"role": "system", "content": "be nice"},
            {"role": "user", "content": "first"},
            {"role": "assistant", "content": "reply"},
            {"role": "user", "content": [{"type": "text", "text": "second"}]}
        ])))
        .unwrap();
        assert_eq!(r.question, "second");
        assert!(!r.stream);
        assert_eq!(r.model, "m");
    }

    /// A conversation that ends with the assistant's text asks the upstream to continue it:
    /// the client would show that text and the reply as one answer, verified only in part. It
    /// is refused on every surface; an assistant turn with tool calls, or earlier in the
    /// conversation, is not.
    #[test]
    fn a_conversation_ending_with_the_assistants_text_is_refused() {
        let prefill = json!([
            {"role": "user", "content": "I am 70. How much is my ticket?"},
            {"role": "assistant", "content": "It is not true that"}
        ]);
        let err = ChatRequest::parse(req(prefill)).unwrap_err();
        assert!(
            matches!(err, RequestError::ContinuesTheAssistant(_)),
            "{err}"
        );
        assert!(err.to_string().contains("messages[1]"), "{err}");
        let mut vllm = req(json!([{"role": "user", "content": "hi"}]));
        vllm["continue_final_message"] = json!(true);
        assert!(matches!(
            ChatRequest::parse(vllm),
            Err(RequestError::ContinuesTheAssistant(_))
        ));
        let mut off = req(json!([{"role": "user", "content": "hi"}]));
        off["continue_final_message"] = json!(false);
        assert!(ChatRequest::parse(off).is_ok());
        // Tool calls awaiting results are the assistant's turn too: Bedrock sends them as
        // its text (the arguments the client wrote), and OpenAI refuses them.
        let calls = req(json!([
            {"role": "user", "content": "hi"},
            {"role": "assistant", "content": null, "tool_calls": [{"id": "c1", "type": "function",
                "function": {"name": "f", "arguments": "{\"It is not true that\": 1}"}}]}
        ]));
        let err = ChatRequest::parse(calls).unwrap_err();
        assert!(
            err.to_string().contains("with calls but no results"),
            "{err}"
        );
        // An assistant turn before the user's passes.
        let earlier = req(json!([
            {"role": "user", "content": "hi"},
            {"role": "assistant", "content": "hello"},
            {"role": "user", "content": "how much?"}
        ]));
        assert!(ChatRequest::parse(earlier).is_ok());
        // The Messages and Responses APIs reach the same refusal.
        let messages = crate::anthropic::chat_from_request(&json!({"messages": [
            {"role": "user", "content": "I am 70. How much is my ticket?"},
            {"role": "assistant", "content": "It is not true that"}]}));
        assert!(matches!(
            ChatRequest::parse(messages),
            Err(RequestError::ContinuesTheAssistant(_))
        ));
        let responses = crate::responses::chat_from_request(&json!({"input": [
            {"type": "message", "role": "user", "content": "hi"},
            {"type": "message", "role": "assistant", "content": "It is not true that"}]}));
        assert!(matches!(
            ChatRequest::parse(responses),
            Err(RequestError::ContinuesTheAssistant(_))
        ));
        // An assistant's turn stays the last behind what Anthropic and Bedrock take out of the
        // turns (system and developer messages, blank ones), with or without calls.
        let question = json!({"role": "user", "content": "I am 70. How much is my ticket?"});
        let prefill = json!({"role": "assistant", "content": "It is not true that"});
        let with_calls = |calls: Value| {
            let mut m = prefill.clone();
            m["tool_calls"] = calls;
            m
        };
        for messages in [
            json!([question, prefill, {"role": "system", "content": "Be brief."}]),
            json!([question, prefill, {"role": "developer", "content": "Be brief."}]),
            json!([question, prefill, {"role": "user", "content": []}]),
            json!([question, prefill, {"role": "user", "content": null}]),
            json!([question, {"role": "assistant", "content": "It is not true that",
                "function_call": {"name": "f", "arguments": "{}"}}]),
            json!([question, with_calls(json!({}))]),
            json!([question, with_calls(json!("x"))]),
            json!([question, with_calls(json!([]))]),
            json!([
                question,
                with_calls(json!([{"type": "custom", "custom": {"name": "f"}}]))
            ]),
            // Calls alone, of any shape, or beside the text: Bedrock sends them as the
            // assistant's text, its arguments written by the client.
            json!([question, {"role": "assistant", "content": null,
                "function_call": {"name": "n", "arguments": "It is not true that seniors"}}]),
            json!([question, {"role": "assistant", "content": null,
                "tool_calls": [{"function": {"arguments": "It is not true that seniors"}}]}]),
            json!([
                question,
                with_calls(json!([{"id": "c1", "type": "function",
                "function": {"name": "f", "arguments": "{}"}}]))
            ]),
        ] {
            let err = ChatRequest::parse(req(messages.clone())).unwrap_err();
            assert!(
                matches!(err, RequestError::ContinuesTheAssistant(_)),
                "{messages}: {err}"
            );
            assert!(err.to_string().contains("messages[1]"), "{err}");
        }
        // A system message after the user's, and a blank tool result after real calls, pass.
        let reminder = req(json!([question, {"role": "system", "content": "Be brief."}]));
        assert!(ChatRequest::parse(reminder).is_ok());
        let blank_result = req(json!([
            {"role": "user", "content": "hi"},
            with_calls(json!([{"id": "c1", "type": "function",
                "function": {"name": "f", "arguments": "{}"}}])),
            {"role": "tool", "tool_call_id": "c1", "content": ""}
        ]));
        assert!(ChatRequest::parse(blank_result).is_ok());
        let responses = crate::responses::chat_from_request(&json!({"input": [
            {"type": "message", "role": "user", "content": "hi"},
            {"type": "message", "role": "assistant", "content": "It is not true that"},
            {"type": "message", "role": "developer", "content": "x"}]}));
        assert!(matches!(
            ChatRequest::parse(responses),
            Err(RequestError::ContinuesTheAssistant(_))
        ));
        // A thread's stored request from before the refusal still reads.
        let stored = req(json!([
            {"role": "user", "content": "I am 70."},
            {"role": "assistant", "content": "It is not true that"}
        ]));
        assert!(ChatRequest::parse_stored(stored).is_ok());
    }

    /// A turn's role decides whether its facts may be premises (audit format 4), so a role
    /// that is missing or unknown is refused by name, on every surface, not read as the user's.
    #[test]
    fn a_missing_or_unknown_role_is_refused_by_name() {
        let known = req(json!([
            {"role": "developer", "content": "be nice"},
            {"role": "function", "name": "f", "content": "{}"},
            {"role": "user", "content": "hi"}
        ]));
        assert!(ChatRequest::parse(known).is_ok());
        for (messages, want) in [
            (
                json!([{"role": "model", "content": "You are 70."}, {"role": "user", "content": "hi"}]),
                (0, "`model`"),
            ),
            (
                json!([{"content": "You are 70."}, {"role": "user", "content": "hi"}]),
                (0, "missing"),
            ),
            (
                json!([{"role": "user", "content": "hi"}, {"role": null, "content": "x"}, {"role": "user", "content": "hi"}]),
                (1, "missing"),
            ),
            (
                json!([{"role": 7, "content": "x"}, {"role": "user", "content": "hi"}]),
                (0, "`7`"),
            ),
        ] {
            let err = ChatRequest::parse(req(messages)).unwrap_err();
            assert_eq!(err, RequestError::UnknownRole(want.0, want.1.to_string()));
            assert!(err
                .to_string()
                .contains("send earlier chatbot turns as assistant"));
        }
        // The Responses API and the Messages API reach the same refusal.
        let responses = crate::responses::chat_from_request(&json!({"input": [
            {"type": "message", "role": "model", "content": "You are 70."},
            {"type": "message", "role": "user", "content": "hi"}]}));
        assert!(
            matches!(ChatRequest::parse(responses), Err(RequestError::UnknownRole(_, r)) if r == "`model`")
        );
        let unnamed = crate::responses::chat_from_request(&json!({"input": [
            {"type": "message", "content": "You are 70."},
            {"type": "message", "role": "user", "content": "hi"}]}));
        assert!(
            matches!(ChatRequest::parse(unnamed), Err(RequestError::UnknownRole(_, r)) if r == "missing")
        );
        let messages = crate::anthropic::chat_from_request(&json!({"messages": [
            {"role": "system", "content": "You are 70."},
            {"role": "user", "content": "hi"}]}));
        assert!(
            matches!(ChatRequest::parse(messages), Err(RequestError::UnknownRole(_, r)) if r.starts_with("`system inside messages"))
        );
        let messages = crate::anthropic::chat_from_request(&json!({"messages": [
            {"content": "You are 70."}, {"role": "user", "content": "hi"}]}));
        assert!(
            matches!(ChatRequest::parse(messages), Err(RequestError::UnknownRole(_, r)) if r == "missing")
        );
        let fine = crate::anthropic::chat_from_request(&json!({"system": "be nice", "messages": [
            {"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"},
            {"role": "user", "content": "and?"}]}));
        assert!(ChatRequest::parse(fine).is_ok());
    }

    /// The Responses and Messages APIs name the message by the client's own index: their
    /// conversion puts the system prompt first (and merges turns), which shifted it.
    #[test]
    fn responses_and_messages_name_an_unknown_role_by_the_clients_index() {
        use crate::{anthropic, responses};
        let r = responses::unsupported_in_request(&json!({"instructions": "be nice", "input": [
            {"type": "message", "role": "user", "content": "hi"},
            {"type": "function_call", "call_id": "c", "name": "f", "arguments": "{}"},
            {"role": "model", "content": "You are 70."}]}))
        .unwrap();
        assert!(r.starts_with("input[2] has role `model`"), "{r}");
        let r = responses::unsupported_in_request(&json!({"input": [
            {"type": "message", "content": "You are 70."}]}))
        .unwrap();
        assert!(r.starts_with("input[0] has role missing"), "{r}");
        assert!(responses::unsupported_in_request(&json!({"input": [
            {"role": "developer", "content": "x"}, {"role": "user", "content": "hi"}]}))
        .is_none());
        let r = anthropic::unsupported_in_request(&json!({"system": "be nice", "messages": [
            {"role": "user", "content": "hi"}, {"role": "user", "content": "more"},
            {"role": "bot", "content": "You are 70."}]}))
        .unwrap();
        assert!(r.starts_with("messages[2] has role `bot`"), "{r}");
        let r = anthropic::unsupported_in_request(&json!({"messages": [
            {"role": "user", "content": "hi"}, {"role": "system", "content": "x"}]}))
        .unwrap();
        assert!(r.starts_with("messages[1] has role `system`"), "{r}");
    }

    /// A review's requests: members that change the answer were dropped without a word
    /// (structured output, remote tools, a stored conversation, logprobs); they are refused
    /// naming them, and what maps carries over (strict tools, one call at a time, verbosity).
    #[test]
    fn request_members_that_do_not_carry_over_are_refused_and_the_rest_map() {
        use crate::{anthropic, responses};
        let messages = |extra: Value| {
            let mut body = json!({"model": "m", "max_tokens": 9, "service_tier": "auto",
                                  "messages": [{"role": "user", "content": "hi"}]});
            for (k, v) in extra.as_object().unwrap() {
                body[k] = v.clone();
            }
            body
        };
        assert!(anthropic::unsupported_in_request(&messages(json!({}))).is_none());
        for field in ["output_format", "mcp_servers", "container"] {
            let r = anthropic::unsupported_in_request(&messages(json!({field: {"x": 1}}))).unwrap();
            assert!(r.starts_with(&format!("`{field}` is not supported")), "{r}");
        }
        let body = messages(json!({
            "tools": [{"name": "f", "input_schema": {}, "strict": true}],
            "tool_choice": {"type": "auto", "disable_parallel_tool_use": true}}));
        let chat = anthropic::chat_from_request(&body);
        assert_eq!(chat["tools"][0]["function"]["strict"], true, "{chat}");
        assert_eq!(chat["parallel_tool_calls"], false, "{chat}");

        let request = |extra: Value| {
            let mut body = json!({"model": "m", "input": "hi", "store": false});
            for (k, v) in extra.as_object().unwrap() {
                body[k] = v.clone();
            }
            body
        };
        assert!(responses::unsupported_in_request(&request(json!({"include": []}))).is_none());
        // What SDKs send for a parameter left unset asks nothing, nor does encrypted reasoning.
        for unset in [
            json!({"previous_response_id": null}),
            json!({"background": false}),
            json!({"max_tool_calls": null}),
            json!({"include": ["reasoning.encrypted_content"]}),
        ] {
            assert!(
                responses::unsupported_in_request(&request(unset.clone())).is_none(),
                "{unset}"
            );
        }
        assert!(anthropic::unsupported_in_request(&messages(json!({"container": null}))).is_none());
        for (extra, says) in [
            (
                json!({"previous_response_id": "resp_1"}),
                "`previous_response_id`",
            ),
            (json!({"max_tool_calls": 1}), "`max_tool_calls`"),
            (json!({"top_logprobs": 3}), "`top_logprobs`"),
            (
                json!({"include": ["message.output_text.logprobs"]}),
                "`include`",
            ),
            (
                json!({"text": {"verbosity": "low", "stop": 1}}),
                "text.stop",
            ),
        ] {
            let r = responses::unsupported_in_request(&request(extra.clone())).unwrap();
            assert!(r.contains(says), "{extra}: {r}");
        }
        let body = request(json!({"text": {"verbosity": "low"},
            "tools": [{"type": "function", "name": "f", "parameters": {}, "strict": true}]}));
        assert!(responses::unsupported_in_request(&body).is_none());
        let chat = responses::chat_from_request(&body);
        assert_eq!(chat["verbosity"], "low", "{chat}");
        assert_eq!(chat["tools"][0]["function"]["strict"], true, "{chat}");
    }

    #[test]
    fn forced_tool_calls_are_told_from_a_free_choice() {
        let req = |extra: Value| {
            let mut body = json!({"messages": [{"role": "user", "content": "q"}]});
            for (k, v) in extra.as_object().unwrap() {
                body[k] = v.clone();
            }
            ChatRequest::parse(body).unwrap()
        };
        for free in [
            json!({}),
            json!({"tool_choice": null}),
            json!({"tool_choice": "auto"}),
            json!({"tool_choice": "none"}),
            json!({"tool_choice": {"type": "allowed_tools", "allowed_tools": {"mode": "auto", "tools": []}}}),
            // The Responses API's form, passed on as it is.
            json!({"tool_choice": {"type": "allowed_tools", "mode": "auto", "tools": []}}),
            json!({"function_call": "auto"}),
            json!({"function_call": "none"}),
        ] {
            assert_eq!(req(free.clone()).forced_tool_call(), None, "{free}");
        }
        for (forced, says) in [
            (json!({"tool_choice": "required"}), "\"required\""),
            (
                json!({"tool_choice": {"type": "function", "function": {"name": "Answer"}}}),
                "`Answer`",
            ),
            (
                json!({"tool_choice": {"type": "custom", "custom": {"name": "Free"}}}),
                "`Free`",
            ),
            (
                json!({"tool_choice": {"type": "allowed_tools", "allowed_tools": {"mode": "required", "tools": []}}}),
                "allowed_tools",
            ),
            (json!({"function_call": {"name": "Answer"}}), "`Answer`"),
            // Spellings not known to be free count as forcing: Mistral's "any", a bare name,
            // another case, a hosted tool's choice.
            (json!({"tool_choice": "any"}), "\"any\""),
            (json!({"tool_choice": "Auto"}), "\"Auto\""),
            (json!({"function_call": "Answer"}), "\"Answer\""),
            (
                json!({"tool_choice": {"type": "web_search_preview"}}),
                "web_search_preview",
            ),
            (
                json!({"tool_choice": {"type": "allowed_tools", "mode": "required"}}),
                "allowed_tools",
            ),
            (
                json!({"tool_choice": {"type": "allowed_tools"}}),
                "allowed_tools",
            ),
        ] {
            let got = req(forced.clone()).forced_tool_call();
            assert!(
                got.as_deref().is_some_and(|g| g.contains(says)),
                "{forced}: {got:?}"
            );
        }
        let offered = req(json!({
            "tools": [{"type": "function", "function": {"name": "a"}}, {"type": "custom", "custom": {"name": "b"}}],
            "functions": [{"name": "c"}]
        }))
        .offered_tools();
        assert_eq!(offered.into_iter().collect::<Vec<_>>(), ["a", "c"]);
        // A reply's call that is not a function call has no name, so it is never offered.
        let reply = json!({"choices": [{"message": {"role": "assistant", "content": null, "tool_calls": [
            {"id": "1", "type": "function", "function": {"name": "a", "arguments": "{}"}},
            {"id": "2", "type": "custom", "custom": {"name": "b", "input": "x"}}
        ]}}]});
        let names: Vec<String> = tool_call_of(&reply)
            .unwrap()
            .calls
            .into_iter()
            .map(|c| c.name)
            .collect();
        assert_eq!(names, ["a", ""]);
    }

    #[test]
    fn bad_requests_say_what_is_missing() {
        assert_eq!(
            ChatRequest::parse(json!({"model": "m"})).unwrap_err(),
            RequestError::NoMessages
        );
        assert_eq!(
            ChatRequest::parse(req(json!([{"role": "system", "content": "x"}]))).unwrap_err(),
            RequestError::NoUserMessage
        );
        assert_eq!(
            ChatRequest::parse(req(json!([{"role": "user", "content": "  "}]))).unwrap_err(),
            RequestError::NoUserMessage
        );
    }

    #[test]
    fn resuming_key_matches_the_key_stored_after_questions() {
        let first = vec![json!({"role": "user", "content": "How much?"})];
        let stored = conversation_key_after(&first, "Are you a senior?");
        let next = ChatRequest::parse(req(json!([
            {"role": "user", "content": "How much?"},
            {"role": "assistant", "content": "Are you a senior?"},
            {"role": "user", "content": "Yes, 70."}
        ])))
        .unwrap();
        assert_eq!(next.conversation_before_last, stored);
        assert!(next.answers_assistant);
        assert_ne!(conversation_key(&first), stored);
        // Only a request answering an assistant turn can continue a waiting thread.
        for messages in [
            json!([{"role": "user", "content": "How much?"}]),
            json!([{"role": "system", "content": "Be brief."}, {"role": "user", "content": "How much?"}]),
            json!([
                {"role": "assistant", "content": "Hello"},
                {"role": "user", "content": "How much?"},
                {"role": "user", "content": "For a senior?"}
            ]),
        ] {
            assert!(!ChatRequest::parse(req(messages)).unwrap().answers_assistant);
        }
    }

    #[test]
    fn tool_calls_are_found_and_the_conversation_has_every_turn() {
        let r = ChatRequest::parse(req(json!([
            {"role": "system", "content": "You are the park's assistant."},
            {"role": "user", "content": "I am 70. How much?"},
            {"role": "assistant", "content": null, "tool_calls": [
                {"id": "call_1", "type": "function", "function": {"name": "season", "arguments": "{}"}}]},
            {"role": "tool", "tool_call_id": "call_1", "content": "low season"}
        ])))
        .unwrap();
        let turns = r.conversation();
        assert_eq!(turns.len(), 4);
        assert_eq!(turns[2].text, "called season with {}");
        assert_eq!(turns[3].role, TurnRole::Tool);
        let upstream = json!({"model": "m", "choices": [{"index": 0, "finish_reason": "tool_calls",
            "message": {"role": "assistant", "content": null, "tool_calls": [
                {"id": "call_2", "type": "function", "function": {"name": "price", "arguments": "{\"age\":70}"}}]}}]});
        let call = tool_call_of(&upstream).unwrap();
        assert_eq!(call.calls[0].name, "price");
        assert!(tool_call_of(&completion_body_for_test()).is_none());
        let out = tool_call_completion(upstream.clone(), json!({"verdict": "TOOL_CALL"}));
        assert_eq!(out["choices"], upstream["choices"]);
        let events = tool_call_events(&out);
        assert!(events[1].contains("call_2"));
        assert!(events[2].contains("tool_calls") && events[2].contains("TOOL_CALL"));
    }

    fn completion_body_for_test() -> Value {
        json!({"choices": [{"message": {"role": "assistant", "content": "text"}}]})
    }

    #[test]
    fn several_choices_are_refused_clearly() {
        let mut body = req(json!([{"role": "user", "content": "q"}]));
        for n in [json!(2), json!(2.0), json!("2"), json!(0), json!(true)] {
            body["n"] = n.clone();
            let e = ChatRequest::parse(body.clone()).unwrap_err();
            assert!(e.to_string().contains("only n = 1 is supported"), "{n}");
        }
        for n in [json!(1), json!(1.0), Value::Null] {
            body["n"] = n.clone();
            assert!(ChatRequest::parse(body.clone()).is_ok(), "{n}");
        }
    }

    /// Structured output is refused by name (the notice of an answer that is not verified
    /// would fall outside its JSON); `text` and null pass, and a stored request is read as it
    /// was accepted.
    #[test]
    fn structured_output_is_refused_by_name() {
        let base = req(json!([{"role": "user", "content": "q"}]));
        for (field, value, named) in [
            (
                "response_format",
                json!({"type": "json_object"}),
                "json_object",
            ),
            (
                "response_format",
                json!({"type": "json_schema", "json_schema": {"name": "x", "schema": {}}}),
                "json_schema",
            ),
            ("response_format", json!("json"), "\"json\""),
            ("guided_json", json!({"type": "object"}), "guided_json"),
            ("guided_choice", json!(["a", "b"]), "guided_choice"),
            (
                "structured_outputs",
                json!({"regex": "a+"}),
                "structured_outputs",
            ),
            // Other servers' own (a review found each reached the upstream unchanged).
            ("grammar", json!("root ::= \"{\" .* \"}\""), "`grammar`"),
            ("json_schema", json!({"type": "object"}), "`json_schema`"),
            ("regex", json!("[0-9]+"), "`regex`"),
            ("ebnf", json!("root ::= x"), "`ebnf`"),
            ("format", json!("json"), "`format`"),
        ] {
            let mut body = base.clone();
            body[field] = value.clone();
            let e = ChatRequest::parse(body.clone()).unwrap_err().to_string();
            assert!(e.contains(named) && e.contains("verified"), "{value}: {e}");
            assert!(ChatRequest::parse_stored(body).is_ok(), "{value}");
        }
        for value in [json!({"type": "text"}), Value::Null] {
            let mut body = base.clone();
            body["response_format"] = value.clone();
            assert!(ChatRequest::parse(body).is_ok(), "{value}");
        }
    }

    #[test]
    fn parts_the_verification_cannot_read_are_refused() {
        for part in [
            json!({"type": "image_url", "image_url": {"url": "data:image/png;base64,AA=="}}),
            json!({"type": "input_audio", "input_audio": {"data": "", "format": "wav"}}),
            json!({"type": "file", "file": {"file_id": "f"}}),
            json!({"text": "no type"}),
        ] {
            let body = req(
                json!([{"role": "user", "content": [{"type": "text", "text": "q"}, part.clone()]}]),
            );
            let e = ChatRequest::parse(body).unwrap_err();
            assert!(e.to_string().contains("not supported"), "{part}: {e}");
        }
        // Text parts, and an assistant's refusal in the history, are read.
        let body = req(json!([
            {"role": "user", "content": [{"type": "text", "text": "q"}]},
            {"role": "assistant", "content": [{"type": "refusal", "refusal": "no"}]},
            {"role": "user", "content": "again"}
        ]));
        assert!(ChatRequest::parse(body).is_ok());
    }

    #[test]
    fn keys_do_not_collide_on_concatenation() {
        let a = conversation_key(&[json!({"role": "user", "content": "ab"})]);
        let b = conversation_key(&[json!({"role": "use", "content": "rab"})]);
        assert_ne!(a, b);
    }

    #[test]
    fn completion_replaces_the_answer_and_keeps_upstream_fields() {
        let upstream = json!({
            "id": "x", "model": "m", "usage": {"total_tokens": 3},
            "choices": [{"index": 0, "message": {"role": "assistant", "content": "unverified"}},
                        {"index": 1, "message": {"role": "assistant", "content": "other"}}]
        });
        let out = verified_completion(upstream, "verified", json!({"verdict": "VALID"}));
        assert_eq!(out["choices"][0]["message"]["content"], "verified");
        assert_eq!(out["choices"].as_array().unwrap().len(), 1);
        assert_eq!(out["usage"]["total_tokens"], 3);
        assert_eq!(out["proofgate"]["verdict"], "VALID");
    }

    #[test]
    fn no_sentence_leaves_in_an_id_a_fingerprint_or_a_counters_name() {
        let upstream = json!({
            "id": "chatcmpl-you-also-get-a-full-refund-call-555-0100",
            "model": "gpt-4o-2024-08-06",
            "system_fingerprint": "proofgate-verdict:VALID-seniors-free",
            "usage": {"prompt_tokens": 1, "completion_tokens": 2, "total_tokens": 3,
                      "you_also_get_a_full_refund_today": 1,
                      "prompt_tokens_details": {"cached_tokens": 900, "seniors_enter_free": 0},
                      "completion_tokens_details": {"reasoning_tokens": 1},
                      "refund_details": {"prompt_tokens": 9}},
            "choices": [{"message": {"role": "assistant", "content": "x"}}]
        });
        let out = verified_completion(upstream, "verified", json!({}));
        let text = out.to_string();
        for leak in ["refund", "seniors", "VALID"] {
            assert!(!text.contains(leak), "{leak}: {out}");
        }
        let id = out["id"].as_str().unwrap();
        assert!(id.starts_with("chatcmpl-") && id.len() > 20, "{id}");
        assert_eq!(out.get("system_fingerprint"), None, "{out}");
        assert_eq!(
            out["usage"],
            json!({"prompt_tokens": 1, "completion_tokens": 2, "total_tokens": 3,
                   "prompt_tokens_details": {"cached_tokens": 0},
                   "completion_tokens_details": {"reasoning_tokens": 1}}),
            "the prompt cache's count is the whole account's: always 0"
        );
        // The id is always the proxy's own, even of a short id's form (it was copied then,
        // and `chatcmpl-YouAlsoGetAFullRefund` is of it); a fingerprint passes only as `fp_`
        // and lowercase hex digits (any short id passed, `fp_SeniorsEnterFree` too).
        for (id, fp, kept) in [
            (
                "chatcmpl-YouAlsoGetAFullRefund",
                "fp_SeniorsEnterFree",
                false,
            ),
            ("msgSeniorsEnterFree", "fp_44709d6fcb", true),
            ("chatcmpl-AbC123xyz", "fp_ollama", false),
            ("cmpl-3f2a", "b1", false),
            ("chatcmpl-1", "fp_", false),
            ("chatcmpl-2", "fp_44709D6FCB", false),
        ] {
            let out = verified_completion(
                json!({"id": id, "system_fingerprint": fp, "choices": []}),
                "v",
                json!({}),
            );
            let made = out["id"].as_str().unwrap();
            assert!(made.starts_with("chatcmpl-") && made.len() == 41, "{made}");
            assert_ne!(made, id);
            assert_eq!(out.get("system_fingerprint").is_some(), kept, "{out}");
            if kept {
                assert_eq!(out["system_fingerprint"], fp);
            }
            let text = out.to_string();
            assert!(
                !text.contains("Refund") && !text.contains("Seniors"),
                "{text}"
            );
        }
    }

    /// The model named is the one asked for, or that name's dated snapshot: any other name is
    /// the upstream's text, and a sentence can be written as a model's name.
    #[test]
    fn the_model_named_is_the_one_asked_for_or_its_snapshot() {
        let named = |asked: &str, reported: &str| reported_model(asked, Some(reported));
        // The upstream's own, when it is the model asked for or a snapshot of it.
        assert_eq!(named("gpt-4o", "gpt-4o"), "gpt-4o");
        assert_eq!(named("gpt-4o", "gpt-4o-2024-08-06"), "gpt-4o-2024-08-06");
        assert_eq!(
            named("claude-3-5-sonnet", "claude-3-5-sonnet-20241022"),
            "claude-3-5-sonnet-20241022"
        );
        assert_eq!(
            named("anthropic.claude-v2", "anthropic.claude-v2:1"),
            "anthropic.claude-v2:1"
        );
        assert_eq!(
            named(
                "meta-llama/Llama-3.1-8B-Instruct",
                "meta-llama/Llama-3.1-8B-Instruct"
            ),
            "meta-llama/Llama-3.1-8B-Instruct"
        );
        // Anything else is the model asked for.
        assert_eq!(named("gpt-4", "gpt-4-0613"), "gpt-4-0613");
        assert_eq!(
            named(
                "anthropic.claude-3-haiku",
                "anthropic.claude-3-haiku-20240307-v1:0"
            ),
            "anthropic.claude-3-haiku-20240307-v1:0"
        );
        assert_eq!(named("m", "m-v2"), "m-v2");
        for reported in [
            // Digits a date or a version does not hold: a phone number, an amount.
            "gpt-4o-1-800-555-0100",
            "gpt-4o-18005550100",
            "gpt-4o-0.00",
            "gpt-4o-2024-08-06-0100",
            "gpt-4o:5550100",
            "gpt-4o-",
            "you-also-get-a-full-refund-seniors-free",
            "gpt-4o-you-also-get-a-full-refund",
            "gpt-4o Good news: seniors enter free",
            "Good news: seniors enter free",
            "gpt-4o-mini",
            "gpt-4o-2024-08-06-preview",
            "gpt-4o-abcdefghijklmnopqrstuvwxyz",
            "gpt-4o 2024",
            "gpt",
            "",
        ] {
            assert_eq!(named("gpt-4o", reported), "gpt-4o", "{reported}");
        }
        assert_eq!(reported_model("gpt-4o", None), "gpt-4o");
        assert_eq!(
            named(
                "meta-llama/Llama-3.1-8B-Instruct",
                "meta-llama/Llama-3.1-8B-Instruct-refund"
            ),
            "meta-llama/Llama-3.1-8B-Instruct"
        );
        // Set on a reply, whatever its shape.
        let mut reply = json!({"model": "you-also-get-a-full-refund", "choices": []});
        report_model(&mut reply, "recorded-chatbot");
        assert_eq!(reply["model"], "recorded-chatbot");
        let mut reply = json!({"type": "message", "model": "claude-x-20250219"});
        report_model(&mut reply, "claude-x");
        assert_eq!(reply["model"], "claude-x-20250219");
        let mut reply = json!({"choices": []});
        report_model(&mut reply, "m");
        assert_eq!(reply["model"], "m");
    }

    #[test]
    fn nothing_of_a_rewritten_upstream_answer_leaves() {
        let secret = "UNVERIFIED-SECRET";
        let upstream = json!({
            "id": "chatcmpl-1", "object": "chat.completion", "created": 7, "model": "m",
            "system_fingerprint": "fp", "service_tier": secret, "x_leak": secret,
            "prompt_filter_results": [{"text": secret}],
            "usage": {"prompt_tokens": 1, "completion_tokens": 2, "note": secret,
                      "completion_tokens_details": {"reasoning_tokens": 1, "why": secret}},
            "choices": [{
                "index": 0, "finish_reason": "length",
                "logprobs": {"content": [{"token": secret, "logprob": -0.1, "bytes": [85]}]},
                "message": {"role": "assistant", "content": secret, "refusal": secret,
                            "reasoning_content": secret, "thinking": secret,
                            "audio": {"transcript": secret}, "annotations": [{"text": secret}],
                            "tool_calls": [{"function": {"arguments": secret}}]}
            }, {"index": 1, "message": {"role": "assistant", "content": secret}}]
        });
        let out = verified_completion(upstream, "verified", json!({"verdict": "VALID"}));
        let text = out.to_string();
        assert!(!text.contains(secret), "{text}");
        for e in completion_events(&out) {
            assert!(!e.contains(secret), "{e}");
        }
        assert_eq!(out["choices"][0]["finish_reason"], "stop");
        assert_eq!(out["choices"][0]["logprobs"], Value::Null);
        assert_eq!(
            out["usage"]["completion_tokens_details"]["reasoning_tokens"],
            1
        );
        // The upstream's `created`; the id is the proxy's own, and `fp` is no fingerprint of
        // OpenAI's form (both were copied before).
        assert_eq!(out["created"].as_u64(), Some(7));
        assert_ne!(out["id"], "chatcmpl-1");
        assert!(out["id"].as_str().unwrap().starts_with("chatcmpl-"));
        assert_eq!(out.get("system_fingerprint"), None, "{out}");
    }

    #[test]
    fn events_reassemble_to_the_answer_and_end_with_done() {
        let text = "é".repeat(150) + " end";
        let c = verified_completion(json!({"id": "x", "model": "m"}), &text, json!({"v": 1}));
        let events = completion_events(&c);
        assert_eq!(events.last().unwrap(), "[DONE]");
        let mut joined = String::new();
        for e in &events[..events.len() - 1] {
            let v: Value = serde_json::from_str(e).unwrap();
            if let Some(s) = v
                .pointer("/choices/0/delta/content")
                .and_then(Value::as_str)
            {
                joined.push_str(s);
            }
        }
        assert_eq!(joined, text);
        let last: Value = serde_json::from_str(&events[events.len() - 2]).unwrap();
        assert_eq!(last["choices"][0]["finish_reason"], "stop");
        assert_eq!(last["proofgate"]["v"], 1);
    }
}

#[cfg(test)]
mod tool_call_tests {
    use super::*;

    #[test]
    fn a_tool_call_carries_only_the_calls() {
        let upstream = json!({"id": "c1", "model": "m", "x_leak": "LEAK",
            "choices": [{"index": 0, "finish_reason": "tool_calls", "logprobs": {"content": [{"token": "LEAK"}]},
              "message": {"role": "assistant", "content": "LEAK: you get a full refund", "refusal": "LEAK",
                          "tool_calls": [{"id": "call_1", "type": "function", "note": "LEAK",
                                          "function": {"name": "price", "arguments": "{}", "description": "LEAK"}}]}}],
            "usage": {"prompt_tokens": 3, "LEAK: seniors enter free": 1,
                      "completion_tokens_details": {"reasoning_tokens": 2, "LEAK here": 4}}});
        let out = tool_call_completion(upstream, json!({"verdict": "TOOL_CALL"}));
        assert!(!out.to_string().contains("LEAK"), "{out}");
        assert_eq!(
            out["choices"][0]["message"]["tool_calls"][0]["id"],
            "call_1"
        );
        assert_eq!(out["choices"][0]["message"]["content"], Value::Null);
        assert_eq!(out["choices"][0]["finish_reason"], "tool_calls");
        assert_eq!(
            out["choices"][0]["message"]["tool_calls"][0]["function"],
            json!({"name": "price", "arguments": "{}"})
        );
        assert_eq!(
            out["usage"],
            json!({"prompt_tokens": 3, "completion_tokens_details": {"reasoning_tokens": 2}})
        );
        // Ids and the model name only of an identifier's form.
        let odd = json!({"id": "LEAK: seniors enter free", "model": "LEAK model says yes",
            "system_fingerprint": "fp 1 LEAK", "choices": [{
            "finish_reason": "LEAK: seniors enter free, you owe $0", "message": {"role": "assistant",
            "content": null, "tool_calls": [{"id": "call 1 LEAK", "type": "function",
            "function": {"name": "price", "arguments": "{}"}}]}}]});
        let out = tool_call_completion(odd, json!({}));
        assert!(!out.to_string().contains("LEAK"), "{out}");
        assert_eq!(out["choices"][0]["finish_reason"], "tool_calls");
        assert_eq!(
            identifier(Some(&json!("anthropic.claude-3-5-sonnet-20240620-v1:0"))),
            Some("anthropic.claude-3-5-sonnet-20240620-v1:0")
        );
        assert_eq!(
            identifier(Some(&json!("meta-llama/Llama-3-8B"))),
            Some("meta-llama/Llama-3-8B")
        );
        for e in tool_call_events(&out) {
            assert!(!e.contains("LEAK"), "{e}");
        }
        // A tool call's id of a sentence's form, written with separators, is made up anew.
        let worded = json!({"choices": [{"message": {"role": "assistant", "content": null,
            "tool_calls": [{"id": "call_you-get-a-full-refund", "type": "function",
                            "function": {"name": "price", "arguments": "{}"}},
                           {"id": "chatcmpl-tool-9f2c", "type": "function",
                            "function": {"name": "price", "arguments": "{}"}}]}}]});
        let out = tool_call_completion(worded, json!({}));
        let ids = &out["choices"][0]["message"]["tool_calls"];
        assert!(!out.to_string().contains("refund"), "{out}");
        assert!(ids[0]["id"].as_str().unwrap().starts_with("call_"));
        assert_eq!(ids[1]["id"], "chatcmpl-tool-9f2c");
    }
}

//! The Anthropic Messages API as the proxy sees it, translated to and from the OpenAI
//! chat-completions shape the rest of the proxy works in: requests and replies of an
//! `anthropic` upstream, the client's `POST /v1/messages` request, and verified answers (JSON
//! or the SSE event sequence the official SDK reads). Like the chat-completions answer, a
//! verified message is built from an allow-list.

use serde_json::{json, Map, Value};

/// `max_tokens` is required by the Messages API; used when the chat request has none (an
/// OpenAI client seldom sends one). Every Claude model can write this many; at 1,024 answers
/// were cut off where the client had set no limit.
pub const DEFAULT_MAX_TOKENS: u64 = 4096;

pub(crate) fn text_of_content(content: &Value) -> String {
    match content {
        Value::String(s) => s.clone(),
        Value::Array(parts) => parts
            .iter()
            .filter(|p| p.get("type").and_then(Value::as_str) == Some("text"))
            .filter_map(|p| p.get("text").and_then(Value::as_str))
            .collect::<Vec<_>>()
            .join("\n"),
        _ => String::new(),
    }
}

/// An OpenAI chat-completions body as a Messages API request (for an `anthropic` upstream,
/// rewriter or translator): system messages become `system`, assistant tool calls `tool_use`
/// blocks, tool messages `tool_result` blocks in a user turn, tools and `tool_choice` their
/// Anthropic forms.
pub fn request_from_chat(chat: &Value) -> Value {
    let mut system = Vec::new();
    let mut messages: Vec<Value> = Vec::new();
    let push = |messages: &mut Vec<Value>, role: &str, blocks: Vec<Value>| {
        // Consecutive turns of one role merge (the API wants them alternating).
        if let Some(last) = messages.last_mut() {
            if last["role"] == role {
                if let Some(c) = last["content"].as_array_mut() {
                    c.extend(blocks);
                    return;
                }
            }
        }
        messages.push(json!({"role": role, "content": blocks}));
    };
    // Calls made with the legacy `function_call` carry no id: each gets one, and the
    // `function` message answering it (by name) refers to it.
    let mut legacy_calls: Vec<(Value, String)> = Vec::new();
    let mut legacy_made = 0usize;
    for m in chat
        .get("messages")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let role = m.get("role").and_then(Value::as_str).unwrap_or("user");
        let text = m.get("content").map(text_of_content).unwrap_or_default();
        match role {
            "system" | "developer" => system.push(text),
            "assistant" => {
                let mut blocks = Vec::new();
                if !text.is_empty() {
                    blocks.push(json!({"type": "text", "text": text}));
                }
                // A call (`{name, arguments}`) as a tool_use block with `id`.
                let tool_use = |id: Value, function: Option<&Value>| {
                    let name = function
                        .and_then(|f| f.get("name"))
                        .cloned()
                        .unwrap_or(json!(""));
                    let args = function
                        .and_then(|f| f.get("arguments"))
                        .and_then(Value::as_str)
                        .unwrap_or("{}");
                    let input = serde_json::from_str::<Value>(args).unwrap_or(json!({}));
                    json!({"type": "tool_use", "id": id, "name": name, "input": input})
                };
                for call in m
                    .get("tool_calls")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                {
                    let id = call.get("id").cloned().unwrap_or(json!("toolu_0"));
                    blocks.push(tool_use(id, call.get("function")));
                }
                if let Some(call) = m.get("function_call").filter(|c| c.is_object()) {
                    let id = format!("toolu_legacy_{legacy_made}");
                    legacy_made += 1;
                    let name = call.get("name").cloned().unwrap_or(json!(""));
                    blocks.push(tool_use(json!(id), Some(call)));
                    legacy_calls.push((name, id));
                }
                if !blocks.is_empty() {
                    push(&mut messages, "assistant", blocks);
                }
            }
            "tool" | "function" => {
                let id = match m.get("tool_call_id") {
                    Some(id) => id.clone(),
                    // The legacy call of that name this answers (the earliest not answered).
                    None => {
                        let name = m.get("name").cloned().unwrap_or(json!(""));
                        match legacy_calls.iter().position(|(n, _)| *n == name) {
                            Some(at) => json!(legacy_calls.remove(at).1),
                            None => json!(""),
                        }
                    }
                };
                push(
                    &mut messages,
                    "user",
                    vec![json!({"type": "tool_result", "tool_use_id": id, "content": text})],
                )
            }
            _ => push(
                &mut messages,
                "user",
                vec![json!({"type": "text", "text": text})],
            ),
        }
    }
    let mut out = Map::new();
    out.insert(
        "model".into(),
        chat.get("model").cloned().unwrap_or(json!("")),
    );
    out.insert("messages".into(), Value::Array(messages));
    let max = chat
        .get("max_tokens")
        .or_else(|| chat.get("max_completion_tokens"))
        .and_then(Value::as_u64)
        .unwrap_or(DEFAULT_MAX_TOKENS);
    out.insert("max_tokens".into(), json!(max));
    if !system.is_empty() {
        out.insert("system".into(), json!(system.join("\n\n")));
    }
    for key in ["temperature", "top_p"] {
        if let Some(v) = chat.get(key).filter(|v| !v.is_null()) {
            out.insert(key.into(), v.clone());
        }
    }
    // The Messages API's metadata holds only `user_id`: OpenAI's `metadata` (a map of the
    // client's own strings) made the upstream refuse the request; the end user goes there.
    if let Some(user) = ["user", "safety_identifier"]
        .iter()
        .find_map(|k| chat.get(*k).and_then(Value::as_str))
    {
        out.insert("metadata".into(), json!({"user_id": user}));
    }
    match chat.get("stop") {
        Some(Value::String(s)) => {
            out.insert("stop_sequences".into(), json!([s]));
        }
        Some(Value::Array(a)) => {
            out.insert("stop_sequences".into(), Value::Array(a.clone()));
        }
        _ => {}
    }
    // The legacy `functions` are tools too (when no `tools` are given).
    let functions: Option<Vec<&Value>> = match chat.get("tools").and_then(Value::as_array) {
        Some(tools) => Some(tools.iter().filter_map(|t| t.get("function")).collect()),
        None => chat
            .get("functions")
            .and_then(Value::as_array)
            .map(|f| f.iter().collect()),
    };
    if let Some(functions) = functions {
        let tools: Vec<Value> = functions
            .into_iter()
            .map(|f| {
                json!({
                    "name": f.get("name").cloned().unwrap_or(json!("")),
                    "description": f.get("description").cloned().unwrap_or(json!("")),
                    "input_schema": f.get("parameters").cloned()
                        .unwrap_or(json!({"type": "object", "properties": {}})),
                })
            })
            .collect();
        if !tools.is_empty() {
            out.insert("tools".into(), Value::Array(tools));
        }
    }
    // The legacy `function_call` choice is `tool_choice`'s: "none", "auto" or {"name"}.
    let legacy_choice = chat.get("function_call").map(|c| match c {
        Value::Object(_) => json!({"type": "function", "function": {"name": c.get("name")}}),
        other => other.clone(),
    });
    if let Some(choice) = chat.get("tool_choice").or(legacy_choice.as_ref()) {
        let c = match choice {
            Value::String(s) if s == "required" => Some(json!({"type": "any"})),
            Value::String(s) if s == "none" => Some(json!({"type": "none"})),
            Value::String(_) => Some(json!({"type": "auto"})),
            Value::Object(_) => choice
                .pointer("/function/name")
                .map(|n| json!({"type": "tool", "name": n})),
            _ => None,
        };
        if let (Some(c), true) = (c, out.contains_key("tools")) {
            out.insert("tool_choice".into(), c);
        }
    }
    // One call at a time, as the app asked.
    if chat.get("parallel_tool_calls") == Some(&json!(false)) && out.contains_key("tools") {
        let mut choice = out
            .remove("tool_choice")
            .unwrap_or_else(|| json!({"type": "auto"}));
        if choice.get("type").and_then(Value::as_str) != Some("none") {
            choice["disable_parallel_tool_use"] = json!(true);
        }
        out.insert("tool_choice".into(), choice);
    }
    Value::Object(out)
}

/// What a chat-completions request (the app's own, or one converted from the Responses API)
/// asks of an Anthropic upstream that the Messages API cannot do, if anything: dropped, the
/// answer would be made without it (a review found `seed`, the penalties, `logit_bias` and
/// `reasoning_effort` dropped so). A zero penalty or a `false` asks nothing.
pub fn unsupported_for_upstream(chat: &Value) -> Option<String> {
    const NOT_CARRIED: &[&str] = &[
        "seed",
        "frequency_penalty",
        "presence_penalty",
        "logit_bias",
        "logprobs",
        "top_logprobs",
        "reasoning_effort",
        "verbosity",
        "audio",
        "modalities",
        "prediction",
        "web_search_options",
    ];
    // What the Messages API does anyway: a medium verbosity, text out.
    let default = |field: &str, v: &Value| {
        (field == "verbosity" && v == "medium") || (field == "modalities" && v == &json!(["text"]))
    };
    NOT_CARRIED
        .iter()
        .find(|field| {
            chat.get(**field)
                .is_some_and(|v| !(asks_nothing(v) || v.as_f64() == Some(0.0) || default(field, v)))
        })
        .map(|field| {
            format!(
                "`{field}` is not supported with this proofgate's Anthropic upstream: the \
                 Messages API has no such parameter, and the answer would be made without it; \
                 send the request without it"
            )
        })
}

/// Why a chat-completions body cannot go to an Anthropic upstream as it is, if it cannot: a
/// tool call in its history whose arguments are not a JSON object (a `tool_use` block's
/// `input` must be one, and sending `{}` instead would put words in the model's mouth that the
/// app never sent). Empty arguments are no arguments.
pub fn history_problem(chat: &Value) -> Option<String> {
    let calls = chat
        .get("messages")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter(|m| m.get("role").and_then(Value::as_str) == Some("assistant"))
        .flat_map(|m| {
            let listed = m
                .get("tool_calls")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(|c| c.get("function"));
            listed.chain(m.get("function_call").filter(|c| c.is_object()))
        });
    for call in calls {
        let args = call.get("arguments").and_then(Value::as_str).unwrap_or("");
        let object = args.trim().is_empty()
            || serde_json::from_str::<Value>(args).is_ok_and(|v| v.is_object());
        if !object {
            let name = call.get("name").and_then(Value::as_str).unwrap_or("");
            return Some(format!(
                "the conversation's call of tool `{}` has arguments that are not a JSON object, \
                 which an Anthropic upstream cannot be sent (its tool_use input is an object)",
                crate::openai::identifier(Some(&json!(name))).unwrap_or("(a name not shown)")
            ));
        }
    }
    None
}

/// A Messages API reply as an OpenAI chat completion: text blocks joined as the content,
/// `tool_use` blocks as `tool_calls`.
pub fn completion_from_message(message: &Value) -> Value {
    let blocks = message
        .get("content")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let text: Vec<&str> = blocks
        .iter()
        .filter(|b| b.get("type").and_then(Value::as_str) == Some("text"))
        .filter_map(|b| b.get("text").and_then(Value::as_str))
        .collect();
    let calls: Vec<Value> = blocks
        .iter()
        .filter(|b| b.get("type").and_then(Value::as_str) == Some("tool_use"))
        .map(|b| {
            json!({
                "id": b.get("id").cloned().unwrap_or(json!("")),
                "type": "function",
                "function": {
                    "name": b.get("name").cloned().unwrap_or(json!("")),
                    "arguments": b.get("input").map(Value::to_string).unwrap_or_else(|| "{}".into()),
                }
            })
        })
        .collect();
    let mut msg = json!({
        "role": "assistant",
        "content": if text.is_empty() { Value::Null } else { json!(text.join("")) },
    });
    if !calls.is_empty() {
        msg["tool_calls"] = Value::Array(calls);
    }
    let finish = match message.get("stop_reason").and_then(Value::as_str) {
        Some("tool_use") => "tool_calls",
        Some("max_tokens") => "length",
        Some("refusal") => "content_filter",
        _ => "stop",
    };
    let usage = message.get("usage");
    let n = |k: &str| {
        usage
            .and_then(|u| u.get(k))
            .and_then(Value::as_u64)
            .unwrap_or(0)
    };
    json!({
        "id": message.get("id").cloned().unwrap_or(json!("msg")),
        "object": "chat.completion",
        "created": 0,
        "model": message.get("model").cloned().unwrap_or(json!("")),
        "choices": [{"index": 0, "message": msg, "finish_reason": finish}],
        "usage": {
            "prompt_tokens": n("input_tokens"),
            "completion_tokens": n("output_tokens"),
            "total_tokens": n("input_tokens") + n("output_tokens"),
        }
    })
}

/// A client's `POST /v1/messages` request as an OpenAI chat-completions body: `system`
/// becomes a system message, `tool_use` blocks assistant `tool_calls`, `tool_result` blocks
/// tool messages; tools and `tool_choice` their OpenAI forms.
pub fn chat_from_request(req: &Value) -> Value {
    let mut messages = Vec::new();
    match req.get("system") {
        Some(Value::String(s)) => messages.push(json!({"role": "system", "content": s})),
        Some(v @ Value::Array(_)) => {
            messages.push(json!({"role": "system", "content": text_of_content(v)}))
        }
        _ => {}
    }
    for m in req
        .get("messages")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let role = m.get("role").and_then(Value::as_str).unwrap_or("");
        // The Messages API has two roles; any other goes on as written (a missing one as
        // null), and Chat Completions' parse refuses it with a 400 that names it, rather than
        // take a turn of unknown origin for the user's.
        if role != "user" && role != "assistant" {
            let unknown = match m.get("role") {
                Some(Value::String(r)) if r == "system" => {
                    json!("system inside messages (send it as the request's system)")
                }
                Some(r) => r.clone(),
                None => Value::Null,
            };
            messages.push(json!({"role": unknown, "content": m.get("content").map(text_of_content).unwrap_or_default()}));
            continue;
        }
        let content = m.get("content").cloned().unwrap_or(Value::Null);
        let blocks = match content {
            Value::String(s) => vec![json!({"type": "text", "text": s})],
            Value::Array(a) => a,
            _ => Vec::new(),
        };
        let kind = |b: &Value| {
            b.get("type")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string()
        };
        let texts: Vec<String> = blocks
            .iter()
            .filter(|b| kind(b) == "text")
            .filter_map(|b| b.get("text").and_then(Value::as_str).map(str::to_string))
            .collect();
        if role == "assistant" {
            let calls: Vec<Value> = blocks
                .iter()
                .filter(|b| kind(b) == "tool_use")
                .map(|b| {
                    json!({"id": b.get("id").cloned().unwrap_or(json!("")), "type": "function",
                           "function": {"name": b.get("name").cloned().unwrap_or(json!("")),
                                        "arguments": b.get("input").map(Value::to_string)
                                            .unwrap_or_else(|| "{}".into())}})
                })
                .collect();
            let mut msg = json!({"role": "assistant",
                                 "content": if texts.is_empty() { Value::Null } else { json!(texts.join("\n")) }});
            if !calls.is_empty() {
                msg["tool_calls"] = Value::Array(calls);
            }
            messages.push(msg);
            continue;
        }
        for b in blocks.iter().filter(|b| kind(b) == "tool_result") {
            messages.push(json!({
                "role": "tool",
                "tool_call_id": b.get("tool_use_id").cloned().unwrap_or(json!("")),
                "content": b.get("content").map(text_of_content).unwrap_or_default(),
            }));
        }
        if !texts.is_empty() {
            messages.push(json!({"role": "user", "content": texts.join("\n")}));
        }
    }
    let mut out = crate::openai::chat_body(
        req,
        messages,
        &[
            // OpenAI's reasoning models refuse `max_tokens` (and the Anthropic SDK always
            // sends a limit); request_from_chat reads either name back.
            ("max_tokens", "max_completion_tokens"),
            ("temperature", "temperature"),
            ("top_p", "top_p"),
            ("stream", "stream"),
            ("stop_sequences", "stop"),
        ],
    );
    if let Some(user) = req.pointer("/metadata/user_id").and_then(Value::as_str) {
        out.insert("user".into(), json!(user));
    }
    if let Some(tools) = req.get("tools").and_then(Value::as_array) {
        let tools: Vec<Value> = tools
            .iter()
            .filter(|t| t.get("input_schema").is_some())
            .map(|t| {
                let mut f = json!({
                    "name": t.get("name").cloned().unwrap_or(json!("")),
                    "description": t.get("description").cloned().unwrap_or(json!("")),
                    "parameters": t.get("input_schema").cloned().unwrap_or(json!({})),
                });
                // Schema-enforced arguments stay enforced.
                if let Some(strict) = t.get("strict").filter(|s| s.is_boolean()) {
                    f["strict"] = strict.clone();
                }
                json!({"type": "function", "function": f})
            })
            .collect();
        if !tools.is_empty() {
            out.insert("tools".into(), Value::Array(tools));
        }
    }
    if let Some(choice) = req.get("tool_choice") {
        let c = match choice.get("type").and_then(Value::as_str) {
            Some("any") => json!("required"),
            Some("none") => json!("none"),
            Some("tool") => {
                json!({"type": "function", "function": {"name": choice.get("name").cloned().unwrap_or(json!(""))}})
            }
            _ => json!("auto"),
        };
        out.insert("tool_choice".into(), c);
        if choice.get("disable_parallel_tool_use") == Some(&json!(true)) {
            out.insert("parallel_tool_calls".into(), json!(false));
        }
    }
    Value::Object(out)
}

/// Whether a request member's value asks for nothing: null, `false`, `{}` or `[]` (what SDKs
/// send for a parameter left unset: `container: null`, `previous_response_id: null`).
pub fn asks_nothing(v: &Value) -> bool {
    v.is_null()
        || v == &json!(false)
        || v.as_object().is_some_and(|o| o.is_empty())
        || v.as_array().is_some_and(|a| a.is_empty())
}

/// The members of a Messages API request that carry over to Chat Completions (or, as
/// `service_tier`, `cache_control`, `inference_geo`, `speed` and `diagnostics`, change nothing
/// of the answer); `thinking` and `top_k` are refused below.
const MESSAGES_FIELDS: &[&str] = &[
    "model",
    "messages",
    "system",
    "max_tokens",
    "temperature",
    "top_p",
    "top_k",
    "stream",
    "stop_sequences",
    "metadata",
    "tools",
    "tool_choice",
    "thinking",
    "service_tier",
    "cache_control",
    "inference_geo",
    "speed",
    "diagnostics",
];

/// What a Messages API request holds that proofgate cannot carry to the upstream or verify, if
/// anything: content blocks other than text, tool use and tool results (images, documents),
/// and server tools (web search and the like, which have no `input_schema`).
/// Dropped silently, the app would get an answer made without them; refused with a 400
/// naming them instead.
pub fn unsupported_in_request(req: &Value) -> Option<String> {
    // A member not known to carry over or to leave the answer alone (`output_format`,
    // `mcp_servers`, `container`, ...) is refused, not dropped: the answer would be made
    // without it (a review found structured output and remote tools dropped so).
    if let Some(name) = req.as_object().and_then(|o| {
        o.iter()
            .find(|(k, v)| !MESSAGES_FIELDS.contains(&k.as_str()) && !asks_nothing(v))
            .map(|(k, _)| k)
    }) {
        return Some(format!(
            "`{}` is not supported: proofgate calls the upstream with Chat Completions' \
             parameters and verifies text, and an answer made without it would not be what was \
             asked for; send the request without it",
            crate::http_body::truncate(name, 100)
        ));
    }
    // Refused, not dropped: the client would get an answer made without what it asked for.
    if let Some(t) = req.get("thinking").filter(|t| !t.is_null()) {
        if t.get("type").and_then(Value::as_str) != Some("disabled") {
            return Some(
                "`thinking` is not supported: the upstream is called with Chat Completions' \
                 parameters, and a model's reasoning never reaches the app unverified; send the \
                 request without it"
                    .into(),
            );
        }
    }
    if req.get("top_k").is_some_and(|v| !v.is_null()) {
        return Some(
            "`top_k` is not supported: the upstream is called with Chat Completions' \
             parameters, which have none; use `temperature` or `top_p`"
                .into(),
        );
    }
    for tool in req
        .get("tools")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        if tool.get("input_schema").is_none() {
            let kind = tool.get("type").and_then(Value::as_str).unwrap_or("");
            return Some(format!(
                "server tools (type `{kind}`) are not supported: only client tools with an \
                 input_schema"
            ));
        }
    }
    for (i, m) in req
        .get("messages")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .enumerate()
    {
        // Named by the client's own index (the converted request also holds `system` as a
        // message, and merges consecutive turns, so its indexes differ).
        let role = match m.get("role").and_then(Value::as_str) {
            Some(r @ ("user" | "assistant")) => r,
            Some("system") => {
                return Some(format!(
                    "messages[{i}] has role `system`: send the system prompt as the request's \
                     `system`, not inside messages"
                ))
            }
            _ => {
                let role = match m.get("role") {
                    None => "missing".to_string(),
                    Some(Value::String(r)) => format!("`{r}`"),
                    Some(r) => format!("`{r}`"),
                };
                return Some(format!(
                    "messages[{i}] has role {role}: the Messages API's roles are user and \
                     assistant (the translators take facts only from what the user, the system \
                     or a tool said, so a turn's origin is not guessed); send earlier chatbot \
                     turns as assistant"
                ));
            }
        };
        for b in m
            .get("content")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            let kind = b.get("type").and_then(Value::as_str).unwrap_or("");
            // A block in the other party's turn was dropped without a word: a tool result the
            // answer should have been verified against, or a call no tool result follows.
            let belongs_to = match kind {
                "tool_use" | "thinking" | "redacted_thinking" => "assistant",
                "tool_result" => "user",
                _ => role,
            };
            if belongs_to != role {
                return Some(format!(
                    "messages[{i}] is a {role} turn with a `{kind}` block, which only {belongs_to} \
                     turns hold"
                ));
            }
            // A tool result is passed on as its text: an image or document in it would be
            // dropped, and the answer verified against a result without it.
            if kind == "tool_result" {
                let inner = b
                    .get("content")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                    .map(|c| c.get("type").and_then(Value::as_str).unwrap_or(""))
                    .find(|k| *k != "text");
                if let Some(inner) = inner {
                    return Some(format!(
                        "tool_result content blocks of type `{inner}` are not supported: the \
                         answer is verified against the conversation's text only"
                    ));
                }
            }
            // Earlier turns' thinking is the model's own reasoning, not a fact of the
            // conversation: left out of the upstream's request as before.
            if !matches!(
                kind,
                "text" | "tool_use" | "tool_result" | "thinking" | "redacted_thinking"
            ) {
                return Some(format!(
                    "content blocks of type `{kind}` are not supported: the answer is verified \
                     against the conversation's text only"
                ));
            }
        }
    }
    None
}

/// The verified answer as a Messages API message, from an allow-list: an `id` of the proxy's
/// own, the upstream's `model` and token counts; one text block; the `proofgate` object.
pub fn verified_message(completion: &Value, text: &str, proofgate: Value) -> Value {
    let usage = completion.get("usage");
    let n = |k: &str| {
        usage
            .and_then(|u| u.get(k))
            .and_then(Value::as_u64)
            .unwrap_or(0)
    };
    // Always the proxy's own: an upstream's id can be written as a sentence
    // (`msgSeniorsEnterFree`), and nothing needs it back.
    let id = format!("msg_{}", uuid::Uuid::new_v4().simple());
    json!({
        "id": id,
        "type": "message",
        "role": "assistant",
        "model": crate::openai::identifier(completion.get("model")).unwrap_or(""),
        "content": [{"type": "text", "text": text}],
        "stop_reason": "end_turn",
        "stop_sequence": null,
        "usage": {"input_tokens": n("prompt_tokens"), "output_tokens": n("completion_tokens")},
        "proofgate": proofgate,
    })
}

/// A tool-use reply as a Messages API message: the upstream's own message when it is
/// Anthropic-shaped, else the OpenAI completion's tool calls (`tool_calls`, or the legacy
/// `function_call`) as `tool_use` blocks. An error when a call's arguments are not a JSON
/// object (a reply cut off at its token limit): a block's `input` must be one, and an empty
/// one would be a call the model never made.
pub fn tool_use_message(
    completion: &Value,
    native: Option<&Value>,
    proofgate: Value,
) -> Result<Value, String> {
    // Only the tool_use blocks leave: text beside them was not verified (a model could put an
    // answer there), and other blocks (thinking, ...) are not the app's to see unchecked.
    let mut msg = match native {
        // Stopped at its token limit, its last tool_use block may be cut off: no call the
        // model never finished goes out as one.
        Some(m) if m.get("stop_reason").and_then(Value::as_str) == Some("max_tokens") => {
            return Err(
                "the upstream's tool use was cut off at its token limit: raise \
                        max_tokens"
                    .into(),
            );
        }
        Some(m) if m.get("type").and_then(Value::as_str) == Some("message") => {
            // The id is the proxy's own and the model the completion's (the message's, as the
            // proxy reports it): neither is copied from the message. No `stop_sequence`: the
            // message stopped for its tool use, and any other text there would be the
            // upstream's, unchecked.
            let mut out = verified_message(completion, "", Value::Null);
            // Each block member by member, as with OpenAI's calls: what else the upstream
            // put in a block is text nobody checked. A block's id is held to the short id's
            // form, as an OpenAI call's is (see `short_id` for why it is not always made up).
            let blocks: Vec<Value> = m
                .get("content")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter(|b| b.get("type").and_then(Value::as_str) == Some("tool_use"))
                .map(|b| {
                    let mut block = serde_json::Map::new();
                    let id = crate::openai::short_id(b.get("id"))
                        .map(str::to_string)
                        .unwrap_or_else(|| format!("toolu_{}", uuid::Uuid::new_v4().simple()));
                    block.insert("type".into(), json!("tool_use"));
                    block.insert("id".into(), json!(id));
                    for key in ["name", "input"] {
                        if let Some(v) = b.get(key) {
                            block.insert(key.into(), v.clone());
                        }
                    }
                    Value::Object(block)
                })
                .collect();
            out["content"] = Value::Array(blocks);
            out["stop_reason"] = json!("tool_use");
            out
        }
        _ => {
            let calls = completion
                .pointer("/choices/0/message")
                .and_then(crate::openai::tool_calls_of_message)
                .unwrap_or_default();
            let mut blocks = Vec::new();
            let cut = completion
                .pointer("/choices/0/finish_reason")
                .and_then(Value::as_str)
                == Some("length");
            for c in calls {
                // Several OpenAI-compatible servers send "" for a tool without parameters.
                let input = (if c.arguments.trim().is_empty() && !cut {
                    Some(json!({}))
                } else {
                    serde_json::from_str::<Value>(&c.arguments).ok()
                })
                .filter(Value::is_object)
                .ok_or_else(|| {
                    format!(
                        "the upstream's call of tool `{}` has arguments that are not a JSON \
                             object{}, so it cannot be passed on as a tool_use block",
                        c.name,
                        if cut {
                            " (the reply was cut off at its token limit: raise max_tokens)"
                        } else {
                            ""
                        }
                    )
                })?;
                let id = (c.id.as_deref())
                    .filter(|id| crate::openai::is_short_id(id))
                    .map(str::to_string)
                    .unwrap_or_else(|| format!("toolu_{}", uuid::Uuid::new_v4().simple()));
                blocks.push(json!({
                    "type": "tool_use",
                    "id": id,
                    "name": c.name,
                    "input": input,
                }));
            }
            let mut m = verified_message(completion, "", Value::Null);
            m["content"] = Value::Array(blocks);
            m["stop_reason"] = json!("tool_use");
            m
        }
    };
    msg["proofgate"] = proofgate;
    Ok(msg)
}

/// A message as the SSE sequence the official SDKs read: `message_start`, then per content
/// block `content_block_start`, deltas (`text_delta` or `input_json_delta`) and
/// `content_block_stop`, then `message_delta` (stop reason, output tokens, and the
/// `proofgate` object) and `message_stop`. Each item is (event name, JSON data).
pub fn message_events(message: &Value) -> Vec<(String, String)> {
    let mut start = message.clone();
    if let Some(obj) = start.as_object_mut() {
        obj.insert("content".into(), json!([]));
        obj.insert("stop_reason".into(), Value::Null);
        obj.insert("stop_sequence".into(), Value::Null);
        obj.remove("proofgate");
    }
    let mut events = vec![(
        "message_start",
        json!({"type": "message_start", "message": start}),
    )];
    for (i, block) in message
        .get("content")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .enumerate()
    {
        match block.get("type").and_then(Value::as_str) {
            Some("tool_use") => {
                let mut empty = block.clone();
                empty["input"] = json!({});
                events.push((
                    "content_block_start",
                    json!({"type": "content_block_start", "index": i, "content_block": empty}),
                ));
                events.push((
                    "content_block_delta",
                    json!({"type": "content_block_delta", "index": i, "delta": {
                        "type": "input_json_delta",
                        "partial_json": block.get("input").map(Value::to_string).unwrap_or_else(|| "{}".into())
                    }}),
                ));
            }
            _ => {
                let text = block.get("text").and_then(Value::as_str).unwrap_or("");
                events.push((
                    "content_block_start",
                    json!({"type": "content_block_start", "index": i,
                           "content_block": {"type": "text", "text": ""}}),
                ));
                let chars: Vec<char> = text.chars().collect();
                for piece in chars.chunks(64) {
                    events.push((
                        "content_block_delta",
                        json!({"type": "content_block_delta", "index": i,
                               "delta": {"type": "text_delta", "text": piece.iter().collect::<String>()}}),
                    ));
                }
            }
        }
        events.push((
            "content_block_stop",
            json!({"type": "content_block_stop", "index": i}),
        ));
    }
    let mut delta = json!({
        "type": "message_delta",
        "delta": {"stop_reason": message.get("stop_reason").cloned().unwrap_or(json!("end_turn")),
                  "stop_sequence": null},
        "usage": {"output_tokens": message.pointer("/usage/output_tokens").cloned().unwrap_or(json!(0))},
    });
    if let Some(p) = message.get("proofgate") {
        delta["proofgate"] = p.clone();
    }
    events.push(("message_delta", delta));
    events.push(("message_stop", json!({"type": "message_stop"})));
    events
        .into_iter()
        .map(|(e, d)| (e.to_string(), d.to_string()))
        .collect()
}

/// An error as the Messages API writes it: its `type` is the API's for the status
/// (`invalid_request_error`, `rate_limit_error`, ...), which apps match on; proofgate's own
/// code goes beside it as `code`.
pub fn error_body(status: u16, code: &str, message: &str) -> Value {
    let kind = match status {
        400 | 409 | 415 | 422 => "invalid_request_error",
        401 => "authentication_error",
        402 => "billing_error",
        403 => "permission_error",
        404 => "not_found_error",
        413 => "request_too_large",
        429 => "rate_limit_error",
        503 | 529 => "overloaded_error",
        504 => "timeout_error",
        _ => "api_error",
    };
    json!({"type": "error", "error": {"type": kind, "message": message, "code": code}})
}

#[cfg(test)]
mod tests {
    /// A chat request's parameters the Messages API lacks are refused for an Anthropic
    /// upstream rather than dropped (what it does anyway, a medium verbosity or text out, is
    /// not); one call at a time carries over.
    #[test]
    fn chat_parameters_an_anthropic_upstream_lacks_are_refused() {
        use serde_json::json;
        let chat = |extra: serde_json::Value| {
            let mut body = json!({"model": "m", "messages": [{"role": "user", "content": "q"}]});
            for (k, v) in extra.as_object().unwrap() {
                body[k] = v.clone();
            }
            body
        };
        assert_eq!(super::unsupported_for_upstream(&chat(json!({}))), None);
        for harmless in [
            json!({"frequency_penalty": 0}),
            json!({"logprobs": false}),
            json!({"seed": null}),
            json!({"logit_bias": {}}),
            json!({"verbosity": "medium"}),
            json!({"modalities": ["text"]}),
        ] {
            assert_eq!(
                super::unsupported_for_upstream(&chat(harmless.clone())),
                None,
                "{harmless}"
            );
        }
        for (extra, name) in [
            (json!({"seed": 7}), "seed"),
            (json!({"presence_penalty": 0.5}), "presence_penalty"),
            (json!({"logit_bias": {"50256": -100}}), "logit_bias"),
            (json!({"reasoning_effort": "high"}), "reasoning_effort"),
        ] {
            let why = super::unsupported_for_upstream(&chat(extra)).unwrap();
            assert!(why.starts_with(&format!("`{name}`")), "{why}");
        }
        let one_at_a_time = super::request_from_chat(&chat(json!({
            "parallel_tool_calls": false,
            "tools": [{"type": "function", "function": {"name": "f", "parameters": {}}}]})));
        assert_eq!(
            one_at_a_time["tool_choice"],
            json!({"type": "auto", "disable_parallel_tool_use": true})
        );
    }

    #[test]
    fn what_cannot_reach_the_upstream_is_refused_by_name() {
        let text = json!({"messages": [{"role": "user", "content": [{"type": "text", "text": "hi"}]},
                                       {"role": "assistant", "content": [{"type": "thinking", "thinking": "…"},
                                                                         {"type": "text", "text": "yo"}]}],
                          "tools": [{"name": "f", "input_schema": {"type": "object"}}]});
        assert_eq!(super::unsupported_in_request(&text), None);
        let image = json!({"messages": [{"role": "user", "content": [
            {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": ""}}]}]});
        assert!(super::unsupported_in_request(&image)
            .unwrap()
            .contains("`image`"));
        let in_result = json!({"messages": [{"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t",
            "content": [{"type": "text", "text": "the scan:"},
                        {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": ""}}]}]}]});
        assert!(super::unsupported_in_request(&in_result)
            .unwrap()
            .contains("tool_result content blocks of type `image`"));
        // A block in the other party's turn, and parameters the upstream call cannot carry,
        // are refused by name rather than dropped.
        for (req, says) in [
            (
                json!({"messages": [{"role": "assistant", "content": [
                {"type": "tool_result", "tool_use_id": "t", "content": "$0"}]}]}),
                "messages[0] is a assistant turn with a `tool_result` block",
            ),
            (
                json!({"messages": [{"role": "user", "content": [
                {"type": "tool_use", "id": "t", "name": "f", "input": {}}]}]}),
                "only assistant turns hold",
            ),
            (
                json!({"messages": [{"role": "user", "content": [
                {"type": "thinking", "thinking": "the user is 70"}]}]}),
                "`thinking` block",
            ),
            (
                json!({"messages": [], "thinking": {"type": "enabled", "budget_tokens": 2048}}),
                "`thinking` is not supported",
            ),
            (
                json!({"messages": [], "top_k": 5}),
                "`top_k` is not supported",
            ),
        ] {
            let why = super::unsupported_in_request(&req).unwrap_or_default();
            assert!(why.contains(says), "{req}: {why}");
        }
        let off = json!({"messages": [], "thinking": {"type": "disabled"}});
        assert_eq!(super::unsupported_in_request(&off), None);
        let text_result = json!({"messages": [{"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t",
            "content": [{"type": "text", "text": "$30"}]}]}]});
        assert_eq!(super::unsupported_in_request(&text_result), None);
        let search = json!({"messages": [], "tools": [{"type": "web_search_20250305", "name": "web_search"}]});
        assert!(super::unsupported_in_request(&search)
            .unwrap()
            .contains("web_search_20250305"));
    }

    use super::*;

    #[test]
    fn an_openai_tool_call_becomes_a_tool_use_block_or_an_error_never_another_call() {
        // The legacy `function_call` is a call too (it was dropped: `content: []`).
        let legacy = json!({"model": "gpt", "choices": [{"finish_reason": "function_call",
            "message": {"role": "assistant", "content": null,
            "function_call": {"name": "price", "arguments": "{\"age\":70}"}}}]});
        let out = tool_use_message(&legacy, None, json!({})).unwrap();
        assert_eq!(out["content"].as_array().unwrap().len(), 1, "{out}");
        assert_eq!(out["content"][0]["type"], "tool_use");
        assert_eq!(out["content"][0]["name"], "price");
        assert_eq!(out["content"][0]["input"], json!({"age": 70}));
        assert!(out["content"][0]["id"]
            .as_str()
            .unwrap()
            .starts_with("toolu_"));
        assert_eq!(out["stop_reason"], "tool_use");
        // Arguments cut off at the token limit were sent on as `input: {}`.
        let cut = json!({"model": "gpt", "choices": [{"finish_reason": "length",
            "message": {"role": "assistant", "content": null, "tool_calls": [{"id": "call_1",
            "type": "function", "function": {"name": "price",
            "arguments": "{\"age\": 70, \"note\": \"trunc"}}]}}]});
        let why = tool_use_message(&cut, None, json!({})).unwrap_err();
        assert!(
            why.contains("`price`") && why.contains("max_tokens"),
            "{why}"
        );
        // "" (what several servers send for a tool without parameters) is no arguments, unless
        // the reply was cut off.
        let mut empty = cut.clone();
        empty["choices"][0]["message"]["tool_calls"][0]["function"]["arguments"] = json!("");
        assert!(tool_use_message(&empty, None, json!({})).is_err());
        empty["choices"][0]["finish_reason"] = json!("tool_calls");
        let out = tool_use_message(&empty, None, json!({})).unwrap();
        assert_eq!(out["content"][0]["input"], json!({}));
        // A native message stopped at max_tokens mid tool use.
        let native = json!({"type": "message", "id": "msg_1", "model": "claude",
            "stop_reason": "max_tokens", "content": [{"type": "tool_use", "id": "toolu_1",
            "name": "price", "input": {}}]});
        let why = tool_use_message(&empty, Some(&native), json!({})).unwrap_err();
        assert!(why.contains("max_tokens"), "{why}");
        for args in ["[1]", "70", "null"] {
            let mut odd = cut.clone();
            odd["choices"][0]["finish_reason"] = json!("tool_calls");
            odd["choices"][0]["message"]["tool_calls"][0]["function"]["arguments"] = json!(args);
            let why = tool_use_message(&odd, None, json!({})).unwrap_err();
            assert!(!why.contains("max_tokens"), "{args}: {why}");
        }
    }

    #[test]
    fn a_native_tool_use_carries_only_its_blocks_members() {
        let native = json!({"type": "message", "id": "msg_1", "model": "claude",
        "stop_sequence": "LEAK: seniors enter free", "stop_reason": "tool_use",
        "content": [
            {"type": "text", "text": "LEAK: you get a refund"},
            {"type": "thinking", "thinking": "LEAK"},
            {"type": "tool_use", "id": "toolu_1", "name": "price", "input": {"age": 70},
             "note": "LEAK"}
        ]});
        let completion = json!({"model": "claude", "choices": [{"message": {"role": "assistant",
            "content": null, "tool_calls": []}}]});
        let out =
            tool_use_message(&completion, Some(&native), json!({"verdict": "TOOL_CALL"})).unwrap();
        assert!(!out.to_string().contains("LEAK"), "{out}");
        let mut odd = native.clone();
        odd["model"] = json!("LEAK says yes");
        odd["content"][2]["id"] = json!("toolu 1 LEAK");
        let odd_out = tool_use_message(&completion, Some(&odd), json!({})).unwrap();
        assert!(!odd_out.to_string().contains("LEAK"), "{odd_out}");
        let text = verified_message(
            &json!({"id": "msg LEAK", "model": "LEAK model"}),
            "A.",
            json!({}),
        );
        assert!(!text.to_string().contains("LEAK"), "{text}");
        assert_eq!(
            out["content"],
            json!([{"type": "tool_use", "id": "toolu_1", "name": "price", "input": {"age": 70}}])
        );
        assert_eq!(out["stop_reason"], "tool_use");
        // The message's id is the proxy's own (the upstream's was copied before).
        let id = out["id"].as_str().unwrap();
        assert!(id.starts_with("msg_") && id.len() == 36, "{id}");
        // Ids and a model name written as sentences: the message's id and model are never
        // copied, and a block's id of a sentence's form is made up anew (it passed as an
        // identifier before); one of a short id's form is kept (it goes back to the upstream
        // with the tool's result).
        let mut worded = native.clone();
        worded["id"] = json!("msgSeniorsEnterFree");
        worded["model"] = json!("claude-you-also-get-a-full-refund");
        worded["content"][2]["id"] = json!("toolu_you-get-a-full-refund");
        let out = tool_use_message(&completion, Some(&worded), json!({})).unwrap();
        let text = out.to_string();
        assert!(
            !text.contains("Seniors") && !text.contains("refund"),
            "{text}"
        );
        assert_eq!(out["model"], "claude");
        let block_id = out["content"][0]["id"].as_str().unwrap();
        assert!(
            block_id.starts_with("toolu_") && block_id.len() == 38,
            "{block_id}"
        );
        worded["content"][2]["id"] = json!("toolu_01A09q90qw90lq917835lq9");
        let out = tool_use_message(&completion, Some(&worded), json!({})).unwrap();
        assert_eq!(out["content"][0]["id"], "toolu_01A09q90qw90lq917835lq9");
        let text = verified_message(&json!({"id": "msgSeniorsEnterFree"}), "A.", json!({}));
        assert!(!text.to_string().contains("Seniors"), "{text}");
    }

    #[test]
    fn a_conversation_with_tools_survives_both_ways() {
        let req = json!({
            "model": "claude", "max_tokens": 300, "system": "Be brief.",
            "tools": [{"name": "price", "description": "d", "input_schema": {"type": "object"}}],
            "messages": [
                {"role": "user", "content": "How much at 70?"},
                {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_1", "name": "price", "input": {"age": 70}}]},
                {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "$30"}]}
            ]
        });
        let chat = chat_from_request(&req);
        assert_eq!(chat["messages"][0]["role"], "system");
        assert_eq!(
            chat["messages"][2]["tool_calls"][0]["function"]["name"],
            "price"
        );
        assert_eq!(chat["messages"][3]["role"], "tool");
        assert_eq!(chat["messages"][3]["content"], "$30");
        assert_eq!(chat["tools"][0]["function"]["name"], "price");
        assert_eq!(chat["max_completion_tokens"], 300);
        let back = request_from_chat(&chat);
        assert_eq!(back["system"], "Be brief.");
        assert_eq!(back["max_tokens"], 300);
        // OpenAI's `metadata` is the client's own map; the Messages API takes only a user id.
        let openai = json!({"model": "claude", "messages": [{"role": "user", "content": "hi"}],
                            "metadata": {"app": "kiosk"}, "user": "u-7"});
        let sent = request_from_chat(&openai);
        assert_eq!(sent["metadata"], json!({"user_id": "u-7"}));
        assert_eq!(sent["max_tokens"], DEFAULT_MAX_TOKENS);
        let anonymous = request_from_chat(&json!({"messages": [], "metadata": {"a": "b"}}));
        assert!(anonymous.get("metadata").is_none(), "{anonymous}");
        assert_eq!(back["messages"][1]["content"][0]["input"]["age"], 70);
        assert_eq!(back["messages"][2]["content"][0]["tool_use_id"], "toolu_1");
        assert_eq!(back["tools"][0]["input_schema"]["type"], "object");
    }

    #[test]
    fn a_history_call_whose_arguments_are_no_object_is_named_not_sent_as_empty() {
        let chat = |args: &str| {
            json!({"messages": [{"role": "user", "content": "q"},
                {"role": "assistant", "content": null, "tool_calls": [{"id": "c", "type": "function",
                 "function": {"name": "price", "arguments": args}}]},
                {"role": "tool", "tool_call_id": "c", "content": "$30"}]})
        };
        for ok in ["{\"age\": 70}", "", "  ", "{}"] {
            assert_eq!(history_problem(&chat(ok)), None, "{ok:?}");
        }
        for bad in ["{\"age\": 7", "[1]", "70", "null"] {
            let why = history_problem(&chat(bad)).unwrap();
            assert!(why.contains("`price`"), "{why}");
        }
        let legacy = json!({"messages": [{"role": "assistant", "content": null,
            "function_call": {"name": "price", "arguments": "{oops"}}]});
        assert!(history_problem(&legacy).is_some());
    }

    /// An app on the legacy function-calling API (`functions`, `function_call`, `function`
    /// turns) in front of an Anthropic upstream: its functions were no tools, its calls were
    /// dropped from the history, and the results answered no call.
    #[test]
    fn legacy_function_calling_becomes_tools_and_matched_tool_uses() {
        let chat = json!({"model": "m", "function_call": "auto",
        "functions": [{"name": "price", "description": "d",
                       "parameters": {"type": "object"}}],
        "messages": [
            {"role": "user", "content": "How much at 70?"},
            {"role": "assistant", "content": null,
             "function_call": {"name": "price", "arguments": "{\"age\": 70}"}},
            {"role": "function", "name": "price", "content": "$30"},
            {"role": "assistant", "content": null,
             "function_call": {"name": "price", "arguments": "{\"age\": 8}"}},
            {"role": "function", "name": "price", "content": "$0"}
        ]});
        let out = request_from_chat(&chat);
        assert_eq!(out["tools"][0]["name"], "price", "{out}");
        assert_eq!(out["tools"][0]["input_schema"]["type"], "object");
        assert_eq!(out["tool_choice"], json!({"type": "auto"}));
        let uses: Vec<&Value> = out["messages"]
            .as_array()
            .unwrap()
            .iter()
            .flat_map(|m| m["content"].as_array().unwrap())
            .collect();
        let ids: Vec<(&str, &Value)> = uses
            .iter()
            .filter_map(|b| match b["type"].as_str() {
                Some("tool_use") => Some(("use", &b["id"])),
                Some("tool_result") => Some(("result", &b["tool_use_id"])),
                _ => None,
            })
            .collect();
        assert_eq!(
            ids,
            [
                ("use", &json!("toolu_legacy_0")),
                ("result", &json!("toolu_legacy_0")),
                ("use", &json!("toolu_legacy_1")),
                ("result", &json!("toolu_legacy_1"))
            ],
            "{out}"
        );
        assert_eq!(uses[1]["input"]["age"], 70);
        let named = json!({"model": "m", "messages": [],
            "functions": [{"name": "price"}], "function_call": {"name": "price"}});
        assert_eq!(
            request_from_chat(&named)["tool_choice"],
            json!({"type": "tool", "name": "price"})
        );
        let none = json!({"model": "m", "messages": [],
            "functions": [{"name": "price"}], "function_call": "none"});
        assert_eq!(
            request_from_chat(&none)["tool_choice"],
            json!({"type": "none"})
        );
    }

    #[test]
    fn replies_become_completions_and_events_carry_the_text() {
        let reply = json!({"id": "msg_1", "type": "message", "role": "assistant", "model": "c",
            "content": [{"type": "text", "text": "Hi"}, {"type": "tool_use", "id": "t", "name": "f", "input": {"a": 1}}],
            "stop_reason": "tool_use", "usage": {"input_tokens": 3, "output_tokens": 4}});
        let c = completion_from_message(&reply);
        assert_eq!(c["choices"][0]["message"]["content"], "Hi");
        assert_eq!(c["choices"][0]["finish_reason"], "tool_calls");
        assert_eq!(
            c["choices"][0]["message"]["tool_calls"][0]["function"]["arguments"],
            "{\"a\":1}"
        );
        let m = verified_message(&c, "verified", json!({"verdict": "VALID"}));
        let events = message_events(&m);
        let names: Vec<&str> = events.iter().map(|(e, _)| e.as_str()).collect();
        assert_eq!(
            names,
            [
                "message_start",
                "content_block_start",
                "content_block_delta",
                "content_block_stop",
                "message_delta",
                "message_stop"
            ]
        );
        assert!(events[2].1.contains("verified"));
        assert!(!events[0].1.contains("verified"));
    }
}

//! The OpenAI Responses API (`POST /v1/responses`) as the proxy sees it: the client's request
//! translated to the chat-completions shape the rest of the proxy works in (the upstream is
//! called with Chat Completions), and verified answers written back as a `response` object
//! (JSON, or the SSE events the official SDKs read). Built from an allow-list, like the
//! chat-completions answer.

use serde_json::{json, Value};

fn content_text(content: &Value) -> String {
    match content {
        Value::String(s) => s.clone(),
        Value::Array(parts) => parts
            .iter()
            .filter(|p| {
                matches!(
                    p.get("type").and_then(Value::as_str),
                    Some("input_text" | "output_text" | "text" | "refusal")
                )
            })
            // An earlier assistant turn's refusal is its text.
            .filter_map(|p| {
                p.get("text")
                    .or_else(|| p.get("refusal"))
                    .and_then(Value::as_str)
            })
            .collect::<Vec<_>>()
            .join("\n"),
        _ => String::new(),
    }
}

/// The members of a Responses API request that carry over to Chat Completions, or change
/// nothing of the answer (`store`, `metadata`, `service_tier`, `truncation`, the prompt
/// cache's settings, `stream_options`); `conversation`, `prompt`, `include` and `text` are
/// checked below.
const RESPONSES_FIELDS: &[&str] = &[
    "model",
    "input",
    "instructions",
    "max_output_tokens",
    "temperature",
    "top_p",
    "stream",
    "stream_options",
    "user",
    "safety_identifier",
    "parallel_tool_calls",
    "reasoning",
    "tools",
    "tool_choice",
    "text",
    "metadata",
    "store",
    "service_tier",
    "truncation",
    "prompt_cache_key",
    "prompt_cache_retention",
    "prompt_cache_options",
    "include",
    "conversation",
    "prompt",
];

/// What a Responses API request asks for that proofgate cannot carry to the upstream (which
/// it calls with Chat Completions) or verify, if anything: dropped silently, the app would
/// get an answer made without it. Refused with a 400 naming it instead.
pub fn unsupported_in_request(req: &Value) -> Option<String> {
    // Text the upstream would add from what it stores: proofgate calls it with Chat
    // Completions, so the answer would come from a conversation the client did not send,
    // and it is verified against the turns it was sent.
    let stored = [
        ("conversation", "a conversation the server keeps"),
        ("prompt", "a stored prompt template"),
    ];
    for (field, what) in stored {
        if req.get(field).is_some_and(|v| !v.is_null()) {
            return Some(format!(
                "`{field}` ({what}) is not supported: send its text in `instructions` and \
                 `input` (the answer is verified against the turns the request holds)"
            ));
        }
    }
    // A member not known to carry over or to leave the answer alone (`previous_response_id`,
    // `max_tool_calls`, `top_logprobs`, `background`, ...) is refused, not dropped (a review
    // found several dropped so).
    if let Some(name) = req.as_object().and_then(|o| {
        o.iter()
            .find(|(k, v)| {
                !RESPONSES_FIELDS.contains(&k.as_str()) && !crate::anthropic::asks_nothing(v)
            })
            .map(|(k, _)| k)
    }) {
        return Some(format!(
            "`{}` is not supported: proofgate calls the upstream with Chat Completions and \
             verifies text, and an answer made without it would not be what was asked for; \
             send the request without it",
            crate::http_body::truncate(name, 100)
        ));
    }
    // Encrypted reasoning, which stateless clients (`store: false`) ask for, changes nothing:
    // no reasoning item goes out. Anything else included would be left out.
    if req.get("include").is_some_and(|i| {
        !i.is_null()
            && i.as_array().is_none_or(|a| {
                a.iter()
                    .any(|x| x.as_str() != Some("reasoning.encrypted_content"))
            })
    }) {
        return Some(
            "`include` is not supported: nothing of the upstream's reply but the verified text \
             goes out (no logprobs, reasoning or tool sources); send it empty or leave it out"
                .into(),
        );
    }
    if let Some(name) = req.get("text").and_then(Value::as_object).and_then(|t| {
        t.keys()
            .find(|k| !matches!(k.as_str(), "format" | "verbosity"))
    }) {
        return Some(format!(
            "text.{} is not supported: only text.format (text) and text.verbosity carry over",
            crate::http_body::truncate(name, 100)
        ));
    }
    for tool in req
        .get("tools")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let kind = tool.get("type").and_then(Value::as_str).unwrap_or("");
        if kind != "function" {
            return Some(format!(
                "tools of type `{kind}` are not supported: proofgate calls the upstream with \
                 Chat Completions, where only function tools exist"
            ));
        }
    }
    if let Some(format) = req.pointer("/text/format/type").and_then(Value::as_str) {
        if format != "text" {
            return Some(format!(
                "text.format `{format}` is not supported: answers are verified as text"
            ));
        }
    }
    if let Some(Value::Array(items)) = req.get("input") {
        for (i, item) in items.iter().enumerate() {
            let kind = item.get("type").and_then(Value::as_str);
            // Named by the client's own index (the converted request also holds
            // `instructions` as a message, so its index would be off by one).
            if matches!(kind, None | Some("message")) {
                let known = |r: &str| matches!(r, "user" | "assistant" | "system" | "developer");
                let role = match item.get("role") {
                    Some(Value::String(r)) if known(r) => None,
                    Some(Value::String(r)) => Some(format!("`{r}`")),
                    Some(r) => Some(format!("`{r}`")),
                    None => Some("missing".to_string()),
                };
                if let Some(role) = role {
                    return Some(format!(
                        "input[{i}] has role {role}: the roles are user, assistant, system and \
                         developer (the translators take facts only from what the user, the \
                         system or a tool said, so a turn's origin is not guessed); send \
                         earlier chatbot turns as assistant"
                    ));
                }
            }
            if !matches!(
                kind,
                None | Some("message" | "function_call" | "function_call_output")
            ) {
                return Some(format!(
                    "input items of type `{}` are not supported: send messages, function calls \
                     and their outputs",
                    kind.unwrap_or_default()
                ));
            }
            // A function call's output may be a list of parts too (text, images, files).
            for part in ["content", "output"]
                .into_iter()
                .filter_map(|k| item.get(k).and_then(Value::as_array))
                .flatten()
            {
                let kind = part.get("type").and_then(Value::as_str).unwrap_or("");
                if !matches!(kind, "input_text" | "output_text" | "text" | "refusal") {
                    return Some(format!(
                        "content parts of type `{kind}` are not supported: the answer is \
                         verified against the conversation's text only"
                    ));
                }
            }
        }
    }
    None
}

/// A Responses API request as a chat-completions body: `instructions` becomes the system
/// message, input messages keep their roles, `function_call` items become assistant tool
/// calls and `function_call_output` items tool messages; function tools, `tool_choice`,
/// `max_output_tokens`, `temperature`, `top_p`, `user` and `stream` carry over.
pub fn chat_from_request(req: &Value) -> Value {
    let mut messages = Vec::new();
    if let Some(i) = req.get("instructions").and_then(Value::as_str) {
        messages.push(json!({"role": "system", "content": i}));
    }
    match req.get("input") {
        Some(Value::String(s)) => messages.push(json!({"role": "user", "content": s})),
        Some(Value::Array(items)) => {
            for item in items {
                match item.get("type").and_then(Value::as_str) {
                    Some("function_call") => {
                        let call = json!({
                            "id": item.get("call_id").cloned().unwrap_or(json!("")),
                            "type": "function",
                            "function": {"name": item.get("name").cloned().unwrap_or(json!("")),
                                         "arguments": item.get("arguments").cloned().unwrap_or(json!("{}"))}
                        });
                        // Parallel calls of one turn join the assistant message before them.
                        match messages.last_mut() {
                            Some(last)
                                if last["role"] == "assistant"
                                    && last.get("tool_calls").is_some() =>
                            {
                                if let Some(c) = last["tool_calls"].as_array_mut() {
                                    c.push(call);
                                }
                            }
                            _ => messages.push(json!({"role": "assistant", "content": null,
                                                      "tool_calls": [call]})),
                        }
                    }
                    Some("function_call_output") => messages.push(json!({
                        "role": "tool",
                        "tool_call_id": item.get("call_id").cloned().unwrap_or(json!("")),
                        "content": item.get("output").map(content_text).unwrap_or_default(),
                    })),
                    Some("message") | None => {
                        // An unknown or missing role goes on as written, and Chat
                        // Completions' parse refuses it with a 400 that names it.
                        let role = match item.get("role") {
                            Some(Value::String(r)) if r == "developer" || r == "system" => {
                                json!("system")
                            }
                            Some(r) => r.clone(),
                            None => Value::Null,
                        };
                        let text = item.get("content").map(content_text).unwrap_or_default();
                        messages.push(json!({"role": role, "content": text}));
                    }
                    Some(_) => {}
                }
            }
        }
        _ => {}
    }
    let mut out = crate::openai::chat_body(
        req,
        messages,
        &[
            // OpenAI's reasoning models refuse `max_tokens`; every other model of OpenAI's,
            // vLLM and llama.cpp take this name, and the Anthropic upstream reads either.
            ("max_output_tokens", "max_completion_tokens"),
            ("temperature", "temperature"),
            ("top_p", "top_p"),
            ("stream", "stream"),
            ("user", "user"),
            ("safety_identifier", "safety_identifier"),
            ("parallel_tool_calls", "parallel_tool_calls"),
        ],
    );
    // The Chat Completions name of the reasoning effort (a summary is the model's reasoning,
    // which no reply carries unverified, so there is none to ask for).
    if let Some(effort) = req.pointer("/reasoning/effort").filter(|e| e.is_string()) {
        out.insert("reasoning_effort".into(), effort.clone());
    }
    if let Some(verbosity) = req.pointer("/text/verbosity").filter(|v| v.is_string()) {
        out.insert("verbosity".into(), verbosity.clone());
    }
    if let Some(tools) = req.get("tools").and_then(Value::as_array) {
        let tools: Vec<Value> = tools
            .iter()
            .filter(|t| t.get("type").and_then(Value::as_str) == Some("function"))
            .map(|t| {
                let mut f = json!({
                    "name": t.get("name").cloned().unwrap_or(json!("")),
                    "description": t.get("description").cloned().unwrap_or(json!("")),
                    "parameters": t.get("parameters").cloned().unwrap_or(json!({})),
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
        let c = match choice {
            Value::Object(o) if o.get("type").and_then(Value::as_str) == Some("function") => {
                json!({"type": "function", "function": {"name": o.get("name").cloned().unwrap_or(json!(""))}})
            }
            // The Responses form is flat; Chat Completions nests the mode and names functions
            // as it names them in `tools`.
            Value::Object(o) if o.get("type").and_then(Value::as_str) == Some("allowed_tools") => {
                let tools: Vec<Value> = o
                    .get("tools")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                    .map(|t| match t.get("name") {
                        Some(name) => json!({"type": "function", "function": {"name": name}}),
                        None => t.clone(),
                    })
                    .collect();
                json!({"type": "allowed_tools", "allowed_tools": {
                    "mode": o.get("mode").cloned().unwrap_or(json!("auto")),
                    "tools": tools,
                }})
            }
            other => other.clone(),
        };
        out.insert("tool_choice".into(), c);
    }
    Value::Object(out)
}

fn base_response(completion: &Value, output: Vec<Value>, proofgate: Value) -> Value {
    let usage = completion.get("usage");
    let n = |k: &str| {
        usage
            .and_then(|u| u.get(k))
            .and_then(Value::as_u64)
            .unwrap_or(0)
    };
    json!({
        "id": format!("resp_{}", uuid::Uuid::new_v4().simple()),
        "object": "response",
        "created_at": completion.get("created").and_then(Value::as_u64).unwrap_or(0),
        "status": "completed",
        "error": null,
        "incomplete_details": null,
        "model": crate::openai::identifier(completion.get("model")).unwrap_or(""),
        "output": output,
        "parallel_tool_calls": true,
        "tool_choice": "auto",
        "tools": [],
        "usage": {
            "input_tokens": n("prompt_tokens"),
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens": n("completion_tokens"),
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": n("prompt_tokens") + n("completion_tokens"),
        },
        "proofgate": proofgate,
    })
}

/// The verified answer as a `response` object: one assistant message with one `output_text`
/// part (what the SDKs' `output_text` reads), the upstream's model and token counts, and the
/// `proofgate` object; nothing else of the upstream's reply.
pub fn verified_response(completion: &Value, text: &str, proofgate: Value) -> Value {
    let item = json!({
        "type": "message",
        "id": format!("msg_{}", uuid::Uuid::new_v4().simple()),
        "status": "completed",
        "role": "assistant",
        "content": [{"type": "output_text", "text": text, "annotations": []}],
    });
    base_response(completion, vec![item], proofgate)
}

/// A tool-call reply as a `response` object: one `function_call` item per call (`tool_calls`,
/// or the legacy `function_call`, as the chat path reads them); `incomplete` when the upstream
/// stopped at its token limit, where the last call's arguments may be cut off.
pub fn tool_call_response(completion: &Value, proofgate: Value) -> Value {
    let calls = completion
        .pointer("/choices/0/message")
        .and_then(crate::openai::tool_calls_of_message)
        .unwrap_or_default();
    let items = calls
        .iter()
        .map(|c| {
            let call_id = (c.id.as_deref())
                .filter(|id| crate::openai::is_short_id(id))
                .map(str::to_string)
                .unwrap_or_else(|| format!("call_{}", uuid::Uuid::new_v4().simple()));
            json!({
                "type": "function_call",
                "id": format!("fc_{}", call_id.trim_start_matches("call_")),
                "call_id": call_id,
                "name": c.name,
                "arguments": c.arguments,
                "status": "completed",
            })
        })
        .collect();
    let mut response = base_response(completion, items, proofgate);
    if completion
        .pointer("/choices/0/finish_reason")
        .and_then(Value::as_str)
        == Some("length")
    {
        response["status"] = json!("incomplete");
        response["incomplete_details"] = json!({"reason": "max_output_tokens"});
        // The last call is the one the limit cut.
        if let Some(last) = response["output"].as_array_mut().and_then(|o| o.last_mut()) {
            last["status"] = json!("incomplete");
        }
    }
    response
}

/// A response as the SSE events the official SDKs read, each (event name, JSON data) with a
/// `sequence_number`: `response.created`, `response.in_progress`, per output item
/// `response.output_item.added`, its parts and deltas (`response.content_part.added`,
/// `response.output_text.delta`, `response.output_text.done`, `response.content_part.done`,
/// or `response.function_call_arguments.delta`/`.done`), `response.output_item.done`, then
/// `response.completed` with the whole response (and its `proofgate` object).
pub fn response_events(response: &Value) -> Vec<(String, String)> {
    let mut events: Vec<(&str, Value)> = Vec::new();
    let mut empty = response.clone();
    empty["output"] = json!([]);
    empty["status"] = json!("in_progress");
    if let Some(o) = empty.as_object_mut() {
        o.remove("proofgate");
        o.insert("usage".into(), Value::Null);
    }
    events.push(("response.created", json!({"response": empty})));
    events.push(("response.in_progress", json!({"response": empty})));
    for (i, item) in response
        .get("output")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .enumerate()
    {
        let id = item.get("id").cloned().unwrap_or(json!(""));
        let mut added = item.clone();
        added["status"] = json!("in_progress");
        if item.get("type").and_then(Value::as_str) == Some("function_call") {
            added["arguments"] = json!("");
            events.push((
                "response.output_item.added",
                json!({"output_index": i, "item": added}),
            ));
            let args = item.get("arguments").cloned().unwrap_or(json!("{}"));
            events.push((
                "response.function_call_arguments.delta",
                json!({"output_index": i, "item_id": id, "delta": args}),
            ));
            // `name` as OpenAI's stream sends it: strict clients require it on this event.
            let name = item.get("name").cloned().unwrap_or(json!(""));
            events.push((
                "response.function_call_arguments.done",
                json!({"output_index": i, "item_id": id, "name": name, "arguments": args}),
            ));
        } else {
            added["content"] = json!([]);
            events.push((
                "response.output_item.added",
                json!({"output_index": i, "item": added}),
            ));
            for (j, part) in item
                .get("content")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .enumerate()
            {
                let text = part.get("text").and_then(Value::as_str).unwrap_or("");
                let at = json!({"output_index": i, "content_index": j, "item_id": id});
                let with = |mut v: Value, extra: Value| {
                    if let (Some(o), Some(e)) = (v.as_object_mut(), extra.as_object()) {
                        o.extend(e.clone());
                    }
                    v
                };
                events.push((
                    "response.content_part.added",
                    with(
                        at.clone(),
                        json!({"part": {"type": "output_text", "text": "", "annotations": []}}),
                    ),
                ));
                let chars: Vec<char> = text.chars().collect();
                for piece in chars.chunks(64) {
                    events.push((
                        "response.output_text.delta",
                        with(
                            at.clone(),
                            json!({"delta": piece.iter().collect::<String>(), "logprobs": []}),
                        ),
                    ));
                }
                events.push((
                    "response.output_text.done",
                    with(at.clone(), json!({"text": text, "logprobs": []})),
                ));
                events.push((
                    "response.content_part.done",
                    with(at, json!({"part": part})),
                ));
            }
        }
        events.push((
            "response.output_item.done",
            json!({"output_index": i, "item": item}),
        ));
    }
    // A response stopped at its token limit ends as the API ends one: `response.incomplete`.
    let last = if response["status"] == "incomplete" {
        "response.incomplete"
    } else {
        "response.completed"
    };
    events.push((last, json!({"response": response})));
    events
        .into_iter()
        .enumerate()
        .map(|(seq, (name, mut data))| {
            data["type"] = json!(name);
            data["sequence_number"] = json!(seq);
            (name.to_string(), data.to_string())
        })
        .collect()
}

#[cfg(test)]
mod tests {
    #[test]
    fn allowed_tools_goes_upstream_in_the_chat_form_and_auto_stays_free() {
        let req = json!({"input": "q", "tools": [{"type": "function", "name": "price",
            "parameters": {"type": "object"}}],
            "tool_choice": {"type": "allowed_tools", "mode": "auto",
                            "tools": [{"type": "function", "name": "price"}]}});
        let chat = super::chat_from_request(&req);
        assert_eq!(
            chat["tool_choice"],
            json!({"type": "allowed_tools", "allowed_tools": {"mode": "auto",
                   "tools": [{"type": "function", "function": {"name": "price"}}]}})
        );
        let parsed = crate::openai::ChatRequest::parse(chat).unwrap();
        assert_eq!(parsed.forced_tool_call(), None);
    }

    #[test]
    fn what_cannot_reach_the_upstream_is_refused_by_name() {
        let plain = json!({"input": [{"type": "message", "role": "user",
                                      "content": [{"type": "input_text", "text": "hi"}]},
                                     {"type": "message", "role": "assistant",
                                      "content": [{"type": "refusal", "refusal": "no"}]}],
                           "tools": [{"type": "function", "name": "f"}],
                           "text": {"format": {"type": "text"}},
                           "conversation": null, "prompt": null});
        assert_eq!(super::unsupported_in_request(&plain), None);
        // Text parts in a function call's output go through.
        let text_output = json!({"input": [{"type": "function_call_output", "call_id": "c1",
                                            "output": [{"type": "input_text", "text": "ok"}]}]});
        assert_eq!(super::unsupported_in_request(&text_output), None);
        let cases = [
            (
                json!({"input": "hi", "tools": [{"type": "web_search"}]}),
                "`web_search`",
            ),
            (
                json!({"input": "hi", "text": {"format": {"type": "json_schema"}}}),
                "`json_schema`",
            ),
            (
                json!({"input": [{"type": "reasoning", "summary": []}]}),
                "`reasoning`",
            ),
            (
                json!({"input": "hi", "conversation": "conv_123"}),
                "`conversation`",
            ),
            (
                json!({"input": "hi", "conversation": {"id": "conv_123"}}),
                "`conversation`",
            ),
            (
                json!({"input": "hi", "prompt": {"id": "pmpt_1", "version": "2"}}),
                "`prompt`",
            ),
            (
                json!({"input": [{"role": "user", "content": [{"type": "input_image", "image_url": "x"}]}]}),
                "`input_image`",
            ),
            // A function call's output as parts: an image in it was dropped, not refused.
            (
                json!({"input": [{"role": "user", "content": "What do I pay?"},
                                 {"type": "function_call", "call_id": "c1", "name": "scan", "arguments": "{}"},
                                 {"type": "function_call_output", "call_id": "c1",
                                  "output": [{"type": "input_text", "text": "scan:"},
                                             {"type": "input_image", "image_url": "data:x"}]}]}),
                "`input_image`",
            ),
        ];
        for (req, named) in cases {
            let why = super::unsupported_in_request(&req).expect("refused");
            assert!(why.contains(named), "{why}");
        }
    }

    use super::*;

    #[test]
    fn a_legacy_function_call_is_an_item_and_a_cut_off_reply_is_incomplete() {
        let legacy = json!({"model": "gpt", "choices": [{"finish_reason": "function_call",
            "message": {"role": "assistant", "content": null,
            "function_call": {"name": "price", "arguments": "{\"age\":70}"}}}]});
        let out = tool_call_response(&legacy, json!({}));
        let items = out["output"].as_array().unwrap();
        assert_eq!(items.len(), 1, "{out}");
        assert_eq!(items[0]["type"], "function_call");
        assert_eq!(items[0]["name"], "price");
        assert_eq!(items[0]["arguments"], "{\"age\":70}");
        assert!(items[0]["call_id"].as_str().unwrap().starts_with("call_"));
        assert_eq!(out["status"], "completed");
        let cut = json!({"model": "gpt", "choices": [{"finish_reason": "length",
            "message": {"role": "assistant", "content": null, "tool_calls": [{"id": "call_1",
            "type": "function", "function": {"name": "price", "arguments": "{\"age\": 7"}}]}}]});
        let out = tool_call_response(&cut, json!({}));
        assert_eq!(out["status"], "incomplete", "{out}");
        assert_eq!(out["incomplete_details"]["reason"], "max_output_tokens");
        assert_eq!(out["output"][0]["call_id"], "call_1");
        assert_eq!(out["output"][0]["arguments"], "{\"age\": 7");
        let events = response_events(&out);
        assert_eq!(events.last().unwrap().0, "response.incomplete");
    }

    #[test]
    fn requests_with_tool_outputs_become_chat_messages() {
        let chat = chat_from_request(&json!({
            "model": "m", "instructions": "Be brief.", "max_output_tokens": 100,
            "tools": [{"type": "function", "name": "price", "parameters": {"type": "object"}}],
            "input": [
                {"role": "user", "content": "How much at 70?"},
                {"type": "function_call", "call_id": "call_1", "name": "price", "arguments": "{\"age\":70}"},
                {"type": "function_call_output", "call_id": "call_1", "output": "$30"}
            ]
        }));
        assert_eq!(chat["messages"][0]["content"], "Be brief.");
        assert_eq!(
            chat["messages"][2]["tool_calls"][0]["function"]["name"],
            "price"
        );
        assert_eq!(chat["messages"][3]["role"], "tool");
        assert_eq!(chat["max_completion_tokens"], 100);
        assert!(chat.get("max_tokens").is_none(), "{chat}");
        assert_eq!(chat["tools"][0]["function"]["name"], "price");
        let s = chat_from_request(&json!({"model": "m", "input": "Hi"}));
        assert_eq!(s["messages"][0], json!({"role": "user", "content": "Hi"}));
        let r = chat_from_request(&json!({"model": "gpt-5", "input": "Hi",
            "reasoning": {"effort": "high", "summary": "auto"}}));
        assert_eq!(r["reasoning_effort"], "high");
        assert!(!r.to_string().contains("summary"), "{r}");
    }

    #[test]
    fn a_streamed_function_call_names_its_tool_when_done() {
        let completion = json!({"model": "m", "choices": [{"finish_reason": "tool_calls",
            "message": {"role": "assistant", "content": null, "tool_calls": [
                {"id": "call_a-sentence-in-an-id", "type": "function",
                 "function": {"name": "price", "arguments": "{\"age\":70}"}}]}}]});
        let r = tool_call_response(&completion, json!({"verdict": "TOOL_CALL"}));
        assert!(!r.to_string().contains("sentence"), "{r}");
        let events = response_events(&r);
        let (_, done) = events
            .iter()
            .find(|(e, _)| e == "response.function_call_arguments.done")
            .unwrap();
        let done: Value = serde_json::from_str(done).unwrap();
        assert_eq!(done["name"], "price");
        assert_eq!(done["arguments"], "{\"age\":70}");
    }

    #[test]
    fn events_rebuild_the_verified_text() {
        let r = verified_response(
            &json!({"model": "m", "usage": {"prompt_tokens": 2, "completion_tokens": 3}}),
            &"x".repeat(100),
            json!({"verdict": "VALID"}),
        );
        assert_eq!(r["output"][0]["content"][0]["type"], "output_text");
        assert_eq!(r["usage"]["total_tokens"], 5);
        let events = response_events(&r);
        assert_eq!(events[0].0, "response.created");
        assert_eq!(events.last().unwrap().0, "response.completed");
        let text: String = events
            .iter()
            .filter(|(e, _)| e == "response.output_text.delta")
            .map(|(_, d)| {
                serde_json::from_str::<Value>(d).unwrap()["delta"]
                    .as_str()
                    .unwrap()
                    .to_string()
            })
            .collect();
        assert_eq!(text, "x".repeat(100));
        assert!(!events[0].1.contains("proofgate"));
    }
}

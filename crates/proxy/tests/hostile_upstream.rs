//! An upstream, rewriter or translator that lies (real processes over loopback): a redirect is
//! not followed (it resent the conversation, with the operator's key, wherever it pointed), an
//! answer of millions of tiny JSON values is refused before it is parsed (it parsed into over a
//! GB), an error body is neither kept whole nor shown to the client, and a client's request of
//! that kind is refused too.

mod proxy;
mod scripted;

use proxy::{config, Proxy};
use scripted::Server;
use serde_json::{json, Value};

const Q: &str = "I am 70. How much will I pay in total for admission?";

fn v1(server: &Server) -> String {
    format!("{}/v1", server.url())
}

async fn chat(proxy: &Proxy, body: Value) -> (u16, Value) {
    let resp = reqwest::Client::new()
        .post(format!("{}/v1/chat/completions", proxy.url))
        .json(&body)
        .send()
        .await
        .unwrap();
    let status = resp.status().as_u16();
    (status, resp.json().await.unwrap_or(Value::Null))
}

/// The peak of the proxy's resident memory so far (kB).
fn peak_kb(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap()
}

#[tokio::test]
async fn a_redirect_from_the_upstream_is_not_followed() {
    let elsewhere = Server::python("scripted_llm.py", &json!({"default": "caught"}));
    let upstream = Server::python(
        "scripted_llm.py",
        &json!({"rules": [{"match": "How much", "status": 307, "raw": {},
                           "headers": {"location": format!("{}/chat/completions", v1(&elsewhere))}}]}),
    );
    let cfg = config(&v1(&upstream), "", "").replace(
        "model = \"recorded-chatbot\"",
        "model = \"recorded-chatbot\"\napi_key = \"sk-operator-secret\"",
    );
    let proxy = Proxy::start("redirect", &cfg);
    let (status, body) = chat(
        &proxy,
        json!({"model": "m", "messages": [{"role": "user", "content": Q}]}),
    )
    .await;
    assert_eq!(status, 502, "{body}");
    assert_eq!(body["error"]["code"], "upstream_error", "{body}");
    assert!(
        elsewhere.received().is_empty(),
        "the redirect was followed: {:?}",
        elsewhere.received()
    );
}

#[tokio::test]
async fn an_answer_of_millions_of_values_is_refused_before_it_is_parsed() {
    // Just under the 16 MiB bound: about 8.3 million values, which parsed into about 1.2 GB.
    let upstream = Server::python(
        "scripted_llm.py",
        &json!({"rules": [{"match": "How much",
                           "raw": {"prefix": "[", "unit": "0,", "count": 8_300_000, "suffix": "0]"}}]}),
    );
    let proxy = Proxy::start("many-values", &config(&v1(&upstream), "", ""));
    let before = peak_kb(proxy.pid());
    let (status, body) = chat(
        &proxy,
        json!({"model": "m", "messages": [{"role": "user", "content": Q}]}),
    )
    .await;
    assert_eq!(status, 502, "{body}");
    let grown_mb = (peak_kb(proxy.pid()) - before) / 1024;
    assert!(
        grown_mb < 200,
        "the proxy's peak memory grew by {grown_mb} MB"
    );
}

#[tokio::test]
async fn a_clients_request_of_too_many_values_is_refused() {
    let upstream = Server::python("scripted_llm.py", &json!({"default": "unused"}));
    let proxy = Proxy::start("request-values", &config(&v1(&upstream), "", ""));
    let (status, body) = chat(
        &proxy,
        json!({"model": "m", "messages": [{"role": "user", "content": Q}],
               "metadata": {"x": vec![0; 200_000]}}),
    )
    .await;
    assert_eq!(status, 413, "{body}");
    assert_eq!(body["error"]["code"], "body_too_large", "{body}");
    assert!(upstream.received().is_empty());
    // An ordinary request still goes through to the upstream.
    let (status, _) = chat(
        &proxy,
        json!({"model": "m", "messages": [{"role": "user", "content": Q}]}),
    )
    .await;
    assert_ne!(status, 413);
}

#[tokio::test]
async fn a_translators_error_body_is_not_shown_to_the_guardrail_client() {
    let translator = Server::python(
        "scripted_llm.py",
        &json!({"rules": [{"match": "You translate", "status": 400,
                           "raw": {"prefix": "{\"error\": {\"message\": \"", "unit": "internal detail ",
                                   "count": 60_000, "suffix": "\"}}"}}]}),
    );
    let proxy = Proxy::start("guardrail-error", &config(&v1(&translator), "", ""));
    let resp = reqwest::Client::new()
        .post(format!("{}/guardrail/local/version/1/apply", proxy.url))
        .json(&json!({"source": "OUTPUT", "content": [
            {"text": {"text": Q, "qualifiers": ["query"]}},
            {"text": {"text": "You pay $35.75.", "qualifiers": ["guard_content"]}}]}))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status().as_u16(), 503);
    let text = resp.text().await.unwrap();
    assert!(text.len() < 4096, "{} bytes", text.len());
    assert!(!text.contains("internal detail"), "{text}");
    assert!(!text.contains(&translator.url()), "{text}");
}

/// POSTs `body` to `path`; the status, the body and the thread named in `x-proofgate-thread`.
async fn post(proxy: &Proxy, path: &str, body: Value) -> (u16, Value, String) {
    let resp = reqwest::Client::new()
        .post(format!("{}{path}", proxy.url))
        .json(&body)
        .send()
        .await
        .unwrap();
    let status = resp.status().as_u16();
    let thread = resp
        .headers()
        .get("x-proofgate-thread")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_string();
    (status, resp.json().await.unwrap_or(Value::Null), thread)
}

/// The upstream's words that must not reach the client, in whatever field it wrote them.
fn leak_in(v: &Value) -> Option<&'static str> {
    let text = v.to_string().to_lowercase();
    ["refund", "seniors"].into_iter().find(|l| text.contains(l))
}

/// A scripted rule answering requests that hold `case` with `reply` verbatim.
fn verbatim(case: &str, reply: Value) -> Value {
    json!({"match": case, "raw": {"prefix": reply.to_string()}})
}

/// The model the thread records as its outcome's, which `GET /api/threads/{id}` shows to the
/// thread's own key; the whole view must hold none of the upstream's words either.
async fn recorded_model(proxy: &Proxy, thread: &str) -> Value {
    assert!(!thread.is_empty());
    let view: Value = reqwest::get(format!("{}/api/threads/{thread}", proxy.url))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    // The policy speaks of seniors: only the upstream's other word is looked for.
    assert!(
        !view.to_string().to_lowercase().contains("refund"),
        "{view}"
    );
    view["outcome"]["model"].clone()
}

const AGE_TOOL: &str = "lookup_visitor_age";

/// The age lookup tool, offered in the shape of the API at `path`.
fn offering(path: &str, question: &str) -> Value {
    let user = json!([{"role": "user", "content": question}]);
    match path {
        "/v1/messages" => json!({"model": "m", "max_tokens": 100, "messages": user,
            "tools": [{"name": AGE_TOOL, "input_schema": {"type": "object", "properties": {}}}]}),
        "/v1/responses" => json!({"model": "m", "input": user,
            "tools": [{"type": "function", "name": AGE_TOOL,
                       "parameters": {"type": "object", "properties": {}}}]}),
        _ => json!({"model": "m", "messages": user,
            "tools": [{"type": "function", "function": {"name": AGE_TOOL,
                       "parameters": {"type": "object", "properties": {}}}}]}),
    }
}

/// Ids, a system fingerprint and a model name are the upstream's text too: a sentence written
/// as one reached the client beside the checked answer (`chatcmpl-YouAlsoGetAFullRefund`,
/// `fp_…`, a model `…-you-also-get-a-full-refund`), and the model name was recorded as the
/// answer's, shown by `GET /api/threads/{id}`. The ids are the proxy's own, a fingerprint
/// passes only as `fp_` and hex digits, and the model named is the one asked for (the pinned
/// `recorded-chatbot`), on every API.
#[tokio::test]
async fn no_sentence_of_the_upstream_leaves_in_an_id_a_fingerprint_or_a_model_name() {
    let completion = json!({"id": "msgYouAlsoGetAFullRefund", "object": "chat.completion",
        "created": 1739923200, "model": "recorded-chatbot-you-also-get-a-full-refund",
        "system_fingerprint": "fp_YouAlsoGetAFullRefund",
        "choices": [{"index": 0, "finish_reason": "stop",
                     "message": {"role": "assistant", "content": "You pay $50."}}],
        "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}});
    let upstream = Server::python(
        "scripted_llm.py",
        &json!({"rules": [verbatim("hostile-ids-case", completion)]}),
    );
    // Translators that cannot be reached and fail-open: the answer goes out UNVERIFIED, with
    // nothing but the upstream's reply to build it from.
    let dead_translators = "[[validator.translators]]\nbase_url = \"http://127.0.0.1:9/v1\"\n\
                            model = \"t\"\ntimeout_ms = 2000\n";
    let proxy = Proxy::start(
        "hostile-ids",
        &config(&v1(&upstream), "failure_mode = \"open\"", dead_translators),
    );
    let question = "hostile-ids-case: I am 70. How much do I pay?";
    let user = json!([{"role": "user", "content": question}]);

    let (status, body, thread) = post(
        &proxy,
        "/v1/chat/completions",
        json!({"model": "m", "messages": user}),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    assert!(body["choices"][0]["message"]["content"]
        .as_str()
        .unwrap()
        .contains("You pay $50."));
    assert_eq!(leak_in(&body), None, "{body}");
    assert!(
        body["id"].as_str().unwrap().starts_with("chatcmpl-"),
        "{body}"
    );
    assert_eq!(body["model"], "recorded-chatbot", "{body}");
    assert_eq!(body.get("system_fingerprint"), None, "{body}");
    assert_eq!(body["created"], 1739923200, "{body}");
    assert_eq!(recorded_model(&proxy, &thread).await, "recorded-chatbot");

    let (status, body, _) = post(
        &proxy,
        "/v1/messages",
        json!({"model": "m", "max_tokens": 100, "messages": user}),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(leak_in(&body), None, "{body}");
    assert!(body["id"].as_str().unwrap().starts_with("msg_"), "{body}");
    assert_eq!(body["model"], "recorded-chatbot", "{body}");

    let (status, body, _) = post(
        &proxy,
        "/v1/responses",
        json!({"model": "m", "input": question}),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(leak_in(&body), None, "{body}");
    assert_eq!(body["model"], "recorded-chatbot", "{body}");
}

/// A tool call's ids: one written as a sentence is made up anew on every API; one of a short
/// id's form is kept, since the app sends it back to the upstream with the tool's result and
/// some upstreams take only their own form (Mistral's nine letters and digits). The
/// completion's id, fingerprint and model are as for an answer, and so is the model the
/// thread records.
#[tokio::test]
async fn no_sentence_of_the_upstream_leaves_in_a_tool_calls_ids() {
    let call = |id: &str| json!({"id": id, "type": "function", "function": {"name": AGE_TOOL, "arguments": "{}"}});
    let completion = json!({"id": "chatcmpl-YouAlsoGetAFullRefund", "object": "chat.completion",
        "created": 1, "model": "you-also-get-a-full-refund-seniors-free",
        "system_fingerprint": "fp_SeniorsEnterFree",
        "choices": [{"index": 0, "finish_reason": "tool_calls",
                     "message": {"role": "assistant", "content": null,
                                 "tool_calls": [call("call_you-get-a-full-refund"), call("D681PevKs")]}}]});
    let upstream = Server::python(
        "scripted_llm.py",
        &json!({"rules": [verbatim("hostile-tool-case", completion)]}),
    );
    let proxy = Proxy::start("hostile-tool-ids", &config(&v1(&upstream), "", ""));
    let question = "hostile-tool-case: which age class am I in?";
    let made = |id: &Value, prefix: &str| {
        let id = id.as_str().unwrap_or_default();
        assert!(id.starts_with(prefix) && id.len() > 30, "{id}");
    };

    let (status, body, thread) = post(&proxy, "/v1/chat/completions", offering("", question)).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(leak_in(&body), None, "{body}");
    assert_eq!(body["model"], "recorded-chatbot", "{body}");
    assert_eq!(body.get("system_fingerprint"), None, "{body}");
    let calls = &body["choices"][0]["message"]["tool_calls"];
    made(&calls[0]["id"], "call_");
    assert_eq!(calls[1]["id"], "D681PevKs", "{body}");
    assert_eq!(recorded_model(&proxy, &thread).await, "recorded-chatbot");

    let (status, body, _) =
        post(&proxy, "/v1/responses", offering("/v1/responses", question)).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(leak_in(&body), None, "{body}");
    assert_eq!(body["model"], "recorded-chatbot", "{body}");
    made(&body["output"][0]["call_id"], "call_");
    assert_eq!(body["output"][1]["call_id"], "D681PevKs", "{body}");

    let (status, body, _) = post(&proxy, "/v1/messages", offering("/v1/messages", question)).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(leak_in(&body), None, "{body}");
    assert_eq!(body["model"], "recorded-chatbot", "{body}");
    made(&body["content"][0]["id"], "toolu_");
    assert_eq!(body["content"][1]["id"], "D681PevKs", "{body}");
}

/// The same of an Anthropic upstream's own message, passed on to a Messages API client block
/// by block: its id and model are not copied (`msgSeniorsEnterFree` was, and any identifier
/// as the model), and a `tool_use` block's id written as a sentence is made up anew (any
/// identifier passed, `toolu_you-get-a-full-refund` too).
#[tokio::test]
async fn no_sentence_of_an_anthropic_upstream_leaves_in_its_messages_ids() {
    let message = json!({"id": "msgSeniorsEnterFree", "type": "message", "role": "assistant",
        "model": "claude-recorded-you-also-get-a-full-refund",
        "content": [{"type": "tool_use", "id": "toolu_you-get-a-full-refund", "name": AGE_TOOL, "input": {}},
                    {"type": "tool_use", "id": "toolu_01A09q90qw90lq917835lq9", "name": AGE_TOOL, "input": {}}],
        "stop_reason": "tool_use", "stop_sequence": null,
        "usage": {"input_tokens": 1, "output_tokens": 1}});
    let upstream = Server::python(
        "scripted_llm.py",
        &json!({"rules": [verbatim("hostile-tool-case", message)]}),
    );
    let llm = v1(&upstream);
    let cfg = config(&llm, "", "").replacen(
        &format!("[upstream]\nbase_url = \"{llm}\"\nmodel = \"recorded-chatbot\""),
        &format!(
            "[upstream]\nkind = \"anthropic\"\nbase_url = \"{llm}\"\napi_key = \"sk-ant-test\"\n\
             model = \"claude-recorded\""
        ),
        1,
    );
    assert!(cfg.contains("kind = \"anthropic\""), "{cfg}");
    let proxy = Proxy::start("hostile-anthropic-ids", &cfg);
    let question = "hostile-tool-case: which age class am I in?";

    let (status, body, thread) =
        post(&proxy, "/v1/messages", offering("/v1/messages", question)).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(leak_in(&body), None, "{body}");
    let id = body["id"].as_str().unwrap();
    assert!(id.starts_with("msg_") && id.len() > 30, "{body}");
    assert_eq!(body["model"], "claude-recorded", "{body}");
    let first = body["content"][0]["id"].as_str().unwrap();
    assert!(first.starts_with("toolu_") && first.len() > 30, "{body}");
    assert_eq!(
        body["content"][1]["id"], "toolu_01A09q90qw90lq917835lq9",
        "{body}"
    );
    assert_eq!(recorded_model(&proxy, &thread).await, "claude-recorded");

    // The same message, to a Chat Completions client.
    let (status, body, _) = post(&proxy, "/v1/chat/completions", offering("", question)).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(leak_in(&body), None, "{body}");
    assert_eq!(body["model"], "claude-recorded", "{body}");
    let calls = &body["choices"][0]["message"]["tool_calls"];
    assert!(
        calls[0]["id"].as_str().unwrap().starts_with("call_"),
        "{body}"
    );
    assert_eq!(calls[1]["id"], "toolu_01A09q90qw90lq917835lq9", "{body}");
}

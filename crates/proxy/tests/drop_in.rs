//! proofgate in front of an ordinary modern chatbot (issue 13), end to end over loopback with
//! real processes: the official `openai` and `anthropic` Python clients
//! (tests/e2e/drop_in_clients.py) against two `proofgate serve`, one with an OpenAI-shaped
//! and one with an Anthropic-shaped scripted upstream. Tool calls pass through, tool results
//! and earlier turns reach the translators, rewrites are made in the app's own request, one
//! 429 from the upstream, the rewriter or a translator is retried, a persistent 5xx fails
//! closed, n > 1 is refused, and the Responses and Messages APIs answer verified.

mod proxy;
mod scripted;

use proxy::{config, Proxy};
use scripted::{repo_root, Server};
use serde_json::{json, Value};

const SENIOR: &str = "As a visitor aged 70 you are in the senior age class.";
const SYSTEM: &str =
    "You are ParkBot, the park's assistant. Always answer in English, in one sentence.";

fn pair(premises: Value, claims: &[&str]) -> String {
    json!({"pairs": [{"premises": premises, "claims": claims}],
           "untranslatedPremises": [], "untranslatedClaims": []})
    .to_string()
}

/// The visitor's age as a premise citing the turn that says 70 (the scripted LLM fills in
/// its number; 0, which cites nothing, when no user, system or tool turn says it).
fn age_70() -> Value {
    json!([{"logic": "(= customerAge 70)", "naturalLanguage": "The visitor is 70 (turn {turn:70})"}])
}

fn script() -> Value {
    let senior = pair(age_70(), &["(= ageClass SENIOR)"]);
    json!({"rules": [
        // Translators.
        {"match": ["You translate", "earlier-case", "I am 70 years old", "your age class is senior"],
         "reply": pair(json!([{"logic": "(= customerAge 70)", "naturalLanguage": "The visitor is 70 (turn 2)"}]),
                       &["(= ageClass SENIOR)"])},
        // Without the earlier turn the age is unknown: SATISFIABLE, and a follow-up question.
        {"match": ["You translate", "your age class is senior"],
         "reply": pair(json!([]), &["(= ageClass SENIOR)"])},
        {"match": ["You translate", "retry-translator-case"], "status": 429, "times": 1,
         "retry_after": "0", "reply": "rate limited"},
        {"match": ["You translate", "visitor age is 70", "senior age class"], "reply": senior},
        {"match": ["You translate", "senior age class"], "unless": ["tool-case"], "reply": senior},
        {"match": ["You translate", "you are an adult"],
         "reply": pair(age_70(), &["(= ageClass ADULT)"])},
        // The rewriter: one 429, then the rewrite.
        {"match": ["DECISION", "rewrite-case"], "status": 429, "times": 1, "reply": "slow down"},
        {"match": ["DECISION", "rewrite-case"], "reply": format!("DECISION: REWRITE\nANSWER: {SENIOR}")},
        // The chatbot (OpenAI- and Anthropic-shaped).
        {"match": "foreign-tool-case", "reply": "",
         "tool_calls": [{"id": "call_pay1", "name": "transfer_funds", "arguments": {"amount": 100}}]},
        {"match": "tool-case", "unless": ["visitor age is 70"], "reply": "",
         "tool_calls": [{"id": "call_age1", "name": "lookup_visitor_age", "arguments": {}}]},
        // The legacy `function_call`, and tool calls cut off at the token limit.
        {"match": "legacy-fn-case", "reply": "",
         "message_extra": {"content": null,
                           "function_call": {"name": "price", "arguments": "{\"age\":70}"}},
         "choice_extra": {"finish_reason": "function_call"}},
        {"match": "truncated-call-case", "reply": "",
         "message_extra": {"content": null, "tool_calls": [{"id": "call_cut", "type": "function",
             "function": {"name": "price", "arguments": "{\"age\": 70, \"note\": \"trunc"}}]},
         "choice_extra": {"finish_reason": "length"}},
        {"match": "earlier-case", "reply": "Then your age class is senior."},
        {"match": "rewrite-case", "reply": "You are an adult."},
        {"match": "retry-upstream-case", "status": 429, "times": 1, "retry_after": "0",
         "reply": "rate limited"},
        {"match": "always-down-case", "status": 503, "reply": "down for maintenance"},
        {"match": "-case", "reply": SENIOR}
    ]})
}

fn anthropic_config(llm: &str) -> String {
    config(&format!("{llm}/v1"), "", "").replacen(
        &format!("[upstream]\nbase_url = \"{llm}/v1\"\nmodel = \"recorded-chatbot\""),
        &format!(
            "[upstream]\nkind = \"anthropic\"\nbase_url = \"{llm}/v1\"\napi_key = \"sk-ant-test\"\nmodel = \"claude-recorded\""
        ),
        1,
    )
}

fn text_of(request: &Value) -> String {
    request["body"]["messages"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|m| m["content"].to_string())
        .collect::<Vec<_>>()
        .join("\n")
}

fn metric(metrics: &str, name: &str) -> f64 {
    metrics
        .lines()
        .find(|l| l.starts_with(name))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse().ok())
        .unwrap_or(0.0)
}

#[test]
fn official_clients_use_proofgate_as_a_drop_in() {
    let llm = Server::python("scripted_llm.py", &script());
    let openai_proxy = Proxy::start(
        "drop-in-openai",
        &config(&format!("{}/v1", llm.url()), "", ""),
    );
    let anthropic_config = anthropic_config(&llm.url());
    assert!(anthropic_config.contains("kind = \"anthropic\""));
    let anthropic_proxy = Proxy::start("drop-in-anthropic", &anthropic_config);
    // The same two with no model pinned: their model lists are the upstream's.
    let pinned = "\nmodel = \"recorded-chatbot\"\n\n[rewriter]";
    let openai_config = config(&format!("{}/v1", llm.url()), "", "");
    assert!(openai_config.contains(pinned));
    let unpinned_openai = Proxy::start(
        "drop-in-openai-unpinned",
        &openai_config.replacen(pinned, "\n\n[rewriter]", 1),
    );
    let unpinned_anthropic = Proxy::start(
        "drop-in-anthropic-unpinned",
        &anthropic_config.replacen("\nmodel = \"claude-recorded\"", "", 1),
    );

    let out = std::process::Command::new("python3")
        .arg(repo_root().join("tests/e2e/drop_in_clients.py"))
        .arg(&openai_proxy.url)
        .arg(&anthropic_proxy.url)
        .arg(&unpinned_openai.url)
        .arg(&unpinned_anthropic.url)
        .output()
        .expect("python3 runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "stdout:\n{stdout}\nstderr:\n{stderr}");
    assert!(stdout.contains("all drop-in checks passed"), "{stdout}");

    let received = llm.received();
    // The model lists were asked for with the upstream's own credentials and API version.
    let lists: Vec<&Value> = received.iter().filter(|r| r["method"] == "GET").collect();
    assert!(
        lists
            .iter()
            .any(|r| r["x-api-key"] == "sk-ant-test" && r["anthropic-version"].is_string()),
        "{lists:?}"
    );
    assert!(
        lists
            .iter()
            .all(|r| r["x-api-key"].is_string() || r["authorization"] == "Bearer unused-no-auth"),
        "{lists:?}"
    );
    // The translators received the tool result and the earlier turn.
    let translators: Vec<&Value> = received
        .iter()
        .filter(|r| text_of(r).contains("You translate"))
        .collect();
    assert!(translators
        .iter()
        .any(|r| text_of(r).contains("tool-case") && text_of(r).contains("visitor age is 70")));
    assert!(translators
        .iter()
        .any(|r| text_of(r).contains("earlier-case") && text_of(r).contains("I am 70 years old")));
    // Every rewriter request is the app's own: its system prompt first, its temperature, no
    // tools, and proofgate's message last.
    let rewrites: Vec<&Value> = received
        .iter()
        .filter(|r| text_of(r).contains("DECISION"))
        .collect();
    assert!(rewrites.len() >= 2, "the 429 and its retry: {rewrites:?}");
    for r in &rewrites {
        let messages = r["body"]["messages"].as_array().unwrap();
        assert_eq!(
            messages[0],
            json!({"role": "system", "content": SYSTEM}),
            "{r}"
        );
        assert!(r["body"].get("tools").is_none(), "{r}");
        assert_eq!(r["body"]["stream"], false, "{r}");
        for key in r["body"]
            .as_object()
            .unwrap()
            .keys()
            .filter(|k| *k != "stream")
        {
            assert!(
                proofgate_proxy::llm::REWRITER_KEEPS.contains(&key.as_str()),
                "the rewriter got the client's {key}: {r}"
            );
        }
        let last = messages.last().unwrap()["content"].as_str().unwrap();
        assert!(
            last.starts_with("[This message is from proofgate"),
            "{last}"
        );
    }
    // The Anthropic upstream got its own API: x-api-key, anthropic-version, system, no stream.
    let anthropic: Vec<&Value> = received
        .iter()
        .filter(|r| r["path"].as_str().unwrap_or("").ends_with("/messages"))
        .collect();
    assert!(!anthropic.is_empty());
    for r in &anthropic {
        assert_eq!(r["x-api-key"], "sk-ant-test");
        assert_eq!(r["anthropic-version"], "2023-06-01");
        assert_eq!(r["body"]["system"], SYSTEM);
        assert!(r["body"].get("stream").is_none(), "{r}");
    }
    // A persistent 503 was tried 1 + max_retries (3) times, then failed closed.
    let down = received
        .iter()
        .filter(|r| text_of(r).contains("always-down-case"))
        .count();
    assert_eq!(down, 4);

    let metrics = std::process::Command::new("curl")
        .args(["-s", &format!("{}/metrics", openai_proxy.url)])
        .output()
        .expect("curl runs");
    let metrics = String::from_utf8_lossy(&metrics.stdout);
    for role in ["upstream", "rewriter", "translator"] {
        let n = metric(
            &metrics,
            &format!("proofgate_llm_retries_total{{llm=\"{role}\"}}"),
        );
        assert!(n >= 1.0, "{role} retries: {n}\n{metrics}");
    }
}

/// A chat request offering the age lookup tool, after `before`: the user's `question`, the
/// assistant's call of the tool with `arguments`, and its result (age 70).
fn age_lookup(before: Value, question: &str, arguments: &str) -> Value {
    let mut messages = before.as_array().cloned().unwrap_or_default();
    messages.extend([
        json!({"role": "user", "content": question}),
        json!({"role": "assistant", "content": null, "tool_calls": [{"id": "call_age1",
               "type": "function", "function": {"name": "lookup_visitor_age",
               "arguments": arguments}}]}),
        json!({"role": "tool", "tool_call_id": "call_age1", "content": "visitor age is 70"}),
    ]);
    json!({"model": "m",
           "tools": [{"type": "function", "function": {"name": "lookup_visitor_age",
                      "parameters": {"type": "object", "properties": {}}}}],
           "messages": messages})
}

/// A tool call in the app's own history whose arguments are no JSON object cannot go to an
/// Anthropic upstream (a tool_use block's input is an object): the request is refused naming
/// the call, and the upstream is not called with `{}` in its place.
#[tokio::test]
async fn a_history_call_with_arguments_that_are_no_object_is_refused_before_an_anthropic_upstream()
{
    let llm = Server::python("scripted_llm.py", &script());
    let proxy = Proxy::start("anthropic-bad-history", &anthropic_config(&llm.url()));
    let resp = reqwest::Client::new()
        .post(format!("{}/v1/chat/completions", proxy.url))
        .json(&age_lookup(
            json!([]),
            "bad-history-case: what is my age class?",
            "{\"ticket\": 12",
        ))
        .send()
        .await
        .unwrap();
    let status = resp.status();
    let body: Value = resp.json().await.unwrap();
    assert_eq!(status, 400, "{body}");
    assert!(body.to_string().contains("`lookup_visitor_age`"), "{body}");
    assert!(
        !llm.received()
            .iter()
            .any(|r| text_of(r).contains("bad-history-case")),
        "the upstream was called"
    );
}

#[tokio::test]
async fn an_anthropic_rewriter_rewrites_after_a_tool_call() {
    // Anthropic's API (and the scripted one, like it) refuses tool blocks without tools: the
    // rewriter's request drops the app's tools, so its tool turns must go as text.
    let llm = Server::python("scripted_llm.py", &script());
    let url = llm.url();
    let cfg = anthropic_config(&url).replacen(
        &format!("[rewriter]\nbase_url = \"{url}/v1\"\nmodel = \"recorded-rewriter\""),
        &format!(
            "[rewriter]\nkind = \"anthropic\"\nbase_url = \"{url}/v1\"\napi_key = \"sk-ant-test\"\nmodel = \"claude-rewriter\""
        ),
        1,
    );
    assert!(cfg.contains("claude-rewriter"), "{cfg}");
    let proxy = Proxy::start("anthropic-rewriter-tools", &cfg);
    let resp = reqwest::Client::new()
        .post(format!("{}/v1/chat/completions", proxy.url))
        .json(&age_lookup(
            json!([{"role": "system", "content": SYSTEM}]),
            "tool-rewrite-case: what is my age class?",
            "{}",
        ))
        .send()
        .await
        .unwrap();
    let status = resp.status();
    let verdict = resp.headers()["x-proofgate-verdict"]
        .to_str()
        .unwrap()
        .to_string();
    let body: Value = resp.json().await.unwrap();
    assert_eq!(status, 200, "{body}");
    assert_eq!(verdict, "VALID", "{body}");
    assert_eq!(body["choices"][0]["message"]["content"], SENIOR, "{body}");
    let rewrites: Vec<Value> = llm
        .received()
        .into_iter()
        .filter(|r| r["body"]["model"] == "claude-rewriter" && text_of(r).contains("DECISION"))
        .collect();
    assert!(!rewrites.is_empty());
    for r in &rewrites {
        assert!(r["path"].as_str().unwrap().ends_with("/messages"), "{r}");
        let text = r["body"]["messages"].to_string();
        assert!(
            text.contains("[called the tool lookup_visitor_age"),
            "{text}"
        );
        assert!(text.contains("visitor age is 70"), "{text}");
    }
}

/// A request that forces a tool call is refused by default (the 400 is the Python clients'
/// check); with `[loop] allow_forced_tool_calls` the forced call passes through, unverified and
/// marked TOOL_CALL, and a call of a tool the request did not offer is still refused.
#[tokio::test]
async fn forced_tool_calls_pass_only_when_the_operator_allows_them() {
    let llm = Server::python("scripted_llm.py", &script());
    let url = llm.url();
    let ask = |proxy: &Proxy, question: &str, tool_choice: Value| {
        let url = format!("{}/v1/chat/completions", proxy.url);
        let body = json!({
            "model": "m",
            "tools": [{"type": "function", "function": {"name": "lookup_visitor_age",
                       "parameters": {"type": "object", "properties": {}}}}],
            "tool_choice": tool_choice,
            "messages": [{"role": "user", "content": question}]});
        async move {
            let resp = reqwest::Client::new()
                .post(url)
                .json(&body)
                .send()
                .await
                .unwrap();
            let status = resp.status().as_u16();
            let verdict = resp
                .headers()
                .get("x-proofgate-verdict")
                .map(|v| v.to_str().unwrap().to_string());
            (status, verdict, resp.json::<Value>().await.unwrap())
        }
    };
    let forced = json!({"type": "function", "function": {"name": "lookup_visitor_age"}});
    let refusing = Proxy::start(
        "forced-tools-refused",
        &config(&format!("{url}/v1"), "", ""),
    );
    let (status, _, body) = ask(&refusing, "tool-case: my age class?", forced.clone()).await;
    assert_eq!(status, 400, "{body}");
    assert_eq!(body["error"]["code"], "forced_tool_call", "{body}");
    let allowing = Proxy::start(
        "forced-tools-allowed",
        &config(
            &format!("{url}/v1"),
            "",
            "[loop]\nallow_forced_tool_calls = true\n",
        ),
    );
    let (status, verdict, body) = ask(&allowing, "tool-case: my age class?", forced).await;
    assert_eq!(
        (status, verdict.as_deref()),
        (200, Some("TOOL_CALL")),
        "{body}"
    );
    assert_eq!(
        body["choices"][0]["message"]["tool_calls"][0]["function"]["name"], "lookup_visitor_age",
        "{body}"
    );
    assert_eq!(body["proofgate"]["verified"], false, "{body}");
    let (status, _, body) = ask(
        &allowing,
        "foreign-tool-case: my age class?",
        json!("required"),
    )
    .await;
    assert_eq!(status, 502, "{body}");
    assert!(
        body.to_string().contains("did not offer") && body.to_string().contains("transfer_funds"),
        "{body}"
    );
}

/// A conversation that ends with the assistant's text (Anthropic's prefill, or vLLM's
/// `continue_final_message`) asks the upstream to continue that text: the app would show it
/// and the reply as one answer, of which proofgate verified only the reply. Refused with a 400
/// on every API before anything is sent upstream.
#[tokio::test]
async fn a_prefilled_assistant_turn_is_refused_before_the_upstream_is_called() {
    let llm = Server::python("scripted_llm.py", &script());
    let proxy = Proxy::start("prefill", &config(&format!("{}/v1", llm.url()), "", ""));
    let question = json!({"role": "user", "content": "I am 70. How much is my ticket?"});
    let prefill = json!({"role": "assistant", "content": "It is not true that"});
    let cases = [
        (
            "/v1/chat/completions",
            json!({"model": "m", "messages": [question, prefill]}),
        ),
        (
            "/v1/chat/completions",
            json!({"model": "m", "continue_final_message": true, "messages": [question]}),
        ),
        (
            "/v1/messages",
            json!({"model": "m", "max_tokens": 200, "messages": [question, prefill]}),
        ),
        (
            "/v1/responses",
            json!({"model": "m", "input": [question, prefill]}),
        ),
        // Behind a message an Anthropic or Bedrock upstream takes out of the turns, or a call
        // it does not carry, the assistant's text is still what the upstream continues.
        (
            "/v1/chat/completions",
            json!({"model": "m", "messages": [question, prefill, {"role": "system", "content": "Be brief."}]}),
        ),
        (
            "/v1/chat/completions",
            json!({"model": "m", "messages": [question, {"role": "assistant", "content": "It is not true that",
                "function_call": {"name": "f", "arguments": "{}"}}]}),
        ),
        (
            "/v1/responses",
            json!({"model": "m", "input": [question, prefill, {"role": "developer", "content": "Be brief."}]}),
        ),
        // Calls with no results: Bedrock sends them as the assistant's text.
        (
            "/v1/chat/completions",
            json!({"model": "m", "messages": [question, {"role": "assistant", "content": null,
                "tool_calls": [{"function": {"arguments": "It is not true that seniors"}}]}]}),
        ),
    ];
    for (path, body) in cases {
        let resp = reqwest::Client::new()
            .post(format!("{}{path}", proxy.url))
            .json(&body)
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), 400, "{path} {body}");
        let text = resp.text().await.unwrap();
        assert!(
            text.contains("continue the assistant's text"),
            "{path}: {text}"
        );
    }
    assert!(llm.received().is_empty(), "{:?}", llm.received());
}

/// `GET /v1/models` when the upstream's list fails: a 429 with `Retry-After` is retried, a
/// persistent 5xx is a 502 and a persistent 429 a 503 with `Retry-After` (in the error shape of
/// the SDK that asked), and a list that is no list is a 502, never passed on.
#[tokio::test]
async fn a_failing_upstream_model_list_maps_to_the_errors_sdks_retry() {
    let failures = json!([
        {"status": 429, "retry_after": "0"},
        {"status": 200, "body": "{\"object\": \"list\", \"data\": [{\"id\": \"recorded\"}]}"},
        // Every attempt of two requests (the first try and three retries each).
        {"status": 503, "times": 8},
        {"status": 429, "retry_after": "1", "times": 4},
        {"status": 200, "body": "{\"data\": 5}"},
        {"status": 200, "body": "{\"data\": [{\"id\": 7}]}"}
    ]);
    let llm = Server::python(
        "scripted_llm.py",
        &json!({"rules": [], "model_list": failures}),
    );
    let cfg = config(&format!("{}/v1", llm.url()), "", "").replacen(
        "\nmodel = \"recorded-chatbot\"\n\n[rewriter]",
        "\n\n[rewriter]",
        1,
    );
    assert!(!cfg.contains("recorded-chatbot"));
    let proxy = Proxy::start("models-failing", &cfg);
    let get = |anthropic: bool| {
        let mut req = reqwest::Client::new().get(format!("{}/v1/models", proxy.url));
        if anthropic {
            req = req.header("anthropic-version", "2023-06-01");
        }
        async move {
            let resp = req.send().await.unwrap();
            let status = resp.status().as_u16();
            let retry_after = resp
                .headers()
                .get("retry-after")
                .map(|v| v.to_str().unwrap().to_string());
            (status, retry_after, resp.json::<Value>().await.unwrap())
        }
    };

    let (status, _, body) = get(false).await;
    assert_eq!(status, 200, "the 429 was retried: {body}");
    assert_eq!(body["data"][0]["id"], "recorded", "{body}");

    let (status, _, body) = get(false).await;
    assert_eq!(status, 502, "{body}");
    assert_eq!(body["error"]["code"], "upstream_unavailable", "{body}");
    let (status, _, body) = get(true).await;
    assert_eq!(status, 502, "{body}");
    assert_eq!(body["type"], "error", "Anthropic's error shape: {body}");
    assert!(body["error"]["type"].is_string(), "{body}");

    let (status, retry_after, body) = get(false).await;
    assert_eq!(status, 503, "{body}");
    assert_eq!(body["error"]["code"], "upstream_throttled", "{body}");
    assert_eq!(retry_after.as_deref(), Some("1"), "{body}");

    for _ in 0..2 {
        let (status, _, body) = get(false).await;
        assert_eq!(status, 502, "{body}");
        assert_eq!(body["error"]["code"], "upstream_error", "{body}");
        assert!(
            body["error"]["message"]
                .as_str()
                .unwrap()
                .contains("model list"),
            "{body}"
        );
    }
    // Every failure above was used up as scripted: nothing was skipped or asked twice more.
    let lists = llm
        .received()
        .into_iter()
        .filter(|r| r["method"] == "GET")
        .count();
    assert_eq!(lists, 2 + 8 + 4 + 2, "upstream list calls");
}

/// The upstream's own answer cut at its token limit, or by its content filter, is verified as
/// it stands and goes out saying so, in each API's words (it went out as complete: `stop`,
/// `end_turn`, `completed`); a rewrite is complete.
#[tokio::test]
async fn an_answer_cut_short_upstream_says_so_in_every_api() {
    let llm = Server::python(
        "scripted_llm.py",
        &json!({"rules": [
            {"match": ["You translate", "senior age class"], "reply": pair(age_70(), &["(= ageClass SENIOR)"])},
            {"match": "cut-case", "reply": SENIOR, "choice_extra": {"finish_reason": "length"}},
            {"match": "filtered-case", "reply": SENIOR, "choice_extra": {"finish_reason": "content_filter"}},
            {"match": "whole-case", "reply": SENIOR}
        ]}),
    );
    let proxy = Proxy::start("cut-short", &config(&format!("{}/v1", llm.url()), "", ""));
    let post = |path: &'static str, body: Value| {
        let url = format!("{}{path}", proxy.url);
        async move {
            let r = reqwest::Client::new()
                .post(url)
                .json(&body)
                .send()
                .await
                .unwrap();
            assert_eq!(r.status(), 200);
            assert_eq!(r.headers()["x-proofgate-verdict"], "VALID");
            r.text().await.unwrap()
        }
    };
    for (case, finish, stop, reason) in [
        (
            "cut-case",
            "length",
            "max_tokens",
            Some("max_output_tokens"),
        ),
        (
            "filtered-case",
            "content_filter",
            "refusal",
            Some("content_filter"),
        ),
        ("whole-case", "stop", "end_turn", None),
    ] {
        let q = format!("I am 70. {case}: which age class am I in?");
        let chat: Value = serde_json::from_str(
            &post(
                "/v1/chat/completions",
                json!({"model": "m", "messages": [{"role": "user", "content": q}]}),
            )
            .await,
        )
        .unwrap();
        assert_eq!(chat["choices"][0]["finish_reason"], finish, "{chat}");
        assert_eq!(chat["choices"][0]["message"]["content"], SENIOR);
        let events = post(
            "/v1/chat/completions",
            json!({"model": "m", "stream": true, "messages": [{"role": "user", "content": q}]}),
        )
        .await;
        assert!(
            events.contains(&format!("\"finish_reason\":\"{finish}\"")),
            "{events}"
        );
        let message: Value = serde_json::from_str(
            &post(
                "/v1/messages",
                json!({"model": "m", "max_tokens": 100, "messages": [{"role": "user", "content": q}]}),
            )
            .await,
        )
        .unwrap();
        assert_eq!(message["stop_reason"], stop, "{message}");
        let response: Value =
            serde_json::from_str(&post("/v1/responses", json!({"model": "m", "input": q})).await)
                .unwrap();
        match reason {
            Some(reason) => {
                assert_eq!(response["status"], "incomplete", "{response}");
                assert_eq!(response["incomplete_details"]["reason"], reason);
            }
            None => assert_eq!(response["status"], "completed", "{response}"),
        }
    }
}

/// The guard's own refusals on the Messages API (a body of the wrong type, an unknown route
/// such as `count_tokens`, a NUL) are in the Anthropic error shape the SDK reads, as the
/// handler's own errors are; they were in OpenAI's.
#[tokio::test]
async fn the_messages_apis_refusals_are_in_its_error_shape() {
    let llm = Server::python("scripted_llm.py", &json!({"rules": []}));
    let proxy = Proxy::start(
        "messages-errors",
        &config(&format!("{}/v1", llm.url()), "", ""),
    );
    let client = reqwest::Client::new();
    for (path, content_type, body, status) in [
        ("/v1/messages", "text/plain", "hi".to_string(), 415),
        (
            "/v1/messages/count_tokens",
            "application/json",
            "{}".to_string(),
            404,
        ),
        (
            "/v1/messages",
            "application/json",
            r#"{"model": "m", "max_tokens": 5, "messages": [{"role": "user", "content": "a\u0000b"}]}"#
                .to_string(),
            400,
        ),
    ] {
        let r = client
            .post(format!("{}{path}", proxy.url))
            .header("content-type", content_type)
            .header("anthropic-version", "2023-06-01")
            .body(body)
            .send()
            .await
            .unwrap();
        assert_eq!(r.status().as_u16(), status, "{path}");
        let body: Value = r.json().await.unwrap();
        assert_eq!(body["type"], "error", "{path}: {body}");
        let kind = match status {
            415 | 400 => "invalid_request_error",
            _ => "not_found_error",
        };
        assert_eq!(body["error"]["type"], kind, "{path}: {body}");
        assert!(body["error"]["message"].is_string(), "{path}: {body}");
    }
}

/// In front of an Anthropic upstream, a chat request's parameter the Messages API lacks is
/// refused naming it, before any call (it was dropped, and the answer made without it).
#[tokio::test]
async fn a_parameter_an_anthropic_upstream_lacks_is_refused() {
    let llm = Server::python("scripted_llm.py", &script());
    let proxy = Proxy::start("anthropic-lacks", &anthropic_config(&llm.url()));
    let r = reqwest::Client::new()
        .post(format!("{}/v1/chat/completions", proxy.url))
        .json(&json!({"model": "m", "seed": 7,
                      "messages": [{"role": "user", "content": "I am 70. plain-case?"}]}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 400);
    let body: Value = r.json().await.unwrap();
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .starts_with("`seed`"),
        "{body}"
    );
    assert!(llm.received().is_empty(), "nothing went upstream");
}

/// `[validator] tool_result_facts = false`: a tool's result states no fact, so the age a tool
/// looked up grounds nothing and the user is asked (in the policy's words); by default the
/// same conversation is VALID. The setting is recorded in the trail.
#[tokio::test]
async fn with_tool_facts_off_a_tools_result_grounds_nothing() {
    let mut rules = script();
    rules["rules"].as_array_mut().unwrap().insert(
        0,
        json!({"match": ["DECISION", "tool-facts-case"],
               "reply": "DECISION: ASK_QUESTIONS\nQUESTION: customerAge"}),
    );
    let llm = Server::python("scripted_llm.py", &rules);
    let cfg = config(&format!("{}/v1", llm.url()), "", "");
    let off = cfg.replace("[validator]\n", "[validator]\ntool_result_facts = false\n");
    assert!(off.contains("tool_result_facts = false"));
    let ask = |proxy: &Proxy| {
        reqwest::Client::new()
            .post(format!("{}/v1/chat/completions", proxy.url))
            .json(&age_lookup(
                json!([]),
                "tool-facts-case: what is my age class?",
                "{}",
            ))
            .send()
    };
    let on = Proxy::start("tool-facts-on", &cfg);
    let r = ask(&on).await.unwrap();
    assert_eq!(r.headers()["x-proofgate-verdict"], "VALID");
    let off = Proxy::start("tool-facts-off", &off);
    let r = ask(&off).await.unwrap();
    assert_eq!(r.headers()["x-proofgate-verdict"], "NEEDS_INPUT");
    let thread = r.headers()["x-proofgate-thread"]
        .to_str()
        .unwrap()
        .to_string();
    let body: Value = r.json().await.unwrap();
    let text = body["choices"][0]["message"]["content"].as_str().unwrap();
    assert!(text.contains("The visitor's age in years?"), "{text}");
    let trail: Value = reqwest::get(format!("{}/api/threads/{thread}/audit", off.url))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(
        trail[0]["body"]["config"]["translation"]["toolResultFacts"], false,
        "{}",
        trail[0]["body"]["config"]
    );
}

/// `[rewriter] context = "minimal"`: the rewriter gets proofgate's prompt alone, never the
/// app's system prompt, history or tool results (an operator keeping them from a rewriter
/// hosted elsewhere); the rewrite still goes out checked.
#[tokio::test]
async fn a_minimal_rewriter_gets_proofgates_prompt_alone() {
    let llm = Server::python("scripted_llm.py", &script());
    let cfg = config(&format!("{}/v1", llm.url()), "", "").replacen(
        "[rewriter]\n",
        "[rewriter]\ncontext = \"minimal\"\n",
        1,
    );
    assert!(cfg.contains("context = \"minimal\""));
    let proxy = Proxy::start("drop-in-minimal-rewriter", &cfg);
    let r = reqwest::Client::new()
        .post(format!("{}/v1/chat/completions", proxy.url))
        .json(&json!({"model": "m", "messages": [
            {"role": "system", "content": SYSTEM},
            {"role": "user", "content": "I am 70 years old."},
            {"role": "assistant", "content": "Noted, thanks."},
            {"role": "user", "content": "rewrite-case: which age class am I in?"}]}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let received = llm.received();
    let rewrites: Vec<&Value> = received
        .iter()
        .filter(|r| text_of(r).contains("DECISION"))
        .collect();
    assert!(!rewrites.is_empty(), "the rewriter was asked");
    for r in rewrites {
        let messages = r["body"]["messages"].as_array().unwrap();
        assert_eq!(messages.len(), 1, "{r}");
        assert_eq!(messages[0]["role"], "user", "{r}");
        assert!(
            !r.to_string().contains("ParkBot"),
            "the app's system prompt: {r}"
        );
        assert!(
            !r.to_string().contains("Noted, thanks"),
            "the app's history: {r}"
        );
    }
}

/// The notice goes before the text in every API: an answer with a part nothing checked (here a
/// phone number no translation reads) starts with "[proofgate: part of the answer is not
/// covered by the policy]" in Chat Completions (JSON and streamed), Responses and Messages.
#[tokio::test]
async fn the_notice_comes_first_in_every_api() {
    let llm = Server::python(
        "scripted_llm.py",
        &json!({"rules": [
            {"match": ["You translate", "notice-case"],
             "reply": pair(age_70(), &["(= ageClass SENIOR)"])},
            {"match": "notice-case",
             "reply": "You are in the senior age class. Call us on 555 0199."}
        ]}),
    );
    let proxy = Proxy::start(
        "drop-in-notice",
        &config(&format!("{}/v1", llm.url()), "", ""),
    );
    let question = "I am 70 years old. notice-case: which age class am I in?";
    let notice = "[proofgate: part of the answer is not covered by the policy]";
    let client = reqwest::Client::new();
    let send = |path: &str, body: Value| {
        client
            .post(format!("{}{path}", proxy.url))
            .json(&body)
            .send()
    };
    let chat: Value = send(
        "/v1/chat/completions",
        json!({"model": "m", "messages": [{"role": "user", "content": question}]}),
    )
    .await
    .unwrap()
    .json()
    .await
    .unwrap();
    assert_eq!(chat["proofgate"]["verdict"], "VALID_WITH_WARNING", "{chat}");
    let text = chat["choices"][0]["message"]["content"].as_str().unwrap();
    assert!(text.starts_with(notice), "{text}");
    assert!(text.contains("555 0199"), "{text}");
    let streamed = send(
        "/v1/chat/completions",
        json!({"model": "m", "stream": true, "messages": [{"role": "user", "content": question}]}),
    )
    .await
    .unwrap()
    .text()
    .await
    .unwrap();
    let deltas: String = streamed
        .lines()
        .filter_map(|l| l.strip_prefix("data: "))
        .filter_map(|d| serde_json::from_str::<Value>(d).ok())
        .filter_map(|v| {
            v["choices"][0]["delta"]["content"]
                .as_str()
                .map(str::to_string)
        })
        .collect();
    assert!(deltas.starts_with(notice), "{streamed}");
    let responses: Value = send("/v1/responses", json!({"model": "m", "input": question}))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let text = responses["output"][0]["content"][0]["text"]
        .as_str()
        .unwrap_or_default();
    assert!(text.starts_with(notice), "{responses}");
    let messages: Value = send(
        "/v1/messages",
        json!({"model": "m", "max_tokens": 200, "messages": [{"role": "user", "content": question}]}),
    )
    .await
    .unwrap()
    .json()
    .await
    .unwrap();
    let text = messages["content"][0]["text"].as_str().unwrap_or_default();
    assert!(text.starts_with(notice), "{messages}");
}

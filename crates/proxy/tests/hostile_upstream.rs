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

//! End-to-end, with API keys on (the default): the built `proofgate serve` in front of the
//! scripted LLM (recorded replies) over loopback. Who may call what, who owns which thread,
//! and what one caller can cost.

mod proxy;
mod scripted;

use proxy::{secured_config, Proxy, ADMIN_KEY};
use scripted::{repo_root, Server};
use serde_json::{json, Value};

const Q1: &str = "I am 70 and visit in the low season without credits. What is my admission fee after the senior discount?";
const Q2: &str = "I am 70. How much will I pay in total for admission?";
const ANSWER: &str = "Low season, and no credits.";

fn demo_llm() -> Server {
    let script: Value = serde_json::from_str(
        &std::fs::read_to_string(repo_root().join("examples/demo/recorded-llm.json")).unwrap(),
    )
    .unwrap();
    Server::python("scripted_llm.py", &script)
}

fn v1(server: &Server) -> String {
    format!("{}/v1", server.url())
}

#[derive(Debug)]
struct Reply {
    status: u16,
    headers: reqwest::header::HeaderMap,
    body: Value,
}

impl Reply {
    fn header(&self, name: &str) -> &str {
        self.headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
    }
    fn content(&self) -> &str {
        self.body["choices"][0]["message"]["content"]
            .as_str()
            .unwrap_or("")
    }
    fn code(&self) -> &str {
        self.body["error"]["code"].as_str().unwrap_or("")
    }
}

/// One request: `key` as `Authorization: Bearer`, `body` as JSON when given.
async fn call(
    proxy: &Proxy,
    method: reqwest::Method,
    path: &str,
    key: Option<&str>,
    body: Option<Value>,
    headers: &[(&str, &str)],
) -> Reply {
    let mut req = reqwest::Client::new().request(method, format!("{}{path}", proxy.url));
    if let Some(k) = key {
        req = req.bearer_auth(k);
    }
    if let Some(b) = body {
        req = req.json(&b);
    }
    for (k, v) in headers {
        req = req.header(*k, *v);
    }
    let resp = req.send().await.unwrap();
    let status = resp.status().as_u16();
    let headers = resp.headers().clone();
    let text = resp.text().await.unwrap_or_default();
    Reply {
        status,
        headers,
        body: serde_json::from_str(&text).unwrap_or(Value::String(text)),
    }
}

async fn get(proxy: &Proxy, path: &str, key: &str, headers: &[(&str, &str)]) -> Reply {
    call(proxy, reqwest::Method::GET, path, Some(key), None, headers).await
}

async fn post(proxy: &Proxy, path: &str, key: &str, body: Value) -> Reply {
    call(
        proxy,
        reqwest::Method::POST,
        path,
        Some(key),
        Some(body),
        &[],
    )
    .await
}

/// Revokes key `id` with the admin key.
async fn revoke(proxy: &Proxy, id: &str) -> Reply {
    call(
        proxy,
        reqwest::Method::DELETE,
        &format!("/api/keys/{id}"),
        Some(ADMIN_KEY),
        None,
        &[],
    )
    .await
}

/// An admin-made key with the given scopes; returns its secret.
async fn new_key(proxy: &Proxy, name: &str, scopes: &[&str]) -> String {
    let r = post(
        proxy,
        "/api/keys",
        ADMIN_KEY,
        json!({"name": name, "scopes": scopes}),
    )
    .await;
    assert_eq!(r.status, 201, "{r:?}");
    assert!(r.body["id"].as_str().unwrap().starts_with("key_"));
    r.body["key"].as_str().unwrap().to_string()
}

async fn chat(proxy: &Proxy, key: &str, body: Value, headers: &[(&str, &str)]) -> Reply {
    let mut body = body;
    body["model"] = json!("gpt-test");
    call(
        proxy,
        reqwest::Method::POST,
        "/v1/chat/completions",
        Some(key),
        Some(body),
        headers,
    )
    .await
}

fn first_turn(user: Option<&str>) -> Value {
    let mut b = json!({"messages": [{"role": "user", "content": Q2}]});
    if let Some(u) = user {
        b["user"] = json!(u);
    }
    b
}

fn second_turn(questions: &str, user: Option<&str>) -> Value {
    let mut b = json!({"messages": [
        {"role": "user", "content": Q2},
        {"role": "assistant", "content": questions},
        {"role": "user", "content": ANSWER}
    ]});
    if let Some(u) = user {
        b["user"] = json!(u);
    }
    b
}

/// A chat-only key reads the answer of a thread it ran in the background, its own only, and no
/// list nor trail (before, it started threads whose answers it could never read).
#[tokio::test]
async fn a_chat_key_reads_the_answer_of_its_own_background_thread() {
    let llm = demo_llm();
    let proxy = Proxy::start("auth-chat-reads", &secured_config(&v1(&llm), "", ""));
    let chatter = new_key(&proxy, "chatter", &["chat"]).await;
    let started = post(
        &proxy,
        "/api/threads",
        &chatter,
        json!({"question": Q1, "wait": false}),
    )
    .await;
    assert_eq!(started.status, 202, "{started:?}");
    let id = started.body["id"].as_str().unwrap().to_string();
    let mut view = Value::Null;
    for _ in 0..100 {
        let r = get(&proxy, &format!("/api/threads/{id}"), &chatter, &[]).await;
        assert_eq!(r.status, 200, "{r:?}");
        view = r.body;
        if view["status"] != "processing" {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert_eq!(view["status"], "done", "{view}");
    for path in [
        "/api/threads".to_string(),
        format!("/api/threads/{id}/audit"),
    ] {
        let r = get(&proxy, &path, &chatter, &[]).await;
        assert_eq!(r.status, 403, "{path}: {r:?}");
        assert!(r.body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("`read`"));
    }
    let other = new_key(&proxy, "other-chatter", &["chat"]).await;
    let r = get(&proxy, &format!("/api/threads/{id}"), &other, &[]).await;
    assert_eq!(r.status, 404, "{r:?}");
}

#[tokio::test]
async fn without_a_key_every_route_but_health_is_401_and_scopes_are_enforced() {
    let llm = demo_llm();
    let proxy = Proxy::start("auth-routes", &secured_config(&v1(&llm), "", ""));
    use reqwest::Method as M;
    let policy: Value = serde_json::from_str(
        &std::fs::read_to_string(repo_root().join("examples/policies/park-admission.json"))
            .unwrap(),
    )
    .unwrap();
    let routes: Vec<(M, &str, Option<Value>)> = vec![
        (
            M::POST,
            "/v1/chat/completions",
            Some(json!({"model": "m", "messages": [{"role": "user", "content": Q1}]})),
        ),
        (
            M::POST,
            "/v1/responses",
            Some(json!({"model": "m", "input": Q1})),
        ),
        (
            M::POST,
            "/v1/messages",
            Some(
                json!({"model": "m", "max_tokens": 64, "messages": [{"role": "user", "content": Q1}]}),
            ),
        ),
        (M::GET, "/v1/models", None),
        (M::GET, "/v1/models/m", None),
        (M::POST, "/v1/embeddings", Some(json!({"input": "x"}))),
        (
            M::POST,
            "/guardrail/local/version/1/apply",
            Some(json!({"source": "OUTPUT", "content": []})),
        ),
        (M::GET, "/api/threads", None),
        (M::POST, "/api/threads", Some(json!({"question": Q1}))),
        (M::GET, "/api/threads/some-id", None),
        (
            M::POST,
            "/api/threads/some-id/answers",
            Some(json!({"skip": true})),
        ),
        (M::GET, "/api/threads/some-id/audit", None),
        (M::GET, "/api/threads/some-id/audit/bundle", None),
        (M::GET, "/api/config", None),
        (M::GET, "/api/me", None),
        (M::GET, "/metrics", None),
        (M::GET, "/api/policies", None),
        (
            M::POST,
            "/api/policies/lint",
            Some(json!({"policy": policy.clone()})),
        ),
        (
            M::POST,
            "/api/policies/gen-tests",
            Some(json!({"policy": policy.clone()})),
        ),
        (
            M::POST,
            "/api/policies/test",
            Some(json!({"policy": policy.clone(), "tests": []})),
        ),
        (
            M::POST,
            "/api/policies/diff",
            Some(json!({"old": policy.clone(), "new": policy.clone()})),
        ),
        (
            M::POST,
            "/api/policies/formalize",
            Some(json!({"document": "x"})),
        ),
        (M::GET, "/api/keys", None),
        (
            M::POST,
            "/api/keys",
            Some(json!({"name": "x", "scopes": ["admin"]})),
        ),
        (M::DELETE, "/api/keys/key_x", None),
    ];
    for (method, path, body) in &routes {
        let r = call(&proxy, method.clone(), path, None, body.clone(), &[]).await;
        assert_eq!(r.status, 401, "{method} {path}: {r:?}");
        if path.starts_with("/guardrail/") {
            // In AWS's shape, as boto3 reads it.
            assert_eq!(
                r.header("x-amzn-errortype"),
                "UnrecognizedClientException",
                "{r:?}"
            );
            assert!(r.body["message"].as_str().unwrap().contains("Bearer"));
            continue;
        }
        assert_eq!(r.code(), "missing_api_key", "{method} {path}: {r:?}");
        assert!(r.body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("Bearer"));
        assert!(r.header("www-authenticate").starts_with("Bearer"));
        let r = call(
            &proxy,
            method.clone(),
            path,
            Some("pg_not-a-key"),
            body.clone(),
            &[],
        )
        .await;
        assert_eq!(r.status, 401, "{method} {path} with a wrong key");
        assert_eq!(r.code(), "invalid_api_key");
    }
    let health = call(&proxy, M::GET, "/healthz", None, None, &[]).await;
    assert_eq!(health.status, 200);
    // Without a key, nothing about the policy or the validator.
    assert_eq!(health.body, json!({"status": "ok"}));

    // A chat+read key chats and reads, and nothing more.
    let user = new_key(&proxy, "app", &["chat", "read"]).await;
    let me = get(&proxy, "/api/me", &user, &[]).await;
    assert_eq!(me.body["scopes"], json!(["chat", "read"]), "{me:?}");
    assert_eq!(me.body["allows"]["admin"], false);
    for (method, path, body) in [
        (
            M::POST,
            "/api/keys",
            Some(json!({"name": "mine", "scopes": ["admin"]})),
        ),
        (M::GET, "/api/keys", None),
        (
            M::POST,
            "/api/policies/formalize",
            Some(json!({"document": "x"})),
        ),
        (
            M::POST,
            "/api/policies/gen-tests",
            Some(json!({"policy": policy.clone()})),
        ),
        (M::GET, "/api/config", None),
        (M::GET, "/metrics", None),
        (M::DELETE, "/api/keys/key_x", None),
        (
            M::POST,
            "/api/policies/lint",
            Some(json!({"policy": policy.clone()})),
        ),
        (
            M::POST,
            "/api/policies/test",
            Some(json!({"policy": policy.clone(), "tests": []})),
        ),
        (
            M::POST,
            "/api/policies/diff",
            Some(json!({"old": policy.clone(), "new": policy.clone()})),
        ),
    ] {
        let r = call(&proxy, method.clone(), path, Some(&user), body, &[]).await;
        assert_eq!(r.status, 403, "{method} {path}: {r:?}");
        assert_eq!(r.code(), "insufficient_scope");
        assert!(r.body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("admin"));
    }
    let r = chat(
        &proxy,
        &user,
        json!({"messages": [{"role": "user", "content": Q1}]}),
        &[],
    )
    .await;
    assert_eq!(r.status, 200, "{r:?}");
    assert_eq!(r.header("x-proofgate-verdict"), "VALID");
    // The client's proofgate key is never passed on to the LLM.
    for received in llm.received() {
        let auth = received["authorization"].as_str().unwrap_or("");
        assert!(!auth.contains(&user), "{received}");
    }
    // A read-only key cannot chat.
    let reader = new_key(&proxy, "reader", &["read"]).await;
    let r = chat(
        &proxy,
        &reader,
        json!({"messages": [{"role": "user", "content": Q1}]}),
        &[],
    )
    .await;
    assert_eq!(r.status, 403);
    assert_eq!(get(&proxy, "/api/threads", &reader, &[]).await.status, 200);
    // Nor check text through the guardrail route, nor start a thread.
    for (path, body) in [
        (
            "/guardrail/local/version/1/apply",
            json!({"source": "OUTPUT", "content": [{"text": {"text": "x"}}]}),
        ),
        ("/api/threads", json!({"question": Q1})),
    ] {
        let r = call(&proxy, M::POST, path, Some(&reader), Some(body), &[]).await;
        assert_eq!(r.status, 403, "{path}: {r:?}");
    }
    // Keys are listed without secrets and revoked at once.
    let keys = get(&proxy, "/api/keys", ADMIN_KEY, &[]).await;
    assert_eq!(keys.status, 200);
    let listed = keys.body["keys"].as_array().unwrap();
    assert_eq!(listed.len(), 2);
    assert!(!keys.body.to_string().contains(&user));
    let id = listed.iter().find(|k| k["name"] == "app").unwrap()["id"]
        .as_str()
        .unwrap()
        .to_string();
    let revoked = call(
        &proxy,
        M::DELETE,
        &format!("/api/keys/{id}"),
        Some(ADMIN_KEY),
        None,
        &[],
    )
    .await;
    assert_eq!(revoked.status, 200, "{revoked:?}");
    assert!(revoked.body["revokedAt"].as_i64().is_some());
    let r = get(&proxy, "/api/threads", &user, &[]).await;
    assert_eq!(r.status, 401);
    assert_eq!(r.code(), "invalid_api_key");
    let missing = call(
        &proxy,
        M::DELETE,
        "/api/keys/key_nope",
        Some(ADMIN_KEY),
        None,
        &[],
    )
    .await;
    assert_eq!(missing.status, 404);
    let bad = post(
        &proxy,
        "/api/keys",
        ADMIN_KEY,
        json!({"name": "x", "scopes": ["root"]}),
    )
    .await;
    assert_eq!(bad.status, 400);
    assert!(bad.body["error"]["message"]
        .as_str()
        .unwrap()
        .contains("scopes"));

    // The admin key sees the configuration, without secrets.
    let config = get(&proxy, "/api/config", ADMIN_KEY, &[]).await;
    assert_eq!(config.body["auth"]["required"], true);
    assert!(!config.body.to_string().contains(ADMIN_KEY));

    // A chat-only key starts threads, but the policy is `read`'s: its view of the thread it
    // started leaves out the configuration (rules, variables, vocabulary) and the prompts that
    // quote them; a key that may read the policy sees them.
    let policy_text = "POLICY RULES";
    for (scopes, sees_policy) in [(&["chat"][..], false), (&["chat", "read"][..], true)] {
        let key = new_key(&proxy, &format!("{scopes:?}"), scopes).await;
        let listed = get(&proxy, "/api/policies", &key, &[]).await;
        assert_eq!(listed.status, if sees_policy { 200 } else { 403 });
        if sees_policy {
            // The policy file's name, not where it lies on the server.
            assert_eq!(
                listed.body["policies"][0]["file"], "park-admission.json",
                "{:?}",
                listed.body
            );
        }
        let body = json!({"question": Q1, "answer": "You pay $12.", "wait": true});
        let started = post(&proxy, "/api/threads", &key, body).await;
        assert_eq!(started.status, 201, "{started:?}");
        let view = &started.body;
        assert!(
            view["steps"].as_array().is_some_and(|s| s.len() > 1),
            "{view}"
        );
        assert_eq!(
            view["config"].is_object(),
            sees_policy,
            "{scopes:?}: {view}"
        );
        assert_eq!(
            view.to_string().contains(policy_text),
            sees_policy,
            "{scopes:?}"
        );
        let id = view["id"].as_str().unwrap();
        assert_step_texts_shown(&proxy, id, view, sees_policy).await;
        if view["status"] == "awaiting_input" {
            let path = format!("/api/threads/{id}/answers");
            let answered = post(&proxy, &path, &key, json!({"skip": true})).await;
            assert_eq!(answered.status, 200, "{answered:?}");
            assert_eq!(answered.body["config"].is_object(), sees_policy);
            assert_eq!(answered.body.to_string().contains(policy_text), sees_policy);
            assert_step_texts_shown(&proxy, id, &answered.body, sees_policy).await;
        }
    }
}

/// Whether `view` (a thread's view as its key got it) shows the texts of the thread's steps:
/// a key that may read threads sees every answer, reply and translation; a chat-only key sees
/// none of them (an answer held back while the thread asks, or one a rewrite replaced, was
/// never released), only the answer the outcome released, and the steps in outline.
async fn assert_step_texts_shown(proxy: &Proxy, id: &str, view: &Value, reader: bool) {
    let full = get(proxy, &format!("/api/threads/{id}"), ADMIN_KEY, &[]).await;
    assert_eq!(full.status, 200, "{full:?}");
    // The outcome is what the thread released (its answer and that answer's findings).
    let released = view["outcome"].to_string();
    let mut texts = Vec::new();
    for step in full.body["steps"].as_array().unwrap() {
        texts.extend(step["answer"].as_str());
        texts.extend(step["reply"]["text"].as_str());
        for f in step["validation"]["findings"]
            .as_array()
            .into_iter()
            .flatten()
        {
            for side in ["premises", "claims"] {
                for s in f["translation"][side].as_array().into_iter().flatten() {
                    texts.extend(s["naturalLanguage"].as_str());
                }
            }
        }
    }
    let texts: Vec<&str> = texts
        .into_iter()
        .filter(|t| t.len() > 8 && !released.contains(*t) && !Q1.contains(*t))
        .collect();
    assert!(
        !texts.is_empty(),
        "the thread has step texts: {}",
        full.body
    );
    let shown = view.to_string();
    for t in &texts {
        let escaped = serde_json::to_string(t).unwrap();
        let inner = &escaped[1..escaped.len() - 1];
        assert_eq!(shown.contains(inner), reader, "{t:?} in {shown}");
    }
    if !reader {
        for step in view["steps"].as_array().unwrap() {
            for hidden in ["prompt", "reply", "answer", "decision", "note"] {
                assert!(step.get(hidden).is_none(), "{hidden} in {step}");
            }
            for f in step["validation"]["findings"]
                .as_array()
                .into_iter()
                .flatten()
            {
                assert!(
                    f.get("translation").is_none() && f.get("premises").is_none(),
                    "{f}"
                );
                assert!(f["kind"].is_string(), "{f}");
            }
        }
    }
}

#[tokio::test]
async fn bodies_must_be_json_and_small_and_client_settings_never_exceed_the_servers() {
    let llm = demo_llm();
    let proxy = Proxy::start(
        "auth-limits",
        &secured_config(
            &v1(&llm),
            "",
            "[loop]\nmax_iterations = 3\nallow_questions = false\n",
        ),
    );
    let key = new_key(&proxy, "app", &["chat", "read"]).await;
    let client = reqwest::Client::new();
    // A "simple" cross-site request (no preflight) is refused before any work.
    let r = client
        .post(format!("{}/v1/chat/completions", proxy.url))
        .bearer_auth(&key)
        .header("content-type", "text/plain")
        .body(json!({"model": "m", "messages": [{"role": "user", "content": Q1}]}).to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 415);
    let body: Value = r.json().await.unwrap();
    assert_eq!(body["error"]["code"], "unsupported_media_type");
    // 8 MiB: 413 from the declared length alone, before the body is read (over a raw
    // connection, since the server does not read what it refuses, and a client still sending
    // it may see the connection close instead).
    let head = format!(
        "POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\nauthorization: Bearer {key}\r\n\
         content-type: application/json\r\ncontent-length: {}\r\n\r\n",
        8 << 20
    );
    let addr = proxy.url.trim_start_matches("http://").to_string();
    let mut conn = tokio::net::TcpStream::connect(&addr).await.unwrap();
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    conn.write_all(head.as_bytes()).await.unwrap();
    let mut response = Vec::new();
    let _ = tokio::time::timeout(
        std::time::Duration::from_secs(10),
        conn.read_to_end(&mut response),
    )
    .await;
    let response = String::from_utf8_lossy(&response);
    assert!(response.starts_with("HTTP/1.1 413"), "{response}");
    assert!(response.contains("body_too_large"), "{response}");
    // Streamed without a length: refused once it grows past the limit.
    let big = format!("{{\"question\": \"{}\"}}", "a".repeat(8 << 20));
    let chunks: Vec<Result<Vec<u8>, std::io::Error>> = big
        .into_bytes()
        .chunks(64 << 10)
        .map(|c| Ok(c.to_vec()))
        .collect();
    let r = client
        .post(format!("{}/api/threads", proxy.url))
        .bearer_auth(&key)
        .header("content-type", "application/json")
        .body(reqwest::Body::wrap_stream(futures::stream::iter(chunks)))
        .send()
        .await;
    match r {
        Ok(r) => {
            assert_eq!(r.status(), 413);
            let body: Value = r.json().await.unwrap();
            assert_eq!(body["error"]["code"], "body_too_large");
        }
        // The server stopped reading and closed: the client's write fails instead.
        Err(e) => assert!(e.is_request() || e.is_body(), "{e}"),
    }
    assert_eq!(
        get(&proxy, "/api/threads", &key, &[]).await.body["threads"],
        json!([]),
        "nothing was started"
    );

    // More iterations and follow-up questions than the operator allows: clamped.
    let t = post(
        &proxy,
        "/api/threads",
        &key,
        json!({"question": Q2, "answer": "As a senior you pay $35.75 including tax.",
               "settings": {"maxIterations": 20, "followUpQuestions": "ALLOWED"}}),
    )
    .await;
    assert_eq!(t.status, 201, "{t:?}");
    assert_eq!(t.body["config"]["maxIterations"], 3, "{}", t.body);
    assert_eq!(t.body["config"]["followUpQuestions"], "DISABLED");
    assert_ne!(t.body["status"], "awaiting_input");
    let lower = post(
        &proxy,
        "/api/threads",
        &key,
        json!({"question": Q2, "answer": "As a senior you pay $35.75 including tax.",
               "settings": {"maxIterations": 1}}),
    )
    .await;
    assert_eq!(lower.body["config"]["maxIterations"], 1);
}

/// Two keys naming the same end user reach the upstream under two names, neither the one
/// they sent: every key shares the operator's account there, where an end user flagged for
/// abuse can be refused by that id, and one tenant could get another's end user refused.
/// The rewriter's calls, which carry the app's request, name the same per-key end user.
#[tokio::test]
async fn each_key_names_its_end_users_to_the_upstream_apart() {
    let llm = demo_llm();
    let proxy = Proxy::start("end-user-names", &secured_config(&v1(&llm), "", ""));
    let a = new_key(&proxy, "app a", &["chat"]).await;
    let b = new_key(&proxy, "app b", &["chat"]).await;
    for key in [&a, &b] {
        let mut body = first_turn(Some("u2"));
        body["safety_identifier"] = json!("u2");
        let r = chat(&proxy, key, body, &[]).await;
        assert_eq!(r.status, 200, "{r:?}");
    }
    let named: std::collections::BTreeSet<String> = llm
        .received()
        .iter()
        .flat_map(|r| {
            let body = &r["body"];
            ["user", "safety_identifier"]
                .into_iter()
                .filter_map(|f| body[f].as_str().map(str::to_string))
                .collect::<Vec<_>>()
        })
        .collect();
    assert_eq!(named.len(), 2, "{named:?}");
    assert!(
        named.iter().all(|n| n.starts_with("user_") && n != "u2"),
        "{named:?}"
    );
}

/// Four owners (two keys, and one key for two end users, plus the key alone) start the same
/// conversation; each follow-up answer resumes the owner's own thread.
#[tokio::test]
async fn each_owner_resumes_and_sees_only_its_own_threads() {
    let llm = demo_llm();
    let proxy = Proxy::start("auth-owners", &secured_config(&v1(&llm), "", ""));
    let a = new_key(&proxy, "app a", &["chat", "read"]).await;
    let b = new_key(&proxy, "app b", &["chat", "read"]).await;
    let owners: Vec<(&str, Option<&str>)> = vec![
        (&a, None),
        (&b, None),
        (&a, Some("alice")),
        (&a, Some("bob")),
    ];
    let mut started = Vec::new();
    for (key, user) in &owners {
        let r = chat(&proxy, key, first_turn(*user), &[]).await;
        assert_eq!(r.header("x-proofgate-verdict"), "NEEDS_INPUT", "{r:?}");
        started.push((
            r.header("x-proofgate-thread").to_string(),
            r.content().to_string(),
        ));
    }
    let ids: Vec<&str> = started.iter().map(|(id, _)| id.as_str()).collect();
    for (i, ((key, user), (id, questions))) in owners.iter().zip(&started).enumerate() {
        let r = chat(&proxy, key, second_turn(questions, *user), &[]).await;
        assert_eq!(
            r.header("x-proofgate-thread"),
            id,
            "owner {i} resumed another thread"
        );
        assert_eq!(r.header("x-proofgate-verdict"), "VALID", "{r:?}");
    }

    let user_header = |u: Option<&str>| -> Vec<(&'static str, String)> {
        u.map(|u| vec![("x-proofgate-user", u.to_string())])
            .unwrap_or_default()
    };
    for (i, (key, user)) in owners.iter().enumerate() {
        let h = user_header(*user);
        let h: Vec<(&str, &str)> = h.iter().map(|(k, v)| (*k, v.as_str())).collect();
        let list = get(&proxy, "/api/threads", key, &h).await;
        let listed: Vec<&str> = list.body["threads"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["id"].as_str().unwrap())
            .collect();
        assert_eq!(
            listed,
            vec![ids[i]],
            "owner {i} lists exactly its own thread"
        );
        for (j, other) in ids.iter().enumerate() {
            let own = i == j;
            for path in [
                format!("/api/threads/{other}"),
                format!("/api/threads/{other}/audit"),
            ] {
                let r = get(&proxy, &path, key, &h).await;
                assert_eq!(r.status, if own { 200 } else { 404 }, "owner {i} {path}");
                if !own {
                    assert_eq!(r.code(), "not_found");
                }
            }
            if !own {
                let r = call(
                    &proxy,
                    reqwest::Method::POST,
                    &format!("/api/threads/{other}/answers"),
                    Some(key),
                    Some(json!({"skip": true})),
                    &h,
                )
                .await;
                assert_eq!(r.status, 404, "owner {i} answered thread {j}");
                let mut body = json!({"messages": [{"role": "user", "content": "skip"}]});
                if let Some(u) = user {
                    body["user"] = json!(u);
                }
                let r = chat(&proxy, key, body, &[("x-proofgate-thread", other)]).await;
                assert_eq!(r.status, 404, "owner {i} resumed thread {j} by header");
            }
        }
    }
    // The admin sees and reads them all.
    let all = get(&proxy, "/api/threads", ADMIN_KEY, &[]).await;
    assert_eq!(all.body["threads"].as_array().unwrap().len(), 4);
    for id in &ids {
        assert_eq!(
            get(&proxy, &format!("/api/threads/{id}/audit"), ADMIN_KEY, &[])
                .await
                .status,
            200
        );
    }

    // One owner with two threads waiting on the same conversation: neither is guessed, the
    // answer starts a new thread (with the whole conversation) and both stay waiting.
    let first = chat(&proxy, &b, first_turn(Some("carol")), &[]).await;
    let second = chat(&proxy, &b, first_turn(Some("carol")), &[]).await;
    let waiting = [
        first.header("x-proofgate-thread").to_string(),
        second.header("x-proofgate-thread").to_string(),
    ];
    assert_ne!(waiting[0], waiting[1]);
    let r = chat(&proxy, &b, second_turn(first.content(), Some("carol")), &[]).await;
    assert_eq!(r.status, 200, "{r:?}");
    let new = r.header("x-proofgate-thread");
    assert!(
        !waiting.iter().any(|w| w == new),
        "a waiting thread was guessed"
    );
    let carol = [("x-proofgate-user", "carol")];
    for w in &waiting {
        let t = get(&proxy, &format!("/api/threads/{w}"), &b, &carol).await;
        assert_eq!(t.body["status"], "awaiting_input", "{w}");
    }
    // The header still resumes a thread of one's own.
    let r = chat(
        &proxy,
        &b,
        json!({"messages": [{"role": "user", "content": ANSWER}], "user": "carol"}),
        &[("x-proofgate-thread", &waiting[1])],
    )
    .await;
    assert_eq!(r.header("x-proofgate-thread"), waiting[1]);
    assert_eq!(r.header("x-proofgate-verdict"), "VALID", "{r:?}");

    // Listings come a page at a time, each thread once, in the listing's order.
    for (key, headers) in [(b.as_str(), &carol[..]), (ADMIN_KEY, &[][..])] {
        let whole = listed_ids(&get(&proxy, "/api/threads", key, headers).await);
        assert!(whole.len() >= 3, "{whole:?}");
        for size in [1, 2, whole.len()] {
            let (mut paged, mut path) = (Vec::new(), format!("/api/threads?limit={size}"));
            loop {
                let page = get(&proxy, &path, key, headers).await;
                assert_eq!(page.status, 200, "{page:?}");
                paged.extend(listed_ids(&page));
                match page.body["next"].as_str() {
                    Some(next) => path = format!("/api/threads?limit={size}&after={next}"),
                    None => break,
                }
                assert!(
                    paged.len() <= whole.len(),
                    "pages of {size} repeat: {paged:?}"
                );
            }
            assert_eq!(paged, whole, "pages of {size}");
        }
    }
    for bad in [
        "/api/threads?limit=0",
        "/api/threads?limit=201",
        "/api/threads?limit=ten",
        "/api/threads?after=yesterday",
        "/api/threads?after=1%3Aa%20b",
        "/api/threads?page=2",
    ] {
        let r = get(&proxy, bad, &b, &carol).await;
        assert_eq!(r.status, 400, "{bad}: {r:?}");
        assert_eq!(r.code(), "invalid_request", "{bad}");
    }
    // A NUL in a path's id is refused as such, not sent to the database.
    for path in ["/api/threads/a%00b", "/api/threads/%00/audit"] {
        let r = get(&proxy, path, &b, &carol).await;
        assert_eq!(r.status, 400, "{path}: {r:?}");
        assert!(r.body.to_string().contains("NUL"), "{r:?}");
    }
}

/// A review's case: an end user's name as clients send it, in UTF-8 ("Zoë"), was read as no
/// end user, so every such user (and every request without one) shared one owner and could
/// list, read and answer the others' threads. Each is now its own owner; bytes that are not
/// UTF-8 are refused.
#[tokio::test]
async fn an_end_user_named_in_utf8_owns_their_threads_alone() {
    use reqwest::header::HeaderValue;
    let llm = demo_llm();
    let proxy = Proxy::start("auth-utf8-users", &secured_config(&v1(&llm), "", ""));
    let key = new_key(&proxy, "app", &["chat", "read"]).await;
    let send = |method: reqwest::Method, path: String, user: &'static [u8], body: Option<Value>| {
        let mut req = reqwest::Client::new()
            .request(method, format!("{}{path}", proxy.url))
            .bearer_auth(&key);
        if !user.is_empty() {
            req = req.header("x-proofgate-user", HeaderValue::from_bytes(user).unwrap());
        }
        if let Some(b) = body {
            req = req.json(&b);
        }
        async move {
            let resp = req.send().await.unwrap();
            let status = resp.status().as_u16();
            (status, resp.json::<Value>().await.unwrap_or(Value::Null))
        }
    };
    let zoe: &[u8] = "Zoë".as_bytes();
    let jose: &[u8] = "José".as_bytes();
    let body = json!({"question": Q1, "answer": "You pay $12.", "wait": true});
    let (status, started) = send(
        reqwest::Method::POST,
        "/api/threads".into(),
        zoe,
        Some(body),
    )
    .await;
    assert_eq!(status, 201, "{started}");
    let id = started["id"].as_str().unwrap().to_string();
    let listed = |v: &Value| -> Vec<String> {
        v["threads"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["id"].as_str().unwrap().to_string())
            .collect()
    };
    let (_, own) = send(reqwest::Method::GET, "/api/threads".into(), zoe, None).await;
    assert_eq!(listed(&own), std::slice::from_ref(&id));
    for other in [jose, &b""[..]] {
        let (status, list) = send(reqwest::Method::GET, "/api/threads".into(), other, None).await;
        assert_eq!(status, 200);
        assert!(listed(&list).is_empty(), "{list}");
        for path in [
            format!("/api/threads/{id}"),
            format!("/api/threads/{id}/audit"),
        ] {
            let (status, _) = send(reqwest::Method::GET, path.clone(), other, None).await;
            assert_eq!(status, 404, "{path}");
        }
    }
    let (status, _) = send(
        reqwest::Method::GET,
        format!("/api/threads/{id}"),
        zoe,
        None,
    )
    .await;
    assert_eq!(status, 200);
    // Not UTF-8: refused, never read as nobody.
    let (status, refused) =
        send(reqwest::Method::GET, "/api/threads".into(), b"Zo\xeb", None).await;
    assert_eq!(status, 400, "{refused}");
    assert!(
        refused.to_string().contains("x-proofgate-user"),
        "{refused}"
    );
    let (status, _) = send(
        reqwest::Method::GET,
        format!("/api/threads/{id}"),
        b"\xff",
        None,
    )
    .await;
    assert_eq!(status, 400);
}

fn listed_ids(list: &Reply) -> Vec<String> {
    list.body["threads"]
        .as_array()
        .unwrap_or_else(|| panic!("{list:?}"))
        .iter()
        .map(|t| t["id"].as_str().unwrap().to_string())
        .collect()
}

/// Who owns a thread is kept in a table no signature covers, so the THREAD_STARTED record
/// names the owner too, and the two must agree. A thread handed to another key and end user in
/// the database is not shown to them, nor continued by them (the chat's answer would be
/// recorded in the first owner's signed trail); put back, its owner goes on as before.
#[tokio::test]
async fn a_thread_handed_to_another_owner_in_the_store_is_refused() {
    let llm = demo_llm();
    let proxy = Proxy::start("auth-owner-swap", &secured_config(&v1(&llm), "", ""));
    let a = new_key(&proxy, "app a", &["chat", "read"]).await;
    let b = new_key(&proxy, "app b", &["chat", "read"]).await;
    let alice = [("x-proofgate-user", "alice")];
    let mallory = [("x-proofgate-user", "mallory")];
    let started = chat(&proxy, &a, first_turn(Some("alice")), &[]).await;
    assert_eq!(
        started.header("x-proofgate-verdict"),
        "NEEDS_INPUT",
        "{started:?}"
    );
    let id = started.header("x-proofgate-thread").to_string();
    let db = proxy
        .config_path()
        .parent()
        .unwrap()
        .join("proofgate.sqlite");
    let key_id = |name: &str| {
        proxy::sqlite_query(
            &db,
            &format!("SELECT id FROM api_keys WHERE name = '{name}';"),
        )
        .trim()
        .to_string()
    };
    let (a_id, b_id) = (key_id("app a"), key_id("app b"));
    let trail = get(&proxy, &format!("/api/threads/{id}/audit"), &a, &alice).await;
    assert_eq!(trail.status, 200, "{trail:?}");
    assert_eq!(
        trail.body[0]["body"]["owner"],
        json!({"keyId": a_id, "endUser": "alice"})
    );
    // A thread started on /api/threads records its owner too.
    let r = call(
        &proxy,
        reqwest::Method::POST,
        "/api/threads",
        Some(&a),
        Some(json!({"question": Q1, "answer": "You pay $12.", "wait": true})),
        &alice,
    )
    .await;
    assert_eq!(r.status, 201, "{r:?}");
    let other = r.body["id"].as_str().unwrap().to_string();
    let trail = get(&proxy, &format!("/api/threads/{other}/audit"), &a, &alice).await;
    assert_eq!(
        trail.body[0]["body"]["owner"],
        json!({"keyId": a_id, "endUser": "alice"})
    );

    let view = format!("/api/threads/{id}");
    assert_eq!(get(&proxy, &view, &b, &mallory).await.status, 404);
    let hand_to = |key: &str, user: &str| {
        proxy::sqlite(
            &db,
            &format!(
                "UPDATE thread_owners SET owner_key = '{key}', end_user = '{user}' \
                 WHERE thread_id = '{id}';"
            ),
        )
    };
    hand_to(&b_id, "mallory");
    // To the key it was handed to, the thread does not exist: not its view, trail, bundle or
    // listing, nor its continuation.
    for path in [
        view.clone(),
        format!("{view}/audit"),
        format!("{view}/audit/bundle"),
    ] {
        let r = get(&proxy, &path, &b, &mallory).await;
        assert_eq!(r.status, 404, "{path}: {r:?}");
    }
    let listed = get(&proxy, "/api/threads", &b, &mallory).await;
    assert_eq!(listed.body["threads"], json!([]), "{listed:?}");
    let r = chat(
        &proxy,
        &b,
        json!({"messages": [{"role": "user", "content": ANSWER}], "user": "mallory"}),
        &[("x-proofgate-thread", &id)],
    )
    .await;
    assert_eq!(r.status, 404, "{r:?}");
    // An admin reading it is told the store was altered, without who the owners are.
    let r = get(&proxy, &view, ADMIN_KEY, &[]).await;
    assert_eq!(r.status, 500, "{r:?}");
    let message = r.body["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("stored owner") && message.contains("the store was altered"),
        "{message}"
    );
    assert!(!message.contains("alice"), "{message}");
    assert_eq!(get(&proxy, &view, &a, &alice).await.status, 404);

    hand_to(&a_id, "alice");
    let t = get(&proxy, &view, &a, &alice).await;
    assert_eq!(t.body["status"], "awaiting_input", "{t:?}");
    let r = chat(
        &proxy,
        &a,
        second_turn(started.content(), Some("alice")),
        &[],
    )
    .await;
    assert_eq!(r.header("x-proofgate-thread"), id);
    assert_eq!(r.header("x-proofgate-verdict"), "VALID", "{r:?}");
}

/// Two replicas behind a load balancer, on one PostgreSQL: a key made on one works on the
/// other, ownership holds across them, and a revocation on one is honoured by the other at
/// once. Runs when `PROOFGATE_TEST_POSTGRES_URL` is set (scripts/with-postgres.sh).
#[tokio::test]
async fn two_replicas_on_postgres_honour_the_same_keys_and_owners() {
    let Some(pg) = proxy::postgres_database("two_replicas_on_postgres").await else {
        eprintln!("PROOFGATE_TEST_POSTGRES_URL unset: PostgreSQL replicas not tested here");
        return;
    };
    let llm = demo_llm();
    // Replicas share one audit key, as they must (each checks the heads the other logged
    // before it continues a thread).
    let shared = proxy::temp_dir("auth-replica-key").join("audit.key");
    let cfg = secured_config(&v1(&llm), "", "")
        .replace("sqlite://{dir}/proofgate.sqlite", &pg)
        .replace("{dir}/audit.key", &shared.display().to_string());
    let r1 = Proxy::start("auth-replica-a", &cfg);
    let r2 = Proxy::start("auth-replica-b", &cfg);
    let a = new_key(&r1, "replica app a", &["chat", "read"]).await;
    let b = new_key(&r2, "replica app b", &["chat", "read"]).await;
    let user = format!("dave-{}", std::process::id());
    let first = chat(&r1, &a, first_turn(Some(&user)), &[]).await;
    assert_eq!(
        first.header("x-proofgate-verdict"),
        "NEEDS_INPUT",
        "{first:?}"
    );
    let id = first.header("x-proofgate-thread").to_string();
    // The same conversation from key b on the other replica does not resume a's thread.
    let other = chat(&r2, &b, second_turn(first.content(), Some(&user)), &[]).await;
    assert_ne!(other.header("x-proofgate-thread"), id);
    let h = [("x-proofgate-user", user.as_str())];
    assert_eq!(
        get(&r2, &format!("/api/threads/{id}"), &b, &h).await.status,
        404
    );
    // a's answer on the other replica resumes a's thread.
    let done = chat(&r2, &a, second_turn(first.content(), Some(&user)), &[]).await;
    assert_eq!(done.header("x-proofgate-thread"), id);
    assert_eq!(done.header("x-proofgate-verdict"), "VALID", "{done:?}");
    // Listed for its owner (the trail's owner read by the listing's own query), not for b.
    let listed = |key: String| {
        let (r2, h) = (&r2, &h);
        async move {
            get(r2, "/api/threads", &key, h).await.body["threads"]
                .as_array()
                .unwrap_or_else(|| panic!("no listing for {key}"))
                .iter()
                .map(|t| t["id"].as_str().unwrap_or_default().to_string())
                .collect::<Vec<_>>()
        }
    };
    assert!(listed(a.clone()).await.contains(&id));
    assert!(!listed(b.clone()).await.contains(&id));
    assert_eq!(
        get(&r1, &format!("/api/threads/{id}/audit"), &a, &h)
            .await
            .status,
        200
    );
    // Revoked on one replica: refused on the other.
    let keys = get(&r1, "/api/keys", ADMIN_KEY, &[]).await;
    let key_id = keys.body["keys"]
        .as_array()
        .unwrap()
        .iter()
        .find(|k| k["name"] == "replica app b")
        .unwrap()["id"]
        .as_str()
        .unwrap()
        .to_string();
    let r = revoke(&r1, &key_id).await;
    assert_eq!(r.status, 200);
    // At once on the replica that revoked it; on the other once its cached copy of the key is
    // older than `[auth] key_cache_ms` (1 s by default), and never later.
    assert_eq!(get(&r1, "/api/threads", &b, &[]).await.status, 401);
    refused_within(&r2, &b, std::time::Duration::from_millis(2500)).await;
}

/// Waits until `key` is refused (401) by `proxy`; fails if it still works (200) after `limit`
/// (with a zero limit, if it works at all).
async fn refused_within(proxy: &Proxy, key: &str, limit: std::time::Duration) {
    let revoked = std::time::Instant::now();
    loop {
        let status = get(proxy, "/api/threads", key, &[]).await.status;
        if status == 401 {
            return;
        }
        assert_eq!(status, 200);
        assert!(
            revoked.elapsed() < limit,
            "a revoked key still works after {:?} (limit {limit:?})",
            revoked.elapsed()
        );
        tokio::time::sleep(std::time::Duration::from_millis(25)).await;
    }
}

/// Whoever holds the database puts the hash of a secret they know into an app's key row (to
/// answer its threads as its owner, their words signed into the trail as the user's): the row
/// no longer carries the server's seal, and the secret is refused. A row without a seal (a key
/// from before rows were sealed, or one whose seal was removed) stays refused.
#[tokio::test]
async fn a_key_row_rewritten_in_the_database_opens_nothing() {
    use sha2::Digest;
    let llm = demo_llm();
    let top = "[auth]\nkey_cache_ms = 0\n";
    let proxy = Proxy::start("auth-sealed-keys", &secured_config(&v1(&llm), top, ""));
    let db = proxy
        .config_path()
        .parent()
        .unwrap()
        .join("proofgate.sqlite");
    let key = new_key(&proxy, "app", &["chat", "read"]).await;
    assert_eq!(get(&proxy, "/api/threads", &key, &[]).await.status, 200);
    let known = "pg_a_secret_the_database_holder_knows";
    let known_hash = hex::encode(sha2::Sha256::digest(known.as_bytes()));
    let original = proxy::sqlite_query(&db, "SELECT key_hash FROM api_keys WHERE name = 'app'");
    proxy::sqlite(
        &db,
        &format!("UPDATE api_keys SET key_hash = '{known_hash}' WHERE name = 'app'"),
    );
    let r = get(&proxy, "/api/threads", known, &[]).await;
    assert_eq!(r.status, 401, "{r:?}");
    // Put back, the app's own key works again; its seal unset (a key from before seals), it
    // does not, until the operator seals the rows.
    proxy::sqlite(
        &db,
        &format!("UPDATE api_keys SET key_hash = '{original}' WHERE name = 'app'"),
    );
    assert_eq!(get(&proxy, "/api/threads", &key, &[]).await.status, 200);
    proxy::sqlite(&db, "UPDATE api_keys SET seal = NULL WHERE name = 'app'");
    assert_eq!(get(&proxy, "/api/threads", &key, &[]).await.status, 401);
    let listed = get(&proxy, "/api/keys", ADMIN_KEY, &[]).await;
    let app_key = &listed.body["keys"][0];
    assert_eq!(
        (&app_key["seal"], &app_key["active"]),
        (&json!("missing"), &json!(false)),
        "{listed:?}"
    );
    let cli = |args: &[&str], stdin: &str| {
        let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_proofgate"))
            .args(args)
            .arg("--config")
            .arg(proxy.config_path())
            .current_dir(repo_root())
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        use std::io::Write;
        child
            .stdin
            .take()
            .unwrap()
            .write_all(stdin.as_bytes())
            .unwrap();
        child.wait_with_output().unwrap()
    };
    let out = cli(&["keys", "list"], "");
    assert!(out.status.success(), "{out:?}");
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("\"seal\": \"missing\""),
        "{out:?}"
    );
    // Never sealed afterwards (nothing the database says of such a row can be trusted): a
    // new key works.
    let new = new_key(&proxy, "app again", &["chat", "read"]).await;
    assert_eq!(get(&proxy, "/api/threads", &new, &[]).await.status, 200);
    assert_eq!(get(&proxy, "/api/threads", &key, &[]).await.status, 401);
}

/// A key revoked by another process (`proofgate keys revoke`, or another replica) stops working
/// once the server's copy is older than `[auth] key_cache_ms`; with 0 the server reads the key
/// on every request and refuses it at once.
#[tokio::test]
async fn a_key_revoked_elsewhere_stops_within_the_key_cache_time() {
    let llm = demo_llm();
    for cache_ms in [0u64, 400] {
        let top = format!("[auth]\nkey_cache_ms = {cache_ms}\n");
        let proxy = Proxy::start(
            &format!("auth-key-cache-{cache_ms}"),
            &secured_config(&v1(&llm), &top, ""),
        );
        let key = new_key(&proxy, "cached app", &["read"]).await;
        // Used twice: the second is answered from the cache when there is one.
        for _ in 0..2 {
            assert_eq!(get(&proxy, "/api/threads", &key, &[]).await.status, 200);
        }
        let keys = get(&proxy, "/api/keys", ADMIN_KEY, &[]).await;
        let id = keys.body["keys"][0]["id"].as_str().unwrap().to_string();
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_proofgate"))
            .args(["keys", "revoke", "--config"])
            .arg(proxy.config_path())
            .arg(&id)
            .current_dir(repo_root())
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
        // With 0, refused at once; otherwise once the cached copy is older than the setting.
        let limit = match cache_ms {
            0 => std::time::Duration::ZERO,
            ms => std::time::Duration::from_millis(ms + 1500),
        };
        refused_within(&proxy, &key, limit).await;
    }
}

/// A request past its deadline is 504 and its work stops there: the translator calls in flight
/// are dropped and no rewriting follows. A client that disconnects stops the work the same way.
/// Neither is finished later: the thread, saved mid-call, ends as ERROR saying why, so the
/// resumer (here after 1 s) does not call the LLMs again for an answer no one would receive.
#[tokio::test]
async fn the_deadline_and_a_client_that_leaves_stop_the_work() {
    let llm = Server::python(
        "scripted_llm.py",
        &json!({"rules": [
            {"match": "You translate", "reply": "{\"pairs\": []}", "delay_ms": 1500},
            {"match": "What is my admission fee", "reply": "Seniors get 40% off the $50 fee, so you pay $30 after the discount."}
        ], "default": "DECISION: REWRITE\nANSWER: x"}),
    );
    let proxy = Proxy::start(
        "auth-deadline",
        &secured_config(
            &v1(&llm),
            "",
            "[limits]\nrequest_timeout_ms = 500\n\
             [server]\nresume_after_ms = 1000\nmaintenance_interval_ms = 200\n",
        ),
    );
    let key = new_key(&proxy, "app", &["chat", "read"]).await;
    let started = std::time::Instant::now();
    let r = chat(
        &proxy,
        &key,
        json!({"messages": [{"role": "user", "content": Q1}]}),
        &[],
    )
    .await;
    assert_eq!(r.status, 504, "{r:?}");
    assert_eq!(r.code(), "deadline_exceeded");
    assert!(started.elapsed() < std::time::Duration::from_millis(1400));
    let calls = |received: &[Value], needle: &str| {
        received
            .iter()
            .filter(|r| r.to_string().contains(needle))
            .count()
    };
    tokio::time::sleep(std::time::Duration::from_millis(2500)).await;
    let received = llm.received();
    let translations = calls(&received, "You translate");
    assert!(
        (1..=3).contains(&translations),
        "the k translators were asked at most once each: {translations}"
    );
    assert_eq!(
        calls(&received, "DECISION"),
        0,
        "nothing ran after the deadline"
    );

    // A client that gives up after 200 ms: the same, without waiting for the deadline.
    let before = llm.received().len();
    let gone = reqwest::Client::builder()
        .timeout(std::time::Duration::from_millis(200))
        .build()
        .unwrap()
        .post(format!("{}/v1/chat/completions", proxy.url))
        .bearer_auth(&key)
        .json(&json!({"model": "m", "messages": [{"role": "user", "content": Q1}]}))
        .send()
        .await;
    assert!(gone.is_err());
    tokio::time::sleep(std::time::Duration::from_millis(2500)).await;
    let received = llm.received();
    assert!(
        received.len() - before <= 4,
        "at most upstream + 3 translators, nothing after"
    );
    assert_eq!(calls(&received, "DECISION"), 0);
    assert!(
        calls(&received, "You translate") <= 6,
        "neither thread was resumed"
    );
    // Both threads ended, recorded as ERROR: nothing is left for the resumer.
    let listed = get(&proxy, "/api/threads", &key, &[]).await;
    let threads = listed.body["threads"].as_array().unwrap().clone();
    assert_eq!(threads.len(), 2, "{listed:?}");
    for t in &threads {
        assert_eq!(t["status"], "error", "{t}");
        assert_eq!(t["verdict"], "ERROR", "{t}");
        let id = t["id"].as_str().unwrap();
        let one = get(&proxy, &format!("/api/threads/{id}"), &key, &[]).await;
        assert!(
            one.body.to_string().contains("ended before the thread did"),
            "{one:?}"
        );
    }
}

/// A request whose write fails (the database locked past its busy timeout) is a 503, and its
/// thread still ends as ERROR from what is stored: the request's queued write failed, and the
/// thread was left `processing`, for the resumer to finish later for no one (a review found
/// it: the ending waited on the failed write and gave up).
#[tokio::test]
async fn a_thread_whose_write_failed_still_ends_and_is_not_resumed() {
    let llm = Server::python(
        "scripted_llm.py",
        &json!({"rules": [
            {"match": "You translate", "reply": "{\"pairs\": []}", "delay_ms": 3000},
            {"match": "What is my admission fee", "reply": "Seniors get 40% off the $50 fee, so you pay $30 after the discount."}
        ], "default": "DECISION: REWRITE\nANSWER: x"}),
    );
    let proxy = Proxy::start(
        "auth-write-failed",
        // Every step written ahead at once: the thread is stored before the lock is taken.
        &secured_config(
            &v1(&llm),
            "",
            "[server]\nresume_after_ms = 1000\nmaintenance_interval_ms = 200\n",
        )
        .replace("[storage]\n", "[storage]\nwrite_ahead_after_ms = 0\n"),
    );
    let key = new_key(&proxy, "app", &["chat", "read"]).await;
    let db = proxy.dir().join("proofgate.sqlite");
    let request = {
        let (url, key) = (proxy.url.clone(), key.clone());
        tokio::spawn(async move {
            reqwest::Client::new()
                .post(format!("{url}/v1/chat/completions"))
                .bearer_auth(&key)
                .json(&json!({"model": "m", "messages": [{"role": "user", "content": Q1}]}))
                .send()
                .await
                .unwrap()
                .status()
                .as_u16()
        })
    };
    // Once the thread is stored (its translation step written ahead), SQLite's write lock is
    // held for 15 s: the translators' replies (at 3 s) cannot be written within the 5 s busy
    // timeout.
    let stored = || proxy::sqlite_query(&db, "SELECT count(*) FROM threads;");
    for _ in 0..250 {
        if stored().trim() == "1" {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    assert_eq!(stored().trim(), "1");
    let locker = std::process::Command::new("python3")
        .args([
            "-c",
            "import sqlite3,sys,time\n\
             c=sqlite3.connect(sys.argv[1],isolation_level=None)\n\
             c.execute('BEGIN IMMEDIATE')\ntime.sleep(15)\nc.execute('COMMIT')",
        ])
        .arg(&db)
        .spawn()
        .unwrap();
    assert_eq!(request.await.unwrap(), 503, "the storage error");
    let mut locker = locker;
    assert!(locker.wait().unwrap().success());
    let translations = |received: &[Value]| {
        received
            .iter()
            .filter(|r| r.to_string().contains("You translate"))
            .count()
    };
    let asked = translations(&llm.received());
    // Past the resumer's 1 s: the thread is ended, not resumed.
    tokio::time::sleep(std::time::Duration::from_millis(3000)).await;
    let listed = get(&proxy, "/api/threads", &key, &[]).await;
    let threads = listed.body["threads"].as_array().unwrap().clone();
    assert_eq!(threads.len(), 1, "{listed:?}");
    assert_eq!(threads[0]["status"], "error", "{listed:?}");
    let id = threads[0]["id"].as_str().unwrap();
    let one = get(&proxy, &format!("/api/threads/{id}"), &key, &[]).await;
    assert!(
        one.body.to_string().contains("ended before the thread did"),
        "{one:?}"
    );
    assert_eq!(
        translations(&llm.received()),
        asked,
        "the thread was resumed"
    );
}

/// CORS is off unless origins are configured; then only those get it, preflight included.
#[tokio::test]
async fn cors_only_for_configured_origins_and_policies_within_bedrock_limits() {
    let llm = demo_llm();
    let closed = Proxy::start("auth-cors-off", &secured_config(&v1(&llm), "", ""));
    let client = reqwest::Client::new();
    let preflight = |url: String, origin: &'static str| {
        client
            .request(reqwest::Method::OPTIONS, url)
            .header("origin", origin)
            .header("access-control-request-method", "POST")
            .header(
                "access-control-request-headers",
                "authorization, content-type",
            )
            .send()
    };
    let r = preflight(
        format!("{}/v1/chat/completions", closed.url),
        "https://app.example.com",
    )
    .await
    .unwrap();
    assert!(r.headers().get("access-control-allow-origin").is_none());
    // The public audit material is readable from any page (an auditor's own verifier reads
    // the audited server's log); nothing else is, without configured origins.
    for path in [
        "/api/log/checkpoint",
        "/.well-known/proofgate/audit-key",
        "/api/log/leaves?from=0&to=0",
    ] {
        let r = client
            .get(format!("{}{path}", closed.url))
            .header("origin", "https://auditor.example.org")
            .send()
            .await
            .unwrap();
        assert_eq!(r.headers()["access-control-allow-origin"], "*", "{path}");
        assert!(r
            .headers()
            .get("access-control-allow-credentials")
            .is_none());
    }
    for path in ["/api/threads", "/api/policies", "/healthz"] {
        let r = client
            .get(format!("{}{path}", closed.url))
            .bearer_auth(ADMIN_KEY)
            .header("origin", "https://auditor.example.org")
            .send()
            .await
            .unwrap();
        assert!(
            r.headers().get("access-control-allow-origin").is_none(),
            "{path}"
        );
    }

    let open = Proxy::start(
        "auth-cors-on",
        &secured_config(
            &v1(&llm),
            "[server]\ncors_origins = [\"https://app.example.com\"]\n",
            "",
        ),
    );
    let r = preflight(
        format!("{}/v1/chat/completions", open.url),
        "https://app.example.com",
    )
    .await
    .unwrap();
    assert_eq!(
        r.headers()["access-control-allow-origin"],
        "https://app.example.com"
    );
    let allowed = r.headers()["access-control-allow-headers"]
        .to_str()
        .unwrap()
        .to_ascii_lowercase();
    assert!(allowed.contains("authorization"), "{allowed}");
    let r = preflight(
        format!("{}/v1/chat/completions", open.url),
        "https://evil.example.com",
    )
    .await
    .unwrap();
    assert!(r.headers().get("access-control-allow-origin").is_none());
    // A real cross-origin call still needs a key.
    let r = client
        .get(format!("{}/api/threads", open.url))
        .header("origin", "https://app.example.com")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 401);
    assert_eq!(
        r.headers()["access-control-allow-origin"],
        "https://app.example.com"
    );

    // Authoring endpoints take policies up to Bedrock's limits (500 rules).
    let rules: Vec<Value> = (0..501)
        .map(|i| json!({"id": format!("R{i}"), "expression": "a"}))
        .collect();
    let big = json!({"policy": {
        "variables": [{"name": "a", "type": "BOOL", "description": "a"}],
        "rules": rules
    }});
    let r = post(&closed, "/api/policies/gen-tests", ADMIN_KEY, big).await;
    assert_eq!(r.status, 413, "{r:?}");
    assert_eq!(r.code(), "policy_too_large");
    assert!(r.body["error"]["message"]
        .as_str()
        .unwrap()
        .contains("501 rules"));
}

/// Z3 checks solved so far (a check answered from the findings cache takes no solver time
/// and is not counted).
async fn solver_checks(proxy: &Proxy) -> u64 {
    let r = get(proxy, "/metrics", ADMIN_KEY, &[]).await;
    let text = r.body.as_str().unwrap_or_default().to_string();
    text.lines()
        .find_map(|l| l.strip_prefix("proofgate_solver_seconds_count "))
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or_else(|| panic!("no solver count in /metrics: {text}"))
}

#[tokio::test]
async fn one_keys_cached_findings_never_answer_another_keys_question() {
    // A cache hit answers in microseconds where a check takes milliseconds: were entries
    // shared, key B could tell from its answer's speed that key A had asked the same thing.
    let llm = demo_llm();
    let proxy = Proxy::start("auth-cache-scope", &secured_config(&v1(&llm), "", ""));
    let a = new_key(&proxy, "app a", &["chat"]).await;
    let b = new_key(&proxy, "app b", &["chat"]).await;
    let ask = |key: String| {
        let proxy = &proxy;
        async move {
            let before = solver_checks(proxy).await;
            let r = chat(proxy, &key, first_turn(None), &[]).await;
            assert_eq!(r.header("x-proofgate-verdict"), "NEEDS_INPUT", "{r:?}");
            (r.content().to_string(), solver_checks(proxy).await - before)
        }
    };
    let (a_first, a_solved) = ask(a.clone()).await;
    assert!(a_solved > 0, "key A's first question was not checked");
    let (b_first, b_solved) = ask(b.clone()).await;
    assert_eq!(
        b_solved, a_solved,
        "key B's question was answered from key A's entries"
    );
    assert_eq!(b_first, a_first, "the same question, the same findings");
    // Each key's own repeat comes from its own entries.
    for key in [&a, &b] {
        let (again, solved) = ask(key.clone()).await;
        assert_eq!(solved, 0, "a key's repeated question was solved again");
        assert_eq!(again, a_first);
    }
    // So do each end user's of a key: another end user's question is solved.
    let ask_as = |user: &'static str| {
        let (proxy, a) = (&proxy, a.clone());
        async move {
            let before = solver_checks(proxy).await;
            let r = chat(proxy, &a, first_turn(Some(user)), &[]).await;
            assert_eq!(r.header("x-proofgate-verdict"), "NEEDS_INPUT", "{r:?}");
            solver_checks(proxy).await - before
        }
    };
    assert_eq!(
        ask_as("u1").await,
        a_solved,
        "end user u1 was answered from the key's entries"
    );
    assert_eq!(
        ask_as("u1").await,
        0,
        "u1's repeated question was solved again"
    );
    assert_eq!(
        ask_as("u2").await,
        a_solved,
        "u2 was answered from u1's entries"
    );

    // The same through the ApplyGuardrail-compatible endpoint, with two new keys (the loop
    // above may have checked this answer for A and B already).
    let c = new_key(&proxy, "app c", &["chat"]).await;
    let d = new_key(&proxy, "app d", &["chat"]).await;
    let guard = |key: String| {
        let proxy = &proxy;
        async move {
            let body = json!({"source": "OUTPUT", "content": [
                {"text": {"text": Q1, "qualifiers": ["query"]}},
                {"text": {"text": "Seniors get 40% off the $50 fee, so you pay $30 after the discount.", "qualifiers": ["guard_content"]}}
            ]});
            let before = solver_checks(proxy).await;
            let r = post(proxy, "/guardrail/local/version/1/apply", &key, body).await;
            assert_eq!(r.status, 200, "{r:?}");
            let findings = r.body["assessments"][0]["automatedReasoningPolicy"]["findings"].clone();
            assert!(findings[0].get("invalid").is_some(), "{r:?}");
            (findings, solver_checks(proxy).await - before)
        }
    };
    let (c_found, c_solved) = guard(c.clone()).await;
    assert!(c_solved > 0, "key C's guardrail call was not checked");
    let (d_found, d_solved) = guard(d.clone()).await;
    assert_eq!(
        d_solved, c_solved,
        "key D's guardrail call was answered from key C's entries"
    );
    assert_eq!(d_found, c_found);
    for key in [c, d] {
        let (again, solved) = guard(key).await;
        assert_eq!(
            solved, 0,
            "a key's repeated guardrail call was solved again"
        );
        assert_eq!(again, c_found);
    }
}

#[tokio::test]
async fn requests_without_a_key_are_limited_per_address_and_the_health_check_never_is() {
    let llm = demo_llm();
    let proxy = Proxy::start(
        "address-rate",
        &secured_config(&v1(&llm), "", "[limits]\nrequests_per_minute = 5\n"),
    );
    let key = new_key(&proxy, "steady", &["chat", "read"]).await;
    assert_eq!(get(&proxy, "/api/me", &key, &[]).await.status, 200);
    let anonymous = |path: &'static str, key: Option<String>| {
        let proxy = &proxy;
        async move { call(proxy, reqwest::Method::GET, path, key.as_deref(), None, &[]).await }
    };
    // Keys not known to be real cost the address one request each before their lookup (the
    // real key's first lookup above was the first): past the quota, no lookup is made.
    let mut statuses = Vec::new();
    for i in 0..8 {
        let r = anonymous("/api/me", Some(format!("pg_made_up_{i}"))).await;
        statuses.push(r.status);
        if r.status == 429 {
            assert!(r.headers.contains_key("retry-after"), "{r:?}");
            assert_eq!(r.code(), "rate_limited", "{r:?}");
            assert!(
                r.body["error"]["message"]
                    .as_str()
                    .unwrap()
                    .contains("client address"),
                "{r:?}"
            );
        }
    }
    assert_eq!(statuses, [401, 401, 401, 401, 429, 429, 429, 429]);
    // Public material counts against the same quota: a flood of checkpoint reads (each one
    // signs and takes the log's lock) is refused, not served.
    for path in ["/api/log/checkpoint", "/.well-known/proofgate/audit-key"] {
        let r = anonymous(path, None).await;
        assert_eq!(r.status, 429, "{path}: {r:?}");
        assert!(r.headers.contains_key("retry-after"), "{r:?}");
    }
    // The health check is never refused, and a key found before keeps working from that
    // address (its cache entry expired: it is looked up again, at no cost to the address).
    for _ in 0..20 {
        assert_eq!(anonymous("/healthz", None).await.status, 200);
    }
    tokio::time::sleep(std::time::Duration::from_millis(1200)).await;
    assert_eq!(get(&proxy, "/api/me", &key, &[]).await.status, 200);
}

/// An LLM that answers every request after 3 s: requests that hold their places a while.
fn slow_llm() -> Server {
    Server::python(
        "scripted_llm.py",
        &json!({"rules": [{"match": "", "reply": "You pay $35.75.", "delay_ms": 3000}]}),
    )
}

#[tokio::test]
async fn threads_run_in_the_background_hold_a_place_in_flight_and_have_a_requests_time() {
    // Every LLM answer takes 3 s; a request has 1.5 s; two requests may be served at once.
    let llm = slow_llm();
    let proxy = Proxy::start(
        "background-limits",
        &secured_config(
            &v1(&llm),
            "",
            // One key may hold both places (by default the last is kept for other keys: see
            // `a_key_holding_many_places_leaves_the_last_ones_to_other_keys`).
            "[limits]\nmax_concurrent_requests = 2\nplaces_kept_for_other_keys = 0\n\
             request_timeout_ms = 1500\n",
        ),
    );
    let key = new_key(&proxy, "ui", &["chat", "read"]).await;
    let start = || {
        post(
            &proxy,
            "/api/threads",
            &key,
            json!({"question": Q2, "wait": false}),
        )
    };
    // Each background thread keeps the place its request had after the 202: two run, and the
    // third is refused before anything is saved.
    let first = start().await;
    assert_eq!(first.status, 202, "{first:?}");
    let second = start().await;
    assert_eq!(second.status, 202, "{second:?}");
    let third = start().await;
    assert_eq!(third.status, 503, "{third:?}");
    assert_eq!(third.code(), "overloaded", "{third:?}");
    assert!(third.headers.contains_key("retry-after"), "{third:?}");

    // Past the request's time the thread ends as a failed call ends it: ERROR, recorded, and
    // not left to be resumed; its place is free again (until then even a read is refused).
    let id = first.body["id"].as_str().unwrap();
    let mut view = Value::Null;
    for _ in 0..40 {
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        let r = get(&proxy, &format!("/api/threads/{id}"), &key, &[]).await;
        if r.status == 503 {
            continue;
        }
        view = r.body;
        if view["status"] != "processing" {
            break;
        }
    }
    assert_eq!(view["status"], "error", "{view}");
    assert!(
        view["outcome"]["reason"]
            .as_str()
            .unwrap_or_default()
            .contains("request_timeout_ms"),
        "{view}"
    );
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    let listed = get(&proxy, "/api/threads", &key, &[]).await;
    assert_eq!(
        listed.body["threads"].as_array().unwrap().len(),
        2,
        "the refused one left no thread: {listed:?}"
    );
    assert_eq!(start().await.status, 202);
}

/// One key's slow requests cannot take every place the server serves at once and lock the
/// other keys out: a key holding many may not take the last places (an eighth by default),
/// and is told so with a 429 naming the setting; another key still gets them, until the server
/// is full (503). Threads run in the background keep their request's place, so they count.
#[tokio::test]
async fn a_key_holding_many_places_leaves_the_last_ones_to_other_keys() {
    let llm = slow_llm();
    let proxy = Proxy::start(
        "key-share",
        &secured_config(&v1(&llm), "", "[limits]\nmax_concurrent_requests = 4\n"),
    );
    let greedy = new_key(&proxy, "greedy", &["chat", "read"]).await;
    let other = new_key(&proxy, "other", &["chat", "read"]).await;
    let third = new_key(&proxy, "third", &["chat"]).await;
    let start = |key: String| {
        let proxy = &proxy;
        async move {
            post(
                proxy,
                "/api/threads",
                &key,
                json!({"question": Q2, "wait": false}),
            )
            .await
        }
    };
    for _ in 0..3 {
        let r = start(greedy.clone()).await;
        assert_eq!(r.status, 202, "{r:?}");
    }
    let refused = start(greedy.clone()).await;
    assert_eq!(refused.status, 429, "{refused:?}");
    assert_eq!(refused.code(), "too_many_in_flight", "{refused:?}");
    assert!(refused.headers.contains_key("retry-after"), "{refused:?}");
    assert!(
        refused.body["error"]["message"]
            .as_str()
            .unwrap_or_default()
            .contains("places_kept_for_other_keys"),
        "{refused:?}"
    );
    // Even a read: the place left is kept for other keys.
    assert_eq!(get(&proxy, "/api/threads", &greedy, &[]).await.status, 429);
    // Another key is served; then the server is full for everyone.
    let r = start(other.clone()).await;
    assert_eq!(r.status, 202, "{r:?}");
    let full = start(third).await;
    assert_eq!(full.status, 503, "{full:?}");
    assert_eq!(full.code(), "overloaded", "{full:?}");
}

#[tokio::test]
async fn one_place_in_flight_is_enough_for_a_thread_in_the_background() {
    let llm = demo_llm();
    let proxy = Proxy::start(
        "background-one-place",
        &secured_config(&v1(&llm), "", "[limits]\nmax_concurrent_requests = 1\n"),
    );
    let key = new_key(&proxy, "ui", &["chat", "read"]).await;
    let started = post(
        &proxy,
        "/api/threads",
        &key,
        json!({"question": Q2, "wait": false}),
    )
    .await;
    assert_eq!(started.status, 202, "{started:?}");
    let id = started.body["id"].as_str().unwrap();
    let mut status = Value::Null;
    for _ in 0..100 {
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        let r = get(&proxy, &format!("/api/threads/{id}"), &key, &[]).await;
        if r.status == 200 && r.body["status"] != "processing" {
            status = r.body["status"].clone();
            break;
        }
    }
    assert_eq!(status, "awaiting_input");
}

/// Reads what the server sends on `stream` until it closes the connection (or `within`
/// passes: then the connection is still open).
fn read_until_closed(
    stream: &mut std::net::TcpStream,
    within: std::time::Duration,
) -> Option<String> {
    use std::io::Read;
    stream.set_read_timeout(Some(within)).unwrap();
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        match stream.read(&mut buf) {
            Ok(0) => return Some(String::from_utf8_lossy(&got).to_string()),
            Ok(n) => got.extend_from_slice(&buf[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => {
                return Some(String::from_utf8_lossy(&got).to_string())
            }
            Err(_) => return None,
        }
    }
}

/// A client that never finishes its headers, or opens a connection and says nothing, is cut
/// off after `[limits] header_timeout_ms` (no key needed to try: it comes before any route);
/// beyond `[limits] max_connections` a connection gets a 503 and is closed, and the server
/// serves again once connections close.
#[test]
#[cfg(target_os = "linux")] // clients on 127.0.0.2 and 127.0.0.3 (see `connect_from`)
fn half_sent_headers_are_cut_off_and_open_connections_are_capped() {
    // Both ways of serving: an event loop per core (the default) and Tokio's work stealing.
    for runtime in ["per-core", "work-stealing"] {
        connection_limits_hold(runtime);
    }
}

fn connection_limits_hold(runtime: &str) {
    use std::io::Write;
    use std::net::TcpStream;
    use std::time::{Duration, Instant};
    let llm = demo_llm();
    let start = |name: &str, limits: &str| {
        Proxy::start(
            &format!("{name}-{runtime}"),
            &secured_config(
                &v1(&llm),
                "",
                &format!("[limits]\n{limits}[server]\nruntime = \"{runtime}\"\n"),
            ),
        )
    };
    let address = |proxy: &Proxy| proxy.url.trim_start_matches("http://").to_string();
    let health = |stream: &mut TcpStream| {
        stream
            .write_all(b"GET /healthz HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n")
            .unwrap();
        read_until_closed(stream, Duration::from_secs(20)).expect("answered")
    };

    // Half a request, then nothing: closed after the header time, long before the request
    // deadline (300 s), and so is a connection that never sends a byte.
    let timed = start("header-timeout", "header_timeout_ms = 700\n");
    let addr = address(&timed);
    assert!(health(&mut TcpStream::connect(&addr).unwrap()).starts_with("HTTP/1.1 200"));
    let mut half = TcpStream::connect(&addr).unwrap();
    half.write_all(b"POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\ncontent-le")
        .unwrap();
    let mut silent = TcpStream::connect(&addr).unwrap();
    // The first byte of an HTTP/2 preface, then nothing (a server that waits to tell HTTP/1
    // from HTTP/2 would wait for ever).
    let mut preface = TcpStream::connect(&addr).unwrap();
    preface.write_all(b"P").unwrap();
    let started = Instant::now();
    let said = read_until_closed(&mut half, Duration::from_secs(20)).expect("closed");
    assert!(!said.contains(" 200 "), "{said}");
    assert!(read_until_closed(&mut silent, Duration::from_secs(20)).is_some());
    assert!(read_until_closed(&mut preface, Duration::from_secs(20)).is_some());
    // Far below the deadline, with room for a busy machine.
    assert!(
        started.elapsed() < Duration::from_secs(15),
        "{:?}",
        started.elapsed()
    );
    drop(timed);

    // Kept-alive connections fill the caps: one address's fourth is told 503 and closed, and
    // so is the fifth overall, without a key (no route is reached). Each held connection has
    // been served once, so the server has surely accepted it (a connection still in the
    // kernel's queue would not count yet), and the header time (30 s) is far longer than the
    // test needs.
    let capped = start(
        "connection-cap",
        // Held connections wait far longer than the test takes, however slow the machine.
        // Loopback clients are held to the per-address cap only when told.
        "max_connections = 4\nmax_connections_per_address = 3\ncap_private_addresses = true\n\
         header_timeout_ms = 600000\n",
    );
    let addr = address(&capped);
    let hold = |from: &str| -> Result<TcpStream, String> {
        let mut stream = connect_from(from, &addr);
        stream
            .write_all(b"GET /healthz HTTP/1.1\r\nhost: x\r\n\r\n")
            .unwrap();
        let head = read_one_response(&mut stream, Duration::from_secs(20));
        if head.starts_with("HTTP/1.1 200") {
            Ok(stream)
        } else {
            Err(head)
        }
    };
    let refused_from = |from: &str, setting: &str| {
        let mut stream = connect_from(from, &addr);
        let refused = health(&mut stream);
        assert!(refused.starts_with("HTTP/1.1 503"), "{refused}");
        assert!(
            refused.to_ascii_lowercase().contains("retry-after: 1"),
            "{refused}"
        );
        assert!(refused.contains("\"code\":\"overloaded\""), "{refused}");
        assert!(
            refused.contains(&format!("[limits] {setting})")),
            "{refused}"
        );
        // The server reads what the client still sends after the 503 rather than closing on
        // it: a socket closed with unread input answers with a reset, which can wipe the 503
        // from the client's buffer before it is read. (Had it closed, a write would draw a
        // reset, and the next write would fail.)
        for more in ["more", "and more", "and still more"] {
            stream
                .write_all(more.as_bytes())
                .unwrap_or_else(|e| panic!("{setting}: the server closed on unread input: {e}"));
            std::thread::sleep(Duration::from_millis(100));
        }
    };
    let mut held: Vec<TcpStream> = (0..3).map(|_| hold("127.0.0.1").unwrap()).collect();
    refused_from("127.0.0.1", "max_connections_per_address");
    // Another address gets in: a refusal holds no place.
    let mut others = vec![hold("127.0.0.2").unwrap()];
    // Every place is taken: a newcomer gets one of the address holding the most, whose
    // idle connection is closed, until no address holds more than a newcomer would.
    let one_closed = |held: &mut Vec<TcpStream>| {
        let until = Instant::now() + Duration::from_secs(20);
        loop {
            for i in 0..held.len() {
                held[i]
                    .set_read_timeout(Some(Duration::from_millis(50)))
                    .unwrap();
                let mut byte = [0u8; 1];
                match std::io::Read::read(&mut held[i], &mut byte) {
                    Ok(0) => {
                        held.remove(i);
                        return;
                    }
                    Err(e)
                        if e.kind() != std::io::ErrorKind::WouldBlock
                            && e.kind() != std::io::ErrorKind::TimedOut =>
                    {
                        held.remove(i);
                        return;
                    }
                    _ => {}
                }
            }
            assert!(Instant::now() < until, "no held connection was closed");
        }
    };
    for newcomer in ["127.0.0.3", "127.0.0.4"] {
        others.push(hold(newcomer).unwrap());
        one_closed(&mut held);
    }
    assert_eq!(held.len(), 1);
    refused_from("127.0.0.5", "max_connections");
    // Once they close, the server serves again (as soon as it has seen them go).
    drop((held, others));
    let until = Instant::now() + Duration::from_secs(20);
    loop {
        let said = health(&mut TcpStream::connect(&addr).unwrap());
        if said.starts_with("HTTP/1.1 200") {
            break;
        }
        assert!(Instant::now() < until, "still refused: {said}");
        std::thread::sleep(Duration::from_millis(50));
    }
    // The operator sees the refusals by cap (an admin's read of /metrics).
    let mut stream = TcpStream::connect(&addr).unwrap();
    stream
        .write_all(
            format!(
                "GET /metrics HTTP/1.1\r\nhost: x\r\nauthorization: Bearer {ADMIN_KEY}\r\n\
                 connection: close\r\n\r\n"
            )
            .as_bytes(),
        )
        .unwrap();
    let metrics = read_until_closed(&mut stream, Duration::from_secs(20)).expect("answered");
    for cap in ["max_connections", "max_connections_per_address"] {
        let prefix = format!("proofgate_refused_connections_total{{cap=\"{cap}\"}} ");
        let refused: f64 = metrics
            .lines()
            .find_map(|l| l.strip_prefix(prefix.as_str()))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or_else(|| panic!("no {prefix}in\n{metrics}"));
        assert!(refused >= 1.0, "{cap}: {refused}");
    }
}

/// A connection to `addr` from the loopback address `from` (Linux answers on all of
/// 127.0.0.0/8), as a client on another machine would make.
fn connect_from(from: &str, addr: &str) -> std::net::TcpStream {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_io()
        .build()
        .unwrap();
    let stream = runtime.block_on(async {
        let socket = tokio::net::TcpSocket::new_v4().unwrap();
        socket.bind(format!("{from}:0").parse().unwrap()).unwrap();
        socket.connect(addr.parse().unwrap()).await.unwrap()
    });
    let stream = stream.into_std().unwrap();
    stream.set_nonblocking(false).unwrap();
    stream
}

/// Reads one response on a kept-alive connection: its head, and a body of `content-length`.
fn read_one_response(stream: &mut std::net::TcpStream, within: std::time::Duration) -> String {
    use std::io::Read;
    stream.set_read_timeout(Some(within)).unwrap();
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        let text = String::from_utf8_lossy(&got).to_string();
        if let Some(end) = text.find("\r\n\r\n") {
            let length = text[..end]
                .lines()
                .find_map(|line| {
                    let (name, value) = line.split_once(':')?;
                    name.eq_ignore_ascii_case("content-length")
                        .then(|| value.trim().parse::<usize>().ok())?
                })
                .expect("a content-length");
            if got.len() >= end + 4 + length {
                return text;
            }
        }
        let n = stream.read(&mut buf).expect("a response");
        assert!(n > 0, "closed before a whole response: {text}");
        got.extend_from_slice(&buf[..n]);
    }
}

/// A request whose body trickles in holds its connection, not one of the places every key
/// shares: its body is read before a place is taken, and it gets a 408 after the header time.
#[tokio::test]
async fn a_body_sent_a_byte_at_a_time_takes_no_place_and_times_out() {
    use std::io::Write;
    use std::net::TcpStream;
    use std::time::{Duration, Instant};
    let llm = demo_llm();
    let proxy = Proxy::start(
        "slow-body",
        &secured_config(
            &v1(&llm),
            "",
            "[limits]\nheader_timeout_ms = 1500\nmax_concurrent_requests = 1\n",
        ),
    );
    let key = new_key(&proxy, "app", &["chat", "read"]).await;
    let addr = proxy.url.trim_start_matches("http://").to_string();
    let mut slow = TcpStream::connect(&addr).unwrap();
    slow.write_all(
        format!(
            "POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\nauthorization: Bearer {key}\r\n\
             content-type: application/json\r\ncontent-length: 200\r\n\r\n{{\"model\""
        )
        .as_bytes(),
    )
    .unwrap();
    let started = Instant::now();
    std::thread::sleep(Duration::from_millis(200));
    // The one place is free for another request meanwhile.
    let other = get(&proxy, "/api/threads", &key, &[]).await;
    assert_eq!(other.status, 200, "{other:?}");
    let said = read_until_closed(&mut slow, Duration::from_secs(10)).expect("answered");
    assert!(said.starts_with("HTTP/1.1 408"), "{said}");
    assert!(
        said.contains("body_timeout") && said.contains("header_timeout_ms"),
        "{said}"
    );
    assert!(
        started.elapsed() < Duration::from_secs(12),
        "{:?}",
        started.elapsed()
    );
}

/// Why a thread failed names endpoints and quotes their responses: a key that may read threads
/// sees it, a chat-only key does not (as `/v1` clients do not).
#[tokio::test]
async fn a_chat_only_key_is_not_told_why_a_thread_failed() {
    let proxy = Proxy::start(
        "failed-reason",
        &secured_config(
            "http://127.0.0.1:9/v1",
            "",
            "[loop]\nallow_questions = false\n",
        ),
    );
    for (scopes, sees_reason) in [(&["chat"][..], false), (&["chat", "read"][..], true)] {
        let key = new_key(&proxy, &format!("{scopes:?}"), scopes).await;
        let body = json!({"question": Q2, "answer": "You pay $12.", "wait": true});
        let r = post(&proxy, "/api/threads", &key, body).await;
        assert_eq!(r.body["status"], "error", "{r:?}");
        assert_eq!(r.body["outcome"]["status"], "ERROR", "{r:?}");
        assert_eq!(
            r.body["outcome"]["reason"].is_string(),
            sees_reason,
            "{scopes:?}: {}",
            r.body
        );
        assert_eq!(
            r.body.to_string().contains("127.0.0.1:9"),
            sees_reason,
            "{scopes:?}: {}",
            r.body
        );
    }
}

/// A revoked key is held by whoever its revocation was meant to stop: its lookups cost the
/// client's address, as a made-up key's do, where they were free once the key had worked.
#[tokio::test]
async fn a_revoked_keys_lookups_cost_its_address() {
    let llm = Server::python("scripted_llm.py", &json!({"default": "unused"}));
    let cfg = secured_config(
        &v1(&llm),
        "[auth]\nkey_cache_ms = 0\n",
        "[limits]\nrequests_per_minute = 5\n",
    );
    let proxy = Proxy::start("revoked-rate", &cfg);
    let key = new_key(&proxy, "app", &["read"]).await;
    assert_eq!(get(&proxy, "/api/me", &key, &[]).await.status, 200);
    let id = get(&proxy, "/api/me", &key, &[]).await.body["id"]
        .as_str()
        .unwrap()
        .to_string();
    let revoked = revoke(&proxy, &id).await;
    assert_eq!(revoked.status, 200, "{revoked:?}");
    let mut statuses = Vec::new();
    for _ in 0..20 {
        statuses.push(get(&proxy, "/api/me", &key, &[]).await.status);
    }
    assert!(
        statuses.iter().all(|s| *s == 401 || *s == 429),
        "{statuses:?}"
    );
    assert!(statuses.contains(&429), "{statuses:?}");
}

/// Threads continued in the background (their questions timed out, or resumed after an
/// interrupted step) count among their owner's places: a key leaving many questions
/// unanswered cannot have them all continued at once and lock the other keys out. They took
/// any free place, the ones kept for other keys too, and every other key got a 503.
#[tokio::test]
async fn threads_continued_in_the_background_count_among_their_owners_places() {
    let mut script: Value = serde_json::from_str(
        &std::fs::read_to_string(repo_root().join("examples/demo/recorded-llm.json")).unwrap(),
    )
    .unwrap();
    // The answer rewritten once the questions time out takes long: each continued thread
    // holds its place meanwhile.
    script["rules"].as_array_mut().unwrap().insert(
        0,
        json!({"match": "did not answer your follow-up questions", "delay_ms": 8000,
               "reply": "You pay $35.75."}),
    );
    let llm = Server::python("scripted_llm.py", &script);
    let proxy = Proxy::start(
        "background-places",
        &secured_config(
            &v1(&llm),
            "",
            "[limits]\nmax_concurrent_requests = 4\n[loop]\nquestion_timeout_secs = 1\n\
             [server]\nmaintenance_interval_ms = 200\n",
        ),
    );
    let greedy = new_key(&proxy, "greedy", &["chat", "read"]).await;
    let other = new_key(&proxy, "other", &["chat", "read"]).await;
    for _ in 0..4 {
        let r = post(&proxy, "/api/threads", &greedy, json!({"question": Q2})).await;
        assert_eq!(r.body["status"], "awaiting_input", "{r:?}");
    }
    // The questions time out after 1 s and the maintenance pass continues the threads.
    tokio::time::sleep(std::time::Duration::from_millis(3000)).await;
    // Three of the four were continued; the fourth waits for a place of its owner's.
    let listed = get(&proxy, "/api/threads", ADMIN_KEY, &[]).await;
    let processing = listed.body["threads"]
        .as_array()
        .unwrap_or_else(|| panic!("{listed:?}"))
        .iter()
        .filter(|t| t["status"] == "processing")
        .count();
    assert_eq!(processing, 3, "{listed:?}");
    let r = post(
        &proxy,
        "/api/threads",
        &other,
        json!({"question": Q2, "wait": false}),
    )
    .await;
    assert_eq!(r.status, 202, "a place is left for another key: {r:?}");
}

/// A review's case: threads a key left waiting were continued in the background after the key
/// was revoked (the operator paying LLM and solver calls for a key that no longer works). They
/// end instead, saying why, with no LLM call.
#[tokio::test]
async fn a_revoked_keys_waiting_threads_are_not_continued() {
    let llm = demo_llm();
    let proxy = Proxy::start(
        "revoked-background",
        &secured_config(
            &v1(&llm),
            "",
            "[loop]\nquestion_timeout_secs = 1\n[server]\nmaintenance_interval_ms = 200\n",
        ),
    );
    let key = new_key(&proxy, "leaving", &["chat", "read"]).await;
    let r = post(&proxy, "/api/threads", &key, json!({"question": Q2})).await;
    assert_eq!(r.body["status"], "awaiting_input", "{r:?}");
    let id = r.body["id"].as_str().unwrap().to_string();
    let calls_before = llm.received().len();
    let key_id = get(&proxy, "/api/me", &key, &[]).await.body["id"]
        .as_str()
        .unwrap()
        .to_string();
    assert_eq!(revoke(&proxy, &key_id).await.status, 200);
    // The questions time out after 1 s; the maintenance pass ends the thread.
    let mut status = Value::Null;
    for _ in 0..50 {
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
        let t = get(&proxy, &format!("/api/threads/{id}"), ADMIN_KEY, &[]).await;
        status = t.body["status"].clone();
        if status != "awaiting_input" && status != "processing" {
            break;
        }
    }
    assert_eq!(status, "error");
    assert_eq!(
        llm.received().len(),
        calls_before,
        "no LLM call after the revocation"
    );
    let trail = get(&proxy, &format!("/api/threads/{id}/audit"), ADMIN_KEY, &[]).await;
    let failed = trail
        .body
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["kind"] == "FAILED")
        .cloned();
    let reason = failed
        .as_ref()
        .map(|f| f["body"]["reason"].to_string())
        .unwrap_or_default();
    assert!(
        reason.contains("its key was revoked or has expired"),
        "{trail:?}"
    );
}

/// A NUL character in any text of a request is refused at the door with a 400 that says so:
/// PostgreSQL cannot store one in a text column, so a question or end user holding one failed
/// its thread's write after the LLM calls were spent. An escaped backslash before "u0000" is
/// text and goes through.
#[tokio::test]
async fn a_nul_character_in_a_request_is_refused_at_the_door() {
    let llm = demo_llm();
    let proxy = Proxy::start("nul", &secured_config(&v1(&llm), "", ""));
    let key = new_key(&proxy, "nul app", &["chat", "read"]).await;
    for body in [
        json!({"messages": [{"role": "user", "content": Q2}], "user": "a\u{0}b"}),
        json!({"messages": [{"role": "user", "content": format!("{Q2}\u{0}")}]}),
    ] {
        let r = chat(&proxy, &key, body, &[]).await;
        assert_eq!(r.status, 400, "{r:?}");
        let message = r.body["error"]["message"].as_str().unwrap_or_default();
        assert!(message.contains("NUL"), "{message}");
    }
    let r = post(
        &proxy,
        "/api/threads",
        &key,
        json!({"question": "I am 70. How much will I pay in total for admission? \\u0000"}),
    )
    .await;
    assert_ne!(r.status, 400, "{r:?}");
    assert_eq!(
        get(&proxy, "/api/threads", &key, &[]).await.body["threads"]
            .as_array()
            .map(Vec::len),
        Some(1),
        "only the request without NUL started a thread"
    );
}

/// A client that asks for a large response and reads none of it is cut off once a write has
/// waited `[limits] write_timeout_ms`: hyper has no write limit, and such a client held its
/// connection (one of `max_connections`) and the task writing to it for ever.
#[tokio::test]
async fn a_client_that_does_not_read_its_response_is_cut_off() {
    use tokio::io::AsyncReadExt;
    let llm = demo_llm();
    let proxy = Proxy::start(
        "write-timeout",
        &secured_config(
            &v1(&llm),
            "",
            "[limits]\nwrite_timeout_ms = 300\n[server]\nweb_dir = \"{dir}/www\"\n",
        ),
    );
    let size = 32 << 20;
    let mut stream = asking_for_a_big_file(&proxy, size).await;
    // Reads nothing for well past the write limit, then everything that comes.
    tokio::time::sleep(std::time::Duration::from_millis(1500)).await;
    let mut got = Vec::new();
    let read = tokio::time::timeout(
        std::time::Duration::from_secs(20),
        stream.read_to_end(&mut got),
    )
    .await;
    assert!(read.is_ok(), "the server kept the connection open");
    assert!(
        got.len() < size,
        "the whole {size}-byte response came: the connection was not cut off"
    );
    // The server still serves everyone else.
    assert_eq!(
        call(&proxy, reqwest::Method::GET, "/healthz", None, None, &[])
            .await
            .status,
        200
    );
}

/// A connection with a 4 KiB receive buffer that has asked for a `size`-byte page file (written
/// into the proxy's `{dir}/www`, its `web_dir`) and read nothing yet.
async fn asking_for_a_big_file(proxy: &Proxy, size: usize) -> tokio::net::TcpStream {
    use tokio::io::AsyncWriteExt;
    std::fs::create_dir_all(proxy.dir().join("www")).unwrap();
    std::fs::write(proxy.dir().join("www/big.wasm"), vec![7u8; size]).unwrap();
    let addr: std::net::SocketAddr = proxy.url.trim_start_matches("http://").parse().unwrap();
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.set_recv_buffer_size(4096).unwrap();
    let mut stream = socket.connect(addr).await.unwrap();
    stream
        .write_all(b"GET /big.wasm HTTP/1.1\r\nhost: x\r\n\r\n")
        .await
        .unwrap();
    stream
}

/// A client that reads its response a little at a time, below the minimum rate (64 KiB per
/// `write_timeout_ms`), gives its connection place back as one that reads nothing does: with
/// one place, the next client is served within moments, not refused while the slow one
/// reads. (What the kernel had already taken may still reach the slow client after that.)
#[tokio::test]
async fn a_client_that_reads_its_response_too_slowly_gives_its_place_back() {
    use tokio::io::AsyncReadExt;
    let llm = demo_llm();
    let proxy = Proxy::start(
        "slow-reader",
        &secured_config(
            &v1(&llm),
            "",
            "[limits]\nwrite_timeout_ms = 1000\nmax_connections = 1\n\
             [server]\nweb_dir = \"{dir}/www\"\n",
        ),
    );
    let mut stream = asking_for_a_big_file(&proxy, 64 << 20).await;
    let slow = tokio::spawn(async move {
        let mut buf = vec![0u8; 4096];
        loop {
            tokio::time::sleep(std::time::Duration::from_millis(300)).await;
            if matches!(stream.read(&mut buf).await, Ok(0) | Err(_)) {
                return;
            }
        }
    });
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    let mut served = false;
    for _ in 0..40 {
        let status = reqwest::get(format!("{}/healthz", proxy.url))
            .await
            .map(|r| r.status().as_u16());
        if status.is_ok_and(|s| s == 200) {
            served = true;
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(250)).await;
    }
    slow.abort();
    assert!(served, "the slow reader kept the only connection place");
}

/// With every connection place held by one address (idle connections, as a client pinging
/// `/healthz` on kept-alive connections or sending headers slowly holds them), a client from
/// another address is served: one of the hog's connections is closed for it, where it got a
/// 503 for as long as the hog liked.
#[tokio::test]
async fn a_client_is_served_when_another_address_holds_every_place() {
    use tokio::io::AsyncReadExt;
    let llm = demo_llm();
    let proxy = Proxy::start(
        "connection-hog",
        &secured_config(
            &v1(&llm),
            "",
            "[limits]\nmax_connections = 4\nmax_connections_per_address = 100\n\
             cap_private_addresses = true\n",
        ),
    );
    let addr: std::net::SocketAddr = proxy.url.trim_start_matches("http://").parse().unwrap();
    let mut hog = Vec::new();
    for _ in 0..4 {
        let socket = tokio::net::TcpSocket::new_v4().unwrap();
        socket.bind("127.0.0.2:0".parse().unwrap()).unwrap();
        hog.push(socket.connect(addr).await.unwrap());
    }
    tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    let client = reqwest::Client::builder()
        .local_address(std::net::IpAddr::from([127, 0, 0, 1]))
        .build()
        .unwrap();
    let status = client
        .get(format!("{}/healthz", proxy.url))
        .send()
        .await
        .unwrap()
        .status();
    assert_eq!(
        status, 200,
        "refused while another address held every place"
    );
    // One of the hog's connections was closed for it.
    let mut closed = 0;
    for conn in &mut hog {
        let mut byte = [0u8; 1];
        let read =
            tokio::time::timeout(std::time::Duration::from_millis(500), conn.read(&mut byte)).await;
        closed += usize::from(matches!(read, Ok(Ok(0)) | Ok(Err(_))));
    }
    assert_eq!(closed, 1, "closed {closed} of the hog's connections");
}

/// The page's directory is public, so only the page's own kinds of file are served from it:
/// a configuration, a key, a database or a dotfile put there (or a `web_dir` pointed at a
/// directory holding them) is a 404, however its name is escaped.
#[tokio::test]
async fn the_page_directory_serves_only_page_files() {
    let llm = demo_llm();
    let proxy = Proxy::start(
        "web-files",
        &secured_config(&v1(&llm), "", "[server]\nweb_dir = \"{dir}/www\"\n"),
    );
    let www = proxy.dir().join("www");
    std::fs::create_dir_all(www.join(".git")).unwrap();
    for (name, body) in [
        ("index.html", "<p>page</p>"),
        ("app.js", "let page;"),
        ("proofgate.toml", "[upstream]\napi_key = \"sk-SECRET\"\n"),
        ("audit.key", "PRIVATE+KEY"),
        ("copy.sqlite", "SQLite format 3"),
        ("copy.sqlite-wal", "wal"),
        (".env", "SECRET=1"),
        (".git/config", "[remote]"),
        ("notes", "no kind"),
    ] {
        std::fs::write(www.join(name), body).unwrap();
    }
    let get = |path: &str| {
        let url = format!("{}{path}", proxy.url);
        async move {
            let r = reqwest::get(url).await.unwrap();
            (r.status().as_u16(), r.text().await.unwrap())
        }
    };
    assert_eq!(get("/").await, (200, "<p>page</p>".to_string()));
    assert_eq!(get("/index.html").await.0, 200);
    assert_eq!(get("/app.js").await.0, 200);
    for path in [
        "/proofgate.toml",
        "/proofgate.toml/",
        "/proofgate.toml%2F",
        "/proofgate.toml//",
        "/audit.key/",
        "/.git/config/",
        "/%5c.env",
        "//proofgate.toml",
        "/audit.key",
        "/copy.sqlite",
        "/copy.sqlite-wal",
        "/.env",
        "/%2eenv",
        "/%2Egit/config",
        "/.git/config",
        "/notes",
        "/proofgate%2etoml",
    ] {
        let (status, body) = get(path).await;
        assert_eq!(status, 404, "{path} was served: {body}");
        assert!(
            !body.contains("SECRET") && !body.contains("PRIVATE"),
            "{path}: {body}"
        );
    }
}

/// A `web_dir` that holds the signing key or the database is refused at start, naming what it
/// would have made public.
#[test]
fn a_web_dir_holding_the_signing_key_is_refused_at_start() {
    let llm = demo_llm();
    let dir = proxy::temp_dir("web-dir-refused");
    let config = dir.join("proofgate.toml");
    std::fs::write(
        &config,
        secured_config(&v1(&llm), "", "[server]\nweb_dir = \"{dir}\"\n")
            .replace("{dir}", &dir.display().to_string()),
    )
    .unwrap();
    let stderr = proxy::refused(&["serve", "--listen", "127.0.0.1:0", "--config"], &config);
    assert!(
        stderr.contains("server.web_dir") && stderr.contains("the audit signing key"),
        "{stderr}"
    );
    assert!(!dir.join("proofgate.sqlite").exists(), "nothing was opened");
}

/// A thread whose records hold a NUL character from the LLM's text (PostgreSQL's JSON refuses
/// the `\u0000` escape) is still listed for its owner, its owner checked from the record on
/// its own: the listing read every first record's owner in one query, and that one row failed
/// the whole listing. Runs when `PROOFGATE_TEST_POSTGRES_URL` is set.
#[tokio::test]
async fn a_thread_holding_a_nul_from_the_llm_is_still_listed_on_postgres() {
    let Some(pg) = proxy::postgres_database("a_thread_holding_a_nul_f").await else {
        eprintln!("PROOFGATE_TEST_POSTGRES_URL unset: PostgreSQL not tested here");
        return;
    };
    let llm = Server::python(
        "scripted_llm.py",
        // The translators answer (nothing in the answer is the policy's): from audit format
        // 13 a round no translator translated fails the validation, and the reply names no
        // thread.
        &json!({"rules": [
            {"match": "You translate", "reply": json!({"pairs": [], "untranslatedPremises": [],
                "untranslatedClaims": ["You pay $35.75."]}).to_string()},
            {"match": "", "reply": "You pay \u{0}$35.75."}]}),
    );
    let cfg = secured_config(&v1(&llm), "", "").replace("sqlite://{dir}/proofgate.sqlite", &pg);
    let proxy = Proxy::start("nul-listing", &cfg);
    let key = new_key(&proxy, "nul listing app", &["chat", "read"]).await;
    let r = chat(&proxy, &key, first_turn(None), &[]).await;
    let id = r.header("x-proofgate-thread").to_string();
    assert!(!id.is_empty(), "{r:?}");
    let listed = get(&proxy, "/api/threads", &key, &[]).await;
    assert_eq!(listed.status, 200, "{listed:?}");
    assert!(
        listed.body["threads"]
            .as_array()
            .unwrap()
            .iter()
            .any(|t| t["id"] == id.as_str()),
        "{listed:?}"
    );
}

/// A key revoked while a thread of its runs stops the thread at its next call: the rewriter's
/// reply (slow here) is the last call made for it, the thread ends as a failed call ends it
/// and says why, and no translator is asked about the rewritten answer. Before, the thread
/// went on calling LLMs and solvers for the revoked key until it ended.
#[tokio::test]
async fn a_key_revoked_while_its_thread_runs_stops_it_at_the_next_call() {
    let mut script: Value = serde_json::from_str(
        &std::fs::read_to_string(repo_root().join("examples/demo/recorded-llm.json")).unwrap(),
    )
    .unwrap();
    for rule in script["rules"].as_array_mut().unwrap() {
        if rule["match"].to_string().contains("DECISION") {
            rule["delay_ms"] = json!(3000);
        }
    }
    let llm = Server::python("scripted_llm.py", &script);
    let proxy = Proxy::start("auth-revoked-running", &secured_config(&v1(&llm), "", ""));
    let key = new_key(&proxy, "app", &["chat", "read"]).await;
    let r = post(
        &proxy,
        "/api/threads",
        &key,
        json!({"question": Q1, "wait": false}),
    )
    .await;
    assert!(r.status == 200 || r.status == 202, "{r:?}");
    let id = r.body["id"]
        .as_str()
        .or(r.body["threadId"].as_str())
        .unwrap()
        .to_string();
    // Revoke while the rewriter is still thinking.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while !llm
        .received()
        .iter()
        .any(|r| r.to_string().contains("DECISION"))
    {
        assert!(
            std::time::Instant::now() < deadline,
            "the rewriter was never asked"
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    let asked_before = llm.received().len();
    let keys = get(&proxy, "/api/keys", ADMIN_KEY, &[]).await;
    let key_id = keys.body["keys"]
        .as_array()
        .unwrap()
        .iter()
        .find(|k| k["name"] == "app")
        .unwrap()["id"]
        .as_str()
        .unwrap()
        .to_string();
    let revoked = call(
        &proxy,
        reqwest::Method::DELETE,
        &format!("/api/keys/{key_id}"),
        Some(ADMIN_KEY),
        None,
        &[],
    )
    .await;
    assert_eq!(revoked.status, 200, "{revoked:?}");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    let thread = loop {
        let t = get(&proxy, &format!("/api/threads/{id}"), ADMIN_KEY, &[]).await;
        assert_eq!(t.status, 200, "{t:?}");
        if t.body["status"] != "processing" {
            break t.body;
        }
        assert!(std::time::Instant::now() < deadline, "{t:?}");
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    };
    assert!(
        thread.to_string().contains("stopped: its key was revoked"),
        "{thread}"
    );
    // Nothing was asked after the rewriter's reply (no translator read the rewritten answer).
    assert_eq!(llm.received().len(), asked_before, "{:?}", llm.received());
}

/// A key's expiry is checked against the clock on every request, cached or not: used (and
/// cached, for a minute here) just before it expires, it is refused right after.
#[tokio::test]
async fn an_expired_key_is_refused_even_while_cached() {
    let llm = demo_llm();
    let proxy = Proxy::start(
        "auth-expiry",
        &secured_config(&v1(&llm), "[auth]\nkey_cache_ms = 60000\n", ""),
    );
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64;
    let r = post(
        &proxy,
        "/api/keys",
        ADMIN_KEY,
        json!({"name": "short-lived", "scopes": ["read"], "expiresAt": now + 1500}),
    )
    .await;
    assert_eq!(r.status, 201, "{r:?}");
    let key = r.body["key"].as_str().unwrap().to_string();
    assert_eq!(get(&proxy, "/api/threads", &key, &[]).await.status, 200);
    tokio::time::sleep(std::time::Duration::from_millis(1700)).await;
    let r = get(&proxy, "/api/threads", &key, &[]).await;
    assert_eq!(r.status, 401, "{r:?}");
    assert_eq!(r.code(), "invalid_api_key");
    // A key that has already expired is not made.
    let r = post(
        &proxy,
        "/api/keys",
        ADMIN_KEY,
        json!({"name": "expired", "scopes": ["read"], "expiresAt": now - 1000}),
    )
    .await;
    assert_eq!(r.status, 400, "{r:?}");
}

/// The owner of a Responses API thread is the key and the end user in `user`, or else in
/// `safety_identifier`: two end users of one key each resume only their own thread and read
/// only their own.
#[tokio::test]
async fn responses_threads_belong_to_the_end_user_in_user_or_safety_identifier() {
    let llm = demo_llm();
    let proxy = Proxy::start("auth-responses-owners", &secured_config(&v1(&llm), "", ""));
    let key = new_key(&proxy, "responses app", &["chat", "read"]).await;
    let text_of = |r: &Reply| -> String {
        r.body["output"]
            .as_array()
            .into_iter()
            .flatten()
            .flat_map(|o| o["content"].as_array().cloned().unwrap_or_default())
            .filter_map(|c| c["text"].as_str().map(str::to_string))
            .collect()
    };
    let who = |member: &str, name: &str, input: Value| {
        let mut b = json!({"model": "m", "input": input});
        b[member] = json!(name);
        b
    };
    let mut started = Vec::new();
    for (member, name) in [("user", "alice"), ("safety_identifier", "bob")] {
        let r = post(&proxy, "/v1/responses", &key, who(member, name, json!(Q2))).await;
        assert_eq!(r.header("x-proofgate-verdict"), "NEEDS_INPUT", "{r:?}");
        started.push((
            member,
            name,
            r.header("x-proofgate-thread").to_string(),
            text_of(&r),
        ));
    }
    assert_ne!(started[0].2, started[1].2);
    for (member, name, id, questions) in &started {
        let r = post(
            &proxy,
            "/v1/responses",
            &key,
            who(
                member,
                name,
                json!([
                    {"role": "user", "content": Q2},
                    {"role": "assistant", "content": questions},
                    {"role": "user", "content": ANSWER}
                ]),
            ),
        )
        .await;
        assert_eq!(
            r.header("x-proofgate-thread"),
            id,
            "{name} resumed another thread"
        );
        assert_eq!(r.header("x-proofgate-verdict"), "VALID", "{r:?}");
        for (other, other_id) in [("alice", &started[0].2), ("bob", &started[1].2)] {
            let h = [("x-proofgate-user", *name)];
            let seen = get(&proxy, &format!("/api/threads/{other_id}"), &key, &h).await;
            assert_eq!(
                seen.status,
                if other == *name { 200 } else { 404 },
                "{name} reads {other}'s"
            );
        }
    }
    // Another key cannot continue either thread by naming it, through the Responses or the
    // Messages API (tested before on Chat Completions only).
    let other_key = new_key(&proxy, "other app", &["chat", "read"]).await;
    for (path, body) in [
        ("/v1/responses", json!({"model": "m", "input": "skip"})),
        (
            "/v1/messages",
            json!({"model": "m", "max_tokens": 100, "messages": [{"role": "user", "content": "skip"}]}),
        ),
    ] {
        for (_, _, id, _) in &started {
            let r = call(
                &proxy,
                reqwest::Method::POST,
                path,
                Some(&other_key),
                Some(body.clone()),
                &[("x-proofgate-thread", id.as_str())],
            )
            .await;
            assert_eq!(r.status, 404, "{path}: {r:?}");
        }
    }
}

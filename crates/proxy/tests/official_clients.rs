//! The official OpenAI Python client and boto3 against a running proofgate
//! (tests/e2e/official_clients.py; bootstrap installs both packages), each with a real
//! proofgate API key made by `proofgate keys create`.

mod proxy;
mod scripted;

use proxy::{secured_config, Proxy};
use scripted::{repo_root, Server};

/// A new key with the `chat` scope on `proxy`'s database.
fn chat_key(proxy: &Proxy) -> String {
    let created = std::process::Command::new(env!("CARGO_BIN_EXE_proofgate"))
        .args([
            "keys",
            "create",
            "--name",
            "official clients",
            "--scopes",
            "chat",
        ])
        .arg("--config")
        .arg(proxy.config_path())
        .current_dir(repo_root())
        .output()
        .expect("proofgate keys create runs");
    assert!(
        created.status.success(),
        "{}",
        String::from_utf8_lossy(&created.stderr)
    );
    let created: serde_json::Value = serde_json::from_slice(&created.stdout).unwrap();
    created["key"].as_str().unwrap().to_string()
}

#[test]
fn openai_python_client_and_boto3_get_verified_answers_and_findings() {
    let mut script: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(repo_root().join("examples/demo/recorded-llm.json")).unwrap(),
    )
    .unwrap();
    // A translator that answers after the limited proxy's deadline.
    script["rules"].as_array_mut().unwrap().insert(
        0,
        serde_json::json!({"match": "slow-case", "delay_ms": 3000, "reply": "late"}),
    );
    let llm = Server::python("scripted_llm.py", &script);
    let proxy = Proxy::start(
        "clients",
        &secured_config(&format!("{}/v1", llm.url()), "", ""),
    );
    let key = chat_key(&proxy);
    let limited = Proxy::start(
        "clients-limited",
        &secured_config(
            &format!("{}/v1", llm.url()),
            "",
            "[limits]\nmax_body_bytes = 8192\nrequest_timeout_ms = 1000\nrequests_per_minute = 4\n",
        ),
    );
    let limited_key = chat_key(&limited);

    let out = std::process::Command::new("python3")
        .arg(repo_root().join("tests/e2e/official_clients.py"))
        .arg(&proxy.url)
        .arg(&limited.url)
        .env("PROOFGATE_KEY", &key)
        .env("PROOFGATE_LIMITED_KEY", &limited_key)
        .output()
        .expect("python3 runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "stdout:\n{stdout}\nstderr:\n{stderr}");
    assert!(
        stdout.contains("openai client, streaming: VALID"),
        "{stdout}"
    );
    assert!(
        stdout.contains("anthropic client: VALID answer received"),
        "{stdout}"
    );
    assert!(
        stdout.contains("boto3 apply_guardrail: INVALID"),
        "{stdout}"
    );
    assert!(
        stdout.contains("boto3 apply_guardrail: 413, 504 and 429"),
        "{stdout}"
    );
    // The client's proofgate key was never passed on to the LLM.
    let received = llm.received();
    assert!(!received.is_empty());
    for r in &received {
        let auth = r["authorization"].as_str().unwrap_or("");
        assert!(
            !auth.contains(&key),
            "the proofgate key reached the LLM: {r}"
        );
    }
}

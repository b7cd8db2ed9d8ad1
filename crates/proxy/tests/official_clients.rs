//! The official OpenAI Python client and boto3 against a running proofgate
//! (tests/e2e/official_clients.py; bootstrap installs both packages).

mod proxy;
mod scripted;

use proxy::{config, Proxy};
use scripted::{repo_root, Server};

#[test]
fn openai_python_client_and_boto3_get_verified_answers_and_findings() {
    let script: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(repo_root().join("examples/demo/recorded-llm.json")).unwrap(),
    )
    .unwrap();
    let llm = Server::python("scripted_llm.py", &script);
    let proxy = Proxy::start("clients", &config(&format!("{}/v1", llm.url()), "", ""));
    let out = std::process::Command::new("python3")
        .arg(repo_root().join("tests/e2e/official_clients.py"))
        .arg(&proxy.url)
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
        stdout.contains("boto3 apply_guardrail: INVALID"),
        "{stdout}"
    );
}

//! A stand-in translator LLM for benchmarks with every question distinct: an OpenAI-compatible
//! `/v1/chat/completions` that answers with the park example's translation, taking the visitor's
//! age from the first "I am N" in the request (the question as the proxy sends it). Every
//! translator asked about one question so agrees, and each distinct age is a distinct check
//! (the findings cache cannot answer it).
//!
//! Run: `cargo run --release -p proofgate-proxy --example echo_translator -- 127.0.0.1:18092`

use axum::{body::Bytes, routing::post, Json, Router};
use serde_json::{json, Value};

/// The age after the first "I am " in `body`, or 70.
fn age_in(body: &[u8]) -> u64 {
    let text = String::from_utf8_lossy(body);
    text.find("I am ")
        .map(|at| &text[at + 5..])
        .and_then(|rest| {
            let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
            digits.parse().ok()
        })
        .unwrap_or(70)
}

async fn complete(body: Bytes) -> Json<Value> {
    let age = age_in(&body);
    let content = json!({
        "pairs": [{
            // The question is the conversation's one turn: premises cite it.
            "premises": [
                {"logic": format!("(= customerAge {age})"), "naturalLanguage": "The visitor's age (turn 1)"},
                {"logic": "isLowSeason", "naturalLanguage": "Low season (turn 1)"},
                {"logic": "(not usesCredits)", "naturalLanguage": "No credits (turn 1)"},
            ],
            "claims": ["(= feeAfterDiscount 22.5)"],
        }],
        "untranslatedPremises": [],
        "untranslatedClaims": [],
    })
    .to_string();
    Json(json!({
        "id": "chatcmpl-echo", "object": "chat.completion", "created": 1, "model": "t",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": content},
                     "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 10, "completion_tokens": 10, "total_tokens": 20},
    }))
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let addr = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "127.0.0.1:18092".into());
    let app = Router::new().route("/v1/chat/completions", post(complete));
    let listener = tokio::net::TcpListener::bind(&addr).await.unwrap();
    println!("listening on {}", listener.local_addr().unwrap());
    axum::serve(listener, app).await.unwrap();
}

//! `POST /v1/responses`: the OpenAI Responses API, verified the same way as chat
//! completions. The request is read into the chat-completions shape (the upstream is called
//! with Chat Completions), answered by the same loop, and written back as a `response`
//! (JSON, or the SSE events the official SDKs read); function calls pass through.

use super::auth::Caller;
use super::chat::{named_sse, serve_chat, Answered, Ending, Reply, WireFormat};
use super::error::ApiError;
use crate::app::App;
use crate::openai::ChatRequest;
use crate::responses::{chat_from_request, response_events, tool_call_response, verified_response};
use axum::body::Bytes;
use axum::extract::{Extension, State};
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::Value;
use std::sync::Arc;

/// The Responses API wire format.
struct Responses;

impl WireFormat for Responses {
    fn answered(&self, a: Answered, stream: bool) -> Response {
        let response = match a.reply {
            Reply::Answer {
                text,
                upstream,
                ending,
            } => {
                let mut r = verified_response(&upstream, &text, a.proofgate);
                let reason = match ending {
                    Ending::Complete => None,
                    Ending::TokenLimit => Some("max_output_tokens"),
                    Ending::ContentFilter => Some("content_filter"),
                };
                if let Some(reason) = reason {
                    r["status"] = serde_json::json!("incomplete");
                    r["incomplete_details"] = serde_json::json!({ "reason": reason });
                    r["output"][0]["status"] = serde_json::json!("incomplete");
                }
                r
            }
            Reply::ToolCall { upstream, .. } => tool_call_response(&upstream, a.proofgate),
        };
        if stream {
            named_sse(response_events(&response))
        } else {
            Json(response).into_response()
        }
    }

    fn error(&self, e: ApiError, _stream: bool) -> Response {
        e.into_response()
    }
}

/// Reads a Responses API request.
fn parse(body: Value) -> Result<ChatRequest, ApiError> {
    if body.get("input").is_none() {
        return Err(ApiError::bad_request(
            "the request body must be a JSON object with `input` (OpenAI Responses API)",
        ));
    }
    if body
        .get("previous_response_id")
        .is_some_and(|v| !v.is_null())
    {
        return Err(ApiError::bad_request(
            "previous_response_id is not supported: send the whole conversation in `input`",
        ));
    }
    if let Some(why) = crate::responses::unsupported_in_request(&body) {
        return Err(ApiError::bad_request(why));
    }
    ChatRequest::parse(chat_from_request(&body)).map_err(|e| ApiError::bad_request(e.to_string()))
}

/// The handler.
pub async fn responses(
    State(app): State<Arc<App>>,
    Extension(caller): Extension<Caller>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    serve_chat(&app, &caller, &headers, body, parse, Responses).await
}

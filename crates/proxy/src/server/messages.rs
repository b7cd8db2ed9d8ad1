//! `POST /v1/messages`: the Anthropic Messages API, verified the same way as chat
//! completions. The request is read into the chat-completions shape, answered by the same
//! loop, and written back as a message (JSON or the SSE sequence the official SDK reads);
//! tool-use replies pass through like tool calls.

use super::auth::Caller;
use super::chat::{named_sse, serve_chat, Answered, Ending, Reply, WireFormat};
use super::error::ApiError;
use crate::anthropic::{
    chat_from_request, error_body, message_events, tool_use_message, verified_message,
};
use crate::app::App;
use crate::openai::ChatRequest;
use axum::body::Bytes;
use axum::extract::{Extension, State};
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::Value;
use std::sync::Arc;

/// The Messages API wire format.
struct Messages;

impl WireFormat for Messages {
    fn answered(&self, a: Answered, stream: bool) -> Response {
        let message = match a.reply {
            Reply::Answer {
                text,
                upstream,
                ending,
            } => {
                let mut m = verified_message(&upstream, &text, a.proofgate);
                m["stop_reason"] = serde_json::json!(match ending {
                    Ending::Complete => "end_turn",
                    Ending::TokenLimit => "max_tokens",
                    Ending::ContentFilter => "refusal",
                });
                m
            }
            Reply::ToolCall { upstream, native } => {
                match tool_use_message(&upstream, native.as_ref(), a.proofgate) {
                    Ok(m) => m,
                    Err(why) => {
                        let e = ApiError::new(
                            axum::http::StatusCode::BAD_GATEWAY,
                            "upstream_error",
                            why,
                        );
                        return self.error(e, stream);
                    }
                }
            }
        };
        if stream {
            named_sse(message_events(&message))
        } else {
            Json(message).into_response()
        }
    }

    fn error(&self, e: ApiError, _stream: bool) -> Response {
        let body = error_body(e.status.as_u16(), e.code, &e.message);
        e.with_retry_headers((e.status, Json(body)).into_response())
    }
}

/// Reads a Messages API request.
fn parse(body: Value) -> Result<ChatRequest, ApiError> {
    if body.get("messages").and_then(Value::as_array).is_none() {
        return Err(ApiError::bad_request(
            "the request body must be a JSON object with a `messages` array (Anthropic Messages API)",
        ));
    }
    if let Some(why) = crate::anthropic::unsupported_in_request(&body) {
        return Err(ApiError::bad_request(why));
    }
    ChatRequest::parse(chat_from_request(&body)).map_err(|e| ApiError::bad_request(e.to_string()))
}

/// The handler.
pub async fn messages(
    State(app): State<Arc<App>>,
    Extension(caller): Extension<Caller>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    serve_chat(&app, &caller, &headers, body, parse, Messages).await
}

/// A refusal of the guard's (key, scope, rate, size, content type, deadline, an unknown route
/// such as `/v1/messages/count_tokens`) in the Messages API's error shape,
/// `{"type": "error", "error": {"type", "message"}}`, as the handler's own errors are: an app
/// reading the Anthropic SDK's `e.body["error"]["type"]` got OpenAI's shape from these. A
/// response that is no error, or already in that shape, passes unchanged, with its headers
/// (`Retry-After`, `WWW-Authenticate`).
pub async fn in_anthropic_shape(response: Response) -> Response {
    let status = response.status();
    if !(status.is_client_error() || status.is_server_error()) {
        return response;
    }
    let (parts, body) = response.into_parts();
    let bytes = axum::body::to_bytes(body, 64 << 10)
        .await
        .unwrap_or_default();
    let shaped = serde_json::from_slice::<Value>(&bytes)
        .ok()
        .filter(|v| v.get("type").is_none())
        .and_then(|v| {
            let e = v.get("error")?;
            Some(crate::anthropic::error_body(
                status.as_u16(),
                e.get("code").and_then(Value::as_str).unwrap_or("error"),
                e.get("message").and_then(Value::as_str).unwrap_or(""),
            ))
        });
    match shaped {
        Some(body) => {
            let mut out = (status, Json(body)).into_response();
            for (name, value) in parts.headers.iter() {
                if name != axum::http::header::CONTENT_TYPE
                    && name != axum::http::header::CONTENT_LENGTH
                {
                    out.headers_mut().insert(name.clone(), value.clone());
                }
            }
            out
        }
        None => Response::from_parts(parts, axum::body::Body::from(bytes)),
    }
}

//! `GET /v1/models` and `GET /v1/models/{id}`: the models an app may ask for, in the shape its
//! SDK reads (`client.models.list()` / `retrieve()` of the OpenAI and Anthropic SDKs). Chat UIs
//! (Open WebUI, LibreChat) list the models when they connect and refuse an endpoint without
//! the list. With a model pinned in `[upstream] model` (always so for Bedrock) that model is the
//! only one: whatever a request names, the pinned one answers. Otherwise the upstream's own
//! list is passed on, converted when the app speaks the other API.

use super::auth::Caller;
use super::chat::upstream_error;
use super::error::ApiError;
use crate::app::App;
use crate::config::LlmKind;
use axum::extract::{Extension, Path, RawQuery, State};
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::{json, Value};
use std::sync::Arc;
use time::format_description::well_known::Rfc3339;
use time::OffsetDateTime;

/// Which API's shapes a list is in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Shape {
    /// `{"object": "list", "data": [{"id", "object": "model", "created", "owned_by"}]}`.
    Openai,
    /// `{"data": [{"type": "model", "id", "display_name", "created_at"}], "has_more",
    /// "first_id", "last_id"}`.
    Anthropic,
}

impl Shape {
    /// The client's: the Anthropic SDK sends `anthropic-version` with every request.
    fn of_client(headers: &HeaderMap) -> Shape {
        if headers.contains_key("anthropic-version") {
            Shape::Anthropic
        } else {
            Shape::Openai
        }
    }

    fn error(self, e: ApiError) -> Response {
        match self {
            Shape::Openai => e.into_response(),
            Shape::Anthropic => {
                let body = crate::anthropic::error_body(e.status.as_u16(), e.code, &e.message);
                e.with_retry_headers((e.status, Json(body)).into_response())
            }
        }
    }
}

/// `GET /v1/models`.
pub async fn list(
    State(app): State<Arc<App>>,
    Extension(caller): Extension<Caller>,
    headers: HeaderMap,
    RawQuery(query): RawQuery,
) -> Response {
    let shape = Shape::of_client(&headers);
    match models(&app, &caller, &headers, shape, query.as_deref()).await {
        Ok((models, has_more)) => Json(listing(shape, models, has_more)).into_response(),
        Err(e) => shape.error(e),
    }
}

/// `GET /v1/models/{id}` (an id may hold slashes, as vLLM's `org/model` do).
pub async fn retrieve(
    State(app): State<Arc<App>>,
    Extension(caller): Extension<Caller>,
    headers: HeaderMap,
    Path(id): Path<String>,
) -> Response {
    let shape = Shape::of_client(&headers);
    // The whole list is read: neither API's single-model route is offered by every
    // OpenAI-compatible server, and the list is what the app is told it may ask for.
    let found = models(&app, &caller, &headers, shape, Some("limit=1000"))
        .await
        .and_then(|(models, _)| {
            models
                .into_iter()
                .find(|m| m["id"].as_str() == Some(id.as_str()))
                .ok_or_else(|| {
                    ApiError::not_found(format!(
                        "the model `{}` is not among those this proofgate serves (GET /v1/models \
                         lists them)",
                        crate::http_body::truncate(&id, 200)
                    ))
                })
        });
    match found {
        Ok(model) => Json(model).into_response(),
        Err(e) => shape.error(e),
    }
}

/// The models in `shape`, and whether the upstream has more past them (Anthropic's paging).
async fn models(
    app: &App,
    caller: &Caller,
    headers: &HeaderMap,
    shape: Shape,
    query: Option<&str>,
) -> Result<(Vec<Value>, bool), ApiError> {
    let upstream = &app.config.upstream;
    if let Some(model) = &upstream.model {
        return Ok((vec![pinned(shape, model)], false));
    }
    let from = match upstream.kind {
        LlmKind::Openai => Shape::Openai,
        LlmKind::Anthropic => Shape::Anthropic,
        LlmKind::Bedrock => {
            return Err(ApiError::internal(
                "a Bedrock upstream needs [upstream] model, and none is set",
            ))
        }
    };
    // As for chat: the client's own Authorization goes upstream only with keys off and when it
    // is not a proofgate key.
    let auth = (!app.config.auth.required && !caller.sent_proofgate_key())
        .then(|| headers.get(axum::http::header::AUTHORIZATION))
        .flatten()
        .and_then(|v| v.to_str().ok());
    let query = upstream_query(from, shape, query);
    let body = app.upstream.list_models(&query, auth).await.map_err(|e| {
        let client_credentials = auth.is_some() && upstream.api_key.is_none();
        upstream_error(e, client_credentials)
    })?;
    let items = body
        .get("data")
        .and_then(Value::as_array)
        .filter(|d| d.iter().all(|m| m.get("id").is_some_and(Value::is_string)))
        .ok_or_else(|| {
            ApiError::new(
                axum::http::StatusCode::BAD_GATEWAY,
                "upstream_error",
                "the upstream's model list is not a `data` array of models with string ids",
            )
        })?;
    let has_more = from == Shape::Anthropic && body["has_more"].as_bool() == Some(true);
    let models = items.iter().map(|m| converted(from, shape, m)).collect();
    Ok((models, has_more && shape == Shape::Anthropic))
}

/// What goes upstream of the client's query: Anthropic's paging, between Anthropic shapes; the
/// longest page Anthropic gives when the whole list is to be converted; nothing for an OpenAI
/// list, which has no paging.
fn upstream_query(from: Shape, to: Shape, query: Option<&str>) -> Vec<(String, String)> {
    if from == Shape::Openai {
        return Vec::new();
    }
    let asked: Vec<(String, String)> = query
        .map(|q| {
            url_pairs(q)
                .filter(|(k, _)| ["after_id", "before_id", "limit"].contains(&k.as_str()))
                .collect()
        })
        .unwrap_or_default();
    if to == Shape::Anthropic && !asked.is_empty() {
        asked
    } else {
        vec![("limit".into(), "1000".into())]
    }
}

/// The pairs of a query string, percent-decoded.
fn url_pairs(query: &str) -> impl Iterator<Item = (String, String)> + '_ {
    reqwest::Url::parse(&format!("http://q/?{query}"))
        .map(|u| {
            u.query_pairs()
                .map(|(k, v)| (k.into_owned(), v.into_owned()))
                .collect::<Vec<_>>()
        })
        .unwrap_or_default()
        .into_iter()
}

/// The pinned model, as `shape` lists a model.
fn pinned(shape: Shape, model: &str) -> Value {
    match shape {
        Shape::Openai => {
            json!({"id": model, "object": "model", "created": 0, "owned_by": "proofgate"})
        }
        Shape::Anthropic => json!({"type": "model", "id": model, "display_name": model,
                                   "created_at": "1970-01-01T00:00:00Z"}),
    }
}

/// One upstream model in `to`'s shape: as it came when the shapes agree, else its id and date.
fn converted(from: Shape, to: Shape, model: &Value) -> Value {
    let id = model["id"].as_str().unwrap_or_default();
    match (from, to) {
        (a, b) if a == b => model.clone(),
        (Shape::Anthropic, _) => {
            let created = model["created_at"]
                .as_str()
                .and_then(|t| OffsetDateTime::parse(t, &Rfc3339).ok())
                .map_or(0, OffsetDateTime::unix_timestamp);
            json!({"id": id, "object": "model", "created": created, "owned_by": "anthropic"})
        }
        (Shape::Openai, _) => {
            let created_at = model["created"]
                .as_i64()
                .and_then(|s| OffsetDateTime::from_unix_timestamp(s).ok())
                .and_then(|t| t.format(&Rfc3339).ok())
                .unwrap_or_else(|| "1970-01-01T00:00:00Z".into());
            json!({"type": "model", "id": id, "display_name": id, "created_at": created_at})
        }
    }
}

/// The list's body in `shape`.
fn listing(shape: Shape, models: Vec<Value>, has_more: bool) -> Value {
    match shape {
        Shape::Openai => json!({"object": "list", "data": models}),
        Shape::Anthropic => {
            let first = models
                .first()
                .map(|m| m["id"].clone())
                .unwrap_or(Value::Null);
            let last = models
                .last()
                .map(|m| m["id"].clone())
                .unwrap_or(Value::Null);
            json!({"data": models, "has_more": has_more, "first_id": first, "last_id": last})
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_list_is_converted_to_the_clients_shape_and_kept_when_shapes_agree() {
        let claude = json!({"type": "model", "id": "claude-x", "display_name": "Claude X",
                            "created_at": "2025-02-19T00:00:00Z"});
        assert_eq!(
            converted(Shape::Anthropic, Shape::Openai, &claude),
            json!({"id": "claude-x", "object": "model", "created": 1739923200,
                   "owned_by": "anthropic"})
        );
        assert_eq!(
            converted(Shape::Anthropic, Shape::Anthropic, &claude),
            claude
        );
        let gpt = json!({"id": "org/m", "object": "model", "created": 1739923200,
                         "owned_by": "vllm", "max_model_len": 8192});
        assert_eq!(converted(Shape::Openai, Shape::Openai, &gpt), gpt);
        assert_eq!(
            converted(Shape::Openai, Shape::Anthropic, &gpt),
            json!({"type": "model", "id": "org/m", "display_name": "org/m",
                   "created_at": "2025-02-19T00:00:00Z"})
        );
        // A model without a date (Ollama's list has none in `created` for some) still lists.
        assert_eq!(
            converted(Shape::Openai, Shape::Anthropic, &json!({"id": "m"}))["created_at"],
            "1970-01-01T00:00:00Z"
        );
        let listed = listing(
            Shape::Anthropic,
            vec![pinned(Shape::Anthropic, "a"), claude],
            true,
        );
        assert_eq!(listed["first_id"], "a");
        assert_eq!(listed["last_id"], "claude-x");
        assert_eq!(listed["has_more"], true);
        assert_eq!(
            listing(Shape::Openai, vec![], false),
            json!({"object": "list", "data": []})
        );
    }

    #[test]
    fn only_anthropics_paging_goes_upstream_and_only_between_anthropic_shapes() {
        let q = Some("after_id=claude%2Dx&limit=5&evil=1");
        assert_eq!(
            upstream_query(Shape::Anthropic, Shape::Anthropic, q),
            vec![
                ("after_id".to_string(), "claude-x".to_string()),
                ("limit".to_string(), "5".to_string())
            ]
        );
        // Converted for an OpenAI client: the whole list (OpenAI's has no paging).
        assert_eq!(
            upstream_query(Shape::Anthropic, Shape::Openai, q),
            vec![("limit".to_string(), "1000".to_string())]
        );
        assert_eq!(
            upstream_query(Shape::Anthropic, Shape::Anthropic, None),
            vec![("limit".to_string(), "1000".to_string())]
        );
        assert!(upstream_query(Shape::Openai, Shape::Anthropic, q).is_empty());
    }
}

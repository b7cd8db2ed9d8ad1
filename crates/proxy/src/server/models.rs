//! `GET /v1/models` and `GET /v1/models/{id}`: the models an app may ask for, in the shape its
//! SDK reads (`client.models.list()` / `retrieve()` of the OpenAI and Anthropic SDKs). Chat UIs
//! (Open WebUI, LibreChat) list the models when they connect and refuse an endpoint without
//! the list. With a model pinned in `[upstream] model` (always so for Bedrock) that model is the
//! only one: whatever a request names, the pinned one answers. Otherwise the upstream's own
//! list is passed on, each model rebuilt from an allow-list in the shape of the app's API.

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
    let models = items
        .iter()
        .filter_map(|m| converted(from, shape, m))
        .collect();
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

/// One upstream model in `to`'s shape, built from an allow-list whether or not the shapes
/// agree (the upstream's object was passed on whole when they did, and any member of it, an
/// `owned_by` or a `display_name` of "Seniors enter free", reached the app): the id, when it
/// is an identifier (else the model is left out), its date, and in OpenAI's shape an
/// `owned_by` of a short id's form (else proofgate's), in Anthropic's a `display_name` of that
/// form (else the id).
fn converted(from: Shape, to: Shape, model: &Value) -> Option<Value> {
    let id = crate::openai::identifier(model.get("id"))?;
    let short = |key: &str| crate::openai::short_id(model.get(key));
    // The date as Anthropic words it (a string that reads as RFC 3339) or OpenAI does (Unix
    // seconds, an integer).
    let date = match from {
        Shape::Anthropic => model["created_at"]
            .as_str()
            .and_then(|t| OffsetDateTime::parse(t, &Rfc3339).ok()),
        Shape::Openai => model["created"]
            .as_i64()
            .and_then(|s| OffsetDateTime::from_unix_timestamp(s).ok()),
    };
    Some(match to {
        Shape::Openai => {
            let owned_by = match from {
                Shape::Openai => short("owned_by").unwrap_or("proofgate"),
                Shape::Anthropic => "anthropic",
            };
            let created = date.map_or(0, OffsetDateTime::unix_timestamp);
            let mut out =
                json!({"id": id, "object": "model", "created": created, "owned_by": owned_by});
            // vLLM's context length: a number, which carries no sentence, and apps size
            // prompts by it.
            if let (Shape::Openai, Some(n)) = (from, model["max_model_len"].as_u64()) {
                out["max_model_len"] = json!(n);
            }
            out
        }
        Shape::Anthropic => {
            let display_name = match from {
                Shape::Anthropic => short("display_name").unwrap_or(id),
                Shape::Openai => id,
            };
            let created_at = date
                .and_then(|t| t.format(&Rfc3339).ok())
                .unwrap_or_else(|| "1970-01-01T00:00:00Z".into());
            json!({"type": "model", "id": id, "display_name": display_name,
                   "created_at": created_at})
        }
    })
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
    fn a_list_is_converted_to_the_clients_shape_and_rebuilt_when_shapes_agree() {
        let claude = json!({"type": "model", "id": "claude-x", "display_name": "Claude X",
                            "created_at": "2025-02-19T00:00:00Z"});
        assert_eq!(
            converted(Shape::Anthropic, Shape::Openai, &claude),
            Some(
                json!({"id": "claude-x", "object": "model", "created": 1739923200,
                        "owned_by": "anthropic"})
            )
        );
        // Rebuilt, not copied, when the shapes agree: a display name of words (it may be a
        // sentence) is the id (it was passed on before), one of a short id's form is kept.
        assert_eq!(
            converted(Shape::Anthropic, Shape::Anthropic, &claude),
            Some(
                json!({"type": "model", "id": "claude-x", "display_name": "claude-x",
                        "created_at": "2025-02-19T00:00:00Z"})
            )
        );
        let mut named = claude.clone();
        named["display_name"] = json!("Claude-X");
        assert_eq!(
            converted(Shape::Anthropic, Shape::Anthropic, &named),
            Some(named.clone())
        );
        // vLLM's `max_model_len` is kept as a number; anything else beside it is not.
        let gpt = json!({"id": "org/m", "object": "model", "created": 1739923200,
                         "owned_by": "vllm", "max_model_len": 8192, "note": "Seniors free"});
        assert_eq!(
            converted(Shape::Openai, Shape::Openai, &gpt),
            Some(
                json!({"id": "org/m", "object": "model", "created": 1739923200,
                        "owned_by": "vllm", "max_model_len": 8192})
            )
        );
        let mut worded = gpt.clone();
        worded["max_model_len"] = json!("Seniors enter free");
        assert!(
            converted(Shape::Openai, Shape::Openai, &worded).unwrap()["max_model_len"].is_null()
        );
        assert_eq!(
            converted(Shape::Openai, Shape::Anthropic, &gpt),
            Some(
                json!({"type": "model", "id": "org/m", "display_name": "org/m",
                        "created_at": "2025-02-19T00:00:00Z"})
            )
        );
        // A model without a date (Ollama's list has none in `created` for some) still lists.
        assert_eq!(
            converted(Shape::Openai, Shape::Anthropic, &json!({"id": "m"})).unwrap()["created_at"],
            "1970-01-01T00:00:00Z"
        );
        assert_eq!(
            converted(Shape::Openai, Shape::Openai, &json!({"id": "m"})),
            Some(json!({"id": "m", "object": "model", "created": 0, "owned_by": "proofgate"}))
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

    /// An upstream's model list carries no sentence to the app: each model is built from an
    /// allow-list, its `owned_by` and `display_name` only of a short id's form, its date only
    /// as a date, and a model whose id is no identifier is left out.
    #[test]
    fn no_sentence_leaves_in_a_model_list() {
        let leaks = |v: &Value| {
            let text = v.to_string().to_lowercase();
            text.contains("senior") || text.contains("refund")
        };
        let gpt = json!({"id": "m", "object": "Seniors enter free", "created": "seniors",
                         "owned_by": "Seniors enter free", "display_name": "Seniors enter free",
                         "description": "You also get a full refund", "permission": [{"note": "refund"}]});
        let out = converted(Shape::Openai, Shape::Openai, &gpt).unwrap();
        assert_eq!(
            out,
            json!({"id": "m", "object": "model", "created": 0, "owned_by": "proofgate"})
        );
        // A sentence written with hyphens is an identifier, not a short id.
        let hyphens = json!({"id": "m", "object": "model", "created": 1,
                             "owned_by": "you-also-get-a-full-refund"});
        assert_eq!(
            converted(Shape::Openai, Shape::Openai, &hyphens).unwrap()["owned_by"],
            "proofgate"
        );
        let claude = json!({"type": "Seniors enter free", "id": "claude-x",
                            "display_name": "Seniors enter free",
                            "created_at": "Seniors enter free", "note": "refund"});
        let out = converted(Shape::Anthropic, Shape::Anthropic, &claude).unwrap();
        assert_eq!(
            out,
            json!({"type": "model", "id": "claude-x", "display_name": "claude-x",
                   "created_at": "1970-01-01T00:00:00Z"})
        );
        let hyphens = json!({"type": "model", "id": "claude-x",
                             "display_name": "seniors-enter-free-today",
                             "created_at": "2025-02-19T00:00:00Z"});
        assert!(!leaks(
            &converted(Shape::Anthropic, Shape::Anthropic, &hyphens).unwrap()
        ));
        for to in [Shape::Openai, Shape::Anthropic] {
            for from in [Shape::Openai, Shape::Anthropic] {
                for model in [&gpt, &claude] {
                    assert!(!leaks(&converted(from, to, model).unwrap()), "{model}");
                }
                // A model whose id is a sentence, or no string, is left out.
                for id in [json!("Seniors enter free"), json!(7), Value::Null] {
                    assert_eq!(converted(from, to, &json!({"id": id})), None);
                }
            }
        }
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

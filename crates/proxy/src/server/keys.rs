//! `/api/keys` (admin): create, list and revoke API keys; `GET /api/me`: the caller's own key.

use super::auth::Caller;
use super::error::ApiError;
use crate::app::{now_ms, App};
use crate::keys::{KeyError, Scope};
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::IntoResponse;
use axum::{Extension, Json};
use serde::Deserialize;
use serde_json::{json, Value};
use std::sync::Arc;

/// `POST /api/keys` body.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct NewKey {
    /// What the key is for.
    pub name: String,
    /// `chat`, `read`, `admin`.
    pub scopes: Vec<Scope>,
    /// When the key stops working, ms since the epoch.
    #[serde(default)]
    pub expires_at: Option<i64>,
}

fn now() -> i64 {
    i64::try_from(now_ms()).unwrap_or(i64::MAX)
}

impl From<KeyError> for ApiError {
    fn from(e: KeyError) -> Self {
        match e {
            KeyError::Invalid(m) => ApiError::bad_request(m),
            KeyError::Storage(s) => s.into(),
            KeyError::Random(m) => ApiError::internal(m),
        }
    }
}

/// `POST /api/keys`: 201 with the key's secret, shown this once.
pub async fn create(
    State(app): State<Arc<App>>,
    body: axum::body::Bytes,
) -> Result<impl IntoResponse, ApiError> {
    let req: NewKey = serde_json::from_slice(&body).map_err(|e| {
        ApiError::bad_request(format!(
            "expected {{\"name\": \"...\", \"scopes\": [\"chat\" | \"read\" | \"admin\"], \"expiresAt\"?: ms since the epoch}}: {e}"
        ))
    })?;
    let (key, secret) = app
        .store
        .create_key(
            &req.name,
            &req.scopes,
            req.expires_at,
            now(),
            app.log.key().key_seal(),
        )
        .await?;
    app.keys.clear();
    tracing::info!("API key {} ({:?}) created", key.id, key.name);
    let mut view = serde_json::to_value(&key).unwrap_or(Value::Null);
    view["key"] = json!(secret);
    Ok((StatusCode::CREATED, Json(view)))
}

/// `GET /api/keys`: every key, never a secret or hash.
pub async fn list(State(app): State<Arc<App>>) -> Result<Json<Value>, ApiError> {
    let now = now();
    let keys: Vec<Value> = app
        .store
        .keys_sealed(app.log.key().key_seal())
        .await?
        .into_iter()
        .map(|(k, seal)| {
            // A row without this server's seal is no key, whatever it says.
            let active = seal == crate::keys::SealState::Valid && k.is_active(now);
            let mut v = serde_json::to_value(k).unwrap_or(Value::Null);
            v["active"] = json!(active);
            v["seal"] = json!(seal);
            v
        })
        .collect();
    Ok(Json(json!({ "keys": keys })))
}

/// `DELETE /api/keys/{id}`: the key stops working at once on this replica, and on the others
/// within `[auth] key_cache_ms` (they trust a key read that recently).
pub async fn revoke(
    State(app): State<Arc<App>>,
    Path(id): Path<String>,
) -> Result<Json<Value>, ApiError> {
    let revoked = app
        .store
        .revoke_key(&id, now(), app.log.key().key_seal())
        .await;
    app.keys.clear();
    let key = revoked?.ok_or_else(|| ApiError::not_found(format!("no key {id}")))?;
    tracing::info!("API key {} ({:?}) revoked", key.id, key.name);
    Ok(Json(serde_json::to_value(key).unwrap_or(Value::Null)))
}

/// `GET /api/me`: who the caller is, what its key allows, and which validator answers it (for
/// the web UI; `/healthz`, which takes no key, says no more than that the server is up).
pub async fn me(State(app): State<Arc<App>>, Extension(caller): Extension<Caller>) -> Json<Value> {
    Json(json!({
        "authRequired": app.config.auth.required,
        "validator": format!("{:?}", app.config.validator.kind).to_lowercase(),
        "id": caller.id,
        "name": caller.name,
        "scopes": caller.scopes,
        "allows": {
            "chat": caller.has(Scope::Chat),
            "read": caller.has(Scope::Read),
            "admin": caller.has(Scope::Admin),
        },
    }))
}

//! `/api/policies/*`: lint, test, generate tests for, diff and formalize policies (the
//! authoring tools of `proofgate policy ...`, over HTTP for the web UI).

use super::error::ApiError;
use super::limits::check_policy;
use crate::app::App;
use crate::authoring::api::{self, DiffRequest, FormalizeRequest, PolicyRequest, TestRequest};
use crate::authoring::formalize::FormalizeOptions;
use crate::authoring::test_runner::Translators;
use crate::authoring::AuthoringError;
use crate::validator::Validator;
use axum::extract::State;
use axum::http::StatusCode;
use axum::Json;
use proofgate_reasoner::{CheckOptions, GenerateOptions};
use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::Value;
use std::sync::Arc;

fn parse<T: DeserializeOwned>(body: &[u8], shape: &str) -> Result<T, ApiError> {
    serde_json::from_slice(body)
        .map_err(|e| ApiError::bad_request(format!("expected {shape}: {e}")))
}

fn reply<T: Serialize>(r: Result<T, AuthoringError>) -> Result<Json<Value>, ApiError> {
    match r {
        Ok(v) => serde_json::to_value(v)
            .map(Json)
            .map_err(|e| ApiError::internal(e.to_string())),
        Err(e) if e.is_client_error() => Err(ApiError::new(
            StatusCode::UNPROCESSABLE_ENTITY,
            "invalid_policy",
            e.to_string(),
        )),
        Err(e) => Err(ApiError::internal(e.to_string())),
    }
}

fn options(app: &App) -> CheckOptions {
    CheckOptions {
        timeout_ms: u32::try_from(app.config.validator.solver_timeout_ms).unwrap_or(u32::MAX),
        confidence_threshold: app.config.validator.threshold,
        ..CheckOptions::default()
    }
}

/// `POST /api/policies/lint {policy}`.
pub async fn lint(
    State(app): State<Arc<App>>,
    body: axum::body::Bytes,
) -> Result<Json<Value>, ApiError> {
    let req: PolicyRequest = parse(&body, "{\"policy\": <policy definition>}")?;
    check_policy(&app.config.limits, "policy", &req.policy)?;
    reply(api::lint_policy(req.policy, options(&app)).await)
}

/// `POST /api/policies/test {policy, tests}`: question/answer cases use the configured
/// translators (local validator).
pub async fn test(
    State(app): State<Arc<App>>,
    body: axum::body::Bytes,
) -> Result<Json<Value>, ApiError> {
    let req: TestRequest = parse(&body, "{\"policy\": ..., \"tests\": ...}")?;
    check_policy(&app.config.limits, "policy", &req.policy)?;
    let translators = match &app.validator {
        Validator::Local(v) => Some(Translators {
            clients: v.translators().to_vec(),
            repair_attempts: app.config.validator.repair_attempts,
        }),
        #[cfg(feature = "bedrock")]
        Validator::Bedrock(_) => None,
    };
    reply(api::run_tests(req.policy, req.tests, translators.as_ref(), options(&app)).await)
}

/// `POST /api/policies/gen-tests {policy}`.
pub async fn gen_tests(
    State(app): State<Arc<App>>,
    body: axum::body::Bytes,
) -> Result<Json<Value>, ApiError> {
    let req: PolicyRequest = parse(&body, "{\"policy\": <policy definition>}")?;
    check_policy(&app.config.limits, "policy", &req.policy)?;
    let opts = GenerateOptions {
        check: options(&app),
        ..GenerateOptions::default()
    };
    reply(api::gen_tests(req.policy, opts).await)
}

/// `POST /api/policies/diff {old, new}`.
pub async fn diff(
    State(app): State<Arc<App>>,
    body: axum::body::Bytes,
) -> Result<Json<Value>, ApiError> {
    let req: DiffRequest = parse(&body, "{\"old\": ..., \"new\": ...}")?;
    check_policy(&app.config.limits, "old", &req.old)?;
    check_policy(&app.config.limits, "new", &req.new)?;
    let opts = GenerateOptions {
        check: options(&app),
        ..GenerateOptions::default()
    };
    reply(api::diff(req.old, req.new, opts).await)
}

/// `POST /api/policies/formalize {document}`, with the rewriting LLM.
pub async fn formalize(
    State(app): State<Arc<App>>,
    body: axum::body::Bytes,
) -> Result<Json<Value>, ApiError> {
    let req: FormalizeRequest = parse(&body, "{\"document\": \"...\"}")?;
    let limits = &app.config.limits;
    let opts = FormalizeOptions {
        repair_attempts: app.config.validator.repair_attempts,
        max_types: limits.max_policy_types,
        max_variables: limits.max_policy_variables,
        max_rules: limits.max_policy_rules,
    };
    reply(api::formalize_document(&app.rewriter, &req.document, opts).await)
}

//! The audit log's public material (verifier key, signed checkpoints, consistency proofs,
//! leaves) and a thread's audit bundle (its trail with signed head and inclusion proof).

use super::api::check_access;
use super::auth::Caller;
use super::error::ApiError;
use crate::app::App;
use axum::extract::rejection::QueryRejection;
use axum::extract::{Path, Query, State};
use axum::http::{header, HeaderMap};
use axum::response::IntoResponse;
use axum::{Extension, Json};
use serde::Deserialize;
use serde_json::{json, Value};
use std::sync::Arc;

/// The client's side of an audit log error. These routes answer anyone: the driver's text,
/// the database user and the signed-size file's path are for the operator's log only.
fn log_error(e: crate::audit_log::AuditLogError) -> ApiError {
    use crate::audit_log::AuditLogError as E;
    match e {
        E::Range(why) => ApiError::bad_request(why),
        // Until the operator acts: not worth a retry (the CLI retries 429 and 503).
        E::Refused(why) => ApiError::new(
            axum::http::StatusCode::INTERNAL_SERVER_ERROR,
            "log_refused",
            format!("the server signs no checkpoint of this log: {why}"),
        ),
        // The database's log does not add up: evidence for an auditor, not a passing outage.
        E::Tlog(e) => {
            tracing::error!("audit log: {e}");
            ApiError::new(
                axum::http::StatusCode::INTERNAL_SERVER_ERROR,
                "log_inconsistent",
                "the audit log in the server's database does not add up (it was altered, or \
                 proofgate failed; the server's log says which)",
            )
        }
        E::Storage(e) => e.into(),
        e => {
            tracing::error!("{e}");
            ApiError::new(
                axum::http::StatusCode::SERVICE_UNAVAILABLE,
                "log_unavailable",
                "the audit log could not be read (the server's log says why); ask again later",
            )
        }
    }
}

/// A query string read, or a JSON 400 saying what was wrong and what is expected (axum's own
/// rejection is plain text).
fn query<T>(q: Result<Query<T>, QueryRejection>, expected: &str) -> Result<T, ApiError> {
    q.map(|Query(v)| v)
        .map_err(|e| ApiError::bad_request(format!("{}; expected {expected}", e.body_text())))
}

fn text(body: String) -> impl IntoResponse {
    ([(header::CONTENT_TYPE, "text/plain; charset=utf-8")], body)
}

/// `GET /.well-known/proofgate/audit-key`: the C2SP signed-note verifier key.
pub async fn audit_key(State(app): State<Arc<App>>) -> impl IntoResponse {
    text(format!("{}\n", app.log.key().verifier_key()))
}

/// `GET /api/log/checkpoint`: the current signed checkpoint (C2SP tlog-checkpoint).
pub async fn checkpoint(State(app): State<Arc<App>>) -> Result<impl IntoResponse, ApiError> {
    let (note, _) = app.log.checkpoint(&app.store).await.map_err(log_error)?;
    Ok(text(note))
}

/// A range of tree sizes or leaf indexes.
#[derive(Debug, Deserialize)]
pub struct Range {
    from: u64,
    to: Option<u64>,
}

/// `GET /api/log/consistency?from=N&to=M`: the RFC 6962 consistency proof (base64 hashes).
pub async fn consistency(
    State(app): State<Arc<App>>,
    r: Result<Query<Range>, QueryRejection>,
) -> Result<Json<Value>, ApiError> {
    let r = query(r, "?from=N[&to=M] (tree sizes)")?;
    let to = match r.to {
        Some(t) => t,
        None => app.log.checkpoint(&app.store).await.map_err(log_error)?.1,
    };
    let hashes = app
        .log
        .consistency(&app.store, r.from, to)
        .await
        .map_err(log_error)?;
    Ok(Json(
        json!({"fromSize": r.from, "toSize": to, "hashes": hashes}),
    ))
}

/// `GET /api/log/leaves?from=N&to=M`: the signed statements of leaves `N..M` (at most 1,000).
pub async fn leaves(
    State(app): State<Arc<App>>,
    r: Result<Query<Range>, QueryRejection>,
) -> Result<Json<Value>, ApiError> {
    let r = query(r, "?from=N[&to=M] (leaf indexes)")?;
    let to = r.to.unwrap_or(
        r.from
            .saturating_add(crate::audit_log::MAX_LEAVES_PER_READ as u64),
    );
    let rows = app
        .log
        .leaves(&app.store, r.from, to)
        .await
        .map_err(log_error)?;
    Ok(Json(json!({ "leaves": rows })))
}

/// Optional size of a checkpoint the auditor saved, for a consistency proof.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct BundleQuery {
    from: Option<u64>,
}

/// `GET /api/threads/{id}/audit/bundle[?from=N]`: the trail with its signed head, inclusion
/// proof, the signed checkpoint, and a consistency proof from size N when asked.
pub async fn bundle(
    State(app): State<Arc<App>>,
    Extension(caller): Extension<Caller>,
    headers: HeaderMap,
    Path(id): Path<String>,
    q: Result<Query<BundleQuery>, QueryRejection>,
) -> Result<Json<Value>, ApiError> {
    let q = query(q, "[?from=N] (the size of a checkpoint you saved)")?;
    check_access(&app, &caller, &headers, &id).await?;
    // The trail and its head from one read: read apart, a commit to a thread being driven
    // landing between them gave a signed head past the trail's end, which the auditor's check
    // reports as a trail altered.
    let (trail, leaves) = app.store.trail_and_leaves(&id).await?;
    let head = leaves
        .into_iter()
        .next_back()
        .map(|(idx, note)| (idx as u64, note));
    if trail.is_empty() {
        return Err(ApiError::not_found(format!(
            "no audit trail for thread {id}"
        )));
    }
    let documents = crate::app::documents_for(&app, &trail)
        .await
        .map_err(ApiError::internal)?;
    // A `from` past the log's end gets no proof rather than an error, so what fails here is the
    // server's (its log, or its refusal to sign a log cut back in its database): a 500.
    let mut bundle = app
        .log
        .bundle(&app.store, trail, head, q.from)
        .await
        .map_err(log_error)?;
    bundle.policy_documents = documents.iter().map(|(_, d)| d.clone()).collect();
    Ok(Json(
        serde_json::to_value(bundle).map_err(|e| ApiError::internal(e.to_string()))?,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::audit_log::AuditLogError;

    /// A review's case: these routes answer anyone, and sent the driver's text (a database
    /// user, a file's path) with a failure.
    #[test]
    fn a_log_failure_tells_the_caller_nothing_of_the_database() {
        for e in [
            AuditLogError::Db(
                "reading leaves: password authentication failed for user \"bob\"".into(),
            ),
            AuditLogError::Key {
                path: "/etc/proofgate/audit.key".into(),
                problem: "unreadable".into(),
            },
            // A disk full is an outage, not evidence of tampering.
            AuditLogError::Internal(
                "keeping the signed size in /var/lib/proofgate/x.signed-size: No space left".into(),
            ),
        ] {
            let api = log_error(e);
            assert_eq!(api.status, axum::http::StatusCode::SERVICE_UNAVAILABLE);
            let body = api.body().to_string();
            assert!(!body.contains("bob") && !body.contains('/'), "{body}");
            assert!(!body.contains("altered"), "{body}");
        }
        // The log not adding up, or refused: said, without the paths, and not as an outage a
        // retry mends.
        for e in [
            AuditLogError::Tlog("/var/lib/proofgate/audit-log.size says 9 leaves".into()),
            AuditLogError::Refused("the log holds 3 leaves, but this server signed 4".into()),
        ] {
            let api = log_error(e);
            assert_eq!(api.status, axum::http::StatusCode::INTERNAL_SERVER_ERROR);
            assert!(!api.body().to_string().contains("/var"), "{}", api.body());
        }
        // A range outside the log is the caller's to fix: said to them.
        let api = log_error(AuditLogError::Range(
            "need from <= to, got from=5 to=2".into(),
        ));
        assert_eq!(api.status, axum::http::StatusCode::BAD_REQUEST);
        assert!(api.body().to_string().contains("from=5 to=2"));
    }
}

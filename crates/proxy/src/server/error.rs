//! API errors: `{"error": {"code", "message"}}` with the right HTTP status.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::json;

/// An error a handler returns.
#[derive(Debug)]
pub struct ApiError {
    /// HTTP status.
    pub status: StatusCode,
    /// Machine-readable code, e.g. `validator_unavailable`.
    pub code: &'static str,
    /// What was wrong and what to do.
    pub message: String,
    /// Seconds after which a retry may succeed (`Retry-After`), for refusals by a limit.
    pub retry_after: Option<u64>,
}

impl ApiError {
    /// An error with the given status and code.
    pub fn new(status: StatusCode, code: &'static str, message: impl Into<String>) -> Self {
        ApiError {
            status,
            code,
            message: message.into(),
            retry_after: None,
        }
    }

    /// 400: the request is malformed.
    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, "invalid_request", message)
    }

    /// 404.
    pub fn not_found(message: impl Into<String>) -> Self {
        Self::new(StatusCode::NOT_FOUND, "not_found", message)
    }

    /// 409: the resource is not in a state that allows this.
    pub fn conflict(message: impl Into<String>) -> Self {
        Self::new(StatusCode::CONFLICT, "conflict", message)
    }

    /// 500: proofgate's own failure (storage, a corrupted thread).
    pub fn internal(message: impl Into<String>) -> Self {
        Self::new(StatusCode::INTERNAL_SERVER_ERROR, "internal_error", message)
    }

    /// The JSON body.
    pub fn body(&self) -> serde_json::Value {
        json!({"error": {"code": self.code, "message": self.message}})
    }
}

impl ApiError {
    /// Whether the same request could succeed later. The SDKs retry 409 and 5xx by status;
    /// they obey `x-should-retry: false`, sent for what only the operator or the request can
    /// change (the upstream refusing proofgate's credentials or account, a conflict over a
    /// waiting thread): each retry ran the whole loop again for nothing.
    fn worth_retrying(&self) -> bool {
        !(self.code == "upstream_error" || self.status == StatusCode::CONFLICT)
    }

    /// Adds `Retry-After` and, for an error a retry cannot mend, `x-should-retry: false` to
    /// a response carrying this error in any API's shape.
    pub fn with_retry_headers(&self, mut r: Response) -> Response {
        if let Some(secs) = self.retry_after {
            r.headers_mut()
                .insert(axum::http::header::RETRY_AFTER, secs.max(1).into());
        }
        if !self.worth_retrying() {
            r.headers_mut().insert(
                "x-should-retry",
                axum::http::HeaderValue::from_static("false"),
            );
        }
        r
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let r = (self.status, Json(self.body())).into_response();
        self.with_retry_headers(r)
    }
}

impl From<crate::storage::StorageError> for ApiError {
    fn from(e: crate::storage::StorageError) -> Self {
        use crate::storage::StorageError as E;
        tracing::error!("{e}");
        // The driver's text (tables, constraints, file paths, another request's conflicting
        // write) is for the operator's log; the client learns what happened and what to do.
        let message = match &e {
            E::Unhealthy(_) => e.to_string(),
            _ => "storage: the database did not store or read this request's thread (the \
                  server's log says why; a request continuing the same thread at the same time \
                  is one cause); ask again"
                .to_string(),
        };
        ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "storage_unavailable",
            message,
        )
    }
}

impl From<crate::app::DriveError> for ApiError {
    /// The core's refusal goes to the server's log only: its text may quote what a thread
    /// holds (a refusal of findings quoted up to 80 characters of an answer's text nobody
    /// translated, so never verified). The client gets a fixed sentence naming the thread,
    /// an id the proxy made, so the operator can find the log line.
    fn from(e: crate::app::DriveError) -> Self {
        tracing::error!("internal error: {e}");
        ApiError::internal(format!(
            "internal error: see the server's log (thread {})",
            e.thread
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What a retry cannot mend says so to the SDKs; the rest carries `Retry-After` when known.
    #[test]
    fn errors_tell_the_sdks_whether_to_retry() {
        let upstream =
            ApiError::new(StatusCode::BAD_GATEWAY, "upstream_error", "x").into_response();
        assert_eq!(upstream.headers()["x-should-retry"], "false");
        assert_eq!(
            ApiError::conflict("x").into_response().headers()["x-should-retry"],
            "false"
        );
        let throttled = ApiError {
            retry_after: Some(7),
            ..ApiError::new(StatusCode::SERVICE_UNAVAILABLE, "upstream_throttled", "x")
        }
        .into_response();
        assert!(throttled.headers().get("x-should-retry").is_none());
        assert_eq!(throttled.headers()["retry-after"], "7");
    }

    /// The core's refusal to advance a thread reaches the client as a fixed sentence: its text
    /// may quote a thread's unverified answer (the check of untranslated text quotes 80
    /// characters of it), and it went out whole in the 500's body.
    #[test]
    fn an_internal_error_tells_the_client_no_detail() {
        let e = crate::app::DriveError {
            thread: "0198aa00-0000-7000-8000-000000000001".into(),
            source: proofgate_core::ThreadError::FindingsMismatch(
                "the translators left text untranslated (\"Good news: seniors enter free, and \
                 you also get a full refund\"), but the findings hold a VALID"
                    .into(),
            ),
        };
        let api = ApiError::from(e);
        assert_eq!(api.status, StatusCode::INTERNAL_SERVER_ERROR);
        assert_eq!(api.code, "internal_error");
        assert_eq!(
            api.message,
            "internal error: see the server's log (thread 0198aa00-0000-7000-8000-000000000001)"
        );
        let body = api.body().to_string();
        assert!(
            !body.contains("seniors") && !body.contains("refund") && !body.contains("translat"),
            "{body}"
        );
    }
}

//! Who is calling and what they may do: the one list of public routes, the scope every other
//! route needs, and API-key authentication (`Authorization: Bearer <key>`, as OpenAI SDKs send).

use super::error::ApiError;
use crate::app::{now_ms, App};
use crate::key_cache::Cached;
use crate::keys::Scope;
use crate::storage::ThreadOwner;
use axum::http::{header, HeaderMap, Method, StatusCode};
use axum::response::{IntoResponse, Response};
use subtle::ConstantTimeEq;

/// The request header that names the end user on `/api/threads*` calls (the chat endpoint
/// takes the OpenAI `user` field of the body instead).
pub const USER_HEADER: &str = "x-proofgate-user";

/// What a route needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// Open to anyone, with or without a key.
    Public,
    /// Any valid key.
    AnyKey,
    /// A key with this scope (or `admin`).
    Needs(Scope),
    /// A key with either scope (or `admin`).
    NeedsEither(Scope, Scope),
}

/// The access rule of every route, in one place.
///
/// Public by design: the health check, the audit log's public material (the log's signing
/// key under `/.well-known/proofgate/` and `/api/log/*`: anyone may verify a trail), and the
/// web UI's static files (the page itself asks for a key). Everything else needs a key.
pub fn access(method: &Method, path: &str) -> Access {
    if path == "/healthz" || is_audit_material(path) {
        return Access::Public;
    }
    let reading = method == Method::GET || method == Method::HEAD;
    let under = |prefix: &str| path == prefix || path.starts_with(&format!("{prefix}/"));
    if under("/v1") || under("/guardrail") {
        Access::Needs(Scope::Chat)
    } else if path == "/api/me" {
        Access::AnyKey
    } else if reading && is_one_thread(path) {
        // A thread's view is also the answer of a thread a `chat` key ran in the background
        // (`wait: false`): it may read its own (each view is the owner's only). Before, such a
        // key started threads whose answers it could never read.
        Access::NeedsEither(Scope::Read, Scope::Chat)
    } else if under("/api/threads") {
        // Reading threads is `read`; starting or answering one runs the LLM loop, as chat does.
        Access::Needs(if reading { Scope::Read } else { Scope::Chat })
    } else if path == "/api/policies" && reading {
        Access::Needs(Scope::Read)
    } else if under("/api") || under("/metrics") {
        Access::Needs(Scope::Admin)
    } else {
        Access::Public
    }
}

/// Whether `path` is one thread's view, `/api/threads/{id}` (not its trail, nor the list).
fn is_one_thread(path: &str) -> bool {
    path.strip_prefix("/api/threads/")
        .is_some_and(|id| !id.is_empty() && !id.contains('/'))
}

/// The audit log's public material: its signing key and the log's checkpoints, leaves and
/// proofs. Public, but each read is work for the server (signing, the log's lock).
pub fn is_audit_material(path: &str) -> bool {
    const PREFIXES: &[&str] = &["/.well-known/proofgate/", "/api/log/"];
    PREFIXES.iter().any(|p| path.starts_with(p))
}

/// How the caller was recognised.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Via {
    /// A key from the storage.
    Key,
    /// The configured admin key.
    AdminKey,
    /// No key, with `auth.required = false` (local development): allowed everything.
    Anonymous,
}

/// The authenticated caller of a request (a request extension, set by the server's guard).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Caller {
    /// The key's id: `key_...`, `admin` for the configured admin key, `anonymous`.
    pub id: String,
    /// The key's name.
    pub name: String,
    /// What it may do.
    pub scopes: Vec<Scope>,
    /// How it was recognised.
    pub via: Via,
}

impl Caller {
    /// The caller when authentication is off and no key was given.
    pub fn anonymous() -> Caller {
        Caller {
            id: "anonymous".into(),
            name: "anonymous (auth.required = false)".into(),
            scopes: vec![Scope::Chat, Scope::Read, Scope::Admin],
            via: Via::Anonymous,
        }
    }

    fn admin_key() -> Caller {
        Caller {
            id: "admin".into(),
            name: "admin key (configuration)".into(),
            scopes: vec![Scope::Admin],
            via: Via::AdminKey,
        }
    }

    /// Whether the caller may do what `scope` allows (`admin` allows everything).
    pub fn has(&self, scope: Scope) -> bool {
        self.scopes.contains(&Scope::Admin) || self.scopes.contains(&scope)
    }

    /// Whether the caller sees every thread.
    pub fn is_admin(&self) -> bool {
        self.has(Scope::Admin)
    }

    /// Whether the request's `Authorization` header was a proofgate key (then it is never
    /// passed on to an LLM).
    pub fn sent_proofgate_key(&self) -> bool {
        self.via != Via::Anonymous
    }

    /// The owner of threads this caller starts for end user `user`.
    pub fn owner(&self, user: Option<&str>) -> ThreadOwner {
        ThreadOwner {
            key: self.id.clone(),
            user: user.unwrap_or("").to_string(),
        }
    }

    /// Whether the caller, acting for end user `user`, may see a thread owned by `owner`
    /// (`None`: a thread from before owners were recorded, admins only).
    pub fn may_access(&self, owner: Option<&ThreadOwner>, user: Option<&str>) -> bool {
        self.is_admin() || owner.is_some_and(|o| *o == self.owner(user))
    }
}

/// The end user named by a request's [`USER_HEADER`], as UTF-8 text ("José", as clients
/// send it). A value that is not UTF-8 is refused: read as no end user, every such user shared
/// one owner, and each could list, read and answer the others' threads.
pub fn end_user(headers: &HeaderMap) -> Result<Option<&str>, super::error::ApiError> {
    let Some(value) = headers.get(USER_HEADER) else {
        return Ok(None);
    };
    let text = std::str::from_utf8(value.as_bytes()).map_err(|_| {
        super::error::ApiError::bad_request(format!(
            "{USER_HEADER} is not UTF-8 text: send the end user's name as UTF-8 bytes (some \
             clients send Latin-1: encode it first)"
        ))
    })?;
    Ok(Some(text.trim()).filter(|u| !u.is_empty()))
}

/// The API key of a request, if it has one: its bearer token, or else its `x-api-key`
/// header (how the Anthropic SDKs send their key).
pub fn bearer(headers: &HeaderMap) -> Option<&str> {
    let from_authorization = || {
        let value = headers.get(header::AUTHORIZATION)?.to_str().ok()?.trim();
        let (scheme, token) = value.split_once(' ')?;
        scheme
            .eq_ignore_ascii_case("bearer")
            .then(|| token.trim())
            .filter(|t| !t.is_empty())
    };
    from_authorization().or_else(|| {
        headers
            .get("x-api-key")?
            .to_str()
            .ok()
            .map(str::trim)
            .filter(|t| !t.is_empty())
    })
}

fn sha256_hex(s: &str) -> String {
    crate::keys::key_hash(s)
}

/// The caller a request's key identifies, `None` when it has no key or an unknown, revoked or
/// expired one. The configured admin key is compared in constant time.
///
/// A key not in the cache is looked up in the storage; unless it was found there before, the
/// lookup first counts against the client's `address` (429 once its quota is spent): made-up
/// keys cannot make the storage work without limit.
pub async fn identify(
    app: &App,
    headers: &HeaderMap,
    address: &str,
) -> Result<Option<Caller>, Response> {
    let Some(token) = bearer(headers) else {
        return Ok(None);
    };
    let presented = sha256_hex(token);
    let admin_hashes = [
        app.config.auth.admin_key.as_deref().map(sha256_hex),
        app.config
            .auth
            .admin_key_sha256
            .as_ref()
            .map(|h| h.to_ascii_lowercase()),
    ];
    for hash in admin_hashes.iter().flatten() {
        if bool::from(presented.as_bytes().ct_eq(hash.as_bytes())) {
            return Ok(Some(Caller::admin_key()));
        }
    }
    let key = match app.keys.get(&presented) {
        Cached::Hit(key) => key,
        Cached::Miss(generation) => {
            // The lookup of a key not known to be real costs the client's address one request
            // of its quota, before it is made: made-up keys cannot make the storage work
            // faster than that, however many arrive at once. A key found before does not.
            if !app.keys.was_a_key(&presented) {
                app.limits
                    .check_rate(address)
                    .map_err(IntoResponse::into_response)?;
            }
            // `presented` is the key's hash, as stored: no second hashing.
            let key = app
                .store
                .key_by_hash(&presented, app.log.key().key_seal())
                .await
                .map_err(|e| ApiError::from(e).into_response())?;
            // Only a key that works spares its address the lookups: a revoked or expired one
            // is held by whoever the revocation was meant to stop.
            let now = i64::try_from(now_ms()).unwrap_or(i64::MAX);
            match &key {
                Some(k) if k.is_active(now) => app.keys.note_a_key(&presented),
                Some(_) => app.keys.forget_a_key(&presented),
                None => {}
            }
            app.keys.put(presented, key.clone(), generation);
            key
        }
    };
    let Some(key) = key else {
        return Ok(None);
    };
    let now = i64::try_from(now_ms()).unwrap_or(i64::MAX);
    if !key.is_active(now) {
        return Ok(None);
    }
    Ok(Some(Caller {
        id: key.id,
        name: key.name,
        scopes: key.scopes,
        via: Via::Key,
    }))
}

/// 401: no valid key.
pub fn unauthorized(headers: &HeaderMap) -> ApiError {
    let (code, message) = if bearer(headers).is_some() {
        (
            "invalid_api_key",
            "the API key is not valid (unknown, revoked or expired); ask an admin for a new one",
        )
    } else {
        (
            "missing_api_key",
            "this route needs an API key: send `Authorization: Bearer <key>` (an admin creates keys with `proofgate keys create` or POST /api/keys)",
        )
    };
    ApiError::new(StatusCode::UNAUTHORIZED, code, message)
}

/// 403: a valid key without the scope a route needs (any of `needs`).
pub fn forbidden(caller: &Caller, needs: &[Scope]) -> ApiError {
    let has: Vec<&str> = caller.scopes.iter().map(|s| s.as_str()).collect();
    let needs: Vec<String> = needs.iter().map(|s| format!("`{}`", s.as_str())).collect();
    ApiError::new(
        StatusCode::FORBIDDEN,
        "insufficient_scope",
        format!(
            "key {:?} has scopes [{}]; this route needs {}",
            caller.name,
            has.join(", "),
            needs.join(" or ")
        ),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_health_audit_material_and_static_files_are_public() {
        let get = Method::GET;
        let post = Method::POST;
        for path in [
            "/healthz",
            "/.well-known/proofgate/audit-key",
            "/api/log/checkpoint",
            "/",
            "/index.html",
            "/app.js",
        ] {
            assert_eq!(access(&get, path), Access::Public, "{path}");
        }
        let cases = [
            (&post, "/v1/chat/completions", Access::Needs(Scope::Chat)),
            (&post, "/v1/responses", Access::Needs(Scope::Chat)),
            (&post, "/v1/messages", Access::Needs(Scope::Chat)),
            (
                &post,
                "/guardrail/x/version/1/apply",
                Access::Needs(Scope::Chat),
            ),
            (&get, "/api/threads", Access::Needs(Scope::Read)),
            (&get, "/api/threads/abc/audit", Access::Needs(Scope::Read)),
            (
                &get,
                "/api/threads/abc",
                Access::NeedsEither(Scope::Read, Scope::Chat),
            ),
            (&get, "/api/threads/", Access::Needs(Scope::Read)),
            (&post, "/api/threads", Access::Needs(Scope::Chat)),
            (
                &post,
                "/api/threads/abc/answers",
                Access::Needs(Scope::Chat),
            ),
            (&get, "/api/policies", Access::Needs(Scope::Read)),
            (
                &post,
                "/api/policies/gen-tests",
                Access::Needs(Scope::Admin),
            ),
            (
                &post,
                "/api/policies/formalize",
                Access::Needs(Scope::Admin),
            ),
            (&get, "/api/config", Access::Needs(Scope::Admin)),
            (&get, "/api/keys", Access::Needs(Scope::Admin)),
            (&get, "/metrics", Access::Needs(Scope::Admin)),
            (&get, "/api/unknown", Access::Needs(Scope::Admin)),
            (&get, "/api/me", Access::AnyKey),
            // Prefixes match whole segments only.
            (&get, "/api/threadsX", Access::Needs(Scope::Admin)),
            (&get, "/healthz/x", Access::Public),
        ];
        for (method, path, expected) in cases {
            assert_eq!(access(method, path), expected, "{method} {path}");
        }
    }

    #[test]
    fn bearer_tokens_are_read_case_insensitively() {
        let mut h = HeaderMap::new();
        assert_eq!(bearer(&h), None);
        h.insert(header::AUTHORIZATION, "bearer  pg_abc ".parse().unwrap());
        assert_eq!(bearer(&h), Some("pg_abc"));
        h.insert(header::AUTHORIZATION, "Basic abc".parse().unwrap());
        assert_eq!(bearer(&h), None);
    }

    #[test]
    fn owners_see_their_own_threads_and_admins_every_thread() {
        let key = Caller {
            id: "key_1".into(),
            name: "app".into(),
            scopes: vec![Scope::Chat, Scope::Read],
            via: Via::Key,
        };
        let alice = key.owner(Some("alice"));
        assert!(key.may_access(Some(&alice), Some("alice")));
        assert!(!key.may_access(Some(&alice), Some("bob")));
        assert!(!key.may_access(Some(&alice), None));
        assert!(!key.may_access(None, None));
        let other = Caller {
            id: "key_2".into(),
            ..key.clone()
        };
        assert!(!other.may_access(Some(&alice), Some("alice")));
        assert!(Caller::admin_key().may_access(Some(&alice), None));
        assert!(Caller::admin_key().may_access(None, None));
        assert!(key.has(Scope::Read) && !key.has(Scope::Admin));
    }
}

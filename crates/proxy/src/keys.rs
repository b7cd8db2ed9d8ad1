//! API keys: what a key may do (its scopes), how keys are made, and how they are stored. Only a
//! key's SHA-256 is stored, in the same database as the threads, so every replica honours the
//! same keys. Keys are 256 random bits, so a plain SHA-256 is enough (no password hashing).

use crate::storage::{db, StorageError, Store};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use sqlx::Row;

/// What a key may do.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Scope {
    /// The chat endpoints (`/v1/*`, the ApplyGuardrail-compatible endpoint), and starting or
    /// answering threads through `/api/threads`.
    Chat,
    /// Reading the key's own threads and audit trails (`GET /api/threads*`), and the policy.
    Read,
    /// Everything: all threads, keys, policy authoring, configuration, metrics.
    Admin,
}

impl Scope {
    /// The scope's name, as in the API.
    pub fn as_str(self) -> &'static str {
        match self {
            Scope::Chat => "chat",
            Scope::Read => "read",
            Scope::Admin => "admin",
        }
    }

    /// Parses `chat`, `read` or `admin`.
    pub fn parse(s: &str) -> Result<Scope, KeyError> {
        match s.trim() {
            "chat" => Ok(Scope::Chat),
            "read" => Ok(Scope::Read),
            "admin" => Ok(Scope::Admin),
            other => Err(KeyError::Invalid(format!(
                "unknown scope {other:?}: use chat, read or admin"
            ))),
        }
    }
}

/// A stored key, without its secret.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ApiKey {
    /// Public id (`key_...`), used to list and revoke the key.
    pub id: String,
    /// What the key is for, chosen by the admin.
    pub name: String,
    /// What the key may do.
    pub scopes: Vec<Scope>,
    /// Creation time, ms since the epoch.
    pub created_at: i64,
    /// The key stops working at this time (ms since the epoch), if set.
    pub expires_at: Option<i64>,
    /// The key was revoked at this time, if it was.
    pub revoked_at: Option<i64>,
}

impl ApiKey {
    /// Whether the key works at `now_ms`.
    pub fn is_active(&self, now_ms: i64) -> bool {
        self.revoked_at.is_none() && self.expires_at.is_none_or(|e| now_ms < e)
    }
}

/// A key that could not be created or found.
#[derive(Debug, thiserror::Error)]
pub enum KeyError {
    /// The request was wrong: says what to change.
    #[error("{0}")]
    Invalid(String),
    /// The storage failed.
    #[error(transparent)]
    Storage(#[from] StorageError),
    /// The operating system gave no random bytes.
    #[error("no randomness available for a new key: {0}")]
    Random(String),
}

/// The SHA-256 (hex) under which a key is stored and compared.
pub fn key_hash(secret: &str) -> String {
    hex::encode(Sha256::digest(secret.as_bytes()))
}

fn random_hex(bytes: usize) -> Result<String, KeyError> {
    let mut buf = vec![0u8; bytes];
    getrandom::fill(&mut buf).map_err(|e| KeyError::Random(e.to_string()))?;
    Ok(hex::encode(buf))
}

/// What a new key may be.
pub fn check_new_key(
    name: &str,
    scopes: &[Scope],
    expires_at: Option<i64>,
    now_ms: i64,
) -> Result<(), KeyError> {
    if name.trim().is_empty() || name.chars().count() > 100 {
        return Err(KeyError::Invalid(
            "name must be 1 to 100 characters (what the key is for)".into(),
        ));
    }
    if scopes.is_empty() {
        return Err(KeyError::Invalid(
            "scopes must list at least one of chat, read, admin".into(),
        ));
    }
    if matches!(expires_at, Some(e) if e <= now_ms) {
        return Err(KeyError::Invalid(
            "expiresAt is in the past (milliseconds since the epoch)".into(),
        ));
    }
    Ok(())
}

fn scopes_column(scopes: &[Scope]) -> String {
    let mut s: Vec<Scope> = scopes.to_vec();
    s.sort();
    s.dedup();
    s.iter().map(|s| s.as_str()).collect::<Vec<_>>().join(",")
}

fn row_to_key(row: &sqlx::any::AnyRow) -> Result<ApiKey, StorageError> {
    let read = || db("reading a key row");
    let scopes: String = row.try_get("scopes").map_err(read())?;
    Ok(ApiKey {
        id: row.try_get("id").map_err(read())?,
        name: row.try_get("name").map_err(read())?,
        // A scope this version does not know grants nothing.
        scopes: scopes
            .split(',')
            .filter_map(|s| Scope::parse(s).ok())
            .collect(),
        created_at: row.try_get("created_at").map_err(read())?,
        expires_at: row.try_get("expires_at").map_err(read())?,
        revoked_at: row.try_get("revoked_at").map_err(read())?,
    })
}

impl Store {
    /// Creates a key; returns it and its secret, which is never stored or shown again.
    pub async fn create_key(
        &self,
        name: &str,
        scopes: &[Scope],
        expires_at: Option<i64>,
        now_ms: i64,
    ) -> Result<(ApiKey, String), KeyError> {
        check_new_key(name, scopes, expires_at, now_ms)?;
        let id = format!("key_{}", random_hex(8)?);
        let secret = format!("pg_{}", random_hex(32)?);
        let scopes_text = scopes_column(scopes);
        sqlx::query(
            "INSERT INTO api_keys (id, name, key_hash, scopes, created_at, expires_at, revoked_at) \
             VALUES ($1, $2, $3, $4, $5, $6, NULL)",
        )
        .bind(&id)
        .bind(name.trim())
        .bind(key_hash(&secret))
        .bind(&scopes_text)
        .bind(now_ms)
        .bind(expires_at)
        .execute(&self.pool)
        .await
        .map_err(db("creating a key"))?;
        let key = ApiKey {
            id,
            name: name.trim().to_string(),
            scopes: scopes_text
                .split(',')
                .filter_map(|s| Scope::parse(s).ok())
                .collect(),
            created_at: now_ms,
            expires_at,
            revoked_at: None,
        };
        Ok((key, secret))
    }

    /// Every key (active, expired and revoked), newest first; never their secrets.
    pub async fn keys(&self) -> Result<Vec<ApiKey>, StorageError> {
        let rows = sqlx::query("SELECT * FROM api_keys ORDER BY created_at DESC, id")
            .fetch_all(&self.pool)
            .await
            .map_err(db("listing keys"))?;
        rows.iter().map(row_to_key).collect()
    }

    /// The key with this secret, if there is one (active or not).
    pub async fn key_by_secret(&self, secret: &str) -> Result<Option<ApiKey>, StorageError> {
        self.key_by_hash(&key_hash(secret)).await
    }

    /// The key whose secret has this [`key_hash`], if there is one (active or not).
    pub async fn key_by_hash(&self, hash: &str) -> Result<Option<ApiKey>, StorageError> {
        let row = sqlx::query("SELECT * FROM api_keys WHERE key_hash = $1")
            .bind(hash)
            .fetch_optional(&self.pool)
            .await
            .map_err(db("looking up a key"))?;
        row.as_ref().map(row_to_key).transpose()
    }

    /// Revokes a key at `now_ms`. `None` when there is no such key; revoking twice keeps the
    /// first time.
    pub async fn revoke_key(&self, id: &str, now_ms: i64) -> Result<Option<ApiKey>, StorageError> {
        sqlx::query("UPDATE api_keys SET revoked_at = $1 WHERE id = $2 AND revoked_at IS NULL")
            .bind(now_ms)
            .bind(id)
            .execute(&self.pool)
            .await
            .map_err(db(format!("revoking key {id}")))?;
        let row = sqlx::query("SELECT * FROM api_keys WHERE id = $1")
            .bind(id)
            .fetch_optional(&self.pool)
            .await
            .map_err(db(format!("loading key {id}")))?;
        row.as_ref().map(row_to_key).transpose()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn stores(name: &str) -> Vec<Store> {
        let dir = std::env::temp_dir().join(format!("pg-keys-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let sqlite = format!("sqlite://{}", dir.join("k.sqlite").display());
        let mut out = vec![Store::connect(&sqlite).await.unwrap()];
        if let Ok(pg) = std::env::var("PROOFGATE_TEST_POSTGRES_URL") {
            out.push(Store::connect(&pg).await.unwrap());
        }
        out
    }

    #[tokio::test]
    async fn keys_are_stored_as_hashes_found_by_secret_and_revoked() {
        for store in stores("lifecycle").await {
            let (key, secret) = store
                .create_key(
                    "web ui",
                    &[Scope::Read, Scope::Chat, Scope::Read],
                    None,
                    100,
                )
                .await
                .unwrap();
            assert!(secret.starts_with("pg_") && secret.len() == 67, "{secret}");
            assert_eq!(key.scopes, vec![Scope::Chat, Scope::Read]);
            let found = store.key_by_secret(&secret).await.unwrap().unwrap();
            assert_eq!(found, key);
            assert!(found.is_active(101));
            assert!(store.key_by_secret("pg_wrong").await.unwrap().is_none());
            // The secret itself is nowhere in the table.
            let rows = sqlx::query("SELECT * FROM api_keys WHERE id = $1")
                .bind(&key.id)
                .fetch_all(&store.pool)
                .await
                .unwrap();
            let hash: String = rows[0].try_get("key_hash").unwrap();
            assert_eq!(hash, key_hash(&secret));
            assert_ne!(hash, secret);

            let revoked = store.revoke_key(&key.id, 200).await.unwrap().unwrap();
            assert_eq!(revoked.revoked_at, Some(200));
            assert!(!revoked.is_active(201));
            let again = store.revoke_key(&key.id, 300).await.unwrap().unwrap();
            assert_eq!(again.revoked_at, Some(200));
            assert!(store.revoke_key("key_nope", 300).await.unwrap().is_none());
            assert!(store.keys().await.unwrap().iter().any(|k| k.id == key.id));
        }
    }

    #[tokio::test]
    async fn bad_keys_are_refused_with_what_to_change() {
        let store = stores("bad").await.remove(0);
        let err = store
            .create_key(" ", &[Scope::Chat], None, 1)
            .await
            .unwrap_err();
        assert!(err.to_string().contains("name"), "{err}");
        let err = store.create_key("x", &[], None, 1).await.unwrap_err();
        assert!(err.to_string().contains("scopes"), "{err}");
        let err = store
            .create_key("x", &[Scope::Chat], Some(5), 10)
            .await
            .unwrap_err();
        assert!(err.to_string().contains("expiresAt"), "{err}");
        assert!(Scope::parse("root").is_err());
    }

    #[test]
    fn expiry_is_checked() {
        let k = ApiKey {
            id: "key_1".into(),
            name: "n".into(),
            scopes: vec![Scope::Chat],
            created_at: 0,
            expires_at: Some(10),
            revoked_at: None,
        };
        assert!(k.is_active(9));
        assert!(!k.is_active(10));
    }
}

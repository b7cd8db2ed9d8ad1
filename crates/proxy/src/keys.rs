//! API keys: what a key may do (its scopes), how keys are made, and how they are stored. Only a
//! key's SHA-256 is stored, in the same database as the threads, so every replica honours the
//! same keys. Keys are 256 random bits, so a plain SHA-256 is enough (no password hashing).
//!
//! Each key's row is sealed ([`KeySeal`]): a MAC over its id, hash, scopes, expiry and
//! revocation, keyed from the audit signing key, which is kept out of the database. Whoever
//! holds the database could otherwise put the hash of a secret they know in any key's row,
//! answer that key's threads as its owner, and have the server sign their words into the
//! trail as the user's.

use crate::storage::{db, StorageError, Store};
use hmac::{Hmac, Mac};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use sqlx::Row;
use subtle::ConstantTimeEq;

/// The key of the MAC that seals key rows, derived from the audit signing key (replicas that
/// share one share this too).
#[derive(Clone)]
pub struct KeySeal([u8; 32]);

impl std::fmt::Debug for KeySeal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("KeySeal(..)")
    }
}

impl KeySeal {
    /// The seal of a server whose audit signing key is `signing_key` (its encoded form).
    pub fn from_signing_key(signing_key: &str) -> Self {
        let mut h = Sha256::new();
        h.update(b"proofgate/api-key-seal/v1\n");
        h.update(signing_key.trim().as_bytes());
        KeySeal(h.finalize().into())
    }

    /// The seal of a row with these columns (hex).
    fn of(&self, row: &SealedColumns) -> String {
        let mut mac = Hmac::<Sha256>::new_from_slice(&self.0).expect("HMAC takes any key length");
        let opt = |v: Option<i64>| v.map(|v| v.to_string()).unwrap_or_default();
        mac.update(
            format!(
                "{}\n{}\n{}\n{}\n{}\n",
                row.id,
                row.key_hash,
                row.scopes,
                opt(row.expires_at),
                opt(row.revoked_at)
            )
            .as_bytes(),
        );
        hex::encode(mac.finalize().into_bytes())
    }

    /// What `row`'s seal is.
    fn state(&self, row: &SealedColumns) -> SealState {
        match (&row.seal, self.holds(row)) {
            (None, _) => SealState::Missing,
            (Some(_), true) => SealState::Valid,
            (Some(_), false) => SealState::Invalid,
        }
    }

    /// Whether `row` carries its seal.
    fn holds(&self, row: &SealedColumns) -> bool {
        row.seal
            .as_deref()
            .is_some_and(|s| bool::from(s.as_bytes().ct_eq(self.of(row).as_bytes())))
    }
}

/// What a key row's seal is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum SealState {
    /// This server's seal of the row as it is: the key works (when active).
    Valid,
    /// No seal: a key made before rows were sealed, or one whose seal was removed in the
    /// database. Never sealed afterwards: nothing the database says of such a row (its hash,
    /// scopes, expiry, revocation) can be trusted, so it stays refused; make a new key.
    Missing,
    /// A seal that does not hold: the row was changed in the database since it was sealed, or
    /// the signing key is not the one that sealed it.
    Invalid,
}

/// The columns of a key's row that its seal covers, and the seal.
struct SealedColumns {
    id: String,
    key_hash: String,
    scopes: String,
    expires_at: Option<i64>,
    revoked_at: Option<i64>,
    seal: Option<String>,
}

impl SealedColumns {
    fn of_row(row: &sqlx::any::AnyRow) -> Result<Self, StorageError> {
        let read = || db("reading a key");
        Ok(SealedColumns {
            id: row.try_get("id").map_err(read())?,
            key_hash: row.try_get("key_hash").map_err(read())?,
            scopes: row.try_get("scopes").map_err(read())?,
            expires_at: row.try_get("expires_at").map_err(read())?,
            revoked_at: row.try_get("revoked_at").map_err(read())?,
            seal: row.try_get("seal").map_err(read())?,
        })
    }
}

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
        seal: &KeySeal,
    ) -> Result<(ApiKey, String), KeyError> {
        check_new_key(name, scopes, expires_at, now_ms)?;
        let id = format!("key_{}", random_hex(8)?);
        let secret = format!("pg_{}", random_hex(32)?);
        let scopes_text = scopes_column(scopes);
        let sealed = seal.of(&SealedColumns {
            id: id.clone(),
            key_hash: key_hash(&secret),
            scopes: scopes_text.clone(),
            expires_at,
            revoked_at: None,
            seal: None,
        });
        sqlx::query(
            "INSERT INTO api_keys \
             (id, name, key_hash, scopes, created_at, expires_at, revoked_at, seal) \
             VALUES ($1, $2, $3, $4, $5, $6, NULL, $7)",
        )
        .bind(&id)
        .bind(name.trim())
        .bind(key_hash(&secret))
        .bind(&scopes_text)
        .bind(now_ms)
        .bind(expires_at)
        .bind(sealed)
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
    pub async fn key_by_secret(
        &self,
        secret: &str,
        seal: &KeySeal,
    ) -> Result<Option<ApiKey>, StorageError> {
        self.key_by_hash(&key_hash(secret), seal).await
    }

    /// The key whose secret has this [`key_hash`], if there is one (active or not) and its row
    /// carries its seal. A row without it (written or changed in the database, or from before
    /// rows were sealed) is no key, and is logged.
    pub async fn key_by_hash(
        &self,
        hash: &str,
        seal: &KeySeal,
    ) -> Result<Option<ApiKey>, StorageError> {
        self.sealed_key("SELECT * FROM api_keys WHERE key_hash = $1", hash, seal)
            .await
    }

    /// The key with public id `id`, if there is one (active or not) and its row carries its
    /// seal, as [`Store::key_by_hash`] reads one.
    pub async fn key_by_id(
        &self,
        id: &str,
        seal: &KeySeal,
    ) -> Result<Option<ApiKey>, StorageError> {
        self.sealed_key("SELECT * FROM api_keys WHERE id = $1", id, seal)
            .await
    }

    /// The key `query` (of `api_keys`, by one column) finds for `value`, if its row carries
    /// its seal; a row that does not is no key, and is logged.
    async fn sealed_key(
        &self,
        query: &'static str,
        value: &str,
        seal: &KeySeal,
    ) -> Result<Option<ApiKey>, StorageError> {
        let rows = sqlx::query(query)
            .bind(value)
            .fetch_all(&self.pool)
            .await
            .map_err(db("looking up a key"))?;
        for row in &rows {
            let columns = SealedColumns::of_row(row)?;
            if seal.holds(&columns) {
                return row_to_key(row).map(Some);
            }
            tracing::error!(
                "API key {} refused: its row does not carry this server's seal (it was written \
                 or changed in the database, or made before key rows were sealed: make a new \
                 key)",
                columns.id
            );
        }
        Ok(None)
    }

    /// Revokes a key at `now_ms`, and seals its row again. `None` when there is no such key;
    /// revoking twice keeps the first time.
    pub async fn revoke_key(
        &self,
        id: &str,
        now_ms: i64,
        seal: &KeySeal,
    ) -> Result<Option<ApiKey>, StorageError> {
        let load = || async {
            sqlx::query("SELECT * FROM api_keys WHERE id = $1")
                .bind(id)
                .fetch_optional(&self.pool)
                .await
                .map_err(db(format!("loading key {id}")))
        };
        let Some(row) = load().await? else {
            return Ok(None);
        };
        let mut columns = SealedColumns::of_row(&row)?;
        if columns.revoked_at.is_none() {
            // Only a row that carries its seal is sealed again: one altered in the database
            // stays refused, revoked or not.
            // A row whose seal does not hold keeps it as it is: the evidence of the change.
            let holds = seal.holds(&columns);
            columns.revoked_at = Some(now_ms);
            let query = if holds {
                sqlx::query(
                    "UPDATE api_keys SET revoked_at = $1, seal = $2 \
                     WHERE id = $3 AND revoked_at IS NULL",
                )
                .bind(now_ms)
                .bind(seal.of(&columns))
            } else {
                sqlx::query(
                    "UPDATE api_keys SET revoked_at = $1 WHERE id = $2 AND revoked_at IS NULL",
                )
                .bind(now_ms)
            };
            query
                .bind(id)
                .execute(&self.pool)
                .await
                .map_err(db(format!("revoking key {id}")))?;
        }
        load().await?.as_ref().map(row_to_key).transpose()
    }

    /// Every key (as [`Store::keys`]) and what its row's seal is.
    pub async fn keys_sealed(
        &self,
        seal: &KeySeal,
    ) -> Result<Vec<(ApiKey, SealState)>, StorageError> {
        let rows = sqlx::query("SELECT * FROM api_keys ORDER BY created_at DESC, id")
            .fetch_all(&self.pool)
            .await
            .map_err(db("listing keys"))?;
        rows.iter()
            .map(|r| Ok((row_to_key(r)?, seal.state(&SealedColumns::of_row(r)?))))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seal() -> KeySeal {
        KeySeal::from_signing_key("PRIVATE+KEY+test+00000000+AQ")
    }

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
                    &seal(),
                )
                .await
                .unwrap();
            assert!(secret.starts_with("pg_") && secret.len() == 67, "{secret}");
            assert_eq!(key.scopes, vec![Scope::Chat, Scope::Read]);
            let found = store
                .key_by_secret(&secret, &seal())
                .await
                .unwrap()
                .unwrap();
            assert_eq!(found, key);
            assert!(found.is_active(101));
            assert!(store
                .key_by_secret("pg_wrong", &seal())
                .await
                .unwrap()
                .is_none());
            // The secret itself is nowhere in the table.
            let rows = sqlx::query("SELECT * FROM api_keys WHERE id = $1")
                .bind(&key.id)
                .fetch_all(&store.pool)
                .await
                .unwrap();
            let hash: String = rows[0].try_get("key_hash").unwrap();
            assert_eq!(hash, key_hash(&secret));
            assert_ne!(hash, secret);

            let revoked = store
                .revoke_key(&key.id, 200, &seal())
                .await
                .unwrap()
                .unwrap();
            assert_eq!(revoked.revoked_at, Some(200));
            assert!(!revoked.is_active(201));
            let again = store
                .revoke_key(&key.id, 300, &seal())
                .await
                .unwrap()
                .unwrap();
            assert_eq!(again.revoked_at, Some(200));
            assert!(store
                .revoke_key("key_nope", 300, &seal())
                .await
                .unwrap()
                .is_none());
            assert!(store.keys().await.unwrap().iter().any(|k| k.id == key.id));
        }
    }

    /// Whoever holds the database writes the hash of a secret they know into a key's row, copies
    /// their own key's row over another's id, adds a scope, or undoes a revocation: the row no
    /// longer carries its seal, and is no key. Another server's seal (another signing key) is
    /// not this one's. A row without a seal (from before seals, or stripped) stays refused.
    #[tokio::test]
    async fn a_key_row_altered_in_the_database_is_no_key() {
        for store in stores("sealed").await {
            let (victim, _) = store
                .create_key("victim", &[Scope::Chat, Scope::Read], None, 100, &seal())
                .await
                .unwrap();
            let (mine, my_secret) = store
                .create_key("mine", &[Scope::Chat], None, 100, &seal())
                .await
                .unwrap();
            let sql = |q: String| {
                let pool = store.pool.clone();
                async move {
                    sqlx::query(sqlx::AssertSqlSafe(q))
                        .execute(&pool)
                        .await
                        .unwrap()
                }
            };
            let mine_found = store.key_by_secret(&my_secret, &seal()).await.unwrap();
            assert_eq!(mine_found.map(|k| k.id), Some(mine.id.clone()));
            let other = KeySeal::from_signing_key("PRIVATE+KEY+other+00000000+AQ");
            assert_eq!(store.key_by_secret(&my_secret, &other).await.unwrap(), None);
            // A secret the holder knows, hashed into the victim's row.
            let known = "pg_known_to_the_database_holder";
            sql(format!(
                "UPDATE api_keys SET key_hash = '{}' WHERE id = '{}'",
                key_hash(known),
                victim.id
            ))
            .await;
            assert_eq!(store.key_by_secret(known, &seal()).await.unwrap(), None);
            // Their own row's hash and seal moved to the victim's (hashes are unique): the seal is
            // their row's, not the victim's, so the secret opens neither.
            let (my_hash, my_seal) = (
                key_hash(&my_secret),
                seal().of(&SealedColumns {
                    id: mine.id.clone(),
                    key_hash: key_hash(&my_secret),
                    scopes: "chat".into(),
                    expires_at: None,
                    revoked_at: None,
                    seal: None,
                }),
            );
            sql(format!(
                "UPDATE api_keys SET key_hash = 'moved-{0}' WHERE id = '{0}'",
                mine.id
            ))
            .await;
            sql(format!(
                "UPDATE api_keys SET key_hash = '{my_hash}', seal = '{my_seal}' WHERE id = '{}'",
                victim.id
            ))
            .await;
            assert_eq!(
                store.key_by_secret(&my_secret, &seal()).await.unwrap(),
                None
            );
            // Put back.
            sql(format!(
                "UPDATE api_keys SET key_hash = 'gone-{0}' WHERE id = '{0}'",
                victim.id
            ))
            .await;
            sql(format!(
                "UPDATE api_keys SET key_hash = '{my_hash}' WHERE id = '{}'",
                mine.id
            ))
            .await;
            let found = store.key_by_secret(&my_secret, &seal()).await.unwrap();
            assert_eq!(found.map(|k| k.id), Some(mine.id.clone()));
            // A scope added to their own key, then a revocation undone.
            sql(format!(
                "UPDATE api_keys SET scopes = 'admin,chat' WHERE id = '{}'",
                mine.id
            ))
            .await;
            assert_eq!(
                store.key_by_secret(&my_secret, &seal()).await.unwrap(),
                None
            );
            sql(format!(
                "UPDATE api_keys SET scopes = 'chat' WHERE id = '{}'",
                mine.id
            ))
            .await;
            assert!(store
                .key_by_secret(&my_secret, &seal())
                .await
                .unwrap()
                .is_some());
            store.revoke_key(&mine.id, 200, &seal()).await.unwrap();
            let revoked = store
                .key_by_secret(&my_secret, &seal())
                .await
                .unwrap()
                .unwrap();
            assert_eq!(revoked.revoked_at, Some(200));
            sql(format!(
                "UPDATE api_keys SET revoked_at = NULL WHERE id = '{}'",
                mine.id
            ))
            .await;
            assert_eq!(
                store.key_by_secret(&my_secret, &seal()).await.unwrap(),
                None
            );
            // A row from before seals (or whose seal was removed): refused.
            let (legacy, legacy_secret) = store
                .create_key("legacy", &[Scope::Read], None, 100, &seal())
                .await
                .unwrap();
            sql(format!(
                "UPDATE api_keys SET seal = NULL WHERE id = '{}'",
                legacy.id
            ))
            .await;
            assert_eq!(
                store.key_by_secret(&legacy_secret, &seal()).await.unwrap(),
                None
            );
            let listed = store.keys_sealed(&seal()).await.unwrap();
            let state = |id: &str| listed.iter().find(|(k, _)| k.id == id).map(|(_, s)| *s);
            assert_eq!(state(&legacy.id), Some(SealState::Missing));
            assert_eq!(
                state(&mine.id),
                Some(SealState::Invalid),
                "revocation cleared"
            );
            // Never sealed afterwards: nothing the database says of such a row can be trusted.
            assert_eq!(
                store.key_by_secret(&legacy_secret, &seal()).await.unwrap(),
                None
            );
            // Revoking a row whose seal does not hold keeps that seal (the evidence).
            store.revoke_key(&mine.id, 300, &seal()).await.unwrap();
            let listed = store.keys_sealed(&seal()).await.unwrap();
            let state = |id: &str| listed.iter().find(|(k, _)| k.id == id).map(|(_, s)| *s);
            assert_eq!(state(&mine.id), Some(SealState::Invalid));
        }
    }

    #[tokio::test]
    async fn bad_keys_are_refused_with_what_to_change() {
        let store = stores("bad").await.remove(0);
        let err = store
            .create_key(" ", &[Scope::Chat], None, 1, &seal())
            .await
            .unwrap_err();
        assert!(err.to_string().contains("name"), "{err}");
        let err = store
            .create_key("x", &[], None, 1, &seal())
            .await
            .unwrap_err();
        assert!(err.to_string().contains("scopes"), "{err}");
        let err = store
            .create_key("x", &[Scope::Chat], Some(5), 10, &seal())
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

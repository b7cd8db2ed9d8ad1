//! `proofgate keys create|list|revoke`: API keys, straight in the configured storage (so the
//! first key can be made before any server runs, and replicas see it at once).

use anyhow::{Context, Result};
use clap::{Args, Subcommand};
use proofgate_proxy::audit_log::AuditKey;
use proofgate_proxy::config::Config;
use proofgate_proxy::keys::{KeySeal, Scope, SealState};
use proofgate_proxy::storage::Store;
use serde_json::json;
use std::path::PathBuf;

#[derive(Subcommand)]
pub enum KeysCommand {
    /// Create a key and print it (the key is shown this once; only its hash is stored).
    Create(CreateArgs),
    /// List keys (never their secrets).
    List(StorageArgs),
    /// Revoke a key by id: running servers refuse it within their `[auth] key_cache_ms` (1 s by
    /// default).
    Revoke {
        #[command(flatten)]
        storage: StorageArgs,
        /// The key's id (`key_...`), as `keys list` shows it.
        id: String,
    },
}

#[derive(Args)]
pub struct StorageArgs {
    /// The server's TOML configuration (its [storage] url is used; PROOFGATE_* overrides apply).
    #[arg(long)]
    config: Option<PathBuf>,
}

#[derive(Args)]
pub struct CreateArgs {
    #[command(flatten)]
    storage: StorageArgs,
    /// What the key is for (shown in listings and logs).
    #[arg(long)]
    name: String,
    /// Comma-separated: chat (the /v1 endpoints, starting threads), read (the key's own
    /// threads and trails), admin (everything).
    #[arg(long, value_delimiter = ',', required = true)]
    scopes: Vec<String>,
    /// The key stops working after this many days.
    #[arg(long)]
    expires_in_days: Option<u32>,
}

fn now_ms() -> i64 {
    i64::try_from(proofgate_proxy::app::now_ms()).unwrap_or(i64::MAX)
}

async fn store(args: &StorageArgs) -> Result<Store> {
    let config = Config::load_unchecked(args.config.as_deref())?;
    Store::connect(&config.storage.url)
        .await
        .with_context(|| "opening the storage named by [storage] url".to_string())
}

/// The seal of key rows: from the audit signing key the configuration names. Only `create`
/// (`make`) may make that key, as the server would at the same path, for the first key made
/// before any server ran; listing and revoking need the server's own.
async fn seal(args: &StorageArgs, make: bool) -> Result<KeySeal> {
    let config = Config::load_unchecked(args.config.as_deref())?;
    let path = config.audit.key_path(&config.storage.url);
    let secret = config.audit.signing_key.as_deref();
    let existed = secret.is_some() || path.exists();
    let key = if make {
        let store = store(args).await?;
        AuditKey::load_or_create_for(&store, secret, &path, config.audit.key_name()).await
    } else {
        AuditKey::load(secret, &path, config.audit.key_name())
    }
    .context("loading the audit signing key ([audit] signing_key_path), which seals key rows")?;
    if !existed {
        eprintln!(
            "proofgate: created the audit signing key {} (it seals key rows and signs the audit \
             log: the server of this configuration uses it; keep it out of the database, and \
             back it up)",
            path.display()
        );
    }
    Ok(key.key_seal().clone())
}

pub fn run(command: KeysCommand) -> Result<()> {
    let runtime = tokio::runtime::Runtime::new().context("starting the runtime")?;
    runtime.block_on(async move {
        match command {
            KeysCommand::Create(args) => {
                let scopes = args
                    .scopes
                    .iter()
                    .map(|s| Scope::parse(s))
                    .collect::<Result<Vec<_>, _>>()?;
                let now = now_ms();
                let expires_at = args
                    .expires_in_days
                    .map(|d| now.saturating_add(i64::from(d) * 86_400_000));
                let seal = seal(&args.storage, true).await?;
                let (key, secret) = store(&args.storage)
                    .await?
                    .create_key(&args.name, &scopes, expires_at, now, &seal)
                    .await?;
                let mut out = serde_json::to_value(&key)?;
                out["key"] = json!(secret);
                println!("{}", serde_json::to_string_pretty(&out)?);
                eprintln!(
                    "proofgate: keep the key now: it is not stored and cannot be shown again"
                );
            }
            KeysCommand::List(args) => {
                let now = now_ms();
                let seal = seal(&args, false).await?;
                let keys: Vec<serde_json::Value> = store(&args)
                    .await?
                    .keys_sealed(&seal)
                    .await?
                    .into_iter()
                    .map(|(k, seal)| {
                        // A row without this server's seal is no key, whatever it says.
                        let active = seal == SealState::Valid && k.is_active(now);
                        let mut v = serde_json::to_value(k).unwrap_or_default();
                        v["active"] = json!(active);
                        v["seal"] = json!(seal);
                        v
                    })
                    .collect();
                println!(
                    "{}",
                    serde_json::to_string_pretty(&json!({ "keys": keys }))?
                );
            }
            KeysCommand::Revoke { storage, id } => {
                let seal = seal(&storage, false).await?;
                let key = store(&storage)
                    .await?
                    .revoke_key(&id, now_ms(), &seal)
                    .await?
                    .with_context(|| format!("no key {id} (see `proofgate keys list`)"))?;
                println!("{}", serde_json::to_string_pretty(&key)?);
            }
        }
        Ok(())
    })
}

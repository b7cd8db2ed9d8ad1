//! The `proofgate` command line.

mod keys_cmd;
mod log_cmd;
mod policy_cmd;

use anyhow::{Context, Result};
use clap::{Parser, Subcommand};
use proofgate_core::{
    aggregate_verdict, parse_decision, prioritize, ApplyGuardrailResponse, Finding,
};
use proofgate_proxy::authoring::cli as authoring;
use proofgate_proxy::terminal::printable;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// mimalloc rather than glibc's malloc: the proxy allocates per request (JSON, HTTP), and
/// glibc's allocator took a sixth of its CPU under load.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Transparent huge pages off for this process. mimalloc (v3) asks the kernel for them on its
/// arenas, and a 2 MiB page stays resident for a few live objects: with them the proxy held
/// 10-12 MB more at rest and 15-20 MB more after load, for no throughput measured (README,
/// Performance). It runs from `.init_array`, before the Rust runtime's first allocation
/// (which reserves mimalloc's arena), and the kernel keeps the setting for the process's life;
/// a kernel that refuses it leaves the default.
#[cfg(target_os = "linux")]
#[used]
#[unsafe(link_section = ".init_array")]
static NO_TRANSPARENT_HUGE_PAGES: extern "C" fn() = {
    extern "C" fn no_transparent_huge_pages() {
        // SAFETY: PR_SET_THP_DISABLE takes integer arguments only and changes no memory.
        unsafe {
            libc::prctl(libc::PR_SET_THP_DISABLE, 1, 0, 0, 0);
        }
    }
    no_transparent_huge_pages
};

/// Verified chatbot answers: policy checks with automated reasoning.
#[derive(Parser)]
#[command(name = "proofgate", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Check translations of a question/answer against a policy with the local reasoner and
    /// print {"findings": [...]} in the ApplyGuardrail shape.
    Check {
        /// The policy: Bedrock AutomatedReasoningPolicyDefinition JSON.
        #[arg(long)]
        policy: PathBuf,
        /// The translations: {"translations": [...]}, one entry per translator.
        #[arg(long)]
        translations: PathBuf,
        /// Share of translators that must agree on a pair (0 < X <= 1).
        #[arg(long, default_value_t = 1.0)]
        threshold: f64,
        /// Solver time limit per call, in milliseconds.
        #[arg(long, default_value_t = 5000)]
        timeout_ms: u32,
        /// policyVersionArn to cite in rules (default: sha256 of the canonical policy JSON).
        #[arg(long)]
        policy_arn: Option<String>,
    },
    /// Run the verifying proxy: OpenAI-compatible /v1/chat/completions, the API, the
    /// ApplyGuardrail-compatible endpoint.
    Serve {
        /// TOML configuration (see examples/proofgate.toml); PROOFGATE_* variables override it.
        #[arg(long)]
        config: Option<PathBuf>,
        /// host:port to listen on (overrides server.listen).
        #[arg(long)]
        listen: Option<String>,
    },
    /// Check an audit trail without trusting the server: hash chain, replay of every loop
    /// decision, every finding's logic rebuilt from YOUR policy and re-checked by an
    /// independent z3 process (scripts stored in the trail are never run), and with
    /// --public-key the server's signature and the trail's inclusion in the append-only log.
    /// Exit 1 when anything fails, 2 when the audit could not run; a check that did not run
    /// (no key, no checkpoint, no --thread, an unfinished thread...) is listed on stderr and
    /// exits 0 unless --require-complete makes it exit 3.
    Audit {
        /// The audit bundle (GET /api/threads/{id}/audit/bundle) or a plain trail (GET
        /// /api/threads/{id}/audit), or `-`.
        file: PathBuf,
        /// The policy the answers must follow (the auditor's own copy).
        #[arg(long)]
        policy: PathBuf,
        /// The server's verifier key (`name+id+base64`, from /.well-known/proofgate/audit-key
        /// or `proofgate audit-key`), or a file holding it.
        #[arg(long)]
        public_key: Option<String>,
        /// A signed checkpoint saved earlier (GET /api/log/checkpoint): the log must extend it.
        #[arg(long)]
        checkpoint: Option<PathBuf>,
        /// The thread the trail must be (a bundle shows only that its trail is a logged head
        /// of some thread).
        #[arg(long)]
        thread: Option<String>,
        /// The server whose log to read (its URL): every leaf up to the checkpoint it signs
        /// now (which must extend the bundle's), held to that checkpoint's root, so that a
        /// trail cut back to an earlier head of its thread, or forked from one, is found (the
        /// leaves are public: no key needed).
        #[arg(long)]
        log: Option<String>,
        /// The z3 binary used to re-check the findings.
        #[arg(long, default_value = "z3")]
        z3: String,
        /// Time limit per check, in milliseconds.
        #[arg(long, default_value_t = 10_000)]
        timeout_ms: u64,
        /// Exit 3 when nothing failed but the audit is not full (`notChecked` is not empty),
        /// for scripts that must not take a partial audit for a verified trail (1 is a
        /// failure, 2 an audit that could not run).
        #[arg(long)]
        require_complete: bool,
    },
    /// Print the audit verifier key (C2SP signed-note), creating the signing key if needed.
    AuditKey {
        /// TOML configuration ([audit] signing_key_path, [storage] url).
        #[arg(long)]
        config: Option<PathBuf>,
    },
    /// The append-only log of trails.
    Log {
        #[command(subcommand)]
        command: log_cmd::LogCommand,
    },
    /// Create, list and revoke API keys (in the storage the configuration names).
    Keys {
        #[command(subcommand)]
        command: keys_cmd::KeysCommand,
    },
    /// Inspect and vet policies.
    Policy {
        #[command(subcommand)]
        command: PolicyCommand,
    },
    /// Read an ApplyGuardrail response (or a JSON list of findings) and print the findings in
    /// rewriting order with the aggregate verdict.
    Findings {
        /// JSON file, or `-` for standard input.
        file: PathBuf,
    },
    /// Parse a rewriting LLM reply into {decision, answer, questions}.
    Decision {
        /// Text file, or `-` for standard input.
        file: PathBuf,
    },
}

#[derive(Subcommand)]
enum PolicyCommand {
    /// Print the schema and every rule in SMT-LIB and structured English.
    Show {
        /// The policy JSON file.
        file: PathBuf,
        /// Print the policy definition JSON as loaded (unknown members kept) instead.
        #[arg(long)]
        json: bool,
    },
    /// Whether the rules can all hold at once: `{"consistent": true}`, or exit 1 with the
    /// rules that contradict each other, or exit 3 when the solver gave up within the time
    /// limit. `serve` runs it before serving a policy with the local validator.
    Consistent {
        /// The policy JSON file.
        file: PathBuf,
        /// Time limit, in milliseconds.
        #[arg(long, default_value_t = 10_000)]
        timeout_ms: u32,
    },
    /// Report unused variables and types, type errors, contradictory rules, rules that are
    /// always true and independent rule groups. Exit 1 when there are errors or warnings.
    Lint {
        /// The policy JSON file.
        file: PathBuf,
        /// Print the report as JSON.
        #[arg(long)]
        json: bool,
        /// Solver time limit per call, in milliseconds.
        #[arg(long, default_value_t = 5000)]
        timeout_ms: u32,
    },
    /// Turn a policy document into a policy with an LLM, span by span (progress on stderr).
    Formalize(authoring::FormalizeArgs),
    /// Run test cases (question/answer or given translations, with the expected finding);
    /// print a pass/fail table. Exit 1 when a test fails.
    Test(authoring::TestArgs),
    /// Generate test cases with Z3: for each rule, scenarios where it is decisive and where it
    /// is not, with their provably correct findings.
    GenTests(authoring::GenTestsArgs),
    /// Show which rules, variables and types changed, and the generated tests whose finding
    /// changed. Exit 1 when the versions differ.
    Diff(authoring::DiffArgs),
    /// Write a policy in Amazon Bedrock's import form (AWS rule ids, with a mapping back).
    Export(authoring::ExportArgs),
    /// Read a definition from AWS or `export --aws` (restoring rule ids with --mapping).
    Import(authoring::ImportArgs),
    /// Fetch a policy definition from Amazon Bedrock (a version, or a build workflow's).
    Pull(authoring::PullArgs),
}

fn read_input(path: &Path) -> Result<String> {
    if path == Path::new("-") {
        let mut s = String::new();
        std::io::stdin()
            .read_to_string(&mut s)
            .context("could not read standard input")?;
        Ok(s)
    } else {
        std::fs::read_to_string(path).with_context(|| format!("could not read {}", path.display()))
    }
}

/// An ApplyGuardrail response body, or a bare list of findings.
/// The findings a file holds (a list, or an ApplyGuardrail response), and whether that
/// response says the guardrail blocked the answer (`action` GUARDRAIL_INTERVENED: another of
/// its policies did; then the answer must not go out, whatever the findings say).
fn load_findings(path: &Path, text: &str) -> Result<(Vec<Finding>, bool)> {
    let value: serde_json::Value = serde_json::from_str(text)
        .with_context(|| format!("{}: not valid JSON", path.display()))?;
    if value.is_array() {
        let findings = serde_json::from_value(value)
            .with_context(|| format!("{}: not a list of findings", path.display()))?;
        Ok((findings, false))
    } else {
        let blocked = proofgate_core::guardrail_response::intervention(&value).is_some();
        let response: ApplyGuardrailResponse = serde_json::from_value(value)
            .with_context(|| format!("{}: not an ApplyGuardrail response", path.display()))?;
        Ok((response.findings(), blocked))
    }
}

/// A verifier key given inline, or the file holding it.
fn key_text(arg: &str) -> Result<String> {
    let path = Path::new(arg);
    if path.is_file() {
        return Ok(std::fs::read_to_string(path)
            .with_context(|| path.display().to_string())?
            .trim()
            .to_string());
    }
    Ok(arg.trim().to_string())
}

fn run(cli: Cli) -> Result<ExitCode> {
    match cli.command {
        Command::Audit {
            file,
            policy,
            public_key,
            checkpoint,
            thread,
            log,
            z3,
            timeout_ms,
            require_complete,
        } => {
            let text = read_input(&file)?;
            let model = proofgate_proxy::app::load_policy(&policy, None)?;
            let key = public_key.map(|k| key_text(&k)).transpose()?;
            let saved = checkpoint
                .map(|p| std::fs::read_to_string(&p).with_context(|| p.display().to_string()))
                .transpose()?;
            let v = proofgate_proxy::audit_check::verify(
                text.as_bytes(),
                &model,
                key.as_deref(),
                saved.as_deref(),
                thread.as_deref(),
                &z3,
                timeout_ms,
                log.as_ref()
                    .map(|server| {
                        let key = key.clone();
                        move |size| {
                            log_cmd::served_log(server, size, key.as_deref())
                                .map_err(|e| format!("{e:#}"))
                        }
                    })
                    .as_ref()
                    .map(|f| f as &proofgate_proxy::audit_check::LogFetch<'_>),
            );
            println!(
                "{}",
                proofgate_proxy::terminal::json_printable(&serde_json::to_string_pretty(&v)?)
            );
            for f in &v.failures {
                eprintln!("audit: {}", printable(f));
            }
            for n in &v.not_checked {
                eprintln!("audit: not checked: {}", printable(n));
            }
            if !v.ok {
                return Ok(ExitCode::from(1));
            }
            if require_complete && !v.complete {
                return Ok(ExitCode::from(3));
            }
        }
        Command::AuditKey { config } => {
            let config = proofgate_proxy::config::Config::load(config.as_deref())?;
            let (secret, path) = (
                config.audit.signing_key.as_deref(),
                config.audit.key_path(&config.storage.url),
            );
            let key = if secret.is_some() || path.exists() {
                // Shown without the database (which may be down, or of an older version).
                proofgate_proxy::audit_log::AuditKey::load(secret, &path, config.audit.key_name())?
            } else {
                // Made only under an empty log: the database says whether it is.
                tokio::runtime::Runtime::new()?.block_on(async {
                    let store =
                        proofgate_proxy::storage::Store::connect(&config.storage.url).await?;
                    anyhow::Ok(
                        proofgate_proxy::audit_log::AuditKey::load_or_create_for(
                            &store,
                            secret,
                            &path,
                            config.audit.key_name(),
                        )
                        .await?,
                    )
                })?
            };
            println!("{}", key.verifier_key());
        }
        Command::Log { command } => return log_cmd::run(command),
        Command::Serve { config, listen } => {
            proofgate_proxy::server::run(config.as_deref(), listen)?;
        }
        Command::Keys { command } => keys_cmd::run(command)?,
        Command::Check {
            policy,
            translations,
            threshold,
            timeout_ms,
            policy_arn,
        } => {
            let out = policy_cmd::check(policy_cmd::CheckArgs {
                policy: &policy,
                translations: &translations,
                threshold,
                timeout_ms,
                policy_arn,
            })?;
            println!("{}", serde_json::to_string_pretty(&out)?);
        }
        Command::Policy { command } => match command {
            PolicyCommand::Show { file, json } => {
                if json {
                    let def =
                        proofgate_core::policy::PolicyDefinition::from_json(&read_input(&file)?)
                            .map_err(|e| anyhow::anyhow!("{}: {e}", file.display()))?;
                    println!("{}", def.to_json_pretty());
                } else {
                    print!("{}", policy_cmd::show(&file)?);
                }
            }
            PolicyCommand::Consistent { file, timeout_ms } => {
                let model = proofgate_proxy::app::load_policy(&file, None)?;
                let options = proofgate_reasoner::CheckOptions {
                    timeout_ms,
                    ..Default::default()
                };
                let reasoner = proofgate_reasoner::Reasoner::new(&model, options)?;
                let (out, code) = match reasoner.contradictory_rules() {
                    Ok(None) => (serde_json::json!({"consistent": true}), 0),
                    Ok(Some(rules)) => (
                        serde_json::json!({"consistent": false, "contradictoryRules": rules}),
                        1,
                    ),
                    Err(_) => (serde_json::json!({"consistent": null}), 3),
                };
                println!("{out}");
                return Ok(ExitCode::from(code));
            }
            PolicyCommand::Lint {
                file,
                json,
                timeout_ms,
            } => {
                let (text, problems) = policy_cmd::lint_policy(&file, json, timeout_ms)?;
                println!("{}", text.trim_end());
                if problems {
                    return Ok(ExitCode::from(1));
                }
            }
            PolicyCommand::Formalize(args) => return authoring::formalize_cmd(args),
            PolicyCommand::Test(args) => return authoring::test_cmd(args),
            PolicyCommand::GenTests(args) => return authoring::gen_tests_cmd(args),
            PolicyCommand::Diff(args) => return authoring::diff_cmd(args),
            PolicyCommand::Export(args) => return authoring::export_cmd(args),
            PolicyCommand::Import(args) => return authoring::import_cmd(args),
            PolicyCommand::Pull(args) => return authoring::pull_cmd(args),
        },
        Command::Findings { file } => {
            let (findings, blocked) = load_findings(&file, &read_input(&file)?)?;
            let verdict = if blocked {
                serde_json::json!({
                    "verdict": "BLOCKED",
                    "warning": "the guardrail intervened (action GUARDRAIL_INTERVENED): the \
                                answer must not go out, whatever its findings say",
                })
            } else {
                serde_json::to_value(aggregate_verdict(&findings))?
            };
            let out = serde_json::json!({
                "verdict": verdict,
                "findings": prioritize(&findings),
            });
            println!("{}", serde_json::to_string_pretty(&out)?);
        }
        Command::Decision { file } => {
            let decision = parse_decision(&read_input(&file)?);
            println!("{}", serde_json::to_string_pretty(&decision)?);
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn main() -> ExitCode {
    match run(Cli::parse()) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("proofgate: {}", printable(&format!("{e:#}")));
            ExitCode::from(2)
        }
    }
}

//! The bodies of `proofgate policy formalize | test | gen-tests | diff` (main.rs only parses
//! and dispatches). Command-line glue, so errors are `anyhow` with the file names in them.

use super::formalize::{formalize, FormalizeOptions, SpanReport};
use super::test_runner::{run_suite, Translators};
use crate::config::{Config, LlmEndpoint};
use crate::llm::LlmClient;
use anyhow::{anyhow, bail, Context, Result};
use proofgate_core::findings::Finding;
use proofgate_core::policy::aws::{from_aws, to_aws, AwsExport, RuleIdMapping};
use proofgate_core::policy::diff::{ChangeKind, ItemChange};
use proofgate_core::policy::{PolicyDefinition, PolicyModel, PolicyTestSuite};
use proofgate_reasoner::{
    diff_policies, generate_tests, lint, CaseStatus, CheckOptions, GenerateOptions, Severity,
    TestReport,
};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// Where the LLMs are: a proofgate config file, or one OpenAI-compatible endpoint.
#[derive(clap::Args, Debug, Clone)]
pub struct LlmArgs {
    /// proofgate.toml: `formalize` uses [rewriter] (else [upstream]), `test` the translators.
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// An OpenAI-compatible base URL instead of --config, e.g. http://localhost:11434/v1.
    #[arg(long)]
    pub llm_url: Option<String>,
    /// The model to ask at --llm-url.
    #[arg(long)]
    pub llm_model: Option<String>,
    /// Environment variable holding the API key for --llm-url.
    #[arg(long, default_value = "PROOFGATE_LLM_API_KEY")]
    pub llm_api_key_env: String,
    /// Number of redundant translators for natural-language tests (default: the config's, or 3).
    #[arg(long)]
    pub translators: Option<usize>,
    /// How often a reply with syntax or type errors is sent back to the LLM.
    #[arg(long, default_value_t = 2)]
    pub repair_attempts: usize,
}

impl LlmArgs {
    /// The config file without the server's cross-field checks (a policy is not needed here).
    fn config(&self) -> Result<Option<Config>> {
        let Some(path) = &self.config else {
            return Ok(None);
        };
        let config =
            Config::load_unchecked(Some(path)).map_err(|e| anyhow!("{}: {e}", path.display()))?;
        Ok(Some(config))
    }

    fn url_endpoint(&self) -> Option<LlmEndpoint> {
        let url = self.llm_url.clone()?;
        Some(LlmEndpoint {
            base_url: url,
            model: self.llm_model.clone(),
            api_key: std::env::var(&self.llm_api_key_env)
                .ok()
                .filter(|k| !k.is_empty()),
            ..LlmEndpoint::default()
        })
    }

    /// The LLM that formalizes documents.
    pub fn formalizer(&self) -> Result<Option<LlmEndpoint>> {
        if let Some(e) = self.url_endpoint() {
            return Ok(Some(e));
        }
        Ok(self.config()?.map(|c| c.rewriter().clone()))
    }

    /// The translators for natural-language tests (empty when none is configured).
    pub fn translator_endpoints(&self) -> Result<Vec<LlmEndpoint>> {
        if let Some(e) = self.url_endpoint() {
            return Ok(vec![e; self.translators.unwrap_or(3).max(1)]);
        }
        Ok(match self.config()? {
            None => Vec::new(),
            Some(mut c) => {
                if let Some(k) = self.translators {
                    c.validator.translator_count = k.max(1);
                }
                c.translators()
            }
        })
    }
}

/// `proofgate policy formalize`.
#[derive(clap::Args, Debug)]
pub struct FormalizeArgs {
    /// The policy document (markdown or plain text).
    pub doc: PathBuf,
    /// Where to write the policy definition JSON (default: standard output).
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Also write how each span was formalized and merged, as JSON.
    #[arg(long)]
    pub report: Option<PathBuf>,
    #[command(flatten)]
    pub llm: LlmArgs,
}

/// `proofgate policy test`.
#[derive(clap::Args, Debug)]
pub struct TestArgs {
    /// The policy JSON file.
    pub policy: PathBuf,
    /// The test cases: {"tests": [...]} (see `policy gen-tests` for the format).
    pub tests: PathBuf,
    /// Print the report as JSON.
    #[arg(long)]
    pub json: bool,
    /// Share of translators that must agree on a pair (0 < X <= 1).
    #[arg(long, default_value_t = 1.0)]
    pub threshold: f64,
    /// Solver time limit per call, in milliseconds.
    #[arg(long, default_value_t = 5000)]
    pub timeout_ms: u32,
    #[command(flatten)]
    pub llm: LlmArgs,
}

/// `proofgate policy gen-tests`.
#[derive(clap::Args, Debug)]
pub struct GenTestsArgs {
    /// The policy JSON file.
    pub policy: PathBuf,
    /// Where to write the test cases (default: standard output).
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Solver time limit per call, in milliseconds.
    #[arg(long, default_value_t = 5000)]
    pub timeout_ms: u32,
}

/// `proofgate policy export`.
#[derive(clap::Args, Debug)]
pub struct ExportArgs {
    /// The policy JSON file.
    pub policy: PathBuf,
    /// Write Amazon Bedrock's import format: rule ids renamed to AWS's 12-character form, built-in
    /// type names in upper case, required descriptions present (the only format so far).
    #[arg(long, required = true)]
    pub aws: bool,
    /// Where to write the definition (default: standard output).
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Where to write the renamed rule ids, for `policy import --mapping` (default: next to
    /// --out as FILE.rule-ids.json; on standard error when writing to standard output).
    #[arg(long)]
    pub mapping: Option<PathBuf>,
}

/// `proofgate policy import`.
#[derive(clap::Args, Debug)]
pub struct ImportArgs {
    /// A definition from AWS or `export --aws` (bare, or any AWS response around one).
    pub file: PathBuf,
    /// The rule-id mapping `export --aws` wrote: restores the original ids.
    #[arg(long)]
    pub mapping: Option<PathBuf>,
    /// Where to write the definition (default: standard output).
    #[arg(long)]
    pub out: Option<PathBuf>,
}

/// `proofgate policy pull`.
#[derive(clap::Args, Debug)]
pub struct PullArgs {
    /// The policy ARN (arn:aws:bedrock:REGION:ACCOUNT:automated-reasoning-policy/ID).
    pub arn: String,
    /// A numbered version (default: the working draft; an empty draft falls back to the latest
    /// completed build workflow).
    #[arg(long)]
    pub version: Option<String>,
    /// Take the definition asset of a build workflow: its id, or without a value the latest
    /// completed one.
    #[arg(long, num_args = 0..=1, default_missing_value = "latest", conflicts_with = "version")]
    pub build_workflow: Option<String>,
    /// Where to write the definition.
    #[arg(long)]
    pub out: PathBuf,
    /// proofgate.toml: region, endpoint_url and max_attempts from [validator.bedrock].
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// AWS region (overrides the config).
    #[arg(long)]
    pub region: Option<String>,
    /// Endpoint override, e.g. a VPC endpoint (overrides the config).
    #[arg(long)]
    pub endpoint_url: Option<String>,
}

/// `proofgate policy diff`.
#[derive(clap::Args, Debug)]
pub struct DiffArgs {
    /// The old policy JSON file.
    pub old: PathBuf,
    /// The new policy JSON file.
    pub new: PathBuf,
    /// Print the diff as JSON.
    #[arg(long)]
    pub json: bool,
    /// Solver time limit per call, in milliseconds.
    #[arg(long, default_value_t = 5000)]
    pub timeout_ms: u32,
}

fn read(path: &Path) -> Result<String> {
    std::fs::read_to_string(path)
        .with_context(|| format!("{}: could not read the file", path.display()))
}

fn load_model(path: &Path) -> Result<PolicyModel> {
    let def = PolicyDefinition::from_json(&read(path)?)
        .map_err(|e| anyhow!("{}: {e}", path.display()))?;
    PolicyModel::from_definition(def, None).map_err(|e| {
        anyhow!(
            "{}: invalid policy: {e} (run `proofgate policy lint` for details)",
            path.display()
        )
    })
}

fn write_or_print(out: Option<&Path>, text: &str) -> Result<()> {
    match out {
        Some(path) => std::fs::write(path, format!("{text}\n"))
            .with_context(|| format!("{}: could not write the file", path.display())),
        None => {
            println!("{text}");
            Ok(())
        }
    }
}

fn runtime() -> Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .context("could not start the async runtime")
}

/// Runs `policy formalize`.
pub fn formalize_cmd(args: FormalizeArgs) -> Result<ExitCode> {
    let doc = read(&args.doc)?;
    let endpoint = args.llm.formalizer()?.ok_or_else(|| {
        anyhow!("formalize needs an LLM: pass --config proofgate.toml or --llm-url URL --llm-model NAME")
    })?;
    let options = FormalizeOptions {
        repair_attempts: args.llm.repair_attempts,
        ..FormalizeOptions::default()
    };
    let progress = |r: &SpanReport| {
        let repairs = match r.attempts {
            0 | 1 => String::new(),
            n => format!(", {} repair{}", n - 1, if n == 2 { "" } else { "s" }),
        };
        eprintln!(
            "[{}/{}] {}: {} types, {} variables, {} rules{repairs}",
            r.span.index,
            r.of,
            r.span.label(),
            r.types,
            r.variables,
            r.rules
        );
        for e in &r.unresolved {
            eprintln!("    dropped after {} attempts: {e}", r.attempts);
        }
    };
    let formalized = runtime()?.block_on(async {
        let client = LlmClient::new(endpoint).await?;
        formalize(&client, &doc, &options, &progress).await
    })?;
    let m = &formalized.merge;
    for (span, from, to) in &m.unified {
        eprintln!("merge: `{from}` (span {span}) unified with `{to}`");
    }
    for (span, from, to) in &m.renamed {
        eprintln!(
            "merge: `{from}` (span {span}) renamed to `{to}`: the name was taken by something else"
        );
    }
    for (span, name, added) in &m.extended {
        eprintln!(
            "merge: type `{name}` declared again (span {span}) with more values: {} added",
            added.join(", ")
        );
    }
    for id in &m.duplicates_dropped {
        eprintln!("merge: rule `{id}` dropped: it repeats an earlier rule");
    }
    // Rule ids in AWS's form, so the policy imports into Amazon Bedrock as written.
    let mut def = &formalized.definition;
    let exported = to_aws(def).ok();
    if let Some(AwsExport {
        definition,
        mapping,
        notes,
    }) = &exported
    {
        for c in &mapping.rule_ids {
            eprintln!("aws: rule `{}` is `{}`", c.from, c.to);
        }
        for n in notes {
            eprintln!("aws: {n}");
        }
        def = definition;
    }
    eprintln!(
        "policy: {} types, {} variables, {} rules",
        def.types.len(),
        def.variables.len(),
        def.rules.len()
    );
    write_or_print(args.out.as_deref(), &def.to_json_pretty())?;
    if let Some(path) = &args.report {
        write_or_print(Some(path), &serde_json::to_string_pretty(&formalized)?)?;
    }
    let report = lint(def.clone(), &CheckOptions::default());
    if report.issues.is_empty() {
        eprintln!("lint: no issues");
    }
    for i in &report.issues {
        eprintln!("lint: {}: {}", severity(i.severity), i.message);
    }
    // Written either way (to fix by hand), but not reported as a policy ready to serve: a
    // script's `&&` went on to serve one whose rules did not type-check.
    if report.issues.iter().any(|i| i.severity == Severity::Error) {
        eprintln!("the policy was written, but lint found errors: fix them before serving it");
        return Ok(ExitCode::from(1));
    }
    Ok(ExitCode::SUCCESS)
}

fn severity(s: Severity) -> &'static str {
    match s {
        Severity::Error => "error",
        Severity::Warning => "warning",
        Severity::Info => "info",
    }
}

/// Runs `policy test`: a table, exit 1 when a case fails or cannot run.
pub fn test_cmd(args: TestArgs) -> Result<ExitCode> {
    if !(args.threshold > 0.0 && args.threshold <= 1.0) {
        bail!(
            "--threshold must be greater than 0 and at most 1, got {}",
            args.threshold
        );
    }
    let model = load_model(&args.policy)?;
    let suite = PolicyTestSuite::from_json(&read(&args.tests)?)
        .map_err(|e| anyhow!("{}: {e}", args.tests.display()))?;
    let endpoints = args.llm.translator_endpoints()?;
    let options = CheckOptions {
        timeout_ms: args.timeout_ms,
        confidence_threshold: args.threshold,
        ..CheckOptions::default()
    };
    let repair_attempts = args.llm.repair_attempts;
    let report = runtime()?.block_on(async {
        let translators = if endpoints.is_empty() {
            None
        } else {
            let mut clients = Vec::new();
            for e in endpoints {
                clients.push(LlmClient::new(e).await?);
            }
            Some(Translators {
                clients,
                repair_attempts,
            })
        };
        run_suite(&model, &suite, translators.as_ref(), &options).await
    })?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print!("{}", test_table(&report));
    }
    Ok(if report.all_passed() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

/// The report as a table, each failure followed by its findings.
pub fn test_table(report: &TestReport) -> String {
    let width = report
        .results
        .iter()
        .map(|r| r.id.len())
        .max()
        .unwrap_or(2)
        .max(2);
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{:<6} {:<width$} {:<22} {:<22} RULE",
        "RESULT", "ID", "EXPECTED", "ACTUAL"
    );
    for r in &report.results {
        let status = match r.status {
            CaseStatus::Passed => "pass",
            CaseStatus::Failed => "FAIL",
            CaseStatus::Error => "ERROR",
        };
        let actual = r.actual.map(|v| v.as_str()).unwrap_or("-");
        let _ = writeln!(
            out,
            "{status:<6} {:<width$} {:<22} {actual:<22} {}",
            r.id,
            r.expected.as_str(),
            r.rule.as_deref().unwrap_or("")
        );
        if let Some(e) = &r.error {
            let _ = writeln!(out, "       error: {e}");
        }
        if !r.missing_rules.is_empty() {
            let _ = writeln!(
                out,
                "       expected rules not cited: {}",
                r.missing_rules.join(", ")
            );
        }
        for f in &r.findings {
            let _ = writeln!(out, "       {}", finding_line(f));
        }
    }
    let _ = writeln!(
        out,
        "\n{} passed, {} failed, {} errors ({} tests)",
        report.passed,
        report.failed,
        report.errors,
        report.results.len()
    );
    out
}

/// One line per finding: kind, premises => claims, rules.
fn finding_line(f: &Finding) -> String {
    let mut line = format!("finding {}", f.kind());
    if let Some(t) = f.translation() {
        let join = |s: &[proofgate_core::findings::Statement]| {
            s.iter()
                .map(|x| x.logic.as_deref().unwrap_or(""))
                .collect::<Vec<_>>()
                .join(" ")
        };
        let _ = write!(line, ": {} => {}", join(t.premises()), join(t.claims()));
    }
    let rules = match f {
        Finding::Valid(v) => v.supporting_rules.as_ref().map(|r| ("supporting", r)),
        Finding::Invalid(c) | Finding::Impossible(c) => {
            c.contradicting_rules.as_ref().map(|r| ("contradicting", r))
        }
        _ => None,
    };
    if let Some((what, rules)) = rules {
        let ids: Vec<&str> = rules
            .iter()
            .filter_map(|r| r.identifier.as_deref())
            .collect();
        let _ = write!(line, "; {what} rules: {}", ids.join(", "));
    }
    line
}

/// Runs `policy gen-tests`.
pub fn gen_tests_cmd(args: GenTestsArgs) -> Result<ExitCode> {
    let model = load_model(&args.policy)?;
    let options = GenerateOptions {
        check: CheckOptions {
            timeout_ms: args.timeout_ms,
            ..CheckOptions::default()
        },
        ..GenerateOptions::default()
    };
    let generated =
        generate_tests(&model, &options).map_err(|e| anyhow!("{}: {e}", args.policy.display()))?;
    for n in &generated.notes {
        eprintln!("note: {}", n.message);
    }
    let tests = &generated.suite.tests;
    let decisive = tests.iter().filter(|t| t.decisive == Some(true)).count();
    eprintln!(
        "generated {} tests for {} rules ({decisive} where the rule is decisive, {} where it is not)",
        tests.len(),
        model.rules().len(),
        tests.len() - decisive
    );
    write_or_print(args.out.as_deref(), &generated.suite.to_json_pretty())?;
    Ok(ExitCode::SUCCESS)
}

/// Runs `policy diff`: exit 0 when the versions are the same, 1 when they differ.
pub fn diff_cmd(args: DiffArgs) -> Result<ExitCode> {
    let old = load_model(&args.old)?;
    let new = load_model(&args.new)?;
    let options = GenerateOptions {
        check: CheckOptions {
            timeout_ms: args.timeout_ms,
            ..CheckOptions::default()
        },
        ..GenerateOptions::default()
    };
    let diff = diff_policies(&old, &new, &options);
    if args.json {
        println!("{}", serde_json::to_string_pretty(&diff)?);
    } else {
        let mut out = String::new();
        for (title, items) in [
            ("Rules", &diff.definition.rules),
            ("Variables", &diff.definition.variables),
            ("Types", &diff.definition.types),
        ] {
            if !items.is_empty() {
                let _ = writeln!(out, "{title}:");
                for i in items {
                    out.push_str(&item_lines(i));
                }
            }
        }
        for n in &diff.notes {
            let _ = writeln!(out, "note: {}", n.message);
        }
        let _ = writeln!(
            out,
            "Generated tests whose finding changed: {} of {}",
            diff.changed_cases.len(),
            diff.cases_compared
        );
        for c in &diff.changed_cases {
            let _ = writeln!(
                out,
                "  {} (from {}): {} -> {}",
                c.case.id,
                c.from,
                c.old.label(),
                c.new.label()
            );
            if let Some(d) = &c.case.description {
                let _ = writeln!(out, "      {d}");
            }
        }
        if diff.is_empty() {
            let _ = writeln!(out, "no differences");
        }
        print!("{out}");
    }
    Ok(if diff.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

fn item_lines(i: &ItemChange) -> String {
    match i.kind {
        ChangeKind::Added => format!("  + {}: {}\n", i.name, i.new.as_deref().unwrap_or("")),
        ChangeKind::Removed => format!("  - {}: {}\n", i.name, i.old.as_deref().unwrap_or("")),
        ChangeKind::Changed => format!(
            "  ~ {} ({})\n      old: {}\n      new: {}\n",
            i.name,
            i.fields.join(", "),
            i.old.as_deref().unwrap_or(""),
            i.new.as_deref().unwrap_or("")
        ),
    }
}

fn write_file(path: &Path, text: &str) -> Result<()> {
    std::fs::write(path, format!("{text}\n"))
        .with_context(|| format!("{}: could not write the file", path.display()))
}

/// Runs `policy export --aws`: fails, naming each problem, when only an author can fix it.
pub fn export_cmd(args: ExportArgs) -> Result<ExitCode> {
    let def = PolicyDefinition::from_json(&read(&args.policy)?)
        .map_err(|e| anyhow!("{}: {e}", args.policy.display()))?;
    PolicyModel::from_definition(def.clone(), None).map_err(|e| {
        anyhow!(
            "{}: invalid policy: {e} (run `proofgate policy lint` for details)",
            args.policy.display()
        )
    })?;
    let exported = to_aws(&def).map_err(|issues| {
        let list: Vec<String> = issues
            .iter()
            .map(|i| format!("{}: {}", i.path, i.message))
            .collect();
        anyhow!(
            "{}: AWS would reject this policy and it cannot be fixed automatically:\n  {}",
            args.policy.display(),
            list.join("\n  ")
        )
    })?;
    for n in &exported.notes {
        eprintln!("note: {n}");
    }
    write_or_print(args.out.as_deref(), &exported.definition.to_json_pretty())?;
    let mapping_json = serde_json::to_string_pretty(&exported.mapping)?;
    let mapping_path = args.mapping.clone().or_else(|| {
        args.out
            .as_ref()
            .map(|o| PathBuf::from(format!("{}.rule-ids.json", o.display())))
    });
    match mapping_path {
        Some(path) => {
            write_file(&path, &mapping_json)?;
            eprintln!(
                "{} rule ids renamed; mapping in {}",
                exported.mapping.rule_ids.len(),
                path.display()
            );
        }
        None => {
            for c in &exported.mapping.rule_ids {
                eprintln!("renamed rule `{}` to `{}`", c.from, c.to);
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// Runs `policy import`: the definition must build (parse and type-check) to be written.
pub fn import_cmd(args: ImportArgs) -> Result<ExitCode> {
    let def = PolicyDefinition::from_json(&read(&args.file)?)
        .map_err(|e| anyhow!("{}: {e}", args.file.display()))?;
    let mapping: Option<RuleIdMapping> = match &args.mapping {
        Some(path) => Some(serde_json::from_str(&read(path)?).map_err(|e| {
            anyhow!(
                "{}: not a rule-id mapping ({{\"ruleIds\": [{{\"from\", \"to\"}}]}}): {e}",
                path.display()
            )
        })?),
        None => None,
    };
    let def = from_aws(&def, mapping.as_ref()).map_err(|e| {
        anyhow!(
            "{}: {e}",
            args.mapping.as_deref().unwrap_or(&args.file).display()
        )
    })?;
    let model = PolicyModel::from_definition(def.clone(), None)
        .map_err(|e| anyhow!("{}: invalid policy: {e}", args.file.display()))?;
    eprintln!(
        "imported {} types, {} variables, {} rules",
        model.schema().types().count(),
        model.schema().variables().count(),
        model.rules().len()
    );
    write_or_print(args.out.as_deref(), &def.to_json_pretty())?;
    Ok(ExitCode::SUCCESS)
}

/// Runs `policy pull`.
#[cfg(feature = "bedrock")]
pub fn pull_cmd(args: PullArgs) -> Result<ExitCode> {
    use crate::bedrock_policy::{ControlPlaneConfig, PolicyClient, PolicySource};
    let mut config = ControlPlaneConfig {
        max_attempts: 4,
        ..ControlPlaneConfig::default()
    };
    if let Some(path) = &args.config {
        let c =
            Config::load_unchecked(Some(path)).map_err(|e| anyhow!("{}: {e}", path.display()))?;
        if let Some(b) = c.validator.bedrock {
            config.region = b.region;
            config.endpoint_url = b.endpoint_url;
            config.max_attempts = b.max_attempts;
        }
    }
    config.region = args.region.clone().or(config.region);
    config.endpoint_url = args.endpoint_url.clone().or(config.endpoint_url);
    let source = match &args.build_workflow {
        Some(id) if id == "latest" => PolicySource::BuildWorkflow(None),
        Some(id) => PolicySource::BuildWorkflow(Some(id.clone())),
        None => PolicySource::Version(args.version.clone()),
    };
    let pulled = runtime()?.block_on(async {
        PolicyClient::new(&config)
            .await
            .pull(&args.arn, &source)
            .await
    })?;
    let def = &pulled.definition;
    eprintln!(
        "pulled {} types, {} variables, {} rules ({})",
        def.types.len(),
        def.variables.len(),
        def.rules.len(),
        pulled.origin
    );
    if let Err(e) = PolicyModel::from_definition(def.clone(), None) {
        eprintln!("warning: the policy does not build here: {e} (run `proofgate policy lint`)");
    }
    write_file(&args.out, &def.to_json_pretty())?;
    Ok(ExitCode::SUCCESS)
}

/// Runs `policy pull` in a build without the AWS SDK.
#[cfg(not(feature = "bedrock"))]
pub fn pull_cmd(_args: PullArgs) -> Result<ExitCode> {
    bail!("this proofgate was built without the `bedrock` feature, which `policy pull` needs")
}

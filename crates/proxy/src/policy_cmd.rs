//! `proofgate check`, `proofgate policy show` and `proofgate policy lint`: the local reasoner
//! from the command line.

use anyhow::{anyhow, Context, Result};
use proofgate_core::policy::{PolicyDefinition, PolicyModel};
use proofgate_reasoner::{lint, parse_translations, CheckOptions, Reasoner, Severity};
use std::fmt::Write as _;
use std::path::Path;

/// Reads a file, naming it in the error.
fn read(path: &Path) -> Result<String> {
    std::fs::read_to_string(path)
        .with_context(|| format!("{}: could not read the file", path.display()))
}

fn load_definition(path: &Path) -> Result<PolicyDefinition> {
    PolicyDefinition::from_json(&read(path)?).map_err(|e| anyhow!("{}: {e}", path.display()))
}

fn load_model(path: &Path, arn: Option<String>) -> Result<PolicyModel> {
    PolicyModel::from_definition(load_definition(path)?, arn)
        .map_err(|e| anyhow!("{}: invalid policy: {e}", path.display()))
}

/// Options of `proofgate check`.
pub struct CheckArgs<'a> {
    pub policy: &'a Path,
    pub translations: &'a Path,
    pub threshold: f64,
    pub timeout_ms: u32,
    pub policy_arn: Option<String>,
}

/// Checks translations against a policy and returns `{"findings": [...]}`.
pub fn check(args: CheckArgs<'_>) -> Result<serde_json::Value> {
    if !(args.threshold > 0.0 && args.threshold <= 1.0) {
        return Err(anyhow!(
            "--threshold must be greater than 0 and at most 1, got {}",
            args.threshold
        ));
    }
    let model = load_model(args.policy, args.policy_arn)?;
    let translations = parse_translations(&read(args.translations)?)
        .map_err(|e| anyhow!("{}: {e}", args.translations.display()))?;
    let options = CheckOptions {
        timeout_ms: args.timeout_ms,
        confidence_threshold: args.threshold,
        ..CheckOptions::default()
    };
    let reasoner = Reasoner::new(&model, options)?;
    let findings = reasoner
        .validate(&translations)
        .map_err(|e| anyhow!("{}: {e}", args.translations.display()))?;
    Ok(serde_json::json!({ "findings": findings }))
}

/// The schema and every rule in SMT-LIB and structured English.
pub fn show(path: &Path) -> Result<String> {
    let model = load_model(path, None)?;
    let schema = model.schema();
    let mut out = String::new();
    let _ = writeln!(out, "Policy {}  ({})", path.display(), model.version_arn());
    let _ = writeln!(out, "\nTypes:");
    for t in schema.types() {
        let _ = writeln!(out, "  {}: {}", t.name, t.values.join(" | "));
    }
    let _ = writeln!(out, "\nVariables:");
    for v in schema.variables() {
        let _ = writeln!(out, "  {} : {}  -- {}", v.name, v.sort, v.description);
    }
    let _ = writeln!(out, "\nRules:");
    for r in model.rules() {
        let _ = writeln!(out, "  [{}]", r.id);
        let _ = writeln!(out, "    SMT-LIB: {}", r.term);
        let _ = writeln!(out, "    English: {}", model.english(&r.expr));
        if let Some(alt) = &r.alternate_expression {
            let _ = writeln!(out, "    Source:  {alt}");
        }
    }
    Ok(out)
}

/// The lint report as text or JSON, and whether it found errors or warnings.
pub fn lint_policy(path: &Path, json: bool, timeout_ms: u32) -> Result<(String, bool)> {
    let definition = load_definition(path)?;
    let options = CheckOptions {
        timeout_ms,
        ..CheckOptions::default()
    };
    let report = lint(definition, &options);
    let problems = report.has_problems();
    if json {
        return Ok((serde_json::to_string_pretty(&report)?, problems));
    }
    let mut out = String::new();
    if report.issues.is_empty() {
        let _ = writeln!(out, "{}: no issues", path.display());
    }
    for i in &report.issues {
        let level = match i.severity {
            Severity::Error => "error",
            Severity::Warning => "warning",
            Severity::Info => "info",
        };
        let _ = writeln!(out, "{}: {level}: {}", path.display(), i.message);
    }
    Ok((out, problems))
}

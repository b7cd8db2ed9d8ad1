//! The `proofgate` command line.

use anyhow::{Context, Result};
use clap::{Parser, Subcommand};
use proofgate_core::{
    aggregate_verdict, parse_decision, prioritize, ApplyGuardrailResponse, Finding,
};
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// Verified chatbot answers: policy checks with automated reasoning.
#[derive(Parser)]
#[command(name = "proofgate", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
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
fn load_findings(path: &Path, text: &str) -> Result<Vec<Finding>> {
    let value: serde_json::Value = serde_json::from_str(text)
        .with_context(|| format!("{}: not valid JSON", path.display()))?;
    if value.is_array() {
        serde_json::from_value(value)
            .with_context(|| format!("{}: not a list of findings", path.display()))
    } else {
        let response: ApplyGuardrailResponse = serde_json::from_value(value)
            .with_context(|| format!("{}: not an ApplyGuardrail response", path.display()))?;
        Ok(response.findings())
    }
}

fn run(cli: Cli) -> Result<()> {
    match cli.command {
        Command::Findings { file } => {
            let findings = load_findings(&file, &read_input(&file)?)?;
            let verdict = aggregate_verdict(&findings);
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
    Ok(())
}

fn main() -> ExitCode {
    match run(Cli::parse()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("proofgate: {e:#}");
            ExitCode::from(2)
        }
    }
}

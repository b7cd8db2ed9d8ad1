//! Runs the built `proofgate` binary for CLI tests.
#![allow(dead_code)]

use std::process::{Command, Output};

/// `proofgate ARGS...`, waited for.
pub fn proofgate(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_proofgate"))
        .args(args)
        .output()
        .expect("the proofgate binary runs")
}

/// Its standard output, as text.
pub fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// Its standard error, as text.
pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// The value a scenario gives `var` (from its `(= var value)` statement).
pub fn scenario_value(scenario: &serde_json::Value, var: &str) -> Option<String> {
    let prefix = format!("(= {var} ");
    scenario["statements"].as_array()?.iter().find_map(|s| {
        s["logic"]
            .as_str()?
            .strip_prefix(&prefix)?
            .strip_suffix(')')
            .map(String::from)
    })
}

//! Found by a soundness review of the reasoner, each kept fixed.
//!
//! - Z3 names a fresh constant `prefix!N`: a policy Boolean named like one of the reasoner's
//!   own switches was that switch, assumed true in every check, so a claim about it came out
//!   VALID (`rule!0`, with income 5, "proved" by a rule about income).
//! - Z3 gives `(/ t 0)` one value wherever it occurs, so rules dividing by zero constrain each
//!   other without sharing a variable: rule slicing dropped the other rule, and premises the
//!   whole policy refutes came out VALID instead of IMPOSSIBLE.

use proofgate_reasoner::{parse_translations, CheckOptions, Reasoner};
use serde_json::json;

mod common;

fn kinds(
    model: &proofgate_core::policy::PolicyModel,
    slice: bool,
    premises: &[&str],
    claims: &[&str],
) -> String {
    let options = CheckOptions {
        slice_rules: slice,
        ..CheckOptions::default()
    };
    let t = json!({"translations": [[{"premises": premises, "claims": claims}]]}).to_string();
    Reasoner::new(model, options)
        .unwrap()
        .validate(&parse_translations(&t).unwrap())
        .unwrap()
        .iter()
        .map(|f| f.kind().as_str())
        .collect::<Vec<_>>()
        .join(",")
}

#[test]
fn a_variable_named_like_a_solver_switch_is_a_variable() {
    // Booleans named as Z3 names the reasoner's fresh constants (rules' and statements'
    // switches), asked about on a fresh thread, as each worker's reasoner is made.
    std::thread::spawn(|| {
        let mut vars: Vec<(String, &str)> = (0..4).map(|i| (format!("rule!{i}"), "BOOL")).collect();
        vars.extend((0..8).map(|i| (format!("lit!{i}"), "BOOL")));
        vars.push(("income".into(), "INT"));
        let model = common::generated_policy(vars, &["(>= income 0)".to_string()]);
        for claim in ["rule!0", "lit!0", "lit!3", "(not rule!0)"] {
            let found = kinds(&model, true, &["(= income 5)"], &[claim]);
            assert!(
                !found.contains("VALID") || found.contains("INVALID"),
                "{claim}: {found}"
            );
            assert_eq!(
                found,
                kinds(&model, false, &["(= income 5)"], &[claim]),
                "{claim}"
            );
        }
        // Nor does a premise about one make the policy impossible.
        assert_ne!(
            kinds(
                &model,
                true,
                &["(= income 5)", "(not rule!0)"],
                &["(>= income 0)"]
            ),
            "IMPOSSIBLE"
        );
    })
    .join()
    .unwrap();
}

#[test]
fn rules_dividing_by_zero_are_sliced_together() {
    let vars = [("a", "BOOL"), ("r", "BOOL"), ("b", "BOOL"), ("x", "REAL")]
        .map(|(n, t)| (n.to_string(), t));
    let model = common::generated_policy(
        vars,
        &[
            "(=> a (and r (> (/ 1.0 0.0) 0.0)))".to_string(),
            "(and b (< (/ 1.0 0.0) 0.0))".to_string(),
        ],
    );
    // The whole policy and `a` cannot both hold: IMPOSSIBLE, sliced or not.
    assert_eq!(kinds(&model, false, &["a"], &["r"]), "IMPOSSIBLE");
    assert_eq!(kinds(&model, true, &["a"], &["r"]), "IMPOSSIBLE");
    // A statement dividing by zero meets the rules that do, whatever its variables.
    assert_eq!(
        kinds(&model, true, &["(> (/ x 0.0) 0.0)"], &["b"]),
        kinds(&model, false, &["(> (/ x 0.0) 0.0)"], &["b"])
    );
}

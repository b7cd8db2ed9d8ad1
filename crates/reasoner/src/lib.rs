//! proofgate-reasoner: checks translations of question/answer pairs against a policy model
//! with Z3 and returns findings in the ApplyGuardrail shape (see `proofgate_core::findings`).
//!
//! Native only: it links libz3.
//!
//! ```no_run
//! use proofgate_core::policy::{PolicyDefinition, PolicyModel};
//! use proofgate_reasoner::{parse_translations, CheckOptions, Reasoner};
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let def = PolicyDefinition::from_json(&std::fs::read_to_string("policy.json")?)?;
//! let model = PolicyModel::from_definition(def, None)?;
//! let reasoner = Reasoner::new(&model, CheckOptions::default())?;
//! let translations = parse_translations(&std::fs::read_to_string("t.json")?)?;
//! let findings = reasoner.validate(&translations)?;
//! # Ok(()) }
//! ```

#![forbid(unsafe_code)]
#![warn(missing_docs)]

mod cache;
mod check;
mod encode;
mod eval;
mod gen_tests;
mod lint;
mod options;
mod policy_diff;
mod scenario;
mod slice;
mod testing;
mod triviality;
mod validate;
mod watchdog;
mod witness;

pub use cache::{CacheStats, FindingsCache, FindingsKey};
pub use check::{CheckedStatementInput, LoadError, Reasoner, Untranslated};
pub use encode::EncodeError;
pub use gen_tests::{
    generate_tests, CancelFlag, GenerateError, GenerateOptions, GeneratedTests, GenerationNote,
};
pub use lint::{lint, lint_until, LintIssue, LintKind, LintReport, Severity, TooComplex};
pub use options::CheckOptions;
pub use policy_diff::{diff_policies, ChangedCase, PolicyDiff, VersionOutcome};
pub use proofgate_core::findings;
pub use proofgate_core::translation::{
    parse_translations, InputError, PairInput, TranslatorOutput,
};
pub use testing::{case_result, check_case, CaseError, CaseResult, CaseStatus, TestReport};
pub use triviality::Triviality;
pub use validate::ValidateError;
pub use watchdog::{unless_unwanted, with_watchdog};

/// The Z3 this process runs, as Z3 reports it ("5.4.0.0"): the library found at run time,
/// which is what decides every finding.
pub fn z3_version() -> String {
    z3::full_version().to_string()
}

/// The oldest Z3 the bindings are numbered for: z3-sys's enums (declaration kinds, sorts,
/// parameter kinds) are Z3 5.3's. A build that finds an older libz3 (Debian's 4.8.12, through
/// pkg-config, when cargo runs without the bootstrap's environment) only warns, and then reads
/// Z3's answers by the wrong numbers: in the test suite a VALID answer came back SATISFIABLE.
const OLDEST_Z3: [u32; 3] = [5, 3, 0];

/// Whether findings may be computed with the Z3 whose version string is `version` ("5.4.0.0").
pub fn supported_z3(version: &str) -> Result<(), String> {
    let parts: Option<Vec<u32>> = version
        .split('.')
        .take(3)
        .map(|p| p.trim().parse().ok())
        .collect();
    match parts {
        Some(v) if v.len() == 3 && v.as_slice() >= OLDEST_Z3.as_slice() => Ok(()),
        _ => Err(format!(
            "the Z3 this process loaded is {version}, but proofgate's Z3 bindings need {}.{}.{} \
             or later: its answers would be read wrongly. Build and run with the environment \
             scripts/bootstrap.sh sets (it pins the z3-solver wheel's libz3)",
            OLDEST_Z3[0], OLDEST_Z3[1], OLDEST_Z3[2]
        )),
    }
}

/// [`supported_z3`] for the Z3 this process runs.
pub fn check_linked_z3() -> Result<(), String> {
    supported_z3(&z3_version())
}

#[cfg(test)]
mod tests {
    #[test]
    fn only_a_z3_the_bindings_are_numbered_for_is_used() {
        assert!(super::check_linked_z3().is_ok());
        for ok in ["5.3.0.0", "5.4.0.0", "5.10.1", "6.0.0.0"] {
            assert!(super::supported_z3(ok).is_ok(), "{ok}");
        }
        for old in ["4.8.12.0", "4.13.3.0", "5.2.9.0", "5", "z3", ""] {
            let e = super::supported_z3(old).unwrap_err();
            assert!(e.contains("5.3.0"), "{old}: {e}");
        }
    }

    /// The build links the Z3 that `scripts/bootstrap.sh` pins (the z3-solver wheel), not
    /// whichever libz3 a system package put on the linker's path: Debian's libz3-dev 4.8.12
    /// was linked, and run, in its place while the wheel sat unused.
    #[test]
    fn the_linked_z3_is_the_pinned_one() {
        let bootstrap = include_str!("../../../scripts/bootstrap.sh");
        let pinned = bootstrap
            .lines()
            .find_map(|l| l.trim().strip_prefix("Z3_VERSION="))
            .expect("bootstrap.sh pins Z3_VERSION");
        assert_eq!(super::z3_version(), pinned);
    }
}

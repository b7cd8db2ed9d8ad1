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
pub use lint::{lint, LintIssue, LintKind, LintReport, Severity, TooComplex};
pub use options::CheckOptions;
pub use policy_diff::{diff_policies, ChangedCase, PolicyDiff, VersionOutcome};
pub use proofgate_core::findings;
pub use proofgate_core::translation::{
    parse_translations, InputError, PairInput, TranslatorOutput,
};
pub use testing::{case_result, check_case, CaseError, CaseResult, CaseStatus, TestReport};
pub use triviality::Triviality;
pub use validate::ValidateError;
pub use watchdog::with_watchdog;

/// The Z3 this process runs, as Z3 reports it ("5.4.0.0"): the library found at run time,
/// which is what decides every finding.
pub fn z3_version() -> String {
    z3::full_version().to_string()
}

#[cfg(test)]
mod tests {
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

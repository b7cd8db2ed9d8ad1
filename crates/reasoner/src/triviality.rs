//! Pairs that prove nothing about the policy: no claims, or claims that already follow from
//! the premises with no rule at all (claims that are always true, that restate a premise, or
//! that follow from it by arithmetic). Such a pair never counts toward VALID: it becomes a
//! NO_TRANSLATIONS finding ("not covered by the policy") that carries the pair and an
//! ALWAYS_TRUE logic warning, so the reader sees why.

use crate::check::{CheckedStatementInput, Reasoner};
use proofgate_core::findings::{
    EmptyFinding, Extra, Finding, LogicWarning, LogicWarningType, Translation,
};
use serde_json::json;
use z3::ast::Bool;
use z3::SatResult;

/// Why a pair proves nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Triviality {
    /// The pair has no claims.
    NoClaims,
    /// The claims follow from the premises alone, without any rule.
    FollowsWithoutPolicy,
}

impl Triviality {
    fn explanation(self) -> &'static str {
        match self {
            Triviality::NoClaims => {
                "the translation has no claims: nothing in the answer was checked against the policy"
            }
            Triviality::FollowsWithoutPolicy => {
                "the claims follow from the premises without any policy rule (always true, or a \
                 restatement of a premise): the policy checked nothing"
            }
        }
    }
}

/// What the triviality check found.
pub(crate) enum PairNeed {
    /// The claims need the policy: check the pair.
    Policy,
    /// The pair proves nothing.
    Trivial(Triviality),
    /// The solver could not decide: never VALID.
    Unknown,
}

impl Reasoner<'_> {
    /// Whether the claims `c` need the policy to follow from the premises `p`: `p and not c`
    /// must be satisfiable without any rule.
    pub(crate) fn pair_need(
        &self,
        claims: &[CheckedStatementInput],
        p: &Bool,
        c: &Bool,
    ) -> PairNeed {
        if claims.is_empty() {
            return PairNeed::Trivial(Triviality::NoClaims);
        }
        match self.without_rules(&[p, &c.not()]) {
            SatResult::Sat => PairNeed::Policy,
            SatResult::Unsat => PairNeed::Trivial(Triviality::FollowsWithoutPolicy),
            SatResult::Unknown => PairNeed::Unknown,
        }
    }
}

/// The NO_TRANSLATIONS finding for a trivial pair. NO_TRANSLATIONS has no members in the AWS
/// shape; the pair and the warning ride along as extra members (`translation`,
/// `logicWarning`, `proofgateNote`), which AWS clients ignore and proofgate shows.
pub(crate) fn trivial_finding(
    why: Triviality,
    translation: Translation,
    claims: &[CheckedStatementInput],
) -> Finding {
    let warning = LogicWarning {
        warning_type: Some(LogicWarningType::AlwaysTrue),
        premises: None,
        claims: Some(claims.iter().map(|s| s.statement.clone()).collect()),
        extra: Default::default(),
    };
    let mut extra = Extra::new();
    extra.insert("translation".into(), json!(translation));
    extra.insert("logicWarning".into(), json!(warning));
    extra.insert("proofgateNote".into(), json!(why.explanation()));
    Finding::NoTranslations(EmptyFinding { extra })
}

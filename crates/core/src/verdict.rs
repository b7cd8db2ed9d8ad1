//! Rewriting priority of findings and the aggregate verdict over a validation's findings.

use crate::findings::{Finding, FindingKind};
use serde::{Deserialize, Serialize};

/// The warning attached to VALID answers that also contain text outside the policy.
pub const NOT_COVERED_WARNING: &str = "part of the answer is not covered by the policy";

/// Orders findings for rewriting: TRANSLATION_AMBIGUOUS, unknown kinds, IMPOSSIBLE, INVALID,
/// SATISFIABLE, TOO_COMPLEX, NO_TRANSLATIONS, VALID. Stable within a kind.
pub fn prioritize(findings: &[Finding]) -> Vec<Finding> {
    let mut sorted = findings.to_vec();
    sorted.sort_by_key(|f| f.kind().priority());
    sorted
}

/// The finding the rewriting loop handles first, if any.
pub fn top_finding(findings: &[Finding]) -> Option<&Finding> {
    findings.iter().min_by_key(|f| f.kind().priority())
}

/// The verdict over all findings of one validation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum Verdict {
    /// Every finding is VALID (possibly with NO_TRANSLATIONS parts: see the warning).
    Valid,
    /// The highest-priority finding is INVALID.
    Invalid,
    /// The highest-priority finding is SATISFIABLE.
    Satisfiable,
    /// The highest-priority finding is IMPOSSIBLE.
    Impossible,
    /// The highest-priority finding is TRANSLATION_AMBIGUOUS.
    TranslationAmbiguous,
    /// The highest-priority finding is TOO_COMPLEX.
    TooComplex,
    /// Nothing in the answer is covered by the policy.
    NoTranslations,
    /// A finding kind this version does not know: not verified.
    Unknown,
    /// The validator returned no findings at all: nothing was verified.
    NoFindings,
}

impl Verdict {
    /// Upper-case name, as in the HTTP header and the UI.
    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::NoFindings => "NO_FINDINGS",
            Verdict::Valid => "VALID",
            Verdict::Invalid => "INVALID",
            Verdict::Satisfiable => "SATISFIABLE",
            Verdict::Impossible => "IMPOSSIBLE",
            Verdict::TranslationAmbiguous => "TRANSLATION_AMBIGUOUS",
            Verdict::TooComplex => "TOO_COMPLEX",
            Verdict::NoTranslations => "NO_TRANSLATIONS",
            Verdict::Unknown => "UNKNOWN",
        }
    }

    /// The verdict a finding of `kind` stands for when it is the highest-priority one.
    pub fn of_kind(kind: FindingKind) -> Verdict {
        match kind {
            FindingKind::Valid => Verdict::Valid,
            FindingKind::Invalid => Verdict::Invalid,
            FindingKind::Satisfiable => Verdict::Satisfiable,
            FindingKind::Impossible => Verdict::Impossible,
            FindingKind::TranslationAmbiguous => Verdict::TranslationAmbiguous,
            FindingKind::TooComplex => Verdict::TooComplex,
            FindingKind::NoTranslations => Verdict::NoTranslations,
            FindingKind::Unknown => Verdict::Unknown,
        }
    }
}

/// The aggregate verdict plus an optional warning.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AggregateVerdict {
    /// The verdict.
    pub verdict: Verdict,
    /// Set for VALID answers with parts outside the policy.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub warning: Option<String>,
}

impl AggregateVerdict {
    /// Whether the answer may be presented as verified (VALID, with or without warning).
    pub fn is_valid(&self) -> bool {
        self.verdict == Verdict::Valid
    }
}

/// Whether a VALID finding proves anything: its translation (when it has one) has claims, and
/// no logic warning says the claims hold, or the premises fail, regardless of the policy. A
/// VALID that proves nothing counts as NO_TRANSLATIONS: the policy checked nothing.
pub fn proves_something(finding: &Finding) -> bool {
    use crate::findings::LogicWarningType;
    if finding.kind() != FindingKind::Valid {
        return false;
    }
    if finding.translation().is_some_and(|t| {
        t.claims()
            .iter()
            .all(|c| c.logic.as_deref().is_none_or(|l| l.trim() == "true"))
    }) {
        return false;
    }
    let vacuous = finding.logic_warning().is_some_and(|w| {
        let flagged =
            |s: &Option<Vec<crate::findings::Statement>>| s.as_ref().is_some_and(|v| !v.is_empty());
        match &w.warning_type {
            Some(LogicWarningType::AlwaysTrue) => flagged(&w.claims),
            Some(LogicWarningType::AlwaysFalse) => flagged(&w.premises),
            _ => false,
        }
    });
    !vacuous
}

/// The kind a finding counts as for the verdict: a VALID that proves nothing counts as
/// NO_TRANSLATIONS.
pub fn effective_kind(finding: &Finding) -> FindingKind {
    match finding.kind() {
        FindingKind::Valid if !proves_something(finding) => FindingKind::NoTranslations,
        kind => kind,
    }
}

/// Whether a finding's translation leaves text of the answer's claims untranslated. The local
/// reasoner reports such text as a NO_TRANSLATIONS finding of its own; Bedrock reports it
/// inside the translation of the finding it belongs to, a VALID one included.
pub fn leaves_claims_untranslated(findings: &[Finding]) -> bool {
    findings.iter().any(|f| {
        f.translation()
            .and_then(|t| t.untranslated_claims.as_ref())
            .is_some_and(|c| !c.is_empty())
    })
}

/// The verdict over a list of findings: VALID only when every finding is VALID; VALID plus
/// NO_TRANSLATIONS is VALID with a warning, as is a VALID whose findings leave claims
/// untranslated ([`leaves_claims_untranslated`]); all NO_TRANSLATIONS is NO_TRANSLATIONS;
/// otherwise the kind of the highest-priority finding. An empty list is never VALID, and a
/// VALID finding that proves nothing ([`proves_something`]) counts as NO_TRANSLATIONS.
pub fn aggregate_verdict(findings: &[Finding]) -> AggregateVerdict {
    let mut verdict = aggregate_verdict_of_format_3(findings);
    if verdict.is_valid() && verdict.warning.is_none() && leaves_claims_untranslated(findings) {
        verdict.warning = Some(NOT_COVERED_WARNING.to_string());
    }
    verdict
}

/// [`aggregate_verdict`] as audit formats 1 to 3 had it, for replaying their trails: a VALID
/// with claims left untranslated inside its own translation carried no warning.
pub fn aggregate_verdict_of_format_3(findings: &[Finding]) -> AggregateVerdict {
    let Some(top) = findings
        .iter()
        .map(effective_kind)
        .min_by_key(|k| k.priority())
    else {
        return AggregateVerdict {
            verdict: Verdict::NoFindings,
            warning: None,
        };
    };
    let has_valid = findings
        .iter()
        .any(|f| effective_kind(f) == FindingKind::Valid);
    match top {
        FindingKind::NoTranslations if has_valid => AggregateVerdict {
            verdict: Verdict::Valid,
            warning: Some(NOT_COVERED_WARNING.to_string()),
        },
        kind => AggregateVerdict {
            verdict: Verdict::of_kind(kind),
            warning: None,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::findings::*;

    fn f(kind: FindingKind) -> Finding {
        match kind {
            FindingKind::Valid => Finding::Valid(Default::default()),
            FindingKind::Invalid => Finding::Invalid(Default::default()),
            FindingKind::Satisfiable => Finding::Satisfiable(Default::default()),
            FindingKind::Impossible => Finding::Impossible(Default::default()),
            FindingKind::TranslationAmbiguous => Finding::TranslationAmbiguous(Default::default()),
            FindingKind::TooComplex => Finding::TooComplex(Default::default()),
            FindingKind::NoTranslations => Finding::NoTranslations(Default::default()),
            FindingKind::Unknown => Finding::Unknown {
                member: "proved".into(),
                body: serde_json::json!({}),
            },
        }
    }

    #[test]
    fn priority_order_is_the_documented_one() {
        use FindingKind::*;
        let input: Vec<Finding> = [
            Valid,
            NoTranslations,
            TooComplex,
            Satisfiable,
            Invalid,
            Impossible,
            Unknown,
            TranslationAmbiguous,
        ]
        .into_iter()
        .map(f)
        .collect();
        let kinds: Vec<_> = prioritize(&input).iter().map(Finding::kind).collect();
        assert_eq!(
            kinds,
            vec![
                TranslationAmbiguous,
                Unknown,
                Impossible,
                Invalid,
                Satisfiable,
                TooComplex,
                NoTranslations,
                Valid
            ]
        );
    }

    #[test]
    fn prioritize_is_stable_within_a_kind() {
        let mut a = ContradictionFinding::default();
        a.extra.insert("n".into(), 1.into());
        let mut b = ContradictionFinding::default();
        b.extra.insert("n".into(), 2.into());
        let input = vec![
            Finding::Invalid(a.clone()),
            f(FindingKind::Impossible),
            Finding::Invalid(b.clone()),
        ];
        let out = prioritize(&input);
        assert_eq!(out[1], Finding::Invalid(a));
        assert_eq!(out[2], Finding::Invalid(b));
    }

    #[test]
    fn empty_list_is_not_valid() {
        let v = aggregate_verdict(&[]);
        assert_eq!(v.verdict, Verdict::NoFindings);
        assert!(!v.is_valid());
    }

    #[test]
    fn all_valid_is_valid_without_warning() {
        let v = aggregate_verdict(&[f(FindingKind::Valid), f(FindingKind::Valid)]);
        assert_eq!(
            v,
            AggregateVerdict {
                verdict: Verdict::Valid,
                warning: None
            }
        );
    }

    #[test]
    fn valid_plus_no_translations_warns() {
        let v = aggregate_verdict(&[f(FindingKind::NoTranslations), f(FindingKind::Valid)]);
        assert!(v.is_valid());
        assert_eq!(v.warning.as_deref(), Some(NOT_COVERED_WARNING));
    }

    #[test]
    fn only_no_translations_is_not_valid() {
        let v = aggregate_verdict(&[f(FindingKind::NoTranslations)]);
        assert_eq!(v.verdict, Verdict::NoTranslations);
        assert!(!v.is_valid());
    }

    #[test]
    fn any_non_valid_finding_spoils_validity() {
        for kind in FindingKind::ALL {
            if matches!(kind, FindingKind::Valid | FindingKind::NoTranslations) {
                continue;
            }
            let v = aggregate_verdict(&[f(FindingKind::Valid), f(kind), f(FindingKind::Valid)]);
            assert!(!v.is_valid(), "{kind} must not aggregate to VALID");
        }
    }

    #[test]
    fn unknown_kind_is_never_valid() {
        let v = aggregate_verdict(&[f(FindingKind::Unknown)]);
        assert_eq!(v.verdict, Verdict::Unknown);
        let v = aggregate_verdict(&[f(FindingKind::Valid), f(FindingKind::Unknown)]);
        assert_eq!(v.verdict, Verdict::Unknown);
    }

    #[test]
    fn follow_up_questions_only_for_ambiguous_and_satisfiable() {
        for kind in FindingKind::ALL {
            let expected = matches!(
                kind,
                FindingKind::TranslationAmbiguous | FindingKind::Satisfiable
            );
            assert_eq!(f(kind).allows_follow_up_questions(), expected, "{kind}");
        }
    }
}

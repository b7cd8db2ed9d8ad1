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

/// How one audit format reads findings into a verdict (see [`VerdictRules::of_format`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct VerdictRules {
    /// Findings that leave claims untranslated inside their own translation make a VALID
    /// carry the not-covered warning (format 4 on).
    pub untranslated_claims_warn: bool,
    /// A VALID proves something only when it names a rule that supports it and no logic
    /// warning leaves its proof in doubt (format 5 on; see [`proves_something_under`]).
    pub valid_needs_support: bool,
}

impl VerdictRules {
    /// The rules this version writes trails with.
    pub const CURRENT: VerdictRules = VerdictRules {
        untranslated_claims_warn: true,
        valid_needs_support: true,
    };

    /// The rules of audit format `version`, for replaying its trails.
    pub fn of_format(version: u32) -> VerdictRules {
        VerdictRules {
            untranslated_claims_warn: version >= crate::audit::UNTRANSLATED_CLAIMS_WARNED_SINCE,
            valid_needs_support: version >= crate::audit::SUPPORTED_VALID_SINCE,
        }
    }
}

/// Whether a VALID finding proves anything, under the current rules
/// ([`proves_something_under`]).
pub fn proves_something(finding: &Finding) -> bool {
    proves_something_under(finding, VerdictRules::CURRENT)
}

/// Whether a VALID finding proves anything: its translation (when it has one) has claims, and
/// no logic warning says the claims hold, or the premises fail, regardless of the policy. With
/// [`VerdictRules::valid_needs_support`] it must also show its translation, name at least one
/// supporting rule by a non-blank identifier (a proof that needs no rule is a proof from the
/// premises alone: the policy checked nothing), and any logic warning other than "the premises
/// are always true" leaves it proving nothing:
/// one that does not say which statements it is about, always-false on either side (a VALID
/// whose claims can never hold was proved from premises that cannot hold together with the
/// rules), or a type this version does not know. A VALID that proves nothing counts as
/// NO_TRANSLATIONS: the policy checked nothing.
pub fn proves_something_under(finding: &Finding, rules: VerdictRules) -> bool {
    use crate::findings::{LogicWarning, LogicWarningType, Statement};
    let Finding::Valid(valid) = finding else {
        return false;
    };
    if finding.translation().is_some_and(|t| {
        t.claims()
            .iter()
            .all(|c| c.logic.as_deref().is_none_or(|l| l.trim() == "true"))
    }) {
        return false;
    }
    let listed = |s: &Option<Vec<Statement>>| s.as_ref().is_some_and(|v| !v.is_empty());
    if !rules.valid_needs_support {
        let vacuous = finding
            .logic_warning()
            .is_some_and(|w| match &w.warning_type {
                Some(LogicWarningType::AlwaysTrue) => listed(&w.claims),
                Some(LogicWarningType::AlwaysFalse) => listed(&w.premises),
                _ => false,
            });
        return !vacuous;
    }
    // A translation shows what was proved; without one nothing says what the rules support.
    if valid.translation.is_none() {
        return false;
    }
    // A rule that names nothing supports nothing anyone can check.
    let supported = valid.supporting_rules.as_ref().is_some_and(|rules| {
        rules.iter().any(|r| {
            r.identifier
                .as_deref()
                .is_some_and(|id| !id.trim().is_empty())
        })
    });
    // Only "these premises are always true" leaves the proof standing: the premises say
    // nothing, and the claims still follow from them through the rules.
    let harmless = |w: &LogicWarning| {
        w.warning_type == Some(LogicWarningType::AlwaysTrue)
            && listed(&w.premises)
            && !listed(&w.claims)
    };
    supported && valid.logic_warning.as_ref().is_none_or(harmless)
}

/// The kind a finding counts as for the verdict: a VALID that proves nothing counts as
/// NO_TRANSLATIONS (current rules).
pub fn effective_kind(finding: &Finding) -> FindingKind {
    effective_kind_under(finding, VerdictRules::CURRENT)
}

/// [`effective_kind`] under the rules of one audit format.
pub fn effective_kind_under(finding: &Finding, rules: VerdictRules) -> FindingKind {
    match finding.kind() {
        FindingKind::Valid if !proves_something_under(finding, rules) => {
            FindingKind::NoTranslations
        }
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

/// Whether a VALID finding checks only some of its claims: one has no logic, or logic that is
/// simply `true` (so what it says was never put to the rules), beside claims that were.
pub fn proves_part_of_its_claims(findings: &[Finding]) -> bool {
    findings.iter().any(|f| {
        f.kind() == FindingKind::Valid
            && f.translation().is_some_and(|t| {
                t.claims()
                    .iter()
                    .any(|c| c.logic.as_deref().is_none_or(|l| l.trim() == "true"))
            })
    })
}

/// The verdict over a list of findings: VALID only when every finding is VALID; VALID plus
/// NO_TRANSLATIONS is VALID with a warning, as is a VALID whose findings leave claims
/// untranslated ([`leaves_claims_untranslated`]) or check only some of their claims
/// ([`proves_part_of_its_claims`]); all NO_TRANSLATIONS is NO_TRANSLATIONS;
/// otherwise the kind of the highest-priority finding. An empty list is never VALID, and a
/// VALID finding that proves nothing ([`proves_something`]) counts as NO_TRANSLATIONS.
pub fn aggregate_verdict(findings: &[Finding]) -> AggregateVerdict {
    aggregate_verdict_under(findings, VerdictRules::CURRENT)
}

/// [`aggregate_verdict`] as audit format `version` had it, for replaying its trails.
pub fn aggregate_verdict_of_format(findings: &[Finding], version: u32) -> AggregateVerdict {
    aggregate_verdict_under(findings, VerdictRules::of_format(version))
}

/// [`aggregate_verdict`] under `rules`.
pub fn aggregate_verdict_under(findings: &[Finding], rules: VerdictRules) -> AggregateVerdict {
    let effective = |f: &Finding| effective_kind_under(f, rules);
    let Some(top) = findings.iter().map(effective).min_by_key(|k| k.priority()) else {
        return AggregateVerdict {
            verdict: Verdict::NoFindings,
            warning: None,
        };
    };
    let has_valid = findings.iter().any(|f| effective(f) == FindingKind::Valid);
    let mut verdict = match top {
        FindingKind::NoTranslations if has_valid => AggregateVerdict {
            verdict: Verdict::Valid,
            warning: Some(NOT_COVERED_WARNING.to_string()),
        },
        kind => AggregateVerdict {
            verdict: Verdict::of_kind(kind),
            warning: None,
        },
    };
    let unchecked = (rules.untranslated_claims_warn && leaves_claims_untranslated(findings))
        || (rules.valid_needs_support && proves_part_of_its_claims(findings));
    if verdict.is_valid() && verdict.warning.is_none() && unchecked {
        verdict.warning = Some(NOT_COVERED_WARNING.to_string());
    }
    verdict
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::findings::*;

    fn f(kind: FindingKind) -> Finding {
        match kind {
            FindingKind::Valid => valid(Some(vec![Rule::new("R1", "v1")]), None),
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

    fn valid(rules: Option<Vec<Rule>>, warning: Option<LogicWarning>) -> Finding {
        Finding::Valid(ValidFinding {
            translation: Some(Translation {
                premises: Some(vec![Statement::new("(= age 70)", "I am 70.")]),
                claims: Some(vec![Statement::new("(= fee 5)", "You pay $5.")]),
                ..Default::default()
            }),
            supporting_rules: rules,
            logic_warning: warning,
            ..Default::default()
        })
    }

    fn warning(kind: Option<LogicWarningType>, premises: bool, claims: bool) -> LogicWarning {
        let some = |on: bool, s: &str| on.then(|| vec![Statement::new(s, s)]);
        LogicWarning {
            warning_type: kind,
            premises: some(premises, "(= age 70)"),
            claims: some(claims, "(= fee 5)"),
            ..Default::default()
        }
    }

    fn verdicts(finding: Finding) -> (Verdict, Verdict) {
        let findings = [finding];
        (
            aggregate_verdict(&findings).verdict,
            aggregate_verdict_of_format(&findings, 4).verdict,
        )
    }

    #[test]
    fn a_valid_that_names_no_supporting_rule_proves_nothing() {
        let rule = || Some(vec![Rule::new("R1", "v1")]);
        assert_eq!(
            verdicts(valid(rule(), None)),
            (Verdict::Valid, Verdict::Valid)
        );
        // Format 4 took both as VALID; a proof that needs no rule came from the premises alone.
        for rules in [None, Some(vec![])] {
            assert_eq!(
                verdicts(valid(rules, None)),
                (Verdict::NoTranslations, Verdict::Valid)
            );
        }
        // Next to a supported VALID it is a part the policy did not cover.
        let both = [valid(rule(), None), valid(Some(vec![]), None)];
        let v = aggregate_verdict(&both);
        assert!(v.is_valid());
        assert_eq!(v.warning.as_deref(), Some(NOT_COVERED_WARNING));
    }

    #[test]
    fn a_valid_must_show_its_translation_and_name_its_rules() {
        let rule = |id: &str| Some(vec![Rule::new(id, "v1")]);
        let mut bare = valid(rule("R1"), None);
        if let Finding::Valid(v) = &mut bare {
            v.translation = None;
        }
        assert_eq!(verdicts(bare), (Verdict::NoTranslations, Verdict::Valid));
        for blank in ["", "  "] {
            assert_eq!(
                verdicts(valid(rule(blank), None)),
                (Verdict::NoTranslations, Verdict::Valid)
            );
        }
        let nameless = Some(vec![Rule::default()]);
        assert_eq!(
            verdicts(valid(nameless, None)),
            (Verdict::NoTranslations, Verdict::Valid)
        );
        // One named rule is enough.
        let some = Some(vec![Rule::default(), Rule::new("R2", "v1")]);
        assert_eq!(
            verdicts(valid(some, None)),
            (Verdict::Valid, Verdict::Valid)
        );
    }

    #[test]
    fn a_valid_that_checked_only_some_claims_warns() {
        for unchecked in [Statement::new("true", "Refunds are guaranteed."), {
            let mut s = Statement::new("", "Refunds are guaranteed.");
            s.logic = None;
            s
        }] {
            let mut f = valid(Some(vec![Rule::new("R1", "v1")]), None);
            if let Finding::Valid(v) = &mut f {
                v.translation
                    .as_mut()
                    .unwrap()
                    .claims
                    .as_mut()
                    .unwrap()
                    .push(unchecked);
            }
            let findings = [f];
            let now = aggregate_verdict(&findings);
            assert!(now.is_valid());
            assert_eq!(now.warning.as_deref(), Some(NOT_COVERED_WARNING));
            assert_eq!(aggregate_verdict_of_format(&findings, 4).warning, None);
        }
    }

    #[test]
    fn only_always_true_premises_leave_a_valid_standing() {
        use LogicWarningType::*;
        let rule = || Some(vec![Rule::new("R1", "v1")]);
        let other = || Some(Other("SOMETIMES_TRUE".into()));
        // (warning, current verdict, format 4's verdict)
        let cases = [
            (
                warning(Some(AlwaysTrue), true, false),
                Verdict::Valid,
                Verdict::Valid,
            ),
            (
                warning(Some(AlwaysTrue), false, true),
                Verdict::NoTranslations,
                Verdict::NoTranslations,
            ),
            (
                warning(Some(AlwaysTrue), true, true),
                Verdict::NoTranslations,
                Verdict::NoTranslations,
            ),
            // Says nothing of which statements: the proof may rest on claims that say nothing.
            (
                warning(Some(AlwaysTrue), false, false),
                Verdict::NoTranslations,
                Verdict::Valid,
            ),
            (
                warning(Some(AlwaysFalse), true, false),
                Verdict::NoTranslations,
                Verdict::NoTranslations,
            ),
            // Claims that can never hold were proved only from premises that cannot hold.
            (
                warning(Some(AlwaysFalse), false, true),
                Verdict::NoTranslations,
                Verdict::Valid,
            ),
            (
                warning(Some(AlwaysFalse), false, false),
                Verdict::NoTranslations,
                Verdict::Valid,
            ),
            (
                warning(other(), false, true),
                Verdict::NoTranslations,
                Verdict::Valid,
            ),
            (
                warning(None, true, true),
                Verdict::NoTranslations,
                Verdict::Valid,
            ),
        ];
        for (w, now, then) in cases {
            let name = format!("{w:?}");
            assert_eq!(verdicts(valid(rule(), Some(w))), (now, then), "{name}");
        }
    }

    #[test]
    fn the_rules_of_each_format() {
        assert_eq!(
            VerdictRules::of_format(crate::audit::FORMAT_VERSION),
            VerdictRules::CURRENT
        );
        assert!(!VerdictRules::of_format(4).valid_needs_support);
        assert!(VerdictRules::of_format(4).untranslated_claims_warn);
        assert!(!VerdictRules::of_format(3).untranslated_claims_warn);
    }
}

//! The solver checks an auditor runs for a trail, rebuilt from the recorded premises and
//! claims and the auditor's own policy. Nothing executable is taken from the trail: the scripts
//! stored in it are ignored, every statement is re-parsed against the auditor's policy and
//! re-printed from the fragment's AST, so a trail cannot make the auditor's solver write a file
//! or run anything.

use super::record::{AuditRecord, RecordKind};
use crate::findings::{Finding, FindingKind, Statement, Translation};
use crate::policy::smtlib::Expected;
use crate::policy::PolicyModel;
use crate::translation::TranslatorOutput;
use serde::{Deserialize, Serialize};

/// One check to run with an independent solver.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PlannedCheck {
    /// Position of the VALIDATED record in the trail.
    pub record: usize,
    /// The finding's position in that validation.
    pub finding: usize,
    /// The finding's kind.
    pub kind: String,
    /// What the check establishes.
    pub meaning: String,
    /// The SMT-LIB script, generated from the auditor's policy.
    pub script: String,
    /// The solver's complete answer the finding requires: `sat` or `unsat`.
    pub expected: Expected,
    /// Checks of one group pass together when any of them gets its expected answer (a pair is
    /// covered when it is equivalent to one finding's pair, whichever). Others must each pass.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub any_of: Option<usize>,
}

impl RecheckPlan {
    /// Which checks pass, given whether each got its expected answer (see [`checks_passed`]).
    pub fn passed(&self, answered: &[bool]) -> Vec<bool> {
        checks_passed(&self.checks, answered)
    }
}

/// Which of `checks` pass, given whether each got its expected answer: a check of an
/// [`PlannedCheck::any_of`] group passes when any check of its group did; a check with no
/// answer given has not passed. The CLI and the browser both judge a plan with it.
pub fn checks_passed(checks: &[PlannedCheck], answered: &[bool]) -> Vec<bool> {
    let ok = |i: usize| answered.get(i).copied().unwrap_or(false);
    let mut groups = std::collections::BTreeSet::new();
    for (i, c) in checks.iter().enumerate() {
        if let (Some(g), true) = (c.any_of, ok(i)) {
            groups.insert(g);
        }
    }
    (0..checks.len())
        .map(|i| ok(i) || checks[i].any_of.is_some_and(|g| groups.contains(&g)))
        .collect()
}

/// Something that fails the audit before any solver runs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RecheckProblem {
    /// Position of the record in the trail.
    pub record: usize,
    /// What is wrong, for a person.
    pub detail: String,
}

/// The checks to run, and the problems found while building them.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RecheckPlan {
    /// The auditor's policy's content hash.
    pub policy_content_hash: String,
    /// Checks to run; each must answer exactly `expected`.
    pub checks: Vec<PlannedCheck>,
    /// Problems: each fails the audit.
    pub problems: Vec<RecheckProblem>,
}

/// Whether a finding of this kind is a claim about the policy that a solver must confirm.
fn needs_checks(kind: FindingKind) -> bool {
    matches!(
        kind,
        FindingKind::Valid
            | FindingKind::Invalid
            | FindingKind::Impossible
            | FindingKind::Satisfiable
    )
}

/// Builds the checks for every finding of every VALIDATED record of `trail` from `policy`.
/// Problems: a validation recorded against another policy version (content hash), findings that
/// cannot be read, and a VALID/INVALID/IMPOSSIBLE/SATISFIABLE finding for which no check can be
/// built (no translation, statements that do not check against the policy, no claims).
pub fn plan_rechecks(trail: &[AuditRecord], policy: &PolicyModel) -> RecheckPlan {
    let hash = policy.definition().content_hash();
    let mut plan = RecheckPlan {
        policy_content_hash: hash.clone(),
        ..Default::default()
    };
    // The policy the thread was shown (its rules and variables, in every prompt) must be the
    // auditor's: a validation's content hash binds only what the local validator checked, and
    // findings no solver confirms (NO_TRANSLATIONS, TOO_COMPLEX) bind nothing.
    if let Some(named) = trail
        .first()
        .and_then(|r| super::policy_document::referenced_policy_document_of(&r.body))
    {
        if super::policy_document::documents_of_policy(policy)
            .get(named)
            .is_none()
        {
            plan.problems.push(RecheckProblem {
                record: 0,
                detail: format!(
                    "the thread was shown the policy document {named}, which is not made from \
                     the auditor's policy ({hash}): it was shown another policy, or another \
                     version of it"
                ),
            });
        }
    } else if let Some(shown) = trail
        .first()
        .and_then(|r| r.body.pointer("/config/policy"))
        .filter(|p| {
            p.get("rules")
                .and_then(serde_json::Value::as_array)
                .is_some_and(|r| !r.is_empty())
        })
    {
        // A trail of format 1 holds the policy it was shown in its first record: the same
        // comparison, with the document's parts.
        let ours = super::policy_document::documents_of_policy(policy);
        let vocabulary = trail[0].body.pointer("/config/translation/vocabulary");
        let document = match vocabulary {
            Some(v) => serde_json::json!({"policy": shown, "vocabulary": v}),
            None => serde_json::json!({"policy": shown}),
        };
        let name = super::policy_document::policy_document_hash(&document);
        if ours.get(&name).is_none() {
            plan.problems.push(RecheckProblem {
                record: 0,
                detail: format!(
                    "the thread was shown a policy (held in its first record, {name}) that is \
                     not the auditor's ({hash}): it was shown another policy, or another \
                     version of it"
                ),
            });
        }
    }
    let format = trail
        .first()
        .and_then(|r| r.body.get("formatVersion"))
        .and_then(serde_json::Value::as_u64)
        .unwrap_or(0);
    // The translations the last CHECK sent to the validator (the local validator's: with
    // Bedrock, it translates itself and none are recorded).
    let mut translations: Option<Vec<TranslatorOutput>> = None;
    for (i, r) in trail.iter().enumerate() {
        if r.kind == RecordKind::Check {
            translations = match r.body.get("translations") {
                None | Some(serde_json::Value::Null) => None,
                Some(t) => match serde_json::from_value(t.clone()) {
                    Ok(t) => Some(t),
                    Err(e) => {
                        plan.problems.push(RecheckProblem {
                            record: i,
                            detail: format!("the translations cannot be read: {e}"),
                        });
                        None
                    }
                },
            };
            continue;
        }
        // Every validation, and the outcome the user got (its findings are the last
        // validation's, re-checked here as returned).
        let findings_at = match r.kind {
            RecordKind::Validated => "/findings",
            RecordKind::ValidResponse
            | RecordKind::ImpossibleResponse
            | RecordKind::MaxIterationsReached
            | RecordKind::NotCovered => "/outcome/findings",
            _ => continue,
        };
        let problem = |detail: String| RecheckProblem { record: i, detail };
        if let Some(recorded) = r
            .body
            .pointer("/evidence/policyContentHash")
            .and_then(|v| v.as_str())
        {
            if recorded != hash {
                plan.problems.push(problem(format!(
                    "validated against policy {recorded}, but the auditor's policy is {hash}"
                )));
                continue;
            }
        }
        let findings: Vec<Finding> = match serde_json::from_value(
            r.body.pointer(findings_at).cloned().unwrap_or_default(),
        ) {
            Ok(f) => f,
            Err(e) => {
                plan.problems
                    .push(problem(format!("the findings cannot be read: {e}")));
                continue;
            }
        };
        // An outcome's SATISFIABLE made from a validator's VALID with unstated premises
        // (format 10) is re-checked as that VALID: no solver said its claims can fail. Its
        // VALIDATED record holds the VALID as it came, and replay confirms the move.
        let findings: Vec<Finding> = if r.kind == RecordKind::Validated
            || format < u64::from(super::VALIDATOR_PREMISES_GROUNDED_SINCE)
        {
            findings
        } else {
            findings
                .iter()
                .map(|f| crate::conversation::validator_finding(f).into_owned())
                .collect()
        };
        // From format 10 what a solver reads must be all that the trail shows: a statement
        // with an SMT-LIB comment (Bedrock's, or one written into a trail) is refused, not
        // re-checked as the part before the comment.
        if format >= u64::from(super::NO_COMMENTS_IN_LOGIC_SINCE) {
            if let Some(at) = findings.iter().position(finding_holds_comment) {
                plan.problems.push(problem(format!(
                    "finding {at} holds a statement with an SMT-LIB comment (`;`): its logic \
                     is not all that a solver would check"
                )));
            }
        }
        for mut fc in policy.finding_checks(&findings) {
            let kind = findings[fc.finding].kind();
            if !fc.checks.is_empty() {
                fc.checks
                    .extend(policy.needs_policy_check(&findings[fc.finding]));
            }
            if needs_checks(kind) && fc.checks.is_empty() {
                plan.problems.push(problem(format!(
                    "finding {} ({}) cannot be re-checked against the auditor's policy: no \
                     translation, no claims, or statements that do not check against it",
                    fc.finding,
                    kind.as_str()
                )));
            }
            for c in fc.checks {
                plan.checks.push(PlannedCheck {
                    record: i,
                    finding: fc.finding,
                    kind: fc.kind.clone(),
                    meaning: c.meaning,
                    script: c.script,
                    expected: c.expected,
                    any_of: None,
                });
            }
        }
        if r.kind == RecordKind::Validated && format >= u64::from(super::FINDINGS_COVER_PAIRS_SINCE)
        {
            if let Some(outputs) = translations.take() {
                plan_coverage(&mut plan, policy, i, &outputs, &findings);
            }
        }
    }
    plan
}

/// Whether any statement of a finding (its translation's, or an ambiguous one's options')
/// holds an SMT-LIB comment.
fn finding_holds_comment(finding: &Finding) -> bool {
    let json = serde_json::to_value(finding).unwrap_or_default();
    fn walk(v: &serde_json::Value) -> bool {
        match v {
            serde_json::Value::Object(m) => m.iter().any(|(k, v)| {
                (k == "logic" && v.as_str().is_some_and(crate::policy::term::holds_comment))
                    || walk(v)
            }),
            serde_json::Value::Array(a) => a.iter().any(walk),
            _ => false,
        }
    }
    walk(&json)
}

/// The most solver checks an audit plans to show that one validation's findings cover its
/// translators' pairs. Each uncovered pair is checked against each distinct pair a finding
/// checks, so a small hostile file (600 distinct pairs against 600 distinct findings: 138 KB)
/// asked for 361,200 checks, 295 MB of scripts and 26 s of a browser tab's main thread before
/// anything else ran. proofgate's own trails need a few dozen (k translators' pairs against
/// the findings of one check, a hundred uncovered pairs against fifty findings for a very long
/// answer); a validation past this bound fails its audit, naming it.
pub const MAX_COVERAGE_CHECKS: usize = 16_384;

/// Audit format 7 on: every pair the translators wrote must be one a finding of the
/// validation checks: the same logic (a checked finding's translation, or an option of a
/// TRANSLATION_AMBIGUOUS one), or else equivalent to one of those without any rule, which a
/// solver confirms. A validation with a TOO_COMPLEX finding is never VALID and is left as it
/// is. Before, the findings were checked one by one, and a trail that left the INVALID
/// finding of one of two pairs out passed with the other's VALID.
fn plan_coverage(
    plan: &mut RecheckPlan,
    policy: &PolicyModel,
    record: usize,
    outputs: &[TranslatorOutput],
    findings: &[Finding],
) {
    if findings.iter().any(|f| f.kind() == FindingKind::TooComplex) {
        return;
    }
    // The pairs findings check: a checked finding's translation, a NO_TRANSLATIONS finding's
    // (a trivial pair keeps its translation among its members), and the options of a
    // TRANSLATION_AMBIGUOUS one.
    let mut covering: Vec<Translation> = Vec::new();
    for f in findings {
        match f {
            Finding::TranslationAmbiguous(a) => covering.extend(
                a.options
                    .iter()
                    .flatten()
                    .flat_map(|o| o.translations.iter().flatten())
                    .cloned(),
            ),
            Finding::NoTranslations(e) => {
                let Some(t) = e
                    .extra
                    .get("translation")
                    .and_then(|t| serde_json::from_value::<Translation>(t.clone()).ok())
                else {
                    continue;
                };
                // Its pair is covered only if it is trivial, as the finding says.
                match policy.trivial_check(&t) {
                    Some(c) => plan.checks.push(PlannedCheck {
                        record,
                        finding: findings
                            .iter()
                            .position(|x| std::ptr::eq(x, f))
                            .unwrap_or(0),
                        kind: "NO_TRANSLATIONS".into(),
                        meaning: c.meaning,
                        script: c.script,
                        expected: c.expected,
                        any_of: None,
                    }),
                    None => plan.problems.push(RecheckProblem {
                        record,
                        detail: "a NO_TRANSLATIONS finding's pair does not check against the \
                                 auditor's policy"
                            .into(),
                    }),
                }
                covering.push(t);
            }
            _ => covering.extend(f.translation().cloned()),
        }
    }
    let logic = |list: &[Statement]| -> Vec<Option<String>> {
        let mut l: Vec<Option<String>> = list.iter().map(|s| s.logic.clone()).collect();
        l.sort();
        l
    };
    type Key = (Vec<Option<String>>, Vec<Option<String>>);
    // Each checked pair once, by its logic: the same pair found again checks nothing new.
    let mut covered_keys: std::collections::HashSet<Key> = std::collections::HashSet::new();
    covering.retain(|c| covered_keys.insert((logic(c.premises()), logic(c.claims()))));
    // Each pair no finding checks as it is, once (k translators agreeing write it k times).
    let mut seen: std::collections::HashSet<Key> = std::collections::HashSet::new();
    let mut uncovered = Vec::new();
    for (t, output) in outputs.iter().enumerate() {
        for (j, pair) in output.pairs.iter().enumerate() {
            let key = (logic(&pair.premises), logic(&pair.claims));
            if !covered_keys.contains(&key) && seen.insert(key) {
                uncovered.push((t, j, pair));
            }
        }
    }
    let needed = uncovered.len().saturating_mul(covering.len());
    if needed > MAX_COVERAGE_CHECKS {
        plan.problems.push(RecheckProblem {
            record,
            detail: format!(
                "{} translated pairs no finding checks as written, against {} checked pairs: \
                 {needed} solver checks, more than the {MAX_COVERAGE_CHECKS} an audit runs for \
                 one validation (proofgate writes no such trail)",
                uncovered.len(),
                covering.len()
            ),
        });
        return;
    }
    for (t, j, pair) in uncovered {
        // One check per pair a finding checks, passing together when any of them does: the
        // pair must be equivalent to one of them as a whole (one query over all of them
        // would also take a pair each of whose cases some finding covers).
        let group = plan.checks.len();
        let mut planned = false;
        for (k, covered) in covering.iter().enumerate() {
            if let Some(c) = policy.coverage_check(&pair.premises, &pair.claims, covered) {
                plan.checks.push(PlannedCheck {
                    record,
                    finding: findings.len(),
                    kind: "PAIR_COVERED".into(),
                    meaning: format!(
                        "translator {t}'s pair {j} against checked pair {k}: {}",
                        c.meaning
                    ),
                    script: c.script,
                    expected: c.expected,
                    any_of: Some(group),
                });
                planned = true;
            }
        }
        if !planned {
            plan.problems.push(RecheckProblem {
                record,
                detail: format!(
                    "translator {t}'s pair {j} has no finding: no finding of the validation \
                         checks it or a pair that could be equivalent to it"
                ),
            });
        }
    }
}

/// Whether a solver's complete output is exactly the expected answer (one line, `sat` or
/// `unsat`, nothing else).
pub fn answer_matches(output: &str, expected: Expected) -> bool {
    output.trim() == expected.as_str()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::PolicyDefinition;
    use serde_json::json;

    fn park() -> PolicyModel {
        let text = include_str!("../../../../examples/policies/park-admission.json");
        PolicyModel::from_definition(PolicyDefinition::from_json(text).unwrap(), None).unwrap()
    }

    fn started(config: serde_json::Value) -> Vec<AuditRecord> {
        vec![serde_json::from_value(json!({"seq": 0, "prev": "", "at": 0,
            "kind": "THREAD_STARTED", "body": {"formatVersion": 1, "config": config}, "hash": ""}))
        .unwrap()]
    }

    /// A review's case: P distinct translated pairs against F distinct findings asked for P×F
    /// solver checks from a small file. Identical pairs and findings count once, and past
    /// [`MAX_COVERAGE_CHECKS`] the validation is a problem, planned in no time.
    #[test]
    fn coverage_checks_are_bounded_and_each_distinct_pair_counts_once() {
        use crate::findings::{Finding, Statement, Translation, ValidFinding};
        use crate::translation::{PairInput, TranslatorOutput};
        let policy = park();
        let pair = |age: usize, fee: &str| PairInput {
            premises: vec![Statement::new(format!("(= customerAge {age})"), "age")],
            claims: vec![Statement::new(format!("(= feeAfterDiscount {fee})"), "fee")],
        };
        let finding = |age: usize| {
            Finding::Valid(ValidFinding {
                translation: Some(Translation {
                    premises: Some(vec![Statement::new(
                        format!("(= customerAge {age})"),
                        "age",
                    )]),
                    claims: Some(vec![Statement::new("(= feeAfterDiscount 1.0)", "fee")]),
                    ..Default::default()
                }),
                ..Default::default()
            })
        };
        let plan_of = |outputs: &[TranslatorOutput], findings: &[Finding]| {
            let mut plan = RecheckPlan {
                policy_content_hash: String::new(),
                checks: Vec::new(),
                problems: Vec::new(),
            };
            plan_coverage(&mut plan, &policy, 3, outputs, findings);
            plan
        };
        // Three translators writing the same uncovered pair, three identical findings: one
        // group of one check.
        let same = TranslatorOutput {
            pairs: vec![pair(70, "2.0")],
            ..Default::default()
        };
        let plan = plan_of(
            &[same.clone(), same.clone(), same],
            &[finding(70), finding(70), finding(70)],
        );
        assert_eq!(plan.checks.len(), 1, "{:?}", plan.checks);
        assert!(plan.problems.is_empty());
        // 600 distinct pairs against 600 distinct findings: refused, naming the count.
        let many = TranslatorOutput {
            pairs: (0..600).map(|i| pair(i, "2.0")).collect(),
            ..Default::default()
        };
        let findings: Vec<Finding> = (1000..1600).map(finding).collect();
        let plan = plan_of(&[many], &findings);
        assert!(plan.checks.is_empty());
        assert_eq!(plan.problems.len(), 1);
        assert!(
            plan.problems[0].detail.contains("360000 solver checks"),
            "{}",
            plan.problems[0].detail
        );
        assert_eq!(plan.problems[0].record, 3);
    }

    /// From format 10 a finding whose logic holds a comment is an audit problem: a solver
    /// would check less than the trail shows.
    #[test]
    fn a_comment_in_a_findings_logic_is_a_problem_from_format_10() {
        use crate::findings::{Finding, Statement, Translation, ValidFinding};
        let record = |format: u32| {
            let started: AuditRecord = serde_json::from_value(json!({"seq": 0, "prev": "", "at": 0,
                "kind": "THREAD_STARTED", "body": {"formatVersion": format, "config": {}}, "hash": ""}))
            .unwrap();
            let finding = Finding::Valid(ValidFinding {
                translation: Some(Translation {
                    premises: Some(vec![Statement::new("(= customerAge 70)", "70")]),
                    claims: Some(vec![Statement::new(
                        "(>= customerAge 65) ; (= feeAfterDiscount 0.0)",
                        "a senior, free",
                    )]),
                    ..Default::default()
                }),
                ..Default::default()
            });
            let validated: AuditRecord = serde_json::from_value(json!({"seq": 1, "prev": "", "at": 0,
                "kind": "VALIDATED", "body": {"type": "VALIDATED", "findings": [finding]}, "hash": ""}))
            .unwrap();
            vec![started, validated]
        };
        let problems = |format| plan_rechecks(&record(format), &park()).problems;
        assert!(
            problems(10).iter().any(|p| p.detail.contains("comment")),
            "{:?}",
            problems(10)
        );
        assert!(!problems(9).iter().any(|p| p.detail.contains("comment")));
    }

    /// An outcome's SATISFIABLE made from a Bedrock VALID with an unstated premise (format 10)
    /// is re-checked as the VALID it came from: as a SATISFIABLE, a claim the policy derives
    /// from the stated premises ("can fail": unsat) failed a genuine trail.
    #[test]
    fn an_outcomes_moved_premise_is_rechecked_as_the_validators_valid() {
        use crate::findings::{Finding, Rule, Statement, Translation, ValidFinding};
        use crate::thread::{Input, Thread, ThreadConfig};
        let config = ThreadConfig {
            max_iterations: 1,
            ..ThreadConfig::default()
        };
        let mut t = Thread::new(config, "moved", "How much do I pay?", 0).unwrap();
        t.handle(Input::LlmReplied {
            text: "At 70 you pay $22.50.".into(),
            model: None,
            now: 1,
        })
        .unwrap();
        t.handle(Input::Validated {
            findings: vec![Finding::Valid(ValidFinding {
                translation: Some(Translation {
                    premises: Some(vec![Statement::new("(= customerAge 70)", "70")]),
                    claims: Some(vec![Statement::new("(>= customerAge 65)", "a senior")]),
                    ..Default::default()
                }),
                supporting_rules: Some(vec![Rule::new("AGENONNEGATI", "v1")]),
                ..Default::default()
            })],
            evidence: None,
            verdict_rules: None,
            now: 2,
        })
        .unwrap();
        let trail = t.audit_trail();
        let last = trail.len() - 1;
        assert_eq!(trail[last].kind.as_str(), "MAX_ITERATIONS_REACHED");
        let shown = &trail[last].body["outcome"]["findings"][0];
        assert!(shown.get("satisfiable").is_some(), "{shown}");
        let plan = plan_rechecks(trail, &park());
        let of_outcome: Vec<_> = plan.checks.iter().filter(|c| c.record == last).collect();
        assert!(!of_outcome.is_empty());
        assert!(
            of_outcome.iter().all(|c| c.kind == "VALID"),
            "{of_outcome:?}"
        );
    }

    /// A trail of format 1 holds the policy it was shown in its first record; it was compared
    /// with nothing, so a thread shown another policy passed an audit with the auditor's.
    #[test]
    fn a_format_1_trail_was_shown_the_auditors_policy_or_fails() {
        let model = park();
        let policy = serde_json::to_value(model.prompt_context()).unwrap();
        let vocabulary =
            crate::translation::TranslationConfig::new(model.definition(), 1, 0, 1.0).vocabulary;
        let vocabulary = serde_json::to_value(vocabulary).unwrap();
        let problems = |config| plan_rechecks(&started(config), &model).problems;
        let translated = json!({"policy": policy, "translation": {"vocabulary": vocabulary}});
        assert_eq!(problems(translated), []);
        assert_eq!(problems(json!({ "policy": policy })), []);
        let mut other = policy.clone();
        other["rules"][0]["expression"] = json!("(= baseFee 40.0)");
        let found = problems(json!({"policy": other, "translation": {"vocabulary": vocabulary}}));
        assert!(
            found
                .iter()
                .any(|p| p.record == 0 && p.detail.contains("not the auditor's")),
            "{found:?}"
        );
        // A thread shown no policy (none was configured): nothing to hold to it.
        assert_eq!(problems(json!({"policy": {"rules": []}})), []);
    }
}

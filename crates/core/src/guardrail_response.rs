//! Reading an Amazon Bedrock ApplyGuardrail response as the loop's input. The proxy's Bedrock
//! validator and an app driving the npm package's loop with its own ApplyGuardrail calls read
//! it the same way: a response whose guardrail intervened blocks the answer, and findings that
//! do not stand for the whole answer (part of it guarded by nothing, a VALID that shows no
//! translation, a VALID resting on a policy version not chosen) are refused, so the validation
//! fails closed instead of counting them, unless one of them refutes the answer (INVALID, or
//! IMPOSSIBLE): that refutation is kept, and the answer rewritten.

use crate::findings::{ApplyGuardrailResponse, Finding};
use serde::Deserialize;

/// What an ApplyGuardrail response says of an answer.
#[derive(Debug, Clone, PartialEq)]
pub enum GuardrailReading {
    /// Its Automated Reasoning findings, which stand for the whole answer.
    Findings(Vec<Finding>),
    /// The guardrail intervened (`action` GUARDRAIL_INTERVENED): the answer must not go out,
    /// whatever its findings say. The reason names the policies that blocked it.
    Blocked(String),
}

/// Reads ApplyGuardrail's response `body` to the validation of `answer` (the text sent as
/// `guard_content`). `policy_arns`: the policy versions a VALID may rest on (empty: any).
/// An error says why the response cannot be taken as the answer's validation.
pub fn read_guardrail_response(
    body: &serde_json::Value,
    answer: &str,
    policy_arns: &[String],
) -> Result<GuardrailReading, String> {
    // First: a guardrail that intervened blocks the answer even when a finding of its
    // response does not read (that made it a bad response, and failing open then sent the
    // blocked answer out as UNVERIFIED).
    if let Some(reason) = intervention(body) {
        return Ok(GuardrailReading::Blocked(reason));
    }
    let response = ApplyGuardrailResponse::deserialize(body)
        .map_err(|e| format!("not an ApplyGuardrail response: {e}"))?;
    let findings = response.findings();
    let refused = partial_coverage(body, answer)
        .or_else(|| unshown_valid(&findings))
        .or_else(|| foreign_valid(&findings, policy_arns));
    let Some(why) = refused else {
        return Ok(GuardrailReading::Findings(findings));
    };
    // Findings that do not stand for the whole answer still refute it where they say it is
    // INVALID or IMPOSSIBLE: those are kept, so the answer is rewritten (and failing open never
    // sends out an answer a finding refuted), and the rest are not counted. IMPOSSIBLE was
    // dropped with the rest: an answer built on facts the policy rules out went out UNVERIFIED.
    let refuting: Vec<Finding> = findings
        .into_iter()
        .filter(|f| {
            matches!(
                f.kind(),
                crate::FindingKind::Invalid | crate::FindingKind::Impossible
            )
        })
        .collect();
    if refuting.is_empty() {
        return Err(why);
    }
    Ok(GuardrailReading::Findings(refuting))
}

/// Which policies blocked the answer when the guardrail's `action` is GUARDRAIL_INTERVENED
/// (the members of its assessments other than the Automated Reasoning policy, and
/// `actionReason`); `None` when it did not intervene. A guardrail that blocks content has said
/// the answer must not go out, whatever its reasoning findings say.
///
/// An `action` other than NONE and GUARDRAIL_INTERVENED (one a later API adds, or not a string)
/// is taken as an intervention: nothing says the answer may go out. An absent one is NONE.
pub fn intervention(body: &serde_json::Value) -> Option<String> {
    let unknown = match body.get("action") {
        None | Some(serde_json::Value::Null) => return None,
        Some(serde_json::Value::String(a)) if a == "NONE" => return None,
        Some(serde_json::Value::String(a)) if a == "GUARDRAIL_INTERVENED" => None,
        Some(other) => Some(other.to_string()),
    };
    let mut policies: Vec<String> = body
        .get("assessments")
        .and_then(serde_json::Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(serde_json::Value::as_object)
        .flat_map(|a| a.keys())
        .filter(|k| *k != "automatedReasoningPolicy" && *k != "invocationMetrics")
        .cloned()
        .collect();
    // Each policy once, in a stable order, wherever its assessments come.
    policies.sort();
    policies.dedup();
    let what = match unknown {
        None => "the guardrail intervened".to_string(),
        Some(action) => format!(
            "the guardrail's action is {action}, which this version does not know: taken as an \
             intervention"
        ),
    };
    let mut reason = if policies.is_empty() {
        what
    } else {
        format!("{what} ({})", policies.join(", "))
    };
    if let Some(why) = body.get("actionReason").and_then(serde_json::Value::as_str) {
        reason.push_str(": ");
        reason.push_str(why);
    }
    Some(reason)
}

/// Why this response's findings cannot stand for the whole answer: the guardrail says
/// (`guardrailCoverage.textCharacters.guarded`, at the top or in an Automated Reasoning
/// assessment's metrics) that it guarded fewer characters than the answer has, so part of the
/// answer was checked by nothing, and a VALID about the rest says nothing of it. Every count
/// reported must cover the answer: the top level's may be another policy's (a content filter
/// that read all of it) while the reasoning checks' says less. The answer is the one block sent
/// as `guard_content`; the question (`query`) is context, never guarded, so it can only add to
/// a count. The members are optional in AWS's reference: a response without them (or with
/// null) is taken as covering the answer; a count that is not a number is refused.
pub fn partial_coverage(body: &serde_json::Value, answer: &str) -> Option<String> {
    const GUARDED: &str = "/guardrailCoverage/textCharacters/guarded";
    let reasoning = body
        .get("assessments")
        .and_then(serde_json::Value::as_array)
        .into_iter()
        .flatten()
        .filter(|a| a.get("automatedReasoningPolicy").is_some())
        .filter_map(|a| a.pointer(&format!("/invocationMetrics{GUARDED}")));
    // Characters as Python and Java count them at least (code points; UTF-16 units are as
    // many or more), without the ends' whitespace, which a service may trim.
    let chars = answer.trim().chars().count() as u64;
    body.pointer(GUARDED)
        .into_iter()
        .chain(reasoning)
        .filter(|v| !v.is_null())
        .find_map(|v| match v.as_u64() {
            None => Some(format!("its coverage ({v}) is not a count of characters")),
            Some(guarded) if guarded < chars => Some(format!(
                "the guardrail guarded {guarded} of the answer's {chars} characters: the rest \
                 was checked by nothing, so its findings are not taken for the whole answer"
            )),
            Some(_) => None,
        })
}

/// Why a VALID finding of this response cannot count: one without a translation shows no
/// premise and no claim, so nothing says what it proved (the AWS reference marks every member
/// optional). It is refused as a bad response, so the validation fails closed, rather than
/// counted as a proof of the whole answer.
pub fn unshown_valid(findings: &[crate::Finding]) -> Option<String> {
    findings
        .iter()
        .position(|f| f.kind() == crate::FindingKind::Valid && f.translation().is_none())
        .map(|i| {
            format!(
                "finding {} is VALID without a translation: nothing shows what it proved, so it \
                 is not taken as a proof",
                i + 1
            )
        })
}

/// Why a VALID finding of this response rests on a policy version outside `allowed`
/// (`[validator.bedrock] policy_arns`; nothing when that is empty): the first supporting rule
/// that cites another version, or none.
pub fn foreign_valid(findings: &[crate::Finding], allowed: &[String]) -> Option<String> {
    if allowed.is_empty() {
        return None;
    }
    findings.iter().enumerate().find_map(|(i, f)| {
        let crate::Finding::Valid(v) = f else {
            return None;
        };
        v.supporting_rules.iter().flatten().find_map(|rule| {
            let arn = rule.policy_version_arn.as_deref();
            (!arn.is_some_and(|a| allowed.iter().any(|x| x == a))).then(|| {
                format!(
                    "finding {} is VALID by rule {} of policy version {}, which is not one of \
                     [validator.bedrock] policy_arns",
                    i + 1,
                    rule.identifier.as_deref().unwrap_or("(unnamed)"),
                    arn.unwrap_or("(none given)")
                )
            })
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn findings_about_part_of_the_answer_do_not_stand_for_all_of_it() {
        let answer = "  Seniors pay $22.50. Children pay nothing, é included.\n";
        let chars = answer.trim().chars().count() as u64;
        let at_top = |guarded: serde_json::Value| serde_json::json!({"guardrailCoverage": {"textCharacters": {"guarded": guarded, "total": 500}}});
        // The whole answer, or more (the question counted too): its findings stand.
        assert_eq!(partial_coverage(&at_top(chars.into()), answer), None);
        assert_eq!(partial_coverage(&at_top((chars + 40).into()), answer), None);
        // One character short: part of the answer was checked by nothing.
        let why = partial_coverage(&at_top((chars - 1).into()), answer).unwrap();
        assert!(
            why.contains(&format!("guarded {} of the answer's {chars}", chars - 1)),
            "{why}"
        );
        assert!(partial_coverage(&at_top(0.into()), answer).is_some());
        // Not a count: refused; absent or null: the member is optional.
        assert!(partial_coverage(&at_top("all".into()), answer).is_some());
        assert!(partial_coverage(&at_top((-1).into()), answer).is_some());
        assert_eq!(
            partial_coverage(&at_top(serde_json::Value::Null), answer),
            None
        );
        assert_eq!(partial_coverage(&serde_json::json!({}), answer), None);
        // Reported in the Automated Reasoning assessments' metrics: every one must cover the
        // answer, whatever the top level says (another policy may have read all of it).
        let metrics = |guarded: &[u64]| {
            let mut assessments = vec![serde_json::json!({"contentPolicy": {}})];
            for g in guarded {
                assessments.push(serde_json::json!({"automatedReasoningPolicy": {"findings": []},
                    "invocationMetrics": {"guardrailCoverage": {"textCharacters": {"guarded": g, "total": 90}}}}));
            }
            serde_json::json!({"assessments": assessments})
        };
        assert!(partial_coverage(&metrics(&[3]), answer).is_some());
        assert_eq!(partial_coverage(&metrics(&[chars, chars]), answer), None);
        assert!(partial_coverage(&metrics(&[chars, 3]), answer).is_some());
        let mut both = metrics(&[3]);
        both["guardrailCoverage"] = at_top(chars.into())["guardrailCoverage"].clone();
        assert!(
            partial_coverage(&both, answer).is_some(),
            "the top level's count is not enough"
        );
        both["guardrailCoverage"] = at_top(serde_json::Value::Null)["guardrailCoverage"].clone();
        assert!(
            partial_coverage(&both, answer).is_some(),
            "a null at the top hides nothing"
        );
    }

    #[test]
    fn a_valid_resting_on_a_policy_version_not_chosen_is_refused() {
        use crate::findings::{Finding, Rule, ValidFinding};
        let valid = |rules: Vec<Rule>| {
            Finding::Valid(ValidFinding {
                supporting_rules: Some(rules),
                ..Default::default()
            })
        };
        let ours = "arn:aws:bedrock:us-east-1:1:automated-reasoning-policy/p:2".to_string();
        let mine = || Rule::new("R1", ours.clone());
        let other = Rule::new(
            "R9",
            "arn:aws:bedrock:us-east-1:1:automated-reasoning-policy/q:1",
        );
        let bare = Rule {
            identifier: Some("R2".into()),
            ..Default::default()
        };
        let allowed = [ours.clone()];
        // Nothing configured: any version.
        assert!(foreign_valid(&[valid(vec![other.clone()])], &[]).is_none());
        assert!(foreign_valid(&[valid(vec![mine()])], &allowed).is_none());
        let why = foreign_valid(&[valid(vec![mine()]), valid(vec![mine(), other])], &allowed)
            .expect("refused");
        assert!(
            why.starts_with("finding 2 is VALID by rule R9 of policy version arn:"),
            "{why}"
        );
        let why = foreign_valid(&[valid(vec![bare])], &allowed).expect("refused");
        assert!(
            why.contains("rule R2 of policy version (none given)"),
            "{why}"
        );
        // Only VALID findings are held to it: a refutation stands whatever it cites.
        let invalid = Finding::Invalid(Default::default());
        assert!(foreign_valid(&[invalid], &allowed).is_none());
    }

    #[test]
    fn an_intervention_names_the_policies_that_blocked() {
        assert_eq!(
            intervention(
                &serde_json::json!({"action": "NONE", "assessments": [{"contentPolicy": {}}]})
            ),
            None
        );
        let body = serde_json::json!({"action": "GUARDRAIL_INTERVENED",
            "actionReason": "Guardrail blocked.",
            "assessments": [{"automatedReasoningPolicy": {"findings": []}},
                            {"contentPolicy": {"filters": [{"type": "VIOLENCE", "action": "BLOCKED"}]},
                             "invocationMetrics": {}}]});
        assert_eq!(
            intervention(&body).as_deref(),
            Some("the guardrail intervened (contentPolicy): Guardrail blocked.")
        );
        assert_eq!(
            intervention(&serde_json::json!({"action": "GUARDRAIL_INTERVENED"})).as_deref(),
            Some("the guardrail intervened")
        );
        let spread = serde_json::json!({"action": "GUARDRAIL_INTERVENED", "assessments": [
            {"contentPolicy": {}}, {"topicPolicy": {}}, {"contentPolicy": {}}]});
        assert_eq!(
            intervention(&spread).as_deref(),
            Some("the guardrail intervened (contentPolicy, topicPolicy)")
        );
    }

    /// The whole reading: blocked, refused, or findings.
    #[test]
    fn a_response_reads_as_blocked_refused_or_findings() {
        let answer = "You pay $5.";
        let body = |action: &str, guarded: u64| {
            serde_json::json!({"action": action, "assessments": [{"automatedReasoningPolicy": {"findings": [
                {"valid": {"translation": {"premises": [], "claims": [{"logic": "(= fee 5)", "naturalLanguage": "You pay $5."}]},
                           "supportingRules": [{"identifier": "R1", "policyVersionArn": "arn:p:1"}]}}]},
                "invocationMetrics": {"guardrailCoverage": {"textCharacters": {"guarded": guarded, "total": 11}}}}]})
        };
        assert!(matches!(
            read_guardrail_response(&body("NONE", 11), answer, &[]),
            Ok(GuardrailReading::Findings(f)) if f.len() == 1
        ));
        assert!(matches!(
            read_guardrail_response(&body("GUARDRAIL_INTERVENED", 11), answer, &[]),
            Ok(GuardrailReading::Blocked(_))
        ));
        assert!(read_guardrail_response(&body("NONE", 4), answer, &[]).is_err());
        assert!(read_guardrail_response(&body("NONE", 11), answer, &["arn:p:2".into()]).is_err());
        assert!(read_guardrail_response(&serde_json::json!([1]), answer, &[]).is_err());
    }

    /// An action this version does not know blocks the answer; an absent one does not.
    #[test]
    fn an_unknown_action_is_an_intervention() {
        let of = |action: serde_json::Value| {
            intervention(
                &serde_json::json!({"action": action, "assessments": [{"contentPolicy": {}}]}),
            )
        };
        let why = of("GUARDRAIL_ANONYMIZED".into()).unwrap();
        assert!(
            why.contains("GUARDRAIL_ANONYMIZED") && why.contains("contentPolicy"),
            "{why}"
        );
        assert!(of(serde_json::json!(3)).is_some());
        assert!(of("GUARDRAIL_INTERVENED".into()).is_some());
        assert_eq!(of("NONE".into()), None);
        assert_eq!(of(serde_json::Value::Null), None);
        assert_eq!(intervention(&serde_json::json!({})), None);
    }

    /// A blocked response is blocked even when a finding does not read; a response refused
    /// for its coverage or a VALID of another policy still refutes the answer where a finding
    /// says INVALID (it was refused whole, and failing open then sent the refuted answer out).
    #[test]
    fn a_refused_response_still_blocks_and_refutes() {
        let answer = "You pay $30.";
        let unreadable = serde_json::json!({"action": "GUARDRAIL_INTERVENED", "assessments": [
            {"automatedReasoningPolicy": {"findings": [{"valid": {"translation": 7}}]}}]});
        assert!(matches!(
            read_guardrail_response(&unreadable, answer, &[]),
            Ok(GuardrailReading::Blocked(_))
        ));
        let mut readable_only = unreadable.clone();
        readable_only["action"] = "NONE".into();
        assert!(read_guardrail_response(&readable_only, answer, &[]).is_err());

        let invalid = serde_json::json!({"invalid": {"translation": {"premises": [], "claims": [{"logic": "(= fee 30)"}]},
            "contradictingRules": [{"identifier": "R1", "policyVersionArn": "arn:p:1"}]}});
        let valid_elsewhere = serde_json::json!({"valid": {"translation": {"premises": [], "claims": [{"logic": "(= fee 30)"}]},
            "supportingRules": [{"identifier": "X", "policyVersionArn": "arn:other:1"}]}});
        let body = |findings: serde_json::Value, guarded: u64| {
            serde_json::json!({"action": "NONE", "assessments": [{"automatedReasoningPolicy": {"findings": findings},
                "invocationMetrics": {"guardrailCoverage": {"textCharacters": {"guarded": guarded}}}}]})
        };
        let mixed = body(serde_json::json!([valid_elsewhere, invalid]), 12);
        let Ok(GuardrailReading::Findings(kept)) =
            read_guardrail_response(&mixed, answer, &["arn:p:1".into()])
        else {
            panic!("the INVALID is kept");
        };
        assert_eq!(
            kept.iter().map(crate::Finding::kind).collect::<Vec<_>>(),
            [crate::FindingKind::Invalid]
        );
        let short = body(serde_json::json!([invalid]), 3);
        assert!(matches!(
            read_guardrail_response(&short, answer, &[]),
            Ok(GuardrailReading::Findings(f)) if f.len() == 1
        ));
        // An IMPOSSIBLE refutes as an INVALID does: kept beside it, and kept alone.
        let impossible = serde_json::json!({"impossible": {"translation": {"premises": [{"logic": "(= age 200)"}],
            "claims": [{"logic": "(= fee 30)"}]},
            "contradictingRules": [{"identifier": "R2", "policyVersionArn": "arn:p:1"}]}});
        let Ok(GuardrailReading::Findings(kept)) = read_guardrail_response(
            &body(
                serde_json::json!([valid_elsewhere, impossible, invalid]),
                12,
            ),
            answer,
            &["arn:p:1".into()],
        ) else {
            panic!("the refutations are kept");
        };
        assert_eq!(
            kept.iter().map(crate::Finding::kind).collect::<Vec<_>>(),
            [crate::FindingKind::Impossible, crate::FindingKind::Invalid]
        );
        assert!(matches!(
            read_guardrail_response(&body(serde_json::json!([impossible]), 3), answer, &[]),
            Ok(GuardrailReading::Findings(f)) if f.len() == 1
        ));
        // With nothing refuting, still refused.
        assert!(read_guardrail_response(
            &body(serde_json::json!([valid_elsewhere]), 12),
            answer,
            &["arn:p:1".into()]
        )
        .is_err());
    }
}

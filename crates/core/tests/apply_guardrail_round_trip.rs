//! A real-shaped ApplyGuardrail response body survives deserialize + serialize unchanged.

use proofgate_core::{
    aggregate_verdict, prioritize, ApplyGuardrailResponse, Finding, FindingKind, Verdict,
};
use serde_json::Value;

const BODY: &str = include_str!("fixtures/apply-guardrail-all-findings.json");

#[test]
fn every_finding_kind_round_trips_as_json_value() {
    let original: Value = serde_json::from_str(BODY).unwrap();
    let parsed: ApplyGuardrailResponse = serde_json::from_str(BODY).unwrap();
    let again = serde_json::to_value(&parsed).unwrap();
    assert_eq!(original, again);
}

#[test]
fn every_kind_is_recognised() {
    let parsed: ApplyGuardrailResponse = serde_json::from_str(BODY).unwrap();
    let kinds: Vec<FindingKind> = parsed.findings().iter().map(Finding::kind).collect();
    assert_eq!(
        kinds,
        vec![
            FindingKind::Valid,
            FindingKind::Invalid,
            FindingKind::Satisfiable,
            FindingKind::Impossible,
            FindingKind::TranslationAmbiguous,
            FindingKind::TooComplex,
            FindingKind::NoTranslations,
        ]
    );
    let top = prioritize(&parsed.findings());
    assert_eq!(top[0].kind(), FindingKind::TranslationAmbiguous);
    assert_eq!(
        aggregate_verdict(&parsed.findings()).verdict,
        Verdict::TranslationAmbiguous
    );
}

#[test]
fn fields_are_read_with_aws_names() {
    let parsed: ApplyGuardrailResponse = serde_json::from_str(BODY).unwrap();
    let findings = parsed.findings();
    let Finding::Valid(valid) = &findings[0] else {
        panic!("first is valid")
    };
    let t = valid.translation.as_ref().unwrap();
    assert_eq!(t.premises()[0].logic.as_deref(), Some("(= visitorAge 70)"));
    assert_eq!(t.confidence(), Some(1.0));
    assert_eq!(
        t.untranslated_claims.as_ref().unwrap()[0].text.as_deref(),
        Some("Have a nice visit!")
    );
    assert_eq!(
        valid.supporting_rules.as_ref().unwrap()[0]
            .identifier
            .as_deref(),
        Some("SENIOR1")
    );
    let Finding::Impossible(imp) = &findings[3] else {
        panic!("fourth is impossible")
    };
    let ids: Vec<_> = imp
        .contradicting_rules
        .iter()
        .flatten()
        .filter_map(|r| r.identifier.as_deref())
        .collect();
    assert_eq!(ids, vec!["DENIED1", "CHECKIN2"]);
}

#[test]
fn unknown_member_is_kept_and_never_valid() {
    let body = r#"[{"valid": {}}, {"provedByOracle": {"why": "trust me"}}]"#;
    let findings: Vec<Finding> = serde_json::from_str(body).unwrap();
    assert_eq!(findings[1].kind(), FindingKind::Unknown);
    assert_eq!(aggregate_verdict(&findings).verdict, Verdict::Unknown);
    let again = serde_json::to_string(&findings).unwrap();
    assert_eq!(
        serde_json::from_str::<Value>(&again).unwrap(),
        serde_json::from_str::<Value>(body).unwrap()
    );
}

#[test]
fn singular_no_translation_spelling_is_accepted() {
    let findings: Vec<Finding> = serde_json::from_str(r#"[{"noTranslation": {}}]"#).unwrap();
    assert_eq!(findings[0].kind(), FindingKind::NoTranslations);
    assert_eq!(
        "NO_TRANSLATION".parse::<FindingKind>().unwrap(),
        FindingKind::NoTranslations
    );
    assert_eq!(
        "NO_TRANSLATIONS".parse::<FindingKind>().unwrap(),
        FindingKind::NoTranslations
    );
    assert_eq!(
        "translationAmbiguous".parse::<FindingKind>().unwrap(),
        FindingKind::TranslationAmbiguous
    );
    assert!("PROVED".parse::<FindingKind>().is_err());
}

#[test]
fn malformed_findings_are_rejected_with_a_reason() {
    let err = serde_json::from_str::<Finding>(r#"{"valid": {}, "invalid": {}}"#).unwrap_err();
    assert!(err.to_string().contains("exactly one member"), "{err}");
    let err = serde_json::from_str::<Finding>(r#"{}"#).unwrap_err();
    assert!(err.to_string().contains("found none"), "{err}");
    let err = serde_json::from_str::<Finding>(r#"{"valid": {"supportingRules": 3}}"#).unwrap_err();
    assert!(err.to_string().contains("valid"), "{err}");
    let err = serde_json::from_str::<Finding>(r#"[]"#).unwrap_err();
    assert!(!err.to_string().is_empty());
}

//! Whether a validation's findings can have come from the translations the thread sent to the
//! solver. The thread checks this before it accepts findings, so live operation and replay
//! both reject findings that cite a pair no translator wrote, or a confidence the
//! translators' replies cannot give.

use super::input::{PairInput, TranslatorOutput};
use super::round::TranslationConfig;
use crate::findings::{Finding, FindingKind, Statement};

fn logic_of(list: &[Statement]) -> Vec<Option<&str>> {
    list.iter().map(|s| s.logic.as_deref()).collect()
}

fn same_pair(pair: &PairInput, premises: &[Statement], claims: &[Statement]) -> bool {
    logic_of(&pair.premises) == logic_of(premises) && logic_of(&pair.claims) == logic_of(claims)
}

/// Checks `findings` against the `translations` (one per translator) they were computed from.
/// `Err` says which finding is inconsistent and why.
pub fn check_findings(
    config: &TranslationConfig,
    translations: &[TranslatorOutput],
    findings: &[Finding],
) -> Result<(), String> {
    let k = translations.len().max(1) as f64;
    // Translators that produced at least one pair: only they can agree with anything.
    let usable = translations.iter().filter(|t| !t.pairs.is_empty()).count() as f64;
    for (i, f) in findings.iter().enumerate() {
        let kind = f.kind();
        if !matches!(
            kind,
            FindingKind::Valid
                | FindingKind::Invalid
                | FindingKind::Satisfiable
                | FindingKind::Impossible
        ) {
            continue;
        }
        let t = f
            .translation()
            .ok_or_else(|| format!("finding {i} ({}) has no translation", kind.as_str()))?;
        let written = translations
            .iter()
            .flat_map(|o| &o.pairs)
            .any(|p| same_pair(p, t.premises(), t.claims()));
        if !written {
            return Err(format!(
                "finding {i} ({}) checks a premise/claim pair that no translator wrote",
                kind.as_str()
            ));
        }
        let confidence = t
            .confidence()
            .ok_or_else(|| format!("finding {i} ({}) has no confidence", kind.as_str()))?;
        if confidence * k > usable + 1e-9 {
            return Err(format!(
                "finding {i} ({}) has confidence {confidence}, but only {usable} of {k} \
                 translators translated anything",
                kind.as_str()
            ));
        }
        if confidence * k + 1e-9 < f64::from(config.required_agreement) {
            return Err(format!(
                "finding {i} ({}) has confidence {confidence}, below the {} of {k} translators \
                 that must agree",
                kind.as_str(),
                config.required_agreement
            ));
        }
        if kind == FindingKind::Valid && t.claims().is_empty() {
            return Err(format!("finding {i} (VALID) has no claims"));
        }
    }
    Ok(())
}

/// Checks that `findings` say what the translators left untranslated (from audit format 13,
/// [`crate::audit::UNTRANSLATED_REPORTED_SINCE`]): when any translator reported text it could
/// not translate, a VALID must stand beside a NO_TRANSLATIONS finding (as the proxy's reasoner
/// adds one, carrying that text), or carry untranslated claims in its own translation, so
/// that the outcome is VALID_WITH_WARNING. The thread holds the translators' replies and can
/// tell without a solver; an app computing findings with its own checker that dropped the text
/// got a plain VALID, verified, for an answer with a claim nothing checked.
pub fn check_untranslated_reported(
    translations: &[TranslatorOutput],
    findings: &[Finding],
) -> Result<(), String> {
    let left = translations
        .iter()
        .flat_map(|t| t.untranslated_claims.iter().chain(&t.untranslated_premises))
        .next();
    let Some(left) = left else {
        return Ok(());
    };
    let valid = findings.iter().any(|f| f.kind() == FindingKind::Valid);
    let reported = findings
        .iter()
        .any(|f| f.kind() == FindingKind::NoTranslations)
        || crate::verdict::leaves_claims_untranslated(findings);
    if valid && !reported {
        return Err(format!(
            "the translators left text untranslated (\"{}\"), but the findings hold a VALID and \
             no NO_TRANSLATIONS finding for it: nothing checked that text",
            left.chars().take(80).collect::<String>()
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::findings::{Translation, ValidFinding};
    use crate::policy::PolicyDefinition;
    use crate::translation::parse_translations;

    fn config() -> TranslationConfig {
        let def = PolicyDefinition::from_json(
            r#"{"variables": [{"name": "age", "type": "INT"}, {"name": "fee", "type": "REAL"}]}"#,
        )
        .unwrap();
        TranslationConfig::new(&def, 2, 1, 1.0)
    }

    fn valid(p: &str, c: &str, confidence: f64) -> Finding {
        Finding::Valid(ValidFinding {
            translation: Some(Translation {
                premises: Some(vec![Statement::new(p, "")]),
                claims: Some(vec![Statement::new(c, "")]),
                confidence: serde_json::Number::from_f64(confidence),
                ..Default::default()
            }),
            ..Default::default()
        })
    }

    #[test]
    fn findings_must_come_from_the_translations() {
        let both = parse_translations(
            r#"{"translations": [[{"premises": ["(= age 70)"], "claims": ["(= fee 9.0)"]}],
                                 [{"premises": ["(= age 70)"], "claims": ["(= fee 9.0)"]}]]}"#,
        )
        .unwrap();
        let c = config();
        assert_eq!(
            check_findings(&c, &both, &[valid("(= age 70)", "(= fee 9.0)", 1.0)]),
            Ok(())
        );
        let e = check_findings(&c, &both, &[valid("(= age 70)", "(= fee 1.0)", 1.0)]).unwrap_err();
        assert!(e.contains("no translator wrote"), "{e}");
        let e = check_findings(&c, &both, &[valid("(= age 70)", "(= fee 9.0)", 0.5)]).unwrap_err();
        assert!(e.contains("must agree"), "{e}");

        let one_broken = vec![both[0].clone(), TranslatorOutput::default()];
        let e = check_findings(&c, &one_broken, &[valid("(= age 70)", "(= fee 9.0)", 1.0)])
            .unwrap_err();
        assert!(e.contains("only 1 of 2"), "{e}");
    }

    #[test]
    fn a_valid_beside_untranslated_text_must_report_it() {
        let mut outputs = parse_translations(
            r#"{"translations": [[{"premises": ["(= age 70)"], "claims": ["(= fee 9.0)"]}],
                                 [{"premises": ["(= age 70)"], "claims": ["(= fee 9.0)"]}]]}"#,
        )
        .unwrap();
        let proved = valid("(= age 70)", "(= fee 9.0)", 1.0);
        // Nothing left untranslated: a VALID alone is fine.
        assert_eq!(
            check_untranslated_reported(&outputs, std::slice::from_ref(&proved)),
            Ok(())
        );
        outputs[1].untranslated_claims = vec!["Seniors pay $5.".into()];
        let e = check_untranslated_reported(&outputs, std::slice::from_ref(&proved)).unwrap_err();
        assert!(
            e.contains("Seniors pay $5.") && e.contains("NO_TRANSLATIONS"),
            "{e}"
        );
        // Reported beside it, or in the VALID's own translation: accepted.
        let none = Finding::NoTranslations(Default::default());
        assert_eq!(
            check_untranslated_reported(&outputs, &[proved.clone(), none]),
            Ok(())
        );
        let mut carrying = proved.clone();
        if let Finding::Valid(v) = &mut carrying {
            v.translation.as_mut().unwrap().untranslated_claims =
                Some(vec![crate::findings::InputTextReference {
                    text: Some("Seniors pay $5.".into()),
                    ..Default::default()
                }]);
        }
        assert_eq!(check_untranslated_reported(&outputs, &[carrying]), Ok(()));
        // No VALID (a TOO_COMPLEX, say): nothing to hide.
        let too_complex = Finding::TooComplex(Default::default());
        assert_eq!(
            check_untranslated_reported(&outputs, &[too_complex]),
            Ok(())
        );
        // An untranslated premise counts too.
        outputs[1].untranslated_claims.clear();
        outputs[0].untranslated_premises = vec!["the weather".into()];
        assert!(check_untranslated_reported(&outputs, &[proved]).is_err());
    }
}

//! Runs the built `proofgate` binary: `check` on the paper's two examples, `policy show`,
//! `policy lint`, and every kind of malformed input (exit 2 with a precise message).

mod cli;

use cli::{proofgate, scenario_value, stderr};
use serde_json::Value;
use std::path::PathBuf;
use std::process::Output;

fn examples() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../examples/policies")
}

/// A scratch directory unique to one test.
fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("proofgate-cli-{}-{name}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn write(dir: &std::path::Path, file: &str, text: &str) -> String {
    let path = dir.join(file);
    std::fs::write(&path, text).unwrap();
    path.to_string_lossy().into_owned()
}

fn check(policy: &str, translations: &str) -> Output {
    proofgate(&["check", "--policy", policy, "--translations", translations])
}

fn example(name: &str) -> String {
    examples().join(name).to_string_lossy().into_owned()
}

#[test]
fn park_example_is_satisfiable_with_scenarios_differing_in_credit_use() {
    let out = check(
        &example("park-admission.json"),
        &example("park-senior-low-season.translations.json"),
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let f = &v["findings"][0]["satisfiable"];
    assert!(f.is_object(), "{v}");
    let (t, fl) = (&f["claimsTrueScenario"], &f["claimsFalseScenario"]);
    assert_eq!(scenario_value(t, "creditUnit").as_deref(), Some("0"));
    assert_eq!(scenario_value(fl, "creditUnit").as_deref(), Some("3"));
    assert_eq!(
        scenario_value(fl, "finalAdmissionFee").as_deref(),
        Some("38.125")
    );
    assert_eq!(
        scenario_value(fl, "totalExpense").as_deref(),
        Some("35.3375")
    );
    assert_eq!(f["translation"]["confidence"], 1.0);
}

#[test]
fn airline_example_is_impossible_with_both_rules() {
    let out = check(
        &example("airline-refund.json"),
        &example("airline-denied-boarding.translations.json"),
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let rules = v["findings"][0]["impossible"]["contradictingRules"]
        .as_array()
        .unwrap_or_else(|| panic!("{v}"));
    let mut ids: Vec<&str> = rules
        .iter()
        .map(|r| r["identifier"].as_str().unwrap())
        .collect();
    ids.sort();
    assert_eq!(ids, ["DENIBOARREFU", "OPERNOTTRAVE"]);
    assert!(rules[0]["policyVersionArn"]
        .as_str()
        .unwrap()
        .starts_with("sha256:"));
}

#[test]
fn policy_arn_option_is_cited() {
    let out = proofgate(&[
        "check",
        "--policy",
        &example("airline-refund.json"),
        "--translations",
        &example("airline-denied-boarding.translations.json"),
        "--policy-arn",
        "arn:aws:bedrock:us-east-1:123:automated-reasoning-policy/x:1",
    ]);
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        v["findings"][0]["impossible"]["contradictingRules"][0]["policyVersionArn"],
        "arn:aws:bedrock:us-east-1:123:automated-reasoning-policy/x:1"
    );
}

#[test]
fn malformed_inputs_exit_2_with_precise_messages() {
    let dir = scratch("malformed");
    let policy = example("airline-refund.json");
    let good_t = example("airline-denied-boarding.translations.json");
    let t = |claim: &str| {
        serde_json::json!({"translations": [[{"premises": ["didPassengerTravel"], "claims": [claim]}]]})
            .to_string()
    };
    let cases: Vec<(String, String, Vec<&str>)> = vec![
        (write(&dir, "bad.json", "{\"rules\": ["), good_t.clone(), vec!["bad.json: not a policy definition", "EOF"]),
        (
            write(&dir, "unknown-var.json", r#"{"variables":[{"name":"x","type":"int"}],"rules":[{"id":"R1","expression":"(> y 1)"}]}"#),
            good_t.clone(),
            vec!["unknown-var.json: invalid policy: rule `R1`: type error at offset 3: unknown variable `y`"],
        ),
        (
            write(&dir, "type-error.json", r#"{"variables":[{"name":"x","type":"int"},{"name":"b","type":"bool"}],"rules":[{"id":"R7","expression":"(and b x)"}]}"#),
            good_t.clone(),
            vec!["rule `R7`: type error at offset 7: wrong type: argument 2 of `and` must be Bool, found Int"],
        ),
        (
            write(&dir, "unbalanced.json", r#"{"variables":[{"name":"b","type":"bool"}],"rules":[{"id":"R2","expression":"(and b (not b)"}]}"#),
            good_t.clone(),
            vec!["rule `R2`: syntax error: unbalanced parentheses: the `(` at offset 0 is never closed"],
        ),
        (
            write(&dir, "bad-type.json", r#"{"variables":[{"name":"b","type":"Colour"}],"rules":[]}"#),
            good_t.clone(),
            vec!["variable `b` has unknown type `Colour`"],
        ),
        (policy.clone(), write(&dir, "t-bad.json", "{\"translations\": [[}"), vec!["t-bad.json: not valid JSON"]),
        (
            policy.clone(),
            write(&dir, "t-smuggle.json", &t("isRefundEligible) (assert false")),
            vec!["t-smuggle.json: at translations[0][0].claims[0]: syntax error: unexpected `)` at offset 16 after a complete term"],
        ),
        (
            policy.clone(),
            write(&dir, "t-unknown.json", &t("(= refund 3.0)")),
            vec!["t-unknown.json: at translations[0][0].claims[0]: type error at offset 3: unknown variable `refund`"],
        ),
        (
            policy.clone(),
            write(&dir, "t-type.json", &t("(+ refundAmount 1.0)")),
            vec!["expected a Boolean formula, found a term of type Real"],
        ),
        (
            policy.clone(),
            write(&dir, "t-unbalanced.json", &t("(not isRefundEligible")),
            vec!["t-unbalanced.json: at translations[0][0].claims[0]: syntax error: unbalanced parentheses"],
        ),
        (
            policy.clone(),
            write(&dir, "t-shape.json", r#"{"translations": [[{"premises": "didPassengerTravel"}]]}"#),
            vec!["at translations[0][0].premises: expected a list of statements"],
        ),
        (example("missing.json"), good_t.clone(), vec!["missing.json: could not read the file"]),
    ];
    for (policy, translations, expected) in cases {
        let out = check(&policy, &translations);
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(2), "{policy} {translations}: {err}");
        assert!(out.stdout.is_empty());
        for e in expected {
            assert!(err.contains(e), "expected {e:?} in {err:?}");
        }
    }
    let out = proofgate(&[
        "check",
        "--policy",
        &policy,
        "--translations",
        &good_t,
        "--threshold",
        "1.5",
    ]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("--threshold must be greater than 0 and at most 1"));
}

#[test]
fn policy_show_prints_smtlib_and_english() {
    let out = proofgate(&["policy", "show", &example("airline-refund.json")]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        text.contains("DisruptionReason: NO_DISRUPTION | DENIED_BOARDING"),
        "{text}"
    );
    assert!(
        text.contains("didFlightOperate : Bool  -- Whether the flight operated"),
        "{text}"
    );
    assert!(
        text.contains("SMT-LIB: (=> (= flightDisruptionReason DENIED_BOARDING) isRefundEligible)"),
        "{text}"
    );
    assert!(text.contains("English: If the reason the passenger's travel was disrupted is equal to DENIED_BOARDING, then whether the passenger is eligible for a refund is true."), "{text}");

    let out = proofgate(&["policy", "show", "--json", &example("park-admission.json")]);
    let shown: Value = serde_json::from_slice(&out.stdout).unwrap();
    let original: Value =
        serde_json::from_str(&std::fs::read_to_string(example("park-admission.json")).unwrap())
            .unwrap();
    assert_eq!(shown, original);
}

#[test]
fn policy_lint_reports_each_problem_kind() {
    let out = proofgate(&["policy", "lint", &example("park-admission.json")]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );

    let dir = scratch("lint");
    let policy = write(
        &dir,
        "lint.json",
        r#"{"types":[{"name":"Unused","values":[{"value":"A"}]}],
            "variables":[{"name":"x","type":"int"},{"name":"y","type":"int"},{"name":"b","type":"bool"},
                         {"name":"idle","type":"real"},{"name":"c","type":"bool"}],
            "rules":[{"id":"BIG","expression":"(> x 10)"},{"id":"SMALL","expression":"(< x 5)"},
                     {"id":"TAUT","expression":"(or b (not b))"},{"id":"OTHER","expression":"(=> c (> y 0))"},
                     {"id":"BROKEN","expression":"(> nope 1)"}]}"#,
    );
    let out = proofgate(&["policy", "lint", "--json", &policy]);
    assert_eq!(out.status.code(), Some(1));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let issues = v["issues"].as_array().unwrap();
    let find = |kind: &str| {
        issues
            .iter()
            .find(|i| i["kind"] == kind)
            .unwrap_or_else(|| panic!("no {kind} in {v}"))
    };
    assert!(find("RULE_ERROR")["message"]
        .as_str()
        .unwrap()
        .contains("unknown variable `nope`"));
    assert_eq!(
        find("CONTRADICTORY_RULES")["rules"],
        serde_json::json!(["BIG", "SMALL"])
    );
    assert_eq!(
        find("ALWAYS_TRUE_RULE")["rules"],
        serde_json::json!(["TAUT"])
    );
    assert_eq!(
        find("UNUSED_VARIABLE")["names"],
        serde_json::json!(["idle"])
    );
    assert_eq!(find("UNUSED_TYPE")["names"], serde_json::json!(["Unused"]));
    assert!(find("DISJOINT_RULE_GROUPS")["message"]
        .as_str()
        .unwrap()
        .contains("3 independent groups"));

    let out = proofgate(&["policy", "lint", &policy]);
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        text.contains("error: the rules `BIG`, `SMALL` contradict each other"),
        "{text}"
    );

    let out = proofgate(&["policy", "lint", &write(&dir, "broken.json", "[")]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("broken.json: not a policy definition"));
}

#[test]
fn existing_subcommands_still_work() {
    let dir = scratch("existing");
    let reply = write(&dir, "reply.md", "DECISION: REWRITE\nANSWER: yes");
    let out = proofgate(&["decision", &reply]);
    assert!(out.status.success(), "{}", stderr(&out));
    let findings = write(
        &dir,
        "f.json",
        r#"[{"valid": {"translation": {"claims": [{"logic": "(= fee 5)"}]},
                       "supportingRules": [{"identifier": "R1"}]}}]"#,
    );
    let out = proofgate(&["findings", &findings]);
    assert!(out.status.success(), "{}", stderr(&out));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["verdict"]["verdict"], "VALID");
    // A VALID that names no rule proved nothing of the policy.
    let findings = write(&dir, "g.json", r#"[{"valid": {}}]"#);
    let out = proofgate(&["findings", &findings]);
    assert!(out.status.success(), "{}", stderr(&out));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["verdict"]["verdict"], "NO_TRANSLATIONS");
    // A response whose guardrail blocked the answer is never VALID, whatever its findings.
    let response = write(
        &dir,
        "blocked.json",
        r#"{"action": "GUARDRAIL_INTERVENED", "assessments": [
              {"contentPolicy": {"filters": [{"type": "VIOLENCE", "action": "BLOCKED"}]}},
              {"automatedReasoningPolicy": {"findings": [{"valid": {
                  "translation": {"claims": [{"logic": "(= fee 5)"}]},
                  "supportingRules": [{"identifier": "R1"}]}}]}}]}"#,
    );
    let out = proofgate(&["findings", &response]);
    assert!(out.status.success(), "{}", stderr(&out));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["verdict"]["verdict"], "BLOCKED", "{v}");
}

#[test]
fn trivial_pairs_are_not_covered_never_valid() {
    let dir = scratch("trivial");
    for (name, premises, claims) in [
        ("empty", r#"["(= ageClass SENIOR)"]"#, "[]"),
        ("true", r#"["(= ageClass SENIOR)"]"#, r#"["true"]"#),
        (
            "restated",
            r#"["(= ageClass SENIOR)"]"#,
            r#"["(= ageClass SENIOR)"]"#,
        ),
        (
            "no-rule",
            r#"["(= cashAmount 32.5)"]"#,
            r#"["(>= cashAmount 30.0)"]"#,
        ),
    ] {
        let t = write(
            &dir,
            &format!("{name}.json"),
            &format!(r#"{{"translations": [[{{"premises": {premises}, "claims": {claims}}}]]}}"#),
        );
        let out = check(&example("park-admission.json"), &t);
        assert!(out.status.success(), "{name}: {}", stderr(&out));
        let v: Value = serde_json::from_slice(&out.stdout).unwrap();
        let f = &v["findings"][0];
        assert!(f.get("valid").is_none(), "{name}: {v}");
        assert_eq!(
            f["noTranslations"]["logicWarning"]["type"], "ALWAYS_TRUE",
            "{name}: {v}"
        );
    }
}

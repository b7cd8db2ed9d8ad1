//! Policies to and from Amazon Bedrock: an AWS-generated definition (NUMBER variables,
//! multi-line expressions, the build-workflow wrapper) loads, lints and checks like AWS;
//! non-policies are errors; `policy export --aws` / `import` round-trip; `policy pull` against
//! a scripted control plane; the ApplyGuardrail-compatible endpoint validated against botocore.

mod cli;
mod proxy;
mod scripted;

use cli::{proofgate, stderr, stdout};
use scripted::repo_root;
use serde_json::{json, Value};
use std::path::PathBuf;

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!(
        "pg-aws-{name}-{}-{}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos()
    ));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn path(p: &std::path::Path) -> &str {
    p.to_str().unwrap()
}

fn repo(rel: &str) -> String {
    repo_root().join(rel).display().to_string()
}

fn read_json(p: &str) -> Value {
    serde_json::from_str(&std::fs::read_to_string(p).unwrap()).unwrap()
}

const LOAN: &str = "tests/fixtures/aws/loan-policy.build-workflow.json";
const LOAN_RECORDED: &str = "tests/fixtures/aws/loan-policy.apply-guardrail.json";

/// A finding's kind (its one member) and cited rule ids.
fn kind_and_rules(finding: &Value) -> (String, Vec<String>) {
    let (kind, body) = finding.as_object().unwrap().iter().next().unwrap();
    let rules = body
        .get("supportingRules")
        .or_else(|| body.get("contradictingRules"))
        .and_then(Value::as_array)
        .map(|rs| {
            rs.iter()
                .map(|r| r["identifier"].as_str().unwrap().to_string())
                .collect()
        })
        .unwrap_or_default();
    (kind.clone(), rules)
}

#[test]
fn aws_generated_policy_loads_lints_and_checks_like_aws() {
    let loan = repo(LOAN);
    let o = proofgate(&["policy", "show", &loan]);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = stdout(&o);
    assert!(out.contains("loanAmount : Real"), "{out}");
    assert!(out.contains("[H5G7F1D3S9A2]"), "{out}");

    // Lint: AWS would accept it; its one always-true rule is flagged (a warning: exit 1).
    let o = proofgate(&["policy", "lint", &loan, "--json"]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let report: Value = serde_json::from_slice(&o.stdout).unwrap();
    let issues = report["issues"].as_array().unwrap();
    assert!(
        issues.iter().all(|i| i["severity"] != "error"),
        "{issues:#?}"
    );
    let always_true: Vec<&Value> = issues
        .iter()
        .filter(|i| i["kind"] == "ALWAYS_TRUE_RULE")
        .collect();
    assert_eq!(always_true.len(), 1, "{issues:#?}");
    assert_eq!(always_true[0]["rules"], json!(["P2L8K4J6H1G3"]));

    // Check AWS's recorded premises and claims: the same finding kinds and rule ids.
    let recorded = read_json(&repo(LOAN_RECORDED));
    let findings = recorded["assessments"][0]["automatedReasoningPolicy"]["findings"]
        .as_array()
        .unwrap();
    assert_eq!(findings.len(), 4);
    let dir = scratch("loan");
    for (i, finding) in findings.iter().enumerate() {
        let (kind, rules) = kind_and_rules(finding);
        let translation = &finding[&kind]["translation"];
        let t = dir.join(format!("t{i}.json"));
        std::fs::write(
            &t,
            json!({"translations": [[{
                "premises": translation["premises"],
                "claims": translation["claims"],
            }]]})
            .to_string(),
        )
        .unwrap();
        let o = proofgate(&[
            "check",
            "--policy",
            &loan,
            "--translations",
            path(&t),
            "--policy-arn",
            "arn:aws:bedrock:us-east-1:123456789012:automated-reasoning-policy/q7w3e9r2t5y1:1",
        ]);
        assert!(o.status.success(), "{}", stderr(&o));
        let ours: Value = serde_json::from_slice(&o.stdout).unwrap();
        let ours = ours["findings"].as_array().unwrap();
        assert_eq!(ours.len(), 1, "{ours:#?}");
        let (our_kind, mut our_rules) = kind_and_rules(&ours[0]);
        our_rules.sort();
        let mut rules = rules;
        rules.sort();
        assert_eq!(
            (our_kind, our_rules),
            (kind, rules),
            "finding {i}: {ours:#?}"
        );
    }
}

#[test]
fn json_that_is_not_a_policy_is_an_error_everywhere() {
    let dir = scratch("foo");
    let foo = dir.join("foo.json");
    std::fs::write(&foo, r#"{"foo": 1}"#).unwrap();
    let t = repo("examples/policies/park-senior-low-season.translations.json");
    for args in [
        vec!["policy", "lint", path(&foo)],
        vec!["policy", "show", path(&foo)],
        vec!["policy", "show", "--json", path(&foo)],
        vec!["policy", "gen-tests", path(&foo)],
        vec!["policy", "export", "--aws", path(&foo)],
        vec!["policy", "import", path(&foo)],
        vec!["check", "--policy", path(&foo), "--translations", &t],
    ] {
        let o = proofgate(&args);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", stdout(&o));
        assert!(
            stderr(&o).contains("not a policy definition: no `types`, `variables` or `rules` found (top-level members: `foo`)"),
            "{args:?}: {}",
            stderr(&o)
        );
    }
}

#[test]
fn shipped_examples_pass_the_aws_lint_and_round_trip_through_export_and_import() {
    let dir = scratch("examples");
    for name in ["park-admission", "airline-refund"] {
        let policy = repo(&format!("examples/policies/{name}.json"));
        let o = proofgate(&["policy", "lint", &policy]);
        if name == "airline-refund" {
            // The paper's conflict, on purpose: lint names it.
            assert!(
                stdout(&o).contains("rule `DENIBOARREFU` conflicts with the other rules"),
                "{}",
                stdout(&o)
            );
        } else {
            assert!(o.status.success(), "{}", stdout(&o));
            assert!(stdout(&o).contains("no issues"), "{}", stdout(&o));
        }

        let aws = dir.join(format!("{name}.aws.json"));
        let o = proofgate(&["policy", "export", "--aws", &policy, "--out", path(&aws)]);
        assert!(o.status.success(), "{}", stderr(&o));
        // Already in AWS form: nothing renamed.
        let mapping = format!("{}.rule-ids.json", aws.display());
        assert_eq!(read_json(&mapping), json!({"ruleIds": []}));
        assert_eq!(read_json(path(&aws)), read_json(&policy));

        let back = dir.join(format!("{name}.back.json"));
        let o = proofgate(&[
            "policy",
            "import",
            path(&aws),
            "--mapping",
            &mapping,
            "--out",
            path(&back),
        ]);
        assert!(o.status.success(), "{}", stderr(&o));
        assert_eq!(read_json(path(&back)), read_json(&policy));
    }
}

#[test]
fn export_renames_rule_ids_for_aws_and_import_restores_them() {
    let dir = scratch("rename");
    let original = json!({
        "version": "1.0",
        "variables": [
            {"name": "age", "type": "int", "description": "The visitor's age"},
            {"name": "isSenior", "type": "BOOL", "description": "Whether the visitor is a senior"}
        ],
        "rules": [
            {"id": "SENIOR_DEFINITION", "expression": "(= isSenior (> age 65))"},
            {"id": "AGE_NON_NEGATIVE", "expression": "(>= age 0)"}
        ]
    });
    let policy = dir.join("p.json");
    std::fs::write(&policy, original.to_string()).unwrap();
    let o = proofgate(&["policy", "lint", path(&policy), "--json"]);
    let report: Value = serde_json::from_slice(&o.stdout).unwrap();
    let rejected: Vec<&Value> = report["issues"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|i| i["kind"] == "AWS_REJECTS")
        .collect();
    assert_eq!(rejected.len(), 2, "{report:#}");
    assert_eq!(o.status.code(), Some(1));

    let aws = dir.join("p.aws.json");
    let mapping = dir.join("ids.json");
    let o = proofgate(&[
        "policy",
        "export",
        "--aws",
        path(&policy),
        "--out",
        path(&aws),
        "--mapping",
        path(&mapping),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stderr(&o).contains("2 rule ids renamed"), "{}", stderr(&o));
    let exported = read_json(path(&aws));
    assert_eq!(exported["rules"][0]["id"], "SENIORDEFINI");
    assert_eq!(exported["rules"][1]["id"], "AGENONNEGATI");
    assert_eq!(exported["variables"][0]["type"], "INT");
    assert_eq!(
        read_json(path(&mapping)),
        json!({"ruleIds": [
            {"from": "SENIOR_DEFINITION", "to": "SENIORDEFINI"},
            {"from": "AGE_NON_NEGATIVE", "to": "AGENONNEGATI"}
        ]})
    );
    let o = proofgate(&["policy", "lint", path(&aws)]);
    assert!(o.status.success(), "{}", stdout(&o));

    // Import restores the ids; without the mapping the AWS ids stay.
    let o = proofgate(&["policy", "import", path(&aws), "--mapping", path(&mapping)]);
    assert!(o.status.success(), "{}", stderr(&o));
    let back: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(back["rules"], original["rules"]);
    let o = proofgate(&["policy", "import", path(&aws)]);
    let plain: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(plain["rules"][0]["id"], "SENIORDEFINI");

    // What only an author can fix is refused, naming it.
    let bad = dir.join("bad.json");
    std::fs::write(
        &bad,
        r#"{"variables": [{"name": "x", "type": "INT", "description": "d"}],
            "rules": [{"id": "R1", "expression": "(> x 0)", "alternateExpression": "THE_LONG_ONE"}]}"#
            .replace("THE_LONG_ONE", &"x".repeat(2049)),
    )
    .unwrap();
    let o = proofgate(&["policy", "export", "--aws", path(&bad)]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("rules[0].alternateExpression: rule `")
            && stderr(&o)
                .contains("has an alternateExpression of 2049 characters: AWS requires 1 to 2048"),
        "{}",
        stderr(&o)
    );
}

#[cfg(feature = "bedrock")]
mod pull {
    use super::*;
    use scripted::Server;

    const ARN: &str =
        "arn:aws:bedrock:us-east-1:123456789012:automated-reasoning-policy/q7w3e9r2t5y1";

    fn aws_env() -> Vec<(&'static str, &'static str)> {
        vec![
            ("AWS_ACCESS_KEY_ID", "AKIDEXAMPLE"),
            ("AWS_SECRET_ACCESS_KEY", "secret"),
            ("AWS_EC2_METADATA_DISABLED", "true"),
            ("AWS_REGION", "us-east-1"),
        ]
    }

    fn pull(args: &[&str]) -> std::process::Output {
        std::process::Command::new(env!("CARGO_BIN_EXE_proofgate"))
            .args(args)
            .envs(aws_env())
            .output()
            .unwrap()
    }

    fn server() -> (Server, Value) {
        let loan = read_json(&repo(LOAN));
        let def = loan["buildWorkflowAssets"]["policyDefinition"].clone();
        let mut v2 = def.clone();
        v2["rules"].as_array_mut().unwrap().truncate(2);
        let empty = json!({"version": "1.0", "types": [], "variables": [], "rules": []});
        let server = Server::python(
            "scripted_guardrail.py",
            &json!({
                "policies": {ARN: empty, format!("{ARN}:2"): v2},
                "build_workflows": {ARN: [
                    {"buildWorkflowId": "11111111-1111-4111-8111-111111111111", "status": "COMPLETED",
                     "updatedAt": "2026-11-01T10:00:00Z", "definition": {"version": "1.0", "rules": []}},
                    {"buildWorkflowId": "5f0c2a9e-7b1d-4c3e-9a8f-2d6b1e4c7a90", "status": "COMPLETED",
                     "updatedAt": "2026-11-20T10:00:00Z", "definition": def},
                    {"buildWorkflowId": "22222222-2222-4222-8222-222222222222", "status": "FAILED",
                     "updatedAt": "2026-11-21T10:00:00Z", "definition": {"rules": []}}
                ]}
            }),
        );
        (server, loan)
    }

    #[test]
    fn pulls_a_version_or_the_latest_completed_build() {
        let (server, loan) = server();
        let dir = scratch("pull");
        let out = dir.join("v2.json");
        let o = pull(&[
            "policy",
            "pull",
            ARN,
            "--version",
            "2",
            "--out",
            path(&out),
            "--endpoint-url",
            &server.url(),
        ]);
        assert!(o.status.success(), "{}", stderr(&o));
        assert!(
            stderr(&o).contains("pulled 1 types, 8 variables, 2 rules (export of"),
            "{}",
            stderr(&o)
        );
        assert_eq!(read_json(path(&out))["rules"].as_array().unwrap().len(), 2);
        let req = &server.received()[0];
        assert_eq!(
            req["path"],
            format!(
                "/automated-reasoning-policies/{}/export",
                ARN.replace(':', "%3A").replace('/', "%2F") + "%3A2"
            )
        );

        // The draft is empty (the build was never applied): the latest completed build's
        // definition, with every member AWS sent.
        let out = dir.join("latest.json");
        let config = dir.join("proofgate.toml");
        std::fs::write(
            &config,
            format!(
                "[validator]\nkind = \"bedrock\"\n[validator.bedrock]\nguardrail_id = \"g\"\nguardrail_version = \"1\"\nregion = \"us-east-1\"\nendpoint_url = \"{}\"\n",
                server.url()
            ),
        )
        .unwrap();
        let o = pull(&[
            "policy",
            "pull",
            ARN,
            "--out",
            path(&out),
            "--config",
            path(&config),
        ]);
        assert!(o.status.success(), "{}", stderr(&o));
        assert!(
            stderr(&o).contains("build workflow 5f0c2a9e-7b1d-4c3e-9a8f-2d6b1e4c7a90"),
            "{}",
            stderr(&o)
        );
        assert_eq!(
            read_json(path(&out)),
            loan["buildWorkflowAssets"]["policyDefinition"]
        );
        let o = proofgate(&["policy", "lint", path(&out), "--json"]);
        let report: Value = serde_json::from_slice(&o.stdout).unwrap();
        assert!(report["issues"]
            .as_array()
            .unwrap()
            .iter()
            .all(|i| i["severity"] != "error"));

        let o = pull(&[
            "policy",
            "pull",
            ARN,
            "--build-workflow",
            "--out",
            path(&dir.join("b.json")),
            "--endpoint-url",
            &server.url(),
        ]);
        assert!(o.status.success(), "{}", stderr(&o));
        let paths: Vec<String> = server
            .received()
            .iter()
            .map(|r| {
                format!(
                    "{}?{}",
                    r["path"].as_str().unwrap(),
                    r["query"].as_str().unwrap_or("")
                )
            })
            .collect();
        assert!(
            paths.last().unwrap().ends_with(
                "/build-workflows/5f0c2a9e-7b1d-4c3e-9a8f-2d6b1e4c7a90/result-assets?assetType=POLICY_DEFINITION"
            ),
            "{paths:?}"
        );
    }

    #[test]
    fn failures_say_what_went_wrong() {
        let (server, _) = server();
        let dir = scratch("pull-err");
        let other = ARN.replace("q7w3e9r2t5y1", "zzzzzzzzzzzz");
        let o = pull(&[
            "policy",
            "pull",
            &other,
            "--out",
            path(&dir.join("x.json")),
            "--endpoint-url",
            &server.url(),
        ]);
        assert_eq!(o.status.code(), Some(2));
        let err = stderr(&o);
        assert!(
            err.contains("ExportAutomatedReasoningPolicyVersion"),
            "{err}"
        );
        assert!(err.contains("not found"), "{err}");

        let o = pull(&[
            "policy",
            "pull",
            "not-an-arn",
            "--out",
            path(&dir.join("y.json")),
        ]);
        assert_eq!(o.status.code(), Some(2));
        assert!(
            stderr(&o).contains("is not an Automated Reasoning policy ARN"),
            "{}",
            stderr(&o)
        );
    }
}

/// The ApplyGuardrail-compatible endpoint, as boto3's model describes ApplyGuardrail: every
/// required member, type, enum, length and pattern (policyVersionArn from the config).
#[test]
fn guardrail_endpoint_response_validates_against_the_botocore_model() {
    use proxy::{config, Proxy};
    let script: Value = serde_json::from_str(
        &std::fs::read_to_string(repo_root().join("examples/demo/recorded-llm.json")).unwrap(),
    )
    .unwrap();
    let llm = scripted::Server::python("scripted_llm.py", &script);
    let arn = "arn:aws:bedrock:us-east-1:123456789012:automated-reasoning-policy/abcdefghijkl:3";
    let toml = config(&format!("{}/v1", llm.url()), "", "").replace(
        "translator_count = 3",
        &format!("translator_count = 3\npolicy_arn = \"{arn}\""),
    );
    let proxy = Proxy::start("botocore", &toml);
    let body = json!({
        "source": "OUTPUT",
        "content": [
            {"text": {"text": "I am 70 and visit in the low season without credits. What is my admission fee after the senior discount?", "qualifiers": ["query"]}},
            {"text": {"text": "Seniors get 40% off the $50 fee, so you pay $30 after the discount.", "qualifiers": ["guard_content"]}}
        ]
    });
    let out = std::process::Command::new("curl")
        .args([
            "-s",
            "-X",
            "POST",
            "-H",
            "content-type: application/json",
            "--data",
            &body.to_string(),
            &format!("{}/guardrail/local/version/1/apply", proxy.url),
        ])
        .output()
        .unwrap();
    let response: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|_| panic!("{}", String::from_utf8_lossy(&out.stdout)));
    let findings = response["assessments"][0]["automatedReasoningPolicy"]["findings"]
        .as_array()
        .unwrap();
    assert!(findings[0]["invalid"].is_object(), "{response:#}");
    assert_eq!(
        findings[0]["invalid"]["contradictingRules"][0]["policyVersionArn"],
        arn
    );
    let usage = &response["assessments"][0]["invocationMetrics"]["usage"];
    for counter in [
        "topicPolicyUnits",
        "contentPolicyUnits",
        "wordPolicyUnits",
        "sensitiveInformationPolicyUnits",
        "sensitiveInformationPolicyFreeUnits",
        "contextualGroundingPolicyUnits",
    ] {
        assert_eq!(usage[counter], 0, "{counter}");
    }

    let dir = scratch("botocore");
    for (name, file) in [
        ("ours", dir.join("response.json")),
        (
            "example",
            repo_root().join("examples/guardrail/apply-guardrail-response.json"),
        ),
        ("recorded", repo_root().join(LOAN_RECORDED)),
    ] {
        if name == "ours" {
            std::fs::write(&file, response.to_string()).unwrap();
        }
        let o = std::process::Command::new("python3")
            .arg(repo_root().join("tests/support/botocore_shape.py"))
            .args(["bedrock-runtime", "ApplyGuardrail"])
            .arg(&file)
            .output()
            .unwrap();
        assert!(o.status.success(), "{name}: {}", stdout(&o));
        assert!(
            stdout(&o).contains("0 problem(s)"),
            "{name}: {}",
            stdout(&o)
        );
    }
}

//! Runs the built `proofgate` binary for policy authoring: `policy formalize` against the
//! scripted LLM replaying recorded replies for the paper's park-admission text, `policy
//! gen-tests` and `policy test` on the shipped policies (and a broken copy), and `policy diff`.

mod cli;
mod scripted;

use cli::{proofgate, scenario_value, stderr, stdout};
use scripted::{repo_root, Server};
use serde_json::Value;
use std::path::{Path, PathBuf};

fn scratch(name: &str) -> PathBuf {
    let dir =
        std::env::temp_dir().join(format!("proofgate-authoring-{}-{name}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn path(p: &Path) -> String {
    p.to_string_lossy().into_owned()
}

fn example(rel: &str) -> String {
    path(&repo_root().join("examples").join(rel))
}

fn fixture(name: &str) -> Value {
    let text = std::fs::read_to_string(repo_root().join("tests/fixtures").join(name)).unwrap();
    serde_json::from_str(&text).unwrap()
}

/// `policy gen-tests POLICY --out DIR/NAME`, returning the file.
fn gen_tests(policy: &str, dir: &Path, name: &str) -> String {
    let out = path(&dir.join(name));
    let o = proofgate(&["policy", "gen-tests", policy, "--out", &out]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("where the rule is decisive"),
        "{}",
        stderr(&o)
    );
    out
}

/// The park policy with one rule's expression replaced, written to `dir`.
fn broken_park(dir: &Path, rule: &str, expression: &str) -> String {
    let mut def: Value = serde_json::from_str(
        &std::fs::read_to_string(example("policies/park-admission.json")).unwrap(),
    )
    .unwrap();
    for r in def["rules"].as_array_mut().unwrap() {
        if r["id"] == rule {
            r["expression"] = Value::String(expression.into());
        }
    }
    let p = dir.join("park-broken.json");
    std::fs::write(&p, def.to_string()).unwrap();
    path(&p)
}

#[test]
fn formalize_the_park_text_lints_clean_and_passes_the_park_tests() {
    let llm = Server::python("scripted_llm.py", &fixture("formalize-park.llm.json"));
    let dir = scratch("formalize");
    let policy = path(&dir.join("park.json"));
    let report = path(&dir.join("report.json"));
    let o = proofgate(&[
        "policy",
        "formalize",
        &example("docs/park-admission.md"),
        "--out",
        &policy,
        "--report",
        &report,
        "--llm-url",
        &format!("{}/v1", llm.url()),
        "--llm-model",
        "recorded",
    ]);
    let err = stderr(&o);
    assert!(o.status.success(), "{err}");
    // Progress per span, the repair, the merge.
    assert!(err.contains("[1/5] Park admission fees"), "{err}");
    assert!(
        err.contains("[3/5] Discount (line 12): 1 types, 8 variables, 7 rules, 1 repair"),
        "{err}"
    );
    assert!(err.contains("[5/5] Tax (line 20)"), "{err}");
    assert!(
        err.contains("`finalFee` (span 4) unified with `finalAdmissionFee`"),
        "{err}"
    );
    assert!(err.contains("rule `FINAL_FEE` dropped"), "{err}");
    // Rule ids in AWS's form, so the policy imports into Bedrock as written.
    assert!(
        err.contains("aws: rule `PAYMENT` is `PAYMENT00000`"),
        "{err}"
    );
    assert!(err.contains("lint: no issues"), "{err}");
    // The repair request carried the type error back to the LLM.
    let received = llm.received();
    assert_eq!(received.len(), 6, "5 spans + 1 repair");
    let repair = received[3]["body"]["messages"].to_string();
    assert!(
        repair.contains("unknown variable `SENIOR_CITIZEN`"),
        "{repair}"
    );

    // Each rule records its source span; the merge rewrote finalFee.
    let def: Value = serde_json::from_str(&std::fs::read_to_string(&policy).unwrap()).unwrap();
    for r in def["rules"].as_array().unwrap() {
        assert!(r["source"]["span"].as_u64().is_some(), "{r}");
        assert!(r["source"]["text"].as_str().is_some_and(|t| !t.is_empty()));
    }
    let payment = def["rules"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["id"] == "PAYMENT00000")
        .unwrap();
    assert_eq!(
        payment["expression"],
        "(and (>= cashAmount 0.0) (= finalAdmissionFee (+ customerCredits cashAmount)))"
    );
    assert_eq!(payment["source"]["section"], "Credit");
    let report: Value = serde_json::from_str(&std::fs::read_to_string(&report).unwrap()).unwrap();
    assert_eq!(report["spans"][2]["attempts"], 2);

    // Lints clean.
    let o = proofgate(&["policy", "lint", &policy]);
    assert!(o.status.success(), "{}", stdout(&o));
    assert!(stdout(&o).contains("no issues"));

    // The reasoner's park test: SATISFIABLE, the scenarios differ in credit use.
    let o = proofgate(&[
        "check",
        "--policy",
        &policy,
        "--translations",
        &example("policies/park-senior-low-season.translations.json"),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    let f = &v["findings"][0]["satisfiable"];
    assert!(f.is_object(), "{v}");
    let (t, fl) = (&f["claimsTrueScenario"], &f["claimsFalseScenario"]);
    assert_eq!(
        scenario_value(t, "isEntryAllowed").as_deref(),
        Some("false")
    );
    assert_eq!(
        scenario_value(fl, "isEntryAllowed").as_deref(),
        Some("true")
    );
    // Which models Z3 picks depends on the encoding; what must hold is the paper's point: the
    // scenarios differ in credit use, and with 3 increments of credit the senior can enter.
    assert_ne!(
        scenario_value(t, "creditUnit"),
        scenario_value(fl, "creditUnit")
    );
    assert_eq!(scenario_value(fl, "creditUnit").as_deref(), Some("3"));
    assert_eq!(
        scenario_value(fl, "totalExpense").as_deref(),
        Some("35.3375")
    );

    // Every test generated from the hand-written park policy passes on the formalized one,
    // and so do the shipped park tests that need no LLM.
    let tests = gen_tests(
        &example("policies/park-admission.json"),
        &dir,
        "park.tests.json",
    );
    let o = proofgate(&["policy", "test", &policy, &tests]);
    assert!(o.status.success(), "{}", stdout(&o));
    assert!(stdout(&o).contains(" 0 failed, 0 errors"), "{}", stdout(&o));
}

#[test]
fn generated_tests_pass_on_the_shipped_policies() {
    let dir = scratch("generated");
    for (policy, name) in [
        ("policies/park-admission.json", "park.tests.json"),
        ("policies/airline-refund.json", "airline.tests.json"),
    ] {
        let tests = gen_tests(&example(policy), &dir, name);
        let suite: Value = serde_json::from_str(&std::fs::read_to_string(&tests).unwrap()).unwrap();
        let cases = suite["tests"].as_array().unwrap();
        assert!(cases.iter().any(|c| c["decisive"] == true));
        assert!(cases.iter().any(|c| c["decisive"] == false));
        let o = proofgate(&["policy", "test", &example(policy), &tests]);
        assert!(o.status.success(), "{}", stdout(&o));
        let out = stdout(&o);
        assert!(out.starts_with("RESULT"), "{out}");
        assert!(
            out.contains(&format!("{} passed, 0 failed, 0 errors", cases.len())),
            "{out}"
        );
    }
}

#[test]
fn a_broken_copy_fails_generated_tests_naming_the_rule() {
    let dir = scratch("broken");
    let tests = gen_tests(
        &example("policies/park-admission.json"),
        &dir,
        "park.tests.json",
    );
    // The senior discount changed from 40% to 30%.
    let broken = broken_park(
        &dir,
        "DISCOUNTRATE",
        "(= discountRate (ite discountApplies (ite usesCredits 0.25 0.30) 0.0))",
    );
    let o = proofgate(&["policy", "test", &broken, &tests]);
    assert_eq!(o.status.code(), Some(1), "{}", stdout(&o));
    let out = stdout(&o);
    let failing: Vec<&str> = out.lines().filter(|l| l.starts_with("FAIL")).collect();
    assert!(
        failing
            .iter()
            .any(|l| l.contains("DISCOUNTRATE/decisive-valid")
                && l.trim_end().ends_with("DISCOUNTRATE")),
        "{out}"
    );
    assert!(out.contains("contradicting rules: DISCOUNTRATE"), "{out}");
    assert!(!out.contains(" 0 failed"), "{out}");

    // The same change through --json.
    let o = proofgate(&["policy", "test", &broken, &tests, "--json"]);
    let report: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert!(report["failed"].as_u64().unwrap() > 0);
    let failed = report["results"]
        .as_array()
        .unwrap()
        .iter()
        // One situation per branch of the rule: the one with the changed rate fails.
        .find(|r| {
            r["id"]
                .as_str()
                .is_some_and(|id| id.starts_with("DISCOUNTRATE/decisive-valid"))
                && r["status"] == "failed"
        })
        .unwrap();
    assert_eq!(failed["status"], "failed");
    assert_eq!(failed["rule"], "DISCOUNTRATE");
    assert_eq!(failed["actual"], "INVALID");
    assert!(failed["findings"][0]["invalid"].is_object());
}

#[test]
fn shipped_test_files_pass_with_recorded_translations() {
    let o = proofgate(&[
        "policy",
        "test",
        &example("policies/airline-refund.json"),
        &example("policies/airline-refund.tests.json"),
    ]);
    assert!(o.status.success(), "{}", stdout(&o));

    // Question/answer cases need translators: without them they are errors (exit 1) that
    // say what to do, and the other cases still run.
    let park = example("policies/park-admission.json");
    let park_tests = example("policies/park-admission.tests.json");
    let o = proofgate(&["policy", "test", &park, &park_tests]);
    assert_eq!(o.status.code(), Some(1));
    let out = stdout(&o);
    assert!(out.contains("ERROR  paper-senior-low-season"), "{out}");
    assert!(
        out.contains("needs LLM translators (pass --config or --llm-url)"),
        "{out}"
    );
    assert!(out.contains("3 passed, 0 failed, 3 errors"), "{out}");

    let llm = Server::python("scripted_llm.py", &fixture("translate-park.llm.json"));
    let url = format!("{}/v1", llm.url());
    let o = proofgate(&[
        "policy",
        "test",
        &park,
        &park_tests,
        "--llm-url",
        &url,
        "--llm-model",
        "recorded",
    ]);
    assert!(o.status.success(), "{}{}", stdout(&o), stderr(&o));
    assert!(stdout(&o).contains("6 passed, 0 failed, 0 errors"));
    // Three translators per question/answer case.
    assert_eq!(llm.received().len(), 9);
}

#[test]
fn diff_shows_changed_rules_and_tests_whose_finding_changed() {
    let dir = scratch("diff");
    let park = example("policies/park-admission.json");
    let broken = broken_park(
        &dir,
        "DISCOUNTRATE",
        "(= discountRate (ite discountApplies (ite usesCredits 0.25 0.30) 0.0))",
    );
    let o = proofgate(&["policy", "diff", &park, &broken]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let out = stdout(&o);
    assert!(out.contains("~ DISCOUNTRATE (expression)"), "{out}");
    assert!(
        out.contains("new: (= discountRate (ite discountApplies (ite usesCredits 0.25 0.30) 0.0))"),
        "{out}"
    );
    assert!(
        out.lines()
            .any(|l| l.contains("DISCOUNTRATE/decisive-valid")
                && l.contains("(from old): VALID -> INVALID")),
        "{out}"
    );

    let o = proofgate(&["policy", "diff", &park, &broken, "--json"]);
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["definition"]["rules"][0]["name"], "DISCOUNTRATE");
    assert!(!v["changedCases"].as_array().unwrap().is_empty());

    let o = proofgate(&["policy", "diff", &park, &park]);
    assert!(o.status.success());
    assert!(stdout(&o).contains("no differences"));
}

#[test]
fn bad_inputs_exit_2_with_what_to_do() {
    let dir = scratch("bad");
    let bad = dir.join("bad.tests.json");
    std::fs::write(
        &bad,
        r#"{"tests": [{"id": "x", "claims": ["isEntryAllowed"], "expected": "TRUE"}]}"#,
    )
    .unwrap();
    let park = example("policies/park-admission.json");
    let o = proofgate(&["policy", "test", &park, &path(&bad)]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("bad.tests.json: not a policy test file"),
        "{}",
        stderr(&o)
    );
    assert!(
        stderr(&o).contains("unknown variant `TRUE`"),
        "{}",
        stderr(&o)
    );

    let o = proofgate(&["policy", "formalize", &example("docs/park-admission.md")]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("formalize needs an LLM: pass --config"),
        "{}",
        stderr(&o)
    );

    // A statement outside the policy's vocabulary is an error for that case only.
    std::fs::write(
        &bad,
        r#"{"tests": [{"id": "typo", "claims": ["isEntryAlowed"], "expected": "VALID"}]}"#,
    )
    .unwrap();
    let o = proofgate(&["policy", "test", &park, &path(&bad)]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stdout(&o).contains("unknown variable `isEntryAlowed`"),
        "{}",
        stdout(&o)
    );
}

/// A formalized policy lint finds errors in (here two rules no situation satisfies together)
/// is written, to fix by hand, but the command exits 1: it exited 0, and a script's `&&` went
/// on to serve it.
#[test]
fn formalize_exits_1_when_lint_finds_errors_in_what_it_wrote() {
    let reply = serde_json::json!({
        "types": [],
        "variables": [{"name": "amount", "type": "INT", "description": "The amount"}],
        "rules": [{"id": "POSITIVE", "expression": "(> amount 0)"},
                  {"id": "NEGATIVE", "expression": "(< amount 0)"}]});
    let llm = Server::python(
        "scripted_llm.py",
        &serde_json::json!({"rules": [{"match": "", "reply": reply.to_string()}]}),
    );
    let dir = scratch("formalize-lint-errors");
    let doc = dir.join("amounts.md");
    std::fs::write(
        &doc,
        "# Amounts\n\nThe amount is positive. The amount is negative.\n",
    )
    .unwrap();
    let policy = dir.join("amounts.json");
    let o = proofgate(&[
        "policy",
        "formalize",
        &path(&doc),
        "--out",
        &path(&policy),
        "--llm-url",
        &format!("{}/v1", llm.url()),
        "--llm-model",
        "recorded",
    ]);
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(err.contains("contradict each other"), "{err}");
    assert!(err.contains("lint found errors"), "{err}");
    assert!(policy.exists(), "the policy is written all the same");
}
